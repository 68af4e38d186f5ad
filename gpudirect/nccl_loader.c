/*
 * nccl_loader.c - the NCCL library, opened with dlopen (GX_NCCL_LIB):
 * its version (gx-info) and the entry points the intra-node device
 * collectives call (nccl_comm.c). libgx never links NCCL and builds without
 * nccl.h (nccl_api.h declares the ABI).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/param.h"
#include "gpudirect/gpudirect.h"
#include "gpudirect/nccl_api.h"

GX_PARAM_DEFINE(gx_param_nccl_lib, "GX_NCCL_LIB", GX_PARAM_STRING, "libnccl.so.2", NULL,
                "The NCCL library for intra-node collectives on device buffers (a path or a "
                "soname; opened with dlopen).");

static int nccl_version;
static char nccl_why[320];
static struct gx_nccl_api api;
static const struct gx_nccl_api *api_ok;
static char api_why[400];
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static void version_text(int v, char *buf, size_t len)
{
    /* NCCL_VERSION(X,Y,Z): X*10000+Y*100+Z from 2.9, X*1000+Y*100+Z before. */
    int major = v >= 10000 ? v / 10000 : v / 1000;
    int minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
    snprintf(buf, len, "%d.%d.%d", major, minor, v % 100);
}

static void nccl_load(void)
{
    const char *lib = gx_param_text(&gx_param_nccl_lib);
    dlerror();
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(nccl_why, sizeof(nccl_why), "no libnccl: %s (GX_NCCL_LIB=%s)",
                 e ? e : "dlopen failed", lib);
        snprintf(api_why, sizeof(api_why), "%s", nccl_why);
        return;
    }
    /* ncclResult_t ncclGetVersion(int *version): ncclSuccess is 0. */
    int (*get_version)(int *) = (int (*)(int *))dlsym(h, "ncclGetVersion");
    int v = 0;
    if (!get_version || get_version(&v) != 0 || v <= 0) {
        snprintf(nccl_why, sizeof(nccl_why), "%s: no usable ncclGetVersion", lib);
        snprintf(api_why, sizeof(api_why), "%s", nccl_why);
        return;
    }
    nccl_version = v;
    char ver[32];
    version_text(v, ver, sizeof(ver));
    snprintf(nccl_why, sizeof(nccl_why), "version %s (%s)", ver, lib);
    /* Every entry point the device collectives call; the first one missing
     * is named with the library. */
#define GX_NCCL_RESOLVE(field, name, ret, args)                                                 \
    if (!api_why[0]) {                                                                          \
        dlerror();                                                                              \
        *(void **)&api.field = dlsym(h, name);                                                  \
        if (!api.field) {                                                                       \
            const char *e = dlerror();                                                          \
            snprintf(api_why, sizeof(api_why), "%s (NCCL %s): no symbol %s: %s", lib, ver, \
                     name, e ? e : "not found");                                          \
        }                                                                                       \
    }
    GX_NCCL_ENTRY_POINTS(GX_NCCL_RESOLVE)
#undef GX_NCCL_RESOLVE
    if (api_why[0])
        return;
    /* ncclAvg and ncclBfloat16 (used as constants in nccl_api.h) came with
     * 2.10. */
    if (v < 21000) {
        snprintf(api_why, sizeof(api_why), "%s: NCCL %s is older than 2.10, which gx needs",
                 lib, ver);
        return;
    }
    api.version = v;
    snprintf(api.lib, sizeof(api.lib), "%s", lib);
    snprintf(api_why, sizeof(api_why), "NCCL %s (%s)", ver, lib);
    api_ok = &api;
}

int gx_nccl_version(char *why, size_t why_len)
{
    pthread_once(&nccl_once, nccl_load);
    if (why && why_len)
        snprintf(why, why_len, "%s", nccl_why);
    return nccl_version;
}

const struct gx_nccl_api *gx_nccl_api_get(char *why, size_t why_len)
{
    pthread_once(&nccl_once, nccl_load);
    if (why && why_len)
        snprintf(why, why_len, "%s", api_why);
    return api_ok;
}

const char *gx_nccl_errstr(const struct gx_nccl_api *n, gx_nccl_result r, char *buf,
                           size_t len)
{
    static const char *names[] = { "ncclSuccess", "ncclUnhandledCudaError",
                                   "ncclSystemError", "ncclInternalError",
                                   "ncclInvalidArgument", "ncclInvalidUsage",
                                   "ncclRemoteError", "ncclInProgress" };
    const char *name = r >= 0 && r < (int)(sizeof(names) / sizeof(names[0])) ? names[r]
                                                                             : "ncclResult";
    const char *s = n && n->get_error_string ? n->get_error_string(r)
                                             : NULL;
    snprintf(buf, len, "%s (%d)%s%s", name, r, s ? ": " : "", s ? s : "");
    return buf;
}
