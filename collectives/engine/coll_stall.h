/*
 * coll_stall.h - the stall report: a collective that has waited
 * GX_STALL_WARN seconds (well before GX_TIMEOUT) makes its rank log one line
 * naming the collective and the peers it waits for, and tells the
 * communicator's rank 0 through the bootstrap (a side path that still works
 * when the data path is stuck; when rank 0 is silent, the next rank takes
 * its role). The surveyor then asks every rank what it last issued and
 * completed, and logs who never entered the collective, who is waiting in
 * it and who did not answer, e.g.
 *   "stall survey of allreduce #1842 on communicator 'world': rank 9 never
 *    entered it (last completed broadcast #1841 38.0 s ago); rank 5 did not
 *    answer (stopped, dead or busy outside gx); ranks 0-4,6-8 wait in it"
 * Ranks answer from their progress thread, which wakes a few times a second
 * for it while GX_STALL_WARN is on, so a rank busy outside gx still answers.
 *
 * Owns: the stall messages (their own comm id space on the bootstrap, so
 * they never match an operation's messages) and the survey state. Runs with
 * cc->mu held; must not touch the transport.
 */
#ifndef GX_COLL_STALL_H
#define GX_COLL_STALL_H

#include <stdbool.h>
#include <stdint.h>

struct coll_comm;
struct coll_op;

/** Read GX_STALL_WARN into the engine state (0 turns the report off). */
void coll_stall_init(struct coll_comm *cc);
void coll_stall_fini(struct coll_comm *cc);
/** An op still in progress: warn once when it has waited long enough. */
void coll_stall_check_op(struct coll_comm *cc, struct coll_op *op);
/** Answer queries, run rank 0's survey; cheap when called often (it looks
 *  at the bootstrap a few times a second at most). */
void coll_stall_service(struct coll_comm *cc);
/** Milliseconds the idle progress thread may sleep before servicing (0:
 *  sleep until woken, the report is off). */
int coll_stall_idle_ms(const struct coll_comm *cc);

#endif
