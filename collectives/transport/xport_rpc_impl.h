/*
 * xport_rpc_impl.h - remote calls' state shared by the caller's side
 * (xport_rpc.c) and the runners' queue (xport_rpc_serve.c). Private to the
 * transport; touched under the transport lock.
 */
#ifndef GX_XPORT_RPC_IMPL_H
#define GX_XPORT_RPC_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "collectives/transport/xport_internal.h"

#define RPC_BUCKETS 256

struct xp_rpc_call;

struct xp_rpc_incoming {
    struct xp_op op;                /* first: a large call's arguments arriving */
    struct xp_rpc_incoming *next;
    struct gx_xport *x;
    int caller;
    uint32_t handler;
    uint64_t id;
    uint64_t deadline;
    size_t len;
    char data[];
};

struct xp_rpc_state {
    struct xp_rpc_call *waiting[RPC_BUCKETS];
    struct xp_rpc_incoming *in_head, *in_tail;
    struct xp_rpc_call *cb_head, *cb_tail;
    pthread_cond_t cond;            /* with the transport lock: work for the runners */
};

/* The communicator's call state, made on first use (NULL without memory). */
struct xp_rpc_state *xp_rpc_state_get(struct gx_xport *x);
/* The oldest arrived call, taken off the queue (NULL when none). */
struct xp_rpc_incoming *xp_rpc_pop_incoming(struct xp_rpc_state *st);

#endif
