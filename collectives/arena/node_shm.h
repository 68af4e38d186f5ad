/*
 * node_shm.h - a node's shared-memory segment (the "arena"): one per
 * communicator whose ranks all run on one node (gx_comm.shm), or across
 * nodes one per node of 2+ ranks (gx_comm.node_shm), in which the arena
 * algorithms (collectives/algorithms/arena_*.c) work directly instead of
 * passing messages.
 *
 * Layout (every rank maps the same memfd, made by rank 0 and fetched by the
 * others with pidfd_getfd):
 *   header | one control block per rank | data
 * A rank's control block holds its pid and, per buffer b (NODE_SHM_NBUF of
 * them, used round-robin by successive rounds), three counters only that
 * rank writes: in[b] (its input for round g is in its slot: value g+1),
 * red[b] (its reduced slice of round g is in its slot) and done[b] (it no
 * longer reads anybody's slot b for round g). Data holds one slot of
 * slot_bytes per rank and buffer. Rounds are numbered per communicator in
 * issue order, the same on every rank, so the counters need no reset.
 *
 * Owns: creating, sharing and unmapping the segment (node_shm.c), handing
 * out its rounds, the liveness of the ranks mapping it, and GX_COLL_SHM,
 * GX_COLL_SHM_SLOT, GX_HIER_ARENA, GX_HIER_ARENA_SLOT. Must not touch: the
 * schedules that use it (algorithms/), the engine that runs their flag steps
 * (engine/coll_steps.c). Room arena/: may use comm/ and the transport's
 * provider query.
 */
#ifndef GX_NODE_SHM_H
#define GX_NODE_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gx_comm;

#define NODE_SHM_NBUF 2

struct node_shm_ctl {
    _Alignas(64) int32_t pid;
    uint32_t reserved;
    uint64_t in[NODE_SHM_NBUF];
    uint64_t red[NODE_SHM_NBUF];
    uint64_t done[NODE_SHM_NBUF];
};

struct node_shm {
    void *base;                  /* mapping of the whole segment */
    size_t map_bytes;
    int nranks;
    int rank;
    int *ranks;                  /* index -> comm rank (a node's arena); NULL: identity */
    size_t slot_bytes;
    struct node_shm_ctl *ctl;    /* nranks control blocks */
    char *data;
    uint64_t next_round;         /* rounds handed out (issue order, caller's thread) */
};

/** Make the segments of `c`: one for a communicator whose ranks are all on
 *  one node and reach each other through shm (GX_COLL_SHM=auto), or across
 *  nodes one per node (below); collectively: every rank of the communicator must call it.
 *  Leaves c->shm NULL when the arena does not apply or cannot be made on
 *  some rank (then every rank goes without). */
int node_shm_open(struct gx_comm *c);
void node_shm_close(struct gx_comm *c);

/* A communicator across nodes gets one segment per node of 2+ ranks
 * (gx_comm.node_shm, indexed by local rank; made by the node's local rank 0,
 * mapped by the others, agreed per node; GX_HIER_ARENA=off: none), which
 * the hierarchical all-reduce uses for its intra-node phases
 * (algorithms/arena_node.c).
 *
 * What hier's intra-node engine will be under the current settings
 * (gx-info --tuning): */
const char *node_shm_hier_plan(void);
/** True when the settings let hier use the node arena (the cost model). */
bool node_shm_hier_planned(void);

/** Comm rank of the segment's index i. */
static inline int node_shm_comm_rank(const struct node_shm *a, int i)
{
    return a->ranks ? a->ranks[i] : i;
}

/** Rank index `rank`'s slot of buffer `buf`. */
static inline char *node_shm_slot(const struct node_shm *a, int rank, unsigned buf)
{
    return a->data + ((size_t)rank * NODE_SHM_NBUF + buf) * a->slot_bytes;
}

/** Hand out `count` elements' rounds of at most `per_round` elements (the
 *  same numbers on every rank: issue order); returns the first round. */
uint64_t node_shm_take_rounds(struct node_shm *a, size_t count, size_t per_round,
                              size_t *rounds_out);
/** Has the process of the rank at index `rank` exited? */
bool node_shm_peer_gone(const struct node_shm *a, int rank);

#endif
