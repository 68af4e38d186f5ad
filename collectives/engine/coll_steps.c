/*
 * coll_steps.c - running one collective's steps (coll.h): dependencies,
 * posting sends and receives to the transport within the receive budget,
 * reductions, copies, the shared-memory arena's flag steps (with the
 * liveness check of the ranks they wait for), the mismatch descriptor check,
 * and the report of what a stalled collective still waits for. Called by
 * the engine (coll_engine.c) with the communicator's lock held.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "collectives/engine/coll_pipe.h"
#include "collectives/engine/coll_engine.h"
#include "collectives/engine/coll_fault.h"
#include "collectives/engine/coll_gpu.h"
#include "collectives/engine/coll_trace.h"
#include "collectives/arena/node_shm.h"
#include "collectives/comm/comm_internal.h"
#include "common/clock.h"
#include "common/log.h"

/* ---- describing calls ------------------------------------------------- */

static void describe_desc(const struct coll_desc *d, char *buf, size_t len)
{
    const char *kind = coll_kind_name((enum coll_kind)d->coll);
    int n = snprintf(buf, len, "%s #%llu (count %llu, %s", kind, (unsigned long long)d->seq,
                     (unsigned long long)d->count, gx_datatype_name((enum gx_datatype)d->dtype));
    if (n < 0 || (size_t)n >= len)
        return;
    if (d->op != 0xff)
        n += snprintf(buf + n, len - (size_t)n, ", %s", gx_redop_name((enum gx_redop)d->op));
    if ((size_t)n < len && d->root >= 0)
        n += snprintf(buf + n, len - (size_t)n, ", root %d", d->root);
    if ((size_t)n < len)
        snprintf(buf + n, len - (size_t)n, ", algorithm %s%s%s)",
                 coll_algo_name((enum coll_algo)d->algo), d->inner_algo ? " rails " : "",
                 d->inner_algo ? coll_algo_name((enum coll_algo)d->inner_algo) : "");
}

void coll_describe_op(const struct coll_op *op, char *buf, size_t len)
{
    snprintf(buf, len, "%s #%llu on communicator '%s' (rank %d of %d)",
             coll_kind_name(op->a.kind), (unsigned long long)op->seq, op->comm->name,
             op->comm->rank, op->comm->size);
}


void coll_op_set_error(struct coll_op *op, int status, const char *fmt, ...)
{
    if (op->finished)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(op->errmsg, sizeof(op->errmsg), fmt, ap);
    va_end(ap);
    op->status = status;
}

/* ---- running steps ------------------------------------------------------ */

static bool deps_done(const struct coll_op *op, const struct coll_step *s)
{
    for (int k = 0; k < CS_MAX_DEPS; k++)
        if (s->dep[k] >= 0 && op->steps[s->dep[k]].state != STEP_DONE)
            return false;
    return true;
}

static void check_desc(struct coll_op *op)
{
    const struct coll_desc *m = &op->desc_out, *p = &op->desc_in;
    int prev = (op->comm->rank + op->comm->size - 1) % op->comm->size;
    op->desc_checked = true;
    if (p->magic != COLL_DESC_MAGIC || p->version != COLL_PROTO_VERSION) {
        coll_op_set_error(op, GX_EPROTO, "%s #%llu: rank %d sent a malformed collective descriptor "
                     "(magic 0x%x version %u) to rank %d", coll_kind_name(op->a.kind),
                     (unsigned long long)op->seq, prev, p->magic, p->version, op->comm->rank);
        return;
    }
    if (memcmp(m, p, sizeof(*m)) == 0)
        return;
    char mine[200], theirs[200];
    describe_desc(m, mine, sizeof(mine));
    describe_desc(p, theirs, sizeof(theirs));
    coll_op_set_error(op, GX_EMISMATCH, "collective mismatch on communicator '%s': rank %d called "
                 "%s but rank %d called %s%s", op->comm->name, prev, theirs, op->comm->rank, mine,
                 p->seq != m->seq ? " (a rank skipped a collective, e.g. one that failed its "
                 "argument checks there)" : "");
}

/* A send or receive finished: check it. */
static void comm_step_finished(struct coll_op *op, int i)
{
    struct coll_step *s = &op->steps[i];
    struct xp_op *x = coll_step_xop(op, i);
    if (s->kind == CS_RECV) {
        op->cc->recvs_posted--;
        op->recvs_posted--;
    }
    s->failed = x->status != GX_OK;
    if (x->status == GX_ETRUNCATE) {
        snprintf(op->anomaly, sizeof(op->anomaly), "%s #%llu: rank %d and rank %d disagree on "
                 "a message size (%s): ranks called different collectives or counts",
                 coll_kind_name(op->a.kind), (unsigned long long)op->seq, op->comm->rank, s->peer,
                 x->err);
    } else if (x->status != GX_OK) {
        if (op->status == GX_OK) {
            char what[160];
            coll_describe_op(op, what, sizeof(what));
            coll_op_set_error(op, x->status, "%s failed: %s", what, x->err);
        }
    } else if (s->kind == CS_RECV && x->received != s->len) {
        snprintf(op->anomaly, sizeof(op->anomaly), "%s #%llu: rank %d sent %zu bytes where rank "
                 "%d expected %zu: ranks called different collectives or counts",
                 coll_kind_name(op->a.kind), (unsigned long long)op->seq, s->peer, x->received,
                 op->comm->rank, s->len);
    }
    s->state = STEP_DONE;
    if (gx_trace_on())
        coll_trace_message(op, i, x->t_post);
    if (i == op->desc_recv_step && op->status == GX_OK)
        check_desc(op);
}

static uint32_t step_tag(const struct coll_op *op, const struct coll_step *s)
{
    return XP_TAG_INTERNAL | (s->msg == UINT32_MAX ? COLL_DESC_TAG : COLL_TAG(op->seq, s->msg));
}

/* A shared-memory flag wait: done once every rank's counter has reached the
 * value. While it has not, now and then check that every rank it still waits
 * for lives (a dead process raises no flag and closes no connection the
 * engine watches here; the first missing rank may be alive but blocked while
 * a later one is dead). */
static void run_flag_wait(struct coll_op *op, struct coll_step *s)
{
    /* A one-node communicator's arena, or across nodes this node's. */
    const struct node_shm *ar = op->comm->shm ? op->comm->shm : op->comm->node_shm;
    bool one = s->msg == 0; /* cs_flag_wait_one: rank s->peer only */
    bool check = (++op->flag_polls & 4095) == 0;
    int first_missing = -1;
    for (int j = one ? s->peer : 0; j < (one ? s->peer + 1 : ar->nranks); j++) {
        const uint64_t *f = (const uint64_t *)((const char *)s->src + (size_t)j * s->msg);
        if (__atomic_load_n(f, __ATOMIC_ACQUIRE) >= s->len)
            continue;
        if (first_missing < 0)
            first_missing = j;
        if (!check)
            break; /* the fast path stops at the first missing flag */
        if (node_shm_peer_gone(ar, j)) {
            char what[160];
            coll_describe_op(op, what, sizeof(what));
            s->peer = node_shm_comm_rank(ar, j);
            s->failed = 1;
            s->state = STEP_DONE;
            coll_op_set_error(op, GX_EPEER, "%s failed: rank %d (pid %d) exited while rank %d waited "
                         "for it in the shared-memory arena", what, s->peer, (int)ar->ctl[j].pid,
                         op->comm->rank);
            return;
        }
    }
    if (first_missing < 0) {
        s->state = STEP_DONE;
        return;
    }
    /* Stays waiting; the peer it names is a comm rank (a one-rank wait's
     * index is one already: only a one-node arena has those). */
    if (!one)
        s->peer = node_shm_comm_rank(ar, first_missing);
}

/* GX_FAULT (coll_fault.c): true when the step was consumed by a fault. */
static bool inject_fault(struct coll_op *op, struct coll_step *s)
{
    int delay_ms = 0;
    enum coll_fault_action f = coll_fault_at_step(op->comm, op->seq, (int)(s - op->steps),
                                                  s->kind == CS_SEND, &delay_ms);
    if (f != COLL_FAULT_NONE && gx_trace_on())
        coll_trace_event(op, f == COLL_FAULT_DELAY ? "injected delay" : "injected fault");
    if (f == COLL_FAULT_DROP) {
        /* Lost on the wire: the send completes, the receiver waits. */
        struct xp_op *x = coll_step_xop(op, (int)(s - op->steps));
        memset(x, 0, sizeof(*x));
        x->status = GX_OK;
        __atomic_store_n(&x->done, true, __ATOMIC_RELEASE);
        s->state = STEP_POSTED;
        return true;
    }
    if (f == COLL_FAULT_CLOSE)
        gx_xport_inject(op->comm->xport, s->peer, XP_INJECT_CLOSE);
    else if (f == COLL_FAULT_REGFAIL)
        gx_xport_inject(op->comm->xport, s->peer, XP_INJECT_REGFAIL);
    else if (f == COLL_FAULT_CORRUPT)
        gx_xport_inject_corrupt(op->comm->xport, s->peer, step_tag(op, s));
    return false;
}

/* A step's pointer in one of the device ranges GPUDirect RDMA hands to the
 * fabric (coll_args.gdr_lo/hi): the CPU must not touch it. */
static bool on_dev(const struct coll_op *op, const void *p)
{
    for (int i = 0; i < 2; i++)
        if (op->a.gdr_lo[i] && (const char *)p >= op->a.gdr_lo[i] &&
            (const char *)p < op->a.gdr_hi[i])
            return true;
    return false;
}

static bool reduces_on_dev(const struct coll_op *op, const struct coll_step *s)
{
    return op->a.gdr_lo[0] && (on_dev(op, s->dst) || on_dev(op, s->src) ||
                               (s->src2 && on_dev(op, s->src2)));
}

static void run_step(struct coll_op *op, struct coll_step *s)
{
    struct gx_xport *x = op->comm->xport;
    int rc = GX_OK;
    /* GX_TRACE: the span of a step that runs here and now (not a message,
     * not a flag wait, which polls: a clock read per poll cost more than
     * the wait). */
    bool local = s->kind != CS_SEND && s->kind != CS_RECV && s->kind != CS_FLAG_WAIT &&
                 s->kind != CS_NOP;
    uint64_t t0 = local && gx_trace_on() ? gx_trace_now() : 0;
    bool kernel = false;
    if ((s->kind == CS_SEND || s->kind == CS_RECV) && coll_fault_any() && inject_fault(op, s))
        return;
    bool reduce = s->kind == CS_REDUCE || s->kind == CS_REDUCE3 || s->kind == CS_AVG;
    if (reduce && reduces_on_dev(op, s)) /* api/gdr.c never plans this */
        rc = gx_fail(GX_EUNSUPPORTED, GX_SUB_COLL, "a reduction step on device memory "
                     "(GPUDirect RDMA is planned for data movement only)");
    else switch (s->kind) {
    case CS_SEND:
        if (s->announced == STEP_ANNOUNCED) { /* its request went ahead: the data is ready */
            gx_xport_send_release(x, coll_step_xop(op, (int)(s - op->steps)));
            break;
        }
        rc = gx_xport_send_mem(x, coll_step_xop(op, (int)(s - op->steps)), s->peer, step_tag(op, s), s->src, s->len,
                               s->len && on_dev(op, s->src));
        break;
    case CS_RECV:
        /* The oldest collective may always post: otherwise later ones can
         * hold the whole budget while the oldest waits for a receive its
         * peers' sends depend on, and every rank stalls (seen under TSan). */
        if (op->cc->recvs_posted >= RECV_BUDGET && op != op->cc->head)
            return; /* stays waiting */
        rc = gx_xport_recv_mem(x, coll_step_xop(op, (int)(s - op->steps)), s->peer, step_tag(op, s), s->dst, s->len,
                               s->len && on_dev(op, s->dst));
        if (rc == GX_OK) {
            op->cc->recvs_posted++;
            op->recvs_posted++;
        }
        break;
    case CS_REDUCE:
        if (op->a.gpu.n && (kernel = coll_gpu_step(op, s, &rc))) /* branch kernels */
            break;
        op->fn(s->dst, s->src, s->len);
        break;
    case CS_REDUCE3:
        if (op->a.gpu.n && (kernel = coll_gpu_step(op, s, &rc))) /* branch kernels */
            break;
        if (s->dst == s->src) /* in-place forms: the two-operand kernel */
            op->fn(s->dst, s->src2, s->len);
        else if (s->dst == s->src2)
            op->fn(s->dst, s->src, s->len);
        else
            op->fn3(s->dst, s->src, s->src2, s->len);
        break;
    case CS_COPY:
        if (s->len && s->dst != s->src && op->a.gdr_lo[0])
            rc = gx_xport_mem_copy(s->dst, on_dev(op, s->dst), s->src, on_dev(op, s->src),
                                   s->len);
        else if (s->len && s->dst != s->src)
            memcpy(s->dst, s->src, s->len);
        break;
    case CS_AVG:
        rc = gx_reduce_finish_avg(s->dst, op->a.dtype, s->len, op->comm->size);
        break;
    case CS_FLAG_SET:
        if (coll_fault_any())
            coll_fault_at_flag_set(op->comm, op->seq, (int)(s - op->steps));
        __atomic_store_n((uint64_t *)s->dst, (uint64_t)s->len, __ATOMIC_RELEASE);
        break;
    case CS_FLAG_WAIT:
        run_flag_wait(op, s);
        return;
    default:
        break;
    }
    if (rc != GX_OK) {
        char what[160];
        coll_describe_op(op, what, sizeof(what));
        coll_op_set_error(op, rc, "%s failed posting to rank %d: %s", what, s->peer, gx_last_error());
        if (s->kind == CS_SEND || s->kind == CS_RECV) {
            /* A link found broken at posting is a failed message like one
             * found broken at completion: the engine then waits briefly for
             * the root cause another rank reports (the peer may be a
             * survivor that exited after its own failure). */
            s->failed = 1;
            s->state = STEP_DONE;
        }
        return;
    }
    s->state = (s->kind == CS_SEND || s->kind == CS_RECV) ? STEP_POSTED : STEP_DONE;
    if (t0 && s->state == STEP_DONE && gx_trace_on())
        coll_trace_local(op, (int)(s - op->steps), t0, kernel);
}

/* GX_RTS_AHEAD: announce the rendezvous sends of the next steps whose data
 * is not ready, in step order, so that their requests cross the link now
 * and each receiver's clear-to-send is back by the time the data is (a
 * round trip per message otherwise, behind the bulk data on the link: the
 * tree's reduction chunks waited for clear-to-sends queued behind its
 * broadcast). Stops at the first send it cannot announce, which is posted
 * when ready, so a peer still sees one rank's sends in step order wherever
 * announced and posted ones meet. */
static void announce_sends(struct coll_op *op)
{
    int ahead = op->comm->rts_ahead;
    int end = op->first + ahead < op->nsteps ? op->first + ahead : op->nsteps;
    int i = op->announce_next > op->first ? op->announce_next : op->first;
    for (; i < end; i++) {
        struct coll_step *s = &op->steps[i];
        if (s->kind != CS_SEND || s->state != STEP_WAITING || s->announced == STEP_ANNOUNCED)
            continue;
        if (s->announced == STEP_UNANNOUNCEABLE || deps_done(op, s))
            break; /* the pass posts it when ready (in step order) */
        int rc = on_dev(op, s->src) ? GX_EUNSUPPORTED
                 : gx_xport_send_announce(op->comm->xport, coll_step_xop(op, i), s->peer,
                                          step_tag(op, s), s->src, s->len);
        /* Not announceable (asked once, not every pass), or a broken link
         * its post will report. */
        s->announced = rc == GX_OK ? STEP_ANNOUNCED : STEP_UNANNOUNCEABLE;
        if (rc != GX_OK)
            break;
    }
    op->announce_next = i;
}

/* Run step i if it can go, and finish it if its message has completed.
 * True when either happened. */
static bool visit_step(struct coll_op *op, int i)
{
    struct coll_step *s = &op->steps[i];
    bool changed = false;
    if (s->state == STEP_WAITING) {
        if (!deps_done(op, s))
            return false;
        int prc = op->pipe ? coll_pipe_before_step(op, s) : GX_OK;
        if (prc != GX_OK) {
            coll_op_set_error(op, prc, "copying a device buffer in for the exchange "
                              "failed: %s", gx_last_error());
            return false;
        }
        run_step(op, s);
        if (s->state == STEP_WAITING && op->status == GX_OK)
            return false; /* out of receive budget */
        changed = true;
    }
    /* An announced send finishes early only by failing. */
    if ((s->state == STEP_POSTED || s->announced == STEP_ANNOUNCED) &&
        __atomic_load_n(&coll_step_xop(op, i)->done, __ATOMIC_ACQUIRE)) {
        comm_step_finished(op, i);
        changed = true;
    }
    return changed;
}

/* A message step past the window gets its own transport state. */
static bool far_slot(struct coll_op *op, int i)
{
    if (!op->far_xops)
        op->far_xops = calloc((size_t)op->nsteps, sizeof(*op->far_xops));
    if (op->far_xops && !op->far_xops[i])
        op->far_xops[i] = calloc(1, sizeof(struct xp_op));
    if (op->far_xops && op->far_xops[i])
        return true;
    coll_op_set_error(op, GX_ENOMEM, "out of memory for a step past the engine's step window");
    return false;
}

/* The steps past the window (STEP_WINDOW, coll_engine.h). Only the oldest
 * op looks there: it may always post receives, so a later op's far
 * receives never take the budget an older one needs. */
static bool far_pass(struct coll_op *op)
{
    bool changed = false;
    int posted = 0;
    for (int i = op->first + STEP_WINDOW; i < op->nsteps && op->status == GX_OK; i++) {
        struct coll_step *s = &op->steps[i];
        if (s->state == STEP_DONE || (s->state == STEP_WAITING && !deps_done(op, s)))
            continue;
        bool message = s->kind == CS_SEND || s->kind == CS_RECV;
        if (message && s->state == STEP_WAITING && !far_slot(op, i))
            break;
        if (visit_step(op, i))
            changed = true;
        if (s->state == STEP_POSTED)
            posted++;
    }
    op->far_posted = posted; /* those the window reaches first, it finishes */
    return changed;
}

/* Past the window: after FAR_IDLE_MS of a window that changed nothing,
 * then while that finds work or has messages out. */
static bool far_steps(struct coll_op *op, bool window_changed)
{
    if (op->first + STEP_WINDOW >= op->nsteps || op != op->cc->head)
        return false;
    uint64_t now = gx_now_ns();
    if (window_changed)
        op->window_moved_ns = now;
    else if (!op->window_moved_ns)
        op->window_moved_ns = now;
    bool due = op->far_posted > 0 || op->far_busy ||
               now - op->window_moved_ns >= (uint64_t)FAR_IDLE_MS * 1000000u;
    if (!due)
        return false;
    if (!op->far_busy && op->far_posted == 0) {
        if (!op->far_told) {
            op->far_told = true;
            char what[160];
            coll_describe_op(op, what, sizeof(what));
            GX_INFO(GX_SUB_COLL, "%s: nothing in the engine's window of %d steps (from step "
                    "%d of %d) changed for %d ms: running the steps past it that can go",
                    what, STEP_WINDOW, op->first, op->nsteps, FAR_IDLE_MS);
        }
        op->window_moved_ns = now; /* an idle look again in FAR_IDLE_MS at the earliest */
    }
    op->far_busy = far_pass(op);
    return op->far_busy;
}

/* One pass over an op's window (and, when it is stuck, past it). Returns
 * true when anything changed. */
bool coll_op_pass(struct coll_op *op)
{
    bool changed = false;
    bool only_desc = op->anomaly[0] != 0;
    if (op->comm->rts_ahead > 0 && !only_desc && op->status == GX_OK && !op->pipe &&
        !coll_fault_any())
        announce_sends(op);
    int end = op->first + STEP_WINDOW < op->nsteps ? op->first + STEP_WINDOW : op->nsteps;
    for (int i = op->first; i < end && op->status == GX_OK; i++) {
        if (op->steps[i].state == STEP_DONE)
            continue;
        if (only_desc && i != op->desc_recv_step)
            continue;
        if (visit_step(op, i)) {
            changed = true;
            if (op->anomaly[0])
                only_desc = true;
        }
    }
    if (!only_desc && op->status == GX_OK && far_steps(op, changed))
        changed = true;
    while (op->first < op->nsteps && op->steps[op->first].state == STEP_DONE)
        op->first++;
    if (op->pipe && op->status == GX_OK) {
        int prc = coll_pipe_after_pass(op);
        if (prc != GX_OK)
            coll_op_set_error(op, prc, "copying a result chunk back to device memory failed: "
                              "%s", gx_last_error());
    }
    return changed;
}

void coll_stall_report(const struct coll_op *op, char *buf, size_t len)
{
    size_t n = 0;
    int shown = 0;
    buf[0] = 0;
    for (int i = op->first; i < op->nsteps && shown < 6; i++) {
        const struct coll_step *s = &op->steps[i];
        bool flag_wait = s->kind == CS_FLAG_WAIT && s->state == STEP_WAITING && s->peer >= 0;
        if (!flag_wait && (s->state != STEP_POSTED || coll_step_xop(op, i)->done))
            continue;
        int w = snprintf(buf + n, len - n, "%s%s rank %d", shown ? ", " : "",
                         flag_wait ? "shared-memory flag of"
                         : s->kind == CS_RECV ? "receive from" : "send to", s->peer);
        if (w < 0 || (size_t)w >= len - n)
            break;
        n += (size_t)w;
        shown++;
    }
    if (!shown)
        snprintf(buf, len, "no message outstanding");
}
