/*
 * xport_rma_ops.c - a window operation from the origin's side (model:
 * xport_svc.h): the origin's check, the choice of path and the start on it
 * (in place for this rank's own window, one-sided fabric ops with at most
 * XP_RMA_FABRIC_WINDOW in flight per target, or an active message), the
 * fabric's completions, a broken link, and what the caller reads: the
 * operation's state and a flush's count. Windows and answers are
 * xport_rma.c; the target's side is xport_rma_target.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/transport/xport_rma.h"
#include "common/log.h"

/* The origin's check against what the target published. */
static int origin_check(const struct xp_win *w, const struct xp_rma_args *a, size_t len)
{
    const struct xp_win_info *t = &w->peers[a->target].info;
    size_t es = gx_datatype_size((enum gx_datatype)a->dtype);
    if (a->offset > t->size || len > t->size - a->offset)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s to rank %d, window %u, offset %llu: %zu bytes "
                       "do not fit: rank %d's window has %llu bytes", a->fn, a->target, w->id,
                       (unsigned long long)a->offset, len, a->target,
                       (unsigned long long)t->size);
    if (es > 1 && (t->base + a->offset) % es != 0)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s to rank %d, window %u, offset %llu: the "
                       "target address is not aligned to the %zu-byte %s elements", a->fn,
                       a->target, w->id, (unsigned long long)a->offset, es,
                       gx_datatype_name((enum gx_datatype)a->dtype));
    return GX_OK;
}

static void do_self(struct xp_win *w, struct xp_rma_op *op)
{
    char why[200];
    if (xp_rma_target_check(w, &op->hdr, why, sizeof(why)) != GX_OK) {
        xp_rma_fail(op, GX_EINVAL, "refused by rank %d: %s", op->target, why);
        return;
    }
    char *at = w->base + op->offset;
    if (op->kind == XP_RMA_PUT)
        memmove(at, op->buf, op->len);
    else if (op->kind == XP_RMA_GET)
        memmove(op->buf, at, op->len);
    else
        xp_rma_apply(at, op->buf, op->len / gx_datatype_size(op->hdr.dtype), op->hdr.dtype,
                     op->hdr.redop, w->atomics);
}

/* ---- the fabric path ----------------------------------------------------- */

static int fabric_issue(struct xp_win *w, struct xp_rma_op *op)
{
    struct xp_win_peer *wp = &w->peers[op->target];
    struct xp_peer *p = xp_svc_peer(w->x, op->target);
    const struct gx_fab_rkey *rkey = &wp->info.rkey[wp->domain];
    uint64_t raddr = wp->info.base + op->offset;
    uint64_t ctx = (uint64_t)(uintptr_t)op;
    int rc;
    op->msg.ctx_type = XP_CTX_RMA;
    if (op->kind == XP_RMA_PUT) {
        rc = gx_fab_post_write(p->ep, op->buf, op->len, NULL, raddr, rkey, ctx);
    } else if (op->kind == XP_RMA_GET) {
        rc = gx_fab_post_read(p->ep, op->buf, op->len, NULL, raddr, rkey, ctx);
    } else {
        uint64_t v;
        memcpy(&v, op->buf, sizeof(v));
        rc = gx_fab_post_atomic(p->ep, GX_FAB_ATOMIC_FETCH_ADD, v, 0, &op->atomic_result, raddr,
                                rkey, ctx);
    }
    if (rc == GX_OK)
        wp->fabric_inflight++;
    return rc;
}

static void fabric_kick(struct xp_win *w, int target)
{
    struct xp_win_peer *wp = &w->peers[target];
    struct xp_peer *p = xp_svc_peer(w->x, target);
    if (p->conn != XP_CONN_UP || p->failed)
        return; /* xp_rma_peer_up or xp_rma_peer_failed takes them */
    while (wp->deferred_head && wp->fabric_inflight < XP_RMA_FABRIC_WINDOW) {
        struct xp_rma_op *op = wp->deferred_head;
        wp->deferred_head = op->defer_next;
        if (!wp->deferred_head)
            wp->deferred_tail = NULL;
        op->defer_next = NULL;
        int rc = fabric_issue(w, op);
        if (rc != GX_OK) {
            op->msg_pending = false;
            xp_rma_fail(op, rc, "posting it failed: %s", gx_last_error());
            xp_rma_maybe_complete(op);
        }
    }
}

static int fabric_start(struct xp_win *w, struct xp_rma_op *op)
{
    struct xp_win_peer *wp = &w->peers[op->target];
    op->msg_pending = true;
    struct xp_peer *p = xp_svc_peer(w->x, op->target);
    if (p->conn == XP_CONN_UP && wp->fabric_inflight < XP_RMA_FABRIC_WINDOW &&
        !wp->deferred_head) {
        int rc = fabric_issue(w, op);
        if (rc != GX_OK)
            op->msg_pending = false;
        return rc;
    }
    if (wp->deferred_tail)
        wp->deferred_tail->defer_next = op;
    else
        wp->deferred_head = op;
    wp->deferred_tail = op;
    return GX_OK;
}

void xp_rma_fabric_done(struct gx_xport *x, const struct gx_fab_cqe *e)
{
    struct xp_rma_op *op = (struct xp_rma_op *)(uintptr_t)e->context;
    struct xp_win *w = op->win;
    struct xp_peer *p = xp_svc_peer(x, op->target);
    op->msg_pending = false;
    if (w)
        w->peers[op->target].fabric_inflight--;
    if (e->status != GX_OK) {
        xp_rma_fail(op, e->status, "the one-sided %s failed on %s (%s)",
                    gx_fab_op_name(e->op), p && p->ep ? gx_fab_ep_name(p->ep) : "its endpoint",
                    gx_strerror(e->status));
        if (p && !p->failed)
            xp_fail_peer(p, e->status, "a one-sided operation failed");
    }
    int target = op->target; /* op may be freed by its holder once it is done */
    xp_rma_maybe_complete(op);
    if (w && e->status == GX_OK)
        fabric_kick(w, target);
}

/* ---- the active-message path --------------------------------------------- */

static void wait_for_answer(struct gx_xport *x, struct xp_rma_op *op)
{
    struct xp_rma_op **b = &x->svc->rma->waiting[op->id % XP_RMA_BUCKETS];
    op->wait_next = *b;
    *b = op;
    op->waiting = true;
    op->answer_pending = true;
}

static int am_start(struct xp_win *w, struct xp_rma_op *op)
{
    struct gx_xport *x = w->x;
    struct xp_peer *p = xp_svc_peer(x, op->target);
    const void *body = op->buf;
    size_t blen = op->len;
    if (op->kind == XP_RMA_GET) {
        body = NULL;
        blen = 0;
        if (op->len > x->eager_limit - sizeof(struct xp_am_hdr)) {
            /* Large: the target writes it straight into our buffer. */
            int rc = xp_am_expect_write(p, &op->data, op->buf, op->len, xp_rma_data_done,
                                        &op->dest.imm, &op->dest.rkey);
            if (rc != GX_OK)
                return rc;
            op->dest.raddr = (uint64_t)(uintptr_t)op->buf;
            op->data_pending = true;
            body = &op->dest;
            blen = sizeof(op->dest);
        }
    }
    xp_am_op_init(&op->msg, op->target, &op->hdr, body, blen, xp_rma_msg_done);
    op->msg_pending = true;
    wait_for_answer(x, op);
    int rc = xp_am_send(p, &op->msg);
    if (rc != GX_OK) {
        op->msg_pending = false;
        xp_rma_unwait(x, op);
        op->answer_pending = false;
        if (op->data_pending)
            xp_am_unexpect(p, &op->data);
        op->data_pending = false;
    }
    return rc;
}

/* ---- starting ------------------------------------------------------------ */

int xp_rma_start(struct xp_win *w, const struct xp_rma_args *a, struct xp_rma_op **out)
{
    struct gx_xport *x = w->x;
    size_t len = a->count * gx_datatype_size((enum gx_datatype)a->dtype);
    pthread_mutex_lock(&x->lock);
    /* GX_WIN_ORIGIN_CHECK=0 lets only active messages through unchecked:
     * nothing at the target could check a one-sided fabric operation's
     * alignment (its registration checks the bounds). */
    bool am = a->target != x->rank && w->peers[a->target].path != XP_PATH_FABRIC;
    int rc = xp_rma_origin_checks() || !am ? origin_check(w, a, len) : GX_OK;
    if (rc == GX_OK && a->target != x->rank)
        rc = xp_svc_check_peer(x, a->target, a->fn);
    struct xp_rma_op *op = rc == GX_OK ? calloc(1, sizeof(*op)) : NULL;
    if (rc == GX_OK && !op)
        rc = gx_fail(GX_ENOMEM, GX_SUB_COLL, "%s: out of memory", a->fn);
    if (rc != GX_OK) {
        pthread_mutex_unlock(&x->lock);
        return rc;
    }
    op->x = x;
    op->win = w;
    op->kind = (uint8_t)a->kind;
    op->target = a->target;
    op->buf = a->buf;
    op->len = len;
    op->offset = a->offset;
    op->fn = a->fn;
    op->id = ++x->svc->next_id;
    op->held = true;
    op->hdr = (struct xp_am_hdr){ .service = XP_SVC_RMA, .kind = (uint8_t)a->kind,
                                  .object = w->id, .id = op->id, .offset = a->offset,
                                  .len = len, .dtype = (uint16_t)a->dtype,
                                  .redop = (uint16_t)a->redop };
    op->live_next = w->live;
    if (w->live)
        w->live->live_prev = op;
    w->live = op;
    struct xp_win_peer *wp = &w->peers[a->target];
    wp->pending++;
    if (len == 0 || wp->path == XP_PATH_SELF) {
        if (len)
            do_self(w, op);
    } else if ((wp->path == XP_PATH_FABRIC && op->kind != XP_RMA_ACC) ||
               (wp->path == XP_PATH_FABRIC && xp_rma_atomic_eligible(w, op))) {
        rc = fabric_start(w, op);
    } else {
        rc = am_start(w, op);
    }
    if (rc != GX_OK) { /* nothing was started: undo */
        rc = gx_fail(rc, GX_SUB_COLL, "%s to rank %d (window %u, offset %llu): %s", a->fn,
                     a->target, w->id, (unsigned long long)a->offset, gx_last_error());
        op->status = rc; /* held: counted off, not kept for a flush */
        xp_rma_maybe_complete(op);
        pthread_mutex_unlock(&x->lock);
        free(op);
        return rc;
    }
    xp_rma_maybe_complete(op);
    pthread_mutex_unlock(&x->lock);
    *out = op;
    return GX_OK;
}

/* ---- what the caller reads ------------------------------------------------ */

void xp_rma_op_state(struct xp_rma_op *op, bool *local, bool *done, int *status, const char **err)
{
    *done = __atomic_load_n(&op->done, __ATOMIC_ACQUIRE);
    if (!*done) {
        pthread_mutex_lock(&op->x->lock);
        *local = op->kind != XP_RMA_GET && !op->msg_pending;
        pthread_mutex_unlock(&op->x->lock);
    } else {
        *local = true;
    }
    *status = *done ? op->status : GX_OK;
    *err = *done ? op->err : "";
}

void xp_rma_release(struct xp_rma_op *op)
{
    if (__atomic_load_n(&op->done, __ATOMIC_ACQUIRE)) {
        free(op); /* the transport let go of it when it was done */
        return;
    }
    struct gx_xport *x = op->x;
    pthread_mutex_lock(&x->lock);
    if (op->done) {
        pthread_mutex_unlock(&x->lock);
        free(op);
        return;
    }
    op->held = false;
    pthread_mutex_unlock(&x->lock);
}

int xp_win_pending(struct xp_win *w, int target, uint64_t *count, char *msg, size_t msg_len)
{
    struct gx_xport *x = w->x;
    pthread_mutex_lock(&x->lock);
    uint64_t n = 0;
    int lo = target < 0 ? 0 : target, hi = target < 0 ? x->size : target + 1;
    for (int r = lo; r < hi; r++)
        n += w->peers[r].pending;
    int status = GX_OK;
    if (n == 0) {
        for (int r = lo; r < hi; r++) {
            struct xp_win_peer *wp = &w->peers[r];
            if (wp->error != GX_OK && status == GX_OK) {
                status = wp->error;
                snprintf(msg, msg_len, "%s", wp->error_msg ? wp->error_msg : "");
            }
            wp->error = GX_OK;
            free(wp->error_msg);
            wp->error_msg = NULL;
        }
    }
    pthread_mutex_unlock(&x->lock);
    *count = n;
    return status;
}

/* ---- a connection made, a broken link ------------------------------------- */

void xp_rma_peer_up(struct xp_peer *p)
{
    struct xp_rma_state *st = p->x->svc->rma;
    for (struct xp_win *w = st ? st->wins : NULL; w; w = w->next)
        if (w->peers && w->peers[p->rank].deferred_head)
            fabric_kick(w, p->rank);
}

void xp_rma_peer_failed(struct xp_peer *p, int status, const char *why)
{
    struct xp_rma_state *st = p->x->svc->rma;
    for (struct xp_win *w = st ? st->wins : NULL; w; w = w->next) {
        if (!w->peers)
            continue;
        struct xp_win_peer *wp = &w->peers[p->rank];
        while (wp->deferred_head) {
            struct xp_rma_op *op = wp->deferred_head;
            wp->deferred_head = op->defer_next;
            op->msg_pending = false;
            xp_rma_fail(op, status, "the link to rank %d broke: %s", p->rank, why);
            xp_rma_maybe_complete(op);
        }
        wp->deferred_tail = NULL;
        for (struct xp_rma_op *op = w->live, *next; op; op = next) {
            next = op->live_next;
            if (op->target != p->rank || !op->answer_pending)
                continue;
            xp_rma_unwait(p->x, op);
            op->answer_pending = false;
            if (op->data_pending)
                xp_am_unexpect(p, &op->data);
            op->data_pending = false;
            xp_rma_fail(op, status, "the link to rank %d broke: %s", p->rank, why);
            xp_rma_maybe_complete(op);
        }
    }
}

void xp_rma_arrived(struct xp_peer *p, const struct xp_am_hdr *h, const void *body, size_t len,
                    const struct xp_rts *rts, bool crc)
{
    if (h->kind == XP_RMA_ANSWER && !rts)
        xp_rma_on_answer(p, h, body, len);
    else
        xp_rma_on_request(p, h, body, len, rts, crc);
}
