/*
 * nccl_loader.c - the NCCL library, opened with dlopen (GX_NCCL_LIB) only to
 * report what is there: gx-info prints its version. gx does not call NCCL
 * for collectives yet (device buffers are staged through host memory,
 * docs/gpu.md); libgx never links it and builds without nccl.h.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "common/param.h"
#include "gpudirect/gpudirect.h"

GX_PARAM_DEFINE(gx_param_nccl_lib, "GX_NCCL_LIB", GX_PARAM_STRING, "libnccl.so.2", NULL,
                "The NCCL library gx-info reports (a path or a soname; opened with dlopen).");

static int nccl_version;
static char nccl_why[320];
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static void nccl_load(void)
{
    const char *lib = gx_param_text(&gx_param_nccl_lib);
    dlerror();
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(nccl_why, sizeof(nccl_why), "no libnccl: %s (GX_NCCL_LIB=%s)",
                 e ? e : "dlopen failed", lib);
        return;
    }
    /* ncclResult_t ncclGetVersion(int *version): ncclSuccess is 0. */
    int (*get_version)(int *) = (int (*)(int *))dlsym(h, "ncclGetVersion");
    int v = 0;
    if (!get_version || get_version(&v) != 0 || v <= 0) {
        snprintf(nccl_why, sizeof(nccl_why), "%s: no usable ncclGetVersion", lib);
        return;
    }
    nccl_version = v;
    /* NCCL_VERSION(X,Y,Z): X*10000+Y*100+Z from 2.9, X*1000+Y*100+Z before. */
    int major = v >= 10000 ? v / 10000 : v / 1000;
    int minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
    snprintf(nccl_why, sizeof(nccl_why), "version %d.%d.%d (%s)", major, minor, v % 100, lib);
}

int gx_nccl_version(char *why, size_t why_len)
{
    pthread_once(&nccl_once, nccl_load);
    if (why && why_len)
        snprintf(why, why_len, "%s", nccl_why);
    return nccl_version;
}
