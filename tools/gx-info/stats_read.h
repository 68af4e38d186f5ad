/*
 * stats_read.h - gx-info --stats FILE... (stats_read.c).
 */
#ifndef GX_INFO_STATS_READ_H
#define GX_INFO_STATS_READ_H

#include <stdio.h>

/** Print the counters in the GX_METRICS_FILE files named (a directory:
 *  every *.prom in it) as a table, a row per rank and communicator.
 *  Returns 0, or 2 when no file could be read. */
int gx_stats_read(int nargs, char **args, FILE *out);

#endif
