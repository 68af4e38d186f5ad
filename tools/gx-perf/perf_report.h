/*
 * perf_report.h - gx-perf's output on rank 0: nccl-tests' table (header,
 * one row per size with out-of-place then in-place columns, footer), or the
 * same figures as one JSON document (--json) or CSV rows (--csv).
 *
 * Owns formatting only; the figures come from gx_perf.c.
 */
#ifndef GX_PERF_REPORT_H
#define GX_PERF_REPORT_H

#include <stdio.h>
#include <sys/types.h>

#include "perf_opts.h"

struct perf_rank_info {
    int rank;
    int pid;
    int node;
    char host[64];
    char providers[32]; /* providers reaching this rank's peers, "shm,tcp" */
};

struct perf_result {
    int ran;            /* 0: not measured (no in-place form): N/A */
    double time_us;     /* per operation */
    double algbw, busbw; /* GB/s */
    long long wrong;    /* wrong elements over all ranks; -1 when not checked */
};

struct perf_row {
    size_t bytes;       /* max(send, recv) bytes of one rank, as nccl-tests prints */
    size_t count;       /* the count passed to gx: per rank for all_gather,
                           reduce_scatter, alltoall, gather, scatter (nccl-tests) */
    enum gx_datatype dtype;
    const char *redop;  /* "sum" ... or "none" */
    int root;           /* -1 for collectives without one */
    struct perf_result out_of_place, in_place;
};

struct perf_summary {
    double avg_busbw;   /* over every measured row and placement */
    long long wrong;    /* total wrong elements (0 when not checked) */
    int checked;
    int bw_failed;      /* average below --min-bw */
};

void perf_report_begin(FILE *f, const struct perf_opts *o, int nranks, int nnodes,
                       const struct perf_rank_info *ranks);
void perf_report_row(FILE *f, const struct perf_opts *o, int nranks, const struct perf_row *row);
void perf_report_end(FILE *f, const struct perf_opts *o, const struct perf_summary *s);

#endif
