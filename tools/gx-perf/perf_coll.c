/*
 * perf_coll.c - the per-collective table of gx-perf.
 *
 * Counts, in-place offsets and bus-bandwidth factors follow nccl-tests
 * (src/<coll>.cu: *GetCollByteCount, *GetBw), so a figure from gx-perf means
 * what the same figure from all_reduce_perf means:
 *   all_reduce              busbw = algbw * 2(n-1)/n
 *   all_gather, reduce_scatter, alltoall, gather, scatter
 *                           busbw = algbw * (n-1)/n, algbw over n * count
 *   broadcast, reduce       busbw = algbw
 */
#include <string.h>

#include "perf_coll.h"

/* ---- counts ----------------------------------------------------------- */

static void counts_whole(size_t count, size_t align, int n, struct perf_counts *c)
{
    (void)n, (void)align;
    *c = (struct perf_counts){ .send = count, .recv = count, .param = count };
}

/* A rank's share of `count`, rounded down to a multiple of `align` elements
 * (a power of two; 1 = no rounding). */
static size_t per_rank(size_t count, size_t align, int n)
{
    size_t per = count / (size_t)n;
    return align > 1 ? per & ~(align - 1) : per;
}

static void counts_gather_like(size_t count, size_t align, int n, struct perf_counts *c)
{
    size_t per = per_rank(count, align, n);
    *c = (struct perf_counts){ .send = per, .recv = per * (size_t)n, .param = per,
                               .send_inplace_off = per, .recv_inplace_off = 0 };
}

static void counts_scatter_like(size_t count, size_t align, int n, struct perf_counts *c)
{
    size_t per = per_rank(count, align, n);
    *c = (struct perf_counts){ .send = per * (size_t)n, .recv = per, .param = per,
                               .send_inplace_off = 0, .recv_inplace_off = per };
}

static void counts_alltoall(size_t count, size_t align, int n, struct perf_counts *c)
{
    size_t per = per_rank(count, align, n);
    *c = (struct perf_counts){ .send = per * (size_t)n, .recv = per * (size_t)n, .param = per };
}

/* ---- bandwidth -------------------------------------------------------- */

static double factor_allreduce(int n) { return 2.0 * (n - 1) / n; }
static double factor_one(int n) { (void)n; return 1.0; }
static double factor_spread(int n) { return (double)(n - 1) / n; }

static size_t elems_param(size_t param, int n) { (void)n; return param; }
static size_t elems_times_n(size_t param, int n) { return param * (size_t)n; }

/* ---- calls ------------------------------------------------------------ */

static int call_allreduce(struct gx_comm *comm, const void *s, void *r, size_t param,
                          enum gx_datatype t, enum gx_redop op, int root, struct gx_request **req)
{
    (void)root;
    return req ? gx_iallreduce(comm, s, r, param, t, op, req)
               : gx_allreduce(comm, s, r, param, t, op);
}

static int call_broadcast(struct gx_comm *comm, const void *s, void *r, size_t param,
                          enum gx_datatype t, enum gx_redop op, int root, struct gx_request **req)
{
    (void)op;
    return req ? gx_ibroadcast(comm, s, r, param, t, root, req)
               : gx_broadcast(comm, s, r, param, t, root);
}

static int call_reduce(struct gx_comm *comm, const void *s, void *r, size_t param,
                       enum gx_datatype t, enum gx_redop op, int root, struct gx_request **req)
{
    return req ? gx_ireduce(comm, s, r, param, t, op, root, req)
               : gx_reduce(comm, s, r, param, t, op, root);
}

static int call_allgather(struct gx_comm *comm, const void *s, void *r, size_t param,
                          enum gx_datatype t, enum gx_redop op, int root, struct gx_request **req)
{
    (void)op, (void)root;
    return req ? gx_iallgather(comm, s, r, param, t, req) : gx_allgather(comm, s, r, param, t);
}

static int call_reduce_scatter(struct gx_comm *comm, const void *s, void *r, size_t param,
                               enum gx_datatype t, enum gx_redop op, int root,
                               struct gx_request **req)
{
    (void)root;
    return req ? gx_ireduce_scatter(comm, s, r, param, t, op, req)
               : gx_reduce_scatter(comm, s, r, param, t, op);
}

static int call_alltoall(struct gx_comm *comm, const void *s, void *r, size_t param,
                         enum gx_datatype t, enum gx_redop op, int root, struct gx_request **req)
{
    (void)op, (void)root;
    return req ? gx_ialltoall(comm, s, r, param, t, req) : gx_alltoall(comm, s, r, param, t);
}

static int call_gather(struct gx_comm *comm, const void *s, void *r, size_t param,
                       enum gx_datatype t, enum gx_redop op, int root, struct gx_request **req)
{
    (void)op;
    return req ? gx_igather(comm, s, r, param, t, root, req)
               : gx_gather(comm, s, r, param, t, root);
}

static int call_scatter(struct gx_comm *comm, const void *s, void *r, size_t param,
                        enum gx_datatype t, enum gx_redop op, int root, struct gx_request **req)
{
    (void)op;
    return req ? gx_iscatter(comm, s, r, param, t, root, req)
               : gx_scatter(comm, s, r, param, t, root);
}

/* ---- expected sources ------------------------------------------------- */

static struct perf_src src_reduced(size_t index)
{
    return (struct perf_src){ PERF_SRC_REDUCED, -1, index };
}

static struct perf_src src_rank(int rank, size_t index)
{
    return (struct perf_src){ PERF_SRC_RANK, rank, index };
}

static struct perf_src source_allreduce(size_t j, int rank, int n, int root, size_t param)
{
    (void)rank, (void)n, (void)root, (void)param;
    return src_reduced(j);
}

static struct perf_src source_broadcast(size_t j, int rank, int n, int root, size_t param)
{
    (void)rank, (void)n, (void)param;
    return src_rank(root, j);
}

static struct perf_src source_reduce(size_t j, int rank, int n, int root, size_t param)
{
    (void)n, (void)param;
    return rank == root ? src_reduced(j) : (struct perf_src){ PERF_SRC_NONE, -1, 0 };
}

static struct perf_src source_allgather(size_t j, int rank, int n, int root, size_t param)
{
    (void)rank, (void)n, (void)root;
    return src_rank((int)(j / param), j % param);
}

static struct perf_src source_reduce_scatter(size_t j, int rank, int n, int root, size_t param)
{
    (void)n, (void)root;
    return src_reduced((size_t)rank * param + j);
}

static struct perf_src source_alltoall(size_t j, int rank, int n, int root, size_t param)
{
    (void)n, (void)root;
    return src_rank((int)(j / param), (size_t)rank * param + j % param);
}

static struct perf_src source_gather(size_t j, int rank, int n, int root, size_t param)
{
    if (rank != root)
        return (struct perf_src){ PERF_SRC_NONE, -1, 0 };
    return source_allgather(j, rank, n, root, param);
}

static struct perf_src source_scatter(size_t j, int rank, int n, int root, size_t param)
{
    (void)n;
    return src_rank(root, (size_t)rank * param + j);
}

/* ---- the table -------------------------------------------------------- */

static const struct perf_coll colls[] = {
    { "all_reduce", "allreduce", PERF_COLL_HAS_OP | PERF_COLL_INPLACE, counts_whole,
      factor_allreduce, elems_param, call_allreduce, source_allreduce },
    { "broadcast", "bcast", PERF_COLL_HAS_ROOT | PERF_COLL_INPLACE, counts_whole, factor_one,
      elems_param, call_broadcast, source_broadcast },
    { "reduce", "reduce", PERF_COLL_HAS_OP | PERF_COLL_HAS_ROOT | PERF_COLL_INPLACE,
      counts_whole, factor_one, elems_param, call_reduce, source_reduce },
    { "all_gather", "allgather", PERF_COLL_INPLACE, counts_gather_like, factor_spread,
      elems_times_n, call_allgather, source_allgather },
    { "reduce_scatter", "reducescatter", PERF_COLL_HAS_OP | PERF_COLL_INPLACE,
      counts_scatter_like, factor_spread, elems_times_n, call_reduce_scatter,
      source_reduce_scatter },
    /* In place as nccl-tests runs them (send == recv; gather: send at block
     * rank of recv; scatter: recv at block rank of send), which gx accepts. */
    { "alltoall", "all_to_all", PERF_COLL_INPLACE, counts_alltoall, factor_spread,
      elems_times_n, call_alltoall, source_alltoall },
    { "gather", "gather", PERF_COLL_HAS_ROOT | PERF_COLL_INPLACE, counts_gather_like,
      factor_spread, elems_times_n, call_gather, source_gather },
    { "scatter", "scatter", PERF_COLL_HAS_ROOT | PERF_COLL_INPLACE, counts_scatter_like,
      factor_spread, elems_times_n, call_scatter, source_scatter },
};

const struct perf_coll *perf_coll_find(const char *name)
{
    size_t len = strlen(name);
    /* nccl-tests' program names: all_reduce_perf, alltoall_perf, ... */
    if (len > 5 && strcmp(name + len - 5, "_perf") == 0)
        len -= 5;
    for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++) {
        const struct perf_coll *c = &colls[i];
        if ((strlen(c->name) == len && strncmp(name, c->name, len) == 0) ||
            (strlen(c->alias) == len && strncmp(name, c->alias, len) == 0))
            return c;
    }
    return NULL;
}

const char *perf_coll_names(void)
{
    return "all_reduce broadcast reduce all_gather reduce_scatter alltoall gather scatter";
}
