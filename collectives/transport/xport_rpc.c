/*
 * xport_rpc.c - remote calls, the transport's side (model: xport_svc.h).
 *
 * Caller: a call is an active message (kind XP_RPC_CALL: handler id,
 * arguments, deadline in ms) kept in buckets by id until its reply (kind
 * XP_RPC_REPLY: status, result or error text) arrives; a large reply's body
 * is taken into a buffer of its size. A call past its deadline fails at
 * once (a late reply is dropped; arguments not yet on the wire are taken
 * back); a broken link fails every call pending at that rank. A call with
 * a completion callback is queued, once done, for whoever runs callbacks
 * outside the lock (xp_rpc_run_callbacks).
 *
 * Target: every call that arrives is queued whole for the handler runners
 * of api/rpc.c (the queue: xport_rpc_serve.c), which answer with
 * xp_rpc_answer. Calls to this rank itself skip the wire both ways.
 * Runs under the transport lock.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/transport/xport_am.h"
#include "collectives/transport/xport_rpc_impl.h"
#include "collectives/transport/xport_svc.h"
#include "common/clock.h"
#include "common/log.h"

enum { XP_RPC_CALL = 1, XP_RPC_REPLY = 2 };

struct xp_rpc_call {
    struct xp_op msg;               /* first: the call's message */
    struct xp_op body;              /* a large reply's body arriving */
    struct xp_am_hdr hdr;
    struct gx_xport *x;
    struct xp_rpc_call *wait_next;  /* in the buckets */
    struct xp_rpc_call *cb_next;    /* queued for its callback */
    uint64_t id;
    uint64_t deadline;
    int target;
    uint32_t handler;
    void (*on_done)(void *ctx);
    void *ctx;
    void *result;
    size_t result_len;
    bool msg_pending, reply_pending, body_pending, waiting, held, done, cb_queued;
    int status;
    char err[360];
};

/* ---- the caller's side ------------------------------------------------------- */

static void call_fail(struct xp_rpc_call *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void call_fail(struct xp_rpc_call *c, int status, const char *fmt, ...)
{
    if (c->status != GX_OK)
        return;
    char why[280];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    c->status = status;
    snprintf(c->err, sizeof(c->err), "rpc (handler %u) to rank %d: %s", c->handler, c->target,
             why);
}

static void unwait(struct xp_rpc_call *c)
{
    if (!c->waiting)
        return;
    struct xp_rpc_call **pp = &c->x->svc->rpc->waiting[c->id % RPC_BUCKETS];
    while (*pp && *pp != c)
        pp = &(*pp)->wait_next;
    if (*pp)
        *pp = c->wait_next;
    c->waiting = false;
    c->reply_pending = false;
}

/* Hand a finished call with an on_done callback to the callback thread
 * (lock held). */
static void queue_callback(struct xp_rpc_call *c)
{
    struct xp_rpc_state *st = c->x->svc->rpc;
    c->cb_queued = true;
    c->cb_next = NULL;
    if (st->cb_tail)
        st->cb_tail->cb_next = c;
    else
        st->cb_head = c;
    st->cb_tail = c;
    pthread_cond_broadcast(&st->cond);
}

static void maybe_complete(struct xp_rpc_call *c)
{
    if (c->msg_pending || c->body_pending)
        return;
    if (!c->done && c->reply_pending)
        return;
    if (!c->done) {
        c->done = true;
        if (c->on_done && c->held && !c->cb_queued)
            queue_callback(c);
    }
    if (!c->held && !c->cb_queued) {
        free(c->result);
        free(c);
    }
}

static void call_msg_done(struct xp_op *m)
{
    struct xp_rpc_call *c = (struct xp_rpc_call *)m;
    c->msg_pending = false;
    if (m->status != GX_OK && !c->done) {
        unwait(c);
        call_fail(c, m->status, "sending the call failed: %s", m->err);
    }
    maybe_complete(c);
}

static void call_body_done(struct xp_op *b)
{
    struct xp_rpc_call *c = (struct xp_rpc_call *)((char *)b - offsetof(struct xp_rpc_call, body));
    c->body_pending = false;
    if (b->status != GX_OK)
        call_fail(c, b->status, "receiving the result failed: %s", b->err);
    maybe_complete(c);
}

static void wait_for_reply(struct xp_rpc_state *st, struct xp_rpc_call *c)
{
    struct xp_rpc_call **b = &st->waiting[c->id % RPC_BUCKETS];
    c->wait_next = *b;
    *b = c;
    c->waiting = true;
    c->reply_pending = true;
}

static void enqueue_incoming(struct xp_rpc_state *st, struct xp_rpc_incoming *in)
{
    in->next = NULL;
    if (st->in_tail)
        st->in_tail->next = in;
    else
        st->in_head = in;
    st->in_tail = in;
    pthread_cond_broadcast(&st->cond);
}

int xp_rpc_call_start(struct gx_xport *x, int target, uint32_t id, const void *args, size_t len,
                      uint64_t deadline, void (*on_done)(void *ctx), void *ctx,
                      struct xp_rpc_call **out)
{
    pthread_mutex_lock(&x->lock);
    struct xp_rpc_state *st = xp_rpc_state_get(x);
    int rc = st ? GX_OK : gx_fail(GX_ENOMEM, GX_SUB_COLL, "gx_rpc_call: out of memory");
    if (rc == GX_OK && target != x->rank)
        rc = xp_svc_check_peer(x, target, "gx_rpc_call");
    struct xp_rpc_call *c = rc == GX_OK ? calloc(1, sizeof(*c)) : NULL;
    struct xp_rpc_incoming *self = NULL;
    if (rc == GX_OK && c && target == x->rank && !(self = malloc(sizeof(*self) + len)))
        rc = GX_ENOMEM;
    if (rc == GX_OK && !c)
        rc = GX_ENOMEM;
    if (rc != GX_OK) {
        free(c);
        pthread_mutex_unlock(&x->lock);
        return rc == GX_ENOMEM ? gx_fail(rc, GX_SUB_COLL, "gx_rpc_call: out of memory") : rc;
    }
    int ms = deadline == UINT64_MAX ? 0 : gx_ms_left(deadline);
    c->x = x;
    c->id = ++x->svc->next_id;
    c->target = target;
    c->handler = id;
    c->deadline = deadline;
    c->on_done = on_done;
    c->ctx = ctx;
    c->held = true;
    c->hdr = (struct xp_am_hdr){ .service = XP_SVC_RPC, .kind = XP_RPC_CALL, .object = id,
                                 .id = c->id, .offset = (uint64_t)(ms > 0 ? ms : 0) };
    wait_for_reply(st, c);
    *out = c; /* before anyone can run its callback (under this lock) */
    if (self) { /* to this rank: straight to the runners */
        *self = (struct xp_rpc_incoming){ .x = x, .caller = x->rank, .handler = id,
                                          .id = c->id, .deadline = deadline, .len = len };
        if (len)
            memcpy(self->data, args, len);
        enqueue_incoming(st, self);
    } else {
        xp_am_op_init(&c->msg, target, &c->hdr, args, len, call_msg_done);
        c->msg_pending = true;
        rc = xp_am_send(xp_svc_peer(x, target), &c->msg);
        if (rc != GX_OK) {
            unwait(c);
            free(c);
            *out = NULL;
            pthread_mutex_unlock(&x->lock);
            return rc;
        }
    }
    pthread_mutex_unlock(&x->lock);
    return GX_OK;
}

/* Take the call's message back from its peer's queues when it has not
 * started writing the arguments (they are then never read again). */
static void take_back(struct xp_rpc_call *c)
{
    struct xp_peer *p = xp_svc_peer(c->x, c->target);
    if (!c->msg_pending || !p)
        return;
    if (xp_write_unqueue(p, &c->msg)) {
        c->msg_pending = false;
        return;
    }
    struct xp_op **lists[2] = { &p->wait_head, &p->rts_head };
    for (int l = 0; l < 2; l++) {
        struct xp_op *prev = NULL;
        for (struct xp_op *op = *lists[l]; op; prev = op, op = op->next) {
            if (op != &c->msg)
                continue;
            if (prev)
                prev->next = op->next;
            else
                *lists[l] = op->next;
            if (l == 0 && p->wait_tail == op)
                p->wait_tail = prev;
            c->msg_pending = false;
            return;
        }
    }
}

static void expire(struct xp_rpc_call *c)
{
    if (c->done || c->deadline == UINT64_MAX || gx_ms_left(c->deadline) > 0)
        return;
    unwait(c);
    take_back(c);
    call_fail(c, GX_ETIMEOUT, "no answer within the call's deadline");
    c->done = true; /* its message or a late reply may still be on the wire */
    if (c->on_done && c->held && !c->cb_queued)
        queue_callback(c);
}

bool xp_rpc_call_done(struct xp_rpc_call *c, int *status, const char **err)
{
    pthread_mutex_lock(&c->x->lock);
    expire(c);
    bool done = c->done;
    *status = c->status;
    *err = c->err;
    pthread_mutex_unlock(&c->x->lock);
    return done;
}

/* The service thread's sweep: calls nobody waits on still meet their deadline. */
void xp_rpc_expire_all(struct gx_xport *x)
{
    pthread_mutex_lock(&x->lock);
    struct xp_rpc_state *st = x->svc ? x->svc->rpc : NULL;
    for (int b = 0; st && b < RPC_BUCKETS; b++) {
        for (struct xp_rpc_call *c = st->waiting[b], *n; c; c = n) {
            n = c->wait_next;
            expire(c);
        }
    }
    pthread_mutex_unlock(&x->lock);
}

void xp_rpc_call_result(struct xp_rpc_call *c, void **result, size_t *len)
{
    pthread_mutex_lock(&c->x->lock);
    *result = c->result;
    *len = c->result_len;
    c->result = NULL;
    c->result_len = 0;
    pthread_mutex_unlock(&c->x->lock);
}

bool xp_rpc_call_args_busy(struct xp_rpc_call *c)
{
    pthread_mutex_lock(&c->x->lock);
    bool busy = c->msg_pending && c->msg.state == XP_ST_WRITING;
    pthread_mutex_unlock(&c->x->lock);
    return busy;
}

void xp_rpc_call_release(struct xp_rpc_call *c)
{
    struct gx_xport *x = c->x;
    pthread_mutex_lock(&x->lock);
    if (c->cb_queued) { /* its callback will not run now */
        struct xp_rpc_state *st = x->svc->rpc;
        struct xp_rpc_call *prev = NULL;
        for (struct xp_rpc_call *q = st->cb_head; q; prev = q, q = q->cb_next) {
            if (q != c)
                continue;
            if (prev)
                prev->cb_next = q->cb_next;
            else
                st->cb_head = q->cb_next;
            if (st->cb_tail == q)
                st->cb_tail = prev;
            break;
        }
        c->cb_queued = false;
    }
    c->held = false;
    unwait(c);
    take_back(c);
    if (!c->done)
        call_fail(c, GX_EABORTED, "released before it completed");
    c->done = true;
    maybe_complete(c);
    pthread_mutex_unlock(&x->lock);
}

int xp_rpc_run_callbacks(struct gx_xport *x)
{
    int ran = 0;
    pthread_mutex_lock(&x->lock);
    struct xp_rpc_state *st = x->svc ? x->svc->rpc : NULL;
    while (st && st->cb_head) {
        struct xp_rpc_call *c = st->cb_head;
        st->cb_head = c->cb_next;
        if (!st->cb_head)
            st->cb_tail = NULL;
        c->cb_queued = false;
        void (*fn)(void *) = c->on_done;
        void *ctx = c->ctx;
        pthread_mutex_unlock(&x->lock);
        fn(ctx); /* may release the call */
        ran++;
        pthread_mutex_lock(&x->lock);
    }
    pthread_mutex_unlock(&x->lock);
    return ran;
}

/* ---- arrivals ------------------------------------------------------------------ */

static void incoming_body_done(struct xp_op *op)
{
    struct xp_rpc_incoming *in = (struct xp_rpc_incoming *)op;
    if (op->status == GX_OK && in->x->svc && in->x->svc->rpc)
        enqueue_incoming(in->x->svc->rpc, in);
    else
        free(in);
}

static void on_reply(struct xp_peer *p, struct xp_rpc_state *st, const struct xp_am_hdr *h,
                     const void *body, size_t len, const struct xp_rts *rts, bool crc)
{
    struct xp_rpc_call *c = st->waiting[h->id % RPC_BUCKETS];
    while (c && !(c->id == h->id && c->target == p->rank))
        c = c->wait_next;
    if (!c) { /* its caller gave up (deadline) or let go */
        if (rts)
            xp_am_refuse_body(p, rts, GX_ETIMEOUT);
        return;
    }
    unwait(c);
    if (h->status != GX_OK) {
        int n = (int)(len < 240 ? len : 240);
        if (rts) {
            xp_am_refuse_body(p, rts, h->status);
            n = 0;
        }
        call_fail(c, h->status, "rank %d answered %s: %.*s", p->rank, gx_strerror(h->status), n,
                  (const char *)body);
    } else if (rts) {
        c->result = malloc((size_t)rts->size);
        if (!c->result) {
            xp_am_refuse_body(p, rts, GX_ENOMEM);
            call_fail(c, GX_ENOMEM, "no memory for its %llu-byte result",
                      (unsigned long long)rts->size);
        } else {
            c->result_len = (size_t)rts->size;
            c->body_pending = true;
            xp_am_take_body(p, &c->body, rts, crc, c->result, call_body_done);
        }
    } else if (len) {
        c->result = malloc(len);
        if (c->result) {
            memcpy(c->result, body, len);
            c->result_len = len;
        } else {
            call_fail(c, GX_ENOMEM, "no memory for its %zu-byte result", len);
        }
    }
    maybe_complete(c);
}

void xp_rpc_arrived(struct xp_peer *p, const struct xp_am_hdr *h, const void *body, size_t len,
                    const struct xp_rts *rts, bool crc)
{
    struct xp_rpc_state *st = xp_rpc_state_get(p->x);
    if (!st) {
        xp_fail_peer(p, GX_ENOMEM, "no memory for its remote call");
        return;
    }
    if (h->kind == XP_RPC_REPLY) {
        on_reply(p, st, h, body, len, rts, crc);
        return;
    }
    size_t n = rts ? (size_t)rts->size : len;
    struct xp_rpc_incoming *in = h->kind == XP_RPC_CALL ? malloc(sizeof(*in) + n) : NULL;
    if (!in) {
        if (rts)
            xp_am_refuse_body(p, rts, GX_ENOMEM);
        if (h->kind != XP_RPC_CALL)
            xp_fail_peer(p, GX_EPROTO, "it sent a remote-call message of unknown kind");
        return;
    }
    *in = (struct xp_rpc_incoming){ .x = p->x, .caller = p->rank, .handler = h->object,
                                    .id = h->id, .len = n,
                                    .deadline = h->offset ? gx_deadline_after_ms(
                                                                (int)h->offset) : 0 };
    if (rts) {
        xp_am_take_body(p, &in->op, rts, crc, in->data, incoming_body_done);
        return;
    }
    if (n)
        memcpy(in->data, body, n);
    enqueue_incoming(st, in);
}

void xp_rpc_peer_failed(struct xp_peer *p, int status, const char *why)
{
    struct xp_rpc_state *st = p->x->svc->rpc;
    for (int b = 0; st && b < RPC_BUCKETS; b++) {
        for (struct xp_rpc_call *c = st->waiting[b], *n; c; c = n) {
            n = c->wait_next;
            if (c->target != p->rank)
                continue;
            unwait(c);
            call_fail(c, status, "rank %d failed while the call was pending: %s", p->rank, why);
            maybe_complete(c);
        }
    }
    for (struct xp_rpc_incoming **pp = st ? &st->in_head : NULL; pp && *pp;) {
        struct xp_rpc_incoming *in = *pp;
        if (in->caller != p->rank) {
            pp = &in->next;
            continue;
        }
        *pp = in->next; /* nobody is left to answer */
        free(in);
    }
    if (st) {
        st->in_tail = NULL;
        for (struct xp_rpc_incoming *in = st->in_head; in; in = in->next)
            st->in_tail = in;
    }
}

/* ---- the runners' side -------------------------------------------------------- */

int xp_rpc_answer(struct gx_xport *x, struct xp_rpc_incoming *in, int status, const void *result,
                  size_t len, bool owned)
{
    void *copy = owned ? (void *)result : NULL;
    if (!owned && len && !(copy = malloc(len)))
        status = GX_ENOMEM, len = 0;
    if (copy && !owned && len)
        memcpy(copy, result, len);
    int rc = GX_OK;
    pthread_mutex_lock(&x->lock);
    struct xp_rpc_state *st = x->svc ? x->svc->rpc : NULL;
    if (in->caller == x->rank) { /* this rank's own call: no wire */
        struct xp_rpc_call *c = st ? st->waiting[in->id % RPC_BUCKETS] : NULL;
        while (c && !(c->id == in->id && c->target == x->rank))
            c = c->wait_next;
        if (c) {
            unwait(c);
            if (status != GX_OK) {
                call_fail(c, status, "the handler returned %s: %.*s", gx_strerror(status),
                          (int)(len < 240 ? len : 240), copy ? (const char *)copy : "");
                free(copy);
            } else {
                c->result = copy;
                c->result_len = len;
            }
            copy = NULL;
            maybe_complete(c);
        }
        free(copy);
    } else {
        struct xp_peer *p = xp_svc_peer(x, in->caller);
        struct xp_am_hdr h = { .service = XP_SVC_RPC, .kind = XP_RPC_REPLY, .id = in->id,
                               .object = in->handler, .status = status };
        if (p && !p->failed && !x->aborted)
            rc = xp_am_answer(p, &h, copy, len, copy);
        else
            free(copy);
    }
    pthread_mutex_unlock(&x->lock);
    free(in);
    return rc;
}
