/*
 * xport_p2p.c - the transport's message protocol (see xport.h), the posting
 * side: posting sends and receives (a receive first looks in the unexpected
 * queue, a wildcard one in every peer's), starting an eager send or a rendezvous (RTS), queueing sends and
 * CTS answers for a free send slot, send-slot accounting, GX_FAULT
 * injection and failure of a peer's operations. What the fabric hands back
 * (completions, arriving messages and their matching) is in xport_match.c.
 * Runs under the transport lock.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/comm_internal.h"
#include "collectives/transport/xport_am.h"
#include "collectives/transport/xport_internal.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/trace.h"

void xp_op_fail(struct xp_op *op, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(op->err, sizeof(op->err), fmt, ap);
    va_end(ap);
    gx_fail(status, GX_SUB_COLL, "%s", op->err);
    xp_op_finish(op, status);
}

static void queue_push(struct xp_op **head, struct xp_op **tail, struct xp_op *op)
{
    op->next = NULL;
    if (*tail)
        (*tail)->next = op;
    else
        *head = op;
    *tail = op;
}

/* Remove and return the first op with `tag` (tail may be NULL for lists
 * without one). */
struct xp_op *xp_queue_take_tag(struct xp_op **head, struct xp_op **tail, uint32_t tag)
{
    struct xp_op *prev = NULL;
    for (struct xp_op *op = *head; op; prev = op, op = op->next) {
        if (op->tag != tag)
            continue;
        if (prev)
            prev->next = op->next;
        else
            *head = op->next;
        if (tail && *tail == op)
            *tail = prev;
        op->next = NULL;
        return op;
    }
    return NULL;
}

int xp_post_recv_slot(struct xp_slot *slot)
{
    struct xp_peer *p = slot->peer;
    return gx_fab_post_recv(p->ep, slot->buf, p->x->eager_limit, p->slab_mr, (uint64_t)(uintptr_t)slot);
}

static struct xp_slot *take_send_slot(struct xp_peer *p)
{
    if (p->send_free == 0)
        return NULL;
    for (int i = 0; i < XP_SEND_SLOTS; i++) {
        if (!p->send_slots[i].busy) {
            p->send_slots[i].busy = true;
            p->send_free--;
            return &p->send_slots[i];
        }
    }
    return NULL;
}

void xp_release_send_slot(struct xp_slot *s)
{
    s->busy = false;
    s->op = NULL;
    s->peer->send_free++;
}

/* GX_FAULT corrupt: flip one bit of the next data message from the peer,
 * as a fabric that missed an error would deliver it. */
void xp_maybe_corrupt(struct xp_peer *p, uint32_t tag, void *data, size_t len)
{
    if (!p->inject_corrupt || p->corrupt_tag != tag || len == 0)
        return;
    p->inject_corrupt = false;
    ((unsigned char *)data)[len / 2] ^= 0x10;
    GX_WARN(GX_SUB_COLL, "GX_FAULT: corrupted byte %zu of a %zu-byte message from rank %d",
            len / 2, len, p->rank);
}

int xp_post_msg(struct xp_peer *p, struct xp_slot *slot, int type, uint32_t tag,
                const void *payload, size_t len)
{
    if (payload != slot->buf)
        memcpy(slot->buf, payload, len);
    uint64_t wire = XP_WIRE_TAG(type, tag);
    if (p->x->checksum)
        wire = XP_WIRE_WITH_CSUM(wire, xp_fold16(gx_crc32c(0, slot->buf, len)));
    int rc = gx_fab_post_send(p->ep, slot->buf, len, p->slab_mr, wire, (uint64_t)(uintptr_t)slot);
    if (rc != GX_OK)
        xp_release_send_slot(slot);
    return rc;
}

int xp_post_ctl(struct xp_peer *p, int type, const void *payload, size_t len)
{
    struct xp_slot *slot = take_send_slot(p);
    if (!slot)
        return gx_fail(GX_ESTATE, GX_SUB_COLL, "transport: no free send slot for a control "
                       "message to rank %d", p->rank);
    return xp_post_msg(p, slot, type, 0, payload, len);
}

/* GX_FAULT regfail: the registration fails as a pinned-memory limit would. */
int xp_take_injected_regfail(struct gx_xport *x)
{
    if (!x->inject_regfail)
        return GX_OK;
    x->inject_regfail = false;
    return gx_fail(GX_ENOMEM, GX_SUB_COLL, "memory registration failed (injected by GX_FAULT)");
}

void gx_xport_inject(struct gx_xport *x, int peer, enum xp_inject what)
{
    pthread_mutex_lock(&x->lock);
    if (what == XP_INJECT_REGFAIL)
        x->inject_regfail = true;
    else if (peer >= 0 && peer < x->size && peer != x->rank)
        xp_fail_peer(&x->peers[peer], GX_EPEER, "the connection was closed (injected by GX_FAULT)");
    pthread_mutex_unlock(&x->lock);
}

void gx_xport_inject_corrupt(struct gx_xport *x, int peer, uint32_t tag)
{
    pthread_mutex_lock(&x->lock);
    if (peer >= 0 && peer < x->size) {
        x->peers[peer].inject_corrupt = true;
        x->peers[peer].corrupt_tag = tag;
    }
    pthread_mutex_unlock(&x->lock);
}

void xp_fail_peer(struct xp_peer *p, int status, const char *why)
{
    struct gx_xport *x = p->x;
    if (!p->failed)
        p->failed = status;
    if (p->rank != x->rank && x->any_head)
        xp_fail_any(x, status, p->rank, why);
    struct xp_op *lists[3] = { p->posted_head, p->wait_head, p->rts_head };
    p->posted_head = p->posted_tail = NULL;
    p->wait_head = p->wait_tail = NULL;
    p->rts_head = NULL;
    xp_write_fail_all(p, status, why);
    for (int l = 0; l < 3; l++) {
        for (struct xp_op *op = lists[l], *next; op; op = next) {
            next = op->next;
            xp_op_fail(op, status, "rank %d: %s with rank %d (tag %u) failed: %s", x->rank,
                       op->kind == XP_OP_SEND ? "send"
                       : op->kind == XP_OP_AM ? "active message" : "receive",
                       p->rank, op->tag, why);
        }
    }
    for (int i = 0; i < XP_SEND_SLOTS; i++) {
        struct xp_slot *s = &p->send_slots[i];
        if (s->busy && s->op && !s->op->done)
            xp_op_fail(s->op, status, "rank %d: send to rank %d (tag %u) failed: %s", x->rank,
                       p->rank, s->op->tag, why);
        s->op = NULL;
    }
    for (int i = 0; i < XP_RNDV_TABLE; i++) {
        struct xp_op *op = x->rndv[i];
        if (op && op->peer == p->rank) {
            x->rndv[i] = NULL;
            xp_op_fail(op, status, "rank %d: receive from rank %d (tag %u) failed: %s", x->rank,
                       p->rank, op->tag, why);
        }
    }
    xp_am_peer_failed(p, status, why); /* windows' and calls' answers it still owed */
}

/* ---- sending -------------------------------------------------------------- */

static int start_send(struct xp_peer *p, struct xp_op *op)
{
    struct gx_xport *x = p->x;
    struct xp_slot *slot = take_send_slot(p);
    if (!slot)
        return GX_INPROGRESS;
    if (op->kind == XP_OP_AM)
        return xp_am_start(p, slot, op);
    int rc;
    if (op->len <= x->eager_limit) {
        slot->op = op;
        op->state = XP_ST_EAGER;
        rc = op->dev ? gx_xport_mem_copy(slot->buf, false, op->buf, true, op->len) : GX_OK;
        if (rc != GX_OK)
            xp_release_send_slot(slot);
        else
            rc = xp_post_msg(p, slot, XP_MSG_EAGER, op->tag, op->dev ? slot->buf : op->buf,
                          op->len);
    } else {
        op->id = x->next_send_id++;
        struct xp_rts rts = { .size = op->len, .send_id = op->id };
        if (x->checksum && !op->dev) /* gx_xport_gdr_check refuses GX_CHECKSUM */
            rts.crc32c = gx_crc32c(0, op->buf, op->len);
        op->state = XP_ST_RTS_SENT;
        rc = xp_post_msg(p, slot, XP_MSG_RTS, op->tag, &rts, sizeof(rts));
        if (rc == GX_OK) {
            op->next = p->rts_head;
            p->rts_head = op;
        }
    }
    return rc;
}

void xp_send_pending(struct xp_peer *p)
{
    if (p->conn != XP_CONN_UP || p->failed)
        return; /* xport_conn.c calls again once it is up */
    xp_am_peer_up(p); /* windows' one-sided operations that waited for it */
    while (p->ctl_count > 0 && p->send_free > 0) {
        struct xp_slot *slot = take_send_slot(p);
        struct xp_cts cts = p->ctl[0];
        memmove(p->ctl, p->ctl + 1, (size_t)(--p->ctl_count) * sizeof(p->ctl[0]));
        int rc = xp_post_msg(p, slot, XP_MSG_CTS, 0, &cts, sizeof(cts));
        if (rc != GX_OK) {
            xp_fail_peer(p, rc, "could not post a control message");
            return;
        }
    }
    while (p->wait_head && p->send_free > 0) {
        struct xp_op *op = p->wait_head;
        p->wait_head = op->next;
        if (!p->wait_head)
            p->wait_tail = NULL;
        int rc = start_send(p, op);
        if (rc != GX_OK)
            xp_op_fail(op, rc, "rank %d: posting a send to rank %d failed", p->x->rank, p->rank);
    }
}

void xp_send_cts(struct xp_peer *p, const struct xp_cts *cts)
{
    if (p->ctl_count == p->ctl_cap) {
        /* Control path: grows with the receives posted ahead of the sender. */
        int cap = p->ctl_cap ? 2 * p->ctl_cap : 16;
        struct xp_cts *bigger = realloc(p->ctl, (size_t)cap * sizeof(*bigger));
        if (!bigger) {
            xp_fail_peer(p, GX_ENOMEM, "no memory to queue a rendezvous answer");
            return;
        }
        p->ctl = bigger;
        p->ctl_cap = cap;
    }
    p->ctl[p->ctl_count++] = *cts;
    xp_send_pending(p);
}

/* ---- posting ---------------------------------------------------------------- */

static int check_post(struct gx_xport *x, int peer, const char *what)
{
    if (x->aborted)
        return gx_fail(GX_EABORTED, GX_SUB_COLL, "%s: the communicator was aborted", what);
    if (peer < 0 || peer >= x->size)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: peer %d is out of range (communicator of %d)",
                       what, peer, x->size);
    if (x->peers[peer].failed)
        return gx_fail(x->peers[peer].failed, GX_SUB_COLL, "%s: the link to rank %d failed "
                       "earlier", what, peer);
    return GX_OK;
}

static struct xp_peer *peer_if_in_range(struct gx_xport *x, int peer)
{
    return peer >= 0 && peer < x->size ? &x->peers[peer] : NULL;
}

static void init_op(struct xp_op *op, int kind, int peer, uint32_t tag, void *buf, size_t len)
{
    memset(op, 0, sizeof(*op));
    op->ctx_type = XP_CTX_OP;
    op->kind = (uint8_t)kind;
    op->peer = peer;
    op->tag = tag;
    op->buf = buf;
    op->len = len;
    op->t_post = gx_trace_on() ? gx_trace_now() : 0;
}

/* A message to this rank from device memory: through host memory first. */
static void self_send_dev(struct xp_peer *p, uint32_t tag, const void *buf, size_t len,
                          struct xp_op *op)
{
    void *tmp = malloc(len ? len : 1);
    int rc = tmp ? gx_xport_mem_copy(tmp, false, buf, true, len) : GX_ENOMEM;
    if (rc == GX_OK)
        xp_on_message(p, XP_MSG_EAGER, tag, tmp, len, -1);
    free(tmp);
    if (rc == GX_OK)
        xp_op_done(p, op);
    else
        xp_op_finish(op, rc);
}

int xp_send_or_queue(struct xp_peer *p, struct xp_op *op)
{
    int rc = GX_OK;
    if (p->conn != XP_CONN_UP || p->wait_head || (rc = start_send(p, op)) == GX_INPROGRESS) {
        queue_push(&p->wait_head, &p->wait_tail, op);
        rc = GX_OK;
    }
    return rc;
}

/* gx_xport_send_mem and _announce, under the lock: `held` before anything
 * can send the request, so no clear-to-send can start its write early. */
static int send_locked(struct gx_xport *x, struct xp_op *op, int peer, uint32_t tag,
                       const void *buf, size_t len, bool dev, bool held)
{
    int rc = check_post(x, peer, "send");
    if (rc != GX_OK)
        return rc;
    init_op(op, XP_OP_SEND, peer, tag, (void *)buf, len);
    op->dev = dev && len;
    op->held = held;
    struct xp_peer *p = &x->peers[peer];
    if (peer == x->rank && op->dev) {
        self_send_dev(p, tag, buf, len, op);
    } else if (peer == x->rank) {
        xp_on_message(p, XP_MSG_EAGER, tag, (void *)buf, len, -1); /* to self: deliver now */
        xp_op_done(p, op);
    } else {
        xp_peer_want(x, peer); /* connects on first use */
        if (p->failed) {
            rc = gx_fail(p->failed, GX_SUB_COLL, "send: no connection with rank %d: %s", peer,
                         gx_last_error());
        } else if (p->conn != XP_CONN_UP || p->wait_head ||
                   (rc = start_send(p, op)) == GX_INPROGRESS) {
            queue_push(&p->wait_head, &p->wait_tail, op);
            rc = GX_OK;
        }
    }
    return rc;
}

int gx_xport_send_mem(struct gx_xport *x, struct xp_op *op, int peer, uint32_t tag,
                      const void *buf, size_t len, bool dev)
{
    pthread_mutex_lock(&x->lock);
    int rc = send_locked(x, op, peer, tag, buf, len, dev, false);
    pthread_mutex_unlock(&x->lock);
    return rc;
}

int gx_xport_send_announce(struct gx_xport *x, struct xp_op *op, int peer, uint32_t tag,
                           const void *buf, size_t len)
{
    pthread_mutex_lock(&x->lock);
    /* Only what goes by rendezvous, and never with a checksum: its request
     * carries the CRC of data that does not exist yet. */
    int rc = GX_EUNSUPPORTED;
    if (peer != x->rank && len > x->eager_limit && !x->checksum && !x->aborted &&
        peer_if_in_range(x, peer))
        rc = send_locked(x, op, peer, tag, buf, len, false, true);
    pthread_mutex_unlock(&x->lock);
    return rc;
}

void gx_xport_send_release(struct gx_xport *x, struct xp_op *op)
{
    pthread_mutex_lock(&x->lock);
    if (op->held && !op->done) {
        op->held = false;
        if (op->t_post)
            op->t_post = gx_trace_now(); /* GX_TRACE: the message from its data on */
        xp_write_release(&x->peers[op->peer], op);
    }
    pthread_mutex_unlock(&x->lock);
}

/* The unexpected message a receive from `p` with `tag` takes, and the one
 * before it in p's queue (NULL if first). */
static struct xp_unexpected *find_unexpected(struct xp_peer *p, uint32_t tag,
                                             struct xp_unexpected **prev_out)
{
    struct xp_unexpected *prev = NULL, *u = p ? p->unexp_head : NULL;
    while (u && u->tag != tag) {
        prev = u;
        u = u->next;
    }
    *prev_out = prev;
    return u;
}

static void take_unexpected(struct xp_peer *p, struct xp_op *op, struct xp_unexpected *u,
                            struct xp_unexpected *prev)
{
    if (prev)
        prev->next = u->next;
    else
        p->unexp_head = u->next;
    if (p->unexp_tail == u)
        p->unexp_tail = prev;
    if (u->type == XP_MSG_EAGER)
        xp_deliver_eager(p, op, u->data, u->len, u->cs);
    else
        xp_start_rndv_recv(p, op, &u->rts, u->cs >= 0);
    free(u);
}

/* XP_ANY_PEER: the message of `tag` that arrived first among every peer's
 * unexpected ones, else wait for the next (while every link is up: a
 * failed link may have been the sender). */
static int recv_any_locked(struct gx_xport *x, struct xp_op *op)
{
    struct xp_peer *from = NULL;
    struct xp_unexpected *u = NULL, *u_prev = NULL;
    for (int q = 0; q < x->size; q++) {
        struct xp_unexpected *prev, *cand = find_unexpected(&x->peers[q], op->tag, &prev);
        if (cand && (!u || cand->arrived < u->arrived)) {
            from = &x->peers[q];
            u = cand;
            u_prev = prev;
        }
    }
    if (u) {
        op->peer = from->rank;
        take_unexpected(from, op, u, u_prev);
        return GX_OK;
    }
    /* It fails when any link fails while it waits (that peer may have been
     * the sender). With connections on demand there may be no link to watch
     * yet: it connects to every peer it has none with. */
    for (int q = 0; q < x->size; q++)
        if (q != x->rank)
            (void)xp_peer_want(x, q);
    for (int q = 0; q < x->size; q++)
        if (x->peers[q].failed)
            return gx_fail(x->peers[q].failed, GX_SUB_COLL, "receive from any rank (tag %u): "
                           "the link to rank %d failed earlier", op->tag, q);
    queue_push(&x->any_head, &x->any_tail, op);
    return GX_OK;
}

int gx_xport_recv_mem(struct gx_xport *x, struct xp_op *op, int peer, uint32_t tag, void *buf,
                      size_t len, bool dev)
{
    pthread_mutex_lock(&x->lock);
    if (peer == XP_ANY_PEER) {
        int rc = x->aborted ? gx_fail(GX_EABORTED, GX_SUB_COLL, "receive: the communicator "
                                      "was aborted") : GX_OK;
        if (rc == GX_OK) {
            init_op(op, XP_OP_RECV, XP_ANY_PEER, tag, buf, len);
            op->dev = dev && len;
            op->posted = ++x->posted_count;
            rc = recv_any_locked(x, op);
        }
        pthread_mutex_unlock(&x->lock);
        return rc;
    }
    struct xp_peer *p = x->aborted ? NULL : peer_if_in_range(x, peer);
    struct xp_unexpected *prev, *u = find_unexpected(p, tag, &prev);
    /* A peer that sent and then left (a broadcast root that exits at once)
     * failed its link, but what it sent whole still counts: an eager
     * message that arrived before the failure is delivered. */
    int rc = u && u->type == XP_MSG_EAGER ? GX_OK : check_post(x, peer, "receive");
    if (rc != GX_OK) {
        pthread_mutex_unlock(&x->lock);
        return rc;
    }
    init_op(op, XP_OP_RECV, peer, tag, buf, len);
    op->dev = dev && len;
    op->posted = ++x->posted_count;
    /* A lower rank starts the connection a receive will need; a higher one
     * leaves it to the sender, so two ranks rarely connect to each other at
     * once (xport_conn.c settles it when they do). */
    if (!u && x->rank < peer && xp_peer_want(x, peer)->failed) {
        rc = gx_fail(p->failed, GX_SUB_COLL, "receive: no connection with rank %d: %s", peer,
                     gx_last_error());
        pthread_mutex_unlock(&x->lock);
        return rc;
    }
    if (!u)
        queue_push(&p->posted_head, &p->posted_tail, op);
    else
        take_unexpected(p, op, u, prev);
    pthread_mutex_unlock(&x->lock);
    return GX_OK;
}
