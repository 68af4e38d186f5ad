/*
 * reduce_half.c - reduction kernels for f16 and bf16.
 *
 * sum, prod and the average's division widen both operands to f32, compute
 * in f32 and round back to nearest even (half.h). f32 carries more than
 * 2p+2 bits of either format, so this single extra rounding never changes a
 * result: it equals the correctly rounded exact sum or product.
 *
 * min and max need no arithmetic: they compare the 16-bit patterns as
 * ordered integers and return one operand unchanged (NaN first, see
 * reduce.h), so no conversion can disturb a payload.
 *
 * f16 has two implementations: portable C, and on x86_64 an F16C + AVX one
 * (vcvtph2ps / vcvtps2ph, 8 elements at a time) compiled with a target
 * attribute and chosen at run time only when cpuid and the OS report
 * support, so the library still runs on any x86_64. Both are bit-identical
 * (the unit test checks). bf16 conversions are integer shifts and adds the
 * compiler vectorises on its own (slowly with SSE2's missing 32->16-bit
 * packs); on x86_64 an AVX2 version is picked the same way.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "collectives/reduce/half.h"
#include "collectives/reduce/reduce_kernels.h"

#ifdef __x86_64__
#include <cpuid.h>
#include <immintrin.h>
#endif

/* ---- min / max on 16-bit float patterns -------------------------------- */

/* Map a sign-magnitude pattern to an int16 that orders like the value:
 * negatives are mirrored below zero, so -0 (-1) sorts just under +0 (0). */
static inline int16_t half_order_key(uint16_t h)
{
    return (int16_t)(h & 0x8000u ? h ^ 0x7fffu : h);
}

static inline int f16_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }
static inline int bf16_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

static inline uint16_t f16_max(uint16_t a, uint16_t b)
{
    uint16_t m = half_order_key(b) > half_order_key(a) ? b : a;
    m = f16_is_nan(b) ? b : m;
    return f16_is_nan(a) ? a : m;
}

static inline uint16_t f16_min(uint16_t a, uint16_t b)
{
    uint16_t m = half_order_key(b) < half_order_key(a) ? b : a;
    m = f16_is_nan(b) ? b : m;
    return f16_is_nan(a) ? a : m;
}

static inline uint16_t bf16_max(uint16_t a, uint16_t b)
{
    uint16_t m = half_order_key(b) > half_order_key(a) ? b : a;
    m = bf16_is_nan(b) ? b : m;
    return bf16_is_nan(a) ? a : m;
}

static inline uint16_t bf16_min(uint16_t a, uint16_t b)
{
    uint16_t m = half_order_key(b) < half_order_key(a) ? b : a;
    m = bf16_is_nan(b) ? b : m;
    return bf16_is_nan(a) ? a : m;
}

/* ---- sum / prod through f32 -------------------------------------------- */

static inline uint16_t f16_sum(uint16_t a, uint16_t b)
{
    return gx_f32_to_f16(gx_f16_to_f32(a) + gx_f16_to_f32(b));
}

static inline uint16_t f16_prod(uint16_t a, uint16_t b)
{
    return gx_f32_to_f16(gx_f16_to_f32(a) * gx_f16_to_f32(b));
}

static inline uint16_t bf16_sum(uint16_t a, uint16_t b)
{
    return gx_f32_to_bf16(gx_bf16_to_f32(a) + gx_bf16_to_f32(b));
}

static inline uint16_t bf16_prod(uint16_t a, uint16_t b)
{
    return gx_f32_to_bf16(gx_bf16_to_f32(a) * gx_bf16_to_f32(b));
}

GX_REDUCE_DEFINE_KERNELS(f16_sum_c, uint16_t, f16_sum)
GX_REDUCE_DEFINE_KERNELS(f16_prod_c, uint16_t, f16_prod)
GX_REDUCE_DEFINE_KERNELS(f16_min_c, uint16_t, f16_min)
GX_REDUCE_DEFINE_KERNELS(f16_max_c, uint16_t, f16_max)
GX_REDUCE_DEFINE_KERNELS(bf16_sum_c, uint16_t, bf16_sum)
GX_REDUCE_DEFINE_KERNELS(bf16_prod_c, uint16_t, bf16_prod)
GX_REDUCE_DEFINE_KERNELS(bf16_min_c, uint16_t, bf16_min)
GX_REDUCE_DEFINE_KERNELS(bf16_max_c, uint16_t, bf16_max)

static void f16_divide_c(void *buf_, size_t count, int nranks)
{
    uint16_t *restrict buf = buf_;
    float n = (float)nranks;
    for (size_t i = 0; i < count; i++)
        buf[i] = gx_f32_to_f16(gx_f16_to_f32(buf[i]) / n);
}

static void bf16_divide_c(void *buf_, size_t count, int nranks)
{
    uint16_t *restrict buf = buf_;
    float n = (float)nranks;
    for (size_t i = 0; i < count; i++)
        buf[i] = gx_f32_to_bf16(gx_bf16_to_f32(buf[i]) / n);
}

const struct gx_reduce_kernels gx_reduce_kernels_f16 = {
    .fn = { [GX_SUM] = f16_sum_c, [GX_PROD] = f16_prod_c,
            [GX_MIN] = f16_min_c, [GX_MAX] = f16_max_c },
    .fn3 = { [GX_SUM] = f16_sum_c3, [GX_PROD] = f16_prod_c3,
             [GX_MIN] = f16_min_c3, [GX_MAX] = f16_max_c3 },
    .divide = f16_divide_c,
};

const struct gx_reduce_kernels gx_reduce_kernels_bf16 = {
    .fn = { [GX_SUM] = bf16_sum_c, [GX_PROD] = bf16_prod_c,
            [GX_MIN] = bf16_min_c, [GX_MAX] = bf16_max_c },
    .fn3 = { [GX_SUM] = bf16_sum_c3, [GX_PROD] = bf16_prod_c3,
             [GX_MIN] = bf16_min_c3, [GX_MAX] = bf16_max_c3 },
    .divide = bf16_divide_c,
};

/* ---- f16 with F16C (x86_64) ------------------------------------------- */

#ifdef __x86_64__

#define F16C_TARGET __attribute__((target("avx,f16c")))

F16C_TARGET static inline __m256 f16c_load8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* Immediate 0: round to nearest even regardless of MXCSR. */
F16C_TARGET static inline void f16c_store8(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)(void *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/*
 * Whole groups of 8 go straight through; the last < 8 elements are copied
 * into zero-padded 8-element buffers so they take the very same instructions
 * (no separate scalar tail to keep bit-identical).
 */
#define F16C_KERNELS(name, VOP)                                                \
    F16C_TARGET static void name(void *restrict inout_, const void *restrict in_, \
                                 size_t count)                                 \
    {                                                                          \
        uint16_t *restrict io = inout_;                                        \
        const uint16_t *restrict in = in_;                                     \
        size_t i = 0;                                                          \
        for (; i + 8 <= count; i += 8)                                         \
            f16c_store8(io + i, VOP(f16c_load8(io + i), f16c_load8(in + i)));  \
        if (i < count) {                                                       \
            uint16_t ta[8] = { 0 }, tb[8] = { 0 };                             \
            size_t rest = (count - i) * sizeof(uint16_t);                      \
            memcpy(ta, io + i, rest);                                          \
            memcpy(tb, in + i, rest);                                          \
            f16c_store8(ta, VOP(f16c_load8(ta), f16c_load8(tb)));              \
            memcpy(io + i, ta, rest);                                          \
        }                                                                      \
    }                                                                          \
    F16C_TARGET static void name##3(void *restrict out_, const void *restrict a_, \
                                    const void *restrict b_, size_t count)     \
    {                                                                          \
        uint16_t *restrict out = out_;                                         \
        const uint16_t *restrict a = a_;                                       \
        const uint16_t *restrict b = b_;                                       \
        size_t i = 0;                                                          \
        for (; i + 8 <= count; i += 8)                                         \
            f16c_store8(out + i, VOP(f16c_load8(a + i), f16c_load8(b + i)));   \
        if (i < count) {                                                       \
            uint16_t ta[8] = { 0 }, tb[8] = { 0 };                             \
            size_t rest = (count - i) * sizeof(uint16_t);                      \
            memcpy(ta, a + i, rest);                                           \
            memcpy(tb, b + i, rest);                                           \
            f16c_store8(ta, VOP(f16c_load8(ta), f16c_load8(tb)));              \
            memcpy(out + i, ta, rest);                                         \
        }                                                                      \
    }

F16C_KERNELS(f16_sum_f16c, _mm256_add_ps)
F16C_KERNELS(f16_prod_f16c, _mm256_mul_ps)

F16C_TARGET static void f16_divide_f16c(void *buf_, size_t count, int nranks)
{
    uint16_t *restrict buf = buf_;
    __m256 n = _mm256_set1_ps((float)nranks);
    size_t i = 0;
    for (; i + 8 <= count; i += 8)
        f16c_store8(buf + i, _mm256_div_ps(f16c_load8(buf + i), n));
    if (i < count) {
        uint16_t t[8] = { 0 };
        size_t rest = (count - i) * sizeof(uint16_t);
        memcpy(t, buf + i, rest);
        f16c_store8(t, _mm256_div_ps(f16c_load8(t), n));
        memcpy(buf + i, t, rest);
    }
}

static const struct gx_reduce_kernels f16_f16c = {
    .fn = { [GX_SUM] = f16_sum_f16c, [GX_PROD] = f16_prod_f16c,
            [GX_MIN] = f16_min_c, [GX_MAX] = f16_max_c },
    .fn3 = { [GX_SUM] = f16_sum_f16c3, [GX_PROD] = f16_prod_f16c3,
             [GX_MIN] = f16_min_c3, [GX_MAX] = f16_max_c3 },
    .divide = f16_divide_f16c,
};
const struct gx_reduce_kernels *const gx_reduce_kernels_f16_f16c = &f16_f16c;

/*
 * bf16 with AVX2. sum/prod: 16 elements per step; unpacking each 16-bit
 * pattern under a zero word is exactly the widening shift, and the in-lane
 * packus after rounding undoes the in-lane unpack. The rounding is
 * gx_f32_to_bf16's, lane by lane. min/max: the portable loops built for AVX2
 * (plain integer selects the compiler vectorises well).
 */
#define AVX2_TARGET __attribute__((target("avx2")))

AVX2_TARGET static inline __m256i bf16_round8(__m256 f)
{
    __m256i x = _mm256_castps_si256(f);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i quiet_nan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    __m256 is_nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
    return _mm256_blendv_epi8(rounded, quiet_nan, _mm256_castps_si256(is_nan));
}

#define BF16_AVX2_STEP(dst, x, y, VOP)                                         \
    do {                                                                       \
        const __m256i zero_ = _mm256_setzero_si256();                          \
        __m256i vx_ = _mm256_loadu_si256((const __m256i *)(const void *)(x));  \
        __m256i vy_ = _mm256_loadu_si256((const __m256i *)(const void *)(y));  \
        __m256 lo_ = VOP(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero_, vx_)), \
                         _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero_, vy_))); \
        __m256 hi_ = VOP(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero_, vx_)), \
                         _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero_, vy_))); \
        _mm256_storeu_si256((__m256i *)(void *)(dst),                          \
                            _mm256_packus_epi32(bf16_round8(lo_), bf16_round8(hi_))); \
    } while (0)

#define BF16_AVX2_KERNELS(name, VOP)                                           \
    AVX2_TARGET static void name##3(void *restrict out_, const void *restrict a_, \
                                    const void *restrict b_, size_t count)     \
    {                                                                          \
        uint16_t *restrict out = out_;                                         \
        const uint16_t *restrict a = a_;                                       \
        const uint16_t *restrict b = b_;                                       \
        size_t i = 0;                                                          \
        for (; i + 16 <= count; i += 16)                                       \
            BF16_AVX2_STEP(out + i, a + i, b + i, VOP);                        \
        if (i < count) {                                                       \
            uint16_t ta[16] = { 0 }, tb[16] = { 0 };                           \
            size_t rest = (count - i) * sizeof(uint16_t);                      \
            memcpy(ta, a + i, rest);                                           \
            memcpy(tb, b + i, rest);                                           \
            BF16_AVX2_STEP(ta, ta, tb, VOP);                                   \
            memcpy(out + i, ta, rest);                                         \
        }                                                                      \
    }                                                                          \
    AVX2_TARGET static void name(void *restrict inout, const void *restrict in, \
                                 size_t count)                                 \
    {                                                                          \
        uint16_t *restrict io = inout;                                         \
        const uint16_t *restrict b = in;                                       \
        size_t i = 0;                                                          \
        for (; i + 16 <= count; i += 16)                                       \
            BF16_AVX2_STEP(io + i, io + i, b + i, VOP);                        \
        if (i < count) {                                                       \
            uint16_t ta[16] = { 0 }, tb[16] = { 0 };                           \
            size_t rest = (count - i) * sizeof(uint16_t);                      \
            memcpy(ta, io + i, rest);                                          \
            memcpy(tb, b + i, rest);                                           \
            BF16_AVX2_STEP(ta, ta, tb, VOP);                                   \
            memcpy(io + i, ta, rest);                                          \
        }                                                                      \
    }

BF16_AVX2_KERNELS(bf16_sum_avx2, _mm256_add_ps)
BF16_AVX2_KERNELS(bf16_prod_avx2, _mm256_mul_ps)
GX_REDUCE_DEFINE_KERNELS_ATTR(bf16_min_avx2, uint16_t, bf16_min, AVX2_TARGET)
GX_REDUCE_DEFINE_KERNELS_ATTR(bf16_max_avx2, uint16_t, bf16_max, AVX2_TARGET)

static const struct gx_reduce_kernels bf16_avx2 = {
    .fn = { [GX_SUM] = bf16_sum_avx2, [GX_PROD] = bf16_prod_avx2,
            [GX_MIN] = bf16_min_avx2, [GX_MAX] = bf16_max_avx2 },
    .fn3 = { [GX_SUM] = bf16_sum_avx23, [GX_PROD] = bf16_prod_avx23,
             [GX_MIN] = bf16_min_avx23, [GX_MAX] = bf16_max_avx23 },
    .divide = bf16_divide_c,
};
const struct gx_reduce_kernels *const gx_reduce_kernels_bf16_avx2 = &bf16_avx2;

enum { CPU_F16C = 1, CPU_AVX2 = 2, CPU_KNOWN = 4 };

/* cpuid says what the CPU has; XGETBV says the OS saves the YMM state
 * (XCR0 bits 1 and 2), without which any AVX instruction faults. */
static int detect_cpu(void)
{
    unsigned int eax, ebx, ecx, edx, xcr0_lo, xcr0_hi;
    const unsigned int avx = bit_OSXSAVE | bit_AVX;
    int features = 0;

    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || (ecx & avx) != avx)
        return 0;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    if ((xcr0_lo & 0x6u) != 0x6u)
        return 0;
    if (ecx & bit_F16C)
        features |= CPU_F16C;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & bit_AVX2))
        features |= CPU_AVX2;
    return features;
}

static int cpu_features(void)
{
    /* Racing first callers compute the same answer. */
    static atomic_int cached;
    int f = atomic_load_explicit(&cached, memory_order_relaxed);

    if (!(f & CPU_KNOWN)) {
        f = detect_cpu() | CPU_KNOWN;
        atomic_store_explicit(&cached, f, memory_order_relaxed);
    }
    return f;
}

bool gx_reduce_cpu_has_f16c(void)
{
    return cpu_features() & CPU_F16C;
}

bool gx_reduce_cpu_has_avx2(void)
{
    return cpu_features() & CPU_AVX2;
}

#else /* !__x86_64__ */

const struct gx_reduce_kernels *const gx_reduce_kernels_f16_f16c = NULL;
const struct gx_reduce_kernels *const gx_reduce_kernels_bf16_avx2 = NULL;

bool gx_reduce_cpu_has_f16c(void)
{
    return false;
}

bool gx_reduce_cpu_has_avx2(void)
{
    return false;
}

#endif
