/*
 * sim_plan.c - every rank's schedule from the runtime's builders, for a
 * communicator of fake ranks (sim_plan.h). One rank at a time: its
 * communicator is made, its schedule built and copied into the compact
 * form, and both freed before the next rank's, so a plan of 4096 ranks
 * holds only the steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/algorithms/coll_tune.h"
#include "collectives/comm/comm_internal.h"
#include "tools/gx-sim/sim_plan.h"

#define ELEM_BYTES 4 /* the plans are of float32 vectors */

/* The builders need reduction functions; nothing runs them. */
static void no_reduce(void *inout, const void *in, size_t count)
{
    (void)inout, (void)in, (void)count;
}

static void no_reduce3(void *out, const void *a, const void *b, size_t count)
{
    (void)out, (void)a, (void)b, (void)count;
}

size_t sim_count_of(enum coll_kind kind, size_t size, int nranks)
{
    switch (kind) {
    case COLL_ALLGATHER:
    case COLL_REDUCE_SCATTER:
    case COLL_ALLTOALL:
        return size / ELEM_BYTES / (size_t)nranks;
    default:
        return size / ELEM_BYTES;
    }
}

/* Buffer bytes of one rank, by the collective's count (as gx.h's calls). */
static void buffer_bytes(enum coll_kind kind, size_t count, int n, size_t *send, size_t *recv)
{
    size_t one = count * ELEM_BYTES, all = one * (size_t)n;
    *send = kind == COLL_REDUCE_SCATTER || kind == COLL_SCATTER || kind == COLL_ALLTOALL ? all : one;
    *recv = kind == COLL_ALLGATHER || kind == COLL_GATHER || kind == COLL_ALLTOALL ? all : one;
}

static int node_sizes(const struct sim_layout *lay, int **out)
{
    int g = lay->gpus_per_node, nodes = lay->node_sizes ? lay->nodes : (lay->nranks + g - 1) / g;
    int *sizes = malloc((size_t)nodes * sizeof(int));
    if (!sizes)
        return -1;
    for (int m = 0; m < nodes; m++)
        sizes[m] = lay->node_sizes ? lay->node_sizes[m]
                   : m < nodes - 1 || lay->nranks % g == 0 ? g : lay->nranks % g;
    *out = sizes;
    return nodes;
}

/* Copy op's steps into the compact form; reductions counted in bytes. */
static int keep_steps(struct sim_rank_plan *rp, const struct coll_op *op)
{
    rp->steps = malloc((size_t)(op->nsteps ? op->nsteps : 1) * sizeof(struct sim_step));
    if (!rp->steps)
        return -1;
    rp->nsteps = op->nsteps;
    for (int i = 0; i < op->nsteps; i++) {
        const struct coll_step *st = &op->steps[i];
        struct sim_step *s = &rp->steps[i];
        size_t bytes = st->len;
        if (st->kind == CS_REDUCE || st->kind == CS_REDUCE3 || st->kind == CS_AVG)
            bytes *= ELEM_BYTES;
        if (st->kind == CS_FLAG_SET || st->kind == CS_FLAG_WAIT)
            bytes = 0;
        s->kind = st->kind;
        s->peer = st->peer;
        s->msg = st->msg;
        s->bytes = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
        for (int d = 0; d < CS_MAX_DEPS; d++)
            s->dep[d] = st->dep[d];
    }
    return 0;
}

/* Why `algo` cannot build `kind` here (NULL: it can). */
static const char *unusable(enum coll_algo algo, enum coll_kind kind, const struct node_shape *sh)
{
    const struct coll_algo_desc *d = coll_algo_desc(algo);
    if (!d || !d->serves[kind].build)
        return "does not serve this collective";
    if (algo == COLL_ALGO_SHM)
        return "needs one node's shared-memory arena (not simulated)";
    if (d->usable && !d->usable(sh, false))
        return "does not apply to this node layout";
    return NULL;
}

int sim_plan_build(struct sim_plan *p, const struct sim_layout *lay, enum coll_kind kind,
                   enum coll_algo algo, enum coll_algo rail, size_t size, size_t max_steps,
                   char *err, size_t errlen)
{
    int n = lay->nranks, *sizes = NULL;
    memset(p, 0, sizeof(*p));
    int nodes = node_sizes(lay, &sizes);
    size_t count = sim_count_of(kind, size, n), send_bytes, recv_bytes;
    struct node_shape sh = { nodes, lay->gpus_per_node < n ? lay->gpus_per_node : n,
                             n % lay->gpus_per_node != 0, lay->gpus_per_node };
    if (lay->node_sizes && nodes > 0) {
        sh.L = 0, sh.uneven = false;
        for (int m = 0; m < nodes; m++) {
            sh.L = sizes[m] > sh.L ? sizes[m] : sh.L;
            sh.uneven |= sizes[m] != sizes[0];
        }
    }
    const char *why = nodes < 0 ? "out of memory" : unusable(algo, kind, &sh);
    if (why) {
        snprintf(err, errlen, "%s %s: %s", coll_algo_name(algo), coll_kind_name(kind), why);
        free(sizes);
        return -1;
    }
    buffer_bytes(kind, count, n, &send_bytes, &recv_bytes);
    /* Addresses to plan over, never written: the pages are never touched. */
    char *sendbuf = malloc(send_bytes + 64), *recvbuf = malloc(recv_bytes + 64);
    struct coll_scratch_pool pool;
    coll_scratch_pool_init(&pool);
    p->nranks = n;
    p->rank = calloc((size_t)n, sizeof(*p->rank));
    int rc = sendbuf && recvbuf && p->rank ? 0 : -1;
    if (rc)
        snprintf(err, errlen, "out of memory for a plan of %d ranks", n);
    for (int r = 0; r < n && rc == 0; r++) {
        struct gx_comm *g = gx_comm_alloc(NULL, r, n);
        if (!g) {
            snprintf(err, errlen, "out of memory for a plan of %d ranks", n);
            rc = -1;
            break;
        }
        snprintf(g->name, sizeof(g->name), "gx-sim");
        for (int i = 0; i < n; i++)
            g->world_ranks[i] = i;
        (void)gx_comm_layout_sizes(g, nodes, sizes);
        struct coll_op op = { .comm = g, .pool = &pool, .algo = algo, .inner_algo = rail,
                              .seq = 1, .fn = no_reduce, .fn3 = no_reduce3,
                              .desc_recv_step = -1 };
        op.a = (struct coll_args){ .kind = kind, .sendbuf = sendbuf, .recvbuf = recvbuf,
                                   .count = count, .dtype = GX_FLOAT32, .op = GX_SUM,
                                   .root = 0, .es = ELEM_BYTES };
        int brc = coll_algo_desc(algo)->serves[kind].build(&op);
        if (brc == GX_OK)
            brc = op.build_status;
        if (op.steps_capped) {
            snprintf(err, errlen, "%s %s of %zu bytes on %d ranks: more than %d steps per rank "
                     "(COLL_MAX_STEPS: gx refuses to plan it)", coll_algo_name(algo),
                     coll_kind_name(kind), size, n, COLL_MAX_STEPS);
            rc = -1;
        } else if (brc != GX_OK) {
            snprintf(err, errlen, "%s %s: rank %d's builder failed (%s)", coll_algo_name(algo),
                     coll_kind_name(kind), r, gx_strerror(brc));
            rc = -1;
        } else if (p->total_steps + (size_t)op.nsteps > max_steps) {
            snprintf(err, errlen, "%s %s of %zu bytes on %d ranks: more than %zu steps in all "
                     "(--max-steps)", coll_algo_name(algo), coll_kind_name(kind), size, n,
                     max_steps);
            rc = -1;
        } else if (keep_steps(&p->rank[r], &op) != 0) {
            snprintf(err, errlen, "out of memory for a plan of %d ranks", n);
            rc = -1;
        } else {
            p->total_steps += (size_t)op.nsteps;
        }
        free(op.steps);
        if (op.scratch)
            coll_scratch_give(&pool, op.scratch, op.scratch_size);
        gx_comm_free(g);
    }
    coll_scratch_pool_fini(&pool);
    free(sendbuf);
    free(recvbuf);
    free(sizes);
    if (rc)
        sim_plan_free(p);
    return rc;
}

void sim_plan_free(struct sim_plan *p)
{
    for (int r = 0; p->rank && r < p->nranks; r++)
        free(p->rank[r].steps);
    free(p->rank);
    memset(p, 0, sizeof(*p));
}
