/* boot_coll.c - dissemination barrier, Bruck all-gather and binomial
 * broadcast over the bootstrap network (see boot_coll.h). */
#include "collectives/bootstrap/boot_coll.h"

#include <stdlib.h>
#include <string.h>

#include "common/auth.h"
#include "common/log.h"
#include "gx/gx.h"

static int peer_at(const struct boot_group *g, int offset)
{
    int r = (g->rank + offset) % g->size;
    if (r < 0)
        r += g->size;
    return g->world_ranks[r];
}

void boot_barrier_start(struct boot_barrier_state *st)
{
    st->dist = 1;
    st->round = 0;
    st->sent = 0;
}

int boot_barrier_step(const struct boot_group *g, uint64_t seq, struct boot_barrier_state *st,
                      uint64_t deadline)
{
    while (st->dist < g->size) {
        uint64_t tag = BOOT_TAG(seq, BOOT_OP_BARRIER, st->round);
        if (!st->sent) {
            int rc = gx_boot_send(g->boot, peer_at(g, st->dist), g->comm_id, tag, NULL, 0,
                                  deadline);
            if (rc != GX_OK)
                return rc;
            st->sent = 1;
        }
        int rc = gx_boot_try_recv(g->boot, peer_at(g, -st->dist), g->comm_id, tag, NULL, 0);
        if (rc != GX_OK)
            return rc;
        st->dist <<= 1;
        st->round++;
        st->sent = 0;
    }
    return GX_OK;
}

int boot_barrier(const struct boot_group *g, uint64_t seq, int kind, uint64_t deadline)
{
    for (int dist = 1, round = 0; dist < g->size; dist <<= 1, round++) {
        uint64_t tag = BOOT_TAG(seq, kind, round);
        int rc = gx_boot_send(g->boot, peer_at(g, dist), g->comm_id, tag, NULL, 0, deadline);
        if (rc == GX_OK)
            rc = gx_boot_recv(g->boot, peer_at(g, -dist), g->comm_id, tag, NULL, 0, deadline);
        if (rc != GX_OK)
            return rc;
    }
    return GX_OK;
}

int boot_allgather(const struct boot_group *g, uint64_t seq, int kind, const void *mine,
                   void *all, size_t each, uint64_t deadline)
{
    if (g->size == 1) {
        memmove(all, mine, each);
        return GX_OK;
    }
    /* Bruck: tmp[i] ends up holding the block of group rank (rank + i) mod n. */
    char *tmp = malloc((size_t)g->size * each);
    if (!tmp)
        return gx_fail(GX_ENOMEM, GX_SUB_BOOT, "all-gather: no memory for %d x %zu bytes",
                       g->size, each);
    memcpy(tmp, mine, each);
    int rc = GX_OK;
    for (int dist = 1, round = 0; dist < g->size && rc == GX_OK; dist <<= 1, round++) {
        int count = dist < g->size - dist ? dist : g->size - dist;
        uint64_t tag = BOOT_TAG(seq, kind, round);
        rc = gx_boot_send(g->boot, peer_at(g, -dist), g->comm_id, tag, tmp,
                          (size_t)count * each, deadline);
        if (rc == GX_OK)
            rc = gx_boot_recv(g->boot, peer_at(g, dist), g->comm_id, tag,
                              tmp + (size_t)dist * each, (size_t)count * each, deadline);
    }
    if (rc == GX_OK) {
        for (int i = 0; i < g->size; i++)
            memcpy((char *)all + (size_t)((g->rank + i) % g->size) * each,
                   tmp + (size_t)i * each, each);
    }
    free(tmp);
    return rc;
}
