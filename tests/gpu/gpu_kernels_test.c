/*
 * gpu_kernels_test.c - gx's CUDA reduction kernels through gx_gpu_reduce
 * (gpudirect/gpu_reduce.h), every datatype x op, bit for bit against the
 * host kernels of collectives/reduce/.
 *
 * In CI the driver is the fake libcuda: it runs each launch's CPU twin (the
 * same gx_kernel_ops.h nvcc compiles) in stream order, and accepts only the
 * image libgx embeds: the fatbin when nvcc was there at build time, else the
 * placeholder (the test says which). tests/gpu/run.sh runs `ops` against the
 * real driver on a GPU: there, sum/prod/avg inputs are finite (a NaN a GPU
 * computes has its canonical payload, not x86's).
 *
 * Modes: ops | stream | badimage | missing | names (the fatbin has every
 * kernel) | bench (real GPU: GB/s). Exit 0 pass, 1 fail, 77 skip.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/reduce/reduce.h"
#include "common/log.h"
#include "devmem.h"
#include "gpudirect/gpu_reduce.h"
#include "gpudirect/gpudirect.h"
#include "gpudirect/kernels/gx_kernel_names.h"

static struct devmem dm;
static void *user_stream; /* static: reachable at exit (LeakSanitizer) */
static int failures;
#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fprintf(stderr, "\n"); failures++; } while (0)

static const size_t dsize[GX_DATATYPE_COUNT] = { 1, 1, 4, 4, 8, 8, 2, 2, 4, 8 };
static const char *const dname[GX_DATATYPE_COUNT] = { "i8", "u8", "i32", "u32", "i64", "u64",
                                                      "f16", "bf16", "f32", "f64" };
static const char *const oname[GX_REDOP_COUNT] = { "sum", "prod", "min", "max", "avg" };

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static bool is_special(enum gx_datatype t, const unsigned char *p)
{
    uint64_t u = 0;
    memcpy(&u, p, dsize[t]);
    switch (t) {
    case GX_FLOAT16: return (u & 0x7c00u) == 0x7c00u;
    case GX_BFLOAT16: return (u & 0x7f80u) == 0x7f80u;
    case GX_FLOAT32: return (u & 0x7f800000u) == 0x7f800000u;
    case GX_FLOAT64: return (u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
    default: return false;
    }
}

static bool is_nan(enum gx_datatype t, const unsigned char *p)
{
    uint64_t u = 0;
    memcpy(&u, p, dsize[t]);
    switch (t) {
    case GX_FLOAT16: return (u & 0x7fffu) > 0x7c00u;
    case GX_BFLOAT16: return (u & 0x7fffu) > 0x7f80u;
    case GX_FLOAT32: return (u & 0x7fffffffu) > 0x7f800000u;
    case GX_FLOAT64: return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    default: return false;
    }
}

/* Random bit patterns (so every class of float shows up: subnormals, -0,
 * Inf, NaN), a few equal pairs for min/max's +-0 rule; `finite`: no
 * Inf/NaN (arithmetic ops on a real GPU). */
static void fill(enum gx_datatype t, unsigned char *a, unsigned char *b, size_t n, bool finite)
{
    size_t s = dsize[t];
    for (size_t i = 0; i < n; i++) {
        uint64_t x = next(), y = next();
        if (t >= GX_FLOAT16 && i % 5 == 0)
            y = x ^ (t == GX_FLOAT16 || t == GX_BFLOAT16 ? 0x8000u
                     : t == GX_FLOAT32 ? 0x80000000u : 0x8000000000000000ull) * (i % 2);
        memcpy(a + i * s, &x, s);
        memcpy(b + i * s, &y, s);
        if (finite && is_special(t, a + i * s))
            memset(a + i * s, 0, 1), a[i * s + s - 1] &= 0x3f;
        if (finite && is_special(t, b + i * s))
            memset(b + i * s, 0, 1), b[i * s + s - 1] &= 0x3f;
    }
}

static void *dev_alloc(size_t bytes)
{
    unsigned long long d = 0;
    if (dm.alloc(&d, bytes ? bytes : 1) != 0) {
        fprintf(stderr, "cuMemAlloc(%zu) failed\n", bytes);
        exit(1);
    }
    return (void *)(uintptr_t)d;
}

/* One (dtype, op, count): dst = a OP b on the device (out of place, in
 * place into a, and with b in mapped pinned host memory), AVG finished over
 * 3 ranks; each compared with the host kernels. */
static void check_one(enum gx_datatype t, enum gx_redop op, size_t n, bool finite)
{
    size_t s = dsize[t], bytes = n * s;
    bool arith = op == GX_SUM || op == GX_PROD || op == GX_AVG;
    unsigned char *a = malloc(bytes + 1), *b = malloc(bytes + 1), *want = malloc(bytes + 1),
                  *got = malloc(bytes + 1);
    fill(t, a, b, n, finite && arith);
    gx_reduce3_fn f3 = NULL;
    if (gx_reduce3_lookup(t, op, &f3) != GX_OK)
        exit(1);
    f3(want, a, b, n);
    if (op == GX_AVG)
        (void)gx_reduce_finish_avg(want, t, n, 3);
    void *da = dev_alloc(bytes), *db = dev_alloc(bytes), *dd = dev_alloc(bytes);
    dm.htod((uintptr_t)da, a, bytes);
    dm.htod((uintptr_t)db, b, bytes);
    size_t cap = 0;
    void *pin = gx_gpu_pinned_get(bytes ? bytes : 1, NULL, &cap);
    if (!pin) {
        fprintf(stderr, "no pinned memory: %s\n", gx_last_error());
        exit(1);
    }
    memcpy(pin, b, bytes);
    for (int form = 0; form < 3; form++) {
        static const char *const fname[] = { "out of place", "in place", "pinned host b" };
        void *dst = form == 1 ? da : dd;
        const void *srcb = form == 2 ? pin : db;
        if (form > 0 && n) /* the in-place form overwrote a */
            dm.htod((uintptr_t)da, a, bytes);
        int rc = gx_gpu_reduce(dst, da, srcb, n, t, op, NULL);
        if (rc == GX_OK && op == GX_AVG)
            rc = gx_gpu_reduce_finish_avg(dst, n, t, 3, NULL);
        if (rc != GX_OK) {
            FAIL("%s %s n=%zu %s: %s", dname[t], oname[op], n, fname[form], gx_last_error());
            continue;
        }
        memset(got, 0xA5, bytes);
        if (n)
            dm.dtoh(got, (uintptr_t)dst, bytes);
        for (size_t i = 0; i < n; i++) {
            /* A NaN that arithmetic makes has no defined payload (x86 keeps
             * an operand's, in whichever order the compiler put them; a GPU
             * gives its canonical one): any NaN matches a NaN there. */
            if (arith && is_nan(t, got + i * s) && is_nan(t, want + i * s))
                continue;
            if (memcmp(got + i * s, want + i * s, s) != 0) {
                uint64_t g = 0, w = 0, x = 0, y = 0;
                memcpy(&g, got + i * s, s);
                memcpy(&w, want + i * s, s);
                memcpy(&x, a + i * s, s);
                memcpy(&y, b + i * s, s);
                FAIL("%s %s n=%zu %s: element %zu: 0x%llx OP 0x%llx gave 0x%llx, the host "
                     "kernel 0x%llx", dname[t], oname[op], n, fname[form], i,
                     (unsigned long long)x, (unsigned long long)y, (unsigned long long)g,
                     (unsigned long long)w);
                break;
            }
        }
    }
    gx_gpu_pinned_put(pin, cap);
    dm.free_((uintptr_t)da);
    dm.free_((uintptr_t)db);
    dm.free_((uintptr_t)dd);
    free(a), free(b), free(want), free(got);
}

static void *fake_sym(const char *name)
{
    void *h = dlopen(getenv("GX_CUDA_LIB"), RTLD_NOW | RTLD_NOLOAD);
    return h ? dlsym(h, name) : NULL;
}

static int t_ops(void)
{
    bool real = getenv("GX_KERNELS_TEST_REAL") && atoi(getenv("GX_KERNELS_TEST_REAL"));
    unsigned long long (*launches)(void) = (unsigned long long (*)(void))fake_sym(
        "fakecuda_launches");
    printf("image: %s\n", gx_gpu_kernels_built()
           ? "fatbin built by nvcc (" "the fake checks it is libgx's and runs the CPU twins)"
           : "placeholder: libgx was built without nvcc; the fake accepts it and runs the "
             "CPU twins of the kernels");
    static const size_t counts[] = { 0, 1, 7, 1023, 100003 };
    for (int t = 0; t < GX_DATATYPE_COUNT; t++)
        for (int op = 0; op < GX_REDOP_COUNT; op++)
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                check_one((enum gx_datatype)t, (enum gx_redop)op, counts[c], real);
    if (launches) {
        /* 3 forms x 4 nonzero counts x (40 + 10 avg x 2 launches) */
        unsigned long long want = 3ull * 4 * (GX_DATATYPE_COUNT * GX_REDOP_COUNT +
                                              GX_DATATYPE_COUNT);
        if (launches() != want)
            FAIL("the fake ran %llu kernels, expected %llu", launches(), want);
    }
    printf("%d datatypes x %d ops x 5 sizes x 3 forms: %s\n", GX_DATATYPE_COUNT,
           GX_REDOP_COUNT, failures ? "FAILED" : "bitwise equal to collectives/reduce");
    return failures ? 1 : 0;
}

/* A launch on the caller's stream is queued: the fake shows the old bytes
 * until the stream is synchronized (a real GPU may already be done). */
static int t_stream(void)
{
    if (!dm.peek)
        return printf("SKIP: needs the fake libcuda (fakecuda_peek)\n"), 77;
    float a[3] = { 1, 2, 3 }, b[3] = { 10, 20, 30 }, got[3];
    void *da = dev_alloc(sizeof(a)), *db = dev_alloc(sizeof(b));
    dm.htod((uintptr_t)da, a, sizeof(a));
    dm.htod((uintptr_t)db, b, sizeof(b));
    if (dm.stream_create(&user_stream, 1) != 0)
        return printf("FAIL: cuStreamCreate\n"), 1;
    void *stream = user_stream;
    if (gx_gpu_reduce(da, da, db, 3, GX_FLOAT32, GX_SUM, stream) != GX_OK)
        return printf("FAIL: %s\n", gx_last_error()), 1;
    dm.peek((uintptr_t)da, got, sizeof(got));
    if (got[0] != 1 || got[2] != 3)
        FAIL("the sum landed before the stream was synchronized");
    dm.stream_sync(stream);
    dm.peek((uintptr_t)da, got, sizeof(got));
    if (got[0] != 11 || got[1] != 22 || got[2] != 33)
        FAIL("after the stream sync: %g %g %g, want 11 22 33", got[0], got[1], got[2]);
    /* Pageable host memory is refused (a GPU would fault). */
    float host[3] = { 0 };
    if (gx_gpu_reduce(host, da, db, 3, GX_FLOAT32, GX_SUM, NULL) == GX_OK)
        FAIL("a kernel wrote pageable host memory");
    else if (!strstr(gx_last_error(), "gx_reduce_sum_f32"))
        FAIL("the launch error does not name the kernel: %s", gx_last_error());
    return failures ? 1 : 0;
}

static int expect_error(int rc, const char *what, const char *const *needles)
{
    if (rc == GX_OK) {
        FAIL("%s succeeded", what);
        return 1;
    }
    for (int i = 0; needles[i]; i++)
        if (!strstr(gx_last_error(), needles[i]))
            FAIL("%s: the error does not say \"%s\": %s", what, needles[i], gx_last_error());
    printf("%s: %s\n", what, gx_last_error());
    return failures ? 1 : 0;
}

static int t_badimage(void)
{
    static const unsigned char junk[64] = "this is not a fatbin";
    void *d = dev_alloc(64);
    gx_gpu_kernels_test_image(junk, sizeof(junk));
    /* A real driver may read junk as PTX text (CUDA_ERROR_INVALID_PTX): the
     * exact code is checked on the fake only. */
    static const char *const need_fake[] = { "gx_reduce_sum_f32", "cuModuleLoadData",
                                             "CUDA_ERROR_INVALID_IMAGE", NULL };
    static const char *const need_real[] = { "gx_reduce_sum_f32", "cuModuleLoadData", NULL };
    const char *const *need = dm.peek ? need_fake : need_real;
    int rc = expect_error(gx_gpu_reduce(d, d, d, 4, GX_FLOAT32, GX_SUM, NULL), "bad image", need);
    gx_gpu_kernels_test_image(NULL, 0);
    if (gx_gpu_reduce(d, d, d, 4, GX_FLOAT32, GX_SUM, NULL) != GX_OK)
        FAIL("the embedded image after the bad one: %s", gx_last_error());
    return rc || failures ? 1 : 0;
}

static int t_missing(void)
{
    void *d = dev_alloc(64);
    static const char *const need[] = { "kernel gx_reduce_max_f64", "cuModuleGetFunction",
                                        "CUDA_ERROR_NOT_FOUND", NULL };
    int rc = expect_error(gx_gpu_reduce(d, d, d, 8, GX_FLOAT64, GX_MAX, NULL), "missing kernel",
                          need);
    if (gx_gpu_reduce(d, d, d, 8, GX_FLOAT64, GX_MIN, NULL) != GX_OK)
        FAIL("another kernel of the same module: %s", gx_last_error());
    return rc || failures ? 1 : 0;
}

extern const unsigned char gx_kernels_image_start[];
extern const unsigned char gx_kernels_image_end[];

/* The fatbin libgx embeds holds code for every kernel the loader asks for
 * (the fake only knows the name table: this ties the table to the .cu). */
static int t_names(void)
{
    if (!gx_gpu_kernels_built())
        return printf("SKIP: libgx was built without nvcc (placeholder image)\n"), 77;
    size_t len = (size_t)(gx_kernels_image_end - gx_kernels_image_start);
    static const char *const names[] = {
#define NAMES(t, T, size) "gx_reduce_sum_" #t, "gx_reduce_prod_" #t, "gx_reduce_min_" #t, \
                          "gx_reduce_max_" #t, "gx_divide_" #t,
        GXK_TYPES(NAMES)
#undef NAMES
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char sec[80];
        snprintf(sec, sizeof(sec), ".text.%s", names[i]);
        if (!memmem(gx_kernels_image_start, len, sec, strlen(sec) + 1))
            FAIL("the embedded fatbin (%zu bytes) has no %s", len, sec);
    }
    printf("the embedded fatbin (%zu bytes) has code for all %zu kernels\n", len,
           sizeof(names) / sizeof(names[0]));
    return failures ? 1 : 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Real GPU only: dst = a + b over 256 MiB per operand, device memory and
 * with b in pinned host memory (what a reduce step reads over PCIe). */
static int t_bench(void)
{
    if (dm.peek)
        return printf("SKIP: a bandwidth figure of the fake means nothing\n"), 77;
    const size_t bytes = (size_t)256 << 20;
    void *a = dev_alloc(bytes), *b = dev_alloc(bytes), *d = dev_alloc(bytes);
    size_t cap = 0;
    void *pin = gx_gpu_pinned_get(bytes, a, &cap);
    static const enum gx_datatype types[] = { GX_FLOAT32, GX_BFLOAT16, GX_FLOAT16 };
    for (int i = 0; i < 3; i++) {
        enum gx_datatype t = types[i];
        size_t n = bytes / dsize[t];
        for (int form = 0; form < (pin ? 2 : 1); form++) {
            const void *src = form ? pin : b;
            if (gx_gpu_reduce(d, a, src, n, t, GX_SUM, NULL) != GX_OK)
                return printf("FAIL: %s\n", gx_last_error()), 1;
            double t0 = now_s();
            for (int it = 0; it < 10; it++)
                (void)gx_gpu_reduce(d, a, src, n, t, GX_SUM, NULL);
            double s = (now_s() - t0) / 10;
            printf("%-5s sum, 256 MiB per operand, b in %-11s: %6.3f ms, %7.1f GB/s (3 x bytes "
                   "/ time)\n", dname[t], form ? "pinned host" : "device", s * 1e3,
                   3.0 * (double)bytes / s / 1e9);
        }
    }
    if (pin)
        gx_gpu_pinned_put(pin, cap);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ops";
    if (!strcmp(mode, "names")) /* no driver needed */
        return t_names();
    if (devmem_open(&dm) != 0) {
        printf("SKIP: %s\n", dm.why);
        return 77;
    }
    if (!strcmp(mode, "ops"))
        return t_ops();
    if (!strcmp(mode, "stream"))
        return t_stream();
    if (!strcmp(mode, "badimage"))
        return t_badimage();
    if (!strcmp(mode, "missing"))
        return t_missing();
    if (!strcmp(mode, "bench"))
        return t_bench();
    fprintf(stderr, "usage: gpu_kernels_test ops|stream|badimage|missing|names|bench\n");
    return 2;
}
