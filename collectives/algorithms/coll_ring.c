/*
 * coll_ring.c - ring algorithms: all-reduce (reduce-scatter then
 * all-gather), reduce-scatter and all-gather, chunked and pipelined.
 *
 * The vector is cut into one block per rank, each block into `nch` chunks
 * (coll_chunks). Rank r sends to r+1 and receives from r-1. In reduce-scatter
 * round s it sends block r-s and receives block r-s-1, reducing it into its
 * own copy; after n-1 rounds it owns the complete block r+1, which the n-1
 * all-gather rounds pass around. Each chunk has its own dependency chain, so
 * chunk c of round s+1 is on the wire while chunk c+1 of round s is still
 * arriving. Every block is reduced along one chain and then copied to
 * everyone, so all ranks end with the same bits. Per rank: 2(n-1) messages
 * per chunk, 2(n-1)/n of the vector sent.
 *
 * The all-reduce runs over a group (algorithms.h: the whole communicator,
 * or a node or rail of the hierarchical all-reduce), with even blocks or the
 * group's own block boundaries; its two halves are also callable alone.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "collectives/algorithms/algo.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/comm/comm_internal.h"

static inline int mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* Step indices per (round, chunk), -1 for an empty chunk. */
static int *idx_table(struct coll_op *op, int rounds, int nch)
{
    size_t cells = (size_t)(rounds > 0 ? rounds : 1) * (size_t)nch;
    int *t = malloc(cells * sizeof(int));
    if (!t) {
        op->build_status = GX_ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < cells; i++)
        t[i] = -1;
    return t;
}

#define AT(t, s, c) ((s) < 0 ? -1 : (t)[(size_t)(s) * (size_t)nch + (size_t)(c)])

struct coll_group coll_group_all(const struct coll_op *op)
{
    struct coll_group g = { .n = op->comm->size, .me = op->comm->rank,
                            .avg = op->a.op == GX_AVG };
    return g;
}

void coll_group_own_result(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                           void *recvbuf, size_t count)
{
    int cp = cs_copy(op, recvbuf, sendbuf, count * op->a.es, -1, -1, -1);
    if (g->avg && count)
        cs_avg(op, recvbuf, count, cp, -1, -1);
}

/* What both halves of a ring over a group share. */
struct ring_plan {
    int n, r;            /* members, my index */
    int next, prev;      /* comm ranks of my neighbours */
    int nch, rounds;
    size_t stride;       /* receive slot per chunk (elements) */
};

static struct ring_plan ring_plan(const struct coll_group *g, size_t count, size_t es)
{
    struct ring_plan p = { .n = g->n, .r = g->me, .rounds = g->n - 1 };
    size_t maxblk = 0;
    for (int i = 0; i < g->n; i++)
        if (coll_group_blk_len(g, count, i) > maxblk)
            maxblk = coll_group_blk_len(g, count, i);
    p.nch = coll_chunks(maxblk * es);
    /* Receive slots use a fixed chunk stride: blocks differ in length, and a
     * slot is reused by another block two rounds later. */
    p.stride = (maxblk + (size_t)p.nch - 1) / (size_t)p.nch;
    p.next = coll_group_rank(g, mod(g->me + 1, g->n));
    p.prev = coll_group_rank(g, mod(g->me - 1, g->n));
    return p;
}

uint32_t ring_group_msgs(const struct coll_group *g, size_t count, size_t es)
{
    struct ring_plan p = ring_plan(g, count, es);
    return (uint32_t)(2 * p.rounds * p.nch);
}

size_t ring_group_scratch(const struct coll_group *g, size_t count, size_t es)
{
    struct ring_plan p = ring_plan(g, count, es);
    return 2 * p.stride * (size_t)p.nch * es;
}

/* Reduce-scatter half: round s sends block r-s and receives block r-s-1,
 * reducing it into recvbuf; block r+1 ends complete. rs_send/rs_red
 * (rounds x nch) get the step indices; slot_reader (2 x nch) tracks the
 * last reduction that read each receive slot. */
static void ring_rs_half(struct coll_op *op, const struct coll_group *g, const struct ring_plan *p,
                         const char *sb, char *rb, size_t count, char *tmp, int *rs_send,
                         int *rs_red, int *slot_reader)
{
    size_t es = op->a.es;
    int n = p->n, r = p->r, nch = p->nch;
    for (int s = 0; s < p->rounds; s++) {
        int sblk = mod(r - s, n), rblk = mod(r - s - 1, n);
        size_t soff = coll_group_blk_off(g, count, sblk), slen = coll_group_blk_len(g, count, sblk);
        size_t roff = coll_group_blk_off(g, count, rblk), rlen = coll_group_blk_len(g, count, rblk);
        char *slot = tmp + (size_t)(s % 2) * p->stride * (size_t)nch * es;
        for (int c = 0; c < nch; c++) {
            size_t co = block_off(slen, nch, c), cl = block_len(slen, nch, c);
            uint32_t msg = g->msg_base + (uint32_t)(s * nch + c);
            char *cslot = slot + (size_t)c * p->stride * es;
            if (cl) {
                const char *src = s == 0 ? sb + (soff + co) * es : rb + (soff + co) * es;
                rs_send[s * nch + c] = cs_send(op, p->next, msg, src, cl * es,
                                               AT(rs_red, s - 1, c), -1, -1);
            }
            co = block_off(rlen, nch, c);
            cl = block_len(rlen, nch, c);
            if (cl) {
                /* The slot is reused every other round: wait for its last
                 * reader (round s-2's reduction, or an earlier one when that
                 * round's chunk was empty: fewer elements than ranks). */
                int *reader = &slot_reader[(s % 2) * nch + c];
                int rv = cs_recv(op, p->prev, msg, cslot, cl * es, *reader, -1, -1);
                rs_red[s * nch + c] = cs_reduce3(op, rb + (roff + co) * es,
                                                 sb + (roff + co) * es, cslot, cl, rv, -1, -1);
                *reader = rs_red[s * nch + c];
            }
        }
    }
}

/* All-gather half: block r+1 (complete after fin[c], per chunk; NULL: no
 * dependency) travels around; round s receives block r-s, whose last reader
 * was the reduce-scatter's send of round s (rs_send; NULL: none). */
static void ring_ag_half(struct coll_op *op, const struct coll_group *g, const struct ring_plan *p,
                         char *rb, size_t count, const int *fin, const int *rs_send,
                         int *ag_recv)
{
    size_t es = op->a.es;
    int n = p->n, r = p->r, nch = p->nch, rounds = p->rounds;
    for (int s = 0; s < rounds; s++) {
        int sblk = mod(r + 1 - s, n), rblk = mod(r - s, n);
        size_t soff = coll_group_blk_off(g, count, sblk), slen = coll_group_blk_len(g, count, sblk);
        size_t roff = coll_group_blk_off(g, count, rblk), rlen = coll_group_blk_len(g, count, rblk);
        for (int c = 0; c < nch; c++) {
            uint32_t msg = g->msg_base + (uint32_t)((rounds + s) * nch + c);
            size_t co = block_off(slen, nch, c), cl = block_len(slen, nch, c);
            if (cl)
                cs_send(op, p->next, msg, rb + (soff + co) * es, cl * es,
                        s == 0 ? (fin ? fin[c] : -1) : AT(ag_recv, s - 1, c), -1, -1);
            co = block_off(rlen, nch, c);
            cl = block_len(rlen, nch, c);
            if (cl)
                ag_recv[s * nch + c] = cs_recv(op, p->prev, msg, rb + (roff + co) * es, cl * es,
                                               rs_send ? AT(rs_send, s, c) : -1, -1, -1);
        }
    }
}

static char *group_scratch(struct coll_op *op, const struct coll_group *g, size_t bytes)
{
    return g->scratch ? g->scratch : cs_scratch(op, bytes);
}

int ring_allreduce_group(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                         void *recvbuf, size_t count)
{
    size_t es = op->a.es;
    char *rb = recvbuf;
    const char *sb = sendbuf;
    if (g->n == 1) {
        coll_group_own_result(op, g, sb, rb, count);
        return GX_OK;
    }
    if (count == 0)
        return GX_OK;
    struct ring_plan p = ring_plan(g, count, es);
    int nch = p.nch, rounds = p.rounds;
    char *tmp = group_scratch(op, g, 2 * p.stride * (size_t)nch * es);
    int *rs_red = idx_table(op, rounds, nch), *rs_send = idx_table(op, rounds, nch);
    int *ag_recv = idx_table(op, rounds, nch), *fin = idx_table(op, 1, nch);
    int *slot_reader = idx_table(op, 2, nch);
    if (!tmp || !rs_red || !rs_send || !ag_recv || !fin || !slot_reader)
        goto out;
    ring_rs_half(op, g, &p, sb, rb, count, tmp, rs_send, rs_red, slot_reader);
    /* The complete block r+1 (averaged if asked). */
    int own = mod(p.r + 1, p.n);
    size_t ooff = coll_group_blk_off(g, count, own), olen = coll_group_blk_len(g, count, own);
    for (int c = 0; c < nch; c++) {
        size_t co = block_off(olen, nch, c), cl = block_len(olen, nch, c);
        fin[c] = AT(rs_red, rounds - 1, c);
        if (cl && g->avg)
            fin[c] = cs_avg(op, rb + (ooff + co) * es, cl, fin[c], -1, -1);
    }
    ring_ag_half(op, g, &p, rb, count, fin, rs_send, ag_recv);
out:
    free(rs_red);
    free(rs_send);
    free(ag_recv);
    free(fin);
    free(slot_reader);
    return GX_OK;
}

int ring_rs_group(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                  void *recvbuf, size_t count)
{
    size_t es = op->a.es;
    if (g->n == 1) {
        if (sendbuf != recvbuf)
            cs_copy(op, recvbuf, sendbuf, count * es, -1, -1, -1);
        return GX_OK;
    }
    if (count == 0)
        return GX_OK;
    struct ring_plan p = ring_plan(g, count, es);
    char *tmp = group_scratch(op, g, 2 * p.stride * (size_t)p.nch * es);
    int *rs_red = idx_table(op, p.rounds, p.nch), *rs_send = idx_table(op, p.rounds, p.nch);
    int *slot_reader = idx_table(op, 2, p.nch);
    if (tmp && rs_red && rs_send && slot_reader)
        ring_rs_half(op, g, &p, sendbuf, recvbuf, count, tmp, rs_send, rs_red, slot_reader);
    free(rs_red);
    free(rs_send);
    free(slot_reader);
    return GX_OK;
}

int ring_ag_group(struct coll_op *op, const struct coll_group *g, void *recvbuf, size_t count)
{
    if (g->n == 1 || count == 0)
        return GX_OK;
    struct ring_plan p = ring_plan(g, count, op->a.es);
    int *ag_recv = idx_table(op, p.rounds, p.nch);
    if (ag_recv)
        ring_ag_half(op, g, &p, recvbuf, count, NULL, NULL, ag_recv);
    free(ag_recv);
    return GX_OK;
}

int ring_allreduce_build(struct coll_op *op)
{
    struct coll_group g = coll_group_all(op);
    return ring_allreduce_group(op, &g, op->a.sendbuf, op->a.recvbuf, op->a.count);
}

/* Reduce-scatter: like the first half above, with block r ending on rank r
 * (the ring is shifted by one) and partial sums kept in two scratch
 * accumulators, since recvbuf holds only the rank's own block. */
int ring_reduce_scatter_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    int n = op->comm->size, r = op->comm->rank;
    size_t es = a->es, bl = a->count; /* every block has recvcount elements */
    char *rb = a->recvbuf;
    const char *sb = a->sendbuf;
    if (n == 1) {
        cs_copy(op, rb, sb, bl * es, -1, -1, -1);
        return GX_OK;
    }
    if (bl == 0)
        return GX_OK;
    int nch = coll_chunks(bl * es);
    char *tmp = cs_scratch(op, 4 * bl * es); /* 2 receive slots + 2 accumulators */
    int rounds = n - 1;
    int *rs_recv = idx_table(op, rounds, nch), *rs_red = idx_table(op, rounds, nch);
    int *rs_send = idx_table(op, rounds, nch);
    if (!tmp || !rs_recv || !rs_red || !rs_send)
        goto out;
    int next = mod(r + 1, n), prev = mod(r - 1, n);
    for (int s = 0; s < rounds; s++) {
        int sblk = mod(r - s - 1, n), rblk = mod(r - s - 2, n);
        char *slot = tmp + (size_t)(s % 2) * bl * es;
        char *acc = tmp + (size_t)(2 + s % 2) * bl * es;
        char *prev_acc = tmp + (size_t)(2 + (s + 1) % 2) * bl * es;
        bool last = s == rounds - 1;
        for (int c = 0; c < nch; c++) {
            size_t co = block_off(bl, nch, c), cl = block_len(bl, nch, c);
            if (!cl)
                continue;
            uint32_t msg = (uint32_t)(s * nch + c);
            const char *src = s == 0 ? sb + ((size_t)sblk * bl + co) * es : prev_acc + co * es;
            rs_send[s * nch + c] = cs_send(op, next, msg, src, cl * es, AT(rs_red, s - 1, c), -1,
                                           -1);
            int rv = cs_recv(op, prev, msg, slot + co * es, cl * es, AT(rs_red, s - 2, c), -1,
                             -1);
            rs_recv[s * nch + c] = rv;
            char *dst = last ? rb + co * es : acc + co * es;
            /* The accumulator is reused every other round: after its send. */
            int red = cs_reduce3(op, dst, sb + ((size_t)rblk * bl + co) * es, slot + co * es, cl,
                                 rv, AT(rs_send, s - 1, c), -1);
            if (last && a->op == GX_AVG)
                red = cs_avg(op, dst, cl, red, -1, -1);
            rs_red[s * nch + c] = red;
        }
    }
out:
    free(rs_recv);
    free(rs_red);
    free(rs_send);
    return GX_OK;
}

int ring_allgather_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    int n = op->comm->size, r = op->comm->rank;
    size_t es = a->es, bl = a->count;
    char *rb = a->recvbuf;
    cs_copy(op, rb + (size_t)r * bl * es, a->sendbuf, bl * es, -1, -1, -1);
    if (n == 1 || bl == 0)
        return GX_OK;
    int nch = coll_chunks(bl * es);
    int rounds = n - 1;
    int *ag_recv = idx_table(op, rounds, nch);
    if (!ag_recv)
        return GX_OK;
    int next = mod(r + 1, n), prev = mod(r - 1, n);
    for (int s = 0; s < rounds; s++) {
        int sblk = mod(r - s, n), rblk = mod(r - s - 1, n);
        for (int c = 0; c < nch; c++) {
            size_t co = block_off(bl, nch, c), cl = block_len(bl, nch, c);
            if (!cl)
                continue;
            uint32_t msg = (uint32_t)(s * nch + c);
            const char *src = s == 0 ? (const char *)a->sendbuf + co * es
                                     : rb + ((size_t)sblk * bl + co) * es;
            cs_send(op, next, msg, src, cl * es, AT(ag_recv, s - 1, c), -1, -1);
            ag_recv[s * nch + c] = cs_recv(op, prev, msg, rb + ((size_t)rblk * bl + co) * es,
                                           cl * es, -1, -1, -1);
        }
    }
    free(ag_recv);
    return GX_OK;
}

/* ---- cost and descriptor (algo.h) ------------------------------------------- */

static double ring_cost(const struct coll_model *m)
{
    int n = m->n;
    double S = m->S, a = m->a, b = m->b, g = m->g;
    switch (m->kind) {
    case COLL_ALLREDUCE: {
        /* 2(n-1) rounds of one block each; chunking overlaps each
         * round's reduction with the next chunk's transfer, so only
         * about one round's worth of reduction stays exposed. */
        double blk = S / n, k = coll_chunks((size_t)blk);
        double t = 2 * (n - 1) * (k * a + blk * b) + blk * g * (1 + (n - 2) / k);
        /* ... but a rank's reductions run one after another on its one
         * thread: (n-1) blocks of S/n, whatever the link (gx-sim: 64 x 1
         * GPUs at 50 GB/s, 64 MiB, 18.1 ms where the overlap alone says 8.0). */
        double red = (n - 1) * blk * g;
        return t > red ? t : red;
    }
    case COLL_BROADCAST: /* the chain (coll_bcast.c) */
        return coll_pipelined(m->l, n - 1, m->bytes, 0);
    case COLL_REDUCE: /* the chain (coll_tree.c) */
        return coll_pipelined(m->l, n - 1, m->bytes, 1);
    case COLL_ALLGATHER:
        return (n - 1) * (a + S * b);
    case COLL_REDUCE_SCATTER:
        return (n - 1) * (a + S * (b + g));
    default:
        return -1;
    }
}

static const struct coll_group_algo ring_group = {
    .allreduce = ring_allreduce_group, .msgs = ring_group_msgs, .scratch = ring_group_scratch,
};

const struct coll_algo_desc coll_algo_ring = {
    .id = COLL_ALGO_RING,
    .name = "ring",
    .serves = {
        [COLL_ALLREDUCE] = { ring_allreduce_build, 1 },
        [COLL_BROADCAST] = { chain_bcast_build, 2 },
        [COLL_REDUCE] = { chain_reduce_build, 2 },
        [COLL_ALLGATHER] = { ring_allgather_build, 1 },
        [COLL_REDUCE_SCATTER] = { ring_reduce_scatter_build, 1 },
    },
    .cost = ring_cost,
    .group = &ring_group,
};
