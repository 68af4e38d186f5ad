/*
 * perf_opts.h - gx-perf's command line: nccl-tests' flags with their
 * meanings, plus --min-bw, --json, --csv and --no-progress.
 *
 * Owns parsing and the usage text. Must not touch the communicator: options
 * are parsed before gx_comm_init(), identically on every rank, so every rank
 * fails the same way on a bad flag (only rank 0 prints the error).
 */
#ifndef GX_PERF_OPTS_H
#define GX_PERF_OPTS_H

#include <stddef.h>

#include "gx/gx.h"
#include "perf_coll.h"

enum perf_format { PERF_FORMAT_TABLE, PERF_FORMAT_JSON, PERF_FORMAT_CSV };

/* How the per-rank times of one measurement become the reported time (-a),
 * as in nccl-tests: rank 0's, the mean, the minimum or the maximum. */
enum perf_average { PERF_AVG_RANK0, PERF_AVG_MEAN, PERF_AVG_MIN, PERF_AVG_MAX };

struct perf_opts {
    const struct perf_coll *coll;
    size_t min_bytes, max_bytes, step_bytes;
    size_t step_factor;                     /* > 1: multiply; else add step_bytes */
    int iters, warmup;
    enum gx_redop ops[GX_REDOP_COUNT];
    int nops;
    enum gx_datatype dtypes[GX_DATATYPE_COUNT];
    int ndtypes;
    int root;
    int check;                              /* check iterations per measurement */
    int blocking;                           /* 1: blocking calls; 0: i-variants, wait at the end */
    enum perf_average average;
    double min_bw;                          /* GB/s; < 0 when not given */
    enum perf_format format;
    int progress;                           /* 1 auto, 0 never */
    int device;                             /* --device: CUDA device buffers */
};

/**
 * Parse argv into *o. `prog_coll` is the collective implied by the program
 * name (all_reduce_perf -> all_reduce) or NULL. Returns 0 on success, 1 when
 * --help was given (usage printed when `loud`), 2 on a bad command line (the
 * message, naming the flag, printed to stderr when `loud`).
 */
int perf_opts_parse(int argc, char **argv, const struct perf_coll *prog_coll, int loud,
                    struct perf_opts *o);

/** nccl-tests' name of a datatype ("float", "half", "bfloat16", ...). */
const char *perf_dtype_name(enum gx_datatype t);

#endif
