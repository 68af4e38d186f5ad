/*
 * coll_issue.c - issuing a collective: take its sequence number, choose its
 * algorithm (the cost model, memoised per communicator), build its schedule
 * with the algorithm's builder, queue it on the engine and hand back a
 * request whose step/wait/release hooks drive and retire it.
 *
 * Owns: the request glue of collectives. Which builder runs for which kind
 * and algorithm is the algorithm table's (algorithms/algo.h); the engine's
 * state and failure policy are coll_engine.c's; running steps is
 * coll_steps.c's.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/comm/request.h"
#include "collectives/engine/coll_pipe.h"
#include "collectives/engine/coll_engine.h"
#include "collectives/engine/coll_fault.h"
#include "collectives/engine/coll_skip.h"
#include "common/clock.h"
#include "common/log.h"

/* ---- requests --------------------------------------------------------------- */

static int coll_req_step(struct gx_request *req)
{
    struct coll_op *op = req->priv;
    struct coll_comm *cc = op->cc;
    if (!__atomic_load_n(&op->finished, __ATOMIC_ACQUIRE)) {
        /* With a progress thread, help only when it is not busy, unless a
         * caller waits (then the thread rests and the caller drives). */
        bool locked = cc->use_thread && !__atomic_load_n(&cc->waiters, __ATOMIC_RELAXED)
                          ? pthread_mutex_trylock(&cc->mu) == 0
                          : pthread_mutex_lock(&cc->mu) == 0;
        if (locked) {
            coll_progress_locked(cc);
            pthread_mutex_unlock(&cc->mu);
        }
    }
    if (!__atomic_load_n(&op->finished, __ATOMIC_ACQUIRE))
        return GX_INPROGRESS;
    if (op->status != GX_OK)
        gx_set_last_error(op->errmsg);
    return op->status;
}

/* A caller waiting on a collective drives progress itself: on few cores a
 * second thread spinning beside it only adds scheduling delay. */
static void coll_wait_begin(struct gx_request *req)
{
    struct coll_op *op = req->priv;
    if (op->waiting || __atomic_load_n(&op->finished, __ATOMIC_ACQUIRE))
        return;
    struct coll_comm *cc = op->cc;
    pthread_mutex_lock(&cc->mu);
    __atomic_store_n(&cc->waiters, cc->waiters + 1, __ATOMIC_RELAXED);
    op->waiting = true;
    pthread_mutex_unlock(&cc->mu);
}

/* Waits that yield: sleep in the transport, unless the op also waits on
 * the node arena's flags, which no event announces (then a short nap). */
static void coll_wait_block(struct gx_request *req, int timeout_ms)
{
    struct coll_op *op = req->priv;
    if (coll_op_polls_memory(op)) {
        struct timespec ts = { 0, 20000 };
        nanosleep(&ts, NULL);
        return;
    }
    /* Sleep only when a pass finds nothing to do: work the engine itself
     * made runnable (a step whose inputs a pass completed) has no event to
     * wake us, and sleeping on it cost a full slice per collective. */
    struct coll_comm *cc = op->cc;
    pthread_mutex_lock(&cc->mu);
    bool moved = coll_progress_locked(cc);
    pthread_mutex_unlock(&cc->mu);
    if (moved || __atomic_load_n(&op->finished, __ATOMIC_ACQUIRE))
        return;
    gx_xport_wait(op->comm->xport, timeout_ms);
}

static void coll_wait_end(struct gx_request *req)
{
    struct coll_op *op = req->priv;
    if (!op->waiting)
        return;
    struct coll_comm *cc = op->cc;
    pthread_mutex_lock(&cc->mu);
    __atomic_store_n(&cc->waiters, cc->waiters - 1, __ATOMIC_RELAXED);
    op->waiting = false;
    if (cc->head) /* others still outstanding: the thread takes over */
        pthread_cond_signal(&cc->cond);
    pthread_mutex_unlock(&cc->mu);
}

static void op_free(struct coll_op *op)
{
    coll_pipe_free(op);
    for (int i = 0; op->far_xops && i < op->nsteps; i++)
        free(op->far_xops[i]);
    free(op->far_xops);
    free(op->steps);
    free(op->xops);
    free(op->scratch);
    free(op);
}

static void coll_req_release(struct gx_request *req)
{
    struct coll_op *op = req->priv;
    struct coll_comm *cc = op->cc;
    /* A finished op is no longer the engine's (and its comm may be gone). */
    if (!__atomic_load_n(&op->finished, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&cc->mu);
        if (op->active) {
            /* Freed while in flight (after a timeout): the comm is broken. */
            char what[160];
            coll_describe_op(op, what, sizeof(what));
            coll_op_set_error(op, GX_ETIMEOUT, "%s was freed while still in flight", what);
            coll_comm_broken(cc, GX_ETIMEOUT, op->errmsg, -1);
            coll_op_finish(cc, op);
        }
        pthread_mutex_unlock(&cc->mu);
    }
    op_free(op);
}

uint64_t coll_next_seq(struct gx_comm *comm, int *status)
{
    struct coll_comm *cc = coll_comm_get(comm);
    if (!cc) {
        *status = gx_fail(GX_ENOMEM, GX_SUB_COLL, "communicator '%s': out of memory",
                          comm->name);
        return 0;
    }
    pthread_mutex_lock(&cc->mu);
    uint64_t s = ++cc->seq;
    pthread_mutex_unlock(&cc->mu);
    *status = GX_OK;
    return s;
}

uint64_t coll_issued(struct gx_comm *comm)
{
    struct coll_comm *cc = comm->coll;
    if (!cc)
        return 0;
    pthread_mutex_lock(&cc->mu);
    uint64_t s = cc->seq;
    pthread_mutex_unlock(&cc->mu);
    return s;
}

void coll_note_rejected(struct gx_comm *comm, uint64_t seq, const struct coll_args *a,
                        int status)
{
    struct coll_comm *cc = comm->coll; /* created by coll_next_seq() */
    pthread_mutex_lock(&cc->mu);
    coll_flight_rejected(cc->flight, seq, a, status);
    pthread_mutex_unlock(&cc->mu);
    /* Peers that went ahead fail now, naming us, instead of at GX_TIMEOUT.
     * Sending may read a peer's news: the caller still gets its own error. */
    char mine[1024];
    snprintf(mine, sizeof(mine), "%s", gx_last_error_text());
    coll_skip_announce_rejected(comm, seq, (int)a->kind, status, mine);
    gx_set_last_error(mine);
}

/* Bytes the cost model sees for a call. */
static size_t model_bytes(const struct coll_args *a)
{
    return a->count * a->es;
}

int coll_issue(struct gx_comm *comm, uint64_t seq, const struct coll_args *a, const char *fn,
               struct gx_request **req_out)
{
    struct coll_comm *cc = comm->coll; /* created by coll_next_seq() */
    int frc = coll_fault_setup();
    if (frc != GX_OK)
        return frc;
    struct coll_op *op = calloc(1, sizeof(*op));
    if (!op)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "%s: out of memory", fn);
    op->comm = comm;
    op->cc = cc;
    op->pool = &cc->scratch;
    op->a = *a;
    op->seq = seq;
    op->issued_ns = gx_now_ns();
    op->desc_recv_step = -1;
    if (a->op != GX_REDOP_COUNT) {
        int rc = gx_reduce_lookup(a->dtype, a->op, &op->fn);
        if (rc == GX_OK)
            rc = gx_reduce3_lookup(a->dtype, a->op, &op->fn3);
        if (rc != GX_OK) {
            free(op);
            return rc;
        }
    }
    size_t mb = model_bytes(a);
    pthread_mutex_lock(&cc->mu);
    if (cc->memo_kind == (int)a->kind && cc->memo_bytes == mb) {
        op->algo = cc->memo_algo;
        op->inner_algo = cc->memo_inner;
    } else {
        op->algo = coll_choose(comm, a->kind, mb);
        if (op->algo == COLL_ALGO_HIER)
            op->inner_algo = coll_hier_rail_algo(comm, mb);
        cc->memo_kind = (int)a->kind;
        cc->memo_bytes = mb;
        cc->memo_algo = op->algo;
        cc->memo_inner = op->inner_algo;
    }
    pthread_mutex_unlock(&cc->mu);
    int n = comm->size;
    if (n > 1) {
        op->desc_out = (struct coll_desc){
            .magic = COLL_DESC_MAGIC, .version = COLL_PROTO_VERSION, .coll = (uint8_t)a->kind,
            .dtype = (uint8_t)a->dtype,
            .op = a->op == GX_REDOP_COUNT ? 0xff : (uint8_t)a->op, .seq = op->seq,
            .count = a->count, .root = a->root, .algo = (uint8_t)op->algo,
            .inner_algo = (uint8_t)op->inner_algo,
        };
        cs_send(op, (comm->rank + 1) % n, UINT32_MAX, &op->desc_out, sizeof(op->desc_out), -1,
                -1, -1);
        op->desc_recv_step = cs_recv(op, (comm->rank + n - 1) % n, UINT32_MAX, &op->desc_in,
                                     sizeof(op->desc_in), -1, -1, -1);
    }
    int rc = coll_algo_build(op);
    if (rc == GX_OK)
        rc = op->build_status;
    if (rc == GX_OK) {
        /* The transport state of the steps in flight (coll_step_xop). */
        int slots = op->nsteps < STEP_WINDOW ? op->nsteps : STEP_WINDOW;
        op->xops = calloc(slots > 0 ? (size_t)slots : 1, sizeof(*op->xops));
        if (!op->xops)
            rc = GX_ENOMEM;
    }
    if (rc == GX_OK && a->pipe)
        rc = coll_pipe_attach(op);
    if (rc != GX_OK) {
        enum coll_algo algo = op->algo;
        bool capped = op->steps_capped;
        size_t scratch = op->scratch_failed;
        op_free(op);
        double gib = (double)a->count * (double)a->es / (1024.0 * 1024.0 * 1024.0);
        if (capped) /* a count too large to plan: the call's problem, decided at once */
            return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: count %zu of %s (%.1f GiB) needs more "
                           "than %d steps in the %s schedule: the planning memory would grow "
                           "past its bound; is the count right?", fn, a->count,
                           gx_datatype_name(a->dtype), gib, COLL_MAX_STEPS,
                           coll_algo_name(algo));
        if (scratch) {
            /* More than the machine's memory: the count is wrong (GX_EINVAL,
             * the communicator stays usable); else memory is short now. */
            double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
            return gx_fail((double)scratch > ram ? GX_EINVAL : GX_ENOMEM, GX_SUB_COLL,
                           "%s: count %zu of %s (%.1f GiB) needs %.1f GiB of scratch for the "
                           "%s schedule, which cannot be allocated (this machine has %.1f GiB); "
                           "is the count right?", fn, a->count, gx_datatype_name(a->dtype), gib,
                           (double)scratch / (1024.0 * 1024.0 * 1024.0), coll_algo_name(algo),
                           ram / (1024.0 * 1024.0 * 1024.0));
        }
        return gx_fail(rc, GX_SUB_COLL, "%s: could not build the %s schedule (%s)", fn,
                       coll_algo_name(algo), gx_strerror(rc));
    }
    struct gx_request *req = gx_request_new(comm, coll_kind_name(a->kind), coll_req_step);
    if (!req) {
        op_free(op);
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "%s: out of memory", fn);
    }
    req->seq = op->seq;
    req->priv = op;
    req->release = coll_req_release;
    req->wait_begin = coll_wait_begin;
    req->wait_end = coll_wait_end;
    req->block = coll_wait_block;
    op->req = req;
    op->deadline = req->deadline;
    GX_TRACE(GX_SUB_COLL, "%s #%llu: %s%s%s, count %zu, %d steps", coll_kind_name(a->kind),
             (unsigned long long)op->seq, coll_algo_name(op->algo),
             op->algo == COLL_ALGO_HIER ? " rails " : "",
             op->algo == COLL_ALGO_HIER ? coll_algo_name(op->inner_algo) : "", a->count,
             op->nsteps);

    pthread_mutex_lock(&cc->mu);
    /* Bound the collectives in flight so tags stay unique (coll_proto.h). */
    while (cc->nactive >= COLL_MAX_OUTSTANDING && gx_ms_left(op->deadline) > 0) {
        coll_progress_locked(cc);
        pthread_mutex_unlock(&cc->mu);
        sched_yield();
        pthread_mutex_lock(&cc->mu);
    }
    coll_flight_issued(cc->flight, op);
    cc->last_issued_seq = op->seq;
    cc->last_issued_kind = (uint8_t)a->kind;
    op->active = true;
    if (cc->tail)
        cc->tail->next = op;
    else
        cc->head = op;
    cc->tail = op;
    cc->nactive++;
    if (a->will_wait) {
        /* The caller waits right away and drives the engine: leave the
         * progress thread asleep (waking it costs two context switches). */
        op->waiting = true;
        __atomic_store_n(&cc->waiters, cc->waiters + 1, __ATOMIC_RELAXED);
    }
    coll_progress_locked(cc); /* post the first messages now */
    if (!a->will_wait)
        pthread_cond_signal(&cc->cond);
    pthread_mutex_unlock(&cc->mu);
    *req_out = req;
    return GX_OK;
}
