/*
 * topo.h - the topology service as the rest of gx uses it (internal).
 *
 * Owns: discovery (hwloc, or a round-robin fallback in builds without it),
 * the GX_TOPO_FILE / GX_TOPO_DUMP / GX_BIND / GX_IB_HCA parameters, rank
 * placement and CPU binding. Must not touch: fabric/, collectives/.
 *
 * Typical use by the communicator at init, once per process:
 *
 *     struct gx_topo *topo;
 *     struct gx_topo_placement pl = GX_TOPO_PLACEMENT_INIT;
 *     rc = gx_topo_open(&topo);                       // probe or GX_TOPO_FILE
 *     rc = gx_topo_place_rank(topo, local_rank, local_size, GX_TOPO_GPU_AUTO, &pl);
 *     rc = gx_topo_bind(&pl);                         // GX_BIND=auto|numa|none
 *     // verbs provider: open pl.nic_names[0] (port pl.nic_ports[0]), and the
 *     // further pl.nic_names[1..nic_count-1] as extra rails if it can.
 *     gx_topo_free(topo);
 *
 * Placement is a pure function of (topology, local_size, every rank's GPU,
 * GX_IB_HCA), so every local rank computes the same table without talking to
 * the others. When ranks know their GPUs exactly (e.g. PCI bus ids exchanged
 * at bootstrap), pass them all to gx_topo_place() instead.
 */
#ifndef GX_TOPOLOGY_TOPO_H
#define GX_TOPOLOGY_TOPO_H

#include "gx/gx.h"
#include "gx/gx_topo.h"

#include "topology/hca_filter.h"

/** gpu argument of gx_topo_place_rank(): take it from CUDA_VISIBLE_DEVICES
 *  and the local rank (see gx_topo_gpu_for_rank()). */
#define GX_TOPO_GPU_AUTO (-2)

/** gx_topo_load(NULL, out): GX_TOPO_FILE when set, else probe. */
int gx_topo_open(struct gx_topo **out);

/**
 * This rank's GPU index when the caller does not know it: -1 on a machine
 * without GPUs; with CUDA_VISIBLE_DEVICES set to a list of indices, entry
 * (local_rank mod length) of the list, or the only entry when the launcher
 * gave each rank one GPU; otherwise local_rank mod #GPUs. An empty
 * CUDA_VISIBLE_DEVICES means no GPU (-1). Entries that are GPU UUIDs cannot
 * be mapped without CUDA: local_rank mod #GPUs is used and an info line says
 * so.
 */
int gx_topo_gpu_for_rank(const struct gx_topo *topo, int local_rank, int *gpu_out);

/**
 * Place this rank: computes the placement of all local_size ranks (this
 * rank's GPU as given, the other ranks on their default GPUs, see
 * gx_topo_place()) and returns entry local_rank. gpu: an index, -1 for none,
 * or GX_TOPO_GPU_AUTO. Logs the choice at info level (GX_DEBUG=info).
 */
int gx_topo_place_rank(const struct gx_topo *topo, int local_rank, int local_size, int gpu,
                       struct gx_topo_placement *out);

/** GPU index with this PCI bus id ("0000:17:00.0", case-insensitive;
 *  "00000000:17:00.0" as CUDA prints it is accepted too). */
int gx_topo_gpu_by_busid(const struct gx_topo *topo, const char *busid, int *gpu_out);

/**
 * Bind the calling thread (and so the threads it creates later) to the
 * placement's CPU set, as GX_BIND says: "none" does nothing; "auto" (the
 * default) binds unless the process is already restricted to fewer CPUs
 * than it could use (a launcher such as srun --cpu-bind or numactl chose),
 * or the placement has no CPU set. A CPU set the machine does not have
 * (a GX_TOPO_FILE from another machine) is a warning, not an error.
 */
int gx_topo_bind(const struct gx_topo_placement *placement);

/**
 * Share a placement's CPU set among the `m` local ranks placed on the same
 * set, this one being the `k`-th of them (GX_BIND=auto): when m is at most
 * the set's CPU count, keep only the CPUs at list positions p with
 * p % m == k (so ranks never migrate onto each other's CPUs, and with the
 * usual numbering an SMT sibling stays with its core); otherwise, and with
 * GX_BIND=numa or none, leave the set alone. GX_EINVAL for a malformed set.
 */
int gx_topo_share_cpus(struct gx_topo_placement *placement, int k, int m);

#endif
