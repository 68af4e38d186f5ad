/*
 * xport_rma_target.c - a window operation from the target's side (model:
 * xport_svc.h): the check of a request against this rank's own window
 * (which window, bounds, alignment, datatype, operation) before anything
 * changes, applying a put or an accumulate, serving a get (in the answer,
 * or written straight into the origin's buffer when large), and the answer
 * that completes the origin's operation. Runs under the transport lock, in
 * whichever thread polls the transport (the gx service thread, the engine's
 * progress thread, or a caller's wait): the target's user code is never
 * needed. Accumulates are applied one request at a time under that lock,
 * which makes them atomic per element with respect to each other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/reduce/reduce.h"
#include "collectives/transport/xport_rma.h"
#include "common/log.h"

int xp_rma_target_check(const struct xp_win *w, const struct xp_am_hdr *h, char *why,
                        size_t why_len)
{
    size_t es = gx_datatype_size((enum gx_datatype)h->dtype);
    uintptr_t at = (uintptr_t)w->base + (uintptr_t)h->offset;
    if (h->kind != XP_RMA_PUT && h->kind != XP_RMA_GET && h->kind != XP_RMA_ACC)
        snprintf(why, why_len, "unknown window operation %u", (unsigned)h->kind);
    else if (es == 0)
        snprintf(why, why_len, "datatype %u is not a gx datatype", (unsigned)h->dtype);
    else if (h->offset > w->size || h->len > w->size - h->offset)
        snprintf(why, why_len, "%llu bytes at offset %llu do not fit in its %zu-byte window %u",
                 (unsigned long long)h->len, (unsigned long long)h->offset, w->size, w->id);
    else if (h->len % es != 0)
        snprintf(why, why_len, "%llu bytes are not whole %zu-byte %s elements",
                 (unsigned long long)h->len, es, gx_datatype_name((enum gx_datatype)h->dtype));
    else if (h->len && at % es != 0)
        snprintf(why, why_len, "offset %llu of window %u is not aligned to its %zu-byte %s "
                 "elements", (unsigned long long)h->offset, w->id, es,
                 gx_datatype_name((enum gx_datatype)h->dtype));
    else if (h->kind == XP_RMA_ACC && h->redop != GX_SUM && h->redop != GX_PROD &&
             h->redop != GX_MIN && h->redop != GX_MAX && h->redop != GX_REPLACE)
        snprintf(why, why_len, "accumulate operation %u is not sum, prod, min, max or replace",
                 (unsigned)h->redop);
    else
        return GX_OK;
    return GX_EINVAL;
}

static uint64_t combine_u64(uint64_t old, uint64_t v, int dtype, int redop)
{
    bool sgn = dtype == GX_INT64;
    switch (redop) {
    case GX_SUM: return old + v;
    case GX_PROD: return old * v;
    case GX_MIN: return (sgn ? (int64_t)v < (int64_t)old : v < old) ? v : old;
    case GX_MAX: return (sgn ? (int64_t)v > (int64_t)old : v > old) ? v : old;
    default: return v; /* GX_REPLACE */
    }
}

void xp_rma_apply(char *dst, const void *src, size_t count, int dtype, int redop, bool atomics)
{
    size_t es = gx_datatype_size((enum gx_datatype)dtype);
    if (atomics && (dtype == GX_INT64 || dtype == GX_UINT64)) {
        /* The HCA's atomics reach these words too: CPU atomics, so both
         * are atomic with respect to each other (GX_FAB_CAP_ATOMIC). */
        for (size_t i = 0; i < count; i++) {
            uint64_t v, *d = (uint64_t *)(void *)(dst + 8 * i);
            memcpy(&v, (const char *)src + 8 * i, 8);
            uint64_t old = __atomic_load_n(d, __ATOMIC_RELAXED);
            while (!__atomic_compare_exchange_n(d, &old, combine_u64(old, v, dtype, redop), true,
                                                __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
            }
        }
        return;
    }
    if (redop == GX_REPLACE) {
        memmove(dst, src, count * es);
        return;
    }
    gx_reduce_fn fn;
    if (gx_reduce_lookup((enum gx_datatype)dtype, (enum gx_redop)redop, &fn) == GX_OK)
        fn(dst, src, count);
}

static void answer(struct xp_peer *p, const struct xp_am_hdr *req, int status, const void *body,
                   size_t len)
{
    struct xp_am_hdr a = { .service = XP_SVC_RMA, .kind = XP_RMA_ANSWER, .object = req->object,
                           .id = req->id, .status = status };
    (void)xp_am_answer(p, &a, body, len, NULL); /* a broken link already failed the origin */
}

/* A large put or accumulate whose body is on its way. */
struct body_op {
    struct xp_op op;
    struct xp_am_hdr h;
    struct gx_xport *x;
    char data[]; /* accumulate: the origin's elements */
};

static void body_done(struct xp_op *op)
{
    struct body_op *b = (struct body_op *)op;
    struct xp_peer *p = xp_svc_peer(b->x, op->peer);
    int status = op->status;
    char why[200] = "";
    if (status == GX_OK && b->h.kind == XP_RMA_ACC) {
        struct xp_win *w = xp_rma_find_win(b->x, b->h.object);
        status = w ? xp_rma_target_check(w, &b->h, why, sizeof(why)) : GX_EINVAL;
        if (!w)
            snprintf(why, sizeof(why), "window %u was freed meanwhile", b->h.object);
        if (status == GX_OK)
            xp_rma_apply(w->base + b->h.offset, b->data,
                         b->h.len / gx_datatype_size((enum gx_datatype)b->h.dtype), b->h.dtype,
                         b->h.redop, w->atomics);
    } else if (status != GX_OK) {
        snprintf(why, sizeof(why), "%s", op->err);
    }
    if (p && !p->failed)
        answer(p, &b->h, status, why, status == GX_OK ? 0 : strlen(why) + 1);
    free(b);
}

void xp_rma_on_request(struct xp_peer *p, const struct xp_am_hdr *h, const void *body,
                       size_t len, const struct xp_rts *rts, bool crc)
{
    struct gx_xport *x = p->x;
    struct xp_win *w = xp_rma_find_win(x, h->object);
    char why[200];
    int st = GX_EINVAL;
    if (!w)
        snprintf(why, sizeof(why), "rank %d has no window %u (not created yet, or freed)",
                 x->rank, h->object);
    else
        st = xp_rma_target_check(w, h, why, sizeof(why));
    bool large_get = h->kind == XP_RMA_GET && len == sizeof(struct xp_rma_get_dest);
    if (st == GX_OK && ((rts && (h->kind == XP_RMA_GET || rts->size != h->len)) ||
                        (!rts && h->kind != XP_RMA_GET && len != h->len) ||
                        (h->kind == XP_RMA_GET && len != 0 && !large_get))) {
        st = GX_EPROTO;
        snprintf(why, sizeof(why), "a malformed request (%zu bytes for %llu)", len,
                 (unsigned long long)h->len);
    }
    if (st != GX_OK) {
        GX_INFO(GX_SUB_COLL, "rank %d refused a window operation of rank %d: %s", x->rank,
                p->rank, why);
        answer(p, h, st, why, strlen(why) + 1);
        if (rts)
            xp_am_refuse_body(p, rts, st);
        return;
    }
    char *at = w->base + h->offset;
    if (rts) { /* a large put lands in place; a large accumulate beside it first */
        bool acc = h->kind == XP_RMA_ACC;
        struct body_op *b = malloc(sizeof(*b) + (acc ? (size_t)h->len : 0));
        if (!b) {
            snprintf(why, sizeof(why), "rank %d is out of memory", x->rank);
            answer(p, h, GX_ENOMEM, why, strlen(why) + 1);
            xp_am_refuse_body(p, rts, GX_ENOMEM);
            return;
        }
        b->h = *h;
        b->x = x;
        xp_am_take_body(p, &b->op, rts, crc, acc ? b->data : at, body_done);
        return;
    }
    if (h->kind == XP_RMA_PUT) {
        if (len)
            memcpy(at, body, len);
        answer(p, h, GX_OK, NULL, 0);
    } else if (h->kind == XP_RMA_ACC) {
        xp_rma_apply(at, body, len / gx_datatype_size((enum gx_datatype)h->dtype), h->dtype,
                     h->redop, w->atomics);
        answer(p, h, GX_OK, NULL, 0);
    } else if (!large_get) {
        answer(p, h, GX_OK, at, (size_t)h->len);
    } else {
        struct xp_rma_get_dest d;
        memcpy(&d, body, sizeof(d));
        if (xp_am_write_to(p, at, (size_t)h->len, d.raddr, &d.rkey, d.imm) != GX_OK) {
            snprintf(why, sizeof(why), "rank %d could not write the answer: %s", x->rank,
                     gx_last_error());
            answer(p, h, GX_ESYSTEM, why, strlen(why) + 1);
        }
    }
}
