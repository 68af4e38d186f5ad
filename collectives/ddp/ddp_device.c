/*
 * ddp_device.c - gradient buckets in CUDA device memory (branch plugs).
 *
 * Owns: the choice of bucket memory (gx_ddp_config.device_buckets), bucket
 * allocation / zeroing / freeing, and every copy of gradient bytes into,
 * out of and between buckets, plus the device buckets' all-reduce.
 *
 * With device buckets nothing of a bucket ever lives in, or passes through,
 * host memory the scheduler owns: gradients are copied in and out by the
 * driver on the configured stream (device to device when the gradients are
 * device memory), each bucket's all-reduce is gx_allreduce_stream on that
 * stream, queued the moment the bucket is complete, so it runs in stream
 * order while backward keeps producing gradients; gx_ddp_finish waits for
 * the stream once, at the end (ddp_dev_sync). The CPU never touches device
 * memory here (the fake libcuda's device memory faults if it did).
 * Host buckets keep gx_device_copy for gradients that are device memory.
 *
 * Room ddp/: besides the public API this file uses gpudirect/ (outside
 * collectives/, allowed by the layers) for the memory type and the
 * stream-ordered copies.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/ddp/ddp_internal.h"
#include "common/log.h"
#include "gpudirect/gpu_stream_copy.h"
#include "gpudirect/gpudirect.h"

int ddp_dev_decide(struct gx_ddp *ddp)
{
    ddp->stream = ddp->cfg.stream;
    int want = ddp->cfg.device_buckets;
    if (want < -1 || want > 1)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_create on rank %d: device_buckets is %d "
                       "(0 auto, 1 device, -1 host)", ddp->rank, want);
    const char *why = want == 1 ? "device_buckets = 1" : NULL;
    if (want == 0) {
        for (size_t i = 0; i < ddp->nparams && !why; i++)
            if (ddp->params[i].data &&
                gx_gpu_mem_type(ddp->params[i].data) == GX_GPU_MEM_CUDA)
                why = "the parameters are CUDA device memory";
    }
    ddp->dev = why != NULL && want != -1;
    if (!ddp->dev)
        return GX_OK;
    char reason[200];
    if (!gx_gpu_driver_available(reason, sizeof(reason)))
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_DDP, "gx_ddp_create on rank %d: device buckets "
                       "(%s) need the CUDA driver: %s", ddp->rank, why, reason);
    GX_INFO(GX_SUB_DDP, "ddp '%s': gradient buckets in CUDA device memory (%s), all-reduces "
            "queued on stream %p", ddp->name, why, ddp->stream);
    return GX_OK;
}

int ddp_mem_alloc(struct gx_ddp *ddp, size_t bytes, void **out)
{
    *out = NULL;
    if (!ddp->dev) {
        void *p = aligned_alloc(64, bytes);
        if (!p)
            return GX_ENOMEM;
        memset(p, 0, bytes); /* unused gradients read as zero */
        *out = p;
        return GX_OK;
    }
    void *d = NULL;
    int rc = gx_gpu_alloc(&d, bytes);
    if (rc == GX_OK)
        rc = gx_gpu_stream_zero(ddp->stream, d, bytes);
    if (rc != GX_OK) {
        if (d)
            gx_gpu_free(d);
        return rc;
    }
    *out = d;
    return GX_OK;
}

void ddp_mem_free(struct gx_ddp *ddp, void *p)
{
    if (!p)
        return;
    if (!ddp->dev) {
        free(p);
        return;
    }
    /* work queued on the stream may still use it */
    if (gx_gpu_stream_wait(ddp->stream, p) != GX_OK)
        GX_WARN(GX_SUB_DDP, "ddp '%s': freeing a device bucket: %s", ddp->name,
                gx_last_error());
    gx_gpu_free(p);
}

int ddp_grad_copy(struct gx_ddp *ddp, void *dst, const void *src, size_t len)
{
    if (ddp->dev)
        return gx_gpu_stream_copy(ddp->stream, dst, src, len);
    return gx_device_copy(dst, src, len); /* the gradient may be CUDA memory */
}

int ddp_mem_zero(struct gx_ddp *ddp, void *dst, size_t len)
{
    if (ddp->dev)
        return gx_gpu_stream_zero(ddp->stream, dst, len);
    memset(dst, 0, len);
    return GX_OK;
}

int ddp_dev_allreduce(struct gx_ddp *ddp, struct ddp_bucket *b)
{
    return gx_allreduce_stream(ddp->comm, b->pub.data, b->pub.data, b->pub.count, b->pub.dtype,
                               b->pub.op, ddp->stream);
}

int ddp_dev_sync(struct gx_ddp *ddp)
{
    if (!ddp->dev || !ddp->nbuckets)
        return GX_OK;
    int rc = gx_gpu_stream_wait(ddp->stream, ddp->buckets[0].pub.data);
    if (rc != GX_OK)
        return gx_fail(rc, GX_SUB_DDP, "gx_ddp_finish on rank %d: waiting for stream %p: %s",
                       ddp->rank, ddp->stream, DDP_PREV_ERROR);
    char async[300] = "";
    rc = gx_comm_get_async_error(ddp->comm, async, sizeof(async));
    if (rc != GX_OK)
        return gx_fail(rc, GX_SUB_DDP, "gx_ddp_finish on rank %d: a bucket all-reduce queued on "
                       "stream %p failed: %s", ddp->rank, ddp->stream, async);
    return GX_OK;
}
