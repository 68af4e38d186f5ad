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
 */
#include <stdlib.h>

#include "collectives/algorithms/algorithms.h"
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

int ring_allreduce_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    int n = op->comm->size, r = op->comm->rank;
    size_t es = a->es;
    char *rb = a->recvbuf;
    const char *sb = a->sendbuf;
    if (n == 1) {
        cs_copy(op, rb, sb, a->count * es, -1, -1, -1);
        return GX_OK;
    }
    if (a->count == 0)
        return GX_OK;
    size_t maxblk = block_len(a->count, n, 0);
    int nch = coll_chunks(maxblk * es);
    /* Receive slots use a fixed chunk stride: blocks differ in length by one
     * element, and a slot is reused by another block two rounds later. */
    size_t stride = (maxblk + (size_t)nch - 1) / (size_t)nch;
    char *tmp = cs_scratch(op, 2 * stride * (size_t)nch * es);
    int rounds = n - 1;
    int *rs_recv = idx_table(op, rounds, nch), *rs_red = idx_table(op, rounds, nch);
    int *rs_send = idx_table(op, rounds, nch), *ag_recv = idx_table(op, rounds, nch);
    int *fin = idx_table(op, 1, nch);
    if (!tmp || !rs_recv || !rs_red || !rs_send || !ag_recv || !fin)
        goto out;
    int next = mod(r + 1, n), prev = mod(r - 1, n);

    /* Reduce-scatter. */
    for (int s = 0; s < rounds; s++) {
        int sblk = mod(r - s, n), rblk = mod(r - s - 1, n);
        size_t soff = block_off(a->count, n, sblk), slen = block_len(a->count, n, sblk);
        size_t roff = block_off(a->count, n, rblk), rlen = block_len(a->count, n, rblk);
        char *slot = tmp + (size_t)(s % 2) * stride * (size_t)nch * es;
        for (int c = 0; c < nch; c++) {
            size_t co = block_off(slen, nch, c), cl = block_len(slen, nch, c);
            uint32_t msg = (uint32_t)(s * nch + c);
            char *cslot = slot + (size_t)c * stride * es;
            if (cl) {
                const char *src = s == 0 ? sb + (soff + co) * es : rb + (soff + co) * es;
                rs_send[s * nch + c] = cs_send(op, next, msg, src, cl * es, AT(rs_red, s - 1, c),
                                               -1, -1);
            }
            co = block_off(rlen, nch, c);
            cl = block_len(rlen, nch, c);
            if (cl) {
                /* The slot is reused every other round: wait for its last reader. */
                int rv = cs_recv(op, prev, msg, cslot, cl * es, AT(rs_red, s - 2, c), -1, -1);
                rs_recv[s * nch + c] = rv;
                rs_red[s * nch + c] = cs_reduce3(op, rb + (roff + co) * es, sb + (roff + co) * es,
                                                 cslot, cl, rv, -1, -1);
            }
        }
    }
    /* The complete block r+1 (averaged if asked). */
    int own = mod(r + 1, n);
    size_t ooff = block_off(a->count, n, own), olen = block_len(a->count, n, own);
    for (int c = 0; c < nch; c++) {
        size_t co = block_off(olen, nch, c), cl = block_len(olen, nch, c);
        fin[c] = AT(rs_red, rounds - 1, c);
        if (cl && a->op == GX_AVG)
            fin[c] = cs_avg(op, rb + (ooff + co) * es, cl, fin[c], -1, -1);
    }
    /* All-gather. */
    for (int s = 0; s < rounds; s++) {
        int sblk = mod(r + 1 - s, n), rblk = mod(r - s, n);
        size_t soff = block_off(a->count, n, sblk), slen = block_len(a->count, n, sblk);
        size_t roff = block_off(a->count, n, rblk), rlen = block_len(a->count, n, rblk);
        for (int c = 0; c < nch; c++) {
            uint32_t msg = (uint32_t)((rounds + s) * nch + c);
            size_t co = block_off(slen, nch, c), cl = block_len(slen, nch, c);
            if (cl)
                cs_send(op, next, msg, rb + (soff + co) * es, cl * es,
                        s == 0 ? fin[c] : AT(ag_recv, s - 1, c), -1, -1);
            co = block_off(rlen, nch, c);
            cl = block_len(rlen, nch, c);
            if (cl) /* the block's last reader was reduce-scatter's send of round s */
                ag_recv[s * nch + c] = cs_recv(op, prev, msg, rb + (roff + co) * es, cl * es,
                                               AT(rs_send, s, c), -1, -1);
        }
    }
out:
    free(rs_recv);
    free(rs_red);
    free(rs_send);
    free(ag_recv);
    free(fin);
    return GX_OK;
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
