/*
 * xport_conn.c - connections on demand: a rank connects to a peer when
 * something first needs it (a send, a receive from a higher rank, the
 * blocking accessor gx_xport_peer), and accepts the connections its peers
 * open meanwhile, whenever the transport progresses.
 *
 * At open every rank listens in each domain (shm, the network provider)
 * and the listener addresses are all-gathered once (O(log N) bootstrap
 * rounds, N addresses kept: struct gx_fab_addr each). Nothing else is
 * collective: endpoints come and stay one at a time.
 *
 * Two ranks may connect to each other at once. The connection the lower
 * rank opened wins, and the acceptor decides, before any data: an accepted
 * endpoint is kept only after the acceptor sends XP_MSG_HELLO as its first
 * message; the connector posts one receive (the hello slot) on its endpoint
 * and sends nothing until the hello arrives. So
 *  - a higher rank that accepts from a lower one while connecting to it
 *    keeps the accepted endpoint and closes its own;
 *  - a lower rank that accepts from a higher one while connecting to it
 *    parks the accepted endpoint (no hello, nothing posted) and closes it
 *    once its own connection is up, by when the higher rank has closed its
 *    side: neither side then sees a "failed" endpoint with operations on
 *    it, so a crossing logs nothing above INFO.
 * A connector whose endpoint breaks before the hello while the peer is
 * lower waits for the lower rank's own connection (XP_CONN_WAIT_IN) until
 * the attempt's deadline.
 * The job key is proved by the provider's own handshake before accept or
 * establish return, so nothing is sent to an unproved peer.
 *
 * A connection that cannot be made fails the peer (xp_fail_peer) with a
 * message naming it and why; the operations queued on it fail with it, and
 * the engine adds the collective. The attempt's deadline is the longer of
 * GX_FAB_CONNECT_TIMEOUT and the communicator's GX_TIMEOUT (a peer may
 * reach the collective much later than we do); while attempts are pending,
 * a rank of this host whose process died, or a failure the bootstrap heard
 * of, ends them at once (gx_comm_known_death).
 *
 * Runs under the transport lock, except gx_xport_peer and xp_conn_all,
 * which take it.
 */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/comm/comm_internal.h"
#include "collectives/transport/xport_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"

/* How often the listeners are polled while nothing waits (an accept is a
 * system call; a connector's handshake waits at most this long for it). */
#define ACCEPT_EVERY_NS 200000ull
/* How often pending attempts look for a dead rank of this host. */
#define WATCH_EVERY_NS 50000000ull
#define HELLO_BYTES 64

/* What each rank publishes at open: its provider and listener address per
 * domain, so a rank that picked another provider is named. */
struct conn_card {
    char prov[2][16];
    struct gx_fab_addr addr[2];
};

int xp_conn_open(struct gx_xport *x)
{
    struct conn_card mine;
    memset(&mine, 0, sizeof(mine));
    for (int i = 0; i < x->ndoms; i++) {
        struct xp_domain *d = &x->doms[i];
        snprintf(mine.prov[i], sizeof(mine.prov[i]), "%s", d->prov->name);
        int rc = gx_fab_listen(d->dom, d->cq, &d->lst, &mine.addr[i]);
        if (rc != GX_OK)
            return rc;
    }
    struct conn_card *all = calloc((size_t)x->size, sizeof(*all));
    x->addrs = calloc((size_t)x->size, sizeof(*x->addrs));
    x->pend = malloc((size_t)x->size * sizeof(*x->pend));
    if (!all || !x->addrs || !x->pend) {
        free(all);
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "transport: out of memory for %d addresses",
                       x->size);
    }
    int rc = gx_comm_boot_allgather(x->comm, &mine, all, sizeof(mine));
    if (rc != GX_OK) {
        free(all);
        return gx_fail(rc, GX_SUB_COLL, "transport: all-gather of endpoint addresses failed: %s",
                       gx_strerror(rc));
    }
    for (int q = 0; q < x->size; q++) {
        struct xp_peer *p = &x->peers[q];
        if (!p->d)
            continue;
        int i = (int)(p->d - x->doms);
        if (strncmp(all[q].prov[i], mine.prov[i], sizeof(mine.prov[i])) != 0) {
            rc = gx_fail(GX_EMISMATCH, GX_SUB_COLL, "transport: rank %d uses fabric provider "
                         "'%.16s', this rank (%d) uses '%s'", q, all[q].prov[i], x->rank,
                         mine.prov[i]);
            break;
        }
        x->addrs[q] = all[q].addr[i];
    }
    free(all);
    return rc;
}

/* ---- the set being connected -------------------------------------------- */

static void pend_add(struct gx_xport *x, struct xp_peer *p)
{
    if (p->pend_index >= 0)
        return;
    p->pend_index = x->npend;
    x->pend[x->npend++] = p->rank;
}

void xp_conn_unpend(struct gx_xport *x, struct xp_peer *p)
{
    int i = p->pend_index;
    if (i < 0)
        return;
    int last = x->pend[--x->npend];
    x->pend[i] = last;
    x->peers[last].pend_index = i;
    p->pend_index = -1;
}

static int attempt_ms(const struct gx_xport *x)
{
    int ms = gx_fab_connect_timeout_ms();
    return x->comm->op_timeout_ms > ms ? x->comm->op_timeout_ms : ms;
}

/* ---- bounce slots ---------------------------------------------------------- */

static int ensure_slab(struct xp_peer *p)
{
    if (p->slab)
        return GX_OK;
    size_t slot = p->x->eager_limit;
    size_t bytes = slot * (XP_RECV_SLOTS + XP_SEND_SLOTS) + HELLO_BYTES;
    p->slab = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
    if (!p->slab)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "transport: no memory for bounce slots");
    int rc = gx_fab_mr_reg(p->d->dom, p->slab, bytes, GX_FAB_MEM_HOST, GX_FAB_ACCESS_LOCAL,
                           &p->slab_mr);
    if (rc != GX_OK)
        return rc;
    for (int i = 0; i < XP_RECV_SLOTS; i++)
        p->recv_slots[i] = (struct xp_slot){ .ctx_type = XP_CTX_RECV_SLOT, .peer = p,
                                             .buf = p->slab + slot * (size_t)i };
    for (int i = 0; i < XP_SEND_SLOTS; i++)
        p->send_slots[i] = (struct xp_slot){ .ctx_type = XP_CTX_SEND_SLOT, .peer = p,
                                             .buf = p->slab + slot * (size_t)(XP_RECV_SLOTS + i) };
    p->hello = (struct xp_slot){ .ctx_type = XP_CTX_HELLO, .peer = p,
                                 .buf = p->slab + slot * (size_t)(XP_RECV_SLOTS + XP_SEND_SLOTS) };
    p->send_free = XP_SEND_SLOTS;
    return GX_OK;
}

void xp_conn_free_peer(struct xp_peer *p)
{
    gx_fab_mr_dereg(p->slab_mr);
    p->slab_mr = NULL;
    free(p->slab);
    p->slab = NULL;
}

/* The connection is `ep`: post the receive slots, say hello when we are
 * the acceptor, and send what waited. */
static void peer_up(struct xp_peer *p, struct gx_fab_ep *ep, bool acceptor)
{
    struct gx_xport *x = p->x;
    p->ep = ep;
    p->conn = XP_CONN_UP;
    xp_conn_unpend(x, p);
    gx_fab_ep_close(p->parked);
    p->parked = NULL;
    x->nup++;
    x->nup_node += gx_comm_same_node(x->comm, p->rank, x->rank);
    int rc = ensure_slab(p);
    for (int i = 0; rc == GX_OK && i < XP_RECV_SLOTS; i++)
        rc = xp_post_recv_slot(&p->recv_slots[i]);
    if (rc == GX_OK && acceptor) {
        struct xp_hello h = { .magic = XP_HELLO_MAGIC, .rank = x->rank };
        rc = xp_post_ctl(p, XP_MSG_HELLO, &h, sizeof(h));
    }
    if (rc != GX_OK) {
        char why[200];
        snprintf(why, sizeof(why), "setting up the connection failed: %s", gx_last_error());
        xp_fail_peer(p, rc, why);
        return;
    }
    GX_TRACE(GX_SUB_COLL, "transport: rank %d %s rank %d over %s (%d peers connected)", x->rank,
             acceptor ? "accepted" : "connected to", p->rank, p->d->prov->name, x->nup);
    xp_send_pending(p);
}

static void conn_failed(struct xp_peer *p, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void conn_failed(struct xp_peer *p, int status, const char *fmt, ...)
{
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    gx_fab_ep_close(p->out_ep);
    p->out_ep = NULL;
    xp_conn_unpend(p->x, p);
    xp_fail_peer(p, status, why);
}

/* ---- connecting ----------------------------------------------------------- */

struct xp_peer *xp_peer_want(struct gx_xport *x, int rank)
{
    struct xp_peer *p = &x->peers[rank];
    if (p->conn != XP_CONN_NONE || p->failed || x->aborted)
        return p;
    p->conn_deadline = gx_deadline_after_ms(attempt_ms(x));
    struct gx_fab_conn_param cp = GX_FAB_CONN_PARAM_INIT;
    cp.peer_rank = rank;
    cp.timeout_ms = gx_ms_left(p->conn_deadline);
    x->nconnects++;
    int rc = gx_fab_connect(p->d->dom, p->d->cq, &x->addrs[rank], &cp, &p->out_ep);
    if (rc != GX_OK) {
        p->out_ep = NULL;
        conn_failed(p, rc, "connecting over %s failed: %s", p->d->prov->name, gx_last_error());
        return p;
    }
    p->conn = XP_CONN_CONNECTING;
    pend_add(x, p);
    return p;
}

/* Our endpoint is established: wait for the acceptor's hello on it. */
static void await_hello(struct xp_peer *p)
{
    int rc = ensure_slab(p);
    if (rc == GX_OK)
        rc = gx_fab_post_recv(p->out_ep, p->hello.buf, HELLO_BYTES, p->slab_mr,
                              (uint64_t)(uintptr_t)&p->hello);
    if (rc != GX_OK) {
        conn_failed(p, rc, "posting the first receive on %s failed: %s",
                    gx_fab_ep_name(p->out_ep), gx_last_error());
        return;
    }
    p->conn = XP_CONN_CONFIRM;
}

/* The lower rank dropped our connection, or it broke before the hello. */
static void lost_ours(struct xp_peer *p, int status, const char *why)
{
    gx_fab_ep_close(p->out_ep);
    p->out_ep = NULL;
    if (p->rank < p->x->rank && status != GX_EAUTH) {
        p->conn = XP_CONN_WAIT_IN; /* its own connection to us wins */
        return;
    }
    conn_failed(p, status == GX_OK ? GX_EPEER : status, "rank %d closed the connection during "
                "set-up (%s)", p->rank, why);
}

void xp_conn_hello_cqe(struct gx_xport *x, const struct gx_fab_cqe *e)
{
    struct xp_slot *slot = (struct xp_slot *)(uintptr_t)e->context;
    struct xp_peer *p = slot->peer;
    if (p->conn != XP_CONN_CONFIRM || !p->out_ep || e->ep != p->out_ep)
        return; /* the flush of an attempt given up: nothing to do */
    if (e->status != GX_OK || (e->flags & GX_FAB_CQE_FLUSHED)) {
        lost_ours(p, e->status, gx_strerror(e->status));
        return;
    }
    struct xp_hello h;
    memcpy(&h, slot->buf, sizeof(h));
    if (XP_WIRE_TYPE(e->tag) != XP_MSG_HELLO || e->len != sizeof(h) ||
        h.magic != XP_HELLO_MAGIC || h.rank != p->rank) {
        conn_failed(p, GX_EPROTO, "rank %d's first message was not a transport hello (another "
                    "gx version?)", p->rank);
        return;
    }
    (void)x;
    struct gx_fab_ep *ep = p->out_ep;
    p->out_ep = NULL;
    peer_up(p, ep, false);
}

/* ---- accepting -------------------------------------------------------------- */

static void take_accepted(struct gx_xport *x, struct xp_domain *d, struct gx_fab_ep *ep)
{
    int r = ep->peer_rank;
    struct xp_peer *p = r >= 0 && r < x->size && r != x->rank ? &x->peers[r] : NULL;
    if (!p || p->d != d || p->failed || p->conn == XP_CONN_UP) {
        if (!p || p->d != d || p->conn == XP_CONN_UP)
            GX_WARN(GX_SUB_COLL, "transport: rank %d dropped an unexpected %s connection from "
                    "rank %d", x->rank, d->prov->name, r);
        gx_fab_ep_close(ep);
        return;
    }
    bool mine_pending = p->conn == XP_CONN_CONNECTING || p->conn == XP_CONN_CONFIRM;
    if (mine_pending && x->rank < r) {
        /* both connected at once: ours, the lower rank's, wins */
        gx_fab_ep_close(p->parked);
        p->parked = ep; /* the higher rank closes its side when ours reaches it */
        return;
    }
    if (p->out_ep) {
        gx_fab_ep_close(p->out_ep); /* theirs wins; a hello flush is ignored */
        p->out_ep = NULL;
    }
    x->naccepts++;
    peer_up(p, ep, true);
}

static void accept_all(struct gx_xport *x)
{
    for (int i = 0; i < x->ndoms; i++) {
        struct xp_domain *d = &x->doms[i];
        for (int k = 0; d->lst && k < 64; k++) {
            struct gx_fab_ep *ep = NULL;
            int rc = gx_fab_accept(d->lst, &ep);
            if (rc == GX_INPROGRESS)
                break;
            if (rc != GX_OK) {
                GX_WARN(GX_SUB_COLL, "transport: rank %d: accepting %s connections failed: %s",
                        x->rank, d->prov->name, gx_last_error());
                break;
            }
            take_accepted(x, d, ep);
        }
    }
}

void xp_conn_progress(struct gx_xport *x)
{
    if (x->aborted || !x->addrs)
        return;
    uint64_t now = gx_now_ns();
    if (x->npend > 0 || now >= x->next_accept_ns) {
        x->next_accept_ns = now + ACCEPT_EVERY_NS;
        accept_all(x);
    }
    /* Downwards: a peer that leaves the set is replaced by the last one,
     * which was already driven. */
    for (int i = x->npend - 1; i >= 0; i--) {
        if (i >= x->npend)
            continue;
        struct xp_peer *p = &x->peers[x->pend[i]];
        if (p->conn == XP_CONN_CONNECTING) {
            int rc = gx_fab_ep_establish(p->out_ep);
            if (rc == GX_OK)
                await_hello(p);
            else if (rc != GX_INPROGRESS)
                lost_ours(p, rc, gx_last_error());
        }
        if (p->pend_index >= 0 && p->conn != XP_CONN_UP && now > p->conn_deadline)
            conn_failed(p, GX_ETIMEOUT, "no %s connection with rank %d within %d ms (%s)",
                        p->d->prov->name, p->rank, attempt_ms(x),
                        p->conn == XP_CONN_WAIT_IN ? "it closed ours and never connected"
                        : "is it alive and calling the same operation?");
    }
    if (x->npend > 0 && now >= x->next_watch_ns) {
        x->next_watch_ns = now + WATCH_EVERY_NS;
        /* A peer being connected whose process on this host exited, or a
         * failure the bootstrap heard of: end the attempts now, naming it,
         * instead of at their deadline. Peek: this runs under x->lock, and a
         * gx_barrier on another thread holds the bootstrap until its
         * messages came, which may need this very connection. */
        char why[512];
        int st = gx_boot_failure_peek(x->comm->boot, why, sizeof(why));
        for (int i = x->npend - 1; i >= 0; i--) {
            if (i >= x->npend)
                continue;
            struct xp_peer *p = &x->peers[x->pend[i]];
            if (st != GX_OK)
                conn_failed(p, st, "%s", why);
            else if (gx_comm_peer_exited(x->comm, p->rank))
                conn_failed(p, GX_EPEER, "rank %d's process exited while we connected to it",
                            p->rank);
        }
    }
}

void xp_conn_close_all(struct gx_xport *x)
{
    for (int q = 0; q < x->size; q++) {
        struct xp_peer *p = &x->peers[q];
        gx_fab_ep_close(p->out_ep);
        p->out_ep = NULL;
        gx_fab_ep_close(p->ep);
        p->ep = NULL;
        gx_fab_ep_close(p->parked);
        p->parked = NULL;
        xp_conn_unpend(x, p);
    }
    for (int i = 0; i < x->ndoms; i++) {
        gx_fab_listener_close(x->doms[i].lst);
        x->doms[i].lst = NULL;
    }
}

/* ---- blocking: the accessor and GX_CONNECT=all ------------------------------- */

static void pause_briefly(unsigned idle)
{
    if (idle < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = { 0, idle < 1024 ? 50000 : 500000 };
    nanosleep(&ts, NULL);
}

int gx_xport_peer(struct gx_xport *x, int rank, uint64_t deadline, struct xp_peer **out)
{
    if (rank < 0 || rank >= x->size)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "transport: peer %d is out of range "
                       "(communicator of %d)", rank, x->size);
    for (unsigned idle = 0;; idle++) {
        pthread_mutex_lock(&x->lock);
        int rc = GX_INPROGRESS;
        struct xp_peer *p = &x->peers[rank];
        if (x->aborted) {
            rc = gx_fail(GX_EABORTED, GX_SUB_COLL, "transport: the communicator was aborted");
        } else if (p->failed) {
            rc = gx_fail(p->failed, GX_SUB_COLL, "transport: the link to rank %d failed",
                         rank);
        } else {
            xp_peer_want(x, rank);
            (void)xp_progress_locked(x);
            if (p->failed)
                rc = gx_fail(p->failed, GX_SUB_COLL, "transport: no connection with rank %d: %s",
                             rank, gx_last_error());
            else if (p->conn == XP_CONN_UP)
                rc = GX_OK;
        }
        pthread_mutex_unlock(&x->lock);
        if (rc == GX_OK)
            *out = p;
        if (rc != GX_INPROGRESS)
            return rc;
        if (deadline && gx_now_ns() > deadline)
            return gx_fail(GX_ETIMEOUT, GX_SUB_COLL, "transport: rank %d: no connection with "
                           "rank %d before the deadline", x->rank, rank);
        pause_briefly(idle);
    }
}

int xp_conn_all(struct gx_xport *x, uint64_t deadline)
{
    uint64_t t0 = gx_now_ns();
    for (unsigned idle = 0;; idle++) {
        pthread_mutex_lock(&x->lock);
        /* Like a mesh: every rank connects to the lower ones and accepts the
         * higher ones, so no two connections cross. */
        for (int q = 0; q < x->rank; q++)
            xp_peer_want(x, q);
        int rc = xp_progress_locked(x);
        int missing = 0, failed = -1;
        for (int q = 0; q < x->size; q++) {
            if (x->peers[q].failed && failed < 0)
                failed = q;
            missing += x->peers[q].conn != XP_CONN_UP;
        }
        char list[256] = "";
        if (missing && gx_now_ns() > deadline) {
            size_t off = 0;
            for (int q = 0; q < x->size && off < sizeof(list) - 16; q++)
                if (x->peers[q].conn != XP_CONN_UP)
                    off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%d",
                                            off ? "," : "", q);
        }
        pthread_mutex_unlock(&x->lock);
        if (rc != GX_OK)
            return rc;
        if (failed >= 0)
            return gx_fail(x->peers[failed].failed, GX_SUB_COLL, "transport: rank %d: no "
                           "connection with rank %d: %s", x->rank, failed, gx_last_error());
        if (!missing)
            return GX_OK;
        if (list[0])
            return gx_fail(GX_ETIMEOUT, GX_SUB_COLL, "transport: rank %d: no connection with "
                           "rank(s) %s within %d ms (GX_CONNECT=all)", x->rank, list,
                           (int)((gx_now_ns() - t0) / 1000000));
        pause_briefly(idle);
    }
}

bool gx_xport_connected(struct gx_xport *x, int peer)
{
    if (peer < 0 || peer >= x->size || peer == x->rank)
        return false;
    pthread_mutex_lock(&x->lock);
    bool up = x->peers[peer].conn == XP_CONN_UP && !x->peers[peer].failed;
    pthread_mutex_unlock(&x->lock);
    return up;
}
