/*
 * gx_kernel_names.h - the table of gx's CUDA reduction kernels, shared by
 * the kernels (gx_reduce.cu), their loader (gpudirect/gpu_reduce.c) and the
 * fake libcuda that stands in for them in CI (tests/fakecuda).
 *
 * Kernel names (extern "C", unmangled):
 *   gx_reduce_<op>_<type>(T *dst, const T *a, const T *b, unsigned long long n)
 *       dst[i] = a[i] OP b[i]; dst may equal a or b (element-wise, in place)
 *   gx_divide_<type>(T *buf, unsigned long long n, int nranks)
 *       buf[i] /= nranks (the end of GX_AVG)
 * for <op> in sum prod min max and <type> in the rows below, which follow
 * enum gx_datatype's order.
 */
#ifndef GX_GPUDIRECT_KERNEL_NAMES_H
#define GX_GPUDIRECT_KERNEL_NAMES_H

/* X(suffix, C type, element size) in enum gx_datatype order. */
#define GXK_TYPES(X)                                                                       \
    X(i8, int8_t, 1)                                                                       \
    X(u8, uint8_t, 1)                                                                      \
    X(i32, int32_t, 4)                                                                     \
    X(u32, uint32_t, 4)                                                                    \
    X(i64, int64_t, 8)                                                                     \
    X(u64, uint64_t, 8)                                                                    \
    X(f16, uint16_t, 2)                                                                    \
    X(bf16, uint16_t, 2)                                                                   \
    X(f32, float, 4)                                                                       \
    X(f64, double, 8)

/* X(op) in enum gx_redop order (GX_AVG is sum + divide). */
#define GXK_OPS(X) X(sum) X(prod) X(min) X(max)

#define GXK_NTYPES 10
#define GXK_NOPS 4
/* Kernel index: type * (GXK_NOPS + 1) + op; op GXK_NOPS is the divide. */
#define GXK_NKERNELS (GXK_NTYPES * (GXK_NOPS + 1))

/* Marks the placeholder image a build without nvcc embeds (tests only: the
 * fake libcuda accepts it, a real driver rejects it as not an image). */
#define GXK_PLACEHOLDER_MAGIC "GXKPLACEHOLDER01"
/* The first word of a CUDA fatbin. */
#define GXK_FATBIN_MAGIC 0xBA55ED50u

#endif
