/*
 * gx_reduce.cu - gx's CUDA reduction kernels: for every datatype x op of
 * enum gx_datatype / gx_redop, dst = a OP b element-wise, and the division
 * that finishes GX_AVG. Built by nvcc at build time into a fatbin that is
 * embedded in libgx (gpudirect/kernels/GxCudaKernels.cmake) and loaded with
 * the driver API (gpudirect/gpu_reduce.c); never needed at run time.
 *
 * The arithmetic is gx_kernel_ops.h, shared with the CPU stand-in of the
 * fake libcuda. Grid-stride loops: any grid size covers any count, and the
 * inputs may be device memory or mapped pinned host memory.
 */
#include <stdint.h>

#include "gx_kernel_names.h"
#include "gx_kernel_ops.h"

/* No __restrict__: dst may be a or b (in place). */
#define GXK_REDUCE(op, t, T)                                                               \
    extern "C" __global__ void gx_reduce_##op##_##t(T *dst, const T *a, const T *b,        \
                                                    unsigned long long n)                  \
    {                                                                                      \
        unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;            \
        for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x +          \
                                    threadIdx.x; i < n; i += stride)                       \
            dst[i] = gxk_##op##_##t(a[i], b[i]);                                           \
    }

#define GXK_DIVIDE(t, T)                                                                   \
    extern "C" __global__ void gx_divide_##t(T *buf, unsigned long long n, int nranks)    \
    {                                                                                      \
        unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;            \
        for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x +          \
                                    threadIdx.x; i < n; i += stride)                       \
            buf[i] = gxk_div_##t(buf[i], nranks);                                          \
    }

#define GXK_ALL_OPS(t, T, size)                                                            \
    GXK_REDUCE(sum, t, T)                                                                  \
    GXK_REDUCE(prod, t, T)                                                                 \
    GXK_REDUCE(min, t, T)                                                                  \
    GXK_REDUCE(max, t, T)                                                                  \
    GXK_DIVIDE(t, T)
GXK_TYPES(GXK_ALL_OPS)
