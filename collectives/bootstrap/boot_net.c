/*
 * boot_net.c - bootstrap connections: accepting and authenticating peers,
 * reading message streams into per-peer queues, sending with lazy connects,
 * and spreading failures (ABORT flood). See boot.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collectives/bootstrap/boot_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "gx/gx.h"

#define BOOT_PENDING_TIMEOUT_NS (10ull * 1000000000ull)
#define BOOT_ABORT_SEND_MS 300

const char *boot_op_name(uint64_t tag)
{
    switch (BOOT_TAG_KIND(tag)) {
    case BOOT_OP_REGISTER: return "rendezvous registration";
    case BOOT_OP_TABLE: return "rendezvous table";
    case BOOT_OP_BARRIER: return "barrier";
    case BOOT_OP_ALLGATHER: return "all-gather";
    case BOOT_OP_BCAST: return "broadcast";
    case BOOT_OP_SPLIT: return "comm split";
    case BOOT_OP_FINALIZE: return "finalize";
    case BOOT_OP_USER: return "address exchange";
    }
    return "bootstrap operation";
}

int boot_alloc(int rank, int size, const char *job_key, struct gx_boot **out)
{
    struct gx_boot *b = calloc(1, sizeof(*b));
    if (!b)
        return GX_ENOMEM;
    b->records = calloc((size_t)size, sizeof(*b->records));
    b->out_fd = malloc((size_t)size * sizeof(int));
    b->in = calloc((size_t)size, sizeof(*b->in));
    if (!b->records || !b->out_fd || !b->in) {
        boot_free(b);
        return GX_ENOMEM;
    }
    for (int i = 0; i < size; i++) {
        b->out_fd[i] = -1;
        b->in[i].fd = -1;
    }
    pthread_mutex_init(&b->lock, NULL);
    atomic_init(&b->refcount, 1);
    b->rank = rank;
    b->size = size;
    b->listen_fd = -1;
    b->failed_rank = -1;
    gx_auth_key_derive(job_key, &b->key);
    *out = b;
    return GX_OK;
}

static void close_all(struct gx_boot *b)
{
    if (b->listen_fd >= 0)
        close(b->listen_fd);
    b->listen_fd = -1;
    for (struct boot_pending *p = b->pending, *next; p; p = next) {
        next = p->next;
        close(p->auth.fd);
        free(p);
    }
    b->pending = NULL;
    for (int i = 0; b->out_fd && i < b->size; i++) {
        if (b->out_fd[i] >= 0)
            close(b->out_fd[i]);
        b->out_fd[i] = -1;
        if (b->in[i].fd >= 0)
            close(b->in[i].fd);
        b->in[i].fd = -1;
        b->in[i].closed = true;
    }
}

void boot_free(struct gx_boot *b)
{
    if (!b)
        return;
    if (b->in)
        close_all(b);
    for (int i = 0; b->in && i < b->size; i++) {
        for (struct boot_msg *m = b->in[i].head, *next; m; m = next) {
            next = m->next;
            free(m);
        }
        free(b->in[i].cur);
    }
    free(b->records);
    free(b->out_fd);
    free(b->in);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

void gx_boot_retain(struct gx_boot *boot)
{
    atomic_fetch_add(&boot->refcount, 1);
}

void gx_boot_release(struct gx_boot *boot)
{
    if (boot && atomic_fetch_sub(&boot->refcount, 1) == 1)
        boot_free(boot);
}

int gx_boot_rank(const struct gx_boot *boot)
{
    return boot->rank;
}

int gx_boot_size(const struct gx_boot *boot)
{
    return boot->size;
}

const struct boot_rank_record *gx_boot_record(const struct gx_boot *boot, int rank)
{
    return (rank >= 0 && rank < boot->size) ? &boot->records[rank] : NULL;
}

const char *gx_boot_describe(const struct gx_boot *boot, int rank, char *buf, size_t len)
{
    const struct boot_rank_record *r = gx_boot_record(boot, rank);
    if (r && r->host[0])
        snprintf(buf, len, "rank %d (%s pid %d)", rank, r->host, (int)r->pid);
    else
        snprintf(buf, len, "rank %d", rank);
    return buf;
}

/* ---- failure state -------------------------------------------------- */

static void set_failure(struct gx_boot *b, int status, int failed_rank, const char *msg)
{
    if (b->fail_status != GX_OK)
        return;
    b->fail_status = status;
    b->failed_rank = failed_rank;
    snprintf(b->fail_msg, sizeof(b->fail_msg), "%s", msg);
    b->abort_to_forward = true;
}

static int send_msg(struct gx_boot *b, int peer, uint16_t type, uint64_t comm_id, uint64_t tag,
                    const void *buf, size_t len, uint64_t deadline, bool quiet);

/* Tell peers rank+1, rank+2, rank+4, ... Each forwards once, so the news
 * reaches every rank in O(log n) hops. Best effort with short deadlines. */
static void forward_abort(struct gx_boot *b)
{
    if (!b->abort_to_forward || b->sending_abort || b->shut)
        return;
    b->abort_to_forward = false;
    b->sending_abort = true;
    struct boot_abort_payload p = {
        .origin_rank = b->rank,
        .failed_rank = b->failed_rank,
        .status = b->fail_status,
    };
    snprintf(p.message, sizeof(p.message), "%s", b->fail_msg);
    for (int step = 1; step < b->size; step <<= 1) {
        int peer = (b->rank + step) % b->size;
        if (peer == b->failed_rank || peer == b->rank || b->records[peer].addr_len == 0)
            continue;
        (void)send_msg(b, peer, BOOT_MSG_ABORT, 0, 0, &p, sizeof(p),
                       gx_deadline_after_ms(BOOT_ABORT_SEND_MS), true);
    }
    b->sending_abort = false;
}

int gx_boot_failure(struct gx_boot *boot, char *msg, size_t len)
{
    pthread_mutex_lock(&boot->lock);
    int status = boot->fail_status;
    if (msg && len)
        snprintf(msg, len, "%s", boot->fail_msg);
    pthread_mutex_unlock(&boot->lock);
    return status;
}

void gx_boot_fail(struct gx_boot *boot, int status, int failed_rank, const char *msg)
{
    pthread_mutex_lock(&boot->lock);
    set_failure(boot, status, failed_rank, msg);
    forward_abort(boot);
    pthread_mutex_unlock(&boot->lock);
}

void gx_boot_shutdown(struct gx_boot *boot)
{
    pthread_mutex_lock(&boot->lock);
    boot->shut = true;
    close_all(boot);
    pthread_mutex_unlock(&boot->lock);
}

/* Fail the boot because `peer` is gone, with an error naming it. */
static int peer_failed(struct gx_boot *b, int status, int peer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int peer_failed(struct gx_boot *b, int status, int peer, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    char who[128];
    char msg[512];
    snprintf(msg, sizeof(msg), "%s %s", gx_boot_describe(b, peer, who, sizeof(who)), what);
    gx_fail(status, GX_SUB_BOOT, "rank %d: %s", b->rank, msg);
    set_failure(b, status, peer, msg);
    return status;
}

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

/* Drive one half-open connection; returns true when it is finished (either
 * adopted as a peer's stream or dropped). */
static bool service_pending(struct gx_boot *b, struct boot_pending *p)
{
    char addr[64];
    int rc = gx_auth_server_progress(&p->auth);
    if (rc == GX_INPROGRESS) {
        if (gx_now_ns() - p->started_ns < BOOT_PENDING_TIMEOUT_NS)
            return false;
        GX_WARN(GX_SUB_BOOT, "dropped bootstrap connection from %s: no handshake within 10 s",
                gx_sock_addr_str(&p->addr, addr, sizeof(addr)));
    } else if (rc == GX_EAUTH) {
        GX_WARN(GX_SUB_BOOT,
                "rejected bootstrap connection from %s: wrong job key (another job, or "
                "GX_JOB_KEY differs)",
                gx_sock_addr_str(&p->addr, addr, sizeof(addr)));
    } else if (rc == GX_EPROTO) {
        GX_WARN(GX_SUB_BOOT, "rejected bootstrap connection from %s: not a gx %d handshake",
                gx_sock_addr_str(&p->addr, addr, sizeof(addr)), GX_AUTH_VERSION);
    } else if (rc != GX_OK) {
        GX_INFO(GX_SUB_BOOT, "bootstrap connection from %s closed during handshake",
                gx_sock_addr_str(&p->addr, addr, sizeof(addr)));
    } else {
        int r = p->auth.hello.rank;
        uint16_t purpose = p->auth.hello.purpose;
        if ((purpose != GX_AUTH_BOOT_PEER && purpose != GX_AUTH_BOOT_RENDEZVOUS) || r < 0 ||
            r >= b->size || r == b->rank) {
            GX_WARN(GX_SUB_BOOT,
                    "rejected bootstrap connection from %s: claims rank %d of a job of %d",
                    gx_sock_addr_str(&p->addr, addr, sizeof(addr)), r, b->size);
        } else if (b->in[r].fd >= 0 || b->in[r].closed) {
            GX_WARN(GX_SUB_BOOT,
                    "rejected bootstrap connection from %s: rank %d is already connected "
                    "(two processes started with the same rank?)",
                    gx_sock_addr_str(&p->addr, addr, sizeof(addr)), r);
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
    if (b->fail_status != GX_OK)
        return;
    int status = (p.status < 0 && p.status > -700) ? p.status : GX_EPEER;
    char msg[512];
    snprintf(msg, sizeof(msg), "%s (reported by rank %d)", p.message, (int)p.origin_rank);
    gx_fail(status, GX_SUB_BOOT, "rank %d: peer failure: %s", b->rank, msg);
    set_failure(b, status, p.failed_rank, msg);
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
                (in->hdr.type != BOOT_MSG_DATA && in->hdr.type != BOOT_MSG_ABORT)) {
                GX_WARN(GX_SUB_BOOT, "rank %d sent a malformed bootstrap message; dropping it",
                        peer);
                in_close(in, true);
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
    size_t cap = 2 + (size_t)b->size;
    for (struct boot_pending *p = b->pending; p; p = p->next)
        cap++;
    struct pollfd *fds = calloc(cap, sizeof(*fds));
    int *who = calloc(cap, sizeof(int)); /* >=0 peer stream, -1 listener, -2 extra, -3 pending */
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

/* ---- sending ---------------------------------------------------------- */

/* Wait until `fd` is ready for `events`, servicing our own listener and
 * streams meanwhile so two ranks connecting to each other never deadlock. */
static int wait_servicing(struct gx_boot *b, int fd, short events, uint64_t deadline)
{
    for (;;) {
        int left = gx_ms_left(deadline);
        int rc = boot_progress_locked(b, left < 100 ? left : 100, fd, events);
        if (rc < 0)
            return rc;
        if (rc == 1)
            return GX_OK;
        if (gx_ms_left(deadline) == 0)
            return GX_ETIMEOUT;
    }
}

static int send_bytes(struct gx_boot *b, int fd, const void *buf, size_t len, uint64_t deadline)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            int rc = wait_servicing(b, fd, POLLOUT, deadline);
            if (rc != GX_OK)
                return rc;
            continue;
        }
        return GX_EPEER;
    }
    return GX_OK;
}

static int recv_bytes(struct gx_boot *b, int fd, void *buf, size_t len, uint64_t deadline)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return GX_EPEER;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            int rc = wait_servicing(b, fd, POLLIN, deadline);
            if (rc != GX_OK)
                return rc;
            continue;
        }
        return GX_EPEER;
    }
    return GX_OK;
}

static int connect_peer(struct gx_boot *b, int peer, uint64_t deadline, bool quiet)
{
    const struct boot_rank_record *rec = &b->records[peer];
    struct gx_sockaddr addr = { .len = rec->addr_len };
    memcpy(&addr.u.storage, rec->addr, rec->addr_len);
    char astr[64];
    gx_sock_addr_str(&addr, astr, sizeof(astr));
    int fd = -1;
    int rc = gx_sock_connect(&addr, deadline, &fd);
    if (rc != GX_OK) {
        if (quiet)
            return rc;
        if (rc == GX_ETIMEOUT)
            return peer_failed(b, GX_ETIMEOUT, peer, "did not accept a connection at %s "
                               "before the deadline", astr);
        return peer_failed(b, GX_ECONNECT, peer, "is unreachable at %s: %s", astr,
                           strerror(errno));
    }
    struct gx_auth_challenge ch;
    struct gx_auth_hello hello;
    struct gx_auth_accept acc;
    uint16_t purpose = GX_AUTH_BOOT_PEER;
    rc = recv_bytes(b, fd, &ch, sizeof(ch), deadline);
    if (rc == GX_OK)
        rc = gx_auth_client_respond(&b->key, &ch, purpose, b->rank, 0, &hello);
    if (rc == GX_OK)
        rc = send_bytes(b, fd, &hello, sizeof(hello), deadline);
    if (rc == GX_OK && !gx_auth_same_job(&b->key, &ch))
        rc = GX_EAUTH;
    if (rc == GX_OK) {
        rc = recv_bytes(b, fd, &acc, sizeof(acc), deadline);
        if (rc == GX_EPEER)
            rc = GX_EAUTH; /* the acceptor drops a hello it refuses */
    }
    if (rc == GX_OK)
        rc = gx_auth_client_check(&b->key, &hello, &acc);
    if (rc != GX_OK) {
        close(fd);
        if (quiet)
            return rc;
        if (rc == GX_EAUTH)
            return peer_failed(b, GX_EAUTH, peer, "at %s refused our job key, or belongs to "
                               "another job (check GX_JOB_KEY and the master address)", astr);
        if (rc == GX_EPROTO)
            return peer_failed(b, GX_EPROTO, peer, "at %s is not a gx bootstrap listener", astr);
        if (rc == GX_ETIMEOUT)
            return peer_failed(b, GX_ETIMEOUT, peer, "at %s did not complete the handshake "
                               "before the deadline", astr);
        return peer_failed(b, GX_EPEER, peer, "at %s closed the connection during the "
                           "handshake", astr);
    }
    b->out_fd[peer] = fd;
    return GX_OK;
}

static int send_msg(struct gx_boot *b, int peer, uint16_t type, uint64_t comm_id, uint64_t tag,
                    const void *buf, size_t len, uint64_t deadline, bool quiet)
{
    if (b->shut)
        return GX_EABORTED;
    if (b->out_fd[peer] < 0) {
        int rc = connect_peer(b, peer, deadline, quiet);
        if (rc != GX_OK)
            return rc;
    }
    struct boot_msg_header h = { .magic = BOOT_MSG_MAGIC, .type = type, .comm_id = comm_id,
                                 .tag = tag, .len = (uint32_t)len };
    int rc = send_bytes(b, b->out_fd[peer], &h, sizeof(h), deadline);
    if (rc == GX_OK && len)
        rc = send_bytes(b, b->out_fd[peer], buf, len, deadline);
    if (rc != GX_OK && !quiet) {
        if (rc == GX_ETIMEOUT)
            return peer_failed(b, GX_ETIMEOUT, peer, "did not read our %s message before the "
                               "deadline", boot_op_name(tag));
        return peer_failed(b, GX_EPEER, peer, "closed its connection while we sent %s "
                           "(did the process exit or crash?)", boot_op_name(tag));
    }
    return rc;
}

int boot_send_locked(struct gx_boot *b, int peer, uint64_t comm_id, uint64_t tag,
                     const void *buf, size_t len, uint64_t deadline)
{
    if (b->fail_status != GX_OK)
        return gx_fail(b->fail_status, GX_SUB_BOOT, "%s", b->fail_msg);
    if (peer < 0 || peer >= b->size || peer == b->rank || len > BOOT_MSG_MAX_LEN)
        return gx_fail(GX_EINVAL, GX_SUB_BOOT, "bootstrap send: bad peer %d or length %zu",
                       peer, len);
    return send_msg(b, peer, BOOT_MSG_DATA, comm_id, tag, buf, len, deadline, false);
}

int gx_boot_send(struct gx_boot *boot, int peer, uint64_t comm_id, uint64_t tag,
                 const void *buf, size_t len, uint64_t deadline)
{
    pthread_mutex_lock(&boot->lock);
    int rc = boot_send_locked(boot, peer, comm_id, tag, buf, len, deadline);
    forward_abort(boot);
    pthread_mutex_unlock(&boot->lock);
    return rc;
}

/* ---- receiving -------------------------------------------------------- */

static int try_recv_locked(struct gx_boot *b, int peer, uint64_t comm_id, uint64_t tag,
                           void *buf, size_t len)
{
    struct boot_in *in = &b->in[peer];
    for (struct boot_msg **pm = &in->head, *prev = NULL; *pm; prev = *pm, pm = &(*pm)->next) {
        struct boot_msg *m = *pm;
        if (m->comm_id != comm_id)
            continue;
        if (m->tag != tag) {
            if (BOOT_TAG_SEQ(m->tag) == BOOT_TAG_SEQ(tag) &&
                BOOT_TAG_KIND(m->tag) != BOOT_TAG_KIND(tag)) {
                char who[128];
                return gx_fail(GX_EMISMATCH, GX_SUB_BOOT,
                               "rank %d called %s while %s called %s (operation #%llu on the "
                               "same communicator)", b->rank, boot_op_name(tag),
                               gx_boot_describe(b, peer, who, sizeof(who)),
                               boot_op_name(m->tag), (unsigned long long)BOOT_TAG_SEQ(tag));
            }
            continue;
        }
        if (m->len != len) {
            char who[128];
            return gx_fail(GX_EMISMATCH, GX_SUB_BOOT,
                           "%s sent %u bytes for %s, rank %d expected %zu",
                           gx_boot_describe(b, peer, who, sizeof(who)), m->len,
                           boot_op_name(tag), b->rank, len);
        }
        *pm = m->next;
        if (in->tail == m)
            in->tail = prev;
        if (len)
            memcpy(buf, m->data, len);
        free(m);
        return GX_OK;
    }
    if (b->fail_status != GX_OK)
        return gx_fail(b->fail_status, GX_SUB_BOOT, "%s", b->fail_msg);
    if (in->closed) {
        if (in->garbled)
            return peer_failed(b, GX_EPROTO, peer, "sent a malformed bootstrap message");
        return peer_failed(b, GX_EPEER, peer, "closed its connection before sending its %s "
                           "message (did the process exit or crash?)", boot_op_name(tag));
    }
    return GX_INPROGRESS;
}

int boot_recv_locked(struct gx_boot *b, int peer, uint64_t comm_id, uint64_t tag, void *buf,
                     size_t len, uint64_t deadline)
{
    if (peer < 0 || peer >= b->size || peer == b->rank)
        return gx_fail(GX_EINVAL, GX_SUB_BOOT, "bootstrap receive: bad peer %d", peer);
    for (;;) {
        int rc = try_recv_locked(b, peer, comm_id, tag, buf, len);
        if (rc != GX_INPROGRESS)
            return rc;
        int left = gx_ms_left(deadline);
        if (left == 0) {
            char who[128];
            return gx_fail(GX_ETIMEOUT, GX_SUB_BOOT,
                           "rank %d timed out in %s waiting for %s, which has not arrived "
                           "(is it alive? stuck in another call?)", b->rank, boot_op_name(tag),
                           gx_boot_describe(b, peer, who, sizeof(who)));
        }
        rc = boot_progress_locked(b, left < 200 ? left : 200, -1, 0);
        if (rc < 0)
            return rc;
    }
}

int gx_boot_recv(struct gx_boot *boot, int peer, uint64_t comm_id, uint64_t tag, void *buf,
                 size_t len, uint64_t deadline)
{
    pthread_mutex_lock(&boot->lock);
    int rc = boot_recv_locked(boot, peer, comm_id, tag, buf, len, deadline);
    forward_abort(boot);
    pthread_mutex_unlock(&boot->lock);
    return rc;
}

int gx_boot_try_recv(struct gx_boot *boot, int peer, uint64_t comm_id, uint64_t tag,
                     void *buf, size_t len)
{
    pthread_mutex_lock(&boot->lock);
    int rc = boot_progress_locked(boot, 0, -1, 0);
    if (rc >= 0)
        rc = try_recv_locked(boot, peer, comm_id, tag, buf, len);
    forward_abort(boot);
    pthread_mutex_unlock(&boot->lock);
    return rc;
}

int gx_boot_progress(struct gx_boot *boot, int wait_ms)
{
    pthread_mutex_lock(&boot->lock);
    int rc = boot_progress_locked(boot, wait_ms, -1, 0);
    forward_abort(boot);
    pthread_mutex_unlock(&boot->lock);
    return rc < 0 ? rc : GX_OK;
}
