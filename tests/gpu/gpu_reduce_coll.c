/*
 * gpu_reduce_coll.c - collectives on device buffers whose reduce steps run
 * on the GPU (GX_GPU_REDUCE, collectives/engine/coll_gpu.c): all-reduce out
 * of place, in place and in the stream form, reduce-scatter and reduce, for
 * every datatype x op, checked bit for bit against the host kernels applied
 * in rank order (the data is exact in every datatype, so the algorithm's
 * order does not matter). Run under gx-run.
 *
 * `gpu_reduce_coll gpu`: the fake libcuda must have run kernels (the
 * reduce steps went to the GPU); `cpu`: it must have run none. Exit 0 pass,
 * 1 fail, 77 skip (no driver).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/reduce/reduce.h"
#include "devmem.h"
#include "gpudirect/kernels/gx_kernel_ops.h"

static struct devmem dm;
static void *user_stream; /* static: reachable at exit (LeakSanitizer) */
static int me, failures;
static const size_t dsize[GX_DATATYPE_COUNT] = { 1, 1, 4, 4, 8, 8, 2, 2, 4, 8 };

/* A small integer for (rank, element, op), exact in every datatype. */
static int value(int r, size_t i, enum gx_redop op)
{
    if (op == GX_PROD)
        return (int[]){ 1, -1, 2, 1 }[(i + (size_t)r) % 4];
    if (op == GX_MIN || op == GX_MAX)
        return (int)((i * 31 + (size_t)r * 17) % 201) - 100;
    return (int)((i * 7 + (size_t)r * 3) % 17) - 8;
}

static void put(enum gx_datatype t, unsigned char *p, int v)
{
    switch (t) {
    case GX_INT8: case GX_UINT8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case GX_INT32: case GX_UINT32: { int32_t x = v; memcpy(p, &x, 4); break; }
    case GX_INT64: case GX_UINT64: { int64_t x = v; memcpy(p, &x, 8); break; }
    case GX_FLOAT16: { uint16_t x = gxk_f16_narrow((float)v); memcpy(p, &x, 2); break; }
    case GX_BFLOAT16: { uint16_t x = gxk_bf16_narrow((float)v); memcpy(p, &x, 2); break; }
    case GX_FLOAT32: { float x = (float)v; memcpy(p, &x, 4); break; }
    default: { double x = v; memcpy(p, &x, 8); break; }
    }
}

static void fill(unsigned char *buf, int r, size_t n, enum gx_datatype t, enum gx_redop op)
{
    for (size_t i = 0; i < n; i++)
        put(t, buf + i * dsize[t], value(r, i, op));
}

static void *dev(size_t bytes)
{
    unsigned long long d = 0;
    if (dm.alloc(&d, bytes ? bytes : 1) != 0) {
        fprintf(stderr, "rank %d: cuMemAlloc(%zu) failed\n", me, bytes);
        exit(1);
    }
    return (void *)(uintptr_t)d;
}

enum kind { AR, AR_INPLACE, AR_STREAM, RS, RED, NKINDS };
static const char *const kname[NKINDS] = { "allreduce", "allreduce in place",
                                           "allreduce_stream", "reduce_scatter", "reduce" };

static void one(struct gx_comm *comm, int n, enum kind k, enum gx_datatype t, enum gx_redop op,
                size_t count, void *stream)
{
    size_t es = dsize[t], total = k == RS ? count * (size_t)n : count, bytes = total * es;
    unsigned char *mine = malloc(bytes + 1), *other = malloc(bytes + 1), *want = malloc(bytes + 1),
                  *got = malloc(bytes + 1);
    gx_reduce_fn f = NULL;
    if (gx_reduce_lookup(t, op, &f) != GX_OK)
        exit(1);
    fill(want, 0, total, t, op);
    for (int r = 1; r < n; r++) {
        fill(other, r, total, t, op);
        f(want, other, total);
    }
    if (op == GX_AVG)
        (void)gx_reduce_finish_avg(want, t, total, n);
    fill(mine, me, total, t, op);
    void *ds = dev(bytes), *dr = dev(bytes);
    dm.htod((uintptr_t)ds, mine, bytes);
    int rc;
    switch (k) {
    case AR: rc = gx_allreduce(comm, ds, dr, count, t, op); break;
    case AR_INPLACE: rc = gx_allreduce(comm, ds, ds, count, t, op); dr = ds; break;
    case AR_STREAM:
        rc = gx_allreduce_stream(comm, ds, dr, count, t, op, stream);
        if (rc == GX_OK && dm.stream_sync(stream) != 0)
            rc = GX_ESYSTEM;
        break;
    case RS: rc = gx_reduce_scatter(comm, ds, dr, count, t, op); break;
    default: rc = gx_reduce(comm, ds, dr, count, t, op, 0); break;
    }
    if (rc != GX_OK) {
        fprintf(stderr, "FAIL rank %d: %s dtype %d op %d count %zu: %s\n", me, kname[k], t, op,
                count, gx_last_error());
        failures++;
    } else if (k != RED || me == 0) {
        size_t off = k == RS ? (size_t)me * count * es : 0, len = count * es;
        dm.dtoh(got, (uintptr_t)dr, len);
        for (size_t i = 0; i < count; i++)
            if (memcmp(got + i * es, want + off + i * es, es) != 0) {
                fprintf(stderr, "FAIL rank %d: %s dtype %d op %d count %zu: element %zu "
                        "differs from the host kernels\n", me, kname[k], t, op, count, i);
                failures++;
                break;
            }
    }
    dm.free_((uintptr_t)ds);
    if (dr != ds)
        dm.free_((uintptr_t)dr);
    free(mine), free(other), free(want), free(got);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "gpu";
    if (devmem_open(&dm) != 0) {
        fprintf(stderr, "gpu_reduce_coll: %s\n", dm.why);
        return 77;
    }
    struct gx_comm *comm = NULL;
    if (gx_comm_init_env(&comm) != GX_OK) {
        fprintf(stderr, "init: %s\n", gx_last_error());
        return 1;
    }
    me = gx_comm_rank(comm);
    int n = gx_comm_size(comm);
    if (dm.stream_create(&user_stream, 1) != 0)
        return fprintf(stderr, "cuStreamCreate failed\n"), 1;
    static const size_t counts[] = { 1, 7, 40000 };
    for (int k = 0; k < NKINDS; k++)
        for (int t = 0; t < GX_DATATYPE_COUNT; t++)
            for (int op = 0; op < GX_REDOP_COUNT; op++)
                for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                    one(comm, n, (enum kind)k, (enum gx_datatype)t, (enum gx_redop)op,
                        counts[c], user_stream);
    void *h = dlopen(getenv("GX_CUDA_LIB"), RTLD_NOW | RTLD_NOLOAD);
    unsigned long long (*launches)(void) =
        h ? (unsigned long long (*)(void))dlsym(h, "fakecuda_launches") : NULL;
    if (launches) {
        unsigned long long l = launches();
        bool want_gpu = !strcmp(mode, "gpu") && n > 1;
        printf("rank %d: %llu kernel launches (GX_GPU_REDUCE=%s)\n", me, l,
               getenv("GX_GPU_REDUCE") ? getenv("GX_GPU_REDUCE") : "auto");
        if (want_gpu ? l == 0 : l != 0) {
            fprintf(stderr, "FAIL rank %d: %llu kernel launches in mode %s\n", me, l, mode);
            failures++;
        }
    }
    if (gx_comm_finalize(comm) != GX_OK)
        failures++;
    gx_comm_destroy(comm);
    printf("%s rank %d: %d kinds x %d datatypes x %d ops x 3 counts on device buffers\n",
           failures ? "FAIL" : "PASS", me, NKINDS, GX_DATATYPE_COUNT, GX_REDOP_COUNT);
    return failures ? 1 : 0;
}
