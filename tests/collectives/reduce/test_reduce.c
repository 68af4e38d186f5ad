/*
 * test_reduce.c - the host reduction kernels against slow, obvious
 * references: every datatype x op x {0, 1, 7, 1023, 1M+3} elements, two- and
 * three-operand forms, aligned and offset by one element, with guard
 * elements around every output; the f16/bf16 conversions exhaustively and at
 * every rounding boundary; the lookups' argument checks.
 *
 * References work on raw bit patterns and doubles, never on the kernels'
 * helpers: integers in 128-bit arithmetic reduced modulo 2^bits; f16/bf16
 * decoded with ldexp and re-encoded with rint() (round to nearest even); f32
 * sums in double then narrowed (53 >= 2*24+2 bits, so that double rounding
 * is exact). Results must match bit for bit, except that an arithmetic NaN
 * may carry any payload.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/unit/check.h"
#include "collectives/reduce/half.h"
#include "collectives/reduce/reduce.h"
#include "collectives/reduce/reduce_kernels.h"
#include "gx/gx.h"

#ifdef __x86_64__
#include <immintrin.h>
#endif

struct type_info {
    enum gx_datatype dt;
    const char *name;
    unsigned bits;
    int is_signed;
    int is_float;
    /* floats: field masks of the bit pattern */
    uint64_t sign, exp, quiet, one;
};

static const struct type_info types[] = {
    { GX_INT8, "i8", 8, 1, 0, 0, 0, 0, 0 },
    { GX_UINT8, "u8", 8, 0, 0, 0, 0, 0, 0 },
    { GX_INT32, "i32", 32, 1, 0, 0, 0, 0, 0 },
    { GX_UINT32, "u32", 32, 0, 0, 0, 0, 0, 0 },
    { GX_INT64, "i64", 64, 1, 0, 0, 0, 0, 0 },
    { GX_UINT64, "u64", 64, 0, 0, 0, 0, 0, 0 },
    { GX_FLOAT16, "f16", 16, 1, 1, 0x8000, 0x7c00, 0x200, 0x3c00 },
    { GX_BFLOAT16, "bf16", 16, 1, 1, 0x8000, 0x7f80, 0x40, 0x3f80 },
    { GX_FLOAT32, "f32", 32, 1, 1, 0x80000000u, 0x7f800000u, 0x400000u, 0x3f800000u },
    { GX_FLOAT64, "f64", 64, 1, 1, 0x8000000000000000ull, 0x7ff0000000000000ull,
      0x8000000000000ull, 0x3ff0000000000000ull },
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

/* ---- raw element access ------------------------------------------------- */

static uint64_t mask_of(const struct type_info *t)
{
    return t->bits == 64 ? ~0ull : (1ull << t->bits) - 1;
}

static uint64_t get_raw(const struct type_info *t, const void *base, size_t i)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)base + i * (t->bits / 8), t->bits / 8); /* little endian */
    return v;
}

static void put_raw(const struct type_info *t, void *base, size_t i, uint64_t v)
{
    memcpy((char *)base + i * (t->bits / 8), &v, t->bits / 8);
}

/* ---- float references ---------------------------------------------------- */

static double ref_f16_decode(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double mag = e == 0x1f ? (m ? NAN : INFINITY)
                 : e == 0  ? ldexp(m, -24)
                           : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -mag : mag;
}

/* Round |x| to a binary format with `mbits` fraction bits, exponent range
 * [emin, emax], nearest even, via rint(); returns the magnitude's pattern. */
static uint64_t ref_encode_mag(double ax, int mbits, int emin, int emax)
{
    uint64_t inf = (uint64_t)(emax - emin + 2) << mbits;
    if (isinf(ax))
        return inf;
    if (ax < ldexp(1, emin)) /* subnormal: count units of 2^(emin-mbits) */
        return (uint64_t)rint(ldexp(ax, mbits - emin));
    int e2;
    frexp(ax, &e2);
    int e = e2 - 1; /* ax in [2^e, 2^(e+1)) */
    double m = rint(ldexp(ax, mbits - e)) - ldexp(1, mbits);
    if (m == ldexp(1, mbits)) {
        m = 0;
        e++;
    }
    if (e > emax)
        return inf;
    return ((uint64_t)(e - emin + 1) << mbits) | (uint64_t)m;
}

static double decode(const struct type_info *t, uint64_t raw)
{
    switch (t->dt) {
    case GX_FLOAT16: return ref_f16_decode((uint16_t)raw);
    case GX_BFLOAT16: return gx_f32_from_bits((uint32_t)raw << 16);
    case GX_FLOAT32: return gx_f32_from_bits((uint32_t)raw);
    default: {
        double d;
        memcpy(&d, &raw, 8);
        return d;
    }
    }
}

/* Narrow a double to the type; exact-then-round-once for f16/bf16/f32. */
static uint64_t encode(const struct type_info *t, double x)
{
    if (isnan(x))
        return t->exp | t->quiet;
    uint64_t s = signbit(x) ? t->sign : 0;
    switch (t->dt) {
    case GX_FLOAT16: return s | ref_encode_mag(fabs(x), 10, -14, 15);
    case GX_BFLOAT16: return s | ref_encode_mag(fabs(x), 7, -126, 127);
    case GX_FLOAT32: return gx_f32_bits((float)x);
    default: {
        uint64_t r;
        memcpy(&r, &x, 8);
        return r;
    }
    }
}

static int is_nan_raw(const struct type_info *t, uint64_t raw)
{
    return t->is_float && (raw & ~t->sign & mask_of(t)) > t->exp;
}

/* min/max: the first NaN, else the smaller/larger, -0 < +0; returns an operand. */
static uint64_t ref_minmax(const struct type_info *t, int is_max, uint64_t a, uint64_t b)
{
    if (is_nan_raw(t, a))
        return a;
    if (is_nan_raw(t, b))
        return b;
    double da = decode(t, a), db = decode(t, b);
    if (da != db)
        return (da > db) == is_max ? a : b;
    if (da == 0 && signbit(da) != signbit(db))
        return (is_max ? signbit(da) : !signbit(da)) ? b : a;
    return a;
}

/* ---- the reference ------------------------------------------------------- */

typedef unsigned __int128 u128;
typedef __int128 s128;

static s128 as_signed(const struct type_info *t, uint64_t raw)
{
    if (t->is_signed && t->bits < 64 && (raw >> (t->bits - 1)) & 1)
        return (s128)raw - ((s128)1 << t->bits);
    if (t->is_signed && t->bits == 64)
        return (s128)(int64_t)raw;
    return (s128)raw;
}

static uint64_t ref_op(const struct type_info *t, enum gx_redop op, uint64_t a, uint64_t b)
{
    if (op == GX_MIN || op == GX_MAX) {
        if (t->is_float)
            return ref_minmax(t, op == GX_MAX, a, b);
        s128 sa = as_signed(t, a), sb = as_signed(t, b);
        return (op == GX_MAX ? (sa > sb ? a : b) : (sa < sb ? a : b));
    }
    if (!t->is_float) { /* math in 128 bits, then modulo 2^bits */
        u128 sa = (u128)as_signed(t, a), sb = (u128)as_signed(t, b);
        u128 r = op == GX_PROD ? sa * sb : sa + sb;
        return (uint64_t)r & mask_of(t);
    }
    double da = decode(t, a), db = decode(t, b);
    if (t->dt == GX_FLOAT64) /* the operation itself is the reference */
        return encode(t, op == GX_PROD ? da * db : da + db);
    return encode(t, op == GX_PROD ? da * db : da + db);
}

static uint64_t ref_avg(const struct type_info *t, uint64_t x, int n)
{
    if (!t->is_float) {
        if (t->is_signed)
            return (uint64_t)(as_signed(t, x) / n) & mask_of(t);
        return x / (uint64_t)n;
    }
    return encode(t, decode(t, x) / n);
}

static int same(const struct type_info *t, enum gx_redop op, uint64_t got, uint64_t want)
{
    if (t->is_float && op != GX_MIN && op != GX_MAX && is_nan_raw(t, want))
        return is_nan_raw(t, got);
    return got == want;
}

/* ---- inputs -------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static uint64_t gen_value(const struct type_info *t)
{
    uint64_t r = rnd(), m = mask_of(t);
    if (!t->is_float) {
        uint64_t min = 1ull << (t->bits - 1);
        const uint64_t limits[] = { 0, 1, m, min, min - 1, 2 };
        return (r & 7) == 0 ? limits[(r >> 3) % 6] & m : (r >> 8) & m;
    }
    uint64_t low_bit = t->exp & (~t->exp + 1), fraction = low_bit - 1;
    unsigned ebias = (unsigned)(t->exp / low_bit) >> 1;
    uint64_t sign = (r >> 63) ? t->sign : 0;
    switch (r & 3) {
    case 0: return (rnd() >> 3) & m; /* any pattern, NaNs included */
    case 1: { /* specials */
        const uint64_t sp[] = { 0, t->exp, t->exp | t->quiet, t->exp | 1, t->exp - 1,
                                low_bit, 1, low_bit - 1, t->one, t->exp | t->quiet | 5 };
        return sign | sp[(r >> 2) % 10];
    }
    case 2: /* moderate magnitudes, so sums round */
        return sign | ((uint64_t)(ebias - 6 + (r >> 2) % 13) * low_bit) | ((r >> 16) & fraction);
    default: /* subnormals and the smallest normals */
        return sign | ((uint64_t)((r >> 2) % 3) * low_bit) | ((r >> 16) & fraction);
    }
}

/* ---- one kernel run against the reference -------------------------------- */

static const uint8_t GUARD = 0xa5;

static int guard_ok(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != GUARD)
            return 0;
    return 1;
}

typedef void (*divide_fn)(void *buf, size_t count, int nranks);

/* Run fn and fn3 (and, for GX_AVG, `divide`, or gx_reduce_finish_avg() when
 * NULL) on fresh random inputs and compare with the reference. */
static void run_case(const struct type_info *t, const char *variant, gx_reduce_fn fn,
                     gx_reduce3_fn fn3, divide_fn divide, enum gx_redop op, size_t count,
                     size_t off, uint64_t *a_ref, uint64_t *b_ref, void *bufs[3])
{
    size_t es = t->bits / 8, bytes = (count + 2) * es;
    const int nranks = 3;
    int bad = 0;

    for (size_t i = 0; i < count; i++) {
        a_ref[i] = gen_value(t);
        b_ref[i] = gen_value(t);
    }
    /* Two-operand: inout at `off`, in at 0 (mutually misaligned when off). */
    for (int j = 0; j < 3; j++)
        memset(bufs[j], GUARD, bytes);
    char *io = (char *)bufs[0] + off * es, *in = bufs[1];
    for (size_t i = 0; i < count; i++) {
        put_raw(t, io, i, a_ref[i]);
        put_raw(t, in, i, b_ref[i]);
    }
    fn(io, in, count);
    if (op == GX_AVG && divide)
        divide(io, count, nranks);
    else if (op == GX_AVG)
        CHECK(gx_reduce_finish_avg(io, t->dt, count, nranks) == GX_OK, "finish_avg: %s",
              gx_last_error());
    for (size_t i = 0; i < count && bad < 3; i++) {
        uint64_t want = ref_op(t, op, a_ref[i], b_ref[i]);
        if (op == GX_AVG)
            want = ref_avg(t, want, nranks);
        uint64_t got = get_raw(t, io, i);
        if (!same(t, op, got, want)) {
            CHECK(!"mismatch", "%s%s %s n=%zu off=%zu [%zu]: %#llx op %#llx = %#llx, want %#llx",
                  t->name, variant, gx_redop_name(op), count, off, i,
                  (unsigned long long)a_ref[i], (unsigned long long)b_ref[i],
                  (unsigned long long)got, (unsigned long long)want);
            bad++;
        }
    }
    CHECK(guard_ok(bufs[0], off * es) && guard_ok((uint8_t *)io + count * es, (2 - off) * es),
          "%s%s %s n=%zu: wrote outside inout", t->name, variant, gx_redop_name(op), count);

    /* Three-operand: out at `off`, a at 0, b at `off`; inputs stay intact.
     * The loop body is the two-operand one's; at the big count only sum runs
     * it, to keep the test inside its time limit under sanitizers. */
    if (count > 100000 && op != GX_SUM)
        return;
    char *out = (char *)bufs[2] + off * es, *a = bufs[0], *b = (char *)bufs[1] + off * es;
    for (int j = 0; j < 3; j++)
        memset(bufs[j], GUARD, bytes);
    for (size_t i = 0; i < count; i++) {
        put_raw(t, a, i, a_ref[i]);
        put_raw(t, b, i, b_ref[i]);
    }
    fn3(out, a, b, count);
    for (size_t i = 0; i < count && bad < 6; i++) {
        uint64_t want = ref_op(t, op, a_ref[i], b_ref[i]);
        uint64_t got = get_raw(t, out, i);
        if (!same(t, op, got, want) || get_raw(t, a, i) != a_ref[i] ||
            get_raw(t, b, i) != b_ref[i]) {
            CHECK(!"mismatch", "%s%s %s3 n=%zu off=%zu [%zu]: %#llx op %#llx = %#llx, want %#llx",
                  t->name, variant, gx_redop_name(op), count, off, i,
                  (unsigned long long)a_ref[i], (unsigned long long)b_ref[i],
                  (unsigned long long)got, (unsigned long long)want);
            bad++;
        }
    }
    CHECK(guard_ok(bufs[2], off * es) && guard_ok((uint8_t *)out + count * es, (2 - off) * es),
          "%s%s %s3 n=%zu: wrote outside out", t->name, variant, gx_redop_name(op), count);
}

static void test_matrix(void)
{
    static const size_t counts[] = { 0, 1, 7, 1023, (1u << 20) + 3 };
    const size_t max_count = (1u << 20) + 3;
    uint64_t *a_ref = malloc(max_count * sizeof(*a_ref));
    uint64_t *b_ref = malloc(max_count * sizeof(*b_ref));
    void *bufs[3];
    for (int j = 0; j < 3; j++)
        bufs[j] = malloc((max_count + 2) * 8);

    for (size_t ti = 0; ti < NTYPES; ti++) {
        const struct type_info *t = &types[ti];
        for (int variant = 0; variant < 2; variant++) {
            const struct gx_reduce_kernels *k = NULL;
            const char *vname = "";
            if (variant == 1) { /* the portable kernels, when SIMD ones were picked */
                if (t->dt == GX_FLOAT16 && gx_reduce_cpu_has_f16c())
                    k = &gx_reduce_kernels_f16;
                else if (t->dt == GX_BFLOAT16 && gx_reduce_cpu_has_avx2())
                    k = &gx_reduce_kernels_bf16;
                else
                    continue;
                vname = "(portable)";
            }
            for (int op = 0; op < GX_REDOP_COUNT; op++) {
                int slot = op == GX_AVG ? GX_SUM : op;
                gx_reduce_fn fn = NULL;
                gx_reduce3_fn fn3 = NULL;
                divide_fn divide = NULL;
                if (k) {
                    fn = k->fn[slot];
                    fn3 = k->fn3[slot];
                    divide = k->divide;
                } else { /* through the public lookups */
                    CHECK(gx_reduce_lookup(t->dt, op, &fn) == GX_OK, "lookup %s", t->name);
                    CHECK(gx_reduce3_lookup(t->dt, op, &fn3) == GX_OK, "lookup3 %s", t->name);
                    if (!fn || !fn3)
                        continue;
                }
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                    for (size_t off = 0; off < 2; off++) {
                        if (counts[ci] > 100000 && (off == 0 || k))
                            continue; /* the big count once, misaligned, looked up */
                        run_case(t, vname, fn, fn3, divide, op, counts[ci], off, a_ref,
                                 b_ref, bufs);
                    }
                }
            }
        }
    }
    free(a_ref);
    free(b_ref);
    for (int j = 0; j < 3; j++)
        free(bufs[j]);
}

/* ---- conversions --------------------------------------------------------- */

#ifdef __x86_64__
#include <cpuid.h>
__attribute__((target("f16c"))) static float hw_f16_to_f32(uint16_t h)
{
    return _cvtsh_ss(h);
}
__attribute__((target("f16c"))) static uint16_t hw_f32_to_f16(float f)
{
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#endif

static const struct type_info *type_of(enum gx_datatype dt)
{
    for (size_t i = 0; i < NTYPES; i++)
        if (types[i].dt == dt)
            return &types[i];
    return NULL;
}

/* Check both narrowing conversions on one f32 input. */
static void check_narrow(float x)
{
    const struct type_info *f16 = type_of(GX_FLOAT16), *bf16 = type_of(GX_BFLOAT16);
    uint32_t xb = gx_f32_bits(x);
    uint16_t h = gx_f32_to_f16(x), b = gx_f32_to_bf16(x);
    uint16_t want_h, want_b;

    if (isnan(x)) { /* quiet NaN, same sign, top payload bits kept */
        want_h = (uint16_t)(((xb >> 16) & 0x8000) | 0x7e00 | ((xb >> 13) & 0x1ff));
        want_b = (uint16_t)((xb >> 16) | 0x40);
    } else {
        want_h = (uint16_t)encode(f16, x);
        want_b = (uint16_t)encode(bf16, x);
    }
    CHECK(h == want_h, "f32_to_f16(%a = %#x) = %#x, want %#x", (double)x, xb, h, want_h);
    CHECK(b == want_b, "f32_to_bf16(%a = %#x) = %#x, want %#x", (double)x, xb, b, want_b);
#ifdef __x86_64__
    if (gx_reduce_cpu_has_f16c())
        CHECK(h == hw_f32_to_f16(x), "f32_to_f16(%#x) = %#x, vcvtps2ph says %#x", xb, h,
              hw_f32_to_f16(x));
#endif
}

static void test_conversions(void)
{
    int has_hw = gx_reduce_cpu_has_f16c();

    /* Every f16 and bf16 pattern widens exactly and narrows back to itself
     * (a NaN comes back quiet); every rounding boundary of both formats. */
    for (uint32_t p = 0; p < 0x10000; p++) {
        uint16_t h = (uint16_t)p;
        float f = gx_f16_to_f32(h), g = gx_bf16_to_f32(h);
        int f16_nan = (h & 0x7fff) > 0x7c00, bf16_nan = (h & 0x7fff) > 0x7f80;

        if (f16_nan) {
            CHECK(isnan(f) && !!signbit(f) == !!(h & 0x8000), "f16 %#x widened to %a", h,
                  (double)f);
            CHECK(gx_f32_to_f16(f) == (h | 0x200), "f16 NaN %#x round trip %#x", h,
                  gx_f32_to_f16(f));
        } else {
            float want = (float)ref_f16_decode(h);
            CHECK(gx_f32_bits(f) == gx_f32_bits(want), "f16 %#x widened to %a, want %a", h,
                  (double)f, (double)want);
            CHECK(gx_f32_to_f16(f) == h, "f16 %#x round trip %#x", h, gx_f32_to_f16(f));
        }
        CHECK(gx_f32_bits(g) == (p << 16), "bf16 %#x widened to %#x", h, gx_f32_bits(g));
        CHECK(gx_f32_to_bf16(g) == (bf16_nan ? h | 0x40 : h), "bf16 %#x round trip %#x", h,
              gx_f32_to_bf16(g));
#ifdef __x86_64__
        if (has_hw)
            CHECK(gx_f32_bits(f) == gx_f32_bits(hw_f16_to_f32(h)),
                  "f16_to_f32(%#x) = %#x, vcvtph2ps says %#x", h, gx_f32_bits(f),
                  gx_f32_bits(hw_f16_to_f32(h)));
#endif
        /* Midpoints to the next pattern up, and one f32 ulp either side. */
        if ((h & 0x8000) || f16_nan || h >= 0x7c00)
            goto bf16_mid;
        float mid = (float)((ref_f16_decode(h) + ref_f16_decode((uint16_t)(h + 1))) / 2);
        for (int sgn = 0; sgn < 2; sgn++) {
            float m = sgn ? -mid : mid;
            check_narrow(m);
            check_narrow(nextafterf(m, 0));
            check_narrow(nextafterf(m, sgn ? -INFINITY : INFINITY));
        }
    bf16_mid:
        if ((h & 0x8000) || h >= 0x7f80)
            continue;
        float bmid = gx_f32_from_bits((p << 16) + 0x8000);
        for (int sgn = 0; sgn < 2; sgn++) {
            float m = sgn ? -bmid : bmid;
            check_narrow(m);
            check_narrow(nextafterf(m, 0));
            check_narrow(nextafterf(m, sgn ? -INFINITY : INFINITY));
        }
    }
    /* Random f32 patterns, NaNs and Infs included. */
    for (int i = 0; i < 1000000; i++)
        check_narrow(gx_f32_from_bits((uint32_t)rnd()));
    const uint32_t specials[] = { 0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f800001u,
                                  0xffc00000u, 0x7fffffffu, 0x477fefffu, 0x477ff000u,
                                  0x33000000u, 0x33000001u, 0x387fffffu, 1 };
    for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); i++)
        check_narrow(gx_f32_from_bits(specials[i]));

    /* bf16 ties to even, spelled out. */
    const uint32_t bf_in[] = { 0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu,
                               0x7f7f8000u, 0x7f7f7fffu, 0x00008000u, 0x00018000u,
                               0x80018000u, 0xff7f8000u, 0x7f800001u, 0x7f800000u };
    const uint16_t bf_out[] = { 0x3f80, 0x3f82, 0x3f81, 0x3f80, 0x7f80, 0x7f7f,
                                0x0000, 0x0002, 0x8002, 0xff80, 0x7fc0, 0x7f80 };
    for (size_t i = 0; i < sizeof(bf_in) / sizeof(bf_in[0]); i++)
        CHECK(gx_f32_to_bf16(gx_f32_from_bits(bf_in[i])) == bf_out[i],
              "f32_to_bf16(%#x) = %#x, want %#x", bf_in[i],
              gx_f32_to_bf16(gx_f32_from_bits(bf_in[i])), bf_out[i]);
    /* f16: 65520 ties up to Inf, 65519.99 stays at 65504; 2^-25 ties to 0. */
    CHECK(gx_f32_to_f16(65520.0f) == 0x7c00, "65520 -> %#x", gx_f32_to_f16(65520.0f));
    CHECK(gx_f32_to_f16(65519.99f) == 0x7bff, "65519.99 -> %#x", gx_f32_to_f16(65519.99f));
    CHECK(gx_f32_to_f16(0x1p-25f) == 0 && gx_f32_to_f16(-0x1p-25f) == 0x8000, "2^-25");
    CHECK(gx_f32_to_f16(0x1.8p-24f) == 2, "1.5 * 2^-24 ties to even 2^-23");
}

/* ---- NaN / signed zero rules of min and max, spelled out ----------------- */

static void test_minmax_rules(void)
{
    const uint32_t qnan1 = 0x7fc00001u, qnan2 = 0xffc00002u, pz = 0, nz = 0x80000000u,
                   one = 0x3f800000u;
    struct { enum gx_redop op; uint32_t a, b, want; } cases[] = {
        { GX_MAX, qnan1, one, qnan1 }, { GX_MAX, one, qnan1, qnan1 },
        { GX_MAX, qnan1, qnan2, qnan1 }, { GX_MIN, qnan2, qnan1, qnan2 },
        { GX_MIN, one, qnan2, qnan2 }, { GX_MAX, nz, pz, pz }, { GX_MAX, pz, nz, pz },
        { GX_MIN, nz, pz, nz }, { GX_MIN, pz, nz, nz }, { GX_MAX, 0xff800000u, nz, nz },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gx_reduce_fn f32, bf16;
        float a = gx_f32_from_bits(cases[i].a), b = gx_f32_from_bits(cases[i].b);
        uint16_t ha = (uint16_t)(cases[i].a >> 16), hb = (uint16_t)(cases[i].b >> 16);
        CHECK(gx_reduce_lookup(GX_FLOAT32, cases[i].op, &f32) == GX_OK, "lookup");
        CHECK(gx_reduce_lookup(GX_BFLOAT16, cases[i].op, &bf16) == GX_OK, "lookup");
        f32(&a, &b, 1);
        bf16(&ha, &hb, 1);
        CHECK(gx_f32_bits(a) == cases[i].want, "case %zu: f32 %s(%#x, %#x) = %#x", i,
              gx_redop_name(cases[i].op), cases[i].a, cases[i].b, gx_f32_bits(a));
        CHECK(ha == cases[i].want >> 16, "case %zu: bf16 %s = %#x", i,
              gx_redop_name(cases[i].op), ha);
    }
}

/* ---- argument checks and integer averages -------------------------------- */

static void test_args(void)
{
    gx_reduce_fn fn = (gx_reduce_fn)0x1;
    gx_reduce3_fn fn3 = (gx_reduce3_fn)0x1;
    gx_reduce_fn sum, avg;

    CHECK(gx_reduce_lookup(GX_DATATYPE_COUNT, GX_SUM, &fn) == GX_EINVAL &&
              strstr(gx_last_error(), "dtype"), "bad dtype: %s", gx_last_error());
    CHECK(gx_reduce_lookup((enum gx_datatype)-1, GX_SUM, &fn) == GX_EINVAL, "negative dtype");
    CHECK(gx_reduce_lookup(GX_FLOAT32, GX_REDOP_COUNT, &fn) == GX_EINVAL &&
              strstr(gx_last_error(), "op"), "bad op: %s", gx_last_error());
    CHECK(gx_reduce3_lookup(GX_FLOAT32, (enum gx_redop)-3, &fn3) == GX_EINVAL &&
              strstr(gx_last_error(), "op"), "bad op3: %s", gx_last_error());
    CHECK(gx_reduce_lookup(GX_FLOAT32, GX_SUM, NULL) == GX_EINVAL &&
              strstr(gx_last_error(), "fn"), "NULL fn: %s", gx_last_error());
    CHECK(gx_reduce3_lookup(GX_INT8, GX_MAX, NULL) == GX_EINVAL, "NULL fn3");
    CHECK(fn == (gx_reduce_fn)0x1 && fn3 == (gx_reduce3_fn)0x1, "output written on failure");

    CHECK(gx_reduce_lookup(GX_BFLOAT16, GX_AVG, &avg) == GX_OK &&
              gx_reduce_lookup(GX_BFLOAT16, GX_SUM, &sum) == GX_OK && avg == sum,
          "avg reduces with the sum kernel");

    int32_t v[4] = { 0 };
    CHECK(gx_reduce_finish_avg(v, GX_INT32, 4, 0) == GX_EINVAL &&
              strstr(gx_last_error(), "nranks"), "nranks 0: %s", gx_last_error());
    CHECK(gx_reduce_finish_avg(NULL, GX_INT32, 4, 2) == GX_EINVAL &&
              strstr(gx_last_error(), "buf"), "NULL buf: %s", gx_last_error());
    CHECK(gx_reduce_finish_avg(v, (enum gx_datatype)42, 4, 2) == GX_EINVAL &&
              strstr(gx_last_error(), "dtype"), "bad dtype: %s", gx_last_error());
    CHECK(gx_reduce_finish_avg(NULL, GX_FLOAT32, 0, 2) == GX_OK, "empty avg");

    /* Integer average truncates toward zero (after a wrapping sum). */
    int32_t iv[4] = { -7, 7, INT32_MIN, -1 };
    CHECK(gx_reduce_finish_avg(iv, GX_INT32, 4, 2) == GX_OK, "i32 avg");
    CHECK(iv[0] == -3 && iv[1] == 3 && iv[2] == INT32_MIN / 2 && iv[3] == 0,
          "i32 avg: %d %d %d %d", iv[0], iv[1], iv[2], iv[3]);
    uint8_t uv[2] = { 255, 5 };
    CHECK(gx_reduce_finish_avg(uv, GX_UINT8, 2, 2) == GX_OK && uv[0] == 127 && uv[1] == 2,
          "u8 avg: %u %u", uv[0], uv[1]);
    int8_t wrap[1] = { 100 }, other[1] = { 100 };
    gx_reduce_fn i8sum;
    CHECK(gx_reduce_lookup(GX_INT8, GX_SUM, &i8sum) == GX_OK, "lookup");
    i8sum(wrap, other, 1);
    CHECK(wrap[0] == -56, "i8 100 + 100 wraps to %d", wrap[0]);
    /* Zero count with NULL pointers is allowed. */
    i8sum(NULL, NULL, 0);
}

int main(void)
{
    printf("test_reduce: f16 kernels %s, bf16 kernels %s\n",
           gx_reduce_cpu_has_f16c() ? "F16C" : "portable",
           gx_reduce_cpu_has_avx2() ? "AVX2" : "portable");
    struct timespec t0, t1, t2;
    test_args();
    test_minmax_rules();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    test_conversions();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    test_matrix();
    clock_gettime(CLOCK_MONOTONIC, &t2);
    printf("test_reduce: conversions %.1f s, kernel matrix %.1f s\n",
           (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
           (double)(t2.tv_sec - t1.tv_sec) + (t2.tv_nsec - t1.tv_nsec) / 1e9);
    CHECK_DONE("test_reduce");
}
