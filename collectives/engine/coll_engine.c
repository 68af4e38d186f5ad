/*
 * coll_engine.c - the step engine of the collectives.
 *
 * A collective is a schedule (schedule/schedule.h) built when it is issued: steps with up
 * to three dependencies on earlier steps. The engine walks every outstanding
 * collective of a communicator in issue order, posts the sends and receives
 * whose dependencies are done, runs the reductions and copies whose inputs
 * are ready, and retires a collective once all its steps are done. Chunked
 * schedules therefore pipeline by themselves: chunk c of round k+1 goes out
 * while chunk c+1 of round k is still in flight.
 *
 * Who runs it (GX_PROGRESS): "thread" (default) starts one progress thread
 * per communicator on its first collective; it sleeps on a condition variable
 * while nothing is outstanding and backs off (spin, yield, short naps) while
 * waiting on peers, so 8 ranks on 2 cores still make progress. The caller's
 * gx_test/gx_wait also advance the engine when the lock is free. "caller"
 * runs the engine only inside gx_test/gx_wait.
 *
 * Owns: struct coll_comm (coll_engine.h), the lifecycle of struct coll_op,
 * and the failure policy (running one collective's steps, the descriptor
 * check included, is coll_steps.c): a collective that fails for a
 * reason other than its own arguments sets the communicator's async error,
 * tells the other ranks through the bootstrap (so ranks waiting elsewhere
 * fail at once, naming the root cause) and aborts the transport so nothing
 * writes into the caller's buffers after the request reported its error.
 * Locking: cc->mu guards the list and every op's schedule; lock order is
 * cc->mu, then the transport's and the bootstrap's own locks.
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/engine/coll.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/comm/request.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_progress, "GX_PROGRESS", GX_PARAM_ENUM, "thread", "thread|caller",
                "Who advances non-blocking collectives: a progress thread per communicator "
                "(thread), or only gx_test/gx_wait in the calling thread (caller).");

#include "collectives/engine/coll_trace.h"
#include "collectives/engine/coll_engine.h"
#include "collectives/engine/coll_skip.h"

#define BOOT_POLL_NS 20000000ull  /* how often to look for failures other ranks reported */
#define BOOT_POLL_EVERY 32        /* engine passes between two looks at the clock for it */
#define ROOT_CAUSE_GRACE_MS 200   /* wait this long for a peer's report after a link error */
#define SKIP_GRACE_MS 50          /* ... and for a notice that a rank skipped the collective */


/* ---- failure ------------------------------------------------------------ */
/* Take a failure other ranks reported through the bootstrap, if any. */
static int boot_root_cause(struct gx_comm *c, char *msg, size_t len, int grace_ms)
{
    uint64_t until = gx_deadline_after_ms(grace_ms);
    for (;;) {
        gx_boot_progress(c->boot, 0);
        int bs = gx_boot_failure(c->boot, msg, len);
        if (bs != GX_OK || gx_ms_left(until) == 0)
            return bs;
        gx_boot_progress(c->boot, 10);
    }
}

/* The communicator is broken: every outstanding collective fails with
 * `status`, the transport is aborted (nothing may write into the callers'
 * buffers once their requests report), and other ranks are told. Called
 * with cc->mu held, after coll_op_set_error() on the op that failed first. */
void coll_comm_broken(struct coll_comm *cc, int status, const char *msg, int failed_world_rank)
{
    struct gx_comm *c = cc->comm;
    gx_comm_set_async_error(c, status, msg);
    coll_flight_dump(cc->flight, c, gx_strerror(status));
    if (status != GX_EABORTED && !atomic_load(&c->shrunk) &&
        gx_boot_failure(c->boot, NULL, 0) == GX_OK)
        gx_boot_fail(c->boot, status, failed_world_rank, msg);
    gx_xport_abort(c->xport);
    for (struct coll_op *op = cc->head; op; op = op->next) {
        if (op->status == GX_OK) {
            char what[160];
            coll_describe_op(op, what, sizeof(what));
            coll_op_set_error(op, status, "%s failed: %s", what, msg);
        }
        if (gx_trace_on())
            coll_trace_event(op, "failure");
    }
    gx_trace_flush("failure"); /* a rank killed next still leaves this much */
}

static bool op_gated(const struct coll_op *op)
{
    return op->a.gate && !__atomic_load_n(op->a.gate, __ATOMIC_ACQUIRE);
}

/* Advance one op; returns GX_OK when it finished (successfully or not).
 * `held`: an earlier op of this communicator still waits for its stream. */
static int op_advance(struct coll_comm *cc, struct coll_op *op, bool held, bool *progressed)
{
    /* A stream-ordered op waits, unstarted, for its stream (its deadline
     * runs), and so does every op issued after it: every collective starts
     * with a descriptor exchange whose messages match in posting order, so
     * a later op must not post before an earlier one (the peers would see
     * a mismatch). */
    bool gated = held || op_gated(op);
    if (op->status == GX_OK && !gated) {
        for (int pass = 0; pass < 8 && coll_op_pass(op); pass++)
            *progressed = true;
    }
    if (op->status == GX_OK && op->anomaly[0] &&
        (op->desc_recv_step < 0 || op->steps[op->desc_recv_step].state == STEP_DONE))
        coll_op_set_error(op, GX_EMISMATCH, "%s", op->anomaly);
    if (op->status == GX_OK && op->first == op->nsteps)
        return GX_OK;
    if (op->status == GX_OK && !gated)
        coll_stall_check_op(cc, op);
    if (op->status == GX_OK)
        coll_skip_check_op(cc, op);
    if (op->status == GX_OK && gx_ms_left(op->deadline) == 0) {
        char what[160], stall[300];
        coll_describe_op(op, what, sizeof(what));
        if (gated && !op_gated(op))
            snprintf(stall, sizeof(stall), "an earlier stream-ordered collective of this "
                     "communicator, which waits for its CUDA stream");
        else if (gated)
            snprintf(stall, sizeof(stall), "this rank's CUDA stream (the work queued on it "
                     "before the call never finished)");
        else
            coll_stall_report(op, stall, sizeof(stall));
        coll_op_set_error(op, GX_ETIMEOUT, "%s did not complete within %s (%d ms); still "
                     "waiting on: %s", what, op->comm->op_timeout_src, op->comm->op_timeout_ms,
                     stall);
    }
    if (op->status == GX_OK)
        return GX_INPROGRESS;
    /* Failed. Transport and mismatch failures break the communicator. */
    int failed_peer = -1;
    for (int i = 0; i < op->nsteps; i++) {
        const struct coll_step *s = &op->steps[i];
        if (s->state == STEP_DONE && s->failed &&
            (s->kind == CS_SEND || s->kind == CS_RECV || s->kind == CS_FLAG_WAIT))
            failed_peer = s->peer;
    }
    if (GX_IS_PEER_ERROR(op->status) && coll_skip_explains(cc, op, SKIP_GRACE_MS)) {
        failed_peer = -1; /* a rank said it never takes part: that is the cause */
    } else if (failed_peer >= 0 && GX_IS_PEER_ERROR(op->status)) {
        /* A broken link is often the echo of a failure another rank already
         * diagnosed (it aborted its transport): prefer that root cause. */
        char bmsg[512];
        int bs = boot_root_cause(cc->comm, bmsg, sizeof(bmsg), ROOT_CAUSE_GRACE_MS);
        if (bs != GX_OK) {
            char what[160];
            coll_describe_op(op, what, sizeof(what));
            op->status = GX_OK;
            coll_op_set_error(op, bs, "%s failed: %s", what, bmsg);
            failed_peer = -1;
        }
    }
    if (!GX_IS_CALLER_ERROR(op->status))
        coll_comm_broken(cc, op->status, op->errmsg,
                    failed_peer >= 0 ? cc->comm->world_ranks[failed_peer] : -1);
    return GX_OK;
}

static void op_unlink(struct coll_comm *cc, struct coll_op *op)
{
    struct coll_op **pp = &cc->head, *prev = NULL;
    while (*pp && *pp != op) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return;
    *pp = op->next;
    if (cc->tail == op)
        cc->tail = prev;
    op->next = NULL;
    op->active = false;
    cc->nactive--;
}

void coll_op_finish(struct coll_comm *cc, struct coll_op *op)
{
    cc->recvs_posted -= op->recvs_posted; /* a failed op's receives died with the transport */
    op->recvs_posted = 0;
    if (op->status != GX_OK)
        gx_fail(op->status, GX_SUB_COLL, "%s", op->errmsg);
    coll_flight_finished(cc->flight, op);
    if (op->status != GX_OK)
        __atomic_fetch_add(&op->comm->tally.collectives_failed, 1, __ATOMIC_RELAXED);
    if (gx_trace_on())
        coll_trace_op(op);
    if (op->status == GX_OK) {
        cc->last_done_seq = op->seq;
        cc->last_done_kind = (uint8_t)op->a.kind;
        cc->last_done_ns = gx_now_ns();
    }
    op_unlink(cc, op);
    /* A failed op's scratch may still be a receive target of a dying
     * transport: let it go with the op instead of reusing it. */
    if (op->status == GX_OK && op->scratch) {
        coll_scratch_give(&cc->scratch, op->scratch, op->scratch_size);
        op->scratch = NULL;
    }
    __atomic_store_n(&op->finished, true, __ATOMIC_RELEASE);
}

/* Check for failures from outside the engine: abort, another operation's
 * failure on this comm, or a failure another rank reported. */
static void check_outside_failures(struct coll_comm *cc)
{
    struct gx_comm *c = cc->comm;
    int status = GX_OK;
    char msg[512] = "";
    if (atomic_load(&c->aborted)) {
        status = GX_EABORTED;
        snprintf(msg, sizeof(msg), "communicator '%s' was aborted", c->name);
    } else if (atomic_load(&c->async_status) != GX_OK) {
        pthread_mutex_lock(&c->lock);
        status = atomic_load(&c->async_status);
        snprintf(msg, sizeof(msg), "%s", c->async_msg);
        pthread_mutex_unlock(&c->lock);
    } else if ((++cc->progress_calls % BOOT_POLL_EVERY) == 0 &&
               gx_now_ns() >= cc->next_boot_poll) {
        cc->next_boot_poll = gx_now_ns() + BOOT_POLL_NS;
        gx_boot_progress(c->boot, 0);
        status = gx_boot_failure(c->boot, msg, sizeof(msg));
    }
    if (status != GX_OK && status != GX_EABORTED) {
        /* A peer's failure may be the echo of a rank that said it never
         * takes part in one of our collectives: name that rank instead. */
        for (struct coll_op *op = cc->head; op; op = op->next) {
            if (op->status != GX_OK)
                continue;
            op->status = GX_EPEER;
            if (!coll_skip_explains(cc, op, 0))
                op->status = GX_OK;
        }
    }
    if (status != GX_OK)
        coll_comm_broken(cc, status, msg, -1);
}

/* Advance every outstanding collective in issue order. cc->mu held. */
bool coll_progress_locked(struct coll_comm *cc)
{
    bool progressed = false;
    if (coll_flight_signalled(cc->flight))
        coll_flight_dump(cc->flight, cc->comm, "SIGUSR1");
    if (cc->stall && (++cc->stall_calls & 31) == 0) /* keep the clock off the hot path */
        coll_stall_service(cc);
    if (!cc->head)
        return false;
    coll_skip_service(cc);
    int rc = gx_xport_progress(cc->comm->xport);
    if (rc != GX_OK) {
        char msg[300];
        snprintf(msg, sizeof(msg), "the transport of communicator '%s' failed: %s",
                 cc->comm->name, gx_last_error());
        coll_comm_broken(cc, rc, msg, -1);
    }
    check_outside_failures(cc);
    bool held = false;
    for (struct coll_op *op = cc->head, *next; op; op = next) {
        next = op->next;
        if (op_advance(cc, op, held, &progressed) == GX_OK) {
            coll_op_finish(cc, op);
            progressed = true;
            next = cc->head; /* a failure may have failed the others: rescan */
            held = false;
        } else if (op_gated(op)) {
            held = true;
        }
    }
    return progressed;
}

/* ---- progress thread ----------------------------------------------------- */

bool coll_op_polls_memory(const struct coll_op *op)
{
    return op->algo == COLL_ALGO_SHM ||
           (op->algo == COLL_ALGO_HIER && op->comm->node_shm != NULL) || op->a.gpu.n;
}

/* Whether the idle thread may sleep in the transport: no op in flight polls
 * memory. cc->mu held. */
static bool may_sleep(const struct coll_comm *cc)
{
    for (const struct coll_op *op = cc->head; op; op = op->next)
        if (coll_op_polls_memory(op))
            return false;
    return true;
}

static void backoff(unsigned idle)
{
    if (idle < 64)
        return;
    if (idle < 512) {
        sched_yield();
        return;
    }
    struct timespec ts = { 0, idle < 4096 ? 20000 : 200000 };
    nanosleep(&ts, NULL);
}

static void *progress_main(void *arg)
{
    struct coll_comm *cc = arg;
    unsigned idle = 0;
    uint64_t idle_since = 0;
    const uint64_t spin_ns = gx_spin_ns();
    pthread_mutex_lock(&cc->mu);
    for (;;) {
        while (!cc->stop && (!cc->head || cc->waiters > 0)) {
            idle = 0;
            int nap_ms = coll_stall_idle_ms(cc);
            if (nap_ms == 0) {
                pthread_cond_wait(&cc->cond, &cc->mu);
                continue;
            }
            /* The stall report: answer rank 0's survey even while idle. */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += (long)nap_ms * 1000000L;
            until.tv_sec += until.tv_nsec / 1000000000L;
            until.tv_nsec %= 1000000000L;
            pthread_cond_timedwait(&cc->cond, &cc->mu, &until);
            coll_stall_service(cc);
        }
        if (cc->stop)
            break;
        idle = coll_progress_locked(cc) ? 0 : idle + 1;
        if (idle == 1)
            idle_since = gx_now_ns();
        bool sleep = spin_ns != UINT64_MAX && idle > 1 && gx_now_ns() - idle_since >= spin_ns &&
                     may_sleep(cc);
        if (sleep && cc->stall)
            coll_stall_service(cc); /* progress calls are few while sleeping: it counts them */
        pthread_mutex_unlock(&cc->mu);
        if (sleep)
            gx_xport_wait(cc->comm->xport, 20); /* waits that yield */
        else
            backoff(idle);
        pthread_mutex_lock(&cc->mu);
    }
    pthread_mutex_unlock(&cc->mu);
    return NULL;
}

struct coll_comm *coll_comm_get(struct gx_comm *c)
{
    pthread_mutex_lock(&c->lock);
    struct coll_comm *cc = c->coll;
    if (!cc) {
        cc = calloc(1, sizeof(*cc));
        if (cc) {
            int mode = 0;
            (void)gx_param_enum(&gx_param_progress, &mode);
            cc->comm = c;
            cc->memo_kind = -1;
            cc->flight = coll_flight_new();
            coll_stall_init(cc);
            cc->use_thread = mode == 0 && c->size > 1;
            pthread_mutex_init(&cc->mu, NULL);
            coll_scratch_pool_init(&cc->scratch);
            pthread_cond_init(&cc->cond, NULL);
            if (cc->use_thread) {
                cc->thread_started = pthread_create(&cc->thread, NULL, progress_main, cc) == 0;
                if (!cc->thread_started) {
                    GX_WARN(GX_SUB_COLL, "communicator '%s': no progress thread (%s); the "
                            "caller advances collectives", c->name, strerror(errno));
                    cc->use_thread = false;
                }
            }
            c->coll = cc;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return cc;
}

void gx_coll_comm_destroy(struct gx_comm *c)
{
    struct coll_comm *cc = c->coll;
    if (!cc)
        return;
    pthread_mutex_lock(&cc->mu);
    cc->stop = true;
    pthread_cond_broadcast(&cc->cond);
    pthread_mutex_unlock(&cc->mu);
    if (cc->thread_started)
        pthread_join(cc->thread, NULL);
    pthread_mutex_lock(&cc->mu);
    if (cc->head) {
        /* Requests still in flight: nothing may touch their memory once the
         * transport closes. Their owners must still free them. */
        gx_xport_abort(c->xport);
        for (struct coll_op *op = cc->head; op; op = op->next)
            coll_op_set_error(op, GX_EABORTED, "%s #%llu: communicator '%s' was destroyed while it "
                         "was in flight", coll_kind_name(op->a.kind),
                         (unsigned long long)op->seq, c->name);
        while (cc->head) {
            struct coll_op *op = cc->head;
            coll_op_finish(cc, op);
        }
    }
    pthread_mutex_unlock(&cc->mu);
    pthread_cond_destroy(&cc->cond);
    pthread_mutex_destroy(&cc->mu);
    coll_scratch_pool_fini(&cc->scratch);
    coll_flight_free(cc->flight);
    coll_stall_fini(cc);
    coll_skip_fini(cc);
    free(cc);
    c->coll = NULL;
}
