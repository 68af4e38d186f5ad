/*
 * half.h - IEEE binary16 (f16) and bfloat16 (bf16) conversions to and from
 * binary32, portable and bit-exact.
 *
 * Owns: the scalar reference conversions shared by the reduction kernels
 * (reduce_half.c) and the DDP compression hooks. Must not depend on any CPU
 * feature: the F16C fast path lives in reduce_half.c and is tested bitwise
 * against these functions.
 *
 * Rules (chosen to match x86 F16C vcvtph2ps/vcvtps2ph, so the SIMD and scalar
 * paths agree bit for bit):
 *  - narrowing rounds to nearest, ties to even, whatever the FP environment;
 *    finite values beyond the largest finite target overflow to +-Inf;
 *    results below the normal range become subnormals (never flushed);
 *  - a NaN stays a NaN of the same sign, keeps the top bits of its payload
 *    and comes out quiet (quiet bit set);
 *  - gx_f16_to_f32 likewise quiets a signalling NaN; every other f16 widens
 *    exactly (f16 subnormals become normal f32);
 *  - gx_bf16_to_f32 is exact for every pattern, NaNs included (a shift).
 */
#ifndef GX_COLLECTIVES_HALF_H
#define GX_COLLECTIVES_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t gx_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float gx_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/*
 * The f16 conversions are straight-line code with selects (every case
 * computed, the right one picked): no data-dependent branches. The float
 * operations in them are all exact, so no rounding mode or flush-to-zero
 * setting can change a result. (GCC 12 still does not vectorise loops over
 * them; on x86_64 the F16C kernels in reduce_half.c are the fast path.)
 */
static inline float gx_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    /* Normal: rebias the exponent from 15 to 127. */
    uint32_t normal = ((exp + 112) << 23) | (mant << 13);
    /* Zero or subnormal: mant * 2^-24, exact (and normal) in f32. */
    uint32_t subnormal = gx_f32_bits((float)(int32_t)mant * 0x1p-24f);
    /* Inf, or NaN made quiet. */
    uint32_t special = 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0);
    uint32_t mag = exp == 0 ? subnormal : normal;
    return gx_f32_from_bits(sign | (exp == 0x1f ? special : mag));
}

static inline uint16_t gx_f32_to_f16(float f)
{
    uint32_t x = gx_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mag = x & 0x7fffffffu;
    /* f16 normal range (>= 2^-14): round the 13 dropped bits to nearest
     * even (a carry correctly bumps the exponent), rebias 127 -> 15. */
    uint32_t normal = (mag + 0xfffu + ((mag >> 13) & 1u) - 0x38000000u) >> 13;
    /* Below 2^-14 the result counts units of 2^-24: y = |f| * 2^24 < 1024 is
     * exact, so are its integer part q and fraction; round q to nearest even.
     * (Inputs are clamped first so y stays small for the unused lanes.) */
    float y = gx_f32_from_bits(mag < 0x38800000u ? mag : 0x38800000u) * 0x1p24f;
    int32_t q = (int32_t)y;
    float frac = y - (float)q;
    uint32_t subnormal = (uint32_t)q + ((frac > 0.5f) | ((frac == 0.5f) & (q & 1)));
    /* NaN: quiet, top 9 payload bits kept. */
    uint32_t nan = 0x7e00u | ((mag >> 13) & 0x1ffu);
    uint32_t r = mag >= 0x38800000u ? normal : subnormal;
    r = mag >= 0x477ff000u ? 0x7c00u : r; /* >= 65520 rounds (ties even) to Inf */
    r = mag > 0x7f800000u ? nan : r;
    return (uint16_t)(sign | r);
}

static inline float gx_bf16_to_f32(uint16_t b)
{
    return gx_f32_from_bits((uint32_t)b << 16);
}

static inline uint16_t gx_f32_to_bf16(float f)
{
    uint32_t x = gx_f32_bits(f);

    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
        return (uint16_t)((x >> 16) | 0x40u);
    /* Round the low 16 bits to nearest even; overflow carries into Inf. */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

#endif
