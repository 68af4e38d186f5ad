/*
 * gpu_copy.c - moving bytes between device memory and pinned host memory:
 * synchronous copies in the buffer's own context, the pinned staging pool,
 * and gx's own streams and events for the stream-ordered API.
 *
 * The pool keeps freed blocks by power-of-two size class up to
 * GX_GPU_STAGE_POOL bytes in all; a block handed back with a fence (an event
 * after an asynchronous copy out of it) is reused only once the fence has
 * passed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "gpudirect/cuda_loader.h"
#include "gpudirect/gpudirect.h"

GX_PARAM_DEFINE(gx_param_gpu_stage_pool, "GX_GPU_STAGE_POOL", GX_PARAM_SIZE, "256M", NULL,
                "Pinned host memory gx keeps for staging device buffers between calls.");

static int copy_err(gx_cu_result r, const char *what, const void *dev, size_t len)
{
    char e[64];
    return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s of %zu bytes at device address %p failed: %s",
                   what, len, dev, gx_cu_errstr(r, e, sizeof(e)));
}

/* The driver and the device pointer's context made current. */
static int enter(const void *dev, const char *what, const struct gx_cu **out)
{
    char why[200];
    const struct gx_cu *c = gx_cu_get(why, sizeof(why));
    if (!c)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "%s: %s", what, why);
    struct gx_gpu_ptr g = { 0 };
    if (dev) {
        int rc = gx_gpu_ptr_query(dev, &g);
        if (rc != GX_OK)
            return rc;
        if (g.type != GX_GPU_MEM_CUDA)
            return gx_fail(GX_EINVAL, GX_SUB_GPU, "%s: %p is not device memory", what, dev);
    }
    int rc = gx_cu_push(c, g.ctx, what);
    if (rc == GX_OK)
        *out = c;
    return rc;
}

int gx_gpu_copy_dtoh(void *host, const void *dev, size_t len)
{
    if (!len)
        return GX_OK;
    const struct gx_cu *c;
    int rc = enter(dev, "device-to-host copy", &c);
    if (rc != GX_OK)
        return rc;
    gx_cu_result r = c->memcpy_dtoh(host, (gx_cu_deviceptr)(uintptr_t)dev, len);
    gx_cu_pop(c);
    return r == GX_CU_SUCCESS ? GX_OK : copy_err(r, "cuMemcpyDtoH", dev, len);
}

int gx_gpu_copy_htod(void *dev, const void *host, size_t len)
{
    if (!len)
        return GX_OK;
    const struct gx_cu *c;
    int rc = enter(dev, "host-to-device copy", &c);
    if (rc != GX_OK)
        return rc;
    gx_cu_result r = c->memcpy_htod((gx_cu_deviceptr)(uintptr_t)dev, host, len);
    gx_cu_pop(c);
    return r == GX_CU_SUCCESS ? GX_OK : copy_err(r, "cuMemcpyHtoD", dev, len);
}

/* ---- pinned pool ---------------------------------------------------------- */
#define POOL_MIN_SHIFT 16 /* 64 KiB */
#define POOL_CLASSES 28

struct pinned_block {
    struct pinned_block *next;
    void *p;
    size_t cap;
    gx_cu_event fence; /* NULL: free now */
};

static struct {
    pthread_mutex_t mu;
    struct pinned_block *free[POOL_CLASSES];
    size_t kept;
} pool = { .mu = PTHREAD_MUTEX_INITIALIZER };

static int size_class(size_t len)
{
    int k = 0;
    while (k < POOL_CLASSES - 1 && ((size_t)1 << (POOL_MIN_SHIFT + k)) < len)
        k++;
    return k;
}

/* Wait for a block's fence and drop it (GPU 0's context holds gx's events). */
static void block_settle(const struct gx_cu *c, struct pinned_block *b)
{
    if (!b->fence)
        return;
    if (gx_cu_push(c, NULL, "staging fence") == GX_OK) {
        gx_cu_result r = c->event_synchronize(b->fence);
        if (r != GX_CU_SUCCESS)
            GX_WARN(GX_SUB_GPU, "staging fence: cuEventSynchronize failed (CUDA error %d)", r);
        c->event_destroy(b->fence);
        gx_cu_pop(c);
    }
    b->fence = NULL;
}

void *gx_gpu_pinned_get(size_t len, size_t *cap)
{
    char why[200];
    const struct gx_cu *c = gx_cu_get(why, sizeof(why));
    if (!c) {
        gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "pinned staging memory: %s", why);
        return NULL;
    }
    int k = size_class(len);
    size_t want = (size_t)1 << (POOL_MIN_SHIFT + k);
    if (want < len)
        want = len; /* beyond the largest class: exact size, not kept */
    pthread_mutex_lock(&pool.mu);
    struct pinned_block *b = pool.free[k];
    if (b && b->cap >= len) {
        pool.free[k] = b->next;
        pool.kept -= b->cap;
    } else {
        b = NULL;
    }
    pthread_mutex_unlock(&pool.mu);
    if (b) {
        block_settle(c, b);
        void *p = b->p;
        *cap = b->cap;
        free(b);
        return p;
    }
    if (gx_cu_push(c, NULL, "pinned staging memory") != GX_OK)
        return NULL;
    void *p = NULL;
    gx_cu_result r = c->mem_host_alloc(&p, want, GX_CU_MEMHOSTALLOC_PORTABLE);
    gx_cu_pop(c);
    if (r != GX_CU_SUCCESS || !p) {
        gx_fail(GX_ENOMEM, GX_SUB_GPU, "cuMemHostAlloc of %zu bytes of pinned staging memory "
                "failed (CUDA error %d)", want, r);
        return NULL;
    }
    *cap = want;
    return p;
}

void gx_gpu_pinned_put_after(void *p, size_t cap, void *fence)
{
    const struct gx_cu *c = gx_cu_get(NULL, 0);
    if (!p || !c)
        return;
    size_t limit = 0;
    (void)gx_param_size(&gx_param_gpu_stage_pool, &limit);
    struct pinned_block *b = calloc(1, sizeof(*b));
    int k = size_class(cap);
    bool kept = false;
    if (b) {
        *b = (struct pinned_block){ .p = p, .cap = cap, .fence = fence };
        pthread_mutex_lock(&pool.mu);
        if (((size_t)1 << (POOL_MIN_SHIFT + k)) == cap && pool.kept + cap <= limit) {
            b->next = pool.free[k];
            pool.free[k] = b;
            pool.kept += cap;
            kept = true;
        }
        pthread_mutex_unlock(&pool.mu);
    }
    if (kept)
        return;
    free(b);
    /* Not kept: free it once nothing uses it. */
    struct pinned_block tmp = { .p = p, .cap = cap, .fence = fence };
    block_settle(c, &tmp);
    if (gx_cu_push(c, NULL, "pinned staging memory") == GX_OK) {
        c->mem_free_host(p);
        gx_cu_pop(c);
    }
}

void gx_gpu_pinned_put(void *p, size_t cap)
{
    gx_gpu_pinned_put_after(p, cap, NULL);
}

/* ---- stream ordering ------------------------------------------------------- */
/* gx's own stream, one per process on GPU 0's primary context: the copies
 * back to the caller's buffers run on it, and the caller's stream waits for
 * them with an event, so gx never queues copies on a stream it does not own. */
static gx_cu_stream gx_stream;
static pthread_mutex_t stream_mu = PTHREAD_MUTEX_INITIALIZER;

int gx_gpu_stream_wait(void *user_stream, const void *dev_hint)
{
    const struct gx_cu *c;
    int rc = enter(dev_hint, "waiting for the caller's stream", &c);
    if (rc != GX_OK)
        return rc;
    gx_cu_event ev = NULL;
    gx_cu_result r = c->event_create(&ev, GX_CU_EVENT_DISABLE_TIMING);
    if (r == GX_CU_SUCCESS)
        r = c->event_record(ev, (gx_cu_stream)user_stream);
    if (r == GX_CU_SUCCESS)
        r = c->event_synchronize(ev);
    if (ev)
        c->event_destroy(ev);
    gx_cu_pop(c);
    if (r != GX_CU_SUCCESS) {
        char e[64];
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "waiting for the work already on stream %p "
                       "failed: %s", user_stream, gx_cu_errstr(r, e, sizeof(e)));
    }
    return GX_OK;
}

int gx_gpu_stream_stage_out(void *user_stream, void *dev, const void *host, size_t len,
                            void **fence)
{
    *fence = NULL;
    const struct gx_cu *c;
    int rc = enter(dev, "copying a result back on the caller's stream", &c);
    if (rc != GX_OK)
        return rc;
    gx_cu_result r = GX_CU_SUCCESS;
    pthread_mutex_lock(&stream_mu);
    if (!gx_stream)
        r = c->stream_create(&gx_stream, GX_CU_STREAM_NON_BLOCKING);
    gx_cu_stream s = gx_stream;
    pthread_mutex_unlock(&stream_mu);
    gx_cu_event ev = NULL;
    if (r == GX_CU_SUCCESS)
        r = c->memcpy_htod_async((gx_cu_deviceptr)(uintptr_t)dev, host, len, s);
    if (r == GX_CU_SUCCESS)
        r = c->event_create(&ev, GX_CU_EVENT_DISABLE_TIMING);
    if (r == GX_CU_SUCCESS)
        r = c->event_record(ev, s);
    if (r == GX_CU_SUCCESS)
        r = c->stream_wait_event((gx_cu_stream)user_stream, ev, 0);
    if (r != GX_CU_SUCCESS && ev) {
        c->event_synchronize(ev); /* the copy may be queued: let it finish */
        c->event_destroy(ev);
        ev = NULL;
    }
    gx_cu_pop(c);
    if (r != GX_CU_SUCCESS)
        return copy_err(r, "stream-ordered cuMemcpyHtoDAsync", dev, len);
    *fence = ev;
    return GX_OK;
}
