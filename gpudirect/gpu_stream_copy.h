/*
 * gpu_stream_copy.h - copies queued on the caller's CUDA stream between any
 * mix of device and host memory (branch plugs: DDP's device buckets, which
 * move gradients into and out of device-memory buckets in stream order).
 */
#ifndef GX_GPUDIRECT_GPU_STREAM_COPY_H
#define GX_GPUDIRECT_GPU_STREAM_COPY_H

#include <stddef.h>

/** Queue a copy of `len` bytes on `stream` (a CUstream; NULL: the legacy
 *  default stream): device to device (cuMemcpyDtoDAsync), host to device or
 *  device to host (the host side must stay valid until the stream got past
 *  it). At least one side must be device memory (GX_EINVAL naming them
 *  otherwise); the device side's context is made current. Returns at once. */
int gx_gpu_stream_copy(void *stream, void *dst, const void *src, size_t len);

/** Queue zeroes into device memory [dst, dst+len) on `stream` (host-to-device
 *  copies from a static zero block, so nothing needs to stay alive). */
int gx_gpu_stream_zero(void *stream, void *dst, size_t len);

#endif
