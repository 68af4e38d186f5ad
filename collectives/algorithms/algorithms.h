/*
 * algorithms.h - the collective algorithms: each builds the schedule of one
 * collective (op->a holds the arguments, op->comm the communicator) with
 * the builder of schedule/schedule.h and nothing else.
 *
 * Owns: one file per algorithm family (ring, rd, rhd, tree/chain, dbtree,
 * bcast, linear, hier, the arena's; ring, rhd, tree and dbtree all-reduce
 * also over a group of ranks), each with its descriptor (algo.h). Must not
 * touch: the engine that runs schedules (coll_engine.h), the transport
 * (transport/); of the arena only its segment (arena/node_shm.h). The
 * rules are checked on includes and calls (cmake/GxRooms.cmake).
 */
#ifndef GX_COLL_ALGORITHMS_H
#define GX_COLL_ALGORITHMS_H

#include "collectives/algorithms/algo.h"
#include "collectives/schedule/schedule.h"

/* A subset of the communicator's ranks an algorithm runs over: the whole
 * communicator (coll_group_all), the ranks of one node, or a "rail" (the
 * ranks with the same local index on every node; coll_hier.c). Member i is
 * comm rank ranks[i] (NULL: rank i). The builders below take the group and
 * the part of the vector it reduces (sendbuf, recvbuf and count, already
 * offset to the shard); they number their messages from msg_base, so several
 * groups can run inside one collective without sharing a tag. */
struct coll_group {
    int n;                 /* members */
    int me;                /* this rank's index among them */
    const int *ranks;      /* member -> comm rank; NULL: identity */
    const size_t *bounds;  /* ring, node engines: n+1 block boundaries in elements; NULL: even */
    uint32_t msg_base;     /* first message index the group uses */
    bool avg;              /* finish GX_AVG here (divide by the comm's size) */
    char *scratch;         /* the builder's scratch (its *_scratch bytes); NULL: cs_scratch */
    uint64_t round;        /* node engines with rounds: the call's first (coll_node_engine) */
};

static inline int coll_group_rank(const struct coll_group *g, int member)
{
    return g->ranks ? g->ranks[member] : member;
}

/* Block i of a group's vector of `count` elements (its bounds, or even). */
static inline size_t coll_group_blk_off(const struct coll_group *g, size_t count, int i)
{
    return g->bounds ? g->bounds[i] : block_off(count, g->n, i);
}
static inline size_t coll_group_blk_len(const struct coll_group *g, size_t count, int i)
{
    return g->bounds ? g->bounds[i + 1] - g->bounds[i] : block_len(count, g->n, i);
}

/* The whole communicator as a group (what the plain builders use). */
struct coll_group coll_group_all(const struct coll_op *op);

/* A group all-reduce with nothing to exchange (one member, or no elements):
 * the result is this rank's own vector, averaged when g->avg. */
void coll_group_own_result(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                           void *recvbuf, size_t count);

/* Ring over a group: all-reduce; its two halves alone (reduce-scatter leaves
 * the complete block (me+1) mod n in recvbuf, all-gather spreads that block);
 * the messages (both halves together) and scratch bytes a call needs. */
int ring_allreduce_group(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                         void *recvbuf, size_t count);
int ring_rs_group(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                  void *recvbuf, size_t count);
int ring_ag_group(struct coll_op *op, const struct coll_group *g, void *recvbuf, size_t count);
uint32_t ring_group_msgs(const struct coll_group *g, size_t count, size_t es);
size_t ring_group_scratch(const struct coll_group *g, size_t count, size_t es);
/* Recursive halving-doubling over a group. */
int rhd_allreduce_group(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                        void *recvbuf, size_t count);
uint32_t rhd_group_msgs(const struct coll_group *g, size_t count, size_t es);
size_t rhd_group_scratch(const struct coll_group *g, size_t count, size_t es);
/* Binomial tree (reduce to member 0, broadcast) and double binary tree over
 * a group; their scratch depends on g->n and g->me. */
int tree_allreduce_group(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                         void *recvbuf, size_t count);
uint32_t tree_group_msgs(const struct coll_group *g, size_t count, size_t es);
size_t tree_group_scratch(const struct coll_group *g, size_t count, size_t es);
int dbtree_allreduce_group(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                           void *recvbuf, size_t count);
uint32_t dbtree_group_msgs(const struct coll_group *g, size_t count, size_t es);
size_t dbtree_group_scratch(const struct coll_group *g, size_t count, size_t es);
/* A rail of the hierarchical all-reduce (coll_hier_rail.c): the algorithm
 * op->inner_algo names (ring|rhd|tree|dbtree; anything else: ring), its
 * messages and scratch for `count` elements over n members, the in-place
 * all-reduce of buf. */
enum coll_algo hier_rail_algo(enum coll_algo inner);
uint32_t hier_rail_msgs(enum coll_algo rail, int n, size_t count, size_t es);
size_t hier_rail_scratch(enum coll_algo rail, const struct coll_group *g, size_t count, size_t es);
int hier_rail_allreduce(struct coll_op *op, enum coll_algo rail, const struct coll_group *g,
                        void *buf, size_t count);

/* Algorithms: build the schedule of op (args in op->a, comm in op->comm). */
int ring_allreduce_build(struct coll_op *op);
int ring_reduce_scatter_build(struct coll_op *op);
int ring_allgather_build(struct coll_op *op);
int rd_allreduce_build(struct coll_op *op);
int rhd_allreduce_build(struct coll_op *op);
int tree_allreduce_build(struct coll_op *op);
int dbtree_allreduce_build(struct coll_op *op);
int tree_reduce_build(struct coll_op *op);
int chain_reduce_build(struct coll_op *op);
int tree_bcast_build(struct coll_op *op);
int chain_bcast_build(struct coll_op *op);
int linear_gather_build(struct coll_op *op);
int linear_scatter_build(struct coll_op *op);
int linear_alltoall_build(struct coll_op *op);
/* Hierarchical all-reduce (coll_hier.c): reduce-scatter inside each node,
 * all-reduce along the rails, all-gather inside each node. */
int hier_allreduce_build(struct coll_op *op);

/* The intra-node phases of the hierarchical all-reduce, over the node group
 * (member i = local rank i, blocks g->bounds): an engine interface with two
 * implementations, the ring of messages below (coll_node_ring: the shm
 * provider carries them) and the node's shared-memory segment
 * (arena_node_engine, arena_node.c; used when the node has one,
 * gx_comm.node_shm). reduce_scatter leaves block (me+1) mod n of the node's sum in
 * recvbuf, all_gather spreads every member's block; neither averages. An
 * engine working in numbered rounds says how many one phase of one segment
 * takes (rounds; 0 for the ring) and hands them out in issue order (reserve);
 * g->round is then the first round of the call. The hierarchical
 * all-reduce reserves every segment's reduce-scatter rounds first, then
 * every all-gather's, so a reused slot never waits for a rail. */
struct gx_comm;
struct coll_node_engine {
    const char *name;
    size_t (*rounds)(const struct gx_comm *c, const struct coll_group *g, size_t count,
                     size_t es);
    uint64_t (*reserve)(struct gx_comm *c, size_t rounds);
    int (*reduce_scatter)(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                          void *recvbuf, size_t count);
    int (*all_gather)(struct coll_op *op, const struct coll_group *g, void *recvbuf,
                      size_t count);
};
extern const struct coll_node_engine coll_node_ring;
extern const struct coll_node_engine arena_node_engine;

/* ---- the arena algorithms (arena_*.c) ------------------------------------
 * Collectives in the node's shared-memory segment (arena/node_shm.h):
 * arena_allreduce.c, arena_moves.c (broadcast, all-gather, reduce-scatter)
 * and the hierarchical all-reduce's intra-node phases (arena_node.c).
 *
 * One round of a collective in the segment: its counter value (round
 * number + 1), its slot, and the step after which the slot may be refilled
 * (every rank's done counter of the round two earlier; -1: at once). */
struct node_shm;
struct arena_round {
    uint64_t v;
    unsigned b;
    int slot_free;
};
/* Start round g: adds the wait for its slot to op's schedule. */
struct arena_round arena_round_begin(struct coll_op *op, struct node_shm *a, uint64_t g);
/* This rank's input for the round is staged (after step `dep`): raise its
 * in counter and wait for every rank's; returns the wait. */
int arena_all_staged(struct coll_op *op, struct node_shm *a, const struct arena_round *rd,
                     int dep);
/* dst = own op slot_{r+1} op ... op slot_{r-1} (each slot at byte offset
 * `off` of slot b), averaged for avg; `own` is this rank's operand and may
 * be dst itself. Returns the last step. */
int arena_reduce_all(struct coll_op *op, const struct node_shm *a, unsigned b, size_t off,
                     const void *own, void *dst, size_t count, int dep);
/* The builders, for a communicator with a one-node segment (gx_comm.shm). */
int arena_allreduce_build(struct coll_op *op);
int arena_bcast_build(struct coll_op *op);
int arena_allgather_build(struct coll_op *op);
int arena_reduce_scatter_build(struct coll_op *op);

#endif
