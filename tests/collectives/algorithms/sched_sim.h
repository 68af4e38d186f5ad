/*
 * sched_sim.h - runs the schedules every rank of a communicator builds,
 * in one process and without a transport, and checks what they do
 * (test_schedules.c drives it over the algorithm table).
 *
 * Each rank gets a fake struct gx_comm (its node layout, optionally a node
 * arena shared by the simulated ranks: they all live in this process) and
 * the builder of the algorithm under test writes its schedule. The
 * simulator then executes all ranks' steps: a send and its receive move
 * their bytes once both are posted (rendezvous: neither side may rely on
 * the other's buffering), copies and reductions run, arena flags are set
 * and waited for. Elements are 16-byte records {mask of contributing
 * ranks, element index, written marker}, and the reduction checks them.
 * It fails (naming the rank, the step and what went wrong) when:
 *  - a send has no receive with the same peers, message number and size,
 *    or the other way round;
 *  - a step reads an element nothing has written yet, or writes a buffer a
 *    posted message still reads or fills, or reads one a receive fills;
 *  - a reduction combines different elements, or counts a rank's
 *    contribution twice (every block reduced exactly once);
 *  - the schedules stall (no step can run, in the engine's step window or
 *    past it, and some are not done);
 *  - a result differs from what the collective promises.
 */
#ifndef GX_SCHED_SIM_H
#define GX_SCHED_SIM_H

#include <stdbool.h>
#include <stddef.h>

#include "collectives/algorithms/algo.h"

/* One case: an algorithm's builder for one collective on n ranks. */
struct sim_case {
    enum coll_algo algo;
    enum coll_kind kind;
    int n;                 /* ranks (1..64) */
    size_t count;          /* the collective's count argument */
    int root;              /* rooted collectives */
    enum gx_redop op;      /* GX_SUM or GX_AVG for the reducing ones */
    bool in_place;
    /* Node layout: nodes sizes in rank order (0 entries: one node). */
    int nodes;
    int node_size[64];
    bool arena;            /* one node: a shared segment (gx_comm.shm); across
                              nodes: one per node of 2+ ranks (gx_comm.node_shm) */
    size_t slot_bytes;     /* the segments' slot */
    enum coll_algo rail;   /* hier: op->inner_algo */
    /* A builder to use instead of the table's (tests of the checker). */
    coll_build_fn build;
    /* When set: counts the times every rank was stuck in its step window
     * and a step past it had to run (the engine's slow path). */
    int *far_rounds;
};

/* Build and run the case; returns 0 when every check holds, else prints
 * the first problems (prefixed with the case) and returns their count. */
int sim_run(const struct sim_case *c);

/* "ring allreduce n=7 count=300 root=0 sum out-of-place nodes=1" */
void sim_describe(const struct sim_case *c, char *buf, size_t len);

#endif
