/* rcache_test.c - unit tests of the registration cache with a counting
 * registration double: hits, page widening, memory types, LRU eviction by
 * count and bytes, busy entries never evicted, explicit invalidation,
 * per-operation mode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric/rcache.h"

static int nreg, ndereg, live;

static int fake_reg(void *ctx, void *addr, size_t len, enum gx_fab_mem_type type, void **handle)
{
    (void)ctx;
    (void)type;
    nreg++;
    live++;
    size_t *h = malloc(sizeof(size_t));
    *h = len;
    *handle = h;
    return (uintptr_t)addr % 4096 ? -1 : 0; /* the cache must page-align */
}

static void fake_dereg(void *ctx, void *handle)
{
    (void)ctx;
    ndereg++;
    live--;
    free(handle);
}

#define CHECK(c)                                                                       \
    do {                                                                               \
        if (!(c)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s (reg %d dereg %d)\n", __FILE__,   \
                    __LINE__, #c, nreg, ndereg);                                       \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

int main(void)
{
    static const struct gx_fab_rcache_ops ops = { fake_reg, fake_dereg };
    struct gx_fab_rcache *rc;
    struct gx_fab_rcache_entry *e[8];
    char *mem = aligned_alloc(4096, 64 * 4096);
    CHECK(gx_fab_rcache_create(&ops, NULL, 3, 16 * 4096, &rc) == 0);

    /* miss, then hits for the same and a contained range (page widening) */
    CHECK(gx_fab_rcache_get(rc, mem + 100, 200, GX_FAB_MEM_HOST, &e[0]) == 0);
    CHECK(gx_fab_rcache_get(rc, mem + 100, 200, GX_FAB_MEM_HOST, &e[1]) == 0 && e[1] == e[0]);
    CHECK(gx_fab_rcache_get(rc, mem + 4000, 96, GX_FAB_MEM_HOST, &e[2]) == 0 && e[2] == e[0]);
    CHECK(*(size_t *)gx_fab_rcache_handle(e[0]) == 4096 && nreg == 1);
    /* another memory type is another key */
    CHECK(gx_fab_rcache_get(rc, mem + 100, 200, GX_FAB_MEM_CUDA, &e[3]) == 0 && e[3] != e[0]);
    CHECK(nreg == 2);
    /* a range crossing the cached one is a miss */
    CHECK(gx_fab_rcache_get(rc, mem + 4000, 200, GX_FAB_MEM_HOST, &e[4]) == 0 && e[4] != e[0]);
    CHECK(nreg == 3);
    for (int i = 0; i < 5; i++)
        gx_fab_rcache_put(rc, e[i]);
    CHECK(ndereg == 0);

    /* LRU by count: touch e[0]'s range so the CUDA entry is least recent */
    CHECK(gx_fab_rcache_get(rc, mem, 10, GX_FAB_MEM_HOST, &e[0]) == 0);
    gx_fab_rcache_put(rc, e[0]);
    CHECK(gx_fab_rcache_get(rc, mem + 8 * 4096, 10, GX_FAB_MEM_HOST, &e[5]) == 0);
    CHECK(ndereg == 1); /* 4 entries > 3: the CUDA one went */
    struct gx_fab_rcache_stats st;
    gx_fab_rcache_stats(rc, &st);
    CHECK(st.entries == 3 && st.evictions == 1 && st.hits == 3 && st.misses == 4);

    /* busy entries are never evicted; bytes limit (16 pages) */
    CHECK(gx_fab_rcache_get(rc, mem + 16 * 4096, 14 * 4096, GX_FAB_MEM_HOST, &e[6]) == 0);
    gx_fab_rcache_stats(rc, &st);
    CHECK(st.bytes <= 16 * 4096 || st.entries == 2);
    CHECK(gx_fab_rcache_handle(e[5]) != NULL); /* still held: must survive */
    gx_fab_rcache_stats(rc, &st);
    int before = ndereg;

    /* invalidation: idle overlapping entries go now, busy ones at put */
    gx_fab_rcache_invalidate(rc, mem + 8 * 4096 + 5, 1);
    CHECK(ndereg == before); /* e[5] is held */
    gx_fab_rcache_put(rc, e[5]);
    CHECK(ndereg == before + 1);
    CHECK(gx_fab_rcache_get(rc, mem + 8 * 4096, 10, GX_FAB_MEM_HOST, &e[5]) == 0);
    CHECK(nreg == 6); /* re-registered after invalidation */
    gx_fab_rcache_put(rc, e[5]);
    gx_fab_rcache_invalidate(rc, mem, 64 * 4096);
    gx_fab_rcache_put(rc, e[6]);
    gx_fab_rcache_stats(rc, &st);
    CHECK(st.entries == 0 && st.bytes == 0);
    gx_fab_rcache_destroy(rc);
    CHECK(live == 0);

    /* per-operation mode: shared while held, deregistered at the last put,
     * so the same range is registered again by the next operation */
    CHECK(gx_fab_rcache_create(&ops, NULL, 3, 16 * 4096, &rc) == 0);
    gx_fab_rcache_set_per_op(rc, true);
    int regs_before = nreg, deregs_before = ndereg;
    CHECK(gx_fab_rcache_get(rc, mem, 100, GX_FAB_MEM_HOST, &e[0]) == 0);
    CHECK(gx_fab_rcache_get(rc, mem + 50, 10, GX_FAB_MEM_HOST, &e[1]) == 0 && e[1] == e[0]);
    gx_fab_rcache_put(rc, e[0]);
    CHECK(ndereg == deregs_before); /* still held by e[1] */
    gx_fab_rcache_put(rc, e[1]);
    CHECK(ndereg == deregs_before + 1);
    CHECK(gx_fab_rcache_get(rc, mem, 100, GX_FAB_MEM_HOST, &e[0]) == 0);
    CHECK(nreg == regs_before + 2); /* registered afresh */
    gx_fab_rcache_put(rc, e[0]);
    gx_fab_rcache_stats(rc, &st);
    CHECK(st.entries == 0 && st.per_op_releases == 2 && st.hits == 1 && st.misses == 2);
    gx_fab_rcache_destroy(rc);
    CHECK(live == 0);
    free(mem);
    printf("rcache: 1 passed, 0 failed\n");
    return 0;
}
