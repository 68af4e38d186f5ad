/*
 * devmem.h - device memory for test programs that use only the public gx
 * API: the CUDA driver (GX_CUDA_LIB, default libcuda.so.1: the fake in CI,
 * the real one in tests/gpu/run.sh) opened with dlopen, entry points by
 * version, GPU 0's (DEVMEM_DEVICE's) primary context made current on the
 * calling thread.
 * Header-only; every function returns 0 on success.
 */
#ifndef GX_TEST_DEVMEM_H
#define GX_TEST_DEVMEM_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct devmem {
    int (*alloc)(unsigned long long *p, size_t n);
    int (*free_)(unsigned long long p);
    int (*htod)(unsigned long long d, const void *h, size_t n);
    int (*dtoh)(void *h, unsigned long long d, size_t n);
    int (*htod_async)(unsigned long long d, const void *h, size_t n, void *stream);
    int (*stream_sync)(void *stream);
    int (*stream_create)(void **stream, unsigned flags); /* 1: non-blocking */
    int (*peek)(unsigned long long d, void *out, size_t n); /* fake only, else NULL */
    char why[200];
};

/* 0 and `dm` filled, or -1 with dm->why. */
static inline int devmem_open(struct devmem *dm)
{
    const char *lib = getenv("GX_CUDA_LIB") ? getenv("GX_CUDA_LIB") : "libcuda.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(dm->why, sizeof(dm->why), "cannot open %s: %s", lib, dlerror());
        return -1;
    }
    int (*gpa)(const char *, void **, int, unsigned long long, int *) =
        (int (*)(const char *, void **, int, unsigned long long, int *))dlsym(
            h, "cuGetProcAddress_v2");
    if (!gpa) {
        snprintf(dm->why, sizeof(dm->why), "%s has no cuGetProcAddress_v2", lib);
        return -1;
    }
    void *f[11] = { 0 };
    static const char *const names[] = { "cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
                                         "cuCtxSetCurrent", "cuMemAlloc", "cuMemFree",
                                         "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyHtoDAsync",
                                         "cuStreamSynchronize", "cuStreamCreate" };
    for (int i = 0; i < 11; i++) {
        int st = 0;
        if (gpa(names[i], &f[i], 12000, 0, &st) != 0 || !f[i]) {
            snprintf(dm->why, sizeof(dm->why), "%s: no %s", lib, names[i]);
            return -1;
        }
    }
    int dev = 0, ordinal = getenv("DEVMEM_DEVICE") ? atoi(getenv("DEVMEM_DEVICE")) : 0;
    void *ctx = NULL;
    if (((int (*)(unsigned))f[0])(0) != 0 || ((int (*)(int *, int))f[1])(&dev, ordinal) != 0 ||
        ((int (*)(void **, int))f[2])(&ctx, dev) != 0 || ((int (*)(void *))f[3])(ctx) != 0) {
        snprintf(dm->why, sizeof(dm->why), "%s: no usable GPU %d", lib, ordinal);
        return -1;
    }
    dm->alloc = (int (*)(unsigned long long *, size_t))f[4];
    dm->free_ = (int (*)(unsigned long long))f[5];
    dm->htod = (int (*)(unsigned long long, const void *, size_t))f[6];
    dm->dtoh = (int (*)(void *, unsigned long long, size_t))f[7];
    dm->htod_async = (int (*)(unsigned long long, const void *, size_t, void *))f[8];
    dm->stream_sync = (int (*)(void *))f[9];
    dm->stream_create = (int (*)(void **, unsigned))f[10];
    dm->peek = (int (*)(unsigned long long, void *, size_t))dlsym(h, "fakecuda_peek");
    return 0;
}

#endif
