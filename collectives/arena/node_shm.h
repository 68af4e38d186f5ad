/*
 * coll_shm.h - the node arena: one shared-memory segment per communicator
 * whose ranks all run on one node, in which collectives work directly
 * (coll_shm.c) instead of passing messages.
 *
 * Layout (every rank maps the same memfd, made by rank 0 and fetched by the
 * others with pidfd_getfd):
 *   header | one control block per rank | data
 * A rank's control block holds its pid and, per buffer b (SHM_NBUF of them,
 * used round-robin by successive rounds), three counters only that rank
 * writes: in[b] (its input for round g is in its slot: value g+1), red[b]
 * (its reduced slice of round g is in its slot) and done[b] (it no longer
 * reads anybody's slot b for round g). Data holds one slot of slot_bytes per
 * rank and buffer. Rounds are numbered per communicator in issue order, the
 * same on every rank, so the counters need no reset.
 *
 * Owns: creating, sharing and unmapping the arena. The schedules live in
 * coll_shm.c; the flag steps run in engine/coll_steps.c.
 *
 * Room arena/: may use the schedule builder, the flat algorithms it falls
 * back to and the transport's provider query; never the engine's state.
 */
#ifndef GX_COLL_SHM_H
#define GX_COLL_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gx_comm;

#define SHM_NBUF 2

struct shm_rank_ctl {
    _Alignas(64) int32_t pid;
    uint32_t reserved;
    uint64_t in[SHM_NBUF];
    uint64_t red[SHM_NBUF];
    uint64_t done[SHM_NBUF];
};

struct coll_shm_arena {
    void *base;                  /* mapping of the whole segment */
    size_t map_bytes;
    int nranks;
    int rank;
    int *ranks;                  /* index -> comm rank (a node's arena); NULL: identity */
    size_t slot_bytes;
    struct shm_rank_ctl *ctl;    /* nranks control blocks */
    char *data;
    uint64_t next_round;         /* rounds handed out (issue order, caller's thread) */
};

/** Make the arena for `c` when every rank is on one node and reaches the
 *  others through shm (GX_COLL_SHM=auto), collectively: every rank of the
 *  communicator must call it. Leaves c->shm NULL when the arena does not
 *  apply or cannot be made on some rank (then every rank goes without). */
int gx_coll_shm_open(struct gx_comm *c);
void gx_coll_shm_close(struct gx_comm *c);

/* A communicator across nodes gets one arena per node of 2+ ranks
 * (gx_comm.node_shm, indexed by local rank; made by the node's local rank 0,
 * mapped by the others, agreed per node; GX_HIER_ARENA=off: none), which
 * the hierarchical all-reduce uses for its intra-node phases through
 * shm_node_engine (coll_shm_node.c). */
struct coll_node_engine;
extern const struct coll_node_engine shm_node_engine;
/** What hier's intra-node engine will be under the current settings
 *  (gx-info --tuning). */
const char *shm_node_engine_plan(void);
/** True when the settings let hier use the node arena (the cost model). */
bool shm_node_engine_planned(void);

/** Comm rank of arena index i. */
static inline int shm_comm_rank(const struct coll_shm_arena *a, int i)
{
    return a->ranks ? a->ranks[i] : i;
}

static inline char *shm_slot(const struct coll_shm_arena *a, int rank, unsigned buf)
{
    return a->data + ((size_t)rank * SHM_NBUF + buf) * a->slot_bytes;
}

/* One round of a collective in the arena (coll_shm.c): its counter value
 * (round number + 1), its slot, and the step after which the slot may be
 * refilled (every rank's done counter of the round two earlier; -1: at
 * once). Built on the collective's schedule (coll.h). */
struct coll_op;
struct shm_round {
    uint64_t v;
    unsigned b;
    int slot_free;
};
/** Hand out `count` elements' rounds of at most `per_round` elements (the
 *  same numbers on every rank: issue order); returns the first round. */
uint64_t shm_take_rounds(struct coll_shm_arena *a, size_t count, size_t per_round,
                         size_t *rounds_out);
/** Start round g: adds the wait for its slot to op's schedule. */
struct shm_round shm_round_begin(struct coll_op *op, struct coll_shm_arena *a, uint64_t g);
/** This rank's input for the round is staged (after step `dep`): raise its
 *  in counter and wait for every rank's; returns the wait. */
int shm_all_staged(struct coll_op *op, struct coll_shm_arena *a, const struct shm_round *rd,
                   int dep);
/** dst = own op slot_{r+1} op ... op slot_{r-1} (each slot at byte offset
 *  `off` of slot b), averaged for avg; `own` is this rank's operand and may be
 *  dst itself. Returns the last step. */
int shm_reduce_all(struct coll_op *op, const struct coll_shm_arena *a, unsigned b, size_t off,
                   const void *own, void *dst, size_t count, int dep);

/** Is `pid` (a peer's) gone? */
bool shm_peer_gone(const struct coll_shm_arena *a, int rank);

/* The arena algorithms (coll_shm.c, coll_shm_collectives.c): build the
 * schedule of op in the arena; the engine calls them like algorithms.h's. */
struct coll_op;
int shm_allreduce_build(struct coll_op *op);
int shm_bcast_build(struct coll_op *op);
int shm_allgather_build(struct coll_op *op);
int shm_reduce_scatter_build(struct coll_op *op);

#endif
