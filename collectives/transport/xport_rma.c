/*
 * xport_rma.c - one-sided windows, the origin's side (model: xport_svc.h):
 * opening, connecting and closing a window; starting a put, get or
 * accumulate on its path (self, fabric one-sided, active message); the
 * completions, answers and failures that finish it; the per-target counts
 * and first errors a flush reads. The target's side is xport_rma_target.c.
 * Runs under the transport lock (the public entry points take it).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/transport/xport_rma.h"
#include "common/log.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_win_origin_check, "GX_WIN_ORIGIN_CHECK", GX_PARAM_BOOL, "1", NULL,
                "Check a window operation's bounds and alignment on the origin as well, before "
                "anything is sent (the target always checks before it changes anything). 0 "
                "sends it unchecked, so tests reach the target's own check.");

bool xp_rma_origin_checks(void)
{
    bool on = true;
    return gx_param_bool(&gx_param_win_origin_check, &on) == GX_OK ? on : true;
}

struct xp_rma_state *xp_rma_service(struct gx_xport *x)
{
    struct xp_svc *svc = xp_svc_get(x);
    if (svc && !svc->rma)
        svc->rma = calloc(1, sizeof(*svc->rma));
    return svc ? svc->rma : NULL;
}

struct xp_win *xp_rma_find_win(struct gx_xport *x, uint32_t id)
{
    struct xp_rma_state *st = x->svc ? x->svc->rma : NULL;
    for (struct xp_win *w = st ? st->wins : NULL; w; w = w->next)
        if (w->id == id && w->peers)
            return w;
    return NULL;
}

/* ---- finishing an operation ---------------------------------------------- */

void xp_rma_fail(struct xp_rma_op *op, int status, const char *fmt, ...)
{
    if (op->status != GX_OK)
        return; /* the first reason stays */
    char why[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    op->status = status;
    snprintf(op->err, sizeof(op->err), "%s to rank %d (window %u, offset %llu, %zu bytes): %s",
             op->fn, op->target, op->hdr.object, (unsigned long long)op->offset, op->len, why);
    gx_fail(status, GX_SUB_COLL, "%s", op->err);
}

void xp_rma_unwait(struct gx_xport *x, struct xp_rma_op *op)
{
    if (!op->waiting)
        return;
    struct xp_rma_op **pp = &x->svc->rma->waiting[op->id % XP_RMA_BUCKETS];
    while (*pp && *pp != op)
        pp = &(*pp)->wait_next;
    if (*pp)
        *pp = op->wait_next;
    op->waiting = false;
}

static void unlive(struct xp_rma_op *op)
{
    struct xp_win *w = op->win;
    if (op->live_prev)
        op->live_prev->live_next = op->live_next;
    else if (w && w->live == op)
        w->live = op->live_next;
    if (op->live_next)
        op->live_next->live_prev = op->live_prev;
    op->live_prev = op->live_next = NULL;
}

static void record_error(struct xp_win_peer *wp, const struct xp_rma_op *op)
{
    if (wp->error != GX_OK)
        return;
    wp->error = op->status;
    free(wp->error_msg);
    wp->error_msg = strdup(op->err);
}

/* Done once nothing of it is outstanding: counted off its window; freed
 * when the caller let go, its error then kept for the next flush. */
void xp_rma_maybe_complete(struct xp_rma_op *op)
{
    if (op->done || op->msg_pending || op->answer_pending || op->data_pending)
        return;
    struct xp_win *w = op->win;
    if (w) {
        unlive(op);
        struct xp_win_peer *wp = &w->peers[op->target];
        wp->pending--;
        if (op->status != GX_OK && !op->held)
            record_error(wp, op);
    }
    op->win = NULL;
    /* Read held before publishing done: once done is visible, the holder's
     * xp_rma_release may free op without the lock. */
    bool held = op->held;
    __atomic_store_n(&op->done, true, __ATOMIC_RELEASE);
    if (!held)
        free(op);
}

void xp_rma_msg_done(struct xp_op *m)
{
    struct xp_rma_op *op = (struct xp_rma_op *)m; /* msg is first */
    op->msg_pending = false;
    if (m->status != GX_OK) {
        if (op->waiting) {
            xp_rma_unwait(op->x, op);
            op->answer_pending = false;
        }
        xp_rma_fail(op, m->status, "%s", m->err[0] ? m->err : gx_strerror(m->status));
    }
    xp_rma_maybe_complete(op);
}

void xp_rma_data_done(struct xp_op *d)
{
    struct xp_rma_op *op = (struct xp_rma_op *)((char *)d - offsetof(struct xp_rma_op, data));
    op->data_pending = false;
    xp_rma_unwait(op->x, op);
    op->answer_pending = false; /* the write is the answer */
    if (d->status != GX_OK)
        xp_rma_fail(op, d->status, "%s", d->err[0] ? d->err : gx_strerror(d->status));
    xp_rma_maybe_complete(op);
}

void xp_rma_on_answer(struct xp_peer *p, const struct xp_am_hdr *h, const void *body, size_t len)
{
    struct xp_rma_state *st = p->x->svc ? p->x->svc->rma : NULL;
    struct xp_rma_op *op = st ? st->waiting[h->id % XP_RMA_BUCKETS] : NULL;
    while (op && !(op->id == h->id && op->target == p->rank))
        op = op->wait_next;
    if (!op)
        return; /* its window closed meanwhile */
    xp_rma_unwait(p->x, op);
    op->answer_pending = false;
    if (h->status != GX_OK) {
        int n = (int)(len < 200 ? len : 200);
        xp_rma_fail(op, h->status, "refused by rank %d: %.*s", p->rank, n, (const char *)body);
        if (op->data_pending) {
            xp_am_unexpect(p, &op->data);
            op->data_pending = false;
        }
    } else if (op->kind == XP_RMA_GET && !op->data_pending) {
        if (len != op->len)
            xp_rma_fail(op, GX_EPROTO, "rank %d answered with %zu bytes", p->rank, len);
        else if (len)
            memcpy(op->buf, body, len);
    }
    xp_rma_maybe_complete(op);
}

/* ---- windows ---------------------------------------------------------------- */

int xp_win_open(struct gx_xport *x, void *base, size_t size, struct xp_win **out,
                struct xp_win_info *mine)
{
    pthread_mutex_lock(&x->lock);
    memset(mine, 0, sizeof(*mine));
    struct xp_rma_state *st = xp_rma_service(x);
    struct xp_win *w = st ? calloc(1, sizeof(*w)) : NULL;
    int rc = GX_OK;
    if (!w) {
        if (st)
            st->next_win_id++; /* ids stay in step with the other ranks */
        pthread_mutex_unlock(&x->lock);
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "gx_win_create: out of memory");
    }
    w->x = x;
    w->id = ++st->next_win_id;
    w->base = base;
    w->size = size;
    mine->base = (uint64_t)(uintptr_t)base;
    mine->size = size;
    mine->id = w->id;
    mine->pid = (int32_t)getpid();
    bool atomics = x->ndoms > 0;
    for (int i = 0; i < x->ndoms && i < XP_WIN_DOMAINS && rc == GX_OK; i++) {
        struct gx_fab_domain *dom = x->doms[i].dom;
        if (!(dom->caps & GX_FAB_CAP_ATOMIC))
            atomics = false;
        if (!(dom->caps & GX_FAB_CAP_RMA) || size == 0)
            continue;
        unsigned access = GX_FAB_ACCESS_LOCAL | GX_FAB_ACCESS_REMOTE_WRITE |
                          GX_FAB_ACCESS_REMOTE_READ |
                          ((dom->caps & GX_FAB_CAP_ATOMIC) ? GX_FAB_ACCESS_REMOTE_ATOMIC : 0);
        rc = gx_fab_mr_reg(dom, base, size, GX_FAB_MEM_HOST, access, &w->mr[i]);
        if (rc == GX_OK)
            rc = gx_fab_mr_pack_rkey(w->mr[i], &mine->rkey[i]);
        if (rc != GX_OK)
            rc = gx_fail(rc, GX_SUB_COLL, "gx_win_create: registering the %zu-byte window at %p "
                         "with %s failed: %s", size, base, x->doms[i].prov->name,
                         gx_last_error());
    }
    if (atomics)
        mine->flags |= XP_WIN_INFO_ATOMICS;
    if (rc != GX_OK) {
        for (int i = 0; i < XP_WIN_DOMAINS; i++)
            gx_fab_mr_dereg(w->mr[i]);
        free(w);
        pthread_mutex_unlock(&x->lock);
        return rc;
    }
    w->next = st->wins;
    st->wins = w;
    pthread_mutex_unlock(&x->lock);
    *out = w;
    return GX_OK;
}

int xp_win_connect(struct xp_win *w, const struct xp_win_info *all)
{
    struct gx_xport *x = w->x;
    struct xp_win_peer *peers = calloc((size_t)x->size, sizeof(*peers));
    if (!peers)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "gx_win_create: out of memory");
    bool atomics = true;
    for (int r = 0; r < x->size; r++) {
        if (all[r].id != w->id) {
            free(peers);
            return gx_fail(GX_EMISMATCH, GX_SUB_COLL, "gx_win_create: rank %d made its window "
                           "number %u, this rank %d its number %u (every rank must create the "
                           "same windows in the same order)", r, all[r].id, x->rank, w->id);
        }
        atomics &= (all[r].flags & XP_WIN_INFO_ATOMICS) != 0;
    }
    pthread_mutex_lock(&x->lock);
    for (int r = 0; r < x->size; r++) {
        struct xp_win_peer *wp = &peers[r];
        struct xp_peer *p = xp_svc_peer(x, r);
        wp->info = all[r];
        wp->path = XP_PATH_AM;
        if (r == x->rank) {
            wp->path = XP_PATH_SELF;
        } else if (p && p->d) {
            int di = (int)(p->d - x->doms);
            wp->domain = (uint8_t)di;
            if (di < XP_WIN_DOMAINS && (p->d->dom->caps & GX_FAB_CAP_RMA) &&
                all[r].rkey[di].len > 0)
                wp->path = XP_PATH_FABRIC;
        }
    }
    w->peers = peers;
    w->atomics = atomics && x->size > 1;
    pthread_mutex_unlock(&x->lock);
    return GX_OK;
}

uint32_t xp_win_id(const struct xp_win *w)
{
    return w->id;
}

bool xp_rma_atomic_eligible(const struct xp_win *w, const struct xp_rma_op *op)
{
    int dt = op->hdr.dtype;
    return w->atomics && op->kind == XP_RMA_ACC && op->hdr.redop == GX_SUM && op->len == 8 &&
           (dt == GX_INT64 || dt == GX_UINT64);
}

const char *xp_win_path(const struct xp_win *w, int target, bool accumulate)
{
    if (target < 0 || target >= w->x->size || !w->peers)
        return "none";
    const struct xp_win_peer *wp = &w->peers[target];
    if (wp->path == XP_PATH_SELF)
        return "self";
    if (accumulate)
        return w->atomics && wp->path == XP_PATH_FABRIC ? "fabric atomics (8-byte sums), am"
                                                         : "am";
    return wp->path == XP_PATH_FABRIC ? "fabric" : "am";
}

static void fail_unposted(struct xp_rma_op *op, int status, const char *why)
{
    op->msg_pending = false;
    xp_rma_fail(op, status, "%s", why);
    xp_rma_maybe_complete(op);
}

/* A window's own memory: its registrations, per-peer errors, itself. */
static void win_dispose(struct gx_xport *x, struct xp_win *w)
{
    for (int i = 0; i < XP_WIN_DOMAINS; i++)
        gx_fab_mr_dereg(w->mr[i]);
    for (int r = 0; w->peers && r < x->size; r++)
        free(w->peers[r].error_msg);
    free(w->peers);
    free(w);
}

void xp_win_close(struct xp_win *w)
{
    struct gx_xport *x = w->x;
    pthread_mutex_lock(&x->lock);
    for (int r = 0; w->peers && r < x->size; r++) {
        struct xp_win_peer *wp = &w->peers[r];
        while (wp->deferred_head) {
            struct xp_rma_op *op = wp->deferred_head;
            wp->deferred_head = op->defer_next;
            fail_unposted(op, GX_EABORTED, "its window was freed before it started");
        }
    }
    /* What is still in flight finishes without the window and frees itself. */
    while (w->live) {
        struct xp_rma_op *op = w->live;
        unlive(op);
        xp_rma_unwait(x, op);
        if (op->data_pending)
            xp_am_unexpect(xp_svc_peer(x, op->target), &op->data);
        op->answer_pending = op->data_pending = false;
        xp_rma_fail(op, GX_EABORTED, "its window was freed before it completed");
        op->win = NULL;
        xp_rma_maybe_complete(op);
    }
    struct xp_rma_state *st = x->svc->rma;
    for (struct xp_win **pp = &st->wins; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    win_dispose(x, w);
    pthread_mutex_unlock(&x->lock);
}

void xp_rma_free(struct gx_xport *x)
{
    struct xp_rma_state *st = x->svc->rma;
    if (!st)
        return;
    while (st->wins) { /* a window never freed by its owner */
        struct xp_win *w = st->wins;
        st->wins = w->next;
        while (w->live) {
            struct xp_rma_op *op = w->live;
            unlive(op);
            op->win = NULL;
        }
        win_dispose(x, w);
    }
    free(st);
    x->svc->rma = NULL;
}
