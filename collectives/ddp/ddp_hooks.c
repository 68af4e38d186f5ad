/*
 * ddp_hooks.c - how a bucket is communicated: the plain in-place all-reduce,
 * a user's comm hook, and the built-in fp16 / bf16 compression hooks.
 *
 * Owns: ddp_bucket_start / ddp_bucket_complete (called with gx_lock held) and
 * the compression buffers (bucket->pub.hook_data). Must not touch the
 * iteration state (ddp_sched.c) or the layout (ddp_buckets.c).
 *
 * Compression follows PyTorch's fp16_compress_hook: divide by the number of
 * ranks first when averaging (so the float16 sum cannot overflow where the
 * average would not), narrow, sum in the narrow type, widen back. The
 * reduction kernels add float16 in float32 and round each partial sum once,
 * so the result is within about log2(ranks) float16 roundings of the exact
 * average.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/ddp/ddp_internal.h"
#include "collectives/reduce/half.h"
#include "common/log.h"

uint32_t ddp_hash_name(const char *name)
{
    /* FNV-1a: only compared between ranks of one job. */
    uint32_t h = 2166136261u;
    for (const char *p = name; p && *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return name ? (h ? h : 1) : 0;
}

static int plain_start(struct gx_ddp *ddp, struct ddp_bucket *b)
{
    if (ddp->dev)
        return ddp_dev_allreduce(ddp, b); /* queued on the stream: no request */
    return gx_iallreduce(ddp->comm, b->pub.data, b->pub.data, b->pub.count, b->pub.dtype,
                         b->pub.op, &b->req);
}

int ddp_bucket_start(struct gx_ddp *ddp, struct ddp_bucket *b)
{
    b->req = NULL;
    b->hooked = false;
    if (!ddp->hook.start)
        return plain_start(ddp, b);
    int rc = ddp->hook.start(ddp->hook_state, ddp->comm, &b->pub, &b->req);
    if (rc == GX_OK) {
        b->hooked = true;
        return GX_OK;
    }
    /* Keep the ranks in step: peers launched this bucket, so run the plain
     * all-reduce in its place; the iteration fails at finish anyway. */
    int hook_rc = gx_fail(rc, GX_SUB_DDP, "ddp '%s': comm hook '%s' failed to start bucket %d "
                          "(%zu parameters, %zu x %s) on rank %d: %s", ddp->name,
                          ddp->hook.name ? ddp->hook.name : "?", b->pub.index,
                          b->pub.num_params, b->pub.count, gx_datatype_name(b->pub.dtype),
                          ddp->rank, gx_strerror(rc));
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", gx_last_error());
    b->req = NULL;
    if (plain_start(ddp, b) != GX_OK)
        b->req = NULL;
    gx_set_last_error(msg); /* the hook's failure is the one to report */
    return hook_rc;
}

int ddp_bucket_complete(struct gx_ddp *ddp, struct ddp_bucket *b)
{
    if (!b->hooked || !ddp->hook.complete)
        return GX_OK;
    int rc = ddp->hook.complete(ddp->hook_state, &b->pub);
    if (rc != GX_OK)
        rc = gx_fail(rc, GX_SUB_DDP, "ddp '%s': comm hook '%s' failed to complete bucket %d "
                     "on rank %d: %s", ddp->name, ddp->hook.name ? ddp->hook.name : "?",
                     b->pub.index, ddp->rank, gx_strerror(rc));
    return rc;
}

void ddp_bucket_release_hook_data(struct gx_ddp *ddp, struct ddp_bucket *b)
{
    if (b->pub.hook_data && ddp->hook.release)
        ddp->hook.release(ddp->hook_state, &b->pub);
    b->pub.hook_data = NULL;
}

/* ---- compression hooks --------------------------------------------------- */

static bool compressible(const struct gx_ddp_bucket *b)
{
    return b->dtype == GX_FLOAT32 || b->dtype == GX_FLOAT64;
}

static int compress_start(struct gx_comm *comm, struct gx_ddp_bucket *b, bool bf16,
                          struct gx_request **req)
{
    if (!compressible(b))
        return gx_iallreduce(comm, b->data, b->data, b->count, b->dtype, b->op, req);
    if (!b->hook_data) {
        b->hook_data = malloc(b->count * sizeof(uint16_t) + 2);
        if (!b->hook_data)
            return gx_fail(GX_ENOMEM, GX_SUB_DDP, "compression buffer of bucket %d (%zu "
                           "elements): out of memory", b->index, b->count);
    }
    uint16_t *h = b->hook_data;
    float scale = b->op == GX_AVG ? 1.0f / (float)gx_comm_size(comm) : 1.0f;
    if (b->dtype == GX_FLOAT32) {
        const float *g = b->data;
        if (bf16)
            for (size_t i = 0; i < b->count; i++)
                h[i] = gx_f32_to_bf16(g[i] * scale);
        else
            for (size_t i = 0; i < b->count; i++)
                h[i] = gx_f32_to_f16(g[i] * scale);
    } else {
        const double *g = b->data;
        for (size_t i = 0; i < b->count; i++) {
            float v = (float)(g[i] * (double)scale);
            h[i] = bf16 ? gx_f32_to_bf16(v) : gx_f32_to_f16(v);
        }
    }
    return gx_iallreduce(comm, h, h, b->count, bf16 ? GX_BFLOAT16 : GX_FLOAT16, GX_SUM, req);
}

static int compress_complete(struct gx_ddp_bucket *b, bool bf16)
{
    if (!compressible(b))
        return GX_OK;
    const uint16_t *h = b->hook_data;
    if (b->dtype == GX_FLOAT32) {
        float *g = b->data;
        if (bf16)
            for (size_t i = 0; i < b->count; i++)
                g[i] = gx_bf16_to_f32(h[i]);
        else
            for (size_t i = 0; i < b->count; i++)
                g[i] = gx_f16_to_f32(h[i]);
    } else {
        double *g = b->data;
        for (size_t i = 0; i < b->count; i++)
            g[i] = bf16 ? gx_bf16_to_f32(h[i]) : gx_f16_to_f32(h[i]);
    }
    return GX_OK;
}

static void compress_release(void *state, struct gx_ddp_bucket *b)
{
    free(b->hook_data);
    b->hook_data = NULL;
}

static int fp16_start(void *state, struct gx_comm *comm, struct gx_ddp_bucket *b,
                      struct gx_request **req)
{
    return compress_start(comm, b, false, req);
}

static int fp16_complete(void *state, struct gx_ddp_bucket *b)
{
    return compress_complete(b, false);
}

static int bf16_start(void *state, struct gx_comm *comm, struct gx_ddp_bucket *b,
                      struct gx_request **req)
{
    return compress_start(comm, b, true, req);
}

static int bf16_complete(void *state, struct gx_ddp_bucket *b)
{
    return compress_complete(b, true);
}

static const struct gx_ddp_comm_hook fp16_hook = {
    sizeof(struct gx_ddp_comm_hook), "fp16_compress", fp16_start, fp16_complete,
    compress_release,
};

static const struct gx_ddp_comm_hook bf16_hook = {
    sizeof(struct gx_ddp_comm_hook), "bf16_compress", bf16_start, bf16_complete,
    compress_release,
};

GX_API const struct gx_ddp_comm_hook *gx_ddp_fp16_compress_hook(void)
{
    return &fp16_hook;
}

GX_API const struct gx_ddp_comm_hook *gx_ddp_bf16_compress_hook(void)
{
    return &bf16_hook;
}
