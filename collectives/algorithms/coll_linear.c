/*
 * coll_linear.c - direct algorithms: gather and scatter (the root talks to
 * every rank; data lands straight in the caller's buffers, no copies), and
 * all-to-all by pairwise exchange (in step k rank r sends to r+k and
 * receives from r-k, all steps posted at once, so every link is busy).
 * These move the minimum number of bytes; their n-1 message latencies at the
 * root are hidden by posting everything up front.
 */
#include "collectives/algorithms/algo.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/comm/comm_internal.h"

int linear_gather_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    int n = op->comm->size, r = op->comm->rank;
    size_t bl = a->count * a->es;
    if (bl == 0)
        return GX_OK;
    if (r != a->root) {
        cs_send(op, a->root, 0, a->sendbuf, bl, -1, -1, -1);
        return GX_OK;
    }
    char *rb = a->recvbuf;
    cs_copy(op, rb + (size_t)r * bl, a->sendbuf, bl, -1, -1, -1);
    for (int k = 1; k < n; k++) {
        int peer = (r + k) % n;
        cs_recv(op, peer, 0, rb + (size_t)peer * bl, bl, -1, -1, -1);
    }
    return GX_OK;
}

int linear_scatter_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    int n = op->comm->size, r = op->comm->rank;
    size_t bl = a->count * a->es;
    if (bl == 0)
        return GX_OK;
    if (r != a->root) {
        cs_recv(op, a->root, 0, a->recvbuf, bl, -1, -1, -1);
        return GX_OK;
    }
    const char *sb = a->sendbuf;
    for (int k = 1; k < n; k++) {
        int peer = (r + k) % n;
        cs_send(op, peer, 0, sb + (size_t)peer * bl, bl, -1, -1, -1);
    }
    cs_copy(op, a->recvbuf, sb + (size_t)r * bl, bl, -1, -1, -1);
    return GX_OK;
}

int linear_alltoall_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    int n = op->comm->size, r = op->comm->rank;
    size_t bl = a->count * a->es;
    char *rb = a->recvbuf;
    const char *sb = a->sendbuf;
    if (bl == 0)
        return GX_OK;
    int staged = -1;
    if (sb == rb) {
        /* In place: send from a copy, so receives may overwrite recvbuf. */
        char *copy = cs_scratch(op, (size_t)n * bl);
        if (!copy)
            return GX_OK;
        staged = cs_copy(op, copy, sb, (size_t)n * bl, -1, -1, -1);
        sb = copy;
    }
    cs_copy(op, rb + (size_t)r * bl, sb + (size_t)r * bl, bl, staged, -1, -1);
    for (int k = 1; k < n; k++) {
        int to = (r + k) % n, from = (r + n - k) % n;
        cs_recv(op, from, 0, rb + (size_t)from * bl, bl, staged, -1, -1);
        cs_send(op, to, 0, sb + (size_t)to * bl, bl, staged, -1, -1);
    }
    return GX_OK;
}

/* ---- cost and descriptor (algo.h) ------------------------------------------- */

static double linear_cost(const struct coll_model *m)
{
    int n = m->n;
    double S = m->S, a = m->a, b = m->b;
    switch (m->kind) {
    case COLL_GATHER:
    case COLL_SCATTER:
    case COLL_ALLTOALL:
        return a + (n - 1) * S * b;
    default:
        return -1;
    }
}

const struct coll_algo_desc coll_algo_linear = {
    .id = COLL_ALGO_LINEAR,
    .name = "linear",
    .serves = {
        [COLL_GATHER] = { linear_gather_build, 1 },
        [COLL_SCATTER] = { linear_scatter_build, 1 },
        [COLL_ALLTOALL] = { linear_alltoall_build, 1 },
    },
    .cost = linear_cost,
};
