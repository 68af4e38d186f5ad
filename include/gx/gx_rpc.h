/*
 * gx_rpc.h - remote calls: run a registered handler on another rank and get
 * its result (included by gx.h; docs/rpc.md).
 *
 * A rank registers handlers by number (gx_rpc_register); any rank of the
 * communicator, itself included, calls one with arguments of any size and
 * gets a status and a result of any size. Handlers run on the target's gx
 * threads (GX_RPC_PROGRESS=thread, GX_RPC_THREADS of them, so several calls
 * run at once and a handler may itself call out), or only inside the
 * target's own gx_rpc_progress / gx_wait / gx_test (GX_RPC_PROGRESS=caller).
 * Calls are accepted only over the communicator's connections, each of
 * which proved the job key (docs/security.md).
 *
 * Every call has a deadline (opts.timeout_ms, else the communicator's
 * GX_TIMEOUT): it fails with GX_ETIMEOUT then, whatever the target does
 * (a late result is dropped). A target that dies, or whose link breaks,
 * fails every call pending there with a status naming it. A handler's
 * failure status comes back to the caller, with the text it gave
 * gx_rpc_reply. Such failures concern one call only: the communicator stays
 * usable.
 */
#ifndef GX_GX_RPC_H
#define GX_GX_RPC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gx_rpc_ctx; /* one call being handled */

/** A handler: `args` (`len` bytes, valid until it returns). Return GX_OK,
 *  or a negative status that the caller gets back. Answer with
 *  gx_rpc_reply (else the result is empty). */
typedef int (*gx_rpc_handler)(struct gx_rpc_ctx *ctx, const void *args, size_t len, void *user);

/** Register `fn` (with `user`) as handler `id` of this rank; fn NULL removes
 *  it. Calls of an id nobody registered fail with GX_EINVAL. Starts the
 *  rank's gx threads (GX_RPC_PROGRESS=thread). Local: no other rank takes
 *  part. */
GX_API int gx_rpc_register(struct gx_comm *comm, uint32_t id, gx_rpc_handler fn, void *user);

/** Inside a handler: the calling rank, and the communicator. */
GX_API int gx_rpc_caller(const struct gx_rpc_ctx *ctx);
GX_API struct gx_comm *gx_rpc_comm(const struct gx_rpc_ctx *ctx);
/** Inside a handler: the result (copied; any size; a later call replaces
 *  it). When the handler fails, this is the message the caller gets. */
GX_API int gx_rpc_reply(struct gx_rpc_ctx *ctx, const void *result, size_t len);
/** Inside a handler: the result as a buffer of `len` bytes (*buf) that the
 *  handler fills in place, saving gx_rpc_reply's copy; valid until the
 *  handler returns or replies again (which replaces it). */
GX_API int gx_rpc_reply_buffer(struct gx_rpc_ctx *ctx, size_t len, void **buf);

/** Options of one call; start from GX_RPC_OPTS_INIT. */
struct gx_rpc_opts {
    size_t size;      /**< sizeof(struct gx_rpc_opts): set by GX_RPC_OPTS_INIT */
    int timeout_ms;   /**< the call's deadline from now; <= 0: the communicator's GX_TIMEOUT */
    /** gx_rpc_call_async only: called once when the call completed (done,
     *  failed or timed out), on a gx thread or inside gx_wait/gx_test/
     *  gx_rpc_progress; the request then belongs to the callback, which
     *  takes the result (gx_rpc_result) and frees it (gx_request_free). */
    void (*on_done)(struct gx_request *req, void *user);
    void *user;
};
#define GX_RPC_OPTS_INIT { sizeof(struct gx_rpc_opts), 0, NULL, NULL }

/** Call handler `id` on `rank` with `len` bytes of `args` and wait for it.
 *  On GX_OK, *result (may be NULL when the result is empty; free it with
 *  gx_rpc_free) holds *result_len bytes. `opts` may be NULL. */
GX_API int gx_rpc_call(struct gx_comm *comm, int rank, uint32_t id, const void *args, size_t len,
                       void **result, size_t *result_len, const struct gx_rpc_opts *opts);
/** The same without waiting: a request for gx_wait/gx_test (or on_done).
 *  `args` must stay valid until the request is freed. */
GX_API int gx_rpc_call_async(struct gx_comm *comm, int rank, uint32_t id, const void *args,
                             size_t len, const struct gx_rpc_opts *opts, struct gx_request **req);
/** A completed call's status, and on GX_OK its result (moved to the caller:
 *  free with gx_rpc_free). */
GX_API int gx_rpc_result(struct gx_request *req, void **result, size_t *result_len);
GX_API void gx_rpc_free(void *result);

/** Serve this rank's arrived calls and call completions now (for
 *  GX_RPC_PROGRESS=caller; harmless otherwise). Returns how many ran, or a
 *  negative status. */
GX_API int gx_rpc_progress(struct gx_comm *comm);

#ifdef __cplusplus
}
#endif

#endif
