/*
 * reduce_int.c - reduction kernels for i8 u8 i32 u32 i64 u64.
 *
 * Sum and prod are computed in the unsigned type of the same width, where
 * wrap-around is defined; the bits are those of two's complement signed
 * arithmetic, so signed and unsigned types share those kernels. Only min,
 * max and the average's division depend on signedness.
 */
#include <stdint.h>

#include "collectives/reduce/reduce_kernels.h"

#define KERNELS(name, T, OP) GX_REDUCE_DEFINE_KERNELS_ATTR(name, T, OP, GX_REDUCE_CLONES)

/* uint8_t promotes to int: 255 * 255 still fits, so no overflow before the
 * truncating cast. 32- and 64-bit unsigned types do not promote. */
static inline uint8_t sum_u8(uint8_t a, uint8_t b) { return (uint8_t)(a + b); }
static inline uint8_t prod_u8(uint8_t a, uint8_t b) { return (uint8_t)(a * b); }
static inline uint32_t sum_u32(uint32_t a, uint32_t b) { return a + b; }
static inline uint32_t prod_u32(uint32_t a, uint32_t b) { return a * b; }
static inline uint64_t sum_u64(uint64_t a, uint64_t b) { return a + b; }
static inline uint64_t prod_u64(uint64_t a, uint64_t b) { return a * b; }

#define MIN_OF(a, b) ((b) < (a) ? (b) : (a))
#define MAX_OF(a, b) ((b) > (a) ? (b) : (a))

KERNELS(u8_sum, uint8_t, sum_u8)
KERNELS(u8_prod, uint8_t, prod_u8)
KERNELS(u8_min, uint8_t, MIN_OF)
KERNELS(u8_max, uint8_t, MAX_OF)
KERNELS(i8_min, int8_t, MIN_OF)
KERNELS(i8_max, int8_t, MAX_OF)

KERNELS(u32_sum, uint32_t, sum_u32)
KERNELS(u32_prod, uint32_t, prod_u32)
KERNELS(u32_min, uint32_t, MIN_OF)
KERNELS(u32_max, uint32_t, MAX_OF)
KERNELS(i32_min, int32_t, MIN_OF)
KERNELS(i32_max, int32_t, MAX_OF)

KERNELS(u64_sum, uint64_t, sum_u64)
KERNELS(u64_prod, uint64_t, prod_u64)
KERNELS(u64_min, uint64_t, MIN_OF)
KERNELS(u64_max, uint64_t, MAX_OF)
KERNELS(i64_min, int64_t, MIN_OF)
KERNELS(i64_max, int64_t, MAX_OF)

/* Average: C division truncates toward zero; n >= 1, so no INT_MIN / -1. */
#define DEFINE_DIVIDE(name, T)                                                 \
    static void name(void *buf_, size_t count, int nranks)                     \
    {                                                                          \
        T *restrict buf = buf_;                                                \
        T n = (T)nranks;                                                       \
        for (size_t i = 0; i < count; i++)                                     \
            buf[i] = (T)(buf[i] / n);                                          \
    }
DEFINE_DIVIDE(i8_divide, int8_t)
DEFINE_DIVIDE(u8_divide, uint8_t)
DEFINE_DIVIDE(i32_divide, int32_t)
DEFINE_DIVIDE(u32_divide, uint32_t)
DEFINE_DIVIDE(i64_divide, int64_t)
DEFINE_DIVIDE(u64_divide, uint64_t)

#define INT_TABLE(bits, sign)                                                  \
    {                                                                          \
        .fn = { [GX_SUM] = u##bits##_sum, [GX_PROD] = u##bits##_prod,          \
                [GX_MIN] = sign##bits##_min, [GX_MAX] = sign##bits##_max },    \
        .fn3 = { [GX_SUM] = u##bits##_sum3, [GX_PROD] = u##bits##_prod3,       \
                 [GX_MIN] = sign##bits##_min3, [GX_MAX] = sign##bits##_max3 }, \
        .divide = sign##bits##_divide,                                         \
    }

const struct gx_reduce_kernels gx_reduce_kernels_i8 = INT_TABLE(8, i);
const struct gx_reduce_kernels gx_reduce_kernels_u8 = INT_TABLE(8, u);
const struct gx_reduce_kernels gx_reduce_kernels_i32 = INT_TABLE(32, i);
const struct gx_reduce_kernels gx_reduce_kernels_u32 = INT_TABLE(32, u);
const struct gx_reduce_kernels gx_reduce_kernels_i64 = INT_TABLE(64, i);
const struct gx_reduce_kernels gx_reduce_kernels_u64 = INT_TABLE(64, u);
