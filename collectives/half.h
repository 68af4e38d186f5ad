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

static inline float gx_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) /* Inf, or NaN made quiet */
        return gx_f32_from_bits(sign | 0x7f800000u | (mant ? 0x400000u | (mant << 13) : 0));
    if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in f32 */
        float mag = (float)mant * 0x1p-24f;
        return gx_f32_from_bits(sign | gx_f32_bits(mag));
    }
    /* Rebias the exponent from 15 to 127. */
    return gx_f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

static inline uint16_t gx_f32_to_f16(float f)
{
    uint32_t x = gx_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t mag = x & 0x7fffffffu;

    if (mag > 0x7f800000u) /* NaN: quiet, top 9 payload bits kept */
        return (uint16_t)(sign | 0x7e00u | ((mag >> 13) & 0x1ffu));
    if (mag >= 0x477ff000u) /* >= 65520 rounds (ties to even) to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (mag >= 0x38800000u) { /* f16 normal range, >= 2^-14 */
        /* Round the 13 dropped bits to nearest even; a carry correctly
         * bumps the exponent. Then rebias from 127 to 15. */
        uint32_t r = mag + 0xfffu + ((mag >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    if (mag < 0x33000000u) /* < 2^-25 is nearer to 0 (2^-25 itself ties to 0) */
        return sign;
    /* Subnormal result: significand m (24 bits) * 2^(e-150) in units of
     * 2^-24 is m >> (126 - e); round the dropped bits to nearest even. A
     * round-up to 0x400 is correctly the smallest normal. */
    uint32_t e = mag >> 23;
    uint32_t m = (mag & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
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
