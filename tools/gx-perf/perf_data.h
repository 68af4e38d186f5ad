/*
 * perf_data.h - gx-perf's data check (-c): rank- and index-dependent send
 * data, and a count of the receive elements that differ from what the
 * collective must produce.
 *
 * Values are small integers chosen per op so that every accumulation order
 * gives the same exact result in every datatype (f16 and bf16 included):
 * integers must match exactly, floats within a tolerance of a few units in
 * the last place (exact except for avg, which divides). Owns the patterns
 * and the f16/bf16 conversions they need; must not touch the communicator.
 */
#ifndef GX_PERF_DATA_H
#define GX_PERF_DATA_H

#include <stddef.h>

#include "gx/gx.h"
#include "perf_coll.h"

/** Write rank `rank`'s send data, global elements first..first+count-1, to
 *  buf. `has_op` is 0 for collectives that only move data. */
void perf_data_fill(void *buf, enum gx_datatype t, size_t first, size_t count, int rank,
                    int nranks, enum gx_redop op, int has_op);

/** Overwrite `bytes` bytes with a pattern no correct result contains. */
void perf_data_poison(void *buf, size_t bytes);

/** Number of the `recvcount` elements of rank `rank`'s receive buffer that
 *  differ from what `coll` must have produced. */
size_t perf_data_check(const struct perf_coll *coll, const void *recv, enum gx_datatype t,
                       size_t recvcount, size_t param, int rank, int nranks, int root,
                       enum gx_redop op);

#endif
