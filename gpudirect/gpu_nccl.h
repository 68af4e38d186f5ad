/*
 * gpu_nccl.h - NCCL communicators for intra-node collectives on device
 * buffers (nccl_comm.c): the library through nccl_api.h (dlopen,
 * GX_NCCL_LIB), GX_NCCL, a communicator with its own CUDA stream, and
 * collectives that are polled under gx's deadline (cuStreamQuery and
 * ncclCommGetAsyncError) and aborted with ncclCommAbort when it passes, so a
 * failed or hung NCCL call is a named gx error, never a hang.
 * Used by collectives/api/coll_intra_nccl.c; no NCCL or CUDA type leaks
 * out of gpudirect/.
 */
#ifndef GX_GPUDIRECT_GPU_NCCL_H
#define GX_GPUDIRECT_GPU_NCCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gx/gx.h"

#define GX_NCCL_ID_BYTES 128 /* sizeof(ncclUniqueId) */

/** Whether NCCL may run device collectives: GX_NCCL (auto|on|off) is not off,
 *  the library loads with every entry point, and the CUDA driver is there.
 *  False with the reason. GX_NCCL=on makes a missing library an error for
 *  the caller to report (*required set). */
bool gx_nccl_usable(bool *required, char *why, size_t why_len);

/** Whether NCCL has `dtype` and `op` (GX_REDOP_COUNT: no reduction). */
bool gx_nccl_supports(enum gx_datatype dtype, enum gx_redop op);

/** ncclGetUniqueId into `id` (GX_NCCL_ID_BYTES). */
int gx_nccl_unique_id(void *id);

struct gx_nccl;

/** ncclCommInitRank for `rank` of `nranks` with `id`, on the device (and
 *  context) of `dev_hint`, with a stream of its own; `name` names it in
 *  every error. Waits until `deadline` (gx_now_ns) at most: an init that
 *  hangs is abandoned (GX_ETIMEOUT). */
int gx_nccl_open(const void *id, int nranks, int rank, const void *dev_hint, const char *name,
                 uint64_t deadline, struct gx_nccl **out);

enum gx_nccl_kind {
    GX_NCCL_ALLREDUCE,
    GX_NCCL_BROADCAST,
    GX_NCCL_REDUCE,
    GX_NCCL_ALLGATHER,
    GX_NCCL_REDUCE_SCATTER,
};

/** One NCCL collective: counts as NCCL takes them (allgather: sendcount,
 *  reduce-scatter: recvcount). */
struct gx_nccl_call {
    enum gx_nccl_kind kind;
    const void *send;
    void *recv;
    size_t count;
    enum gx_datatype dtype;
    enum gx_redop op;
    int root;
};

/** Run `n` calls as one NCCL group on the communicator's stream and wait for
 *  them until `deadline`: an NCCL error is GX_ESYSTEM naming NCCL, the call
 *  and the communicator; a deadline that passes aborts the communicator
 *  (ncclCommAbort) and is GX_ETIMEOUT naming it. After either the
 *  communicator is broken: every later run fails at once. `watch` (may be
 *  NULL) lets the caller end the wait early (a peer known dead). */
struct gx_nccl_watch {
    /* Called every few milliseconds while a call is pending: GX_OK, or an
     * error already reported with gx_fail (a peer gone): the communicator is
     * then aborted and the call fails with that status. NULL: none. */
    int (*check)(void *arg);
    void *arg;
};
int gx_nccl_run(struct gx_nccl *c, const struct gx_nccl_call *calls, int n, uint64_t deadline,
                int timeout_ms, const struct gx_nccl_watch *watch);

/** ncclCommDestroy (ncclCommAbort when broken), the stream, the memory. */
void gx_nccl_close(struct gx_nccl *c);

#endif
