/*
 * coll_rd.c - recursive-doubling all-reduce, for small vectors.
 *
 * log2(p) rounds; in round k rank i exchanges its whole current vector with
 * rank i ^ 2^k and both combine them as (lower rank's, upper rank's) so both
 * hold the same bits. Latency-optimal (log2 p message times), but every
 * round moves the whole vector: the choice below ~ tens of KiB. Other rank
 * counts fold first (coll.h: fold_newrank), costing two extra message times.
 *
 * Buffers: the running result alternates between recvbuf and a scratch
 * vector (a combine never writes the buffer it reads), the partner's vector
 * lands in a second scratch vector.
 */
#include "collectives/algorithms/algo.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/comm/comm_internal.h"

int rd_allreduce_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    int n = op->comm->size, r = op->comm->rank;
    size_t bytes = a->count * a->es;
    char *rb = a->recvbuf;
    const char *sb = a->sendbuf;
    if (n == 1 || bytes == 0) {
        cs_copy(op, rb, sb, bytes, -1, -1, -1);
        return GX_OK;
    }
    int p = coll_pof2(n), rem = n - p;
    int nr = fold_newrank(r, rem);
    uint32_t msg = 0;
    if (nr < 0) {
        /* Hand the vector to r+1, get the result back. */
        int snd = cs_send(op, r + 1, msg, sb, bytes, -1, -1, -1);
        cs_recv(op, r + 1, 1000, rb, bytes, snd, -1, -1);
        return GX_OK;
    }
    char *scratch = cs_scratch(op, 2 * bytes);
    if (!scratch)
        return GX_OK;
    char *tmp = scratch, *alt = scratch + bytes;
    const char *cur = sb;
    int cur_write = -1;           /* step that produced cur */
    int last_send_of[2] = { -1, -1 }; /* last send reading rb / alt */
    int last_tmp_read = -1;
    if (r < 2 * rem) {
        /* Odd member of a folded pair: combine with r-1 (the lower rank). */
        int rv = cs_recv(op, r - 1, msg, tmp, bytes, -1, -1, -1);
        cur_write = cs_combine(op, rb, tmp, cur, a->count, rv, -1, -1);
        last_tmp_read = cur_write;
        cur = rb;
    }
    for (int d = 1; d < p; d <<= 1) {
        msg++;
        int pn = nr ^ d, peer = fold_realrank(pn, rem);
        int snd = cs_send(op, peer, msg, cur, bytes, cur_write, -1, -1);
        if (cur == rb) /* (also the in-place first round, when sb == rb) */
            last_send_of[0] = snd;
        else if (cur == alt)
            last_send_of[1] = snd;
        int rv = cs_recv(op, peer, msg, tmp, bytes, last_tmp_read, -1, -1);
        char *out = cur == rb ? alt : rb;
        int out_idx = out == rb ? 0 : 1;
        const char *lower = pn < nr ? tmp : cur, *upper = pn < nr ? cur : tmp;
        /* out was last read by an earlier round's send. */
        int comb = cs_combine(op, out, lower, upper, a->count, rv, last_send_of[out_idx],
                              cur_write);
        last_tmp_read = comb;
        cur_write = comb;
        cur = out;
    }
    int fin = cur_write;
    if (cur != rb)
        fin = cs_copy(op, rb, cur, bytes, cur_write, last_send_of[0], -1);
    if (a->op == GX_AVG)
        fin = cs_avg(op, rb, a->count, fin, -1, -1);
    if (r < 2 * rem)
        cs_send(op, r - 1, 1000, rb, bytes, fin, -1, -1);
    return GX_OK;
}

/* ---- cost and descriptor (algo.h) ------------------------------------------- */

static double rd_cost(const struct coll_model *m)
{
    double S = m->S, a = m->a, b = m->b, g = m->g, L = m->L, fold = m->fold;
    if (m->kind != COLL_ALLREDUCE)
        return -1;
    return (L + 2 * fold) * (a + S * b) + (L + fold) * S * g;
}

const struct coll_algo_desc coll_algo_rd = {
    .id = COLL_ALGO_RD,
    .name = "rd",
    .serves = { [COLL_ALLREDUCE] = { rd_allreduce_build, 2 } },
    .cost = rd_cost,
};
