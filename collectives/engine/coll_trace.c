/*
 * coll_trace.c - the engine's events on the timeline (see coll_trace.h).
 *
 * Every event of a collective carries "comm" (the communicator's id, the
 * same on every rank) and "seq" (its sequence number there), so a reader or
 * a test finds one collective's events on every rank. A step carries its
 * index in the schedule ("step"), its kind as the name, and for messages
 * the peer, the bytes and the message number inside the collective ("msg";
 * -1 for the descriptor every collective sends its neighbour first): a
 * send from a to b and the receive on b from a with the same comm, seq and
 * msg are the two ends of one message.
 */
#include "collectives/engine/coll_trace.h"

#include "collectives/algorithms/algo.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/engine/coll_engine.h"

static const char *step_name(const struct coll_step *s)
{
    switch (s->kind) {
    case CS_SEND: return "send";
    case CS_RECV: return "recv";
    case CS_REDUCE: return "reduce";
    case CS_REDUCE3: return "reduce3";
    case CS_COPY: return "copy";
    case CS_AVG: return "average";
    case CS_FLAG_SET: return "flag set";
    case CS_FLAG_WAIT: return "flag wait";
    default: return "step";
    }
}

void coll_trace_op(const struct coll_op *op)
{
    uint64_t now = gx_trace_now();
    struct gx_trace_rec r = {
        .ts = op->issued_ns, .dur = now - op->issued_ns,
        .name = coll_kind_name(op->a.kind), .cat = "collective",
        .key = { "comm", "seq", "count", "bytes", "steps", "status" },
        .val = { (int64_t)op->comm->comm_id, (int64_t)op->seq, (int64_t)op->a.count,
                 (int64_t)(op->a.count * op->a.es), op->nsteps, op->status },
        .skey = "algorithm", .sval = coll_algo_name((enum coll_algo)op->algo),
        .lane = GX_LANE_CALLS, .kind = GX_TR_ASYNC,
    };
    gx_trace_emit(&r);
}

void coll_trace_message(const struct coll_op *op, int i, uint64_t posted_ns)
{
    const struct coll_step *s = &op->steps[i];
    uint64_t now = gx_trace_now();
    if (!posted_ns)
        posted_ns = now;
    struct gx_trace_rec r = {
        .ts = posted_ns, .dur = now - posted_ns, .name = step_name(s), .cat = "step",
        .key = { "comm", "seq", "step", "peer", "bytes", "msg" },
        .val = { (int64_t)op->comm->comm_id, (int64_t)op->seq, i, s->peer, (int64_t)s->len,
                 s->msg == UINT32_MAX ? -1 : (int64_t)s->msg },
        .lane = GX_LANE_STEPS, .kind = GX_TR_ASYNC,
    };
    gx_trace_emit(&r);
}

void coll_trace_local(const struct coll_op *op, int i, uint64_t t0, bool gpu)
{
    const struct coll_step *s = &op->steps[i];
    /* Reductions count elements; copies count bytes. */
    bool elements = s->kind == CS_REDUCE || s->kind == CS_REDUCE3 || s->kind == CS_AVG;
    struct gx_trace_rec r = {
        .ts = t0, .dur = gx_trace_now() - t0, .name = step_name(s),
        .cat = gpu ? "kernel" : "step",
        .key = { "comm", "seq", "step", "bytes" },
        .val = { (int64_t)op->comm->comm_id, (int64_t)op->seq, i,
                 (int64_t)(elements ? s->len * op->a.es : s->len) },
        .lane = gpu ? GX_LANE_GPU : GX_LANE_STEPS, .kind = GX_TR_SPAN,
    };
    gx_trace_emit(&r);
}

void coll_trace_event(const struct coll_op *op, const char *what)
{
    struct gx_trace_rec r = {
        .ts = gx_trace_now(), .name = what, .cat = "event",
        .key = { "comm", "seq", "first_step", "steps", "status" },
        .val = { (int64_t)op->comm->comm_id, (int64_t)op->seq, op->first, op->nsteps,
                 op->status },
        .skey = "collective", .sval = coll_kind_name(op->a.kind),
        .lane = GX_LANE_EVENTS, .kind = GX_TR_INSTANT,
    };
    gx_trace_emit(&r);
}
