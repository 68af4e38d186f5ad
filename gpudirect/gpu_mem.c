/*
 * gpu_mem.c - the CUDA driver through dlopen: memory-type queries and dmabuf
 * export. Nothing here needs a GPU or the driver at build time; on a host
 * without them every pointer is host memory and the reason is kept for
 * gx-info.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "gpudirect/gpudirect.h"

/* The few driver API types and constants used (cuda.h values). */
typedef int gx_cu_result;
typedef unsigned long long gx_cu_deviceptr;
#define GX_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define GX_CU_MEMORYTYPE_DEVICE 2
#define GX_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1

static struct {
    gx_cu_result (*init)(unsigned flags);
    gx_cu_result (*device_get_count)(int *count);
    gx_cu_result (*pointer_get_attribute)(void *data, int attr, gx_cu_deviceptr ptr);
    gx_cu_result (*mem_get_handle_for_address_range)(void *handle, gx_cu_deviceptr ptr,
                                                     size_t size, int type,
                                                     unsigned long long flags);
    bool ok;
    char why[160];
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(cu.why, sizeof(cu.why), "no CUDA driver (libcuda.so.1 not loadable)");
        return;
    }
    cu.init = (gx_cu_result(*)(unsigned))dlsym(h, "cuInit");
    cu.device_get_count = (gx_cu_result(*)(int *))dlsym(h, "cuDeviceGetCount");
    cu.pointer_get_attribute =
        (gx_cu_result(*)(void *, int, gx_cu_deviceptr))dlsym(h, "cuPointerGetAttribute");
    cu.mem_get_handle_for_address_range =
        (gx_cu_result(*)(void *, gx_cu_deviceptr, size_t, int, unsigned long long))dlsym(
            h, "cuMemGetHandleForAddressRange");
    if (!cu.init || !cu.device_get_count || !cu.pointer_get_attribute) {
        snprintf(cu.why, sizeof(cu.why), "libcuda.so.1 lacks cuInit/cuPointerGetAttribute");
        return;
    }
    int n = 0;
    gx_cu_result r = cu.init(0);
    if (r != 0 || cu.device_get_count(&n) != 0 || n == 0) {
        snprintf(cu.why, sizeof(cu.why), "CUDA driver present but no usable GPU (cuInit %d, "
                 "%d devices)", r, n);
        return;
    }
    cu.ok = true;
    snprintf(cu.why, sizeof(cu.why), "CUDA driver with %d GPU(s)", n);
}

bool gx_gpu_driver_available(char *why, size_t why_len)
{
    pthread_once(&cu_once, cu_load);
    if (why)
        snprintf(why, why_len, "%s", cu.why);
    return cu.ok;
}

enum gx_gpu_mem gx_gpu_mem_type(const void *ptr)
{
    pthread_once(&cu_once, cu_load);
    if (!cu.ok || !ptr)
        return GX_GPU_MEM_HOST;
    unsigned int type = 0;
    if (cu.pointer_get_attribute(&type, GX_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 (gx_cu_deviceptr)(uintptr_t)ptr) != 0)
        return GX_GPU_MEM_HOST; /* not known to CUDA: plain host memory */
    return type == GX_CU_MEMORYTYPE_DEVICE ? GX_GPU_MEM_CUDA : GX_GPU_MEM_HOST;
}

int gx_gpu_dmabuf_export(const void *ptr, size_t len, int *fd, uint64_t *offset)
{
    pthread_once(&cu_once, cu_load);
    if (!cu.ok)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "dmabuf export: %s", cu.why);
    if (!cu.mem_get_handle_for_address_range)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "dmabuf export: the CUDA driver is older "
                       "than 11.7 (no cuMemGetHandleForAddressRange)");
    /* dmabuf ranges must be page aligned: export the enclosing pages. */
    uintptr_t p = (uintptr_t)ptr, base = p & ~(uintptr_t)4095;
    size_t span = ((p + len + 4095) & ~(uintptr_t)4095) - base;
    int h = -1;
    gx_cu_result r = cu.mem_get_handle_for_address_range(
        &h, (gx_cu_deviceptr)base, span, GX_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != 0)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "dmabuf export of %p+%zu failed (CUDA error "
                       "%d): the kernel or driver lacks dmabuf support", ptr, len, r);
    *fd = h;
    *offset = p - base;
    return GX_OK;
}
