/*
 * sim_plan.h - gx-sim's plans: every rank's schedule of one collective,
 * written by the runtime's own builders (collectives/algorithms, through
 * the algorithm table) for a communicator that does not exist, kept in a
 * compact form the simulator executes (sim_engine.c).
 *
 * Each rank gets a fake struct gx_comm with the node layout (nodes of
 * gpus_per_node ranks in rank order, the last one smaller when N is not a
 * multiple) and no shared-memory arena, so hier's intra-node phases are the
 * ring of messages (coll_node_ring) that NVLink carries. The buffers the
 * builders plan over are allocated but never touched: only the steps'
 * kinds, peers, sizes and dependencies are kept.
 *
 * Owns: struct sim_plan. Must not touch: the engine or the transport.
 */
#ifndef GX_SIM_PLAN_H
#define GX_SIM_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/algorithms/algo.h"

/* One step, as the simulator needs it (28 bytes: plans of 4096 ranks). */
struct sim_step {
    uint8_t kind;        /* enum coll_step_kind */
    int32_t peer;        /* send / receive: the other rank */
    uint32_t msg;        /* send / receive: the message number (their order) */
    uint32_t bytes;      /* bytes moved (send, receive, copy) or reduced */
    int32_t dep[CS_MAX_DEPS];
};

struct sim_rank_plan {
    struct sim_step *steps;
    int nsteps;
};

struct sim_plan {
    int nranks;
    struct sim_rank_plan *rank;
    size_t total_steps;
};

/* The communicator's shape. */
struct sim_layout {
    int nranks;
    int gpus_per_node;
    const int *node_sizes; /* NULL: nodes of gpus_per_node; else `nodes` sizes summing to nranks */
    int nodes;
};

/* The collective's `size` as nccl-tests and gx-perf count it: the whole
 * vector for all-reduce, broadcast and reduce; the gathered vector (N
 * blocks) for all-gather, reduce-scatter and all-to-all. Returns the
 * builder's count of 4-byte elements (0 when size is too small for one
 * element per block). */
size_t sim_count_of(enum coll_kind kind, size_t size, int nranks);

/* Build every rank's schedule of `kind` over `size` bytes with `algo` (hier:
 * its rails run `rail`). `max_steps` bounds the total over all ranks (the
 * plan's memory, 28 bytes a step). 0: built; else -1 with why in err
 * (the algorithm does not serve or cannot run here, a builder failed, the
 * schedule passes COLL_MAX_STEPS or max_steps). */
int sim_plan_build(struct sim_plan *p, const struct sim_layout *lay, enum coll_kind kind,
                   enum coll_algo algo, enum coll_algo rail, size_t size, size_t max_steps,
                   char *err, size_t errlen);
void sim_plan_free(struct sim_plan *p);

#endif
