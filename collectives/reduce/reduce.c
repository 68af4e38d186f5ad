/*
 * reduce.c - argument checks and dispatch from (datatype, op) to the kernel
 * tables of reduce_{int,float,half}.c. Semantics are documented in reduce.h.
 */
#include "collectives/reduce/reduce.h"

#include "collectives/reduce/reduce_kernels.h"
#include "common/log.h"

static const struct gx_reduce_kernels *kernels_for(enum gx_datatype dtype)
{
    switch (dtype) {
    case GX_INT8: return &gx_reduce_kernels_i8;
    case GX_UINT8: return &gx_reduce_kernels_u8;
    case GX_INT32: return &gx_reduce_kernels_i32;
    case GX_UINT32: return &gx_reduce_kernels_u32;
    case GX_INT64: return &gx_reduce_kernels_i64;
    case GX_UINT64: return &gx_reduce_kernels_u64;
    case GX_FLOAT16:
        if (gx_reduce_kernels_f16_f16c && gx_reduce_cpu_has_f16c())
            return gx_reduce_kernels_f16_f16c;
        return &gx_reduce_kernels_f16;
    case GX_BFLOAT16:
        if (gx_reduce_kernels_bf16_avx2 && gx_reduce_cpu_has_avx2())
            return gx_reduce_kernels_bf16_avx2;
        return &gx_reduce_kernels_bf16;
    case GX_FLOAT32: return &gx_reduce_kernels_f32;
    case GX_FLOAT64: return &gx_reduce_kernels_f64;
    case GX_DATATYPE_COUNT: break;
    }
    return NULL;
}

/* Resolve (dtype, op) to a table and a slot, or fail naming the argument. */
static int resolve(const char *who, enum gx_datatype dtype, enum gx_redop op,
                   const void *fn, const struct gx_reduce_kernels **kernels,
                   int *slot)
{
    const struct gx_reduce_kernels *k = kernels_for(dtype);

    if (!k)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: dtype %d is not a gx_datatype", who,
                       (int)dtype);
    if ((unsigned)op >= GX_REDOP_COUNT)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: op %d is not a gx_redop", who, (int)op);
    if (!fn)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: fn is NULL", who);
    *kernels = k;
    *slot = op == GX_AVG ? GX_SUM : (int)op;
    return GX_OK;
}

int gx_reduce_lookup(enum gx_datatype dtype, enum gx_redop op, gx_reduce_fn *fn)
{
    const struct gx_reduce_kernels *k = NULL;
    int slot = GX_SUM;
    int rc = resolve("gx_reduce_lookup", dtype, op, fn, &k, &slot);

    if (rc == GX_OK)
        *fn = k->fn[slot];
    return rc;
}

int gx_reduce3_lookup(enum gx_datatype dtype, enum gx_redop op, gx_reduce3_fn *fn)
{
    const struct gx_reduce_kernels *k = NULL;
    int slot = GX_SUM;
    int rc = resolve("gx_reduce3_lookup", dtype, op, fn, &k, &slot);

    if (rc == GX_OK)
        *fn = k->fn3[slot];
    return rc;
}

int gx_reduce_finish_avg(void *buf, enum gx_datatype dtype, size_t count, int nranks)
{
    const struct gx_reduce_kernels *k = kernels_for(dtype);

    if (!k)
        return gx_fail(GX_EINVAL, GX_SUB_COLL,
                       "gx_reduce_finish_avg: dtype %d is not a gx_datatype", (int)dtype);
    if (nranks < 1)
        return gx_fail(GX_EINVAL, GX_SUB_COLL,
                       "gx_reduce_finish_avg: nranks %d is not positive", nranks);
    if (!buf && count > 0)
        return gx_fail(GX_EINVAL, GX_SUB_COLL,
                       "gx_reduce_finish_avg: buf is NULL with count %zu", count);
    if (nranks > 1 && count > 0)
        k->divide(buf, count, nranks);
    return GX_OK;
}
