/*
 * boot_clock.c - how far each rank's clock is from rank 0's, measured over
 * the bootstrap network (boot_coll.h), so a trace (GX_TRACE) puts the ranks
 * of several machines on one time line. The processes of one machine share
 * CLOCK_MONOTONIC and need no measure.
 *
 * Rank 0 answers each measured rank in turn, CLOCK_ROUNDS pings each; a
 * rank keeps the sample with the shortest round trip and takes rank 0's
 * clock to have been read half-way through it (the error is at most half
 * that round trip, which it reports).
 */
#include <string.h>

#include "collectives/bootstrap/boot_coll.h"
#include "common/clock.h"
#include "gx/gx.h"

#define CLOCK_ROUNDS 8

static bool measured(const struct boot_group *g, int r, bool all)
{
    if (r == 0)
        return false;
    if (all)
        return true;
    const struct boot_rank_record *a = gx_boot_record(g->boot, g->world_ranks[0]);
    const struct boot_rank_record *b = gx_boot_record(g->boot, g->world_ranks[r]);
    return strncmp(a->host, b->host, sizeof(a->host)) != 0;
}

int boot_clock_offset(const struct boot_group *g, uint64_t seq, bool all, uint64_t deadline,
                      int64_t *offset_ns, uint64_t *rtt_ns)
{
    *offset_ns = 0;
    *rtt_ns = 0;
    if (g->rank == 0) {
        for (int r = 1; r < g->size; r++) {
            if (!measured(g, r, all))
                continue;
            for (int k = 0; k < CLOCK_ROUNDS; k++) {
                uint64_t ping = 0;
                int rc = gx_boot_recv(g->boot, g->world_ranks[r], g->comm_id,
                                      BOOT_TAG(seq, BOOT_OP_CLOCK, 2 * k), &ping, sizeof(ping),
                                      deadline);
                uint64_t now = gx_now_ns();
                if (rc == GX_OK)
                    rc = gx_boot_send(g->boot, g->world_ranks[r], g->comm_id,
                                      BOOT_TAG(seq, BOOT_OP_CLOCK, 2 * k + 1), &now, sizeof(now),
                                      deadline);
                if (rc != GX_OK)
                    return rc;
            }
        }
        return GX_OK;
    }
    if (!measured(g, g->rank, all))
        return GX_OK;
    uint64_t best = UINT64_MAX;
    for (int k = 0; k < CLOCK_ROUNDS; k++) {
        uint64_t t0 = gx_now_ns(), theirs = 0;
        int rc = gx_boot_send(g->boot, g->world_ranks[0], g->comm_id,
                              BOOT_TAG(seq, BOOT_OP_CLOCK, 2 * k), &t0, sizeof(t0), deadline);
        if (rc == GX_OK)
            rc = gx_boot_recv(g->boot, g->world_ranks[0], g->comm_id,
                              BOOT_TAG(seq, BOOT_OP_CLOCK, 2 * k + 1), &theirs, sizeof(theirs),
                              deadline);
        if (rc != GX_OK)
            return rc;
        uint64_t t1 = gx_now_ns();
        if (t1 - t0 < best) {
            best = t1 - t0;
            *offset_ns = (int64_t)(t0 + (t1 - t0) / 2) - (int64_t)theirs;
        }
    }
    *rtt_ns = best;
    return GX_OK;
}
