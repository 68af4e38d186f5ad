/*
 * perf_data.c - send data patterns and the result check of gx-perf.
 *
 * Patterns (r = rank, g = global element index, n = ranks):
 *   data movement   ((37r + 11g + g/128) mod 101) - 50     (0..100 unsigned)
 *   sum, avg        ((5r + 3g + g/512) mod 9) - 4           (0..8 unsigned)
 *   min, max        ((13r + 7g + g/256) mod 31) - 15        (0..30 unsigned)
 *   prod            1, except rank g mod n holds +-2 (2 or 3 unsigned)
 * so results stay small integers: exact in every type, and a missing, doubled
 * or misplaced contribution changes the value. Integer sums and products are
 * compared after wrapping to the type, and integer avg truncates as C integer
 * division does (gx's documented semantics, like ncclAvg).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "perf_data.h"

/* ---- f16 / bf16 ------------------------------------------------------- */

static float f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float f;
    if (exp == 0) {
        f = ldexpf((float)man, -24); /* zero or subnormal */
    } else if (exp == 31) {
        uint32_t bits = 0x7f800000u | (man << 13);
        memcpy(&f, &bits, sizeof(f));
    } else {
        f = ldexpf((float)(man | 0x400), (int)exp - 25);
    }
    if (sign)
        f = -f;
    return f;
}

static uint16_t float_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    float a = fabsf(f);
    if (isnan(f))
        return sign | 0x7e00;
    if (a >= 65520.0f) /* rounds to infinity */
        return sign | 0x7c00;
    if (a < ldexpf(1.0f, -14)) { /* subnormal: units of 2^-24, nearest even */
        float q = a * ldexpf(1.0f, 24);
        return sign | (uint16_t)nearbyintf(q);
    }
    int e;
    float m = frexpf(a, &e);                 /* a = m * 2^e, m in [0.5, 1) */
    float q = nearbyintf(ldexpf(m, 11));     /* 11 significant bits, nearest even */
    if (q >= 2048.0f) {
        q /= 2;
        e++;
    }
    return sign | (uint16_t)((e + 14) << 10) | (uint16_t)((uint32_t)q & 0x3ff);
}

static float bf16_to_float(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if (isnan(f))
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1); /* round to nearest even */
    return (uint16_t)(x >> 16);
}

/* ---- element access --------------------------------------------------- */

static int is_float(enum gx_datatype t)
{
    return t == GX_FLOAT16 || t == GX_BFLOAT16 || t == GX_FLOAT32 || t == GX_FLOAT64;
}

static int is_unsigned(enum gx_datatype t)
{
    return t == GX_UINT8 || t == GX_UINT32 || t == GX_UINT64;
}

/* v is an integer for every integer type (it wraps to the type). */
static void store(void *buf, size_t j, enum gx_datatype t, double v)
{
    switch (t) {
    case GX_INT8: ((int8_t *)buf)[j] = (int8_t)(int64_t)v; break;
    case GX_UINT8: ((uint8_t *)buf)[j] = (uint8_t)(int64_t)v; break;
    case GX_INT32: ((int32_t *)buf)[j] = (int32_t)(int64_t)v; break;
    case GX_UINT32: ((uint32_t *)buf)[j] = (uint32_t)(int64_t)v; break;
    case GX_INT64: ((int64_t *)buf)[j] = (int64_t)v; break;
    case GX_UINT64: ((uint64_t *)buf)[j] = (uint64_t)(int64_t)v; break;
    case GX_FLOAT16: ((uint16_t *)buf)[j] = float_to_f16((float)v); break;
    case GX_BFLOAT16: ((uint16_t *)buf)[j] = float_to_bf16((float)v); break;
    case GX_FLOAT32: ((float *)buf)[j] = (float)v; break;
    case GX_FLOAT64: ((double *)buf)[j] = v; break;
    default: break;
    }
}

static double load(const void *buf, size_t j, enum gx_datatype t)
{
    switch (t) {
    case GX_INT8: return ((const int8_t *)buf)[j];
    case GX_UINT8: return ((const uint8_t *)buf)[j];
    case GX_INT32: return ((const int32_t *)buf)[j];
    case GX_UINT32: return ((const uint32_t *)buf)[j];
    case GX_INT64: return (double)((const int64_t *)buf)[j];
    case GX_UINT64: return (double)((const uint64_t *)buf)[j];
    case GX_FLOAT16: return f16_to_float(((const uint16_t *)buf)[j]);
    case GX_BFLOAT16: return bf16_to_float(((const uint16_t *)buf)[j]);
    case GX_FLOAT32: return ((const float *)buf)[j];
    case GX_FLOAT64: return ((const double *)buf)[j];
    default: return NAN;
    }
}

/* The value rounded or wrapped to type t, as gx must store it. */
static double as_type(double v, enum gx_datatype t)
{
    uint64_t tmp;
    store(&tmp, 0, t, v);
    return load(&tmp, 0, t);
}

/* ---- patterns --------------------------------------------------------- */

static double value(int r, size_t g, int nranks, enum gx_redop op, int has_op, int uns)
{
    size_t ur = (size_t)r;
    if (!has_op) {
        double v = (double)((37 * ur + 11 * g + g / 128) % 101);
        return uns ? v : v - 50;
    }
    switch (op) {
    case GX_PROD: {
        if (g % (size_t)nranks != ur)
            return 1;
        int odd = (int)((g / (size_t)nranks) & 1);
        return uns ? (odd ? 3 : 2) : (odd ? -2 : 2);
    }
    case GX_MIN:
    case GX_MAX: {
        double v = (double)((13 * ur + 7 * g + g / 256) % 31);
        return uns ? v : v - 15;
    }
    default: { /* sum, avg */
        double v = (double)((5 * ur + 3 * g + g / 512) % 9);
        return uns ? v : v - 4;
    }
    }
}

void perf_data_fill(void *buf, enum gx_datatype t, size_t first, size_t count, int rank,
                    int nranks, enum gx_redop op, int has_op)
{
    int uns = is_unsigned(t);
    for (size_t k = 0; k < count; k++)
        store(buf, k, t, value(rank, first + k, nranks, op, has_op, uns));
}

void perf_data_poison(void *buf, size_t bytes)
{
    /* 0xa5 bytes: -2.9e-16 as f32, -0.0224 as f16, -91 as i8: never a result. */
    memset(buf, 0xa5, bytes);
}

static double reduced(size_t g, int nranks, enum gx_redop op, enum gx_datatype t)
{
    int uns = is_unsigned(t);
    double acc = value(0, g, nranks, op, 1, uns);
    for (int r = 1; r < nranks; r++) {
        double v = value(r, g, nranks, op, 1, uns);
        switch (op) {
        case GX_PROD: acc *= v; break;
        case GX_MIN: acc = v < acc ? v : acc; break;
        case GX_MAX: acc = v > acc ? v : acc; break;
        default: acc += v; break;
        }
    }
    if (op != GX_AVG)
        return as_type(acc, t);
    if (is_float(t))
        return as_type(acc / nranks, t);
    return trunc(as_type(acc, t) / nranks); /* C integer division of the wrapped sum */
}

static double type_epsilon(enum gx_datatype t)
{
    switch (t) {
    case GX_FLOAT16: return ldexp(1.0, -10);
    case GX_BFLOAT16: return ldexp(1.0, -7);
    case GX_FLOAT32: return ldexp(1.0, -23);
    case GX_FLOAT64: return ldexp(1.0, -52);
    default: return 0;
    }
}

size_t perf_data_check(const struct perf_coll *coll, const void *recv, enum gx_datatype t,
                       size_t recvcount, size_t param, int rank, int nranks, int root,
                       enum gx_redop op)
{
    int has_op = (coll->flags & PERF_COLL_HAS_OP) != 0, uns = is_unsigned(t), flt = is_float(t);
    /* Sums of these integers are exact in every order; avg rounds once more. */
    double rel = op == GX_AVG ? 2 * type_epsilon(t) : nranks * type_epsilon(t);
    size_t wrong = 0;
    for (size_t j = 0; j < recvcount; j++) {
        struct perf_src s = coll->source(j, rank, nranks, root, param);
        double want;
        if (s.kind == PERF_SRC_NONE)
            continue;
        if (s.kind == PERF_SRC_RANK)
            want = as_type(value(s.rank, s.index, nranks, op, has_op, uns), t);
        else
            want = reduced(s.index, nranks, op, t);
        double got = load(recv, j, t);
        if (flt) {
            double tol = (op == GX_MIN || op == GX_MAX || !has_op) ? 0 : rel * fmax(1, fabs(want));
            if (!(fabs(got - want) <= tol)) /* NaN counts as wrong */
                wrong++;
        } else if (got != want) {
            wrong++;
        }
    }
    return wrong;
}
