/*
 * stats.h - process-wide counters that layers below the communicator add to
 * (a provider's retransmissions, the connections the fabric established);
 * gx_comm_stats (collectives/api/observe.c) reports them beside each
 * communicator's own counters. One relaxed atomic add per event.
 *
 * Owns: the counters. Lives in common/ so every layer can add to it.
 */
#ifndef GX_COMMON_STATS_H
#define GX_COMMON_STATS_H

#include <stdint.h>

enum gx_pstat {
    GX_PSTAT_RETRANSMITS,   /* segments a provider sent again (dpdk) */

    GX_PSTAT_COUNT
};

extern uint64_t gx_pstats[GX_PSTAT_COUNT];

static inline void gx_pstat_add(enum gx_pstat s, uint64_t n)
{
    __atomic_fetch_add(&gx_pstats[s], n, __ATOMIC_RELAXED);
}

static inline uint64_t gx_pstat_get(enum gx_pstat s)
{
    return __atomic_load_n(&gx_pstats[s], __ATOMIC_RELAXED);
}

#endif
