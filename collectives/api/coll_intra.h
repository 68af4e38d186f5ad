/*
 * coll_intra.h - the intra-node engines for the collectives of one node's
 * ranks. Two implementations:
 *   - host: the engine's own schedules over shared memory (the node arena,
 *     collectives/arena/, and the shm provider), on host memory or on
 *     device buffers staged through pinned host memory (comm/stage.c);
 *     inside the hierarchical all-reduce its intra-node phases are schedule
 *     steps of an engine chosen per node (algorithms.h struct
 *     coll_node_engine: the node arena, algorithms/arena_node.c, or the ring
 *     of messages), so they pipeline with the rails;
 *   - device: one NCCL communicator per node (coll_intra_nccl.c, over
 *     gpudirect/gpu_nccl.h), made on first use with a unique id from the
 *     node's local rank 0 sent over gx's bootstrap, running the collective
 *     on the device buffers themselves.
 * coll_intra_try() picks the device engine for a blocking call when it
 * applies and says so; otherwise the caller runs the host engine as before.
 *
 * Room api/: called by coll_api.c; the per-comm state hangs off
 * gx_comm.intra and is closed by comm_init.c before the engine stops.
 */
#ifndef GX_COLL_INTRA_H
#define GX_COLL_INTRA_H

#include <stdbool.h>

#include "collectives/schedule/schedule.h"

struct gx_comm;

/** Run `a` (a blocking collective with valid-looking arguments) on the
 *  node's device engine when it applies: a one-node communicator of 2+
 *  ranks, a collective NCCL has (allreduce, broadcast, reduce, allgather,
 *  reduce-scatter) with its datatype and op, every buffer this rank uses
 *  device memory, GX_NCCL not off and the library there. *ran false: not
 *  applicable (nothing happened, the host engine runs it). *ran true: the
 *  status is the collective's. */
int coll_intra_try(struct gx_comm *comm, const struct coll_args *a, const char *fn, bool *ran);

/** Close the node's NCCL communicator (gx_coll_comm_destroy). */
void coll_intra_destroy(struct gx_comm *comm);

#endif
