/*
 * xport_rpc_serve.c - remote calls, the target's queue: calls that arrived
 * wait here, whole, for the handler runners of api/rpc.c
 * (xp_rpc_next_incoming / xp_rpc_wait_incoming), which answer with
 * xp_rpc_answer (xport_rpc.c). Runs under the transport lock.
 */
#include <stdlib.h>
#include <time.h>

#include "collectives/transport/xport_am.h"
#include "collectives/transport/xport_rpc_impl.h"
#include "collectives/transport/xport_svc.h"

struct xp_rpc_state *xp_rpc_state_get(struct gx_xport *x)
{
    struct xp_svc *svc = xp_svc_get(x);
    if (svc && !svc->rpc) {
        svc->rpc = calloc(1, sizeof(*svc->rpc));
        if (svc->rpc) {
            pthread_condattr_t ca;
            pthread_condattr_init(&ca);
            pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
            pthread_cond_init(&svc->rpc->cond, &ca);
            pthread_condattr_destroy(&ca);
        }
    }
    return svc ? svc->rpc : NULL;
}

struct xp_rpc_incoming *xp_rpc_pop_incoming(struct xp_rpc_state *st)
{
    struct xp_rpc_incoming *in = st ? st->in_head : NULL;
    if (in) {
        st->in_head = in->next;
        if (!st->in_head)
            st->in_tail = NULL;
    }
    return in;
}

struct xp_rpc_incoming *xp_rpc_next_incoming(struct gx_xport *x)
{
    pthread_mutex_lock(&x->lock);
    struct xp_rpc_incoming *in = xp_rpc_pop_incoming(x->svc ? x->svc->rpc : NULL);
    pthread_mutex_unlock(&x->lock);
    return in;
}

struct xp_rpc_incoming *xp_rpc_wait_incoming(struct gx_xport *x, int ms)
{
    pthread_mutex_lock(&x->lock);
    struct xp_rpc_state *st = xp_rpc_state_get(x);
    if (st && !st->in_head && !st->cb_head) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&st->cond, &x->lock, &ts);
    }
    struct xp_rpc_incoming *in = xp_rpc_pop_incoming(st);
    pthread_mutex_unlock(&x->lock);
    return in;
}

void xp_rpc_wake_all(struct gx_xport *x)
{
    pthread_mutex_lock(&x->lock);
    if (x->svc && x->svc->rpc)
        pthread_cond_broadcast(&x->svc->rpc->cond);
    pthread_mutex_unlock(&x->lock);
}

void xp_rpc_incoming_info(const struct xp_rpc_incoming *in, int *caller, uint32_t *id,
                          const void **args, size_t *len, uint64_t *deadline)
{
    *caller = in->caller;
    *id = in->handler;
    *args = in->data;
    *len = in->len;
    *deadline = in->deadline;
}

void xp_rpc_free(struct gx_xport *x)
{
    struct xp_rpc_state *st = x->svc->rpc;
    if (!st)
        return;
    while (st->in_head)
        free(xp_rpc_pop_incoming(st));
    pthread_cond_broadcast(&st->cond);
    pthread_cond_destroy(&st->cond);
    free(st);
    x->svc->rpc = NULL;
}

void xp_rpc_incoming_free(struct xp_rpc_incoming *in)
{
    free(in);
}
