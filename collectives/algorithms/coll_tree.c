/*
 * coll_tree.c - binomial-tree reduce and broadcast, pipelined in chunks, and
 * the "tree" all-reduce built from them (reduce to rank 0, then broadcast);
 * plus the chain (pipelined ring) reduce.
 *
 * Binomial tree over virtual ranks v = (rank - root) mod n: v's parent is v
 * minus its lowest set bit, its children v + 2^k for every 2^k below that
 * bit. log2(n) levels: the latency choice for small vectors (the double
 * binary tree, coll_dbtree.c, also halves the bandwidth term at large
 * sizes). Each rank combines its own contribution with
 * its children's in a fixed order (own, then children by increasing
 * distance); the broadcast then gives all ranks the root's bits. The
 * all-reduce also runs over a group of ranks (algorithms.h), so the
 * hierarchical all-reduce can use it along a rail.
 */
#include <stdlib.h>

#include "collectives/algorithms/algo.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/comm/comm_internal.h"

/* Chunks a child may send ahead of the slowest (reduce_phase). */
#define TREE_AHEAD 4

static int lowbit(int v)
{
    return v & -v;
}

/* The tree runs over a group (algorithms.h): member indices below become
 * comm ranks through coll_group_rank; `root` is a member index. */

/* Reduce `sb` (count elements) over the tree into `acc` on the root (and
 * partial sums into `acc` elsewhere); GX_AVG finishes on the root when
 * g->avg. done[c] receives, per chunk, the step after which the root's chunk
 * is complete (root) or the chunk's send to the parent (others). `scratch`
 * holds one vector per child. */
static void reduce_phase(struct coll_op *op, const struct coll_group *g, int root, const char *sb,
                         char *acc, char *scratch, size_t count, int nch, uint32_t msg_base,
                         int *done)
{
    int n = g->n, r = g->me;
    size_t es = op->a.es, bytes = count * es;
    int v = (r - root + n) % n;
    int limit = v ? lowbit(v) : n; /* children are v + m for m < limit */
    int parent = v ? coll_group_rank(g, ((v - lowbit(v)) + root) % n) : -1;
    for (int c = 0; c < nch; c++) {
        size_t co = block_off(count, nch, c), cl = block_len(count, nch, c);
        done[c] = -1;
        if (!cl)
            continue;
        int comb = -1, k = 0;
        const char *have = sb + co * es;
        for (int m = 1; m < limit && v + m < n; m <<= 1, k++) {
            int child = coll_group_rank(g, (v + m + root) % n);
            char *slot = scratch + (size_t)k * bytes + co * es;
            /* A child at most TREE_AHEAD chunks ahead of this rank's
             * progress (chunk c - TREE_AHEAD passed on): a child that ran
             * further ahead would only take the link the slower ones need. */
            int ahead = c >= TREE_AHEAD ? done[c - TREE_AHEAD] : -1;
            int rv = cs_recv(op, child, msg_base + (uint32_t)c, slot, cl * es, ahead, -1, -1);
            comb = cs_reduce3(op, acc + co * es, have, slot, cl, rv, comb, -1);
            have = acc + co * es;
        }
        if (parent >= 0) {
            done[c] = cs_send(op, parent, msg_base + (uint32_t)c, have, cl * es, comb, -1, -1);
        } else {
            if (comb < 0) /* no children: n == 1 */
                comb = cs_copy(op, acc + co * es, sb + co * es, cl * es, -1, -1, -1);
            if (g->avg)
                comb = cs_avg(op, acc + co * es, cl, comb, -1, -1);
            done[c] = comb;
        }
    }
}

static int tree_children(int v, int n)
{
    int k = 0;
    for (int m = 1; m < (v ? lowbit(v) : n) && v + m < n; m <<= 1)
        k++;
    return k;
}

/* Broadcast the root's `src` (count elements) into `rb` everywhere.
 * ready[c] (may be NULL) is a step each chunk waits for: on the root before
 * sending it, elsewhere before receiving into it. */
static void bcast_phase(struct coll_op *op, const struct coll_group *g, int root, const char *src,
                        char *rb, size_t count, int nch, uint32_t msg_base, const int *ready)
{
    int n = g->n, r = g->me;
    size_t es = op->a.es;
    int v = (r - root + n) % n;
    int limit = v ? lowbit(v) : n;
    int top = 1;
    while (top * 2 < limit && v + top * 2 < n)
        top *= 2;
    for (int c = 0; c < nch; c++) {
        size_t co = block_off(count, nch, c), cl = block_len(count, nch, c);
        if (!cl)
            continue;
        int dep = ready ? ready[c] : -1;
        const char *from = src + co * es;
        if (v) {
            int parent = coll_group_rank(g, ((v - lowbit(v)) + root) % n);
            dep = cs_recv(op, parent, msg_base + (uint32_t)c, rb + co * es, cl * es, dep, -1, -1);
            from = rb + co * es;
        }
        /* Farthest child first: it heads the biggest subtree. */
        for (int m = top; m >= 1; m >>= 1)
            if (m < limit && v + m < n)
                cs_send(op, coll_group_rank(g, (v + m + root) % n), msg_base + (uint32_t)c,
                        from, cl * es, dep, -1, -1);
    }
}

int tree_bcast_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    size_t bytes = a->count * a->es;
    if (op->comm->rank == a->root)
        cs_copy(op, a->recvbuf, a->sendbuf, bytes, -1, -1, -1);
    if (op->comm->size == 1 || bytes == 0)
        return GX_OK;
    struct coll_group g = coll_group_all(op);
    bcast_phase(op, &g, a->root, a->sendbuf, a->recvbuf, a->count, coll_chunks(bytes), 0, NULL);
    return GX_OK;
}

int tree_reduce_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    int n = op->comm->size, r = op->comm->rank;
    size_t bytes = a->count * a->es;
    if (bytes == 0)
        return GX_OK;
    int v = (r - a->root + n) % n;
    int kids = tree_children(v, n);
    int nch = coll_chunks(bytes);
    char *scratch = cs_scratch(op, (size_t)(kids + (r != a->root)) * bytes);
    int *done = malloc((size_t)nch * sizeof(int));
    if (scratch && done) {
        struct coll_group g = coll_group_all(op);
        char *acc = r == a->root ? a->recvbuf : scratch + (size_t)kids * bytes;
        reduce_phase(op, &g, a->root, a->sendbuf, acc, scratch, a->count, nch, 0, done);
    } else {
        op->build_status = GX_ENOMEM;
    }
    free(done);
    return GX_OK;
}

uint32_t tree_group_msgs(const struct coll_group *g, size_t count, size_t es)
{
    (void)g;
    return 2 * (uint32_t)coll_chunks(count * es); /* a reduce and a broadcast per chunk */
}

size_t tree_group_scratch(const struct coll_group *g, size_t count, size_t es)
{
    int kids = tree_children(g->me, g->n);
    return (size_t)(kids ? kids : 1) * count * es;
}

int tree_allreduce_build(struct coll_op *op)
{
    struct coll_group g = coll_group_all(op);
    return tree_allreduce_group(op, &g, op->a.sendbuf, op->a.recvbuf, op->a.count);
}

/* Reduce to member 0, then broadcast from it; in place when sendbuf ==
 * recvbuf (a chunk is overwritten by the broadcast only after it went up). */
int tree_allreduce_group(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                         void *recvbuf, size_t count)
{
    size_t es = op->a.es, bytes = count * es;
    if (g->n == 1 || bytes == 0) {
        coll_group_own_result(op, g, sendbuf, recvbuf, count);
        return GX_OK;
    }
    int nch = coll_chunks(bytes);
    char *scratch = g->scratch ? g->scratch : cs_scratch(op, tree_group_scratch(g, count, es));
    int *done = malloc((size_t)nch * sizeof(int));
    if (scratch && done) {
        /* Partial sums in recvbuf; member 0's becomes the result. */
        reduce_phase(op, g, 0, sendbuf, recvbuf, scratch, count, nch, g->msg_base, done);
        bcast_phase(op, g, 0, recvbuf, recvbuf, count, nch, g->msg_base + (uint32_t)nch, done);
    } else {
        op->build_status = GX_ENOMEM;
    }
    free(done);
    return GX_OK;
}

/* Chain reduce: v receives the partial result of v+1..n-1 from v+1,
 * combines its own and passes it to v-1; chunks pipeline along the chain.
 * Bandwidth-optimal for large vectors at the cost of n-1 message times. */
int chain_reduce_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    int n = op->comm->size, r = op->comm->rank;
    size_t es = a->es, count = a->count, bytes = count * es;
    if (bytes == 0)
        return GX_OK;
    int v = (r - a->root + n) % n;
    bool root = v == 0;
    if (n == 1) {
        int cp = cs_copy(op, a->recvbuf, a->sendbuf, bytes, -1, -1, -1);
        if (a->op == GX_AVG)
            cs_avg(op, a->recvbuf, count, cp, -1, -1);
        return GX_OK;
    }
    int nch = coll_chunks(bytes);
    bool tail = v == n - 1;
    char *scratch = tail ? NULL : cs_scratch(op, (root ? 1 : 2) * bytes);
    if (!tail && !scratch)
        return GX_OK;
    char *tmp = scratch, *acc = root ? a->recvbuf : (tail ? NULL : scratch + bytes);
    int from = (r + 1) % n, to = (r + n - 1) % n;
    for (int c = 0; c < nch; c++) {
        size_t co = block_off(count, nch, c), cl = block_len(count, nch, c);
        if (!cl)
            continue;
        uint32_t msg = (uint32_t)c;
        if (tail) {
            cs_send(op, to, msg, (const char *)a->sendbuf + co * es, cl * es, -1, -1, -1);
            continue;
        }
        int rv = cs_recv(op, from, msg, tmp + co * es, cl * es, -1, -1, -1);
        int comb = cs_reduce3(op, acc + co * es, (const char *)a->sendbuf + co * es,
                              tmp + co * es, cl, rv, -1, -1);
        if (!root)
            cs_send(op, to, msg, acc + co * es, cl * es, comb, -1, -1);
        else if (a->op == GX_AVG)
            cs_avg(op, acc + co * es, cl, comb, -1, -1);
    }
    return GX_OK;
}

/* ---- cost and descriptor (algo.h) ------------------------------------------- */

static double tree_cost(const struct coll_model *m)
{
    double S = m->S, b = m->b, g = m->g, lg = m->lg;
    switch (m->kind) {
    case COLL_ALLREDUCE:
        /* reduce then broadcast; a node sends/receives once per child */
        return 2 * coll_pipelined(m->l, lg, m->bytes, 0.5) + (lg - 1) * S * (b + g);
    case COLL_BROADCAST:
        return coll_pipelined(m->l, lg, m->bytes, 0) + (lg - 1) * S * b;
    case COLL_REDUCE:
        return coll_pipelined(m->l, lg, m->bytes, 1) + (lg - 1) * S * (b + g);
    default:
        return -1;
    }
}

static const struct coll_group_algo tree_group = {
    .allreduce = tree_allreduce_group, .msgs = tree_group_msgs, .scratch = tree_group_scratch,
};

const struct coll_algo_desc coll_algo_tree = {
    .id = COLL_ALGO_TREE,
    .name = "tree",
    .serves = {
        [COLL_ALLREDUCE] = { tree_allreduce_build, 4 },
        [COLL_BROADCAST] = { tree_bcast_build, 1 },
        [COLL_REDUCE] = { tree_reduce_build, 1 },
    },
    .cost = tree_cost,
    .group = &tree_group,
};
