/*
 * fab_harness.h - fork-based multi-process harness for the fabric tests.
 *
 * fab_run() forks `nranks` children; each opens a domain of the provider
 * under test and a cq, then runs the test body. The parent relays an
 * all-gather between the children (the same shape a communicator's bootstrap
 * gives the mesh helper) and kills everything at the watchdog deadline. A
 * child exits 0 on pass, 77 to skip, anything else on failure.
 */
#ifndef GX_TESTS_FAB_HARNESS_H
#define GX_TESTS_FAB_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "fabric/fabric.h"

struct fab_ctx {
    const char *provider;
    int rank;
    int nranks;
    int ctl_fd; /* to the parent relay */
    const struct gx_fab_provider *prov;
    struct gx_fab_domain *dom;
    struct gx_fab_cq *cq;
    int slept; /* sleeps on the cq's fds (sleep_wakes) */
};

typedef int (*fab_test_fn)(struct fab_ctx *c);

/** Run `fn` in `nranks` processes; returns 0 pass, 77 skip, 1 fail. */
int fab_run(const char *provider, int nranks, int timeout_s, const char *job_key, fab_test_fn fn);

/** All-gather through the parent (usable as a gx_fab_allgather_fn). */
int fab_allgather(void *ctx, const void *mine, void *all, size_t len);
void fab_barrier(struct fab_ctx *c);

/** Connect rank `listener` and rank `connector` (the other ranks skip).
 *  Returns the endpoint (NULL for uninvolved ranks); fails the test on error. */
struct gx_fab_ep *fab_pair(struct fab_ctx *c, int listener, int connector);

/** Wait for exactly one completion; fails the test at the deadline. */
struct gx_fab_cqe fab_wait1(struct fab_ctx *c, int timeout_ms);
/** Register or fail. */
struct gx_fab_mr *fab_reg(struct fab_ctx *c, void *buf, size_t len, unsigned access);

#define FAB_CHECK(cond, ...)                                                           \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", fab_cur_rank,       \
                    __FILE__, __LINE__, #cond);                                        \
            fprintf(stderr, __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                     \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define FAB_OK(expr)                                                                   \
    do {                                                                               \
        int fab_rc_ = (expr);                                                          \
        FAB_CHECK(fab_rc_ == GX_OK, "%s returned %s: %s", #expr, gx_strerror(fab_rc_), \
                  gx_last_error());                                                    \
    } while (0)

extern int fab_cur_rank;

#endif
