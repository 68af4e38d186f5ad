/*
 * coll_skip.h - news from one rank that its peers must not wait for:
 *   REJECTED  its call #N failed its argument checks (GX_EINVAL): it took the
 *             sequence number but will send nothing for it;
 *   FINALIZED it called gx_comm_finalize after #N: it issues nothing later;
 *   BARRIER   it called gx_barrier as #N (the barrier counts in the sequence
 *             of collectives, so a peer in another collective #N fails).
 * The rank sends the notice over the bootstrap (REJECTED, FINALIZED: to
 * every peer; BARRIER: to its ring neighbours and the peers it is already
 * connected to); their engines poll for notices and fail the collective
 * concerned with GX_EMISMATCH naming the rank and its error, and their ABORT
 * carries it to the others: within a fraction of a second, not GX_TIMEOUT.
 *
 * Owns: the notices (their own comm id space on the bootstrap) and the
 * per-communicator record of the ones received. Runs with cc->mu held
 * (service, check) or without it (announce); must not touch the transport.
 */
#ifndef GX_COLL_SKIP_H
#define GX_COLL_SKIP_H

#include <stdbool.h>
#include <stdint.h>

struct coll_comm;
struct coll_op;
struct gx_comm;

/** This rank's call `seq` of `kind` was rejected with `status` ("msg"). */
void coll_skip_announce_rejected(struct gx_comm *c, uint64_t seq, int kind, int status,
                                 const char *msg);
/** This rank finalizes; its last collective was `last_seq` (0: none). */
void coll_skip_announce_finalized(struct gx_comm *c, uint64_t last_seq);
/** Read the notices that arrived (a few times per 10 ms at most). */
void coll_skip_service(struct coll_comm *cc);
/** Fail `op` when a notice says a rank will never take part in it. */
void coll_skip_check_op(struct coll_comm *cc, struct coll_op *op);
/** `op` failed because of a peer: if a notice (arriving within `wait_ms`)
 *  says a rank never takes part in it, that becomes its error. */
bool coll_skip_explains(struct coll_comm *cc, struct coll_op *op, int wait_ms);
void coll_skip_fini(struct coll_comm *cc);

#endif
