/*
 * ddp_internal.h - struct gx_ddp and the helpers shared by the ddp_*.c files.
 * Not installed.
 *
 *   ddp.c          lifecycle: create (cross-rank check), destroy, parameter
 *                  data, broadcast, no_sync, hooks, introspection
 *   ddp_buckets.c  bucket assignment (pure), layouts, the rebuild
 *   ddp_sched.c    grad_ready, in-order launches, the progress thread, finish
 *                  and its cross-rank agreement
 *   ddp_hooks.c    the plain all-reduce and the fp16 / bf16 compression hooks
 *   ddp_stats.c    timing of communication and overlap, gx_ddp_get_stats
 *   ddp_device.c   bucket memory (host, or CUDA device memory with stream-
 *                  ordered copies and all-reduces), gradient copies
 *
 * Locks: `lock` guards the iteration state (parameter and bucket flags,
 * counters, statistics) and is never held across a gx call. `gx_lock`
 * serialises every gx call the scheduler makes on the communicator (launches,
 * tests, the agreement), so the scheduler never calls gx concurrently with
 * itself; `next_launch` only advances under both. Order: gx_lock, then lock.
 *
 * Room ddp/: a client of the collectives. It uses the public API (gx/gx.h)
 * and comm/comm_view.h only, never the engine or the transport; ddp_device.c
 * also gpudirect/ (memory type, stream-ordered copies of device buckets).
 */
#ifndef GX_DDP_INTERNAL_H
#define GX_DDP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gx/gx.h"

/* Per-iteration state of a parameter (atomic: grad_ready runs anywhere). */
enum ddp_param_state {
    DDP_PENDING = 0, /* not marked yet this iteration */
    DDP_MARKED = 1,  /* gx_ddp_grad_ready() claimed it */
    DDP_UNUSED = 2,  /* finish claimed it: zero gradient */
};

struct ddp_param {
    size_t count;
    enum gx_datatype dtype;
    size_t bytes;
    char name[64];
    void *data;                 /* for broadcast; may be NULL */
    int bucket;                 /* index in the current layout */
    size_t offset;              /* byte offset in the bucket */
    atomic_int state;           /* enum ddp_param_state */
    void *user_grad;            /* copy-back target this iteration, or NULL */
    bool reported_unused;
};

struct ddp_bucket {
    struct gx_ddp_bucket pub;   /* what hooks see; pub.params = params */
    size_t *params;
    size_t bytes;
    /* iteration state, under ddp->lock */
    size_t pending;             /* parameters not yet in */
    bool complete;              /* every gradient is in: may launch */
    bool launched;
    bool done;
    int status;                 /* of its communication, once done */
    bool hooked;                /* started by the hook (call its complete) */
    struct gx_request *req;     /* touched under gx_lock only */
    uint64_t launch_ns;
    uint64_t ready_ns;          /* its last gradient came in (GX_TRACE) */
};

/* A bucket assignment: bucket b holds members[start[b] .. start[b+1]). */
struct ddp_assignment {
    size_t nbuckets;
    size_t *start;              /* nbuckets + 1 entries */
    size_t *members;            /* one entry per parameter */
};

/* What the assignment needs to know about a parameter. */
struct ddp_param_shape {
    size_t bytes;
    enum gx_datatype dtype;
};

/* Cross-rank agreement record of one iteration (256 bytes, plain bytes). */
struct ddp_agree_rec {
    int32_t status;             /* GX_OK or this rank's iteration error */
    int32_t missing;            /* parameters never marked ready */
    uint32_t hook_hash;         /* hash of the hook's name (0 = plain) */
    int32_t reserved;
    char msg[240];              /* the start of the error message */
};

struct ddp_timing {
    uint64_t busy_start_ns;     /* when `inflight` last went 0 -> 1 */
    uint64_t busy_ns;           /* closed busy time this iteration */
    int inflight;
    uint64_t first_ready_ns;    /* first grad_ready of the iteration */
    uint64_t finish_call_ns;
    uint64_t overlap_ns;        /* busy time before finish was called */
};

struct gx_ddp {
    struct gx_comm *comm;
    int rank;
    int nranks;
    int op_timeout_ms;
    char name[32];
    struct gx_ddp_config cfg;   /* defaults resolved */

    struct ddp_param *params;
    size_t nparams;
    struct ddp_bucket *buckets;
    size_t nbuckets;

    struct gx_ddp_comm_hook hook; /* start == NULL: plain all-reduce */
    void *hook_state;
    uint32_t hook_hash;

    pthread_mutex_t lock;
    pthread_cond_t cond;        /* readiness, launches, completions, stop */
    pthread_mutex_t gx_lock;
    pthread_t progress;
    bool progress_running;
    bool stop;

    /* iteration state, under lock */
    bool no_sync;
    size_t next_launch;
    size_t ready;               /* parameters in (marked or unused) */
    size_t *ready_order;        /* marked parameters in the order they came */
    size_t ready_order_len;
    size_t buckets_done;
    int iter_status;            /* first local error of this iteration */
    char iter_msg[512];
    int broken;                 /* a failed finish left requests in flight */
    struct gx_request *agree_inflight; /* the exchange it left behind */
    struct ddp_agree_rec agree_mine;
    struct ddp_agree_rec *agree_all; /* nranks records */
    bool rebuilt;

    struct ddp_timing t;
    struct gx_ddp_stats stats;

    /* device buckets (ddp_device.c) */
    bool dev;                   /* buckets are CUDA device memory */
    void *stream;               /* where their copies and all-reduces are queued */
};

/* The last error's text as an argument of gx_fail(), which formats into the
 * same buffer gx_last_error() returns: copy it first (a compound literal
 * lives until the end of the enclosing block). */
#define DDP_PREV_ERROR ddp_copy_error((char[400]){ 0 }, 400)
static inline const char *ddp_copy_error(char *buf, size_t len)
{
    const char *e = gx_last_error();
    size_t n = strlen(e);
    if (n >= len)
        n = len - 1;
    memcpy(buf, e, n);
    buf[n] = '\0';
    return buf;
}

/* ddp_buckets.c */
int ddp_assign(const struct ddp_param_shape *shapes, size_t n, const size_t *order,
               size_t first_cap, size_t cap, struct ddp_assignment *out);
void ddp_assignment_free(struct ddp_assignment *a);
/** Reverse registration order: n-1, ..., 0. */
void ddp_default_order(size_t *order, size_t n);
/** Build ddp->buckets from an order; copies gradients over from the old
 *  layout when there is one (rebuild), releasing the old buckets. */
int ddp_layout_build(struct gx_ddp *ddp, const size_t *order);
void ddp_layout_free(struct gx_ddp *ddp);
/** The fill order of the rebuild: the observed order, then the parameters
 *  never marked (unused) in reverse registration order. */
void ddp_rebuild_order(const size_t *observed, size_t nobserved, size_t n, size_t *order);
/** The rebuild after the first iteration (collective, gx_lock held). */
int ddp_rebuild(struct gx_ddp *ddp);

/* ddp_sched.c */
int ddp_progress_start(struct gx_ddp *ddp);
void ddp_progress_stop(struct gx_ddp *ddp);
void ddp_iteration_reset(struct gx_ddp *ddp);

/* ddp_hooks.c */
/** Start bucket b's communication (the hook's, or the plain all-reduce). */
int ddp_bucket_start(struct gx_ddp *ddp, struct ddp_bucket *b);
/** After b's request finished with GX_OK: the hook's complete step. */
int ddp_bucket_complete(struct gx_ddp *ddp, struct ddp_bucket *b);
void ddp_bucket_release_hook_data(struct gx_ddp *ddp, struct ddp_bucket *b);
uint32_t ddp_hash_name(const char *name);

/* ddp_device.c */
/** Device or host buckets, from gx_ddp_config.device_buckets (create). */
int ddp_dev_decide(struct gx_ddp *ddp);
/** A zeroed bucket of `bytes` in the buckets' memory. */
int ddp_mem_alloc(struct gx_ddp *ddp, size_t bytes, void **out);
void ddp_mem_free(struct gx_ddp *ddp, void *p);
/** Copy gradient bytes into / out of / between buckets (stream-ordered for
 *  device buckets; gx_device_copy for host ones). */
int ddp_grad_copy(struct gx_ddp *ddp, void *dst, const void *src, size_t len);
int ddp_mem_zero(struct gx_ddp *ddp, void *dst, size_t len);
/** Device buckets: the plain all-reduce, queued on the stream. */
int ddp_dev_allreduce(struct gx_ddp *ddp, struct ddp_bucket *b);
/** Device buckets: wait for the stream, then check the comm's async error. */
int ddp_dev_sync(struct gx_ddp *ddp);

/* ddp_stats.c (all under ddp->lock) */
void ddp_stats_launch(struct gx_ddp *ddp, uint64_t now);
/** GX_TRACE: bucket b's readiness and all-reduce (launch to `now`). */
void ddp_trace_bucket(const struct gx_ddp *ddp, const struct ddp_bucket *b, uint64_t now);
void ddp_stats_done(struct gx_ddp *ddp, struct ddp_bucket *b, uint64_t now);
void ddp_stats_first_ready(struct gx_ddp *ddp, uint64_t now);
void ddp_stats_finish_called(struct gx_ddp *ddp, uint64_t now);
void ddp_stats_iteration_end(struct gx_ddp *ddp, uint64_t now, bool synced);

#endif
