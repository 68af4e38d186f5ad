/*
 * gx.h - the public C API of libgx (umbrella header).
 *
 * gx moves gradients between the processes of a data-parallel training job.
 * A process creates a communicator (struct gx_comm) with gx_comm_init() or
 * gx_comm_init_env(), runs collectives and point-to-point operations on it,
 * and ends with gx_comm_finalize() + gx_comm_destroy().
 *
 * Conventions:
 *  - Every function returns GX_OK (0) or a negative GX_E* status; output
 *    parameters are written only on success. gx_strerror() names a status,
 *    gx_last_error() gives the detailed message of the last failure on the
 *    calling thread (which rank, which peer, what to check).
 *  - Handles are opaque. Config structs start with a `size` field and are
 *    initialised with their *_INIT macro so they can grow compatibly.
 *  - Every blocking call has a deadline (GX_TIMEOUT / GX_INIT_TIMEOUT, or the
 *    explicit timeout argument).
 */
#ifndef GX_GX_H
#define GX_GX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GX_API __attribute__((visibility("default")))
#else
#define GX_API
#endif

#define GX_VERSION_MAJOR 0
#define GX_VERSION_MINOR 1
#define GX_VERSION_PATCH 0

/* ---------------------------------------------------------------------------
 * Status codes, grouped by blast radius. Test a group with the GX_IS_*
 * macros rather than comparing individual codes.
 * ------------------------------------------------------------------------ */
enum gx_status {
    GX_OK = 0,

    /* -1 .. -99: the caller's error (fix the calling code). */
    GX_EINVAL = -1,      /**< an argument is invalid (the log names it) */
    GX_ESTATE = -2,      /**< call not allowed in the object's state */
    GX_ETRUNCATE = -3,   /**< a receive buffer is smaller than the message */

    /* -100 .. -199: ranks disagree (a bug in how ranks call gx). */
    GX_EMISMATCH = -100, /**< ranks called different operations or sizes */

    /* -200 .. -299: local system error (resources, OS). */
    GX_ESYSTEM = -200,   /**< a system call failed (the log has errno) */
    GX_ENOMEM = -201,    /**< out of memory or registration resources */

    /* -300 .. -399: a peer or the link to it failed. */
    GX_EPEER = -300,     /**< a peer process died or closed its connection */
    GX_EPROTO = -301,    /**< a peer sent a malformed or foreign message */
    GX_EAUTH = -302,     /**< a peer presented the wrong job key */
    GX_ECONNECT = -303,  /**< could not reach a peer */

    /* -400 .. -499: a deadline passed. */
    GX_ETIMEOUT = -400,  /**< the operation's deadline passed */

    /* -500 .. -599: the communicator was aborted. */
    GX_EABORTED = -500,  /**< gx_comm_abort() was called, or a peer aborted */

    /* -600 .. -699: not supported by this build or this machine. */
    GX_EUNSUPPORTED = -600,
};

#define GX_IS_CALLER_ERROR(s) ((s) <= -1 && (s) > -100)
#define GX_IS_MISMATCH(s) ((s) <= -100 && (s) > -200)
#define GX_IS_SYSTEM_ERROR(s) ((s) <= -200 && (s) > -300)
#define GX_IS_PEER_ERROR(s) ((s) <= -300 && (s) > -400)
#define GX_IS_TIMEOUT(s) ((s) <= -400 && (s) > -500)
#define GX_IS_ABORTED(s) ((s) <= -500 && (s) > -600)
#define GX_IS_UNSUPPORTED(s) ((s) <= -600 && (s) > -700)

/** Short constant name of a status, e.g. "GX_EPEER (peer failure)". */
GX_API const char *gx_strerror(int status);

/** Detailed message of the last error returned on the calling thread, or ""
 *  when none. Valid until the next gx call on this thread. */
GX_API const char *gx_last_error(void);

/** Version of the loaded library as "major.minor.patch". */
GX_API const char *gx_version(void);

/* ---------------------------------------------------------------------------
 * Datatypes and reduction operations.
 * ------------------------------------------------------------------------ */
enum gx_datatype {
    GX_INT8 = 0,
    GX_UINT8,
    GX_INT32,
    GX_UINT32,
    GX_INT64,
    GX_UINT64,
    GX_FLOAT16,  /**< IEEE 754 binary16 */
    GX_BFLOAT16, /**< bfloat16 (upper half of an IEEE binary32) */
    GX_FLOAT32,
    GX_FLOAT64,
    GX_DATATYPE_COUNT
};

enum gx_redop {
    GX_SUM = 0,
    GX_PROD,
    GX_MIN,
    GX_MAX,
    GX_AVG, /**< sum divided by the number of ranks */
    GX_REDOP_COUNT,
    GX_REPLACE = 64, /**< gx_accumulate only: the origin's value replaces the target's */
};

/** Size in bytes of one element of `dtype`, or 0 for an invalid type. */
GX_API size_t gx_datatype_size(enum gx_datatype dtype);
/** Name of a datatype ("float32") or reduction ("sum"); "?" if invalid. */
GX_API const char *gx_datatype_name(enum gx_datatype dtype);
GX_API const char *gx_redop_name(enum gx_redop op);

/* ---------------------------------------------------------------------------
 * Communicator.
 * ------------------------------------------------------------------------ */
struct gx_comm;

/**
 * Configuration for gx_comm_init(). Always start from GX_CONFIG_INIT and set
 * only the fields you need; unset fields fall back to the GX_* environment.
 */
struct gx_config {
    size_t size;             /**< sizeof(struct gx_config): set by GX_CONFIG_INIT */
    const char *init_method; /**< "env://", "tcp://HOST:PORT" or "file:///PATH";
                                  NULL = GX_INIT_METHOD or "env://" */
    int rank;                /**< this process's rank; -1 = from the environment */
    int world_size;          /**< number of ranks; -1 = from the environment */
    const char *job_key;     /**< shared secret; NULL = GX_JOB_KEY */
    int init_timeout_ms;     /**< rendezvous deadline; 0 = GX_INIT_TIMEOUT */
    int op_timeout_ms;       /**< deadline of blocking operations; 0 = GX_TIMEOUT */
    const char *name;        /**< label used in log lines; NULL = "world" */
};

#define GX_CONFIG_INIT { sizeof(struct gx_config), NULL, -1, -1, NULL, 0, 0, NULL }

/**
 * Create a communicator over all ranks of the job. Blocks until every rank
 * has arrived or the init deadline passes; on timeout the error lists the
 * ranks that never arrived. Collective over all ranks.
 */
GX_API int gx_comm_init(const struct gx_config *config, struct gx_comm **comm_out);

/** gx_comm_init() with everything taken from the environment: GX_RANK /
 *  GX_SIZE / GX_MASTER_ADDR / GX_MASTER_PORT (set by gx-run), or torchrun's
 *  RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, Slurm's or Open MPI's. */
GX_API int gx_comm_init_env(struct gx_comm **comm_out);

/**
 * Split `comm` into disjoint communicators, one per `color`; ranks in the new
 * communicator are ordered by (`key`, old rank). A rank passing a negative
 * color takes part but gets *out = NULL. Collective over `comm`.
 */
GX_API int gx_comm_split(struct gx_comm *comm, int color, int key, struct gx_comm **out);

/** Complete outstanding work and synchronise with the other ranks so none
 *  tears down while a peer still needs it. Collective; can fail. */
GX_API int gx_comm_finalize(struct gx_comm *comm);

/** Release the communicator and its resources. Never blocks on peers. Safe
 *  after finalize, after abort, or after an error. NULL is ignored. */
GX_API void gx_comm_destroy(struct gx_comm *comm);

/** Abort: fail every in-flight and later operation with GX_EABORTED and drop
 *  all connections so peers learn of it. Never hangs. The communicator must
 *  still be destroyed. */
GX_API void gx_comm_abort(struct gx_comm *comm);

/**
 * Recovery after a failure (in the spirit of MPI ULFM's MPI_Comm_shrink):
 * build `*out`, a communicator of the ranks of `comm` that are still alive,
 * ordered by their old rank. Every surviving rank calls it (typically after
 * an operation failed with GX_EPEER); they agree on who is gone even when
 * they saw different failures first. A rank that does not join within
 * GX_TIMEOUT is counted as gone. `comm` is left failed (GX_EABORTED); destroy
 * it. `flags` must be 0. Returns GX_EPEER on a rank the others counted as
 * gone, GX_EABORTED after gx_comm_abort (which closes the job's bootstrap).
 * Other communicators sharing a gone rank fail at their next operation
 * naming it: shrink each one you keep. See docs/reliability.md.
 */
GX_API int gx_comm_shrink(struct gx_comm *comm, int flags, struct gx_comm **out);

/** Revoke: fail every in-flight and later operation on `comm` with
 *  GX_EABORTED on this rank and, within a moment, on every rank of the job
 *  (the notice travels over the bootstrap and names this rank), without
 *  closing the job's connections, so the ranks can gx_comm_shrink() next.
 *  Safe from any thread; never blocks on peers. Every communicator of the
 *  job learns of it, as with a failure. */
GX_API int gx_comm_revoke(struct gx_comm *comm);

/** The communicator's asynchronous error: GX_OK while healthy, otherwise the
 *  first failure seen (e.g. GX_EPEER when a peer died). If `msg` is non-NULL,
 *  up to `msg_len` bytes of the detailed message are copied there. */
GX_API int gx_comm_get_async_error(const struct gx_comm *comm, char *msg, size_t msg_len);

/* Queries. They return -1 for a NULL communicator. */
GX_API int gx_comm_rank(const struct gx_comm *comm);
GX_API int gx_comm_size(const struct gx_comm *comm);
GX_API int gx_comm_local_rank(const struct gx_comm *comm); /**< rank among ranks on this node */
GX_API int gx_comm_local_size(const struct gx_comm *comm); /**< ranks on this node */
GX_API int gx_comm_node_count(const struct gx_comm *comm);  /**< distinct nodes */
GX_API int gx_comm_node_index(const struct gx_comm *comm);  /**< this node's index, 0..nodes-1 */
/** Name of the fabric provider that reaches `peer` ("shm", "tcp", "verbs",
 *  "self"), or NULL for a bad argument. For diagnosis and tests. */
GX_API const char *gx_comm_peer_provider(const struct gx_comm *comm, int peer);

/* ---------------------------------------------------------------------------
 * Counters (docs/observability.md lists each with its unit; GX_METRICS_FILE
 * writes them for Prometheus' node exporter, gx-info --stats reads that).
 * ------------------------------------------------------------------------ */

/** Where a peer is: this process, another process of this node, another node. */
enum gx_peer_class { GX_PEER_SELF = 0, GX_PEER_NODE, GX_PEER_NET, GX_PEER_CLASS_COUNT };

/** Completed messages one way or the other (payload bytes, not headers). */
struct gx_traffic {
    unsigned long long bytes_sent, bytes_received; /**< bytes */
    unsigned long long sends, receives;            /**< messages */
};

#define GX_STATS_PROVIDERS 4

/**
 * A communicator's counters since it was created. Set `size` with
 * GX_COMM_STATS_INIT: a caller built against an older, shorter struct gets
 * the fields it knows.
 */
struct gx_comm_stats {
    size_t size;                          /**< sizeof(struct gx_comm_stats) */
    struct gx_traffic peer_class[GX_PEER_CLASS_COUNT]; /**< by enum gx_peer_class */
    int providers;                        /**< entries of `provider` in use */
    struct {
        char name[16];                    /**< "shm", "tcp", "verbs", "dpdk", "self" */
        struct gx_traffic traffic;
    } provider[GX_STATS_PROVIDERS];
    unsigned long long collectives;       /**< collectives called (incl. ones refused) */
    unsigned long long collectives_failed;/**< of those, finished with an error */
    unsigned long long p2p;               /**< gx_send/gx_recv family calls */
    unsigned long long connections;       /**< peers with an open fabric endpoint, now */
    unsigned long long checksum_failures; /**< messages that failed GX_CHECKSUM */
    unsigned long long retransmits;       /**< segments a provider sent again (whole process) */
    unsigned long long stalls;            /**< collectives GX_STALL_WARN reported */
    unsigned long long wait_ns;           /**< ns callers spent blocked in gx_wait (incl. the
                                               blocking calls' own waits; to within 63 polls) */
    /* What the rank holds at scale (docs/scale.md). */
    int endpoints;                        /**< fabric endpoints to peers, made on demand
                                               (GX_CONNECT); the same as `connections` */
    int endpoints_node;                   /**< ... of them to ranks of this node */
    int connects;                         /**< connections this rank started */
    int accepts;                          /**< connections from peers it kept */
    int boot_sockets;                     /**< bootstrap sockets of this process (all
                                               communicators) */
    unsigned long long boot_msgs_sent;    /**< bootstrap messages this process sent */
    unsigned long long boot_bytes_sent;   /**< ... and their payload bytes */
};
#define GX_COMM_STATS_INIT                                                     \
    { sizeof(struct gx_comm_stats), { { 0, 0, 0, 0 } }, 0, { { "", { 0, 0, 0, 0 } } }, 0, 0, 0, \
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/** Fill `stats` (its `size` set, see above) with the communicator's
 *  counters. GX_EINVAL for NULL or a `size` this libgx cannot serve. */
GX_API int gx_comm_stats(const struct gx_comm *comm, struct gx_comm_stats *stats);

/* ---------------------------------------------------------------------------
 * Requests (non-blocking operations).
 * ------------------------------------------------------------------------ */
struct gx_request;

/** Check a request without blocking: *done = 1 when it has completed. Returns
 *  the operation's status once done (GX_OK or its error), GX_OK before. */
GX_API int gx_test(struct gx_request *req, int *done);

/** Wait for a request. timeout_ms < 0 means the communicator's GX_TIMEOUT;
 *  GX_ETIMEOUT when it passes (the request stays valid and can be waited on
 *  again). Returns the operation's status. */
GX_API int gx_wait(struct gx_request *req, int timeout_ms);

/** Free a completed request. Freeing one still in flight waits for it first
 *  (up to the communicator's GX_TIMEOUT). NULL is ignored. */
GX_API void gx_request_free(struct gx_request *req);

/* ---------------------------------------------------------------------------
 * Synchronisation.
 * ------------------------------------------------------------------------ */

/** Block until every rank of `comm` has entered the barrier. */
GX_API int gx_barrier(struct gx_comm *comm);
/** Non-blocking barrier. */
GX_API int gx_ibarrier(struct gx_comm *comm, struct gx_request **req);

#include "gx/gx_topo.h"

/* ---------------------------------------------------------------------------
 * Point-to-point (host memory).
 *
 * A message is `count` elements of `dtype`. Tags are 0..2147483647. Messages
 * between the same pair of ranks with the same tag are matched in the order
 * they were sent. A receive may be larger than the message (the request then
 * reports the smaller count); a receive smaller than the message fails on both
 * ranks with GX_ETRUNCATE naming both ranks and sizes. A rank may send to
 * itself. Buffers must stay untouched until the operation completes.
 *
 * A receive with peer GX_ANY_SOURCE takes the next message with its tag from
 * any rank (the one that arrived first, else the next to arrive; a message
 * goes to whichever matching receive was posted first, wildcard or not);
 * gx_request_source() then names the sender. It has the same deadline as any
 * receive, and fails when the link to any rank fails while it waits (naming
 * that rank: the message may have been its).
 * ------------------------------------------------------------------------ */
/** `peer` of gx_recv / gx_irecv: a message from any rank. */
#define GX_ANY_SOURCE (-1)
GX_API int gx_send(struct gx_comm *comm, const void *buf, size_t count, enum gx_datatype dtype,
                   int peer, int tag);
/** `count_out` (may be NULL) receives the number of elements that arrived. */
GX_API int gx_recv(struct gx_comm *comm, void *buf, size_t count, enum gx_datatype dtype,
                   int peer, int tag, size_t *count_out);
GX_API int gx_isend(struct gx_comm *comm, const void *buf, size_t count, enum gx_datatype dtype,
                    int peer, int tag, struct gx_request **req);
GX_API int gx_irecv(struct gx_comm *comm, void *buf, size_t count, enum gx_datatype dtype,
                    int peer, int tag, struct gx_request **req);
/** Elements received by a completed receive request. */
GX_API int gx_request_count(const struct gx_request *req, size_t *count_out);
/** The rank whose message a completed receive request took (the sender of a
 *  GX_ANY_SOURCE receive). GX_ESTATE before completion or after a failure;
 *  GX_EINVAL for a request that is not a receive. */
GX_API int gx_request_source(const struct gx_request *req, int *source_out);

/* ---------------------------------------------------------------------------
 * Collectives (host memory). Every rank of `comm` calls the same collective
 * with the same count, datatype, op and root, in the same order; a rank that
 * called something else fails with GX_EMISMATCH naming both calls. Counts are
 * in elements; any count works, including 0 and counts not divisible by the
 * number of ranks. In-place operation, as in NCCL:
 *   all_reduce, reduce, broadcast:  sendbuf == recvbuf
 *   all_gather:      sendbuf == (char *)recvbuf + rank * sendcount * size(dtype)
 *   reduce_scatter:  recvbuf == (char *)sendbuf + rank * recvcount * size(dtype)
 *   gather (root):   sendbuf == (char *)recvbuf + root * sendcount * size(dtype)
 *   scatter (root):  recvbuf == (char *)sendbuf + root * recvcount * size(dtype)
 *   alltoall:        sendbuf == recvbuf (staged through a copy)
 * Other overlaps of send and receive buffers are rejected. GX_AVG works on
 * every datatype; on integers it is the wrapped sum divided with C integer
 * division (as NCCL's ncclAvg). Argument errors (GX_EINVAL, naming the
 * argument) are detected on the calling rank before any communication; the
 * call still counts in the sequence of collectives, and the calling rank
 * tells its peers at once, so peers that went ahead fail with GX_EMISMATCH
 * naming the rank and its error (within a fraction of a second, not at
 * GX_TIMEOUT) rather than pair with a later call. The non-blocking
 * form (gx_i*) returns a request; buffers stay untouched until it completes.
 * Several may be outstanding; they complete correctly in any interleaving
 * when issued in the same order on every rank. The blocking form waits up to
 * GX_TIMEOUT. GX_ALGO forces an algorithm (see gx-info --tuning). A
 * progress thread per communicator advances them (GX_PROGRESS=caller: only
 * gx_test/gx_wait do). A failure other than a caller error (a peer died, a
 * mismatch, a timeout) fails every outstanding collective and later call on
 * the communicator with that error (docs/collectives.md).
 * ------------------------------------------------------------------------ */

/** recvbuf[i] = op over ranks of sendbuf[i]; GX_AVG divides the sum by the
 *  number of ranks. */
GX_API int gx_allreduce(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                        enum gx_datatype dtype, enum gx_redop op);
GX_API int gx_iallreduce(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                         enum gx_datatype dtype, enum gx_redop op, struct gx_request **req);

/** Root's sendbuf is copied to every rank's recvbuf (sendbuf is ignored on
 *  other ranks and may be NULL there). */
GX_API int gx_broadcast(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                        enum gx_datatype dtype, int root);
GX_API int gx_ibroadcast(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                         enum gx_datatype dtype, int root, struct gx_request **req);

/** Like all_reduce, but only root's recvbuf receives the result (recvbuf is
 *  ignored on other ranks and may be NULL there). */
GX_API int gx_reduce(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                     enum gx_datatype dtype, enum gx_redop op, int root);
GX_API int gx_ireduce(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                      enum gx_datatype dtype, enum gx_redop op, int root,
                      struct gx_request **req);

/** recvbuf (size * sendcount elements) = every rank's sendbuf in rank order. */
GX_API int gx_allgather(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                        size_t sendcount, enum gx_datatype dtype);
GX_API int gx_iallgather(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                         size_t sendcount, enum gx_datatype dtype, struct gx_request **req);

/** sendbuf holds size * recvcount elements; rank r receives block r of the
 *  element-wise reduction. */
GX_API int gx_reduce_scatter(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                             size_t recvcount, enum gx_datatype dtype, enum gx_redop op);
GX_API int gx_ireduce_scatter(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                              size_t recvcount, enum gx_datatype dtype, enum gx_redop op,
                              struct gx_request **req);

/** Root's recvbuf (size * sendcount elements) = every rank's sendbuf. */
GX_API int gx_gather(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                     enum gx_datatype dtype, int root);
GX_API int gx_igather(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                      enum gx_datatype dtype, int root, struct gx_request **req);

/** Rank r's recvbuf = block r of root's sendbuf (size * recvcount elements). */
GX_API int gx_scatter(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                      enum gx_datatype dtype, int root);
GX_API int gx_iscatter(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                       size_t recvcount, enum gx_datatype dtype, int root,
                       struct gx_request **req);

/** Block j of rank i's sendbuf (count elements each) lands in block i of rank
 *  j's recvbuf. */
GX_API int gx_alltoall(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                       enum gx_datatype dtype);
GX_API int gx_ialltoall(struct gx_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                        enum gx_datatype dtype, struct gx_request **req);

/* ---------------------------------------------------------------------------
 * Device (CUDA) buffers. Every collective and point-to-point call above also
 * accepts CUDA device memory, detected per call (cached per allocation), in
 * any mix with host memory; gx stages it through pinned host memory and
 * never touches it with the CPU (docs/gpu.md). The *_stream forms take the
 * caller's CUDA stream (a CUstream / cudaStream_t passed as void *, NULL for
 * the legacy default stream) and return at once, as NCCL's calls do: the
 * exchange reads the buffers only after the work queued on `stream` before
 * the call, and work queued on `stream` after the call sees the result (the
 * stream waits for the exchange). Buffers belong to the stream until it gets
 * past the call. A failure of the exchange becomes the communicator's async
 * error (gx_comm_get_async_error; later calls fail with it). Argument errors
 * are returned at once. Synchronize the stream before finalizing the
 * communicator. Needs the CUDA driver (GX_CUDA_LIB), else GX_EUNSUPPORTED.
 * ------------------------------------------------------------------------ */
GX_API int gx_allreduce_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                               size_t count, enum gx_datatype dtype, enum gx_redop op,
                               void *stream);
GX_API int gx_broadcast_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                               size_t count, enum gx_datatype dtype, int root, void *stream);
GX_API int gx_reduce_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                            size_t count, enum gx_datatype dtype, enum gx_redop op, int root,
                            void *stream);
GX_API int gx_allgather_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                               size_t sendcount, enum gx_datatype dtype, void *stream);
GX_API int gx_reduce_scatter_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                                    size_t recvcount, enum gx_datatype dtype, enum gx_redop op,
                                    void *stream);
GX_API int gx_alltoall_stream(struct gx_comm *comm, const void *sendbuf, void *recvbuf,
                              size_t count, enum gx_datatype dtype, void *stream);

/** Device memory helpers for programs without CUDA headers (gx-perf
 *  --device, tests): the number of GPUs the driver sees (0 without one);
 *  select one for the calling thread (its primary context, as
 *  cudaSetDevice); allocate in the calling thread's context (else GPU 0's),
 *  free, and copy between any mix of host and device memory (synchronous). */
GX_API int gx_device_count(void);
GX_API int gx_device_select(int ordinal);
GX_API int gx_device_alloc(void **ptr, size_t bytes);
GX_API int gx_device_free(void *ptr);
GX_API int gx_device_copy(void *dst, const void *src, size_t bytes);

#include "gx/gx_ddp.h"
#include "gx/gx_win.h"
#include "gx/gx_rpc.h"

#ifdef __cplusplus
}
#endif

#endif /* GX_GX_H */
