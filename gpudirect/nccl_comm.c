/*
 * nccl_comm.c - NCCL communicators for intra-node device collectives
 * (gpu_nccl.h). Every NCCL call runs in the context of the device buffers'
 * GPU on the communicator's own stream (a blocking stream: ordered after
 * work the caller queued on the legacy default stream, as the synchronous
 * staging copies are). Completion is polled: cuStreamQuery for the stream,
 * ncclCommGetAsyncError for errors the library finds on its own (a peer
 * gone, a network error), both until gx's deadline, after which the
 * communicator is aborted.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"
#include "gpudirect/cuda_loader.h"
#include "gpudirect/gpu_nccl.h"
#include "gpudirect/gpudirect.h"
#include "gpudirect/nccl_api.h"

GX_PARAM_DEFINE(gx_param_nccl, "GX_NCCL", GX_PARAM_ENUM, "auto", "auto|on|off",
                "NCCL for intra-node collectives on device buffers: auto (when the library "
                "loads), on (an error without it), off (stage through host memory).");

struct gx_nccl {
    const struct gx_nccl_api *api;
    const struct gx_cu *cu;
    gx_nccl_comm_t comm;
    gx_cu_ctx ctx;
    gx_cu_stream stream;
    bool broken;
    char name[160];
};

bool gx_nccl_usable(bool *required, char *why, size_t why_len)
{
    int mode = 0;
    *required = false;
    if (gx_param_enum(&gx_param_nccl, &mode) != GX_OK) {
        snprintf(why, why_len, "GX_NCCL: %s", gx_last_error());
        return false;
    }
    if (mode == 2) {
        snprintf(why, why_len, "GX_NCCL=off");
        return false;
    }
    *required = mode == 1;
    char w[400];
    if (!gx_nccl_api_get(w, sizeof(w))) {
        snprintf(why, why_len, "%s", w);
        return false;
    }
    char d[320];
    if (!gx_gpu_driver_available(d, sizeof(d))) {
        snprintf(why, why_len, "%s", d);
        return false;
    }
    snprintf(why, why_len, "%s", w); /* "NCCL 2.x.y (library)" */
    return true;
}

static int nccl_dtype(enum gx_datatype d)
{
    switch (d) {
    case GX_INT8: return GX_NCCL_INT8;
    case GX_UINT8: return GX_NCCL_UINT8;
    case GX_INT32: return GX_NCCL_INT32;
    case GX_UINT32: return GX_NCCL_UINT32;
    case GX_INT64: return GX_NCCL_INT64;
    case GX_UINT64: return GX_NCCL_UINT64;
    case GX_FLOAT16: return GX_NCCL_FLOAT16;
    case GX_BFLOAT16: return GX_NCCL_BFLOAT16;
    case GX_FLOAT32: return GX_NCCL_FLOAT32;
    case GX_FLOAT64: return GX_NCCL_FLOAT64;
    default: return -1;
    }
}

static int nccl_op(enum gx_redop op)
{
    switch (op) {
    case GX_SUM: return GX_NCCL_SUM;
    case GX_PROD: return GX_NCCL_PROD;
    case GX_MIN: return GX_NCCL_MIN;
    case GX_MAX: return GX_NCCL_MAX;
    case GX_AVG: return GX_NCCL_AVG;
    default: return -1;
    }
}

bool gx_nccl_supports(enum gx_datatype dtype, enum gx_redop op)
{
    if (nccl_dtype(dtype) < 0)
        return false;
    /* gx's integer average rounds as its host reduction does; NCCL's need
     * not: keep integers' AVG on the host path. */
    if (op == GX_AVG && dtype != GX_FLOAT16 && dtype != GX_BFLOAT16 && dtype != GX_FLOAT32 &&
        dtype != GX_FLOAT64)
        return false;
    return op == GX_REDOP_COUNT || nccl_op(op) >= 0;
}

int gx_nccl_unique_id(void *id)
{
    char why[400];
    const struct gx_nccl_api *n = gx_nccl_api_get(why, sizeof(why));
    if (!n)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "NCCL: %s", why);
    gx_nccl_uid u;
    gx_nccl_result r = n->get_unique_id(&u);
    if (r != GX_NCCL_SUCCESS) {
        char e[200];
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "NCCL ncclGetUniqueId failed: %s",
                       gx_nccl_errstr(n, r, e, sizeof(e)));
    }
    memcpy(id, &u, sizeof(u));
    return GX_OK;
}

/* ncclCommInitRank blocks until every rank has called it: it runs on a
 * thread of its own so gx's deadline holds; one that is abandoned aborts its
 * communicator itself if it ever returns. */
struct init_job {
    pthread_mutex_t mu;
    const struct gx_nccl_api *api;
    const struct gx_cu *cu;
    gx_cu_ctx ctx;
    gx_nccl_uid id;
    int nranks, rank;
    gx_nccl_comm_t comm;
    gx_nccl_result r;
    bool done, abandoned;
};

static void *init_thread(void *arg)
{
    struct init_job *j = arg;
    gx_nccl_comm_t comm = NULL;
    gx_nccl_result r = 1; /* ncclUnhandledCudaError: no context */
    if (j->cu->ctx_push(j->ctx) == GX_CU_SUCCESS) {
        r = j->api->comm_init_rank(&comm, j->nranks, j->id, j->rank);
        gx_cu_ctx old;
        (void)j->cu->ctx_pop(&old);
    }
    pthread_mutex_lock(&j->mu);
    bool abandoned = j->abandoned;
    j->comm = comm;
    j->r = r;
    j->done = true;
    pthread_mutex_unlock(&j->mu);
    if (abandoned) {
        if (r == GX_NCCL_SUCCESS && comm)
            (void)j->api->comm_abort(comm);
        pthread_mutex_destroy(&j->mu);
        free(j);
    }
    return NULL;
}

static void pause_briefly(unsigned *spins)
{
    if (++*spins < 64) {
        sched_yield();
        return;
    }
    struct timespec ts = { 0, *spins < 1024 ? 20000 : 200000 };
    nanosleep(&ts, NULL);
}

int gx_nccl_open(const void *id, int nranks, int rank, const void *dev_hint, const char *name,
                 uint64_t deadline, struct gx_nccl **out)
{
    *out = NULL;
    char why[400];
    const struct gx_nccl_api *n = gx_nccl_api_get(why, sizeof(why));
    if (!n)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "%s: %s", name, why);
    const struct gx_cu *cu = gx_cu_get(why, sizeof(why));
    if (!cu || !cu->stream_query)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "%s: %s", name,
                       cu ? "the CUDA driver has no cuStreamQuery" : why);
    struct gx_gpu_ptr g = { 0 };
    int rc = gx_gpu_ptr_query(dev_hint, &g);
    if (rc != GX_OK)
        return rc;
    if (g.type != GX_GPU_MEM_CUDA)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "%s: %p is not device memory", name, dev_hint);
    struct gx_nccl *c = calloc(1, sizeof(*c));
    struct init_job *j = calloc(1, sizeof(*j));
    if (!c || !j) {
        free(c);
        free(j);
        return gx_fail(GX_ENOMEM, GX_SUB_GPU, "%s: out of memory", name);
    }
    c->api = n;
    c->cu = cu;
    c->ctx = g.ctx;
    snprintf(c->name, sizeof(c->name), "%s", name);
    pthread_mutex_init(&j->mu, NULL);
    j->api = n;
    j->cu = cu;
    j->ctx = g.ctx;
    memcpy(&j->id, id, sizeof(j->id));
    j->nranks = nranks;
    j->rank = rank;
    pthread_t t;
    if (pthread_create(&t, NULL, init_thread, j) != 0) {
        pthread_mutex_destroy(&j->mu);
        free(j);
        free(c);
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s: cannot start a thread for ncclCommInitRank",
                       name);
    }
    pthread_detach(t);
    unsigned spins = 0;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        bool done = j->done;
        if (!done && gx_now_ns() >= deadline)
            j->abandoned = true;
        bool abandoned = j->abandoned;
        pthread_mutex_unlock(&j->mu);
        if (done)
            break;
        if (abandoned) {
            free(c);
            return gx_fail(GX_ETIMEOUT, GX_SUB_GPU, "%s: NCCL ncclCommInitRank (rank %d of %d) "
                           "did not finish by the deadline (GX_TIMEOUT): did every rank of "
                           "the node pass device buffers to this collective?", name, rank,
                           nranks);
        }
        pause_briefly(&spins);
    }
    gx_nccl_result r = j->r;
    c->comm = j->comm;
    pthread_mutex_destroy(&j->mu);
    free(j);
    if (r != GX_NCCL_SUCCESS) {
        char e[200];
        free(c);
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s: NCCL ncclCommInitRank (rank %d of %d) "
                       "failed: %s", name, rank, nranks, gx_nccl_errstr(n, r, e, sizeof(e)));
    }
    rc = gx_cu_push(cu, c->ctx, name);
    if (rc == GX_OK) {
        gx_cu_result cr = cu->stream_create(&c->stream, 0);
        gx_cu_pop(cu);
        if (cr != GX_CU_SUCCESS) {
            char e[64];
            rc = gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s: cuStreamCreate failed: %s", name,
                         gx_cu_errstr(cr, e, sizeof(e)));
        }
    }
    if (rc != GX_OK) {
        (void)n->comm_destroy(c->comm);
        free(c);
        return rc;
    }
    *out = c;
    return GX_OK;
}

static const char *call_name(enum gx_nccl_kind k)
{
    static const char *names[] = { "ncclAllReduce", "ncclBroadcast", "ncclReduce",
                                   "ncclAllGather", "ncclReduceScatter" };
    return names[k];
}

static gx_nccl_result issue(const struct gx_nccl *c, const struct gx_nccl_call *k)
{
    const struct gx_nccl_api *n = c->api;
    int dt = nccl_dtype(k->dtype), op = nccl_op(k->op);
    switch (k->kind) {
    case GX_NCCL_ALLREDUCE:
        return n->all_reduce(k->send, k->recv, k->count, dt, op, c->comm, c->stream);
    case GX_NCCL_BROADCAST:
        return n->broadcast(k->send, k->recv, k->count, dt, k->root, c->comm, c->stream);
    case GX_NCCL_REDUCE:
        return n->reduce(k->send, k->recv, k->count, dt, op, k->root, c->comm, c->stream);
    case GX_NCCL_ALLGATHER:
        return n->all_gather(k->send, k->recv, k->count, dt, c->comm, c->stream);
    case GX_NCCL_REDUCE_SCATTER:
        return n->reduce_scatter(k->send, k->recv, k->count, dt, op, c->comm, c->stream);
    }
    return 4; /* ncclInvalidArgument */
}

/* Abort: the library's kernels and threads stop, the stream drains. */
static void abort_comm(struct gx_nccl *c)
{
    if (c->broken)
        return;
    c->broken = true;
    (void)c->api->comm_abort(c->comm);
    c->comm = NULL;
}

int gx_nccl_run(struct gx_nccl *c, const struct gx_nccl_call *calls, int ncalls,
                uint64_t deadline, int timeout_ms, const struct gx_nccl_watch *watch)
{
    if (c->broken)
        return gx_fail(GX_EABORTED, GX_SUB_GPU, "%s was aborted after an earlier failure",
                       c->name);
    for (int i = 0; i < ncalls; i++)
        if (nccl_dtype(calls[i].dtype) < 0 ||
            (calls[i].op != GX_REDOP_COUNT && nccl_op(calls[i].op) < 0))
            return gx_fail(GX_EINVAL, GX_SUB_GPU, "%s: %s of %s/%s is not an NCCL operation",
                           c->name, call_name(calls[i].kind), gx_datatype_name(calls[i].dtype),
                           gx_redop_name(calls[i].op));
    const struct gx_nccl_api *n = c->api;
    int rc = gx_cu_push(c->cu, c->ctx, c->name);
    if (rc != GX_OK)
        return rc;
    char e[200];
    const char *what = ncalls == 1 ? call_name(calls[0].kind) : "ncclGroupEnd";
    gx_nccl_result r = ncalls > 1 ? n->group_start() : GX_NCCL_SUCCESS;
    if (r != GX_NCCL_SUCCESS)
        what = "ncclGroupStart";
    for (int i = 0; r == GX_NCCL_SUCCESS && i < ncalls; i++) {
        r = issue(c, &calls[i]);
        if (r != GX_NCCL_SUCCESS)
            what = call_name(calls[i].kind);
    }
    if (ncalls > 1) {
        gx_nccl_result g = n->group_end();
        if (r == GX_NCCL_SUCCESS && g != GX_NCCL_SUCCESS) {
            r = g;
            what = "ncclGroupEnd";
        }
    }
    if (r != GX_NCCL_SUCCESS && r != GX_NCCL_IN_PROGRESS) {
        abort_comm(c);
        gx_cu_pop(c->cu);
        return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "NCCL %s failed on %s: %s", what, c->name,
                       gx_nccl_errstr(n, r, e, sizeof(e)));
    }
    /* Poll the stream and the communicator's async error under the deadline. */
    unsigned spins = 0;
    uint64_t next_watch = 0;
    what = ncalls == 1 ? call_name(calls[0].kind) : "a group of NCCL calls";
    for (;;) {
        gx_cu_result q = c->cu->stream_query(c->stream);
        if (q == GX_CU_SUCCESS)
            break;
        if (q != GX_CU_ERROR_NOT_READY) {
            char ce[64];
            abort_comm(c);
            gx_cu_pop(c->cu);
            return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "NCCL %s on %s: cuStreamQuery failed: %s",
                           what, c->name, gx_cu_errstr(q, ce, sizeof(ce)));
        }
        gx_nccl_result ae = GX_NCCL_SUCCESS;
        r = n->comm_get_async_error(c->comm, &ae);
        if (r != GX_NCCL_SUCCESS || (ae != GX_NCCL_SUCCESS && ae != GX_NCCL_IN_PROGRESS)) {
            gx_nccl_result bad = r != GX_NCCL_SUCCESS ? r : ae;
            abort_comm(c);
            gx_cu_pop(c->cu);
            return gx_fail(GX_ESYSTEM, GX_SUB_GPU, "NCCL %s failed on %s (%s): %s", what,
                           c->name, r != GX_NCCL_SUCCESS ? "ncclCommGetAsyncError" :
                           "asynchronous error", gx_nccl_errstr(n, bad, e, sizeof(e)));
        }
        uint64_t now = gx_now_ns();
        if (watch && watch->check && now >= next_watch) {
            next_watch = now + 5000000; /* every 5 ms */
            int wrc = watch->check(watch->arg);
            if (wrc != GX_OK) {
                abort_comm(c);
                gx_cu_pop(c->cu);
                return gx_fail(wrc, GX_SUB_GPU, "NCCL %s on %s: %s: aborted the NCCL "
                               "communicator (ncclCommAbort)", what, c->name, gx_last_error());
            }
        }
        if (now >= deadline) {
            abort_comm(c);
            gx_cu_pop(c->cu);
            return gx_fail(GX_ETIMEOUT, GX_SUB_GPU, "NCCL %s on %s did not complete within "
                           "GX_TIMEOUT (%d ms): aborted the NCCL communicator (ncclCommAbort)",
                           what, c->name, timeout_ms);
        }
        pause_briefly(&spins);
    }
    gx_cu_pop(c->cu);
    return GX_OK;
}

void gx_nccl_close(struct gx_nccl *c)
{
    if (!c)
        return;
    if (c->comm)
        (void)c->api->comm_destroy(c->comm);
    if (c->stream && gx_cu_push(c->cu, c->ctx, c->name) == GX_OK) {
        (void)c->cu->stream_destroy(c->stream);
        gx_cu_pop(c->cu);
    }
    free(c);
}
