/*
 * win_model.h - a model of window memory for win_check.c: every (origin,
 * target) pair runs a deterministic stream of operations on the origin's
 * own slice of the target's window, so the target can replay every origin's
 * stream and know, byte for byte, what its window must hold.
 */
#ifndef GX_TESTS_WIN_MODEL_H
#define GX_TESTS_WIN_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gx/gx.h"

static inline uint64_t wm_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The byte a target's window starts with at position i. */
static inline uint8_t wm_initial(int target, size_t i)
{
    return (uint8_t)(target * 37 + i * 11 + (i >> 9));
}

enum wm_kind { WM_PUT, WM_GET, WM_ACC };

struct wm_op {
    enum wm_kind kind;
    bool request;            /* the gx_i* form */
    bool flush_after;
    enum gx_datatype dtype;
    enum gx_redop redop;
    size_t count;
    size_t offset;           /* in the slice */
    uint8_t *data;           /* put / accumulate: the origin's elements */
};

struct wm_stream {
    uint64_t rng;
    size_t slice;            /* bytes of the slice */
    size_t max_bytes;        /* largest operation */
    uint8_t *model;          /* the slice as it must be */
    uint8_t *scratch;        /* this op's data */
    int batch_left;          /* accumulates left in a batch of one op and type */
    enum gx_datatype batch_dtype;
    enum gx_redop batch_op;
};

static const enum gx_datatype wm_int_types[] = { GX_INT8, GX_UINT8, GX_INT32, GX_UINT32,
                                                  GX_INT64, GX_UINT64 };
static const enum gx_datatype wm_any_types[] = { GX_INT8, GX_UINT8, GX_INT32, GX_UINT32,
                                                  GX_INT64, GX_UINT64, GX_FLOAT16, GX_BFLOAT16,
                                                  GX_FLOAT32, GX_FLOAT64 };

/* One element of an integer accumulate, as the kernels define it. */
static inline void wm_apply_elem(uint8_t *dst, const uint8_t *src, enum gx_datatype t,
                                 enum gx_redop op)
{
    size_t es = gx_datatype_size(t);
    if (op == GX_REPLACE) {
        memcpy(dst, src, es);
        return;
    }
    uint64_t a = 0, b = 0;
    memcpy(&a, dst, es);
    memcpy(&b, src, es);
    bool sgn = t == GX_INT8 || t == GX_INT32 || t == GX_INT64;
    int shift = 64 - (int)(8 * es);
    int64_t sa = (int64_t)(a << shift) >> shift, sb = (int64_t)(b << shift) >> shift;
    uint64_t r;
    switch (op) {
    case GX_SUM: r = a + b; break;
    case GX_PROD: r = a * b; break;
    case GX_MIN: r = sgn ? (sb < sa ? b : a) : (b < a ? b : a); break;
    default: r = sgn ? (sb > sa ? b : a) : (b > a ? b : a); break; /* GX_MAX */
    }
    memcpy(dst, &r, es);
}

static inline size_t wm_pick_count(struct wm_stream *s, size_t es)
{
    uint64_t r = wm_next(&s->rng) % 100;
    size_t n;
    if (r < 55)
        n = 1 + wm_next(&s->rng) % 8;
    else if (r < 80)
        n = 100 + wm_next(&s->rng) % 2000;
    else if (r < 92) /* around the eager limit (16 KiB less the 40-byte header) */
        n = (16384 - 40) / es - 2 + wm_next(&s->rng) % 5;
    else
        n = (100000 + wm_next(&s->rng) % (1u << 20)) / es;
    size_t cap = s->max_bytes < s->slice ? s->max_bytes : s->slice;
    if (n * es > cap)
        n = cap / es;
    return n ? n : 1;
}

/* The next operation of the stream; puts and accumulates are applied to the
 * model at once (the origin completes them before it reads back). */
static inline void wm_next_op(struct wm_stream *s, struct wm_op *op)
{
    memset(op, 0, sizeof(*op));
    uint64_t r = wm_next(&s->rng);
    if (s->batch_left == 0 && r % 4 == 0) {
        /* A batch of accumulates of one op and type, flushed at its end:
         * they may be applied in any order, so they must commute. */
        static const enum gx_redop ops[] = { GX_SUM, GX_PROD, GX_MIN, GX_MAX, GX_REPLACE };
        s->batch_op = ops[wm_next(&s->rng) % 5];
        s->batch_dtype = wm_int_types[wm_next(&s->rng) % 6];
        s->batch_left = s->batch_op == GX_REPLACE ? 1 : 1 + (int)(wm_next(&s->rng) % 6);
    }
    if (s->batch_left > 0) {
        op->kind = WM_ACC;
        op->dtype = s->batch_dtype;
        op->redop = s->batch_op;
        op->flush_after = --s->batch_left == 0;
    } else {
        op->kind = r % 3 == 0 ? WM_GET : WM_PUT;
        op->dtype = wm_any_types[wm_next(&s->rng) % 10];
        op->flush_after = true; /* puts are not ordered with what follows */
    }
    op->request = (wm_next(&s->rng) & 1) != 0;
    size_t es = gx_datatype_size(op->dtype);
    op->count = wm_pick_count(s, es);
    size_t slots = (s->slice - op->count * es) / es + 1;
    op->offset = (size_t)(wm_next(&s->rng) % slots) * es;
    op->data = s->scratch;
    if (op->kind == WM_GET)
        return;
    for (size_t i = 0; i < op->count * es; i++)
        s->scratch[i] = (uint8_t)wm_next(&s->rng);
    if (op->kind == WM_ACC && op->redop == GX_PROD)
        for (size_t i = 0; i < op->count * es; i += es)
            s->scratch[i] |= 1; /* odd factors: products stay informative */
    uint8_t *m = s->model + op->offset;
    if (op->kind == WM_PUT)
        memcpy(m, op->data, op->count * es);
    else
        for (size_t i = 0; i < op->count; i++)
            wm_apply_elem(m + i * es, op->data + i * es, op->dtype, op->redop);
}

#endif
