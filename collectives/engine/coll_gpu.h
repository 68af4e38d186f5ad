/*
 * coll_gpu.h - reduce steps of collectives on device buffers run by gx's
 * CUDA kernels (branch kernels; GX_GPU_REDUCE, gpudirect/gpu_reduce.h).
 *
 * Owns: the choice, per call, to reduce on the GPU (all-reduce,
 * reduce-scatter, reduce whose receive buffer is staged device memory), and
 * running one CS_REDUCE / CS_REDUCE3 step there: the received chunk is
 * copied to the device and combined into the device receive buffer by the
 * kernel, the result copied back into the pinned stand-in (which stays the
 * truth for the host algorithm, so every other step is unchanged).
 * Must not touch: the wire protocol (the same steps, the same messages: a
 * rank on the CPU path and one on the GPU path interoperate).
 */
#ifndef GX_COLL_GPU_H
#define GX_COLL_GPU_H

#include <stdbool.h>

#include "collectives/schedule/schedule.h"

struct gx_stage;

/** After staging: fill a->gpu when this call's reduce steps should run on
 *  the GPU (GX_GPU_REDUCE, the call's kind, a device receive buffer). */
void coll_gpu_setup(struct coll_args *a, const struct gx_stage *st);

/** Run reduce step `s` on the GPU when its destination lies in a staged
 *  device receive buffer: true with *rc set; false: the caller reduces on
 *  the CPU. */
bool coll_gpu_step(struct coll_op *op, const struct coll_step *s, int *rc);

#endif
