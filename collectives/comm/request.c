/* request.c - request lifecycle (gx_test, gx_wait, gx_request_free): the
 * object every non-blocking operation returns, stepped through the step
 * function its maker gave (the engine's, the point-to-point calls', the
 * barrier's; api/). */
#include "collectives/comm/request.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/comm/stage.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"

#define SPIN_US_MAX 10000000

GX_PARAM_DEFINE(gx_param_spin_us, "GX_SPIN_US", GX_PARAM_INT, "1000", NULL,
                "Microseconds a waiting rank polls (spin, yield, 20 us naps) before it sleeps "
                "until its provider has work (tcp sockets, the shm doorbell, verbs completion "
                "channels; dpdk, and verbs while a send waits for its clear-to-send, keep "
                "polling with short naps). Default 1000 (with more ranks than CPUs on the host "
                "the poll yields the CPU at once and naps). 0 sleeps at once; -1 never sleeps "
                "(spin, yield, 20-200 us naps: the waits before issue 29; with "
                "GX_YIELD_WHEN_IDLE=0 a busy poll). docs/scale.md.");

GX_PARAM_DEFINE(gx_param_yield_when_idle, "GX_YIELD_WHEN_IDLE", GX_PARAM_ENUM, "auto", "auto|0|1",
                "Whether a waiting rank gives up its CPU while it polls (Open MPI's "
                "mpi_yield_when_idle). auto: yield after 200 polls and nap after 2000, or after "
                "4 and 40 with more ranks on the host than CPUs (online ones, or fewer where the "
                "control group's CPU quota or cpuset caps them); 1: after 4 and 40 always (ranks "
                "bound together onto fewer CPUs: gx does not count affinity masks); 0: never, a "
                "busy poll (a core per rank; with more ranks than cores it starves the awaited "
                "ones). GX_SPIN_US still says when the wait sleeps. docs/scale.md.");

unsigned gx_wait_yield_after(bool oversubscribed)
{
    enum { YIELD_AUTO, YIELD_NEVER, YIELD_ALWAYS }; /* the order of the choices */
    int mode = YIELD_AUTO; /* gx_param_check_environment refused a bad value at init */
    if (gx_param_enum(&gx_param_yield_when_idle, &mode) != GX_OK)
        mode = YIELD_AUTO;
    if (mode == YIELD_NEVER)
        return UINT_MAX;
    return mode == YIELD_ALWAYS || oversubscribed ? 4 : 200;
}

int gx_spin_check(void)
{
    long long v;
    int rc = gx_param_int(&gx_param_spin_us, &v);
    if (rc != GX_OK)
        return rc;
    if (v < -1 || v > SPIN_US_MAX)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "GX_SPIN_US=%lld must be -1 (never sleep) or "
                       "0..%d microseconds", v, SPIN_US_MAX);
    return GX_OK;
}

/* Waits shorter than this are spun, longer ones are slept in slices of this
 * at most, so deadlines and failures reported elsewhere are still seen. */
#define BLOCK_SLICE_MS 20

uint64_t gx_spin_ns(void)
{
    static int spin_us = -2; /* read once; every thread may get here first */
    if (__atomic_load_n(&spin_us, __ATOMIC_RELAXED) == -2) {
        long long v = 1000; /* gx_spin_check refused a bad value at init */
        if (gx_param_int(&gx_param_spin_us, &v) != GX_OK || v < -1 || v > SPIN_US_MAX)
            v = 1000;
        __atomic_store_n(&spin_us, (int)v, __ATOMIC_RELAXED);
    }
    int us = __atomic_load_n(&spin_us, __ATOMIC_RELAXED);
    if (us < 0)
        return UINT64_MAX;
    return (uint64_t)us * 1000;
}

struct gx_request *gx_request_new(struct gx_comm *comm, const char *op_name,
                                  int (*step)(struct gx_request *))
{
    return gx_request_alloc(comm, op_name, step, sizeof(struct gx_request));
}

struct gx_request *gx_request_alloc(struct gx_comm *comm, const char *op_name,
                                    int (*step)(struct gx_request *), size_t size)
{
    struct gx_request *req = calloc(1, size);
    if (!req)
        return NULL;
    req->comm = comm;
    req->op_name = op_name;
    req->step = step;
    req->deadline = gx_comm_op_deadline(comm);
    return req;
}

void gx_request_step(struct gx_request *req)
{
    if (req->done)
        return;
    int rc = atomic_load(&req->comm->aborted) ? GX_EABORTED : req->step(req);
    /* Past the deadline, one more step first: a maker that keeps the same
     * deadline (a remote call) then fails in its own words, which it could
     * not when the deadline passed between its check and this one. */
    if (rc == GX_INPROGRESS && gx_ms_left(req->deadline) == 0)
        rc = req->step(req);
    if (rc == GX_INPROGRESS && gx_ms_left(req->deadline) == 0)
        rc = gx_fail(GX_ETIMEOUT, GX_SUB_COLL, "%s #%llu on communicator '%s' (rank %d) did "
                     "not complete within %s (%d ms)", req->op_name,
                     (unsigned long long)req->seq, req->comm->name, req->comm->rank,
                     req->comm->op_timeout_src, req->comm->op_timeout_ms);
    if (rc == GX_INPROGRESS)
        return;
    if (req->stage)
        rc = gx_stage_finish(req->stage, rc); /* the result back to device memory */
    req->status = req->private_failure ? rc : gx_comm_note_failure(req->comm, rc);
    req->done = true;
}

GX_API int gx_test(struct gx_request *req, int *done)
{
    gx_clear_last_error();
    if (!req)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_test: req is NULL");
    if (!done)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_test: done is NULL");
    gx_request_step(req);
    *done = req->done;
    return req->done ? req->status : GX_OK;
}

/* gx_comm_stats' wait_ns, from the clock reads the loop makes anyway: from
 * the first to the last (a request done at its first step never waited; the
 * end is early by at most 63 polls). No clock read of its own. */
static void note_wait(struct gx_request *req, uint64_t from, uint64_t last)
{
    if (from && last > from)
        __atomic_fetch_add(&req->comm->tally.wait_ns, last - from, __ATOMIC_RELAXED);
}

static int ms_left_at(uint64_t deadline, uint64_t now)
{
    if (deadline == UINT64_MAX)
        return 1 << 30;
    if (now >= deadline)
        return 0;
    uint64_t ms = (deadline - now + 999999ull) / 1000000ull;
    return ms > (1u << 30) ? (1 << 30) : (int)ms;
}

GX_API int gx_wait(struct gx_request *req, int timeout_ms)
{
    gx_clear_last_error();
    if (!req)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_wait: req is NULL");
    uint64_t deadline = gx_deadline_after_ms(timeout_ms < 0 ? req->comm->op_timeout_ms
                                                            : timeout_ms);
    if (req->wait_begin && !req->done)
        req->wait_begin(req);
    uint64_t waited_from = 0, last_read = 0; /* gx_comm_stats' wait_ns */
    /* Spin briefly, then yield, then nap: many ranks share few cores. With
     * more ranks on the node than CPUs, the rank awaited is usually waiting
     * for this CPU: spinning only delays it, so yield almost at once
     * (comm->wait_yield_after; UINT_MAX: a busy poll, never yield). */
    const unsigned spin = req->comm ? req->comm->wait_yield_after : 200;
    const bool yields = spin != UINT_MAX;
    const uint64_t spin_ns = req->block ? gx_spin_ns() : UINT64_MAX;
    const uint64_t t0 = spin_ns != UINT64_MAX ? gx_now_ns() : 0;
    for (unsigned spins = 0;; spins++) {
        gx_request_step(req);
        if (req->done)
            break;
        if ((spins & 63) != 0 && spins < spin)
            continue; /* reading the clock costs more than a poll */
        last_read = gx_now_ns();
        if (!waited_from)
            waited_from = last_read;
        int left = ms_left_at(deadline, last_read);
        if (left == 0) {
            if (req->wait_end)
                req->wait_end(req);
            note_wait(req, waited_from, last_read);
            return gx_fail(GX_ETIMEOUT, GX_SUB_COLL, "gx_wait: %s #%llu still running after "
                           "%d ms (the request stays valid)", req->op_name,
                           (unsigned long long)req->seq, timeout_ms);
        }
        if (spin_ns != UINT64_MAX && gx_now_ns() - t0 >= spin_ns) {
            /* Waits that yield: sleep until the provider has work. */
            req->block(req, left < BLOCK_SLICE_MS ? left : BLOCK_SLICE_MS);
        } else if (yields && spins > 10 * spin) {
            struct timespec ts = { 0, spins > 100 * spin ? 200000 : 20000 };
            nanosleep(&ts, NULL);
        } else if (yields && spins > spin) {
            sched_yield();
        }
    }
    if (req->wait_end)
        req->wait_end(req);
    note_wait(req, waited_from, last_read);
    return req->status;
}

GX_API void gx_request_free(struct gx_request *req)
{
    if (!req)
        return;
    if (!req->done)
        (void)gx_wait(req, -1);
    if (req->release)
        req->release(req);
    /* Pinned stand-ins go back to the pool only after a clean finish. */
    gx_stage_free(req->stage, req->done && req->status == GX_OK);
    free(req);
}

void gx_request_discard(struct gx_request *req)
{
    if (!req)
        return;
    req->done = true;
    req->status = GX_EABORTED;
    gx_request_free(req);
}
