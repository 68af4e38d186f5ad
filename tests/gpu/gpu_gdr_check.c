/*
 * gpu_gdr_check.c - GPUDirect RDMA inside the collectives, under gx-run
 * (public API + tests/gpu/devmem.h; with the fake libcuda over softverbs in
 * CI, the real driver and NIC in tests/gpu/run.sh):
 *
 *   gpu_gdr_check move direct|staged
 *       broadcast, all-gather, all-to-all, gather, scatter and a ring of
 *       isend/irecv (receive larger than the message) on device
 *       buffers (int32 counts 1, 7, 4099 and 262147: eager and rendezvous,
 *       uneven), then an all-reduce (which stages by design); every result
 *       is checked element by element and a digest of all of them printed
 *       ("DIGEST rank r: ...", for comparing GX_GDR=on with =off). direct:
 *       the NIC registered device memory (the fake driver's dmabuf export
 *       count grew) and device-destined receives were flushed (the verbs
 *       provider's flush READ count grew); staged: neither happened.
 *   gpu_gdr_check refuse WORDS
 *       GX_GDR=on where GPUDirect RDMA is not possible: a broadcast on a
 *       device buffer fails with GX_EUNSUPPORTED naming GX_GDR=on and WORDS
 *       (the reason); a host broadcast still works.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmem.h"
#include "gx/gx.h"

/* fabric/verbs/verbs_flush.c; weak: absent from builds without verbs */
extern unsigned long long gx_verbs_flush_count(void) __attribute__((weak));
static unsigned long long flushes(void)
{
    return gx_verbs_flush_count ? gx_verbs_flush_count() : 0;
}

static int me = -1;
#include "../lib/rank_check.h"

static struct devmem dm;
static unsigned long long digest = 1469598103934665603ull;

static void *dev_from(const int32_t *host, size_t n)
{
    unsigned long long d = 0;
    size_t len = n * sizeof(int32_t);
    CHECK(dm.alloc(&d, len ? len : 4) == 0 && (!len || dm.htod(d, host, len) == 0), "device "
          "buffer");
    return (void *)(uintptr_t)d;
}

static int32_t *back(void *dev, size_t n)
{
    int32_t *h = malloc(n * sizeof(int32_t) + 4);
    CHECK(h && (!n || dm.dtoh(h, (uintptr_t)dev, n * sizeof(int32_t)) == 0), "copy back");
    for (size_t i = 0; i < n * sizeof(int32_t); i++)
        digest = (digest ^ ((unsigned char *)h)[i]) * 1099511628211ull;
    return h;
}

static int32_t val(int rank, size_t i, int salt)
{
    return (int32_t)(rank * 7919 + (int)(i % 100003) * 31 + salt);
}

static void fill(int32_t *b, size_t n, int rank, int salt)
{
    for (size_t i = 0; i < n; i++)
        b[i] = val(rank, i, salt);
}

static void expect_block(const int32_t *got, size_t n, int rank, int salt, const char *what)
{
    for (size_t i = 0; i < n; i++)
        CHECK(got[i] == val(rank, i, salt), "%s: element %zu is %d, want %d", what, i, got[i],
              val(rank, i, salt));
}

static void one_size(struct gx_comm *c, int n, size_t cnt)
{
    int32_t *h = malloc(sizeof(int32_t) * cnt * (size_t)n + 4);
    void *s, *r;
    /* broadcast from the last rank */
    fill(h, cnt, n - 1, 1);
    r = dev_from(h, cnt);
    if (me != n - 1) { /* non-roots start with something else */
        fill(h, cnt, 99, 2);
        dm.free_((uintptr_t)r);
        r = dev_from(h, cnt);
    }
    CHECK(gx_broadcast(c, r, r, cnt, GX_INT32, n - 1) == GX_OK, "broadcast %zu", cnt);
    int32_t *g = back(r, cnt);
    expect_block(g, cnt, n - 1, 1, "broadcast");
    free(g);
    dm.free_((uintptr_t)r);
    /* all-gather */
    fill(h, cnt, me, 3);
    s = dev_from(h, cnt);
    r = dev_from(h, cnt * (size_t)n);
    CHECK(gx_allgather(c, s, r, cnt, GX_INT32) == GX_OK, "allgather %zu", cnt);
    g = back(r, cnt * (size_t)n);
    for (int j = 0; j < n; j++)
        expect_block(g + (size_t)j * cnt, cnt, j, 3, "allgather");
    free(g);
    dm.free_((uintptr_t)r);
    dm.free_((uintptr_t)s);
    /* all-to-all: block j of rank i = val(i, ., 10 + j) */
    for (int j = 0; j < n; j++)
        fill(h + (size_t)j * cnt, cnt, me, 10 + j);
    s = dev_from(h, cnt * (size_t)n);
    r = dev_from(h, cnt * (size_t)n);
    CHECK(gx_alltoall(c, s, r, cnt, GX_INT32) == GX_OK, "alltoall %zu", cnt);
    g = back(r, cnt * (size_t)n);
    for (int j = 0; j < n; j++)
        expect_block(g + (size_t)j * cnt, cnt, j, 10 + me, "alltoall");
    free(g);
    dm.free_((uintptr_t)r);
    dm.free_((uintptr_t)s);
    /* gather to rank 0, scatter from rank 0 */
    fill(h, cnt, me, 5);
    s = dev_from(h, cnt);
    r = dev_from(h, cnt * (size_t)n);
    CHECK(gx_gather(c, s, r, cnt, GX_INT32, 0) == GX_OK, "gather %zu", cnt);
    if (me == 0) {
        g = back(r, cnt * (size_t)n);
        for (int j = 0; j < n; j++)
            expect_block(g + (size_t)j * cnt, cnt, j, 5, "gather");
        free(g);
    }
    for (int j = 0; j < n; j++)
        fill(h + (size_t)j * cnt, cnt, j, 6);
    dm.free_((uintptr_t)r);
    r = dev_from(h, cnt * (size_t)n);
    CHECK(gx_scatter(c, r, s, cnt, GX_INT32, 0) == GX_OK, "scatter %zu", cnt);
    g = back(s, cnt);
    expect_block(g, cnt, me, 6, "scatter");
    free(g);
    dm.free_((uintptr_t)r);
    dm.free_((uintptr_t)s);
    free(h);
}

/* point-to-point: a ring of isend/irecv, the receive 16 elements larger */
static void p2p_ring(struct gx_comm *c, int n, size_t cnt)
{
    int32_t *h = malloc(sizeof(int32_t) * (cnt + 16));
    fill(h, cnt + 16, me, 20);
    void *s = dev_from(h, cnt), *r = dev_from(h, cnt + 16);
    struct gx_request *rq[2];
    CHECK(gx_irecv(c, r, cnt + 16, GX_INT32, (me + n - 1) % n, 9, &rq[0]) == GX_OK, "irecv");
    CHECK(gx_isend(c, s, cnt, GX_INT32, (me + 1) % n, 9, &rq[1]) == GX_OK, "isend");
    for (int i = 0; i < 2; i++) {
        CHECK(gx_wait(rq[i], -1) == GX_OK, "p2p wait %d", i);
        gx_request_free(rq[i]);
    }
    int32_t *g = back(r, cnt + 16);
    expect_block(g, cnt, (me + n - 1) % n, 20, "p2p");
    for (size_t i = cnt; i < cnt + 16; i++) /* past the message: untouched */
        CHECK(g[i] == val(me, i, 20), "p2p: element %zu past the message changed", i);
    free(g);
    free(h);
    dm.free_((uintptr_t)r);
    dm.free_((uintptr_t)s);
}

static unsigned long long exports(void)
{
    const char *lib = getenv("GX_CUDA_LIB");
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    unsigned long long (*f)(void) = h ? (unsigned long long (*)(void))dlsym(
                                            h, "fakecuda_dmabuf_exports")
                                      : NULL;
    return f ? f() : ~0ull;
}

static void mode_move(struct gx_comm *c, int n, const char *want)
{
    static const size_t counts[] = { 1, 7, 4099, 262147 };
    unsigned long long before = exports(), flushed = flushes();
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        one_size(c, n, counts[k]);
        p2p_ring(c, n, counts[k]);
    }
    unsigned long long moved = exports() - before;
    flushed = flushes() - flushed;
    /* all-reduce: reductions stage (api/gdr.c), the result is still right */
    size_t cnt = 70001;
    int32_t *h = malloc(sizeof(int32_t) * cnt);
    fill(h, cnt, me, 0);
    void *d = dev_from(h, cnt);
    CHECK(gx_allreduce(c, d, d, cnt, GX_INT32, GX_SUM) == GX_OK, "allreduce");
    int32_t *g = back(d, cnt);
    for (size_t i = 0; i < cnt; i++) {
        int64_t sum = 0;
        for (int j = 0; j < n; j++)
            sum += val(j, i, 0);
        CHECK(g[i] == (int32_t)sum, "allreduce element %zu", i);
    }
    free(g);
    free(h);
    dm.free_((uintptr_t)d);
    if (exports() != ~0ull) {
        if (!strcmp(want, "direct")) {
            CHECK(moved > 0, "GX_GDR: the NIC never registered device memory (no dmabuf "
                  "export)");
            CHECK(flushed > 0, "GX_GDR: no flush READ after device-destined receives");
        } else {
            CHECK(moved == 0, "staged run registered device memory %llu times", moved);
            CHECK(flushed == 0, "staged run flushed %llu host receives", flushed);
        }
        printf("rank %d: %llu dmabuf registrations of device memory, %llu flush READs\n", me,
               moved, flushed);
    }
    printf("DIGEST rank %d: %016llx\n", me, digest);
}

static void mode_refuse(struct gx_comm *c, const char *words)
{
    int32_t h[64];
    fill(h, 64, me, 0);
    void *d = dev_from(h, 64);
    int rc = gx_broadcast(c, d, d, 64, GX_INT32, 0);
    CHECK(rc == GX_EUNSUPPORTED, "device broadcast with GX_GDR=on: %d", rc);
    CHECK(strstr(gx_last_error(), "GX_GDR=on") && strstr(gx_last_error(), words),
          "error does not say why (want \"%s\")", words);
    printf("rank %d refused: %s\n", me, gx_last_error());
    CHECK(gx_broadcast(c, h, h, 64, GX_INT32, 0) == GX_OK, "host broadcast after");
    expect_block(h, 64, 0, 0, "host broadcast");
    dm.free_((uintptr_t)d);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 2 ? argv[1] : "";
    if (devmem_open(&dm) != 0) {
        fprintf(stderr, "gpu_gdr_check: %s\n", dm.why);
        return 77;
    }
    struct gx_comm *comm = NULL;
    CHECK(gx_comm_init_env(&comm) == GX_OK, "init");
    me = gx_comm_rank(comm);
    int n = gx_comm_size(comm);
    if (!strcmp(mode, "move"))
        mode_move(comm, n, argv[2]);
    else if (!strcmp(mode, "refuse"))
        mode_refuse(comm, argv[2]);
    else
        CHECK(0, "usage: gpu_gdr_check move direct|staged | refuse WORDS");
    /* no rank leaves while another still receives its last message (a
     * root that exits right after an eager send can close the link before
     * the receiver re-posted its slot) */
    CHECK(gx_barrier(comm) == GX_OK, "final barrier");
    gx_comm_destroy(comm);
    return 0;
}
