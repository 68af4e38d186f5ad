/*
 * gpudirect.h - GPU memory facts the fabric providers need (leaf service).
 *
 * Owns: the memory-type query (the CUDA driver opened with dlopen by
 * cuda_loader.c, so gx runs without it: no driver means every pointer is
 * host memory), copies between device and pinned host memory, the pinned
 * staging pool, copies, events and host functions queued on the caller's
 * stream, dmabuf export of device memory, nvidia-peermem detection,
 * GX_NET_GDR_LEVEL, and the per-NIC verdict "is GPUDirect RDMA usable
 * here, and if not exactly why" that gx-info prints and the verbs provider
 * logs.
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

/** Load the CUDA driver (GX_CUDA_LIB, default libcuda.so.1) once. False with
 *  the reason ("no libcuda: ...", a missing entry point, no GPU) when it
 *  cannot be used; never an error. */
bool gx_gpu_driver_available(char *why, size_t why_len);

/** What the driver says about one pointer. */
struct gx_gpu_ptr {
    enum gx_gpu_mem type;   /* CUDA: device memory the CPU must not touch */
    int device;             /* ordinal, -1 for host memory */
    void *ctx;              /* the CUcontext it belongs to */
    uintptr_t base;         /* the allocation holding it */
    size_t size;
    unsigned long long id;  /* the driver's buffer id (unique per allocation) */
};

/** Memory type of `ptr`, from any thread (no current context needed), cached
 *  per allocation: a cached range is trusted after one cheap buffer-id check,
 *  so a freed and reused address is seen. Host memory (also managed memory,
 *  which the CPU may touch, and every pointer when there is no driver) gives
 *  type HOST. A driver error is an error (GX_ESYSTEM naming ptr), never
 *  "host". */
int gx_gpu_ptr_query(const void *ptr, struct gx_gpu_ptr *out);

/** gx_gpu_ptr_query's type; HOST also when the query fails (logged). */
enum gx_gpu_mem gx_gpu_mem_type(const void *ptr);

/** Forget cached ranges (tests; after freeing device memory gx was given). */
void gx_gpu_cache_flush(void);
/** Cache hits and misses so far (tests and gx-info). */
void gx_gpu_cache_stats(unsigned long long *hits, unsigned long long *misses);

/** Synchronous copies between device memory and host memory; the device
 *  side's context is made current for the copy (any thread may call). */
int gx_gpu_copy_dtoh(void *host, const void *dev, size_t len);
int gx_gpu_copy_htod(void *dev, const void *host, size_t len);
/** Synchronous copy between two device buffers (cuMemcpyDtoD in dst's
 *  context). */
int gx_gpu_copy_dtod(void *dst, const void *src, size_t len);

/** Pinned host memory for staging, from a pool (GX_GPU_STAGE_POOL caps what
 *  it keeps between calls). Allocated in the context of `dev_hint` (the
 *  device buffer it stands in for; NULL: the calling thread's context, else
 *  GPU 0's), portable to every context. *cap receives the block's size;
 *  give it back with put. */
void *gx_gpu_pinned_get(size_t len, const void *dev_hint, size_t *cap);
void gx_gpu_pinned_put(void *p, size_t cap);

/* Stream-ordered staging for the stream API: everything is queued on the
 * caller's stream (`user_stream`, a CUstream; NULL: the legacy default
 * stream) and returns at once. */
/** Block until all work already queued on `user_stream` has finished.
 *  `dev_hint` picks the context when it is device memory (else, as NULL:
 *  the calling thread's). */
int gx_gpu_stream_wait(void *user_stream, const void *dev_hint);
/** Queue dev -> host (pinned) on `user_stream`. */
int gx_gpu_stream_copy_dtoh(void *user_stream, void *host, const void *dev, size_t len);
/** Queue host (pinned) -> dev on `user_stream`, then an event: *fence, which
 *  gx_gpu_pinned_put_after waits for before reusing the host block. */
int gx_gpu_stream_copy_htod(void *user_stream, void *dev, const void *host, size_t len,
                            void **fence);
/** An event recorded on `user_stream` now: *fence for gx_gpu_pinned_put_after
 *  of a block the stream still uses (a stand-in its queued copy fills). */
int gx_gpu_stream_fence(void *user_stream, const void *dev_hint, void **fence);
/** Queue `fn(arg)` on `user_stream` (cuLaunchHostFunc): it runs on the
 *  driver's thread once the work before it is done, and later work waits
 *  for it to return. `fn` must make no CUDA call. */
int gx_gpu_stream_host_fn(void *user_stream, const void *dev_hint, void (*fn)(void *),
                          void *arg);
void gx_gpu_pinned_put_after(void *p, size_t cap, void *fence);

/** The NCCL library (GX_NCCL_LIB, default libnccl.so.2): its version code
 *  (NCCL_VERSION_CODE, e.g. 22809), or 0; `why` says which and where, or
 *  why none ("no libnccl: ..."). Reported by gx-info; not used otherwise. */
int gx_nccl_version(char *why, size_t why_len);

/** Device facts for gx-info. */
int gx_gpu_device_count(void);
int gx_gpu_driver_version(void);
int gx_gpu_device_describe(int ordinal, char *name, size_t name_len, char *bus, size_t bus_len,
                           size_t *mem_bytes);

/** Make GPU `ordinal`'s primary context current on the calling thread (as
 *  cudaSetDevice). */
int gx_gpu_select(int ordinal);

/** Device memory in the calling thread's context (else GPU 0's primary
 *  one), for tools and tests. */
int gx_gpu_alloc(void **dev, size_t len);
int gx_gpu_free(void *dev);

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
