/*
 * ddp_sched.c - one iteration of the scheduler: gradients coming in from any
 * thread, buckets launched in order, the progress thread, and gx_ddp_finish
 * with its cross-rank agreement.
 *
 * Owns: the iteration state of struct gx_ddp (parameter states, bucket
 * flags, next_launch, the error of the iteration). Must not change the
 * layout except through ddp_rebuild() inside finish.
 *
 * Launch order. Buckets are numbered in the order they are expected to
 * complete; bucket k launches only once buckets 0..k are all complete, so the
 * sequence of all-reduces is the same on every rank whatever order this
 * rank's gradients arrive in (the collectives require it). The thread whose
 * gradient completes a launchable bucket launches it at once if the
 * scheduler's gx_lock is free; otherwise the progress thread, woken by the
 * same event, launches it on its next round (within one poll interval).
 *
 * Progress. The progress thread tests the buckets in flight with gx_test(),
 * runs the hook's complete step and copies reduced gradients back to the
 * program's buffers as each bucket finishes, so that work overlaps with the
 * rest of backward too.
 *
 * Agreement. A rank's iteration can go wrong locally (a parameter never
 * marked, marked twice, a hook failing). Its peers cannot see that, and
 * without help they would wait for buckets it never launches. So finish
 * always launches every bucket (missing gradients taken as zero) and then
 * all-gathers a 256-byte record of each rank's iteration status: every rank
 * returns the same verdict, naming the rank and parameters at fault.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/ddp/ddp_internal.h"
#include "common/clock.h"
#include "common/trace.h"
#include "common/log.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_ddp_poll_us, "GX_DDP_POLL_US", GX_PARAM_INT, "50", NULL,
                "DDP progress thread: microseconds to sleep between polls of the buckets "
                "in flight once a short spin found nothing (0 = spin, yield only)");

static void *slot_of(struct gx_ddp *ddp, struct ddp_param *p)
{
    return (char *)ddp->buckets[p->bucket].pub.data + p->offset;
}

/* Remember the first error of this iteration (reported to peers at finish). */
static void note_iter_error(struct gx_ddp *ddp, int status, const char *msg)
{
    pthread_mutex_lock(&ddp->lock);
    if (ddp->iter_status == GX_OK) {
        ddp->iter_status = status;
        snprintf(ddp->iter_msg, sizeof(ddp->iter_msg), "%s", msg);
    }
    pthread_mutex_unlock(&ddp->lock);
}

static int iter_fail(struct gx_ddp *ddp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int iter_fail(struct gx_ddp *ddp, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gx_vfail(status, GX_SUB_DDP, fmt, ap);
    va_end(ap);
    note_iter_error(ddp, status, gx_last_error());
    return status;
}

static bool launchable_locked(const struct gx_ddp *ddp)
{
    return !ddp->no_sync && ddp->next_launch < ddp->nbuckets &&
           ddp->buckets[ddp->next_launch].complete;
}

/* Parameter p is in (marked, or claimed as unused). Under lock. */
static bool param_in_locked(struct gx_ddp *ddp, size_t p, bool marked, uint64_t now)
{
    ddp->ready++;
    if (marked)
        ddp->ready_order[ddp->ready_order_len++] = p;
    ddp_stats_first_ready(ddp, now);
    struct ddp_bucket *b = &ddp->buckets[ddp->params[p].bucket];
    if (--b->pending == 0) {
        b->complete = true;
        b->ready_ns = now;
    }
    pthread_cond_broadcast(&ddp->cond);
    return launchable_locked(ddp);
}

/* A bucket's communication ended with `status` (gx_lock held). */
static void bucket_finished(struct gx_ddp *ddp, struct ddp_bucket *b, int status)
{
    if (status == GX_OK) {
        int rc = ddp_bucket_complete(ddp, b);
        for (size_t j = 0; rc == GX_OK && !ddp->cfg.gradient_as_bucket_view &&
                           j < b->pub.num_params; j++) {
            struct ddp_param *p = &ddp->params[b->params[j]];
            if (p->user_grad) /* the gradient may be CUDA memory (ddp_device.c) */
                rc = ddp_grad_copy(ddp, p->user_grad, slot_of(ddp, p), p->bytes);
        }
        if (rc != GX_OK)
            note_iter_error(ddp, rc, gx_last_error());
    } else {
        char msg[256];
        snprintf(msg, sizeof(msg), "bucket %d's all-reduce failed on rank %d: %s", b->pub.index,
                 ddp->rank, gx_last_error());
        note_iter_error(ddp, status, msg);
    }
    gx_request_free(b->req);
    b->req = NULL;
    pthread_mutex_lock(&ddp->lock);
    b->done = true;
    b->status = status;
    ddp->buckets_done++;
    uint64_t now = gx_now_ns();
    if (gx_trace_on())
        ddp_trace_bucket(ddp, b, now);
    ddp_stats_done(ddp, b, now);
    pthread_cond_broadcast(&ddp->cond);
    pthread_mutex_unlock(&ddp->lock);
}

/* Launch every bucket that may go, in order (gx_lock held). */
static void launch_ready(struct gx_ddp *ddp)
{
    for (;;) {
        struct ddp_bucket *b = NULL;
        pthread_mutex_lock(&ddp->lock);
        if (launchable_locked(ddp)) {
            b = &ddp->buckets[ddp->next_launch++];
            b->launched = true;
            b->launch_ns = gx_now_ns();
            b->pub.iteration = ddp->stats.iterations;
            ddp_stats_launch(ddp, b->launch_ns);
            pthread_cond_broadcast(&ddp->cond); /* the progress thread polls it */
        }
        pthread_mutex_unlock(&ddp->lock);
        if (!b)
            return;
        int rc = ddp_bucket_start(ddp, b);
        if (rc != GX_OK)
            note_iter_error(ddp, rc, gx_last_error());
        if (!b->req) /* finished already, or could not start at all */
            bucket_finished(ddp, b, rc);
    }
}

/* One round over the buckets in flight (gx_lock held). True if any remain. */
static bool poll_buckets(struct gx_ddp *ddp, bool *progressed)
{
    bool inflight = false;
    for (size_t k = 0; k < ddp->next_launch; k++) {
        struct ddp_bucket *b = &ddp->buckets[k];
        if (!b->launched || b->done)
            continue;
        int done = 0;
        int rc = gx_test(b->req, &done);
        if (done) {
            bucket_finished(ddp, b, rc);
            *progressed = true;
        } else {
            inflight = true;
        }
    }
    return inflight;
}

static void nap(unsigned idle_rounds, long poll_us)
{
    if (idle_rounds < 64 || poll_us <= 0) {
        sched_yield();
        return;
    }
    struct timespec ts = { 0, poll_us * 1000 };
    nanosleep(&ts, NULL);
}

static void *progress_main(void *arg)
{
    struct gx_ddp *ddp = arg;
    long long poll_us = 50;
    (void)gx_param_int(&gx_param_ddp_poll_us, &poll_us);
    unsigned idle = 0;
    for (;;) {
        bool progressed = false, inflight;
        pthread_mutex_lock(&ddp->gx_lock);
        launch_ready(ddp);
        inflight = poll_buckets(ddp, &progressed);
        pthread_mutex_unlock(&ddp->gx_lock);

        pthread_mutex_lock(&ddp->lock);
        while (!ddp->stop && ddp->t.inflight == 0 && !launchable_locked(ddp))
            pthread_cond_wait(&ddp->cond, &ddp->lock);
        bool stop = ddp->stop;
        pthread_mutex_unlock(&ddp->lock);
        if (stop)
            return NULL;
        idle = progressed ? 0 : idle + 1;
        if (inflight && !progressed)
            nap(idle, (long)poll_us);
    }
}

int ddp_progress_start(struct gx_ddp *ddp)
{
    int err = pthread_create(&ddp->progress, NULL, progress_main, ddp);
    if (err)
        return gx_fail(GX_ESYSTEM, GX_SUB_DDP, "ddp '%s': cannot start the progress thread: %s",
                       ddp->name, strerror(err));
    ddp->progress_running = true;
    return GX_OK;
}

void ddp_progress_stop(struct gx_ddp *ddp)
{
    if (!ddp->progress_running)
        return;
    pthread_mutex_lock(&ddp->lock);
    ddp->stop = true;
    pthread_cond_broadcast(&ddp->cond);
    pthread_mutex_unlock(&ddp->lock);
    pthread_join(ddp->progress, NULL);
    ddp->progress_running = false;
}

void ddp_iteration_reset(struct gx_ddp *ddp)
{
    /* Both locks: the progress thread reads the bucket flags under gx_lock. */
    pthread_mutex_lock(&ddp->gx_lock);
    pthread_mutex_lock(&ddp->lock);
    for (size_t i = 0; i < ddp->nparams; i++) {
        atomic_store(&ddp->params[i].state, DDP_PENDING);
        ddp->params[i].user_grad = NULL;
    }
    for (size_t k = 0; k < ddp->nbuckets; k++) {
        struct ddp_bucket *b = &ddp->buckets[k];
        b->pending = b->pub.num_params;
        b->complete = b->launched = b->done = b->hooked = false;
        b->status = GX_OK;
        b->req = NULL;
    }
    ddp->next_launch = 0;
    ddp->ready = 0;
    ddp->ready_order_len = 0;
    ddp->buckets_done = 0;
    ddp->iter_status = GX_OK;
    ddp->iter_msg[0] = '\0';
    pthread_mutex_unlock(&ddp->lock);
    pthread_mutex_unlock(&ddp->gx_lock);
}

/* ---- the public calls ----------------------------------------------------- */

GX_API void *gx_ddp_grad_buffer(struct gx_ddp *ddp, size_t param)
{
    gx_clear_last_error();
    if (!ddp) {
        gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_grad_buffer: ddp is NULL");
        return NULL;
    }
    if (param >= ddp->nparams) {
        gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_grad_buffer: parameter index %zu out of range "
                "(ddp '%s' has %zu parameters)", param, ddp->name, ddp->nparams);
        return NULL;
    }
    return slot_of(ddp, &ddp->params[param]);
}

GX_API int gx_ddp_grad_ready(struct gx_ddp *ddp, size_t param, void *grad)
{
    gx_clear_last_error();
    if (!ddp)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_grad_ready: ddp is NULL");
    if (ddp->broken)
        return gx_fail(GX_ESTATE, GX_SUB_DDP, "gx_ddp_grad_ready: ddp '%s' is unusable after a "
                       "failed gx_ddp_finish (%s)", ddp->name, gx_strerror(ddp->broken));
    if (param >= ddp->nparams)
        return iter_fail(ddp, GX_EINVAL, "gx_ddp_grad_ready: parameter index %zu out of range "
                         "on rank %d: ddp '%s' has %zu parameters", param, ddp->rank, ddp->name,
                         ddp->nparams);
    struct ddp_param *p = &ddp->params[param];
    void *slot = slot_of(ddp, p);
    if (ddp->cfg.gradient_as_bucket_view && grad && grad != slot)
        return iter_fail(ddp, GX_EINVAL, "gx_ddp_grad_ready: parameter %zu '%s' on rank %d: "
                         "gradient_as_bucket_view is set, so grad must be NULL or "
                         "gx_ddp_grad_buffer() (%p), not %p", param, p->name, ddp->rank, slot,
                         grad);
    if (!ddp->cfg.gradient_as_bucket_view && !grad)
        return iter_fail(ddp, GX_EINVAL, "gx_ddp_grad_ready: parameter %zu '%s' on rank %d: "
                         "grad is NULL (only allowed with gradient_as_bucket_view)", param,
                         p->name, ddp->rank);
    int expected = DDP_PENDING;
    if (!atomic_compare_exchange_strong(&p->state, &expected, DDP_MARKED))
        return iter_fail(ddp, GX_EINVAL, "gx_ddp_grad_ready: parameter %zu '%s' on rank %d %s",
                         param, p->name, ddp->rank,
                         expected == DDP_MARKED
                             ? "marked ready twice in one iteration"
                             : "marked ready after gx_ddp_finish() took it as unused");
    if (!ddp->cfg.gradient_as_bucket_view) {
        p->user_grad = grad;
        if (!ddp->no_sync && grad != slot) {
            int rc = ddp_grad_copy(ddp, slot, grad, p->bytes); /* grad may be CUDA memory */
            if (rc != GX_OK)
                return iter_fail(ddp, rc, "gx_ddp_grad_ready: parameter %zu '%s' on rank %d: "
                                 "copying the gradient failed: %s", param, p->name, ddp->rank,
                                 gx_last_error());
        }
    }
    pthread_mutex_lock(&ddp->lock);
    bool launch = param_in_locked(ddp, param, true, gx_now_ns());
    pthread_mutex_unlock(&ddp->lock);
    /* Launch now if nobody else is talking to gx; else the progress thread
     * (woken above) does it. */
    if (launch && pthread_mutex_trylock(&ddp->gx_lock) == 0) {
        launch_ready(ddp);
        pthread_mutex_unlock(&ddp->gx_lock);
    }
    return GX_OK;
}

/* Wait on the condition until `deadline` (gx_now_ns); false once it passed. */
static bool cond_wait_until(struct gx_ddp *ddp, uint64_t deadline)
{
    int left = gx_ms_left(deadline);
    if (left == 0)
        return false;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(left > 100 ? 100 : left) * 1000000ull;
    ts.tv_sec += (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    pthread_cond_timedwait(&ddp->cond, &ddp->lock, &ts);
    return true;
}

/* Take every parameter still pending as zero (unused, or missing: then it is
 * this iteration's error). */
static void claim_missing(struct gx_ddp *ddp, int timeout_ms)
{
    size_t missing = 0;
    char list[200] = "";
    size_t len = 0;
    for (size_t i = 0; i < ddp->nparams; i++) {
        struct ddp_param *p = &ddp->params[i];
        int expected = DDP_PENDING;
        if (!atomic_compare_exchange_strong(&p->state, &expected, DDP_UNUSED))
            continue;
        if (!ddp->no_sync && ddp_mem_zero(ddp, slot_of(ddp, p), p->bytes) != GX_OK)
            note_iter_error(ddp, GX_ESYSTEM, gx_last_error());
        pthread_mutex_lock(&ddp->lock);
        param_in_locked(ddp, i, false, gx_now_ns());
        bool report = ddp->cfg.find_unused_parameters && !p->reported_unused;
        if (ddp->cfg.find_unused_parameters) {
            p->reported_unused = true;
            ddp->stats.unused_params++;
        }
        pthread_mutex_unlock(&ddp->lock);
        if (report)
            GX_WARN(GX_SUB_DDP, "ddp '%s': parameter %zu '%s' got no gradient on rank %d "
                    "(unused this iteration): its local gradient is zero (reported once)",
                    ddp->name, i, p->name, ddp->rank);
        if (!ddp->cfg.find_unused_parameters) {
            if (missing++ < 4 && len < sizeof(list))
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%zu '%s'",
                                        len ? ", " : "", i, p->name);
        }
    }
    if (missing)
        iter_fail(ddp, GX_ETIMEOUT, "%zu parameter(s) never marked ready on rank %d within "
                  "%d ms: %s%s", missing, ddp->rank, timeout_ms, list,
                  missing > 4 ? ", ..." : "");
}

/* Every rank's record says OK? Otherwise fail naming the rank. */
static int check_agreement(struct gx_ddp *ddp, const struct ddp_agree_rec *all)
{
    if (ddp->iter_status != GX_OK) {
        gx_set_last_error(ddp->iter_msg);
        return ddp->iter_status;
    }
    for (int r = 0; r < ddp->nranks; r++) {
        const struct ddp_agree_rec *rec = &all[r];
        if (rec->status != GX_OK) {
            char msg[sizeof(rec->msg) + 1];
            memcpy(msg, rec->msg, sizeof(rec->msg));
            msg[sizeof(rec->msg)] = '\0';
            return gx_fail(GX_EMISMATCH, GX_SUB_DDP, "gx_ddp_finish: rank %d failed this "
                           "iteration (%s: %s); the gradients are not consistent across ranks",
                           r, gx_strerror(rec->status), msg);
        }
        if (rec->hook_hash != ddp->hook_hash)
            return gx_fail(GX_EMISMATCH, GX_SUB_DDP, "gx_ddp_finish: rank %d uses a different "
                           "comm hook than rank %d ('%s' here); set the same hook everywhere",
                           r, ddp->rank, ddp->hook.start ? ddp->hook.name : "none");
    }
    return GX_OK;
}

/* Wait for every bucket and the agreement until `deadline`. */
static int wait_communication(struct gx_ddp *ddp, struct gx_request *agree, uint64_t deadline,
                              int timeout_ms)
{
    pthread_mutex_lock(&ddp->lock);
    while (ddp->buckets_done < ddp->nbuckets && cond_wait_until(ddp, deadline))
        ;
    bool all_done = ddp->buckets_done == ddp->nbuckets;
    pthread_mutex_unlock(&ddp->lock);
    int rc = GX_OK;
    if (all_done && !agree)
        return GX_OK; /* the exchange never started: the caller has its error */
    if (all_done) {
        unsigned spins = 0;
        for (;;) {
            int done = 0;
            pthread_mutex_lock(&ddp->gx_lock);
            rc = gx_test(agree, &done);
            pthread_mutex_unlock(&ddp->gx_lock);
            if (done)
                return rc == GX_OK ? GX_OK
                                   : gx_fail(rc, GX_SUB_DDP, "gx_ddp_finish on rank %d: the "
                                             "end-of-iteration exchange failed: %s", ddp->rank,
                                             DDP_PREV_ERROR);
            if (gx_ms_left(deadline) == 0)
                break;
            nap(spins++, 50);
        }
    }
    /* Timed out: name what is still in flight. */
    char list[200] = "";
    size_t len = 0, stuck = 0;
    pthread_mutex_lock(&ddp->lock);
    for (size_t k = 0; k < ddp->nbuckets; k++) {
        struct ddp_bucket *b = &ddp->buckets[k];
        if (b->done)
            continue;
        if (stuck++ < 4 && len < sizeof(list))
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d ('%s'..)",
                                    len ? ", " : "", b->pub.index,
                                    ddp->params[b->params[0]].name);
    }
    pthread_mutex_unlock(&ddp->lock);
    char async[200] = "";
    gx_comm_get_async_error(ddp->comm, async, sizeof(async));
    ddp->broken = GX_ETIMEOUT;
    return gx_fail(GX_ETIMEOUT, GX_SUB_DDP, "gx_ddp_finish on rank %d: %s did not complete "
                   "within %d ms%s%s; a peer has not launched it: does every rank call "
                   "gx_ddp_finish and mark the same parameters?%s%s", ddp->rank,
                   stuck ? "bucket(s) " : "the end-of-iteration exchange", timeout_ms * 2,
                   stuck ? ": " : "", list, async[0] ? " Communicator error: " : "", async);
}

GX_API int gx_ddp_finish(struct gx_ddp *ddp, int timeout_ms)
{
    gx_clear_last_error();
    if (!ddp)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_finish: ddp is NULL");
    if (ddp->broken)
        return gx_fail(GX_ESTATE, GX_SUB_DDP, "gx_ddp_finish: ddp '%s' is unusable: a previous "
                       "finish failed (%s) with communication in flight; abort the "
                       "communicator and destroy the scheduler", ddp->name,
                       gx_strerror(ddp->broken));
    int timeout = timeout_ms < 0 ? ddp->op_timeout_ms : timeout_ms;
    uint64_t call = gx_now_ns();
    uint64_t ready_deadline = call + (uint64_t)timeout * 1000000ull;
    /* Peers missing a gradient report it after their own `timeout`: wait as
     * long again for the communication so their verdict arrives. */
    uint64_t comm_deadline = call + 2 * (uint64_t)timeout * 1000000ull;

    pthread_mutex_lock(&ddp->lock);
    ddp_stats_finish_called(ddp, call);
    while (ddp->ready < ddp->nparams && !ddp->cfg.find_unused_parameters &&
           cond_wait_until(ddp, ready_deadline))
        ;
    pthread_mutex_unlock(&ddp->lock);
    claim_missing(ddp, timeout);
    /* A grad_ready that claimed its parameter may still be copying. */
    pthread_mutex_lock(&ddp->lock);
    while (ddp->ready < ddp->nparams && cond_wait_until(ddp, comm_deadline))
        ;
    pthread_mutex_unlock(&ddp->lock);

    if (ddp->no_sync) {
        pthread_mutex_lock(&ddp->lock);
        ddp_stats_iteration_end(ddp, gx_now_ns(), false);
        int rc = ddp->iter_status;
        if (rc != GX_OK)
            gx_set_last_error(ddp->iter_msg);
        pthread_mutex_unlock(&ddp->lock);
        ddp_iteration_reset(ddp);
        return rc;
    }

    /* The records live in the scheduler: a timed-out exchange may still
     * touch them after finish returns. */
    struct ddp_agree_rec *mine = &ddp->agree_mine, *all = ddp->agree_all;
    struct gx_request *agree = NULL;
    pthread_mutex_lock(&ddp->gx_lock);
    launch_ready(ddp); /* every bucket is complete now */
    /* Device buckets: their all-reduces (and copies back) are queued on the
     * stream, gated until the stream reaches them; wait for the stream
     * before issuing the exchange, so no collective of this rank overtakes
     * them (peers would see the exchange against a bucket all-reduce). */
    int sync_rc = ddp_dev_sync(ddp);
    if (sync_rc != GX_OK)
        note_iter_error(ddp, sync_rc, gx_last_error());
    pthread_mutex_lock(&ddp->lock);
    memset(mine, 0, sizeof(*mine));
    mine->status = ddp->iter_status;
    mine->hook_hash = ddp->hook_hash;
    snprintf(mine->msg, sizeof(mine->msg), "%s", ddp->iter_msg);
    pthread_mutex_unlock(&ddp->lock);
    int rc = gx_iallgather(ddp->comm, mine, all, sizeof(*mine), GX_UINT8, &agree);
    pthread_mutex_unlock(&ddp->gx_lock);
    if (rc != GX_OK) {
        rc = gx_fail(rc, GX_SUB_DDP, "gx_ddp_finish on rank %d: cannot start the "
                     "end-of-iteration exchange: %s", ddp->rank, DDP_PREV_ERROR);
        agree = NULL;
    }

    int wait_rc = wait_communication(ddp, agree, comm_deadline, timeout);
    if (ddp->broken) {
        ddp->agree_inflight = agree; /* freed (after a wait) by destroy */
        return rc == GX_OK ? wait_rc : rc;
    }
    gx_request_free(agree);
    if (rc == GX_OK)
        rc = wait_rc;
    if (rc == GX_OK)
        rc = check_agreement(ddp, all);
    if (rc == GX_OK)
        rc = sync_rc;

    pthread_mutex_lock(&ddp->lock);
    ddp_stats_iteration_end(ddp, gx_now_ns(), rc == GX_OK);
    pthread_mutex_unlock(&ddp->lock);
    if (rc == GX_OK && !ddp->rebuilt && ddp->cfg.rebuild_buckets) {
        pthread_mutex_lock(&ddp->gx_lock);
        rc = ddp_rebuild(ddp);
        pthread_mutex_unlock(&ddp->gx_lock);
        if (rc != GX_OK && !GX_IS_CALLER_ERROR(rc))
            ddp->broken = rc;
    }
    ddp_iteration_reset(ddp);
    return rc;
}
