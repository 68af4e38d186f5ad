/*
 * coll_trace.h - what the engine puts on the timeline (GX_TRACE,
 * common/trace.h): each collective from issue to finish, each step of its
 * schedule (sends and receives from post to completion, reductions and
 * copies as they run, on the GPU lane when a kernel ran them), stalls,
 * faults and failures. Callers test gx_trace_on() first, so with tracing
 * off a call site costs a load and a branch.
 *
 * Owns nothing: it formats what the engine hands it. Runs with cc->mu held.
 */
#ifndef GX_COLL_TRACE_H
#define GX_COLL_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/trace.h"

struct coll_op;
struct coll_comm;

/** The op finished (op->status): its span from op->issued_ns. */
void coll_trace_op(const struct coll_op *op);
/** Step i (a send or receive) completed; it was posted at `posted_ns`. */
void coll_trace_message(const struct coll_op *op, int i, uint64_t posted_ns);
/** Step i (reduce, copy, average) ran from `t0` to now; `gpu`: as a kernel. */
void coll_trace_local(const struct coll_op *op, int i, uint64_t t0, bool gpu);
/** A point on the stalls-and-faults lane naming the op ("stall", "fault
 *  drop", "failure"). */
void coll_trace_event(const struct coll_op *op, const char *what);

#endif
