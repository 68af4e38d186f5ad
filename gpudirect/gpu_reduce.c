/*
 * gpu_reduce.c - gx's CUDA reduction kernels through the driver API
 * (gpu_reduce.h): the embedded image loaded with cuModuleLoadData once per
 * CUDA context, kernels looked up by name (gpudirect/kernels/
 * gx_kernel_names.h), launched with cuLaunchKernel on the caller's stream.
 * Modules stay loaded for the life of the process (a context gx saw may be
 * the application's; unloading races its teardown for no gain).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "gpudirect/cuda_loader.h"
#include "gpudirect/gpu_reduce.h"
#include "gpudirect/gpudirect.h"
#include "gpudirect/kernels/gx_kernel_names.h"
#include "gx_kernels_config.h"

GX_PARAM_DEFINE(gx_param_gpu_reduce, "GX_GPU_REDUCE", GX_PARAM_ENUM, "auto", "auto|gpu|cpu",
                "Where collectives on device buffers reduce: gpu = gx's CUDA kernels add each "
                "received chunk into the device buffer, cpu = on the pinned host stand-ins, "
                "auto = gpu when the kernels were built and load.");

extern const unsigned char gx_kernels_image_start[];
extern const unsigned char gx_kernels_image_end[];

static const char *const kernel_names[GXK_NKERNELS] = {
#define GXK_NAME(t, T, size) "gx_reduce_sum_" #t, "gx_reduce_prod_" #t, "gx_reduce_min_" #t, \
                             "gx_reduce_max_" #t, "gx_divide_" #t,
    GXK_TYPES(GXK_NAME)
#undef GXK_NAME
};

#define MAX_CTX 32
struct kmodule {
    gx_cu_ctx ctx;
    gx_cu_module mod;
    gx_cu_result load_rc;
    gx_cu_function fn[GXK_NKERNELS];
    /* The collectives' reduce steps (gx_gpu_reduce_step): gx's own stream
     * and device scratch for host operands in this context, under mu. */
    pthread_mutex_t mu;
    gx_cu_stream stream;
    gx_cu_deviceptr scratch;
    size_t scratch_len;
};
static struct {
    pthread_mutex_t mu;
    struct kmodule m[MAX_CTX];
    int n;
    const void *test_image;
    size_t test_len;
} kc = { .mu = PTHREAD_MUTEX_INITIALIZER };

bool gx_gpu_kernels_built(void) { return GX_KERNELS_BUILT != 0; }

static const void *image(size_t *len)
{
    if (kc.test_image) {
        *len = kc.test_len;
        return kc.test_image;
    }
    *len = (size_t)(gx_kernels_image_end - gx_kernels_image_start);
    return gx_kernels_image_start;
}

void gx_gpu_kernels_test_image(const void *img, size_t len)
{
    pthread_mutex_lock(&kc.mu);
    kc.test_image = img;
    kc.test_len = len;
    kc.n = 0; /* modules of the old image are leaked: tests only */
    pthread_mutex_unlock(&kc.mu);
}

/* The module of the current context `ctx`, loaded on first use; with kc.mu
 * held. GX_OK, or an error naming `kname` (the kernel that needed it). */
static int module_locked(const struct gx_cu *c, gx_cu_ctx ctx, const char *kname,
                         struct kmodule **out)
{
    if (!c->module_load_data || !c->module_get_function || !c->launch_kernel)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "%s: the CUDA driver %s lacks "
                       "cuModuleLoadData/cuModuleGetFunction/cuLaunchKernel", kname, c->lib);
    struct kmodule *k = NULL;
    for (int i = 0; i < kc.n && !k; i++)
        if (kc.m[i].ctx == ctx)
            k = &kc.m[i];
    if (!k) {
        if (kc.n == MAX_CTX)
            return gx_fail(GX_ENOMEM, GX_SUB_GPU, "%s: more than %d CUDA contexts hold gx's "
                           "reduction kernels", kname, MAX_CTX);
        k = &kc.m[kc.n++];
        memset(k, 0, sizeof(*k));
        pthread_mutex_init(&k->mu, NULL);
        k->ctx = ctx;
        size_t len = 0;
        const void *img = image(&len);
        k->load_rc = c->module_load_data(&k->mod, img);
    }
    if (k->load_rc != GX_CU_SUCCESS) {
        char e[64];
        size_t len = 0;
        (void)image(&len);
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s: cuModuleLoadData of gx's CUDA reduction "
                       "kernels (%s, %zu bytes) failed: %s%s", kname,
                       kc.test_image ? "a test image"
                       : GX_KERNELS_BUILT ? "fatbin for " GX_KERNELS_ARCHS " + PTX"
                                          : "the placeholder of a build without nvcc", len,
                       gx_cu_errstr(k->load_rc, e, sizeof(e)),
                       GX_KERNELS_BUILT || kc.test_image ? "" : " (rebuild libgx with nvcc)");
    }
    *out = k;
    return GX_OK;
}

static int function(const struct gx_cu *c, gx_cu_ctx ctx, int idx, gx_cu_function *fn,
                    struct kmodule **kout)
{
    pthread_mutex_lock(&kc.mu);
    struct kmodule *k = NULL;
    int rc = module_locked(c, ctx, kernel_names[idx], &k);
    if (rc == GX_OK && !k->fn[idx]) {
        gx_cu_result r = c->module_get_function(&k->fn[idx], k->mod, kernel_names[idx]);
        if (r != GX_CU_SUCCESS) {
            char e[64];
            k->fn[idx] = NULL;
            rc = gx_fail(GX_ESYSTEM, GX_SUB_GPU, "kernel %s: cuModuleGetFunction failed: %s",
                         kernel_names[idx], gx_cu_errstr(r, e, sizeof(e)));
        }
    }
    if (rc == GX_OK) {
        *fn = k->fn[idx];
        if (kout)
            *kout = k;
    }
    pthread_mutex_unlock(&kc.mu);
    return rc;
}

/* The driver, and the context of the first device buffer among bufs made
 * current (else the thread's own, else GPU 0's primary). Undo: gx_cu_pop. */
static int enter(const void *const *bufs, int n, const char *what, const struct gx_cu **out,
                 gx_cu_ctx *ctx)
{
    char why[200];
    const struct gx_cu *c = gx_cu_get(why, sizeof(why));
    if (!c)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "%s: %s", what, why);
    void *want = NULL;
    for (int i = 0; i < n && !want; i++) {
        struct gx_gpu_ptr g = { 0 };
        if (!bufs[i])
            continue;
        int rc = gx_gpu_ptr_query(bufs[i], &g);
        if (rc != GX_OK)
            return rc;
        if (g.type == GX_GPU_MEM_CUDA)
            want = g.ctx;
    }
    int rc = gx_cu_push(c, want, what);
    if (rc != GX_OK)
        return rc;
    if (c->ctx_get_current(ctx) != GX_CU_SUCCESS || !*ctx) {
        gx_cu_pop(c);
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s: no current CUDA context", what);
    }
    *out = c;
    return GX_OK;
}

static int launch(int idx, void **params, size_t count, void *stream)
{
    const char *kname = kernel_names[idx];
    const void *bufs[3] = { *(void **)params[0], NULL, NULL };
    if (idx % (GXK_NOPS + 1) != GXK_NOPS) {
        bufs[1] = *(void **)params[1];
        bufs[2] = *(void **)params[2];
    }
    const struct gx_cu *c = NULL;
    gx_cu_ctx ctx = NULL;
    int rc = enter(bufs, 3, kname, &c, &ctx);
    if (rc != GX_OK)
        return rc;
    gx_cu_function fn = NULL;
    rc = function(c, ctx, idx, &fn, NULL);
    if (rc == GX_OK) {
        size_t blocks = (count + 255) / 256;
        blocks = blocks > 4096 ? 4096 : blocks; /* grid-stride loops cover the rest */
        gx_cu_result r = c->launch_kernel(fn, (unsigned)blocks, 1, 1, 256, 1, 1, 0,
                                          (gx_cu_stream)stream, params, NULL);
        const char *step = "cuLaunchKernel";
        if (r == GX_CU_SUCCESS && !stream) {
            r = c->stream_synchronize(NULL);
            step = "cuStreamSynchronize after it";
        }
        if (r != GX_CU_SUCCESS) {
            char e[64];
            rc = gx_fail(GX_ESYSTEM, GX_SUB_GPU, "kernel %s (%zu elements): %s failed: %s",
                         kname, count, step, gx_cu_errstr(r, e, sizeof(e)));
        }
    }
    gx_cu_pop(c);
    return rc;
}

static int check(const char *fn, enum gx_datatype dtype, enum gx_redop op)
{
    if ((unsigned)dtype >= GX_DATATYPE_COUNT)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "%s: dtype %d is not a gx_datatype", fn,
                       (int)dtype);
    if ((unsigned)op >= GX_REDOP_COUNT)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "%s: op %d is not a gx_redop", fn, (int)op);
    return GX_OK;
}

int gx_gpu_reduce(void *dst, const void *a, const void *b, size_t count,
                  enum gx_datatype dtype, enum gx_redop op, void *stream)
{
    int rc = check("gx_gpu_reduce", dtype, op);
    if (rc != GX_OK || count == 0)
        return rc;
    if (!dst || !a || !b)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "gx_gpu_reduce: %s is NULL with count %zu",
                       !dst ? "dst" : !a ? "a" : "b", count);
    int slot = op == GX_AVG ? GX_SUM : (int)op;
    unsigned long long n = count;
    void *params[4] = { &dst, (void *)&a, (void *)&b, &n };
    return launch((int)dtype * (GXK_NOPS + 1) + slot, params, count, stream);
}

int gx_gpu_reduce_finish_avg(void *buf, size_t count, enum gx_datatype dtype, int nranks,
                             void *stream)
{
    int rc = check("gx_gpu_reduce_finish_avg", dtype, GX_AVG);
    if (rc != GX_OK)
        return rc;
    if (nranks < 1)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "gx_gpu_reduce_finish_avg: nranks %d is not "
                       "positive", nranks);
    if (count == 0 || nranks == 1)
        return GX_OK;
    if (!buf)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "gx_gpu_reduce_finish_avg: buf is NULL with "
                       "count %zu", count);
    unsigned long long n = count;
    void *params[3] = { &buf, &n, &nranks };
    return launch((int)dtype * (GXK_NOPS + 1) + GXK_NOPS, params, count, stream);
}

static const size_t type_size[GXK_NTYPES] = {
#define GXK_SIZE(t, T, size) size,
    GXK_TYPES(GXK_SIZE)
#undef GXK_SIZE
};

static int step_err(gx_cu_result r, const char *what, int idx, size_t count)
{
    char e[64];
    return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "GPU reduce step with kernel %s (%zu elements): %s "
                   "failed: %s", kernel_names[idx], count, what, gx_cu_errstr(r, e, sizeof(e)));
}

/* With k->mu held: gx's stream and >= bytes of device scratch. */
static gx_cu_result step_resources(const struct gx_cu *c, struct kmodule *k, size_t bytes)
{
    gx_cu_result r = GX_CU_SUCCESS;
    if (!k->stream)
        r = c->stream_create(&k->stream, GX_CU_STREAM_NON_BLOCKING);
    if (r == GX_CU_SUCCESS && k->scratch_len < bytes) {
        if (k->scratch)
            (void)c->mem_free(k->scratch);
        k->scratch = 0;
        k->scratch_len = 0;
        size_t want = bytes < ((size_t)1 << 20) ? (size_t)1 << 20 : bytes;
        r = c->mem_alloc(&k->scratch, want);
        if (r == GX_CU_SUCCESS)
            k->scratch_len = want;
    }
    return r;
}

int gx_gpu_reduce_step(void *host_dst, void *dev_dst, const void *a, bool a_dev,
                       const void *b, bool b_dev, size_t count, enum gx_datatype dtype,
                       enum gx_redop op)
{
    int rc = check("gx_gpu_reduce_step", dtype, op);
    if (rc != GX_OK || count == 0)
        return rc;
    int idx = (int)dtype * (GXK_NOPS + 1) + (op == GX_AVG ? GX_SUM : (int)op);
    const struct gx_cu *c = NULL;
    gx_cu_ctx ctx = NULL;
    const void *hint = dev_dst;
    rc = enter(&hint, 1, kernel_names[idx], &c, &ctx);
    if (rc != GX_OK)
        return rc;
    gx_cu_function fn = NULL;
    struct kmodule *k = NULL;
    rc = function(c, ctx, idx, &fn, &k);
    if (rc != GX_OK) {
        gx_cu_pop(c);
        return rc;
    }
    size_t bytes = count * type_size[dtype];
    pthread_mutex_lock(&k->mu);
    gx_cu_result r = step_resources(c, k, (a_dev ? 0 : bytes) + (b_dev ? 0 : bytes));
    const char *what = "gx's stream or device scratch";
    gx_cu_deviceptr da = (gx_cu_deviceptr)(uintptr_t)a, db = (gx_cu_deviceptr)(uintptr_t)b;
    if (r == GX_CU_SUCCESS && !a_dev) {
        da = k->scratch;
        what = "cuMemcpyHtoDAsync of operand a";
        r = c->memcpy_htod_async(da, a, bytes, k->stream);
    }
    if (r == GX_CU_SUCCESS && !b_dev) {
        db = k->scratch + (a_dev ? 0 : bytes);
        what = "cuMemcpyHtoDAsync of operand b";
        r = c->memcpy_htod_async(db, b, bytes, k->stream);
    }
    if (r == GX_CU_SUCCESS) {
        unsigned long long n = count;
        void *params[4] = { &dev_dst, &da, &db, &n };
        size_t blocks = (count + 255) / 256;
        blocks = blocks > 4096 ? 4096 : blocks;
        what = "cuLaunchKernel";
        r = c->launch_kernel(fn, (unsigned)blocks, 1, 1, 256, 1, 1, 0, k->stream, params, NULL);
    }
    if (r == GX_CU_SUCCESS) {
        what = "cuMemcpyDtoHAsync of the result";
        r = c->memcpy_dtoh_async(host_dst, (gx_cu_deviceptr)(uintptr_t)dev_dst, bytes, k->stream);
    }
    if (r == GX_CU_SUCCESS) {
        what = "cuStreamSynchronize";
        r = c->stream_synchronize(k->stream);
    } else if (k->stream) {
        (void)c->stream_synchronize(k->stream); /* nothing left in flight on the scratch */
    }
    pthread_mutex_unlock(&k->mu);
    gx_cu_pop(c);
    return r == GX_CU_SUCCESS ? GX_OK : step_err(r, what, idx, count);
}

enum { MODE_AUTO, MODE_GPU, MODE_CPU };
static int mode = MODE_AUTO;
static pthread_once_t mode_once = PTHREAD_ONCE_INIT;

static void mode_read(void)
{
    if (gx_param_enum(&gx_param_gpu_reduce, &mode) != GX_OK)
        mode = MODE_AUTO; /* gx_param_enum reported it, naming GX_GPU_REDUCE */
}

bool gx_gpu_reduce_wanted(const void *dev_hint)
{
    pthread_once(&mode_once, mode_read);
    if (mode != MODE_AUTO)
        return mode == MODE_GPU;
    if (!GX_KERNELS_BUILT && !kc.test_image)
        return false;
    const struct gx_cu *c = NULL;
    gx_cu_ctx ctx = NULL;
    if (enter(&dev_hint, 1, "GX_GPU_REDUCE=auto", &c, &ctx) != GX_OK)
        return false;
    pthread_mutex_lock(&kc.mu);
    struct kmodule *k = NULL;
    bool ok = module_locked(c, ctx, "GX_GPU_REDUCE=auto", &k) == GX_OK;
    pthread_mutex_unlock(&kc.mu);
    gx_cu_pop(c);
    return ok;
}

bool gx_gpu_reduce_forced(void)
{
    pthread_once(&mode_once, mode_read);
    return mode == MODE_GPU;
}

bool gx_gpu_kernels_describe(char *out, size_t len)
{
    if (!GX_KERNELS_BUILT) {
        snprintf(out, len, "not built (no nvcc at build time)");
        return false;
    }
    char why[200] = "";
    const struct gx_cu *c = gx_cu_get(why, sizeof(why));
    if (!c) {
        snprintf(out, len, "built for %s (+PTX), not loaded: %s", GX_KERNELS_ARCHS, why);
        return false;
    }
    gx_cu_ctx ctx = NULL;
    int rc = enter(NULL, 0, "gx-info", &c, &ctx);
    if (rc == GX_OK) {
        pthread_mutex_lock(&kc.mu);
        struct kmodule *k = NULL;
        rc = module_locked(c, ctx, "gx-info", &k);
        pthread_mutex_unlock(&kc.mu);
        gx_cu_pop(c);
    }
    if (rc == GX_OK)
        snprintf(out, len, "built for %s (+PTX), loaded", GX_KERNELS_ARCHS);
    else
        snprintf(out, len, "built for %s (+PTX), not loaded: %s", GX_KERNELS_ARCHS,
                 gx_last_error());
    return rc == GX_OK;
}
