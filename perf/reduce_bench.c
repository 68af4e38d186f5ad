/*
 * reduce_bench.c - single-core speed of the host reduction kernels against
 * memcpy of the same bytes.
 *
 *   reduce_bench [-r RUNS] [--record]
 *
 * For each datatype (sum) and buffer size it times inout[i] += in[i] over
 * `bytes` bytes and memcpy(inout, in, bytes), interleaved, RUNS times, each
 * sample long enough (>= 20 ms) to swamp the clock, and prints medians:
 *   - GB/s: buffer bytes (10^9) reduced or copied per second;
 *   - traffic GB/s: bytes through memory, 3x for the reduce (two reads, one
 *     write) and 2x for memcpy, so one can see whether both hit the same
 *     bandwidth ceiling;
 *   - ratio: memcpy time / reduce time (1.0 = as fast as copying).
 * --record also writes the table to perf/results/<date>-reduce.md with the
 * CPU model name (the "model name" lscpu prints, from /proc/cpuinfo).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/reduce/half.h"
#include "collectives/reduce/reduce.h"
#include "collectives/reduce/reduce_kernels.h"
#include "common/clock.h"

#define MAX_RUNS 101

struct bench_case {
    const char *label;
    enum gx_datatype dtype;
    int portable; /* time the portable kernel instead of the looked-up SIMD one */
};

static const struct bench_case cases[] = {
    { "f32", GX_FLOAT32, 0 },
    { "f64", GX_FLOAT64, 0 },
    { "i32", GX_INT32, 0 },
    { "f16", GX_FLOAT16, 0 },
    { "f16 (portable C)", GX_FLOAT16, 1 },
    { "bf16", GX_BFLOAT16, 0 },
    { "bf16 (portable C)", GX_BFLOAT16, 1 },
};
static const size_t sizes[] = { 256u << 10, 4u << 20, 16u << 20, 64u << 20 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Seconds per call, averaged over enough calls to last >= 20 ms. */
static double time_reduce(gx_reduce_fn fn, void *io, const void *in, size_t count, int iters)
{
    uint64_t t0 = gx_now_ns();
    for (int i = 0; i < iters; i++)
        fn(io, in, count);
    return (double)(gx_now_ns() - t0) / 1e9 / iters;
}

static double time_memcpy(void *dst, const void *src, size_t bytes, int iters)
{
    uint64_t t0 = gx_now_ns();
    for (int i = 0; i < iters; i++) {
        memcpy(dst, src, bytes);
        __asm__ volatile("" : : "r"(dst) : "memory"); /* keep every copy */
    }
    return (double)(gx_now_ns() - t0) / 1e9 / iters;
}

/* Values that stay normal and finite through many repeated sums. */
static void fill(enum gx_datatype dt, void *buf, size_t count, int zero)
{
    for (size_t i = 0; i < count; i++) {
        float v = zero ? 0.0f : (float)((i % 7) + 1) * 0x1p-10f;
        switch (dt) {
        case GX_FLOAT32: ((float *)buf)[i] = v; break;
        case GX_FLOAT64: ((double *)buf)[i] = v; break;
        case GX_INT32: ((int32_t *)buf)[i] = zero ? 0 : (int32_t)(i % 7); break;
        case GX_FLOAT16: ((uint16_t *)buf)[i] = gx_f32_to_f16(v); break;
        case GX_BFLOAT16: ((uint16_t *)buf)[i] = gx_f32_to_bf16(v); break;
        default: break;
        }
    }
}

static void cpu_model(char *out, size_t len)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(out, len, "unknown");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(out, len, "%s", colon + 2);
            out[strcspn(out, "\n")] = '\0';
            break;
        }
    }
    fclose(f);
}

static const char *simd_text(void)
{
    static char text[96];
    snprintf(text, sizeof(text), "f16 kernels: %s, bf16 kernels: %s",
             gx_reduce_cpu_has_f16c() ? "F16C" : "portable",
             gx_reduce_cpu_has_avx2() ? "AVX2" : "portable");
    return text;
}

int main(int argc, char **argv)
{
    int runs = 11, record = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--record") == 0)
            record = 1;
        else {
            fprintf(stderr, "usage: %s [-r RUNS] [--record]\n", argv[0]);
            return 2;
        }
    }
    if (runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "reduce_bench: -r must be 1..%d\n", MAX_RUNS);
        return 2;
    }

    size_t max_bytes = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
    void *io = aligned_alloc(4096, max_bytes), *in = aligned_alloc(4096, max_bytes);
    if (!io || !in) {
        fprintf(stderr, "reduce_bench: out of memory\n");
        return 1;
    }
    memset(io, 0, max_bytes); /* fault every page in before timing */
    memset(in, 0, max_bytes);

    char model[256], table[16384];
    size_t used = 0;
    cpu_model(model, sizeof(model));
    used += (size_t)snprintf(table + used, sizeof(table) - used,
                             "| type (sum) | bytes | reduce GB/s | memcpy GB/s | ratio | "
                             "reduce traffic GB/s | memcpy traffic GB/s |\n"
                             "|---|---:|---:|---:|---:|---:|---:|\n");
    printf("# reduce_bench: 1 thread, medians of %d runs, CPU: %s, %s\n", runs, model,
           simd_text());

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        gx_reduce_fn fn;
        if (cases[c].portable)
            fn = (cases[c].dtype == GX_FLOAT16 ? &gx_reduce_kernels_f16
                                               : &gx_reduce_kernels_bf16)->fn[GX_SUM];
        else if (gx_reduce_lookup(cases[c].dtype, GX_SUM, &fn) != GX_OK)
            return 1;
        size_t es = gx_datatype_size(cases[c].dtype);
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            size_t bytes = sizes[s], count = bytes / es;
            double tr[MAX_RUNS], tm[MAX_RUNS], ratio[MAX_RUNS];
            fill(cases[c].dtype, io, count, 1);
            fill(cases[c].dtype, in, count, 0);
            /* Calibrate the calls per sample on the slower of the two. */
            double once = time_reduce(fn, io, in, count, 1);
            int iters = (int)(0.02 / (once > 1e-9 ? once : 1e-9)) + 1;
            for (int r = 0; r < runs; r++) {
                tr[r] = time_reduce(fn, io, in, count, iters);
                tm[r] = time_memcpy(io, in, bytes, iters);
                ratio[r] = tm[r] / tr[r];
            }
            double mr = median(tr, runs), mm = median(tm, runs), q = median(ratio, runs);
            double gr = (double)bytes / mr / 1e9, gm = (double)bytes / mm / 1e9;
            char size_text[32];
            snprintf(size_text, sizeof(size_text), "%zu %s", bytes >= (1u << 20) ? bytes >> 20 : bytes >> 10,
                     bytes >= (1u << 20) ? "MiB" : "KiB");
            printf("%-17s %8s  reduce %6.2f GB/s  memcpy %6.2f GB/s  ratio %.2f  "
                   "(traffic %6.2f vs %6.2f GB/s)\n",
                   cases[c].label, size_text, gr, gm, q, 3 * gr, 2 * gm);
            fflush(stdout);
            used += (size_t)snprintf(table + used, sizeof(table) - used,
                                     "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
                                     cases[c].label, size_text, gr, gm, q, 3 * gr, 2 * gm);
        }
    }

    if (record) {
        char date[32], path[4096];
        time_t now = time(NULL);
        strftime(date, sizeof(date), "%Y-%m-%d", localtime(&now));
        snprintf(path, sizeof(path), "%s/%s-reduce.md", GX_PERF_RESULTS_DIR, date);
        FILE *f = fopen(path, "w");
        if (!f) {
            perror(path);
            return 1;
        }
        fprintf(f,
                "# Host reduction kernels vs memcpy, %s\n\n"
                "`build/bin/reduce_bench -r %d --record` (perf/reduce_bench.c), one thread.\n\n"
                "- CPU: %s (lscpu model name); %s\n"
                "- Each figure is the median of %d runs; each run averages enough calls\n"
                "  to last >= 20 ms. The reduce is `inout[i] += in[i]` (two-operand\n"
                "  kernel); memcpy copies the same bytes between the same buffers,\n"
                "  interleaved with the reduce runs. GB/s = buffer bytes (10^9) per\n"
                "  second; ratio = memcpy time / reduce time (median of per-run ratios);\n"
                "  traffic = bytes through memory (3x for the reduce, 2x for memcpy).\n\n",
                date, runs, model, simd_text(), runs);
        fputs(table, f);
        fclose(f);
        printf("recorded in %s\n", path);
    }
    free(io);
    free(in);
    return 0;
}
