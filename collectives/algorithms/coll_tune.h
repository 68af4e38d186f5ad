/*
 * coll_tune.h - choosing an algorithm: GX_ALGO, the cost model and the
 * tables `gx-info --tuning` prints. coll_tune.c holds the choice and the
 * measured link figures, coll_tune_print.c the tables; the engine asks
 * coll_choose() when it issues a collective.
 *
 * Owns: the model's shared facts (links, node shape) and its entry points.
 * Must not touch: the engine or the transport; it only predicts.
 */
#ifndef GX_COLL_TUNE_H
#define GX_COLL_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "collectives/algorithms/algo.h"
#include "collectives/schedule/schedule.h"

struct gx_comm;

/* ---- algorithm choice (coll_tune.c) ------------------------------------- */

/** The algorithm for a collective of `bytes` (the full vector: count *
 *  element size; per-rank block for gather/scatter/all-gather/alltoall) on
 *  `comm`: GX_ALGO if it names one that applies, else the cost model. */
enum coll_algo coll_choose(const struct gx_comm *comm, enum coll_kind kind, size_t bytes);
/** The all-reduce algorithm of the rails of a hierarchical all-reduce of
 *  `bytes` on `comm` (ring, rhd, tree or dbtree; the same on every rank). */
enum coll_algo coll_hier_rail_algo(const struct gx_comm *comm, size_t bytes);
/** Print the algorithm choice and predicted time per size for `nranks`
 *  ranks on `nnodes` nodes (gx-info --tuning) over a network link of
 *  `net_alpha` seconds per message and `net_beta` seconds per byte (0, 0:
 *  the tcp defaults), as a probe at set-up would measure it (--link). */
int gx_coll_tuning_print_net(FILE *f, int nranks, int nnodes, double net_alpha, double net_beta);

/* ---- the cost model (coll_tune.c), for coll_tune_print.c ------------------ */

struct link_cost {
    const char *name;
    double alpha;  /* seconds per message */
    double beta;   /* seconds per byte */
};

/* The measured defaults: shm links inside a node, tcp between nodes (a
 * communicator replaces tcp's with its probed link), reduction speed. */
extern const struct link_cost coll_link_shm, coll_link_tcp;
extern const double coll_gamma_reduce; /* seconds per byte reduced */
/* GX_ALGO, GX_HIER_RAIL, GX_COLL_NODE_LINK, GX_COLL_REDUCE_GBPS (coll_tune.c). */
extern const struct gx_param gx_param_coll_node_link, gx_param_coll_reduce_gbps;

/** The node's inside as the model prices it: the link between ranks of one
 *  node (one-node algorithms, hier's intra-node phases) and the seconds per
 *  byte reduced. GX_COLL_NODE_LINK=US:GBPS and GX_COLL_REDUCE_GBPS=X set
 *  them (the same on every rank, as GX_ALGO), coll_tune_set_node overrides
 *  both; the defaults are coll_link_shm and coll_gamma_reduce (host shared
 *  memory, measured on the development machine). An NVLink node's are
 *  about 1 us, 450 GB/s and a GPU's reduction rate. */
const struct link_cost *coll_tune_node_link(void);
double coll_tune_gamma(void);
/** Set the node's link (alpha s per message, beta s per byte) and gamma (s
 *  per byte reduced) for every later prediction; a value <= 0 keeps the
 *  current one. For tools that model another machine (gx-sim --regret). */
void coll_tune_set_node(double alpha, double beta, double gamma);
/** The node's link was given (GX_COLL_NODE_LINK or coll_tune_set_node): hier's
 *  intra-node phases are priced as its ring over that link, not as the host
 *  arena's copies. */
bool coll_tune_node_given(void);
/* GX_ALGO, GX_HIER_RAIL (defined in coll_tune.c). */
extern const struct gx_param gx_param_algo, gx_param_hier_rail;

/* The node layout the model needs: node count, the largest node's rank
 * count L, whether nodes differ. hier applies with >= 2 nodes and L >= 2. */
struct node_shape {
    int nodes, L;
    bool uneven;
    int rails;   /* network links per node the rails spread over (GX_SOCKET_IFNAME's list) */
};

/* The rails' candidates (ring, rhd, tree, dbtree), in the order ties go. */
#define COLL_RAIL_ALGOS 4
extern const enum coll_algo coll_rail_algos[COLL_RAIL_ALGOS];

/* What a cost function (algo.h, struct coll_algo_desc.cost) reads: the call
 * and the facts derived from it the same way for every algorithm. */
struct coll_model {
    enum coll_kind kind;
    size_t bytes;                 /* the full vector, or a rank's block (coll_choose) */
    int n, nodes;                 /* ranks, nodes */
    const struct node_shape *sh;  /* the node layout; NULL: the flat model (one level) */
    const struct link_cost *net;  /* the link between nodes */
    const struct link_cost *l;    /* the link the messages cross: shm on one node, else net */
    double S, a, b, g;            /* bytes; l's alpha and beta; seconds per byte reduced */
    int p;                        /* the largest power of two <= n */
    double L, fold, lg;           /* log2 p; 1 when p != n; log2 n rounded up */
};

/** A pipelined transfer: `hops` sequential transfers of `bytes` cut into
 *  chunks (coll_chunks), each chunk also reduced `red` times per hop. */
double coll_pipelined(const struct link_cost *l, double hops, size_t bytes, double red);
/** The arena's broadcast, all-gather or reduce-scatter (arena_allreduce.c)
 *  of S bytes per block on n ranks: one handoff per round of `per_slot`
 *  blocks, `copies` block copies and `reductions` block reductions per
 *  rank (hier's intra-node phases are priced the same). */
double arena_moves_time(double S, int n, int per_slot, double copies, double reductions);

/** Predicted seconds of `algo` for `kind` (flat algorithms; hier: -1) with
 *  `net` the link between nodes; negative when the algorithm does not apply. */
double coll_tune_predict(enum coll_kind kind, enum coll_algo algo, size_t bytes, int n, int nodes,
                         const struct link_cost *net);
/** hier applies: >= 2 nodes and >= 2 ranks in the largest. */
bool coll_tune_hier_applies(const struct node_shape *sh);
/** GX_HIER_RAIL: COLL_ALGO_AUTO, or the forced rail algorithm. */
enum coll_algo coll_tune_forced_rail(void);
/** One rail's all-reduce of `shard` bytes among `nodes` ranks over `link`:
 *  the fastest candidate, or `want` (not AUTO). Returns its time; *out (may
 *  be NULL) gets the algorithm, times[] (may be NULL) each candidate's. */
double coll_tune_rail_pick(size_t shard, int nodes, const struct link_cost *link,
                           enum coll_algo want, enum coll_algo *out, double times[COLL_RAIL_ALGOS]);
/** A rail's link: `net` with its bandwidth shared by the node's rails. */
struct link_cost coll_tune_rail_link(const struct node_shape *sh, const struct link_cost *net);
/** Predicted seconds of the hierarchical all-reduce (-1: does not apply);
 *  *rail_out (may be NULL) gets the rails' algorithm. */
double coll_tune_predict_hier(size_t bytes, const struct node_shape *sh,
                              const struct link_cost *net, enum coll_algo *rail_out);
/** The algorithm for `kind` and `bytes`: GX_ALGO where it applies (then
 *  *forced_out is true), else the cheapest by the model. `arena`: the
 *  communicator has a shared-memory arena. */
enum coll_algo coll_tune_choose(enum coll_kind kind, size_t bytes, int n,
                                const struct node_shape *sh, bool arena,
                                const struct link_cost *net, bool *forced_out);

#endif
