/*
 * trace_merge.h - gx-info --trace DIR (trace_merge.c).
 */
#ifndef GX_INFO_TRACE_MERGE_H
#define GX_INFO_TRACE_MERGE_H

#include <stdio.h>

/** Merge the per-rank timelines in `dir` (GX_TRACE: gx-trace-r<N>.json)
 *  into `out_path` (NULL: DIR/gx-trace.json), one track per rank, and
 *  report what each rank's file held on `report`. Returns 0 when every rank
 *  of the job is there, complete; 1 when ranks are missing or a file was
 *  cut short (the rest is merged all the same); 2 when nothing could be
 *  merged. */
int gx_trace_merge(const char *dir, const char *out_path, FILE *report);

#endif
