/*
 * algo.h - one descriptor per algorithm: its name, the collectives it
 * serves (with the builder for each), its cost, and what it needs to run.
 * The table of them (algo_table.c) is the only list of algorithms: the
 * engine builds through it (coll_algo_build), the cost model and GX_ALGO
 * choose through it (coll_tune.c), gx-info prints it (coll_tune_print.c).
 *
 * Adding an algorithm: a file in collectives/algorithms/ with its builders,
 * its cost function and its `const struct coll_algo_desc`; an id below
 * (before COLL_ALGO_COUNT: ids travel in the mismatch descriptor); one row
 * in algo_table.c. Nothing in the engine changes.
 *
 * Owns: the descriptor and the table. Must not touch: the engine that runs
 * what the builders write, the transport.
 */
#ifndef GX_COLL_ALGO_H
#define GX_COLL_ALGO_H

#include <stdbool.h>
#include <stdint.h>

#include "collectives/schedule/schedule.h"

enum coll_algo {
    COLL_ALGO_AUTO = 0,
    COLL_ALGO_RING,   /* ring / pipelined chain (coll_ring.c) */
    COLL_ALGO_TREE,   /* binomial tree, pipelined in chunks (coll_tree.c) */
    COLL_ALGO_RHD,    /* recursive halving-doubling, Rabenseifner (coll_rhd.c) */
    COLL_ALGO_RD,     /* recursive doubling (coll_rd.c) */
    COLL_ALGO_LINEAR, /* direct / pairwise exchange (coll_linear.c) */
    COLL_ALGO_DBTREE, /* double binary tree: two trees, half the vector each (coll_dbtree.c) */
    COLL_ALGO_SHM,    /* in the node's shared-memory arena (arena_allreduce.c) */
    COLL_ALGO_HIER,   /* inside nodes, then along rails between them (coll_hier.c) */
    COLL_ALGO_COUNT
};

struct coll_group;
struct coll_model;
struct node_shape;

/* Build op's schedule (arguments in op->a, communicator in op->comm). */
typedef int (*coll_build_fn)(struct coll_op *op);

/* An all-reduce over a group of ranks (algorithms.h, struct coll_group), for
 * the rails of the hierarchical all-reduce: the builder, and the message
 * numbers and scratch bytes a call over g of `count` elements takes. */
struct coll_group_algo {
    int (*allreduce)(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                     void *recvbuf, size_t count);
    uint32_t (*msgs)(const struct coll_group *g, size_t count, size_t es);
    size_t (*scratch)(const struct coll_group *g, size_t count, size_t es);
};

struct coll_algo_desc {
    enum coll_algo id;
    const char *name;       /* GX_ALGO's spelling, gx-info's column */
    /* Per collective: the builder (NULL: not served) and its place among
     * that collective's candidates (1 first): the cost model starts from
     * the first and a tie keeps the earlier. */
    struct {
        coll_build_fn build;
        uint8_t order;
    } serves[COLL_KIND_COUNT];
    /* Predicted seconds (coll_tune.h, struct coll_model); negative where it
     * does not apply. */
    double (*cost)(const struct coll_model *m);
    /* Its cost needs the node layout (m->sh): two levels, not one of the
     * "flat" algorithms gx-info compares it with. */
    bool two_level;
    /* Whether it can run where its cost does not say: NULL, wherever it
     * serves; else with this node shape, `arena` telling whether the
     * communicator has a one-node segment (gx_comm.shm). GX_ALGO forcing it
     * elsewhere falls back to the cost model. */
    bool (*usable)(const struct node_shape *sh, bool arena);
    const struct coll_group_algo *group; /* NULL: no group form (not a rail) */
};

/** The descriptor of `a`; NULL for COLL_ALGO_AUTO and unknown ids. */
const struct coll_algo_desc *coll_algo_desc(enum coll_algo a);
/** "ring", ..., "auto" for COLL_ALGO_AUTO, "?" for an unknown id (a peer's). */
const char *coll_algo_name(enum coll_algo a);
/** True when `a` serves collective `k`. */
bool coll_algo_serves(enum coll_kind k, enum coll_algo a);
/** The algorithms serving `k` in candidate order; returns how many. */
int coll_algo_candidates(enum coll_kind k, enum coll_algo out[COLL_ALGO_COUNT]);
/** Build op's schedule with the builder of op->algo for op->a.kind
 *  (GX_EINVAL when that algorithm does not serve it). */
int coll_algo_build(struct coll_op *op);

/* The rows (each in its algorithm's file). */
extern const struct coll_algo_desc coll_algo_ring, coll_algo_tree, coll_algo_rhd, coll_algo_rd,
    coll_algo_linear, coll_algo_dbtree, coll_algo_shm, coll_algo_hier;

#endif
