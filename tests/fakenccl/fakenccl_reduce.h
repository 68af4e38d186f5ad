/*
 * fakenccl_reduce.h - the fake NCCL's element-wise reductions, by NCCL data
 * type (0 int8 .. 9 bfloat16) and op (0 sum, 1 prod, 2 max, 3 min, 4 avg:
 * summed here, divided by fk_divide). f16/bf16 go through float, rounded
 * after each step.
 */
#ifndef GX_FAKENCCL_REDUCE_H
#define GX_FAKENCCL_REDUCE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline size_t fk_dt_size(int dt)
{
    static const size_t sz[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2 };
    return dt >= 0 && dt < 10 ? sz[dt] : 0;
}

static inline float fk_h2f(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;
    if (e == 0 && m == 0)
        u = s;
    else if (e == 31)
        u = s | 0x7f800000u | (m << 13);
    else if (e == 0) { /* subnormal */
        float f = ldexpf((float)m, -24);
        return s ? -f : f;
    } else
        u = s | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t fk_f2h(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t s = (uint16_t)((u >> 16) & 0x8000);
    if (isnan(f))
        return s | 0x7e00;
    float a = fabsf(f);
    if (a >= 65520.0f)
        return s | 0x7c00;
    if (a < ldexpf(1.0f, -14)) { /* subnormal: round to nearest even */
        return s | (uint16_t)lrintf(a * ldexpf(1.0f, 24));
    }
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    long q = lrintf(ldexpf(m, 11)); /* 11 significant bits, ties to even */
    if (q == 2048) {
        q = 1024;
        e++;
    }
    return s | (uint16_t)((e + 14) << 10) | (uint16_t)(q - 1024);
}

static inline float fk_b2f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t fk_f2b(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (isnan(f))
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1); /* ties to even */
    return (uint16_t)(u >> 16);
}

/* Sums and products wrap (computed in the unsigned type U), as NCCL's do. */
#define FK_OP(T, U, a, b, op)                                                                  \
    ((op) == 1 ? (T)((U)(a) * (U)(b)) : (op) == 2 ? ((a) > (b) ? (a) : (b))                     \
     : (op) == 3 ? ((a) < (b) ? (a) : (b)) : (T)((U)(a) + (U)(b)))
#define FK_LOOP(T, U)                                                                          \
    do {                                                                                       \
        T *x = (T *)acc;                                                                       \
        const T *y = (const T *)in;                                                            \
        for (size_t i = 0; i < n; i++)                                                         \
            x[i] = FK_OP(T, U, x[i], y[i], op);                                                \
    } while (0)

/* acc[i] = acc[i] op in[i] */
static inline void fk_reduce(int dt, int op, void *acc, const void *in, size_t n)
{
    switch (dt) {
    case 0: FK_LOOP(int8_t, uint32_t); break;
    case 1: FK_LOOP(uint8_t, uint32_t); break;
    case 2: FK_LOOP(int32_t, uint32_t); break;
    case 3: FK_LOOP(uint32_t, uint32_t); break;
    case 4: FK_LOOP(int64_t, uint64_t); break;
    case 5: FK_LOOP(uint64_t, uint64_t); break;
    case 7: FK_LOOP(float, float); break;
    case 8: FK_LOOP(double, double); break;
    case 6:
    case 9: {
        uint16_t *x = acc;
        const uint16_t *y = in;
        for (size_t i = 0; i < n; i++) {
            float a = dt == 6 ? fk_h2f(x[i]) : fk_b2f(x[i]);
            float b = dt == 6 ? fk_h2f(y[i]) : fk_b2f(y[i]);
            float r = FK_OP(float, float, a, b, op);
            x[i] = dt == 6 ? fk_f2h(r) : fk_f2b(r);
        }
        break;
    }
    }
}

/* avg: acc[i] /= n (floating types only; gx keeps integer averages). */
static inline void fk_divide(int dt, void *acc, size_t count, int n)
{
    for (size_t i = 0; i < count; i++) {
        if (dt == 7)
            ((float *)acc)[i] /= (float)n;
        else if (dt == 8)
            ((double *)acc)[i] /= (double)n;
        else if (dt == 6)
            ((uint16_t *)acc)[i] = fk_f2h(fk_h2f(((uint16_t *)acc)[i]) / (float)n);
        else if (dt == 9)
            ((uint16_t *)acc)[i] = fk_f2b(fk_b2f(((uint16_t *)acc)[i]) / (float)n);
    }
}

#endif
