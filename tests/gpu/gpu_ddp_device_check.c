/*
 * gpu_ddp_device_check.c - DDP with gradient buckets in CUDA device memory
 * (gx_ddp_config.device_buckets), under gx-run; public API + devmem.h.
 *
 *   gpu_ddp_device_check auto    parameters' data in device memory: the
 *                                buckets go to the device by themselves
 *   gpu_ddp_device_check device  device_buckets = 1, parameters without data
 *   gpu_ddp_device_check host    device_buckets = -1 with device data: host
 *                                buckets (the old path) still right
 *
 * Each: 5 parameters over several buckets, gradients written by async copies
 * on a non-blocking stream (cfg.stream) just before gx_ddp_grad_ready, four
 * iterations (the second after the rebuild; the third with a parameter left
 * out under find_unused_parameters: its average is 0; the fourth checks the
 * rebuilt layout again), each result read back with cuMemcpyDtoH and checked
 * against the value computed from the ranks. With the fake libcuda (its
 * device memory faults on any CPU touch) and device buckets it also proves:
 *   - every bucket's data is device memory of the fake (fakecuda_mem_kind),
 *     so no host bucket exists;
 *   - every gradient moves into and out of its bucket by a device-to-device
 *     copy on the stream: 2 per parameter per iteration (fakecuda counters);
 *   - a bucket's all-reduce is queued while backward is still running: after
 *     the first bucket's gradients, before the last one's, the scheduler
 *     counts it reduced (queued on the stream) already;
 *   - a comm hook is refused (it would read the buckets with the CPU).
 * On a real GPU (tests/gpu/run.sh) the fake-only checks are skipped.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gx/gx.h"
#include "tests/gpu/devmem.h"

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "FAIL rank %d %s:%d: ", me, __FILE__, __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, " (%s)\n", gx_last_error());                          \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

enum { P = 5 };
static const size_t counts[P] = { 1000, 70000, 3, 300000, 4097 };
static int me;
static struct devmem dm;
static int (*mem_kind)(const void *);
static unsigned long long (*dtod_copies)(void);
static int (*stream_destroy)(void *);

static float grad_value(int rank, int it, int i, size_t k)
{
    return (float)(2 * rank + it + i + (int)(k % 5));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int want_dev = strcmp(mode, "host") != 0;
    if (strcmp(mode, "auto") && strcmp(mode, "device") && strcmp(mode, "host")) {
        fprintf(stderr, "usage: gpu_ddp_device_check auto|device|host\n");
        return 2;
    }
    if (devmem_open(&dm) != 0) {
        fprintf(stderr, "gpu_ddp_device_check: %s\n", dm.why);
        return 77;
    }
    const char *lib = getenv("GX_CUDA_LIB") ? getenv("GX_CUDA_LIB") : "libcuda.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        mem_kind = (int (*)(const void *))dlsym(h, "fakecuda_mem_kind");
        dtod_copies = (unsigned long long (*)(void))dlsym(h, "fakecuda_dtod_copies");
        int (*gpa)(const char *, void **, int, unsigned long long, int *) =
            (int (*)(const char *, void **, int, unsigned long long, int *))dlsym(
                h, "cuGetProcAddress_v2");
        void *fn = NULL;
        int st = 0;
        if (gpa && gpa("cuStreamDestroy", &fn, 12000, 0, &st) == 0)
            stream_destroy = (int (*)(void *))fn;
    }
    struct gx_comm *comm = NULL;
    CHECK(gx_comm_init_env(&comm) == GX_OK, "init");
    me = gx_comm_rank(comm);
    int n = gx_comm_size(comm);

    void *stream = NULL;
    CHECK(dm.stream_create(&stream, 1) == 0, "cuStreamCreate");
    struct gx_ddp_param params[P];
    void *grads[P], *data[P];
    for (int i = 0; i < P; i++) {
        params[i] = (struct gx_ddp_param)GX_DDP_PARAM_INIT;
        params[i].count = counts[i];
        CHECK(gx_device_alloc(&grads[i], counts[i] * sizeof(float)) == GX_OK, "alloc");
        CHECK(gx_device_alloc(&data[i], counts[i] * sizeof(float)) == GX_OK, "alloc");
        if (strcmp(mode, "device") != 0)
            params[i].data = data[i];
    }
    struct gx_ddp_config cfg = GX_DDP_CONFIG_INIT;
    cfg.bucket_cap_bytes = 256 * 1024; /* several buckets */
    cfg.first_bucket_bytes = 8 * 1024;
    cfg.find_unused_parameters = 1;
    cfg.device_buckets = !strcmp(mode, "device") ? 1 : !strcmp(mode, "host") ? -1 : 0;
    cfg.stream = stream;
    struct gx_ddp *ddp = NULL;
    CHECK(gx_ddp_create(comm, params, P, &cfg, &ddp) == GX_OK, "gx_ddp_create");
    if (want_dev)
        CHECK(gx_ddp_set_comm_hook(ddp, gx_ddp_fp16_compress_hook(), NULL) == GX_EUNSUPPORTED,
              "a comm hook on device buckets must be refused");

    float *host = malloc(sizeof(float) * 300000), *up[P];
    for (int i = 0; i < P; i++) /* one per parameter: an async copy reads it later */
        up[i] = malloc(sizeof(float) * counts[i]);
    for (int it = 0; it < 4; it++) {
        int nb = gx_ddp_bucket_count(ddp);
        CHECK(nb >= 3, "%d buckets", nb);
        for (int b = 0; b < nb && mem_kind; b++) {
            struct gx_ddp_bucket info = GX_DDP_BUCKET_INIT;
            CHECK(gx_ddp_bucket_info(ddp, b, &info) == GX_OK, "bucket_info");
            int kind = mem_kind(info.data);
            CHECK(kind == (want_dev ? 1 : -1), "iteration %d: bucket %d at %p is %s memory", it,
                  b, info.data, kind == 1 ? "device" : kind == 0 ? "pinned host" : "host");
        }
        unsigned long long d0 = dtod_copies ? dtod_copies() : 0;
        struct gx_ddp_stats st0 = GX_DDP_STATS_INIT, st1 = GX_DDP_STATS_INIT;
        gx_ddp_get_stats(ddp, &st0);
        int skip = it == 2 ? 2 : -1; /* unused this iteration: zero */
        for (int i = P - 1; i >= 0; i--) { /* backward: last parameter first */
            if (i == skip)
                continue;
            for (size_t k = 0; k < counts[i]; k++)
                up[i][k] = grad_value(me, it, i, k);
            /* the gradient is written on the stream: complete in its order */
            CHECK(dm.htod_async((uintptr_t)grads[i], up[i], counts[i] * sizeof(float), stream) == 0,
                  "upload");
            if (!want_dev) /* host buckets copy at once: the gradient must be there */
                CHECK(dm.stream_sync(stream) == 0, "cuStreamSynchronize");
            CHECK(gx_ddp_grad_ready(ddp, (size_t)i, grads[i]) == GX_OK, "grad_ready %d", i);
            if (i == 1 && want_dev && it == 0) {
                /* parameters 4..1 are in, 0 is not: backward is still running */
                /* launched by this thread, or by the progress thread within a
                 * poll interval when this one found the scheduler busy */
                for (int w = 0; w < 2000; w++) {
                    gx_ddp_get_stats(ddp, &st1);
                    if (st1.buckets_reduced > st0.buckets_reduced)
                        break;
                    usleep(1000);
                }
                CHECK(st1.buckets_reduced > st0.buckets_reduced, "no bucket was queued while "
                      "backward ran (%llu reduced)", (unsigned long long)st1.buckets_reduced);
            }
        }
        CHECK(gx_ddp_finish(ddp, -1) == GX_OK, "gx_ddp_finish iteration %d", it);
        if (dtod_copies && want_dev) {
            unsigned long long got = dtod_copies() - d0, marked = 2 * (P - (skip >= 0));
            /* in + out per marked parameter; the rebuild (after iteration 0)
             * carries every parameter over once more */
            unsigned long long want = marked + (it == 0 ? P : 0);
            CHECK(got == want, "iteration %d: %llu device-to-device copies, expected %llu", it,
                  got, want);
        }
        for (int i = 0; i < P; i++) {
            if (i == skip)
                continue;
            CHECK(dm.dtoh(host, (uintptr_t)grads[i], counts[i] * sizeof(float)) == 0, "download");
            for (size_t k = 0; k < counts[i]; k++) {
                float want = (float)(n - 1) + (float)(it + i + (int)(k % 5));
                CHECK(host[k] == want, "iteration %d param %d element %zu: %g, expected %g", it,
                      i, k, host[k], want);
            }
        }
        if (skip >= 0 && want_dev) { /* the unused parameter's slot was zeroed on the stream */
            void *slot = gx_ddp_grad_buffer(ddp, (size_t)skip);
            CHECK(slot && dm.dtoh(host, (uintptr_t)slot, counts[skip] * sizeof(float)) == 0,
                  "read the unused slot");
            for (size_t k = 0; k < counts[skip]; k++)
                CHECK(host[k] == 0.0f, "unused parameter %d element %zu: %g", skip, k, host[k]);
        }
    }
    struct gx_ddp_stats st = GX_DDP_STATS_INIT;
    gx_ddp_get_stats(ddp, &st);
    CHECK(st.rebuilt == 1 && st.iterations == 4, "rebuilt %d iterations %llu", st.rebuilt,
          (unsigned long long)st.iterations);
    gx_ddp_destroy(ddp);
    for (int i = 0; i < P; i++) {
        gx_device_free(grads[i]);
        gx_device_free(data[i]);
        free(up[i]);
    }
    free(host);
    if (stream_destroy)
        stream_destroy(stream);
    CHECK(gx_comm_finalize(comm) == GX_OK, "finalize");
    gx_comm_destroy(comm);
    printf("PASS ddp %s buckets (%s) on %d ranks%s\n", want_dev ? "device" : "host", mode, n,
           mem_kind ? ", fake libcuda checks on" : "");
    return 0;
}
