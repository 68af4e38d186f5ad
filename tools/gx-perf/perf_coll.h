/*
 * perf_coll.h - what gx-perf knows about each collective: how nccl-tests
 * turns a byte size into counts and in-place offsets, the bus-bandwidth
 * factor, how to call gx (blocking or non-blocking), and where each element
 * of a rank's receive buffer must come from, for the data check.
 *
 * Owns the per-collective table. Must not touch timing or output.
 */
#ifndef GX_PERF_COLL_H
#define GX_PERF_COLL_H

#include <stddef.h>

#include "gx/gx.h"

/* Counts for one size, as nccl-tests' *GetCollByteCount computes them. */
struct perf_counts {
    size_t send;        /* elements in this rank's send buffer */
    size_t recv;        /* elements in this rank's receive buffer */
    size_t param;       /* the count passed to gx */
    size_t send_inplace_off; /* in place: send = recvbuf + rank * this (elements) */
    size_t recv_inplace_off; /* in place: recv = recvbuf + rank * this (elements) */
};

/* Where element j of a rank's receive buffer comes from. */
enum perf_src_kind {
    PERF_SRC_NONE,      /* not defined on this rank (e.g. reduce on a non-root) */
    PERF_SRC_RANK,      /* element `index` of rank `rank`'s send data */
    PERF_SRC_REDUCED,   /* the op over every rank's element `index` */
};

struct perf_src {
    enum perf_src_kind kind;
    int rank;
    size_t index;
};

enum {
    PERF_COLL_HAS_OP = 1,   /* takes a reduction op (prints it in redop) */
    PERF_COLL_HAS_ROOT = 2, /* takes a root (prints it in root) */
    PERF_COLL_INPLACE = 4,  /* gx.h defines an in-place form */
};

struct perf_coll {
    const char *name;       /* "all_reduce": the gx-perf subcommand */
    const char *alias;      /* "allreduce" */
    unsigned flags;
    /** Counts for `count` elements over n ranks; per-rank shares are rounded
     *  down to a multiple of `align` elements (1 = none; nccl-tests rounds to
     *  16 bytes: perf_coll_align()). */
    void (*counts)(size_t count, size_t align, int nranks, struct perf_counts *c);
    /** busbw = algbw * bus_factor(n); algbw = algbw_elems(param, n) * elt / time. */
    double (*bus_factor)(int nranks);
    size_t (*algbw_elems)(size_t param, int nranks);
    /** Call gx: non-blocking when req != NULL, blocking otherwise. */
    int (*call)(struct gx_comm *comm, const void *send, void *recv, size_t param,
                enum gx_datatype dtype, enum gx_redop op, int root, struct gx_request **req);
    /** Source of element j (< counts.recv) of `rank`'s receive buffer. */
    struct perf_src (*source)(size_t j, int rank, int nranks, int root, size_t param);
};

/** The collective named `name` (its name, alias or "<name>_perf"), or NULL. */
const struct perf_coll *perf_coll_find(const char *name);

/** nccl-tests' rounding of per-rank shares: 16 bytes in elements of `esize`. */
static inline size_t perf_coll_align(size_t esize)
{
    return esize && esize < 16 ? 16 / esize : 1;
}

/** Names of every collective, space separated, for usage text. */
const char *perf_coll_names(void);

#endif
