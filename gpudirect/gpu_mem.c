/*
 * gpu_mem.c - what a pointer is (memory-type query with a per-allocation
 * range cache), device facts for gx-info, device allocation for tools and
 * tests, and dmabuf export. The driver comes from cuda_loader.c; without it
 * every pointer is host memory and the reason is kept for gx-info.
 *
 * The query needs no current context (unified addressing answers from any
 * thread, the progress thread included); copies make the pointer's own
 * context current (gpu_copy.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "gpudirect/cuda_loader.h"
#include "gpudirect/gpudirect.h"

bool gx_gpu_driver_available(char *why, size_t why_len)
{
    return gx_cu_get(why, why_len) != NULL;
}

/* ---- range cache ---------------------------------------------------------
 * Device allocations seen recently. A hit is confirmed with one buffer-id
 * query, so an address freed and handed out again by the driver is noticed
 * (the id changes, or the query fails) and the entry replaced. Host memory
 * is not cached: its answer is the same one call a confirmation would be. */
#define CACHE_SLOTS 64

static struct {
    pthread_mutex_t mu;
    struct gx_gpu_ptr e[CACHE_SLOTS];
    unsigned next; /* round-robin victim */
    unsigned long long hits, misses;
} cache = { .mu = PTHREAD_MUTEX_INITIALIZER };

void gx_gpu_cache_flush(void)
{
    pthread_mutex_lock(&cache.mu);
    memset(cache.e, 0, sizeof(cache.e));
    pthread_mutex_unlock(&cache.mu);
}

void gx_gpu_cache_stats(unsigned long long *hits, unsigned long long *misses)
{
    pthread_mutex_lock(&cache.mu);
    *hits = cache.hits;
    *misses = cache.misses;
    pthread_mutex_unlock(&cache.mu);
}

static bool cache_lookup(const struct gx_cu *c, uintptr_t p, struct gx_gpu_ptr *out)
{
    struct gx_gpu_ptr hit;
    int slot = -1;
    pthread_mutex_lock(&cache.mu);
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (cache.e[i].size && p >= cache.e[i].base && p - cache.e[i].base < cache.e[i].size) {
            hit = cache.e[i];
            slot = i;
            break;
        }
    }
    pthread_mutex_unlock(&cache.mu);
    if (slot < 0)
        return false;
    unsigned long long id = 0;
    gx_cu_result r = c->pointer_get_attribute(&id, GX_CU_PTR_ATTR_BUFFER_ID, (gx_cu_deviceptr)p);
    if (r == 201 /* CUDA_ERROR_INVALID_CONTEXT: see gx_gpu_ptr_query */ &&
        gx_cu_push_existing(c) == GX_OK) {
        r = c->pointer_get_attribute(&id, GX_CU_PTR_ATTR_BUFFER_ID, (gx_cu_deviceptr)p);
        gx_cu_pop(c);
    }
    pthread_mutex_lock(&cache.mu);
    if (r != GX_CU_SUCCESS || id != hit.id) {
        if (cache.e[slot].id == hit.id) /* stale: freed, maybe reused */
            memset(&cache.e[slot], 0, sizeof(cache.e[slot]));
        pthread_mutex_unlock(&cache.mu);
        return false;
    }
    cache.hits++;
    pthread_mutex_unlock(&cache.mu);
    *out = hit;
    return true;
}

static void cache_insert(const struct gx_gpu_ptr *g)
{
    pthread_mutex_lock(&cache.mu);
    cache.misses++;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (cache.e[i].size && cache.e[i].base < g->base + g->size &&
            g->base < cache.e[i].base + cache.e[i].size)
            memset(&cache.e[i], 0, sizeof(cache.e[i])); /* overlaps: older allocation */
    }
    cache.e[cache.next++ % CACHE_SLOTS] = *g;
    pthread_mutex_unlock(&cache.mu);
}

int gx_gpu_ptr_query(const void *ptr, struct gx_gpu_ptr *out)
{
    struct gx_gpu_ptr g = { .type = GX_GPU_MEM_HOST, .device = -1 };
    const struct gx_cu *c = gx_cu_get(NULL, 0);
    if (!c || !ptr) {
        *out = g;
        return GX_OK;
    }
    uintptr_t p = (uintptr_t)ptr;
    if (cache_lookup(c, p, out))
        return GX_OK;
    unsigned type = 0, managed = 0;
    int ordinal = -1;
    void *ctx = NULL;
    gx_cu_deviceptr start = 0;
    size_t size = 0;
    unsigned long long id = 0;
    int attrs[] = { GX_CU_PTR_ATTR_MEMORY_TYPE, GX_CU_PTR_ATTR_IS_MANAGED,
                    GX_CU_PTR_ATTR_DEVICE_ORDINAL, GX_CU_PTR_ATTR_CONTEXT,
                    GX_CU_PTR_ATTR_RANGE_START, GX_CU_PTR_ATTR_RANGE_SIZE,
                    GX_CU_PTR_ATTR_BUFFER_ID };
    void *data[] = { &type, &managed, &ordinal, &ctx, &start, &size, &id };
    gx_cu_result r = c->pointer_get_attributes(7, attrs, data, (gx_cu_deviceptr)p);
    if (r == 201 /* CUDA_ERROR_INVALID_CONTEXT */ && gx_cu_push_existing(c) == GX_OK) {
        /* A driver that wants a current context for the query (unified
         * addressing should not): ask again inside one that exists. */
        r = c->pointer_get_attributes(7, attrs, data, (gx_cu_deviceptr)p);
        gx_cu_pop(c);
    }
    if (r != GX_CU_SUCCESS) {
        char e[64];
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "memory type of %p: cuPointerGetAttributes "
                       "failed with %s; gx cannot tell host from device memory (check the "
                       "driver with nvidia-smi)", ptr, gx_cu_errstr(r, e, sizeof(e)));
    }
    if (type != GX_CU_MEMORYTYPE_DEVICE || managed) {
        *out = g; /* host, pinned host, or managed: the CPU may touch it */
        return GX_OK;
    }
    if (!ctx || size == 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "memory type of %p: the driver says device "
                       "memory but gives no context or range (context %p, range %zu bytes)",
                       ptr, ctx, size);
    g = (struct gx_gpu_ptr){ .type = GX_GPU_MEM_CUDA, .device = ordinal, .ctx = ctx,
                             .base = (uintptr_t)start, .size = size, .id = id };
    cache_insert(&g);
    *out = g;
    return GX_OK;
}

enum gx_gpu_mem gx_gpu_mem_type(const void *ptr)
{
    struct gx_gpu_ptr g;
    return gx_gpu_ptr_query(ptr, &g) == GX_OK ? g.type : GX_GPU_MEM_HOST;
}

/* ---- device facts and allocation ---------------------------------------- */

int gx_gpu_device_count(void)
{
    const struct gx_cu *c = gx_cu_get(NULL, 0);
    return c ? c->device_count : 0;
}

int gx_gpu_driver_version(void)
{
    const struct gx_cu *c = gx_cu_get(NULL, 0);
    return c ? c->driver_version : 0;
}

int gx_gpu_device_describe(int ordinal, char *name, size_t name_len, char *bus, size_t bus_len,
                           size_t *mem_bytes)
{
    char why[200];
    const struct gx_cu *c = gx_cu_get(why, sizeof(why));
    if (!c)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "GPU %d: %s", ordinal, why);
    gx_cu_device dev;
    gx_cu_result r = c->device_get(&dev, ordinal);
    if (r == GX_CU_SUCCESS)
        r = c->device_get_name(name, (int)name_len, dev);
    if (r == GX_CU_SUCCESS)
        r = c->device_total_mem(mem_bytes, dev);
    if (r != GX_CU_SUCCESS)
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "GPU %d: the driver's device query failed "
                       "(CUDA error %d)", ordinal, r);
    if (!c->device_get_pci_bus_id || c->device_get_pci_bus_id(bus, (int)bus_len, dev) != 0)
        snprintf(bus, bus_len, "?");
    return GX_OK;
}

int gx_gpu_select(int ordinal)
{
    char why[200];
    const struct gx_cu *c = gx_cu_get(why, sizeof(why));
    if (!c)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "selecting GPU %d: %s", ordinal, why);
    if (ordinal < 0 || ordinal >= c->device_count)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "selecting GPU %d: the driver sees %d GPU(s) "
                       "(0..%d; CUDA_VISIBLE_DEVICES narrows them)", ordinal, c->device_count,
                       c->device_count - 1);
    gx_cu_device dev;
    gx_cu_ctx ctx = NULL;
    gx_cu_result r = c->device_get(&dev, ordinal);
    if (r == GX_CU_SUCCESS)
        r = c->primary_ctx_retain(&ctx, dev);
    if (r == GX_CU_SUCCESS)
        r = c->ctx_set_current(ctx);
    if (r != GX_CU_SUCCESS)
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "selecting GPU %d: CUDA error %d", ordinal, r);
    return GX_OK;
}

int gx_gpu_alloc(void **dev, size_t len)
{
    char why[200];
    const struct gx_cu *c = gx_cu_get(why, sizeof(why));
    if (!c)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "device allocation: %s", why);
    int rc = gx_cu_push(c, NULL, "device allocation");
    if (rc != GX_OK)
        return rc;
    gx_cu_deviceptr p = 0;
    gx_cu_result r = c->mem_alloc(&p, len ? len : 1);
    gx_cu_pop(c);
    if (r != GX_CU_SUCCESS)
        return gx_fail(GX_ENOMEM, GX_SUB_GPU, "cuMemAlloc of %zu bytes failed (CUDA error %d)",
                       len, r);
    *dev = (void *)(uintptr_t)p;
    return GX_OK;
}

int gx_gpu_free(void *dev)
{
    const struct gx_cu *c = gx_cu_get(NULL, 0);
    if (!c || !dev)
        return GX_OK;
    int rc = gx_cu_push(c, NULL, "device free");
    if (rc != GX_OK)
        return rc;
    gx_cu_result r = c->mem_free((gx_cu_deviceptr)(uintptr_t)dev);
    gx_cu_pop(c);
    gx_gpu_cache_flush();
    return r == GX_CU_SUCCESS ? GX_OK
                              : gx_fail(GX_EINVAL, GX_SUB_GPU, "cuMemFree(%p) failed (CUDA "
                                        "error %d)", dev, r);
}

/* ---- dmabuf -------------------------------------------------------------- */

int gx_gpu_dmabuf_export(const void *ptr, size_t len, int *fd, uint64_t *offset)
{
    char why[200];
    const struct gx_cu *c = gx_cu_get(why, sizeof(why));
    if (!c)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "dmabuf export: %s", why);
    if (!c->mem_get_handle_for_address_range)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "dmabuf export: the CUDA driver is older "
                       "than 11.7 (no cuMemGetHandleForAddressRange)");
    /* dmabuf ranges must be page aligned: export the enclosing pages, from
     * the allocation's start when the driver says where that is (as NCCL
     * does; a registration cache hands in ranges anywhere inside it). */
    uintptr_t p = (uintptr_t)ptr, base = p & ~(uintptr_t)4095;
    struct gx_gpu_ptr g;
    if (gx_gpu_ptr_query(ptr, &g) == GX_OK && g.type == GX_GPU_MEM_CUDA && g.base <= p &&
        (g.base & 4095) == 0)
        base = g.base;
    size_t span = ((p + len + 4095) & ~(uintptr_t)4095) - base;
    int h = -1;
    gx_cu_result r = c->mem_get_handle_for_address_range(&h, (gx_cu_deviceptr)base, span,
                                                         GX_CU_DMA_BUF_FD, 0);
    if (r != GX_CU_SUCCESS)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "dmabuf export of %p+%zu failed (CUDA error "
                       "%d): the kernel or driver lacks dmabuf support", ptr, len, r);
    *fd = h;
    *offset = p - base;
    return GX_OK;
}
