/*
 * accept.h - the state one gx-accept rank carries through a run: the
 * communicator, where each rank lives (node index, the node's leader rank),
 * the spec every rank received from rank 0, and (rank 0) the results.
 *
 * The node checks (accept_node.c) and the fabric checks (accept_fabric.c)
 * take this context; gx_accept.c owns it. Bookkeeping between ranks goes
 * over gx_send/gx_recv (accept_gather), never over the collectives under
 * test, so a broken collective cannot hide its own failure.
 */
#ifndef GX_ACCEPT_H
#define GX_ACCEPT_H

#include <stddef.h>

#include "accept_result.h"
#include "accept_spec.h"
#include "gx/gx.h"

#define ACCEPT_TAG_GATHER 0x61636301 /* p2p tags of gx-accept's bookkeeping and tests */
#define ACCEPT_TAG_CLOCK 0x61636302
#define ACCEPT_TAG_P2P 0x61636303

struct accept_ctx {
    struct gx_comm *comm;
    int rank, nranks;
    int node, nnodes;        /* this rank's node index, nodes in the job */
    int local_rank, local_size;
    int *node_of_rank;       /* [rank] -> node index */
    int *leader_of_node;     /* [node] -> lowest rank on that node */
    char node_name[ACCEPT_NAME_MAX];
    struct accept_spec spec;
    struct accept_results *res; /* rank 0 only */
    int progress_tty;        /* rank 0: stderr is a terminal */
    int step, steps;         /* progress: phases done / planned */
    int last_step;           /* progress: the phase last printed, and when */
    double last_progress_s;
};

/** Print one progress line (a bar that redraws itself on a TTY), rank 0 only. */
void accept_progress(struct accept_ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** Clear a TTY progress bar before other output. */
void accept_progress_clear(struct accept_ctx *x);

/** Every rank's `len` bytes at `mine` end up at rank 0's `all` (rank order). */
int accept_gather(struct accept_ctx *x, const void *mine, void *all, size_t len);

/** Report a failed gx call and leave: the job cannot go on. */
void accept_die(const struct accept_ctx *x, const char *what, int rc) __attribute__((noreturn));

double accept_now_s(void);

/* accept_node.c: node checks (topology, governor, hugepages, versions) and
 * the clock skew between nodes. Collective over the communicator. */
int accept_node_checks(struct accept_ctx *x);
int accept_clock_check(struct accept_ctx *x);

/* accept_fabric.c: point-to-point matrix, busbw sweeps, correctness soak. */
int accept_p2p_matrix(struct accept_ctx *x);
int accept_sweeps(struct accept_ctx *x);
int accept_soak(struct accept_ctx *x);

/* accept_outlier.c: links and nodes below the median (rank 0, after the matrix). */
void accept_outliers(struct accept_results *r, double fraction);

#endif
