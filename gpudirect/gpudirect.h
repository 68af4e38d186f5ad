/*
 * gpudirect.h - GPU memory facts the fabric providers need (leaf service).
 *
 * Owns: the memory-type query (the CUDA driver opened with dlopen, so gx runs
 * without it: no driver means every pointer is host memory), dmabuf export
 * of device memory, nvidia-peermem detection, GX_NET_GDR_LEVEL, and the
 * per-NIC verdict "is GPUDirect RDMA usable here, and if not exactly why"
 * that gx-info prints and the verbs provider logs.
 * Must not touch: fabric/, topology/ internals (path classes come in as the
 * public enum gx_topo_path), anything that needs a GPU at build time.
 */
#ifndef GX_GPUDIRECT_GPUDIRECT_H
#define GX_GPUDIRECT_GPUDIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gx/gx.h"
#include "gx/gx_topo.h"

enum gx_gpu_mem {
    GX_GPU_MEM_HOST = 0,
    GX_GPU_MEM_CUDA = 1,
};

/** Load the CUDA driver (libcuda.so.1) once. False with the reason when it
 *  is missing or has no device; never an error. */
bool gx_gpu_driver_available(char *why, size_t why_len);

/** Memory type of `ptr`: CUDA device memory, or host (also when no driver). */
enum gx_gpu_mem gx_gpu_mem_type(const void *ptr);

/** True when the nvidia-peermem (or legacy nv_peer_mem) kernel module is
 *  loaded, so ibv_reg_mr() accepts device pointers. `why` says what was
 *  checked. GX_GDR_SYSFS_ROOT (tests) prefixes the /sys and /proc paths. */
bool gx_gpu_peermem_loaded(char *why, size_t why_len);

/** A dmabuf fd and offset for device memory [ptr, ptr+len) (CUDA >= 11.7
 *  driver, cuMemGetHandleForAddressRange). GX_EUNSUPPORTED with a logged
 *  reason when not possible. The caller closes the fd. */
int gx_gpu_dmabuf_export(const void *ptr, size_t len, int *fd, uint64_t *offset);

/** GX_NET_GDR_LEVEL as the farthest path class GPUDirect RDMA may cross
 *  (default PXB, as NCCL). GX_EINVAL for a bad value. */
int gx_gpu_gdr_level(enum gx_topo_path *out);
const char *gx_gpu_path_name(enum gx_topo_path p);

/** What one NIC offers for GPUDirect RDMA. */
struct gx_gdr_nic {
    const char *name;          /* "mlx5_0:1" */
    int dmabuf;                /* ibv_reg_dmabuf_mr probe: 1 yes, 0 no, -1 unknown */
    enum gx_topo_path path;    /* GPU to NIC; GX_TOPO_PATH_UNKNOWN when not known */
};

/** How device memory would be registered on a NIC. */
enum gx_gdr_method {
    GX_GDR_NONE = 0,   /* not usable: stage through host memory */
    GX_GDR_DMABUF = 1, /* ibv_reg_dmabuf_mr with an exported fd */
    GX_GDR_PEERMEM = 2 /* ibv_reg_mr on the device pointer (nvidia-peermem) */
};

/** Decide the method for `nic` and explain it in `why` (one line): gathers
 *  the driver, GX_NET_GDR_LEVEL and peermem facts, then gx_gdr_verdict(). */
enum gx_gdr_method gx_gdr_decide(const struct gx_gdr_nic *nic, char *why, size_t why_len);

/** Every fact the verdict depends on, so a test can give any combination. */
struct gx_gdr_inputs {
    const char *nic;           /* "mlx5_0:1" */
    bool driver;               /* a CUDA driver with a GPU */
    const char *driver_why;    /* why not, when !driver */
    bool level_valid;          /* GX_NET_GDR_LEVEL parsed */
    enum gx_topo_path level;   /* farthest path allowed */
    enum gx_topo_path path;    /* GPU to NIC; GX_TOPO_PATH_UNKNOWN when not known */
    int dmabuf;                /* 1 yes, 0 no, -1 unknown */
    bool peermem;              /* nvidia-peermem loaded */
    const char *peermem_why;   /* what was checked */
};

/** The decision table, pure: no driver -> none; bad level -> none; level LOC
 *  -> none unless the path is SELF; a known path farther than the level ->
 *  none; else dmabuf when supported, else peermem when loaded, else none.
 *  An unknown path is allowed (gx built without hwloc) and said so. */
enum gx_gdr_method gx_gdr_verdict(const struct gx_gdr_inputs *in, char *why, size_t why_len);

#endif
