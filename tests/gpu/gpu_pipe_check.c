/*
 * gpu_pipe_check.c - the host-staging pipeline (engine/coll_pipe.c) under
 * gx-run, device buffers over a host provider (tcp/shm):
 *
 *   gpu_pipe_check CHUNK [mixed]
 *       all-reduce (float32 sum, in and out of place) and broadcast (int32)
 *       on device buffers of uneven sizes, each result checked element by
 *       element; then, with CHUNK > 0 (GX_GPU_CHUNK): the engine made
 *       several chunk copies, none larger than CHUNK, some while messages
 *       were in flight, and the fake driver saw no copy larger than CHUNK;
 *       with CHUNK 0: no chunk copies (one copy in, one back: the old way).
 *       The test's own copies are no larger than CHUNK either.
 *       mixed: even ranks use host buffers (the schedule is the same).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/engine/coll_pipe.h"
#include "gpudirect/gpudirect.h"
#include "gx/gx.h"

static int me = -1;
#include "../lib/rank_check.h"

static bool host_rank;
static size_t piece = 1u << 30; /* the test's own copies: no larger than GX_GPU_CHUNK */

static void htod(char *d, const char *h, size_t len)
{
    for (size_t off = 0; off < len; off += piece)
        CHECK(gx_gpu_copy_htod(d + off, h + off, len - off < piece ? len - off : piece) ==
              GX_OK, "htod");
}

static void *buf_from(const void *h, size_t len)
{
    if (host_rank) {
        void *p = malloc(len);
        memcpy(p, h, len);
        return p;
    }
    void *d = NULL;
    CHECK(gx_gpu_alloc(&d, len) == GX_OK, "device");
    htod(d, h, len);
    return d;
}

static void buf_back(void *h, const void *b, size_t len)
{
    if (host_rank)
        memcpy(h, b, len);
    else
        for (size_t off = 0; off < len; off += piece)
            CHECK(gx_gpu_copy_dtoh((char *)h + off, (const char *)b + off,
                                   len - off < piece ? len - off : piece) == GX_OK, "dtoh");
}

static void buf_free(void *b)
{
    if (host_rank)
        free(b);
    else
        gx_gpu_free(b);
}

static void allreduce(struct gx_comm *c, int n, size_t cnt, bool in_place)
{
    float *h = malloc(cnt * sizeof(float)), *g = malloc(cnt * sizeof(float));
    for (size_t i = 0; i < cnt; i++)
        h[i] = (float)((i % 1000) + me);
    void *s = buf_from(h, cnt * sizeof(float));
    void *r = in_place ? s : buf_from(h, cnt * sizeof(float));
    CHECK(gx_allreduce(c, s, r, cnt, GX_FLOAT32, GX_SUM) == GX_OK, "allreduce %zu", cnt);
    buf_back(g, r, cnt * sizeof(float));
    for (size_t i = 0; i < cnt; i++) {
        float want = (float)((i % 1000) * (size_t)n) + (float)(n * (n - 1) / 2);
        CHECK(g[i] == want, "allreduce %zu%s: element %zu is %g, want %g", cnt,
              in_place ? " in place" : "", i, g[i], want);
    }
    if (!in_place)
        buf_free(r);
    buf_free(s);
    free(h);
    free(g);
}

static void broadcast(struct gx_comm *c, int n, size_t cnt)
{
    int32_t *h = malloc(cnt * 4), *g = malloc(cnt * 4);
    for (size_t i = 0; i < cnt; i++)
        h[i] = me == n - 1 ? (int32_t)(i * 2654435761u) : -1;
    void *b = buf_from(h, cnt * 4);
    CHECK(gx_broadcast(c, b, b, cnt, GX_INT32, n - 1) == GX_OK, "broadcast %zu", cnt);
    buf_back(g, b, cnt * 4);
    for (size_t i = 0; i < cnt; i++)
        CHECK(g[i] == (int32_t)(i * 2654435761u), "broadcast %zu: element %zu", cnt, i);
    buf_free(b);
    free(h);
    free(g);
}

int main(int argc, char **argv)
{
    char why[256];
    if (argc < 2)
        return 2;
    if (!gx_gpu_driver_available(why, sizeof(why))) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    size_t chunk = strtoull(argv[1], NULL, 10);
    char env[32];
    snprintf(env, sizeof(env), "%zu", chunk);
    setenv("GX_GPU_CHUNK", env, 1);
    if (chunk)
        piece = chunk;
    struct gx_comm *comm = NULL;
    CHECK(gx_comm_init_env(&comm) == GX_OK, "init");
    me = gx_comm_rank(comm);
    int n = gx_comm_size(comm);
    host_rank = argc > 2 && !strcmp(argv[2], "mixed") && me % 2 == 0;
    static const size_t counts[] = { 1, 5, 70001, 300007 };
    for (size_t k = 0; k < 4; k++) {
        allreduce(comm, n, counts[k], false);
        allreduce(comm, n, counts[k], true);
        broadcast(comm, n, counts[k]);
    }
    unsigned long long copies = 0, overlapped = 0;
    size_t largest = 0;
    coll_pipe_stats(&copies, &overlapped, &largest);
    const char *libname = getenv("GX_CUDA_LIB");
    void *lib = libname ? dlopen(libname, RTLD_NOW | RTLD_NOLOAD) : NULL;
    size_t (*fmax)(void) = lib ? (size_t (*)(void))dlsym(lib, "fakecuda_copy_max") : NULL;
    size_t fake_max = fmax ? fmax() : 0;
    printf("rank %d%s: %llu chunk copies, %llu while messages were in flight, largest %zu "
           "bytes; the driver's largest copy %zu bytes\n", me, host_rank ? " (host)" : "",
           copies, overlapped, largest, fake_max);
    size_t whole = 300007 * sizeof(float);
    if (host_rank) {
        CHECK(copies == 0, "a host rank made %llu staging copies", copies);
    } else if (chunk) {
        CHECK(copies >= 2 * (whole / chunk), "only %llu chunk copies", copies);
        CHECK(largest <= chunk, "a copy of %zu bytes > GX_GPU_CHUNK %zu", largest, chunk);
        CHECK(overlapped > 0, "no copy overlapped a message in flight");
        CHECK(!fmax || fake_max <= chunk, "the driver copied %zu bytes at once", fake_max);
    } else {
        CHECK(copies == 0, "GX_GPU_CHUNK=0 still chunked (%llu copies)", copies);
    }
    CHECK(gx_barrier(comm) == GX_OK, "final barrier");
    gx_comm_destroy(comm);
    return 0;
}
