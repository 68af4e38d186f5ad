/*
 * gpu_reduce.h - element-wise reductions on the GPU with gx's own CUDA
 * kernels (gpudirect/kernels/gx_reduce.cu, embedded in libgx as a fatbin
 * when nvcc was there at build time; loaded with cuModuleLoadData, one
 * module per CUDA context, kept for the life of the process).
 *
 * Owns: GX_GPU_REDUCE (auto|gpu|cpu), the embedded image, the per-context
 * module cache, the launches. Semantics per datatype x op are those of
 * collectives/reduce/reduce.h (gpudirect/kernels/gx_kernel_ops.h says the
 * one difference: the payload of a NaN that sum/prod/avg arithmetic makes).
 * Must not touch: anything above gpudirect/. Never required at run time:
 * without kernels or a driver, callers reduce on the CPU.
 */
#ifndef GX_GPUDIRECT_GPU_REDUCE_H
#define GX_GPUDIRECT_GPU_REDUCE_H

#include <stdbool.h>
#include <stddef.h>

#include "gx/gx.h"

/** dst[i] = a[i] OP b[i] for i < count, on the GPU. dst, a, b: device
 *  memory or mapped pinned host memory (cuMemHostAlloc, e.g. gx's staging
 *  pool); dst may equal a or b (not partially overlap). GX_AVG adds (finish
 *  with gx_gpu_reduce_finish_avg). The kernel runs in the context of the
 *  first device buffer among dst, a, b (else the calling thread's). `stream`
 *  NULL: launched on the legacy stream and waited for before returning;
 *  otherwise queued on that CUstream, ordered after prior work there, and the
 *  call returns at once. Errors (GX_EUNSUPPORTED: no driver or no kernels;
 *  GX_ESYSTEM) name the kernel and the CUDA error. count 0 does nothing. */
int gx_gpu_reduce(void *dst, const void *a, const void *b, size_t count,
                  enum gx_datatype dtype, enum gx_redop op, void *stream);

/** One reduction step of a collective on a staged device buffer (the
 *  engine's, GX_GPU_REDUCE): dev_dst = A OP B on the GPU, then the result
 *  copied into host_dst (the pinned stand-in, which stays the truth for the
 *  host algorithm). An operand with *_dev set is device memory read in
 *  place (the device send buffer); otherwise it is host memory (a received
 *  chunk: pinned or pageable) copied in first. All on gx's own non-blocking
 *  stream of dev_dst's context, waited for before returning. GX_AVG adds. */
int gx_gpu_reduce_step(void *host_dst, void *dev_dst, const void *a, bool a_dev,
                       const void *b, bool b_dev, size_t count, enum gx_datatype dtype,
                       enum gx_redop op);

/** buf[i] /= nranks (the end of GX_AVG), like gx_gpu_reduce. */
int gx_gpu_reduce_finish_avg(void *buf, size_t count, enum gx_datatype dtype, int nranks,
                             void *stream);

/** Whether the collectives should reduce device buffers with the kernels:
 *  GX_GPU_REDUCE=cpu never, =gpu always (a load failure is then the call's
 *  error), =auto when the kernels were built and load in the context of
 *  `dev_hint` (NULL: the calling thread's). An invalid GX_GPU_REDUCE fails
 *  communicator init (gx_param_check_environment); here it reads as auto. */
bool gx_gpu_reduce_wanted(const void *dev_hint);
/** GX_GPU_REDUCE=gpu was asked for (the engine then keeps a reduction's
 *  copies unchunked, so its reduce steps can run on the GPU). */
bool gx_gpu_reduce_forced(void);

/** One line for gx-info: "built for sm_80,sm_90 (+PTX), loaded" or
 *  "..., not loaded: <why>" or "not built (no nvcc at build time)". Tries
 *  to load the module (in the current or GPU 0's primary context) only when
 *  a driver is there. Returns true when loaded. */
bool gx_gpu_kernels_describe(char *out, size_t len);

/** True when libgx carries real kernels (nvcc at build time). */
bool gx_gpu_kernels_built(void);

/** Tests: load `image` (len bytes) instead of the embedded one in contexts
 *  that have no module yet (NULL: back to the embedded image); forget the
 *  cached modules. */
void gx_gpu_kernels_test_image(const void *image, size_t len);

#endif
