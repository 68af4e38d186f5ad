/*
 * gx_kernel_ops.h - the element arithmetic of gx's CUDA reduction kernels,
 * written once for both compilers: nvcc builds it into the kernels
 * (gx_reduce.cu) and the fake libcuda (tests/fakecuda/fakecuda_module.c)
 * compiles the very same functions as C to run a launch on the CPU, so CI
 * checks the kernels' arithmetic bit for bit against collectives/reduce/.
 *
 * Semantics are those of collectives/reduce/reduce.h: integer sum/prod wrap
 * (computed unsigned), min/max signed or unsigned; f32/f64 one IEEE op per
 * element; f16/bf16 widened to f32, combined, rounded to nearest even;
 * min/max of floats return one operand bit for bit, the first operand's NaN
 * winning, -0 < +0. GX_AVG is the sum, then a division by the rank count.
 * The one difference on a real GPU: a NaN *produced* by sum/prod/avg
 * arithmetic carries the GPU's canonical payload, not the x86 one.
 *
 * Conversions are integer-only (no float trick that flush-to-zero could
 * change), NaNs come out quiet keeping their top payload bits.
 */
#ifndef GX_GPUDIRECT_KERNEL_OPS_H
#define GX_GPUDIRECT_KERNEL_OPS_H

#include <stdint.h>

#ifdef __CUDACC__
#define GXK_FN static __device__ __forceinline__
GXK_FN float gxk_f32(uint32_t u) { return __uint_as_float(u); }
GXK_FN uint32_t gxk_u32(float f) { return __float_as_uint(f); }
GXK_FN double gxk_f64(uint64_t u) { return __longlong_as_double((long long)u); }
GXK_FN uint64_t gxk_u64(double d) { return (uint64_t)__double_as_longlong(d); }
#else
#include <string.h>
#define GXK_FN static inline
GXK_FN float gxk_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
GXK_FN uint32_t gxk_u32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
GXK_FN double gxk_f64(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }
GXK_FN uint64_t gxk_u64(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
#endif

/* ---- f16 / bf16 <-> f32 ----------------------------------------------------- */
GXK_FN float gxk_f16_widen(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    int32_t e = (h >> 10) & 0x1f;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f) /* Inf, or a NaN made quiet */
        return gxk_f32(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0u));
    if (e == 0) {
        if (m == 0)
            return gxk_f32(sign);
        e = 1; /* subnormal: shift the leading 1 into the implicit bit */
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        m &= 0x3ffu;
    }
    return gxk_f32(sign | ((uint32_t)(e + 112) << 23) | (m << 13));
}

GXK_FN uint16_t gxk_f16_narrow(float f)
{
    uint32_t x = gxk_u32(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mag = x & 0x7fffffffu;
    if (mag > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((mag >> 13) & 0x1ffu));
    if (mag >= 0x477ff000u) /* 65520 and up round to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (mag >= 0x38800000u) { /* f16 normal: rebias 127 -> 15, round 13 bits */
        uint32_t r = mag - 0x38000000u;
        return (uint16_t)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    }
    uint32_t e = mag >> 23;
    if (e < 102) /* below 2^-25: rounds to zero */
        return (uint16_t)sign;
    /* Subnormal: count units of 2^-24, rounded to nearest even. */
    uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    q += (rem > half) | ((rem == half) & (q & 1u));
    return (uint16_t)(sign | q);
}

GXK_FN float gxk_bf16_widen(uint16_t b) { return gxk_f32((uint32_t)b << 16); }

GXK_FN uint16_t gxk_bf16_narrow(float f)
{
    uint32_t x = gxk_u32(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- ops, one per (op, type) ------------------------------------------------- */
#define GXK_INT_OPS(t, T, U)                                                               \
    GXK_FN T gxk_sum_##t(T a, T b) { return (T)(U)((U)a + (U)b); }                       \
    GXK_FN T gxk_prod_##t(T a, T b) { return (T)(U)((U)a * (U)b); }                      \
    GXK_FN T gxk_min_##t(T a, T b) { return b < a ? b : a; }                             \
    GXK_FN T gxk_max_##t(T a, T b) { return b > a ? b : a; }                             \
    GXK_FN T gxk_div_##t(T a, int n) { return (T)(a / (T)n); }
/* uint8_t promotes to int (255 * 255 fits); wider unsigned types wrap. */
GXK_INT_OPS(i8, int8_t, uint8_t)
GXK_INT_OPS(u8, uint8_t, uint8_t)
GXK_INT_OPS(i32, int32_t, uint32_t)
GXK_INT_OPS(u32, uint32_t, uint32_t)
GXK_INT_OPS(i64, int64_t, uint64_t)
GXK_INT_OPS(u64, uint64_t, uint64_t)

GXK_FN float gxk_sum_f32(float a, float b) { return a + b; }
GXK_FN float gxk_prod_f32(float a, float b) { return a * b; }
GXK_FN float gxk_div_f32(float a, int n) { return a / (float)n; }
GXK_FN double gxk_sum_f64(double a, double b) { return a + b; }
GXK_FN double gxk_prod_f64(double a, double b) { return a * b; }
GXK_FN double gxk_div_f64(double a, int n) { return a / (double)n; }

/* Equal operands differ only as +0/-0: AND picks +0 (max), OR picks -0 (min). */
GXK_FN float gxk_max_f32(float a, float b)
{
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return gxk_f32(gxk_u32(a) & gxk_u32(b));
    return b > a ? b : a;
}
GXK_FN float gxk_min_f32(float a, float b)
{
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return gxk_f32(gxk_u32(a) | gxk_u32(b));
    return b < a ? b : a;
}
GXK_FN double gxk_max_f64(double a, double b)
{
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return gxk_f64(gxk_u64(a) & gxk_u64(b));
    return b > a ? b : a;
}
GXK_FN double gxk_min_f64(double a, double b)
{
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return gxk_f64(gxk_u64(a) | gxk_u64(b));
    return b < a ? b : a;
}

/* 16-bit floats: min/max compare the patterns as ordered integers (negative
 * patterns mirrored below zero, so -0 sorts just under +0). */
GXK_FN int32_t gxk_h_key(uint16_t h) { return h & 0x8000u ? -(int32_t)(h & 0x7fffu) - 1 : h; }
GXK_FN int gxk_f16_nan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
GXK_FN int gxk_bf16_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

#define GXK_HALF_OPS(t)                                                                    \
    GXK_FN uint16_t gxk_sum_##t(uint16_t a, uint16_t b)                                    \
    { return gxk_##t##_narrow(gxk_##t##_widen(a) + gxk_##t##_widen(b)); }                  \
    GXK_FN uint16_t gxk_prod_##t(uint16_t a, uint16_t b)                                   \
    { return gxk_##t##_narrow(gxk_##t##_widen(a) * gxk_##t##_widen(b)); }                  \
    GXK_FN uint16_t gxk_div_##t(uint16_t a, int n)                                         \
    { return gxk_##t##_narrow(gxk_##t##_widen(a) / (float)n); }                            \
    GXK_FN uint16_t gxk_min_##t(uint16_t a, uint16_t b)                                    \
    {                                                                                      \
        if (gxk_##t##_nan(a)) return a;                                                    \
        if (gxk_##t##_nan(b)) return b;                                                    \
        return gxk_h_key(b) < gxk_h_key(a) ? b : a;                                        \
    }                                                                                      \
    GXK_FN uint16_t gxk_max_##t(uint16_t a, uint16_t b)                                    \
    {                                                                                      \
        if (gxk_##t##_nan(a)) return a;                                                    \
        if (gxk_##t##_nan(b)) return b;                                                    \
        return gxk_h_key(b) > gxk_h_key(a) ? b : a;                                        \
    }
GXK_HALF_OPS(f16)
GXK_HALF_OPS(bf16)

#endif
