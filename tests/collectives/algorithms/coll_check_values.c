/*
 * coll_check_values.c - the values every rank fills in and the reference
 * result computed the slow obvious way (coll_check.h).
 */
#include "coll_check.h"

/* ---- values ------------------------------------------------------------- */

uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

bool is_float(enum gx_datatype t)
{
    return t == GX_FLOAT16 || t == GX_BFLOAT16 || t == GX_FLOAT32 || t == GX_FLOAT64;
}
static 
float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Exact for the small integers and halves the tests store. */
static uint16_t float_to_half(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    uint32_t sign = (b >> 16) & 0x8000;
    int exp = (int)((b >> 23) & 0xff) - 127 + 15;
    uint32_t man = b & 0x7fffff;
    if ((b & 0x7fffffff) == 0)
        return (uint16_t)sign;
    if (exp <= 0) { /* subnormal, round to nearest even */
        man |= 0x800000;
        int shift = 14 - exp;
        uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00);
    uint32_t r = ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
        r++;
    return (uint16_t)(sign | r);
}
static 
float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static 
uint16_t float_to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7fff + ((b >> 16) & 1);
    return (uint16_t)(b >> 16);
}

/* A value as double (floats) or as the integer's bits widened (ints). */
double get_f(const void *buf, enum gx_datatype t, size_t i)
{
    switch (t) {
    case GX_FLOAT16: return half_to_float(((const uint16_t *)buf)[i]);
    case GX_BFLOAT16: return bf16_to_float(((const uint16_t *)buf)[i]);
    case GX_FLOAT32: return ((const float *)buf)[i];
    case GX_FLOAT64: return ((const double *)buf)[i];
    default: return 0;
    }
}

void set_f(void *buf, enum gx_datatype t, size_t i, double v)
{
    switch (t) {
    case GX_FLOAT16: ((uint16_t *)buf)[i] = float_to_half((float)v); break;
    case GX_BFLOAT16: ((uint16_t *)buf)[i] = float_to_bf16((float)v); break;
    case GX_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case GX_FLOAT64: ((double *)buf)[i] = v; break;
    default: break;
    }
}

uint64_t get_u(const void *buf, enum gx_datatype t, size_t i)
{
    switch (t) {
    case GX_INT8: case GX_UINT8: return ((const uint8_t *)buf)[i];
    case GX_INT32: case GX_UINT32: return ((const uint32_t *)buf)[i];
    default: return ((const uint64_t *)buf)[i];
    }
}
static 
void set_u(void *buf, enum gx_datatype t, size_t i, uint64_t v)
{
    switch (t) {
    case GX_INT8: case GX_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case GX_INT32: case GX_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    default: ((uint64_t *)buf)[i] = v; break;
    }
}
static 
int bits_of(enum gx_datatype t)
{
    return (int)gx_datatype_size(t) * 8;
}
static 
int64_t sext(uint64_t v, int bits)
{
    if (bits == 64)
        return (int64_t)v;
    uint64_t m = 1ull << (bits - 1);
    v &= (1ull << bits) - 1;
    return (int64_t)((v ^ m) - m);
}
static 
bool is_signed(enum gx_datatype t)
{
    return t == GX_INT8 || t == GX_INT32 || t == GX_INT64;
}

/* Input element i of rank r for a case. Floats: small integers (exact),
 * for prod only +-1 and +-2. */
void fill(void *buf, enum gx_datatype t, enum gx_redop op, size_t n, int r, uint32_t seed,
                 size_t base)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t h = mix(seed ^ mix((uint32_t)r * 0x9e3779b1u ^ (uint32_t)(i + base)));
        if (is_float(t)) {
            double v = op == GX_PROD ? ((h & 1) ? 1.0 : 2.0) * ((h & 2) ? -1 : 1)
                                     : (double)((int)(h % 9) - 4);
            set_f(buf, t, i, v);
        } else {
            set_u(buf, t, i, ((uint64_t)h << 32) | mix(h));
        }
    }
}

/* Reference reduction of element i over all ranks' inputs (input element
 * index `src_i` of each rank), stored into out[i]. */
void ref_reduce(void *out, size_t i, enum gx_datatype t, enum gx_redop op, int n,
                       uint32_t seed, size_t src_i)
{
    size_t es = gx_datatype_size(t);
    unsigned char v[8];
    if (is_float(t)) {
        double acc = 0;
        for (int r = 0; r < n; r++) {
            fill(v, t, op, 1, r, seed, src_i);
            double x = get_f(v, t, 0);
            if (r == 0)
                acc = x;
            else if (op == GX_SUM || op == GX_AVG)
                acc += x;
            else if (op == GX_PROD)
                acc *= x;
            else if (op == GX_MIN)
                acc = x < acc ? x : acc;
            else
                acc = x > acc ? x : acc;
        }
        if (op == GX_AVG) {
            if (t == GX_FLOAT64)
                acc = acc / n;
            else
                acc = (float)((float)acc / (float)n);
        }
        set_f(out, t, i, acc);
        return;
    }
    int bits = bits_of(t);
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    uint64_t acc = 0;
    for (int r = 0; r < n; r++) {
        fill(v, t, op, 1, r, seed, src_i);
        uint64_t x = get_u(v, t, 0) & mask;
        if (r == 0) {
            acc = x;
        } else if (op == GX_SUM || op == GX_AVG) {
            acc = (acc + x) & mask;
        } else if (op == GX_PROD) {
            acc = (acc * x) & mask;
        } else {
            bool less = is_signed(t) ? sext(x, bits) < sext(acc, bits) : x < acc;
            if ((op == GX_MIN) == less)
                acc = x;
        }
    }
    if (op == GX_AVG)
        acc = is_signed(t) ? (uint64_t)(sext(acc, bits) / n) & mask : (acc / (uint64_t)n) & mask;
    (void)es;
    set_u(out, t, i, acc);
}

bool same_elem(const void *a, const void *b, enum gx_datatype t, size_t i)
{
    size_t es = gx_datatype_size(t);
    return memcmp((const char *)a + i * es, (const char *)b + i * es, es) == 0;
}
