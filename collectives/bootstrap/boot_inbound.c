/*
 * boot_inbound.c - bootstrap connections, inbound side: accepting and
 * authenticating peers (a connector proves the job key before anything is
 * queued from it), reading each peer's message stream into its queue,
 * taking ABORTs, and the progress loop that polls all of it. Sending and
 * the failure state are boot_net.c's. See boot.h.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collectives/bootstrap/boot_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/reject_log.h"
#include "gx/gx.h"

#define BOOT_PENDING_TIMEOUT_NS (10ull * 1000000000ull)

static void read_stream(struct gx_boot *b, int peer);

/* ---- accepting -------------------------------------------------------- */

static void accept_new(struct gx_boot *b)
{
    for (;;) {
        int fd;
        struct gx_sockaddr addr;
        if (gx_sock_accept(b->listen_fd, &fd, &addr) != GX_OK)
            return;
        struct boot_pending *p = calloc(1, sizeof(*p));
        if (!p || gx_auth_server_start(&p->auth, fd, &b->key) != GX_OK) {
            free(p);
            close(fd);
            continue;
        }
        p->addr = addr;
        p->started_ns = gx_now_ns();
        p->next = b->pending;
        b->pending = p;
    }
}

/* Tell an authenticated connector why we drop it, so it fails at once with
 * the reason instead of waiting for a table that never comes. */
static void refuse(struct gx_boot *b, int fd, int rank)
{
    struct {
        struct boot_msg_header h;
        char text[BOOT_REFUSE_MAX_LEN];
    } f;
    memset(&f, 0, sizeof(f));
    char who[128];
    int n = snprintf(f.text, sizeof(f.text), "rank %d refused this process as rank %d: rank %d "
                     "is already taken by %s (two processes started with the same rank?)",
                     b->rank, rank, rank, gx_boot_describe(b, rank, who, sizeof(who)));
    size_t len = n > 0 && (size_t)n < sizeof(f.text) ? (size_t)n + 1 : sizeof(f.text);
    f.h = (struct boot_msg_header){ .magic = BOOT_MSG_MAGIC, .type = BOOT_MSG_REFUSE,
                                    .len = (uint32_t)len };
    /* Small, into an idle socket: never blocks; best effort. */
    (void)send(fd, &f, sizeof(f.h) + len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* A connection we opened became readable: the acceptor refused us (a
 * BOOT_MSG_REFUSE) or closed it. Lock held. */
void boot_read_refusal(struct gx_boot *b, int peer)
{
    struct {
        struct boot_msg_header h;
        char text[BOOT_REFUSE_MAX_LEN];
    } f;
    ssize_t n = recv(b->out_fd[peer], &f, sizeof(f), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    b->out_eof[peer] = true; /* whatever came, the acceptor is done with us */
    if (n < (ssize_t)sizeof(f.h) || f.h.magic != BOOT_MSG_MAGIC ||
        f.h.type != BOOT_MSG_REFUSE || f.h.len == 0 || f.h.len > sizeof(f.text) ||
        (size_t)n < sizeof(f.h) + f.h.len)
        return; /* closed: the next send to it says so */
    f.text[f.h.len - 1] = '\0';
    gx_fail(GX_EINVAL, GX_SUB_BOOT, "rank %d: %s", b->rank, f.text);
    boot_set_failure(b, GX_EINVAL, b->rank, f.text);
    b->abort_to_forward = false; /* our own mistake: nothing to tell the job */
}

/* Drive one half-open connection; returns true when it is finished (either
 * adopted as a peer's stream or dropped). */
static bool service_pending(struct gx_boot *b, struct boot_pending *p)
{
    char addr[64];
    int rc = gx_auth_server_progress(&p->auth);
    const struct gx_sockaddr *from = &p->addr;
    if (rc == GX_INPROGRESS) {
        if (gx_now_ns() - p->started_ns < BOOT_PENDING_TIMEOUT_NS)
            return false;
        gx_reject_note(GX_SUB_BOOT, "bootstrap", from, GX_REJECT_SILENT,
                       "dropped bootstrap connection from %s: no handshake within 10 s",
                       gx_sock_addr_str(from, addr, sizeof(addr)));
    } else if (rc == GX_EAUTH) {
        gx_reject_note(GX_SUB_BOOT, "bootstrap", from, GX_REJECT_KEY,
                       "rejected bootstrap connection from %s: wrong job key (another job, or "
                       "GX_JOB_KEY differs)", gx_sock_addr_str(from, addr, sizeof(addr)));
    } else if (rc == GX_EPROTO) {
        gx_reject_note(GX_SUB_BOOT, "bootstrap", from, GX_REJECT_PROTO,
                       "rejected bootstrap connection from %s: not a gx %d handshake",
                       gx_sock_addr_str(from, addr, sizeof(addr)), GX_AUTH_VERSION);
    } else if (rc != GX_OK) {
        gx_reject_note(GX_SUB_BOOT, "bootstrap", from, GX_REJECT_PROBE,
                       "bootstrap connection from %s closed before finishing the handshake",
                       gx_sock_addr_str(from, addr, sizeof(addr)));
    } else {
        int r = p->auth.hello.rank;
        uint16_t purpose = p->auth.hello.purpose;
        if ((purpose != GX_AUTH_BOOT_PEER && purpose != GX_AUTH_BOOT_RENDEZVOUS) || r < 0 ||
            r >= b->size || r == b->rank) {
            gx_reject_note(GX_SUB_BOOT, "bootstrap", from, GX_REJECT_CLAIM,
                           "rejected bootstrap connection from %s: claims rank %d of a job "
                           "of %d", gx_sock_addr_str(from, addr, sizeof(addr)), r, b->size);
        } else if ((b->in[r].fd >= 0 && (read_stream(b, r), b->in[r].fd >= 0)) ||
                   b->in[r].closed) {
            /* (a rank that said goodbye on its old stream may come back: its
             * BYE is read first) */
            GX_WARN(GX_SUB_BOOT,
                    "rejected bootstrap connection from %s: rank %d is already connected "
                    "(two processes started with the same rank?)",
                    gx_sock_addr_str(from, addr, sizeof(addr)), r);
            refuse(b, p->auth.fd, r);
        } else {
            b->in[r].fd = p->auth.fd;
            return true;
        }
    }
    close(p->auth.fd);
    return true;
}

/* ---- reading ---------------------------------------------------------- */

static void in_close(struct boot_in *in, bool garbled)
{
    if (in->fd >= 0)
        close(in->fd);
    in->fd = -1;
    in->closed = true;
    in->garbled = garbled;
}

static void handle_abort(struct gx_boot *b, int peer, const struct boot_msg *m)
{
    struct boot_abort_payload p;
    if (m->len != sizeof(p))
        return;
    memcpy(&p, m->data, sizeof(p));
    p.message[sizeof(p.message) - 1] = '\0';
    if (p.epoch < b->epoch)
        return; /* news from before the last shrink */
    /* The root cause wins over a secondary teardown: if we blamed the rank
     * that detected this failure (its connection closed as it gave up) and
     * it names another rank as the cause, take its word, also when a third
     * rank forwards the news (origin_rank stays the rank that detected it). */
    bool root_cause = b->fail_status != GX_OK && b->failed_rank == p.origin_rank &&
                      p.failed_rank != p.origin_rank && p.failed_rank >= 0 &&
                      p.failed_rank < b->size && p.failed_rank != b->rank;
    /* Its own story wins too: we blamed a rank that hung up, and it tells
     * why it gave up ("rank 3 failed to initialise: ... rank 0 ..."). */
    bool own_story = b->fail_status != GX_OK && b->failed_rank == p.origin_rank &&
                     p.failed_rank == p.origin_rank && b->fail_origin != p.origin_rank &&
                     GX_IS_PEER_ERROR(p.status);
    if (root_cause || own_story)
        b->fail_status = GX_OK;
    if (b->fail_status != GX_OK)
        return; /* already failed */
    int status = (p.status < 0 && p.status > -700) ? p.status : GX_EPEER;
    char msg[512], said[40];
    snprintf(said, sizeof(said), " (reported by rank %d)", (int)p.origin_rank);
    snprintf(msg, sizeof(msg), "%s%s", p.message, strstr(p.message, said) ? "" : said);
    gx_fail(status, GX_SUB_BOOT, "rank %d: peer failure: %s", b->rank, msg);
    boot_set_failure(b, status, p.failed_rank, msg);
    b->tell_host = false; /* forwarded news: the flood carries it */
    if (b->fail_status == status && p.origin_rank >= 0 && p.origin_rank < b->size)
        b->fail_origin = p.origin_rank;
}

static void read_stream(struct gx_boot *b, int peer)
{
    struct boot_in *in = &b->in[peer];
    for (;;) {
        if (in->hdr_got < sizeof(in->hdr)) {
            ssize_t n = recv(in->fd, (char *)&in->hdr + in->hdr_got,
                             sizeof(in->hdr) - in->hdr_got, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                in_close(in, false);
                return;
            }
            if (n < 0)
                return;
            in->hdr_got += (size_t)n;
            if (in->hdr_got < sizeof(in->hdr))
                continue;
            if (in->hdr.magic != BOOT_MSG_MAGIC || in->hdr.len > BOOT_MSG_MAX_LEN ||
                (in->hdr.type != BOOT_MSG_DATA && in->hdr.type != BOOT_MSG_ABORT &&
                 in->hdr.type != BOOT_MSG_BYE)) {
                GX_WARN(GX_SUB_BOOT, "rank %d sent a malformed bootstrap message; dropping it",
                        peer);
                in_close(in, true);
                return;
            }
            if (in->hdr.type == BOOT_MSG_BYE) {
                /* Ended on purpose: what it sent stays queued, and the rank
                 * may connect again (service_pending accepts it). */
                close(in->fd);
                in->fd = -1;
                in->hdr_got = 0;
                return;
            }
            in->cur = malloc(sizeof(*in->cur) + in->hdr.len);
            if (!in->cur) {
                in_close(in, true);
                return;
            }
            in->cur->next = NULL;
            in->cur->comm_id = in->hdr.comm_id;
            in->cur->tag = in->hdr.tag;
            in->cur->len = in->hdr.len;
            in->data_got = 0;
        }
        if (in->data_got < in->cur->len) {
            ssize_t n = recv(in->fd, in->cur->data + in->data_got, in->cur->len - in->data_got,
                             MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                in_close(in, false);
                return;
            }
            if (n < 0)
                return;
            in->data_got += (size_t)n;
            if (in->data_got < in->cur->len)
                continue;
        }
        struct boot_msg *m = in->cur;
        in->cur = NULL;
        in->hdr_got = 0;
        if (in->hdr.type == BOOT_MSG_ABORT) {
            handle_abort(b, peer, m);
            free(m);
            continue;
        }
        if (in->tail)
            in->tail->next = m;
        else
            in->head = m;
        in->tail = m;
    }
}

int boot_progress_locked(struct gx_boot *b, int wait_ms, int extra_fd, short extra_events)
{
    size_t cap = 2 + 2 * (size_t)b->size;
    for (struct boot_pending *p = b->pending; p; p = p->next)
        cap++;
    struct pollfd *fds = calloc(cap, sizeof(*fds));
    /* >=0 peer stream, -1 listener, -2 extra, -3 pending, <= -4: our stream to rank -who-4 */
    int *who = calloc(cap, sizeof(int));
    if (!fds || !who) {
        free(fds);
        free(who);
        return GX_ENOMEM;
    }
    size_t n = 0;
    if (extra_fd >= 0) {
        fds[n] = (struct pollfd){ .fd = extra_fd, .events = extra_events };
        who[n++] = -2;
    }
    if (b->listen_fd >= 0) {
        fds[n] = (struct pollfd){ .fd = b->listen_fd, .events = POLLIN };
        who[n++] = -1;
    }
    for (struct boot_pending *p = b->pending; p; p = p->next) {
        fds[n] = (struct pollfd){ .fd = p->auth.fd, .events = POLLIN };
        who[n++] = -3;
    }
    for (int r = 0; r < b->size; r++) {
        if (b->in[r].fd >= 0) {
            fds[n] = (struct pollfd){ .fd = b->in[r].fd, .events = POLLIN };
            who[n++] = r;
        }
        if (b->out_fd[r] >= 0 && !b->out_eof[r]) {
            fds[n] = (struct pollfd){ .fd = b->out_fd[r], .events = POLLIN };
            who[n++] = -4 - r;
        }
    }
    if (b->pending && wait_ms > 1000)
        wait_ms = 1000; /* re-check handshake deadlines */
    int ready = poll(fds, n, wait_ms);
    int extra_ready = 0;
    if (ready > 0) {
        for (size_t i = 0; i < n; i++) {
            if (!fds[i].revents)
                continue;
            if (who[i] == -2)
                extra_ready = 1;
            else if (who[i] == -1)
                accept_new(b);
            else if (who[i] >= 0)
                read_stream(b, who[i]);
            else if (who[i] <= -4)
                boot_read_refusal(b, -4 - who[i]);
        }
    }
    /* Pending handshakes: drive all (cheap) so deadlines are enforced. */
    for (struct boot_pending **pp = &b->pending; *pp;) {
        struct boot_pending *p = *pp;
        if (service_pending(b, p)) {
            *pp = p->next;
            free(p);
        } else {
            pp = &p->next;
        }
    }
    free(fds);
    free(who);
    return extra_ready;
}
