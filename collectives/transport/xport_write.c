/*
 * xport_write.c - the rendezvous's writes (see xport.h) and their window
 * (GX_WRITE_WINDOW).
 *
 * A rendezvous write goes into the same ordered connection as everything
 * else this rank sends the peer, its own clear-to-sends included. Unbounded,
 * a pipeline's writes (a tree's reduction chunks) or one large write (a
 * recursive-halving step's half) sit ahead of the CTS the peer needs before
 * it can write back, and the two directions of a full-duplex link run one
 * after the other. With a window W, at most W bytes of writes are in flight
 * per peer: cleared sends wait in the order their CTS came, and a send
 * larger than W is written in pieces of W, each a write-with-immediate of
 * the same receive (the receiver completes it when its bytes have all
 * landed, xport_match.c). Pieces of one connection complete in post order,
 * so the oldest outstanding piece is the one a completion reports.
 *
 * The default window bounds stream providers only (GX_FAB_CAP_STREAM, tcp:
 * completion when the stream took the bytes, so a window costs no round
 * trip); set explicitly, it applies to every provider. Runs under the
 * transport lock.
 */
#include <stdlib.h>

#include "collectives/transport/xport_internal.h"
#include "common/log.h"

/* The piece of `op` that starts at `off`. */
static size_t piece_len(const struct xp_peer *p, const struct xp_op *op, size_t off)
{
    size_t w = p->d->write_window, rest = op->len - off;
    return w && rest > w ? w : rest;
}

static void release(struct xp_peer *p, struct xp_op *op)
{
    if (op->reg)
        gx_fab_rcache_put(p->d->rcache_send, op->reg);
    op->reg = NULL;
}

/* Post the next piece of `op`; GX_OK or the post's error. */
static int post_piece(struct xp_peer *p, struct xp_op *op, const struct xp_cts *cts)
{
    int rc = GX_OK;
    if (!op->reg) {
        struct gx_fab_rcache_entry *e = NULL;
        rc = xp_take_injected_regfail(p->x);
        if (rc == GX_OK)
            rc = gx_fab_rcache_get(p->d->rcache_send, op->buf, op->len,
                                   op->dev ? GX_FAB_MEM_CUDA : GX_FAB_MEM_HOST, &e);
        if (rc != GX_OK)
            return rc;
        op->reg = e;
        op->state = XP_ST_WRITING;
    }
    size_t off = op->wr_posted, n = piece_len(p, op, off);
    rc = gx_fab_post_write_imm(p->ep, (char *)op->buf + off, n,
                               gx_fab_rcache_handle((struct gx_fab_rcache_entry *)op->reg),
                               cts->raddr + off, &cts->rkey, cts->recv_id,
                               (uint64_t)(uintptr_t)op);
    if (rc != GX_OK)
        return rc;
    op->wr_posted += n;
    p->wr_inflight += n;
    return GX_OK;
}

static void fail_now(struct xp_peer *p, struct xp_op *op, int status)
{
    release(p, op);
    xp_op_fail(op, status, "rank %d: writing %zu bytes to rank %d failed%s%s", p->x->rank,
               op->len, p->rank, p->ep ? " on " : "", p->ep ? gx_fab_ep_name(p->ep) : "");
}

static bool remove_from_queue(struct xp_peer *p, struct xp_op *op)
{
    for (int i = 0; i < p->wq_count; i++) {
        if (p->wq[(p->wq_head + i) % p->wq_cap].op != op)
            continue;
        for (int j = i; j + 1 < p->wq_count; j++)
            p->wq[(p->wq_head + j) % p->wq_cap] = p->wq[(p->wq_head + j + 1) % p->wq_cap];
        p->wq_count--;
        return true;
    }
    return false;
}

static void pop_head(struct xp_peer *p)
{
    p->wq_head = (p->wq_head + 1) % p->wq_cap;
    p->wq_count--;
}

void xp_write_start(struct xp_peer *p, struct xp_op *op, const struct xp_cts *cts)
{
    if (p->wq_count == p->wq_cap) {
        /* Grows with the sends cleared ahead of the window, like p->ctl. */
        int cap = p->wq_cap ? 2 * p->wq_cap : 16;
        struct xp_write_wait *bigger = malloc((size_t)cap * sizeof(*bigger));
        if (!bigger) {
            xp_op_fail(op, GX_ENOMEM, "rank %d: no memory to queue a write to rank %d",
                       p->x->rank, p->rank);
            return;
        }
        for (int i = 0; i < p->wq_count; i++)
            bigger[i] = p->wq[(p->wq_head + i) % p->wq_cap];
        free(p->wq);
        p->wq = bigger;
        p->wq_cap = cap;
        p->wq_head = 0;
    }
    struct xp_write_wait *w = &p->wq[(p->wq_head + p->wq_count++) % p->wq_cap];
    w->op = op;
    w->cts = *cts;
    xp_write_pending(p);
}

void xp_write_pending(struct xp_peer *p)
{
    size_t window = p->d->write_window;
    while (p->wq_count > 0 && !p->failed) {
        struct xp_write_wait *w = &p->wq[p->wq_head];
        struct xp_op *op = w->op;
        size_t n = piece_len(p, op, op->wr_posted);
        if (window && p->wr_inflight > 0 && p->wr_inflight + n > window)
            return; /* a piece's completion calls again */
        int rc = post_piece(p, op, &w->cts);
        if (rc != GX_OK) {
            pop_head(p);
            if (op->wr_posted > op->wr_done)
                op->wr_error = rc; /* fails when its pieces in flight are back */
            else
                fail_now(p, op, rc);
            continue;
        }
        if (op->wr_posted == op->len)
            pop_head(p);
    }
}

void xp_write_cqe(struct xp_peer *p, struct xp_op *op, const struct gx_fab_cqe *e)
{
    size_t n = piece_len(p, op, op->wr_done);
    op->wr_done += n;
    p->wr_inflight -= n;
    if (e->status != GX_OK) {
        if (!op->wr_error)
            op->wr_error = e->status;
        remove_from_queue(p, op); /* no more pieces of it */
        int status = e->status;
        if (op->wr_done == op->wr_posted)
            fail_now(p, op, status); /* may free op */
        xp_fail_peer(p, status, "the link broke");
        return;
    }
    if (op->wr_done < op->wr_posted)
        return; /* more of its pieces in flight */
    if (op->wr_error) {
        fail_now(p, op, op->wr_error);
        return;
    }
    if (op->wr_done == op->len) {
        release(p, op);
        xp_op_done(p, op); /* may free op */
    }
    xp_write_pending(p);
}

bool xp_write_unqueue(struct xp_peer *p, struct xp_op *op)
{
    return !op->wr_posted && remove_from_queue(p, op); /* else it has started writing */
}

void xp_write_hold(struct xp_peer *p, struct xp_op *op, const struct xp_cts *cts)
{
    if (p->held_count == p->held_cap) {
        /* Grows with the sends announced ahead of their data (GX_RTS_AHEAD). */
        int cap = p->held_cap ? 2 * p->held_cap : 16;
        struct xp_write_wait *bigger = realloc(p->held, (size_t)cap * sizeof(*bigger));
        if (!bigger) {
            xp_op_fail(op, GX_ENOMEM, "rank %d: no memory to hold a send to rank %d",
                       p->x->rank, p->rank);
            return;
        }
        p->held = bigger;
        p->held_cap = cap;
    }
    p->held[p->held_count].op = op;
    p->held[p->held_count++].cts = *cts;
}

void xp_write_release(struct xp_peer *p, struct xp_op *op)
{
    for (int i = 0; i < p->held_count; i++) {
        if (p->held[i].op != op)
            continue;
        struct xp_cts cts = p->held[i].cts;
        p->held[i] = p->held[--p->held_count]; /* the order of held sends does not matter */
        xp_write_start(p, op, &cts);
        return;
    }
}

void xp_write_fail_all(struct xp_peer *p, int status, const char *why)
{
    while (p->held_count > 0) {
        struct xp_op *op = p->held[--p->held_count].op;
        xp_op_fail(op, status, "rank %d: send to rank %d (tag %u) failed before its data was "
                   "ready: %s", p->x->rank, p->rank, op->tag, why);
    }
    while (p->wq_count > 0) {
        struct xp_op *op = p->wq[p->wq_head].op;
        pop_head(p);
        if (op->wr_posted > op->wr_done) {
            if (!op->wr_error)
                op->wr_error = status; /* its last piece's completion fails it */
            continue;
        }
        release(p, op);
        xp_op_fail(op, status, "rank %d: %s to rank %d (tag %u) failed before it wrote: %s",
                   p->x->rank, op->kind == XP_OP_AM ? "active message" : "send", p->rank,
                   op->tag, why);
    }
}
