/*
 * coll.h - the step engine's entry points: issue a checked collective
 * (coll_issue.c, which chooses its algorithm with the cost model of
 * algorithms/coll_tune.h), and the engine's part in a communicator's life.
 * The public calls and set-up (collectives/api/) use it.
 *
 * Owns: the engine's API. Must not touch the transport's internals (only
 * xport.h), nor an algorithm's inside (algorithms/algo.h, the table, is
 * its whole face), nor anything of api/ above it.
 */
#ifndef GX_COLL_H
#define GX_COLL_H

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

/** Collective sequence numbers taken so far (gx_comm_stats' collectives:
 *  every call, refused ones included); 0 before the first. */
uint64_t coll_issued(struct gx_comm *comm);

/* ---- the communicator's life (called by api/) ---------------------------- */

/** Stop the progress thread and detach in-flight collectives (coll_engine.c);
 *  api/comm_init.c calls it before the transport closes. */
void gx_coll_comm_destroy(struct gx_comm *c);
/** Tell the peers this rank finalizes after its last collective, so a peer
 *  still in a later one fails at once (coll_skip.c). */
void gx_coll_comm_finalizing(struct gx_comm *c);
/** gx_barrier takes the next number in the sequence of collectives and
 *  tells the peers, so a peer in another collective with that number fails
 *  at once with GX_EMISMATCH (coll_skip.c). */
uint64_t gx_coll_barrier_enter(struct gx_comm *c, int *status);

#endif
