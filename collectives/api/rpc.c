/*
 * rpc.c - the public remote calls (include/gx/gx_rpc.h): registering
 * handlers, calling (blocking, or a request with wait/test or a completion
 * callback), taking results, and running one arrived call on this rank.
 * The wire is xport_rpc.c's; the threads and the handler table svc.c's.
 * A call's failure (deadline, handler status, a dead target) concerns that
 * call only: its request does not break the communicator.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/api/svc.h"
#include "collectives/comm/request.h"
#include "collectives/transport/xport_svc.h"
#include "common/clock.h"
#include "common/log.h"

/* One call being handled: what gx_rpc_reply and gx_rpc_caller see. */
struct gx_rpc_ctx {
    struct gx_comm *comm;
    int caller;
    void *reply;
    size_t reply_len;
    int status;
};

struct rpc_request {
    struct gx_request req; /* first: gx_request_free frees the whole */
    struct xp_rpc_call *call;
    void (*on_done)(struct gx_request *req, void *user);
    void *user;
    uint32_t id;
    int target;
    int timeout_ms;
};

/* ---- the target's side ---------------------------------------------------- */

GX_API int gx_rpc_caller(const struct gx_rpc_ctx *ctx)
{
    return ctx ? ctx->caller : -1;
}

GX_API struct gx_comm *gx_rpc_comm(const struct gx_rpc_ctx *ctx)
{
    return ctx ? ctx->comm : NULL;
}

/* The handler's result becomes a fresh buffer of len bytes (*out; NULL for
 * 0), replacing an earlier one. `fn` names the caller in the message. */
static int reply_alloc(struct gx_rpc_ctx *ctx, size_t len, const char *fn, void **out)
{
    void *p = len ? malloc(len) : NULL;
    if (len && !p)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "%s: no memory for %zu bytes", fn, len);
    free(ctx->reply);
    ctx->reply = p;
    ctx->reply_len = len;
    *out = p;
    return GX_OK;
}

GX_API int gx_rpc_reply(struct gx_rpc_ctx *ctx, const void *result, size_t len)
{
    if (!ctx)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_rpc_reply: ctx is NULL (call it inside a "
                       "handler)");
    if (!result && len)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_rpc_reply: result is NULL with len %zu",
                       len);
    void *copy;
    int rc = reply_alloc(ctx, len, "gx_rpc_reply", &copy);
    if (rc == GX_OK && len)
        memcpy(copy, result, len);
    return rc;
}

GX_API int gx_rpc_reply_buffer(struct gx_rpc_ctx *ctx, size_t len, void **buf)
{
    if (!ctx || !buf)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_rpc_reply_buffer: %s is NULL (call it inside "
                       "a handler)", ctx ? "buf" : "ctx");
    *buf = NULL;
    return reply_alloc(ctx, len, "gx_rpc_reply_buffer", buf);
}

void gx_rpc_run_incoming(struct gx_svc *s, struct xp_rpc_incoming *in, bool *abandoned)
{
    struct gx_comm *c = gx_svc_comm(s);
    int caller;
    uint32_t id;
    const void *args;
    size_t len;
    uint64_t deadline;
    xp_rpc_incoming_info(in, &caller, &id, &args, &len, &deadline);
    struct gx_rpc_ctx ctx = { .comm = c, .caller = caller };
    gx_rpc_handler fn;
    void *user;
    char why[200];
    int status;
    if (!gx_svc_handler(s, id, &fn, &user)) {
        status = GX_EINVAL;
        int n = snprintf(why, sizeof(why), "no handler %u is registered on rank %d", id, c->rank);
        gx_rpc_reply(&ctx, why, (size_t)n + 1);
    } else if (deadline && gx_ms_left(deadline) == 0) {
        status = GX_ETIMEOUT;
        int n = snprintf(why, sizeof(why), "its deadline passed before rank %d could run it",
                         c->rank);
        gx_rpc_reply(&ctx, why, (size_t)n + 1);
    } else {
        status = fn(&ctx, args, len, user);
        if (gx_svc_abandoned(s)) { /* teardown went on without us */
            free(ctx.reply);
            xp_rpc_incoming_free(in);
            *abandoned = true;
            return;
        }
        if (status > 0) {
            int n = snprintf(why, sizeof(why), "handler %u returned %d, not GX_OK or a negative "
                             "status", id, status);
            status = GX_EINVAL;
            gx_rpc_reply(&ctx, why, (size_t)n + 1);
        }
    }
    if (xp_rpc_answer(c->xport, in, status, ctx.reply, ctx.reply_len, true) != GX_OK)
        GX_INFO(GX_SUB_COLL, "rank %d: the answer to rank %d's call of handler %u could not be "
                "sent: %s", c->rank, caller, id, gx_last_error());
}

GX_API int gx_rpc_register(struct gx_comm *comm, uint32_t id, gx_rpc_handler fn, void *user)
{
    gx_clear_last_error();
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_rpc_register: comm is NULL");
    int rc = gx_comm_check_usable(comm, "gx_rpc_register");
    struct gx_svc *s = NULL;
    if (rc == GX_OK)
        rc = gx_svc_get(comm, "gx_rpc_register", &s);
    return rc == GX_OK ? gx_svc_register(s, id, fn, user) : rc;
}

GX_API int gx_rpc_progress(struct gx_comm *comm)
{
    gx_clear_last_error();
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_rpc_progress: comm is NULL");
    return gx_svc_progress(comm);
}

/* ---- the caller's side ------------------------------------------------------ */

static int rpc_step(struct gx_request *req)
{
    struct rpc_request *r = (struct rpc_request *)req;
    int rc = gx_svc_progress(req->comm);
    if (rc < 0)
        return rc;
    int status;
    const char *err;
    if (!xp_rpc_call_done(r->call, &status, &err))
        return GX_INPROGRESS;
    if (status != GX_OK) {
        gx_set_last_error(err);
        if (status == GX_ETIMEOUT)
            gx_set_last_error(err); /* the call's deadline, not GX_TIMEOUT's */
    }
    return status;
}

static bool args_free(void *arg)
{
    return !xp_rpc_call_args_busy(arg);
}

static void rpc_release(struct gx_request *req)
{
    struct rpc_request *r = (struct rpc_request *)req;
    if (!r->call)
        return;
    /* A call that timed out while its arguments were being written: they
     * stay in use until the write ends (bounded by GX_TIMEOUT). */
    if (xp_rpc_call_args_busy(r->call))
        (void)gx_svc_wait(req->comm, args_free, r->call, gx_comm_op_deadline(req->comm));
    void *res;
    size_t n;
    xp_rpc_call_result(r->call, &res, &n);
    free(res);
    xp_rpc_call_release(r->call);
    r->call = NULL;
}

static void call_done_cb(void *ctx)
{
    struct rpc_request *r = ctx;
    r->on_done(&r->req, r->user);
}

static int call_start(struct gx_comm *comm, int rank, uint32_t id, const void *args, size_t len,
                      const struct gx_rpc_opts *opts, const char *fn, struct rpc_request **out)
{
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: comm is NULL", fn);
    if (!args && len)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: args is NULL with len %zu", fn, len);
    if (opts && opts->size < sizeof(size_t) + sizeof(int))
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: opts->size %zu: start from GX_RPC_OPTS_INIT",
                       fn, opts->size);
    if (rank < 0 || rank >= comm->size)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: rank %d is out of range for a communicator "
                       "of %d ranks", fn, rank, comm->size);
    int rc = gx_comm_check_usable(comm, fn);
    struct gx_svc *s = NULL;
    if (rc == GX_OK)
        rc = gx_svc_get(comm, fn, &s);
    if (rc != GX_OK)
        return rc;
    int timeout = opts && opts->timeout_ms > 0 ? opts->timeout_ms : comm->op_timeout_ms;
    struct rpc_request *r = (struct rpc_request *)gx_request_alloc(comm, "remote call", rpc_step,
                                                                   sizeof(*r));
    if (!r)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "%s: out of memory", fn);
    r->req.private_failure = true;
    r->req.release = rpc_release;
    r->req.deadline = gx_deadline_after_ms(timeout);
    r->id = id;
    r->target = rank;
    r->timeout_ms = timeout;
    bool cb = opts && opts->size >= sizeof(*opts) && opts->on_done;
    if (cb) {
        r->on_done = opts->on_done;
        r->user = opts->user;
    }
    rc = xp_rpc_call_start(comm->xport, rank, id, args, len, r->req.deadline,
                           cb ? call_done_cb : NULL, r, &r->call);
    if (rc != GX_OK) {
        gx_request_discard(&r->req);
        return rc;
    }
    *out = r;
    return GX_OK;
}

GX_API int gx_rpc_call_async(struct gx_comm *comm, int rank, uint32_t id, const void *args,
                             size_t len, const struct gx_rpc_opts *opts, struct gx_request **req)
{
    gx_clear_last_error();
    if (!req)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_rpc_call_async: req is NULL");
    struct rpc_request *r;
    int rc = call_start(comm, rank, id, args, len, opts, "gx_rpc_call_async", &r);
    if (rc == GX_OK)
        *req = &r->req;
    return rc;
}

GX_API int gx_rpc_result(struct gx_request *req, void **result, size_t *result_len)
{
    gx_clear_last_error();
    if (!req || req->step != rpc_step)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_rpc_result: req is not a remote call's "
                       "request");
    if (!result || !result_len)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_rpc_result: result or result_len is NULL");
    struct rpc_request *r = (struct rpc_request *)req;
    gx_request_step(req);
    if (!req->done)
        return gx_fail(GX_ESTATE, GX_SUB_COLL, "gx_rpc_result: the call to rank %d (handler %u) "
                       "has not completed yet", r->target, r->id);
    if (req->status != GX_OK) {
        int status;
        const char *err;
        if (r->call && xp_rpc_call_done(r->call, &status, &err))
            gx_set_last_error(err);
        return req->status;
    }
    xp_rpc_call_result(r->call, result, result_len);
    return GX_OK;
}

GX_API void gx_rpc_free(void *result)
{
    free(result);
}

GX_API int gx_rpc_call(struct gx_comm *comm, int rank, uint32_t id, const void *args, size_t len,
                       void **result, size_t *result_len, const struct gx_rpc_opts *opts)
{
    gx_clear_last_error();
    if (!result || !result_len)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_rpc_call: result or result_len is NULL");
    struct gx_rpc_opts plain = GX_RPC_OPTS_INIT;
    if (opts) {
        plain.timeout_ms = opts->timeout_ms; /* a blocking call has no callback */
    }
    struct rpc_request *r;
    int rc = call_start(comm, rank, id, args, len, &plain, "gx_rpc_call", &r);
    if (rc != GX_OK)
        return rc;
    /* Wait past the deadline only by a moment: the call fails itself then. */
    rc = gx_wait(&r->req, r->timeout_ms + 1000);
    if (rc == GX_OK)
        xp_rpc_call_result(r->call, result, result_len);
    char keep[512] = "";
    if (rc != GX_OK)
        snprintf(keep, sizeof(keep), "%s", gx_last_error());
    gx_request_free(&r->req);
    if (rc != GX_OK)
        gx_set_last_error(keep);
    return rc;
}
