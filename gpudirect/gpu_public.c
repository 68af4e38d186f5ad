/*
 * gpu_public.c - the public device-memory helpers of gx.h (gx_device_alloc,
 * gx_device_free, gx_device_copy) for tools, tests and programs without
 * CUDA headers of their own; thin wrappers over gpu_mem.c and gpu_copy.c.
 */
#include <string.h>

#include "common/log.h"
#include "gpudirect/gpudirect.h"
#include "gx/gx.h"

GX_API int gx_device_count(void)
{
    return gx_gpu_device_count();
}

GX_API int gx_device_select(int ordinal)
{
    gx_clear_last_error();
    return gx_gpu_select(ordinal);
}

GX_API int gx_device_alloc(void **ptr, size_t bytes)
{
    gx_clear_last_error();
    if (!ptr)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "gx_device_alloc: ptr is NULL");
    return gx_gpu_alloc(ptr, bytes);
}

GX_API int gx_device_free(void *ptr)
{
    gx_clear_last_error();
    return gx_gpu_free(ptr);
}

GX_API int gx_device_copy(void *dst, const void *src, size_t bytes)
{
    gx_clear_last_error();
    if (!bytes)
        return GX_OK;
    if (!dst || !src)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "gx_device_copy: %s is NULL", dst ? "src" : "dst");
    struct gx_gpu_ptr d, s;
    int rc = gx_gpu_ptr_query(dst, &d);
    if (rc == GX_OK)
        rc = gx_gpu_ptr_query(src, &s);
    if (rc != GX_OK)
        return rc;
    bool dd = d.type == GX_GPU_MEM_CUDA, sd = s.type == GX_GPU_MEM_CUDA;
    if (!dd && !sd) {
        memmove(dst, src, bytes);
        return GX_OK;
    }
    if (dd && !sd)
        return gx_gpu_copy_htod(dst, src, bytes);
    if (!dd)
        return gx_gpu_copy_dtoh(dst, src, bytes);
    return gx_gpu_copy_dtod(dst, src, bytes);
}
