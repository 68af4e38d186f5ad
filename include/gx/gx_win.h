/*
 * gx_win.h - one-sided windows: read and write other ranks' memory with no
 * code of theirs in the loop (included by gx.h; docs/rpc.md).
 *
 * A window exposes `size` bytes at `base` of every rank (a rank may expose
 * 0 bytes). Any rank then puts into, gets from, or accumulates into any
 * rank's window (itself included) at a byte `offset`, in elements of a gx
 * datatype. The target's own calls are never needed: over verbs the HCA
 * writes and reads the registered window (RDMA write/read, and its atomics
 * for single 8-byte integer sums when every rank has them); over shm the
 * origin copies straight into or out of the target's memory
 * (process_vm_writev/readv); over tcp and dpdk, and for accumulates, the
 * request travels as a message and the target's gx progress thread applies
 * it (GX_RPC_PROGRESS=thread, the default).
 *
 * Completion: gx_put and gx_accumulate return once `buf` may be reused; the
 * data is at the target after a gx_win_flush(win, target) (or the request
 * of the gx_i* form) completes, which also reports their errors. gx_get
 * returns with the data in `buf`. Operations from one origin are not
 * ordered with each other until a flush or their requests complete them.
 *
 * Atomicity: accumulates to the same element are atomic with respect to
 * each other (each element is updated by one of them at a time, whatever
 * their provider). Puts and gets are not atomic with respect to anything;
 * overlapping puts, or a put and an accumulate to the same bytes, leave an
 * undefined mix until both completed.
 *
 * Checks: an operation must fit inside the target's window and its target
 * address must be aligned to the datatype's size. Both are checked before
 * anything is sent and again by the target before it changes anything: a
 * violation fails with GX_EINVAL naming the rank, the window and the offset,
 * and writes nothing.
 */
#ifndef GX_GX_WIN_H
#define GX_GX_WIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gx_win;

/** gx_win_flush: every target. */
#define GX_WIN_ALL (-1)

/** Create a window over [base, base + size) of this rank. Collective over
 *  `comm`: every rank calls it, in the same order as its other window
 *  creations; it returns once every rank's window can be reached. `base`
 *  may be NULL when size is 0. The memory must stay valid until
 *  gx_win_free. */
GX_API int gx_win_create(struct gx_comm *comm, void *base, size_t size, struct gx_win **win);

/** Free a window. Collective: completes this rank's operations (as a flush
 *  does, returning their first error), then waits until every rank stopped
 *  using the window, then unregisters it. Safe with operations in flight:
 *  they complete first. NULL is ignored. */
GX_API int gx_win_free(struct gx_win *win);

/** Write `count` elements of `dtype` from `buf` to `target`'s window at byte
 *  `offset`. Returns once `buf` may be reused. */
GX_API int gx_put(struct gx_win *win, const void *buf, size_t count, enum gx_datatype dtype,
                  int target, size_t offset);
/** Read `count` elements from `target`'s window at `offset` into `buf`;
 *  returns with the data there. */
GX_API int gx_get(struct gx_win *win, void *buf, size_t count, enum gx_datatype dtype,
                  int target, size_t offset);
/** target[i] = target[i] `op` buf[i], atomically per element with respect
 *  to other accumulates. `op`: GX_SUM, GX_PROD, GX_MIN, GX_MAX or
 *  GX_REPLACE. Returns once `buf` may be reused. */
GX_API int gx_accumulate(struct gx_win *win, const void *buf, size_t count,
                         enum gx_datatype dtype, enum gx_redop op, int target, size_t offset);

/** Request forms: the request completes when the operation is complete at
 *  the target (for a get: the data is in `buf`); `buf` stays untouched
 *  until then. */
GX_API int gx_iput(struct gx_win *win, const void *buf, size_t count, enum gx_datatype dtype,
                   int target, size_t offset, struct gx_request **req);
GX_API int gx_iget(struct gx_win *win, void *buf, size_t count, enum gx_datatype dtype,
                   int target, size_t offset, struct gx_request **req);
GX_API int gx_iaccumulate(struct gx_win *win, const void *buf, size_t count,
                          enum gx_datatype dtype, enum gx_redop op, int target, size_t offset,
                          struct gx_request **req);

/** Complete every operation this rank started on `win` to `target`
 *  (GX_WIN_ALL: to every rank), locally and at the target, within the
 *  communicator's GX_TIMEOUT. Returns the first error of those operations
 *  not reported otherwise (a refusal by the target, a failed link). */
GX_API int gx_win_flush(struct gx_win *win, int target);

/** Bytes of this rank's window, and how operations to `target` travel
 *  ("self", "fabric", "am"; for diagnosis and tests), or NULL. */
GX_API size_t gx_win_size(const struct gx_win *win);
GX_API const char *gx_win_path(const struct gx_win *win, int target);

#ifdef __cplusplus
}
#endif

#endif
