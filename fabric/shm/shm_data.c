/*
 * shm_data.c - the shm provider's data path: posts write ring slots (no
 * system call, no allocation, no lock), progress consumes the inbound ring
 * into posted receives and retires our outbound slots as the peer's tail
 * passes them. Payloads above SHM_INLINE_MAX are pulled by the receiver with
 * one process_vm_readv, straight into their destination.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/shm/shm.h"

/* How often a busy endpoint checks that its peer is alive. */
#define LIVENESS_PERIOD_NS (10ull * 1000 * 1000)

static inline uint64_t load_acquire(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline void store_release(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

int shm_ep_alloc(struct shm_domain *dom, struct shm_cq *cq, struct shm_ep **out)
{
    struct shm_ep *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "shm: out of memory creating an endpoint");
    ep->depth = (uint32_t)gx_fab_queue_depth();
    ep->txops = calloc(ep->depth, sizeof(*ep->txops));
    ep->rx = calloc(ep->depth, sizeof(*ep->rx));
    if (!ep->txops || !ep->rx || gx_fab_swcq_attach(&cq->sw, &ep->base, 2 * ep->depth) != GX_OK) {
        free(ep->txops);
        free(ep->rx);
        free(ep);
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "shm: out of memory creating an endpoint");
    }
    ep->base.ops = &dom->base.ops;
    ep->base.dom = &dom->base;
    ep->base.cq = &cq->sw.base;
    ep->base.peer_rank = -1;
    ep->dom = dom;
    ep->cq = cq;
    ep->sock = -1;
    ep->memfd = -1;
    ep->bell[0] = ep->bell[1] = -1;
    ep->state = SHM_CONNECTING;
    *out = ep;
    return GX_OK;
}

void shm_ep_free(struct shm_ep *ep)
{
    gx_fab_swcq_detach(&ep->cq->sw, &ep->base, 2 * ep->depth);
    if (ep->seg)
        munmap(ep->seg, shm_seg_size());
    if (ep->sock >= 0)
        close(ep->sock);
    if (ep->memfd >= 0)
        close(ep->memfd);
    for (int i = 0; i < 2; i++)
        if (ep->bell[i] >= 0)
            close(ep->bell[i]);
    free(ep->txops);
    free(ep->rx);
    free(ep);
}

static void flush_all(struct shm_ep *ep, int status, int prov_err)
{
    struct gx_fab_cqe e = { .ep = &ep->base, .status = status, .prov_err = prov_err,
                            .flags = GX_FAB_CQE_FLUSHED };
    for (; ep->tx_done < ep->tx_post; ep->tx_done++) {
        struct shm_txop *op = &ep->txops[ep->tx_done % ep->depth];
        e.context = op->context;
        e.op = op->op;
        gx_fab_swcq_push(&ep->cq->sw, &e);
    }
    ep->tx_pushed = ep->tx_post;
    e.op = GX_FAB_OP_RECV;
    for (; ep->rx_done < ep->rx_post; ep->rx_done++) {
        e.context = ep->rx[ep->rx_done % ep->depth].context;
        gx_fab_swcq_push(&ep->cq->sw, &e);
    }
}

static void ep_fail(struct shm_ep *ep, int status, int prov_err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void ep_fail(struct shm_ep *ep, int status, int prov_err, const char *fmt, ...)
{
    if (ep->state == SHM_ERROR)
        return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gx_fab_log_ep_failure("shm", ep->base.name,
                          ep->tx_post != ep->tx_done || ep->rx_post != ep->rx_done, status, msg);
    ep->state = SHM_ERROR;
    ep->error = status;
    flush_all(ep, status, prov_err);
    if (ep->sock >= 0)
        shutdown(ep->sock, SHUT_RDWR); /* the peer's liveness check sees it */
}

/* ---- the doorbell (struct shm_seg.sleeping) ------------------------------- */

/* A full fence between our store to one word and our load of another (the
 * waker's ring move and the sleeper's flag, each way). GCC refuses
 * atomic_thread_fence under ThreadSanitizer (-Werror=tsan): there a
 * sequentially consistent read-modify-write, a full barrier on x86 and
 * arm64 alike, stands in for it. */
#if defined(__SANITIZE_THREAD__)
static uint32_t shm_fence_word;
#define SHM_FULL_FENCE() ((void)__atomic_fetch_add(&shm_fence_word, 0, __ATOMIC_SEQ_CST))
#else
#define SHM_FULL_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

/* We moved a head or a tail the peer may sleep on: wake it. The full fence
 * orders our move before the look at its flag, as the sleeper orders its
 * flag before its last look at the rings. */
static void wake_peer(struct shm_ep *ep)
{
    SHM_FULL_FENCE();
    uint32_t *flag = &ep->seg->sleeping[ep->out_ring]; /* the peer consumes our out ring */
    if (__atomic_load_n(flag, __ATOMIC_RELAXED) && __atomic_exchange_n(flag, 0, __ATOMIC_ACQ_REL)) {
        uint64_t one = 1; /* an eventfd write: no socket buffer to allocate, half the cost */
        (void)!write(ep->bell[ep->out_ring], &one, sizeof(one));
    }
}

/* ---- outbound ----------------------------------------------------------- */
static void push_pending(struct shm_ep *ep)
{
    struct shm_ring_ctl *ctl = &ep->seg->ctl[ep->out_ring];
    uint64_t pushed = ep->tx_pushed;
    while (ep->tx_pushed < ep->tx_post) {
        /* Room is counted from what we retired, not from the peer's tail, so
         * a slot is reused only after we read the status the peer left. */
        uint64_t oldest = ep->tx_done < ep->tx_pushed
                              ? ep->txops[ep->tx_done % ep->depth].seq
                              : ep->out_head;
        if (ep->out_head - oldest >= SHM_NSLOTS)
            return;
        struct shm_txop *op = &ep->txops[ep->tx_pushed % ep->depth];
        if (op->onesided) { /* done already: takes no slot */
            op->seq = ep->out_head;
            ep->tx_pushed++;
            continue;
        }
        struct shm_slot *s = shm_slot_at(ep->seg, ep->out_ring, ep->out_head);
        s->op = op->op == GX_FAB_OP_SEND ? SHM_OP_SEND : SHM_OP_WRITE_IMM;
        s->inl = op->inl;
        s->imm = op->imm;
        s->tag = op->tag;
        s->len = op->len;
        s->src = (uint64_t)(uintptr_t)op->buf;
        s->raddr = op->raddr;
        s->rkey_index = op->rkey_index;
        s->rkey_cookie = op->rkey_cookie;
        s->status = 0;
        s->prov_err = 0;
        if (op->inl && op->len)
            memcpy(s->data, op->buf, op->len);
        op->seq = ep->out_head++;
        ep->tx_pushed++;
        store_release(&ctl->head, ep->out_head);
    }
    if (ep->tx_pushed != pushed)
        wake_peer(ep);
}

static void retire_outbound(struct shm_ep *ep)
{
    if (ep->tx_done == ep->tx_pushed)
        return;
    uint64_t tail = load_acquire(&ep->seg->ctl[ep->out_ring].tail);
    while (ep->tx_done < ep->tx_pushed) {
        struct shm_txop *op = &ep->txops[ep->tx_done % ep->depth];
        if (op->onesided) {
            struct gx_fab_cqe e = { .context = op->context, .ep = &ep->base, .op = op->op,
                                    .len = op->len };
            gx_fab_swcq_push(&ep->cq->sw, &e);
            ep->tx_done++;
            continue;
        }
        if (op->seq >= tail)
            return;
        struct shm_slot *s = shm_slot_at(ep->seg, ep->out_ring, op->seq);
        if (s->status != GX_OK) {
            ep_fail(ep, s->status, s->prov_err, "peer refused %s of %" PRIu64 " bytes: %s (see "
                    "the peer's log)", gx_fab_op_name(op->op), op->len, gx_strerror(s->status));
            return;
        }
        struct gx_fab_cqe e = { .context = op->context, .ep = &ep->base, .op = op->op };
        gx_fab_swcq_push(&ep->cq->sw, &e);
        ep->tx_done++;
    }
}

/* ---- inbound ------------------------------------------------------------ */
static int pull(struct shm_ep *ep, void *dst, uint64_t src, uint64_t len, int *err)
{
    while (len) {
        struct iovec l = { dst, (size_t)len }, r = { (void *)(uintptr_t)src, (size_t)len };
        ssize_t n = process_vm_readv(ep->peer_pid, &l, 1, &r, 1, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            *err = n < 0 ? errno : EIO;
            return *err == ESRCH ? GX_EPEER : GX_ESYSTEM;
        }
        dst = (char *)dst + n;
        src += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return GX_OK;
}

static void consume_inbound(struct shm_ep *ep)
{
    struct shm_ring_ctl *ctl = &ep->seg->ctl[ep->in_ring];
    uint64_t head = load_acquire(&ctl->head);
    /* A budget per progress call keeps one busy endpoint from starving the
     * others on the cq, and completion times honest. */
    uint64_t budget = 1u << 20;
    while (ep->in_tail < head && ep->rx_done < ep->rx_post && ep->state == SHM_ESTABLISHED &&
           budget > 0) {
        struct shm_slot *s = shm_slot_at(ep->seg, ep->in_ring, ep->in_tail);
        struct shm_rx *r = &ep->rx[ep->rx_done % ep->depth];
        /* Copy the header fields once: the peer could scribble on the slot. */
        uint8_t op = s->op, inl = s->inl;
        uint64_t len = s->len, src = s->src;
        int status = GX_OK, err = 0;
        char why[160] = "";
        void *dst = NULL;
        if (op == SHM_OP_SEND) {
            if (len > r->len) {
                status = GX_ETRUNCATE;
                snprintf(why, sizeof(why), "message of %" PRIu64 " bytes (tag %" PRIu64 ") is "
                         "larger than the posted receive of %zu bytes", len, s->tag, r->len);
            }
            dst = r->buf;
        } else if (op == SHM_OP_WRITE_IMM) {
            dst = gx_fab_mrtab_resolve(&ep->dom->mrtab, s->rkey_index, s->rkey_cookie, s->raddr,
                                       len);
            if (!dst) {
                status = GX_EPROTO;
                snprintf(why, sizeof(why), "write_imm of %" PRIu64 " bytes at 0x%" PRIx64
                         " with key %u: no such registration, stale key, no remote write "
                         "access, or out of its bounds", len, s->raddr, s->rkey_index);
            }
        } else {
            status = GX_EPROTO;
            snprintf(why, sizeof(why), "unknown slot op %u", op);
        }
        if (status == GX_OK && len) {
            if (inl && len <= SHM_INLINE_MAX)
                memcpy(dst, s->data, len);
            else if (inl)
                status = GX_EPROTO, snprintf(why, sizeof(why), "inline payload too long");
            else if ((status = pull(ep, dst, src, len, &err)) != GX_OK)
                snprintf(why, sizeof(why), "copying %" PRIu64 " bytes from the peer: %s", len,
                         strerror(err));
        }
        struct gx_fab_cqe e = { .context = r->context, .ep = &ep->base, .op = GX_FAB_OP_RECV,
                                .len = len };
        if (op == SHM_OP_WRITE_IMM) {
            e.flags = GX_FAB_CQE_IMM;
            e.imm = s->imm;
        } else {
            e.tag = s->tag;
        }
        s->status = status;
        s->prov_err = err;
        store_release(&ctl->tail, ++ep->in_tail);
        if (status != GX_OK) {
            ep_fail(ep, status, err, "%s", why);
            return;
        }
        gx_fab_swcq_push(&ep->cq->sw, &e);
        ep->rx_done++;
        budget = len + 64 >= budget ? 0 : budget - len - 64;
    }
}

/* The unix socket reads EOF once the peer closed the endpoint or died. */
static void check_liveness(struct shm_ep *ep)
{
    uint64_t now = gx_now_ns();
    if (now < ep->live_next_ns)
        return;
    ep->live_next_ns = now + LIVENESS_PERIOD_NS;
    if (!ep->peer_gone) {
        char c;
        ssize_t n = recv(ep->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            ep->peer_gone = true;
    }
    if (!ep->peer_gone)
        return;
    /* Deliver what the peer left in the ring first; fail what can't finish. */
    bool inbound_empty = ep->in_tail == load_acquire(&ep->seg->ctl[ep->in_ring].head);
    if (inbound_empty || ep->tx_done < ep->tx_post)
        ep_fail(ep, GX_EPEER, ESRCH, "peer closed the endpoint or exited (pid %d)",
                (int)ep->peer_pid);
}

void shm_ep_progress(struct gx_fab_ep *base)
{
    struct shm_ep *ep = (struct shm_ep *)base;
    if (ep->state != SHM_ESTABLISHED)
        return;
    uint64_t in_tail = ep->in_tail;
    consume_inbound(ep);
    if (ep->in_tail != in_tail)
        wake_peer(ep); /* its sends completed: it may sleep on them */
    if (ep->state != SHM_ESTABLISHED)
        return;
    retire_outbound(ep);
    if (ep->state != SHM_ESTABLISHED)
        return;
    push_pending(ep);
    bool busy = ep->tx_done != ep->tx_post || ep->rx_done != ep->rx_post;
    if (busy && (++ep->live_tick & 255) == 0)
        check_liveness(ep);
}

/* ---- posts -------------------------------------------------------------- */
static int post_check(struct shm_ep *ep)
{
    if (ep->state == SHM_ESTABLISHED)
        return GX_OK;
    return ep->state == SHM_ERROR ? ep->error : GX_ESTATE;
}

static int post_tx(struct shm_ep *ep, uint8_t op, const void *buf, size_t len, uint64_t tag,
                   uint32_t imm, const struct gx_fab_swkey *key, uint64_t raddr, uint64_t context)
{
    if (ep->tx_post - ep->tx_done >= ep->depth)
        return GX_ENOMEM; /* queue full: poll, then post again */
    struct shm_txop *t = &ep->txops[ep->tx_post % ep->depth];
    t->context = context;
    t->op = op;
    t->inl = len <= SHM_INLINE_MAX;
    t->imm = imm;
    t->tag = tag;
    t->buf = buf;
    t->len = len;
    t->raddr = raddr;
    t->rkey_index = key ? key->index : 0;
    t->rkey_cookie = key ? key->cookie : 0;
    t->onesided = false;
    ep->tx_post++;
    push_pending(ep);
    return GX_OK;
}

int shm_post_send(struct gx_fab_ep *base, const void *buf, size_t len, struct gx_fab_mr *mr,
                  uint64_t tag, uint64_t context)
{
    struct shm_ep *ep = (struct shm_ep *)base;
    int rc = post_check(ep);
    if (rc != GX_OK)
        return rc;
    return post_tx(ep, GX_FAB_OP_SEND, buf, len, tag, 0, NULL, 0, context);
}

int shm_post_write_imm(struct gx_fab_ep *base, const void *buf, size_t len, struct gx_fab_mr *mr,
                       uint64_t raddr, const struct gx_fab_rkey *rkey, uint32_t imm,
                       uint64_t context)
{
    struct shm_ep *ep = (struct shm_ep *)base;
    int rc = post_check(ep);
    if (rc != GX_OK)
        return rc;
    struct gx_fab_swkey key;
    rc = gx_fab_swkey_unpack(base, rkey, raddr, len, &key);
    if (rc != GX_OK)
        return rc;
    return post_tx(ep, GX_FAB_OP_WRITE_IMM, buf, len, 0, imm, &key, raddr, context);
}

/* One-sided: copy now with the peer's address space, complete in order. */
static int onesided(struct shm_ep *ep, uint8_t fab_op, void *local, size_t len, uint64_t raddr,
                    const struct gx_fab_rkey *rkey, uint64_t context)
{
    int rc = post_check(ep);
    if (rc != GX_OK)
        return rc;
    struct gx_fab_swkey key;
    rc = gx_fab_swkey_unpack(&ep->base, rkey, raddr, len, &key);
    if (rc != GX_OK)
        return rc;
    if (ep->tx_post - ep->tx_done >= ep->depth)
        return GX_ENOMEM; /* queue full: poll, then post again */
    char *at = local;
    for (size_t left = len; left;) {
        struct iovec l = { at, left }, r = { (void *)(uintptr_t)raddr, left };
        ssize_t n = fab_op == GX_FAB_OP_WRITE ? process_vm_writev(ep->peer_pid, &l, 1, &r, 1, 0)
                                              : process_vm_readv(ep->peer_pid, &l, 1, &r, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int err = n < 0 ? errno : EIO;
            if (err == ESRCH) {
                ep_fail(ep, GX_EPEER, err, "peer process %d is gone", (int)ep->peer_pid);
                return GX_EPEER;
            }
            return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "shm: %s: one-sided %s of %zu bytes at "
                           "0x%" PRIx64 " failed: %s", ep->base.name,
                           fab_op == GX_FAB_OP_WRITE ? "write" : "read", len, raddr,
                           strerror(err));
        }
        at += n;
        raddr += (uint64_t)n;
        left -= (size_t)n;
    }
    struct shm_txop *t = &ep->txops[ep->tx_post % ep->depth];
    memset(t, 0, sizeof(*t));
    t->context = context;
    t->op = fab_op;
    t->len = len;
    t->onesided = true;
    ep->tx_post++;
    push_pending(ep);
    return GX_OK;
}

int shm_post_write(struct gx_fab_ep *base, const void *buf, size_t len, struct gx_fab_mr *mr,
                   uint64_t raddr, const struct gx_fab_rkey *rkey, uint64_t context)
{
    return onesided((struct shm_ep *)base, GX_FAB_OP_WRITE, (void *)buf, len, raddr, rkey,
                    context);
}

int shm_post_read(struct gx_fab_ep *base, void *buf, size_t len, struct gx_fab_mr *mr,
                  uint64_t raddr, const struct gx_fab_rkey *rkey, uint64_t context)
{
    return onesided((struct shm_ep *)base, GX_FAB_OP_READ, buf, len, raddr, rkey, context);
}

int shm_post_recv(struct gx_fab_ep *base, void *buf, size_t len, struct gx_fab_mr *mr,
                  uint64_t context)
{
    struct shm_ep *ep = (struct shm_ep *)base;
    int rc = post_check(ep);
    if (rc != GX_OK)
        return rc;
    if (ep->rx_post - ep->rx_done >= ep->depth)
        return GX_ENOMEM;
    struct shm_rx *r = &ep->rx[ep->rx_post % ep->depth];
    r->context = context;
    r->buf = buf;
    r->len = len;
    ep->rx_post++;
    return GX_OK;
}

void shm_ep_close(struct gx_fab_ep *base)
{
    struct shm_ep *ep = (struct shm_ep *)base;
    if (ep->state != SHM_ERROR) {
        ep->state = SHM_ERROR;
        ep->error = GX_EABORTED;
        flush_all(ep, GX_EABORTED, 0);
    }
    shm_ep_free(ep);
}

/* ---- sleeping ------------------------------------------------------------- */

int shm_cq_wait_fds(struct gx_fab_cq *base, struct pollfd *fds, int max, int *nfds)
{
    struct shm_cq *cq = (struct shm_cq *)base;
    struct gx_fab_swcq *sw = &cq->sw;
    if (sw->head != sw->tail)
        return GX_INPROGRESS;
    /* Raise our flags, then look once more: a peer that moved a ring before
     * it could see a flag is caught by this look, one after by its wake. */
    for (int i = 0; i < sw->neps; i++) {
        struct shm_ep *ep = (struct shm_ep *)sw->eps[i];
        if (ep->state == SHM_ESTABLISHED)
            __atomic_store_n(&ep->seg->sleeping[ep->in_ring], 1, __ATOMIC_SEQ_CST);
    }
    SHM_FULL_FENCE();
    for (int i = 0; i < sw->neps; i++)
        sw->progress(sw->eps[i]);
    if (sw->head != sw->tail) {
        shm_cq_wait_done(base, NULL, 0);
        return GX_INPROGRESS;
    }
    int n = 0;
    for (int i = 0; i < sw->neps; i++) { /* per endpoint: its bell, then its socket */
        struct shm_ep *ep = (struct shm_ep *)sw->eps[i];
        if (ep->sock < 0)
            continue;
        if (n + 2 > max)
            goto too_many;
        int bell = ep->state == SHM_ESTABLISHED ? ep->bell[ep->in_ring] : -1;
        fds[n++] = (struct pollfd){ .fd = bell, .events = POLLIN }; /* -1: poll skips it */
        fds[n++] = (struct pollfd){ .fd = ep->sock, .events = POLLIN }; /* a peer that dies */
    }
    for (int k = 0; k < SHM_CQ_LISTENERS; k++) {
        struct shm_listener *l = cq->lst[k];
        if (!l)
            continue;
        if (n + 1 + l->nhalf > max)
            goto too_many;
        fds[n++] = (struct pollfd){ .fd = l->fd, .events = POLLIN };
        for (int i = 0; i < l->nhalf; i++)
            fds[n++] = (struct pollfd){ .fd = l->half[i].fd, .events = POLLIN };
    }
    *nfds = n;
    return GX_OK;
too_many:
    shm_cq_wait_done(base, NULL, 0); /* not sleeping after all: our flags down again */
    return GX_ENOMEM;
}

/* Our flags down; then drain the wake-up bytes of the sockets the poll found
 * readable (fds: what shm_cq_wait_fds filled, with revents; none when it did
 * not sleep: a byte sent meanwhile wakes the next sleep, which drains it). */
void shm_cq_wait_done(struct gx_fab_cq *base, const struct pollfd *fds, int nfds)
{
    struct gx_fab_swcq *sw = &((struct shm_cq *)base)->sw;
    int k = 0; /* fds[k], fds[k + 1]: the next endpoint's bell and socket */
    for (int i = 0; i < sw->neps; i++) {
        struct shm_ep *ep = (struct shm_ep *)sw->eps[i];
        bool polled = ep->sock >= 0 && k + 1 < nfds && fds[k + 1].fd == ep->sock;
        bool rung = polled && (fds[k].revents & POLLIN);
        bool sock_ready = polled && (fds[k + 1].revents & (POLLIN | POLLHUP | POLLERR));
        k += polled ? 2 : 0;
        if (ep->state != SHM_ESTABLISHED)
            continue;
        __atomic_store_n(&ep->seg->sleeping[ep->in_ring], 0, __ATOMIC_RELAXED);
        if (rung) {
            uint64_t v;
            (void)!read(ep->bell[ep->in_ring], &v, sizeof(v)); /* resets it */
        }
        if (sock_ready) {
            /* Nothing but its end comes on the socket once set up (read
             * anything else, or it would wake every sleep): the end is the
             * liveness check's to classify. */
            char buf[64];
            if (recv(ep->sock, buf, sizeof(buf), MSG_DONTWAIT) == 0)
                ep->live_next_ns = 0; /* look at it on the next progress */
        }
    }
}
