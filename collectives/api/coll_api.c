/*
 * coll_api.c - the public collective calls (gx.h): argument checks on the
 * calling rank before any communication, then coll_issue(). The blocking
 * forms are the non-blocking ones followed by gx_wait().
 *
 * Every call on a usable communicator takes a collective sequence number,
 * even when its arguments are rejected: a rank that made a bad call is then
 * out of step with the others, and its next collective fails with
 * GX_EMISMATCH ("a rank skipped a collective") instead of silently pairing
 * with the wrong call.
 */
#include <stdint.h>
#include <stdlib.h>

#include "collectives/engine/coll.h"
#include "collectives/api/coll_intra.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/comm/request.h"
#include "collectives/api/gdr.h"
#include "collectives/comm/stage.h"
#include "collectives/engine/coll_gpu.h"
#include "collectives/engine/coll_pipe.h"
#include "gpudirect/gpu_reduce.h"
#include "gpudirect/gpudirect.h"
#include "common/log.h"

static bool ranges_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen && blen && x < y + blen && y < x + alen;
}

/* Which buffers a rank uses, and how big they are. */
struct buf_use {
    size_t send_bytes, recv_bytes;  /* 0 when the buffer is not used on this rank */
    const void *inplace_send;       /* sendbuf value meaning "in place", or NULL */
};

static int check_args(struct gx_comm *comm, struct coll_args *a, const char *fn,
                      struct buf_use *used)
{
    int n = comm->size, me = comm->rank;
    a->es = gx_datatype_size(a->dtype);
    if (a->es == 0)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: dtype %d is not a gx_datatype", fn,
                       (int)a->dtype);
    bool reduces = a->kind == COLL_ALLREDUCE || a->kind == COLL_REDUCE ||
                   a->kind == COLL_REDUCE_SCATTER;
    if (reduces && (unsigned)a->op >= GX_REDOP_COUNT)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: op %d is not a gx_redop", fn, (int)a->op);
    if (!reduces)
        a->op = GX_REDOP_COUNT;
    bool rooted = a->kind == COLL_BROADCAST || a->kind == COLL_REDUCE ||
                  a->kind == COLL_GATHER || a->kind == COLL_SCATTER;
    if (rooted && (a->root < 0 || a->root >= n))
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: root %d is out of range for a communicator "
                       "of %d ranks", fn, a->root, n);
    if (!rooted)
        a->root = -1;
    if (a->count > SIZE_MAX / a->es)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: count %zu of %s overflows size_t bytes", fn,
                       a->count, gx_datatype_name(a->dtype));
    size_t bytes = a->count * a->es;
    bool blocks = a->kind == COLL_ALLGATHER || a->kind == COLL_REDUCE_SCATTER ||
                  a->kind == COLL_GATHER || a->kind == COLL_SCATTER || a->kind == COLL_ALLTOALL;
    if (blocks && bytes > SIZE_MAX / (size_t)n)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: count %zu of %s times %d ranks overflows "
                       "size_t bytes", fn, a->count, gx_datatype_name(a->dtype), n);
    size_t all = blocks ? bytes * (size_t)n : bytes;
    bool root = a->root == me;
    const char *rbuf = a->recvbuf;
    const char *sbuf = a->sendbuf;
    struct buf_use u = { 0, 0, NULL };
    switch (a->kind) {
    case COLL_ALLREDUCE:
        u = (struct buf_use){ bytes, bytes, rbuf };
        break;
    case COLL_BROADCAST:
        u = (struct buf_use){ root ? bytes : 0, bytes, rbuf };
        break;
    case COLL_REDUCE:
        u = (struct buf_use){ bytes, root ? bytes : 0, rbuf };
        break;
    case COLL_ALLGATHER:
        u = (struct buf_use){ bytes, all, rbuf ? rbuf + (size_t)me * bytes : NULL };
        break;
    case COLL_REDUCE_SCATTER:
        u = (struct buf_use){ all, bytes, NULL };
        if (sbuf && rbuf == sbuf + (size_t)me * bytes)
            u.inplace_send = sbuf;
        break;
    case COLL_GATHER:
        u = (struct buf_use){ bytes, root ? all : 0, rbuf ? rbuf + (size_t)me * bytes : NULL };
        break;
    case COLL_SCATTER:
        u = (struct buf_use){ root ? all : 0, bytes, NULL };
        if (sbuf && rbuf == sbuf + (size_t)me * bytes)
            u.inplace_send = sbuf;
        break;
    case COLL_ALLTOALL:
        u = (struct buf_use){ all, all, rbuf };
        break;
    default:
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: unknown collective", fn);
    }
    if (u.send_bytes && !a->sendbuf)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: sendbuf is NULL with count %zu", fn,
                       a->count);
    if (u.recv_bytes && !a->recvbuf)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: recvbuf is NULL with count %zu", fn,
                       a->count);
    bool inplace = u.inplace_send && a->sendbuf == u.inplace_send;
    if (!inplace && ranges_overlap(a->sendbuf, u.send_bytes, a->recvbuf, u.recv_bytes)) {
        uintptr_t x = (uintptr_t)a->sendbuf, y = (uintptr_t)a->recvbuf;
        size_t apart = x > y ? x - y : y - x;
        if (u.send_bytes >= (size_t)1 << 32 || u.recv_bytes >= (size_t)1 << 32)
            /* Distinct buffers that "overlap" because the count is huge:
             * the count is the likely mistake. */
            return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: count %zu of %zu-byte elements (%zu "
                           "bytes to send, %zu to receive) does not fit between sendbuf %p and "
                           "recvbuf %p, which are %zu bytes apart: is the count right?", fn,
                           a->count, a->es, u.send_bytes, u.recv_bytes, a->sendbuf, a->recvbuf,
                           apart);
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: sendbuf %p (%zu bytes) and recvbuf %p (%zu "
                       "bytes) overlap; only the in-place form documented in gx.h is allowed",
                       fn, a->sendbuf, u.send_bytes, a->recvbuf, u.recv_bytes);
    }
    *used = u;
    return GX_OK;
}

/* Kinds whose schedules only move data: no step reduces (api/gdr.c). */
static bool coll_moves_only(enum coll_kind k)
{
    return k == COLL_BROADCAST || k == COLL_ALLGATHER || k == COLL_GATHER ||
           k == COLL_SCATTER || k == COLL_ALLTOALL;
}

static int coll_start(struct gx_comm *comm, struct coll_args *a, const char *fn,
                      struct gx_request **req)
{
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: comm is NULL", fn);
    int rc = gx_comm_check_usable(comm, fn);
    if (rc != GX_OK)
        return rc;
    if (a->will_wait && req) { /* blocking, device buffers: the node's NCCL (coll_intra.h) */
        bool ran = false;
        rc = coll_intra_try(comm, a, fn, &ran);
        if (ran) {
            *req = NULL;
            return rc == GX_OK ? GX_OK : gx_comm_note_failure(comm, rc);
        }
    }
    uint64_t seq = coll_next_seq(comm, &rc);
    if (rc != GX_OK)
        return rc;
    if (!req)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: req is NULL", fn);
    struct buf_use u = { 0, 0, NULL };
    rc = check_args(comm, a, fn, &u);
    /* Device buffers: handed to the fabric (GPUDirect RDMA, data movement
     * only), else pinned host stand-ins for the host algorithms. */
    struct gx_gdr_plan gp = { { NULL, NULL }, { NULL, NULL } };
    /* Without a CUDA driver nothing is device memory: skip the plan (its
     * parameter reads cost 2 us a call on 2 ranks at 4 KiB, issue 33). */
    bool devmem = gx_gpu_driver_available(NULL, 0);
    if (rc == GX_OK && devmem)
        rc = gx_gdr_plan(comm, fn, coll_moves_only(a->kind), a->sendbuf, u.send_bytes,
                         a->recvbuf, u.recv_bytes, &gp);
    for (int i = 0; i < 2; i++) {
        a->gdr_lo[i] = gp.lo[i];
        a->gdr_hi[i] = gp.hi[i];
    }
    struct gx_stage *st = NULL;
    /* Copies in chunks inside the engine (coll_pipe.c), but for a reduction
     * whose reduce steps must run on the GPU (GX_GPU_REDUCE=gpu, coll_gpu.c). */
    bool chunked = devmem && coll_pipe_chunk() > 0 &&
                   !(gx_gpu_reduce_forced() && !coll_moves_only(a->kind));
    if (rc == GX_OK && !devmem)
        ; /* host buffers: no stand-ins */
    else if (rc == GX_OK && !gp.lo[0] && chunked)
        rc = gx_stage_begin_deferred(fn, &a->sendbuf, u.send_bytes, &a->recvbuf,
                                     u.recv_bytes, &st);
    else if (rc == GX_OK && !gp.lo[0])
        rc = gx_stage_begin(fn, &a->sendbuf, u.send_bytes, &a->recvbuf, u.recv_bytes, false,
                            NULL, &st);
    /* Reduce steps on the GPU only when the copies are not chunked
     * (GX_GPU_CHUNK=0, or GX_GPU_REDUCE=gpu above): both use the stand-ins. */
    if (rc == GX_OK && !chunked)
        coll_gpu_setup(a, st);
    a->pipe = chunked ? st : NULL;
    if (rc != GX_OK) {
        coll_note_rejected(comm, seq, a, rc);
        return rc;
    }
    rc = coll_issue(comm, seq, a, fn, req);
    if (rc != GX_OK) {
        gx_stage_free(st, true);
        if (rc == GX_EINVAL) /* a count too large to plan: rejected like a bad argument */
            coll_note_rejected(comm, seq, a, rc);
        return gx_comm_note_failure(comm, rc);
    }
    (*req)->stage = st;
    return GX_OK;
}

static int coll_blocking(struct gx_comm *comm, struct coll_args *a, const char *fn)
{
    struct gx_request *req = NULL;
    a->will_wait = true; /* no need to wake the progress thread for it */
    int rc = coll_start(comm, a, fn, &req);
    if (rc != GX_OK || !req) /* !req: it ran on the node's NCCL communicator */
        return rc;
    rc = gx_wait(req, -1);
    gx_request_free(req);
    return rc;
}

#define ARGS(K, S, R, C, D, O, ROOT)                                           \
    struct coll_args a = { .kind = (K), .sendbuf = (S), .recvbuf = (R), .count = (C),       \
                           .dtype = (D), .op = (O), .root = (ROOT) }

GX_API int gx_allreduce(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                        enum gx_datatype dtype, enum gx_redop op)
{
    gx_clear_last_error();
    ARGS(COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, -1);
    return coll_blocking(comm, &a, "gx_allreduce");
}

GX_API int gx_iallreduce(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                         enum gx_datatype dtype, enum gx_redop op, struct gx_request **req)
{
    gx_clear_last_error();
    ARGS(COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, -1);
    return coll_start(comm, &a, "gx_iallreduce", req);
}

GX_API int gx_broadcast(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                        enum gx_datatype dtype, int root)
{
    gx_clear_last_error();
    ARGS(COLL_BROADCAST, sendbuf, recvbuf, count, dtype, GX_REDOP_COUNT, root);
    return coll_blocking(comm, &a, "gx_broadcast");
}

GX_API int gx_ibroadcast(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                         enum gx_datatype dtype, int root, struct gx_request **req)
{
    gx_clear_last_error();
    ARGS(COLL_BROADCAST, sendbuf, recvbuf, count, dtype, GX_REDOP_COUNT, root);
    return coll_start(comm, &a, "gx_ibroadcast", req);
}

GX_API int gx_reduce(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                     enum gx_datatype dtype, enum gx_redop op, int root)
{
    gx_clear_last_error();
    ARGS(COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root);
    return coll_blocking(comm, &a, "gx_reduce");
}

GX_API int gx_ireduce(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                      enum gx_datatype dtype, enum gx_redop op, int root,
                      struct gx_request **req)
{
    gx_clear_last_error();
    ARGS(COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root);
    return coll_start(comm, &a, "gx_ireduce", req);
}

GX_API int gx_allgather(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                        size_t sendcount, enum gx_datatype dtype)
{
    gx_clear_last_error();
    ARGS(COLL_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, GX_REDOP_COUNT, -1);
    return coll_blocking(comm, &a, "gx_allgather");
}

GX_API int gx_iallgather(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                         size_t sendcount, enum gx_datatype dtype, struct gx_request **req)
{
    gx_clear_last_error();
    ARGS(COLL_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, GX_REDOP_COUNT, -1);
    return coll_start(comm, &a, "gx_iallgather", req);
}

GX_API int gx_reduce_scatter(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                             size_t recvcount, enum gx_datatype dtype, enum gx_redop op)
{
    gx_clear_last_error();
    ARGS(COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, -1);
    return coll_blocking(comm, &a, "gx_reduce_scatter");
}

GX_API int gx_ireduce_scatter(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                              size_t recvcount, enum gx_datatype dtype, enum gx_redop op,
                              struct gx_request **req)
{
    gx_clear_last_error();
    ARGS(COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, -1);
    return coll_start(comm, &a, "gx_ireduce_scatter", req);
}

GX_API int gx_gather(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                     enum gx_datatype dtype, int root)
{
    gx_clear_last_error();
    ARGS(COLL_GATHER, sendbuf, recvbuf, sendcount, dtype, GX_REDOP_COUNT, root);
    return coll_blocking(comm, &a, "gx_gather");
}

GX_API int gx_igather(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                      enum gx_datatype dtype, int root, struct gx_request **req)
{
    gx_clear_last_error();
    ARGS(COLL_GATHER, sendbuf, recvbuf, sendcount, dtype, GX_REDOP_COUNT, root);
    return coll_start(comm, &a, "gx_igather", req);
}

GX_API int gx_scatter(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                      enum gx_datatype dtype, int root)
{
    gx_clear_last_error();
    ARGS(COLL_SCATTER, sendbuf, recvbuf, recvcount, dtype, GX_REDOP_COUNT, root);
    return coll_blocking(comm, &a, "gx_scatter");
}

GX_API int gx_iscatter(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                       size_t recvcount, enum gx_datatype dtype, int root,
                       struct gx_request **req)
{
    gx_clear_last_error();
    ARGS(COLL_SCATTER, sendbuf, recvbuf, recvcount, dtype, GX_REDOP_COUNT, root);
    return coll_start(comm, &a, "gx_iscatter", req);
}

GX_API int gx_alltoall(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                       enum gx_datatype dtype)
{
    gx_clear_last_error();
    ARGS(COLL_ALLTOALL, sendbuf, recvbuf, count, dtype, GX_REDOP_COUNT, -1);
    return coll_blocking(comm, &a, "gx_alltoall");
}

GX_API int gx_ialltoall(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                        enum gx_datatype dtype, struct gx_request **req)
{
    gx_clear_last_error();
    ARGS(COLL_ALLTOALL, sendbuf, recvbuf, count, dtype, GX_REDOP_COUNT, -1);
    return coll_start(comm, &a, "gx_ialltoall", req);
}

/* ---- stream-ordered forms (docs/gpu.md) -------------------------------------
 * Everything is queued on the caller's stream at the call, and the call
 * returns: the copy in of device input, then a host function that opens the
 * op's gate and waits for the op (the stream stalls there, so later work
 * sees the result), then the copy back. The op itself is issued at the call,
 * so collectives keep the order of the calls on every rank. */
struct stream_call {
    int gate;                 /* the op may start (coll_args.gate) */
    struct gx_request *req;
};

/* On the driver's thread when the stream reaches the call: no CUDA here. */
static void stream_call_run(void *arg)
{
    struct stream_call *sc = arg;
    __atomic_store_n(&sc->gate, 1, __ATOMIC_RELEASE);
    (void)gx_wait(sc->req, -1); /* a failure is the communicator's async error */
    gx_request_free(sc->req);
    free(sc);
}

static int coll_stream_start(struct gx_comm *comm, struct coll_args *a, const char *fn,
                             void *stream)
{
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: comm is NULL", fn);
    int rc = gx_comm_check_usable(comm, fn);
    if (rc != GX_OK)
        return rc;
    uint64_t seq = coll_next_seq(comm, &rc);
    if (rc != GX_OK)
        return rc;
    struct buf_use u = { 0, 0, NULL };
    struct gx_stage *st = NULL;
    char why[200];
    struct stream_call *sc = calloc(1, sizeof(*sc));
    rc = sc ? check_args(comm, a, fn, &u) : gx_fail(GX_ENOMEM, GX_SUB_COLL, "%s: out of "
                                                    "memory", fn);
    if (rc == GX_OK && !gx_gpu_driver_available(why, sizeof(why)))
        rc = gx_fail(GX_EUNSUPPORTED, GX_SUB_COLL, "%s: a CUDA stream needs the CUDA driver: "
                     "%s", fn, why);
    const void *dev_hint = a->sendbuf; /* the context: before staging swaps the pointers */
    if (rc == GX_OK)
        rc = gx_stage_begin(fn, &a->sendbuf, u.send_bytes, &a->recvbuf, u.recv_bytes, true,
                            stream, &st);
    if (rc == GX_OK)
        coll_gpu_setup(a, st); /* branch kernels: reduce steps on the GPU */
    if (rc != GX_OK) {
        free(sc);
        coll_note_rejected(comm, seq, a, rc);
        return rc;
    }
    a->gate = &sc->gate;
    rc = coll_issue(comm, seq, a, fn, &sc->req);
    if (rc != GX_OK) {
        gx_gpu_stream_wait(stream, dev_hint); /* the queued copy in still writes the stand-ins */
        gx_stage_free(st, true);
        free(sc);
        return gx_comm_note_failure(comm, rc);
    }
    struct gx_request *req = sc->req;
    rc = gx_gpu_stream_host_fn(stream, dev_hint, stream_call_run, sc);
    if (rc != GX_OK) {
        /* The op is issued: run it here, in stream order, so no rank waits. */
        gx_gpu_stream_wait(stream, dev_hint);
        __atomic_store_n(&sc->gate, 1, __ATOMIC_RELEASE);
        int wrc = gx_wait(req, -1);
        gx_request_free(req);
        free(sc);
        if (wrc == GX_OK)
            wrc = gx_stage_stream_out(st);
        gx_stage_free(st, true);
        return wrc;
    }
    /* sc (and req) belong to the stream now. The copy back follows the host
     * function; the stand-ins are reused only after it (their fence). */
    rc = gx_stage_stream_out(st);
    gx_stage_free(st, true);
    return rc;
}

#define STREAM_CALL(name) return coll_stream_start(comm, &a, name, stream)

GX_API int gx_allreduce_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                               size_t count, enum gx_datatype dtype, enum gx_redop op,
                               void *stream)
{
    gx_clear_last_error();
    ARGS(COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, -1);
    STREAM_CALL("gx_allreduce_stream");
}

GX_API int gx_broadcast_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                               size_t count, enum gx_datatype dtype, int root, void *stream)
{
    gx_clear_last_error();
    ARGS(COLL_BROADCAST, sendbuf, recvbuf, count, dtype, GX_REDOP_COUNT, root);
    STREAM_CALL("gx_broadcast_stream");
}

GX_API int gx_reduce_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                            size_t count, enum gx_datatype dtype, enum gx_redop op, int root,
                            void *stream)
{
    gx_clear_last_error();
    ARGS(COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root);
    STREAM_CALL("gx_reduce_stream");
}

GX_API int gx_allgather_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                               size_t sendcount, enum gx_datatype dtype, void *stream)
{
    gx_clear_last_error();
    ARGS(COLL_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, GX_REDOP_COUNT, -1);
    STREAM_CALL("gx_allgather_stream");
}

GX_API int gx_reduce_scatter_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                                    size_t recvcount, enum gx_datatype dtype, enum gx_redop op,
                                    void *stream)
{
    gx_clear_last_error();
    ARGS(COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, -1);
    STREAM_CALL("gx_reduce_scatter_stream");
}

GX_API int gx_alltoall_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                              size_t count, enum gx_datatype dtype, void *stream)
{
    gx_clear_last_error();
    ARGS(COLL_ALLTOALL, sendbuf, recvbuf, count, dtype, GX_REDOP_COUNT, -1);
    STREAM_CALL("gx_alltoall_stream");
}
