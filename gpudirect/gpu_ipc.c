/*
 * gpu_ipc.c - CUDA IPC memory handles (gpu_ipc.h). The export runs in the
 * allocation's context (cuIpcGetMemHandle wants the allocation's base, so
 * gx exports the base and carries the pointer's offset beside the driver's
 * 64 bytes); open and close run in the calling thread's context.
 */
#include <stdint.h>
#include <string.h>

#include "common/log.h"
#include "gpudirect/cuda_loader.h"
#include "gpudirect/gpu_ipc.h"
#include "gpudirect/gpudirect.h"

static int driver(const char *what, const struct gx_cu **out)
{
    char why[200];
    const struct gx_cu *c = gx_cu_get(why, sizeof(why));
    if (!c)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "%s: %s", what, why);
    *out = c;
    return GX_OK;
}

static int cu_fail(const char *what, gx_cu_result r)
{
    char e[64];
    return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s failed: %s", what, gx_cu_errstr(r, e, sizeof(e)));
}

int gx_gpu_ipc_export(const void *dev, struct gx_gpu_ipc_handle *out)
{
    const struct gx_cu *c = NULL;
    int rc = driver("CUDA IPC export", &c);
    if (rc != GX_OK)
        return rc;
    if (!c->ipc_get_mem_handle)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "CUDA IPC export: the driver has no "
                       "cuIpcGetMemHandle");
    struct gx_gpu_ptr g;
    rc = gx_gpu_ptr_query(dev, &g);
    if (rc != GX_OK)
        return rc;
    if (g.type != GX_GPU_MEM_CUDA)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "CUDA IPC export: %p is not device memory", dev);
    rc = gx_cu_push(c, g.ctx, "CUDA IPC export");
    if (rc != GX_OK)
        return rc;
    gx_cu_ipc_mem_handle h;
    memset(&h, 0, sizeof(h));
    gx_cu_result r = c->ipc_get_mem_handle(&h, (gx_cu_deviceptr)g.base);
    gx_cu_pop(c);
    if (r != GX_CU_SUCCESS)
        return cu_fail("cuIpcGetMemHandle", r);
    memset(out, 0, sizeof(*out));
    memcpy(out->bytes, h.data, sizeof(out->bytes));
    out->offset = (uintptr_t)dev - g.base;
    out->size = g.size - out->offset;
    return GX_OK;
}

int gx_gpu_ipc_open(const struct gx_gpu_ipc_handle *h, void **dev, void **base)
{
    const struct gx_cu *c = NULL;
    int rc = driver("CUDA IPC open", &c);
    if (rc != GX_OK)
        return rc;
    if (!c->ipc_open_mem_handle || !c->ipc_close_mem_handle)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "CUDA IPC open: the driver has no "
                       "cuIpcOpenMemHandle_v2 / cuIpcCloseMemHandle");
    rc = gx_cu_push(c, NULL, "CUDA IPC open");
    if (rc != GX_OK)
        return rc;
    gx_cu_ipc_mem_handle ch;
    memcpy(ch.data, h->bytes, sizeof(ch.data));
    gx_cu_deviceptr p = 0;
    /* 1 = CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: a handle from another GPU works */
    gx_cu_result r = c->ipc_open_mem_handle(&p, ch, 1);
    gx_cu_pop(c);
    if (r != GX_CU_SUCCESS)
        return cu_fail("cuIpcOpenMemHandle (a handle exported by this same process, or by "
                       "one that has exited, cannot be opened)", r);
    *base = (void *)(uintptr_t)p;
    *dev = (char *)(uintptr_t)p + h->offset;
    return GX_OK;
}

int gx_gpu_ipc_close(void *base)
{
    const struct gx_cu *c = NULL;
    int rc = driver("CUDA IPC close", &c);
    if (rc != GX_OK)
        return rc;
    if (!c->ipc_close_mem_handle)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "CUDA IPC close: no cuIpcCloseMemHandle");
    rc = gx_cu_push(c, NULL, "CUDA IPC close");
    if (rc != GX_OK)
        return rc;
    gx_cu_result r = c->ipc_close_mem_handle((gx_cu_deviceptr)(uintptr_t)base);
    gx_cu_pop(c);
    gx_gpu_cache_flush(); /* the range may be mapped again at the same address */
    return r == GX_CU_SUCCESS ? GX_OK : cu_fail("cuIpcCloseMemHandle", r);
}
