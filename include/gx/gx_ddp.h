/*
 * gx_ddp.h - the data-parallel gradient bucket scheduler (included by gx.h).
 *
 * What PyTorch DDP's Reducer does, for training programs written against the
 * C API. The program registers its parameters once, in registration order
 * (the order the forward pass uses them). Backward produces gradients roughly
 * in reverse order; the program hands each one to gx_ddp_grad_ready() as soon
 * as it exists, from any thread. Gradients are grouped into buckets (the
 * first one small, the others up to a size cap) and each bucket's
 * non-blocking all-reduce starts the moment its last gradient arrives, so
 * communication runs while backward is still computing. gx_ddp_finish() at
 * the end of backward waits for the buckets and leaves the averaged (or
 * summed) gradients in place.
 *
 *     struct gx_ddp_param params[] = {
 *         { sizeof(struct gx_ddp_param), 784 * 128, GX_FLOAT32, "fc1.weight", w1 },
 *         ...
 *     };
 *     struct gx_ddp_config cfg = GX_DDP_CONFIG_INIT;
 *     struct gx_ddp *ddp;
 *     gx_ddp_create(comm, params, n, &cfg, &ddp);
 *     gx_ddp_broadcast_params(ddp, 0);            // every replica starts equal
 *     for (step...) {
 *         forward(); backward_calling_gx_ddp_grad_ready();
 *         gx_ddp_finish(ddp, 60000);              // grads are now averaged
 *         optimizer_step();
 *     }
 *     gx_ddp_destroy(ddp);
 *
 * Guarantees:
 *  - Buckets are filled in reverse registration order and launched in bucket
 *    order on every rank: a bucket launches once it and every earlier bucket
 *    are complete, whatever order this rank's gradients arrive in.
 *  - After the first synchronised iteration the buckets are rebuilt once from
 *    the order in which rank 0's gradients actually became ready (rank 0's
 *    order is broadcast so every rank builds the same buckets).
 *  - Parameters are checked across ranks at creation (count, datatype, same
 *    number of parameters, same bucket settings); a disagreement fails on
 *    every rank with GX_EMISMATCH naming the parameter and the rank.
 *  - Every iteration ends with a small agreement exchange, so an error on one
 *    rank (a parameter never marked ready, marked twice, a failing hook)
 *    makes gx_ddp_finish fail on every rank, naming the rank and the
 *    parameter, instead of leaving the others hanging.
 *  - Every wait has a deadline.
 *
 * Threads: gx_ddp_grad_ready() may be called from any thread, concurrently.
 * The other calls must not run concurrently with each other for the same
 * scheduler. The scheduler runs one progress thread that drives its
 * requests. During an iteration (from the first gx_ddp_grad_ready to the
 * return of gx_ddp_finish) the scheduler's threads use the communicator and
 * the program must not; between iterations it may (e.g. to sum the loss).
 * For concurrent use, give the program a gx_comm_split() copy.
 */
#ifndef GX_GX_DDP_H
#define GX_GX_DDP_H

#include "gx/gx.h" /* usable on its own: gx.h includes this file at its end */

#ifdef __cplusplus
extern "C" {
#endif

struct gx_ddp;

/** One parameter of the model. */
struct gx_ddp_param {
    size_t size;            /**< sizeof(struct gx_ddp_param) */
    size_t count;           /**< elements in the parameter (and its gradient) */
    enum gx_datatype dtype; /**< datatype of the gradient (and of the data) */
    const char *name;       /**< for error messages ("fc1.weight"); may be NULL
                                 (then "param[i]"); copied */
    void *data;             /**< the parameter's values, for
                                 gx_ddp_broadcast_params(); may be NULL (then
                                 that parameter is not broadcast) and can be
                                 set later with gx_ddp_set_param_data() */
};

#define GX_DDP_PARAM_INIT { sizeof(struct gx_ddp_param), 0, GX_FLOAT32, NULL, NULL }

/** Scheduler settings. Every rank must pass the same values. */
struct gx_ddp_config {
    size_t size;                /**< sizeof(struct gx_ddp_config) */
    size_t bucket_cap_bytes;    /**< bucket size cap; 0 = GX_DDP_BUCKET_CAP (25 MiB) */
    size_t first_bucket_bytes;  /**< cap of the first bucket (the last layers'
                                     gradients, ready first); 0 =
                                     GX_DDP_FIRST_BUCKET (1 MiB) */
    enum gx_redop op;           /**< GX_AVG (default) or GX_SUM */
    int gradient_as_bucket_view;/**< 1: gradients live in the buckets: write
                                     them at gx_ddp_grad_buffer() and pass NULL
                                     to gx_ddp_grad_ready(); no copies */
    int find_unused_parameters; /**< 1: a parameter not marked ready by
                                     gx_ddp_finish() is unused this
                                     iteration: its gradient is zero (logged
                                     once per parameter) */
    int rebuild_buckets;        /**< 1 (default): rebuild once after the first
                                     iteration from the observed order */
    const char *name;           /**< label in log lines; NULL = "ddp" */
    int device_buckets;         /**< where the buckets live: 0 (default) = in CUDA
                                     device memory when a parameter's data
                                     (gx_ddp_param.data) is device memory, else
                                     host memory; 1 = device memory (allocated in
                                     the calling thread's CUDA context); -1 = host */
    void *stream;               /**< device buckets: the CUDA stream (CUstream /
                                     cudaStream_t; NULL = the legacy default
                                     stream) on which gradients are copied into
                                     the buckets, each bucket's all-reduce runs
                                     (gx_allreduce_stream, queued the moment the
                                     bucket is complete) and the results are
                                     copied back. A gradient handed to
                                     gx_ddp_grad_ready must be complete in this
                                     stream's order (written by work queued on
                                     it, or already finished); gx_ddp_finish
                                     waits for the stream. No comm hooks. */
};

#define GX_DDP_CONFIG_INIT \
    { sizeof(struct gx_ddp_config), 0, 0, GX_AVG, 0, 0, 1, NULL, 0, NULL }

/**
 * Create a scheduler for `num_params` parameters (registration order) on
 * `comm`. Collective over `comm`: checks that every rank registered the same
 * parameters with the same settings (GX_EMISMATCH naming the first parameter
 * or setting that differs and the rank). `config` may be NULL (defaults).
 */
GX_API int gx_ddp_create(struct gx_comm *comm, const struct gx_ddp_param *params,
                         size_t num_params, const struct gx_ddp_config *config,
                         struct gx_ddp **ddp_out);

/** Stop the progress thread and free everything. Requests still in flight
 *  (after a failed finish) are waited for up to the communicator's timeout:
 *  gx_comm_abort() first makes that immediate. NULL is ignored. */
GX_API void gx_ddp_destroy(struct gx_ddp *ddp);

/** Set or change where parameter `param`'s values live (for broadcast). */
GX_API int gx_ddp_set_param_data(struct gx_ddp *ddp, size_t param, void *data);

/** Copy root's parameter values to every rank (each parameter with data; the
 *  set of parameters with data was checked at creation to match). Collective.
 *  Call before the first iteration so all replicas start equal. */
GX_API int gx_ddp_broadcast_params(struct gx_ddp *ddp, int root);

/**
 * Where parameter `param`'s gradient lives inside its bucket (count elements
 * of its datatype). With gradient_as_bucket_view, backward writes the
 * gradient there and the reduced gradient is there after gx_ddp_finish().
 * The address changes once, when the buckets are rebuilt (inside the first
 * synchronised gx_ddp_finish); query it again after each finish, it is cheap.
 */
GX_API void *gx_ddp_grad_buffer(struct gx_ddp *ddp, size_t param);

/**
 * Parameter `param`'s gradient is complete. Without gradient_as_bucket_view
 * `grad` is the gradient (copied into the bucket now; the reduced gradient is
 * written back to it before gx_ddp_finish() returns, so it must stay valid
 * until then). With gradient_as_bucket_view `grad` must be NULL or
 * gx_ddp_grad_buffer(ddp, param). Any thread. Errors: index out of range,
 * marked twice in one iteration (GX_EINVAL naming the parameter; the
 * iteration then fails on every rank at finish).
 */
GX_API int gx_ddp_grad_ready(struct gx_ddp *ddp, size_t param, void *grad);

/**
 * End of backward: wait up to `timeout_ms` for this rank's gradients (with
 * find_unused_parameters, missing ones count as unused at once), then up to
 * as long again for the buckets' communication, and leave the reduced
 * gradients in place. A timeout names the parameters never marked ready (or
 * the buckets still in flight). timeout_ms < 0 means the communicator's
 * GX_TIMEOUT. Collective: every rank calls it every iteration, also under
 * no_sync. Errors found on any rank fail it on every rank.
 */
GX_API int gx_ddp_finish(struct gx_ddp *ddp, int timeout_ms);

/**
 * Gradient accumulation: while on, iterations do no communication (finish
 * only checks that every gradient was marked); the program accumulates its
 * gradients and the first iteration after turning it off reduces the sums.
 * Only between iterations. Every rank must do the same.
 */
GX_API int gx_ddp_no_sync(struct gx_ddp *ddp, int on);

/* ---------------------------------------------------------------------------
 * Communication hooks: replace the bucket's all-reduce (PyTorch's
 * register_comm_hook). A hook starts the bucket's communication and returns
 * a request; once it completes, `complete` (optional) post-processes the
 * bucket (e.g. decompresses into bucket->data). Every rank must set the same
 * hook. A hook that returns an error must not have started a collective: the
 * scheduler then runs the plain all-reduce in its place, so the ranks stay in
 * step, and the iteration fails on every rank naming the hook, bucket and
 * rank.
 * ------------------------------------------------------------------------ */

/** A bucket as a hook sees it. */
struct gx_ddp_bucket {
    size_t size;            /**< sizeof(struct gx_ddp_bucket) */
    int index;              /**< position in launch order, 0 = first */
    void *data;             /**< the bucket's gradients, `count` elements; the
                                 result must end up here */
    size_t count;
    enum gx_datatype dtype;
    enum gx_redop op;       /**< the scheduler's GX_AVG or GX_SUM */
    const size_t *params;   /**< parameter indices in the bucket, in layout order */
    size_t num_params;
    void *hook_data;        /**< the hook's own per-bucket pointer: NULL at
                                 first, kept across iterations, handed to
                                 `release` when the bucket goes away */
    uint64_t iteration;     /**< synchronised iterations before this one */
};

struct gx_ddp_comm_hook {
    size_t size;            /**< sizeof(struct gx_ddp_comm_hook) */
    const char *name;       /**< for messages and the cross-rank check */
    /** Start the bucket's communication on `comm`: *req = a request (or NULL
     *  when already done). Runs on the thread that completed the bucket, the
     *  progress thread or the one in gx_ddp_finish, one call at a time. */
    int (*start)(void *state, struct gx_comm *comm, struct gx_ddp_bucket *bucket,
                 struct gx_request **req);
    /** After the request completed successfully; may be NULL. */
    int (*complete)(void *state, struct gx_ddp_bucket *bucket);
    /** Free bucket->hook_data; may be NULL. */
    void (*release)(void *state, struct gx_ddp_bucket *bucket);
};

/** For gx_ddp_bucket_info(): `struct gx_ddp_bucket b = GX_DDP_BUCKET_INIT;` */
#define GX_DDP_BUCKET_INIT                                                     \
    { sizeof(struct gx_ddp_bucket), 0, NULL, 0, GX_FLOAT32, GX_AVG, NULL, 0, NULL, 0 }

#define GX_DDP_COMM_HOOK_INIT { sizeof(struct gx_ddp_comm_hook), NULL, NULL, NULL, NULL }

/** Install `hook` (copied; NULL = the plain all-reduce) with its `state`.
 *  Only between iterations. */
GX_API int gx_ddp_set_comm_hook(struct gx_ddp *ddp, const struct gx_ddp_comm_hook *hook,
                                void *state);

/** Built-in hooks (state: NULL): float32/float64 buckets are divided by the
 *  number of ranks (for GX_AVG), narrowed to float16 (bfloat16), summed, and
 *  widened back: half the bytes on the wire. float16 overflows beyond 65504;
 *  bfloat16 keeps float32's range with 8 significant bits. Buckets of other
 *  datatypes use the plain all-reduce. */
GX_API const struct gx_ddp_comm_hook *gx_ddp_fp16_compress_hook(void);
GX_API const struct gx_ddp_comm_hook *gx_ddp_bf16_compress_hook(void);

/* ---------------------------------------------------------------------------
 * Introspection and statistics.
 * ------------------------------------------------------------------------ */

/** Number of buckets in the current layout, or -1 for NULL. */
GX_API int gx_ddp_bucket_count(const struct gx_ddp *ddp);

/** Bucket `index` of the current layout (its data/params pointers stay valid
 *  until the rebuild); hook_data is not filled in. */
GX_API int gx_ddp_bucket_info(const struct gx_ddp *ddp, int index, struct gx_ddp_bucket *out);

struct gx_ddp_stats {
    size_t size;                 /**< sizeof(struct gx_ddp_stats): set by the caller */
    uint64_t iterations;         /**< finished synchronised iterations */
    uint64_t no_sync_iterations; /**< finished iterations under no_sync */
    int buckets;                 /**< buckets in the current layout */
    int rebuilt;                 /**< 1 once the buckets were rebuilt */
    uint64_t buckets_reduced;    /**< bucket reductions run, all iterations */
    uint64_t bytes_reduced;      /**< gradient bytes reduced (before any
                                      compression), all iterations */
    uint64_t unused_params;      /**< parameters found unused (find_unused) */
    double comm_seconds;         /**< time with at least one bucket in flight */
    double overlap_seconds;      /**< part of comm_seconds before gx_ddp_finish
                                      was called (hidden behind backward) */
    double finish_wait_seconds;  /**< time gx_ddp_finish spent waiting */
    double backward_seconds;     /**< first gx_ddp_grad_ready to gx_ddp_finish */
    /* The same four figures for the last synchronised iteration. */
    double last_comm_seconds;
    double last_overlap_seconds;
    double last_finish_wait_seconds;
    double last_backward_seconds;
};

#define GX_DDP_STATS_INIT                                                      \
    { sizeof(struct gx_ddp_stats), 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0 }

/** Copy the statistics (up to stats->size bytes of them). */
GX_API int gx_ddp_get_stats(const struct gx_ddp *ddp, struct gx_ddp_stats *stats);

/** Zero the cumulative statistics (e.g. after warm-up iterations). */
GX_API int gx_ddp_reset_stats(struct gx_ddp *ddp);

#ifdef __cplusplus
}
#endif

#endif /* GX_GX_DDP_H */
