/*
 * reduce_float.c - reduction kernels for f32 and f64.
 *
 * Plain loops the compiler vectorises (SSE2 on any x86_64, wider where the
 * build targets it). sum/prod are single IEEE operations per element; the
 * build uses ISO C mode, so no FMA contraction changes a result.
 *
 * min/max: NaN propagates (the first operand's NaN wins), -0 < +0, and the
 * result is bit-for-bit one of the operands. Written as a chain of selects
 * so it stays branch-free and vectorises.
 */
#include <stdint.h>
#include <string.h>

#include "collectives/reduce/half.h"
#include "collectives/reduce/reduce_kernels.h"

#define KERNELS(name, T, OP) GX_REDUCE_DEFINE_KERNELS_ATTR(name, T, OP, GX_REDUCE_CLONES)

static inline double gx_f64_from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

static inline uint64_t gx_f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static inline float sum_f32(float a, float b) { return a + b; }
static inline float prod_f32(float a, float b) { return a * b; }
static inline double sum_f64(double a, double b) { return a + b; }
static inline double prod_f64(double a, double b) { return a * b; }

/* Equal operands differ only for +0 / -0: AND of the bits picks +0 for max,
 * OR picks -0 for min; for any other equal pair both give the operand. */
static inline float max_f32(float a, float b)
{
    float m = b > a ? b : a;
    m = a == b ? gx_f32_from_bits(gx_f32_bits(a) & gx_f32_bits(b)) : m;
    m = b != b ? b : m;
    return a != a ? a : m;
}

static inline float min_f32(float a, float b)
{
    float m = b < a ? b : a;
    m = a == b ? gx_f32_from_bits(gx_f32_bits(a) | gx_f32_bits(b)) : m;
    m = b != b ? b : m;
    return a != a ? a : m;
}

static inline double max_f64(double a, double b)
{
    double m = b > a ? b : a;
    m = a == b ? gx_f64_from_bits(gx_f64_bits(a) & gx_f64_bits(b)) : m;
    m = b != b ? b : m;
    return a != a ? a : m;
}

static inline double min_f64(double a, double b)
{
    double m = b < a ? b : a;
    m = a == b ? gx_f64_from_bits(gx_f64_bits(a) | gx_f64_bits(b)) : m;
    m = b != b ? b : m;
    return a != a ? a : m;
}

KERNELS(f32_sum, float, sum_f32)
KERNELS(f32_prod, float, prod_f32)
KERNELS(f32_min, float, min_f32)
KERNELS(f32_max, float, max_f32)
KERNELS(f64_sum, double, sum_f64)
KERNELS(f64_prod, double, prod_f64)
KERNELS(f64_min, double, min_f64)
KERNELS(f64_max, double, max_f64)

/* A true division, not a multiply by 1/n: rounded once, like x / n. */
static void f32_divide(void *buf_, size_t count, int nranks)
{
    float *restrict buf = buf_;
    float n = (float)nranks;
    for (size_t i = 0; i < count; i++)
        buf[i] = buf[i] / n;
}

static void f64_divide(void *buf_, size_t count, int nranks)
{
    double *restrict buf = buf_;
    double n = (double)nranks;
    for (size_t i = 0; i < count; i++)
        buf[i] = buf[i] / n;
}

#define FLOAT_TABLE(t)                                                         \
    {                                                                          \
        .fn = { [GX_SUM] = t##_sum, [GX_PROD] = t##_prod,                      \
                [GX_MIN] = t##_min, [GX_MAX] = t##_max },                      \
        .fn3 = { [GX_SUM] = t##_sum3, [GX_PROD] = t##_prod3,                   \
                 [GX_MIN] = t##_min3, [GX_MAX] = t##_max3 },                   \
        .divide = t##_divide,                                                  \
    }

const struct gx_reduce_kernels gx_reduce_kernels_f32 = FLOAT_TABLE(f32);
const struct gx_reduce_kernels gx_reduce_kernels_f64 = FLOAT_TABLE(f64);
