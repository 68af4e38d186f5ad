/*
 * coll_check.h - what the files of coll_check share: the failure macro, the
 * rank globals, the collective kinds, the values and their reference
 * (coll_check_values.c), and the modes (coll_check.c: matrix, bench;
 * coll_check_streams.c: random, interleave; coll_check_errors.c: mismatch,
 * dead, badinput).
 */
#ifndef GX_COLL_CHECK_H
#define GX_COLL_CHECK_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gx/gx.h"

#include "../../lib/rank_check.h"

extern int me, nranks;
extern long checks;

enum kind { ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCE_SCATTER, GATHER, SCATTER, ALLTOALL,
            NKINDS };
extern const char *const kind_names[NKINDS];
static inline bool reduces(int k)
{
    return k == ALLREDUCE || k == REDUCE || k == REDUCE_SCATTER;
}
static inline bool rooted(int k)
{
    return k == BROADCAST || k == REDUCE || k == GATHER || k == SCATTER;
}


uint32_t mix(uint32_t x);
bool is_float(enum gx_datatype t);
double get_f(const void *buf, enum gx_datatype t, size_t i);
void set_f(void *buf, enum gx_datatype t, size_t i, double v);
uint64_t get_u(const void *buf, enum gx_datatype t, size_t i);
void fill(void *buf, enum gx_datatype t, enum gx_redop op, size_t n, int r, uint32_t seed, size_t base);
void ref_reduce(void *out, size_t i, enum gx_datatype t, enum gx_redop op, int n, uint32_t seed, size_t src_i);
bool same_elem(const void *a, const void *b, enum gx_datatype t, size_t i);
void mode_random(struct gx_comm *comm, uint32_t seed);
void mode_interleave(struct gx_comm *comm, uint32_t seed, int total, int window);
void mode_mismatch(struct gx_comm *comm, const char *what);
double now_s(void);
void mode_dead(struct gx_comm *comm, long in_flight_ms);
void mode_badinput(struct gx_comm *comm);

#endif
