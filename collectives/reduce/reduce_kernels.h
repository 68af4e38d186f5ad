/*
 * reduce_kernels.h - the per-datatype kernel tables behind reduce.h, shared
 * by reduce.c (dispatch) and reduce_{int,float,half}.c (the kernels).
 *
 * Owns: the table layout and the loop template. Only reduce*.c and the unit
 * test include it; algorithms use reduce.h.
 */
#ifndef GX_COLLECTIVES_REDUCE_KERNELS_H
#define GX_COLLECTIVES_REDUCE_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

#include "collectives/reduce/reduce.h"

/* Ops with their own kernels; GX_AVG uses the GX_SUM ones. */
#define GX_REDUCE_KERNEL_OPS (GX_MAX + 1)

struct gx_reduce_kernels {
    gx_reduce_fn fn[GX_REDUCE_KERNEL_OPS];    /* indexed by GX_SUM..GX_MAX */
    gx_reduce3_fn fn3[GX_REDUCE_KERNEL_OPS];
    void (*divide)(void *buf, size_t count, int nranks); /* GX_AVG finish */
};

extern const struct gx_reduce_kernels gx_reduce_kernels_i8;
extern const struct gx_reduce_kernels gx_reduce_kernels_u8;
extern const struct gx_reduce_kernels gx_reduce_kernels_i32;
extern const struct gx_reduce_kernels gx_reduce_kernels_u32;
extern const struct gx_reduce_kernels gx_reduce_kernels_i64;
extern const struct gx_reduce_kernels gx_reduce_kernels_u64;
extern const struct gx_reduce_kernels gx_reduce_kernels_f32;
extern const struct gx_reduce_kernels gx_reduce_kernels_f64;
extern const struct gx_reduce_kernels gx_reduce_kernels_bf16;
/* Portable f16 kernels, and the F16C+AVX ones; bf16 compiled for AVX2. The
 * pointers are NULL where not built (only on x86_64). */
extern const struct gx_reduce_kernels gx_reduce_kernels_f16;
extern const struct gx_reduce_kernels *const gx_reduce_kernels_f16_f16c;
extern const struct gx_reduce_kernels *const gx_reduce_kernels_bf16_avx2;

/** True when this CPU and OS can run the F16C+AVX kernels (cached). */
bool gx_reduce_cpu_has_f16c(void);
/** True when this CPU and OS can run AVX2 code (cached). */
bool gx_reduce_cpu_has_avx2(void);

/*
 * Stamp out the two- and three-operand loops of one (type, op) from an
 * element function OP(a, b). The bodies are kept trivial, with restrict
 * pointers, so the compiler vectorises them (these files build at -O3).
 * The _ATTR form adds function attributes, e.g. a target("avx2") clone that
 * is only called after a run-time CPU check.
 */
#define GX_REDUCE_DEFINE_KERNELS(name, T, OP) GX_REDUCE_DEFINE_KERNELS_ATTR(name, T, OP, )

/*
 * Function multiversioning for the plain kernels: on x86_64 ELF the compiler
 * builds each loop twice (SSE2 baseline and AVX2) and an ifunc resolver picks
 * one when the library is loaded, from the CPU's features. Memory-bound at
 * large sizes either way; AVX2 doubles the in-cache rate (pipelined chunks).
 * Not under TSan: ifunc resolvers run before the TSan runtime is up and crash
 * every TSan binary at load.
 */
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define GX_REDUCE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GX_REDUCE_CLONES
#endif
#define GX_REDUCE_DEFINE_KERNELS_ATTR(name, T, OP, ATTR)                       \
    ATTR static void name(void *restrict inout_, const void *restrict in_,    \
                          size_t count)                                        \
    {                                                                          \
        T *restrict io = inout_;                                               \
        const T *restrict in = in_;                                            \
        for (size_t i = 0; i < count; i++)                                     \
            io[i] = OP(io[i], in[i]);                                          \
    }                                                                          \
    ATTR static void name##3(void *restrict out_, const void *restrict a_,     \
                             const void *restrict b_, size_t count)            \
    {                                                                          \
        T *restrict out = out_;                                                \
        const T *restrict a = a_;                                              \
        const T *restrict b = b_;                                              \
        for (size_t i = 0; i < count; i++)                                     \
            out[i] = OP(a[i], b[i]);                                           \
    }

#endif
