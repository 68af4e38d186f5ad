/*
 * coll_flight.h - the flight recorder: each communicator keeps its last
 * GX_FLIGHT collectives (sequence number, kind, count, datatype, op, root,
 * algorithm, state, status, times) in a ring, and writes them to
 * GX_FLIGHT_DIR when the communicator fails, times out or is aborted, and on
 * SIGUSR1. `gx-info --flight DIR` merges the ranks' dumps and names the
 * first collective where they diverge (tools/gx-info/flight_merge.c reads
 * the format written here; docs/reliability.md describes it).
 *
 * Owns: the ring and the dump file. Every call but the signal handler runs
 * with the engine's lock (cc->mu) held, so the ring needs no lock of its
 * own. Must not touch the engine's list or the transport.
 */
#ifndef GX_COLL_FLIGHT_H
#define GX_COLL_FLIGHT_H

#include <stdbool.h>
#include <stdint.h>

struct gx_comm;
struct coll_op;
struct coll_args;

#define FLIGHT_FORMAT_VERSION 1

struct coll_flight;

/** The comm's recorder, or NULL when GX_FLIGHT is 0 (or out of memory:
 *  recording is best effort and never fails a collective). */
struct coll_flight *coll_flight_new(void);
void coll_flight_free(struct coll_flight *f);

/** A collective was issued (op->seq, op->a, op->algo). */
void coll_flight_issued(struct coll_flight *f, const struct coll_op *op);
/** A call took sequence number `seq` but failed its argument checks. */
void coll_flight_rejected(struct coll_flight *f, uint64_t seq, const struct coll_args *a,
                          int status);
/** The op finished (op->status). */
void coll_flight_finished(struct coll_flight *f, const struct coll_op *op);

/** Write the ring to GX_FLIGHT_DIR (nothing when it is unset), naming
 *  `reason`. At most once per reason kind per recorder for failures; a
 *  SIGUSR1 dump is written each time one is asked for. */
void coll_flight_dump(struct coll_flight *f, const struct gx_comm *c, const char *reason);
/** True (once per signal) when SIGUSR1 asked for a dump since this
 *  recorder last looked. */
bool coll_flight_signalled(struct coll_flight *f);

#endif
