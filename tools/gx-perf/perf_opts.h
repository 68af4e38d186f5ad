/*
 * perf_opts.h - gx-perf's command line: every nccl-tests flag, each either
 * with its meaning or refused as "not supported in gx-perf", plus --min-bw,
 * --json, --csv, --no-progress, --device and --compute_us.
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
    int root;                               /* -1: every root in turn (nccl-tests -r -1) */
    int check;                              /* check iterations per measurement */
    int blocking;                           /* -z 0..3 as nccl-tests (perf_opts.c) */
    int agg_iters;                          /* -m: operations per timed iteration */
    int run_cycles;                         /* -N: sweeps, each printed */
    int timeout_s;                          /* -T: a measurement's deadline; 0 none */
    int report_cputime;                     /* -C: label the time column "cputime" */
    int report_timestamps;                  /* -S: a timestamp at the end of each row */
    int unalign;                            /* -u: buffers start this many elements in */
    const char *json_file;                  /* -J: nccl-tests' JSON written there */
    const char *prog_name;                  /* "all_reduce_perf": nccl-tests' name */
    char prog_name_buf[48];
    enum perf_average average;
    double min_bw;                          /* GB/s; < 0 when not given */
    const char *min_bw_from;                /* "--min-bw" or "NCCL_TESTS_MIN_BW" */
    enum perf_format format;
    int progress;                           /* 1 auto, 0 never */
    int device;                             /* --device: CUDA device buffers */
    int compute_us;                         /* --compute_us: CPU work before each op */
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
