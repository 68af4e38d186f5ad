/*
 * gpu_ipc.h - CUDA IPC memory handles (gpu_ipc.c): export a device
 * allocation of this process as a 64-byte handle another process on the same
 * node opens to address the same device memory (cuIpcGetMemHandle /
 * cuIpcOpenMemHandle / cuIpcCloseMemHandle through the loader's table).
 * The handle is plain bytes: send it over any channel (gx's bootstrap, a
 * pipe). Also the device-to-device copy GPUDirect RDMA schedules need.
 * Leaf service of gpudirect/, as gpudirect.h.
 */
#ifndef GX_GPUDIRECT_GPU_IPC_H
#define GX_GPUDIRECT_GPU_IPC_H

#include <stddef.h>

#define GX_GPU_IPC_HANDLE_SIZE 64

struct gx_gpu_ipc_handle {
    unsigned char bytes[GX_GPU_IPC_HANDLE_SIZE]; /* the driver's CUipcMemHandle */
    unsigned long long offset;                   /* of the exported pointer in its allocation */
    unsigned long long size;                     /* bytes from that pointer to the allocation's end */
};

/** Handle for the device allocation holding `dev` (any pointer inside it:
 *  the handle names the allocation, offset says where `dev` lies). Made in
 *  the allocation's own context. GX_EINVAL for host memory; GX_EUNSUPPORTED
 *  (naming the entry point) when the driver has no IPC; GX_ESYSTEM with the
 *  driver's error otherwise. */
int gx_gpu_ipc_export(const void *dev, struct gx_gpu_ipc_handle *out);

/** Open a handle exported by another process in the calling thread's
 *  current context (cudaSetDevice's; else GPU 0's primary one). *dev is the
 *  exported pointer (the mapping's base + offset); *base is what to close.
 *  Opening a handle in the process that exported it fails (as the driver
 *  says: use the pointer itself there). */
int gx_gpu_ipc_open(const struct gx_gpu_ipc_handle *h, void **dev, void **base);

/** Unmap what gx_gpu_ipc_open returned as *base. */
int gx_gpu_ipc_close(void *base);

#endif
