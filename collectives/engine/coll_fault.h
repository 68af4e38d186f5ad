/*
 * coll_fault.h - fault injection (GX_FAULT, coll_fault.c): kill or stop a
 * rank, drop, delay or corrupt a message, close a link or fail a
 * registration at a chosen step of a chosen collective.
 */
#ifndef GX_COLL_FAULT_H
#define GX_COLL_FAULT_H

#include <stdbool.h>
#include <stdint.h>

struct gx_comm;

enum coll_fault_action {
    COLL_FAULT_NONE = 0,
    COLL_FAULT_KILL,
    COLL_FAULT_STOP,
    COLL_FAULT_DROP,
    COLL_FAULT_DELAY,
    COLL_FAULT_CLOSE,
    COLL_FAULT_REGFAIL,
    COLL_FAULT_CORRUPT,
};

/** Parse GX_FAULT once per process; GX_EINVAL (naming the variable and the
 *  rule) when it cannot be used. */
int coll_fault_setup(void);
/** True when GX_FAULT holds rules (the engine asks nothing otherwise). */
bool coll_fault_any(void);
/** Step `step` (its index in the schedule) of collective `seq` is about to
 *  be posted: the action that fires, if any. kill and stop act here (stop
 *  returns after SIGCONT), delay sleeps here; drop, close, regfail and
 *  corrupt are for the caller to carry out. */
enum coll_fault_action coll_fault_at_step(const struct gx_comm *c, uint64_t seq, int step,
                                          bool is_send, int *delay_ms);
/** Step `step` is a shared-memory arena flag about to be raised: only kill
 *  and stop rules fire here (a rank dying or stopping inside the arena). */
enum coll_fault_action coll_fault_at_flag_set(const struct gx_comm *c, uint64_t seq, int step);

#endif
