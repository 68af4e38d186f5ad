/*
 * coll_gpu.c - reduce steps on the GPU for collectives on staged device
 * buffers (coll_gpu.h; branch kernels).
 */
#include "collectives/engine/coll_gpu.h"

#include "collectives/comm/stage.h"
#include "collectives/engine/coll_engine.h"
#include "gpudirect/gpu_reduce.h"
#include "gpudirect/gpudirect.h"

void coll_gpu_setup(struct coll_args *a, const struct gx_stage *st)
{
    a->gpu.n = 0;
    if (!st || (unsigned)a->op >= GX_REDOP_COUNT ||
        (a->kind != COLL_ALLREDUCE && a->kind != COLL_REDUCE_SCATTER && a->kind != COLL_REDUCE))
        return;
    struct gx_stage_region_view v[2];
    int n = gx_stage_regions(st, v);
    const char *recv_dev = NULL;
    for (int i = 0; i < n; i++)
        if (v[i].has_recv)
            recv_dev = v[i].dev;
    if (!recv_dev || !gx_gpu_reduce_wanted(recv_dev))
        return;
    struct gx_gpu_ptr rq = { 0 };
    if (gx_gpu_ptr_query(recv_dev, &rq) != GX_OK)
        return;
    for (int i = 0; i < n; i++) {
        a->gpu.host[i] = v[i].host;
        a->gpu.dev[i] = v[i].dev;
        a->gpu.len[i] = v[i].len;
        /* Read in place only from the receive buffer's context (a send
         * buffer on another GPU goes through its stand-in). */
        struct gx_gpu_ptr sq = { 0 };
        a->gpu.dev_in[i] = v[i].has_send && !v[i].has_recv &&
                           gx_gpu_ptr_query(v[i].dev, &sq) == GX_OK && sq.ctx == rq.ctx;
    }
    a->gpu.n = n;
}

/* The region holding [p, p + bytes), or -1. */
static int region_of(const struct coll_args *a, const void *p, size_t bytes)
{
    const char *c = p;
    for (int i = 0; i < a->gpu.n; i++)
        if (c >= a->gpu.host[i] && c + bytes <= a->gpu.host[i] + a->gpu.len[i])
            return i;
    return -1;
}

/* An operand: the device input in place, else its host address. */
static const void *operand(const struct coll_args *a, const void *p, size_t bytes, bool *dev)
{
    int r = region_of(a, p, bytes);
    *dev = r >= 0 && a->gpu.dev_in[r];
    return *dev ? a->gpu.dev[r] + ((const char *)p - a->gpu.host[r]) : p;
}

bool coll_gpu_step(struct coll_op *op, const struct coll_step *s, int *rc)
{
    const struct coll_args *a = &op->a;
    size_t bytes = s->len * a->es;
    int rd = region_of(a, s->dst, bytes);
    if (rd < 0 || a->gpu.dev_in[rd] || !s->len)
        return false; /* scratch or host memory: the CPU kernels */
    char *dev_dst = a->gpu.dev[rd] + ((char *)s->dst - a->gpu.host[rd]);
    const void *x = s->kind == CS_REDUCE ? s->dst : s->src;
    const void *y = s->kind == CS_REDUCE ? s->src : s->src2;
    bool xdev = false, ydev = false;
    x = operand(a, x, bytes, &xdev);
    y = operand(a, y, bytes, &ydev);
    *rc = gx_gpu_reduce_step(s->dst, dev_dst, x, xdev, y, ydev, s->len, a->dtype, a->op);
    return true;
}
