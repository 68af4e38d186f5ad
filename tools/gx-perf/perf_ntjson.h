/*
 * perf_ntjson.h - gx-perf -J FILE: the JSON report nccl-tests writes with
 * its own -J, with the same keys and nesting (file version 3), so scripts
 * that read nccl-tests' JSON read gx-perf's. Rank 0 only.
 *
 * Owns the file and its writing. Must not touch the measurements.
 */
#ifndef GX_PERF_NTJSON_H
#define GX_PERF_NTJSON_H

#include "perf_opts.h"
#include "perf_report.h"

/** Create o->json_file (or FILE.0, FILE.1 ... when it exists; never through
 *  a symlink) and write the preamble; prints "# Writing JSON output to ..."
 *  to `f`. Returns 0, or -1 when the report is skipped (said on `f`). */
int perf_ntjson_open(FILE *f, const struct perf_opts *o, int argc, char **argv);
void perf_ntjson_config(const struct perf_opts *o, int nranks, const struct perf_rank_info *ranks);
void perf_ntjson_row(const struct perf_opts *o, const struct perf_row *row);
void perf_ntjson_end(const struct perf_opts *o, const struct perf_summary *s);

#endif
