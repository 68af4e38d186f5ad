/*
 * gpu_copy.c - moving bytes between device memory and pinned host memory:
 * synchronous copies in the buffer's own context, the pinned staging pool,
 * and, for the stream-ordered API, copies, events and host functions queued
 * on the caller's own stream (gx keeps no stream of its own).
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
#include "common/trace.h"
#include "gpudirect/cuda_loader.h"
#include "gpudirect/gpudirect.h"

GX_PARAM_DEFINE(gx_param_gpu_stage_pool, "GX_GPU_STAGE_POOL", GX_PARAM_SIZE, "256M", NULL,
                "Pinned host memory gx keeps for staging device buffers between calls.");

/* GX_TRACE: a staging copy on the GPU lane, from t0 to now. */
static void trace_copy(const char *what, uint64_t t0, size_t len)
{
    struct gx_trace_rec r = { .ts = t0, .dur = gx_trace_now() - t0, .name = what,
                              .cat = "gpu copy", .key = { "bytes" }, .val = { (int64_t)len },
                              .lane = GX_LANE_GPU, .kind = GX_TR_SPAN };
    gx_trace_emit(&r);
}

static int copy_err(gx_cu_result r, const char *what, const void *dev, size_t len)
{
    char e[64];
    return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s of %zu bytes at device address %p failed: %s",
                   what, len, dev, gx_cu_errstr(r, e, sizeof(e)));
}

/* The driver and the device pointer's context made current. `dev` must be
 * device memory; a hint (enter_hint) may be anything: host memory or NULL
 * then means the calling thread's context. */
static int enter_ctx(const void *dev, bool strict, const char *what, const struct gx_cu **out)
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
        if (g.type != GX_GPU_MEM_CUDA && strict)
            return gx_fail(GX_EINVAL, GX_SUB_GPU, "%s: %p is not device memory", what, dev);
    }
    int rc = gx_cu_push(c, g.type == GX_GPU_MEM_CUDA ? g.ctx : NULL, what);
    if (rc == GX_OK)
        *out = c;
    return rc;
}

static int enter(const void *dev, const char *what, const struct gx_cu **out)
{
    return enter_ctx(dev, true, what, out);
}

static int enter_hint(const void *hint, const char *what, const struct gx_cu **out)
{
    return enter_ctx(hint, false, what, out);
}

int gx_gpu_copy_dtoh(void *host, const void *dev, size_t len)
{
    if (!len)
        return GX_OK;
    const struct gx_cu *c = NULL;
    int rc = enter(dev, "device-to-host copy", &c);
    if (rc != GX_OK)
        return rc;
    uint64_t t0 = gx_trace_on() ? gx_trace_now() : 0;
    gx_cu_result r = c->memcpy_dtoh(host, (gx_cu_deviceptr)(uintptr_t)dev, len);
    gx_cu_pop(c);
    if (t0)
        trace_copy("copy device to host", t0, len);
    return r == GX_CU_SUCCESS ? GX_OK : copy_err(r, "cuMemcpyDtoH", dev, len);
}

int gx_gpu_copy_htod(void *dev, const void *host, size_t len)
{
    if (!len)
        return GX_OK;
    const struct gx_cu *c = NULL;
    int rc = enter(dev, "host-to-device copy", &c);
    if (rc != GX_OK)
        return rc;
    uint64_t t0 = gx_trace_on() ? gx_trace_now() : 0;
    gx_cu_result r = c->memcpy_htod((gx_cu_deviceptr)(uintptr_t)dev, host, len);
    gx_cu_pop(c);
    if (t0)
        trace_copy("copy host to device", t0, len);
    return r == GX_CU_SUCCESS ? GX_OK : copy_err(r, "cuMemcpyHtoD", dev, len);
}

int gx_gpu_copy_dtod(void *dst, const void *src, size_t len)
{
    if (!len)
        return GX_OK;
    const struct gx_cu *c = NULL;
    int rc = enter(dst, "device-to-device copy", &c);
    if (rc != GX_OK)
        return rc;
    if (!c->memcpy_dtod) {
        gx_cu_pop(c);
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "device-to-device copy: the driver has no "
                       "cuMemcpyDtoD_v2");
    }
    uint64_t t0 = gx_trace_on() ? gx_trace_now() : 0;
    gx_cu_result r = c->memcpy_dtod((gx_cu_deviceptr)(uintptr_t)dst,
                                    (gx_cu_deviceptr)(uintptr_t)src, len);
    gx_cu_pop(c);
    if (t0)
        trace_copy("copy device to device", t0, len);
    return r == GX_CU_SUCCESS ? GX_OK : copy_err(r, "cuMemcpyDtoD", dst, len);
}

/* ---- pinned pool ---------------------------------------------------------- */
#define POOL_MIN_SHIFT 16 /* 64 KiB */
#define POOL_CLASSES 28

/* A queued copy out of a pinned block: its event and the event's context. */
struct gpu_fence {
    gx_cu_event ev;
    gx_cu_ctx ctx;
};

struct pinned_block {
    struct pinned_block *next;
    void *p;
    size_t cap;
    gx_cu_ctx ctx;             /* the context that allocated it (frees it) */
    struct gpu_fence *fence;   /* NULL: free to reuse now */
};

static struct {
    pthread_mutex_t mu;
    struct pinned_block *free[POOL_CLASSES];
    struct pinned_block *live; /* every block handed out: its allocating context */
    size_t kept;
} pool = { .mu = PTHREAD_MUTEX_INITIALIZER };

static int size_class(size_t len)
{
    int k = 0;
    while (k < POOL_CLASSES - 1 && ((size_t)1 << (POOL_MIN_SHIFT + k)) < len)
        k++;
    return k;
}

/* Wait for a fence and drop it. */
static void fence_settle(const struct gx_cu *c, struct gpu_fence *f)
{
    if (!f)
        return;
    if (gx_cu_push(c, f->ctx, "staging fence") == GX_OK) {
        gx_cu_result r = c->event_synchronize(f->ev);
        if (r != GX_CU_SUCCESS)
            GX_WARN(GX_SUB_GPU, "staging fence: cuEventSynchronize failed (CUDA error %d)", r);
        c->event_destroy(f->ev);
        gx_cu_pop(c);
    }
    free(f);
}

/* Whether a fence has passed, without waiting (none: yes). */
static bool fence_passed(const struct gx_cu *c, struct gpu_fence *f)
{
    if (!f)
        return true;
    if (gx_cu_push(c, f->ctx, "staging fence") != GX_OK)
        return false;
    gx_cu_result r = c->event_query(f->ev);
    gx_cu_pop(c);
    return r == GX_CU_SUCCESS;
}

/* The context of a device pointer (NULL for none or host memory). */
static gx_cu_ctx ctx_of(const void *dev)
{
    struct gx_gpu_ptr g;
    if (!dev || gx_gpu_ptr_query(dev, &g) != GX_OK || g.type != GX_GPU_MEM_CUDA)
        return NULL;
    return g.ctx;
}

void *gx_gpu_pinned_get(size_t len, const void *dev_hint, size_t *cap)
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
    /* A kept block whose last copy out has finished; one still fenced by a
     * queued stream call is left alone (waiting for it would serialise
     * back-to-back stream calls), unless the pool is at its cap. */
    size_t limit = 0;
    (void)gx_param_size(&gx_param_gpu_stage_pool, &limit);
    pthread_mutex_lock(&pool.mu);
    struct pinned_block **pp = &pool.free[k], *b = NULL;
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->cap >= len && fence_passed(c, (*pp)->fence)) {
            b = *pp;
            break;
        }
    }
    if (!b && pool.free[k] && pool.free[k]->cap >= len && pool.kept + want > limit)
        b = *(pp = &pool.free[k]); /* no room for another: wait for the oldest use */
    if (b) {
        *pp = b->next;
        pool.kept -= b->cap;
        b->next = pool.live;
        pool.live = b;
    }
    pthread_mutex_unlock(&pool.mu);
    if (b) {
        fence_settle(c, b->fence); /* the last copy out of it has finished */
        b->fence = NULL;
        *cap = b->cap;
        return b->p;
    }
    b = calloc(1, sizeof(*b));
    if (!b) {
        gx_fail(GX_ENOMEM, GX_SUB_GPU, "pinned staging memory: out of memory");
        return NULL;
    }
    if (gx_cu_push(c, ctx_of(dev_hint), "pinned staging memory") != GX_OK) {
        free(b);
        return NULL;
    }
    void *p = NULL;
    gx_cu_result r = c->mem_host_alloc(&p, want, GX_CU_MEMHOSTALLOC_PORTABLE);
    if (r == GX_CU_SUCCESS)
        c->ctx_get_current(&b->ctx);
    gx_cu_pop(c);
    if (r != GX_CU_SUCCESS || !p) {
        free(b);
        gx_fail(GX_ENOMEM, GX_SUB_GPU, "cuMemHostAlloc of %zu bytes of pinned staging memory "
                "failed (CUDA error %d)", want, r);
        return NULL;
    }
    b->p = p;
    b->cap = want;
    pthread_mutex_lock(&pool.mu);
    b->next = pool.live;
    pool.live = b;
    pthread_mutex_unlock(&pool.mu);
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
    int k = size_class(cap);
    bool kept = false;
    pthread_mutex_lock(&pool.mu);
    struct pinned_block **pp = &pool.live;
    while (*pp && (*pp)->p != p)
        pp = &(*pp)->next;
    struct pinned_block *b = *pp;
    if (b) {
        *pp = b->next;
        b->fence = fence;
        if (((size_t)1 << (POOL_MIN_SHIFT + k)) == cap && pool.kept + cap <= limit) {
            b->next = pool.free[k];
            pool.free[k] = b;
            pool.kept += cap;
            kept = true;
        }
    }
    pthread_mutex_unlock(&pool.mu);
    if (!b) {
        GX_WARN(GX_SUB_GPU, "pinned staging memory %p was not handed out by the pool", p);
        return;
    }
    if (kept)
        return;
    /* Not kept: free it once nothing uses it. */
    fence_settle(c, fence);
    if (gx_cu_push(c, b->ctx, "pinned staging memory") == GX_OK) {
        c->mem_free_host(p);
        gx_cu_pop(c);
    }
    free(b);
}

void gx_gpu_pinned_put(void *p, size_t cap)
{
    gx_gpu_pinned_put_after(p, cap, NULL);
}

/* ---- stream ordering -------------------------------------------------------
 * The stream forms queue their copies and a host function on the caller's
 * own stream: no stream of gx's, and the caller's stream orders everything. */

int gx_gpu_stream_wait(void *user_stream, const void *dev_hint)
{
    const struct gx_cu *c = NULL;
    int rc = enter_hint(dev_hint, "waiting for the caller's stream", &c);
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

int gx_gpu_stream_copy_dtoh(void *user_stream, void *host, const void *dev, size_t len)
{
    const struct gx_cu *c = NULL;
    int rc = enter(dev, "queueing a device-to-host copy on the caller's stream", &c);
    if (rc != GX_OK)
        return rc;
    gx_cu_result r = c->memcpy_dtoh_async(host, (gx_cu_deviceptr)(uintptr_t)dev, len,
                                          (gx_cu_stream)user_stream);
    gx_cu_pop(c);
    return r == GX_CU_SUCCESS ? GX_OK : copy_err(r, "cuMemcpyDtoHAsync", dev, len);
}

int gx_gpu_stream_copy_htod(void *user_stream, void *dev, const void *host, size_t len,
                            void **fence)
{
    *fence = NULL;
    const struct gx_cu *c = NULL;
    int rc = enter(dev, "queueing a host-to-device copy on the caller's stream", &c);
    if (rc != GX_OK)
        return rc;
    struct gpu_fence *f = calloc(1, sizeof(*f));
    gx_cu_result r = f ? c->ctx_get_current(&f->ctx) : 2 /* CUDA_ERROR_OUT_OF_MEMORY */;
    if (r == GX_CU_SUCCESS)
        r = c->memcpy_htod_async((gx_cu_deviceptr)(uintptr_t)dev, host, len,
                                 (gx_cu_stream)user_stream);
    if (r == GX_CU_SUCCESS)
        r = c->event_create(&f->ev, GX_CU_EVENT_DISABLE_TIMING);
    if (r == GX_CU_SUCCESS)
        r = c->event_record(f->ev, (gx_cu_stream)user_stream);
    if (r != GX_CU_SUCCESS && f && f->ev) {
        c->stream_synchronize((gx_cu_stream)user_stream); /* the copy may be queued */
        c->event_destroy(f->ev);
    }
    gx_cu_pop(c);
    if (r != GX_CU_SUCCESS) {
        free(f);
        return copy_err(r, "cuMemcpyHtoDAsync", dev, len);
    }
    *fence = f;
    return GX_OK;
}

int gx_gpu_stream_fence(void *user_stream, const void *dev_hint, void **fence)
{
    *fence = NULL;
    const struct gx_cu *c = NULL;
    int rc = enter_hint(dev_hint, "fencing staging memory on the caller's stream", &c);
    if (rc != GX_OK)
        return rc;
    struct gpu_fence *f = calloc(1, sizeof(*f));
    gx_cu_result r = f ? c->ctx_get_current(&f->ctx) : 2 /* CUDA_ERROR_OUT_OF_MEMORY */;
    if (r == GX_CU_SUCCESS)
        r = c->event_create(&f->ev, GX_CU_EVENT_DISABLE_TIMING);
    if (r == GX_CU_SUCCESS)
        r = c->event_record(f->ev, (gx_cu_stream)user_stream);
    if (r != GX_CU_SUCCESS && f && f->ev)
        c->event_destroy(f->ev);
    gx_cu_pop(c);
    if (r != GX_CU_SUCCESS) {
        free(f);
        char e[64];
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "recording an event on stream %p failed: %s",
                       user_stream, gx_cu_errstr(r, e, sizeof(e)));
    }
    *fence = f;
    return GX_OK;
}

int gx_gpu_stream_host_fn(void *user_stream, const void *dev_hint, void (*fn)(void *),
                          void *arg)
{
    const struct gx_cu *c = NULL;
    int rc = enter_hint(dev_hint, "queueing gx's step on the caller's stream", &c);
    if (rc != GX_OK)
        return rc;
    gx_cu_result r = c->launch_host_func
                         ? c->launch_host_func((gx_cu_stream)user_stream, fn, arg)
                         : 500; /* CUDA_ERROR_NOT_FOUND */
    gx_cu_pop(c);
    if (r != GX_CU_SUCCESS) {
        char e[64];
        return gx_fail(r == 500 ? GX_EUNSUPPORTED : GX_ESYSTEM, GX_SUB_GPU, "cuLaunchHostFunc "
                       "on stream %p failed: %s%s", user_stream, gx_cu_errstr(r, e, sizeof(e)),
                       c->launch_host_func ? "" : " (a CUDA driver older than 10.0)");
    }
    return GX_OK;
}
