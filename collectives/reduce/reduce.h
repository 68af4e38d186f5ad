/*
 * reduce.h - host reduction kernels, the element-wise arithmetic every
 * collective algorithm calls.
 *
 * Owns: one kernel per (datatype, op) in a two-operand in-place form and a
 * three-operand out-of-place form, the final division of GX_AVG, and their
 * semantics below. Must not touch communicators, buffers' placement or
 * scheduling: callers pass plain host pointers.
 *
 * Buffers: host memory aligned to the element size (natural C alignment).
 * Operands must not overlap: `in` never overlaps `inout`, and `out` never
 * overlaps `a` or `b` (for an in-place step call the two-operand form). A
 * count of 0 does nothing and may come with NULL pointers. Kernels never fail
 * and are safe to call from any thread.
 *
 * Semantics per datatype:
 *  - Integers (i8 u8 i32 u32 i64 u64): sum and prod wrap around modulo 2^bits
 *    (two's complement for signed types; computed in unsigned arithmetic, so
 *    never undefined behaviour). min/max compare as signed or unsigned.
 *  - f32, f64: IEEE arithmetic in the calling thread's FP environment (no
 *    contraction into FMA). sum/prod follow IEEE NaN/Inf rules.
 *  - f16, bf16: each element is widened to f32, combined in f32 and rounded
 *    back to nearest even (overflow to Inf, subnormals kept). For sum and prod
 *    this equals the correctly rounded result of the exact operation.
 *  - min/max, all float types: NaN propagates (like torch.minimum/maximum,
 *    IEEE 754-2019 minimum/maximum): if inout[i] (or a[i]) is a NaN the result
 *    is that NaN, else if in[i] (b[i]) is a NaN it is that one. -0 is smaller
 *    than +0. The result is always bit-for-bit one of the two operands, so
 *    min/max never changes a NaN payload, even in f16/bf16.
 *
 * GX_AVG reduces exactly as GX_SUM (the lookups return the sum kernel); once
 * the sum over all ranks is complete, gx_reduce_finish_avg() divides it by
 * the rank count:
 *  - floats: x / nranks, rounded once (f16/bf16 divide in f32, then round);
 *  - integers: supported, like NCCL's ncclAvg: the wrapped sum is divided
 *    with C integer division, truncating toward zero (signed) or down
 *    (unsigned). A sum that wrapped gives a meaningless average; callers
 *    averaging small integer types should widen first.
 *
 * Room reduce/ (reduce*.c, half.h): a leaf; the CUDA kernels go here too.
 */
#ifndef GX_COLLECTIVES_REDUCE_H
#define GX_COLLECTIVES_REDUCE_H

#include <stddef.h>

#include "gx/gx.h"

/** inout[i] = inout[i] OP in[i] for i < count. */
typedef void (*gx_reduce_fn)(void *inout, const void *in, size_t count);

/** out[i] = a[i] OP b[i] for i < count. */
typedef void (*gx_reduce3_fn)(void *out, const void *a, const void *b, size_t count);

/**
 * The two-operand kernel for (dtype, op). GX_AVG yields the sum kernel. On
 * success *fn is set and GX_OK returned; an invalid dtype or op, or a NULL
 * fn, returns GX_EINVAL with a message naming the argument (*fn untouched).
 * The best kernel for this CPU is chosen (on x86_64: AVX2 clones of the
 * integer/f32/f64 loops, F16C for f16, AVX2 for bf16, when present); the
 * result may be cached by the caller.
 */
int gx_reduce_lookup(enum gx_datatype dtype, enum gx_redop op, gx_reduce_fn *fn);

/** As gx_reduce_lookup(), for the three-operand form. */
int gx_reduce3_lookup(enum gx_datatype dtype, enum gx_redop op, gx_reduce3_fn *fn);

/**
 * Finish a GX_AVG: buf[i] /= nranks for i < count, by the rules above.
 * GX_EINVAL (naming the argument) for an invalid dtype, nranks < 1, or a NULL
 * buf with count > 0.
 */
int gx_reduce_finish_avg(void *buf, enum gx_datatype dtype, size_t count, int nranks);

#endif
