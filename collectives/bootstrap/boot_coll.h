/*
 * boot_coll.h - collectives over the bootstrap network, for a group of world
 * ranks (a communicator). Used for communicator set-up (split, address
 * exchange) and as the barrier until a fabric path exists. Message counts:
 * barrier and all-gather n*ceil(log2 n) in total, broadcast n-1.
 */
#ifndef GX_BOOT_COLL_H
#define GX_BOOT_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collectives/bootstrap/boot.h"

struct boot_group {
    struct gx_boot *boot;
    const int *world_ranks; /* group rank -> world rank */
    int size;
    int rank;               /* my group rank */
    uint64_t comm_id;
};

/** Dissemination barrier; `kind` (BOOT_OP_BARRIER, BOOT_OP_FINALIZE) keeps
 *  different synchronising calls from pairing with each other. */
int boot_barrier(const struct boot_group *g, uint64_t seq, int kind, uint64_t deadline);
int boot_allgather(const struct boot_group *g, uint64_t seq, int kind, const void *mine,
                   void *all, size_t each, uint64_t deadline);

/** This rank's clock (gx_now_ns) minus group rank 0's, in ns, and the
 *  round trip it was measured with (boot_clock.c); 0 and 0 on rank 0's
 *  machine, which shares its clock, unless `all` (tests) measures every
 *  rank. Collective over the group. */
int boot_clock_offset(const struct boot_group *g, uint64_t seq, bool all, uint64_t deadline,
                      int64_t *offset_ns, uint64_t *rtt_ns);

/* Non-blocking dissemination barrier, stepped by boot_barrier_step(). */
struct boot_barrier_state {
    int dist;  /* current distance; >= size when done */
    int round;
    int sent;  /* this round's message sent */
};
void boot_barrier_start(struct boot_barrier_state *st);
/** GX_OK when complete, GX_INPROGRESS while waiting, or an error. */
int boot_barrier_step(const struct boot_group *g, uint64_t seq, struct boot_barrier_state *st,
                      uint64_t deadline);

#endif
