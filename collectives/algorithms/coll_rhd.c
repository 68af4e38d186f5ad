/*
 * coll_rhd.c - Rabenseifner's all-reduce: reduce-scatter by recursive
 * halving, then all-gather by recursive doubling. 2 log2(p) message times
 * and 2(p-1)/p of the vector sent: the medium-size choice, between recursive
 * doubling (latency) and the ring (bandwidth, but 2(n-1) message times).
 *
 * The vector is cut into p blocks. In halving round k (distance p/2, p/4,
 * ... 1) a rank keeps the half of its current range that holds its own
 * block, sends the other half to rank ^ d and combines what it receives as
 * (lower rank's, upper rank's), so both sides of every exchange compute the
 * same bits. Partial results alternate between recvbuf and a scratch vector.
 * After the halving each rank holds block `newrank` complete; the doubling
 * rounds exchange ever larger ranges straight into recvbuf. Other rank
 * counts fold first (coll.h). Runs over a group of ranks (algorithms.h) so
 * the hierarchical all-reduce can use it along a rail.
 */
#include "collectives/algorithms/algo.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/comm/comm_internal.h"

uint32_t rhd_group_msgs(const struct coll_group *g, size_t count, size_t es)
{
    (void)count, (void)es;
    int p = coll_pof2(g->n), l = 0;
    while ((1 << l) < p)
        l++;
    return (uint32_t)(2 * l + 2); /* fold, l halving, l doubling, unfold */
}

/* A whole vector (alt), and the largest half received (tmp): the first
 * halving's lower half, blocks [0, p/2) of p, which can hold more than
 * count / 2 + 1 elements from p = 8 on (152 of 300 on 8 ranks). */
size_t rhd_group_scratch(const struct coll_group *g, size_t count, size_t es)
{
    int p = coll_pof2(g->n);
    return count * es + block_off(count, p, p / 2) * es;
}

int rhd_allreduce_build(struct coll_op *op)
{
    struct coll_group g = coll_group_all(op);
    return rhd_allreduce_group(op, &g, op->a.sendbuf, op->a.recvbuf, op->a.count);
}

/* Group indices below (r, peers, fold_realrank) become comm ranks through
 * coll_group_rank; messages are numbered from g->msg_base. */
int rhd_allreduce_group(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                        void *recvbuf, size_t count)
{
    const struct coll_args *a = &op->a;
    int n = g->n, r = g->me;
    size_t es = a->es, bytes = count * es;
    char *rb = recvbuf;
    const char *sb = sendbuf;
    if (n == 1 || bytes == 0) {
        coll_group_own_result(op, g, sb, rb, count);
        return GX_OK;
    }
    int p = coll_pof2(n), rem = n - p;
    int nr = fold_newrank(r, rem);
    const uint32_t unfold_msg = g->msg_base + rhd_group_msgs(g, count, es) - 1;
    if (nr < 0) {
        int snd = cs_send(op, coll_group_rank(g, r + 1), g->msg_base, sb, bytes, -1, -1, -1);
        cs_recv(op, coll_group_rank(g, r + 1), unfold_msg, rb, bytes, snd, -1, -1);
        return GX_OK;
    }
    char *scratch = g->scratch ? g->scratch : cs_scratch(op, rhd_group_scratch(g, count, es));
    if (!scratch)
        return GX_OK;
    char *alt = scratch, *tmp = scratch + bytes;
    const char *cur = sb;
    int cur_write = -1, last_tmp_read = -1;
    int last_send_of[2] = { -1, -1 }; /* last send reading rb / alt */
    uint32_t msg = g->msg_base;
    if (r < 2 * rem) {
        /* Odd member of a folded pair: the whole vector from r-1 first. The
         * receive needs a full vector: use alt, combine into rb. */
        int rv = cs_recv(op, coll_group_rank(g, r - 1), msg, alt, bytes, -1, -1, -1);
        cur_write = cs_combine(op, rb, alt, cur, count, rv, -1, -1);
        last_send_of[1] = cur_write; /* alt is free once this combine ran */
        cur = rb;
    }
    /* Reduce-scatter by recursive halving over block ranges [lo, hi). */
    int lo = 0, hi = p;
    for (int d = p / 2; d >= 1; d /= 2) {
        msg++;
        int pn = nr ^ d, peer = coll_group_rank(g, fold_realrank(pn, rem));
        int mid = lo + (hi - lo) / 2;
        bool upper_half = (nr & d) != 0;
        int klo = upper_half ? mid : lo, khi = upper_half ? hi : mid;
        int slo = upper_half ? lo : mid, shi = upper_half ? mid : hi;
        size_t koff = block_off(count, p, klo), klen = block_off(count, p, khi) - koff;
        size_t soff = block_off(count, p, slo), slen = block_off(count, p, shi) - soff;
        int snd = -1;
        if (slen)
            snd = cs_send(op, peer, msg, cur + soff * es, slen * es, cur_write, -1, -1);
        if (cur == rb)
            last_send_of[0] = snd >= 0 ? snd : last_send_of[0];
        else if (cur == alt)
            last_send_of[1] = snd >= 0 ? snd : last_send_of[1];
        char *out = cur == rb ? alt : rb;
        int out_idx = out == rb ? 0 : 1;
        if (klen) {
            int rv = cs_recv(op, peer, msg, tmp, klen * es, last_tmp_read, -1, -1);
            const char *mine = cur + koff * es;
            const char *lower = pn < nr ? tmp : mine, *upper = pn < nr ? mine : tmp;
            int comb = cs_combine(op, out + koff * es, lower, upper, klen, rv,
                                  last_send_of[out_idx], cur_write);
            last_tmp_read = comb;
            cur_write = comb;
        }
        cur = out;
        lo = klo;
        hi = khi;
    }
    /* Own block `nr` complete in cur: into recvbuf, averaged if asked. */
    size_t moff = block_off(count, p, nr), mlen = block_len(count, p, nr);
    int have = cur_write;
    if (cur != rb)
        have = cs_copy(op, rb + moff * es, cur + moff * es, mlen * es, cur_write, last_send_of[0],
                       -1);
    if (g->avg)
        have = cs_avg(op, rb + moff * es, mlen, have, -1, -1);
    /* Everything that read or wrote recvbuf before the gather is done. */
    int join = cs_nop(op, have, last_send_of[0], cur_write);
    /* All-gather by recursive doubling: ranges of d blocks. */
    for (int d = 1; d < p; d <<= 1) {
        msg++;
        int pn = nr ^ d, peer = coll_group_rank(g, fold_realrank(pn, rem));
        int mlo = nr & ~(d - 1), plo = pn & ~(d - 1);
        size_t o1 = block_off(count, p, mlo), l1 = block_off(count, p, mlo + d) - o1;
        size_t o2 = block_off(count, p, plo), l2 = block_off(count, p, plo + d) - o2;
        if (l1)
            cs_send(op, peer, msg, rb + o1 * es, l1 * es, have, -1, -1);
        int rv = -1;
        if (l2)
            rv = cs_recv(op, peer, msg, rb + o2 * es, l2 * es, join, -1, -1);
        have = cs_nop(op, have, rv, -1);
    }
    if (r < 2 * rem)
        cs_send(op, coll_group_rank(g, r - 1), unfold_msg, rb, bytes, have, -1, -1);
    return GX_OK;
}

/* ---- cost and descriptor (algo.h) ------------------------------------------- */

static double rhd_cost(const struct coll_model *m)
{
    int p = m->p;
    double S = m->S, a = m->a, b = m->b, g = m->g, L = m->L, fold = m->fold;
    if (m->kind != COLL_ALLREDUCE)
        return -1;
    return 2 * L * a + 2 * (p - 1) / (double)p * S * b + (p - 1) / (double)p * S * g +
           fold * (2 * (a + S * b) + S * g);
}

static const struct coll_group_algo rhd_group = {
    .allreduce = rhd_allreduce_group, .msgs = rhd_group_msgs, .scratch = rhd_group_scratch,
};

const struct coll_algo_desc coll_algo_rhd = {
    .id = COLL_ALGO_RHD,
    .name = "rhd",
    .serves = { [COLL_ALLREDUCE] = { rhd_allreduce_build, 3 } },
    .cost = rhd_cost,
    .group = &rhd_group,
};
