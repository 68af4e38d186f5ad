/* p2p.c - the public point-to-point API (gx_send, gx_recv, gx_isend,
 * gx_irecv, gx_request_count, gx_request_source) over the communicator's
 * transport: a request whose state, one transport message, follows it in one
 * allocation. GX_ANY_SOURCE receives: xport.h, XP_ANY_PEER. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "collectives/comm/request.h"
#include "collectives/api/gdr.h"
#include "collectives/comm/stage.h"
#include "collectives/transport/xport.h"
#include "common/log.h"
#include "common/trace.h"

/* A send or receive: the request, then its message. */
struct p2p_request {
    struct gx_request req; /* first: gx_request_free frees the whole */
    struct xp_op op;
    size_t elem_size;
};

static struct p2p_request *p2p_of(const struct gx_request *req)
{
    return (struct p2p_request *)req;
}

static int check_p2p(struct gx_comm *comm, const void *buf, size_t count,
                     enum gx_datatype dtype, int peer, int tag, bool send, const char *fn,
                     size_t *bytes)
{
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: comm is NULL", fn);
    size_t es = gx_datatype_size(dtype);
    if (es == 0)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: dtype %d is not a gx_datatype", fn, (int)dtype);
    if (count > SIZE_MAX / es)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: count %zu of %s overflows size_t bytes", fn,
                       count, gx_datatype_name(dtype));
    if (!buf && count)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: buf is NULL with count %zu", fn, count);
    if (peer == GX_ANY_SOURCE && send)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: peer is GX_ANY_SOURCE, which only a receive "
                       "takes", fn);
    if ((peer < 0 && peer != GX_ANY_SOURCE) || peer >= comm->size)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: peer %d is out of range for a communicator "
                       "of %d ranks (or GX_ANY_SOURCE for a receive)", fn, peer, comm->size);
    if (tag < 0)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: tag %d is negative (tags are 0..%d)", fn, tag,
                       INT_MAX);
    *bytes = count * es;
    return gx_comm_check_usable(comm, fn);
}

static int p2p_step(struct gx_request *req)
{
    struct xp_op *op = &p2p_of(req)->op;
    int rc = gx_xport_progress(req->comm->xport);
    if (rc != GX_OK)
        return rc;
    if (!__atomic_load_n(&op->done, __ATOMIC_ACQUIRE))
        return GX_INPROGRESS;
    if (gx_trace_on()) {
        struct gx_trace_rec r = {
            .ts = op->t_post ? op->t_post : gx_trace_now(),
            .name = op->kind == XP_OP_SEND ? "p2p send" : "p2p recv", .cat = "p2p",
            .key = { "comm", "peer", "tag", "bytes", "status" },
            .val = { (int64_t)req->comm->comm_id, op->peer, (int64_t)op->tag,
                     (int64_t)(op->kind == XP_OP_SEND ? op->len : op->received), op->status },
            .lane = GX_LANE_CALLS, .kind = GX_TR_ASYNC,
        };
        r.dur = gx_trace_now() - r.ts;
        gx_trace_emit(&r);
    }
    if (op->status != GX_OK)
        gx_set_last_error(op->err);
    return op->status;
}

/* Waits that yield: sleep in the transport until it has work. */
static void p2p_block(struct gx_request *req, int timeout_ms)
{
    gx_xport_wait(req->comm->xport, timeout_ms);
}

static int p2p_start(struct gx_comm *comm, void *buf, size_t count, enum gx_datatype dtype,
                     int peer, int tag, bool send, struct gx_request **out)
{
    const char *fn = send ? "gx_isend" : "gx_irecv";
    size_t bytes = 0;
    int rc = check_p2p(comm, buf, count, dtype, peer, tag, send, fn, &bytes);
    if (rc != GX_OK)
        return rc;
    struct p2p_request *p = (struct p2p_request *)gx_request_alloc(
        comm, send ? "send" : "receive", p2p_step, sizeof(struct p2p_request));
    if (!p)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "%s: out of memory", fn);
    struct gx_request *req = &p->req;
    req->block = p2p_block;
    p->elem_size = gx_datatype_size(dtype);
    /* Device buffers: a pinned stand-in (stage.h); a receive copies back
     * only what arrived. */
    const void *sbuf = send ? buf : NULL;
    void *rbuf = send ? NULL : buf;
    /* or, GPUDirect RDMA (api/gdr.c): the device buffer to the fabric as is */
    struct gx_gdr_plan gp;
    rc = gx_gdr_plan(comm, fn, true, sbuf, send ? bytes : 0, rbuf, send ? 0 : bytes, &gp);
    bool dev = rc == GX_OK && gp.lo[0] != NULL;
    if (rc == GX_OK && !dev)
        rc = gx_stage_begin(fn, &sbuf, send ? bytes : 0, &rbuf, send ? 0 : bytes, false, NULL,
                            &req->stage);
    if (rc != GX_OK) {
        gx_request_discard(req);
        return rc;
    }
    if (req->stage)
        gx_stage_limit_recv(req->stage, &p->op.received);
    buf = send ? (void *)sbuf : rbuf;
    rc = send ? gx_xport_send_mem(comm->xport, &p->op, peer, (uint32_t)tag, buf, bytes, dev)
              : gx_xport_recv_mem(comm->xport, &p->op, peer == GX_ANY_SOURCE ? XP_ANY_PEER : peer,
                                  (uint32_t)tag, buf, bytes, dev);
    if (rc != GX_OK) {
        gx_request_discard(req);
        return gx_comm_note_failure(comm, rc);
    }
    __atomic_fetch_add(&comm->tally.p2p, 1, __ATOMIC_RELAXED);
    *out = req;
    return GX_OK;
}

GX_API int gx_isend(struct gx_comm *comm, const void *buf, size_t count, enum gx_datatype dtype,
                    int peer, int tag, struct gx_request **req)
{
    gx_clear_last_error();
    if (!req)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_isend: req is NULL");
    return p2p_start(comm, (void *)buf, count, dtype, peer, tag, true, req);
}

GX_API int gx_irecv(struct gx_comm *comm, void *buf, size_t count, enum gx_datatype dtype,
                    int peer, int tag, struct gx_request **req)
{
    gx_clear_last_error();
    if (!req)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_irecv: req is NULL");
    return p2p_start(comm, buf, count, dtype, peer, tag, false, req);
}

static int complete(struct gx_request *req, size_t *count_out)
{
    int rc = gx_wait(req, -1);
    if (rc == GX_OK && count_out)
        *count_out = p2p_of(req)->op.received / p2p_of(req)->elem_size;
    if (rc == GX_ETIMEOUT) {
        /* The operation still references the caller's buffer: stop the
         * communicator rather than leave a hidden write behind. The caller
         * hears why (the deadline), not the abort's account. */
        char why[512];
        snprintf(why, sizeof(why), "%s", gx_last_error());
        gx_comm_abort(req->comm);
        gx_set_last_error(why);
    }
    gx_request_free(req);
    return rc;
}

GX_API int gx_send(struct gx_comm *comm, const void *buf, size_t count, enum gx_datatype dtype,
                   int peer, int tag)
{
    gx_clear_last_error();
    struct gx_request *req = NULL;
    int rc = p2p_start(comm, (void *)buf, count, dtype, peer, tag, true, &req);
    return rc == GX_OK ? complete(req, NULL) : rc;
}

GX_API int gx_recv(struct gx_comm *comm, void *buf, size_t count, enum gx_datatype dtype,
                   int peer, int tag, size_t *count_out)
{
    gx_clear_last_error();
    struct gx_request *req = NULL;
    int rc = p2p_start(comm, buf, count, dtype, peer, tag, false, &req);
    return rc == GX_OK ? complete(req, count_out) : rc;
}

GX_API int gx_request_count(const struct gx_request *req, size_t *count_out)
{
    if (!req || !count_out)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_request_count: %s is NULL",
                       req ? "count_out" : "req");
    if (!req->done)
        return gx_fail(GX_ESTATE, GX_SUB_COLL, "gx_request_count: the request has not completed");
    if (req->step != p2p_step || p2p_of(req)->op.kind != XP_OP_RECV)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_request_count: not a receive request");
    *count_out = p2p_of(req)->op.received / p2p_of(req)->elem_size;
    return GX_OK;
}

GX_API int gx_request_source(const struct gx_request *req, int *source_out)
{
    if (!req || !source_out)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_request_source: %s is NULL",
                       req ? "source_out" : "req");
    if (!req->done)
        return gx_fail(GX_ESTATE, GX_SUB_COLL, "gx_request_source: the request has not "
                       "completed");
    if (req->step != p2p_step || p2p_of(req)->op.kind != XP_OP_RECV)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_request_source: not a receive request");
    if (req->status != GX_OK || p2p_of(req)->op.peer < 0)
        return gx_fail(GX_ESTATE, GX_SUB_COLL, "gx_request_source: the receive failed (%s), "
                       "so it has no sender", gx_strerror(req->status));
    *source_out = p2p_of(req)->op.peer;
    return GX_OK;
}
