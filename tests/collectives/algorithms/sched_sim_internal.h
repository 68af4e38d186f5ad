/*
 * sched_sim_internal.h - what the two files of the schedule simulator
 * share (sched_sim_setup.c: communicators, buffers, builders, reductions;
 * sched_sim.c: matching, running, results). Tests only.
 */
#ifndef GX_SCHED_SIM_INTERNAL_H
#define GX_SCHED_SIM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "collectives/algorithms/algorithms.h"
#include "tests/collectives/algorithms/sched_sim.h"

#define MARK_WRITTEN 0x5a5a5a5au
#define MARK_AVERAGED 0xa5a5a5a5u
#define MAX_SHOWN 8

/* One element: which ranks' inputs it sums, which element it is. */
struct elem {
    uint64_t mask;
    uint32_t idx;
    uint32_t mark; /* 0: never written */
};

enum { WAITING = 0, POSTED = 1, DONE = 2 };

struct sim_rank {
    struct gx_comm *comm;
    struct coll_op op;
    struct coll_scratch_pool pool;
    struct elem *send, *recv;
    size_t send_n, recv_n;
    unsigned char *state;
    int *partner;          /* send/recv: the matching step's index at the peer */
    int *inflight;         /* posted sends and receives */
    int ninflight;
    int first;             /* first step not done */
};

struct sim {
    const struct sim_case *c;
    int n;
    uint64_t full;         /* every rank's bit */
    struct sim_rank r[64];
    struct node_shm *arenas[64]; /* per rank (shared ctl and data per segment) */
    void *segments[64];    /* the shared memory of each segment, to free */
    int nsegments;
    char what[200];
    int problems;
    int at_rank, at_step;  /* the step running, for the reduction's reports */
};

/* The simulation running now: the reductions have no context argument. */
extern struct sim *sim_current;

/* Report a problem of s (the first MAX_SHOWN are printed). */
void sim_problem(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Written by some step (or an input)? */
bool sim_readable(const struct elem *e);
/* A simulation of case c, the current one (sim_current); NULL, said on
 * stderr, for a bad case or no memory. Free with free() after
 * sim_teardown. */
struct sim *sim_new(const struct sim_case *c);
/* Fake communicators, buffers and every rank's schedule; 0 or -1 (then the
 * problem is reported, or nothing was reported: out of memory). */
int sim_setup(struct sim *s);
void sim_teardown(struct sim *s);

#endif
