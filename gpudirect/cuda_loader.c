/*
 * cuda_loader.c - open the CUDA driver (libcuda) with dlopen and resolve the
 * entry points gx uses through cuGetProcAddress, each at the CUDA version
 * whose ABI cuda_loader.h declares (so "cuMemAlloc" at 3020 is
 * cuMemAlloc_v2). The only symbols looked up by name are cuGetProcAddress
 * itself (cuGetProcAddress_v2 from CUDA 12, the 4-argument form of 11.3+).
 * No CUDA header and no libcudart are needed to build or run.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "gx/gx.h"
#include "common/param.h"
#include "gpudirect/cuda_loader.h"

GX_PARAM_DEFINE(gx_param_cuda_lib, "GX_CUDA_LIB", GX_PARAM_STRING, "libcuda.so.1", NULL,
                "The CUDA driver library gx opens with dlopen (a path or a soname; tests "
                "point it at the fake libcuda).");

typedef gx_cu_result (*get_proc_v2_fn)(const char *sym, void **pfn, int ver,
                                       unsigned long long flags, int *status);
typedef gx_cu_result (*get_proc_v1_fn)(const char *sym, void **pfn, int ver,
                                       unsigned long long flags);

static struct gx_cu cu;
static bool cu_ok;
static char cu_why[320];
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

const char *gx_cu_errstr(gx_cu_result r, char *buf, size_t len)
{
    const char *name = NULL;
    if (cu_ok && cu.get_error_name && cu.get_error_name(r, &name) != GX_CU_SUCCESS)
        name = NULL;
    snprintf(buf, len, "%s (%d)", name ? name : "CUDA error", r);
    return buf;
}

/* Resolve every entry point by version. False with the missing name. */
static bool cu_resolve(void *h, const char *lib)
{
    get_proc_v2_fn get_v2 = (get_proc_v2_fn)dlsym(h, "cuGetProcAddress_v2");
    get_proc_v1_fn get_v1 = get_v2 ? NULL : (get_proc_v1_fn)dlsym(h, "cuGetProcAddress");
    if (!get_v2 && !get_v1) {
        snprintf(cu_why, sizeof(cu_why), "%s has no cuGetProcAddress_v2 or cuGetProcAddress "
                 "(a CUDA driver older than 11.3?)", lib);
        return false;
    }
    int status = 0;
    gx_cu_result r = 0;
    void *fn = NULL;
#define GX_CU_RESOLVE(field, name, ver, req, ret, args)                                          \
    fn = NULL;                                                                                    \
    status = 0;                                                                                   \
    r = get_v2 ? get_v2(name, &fn, ver, 0, &status) : get_v1(name, &fn, ver, 0);               \
    if (r != GX_CU_SUCCESS || status != 0)                                                       \
        fn = NULL;                                                                                \
    if (!fn && (req)) {                                                                          \
        snprintf(cu_why, sizeof(cu_why), "%s: cuGetProcAddress(\"%s\", version %d) failed "      \
                 "(result %d, status %d)", lib, name, ver, r, status);                          \
        return false;                                                                             \
    }                                                                                             \
    memcpy(&cu.field, &fn, sizeof(fn));
    GX_CU_ENTRY_POINTS(GX_CU_RESOLVE)
#undef GX_CU_RESOLVE
    return true;
}

static void cu_load(void)
{
    const char *lib = gx_param_text(&gx_param_cuda_lib);
    snprintf(cu.lib, sizeof(cu.lib), "%s", lib);
    dlerror();
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(cu_why, sizeof(cu_why), "no libcuda: %s (GX_CUDA_LIB=%s)",
                 e ? e : "dlopen failed", lib);
        return;
    }
    if (!cu_resolve(h, lib))
        return; /* the handle stays open: harmless, and symbols may be cached */
    gx_cu_result r = cu.init(0);
    if (r != GX_CU_SUCCESS) {
        snprintf(cu_why, sizeof(cu_why), "%s: cuInit failed with CUDA error %d%s", lib, r,
                 r == 100 ? " (CUDA_ERROR_NO_DEVICE: no GPU visible)" : "");
        return;
    }
    (void)cu.driver_get_version(&cu.driver_version);
    r = cu.device_get_count(&cu.device_count);
    if (r != GX_CU_SUCCESS || cu.device_count <= 0) {
        snprintf(cu_why, sizeof(cu_why), "%s: no GPU (cuDeviceGetCount: result %d, %d devices)",
                 lib, r, cu.device_count);
        return;
    }
    cu_ok = true;
    snprintf(cu_why, sizeof(cu_why), "%s: CUDA driver %d.%d with %d GPU(s)", lib,
             cu.driver_version / 1000, cu.driver_version % 1000 / 10, cu.device_count);
    GX_INFO(GX_SUB_GPU, "%s", cu_why);
}

const struct gx_cu *gx_cu_get(char *why, size_t why_len)
{
    pthread_once(&cu_once, cu_load);
    if (why && why_len)
        snprintf(why, why_len, "%s", cu_why);
    return cu_ok ? &cu : NULL;
}

/* GPU 0's primary context, retained once for the life of the process. */
static gx_cu_ctx primary0;
static gx_cu_result primary0_rc;
static pthread_once_t primary0_once = PTHREAD_ONCE_INIT;

static void primary0_retain(void)
{
    gx_cu_device dev;
    primary0_rc = cu.device_get(&dev, 0);
    if (primary0_rc == GX_CU_SUCCESS)
        primary0_rc = cu.primary_ctx_retain(&primary0, dev);
}

int gx_cu_push(const struct gx_cu *c, void *ctx, const char *what)
{
    gx_cu_result r = GX_CU_SUCCESS;
    gx_cu_ctx cx = ctx;
    if (!cx && c->ctx_get_current(&cx) != GX_CU_SUCCESS)
        cx = NULL;
    if (!cx) {
        pthread_once(&primary0_once, primary0_retain);
        r = primary0_rc;
        cx = primary0;
    }
    if (r == GX_CU_SUCCESS)
        r = c->ctx_push(cx);
    if (r != GX_CU_SUCCESS) {
        char e[64];
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s: cannot make %s current (%s)", what,
                       ctx ? "the buffer's CUDA context" : "a CUDA context (GPU 0's primary one)",
                       gx_cu_errstr(r, e, sizeof(e)));
    }
    return GX_OK;
}

void gx_cu_pop(const struct gx_cu *c)
{
    gx_cu_ctx old;
    (void)c->ctx_pop(&old);
}

int gx_cu_push_existing(const struct gx_cu *c)
{
    gx_cu_ctx cx = NULL;
    if (c->ctx_get_current(&cx) == GX_CU_SUCCESS && cx)
        return c->ctx_push(cx) == GX_CU_SUCCESS ? GX_OK : GX_ESYSTEM;
    for (int i = 0; i < c->device_count; i++) {
        gx_cu_device dev;
        unsigned flags = 0;
        int active = 0;
        if (c->device_get(&dev, i) != GX_CU_SUCCESS ||
            c->primary_ctx_get_state(dev, &flags, &active) != GX_CU_SUCCESS || !active)
            continue;
        /* Retained for the process's life, as primary0: no release to race. */
        if (c->primary_ctx_retain(&cx, dev) == GX_CU_SUCCESS && c->ctx_push(cx) == GX_CU_SUCCESS)
            return GX_OK;
    }
    return GX_ESYSTEM;
}
