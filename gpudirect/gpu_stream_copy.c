/*
 * gpu_stream_copy.c - stream-ordered copies between any mix of device and
 * host memory, and zeroing of device memory (branch plugs; used by DDP's
 * device buckets, collectives/ddp/ddp_device.c).
 *
 * Owns: nothing but the static zero block. Never touches device memory with
 * the CPU: every byte moves through the driver on the caller's stream.
 */
#include <stdbool.h>
#include <stdint.h>

#include "common/log.h"
#include "gpudirect/cuda_loader.h"
#include "gpudirect/gpu_stream_copy.h"
#include "gpudirect/gpudirect.h"

#define ZERO_BLOCK (256 * 1024)
static const char zero_block[ZERO_BLOCK];

static int copy_fail(gx_cu_result r, const char *call, void *dst, const void *src, size_t len)
{
    char e[64];
    return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s of %zu bytes %p -> %p failed: %s", call, len, src,
                   dst, gx_cu_errstr(r, e, sizeof(e)));
}

int gx_gpu_stream_copy(void *stream, void *dst, const void *src, size_t len)
{
    if (!len)
        return GX_OK;
    struct gx_gpu_ptr d, s;
    int rc = gx_gpu_ptr_query(dst, &d);
    if (rc == GX_OK)
        rc = gx_gpu_ptr_query(src, &s);
    if (rc != GX_OK)
        return rc;
    bool dd = d.type == GX_GPU_MEM_CUDA, sd = s.type == GX_GPU_MEM_CUDA;
    if (!dd && !sd)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "stream copy %p -> %p: neither side is device "
                       "memory", src, dst);
    char why[200];
    const struct gx_cu *c = gx_cu_get(why, sizeof(why));
    if (!c)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "stream copy: %s", why);
    rc = gx_cu_push(c, dd ? d.ctx : s.ctx, "queueing a copy on the caller's stream");
    if (rc != GX_OK)
        return rc;
    gx_cu_stream st = (gx_cu_stream)stream;
    gx_cu_result r;
    const char *call;
    if (dd && sd) {
        call = "cuMemcpyDtoDAsync";
        r = c->memcpy_dtod_async ? c->memcpy_dtod_async((gx_cu_deviceptr)(uintptr_t)dst,
                                                        (gx_cu_deviceptr)(uintptr_t)src, len, st)
                                 : 500; /* CUDA_ERROR_NOT_FOUND: the driver lacks it */
    } else if (dd) {
        call = "cuMemcpyHtoDAsync";
        r = c->memcpy_htod_async((gx_cu_deviceptr)(uintptr_t)dst, src, len, st);
    } else {
        call = "cuMemcpyDtoHAsync";
        r = c->memcpy_dtoh_async(dst, (gx_cu_deviceptr)(uintptr_t)src, len, st);
    }
    gx_cu_pop(c);
    return r == GX_CU_SUCCESS ? GX_OK : copy_fail(r, call, dst, src, len);
}

int gx_gpu_stream_zero(void *stream, void *dst, size_t len)
{
    for (size_t off = 0; off < len; off += ZERO_BLOCK) {
        size_t n = len - off < ZERO_BLOCK ? len - off : ZERO_BLOCK;
        int rc = gx_gpu_stream_copy(stream, (char *)dst + off, zero_block, n);
        if (rc != GX_OK)
            return rc;
    }
    return GX_OK;
}
