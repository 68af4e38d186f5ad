/*
 * cuda_loader.h - the CUDA driver API as gx uses it, loaded at run time.
 *
 * Owns: the few driver types and constants gx needs (declared here: they are
 * an ABI fact of libcuda, so building needs no CUDA headers), the table of
 * entry points and the one place that opens libcuda (GX_CUDA_LIB overrides
 * "libcuda.so.1"). Entry points are resolved with cuGetProcAddress by
 * version, so gx gets cuMemAlloc_v2 and friends, never the legacy v1 names.
 * Must not touch: anything above gpudirect/; libcudart (never linked).
 * Private to gpudirect/: the rest of gx uses gpudirect.h.
 */
#ifndef GX_GPUDIRECT_CUDA_LOADER_H
#define GX_GPUDIRECT_CUDA_LOADER_H

#include <stdbool.h>
#include <stddef.h>

typedef int gx_cu_result;                  /* CUresult */
typedef unsigned long long gx_cu_deviceptr; /* CUdeviceptr (64-bit) */
typedef int gx_cu_device;                  /* CUdevice */
typedef struct gx_cu_ctx_st *gx_cu_ctx;     /* CUcontext */
typedef struct gx_cu_stream_st *gx_cu_stream; /* CUstream */
typedef struct gx_cu_event_st *gx_cu_event; /* CUevent */
typedef struct gx_cu_module_st *gx_cu_module; /* CUmodule (branch kernels) */
typedef struct gx_cu_func_st *gx_cu_function; /* CUfunction (branch kernels) */
typedef struct { unsigned char data[64]; } gx_cu_ipc_mem_handle; /* CUipcMemHandle */

#define GX_CU_SUCCESS 0
#define GX_CU_ERROR_NOT_READY 600
#define GX_CU_PTR_ATTR_CONTEXT 1
#define GX_CU_PTR_ATTR_MEMORY_TYPE 2
#define GX_CU_PTR_ATTR_BUFFER_ID 7
#define GX_CU_PTR_ATTR_IS_MANAGED 8
#define GX_CU_PTR_ATTR_DEVICE_ORDINAL 9
#define GX_CU_PTR_ATTR_RANGE_START 11
#define GX_CU_PTR_ATTR_RANGE_SIZE 12
#define GX_CU_MEMORYTYPE_HOST 1
#define GX_CU_MEMORYTYPE_DEVICE 2
#define GX_CU_MEMHOSTALLOC_PORTABLE 1
#define GX_CU_STREAM_NON_BLOCKING 1
#define GX_CU_EVENT_DISABLE_TIMING 2
#define GX_CU_DMA_BUF_FD 1 /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */

/* One row per entry point: field, the base name given to cuGetProcAddress,
 * the CUDA version whose ABI gx was written against (selects the _v2
 * variants), whether gx can run without it. */
#define GX_CU_ENTRY_POINTS(X)                                                                    \
    X(init, "cuInit", 2000, true, gx_cu_result, (unsigned flags))                                 \
    X(driver_get_version, "cuDriverGetVersion", 2020, true, gx_cu_result, (int *version))         \
    X(device_get_count, "cuDeviceGetCount", 2000, true, gx_cu_result, (int *count))               \
    X(device_get, "cuDeviceGet", 2000, true, gx_cu_result, (gx_cu_device *dev, int ordinal))      \
    X(device_get_name, "cuDeviceGetName", 2000, true, gx_cu_result,                               \
      (char *name, int len, gx_cu_device dev))                                                    \
    X(device_total_mem, "cuDeviceTotalMem", 3020, true, gx_cu_result,                             \
      (size_t *bytes, gx_cu_device dev))                                                          \
    X(device_get_pci_bus_id, "cuDeviceGetPCIBusId", 4010, false, gx_cu_result,                    \
      (char *bus, int len, gx_cu_device dev))                                                     \
    X(primary_ctx_retain, "cuDevicePrimaryCtxRetain", 7000, true, gx_cu_result,                   \
      (gx_cu_ctx *ctx, gx_cu_device dev))                                                         \
    X(primary_ctx_get_state, "cuDevicePrimaryCtxGetState", 7000, true, gx_cu_result,             \
      (gx_cu_device dev, unsigned *flags, int *active))                                           \
    X(ctx_get_current, "cuCtxGetCurrent", 4000, true, gx_cu_result, (gx_cu_ctx *ctx))             \
    X(ctx_set_current, "cuCtxSetCurrent", 4000, true, gx_cu_result, (gx_cu_ctx ctx))              \
    X(ctx_push, "cuCtxPushCurrent", 4000, true, gx_cu_result, (gx_cu_ctx ctx))                    \
    X(ctx_pop, "cuCtxPopCurrent", 4000, true, gx_cu_result, (gx_cu_ctx *ctx))                     \
    X(pointer_get_attributes, "cuPointerGetAttributes", 7000, true, gx_cu_result,                 \
      (unsigned n, int *attrs, void **data, gx_cu_deviceptr ptr))                                 \
    X(pointer_get_attribute, "cuPointerGetAttribute", 4000, true, gx_cu_result,                   \
      (void *data, int attr, gx_cu_deviceptr ptr))                                                \
    X(mem_alloc, "cuMemAlloc", 3020, true, gx_cu_result, (gx_cu_deviceptr *p, size_t bytes))      \
    X(mem_free, "cuMemFree", 3020, true, gx_cu_result, (gx_cu_deviceptr p))                       \
    X(mem_host_alloc, "cuMemHostAlloc", 3020, true, gx_cu_result,                                 \
      (void **p, size_t bytes, unsigned flags))                                                   \
    X(mem_free_host, "cuMemFreeHost", 2000, true, gx_cu_result, (void *p))                        \
    X(memcpy_dtoh, "cuMemcpyDtoH", 3020, true, gx_cu_result,                                      \
      (void *dst, gx_cu_deviceptr src, size_t bytes))                                             \
    X(memcpy_htod, "cuMemcpyHtoD", 3020, true, gx_cu_result,                                      \
      (gx_cu_deviceptr dst, const void *src, size_t bytes))                                       \
    X(memcpy_dtoh_async, "cuMemcpyDtoHAsync", 3020, true, gx_cu_result,                           \
      (void *dst, gx_cu_deviceptr src, size_t bytes, gx_cu_stream s))                             \
    X(memcpy_htod_async, "cuMemcpyHtoDAsync", 3020, true, gx_cu_result,                           \
      (gx_cu_deviceptr dst, const void *src, size_t bytes, gx_cu_stream s))                       \
    X(stream_create, "cuStreamCreate", 2000, true, gx_cu_result,                                  \
      (gx_cu_stream *s, unsigned flags))                                                          \
    X(stream_destroy, "cuStreamDestroy", 4000, true, gx_cu_result, (gx_cu_stream s))              \
    X(stream_synchronize, "cuStreamSynchronize", 2000, true, gx_cu_result, (gx_cu_stream s))      \
    X(stream_wait_event, "cuStreamWaitEvent", 3020, true, gx_cu_result,                           \
      (gx_cu_stream s, gx_cu_event e, unsigned flags))                                            \
    X(event_create, "cuEventCreate", 2000, true, gx_cu_result, (gx_cu_event *e, unsigned flags))  \
    X(event_record, "cuEventRecord", 2000, true, gx_cu_result, (gx_cu_event e, gx_cu_stream s))   \
    X(event_synchronize, "cuEventSynchronize", 2000, true, gx_cu_result, (gx_cu_event e))         \
    X(event_query, "cuEventQuery", 2000, true, gx_cu_result, (gx_cu_event e))                     \
    X(event_destroy, "cuEventDestroy", 4000, true, gx_cu_result, (gx_cu_event e))                 \
    X(mem_get_handle_for_address_range, "cuMemGetHandleForAddressRange", 11070, false,            \
      gx_cu_result, (void *handle, gx_cu_deviceptr p, size_t bytes, int type,                     \
                     unsigned long long flags))                                                   \
    X(launch_host_func, "cuLaunchHostFunc", 10000, false, gx_cu_result,                          \
      (gx_cu_stream s, void (*fn)(void *), void *arg))                                            \
    X(get_error_name, "cuGetErrorName", 6000, false, gx_cu_result, (gx_cu_result r, const char **s)) \
    /* nccl branch: polling the NCCL communicator's stream under a deadline */                    \
    X(stream_query, "cuStreamQuery", 2000, false, gx_cu_result, (gx_cu_stream s)) \
    /* branch kernels: CUDA reduction kernels (gpu_reduce.c), optional */                       \
    X(module_load_data, "cuModuleLoadData", 2000, false, gx_cu_result,                          \
      (gx_cu_module *m, const void *image))                                                     \
    X(module_get_function, "cuModuleGetFunction", 2000, false, gx_cu_result,                    \
      (gx_cu_function *f, gx_cu_module m, const char *name))                                    \
    X(launch_kernel, "cuLaunchKernel", 4000, false, gx_cu_result,                               \
      (gx_cu_function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,       \
       unsigned bz, unsigned shared, gx_cu_stream s, void **params, void **extra))              \
    X(module_unload, "cuModuleUnload", 2000, false, gx_cu_result, (gx_cu_module m)) \
    /* branch gdr: CUDA IPC handles (gpu_ipc.c), device-to-device copies */                    \
    X(ipc_get_mem_handle, "cuIpcGetMemHandle", 4010, false, gx_cu_result,                      \
      (gx_cu_ipc_mem_handle *h, gx_cu_deviceptr p))                                             \
    X(ipc_open_mem_handle, "cuIpcOpenMemHandle", 11000, false, gx_cu_result,                   \
      (gx_cu_deviceptr *p, gx_cu_ipc_mem_handle h, unsigned flags))                             \
    X(ipc_close_mem_handle, "cuIpcCloseMemHandle", 4010, false, gx_cu_result,                  \
      (gx_cu_deviceptr p))                                                                      \
    X(memcpy_dtod, "cuMemcpyDtoD", 3020, false, gx_cu_result,                                  \
      (gx_cu_deviceptr dst, gx_cu_deviceptr src, size_t bytes)) \
    /* branch plugs: DDP's device buckets (gpu_stream_copy.c) */                                  \
    X(memcpy_dtod_async, "cuMemcpyDtoDAsync", 3020, false, gx_cu_result,                          \
      (gx_cu_deviceptr dst, gx_cu_deviceptr src, size_t bytes, gx_cu_stream s))

struct gx_cu {
#define GX_CU_FIELD(field, name, ver, req, ret, args) ret(*field) args;
    GX_CU_ENTRY_POINTS(GX_CU_FIELD)
#undef GX_CU_FIELD
    int driver_version; /* e.g. 12040, 0 when unknown */
    int device_count;
    char lib[256];      /* the path that was opened */
};

/** The loaded driver, or NULL with the reason in `why` (the library or the
 *  entry point that is missing, cuInit's error, or "no GPU"). Thread-safe;
 *  loads once per process. */
const struct gx_cu *gx_cu_get(char *why, size_t why_len);

/** Make `ctx` current on this thread, for `what` (named in the error); undo
 *  with gx_cu_pop(). NULL: the context already current on this thread (the
 *  device the caller chose with cudaSetDevice), else GPU 0's primary one. */
int gx_cu_push(const struct gx_cu *c, void *ctx, const char *what);
void gx_cu_pop(const struct gx_cu *c);

/** Make a context that already exists current (the calling thread's, else
 *  the first active primary context), so a driver call that wants one works
 *  without creating a context on a GPU the process does not use. GX_OK and
 *  pushed (undo with gx_cu_pop), or GX_ESYSTEM when there is none. */
int gx_cu_push_existing(const struct gx_cu *c);

/** "CUDA_ERROR_INVALID_VALUE (1)" for a driver result. */
const char *gx_cu_errstr(gx_cu_result r, char *buf, size_t len);

#endif
