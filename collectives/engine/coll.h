/*
 * coll.h - the step engine's entry points: issue a checked collective
 * (coll_engine.c), choose its algorithm with the cost model (coll_tune.c),
 * print the tuning table. The public calls (coll_api.c) and gx-info use it.
 *
 * Owns: the engine's API. Must not touch the transport's internals (only
 * xport.h), nor an algorithm's inside (algorithms.h is its whole face).
 */
#ifndef GX_COLL_H
#define GX_COLL_H

#include <stdio.h>

#include "collectives/schedule/schedule.h"

/* ---- engine (coll_engine.c) --------------------------------------------- */

/** Issue a collective whose arguments were checked: builds the schedule,
 *  queues it and returns its request. */
int coll_issue(struct gx_comm *comm, uint64_t seq, const struct coll_args *a, const char *fn,
               struct gx_request **req_out);
/** Take the communicator's next collective sequence number (also for calls
 *  that fail argument checks, so a rank that skipped a call is detected). */
uint64_t coll_next_seq(struct gx_comm *comm, int *status);
/** A call that took `seq` failed its argument checks with `status`: the
 *  flight recorder keeps it, so a merged dump shows where it happened. */
void coll_note_rejected(struct gx_comm *comm, uint64_t seq, const struct coll_args *a,
                        int status);

/* ---- algorithm choice (coll_tune.c) ------------------------------------- */

/** The algorithm for a collective of `bytes` (the full vector: count *
 *  element size; per-rank block for gather/scatter/all-gather/alltoall) on
 *  `comm`: GX_ALGO if it names one that applies, else the cost model. */
enum coll_algo coll_choose(const struct gx_comm *comm, enum coll_kind kind, size_t bytes);
/** The all-reduce algorithm of the rails of a hierarchical all-reduce of
 *  `bytes` on `comm` (ring, rhd, tree or dbtree; the same on every rank). */
enum coll_algo coll_hier_rail_algo(const struct gx_comm *comm, size_t bytes);
/** Predicted seconds of `algo` for `kind` with `bytes` on `n` ranks on
 *  `nodes` nodes; a negative value when the algorithm does not apply. */
double coll_predict(enum coll_kind kind, enum coll_algo algo, size_t bytes, int n, int nodes);

/** Print the algorithm choice and predicted time per size for `nranks`
 *  ranks on `nnodes` nodes (gx-info --tuning). */
int gx_coll_tuning_print(FILE *f, int nranks, int nnodes);
/** The same over a network link of `net_alpha` seconds per message and
 *  `net_beta` seconds per byte (0, 0: the tcp defaults), as a probe at
 *  set-up would measure it (gx-info --tuning --link). */
int gx_coll_tuning_print_net(FILE *f, int nranks, int nnodes, double net_alpha, double net_beta);

#endif
