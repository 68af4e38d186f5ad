/*
 * boot_net.c - bootstrap connections, outbound side and shared state: the
 * bootstrap's lifecycle, its failure state and how failures spread (ABORT
 * flood), sending with lazy, authenticated connects, and receiving from the
 * per-peer queues. Accepting peers and reading their streams into those
 * queues is boot_inbound.c. See boot.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "collectives/bootstrap/boot_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/proc.h"
#include "gx/gx.h"

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
    case BOOT_OP_SHRINK: return "comm shrink";
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
    b->out_eof = calloc((size_t)size, sizeof(bool));
    b->in = calloc((size_t)size, sizeof(*b->in));
    b->dead = calloc((size_t)size, sizeof(*b->dead));
    if (!b->records || !b->out_fd || !b->out_eof || !b->in || !b->dead) {
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
    b->rdv_fd = -1;
    b->failed_rank = -1;
    gx_auth_key_derive(job_key, &b->key);
    /* Rank 0 picks the job's public id at random; the others learn it from
     * rank 0's challenge once rank 0 has proved it knows the key. */
    if (rank == 0 && gx_random_bytes(b->key.job_id, sizeof(b->key.job_id)) != GX_OK) {
        boot_free(b);
        return GX_ESYSTEM;
    }
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
    boot_rendezvous_cleanup(b);
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
    free(b->out_eof);
    free(b->in);
    free(b->dead);
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

void gx_boot_job_id(struct gx_boot *boot, uint8_t out[8])
{
    pthread_mutex_lock(&boot->lock);
    memcpy(out, boot->key.job_id, 8);
    pthread_mutex_unlock(&boot->lock);
}

int gx_boot_rank(const struct gx_boot *boot)
{
    return boot->rank;
}

void gx_boot_stats(struct gx_boot *boot, struct boot_stats *out)
{
    pthread_mutex_lock(&boot->lock);
    (void)boot_progress_locked(boot, 0, -1, 0); /* streams that said goodbye */
    int n = boot->listen_fd >= 0;
    for (struct boot_pending *p = boot->pending; p; p = p->next)
        n++;
    for (int r = 0; r < boot->size; r++)
        n += (boot->out_fd[r] >= 0) + (boot->in[r].fd >= 0);
    *out = (struct boot_stats){ .sockets = n, .msgs_sent = boot->msgs_sent,
                                .bytes_sent = boot->bytes_sent };
    pthread_mutex_unlock(&boot->lock);
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

void boot_set_failure(struct gx_boot *b, int status, int failed_rank, const char *msg)
{
    if (b->fail_status != GX_OK || b->recovering)
        return;
    if (failed_rank >= 0 && failed_rank < b->size && b->dead[failed_rank])
        return; /* old news: the survivors have already left it behind */
    b->fail_status = status;
    b->failed_rank = failed_rank;
    b->fail_origin = b->rank;
    snprintf(b->fail_msg, sizeof(b->fail_msg), "%s", msg);
    b->abort_to_forward = true;
    /* Our own finding about a peer: this host's ranks hear it directly. */
    b->tell_host = failed_rank >= 0 && failed_rank != b->rank;
}

static int send_msg(struct gx_boot *b, int peer, uint16_t type, uint64_t comm_id, uint64_t tag,
                    const void *buf, size_t len, uint64_t deadline, bool quiet);

/* Tell peers rank+1, rank+2, rank+4, ... Each forwards once, so the news
 * reaches every rank in O(log n) hops. Best effort with short deadlines.
 * A death this rank saw itself (b->tell_host) also goes straight to the
 * ranks of this host: they may find the dead process's neighbours gone
 * too (ranks that gave up and exited) and must hear first who died. */
static void forward_abort(struct gx_boot *b)
{
    if (!b->abort_to_forward || b->sending_abort || b->shut)
        return;
    b->abort_to_forward = false;
    b->sending_abort = true;
    struct boot_abort_payload p = {
        .origin_rank = b->fail_origin, /* forwarded news keeps who detected it */
        .failed_rank = b->failed_rank,
        .status = b->fail_status,
        .epoch = b->epoch,
    };
    snprintf(p.message, sizeof(p.message), "%s", b->fail_msg);
    for (int step = 1; step < b->size; step <<= 1) {
        int peer = (b->rank + step) % b->size;
        if (peer == b->failed_rank || peer == b->rank || b->records[peer].addr_len == 0 ||
            b->dead[peer])
            continue;
        (void)send_msg(b, peer, BOOT_MSG_ABORT, 0, 0, &p, sizeof(p),
                       gx_deadline_after_ms(BOOT_ABORT_SEND_MS), true);
    }
    const struct boot_rank_record *me = &b->records[b->rank];
    for (int peer = 0; b->tell_host && peer < b->size; peer++) {
        const struct boot_rank_record *rec = &b->records[peer];
        bool flooded = false;
        for (int step = 1; step < b->size && !flooded; step <<= 1)
            flooded = peer == (b->rank + step) % b->size;
        if (flooded || peer == b->failed_rank || peer == b->rank || rec->addr_len == 0 ||
            b->dead[peer] || strcmp(rec->host, me->host) != 0)
            continue;
        (void)send_msg(b, peer, BOOT_MSG_ABORT, 0, 0, &p, sizeof(p),
                       gx_deadline_after_ms(BOOT_ABORT_SEND_MS), true);
    }
    b->tell_host = false;
    b->sending_abort = false;
}

/* The failed state and its message; boot->lock held, released here. */
static int failure_unlock(struct gx_boot *boot, char *msg, size_t len)
{
    int status = boot->fail_status;
    if (msg && len)
        snprintf(msg, len, "%s", boot->fail_msg);
    pthread_mutex_unlock(&boot->lock);
    return status;
}

int gx_boot_failure(struct gx_boot *boot, char *msg, size_t len)
{
    pthread_mutex_lock(&boot->lock);
    return failure_unlock(boot, msg, len);
}

int gx_boot_failure_peek(struct gx_boot *boot, char *msg, size_t len)
{
    if (pthread_mutex_trylock(&boot->lock) != 0)
        return GX_OK; /* busy: the caller looks again on its next watch */
    return failure_unlock(boot, msg, len);
}

void gx_boot_fail(struct gx_boot *boot, int status, int failed_rank, const char *msg)
{
    pthread_mutex_lock(&boot->lock);
    boot_set_failure(boot, status, failed_rank, msg);
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
    boot_set_failure(b, status, peer, msg);
    return status;
}

#define DEATH_CHECK_NS 50000000ull

int boot_check_peer_death(struct gx_boot *b, int peer)
{
    uint64_t now = gx_now_ns();
    if (now < b->next_death_check_ns || b->recovering || peer < 0 || peer >= b->size)
        return b->fail_status;
    b->next_death_check_ns = now + DEATH_CHECK_NS;
    const struct boot_rank_record *me = &b->records[b->rank], *rec = &b->records[peer];
    if (b->fail_status != GX_OK || peer == b->rank || b->dead[peer] || rec->addr_len == 0 ||
        rec->pid <= 0 || strcmp(rec->host, me->host) != 0 || !gx_process_gone(rec->pid))
        return b->fail_status;
    /* What it sent before it went is still ours to read: only then is it a
     * failure (a rank that finished and exited has sent everything). */
    (void)boot_progress_locked(b, 0, -1, 0);
    if (b->in[peer].head)
        return GX_OK;
    peer_failed(b, GX_EPEER, peer, "is gone (its process exited)");
    return b->fail_status;
}

/* ---- sending ---------------------------------------------------------- */

/* Wait until `fd` is ready for `events`, servicing our own listener and
 * streams meanwhile so two ranks connecting to each other never deadlock. */
static int wait_servicing(struct gx_boot *b, int fd, short events, uint64_t deadline)
{
    for (;;) {
        if (atomic_load(&b->interrupted))
            return GX_EABORTED;
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
    int fd = -1, rc;
    for (int attempt = 0;; attempt++) {
        /* In slices, serving our own connections between them (a peer's
         * ABORT must get through), so a peer of this host that died is
         * named at once rather than retried until the deadline. */
        for (;;) {
            uint64_t slice = gx_deadline_after_ms(20);
            rc = gx_sock_connect(&addr, slice < deadline ? slice : deadline, &fd);
            if (rc != GX_ETIMEOUT || gx_ms_left(deadline) == 0)
                break;
            (void)boot_progress_locked(b, 0, -1, 0);
            if (!quiet && (b->fail_status != GX_OK || boot_check_peer_death(b, peer) != GX_OK))
                return b->fail_status;
        }
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
        bool dropped = false;
        rc = recv_bytes(b, fd, &ch, sizeof(ch), deadline);
        if (rc == GX_OK)
            rc = gx_auth_client_respond(&b->key, &ch, purpose, b->rank, 0, &hello);
        if (rc == GX_OK)
            rc = send_bytes(b, fd, &hello, sizeof(hello), deadline);
        if (rc == GX_OK && !gx_auth_same_job(&b->key, &ch))
            rc = GX_EAUTH;
        if (rc == GX_OK) {
            rc = recv_bytes(b, fd, &acc, sizeof(acc), deadline);
            if (rc == GX_EPEER && !gx_auth_known_same_job(&b->key, &ch)) {
                rc = GX_EAUTH; /* the acceptor drops a hello it refuses */
                dropped = true;
            }
        }
        if (rc == GX_OK)
            rc = gx_auth_client_check(&b->key, &hello, &acc);
        if (rc == GX_OK && peer == 0) /* proved: the accept MAC covers the challenge */
            memcpy(b->key.job_id, ch.job_id, sizeof(b->key.job_id));
        if (rc == GX_EAUTH && dropped && attempt == 0) {
            /* Before we know the job id, a dropped hello is a refused key or
             * an acceptor that died meanwhile: a second try tells them apart
             * (a dead one no longer accepts; a refusing one drops it again). */
            close(fd);
            struct timespec pause = { 0, 50 * 1000000L };
            nanosleep(&pause, NULL);
            continue;
        }
        break;
    }
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
    b->out_eof[peer] = false;
    return GX_OK;
}

static int send_msg(struct gx_boot *b, int peer, uint16_t type, uint64_t comm_id, uint64_t tag,
                    const void *buf, size_t len, uint64_t deadline, bool quiet)
{
    if (b->shut)
        return GX_EABORTED;
    if (b->dead[peer])
        return gx_fail(GX_EPEER, GX_SUB_BOOT, "rank %d left the job (the survivors shrank "
                       "their communicator without it)", peer);
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
    if (rc == GX_OK) {
        b->msgs_sent++;
        b->bytes_sent += len;
    }
    if (rc == GX_EPEER && !b->out_eof[peer]) {
        boot_read_refusal(b, peer); /* closed on us: did it say why? */
        if (b->fail_status != GX_OK)
            return gx_fail(b->fail_status, GX_SUB_BOOT, "%s", b->fail_msg);
    }
    if (rc != GX_OK && !quiet) {
        if (rc == GX_ETIMEOUT)
            return peer_failed(b, GX_ETIMEOUT, peer, "did not read our %s message before the "
                               "deadline", boot_op_name(tag));
        return peer_failed(b, GX_EPEER, peer, "closed its connection while we sent %s "
                           "(did the process exit or crash?)", boot_op_name(tag));
    }
    return rc;
}

void boot_say_bye_locked(struct gx_boot *b, int peer, uint64_t deadline)
{
    if (b->out_fd[peer] < 0)
        return;
    struct boot_msg_header h = { .magic = BOOT_MSG_MAGIC, .type = BOOT_MSG_BYE };
    if (send_bytes(b, b->out_fd[peer], &h, sizeof(h), deadline) == GX_OK)
        b->msgs_sent++;
    close(b->out_fd[peer]);
    b->out_fd[peer] = -1;
    b->out_eof[peer] = false;
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

int boot_send_quiet_locked(struct gx_boot *b, int peer, uint64_t comm_id, uint64_t tag,
                           const void *buf, size_t len, uint64_t deadline)
{
    if (peer < 0 || peer >= b->size || peer == b->rank || len > BOOT_MSG_MAX_LEN)
        return GX_EINVAL;
    return send_msg(b, peer, BOOT_MSG_DATA, comm_id, tag, buf, len, deadline, true);
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

int gx_boot_notify(struct gx_boot *boot, int peer, uint64_t comm_id, uint64_t tag,
                   const void *buf, size_t len, uint64_t deadline, bool connect)
{
    pthread_mutex_lock(&boot->lock);
    int rc = GX_EINVAL;
    /* Not skipped once the boot has failed: a rank that rejected a call
     * tells every peer even when the first one it told has already failed
     * and flooded an ABORT back (a later peer would otherwise only see the
     * echo and blame whoever exited first). */
    if (!boot->shut && peer >= 0 && peer < boot->size && peer != boot->rank &&
        len <= BOOT_MSG_MAX_LEN && (connect || boot->out_fd[peer] >= 0))
        rc = send_msg(boot, peer, BOOT_MSG_DATA, comm_id, tag, buf, len, deadline, true);
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
        if (atomic_load(&b->interrupted))
            return gx_fail(GX_EABORTED, GX_SUB_BOOT, "rank %d: %s interrupted by an abort or "
                           "revoke from another thread", b->rank, boot_op_name(tag));
        if (boot_check_peer_death(b, peer) != GX_OK)
            return gx_fail(b->fail_status, GX_SUB_BOOT, "%s", b->fail_msg);
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
    if (rc == GX_INPROGRESS && boot_check_peer_death(boot, peer) != GX_OK)
        rc = gx_fail(boot->fail_status, GX_SUB_BOOT, "%s", boot->fail_msg);
    forward_abort(boot);
    pthread_mutex_unlock(&boot->lock);
    return rc;
}

int gx_boot_try_recv_any(struct gx_boot *boot, uint64_t comm_id, uint64_t tag, void *buf,
                         size_t len, int *peer_out)
{
    pthread_mutex_lock(&boot->lock);
    int rc = boot_progress_locked(boot, 0, -1, 0);
    if (rc >= 0)
        rc = GX_INPROGRESS;
    for (int peer = 0; rc == GX_INPROGRESS && peer < boot->size; peer++) {
        /* Only queued messages: a closed peer is not this caller's failure. */
        for (struct boot_msg *m = boot->in[peer].head; m; m = m->next) {
            if (m->comm_id == comm_id && m->tag == tag && m->len == len) {
                rc = try_recv_locked(boot, peer, comm_id, tag, buf, len);
                *peer_out = peer;
                break;
            }
        }
    }
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
