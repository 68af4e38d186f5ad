/*
 * flight_merge.h - gx-info --flight DIR (flight_merge.c).
 */
#ifndef GX_INFO_FLIGHT_MERGE_H
#define GX_INFO_FLIGHT_MERGE_H

#include <stdio.h>

/** Merge the flight-recorder dumps in `dir` and print, per communicator,
 *  where the ranks diverged and what each did last. Returns 0 when the
 *  dumps agree, 1 when they diverge, 2 when none could be read. */
int gx_flight_merge(const char *dir, FILE *out);

#endif
