/*
 * svc.c - a communicator's service for windows and remote calls (svc.h):
 * the poller thread, the handler threads, the handler table, and the wait
 * every blocking window or call operation uses. Room api/: it drives the
 * transport (xport_svc.h) from above and runs rpc.c's handlers.
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/api/svc.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/transport/xport.h"
#include "collectives/transport/xport_svc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_rpc_progress, "GX_RPC_PROGRESS", GX_PARAM_ENUM, "thread",
                "thread|caller",
                "Who serves one-sided windows and remote calls on this rank: gx threads "
                "(thread: a poller keeps the transport moving, GX_RPC_THREADS run the handlers), "
                "or only this rank's own gx_rpc_progress, gx_wait and gx_test (caller).");
GX_PARAM_DEFINE(gx_param_rpc_threads, "GX_RPC_THREADS", GX_PARAM_INT, "4", NULL,
                "Handler threads per communicator with GX_RPC_PROGRESS=thread: how many remote "
                "calls (and completion callbacks) run at once on this rank.");

#define STOP_GRACE_MS 2000 /* how long teardown waits for a handler to return */
#define EXPIRE_EVERY_NS 1000000ull

struct svc_handler {
    uint32_t id;
    gx_rpc_handler fn;
    void *user;
};

struct gx_svc {
    struct gx_comm *comm;
    struct gx_xport *x;
    pthread_mutex_t mu;            /* guards the handler table */
    struct svc_handler *handlers;
    int nhandlers, cap;
    bool threaded;
    atomic_bool stop;
    atomic_bool abandoned;         /* teardown left a stuck handler behind */
    pthread_t poller;
    bool poller_on;
    pthread_t *runners;
    int nrunners;
    atomic_int runners_live;
};

bool gx_svc_threaded(const struct gx_svc *s)
{
    return s->threaded;
}

struct gx_comm *gx_svc_comm(const struct gx_svc *s)
{
    return s->comm;
}

bool gx_svc_abandoned(const struct gx_svc *s)
{
    return atomic_load(&s->abandoned);
}

/* ---- threads -------------------------------------------------------------- */

/* Spin while completions come, then yield, then nap (many ranks on few
 * cores): the same shape as gx_wait's. */
static void backoff(unsigned idle)
{
    if (idle < 256)
        return;
    if (idle < 2048) {
        sched_yield();
        return;
    }
    struct timespec ts = { 0, idle < 8192 ? 20000 : 100000 };
    nanosleep(&ts, NULL);
}

static void *poller_main(void *arg)
{
    struct gx_svc *s = arg;
    uint64_t seen = 0, next_expire = 0;
    unsigned idle = 0;
    while (!atomic_load(&s->stop)) {
        (void)gx_xport_progress(s->x); /* failures reach the operations, not this loop */
        uint64_t now = xp_svc_activity(s->x);
        idle = now != seen ? 0 : idle + 1;
        seen = now;
        if ((idle & 63) == 0 && gx_now_ns() >= next_expire) {
            xp_rpc_expire_all(s->x); /* deadlines of calls nobody waits on */
            next_expire = gx_now_ns() + EXPIRE_EVERY_NS;
        }
        backoff(idle);
    }
    return NULL;
}

static void *runner_main(void *arg)
{
    struct gx_svc *s = arg;
    while (!atomic_load(&s->stop)) {
        (void)xp_rpc_run_callbacks(s->x);
        struct xp_rpc_incoming *in = xp_rpc_wait_incoming(s->x, 100);
        if (!in)
            continue;
        bool abandoned = false;
        gx_rpc_run_incoming(s, in, &abandoned);
        if (abandoned)
            return NULL; /* teardown went ahead without this thread: touch nothing */
    }
    atomic_fetch_sub(&s->runners_live, 1);
    return NULL;
}

static int start_threads(struct gx_svc *s)
{
    long long n = 4;
    if (gx_param_int(&gx_param_rpc_threads, &n) != GX_OK || n < 1 || n > 256)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "GX_RPC_THREADS=%s must be 1..256",
                       gx_param_text(&gx_param_rpc_threads));
    s->runners = calloc((size_t)n, sizeof(*s->runners));
    if (!s->runners)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "remote calls: out of memory");
    if (pthread_create(&s->poller, NULL, poller_main, s) != 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_COLL, "remote calls: cannot start the poller thread");
    s->poller_on = true;
    for (int i = 0; i < (int)n; i++) {
        if (pthread_create(&s->runners[i], NULL, runner_main, s) != 0)
            return gx_fail(GX_ESYSTEM, GX_SUB_COLL, "remote calls: cannot start handler "
                           "thread %d of %lld", i, n);
        s->nrunners++;
        atomic_fetch_add(&s->runners_live, 1);
    }
    return GX_OK;
}

static void stop_threads(struct gx_svc *s)
{
    atomic_store(&s->stop, true);
    if (s->poller_on)
        pthread_join(s->poller, NULL);
    s->poller_on = false;
    uint64_t until = gx_deadline_after_ms(STOP_GRACE_MS);
    while (atomic_load(&s->runners_live) > 0 && gx_ms_left(until) > 0) {
        xp_rpc_wake_all(s->x);
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&s->runners_live) > 0) {
        atomic_store(&s->abandoned, true);
        GX_WARN(GX_SUB_COLL, "communicator '%s': %d remote-call handler(s) still running after "
                "%d ms at teardown: left behind (they get no answer out)", s->comm->name,
                atomic_load(&s->runners_live), STOP_GRACE_MS);
        for (int i = 0; i < s->nrunners; i++)
            pthread_detach(s->runners[i]);
    } else {
        for (int i = 0; i < s->nrunners; i++)
            pthread_join(s->runners[i], NULL);
    }
}

int gx_svc_get(struct gx_comm *c, const char *fn, struct gx_svc **out)
{
    pthread_mutex_lock(&c->lock);
    struct gx_svc *s = c->svc;
    int rc = GX_OK;
    if (!s) {
        int mode = 0;
        rc = gx_param_enum(&gx_param_rpc_progress, &mode);
        s = rc == GX_OK ? calloc(1, sizeof(*s)) : NULL;
        if (rc == GX_OK && !s)
            rc = gx_fail(GX_ENOMEM, GX_SUB_COLL, "%s: out of memory", fn);
        if (s) {
            s->comm = c;
            s->x = c->xport;
            s->threaded = mode == 0;
            pthread_mutex_init(&s->mu, NULL);
            rc = s->threaded ? start_threads(s) : GX_OK;
            c->svc = s; /* even half-started: gx_svc_close takes it down */
        }
    }
    pthread_mutex_unlock(&c->lock);
    if (rc == GX_OK)
        *out = s;
    return rc;
}

void gx_svc_close(struct gx_comm *c)
{
    struct gx_svc *s = c->svc;
    if (!s)
        return;
    stop_threads(s); /* first: a running handler's own calls still read c->svc */
    c->svc = NULL;
    if (atomic_load(&s->abandoned))
        return; /* a stuck handler's thread still reads it */
    while (xp_rpc_run_callbacks(s->x) > 0) { /* completions nobody ran yet */
    }
    pthread_mutex_destroy(&s->mu);
    free(s->handlers);
    free(s->runners);
    free(s);
}

/* ---- handlers --------------------------------------------------------------- */

int gx_svc_register(struct gx_svc *s, uint32_t id, gx_rpc_handler fn, void *user)
{
    pthread_mutex_lock(&s->mu);
    int i = 0;
    while (i < s->nhandlers && s->handlers[i].id != id)
        i++;
    int rc = GX_OK;
    if (!fn) {
        if (i < s->nhandlers)
            s->handlers[i] = s->handlers[--s->nhandlers];
    } else if (i < s->nhandlers) {
        s->handlers[i].fn = fn;
        s->handlers[i].user = user;
    } else {
        if (s->nhandlers == s->cap) {
            int cap = s->cap ? 2 * s->cap : 16;
            struct svc_handler *h = realloc(s->handlers, (size_t)cap * sizeof(*h));
            if (!h) {
                pthread_mutex_unlock(&s->mu);
                return gx_fail(GX_ENOMEM, GX_SUB_COLL, "gx_rpc_register: out of memory");
            }
            s->handlers = h;
            s->cap = cap;
        }
        s->handlers[s->nhandlers++] = (struct svc_handler){ id, fn, user };
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

bool gx_svc_handler(struct gx_svc *s, uint32_t id, gx_rpc_handler *fn, void **user)
{
    pthread_mutex_lock(&s->mu);
    bool found = false;
    for (int i = 0; i < s->nhandlers && !found; i++) {
        if (s->handlers[i].id == id) {
            *fn = s->handlers[i].fn;
            *user = s->handlers[i].user;
            found = true;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return found;
}

/* ---- progress in the calling thread ------------------------------------------ */

int gx_svc_progress(struct gx_comm *c)
{
    int rc = gx_xport_progress(c->xport);
    if (rc != GX_OK)
        return rc;
    struct gx_svc *s = c->svc;
    if (!s || s->threaded)
        return 0; /* the service's threads run calls and callbacks */
    int ran = xp_rpc_run_callbacks(c->xport);
    struct xp_rpc_incoming *in;
    while ((in = xp_rpc_next_incoming(c->xport))) {
        bool abandoned = false;
        gx_rpc_run_incoming(s, in, &abandoned);
        ran++;
    }
    xp_rpc_expire_all(c->xport);
    return ran;
}

int gx_svc_wait(struct gx_comm *c, bool (*done)(void *arg), void *arg, uint64_t deadline)
{
    const unsigned spin = c->wait_yield_after; /* UINT_MAX: never yield */
    const bool yields = spin != UINT_MAX;
    for (unsigned spins = 0;; spins++) {
        int rc = gx_svc_progress(c);
        if (rc < 0)
            return rc;
        if (done(arg))
            return GX_OK;
        if ((spins & 63) != 0 && spins < spin)
            continue;
        if (gx_ms_left(deadline) == 0)
            return GX_ETIMEOUT;
        if (yields && spins > 10 * spin) {
            struct timespec ts = { 0, spins > 100 * spin ? 200000 : 20000 };
            nanosleep(&ts, NULL);
        } else if (yields && spins > spin) {
            sched_yield();
        }
    }
}
