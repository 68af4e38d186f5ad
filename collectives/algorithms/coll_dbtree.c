/*
 * coll_dbtree.c - double binary tree all-reduce (the idea NCCL 2.4
 * introduced): two binary trees over the n ranks, built so that a rank with
 * children in one tree is a leaf in the other. The vector is cut in two
 * halves; half 0 is reduced up tree 0 and broadcast back down it, half 1
 * likewise on tree 1. Both halves go in chunks (coll_chunks), so chunk c
 * comes down while chunk c+1 still climbs, and the trees run side by side.
 *
 * Trees. Positions 1..n form an in-order binary tree: a position's level is
 * its lowest set bit, so odd positions are the leaves, the root is the
 * largest power of two <= n and an even position q with lowest bit l has
 * children q - l/2 and q + l/2 (the right one, when past n, replaced by
 * q + l/4, q + l/8, ...: the left spine of the missing subtree). Depth is
 * floor(log2 n) and only even positions have children. Tree 0 puts rank r at
 * position r + 1, so its interior ranks are the odd ones. Tree 1 must make
 * the even ranks interior: for even n it mirrors tree 0 (rank r at position
 * n - r), for odd n it shifts it by one (rank r at position r, rank 0 at
 * n). NCCL mirrors or shifts the same way; its first tree differs (rank 0 is
 * a root with one child), which for odd n leaves one rank interior in both
 * trees; here none is (with odd n rank 0 is a leaf in both).
 *
 * Per rank and chunk: leaf side 1 send + 1 receive; interior side 2
 * receives, 2 reductions, 1 send up (none at the root), 1 receive and 2
 * sends down. Over both trees a rank sends and receives about 2x the
 * vector, like the ring, but the latency is 2 floor(log2 n) message times
 * instead of 2(n-1).
 *
 * Bits: each half is combined once, along its tree (a rank adds its left
 * child's partial sum to its own, then the right child's), and the root's
 * result (averaged there for GX_AVG) is copied down to everyone, so all
 * ranks hold identical bits.
 *
 * The all-reduce also runs over a group of ranks (algorithms.h), so the
 * hierarchical all-reduce can use it along a rail.
 */
#include <stdlib.h>

#include "collectives/algorithms/algo.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/algorithms/coll_dbtree.h"
#include "collectives/comm/comm_internal.h"

static int lowbit(int v)
{
    return v & -v;
}

/* Parent position of q in the in-order tree over 1..n; 0 at the root.
 * Climb the unbounded in-order tree (a node with bit 2l set is the right
 * child of q - l, else the left child of q + l) until inside 1..n. */
static int pos_parent(int q, int n)
{
    if (q == coll_pof2(n))
        return 0;
    int a = q;
    do {
        int l = lowbit(a);
        a = (a & (2 * l)) ? a - l : a + l;
    } while (a > n);
    return a;
}

static void pos_children(int q, int n, int kids[2])
{
    int l = lowbit(q);
    kids[0] = kids[1] = 0;
    if (l == 1)
        return;
    kids[0] = q - l / 2;
    for (int d = l / 2; d >= 1; d /= 2) {
        if (q + d <= n) {
            kids[1] = q + d;
            break;
        }
    }
}

static int rank_to_pos(int n, int tree, int r)
{
    if (tree == 0)
        return r + 1;
    if (n % 2 == 0)
        return n - r;      /* mirror */
    return r == 0 ? n : r; /* shift by one */
}

static int pos_to_rank(int n, int tree, int q)
{
    if (q == 0)
        return -1;
    if (tree == 0)
        return q - 1;
    if (n % 2 == 0)
        return n - q;
    return q % n;
}

void dbtree_links(int n, int rank, int tree, struct dbtree_links *out)
{
    int q = rank_to_pos(n, tree, rank), kids[2];
    pos_children(q, n, kids);
    out->parent = pos_to_rank(n, tree, pos_parent(q, n));
    out->child[0] = pos_to_rank(n, tree, kids[0]);
    out->child[1] = pos_to_rank(n, tree, kids[1]);
}

int dbtree_depth(int n)
{
    int d = 0;
    while ((2 << d) <= n)
        d++;
    return d;
}

/* One half of the vector and its tree, as this rank sees them (links in
 * comm ranks). */
struct dbtree_half {
    struct dbtree_links links;
    const char *sb;         /* the group's vector */
    char *rb;
    bool avg;               /* the root finishes GX_AVG */
    size_t off, len;        /* elements */
    int nch;                /* chunks */
    uint32_t msg_up, msg_down;
    char *slot[2];          /* a child's partial sums land here (len elements) */
};

/* The steps of chunk c of one half: gather the children's partial sums,
 * pass the subtree's sum up, take the result from above and pass it down. */
static void dbtree_chunk(struct coll_op *op, const struct dbtree_half *h, int c)
{
    size_t es = op->a.es;
    size_t rel = block_off(h->len, h->nch, c), cl = block_len(h->len, h->nch, c);
    if (!cl)
        return;
    char *acc = h->rb + (h->off + rel) * es;
    const char *have = h->sb + (h->off + rel) * es;
    uint32_t up = h->msg_up + (uint32_t)c, down = h->msg_down + (uint32_t)c;
    int summed = -1;
    for (int k = 0; k < 2; k++) {
        if (h->links.child[k] < 0)
            continue;
        char *slot = h->slot[k] + rel * es;
        int rv = cs_recv(op, h->links.child[k], up, slot, cl * es, -1, -1, -1);
        summed = cs_reduce3(op, acc, have, slot, cl, rv, summed, -1);
        have = acc;
    }
    int result;
    if (h->links.parent >= 0) {
        int sent = cs_send(op, h->links.parent, up, have, cl * es, summed, -1, -1);
        /* acc (or, in place, the send buffer) is overwritten only once sent */
        result = cs_recv(op, h->links.parent, down, acc, cl * es, sent, -1, -1);
    } else {
        result = summed; /* the root (n >= 2) always has a child */
        if (h->avg)
            result = cs_avg(op, acc, cl, result, -1, -1);
    }
    for (int k = 0; k < 2; k++)
        if (h->links.child[k] >= 0)
            cs_send(op, h->links.child[k], down, acc, cl * es, result, -1, -1);
}

static int child_count(const struct dbtree_links *l)
{
    return (l->child[0] >= 0) + (l->child[1] >= 0);
}

uint32_t dbtree_group_msgs(const struct coll_group *g, size_t count, size_t es)
{
    (void)g;
    uint32_t m = 0;
    for (int t = 0; t < 2; t++)
        m += 2 * (uint32_t)coll_chunks(block_len(count, 2, t) * es); /* up and down */
    return m;
}

size_t dbtree_group_scratch(const struct coll_group *g, size_t count, size_t es)
{
    size_t bytes = 0;
    for (int t = 0; t < 2; t++) {
        struct dbtree_links l;
        dbtree_links(g->n, g->me, t, &l);
        bytes += (size_t)child_count(&l) * block_len(count, 2, t) * es;
    }
    return bytes;
}

int dbtree_allreduce_build(struct coll_op *op)
{
    struct coll_group g = coll_group_all(op);
    return dbtree_allreduce_group(op, &g, op->a.sendbuf, op->a.recvbuf, op->a.count);
}

/* Over a group (algorithms.h): the trees are built over member indices,
 * which become comm ranks through coll_group_rank; messages are numbered
 * from g->msg_base (dbtree_group_msgs of them). */
int dbtree_allreduce_group(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                           void *recvbuf, size_t count)
{
    int n = g->n, r = g->me;
    size_t es = op->a.es;
    if (n == 1 || count == 0) {
        coll_group_own_result(op, g, sendbuf, recvbuf, count);
        return GX_OK;
    }
    struct dbtree_half h[2];
    size_t scratch_bytes = dbtree_group_scratch(g, count, es);
    uint32_t msg = g->msg_base;
    for (int t = 0; t < 2; t++) {
        struct dbtree_links *l = &h[t].links;
        dbtree_links(n, r, t, l);
        l->parent = l->parent >= 0 ? coll_group_rank(g, l->parent) : -1;
        for (int k = 0; k < 2; k++)
            l->child[k] = l->child[k] >= 0 ? coll_group_rank(g, l->child[k]) : -1;
        h[t].sb = sendbuf;
        h[t].rb = recvbuf;
        h[t].avg = g->avg;
        h[t].off = block_off(count, 2, t);
        h[t].len = block_len(count, 2, t); /* half 1 is empty for count 1 */
        h[t].nch = coll_chunks(h[t].len * es);
        h[t].msg_up = msg;
        h[t].msg_down = msg + (uint32_t)h[t].nch;
        msg += 2 * (uint32_t)h[t].nch;
    }
    char *scratch = NULL;
    if (scratch_bytes) {
        scratch = g->scratch ? g->scratch : cs_scratch(op, scratch_bytes);
        if (!scratch)
            return GX_OK; /* build_status says GX_ENOMEM */
    }
    for (int t = 0; t < 2; t++) {
        for (int k = 0; k < 2; k++) {
            h[t].slot[k] = NULL;
            if (h[t].links.child[k] >= 0) {
                h[t].slot[k] = scratch;
                scratch += h[t].len * es;
            }
        }
    }
    /* Chunk by chunk, alternating trees: both stay inside the engine's
     * window of steps, so they progress together. */
    int nch = h[0].nch > h[1].nch ? h[0].nch : h[1].nch;
    for (int c = 0; c < nch; c++)
        for (int t = 0; t < 2; t++)
            if (c < h[t].nch)
                dbtree_chunk(op, &h[t], c);
    return GX_OK;
}

/* ---- cost and descriptor (algo.h) ------------------------------------------- */

static double dbtree_cost(const struct coll_model *m)
{
    int n = m->n;
    double S = m->S, a = m->a, b = m->b, g = m->g;
    if (m->kind != COLL_ALLREDUCE)
        return -1;
    /* Two trees of depth D, half the vector each in k chunks of c
     * bytes. Per chunk a rank sends 4 messages (where it has
     * children: 1 up, 2 down; where it is a leaf: 1), so a stage
     * (a hop of one tree) costs 2 (a + c b). The first chunk crosses
     * 2D stages (D up, D down), the others follow one per 2 stages.
     * As for the ring, reductions overlap the next chunk's transfer
     * but those of the first chunk (2 per level up). */
    double D = dbtree_depth(n), k = coll_chunks(m->bytes / 2), c = S / 2 / k;
    double t = (2 * D + 2 * (k - 1)) * 2 * (a + c * b) + 2 * D * c * g;
    /* ... but a rank's reductions run on its one thread: an inner rank
     * of one tree reduces both children's chunks, 2 c g per chunk, k
     * chunks after the D - 1 levels below it filled the pipeline (S g and
     * more: the transfers never hide it where the link is faster than the
     * reductions, gx-sim's 64 x 1 GPUs at 50 GB/s). */
    double red = (k + D - 1) * 2 * c * g;
    return t > red ? t : red;
}

static const struct coll_group_algo dbtree_group = {
    .allreduce = dbtree_allreduce_group, .msgs = dbtree_group_msgs,
    .scratch = dbtree_group_scratch,
};

const struct coll_algo_desc coll_algo_dbtree = {
    .id = COLL_ALGO_DBTREE,
    .name = "dbtree",
    .serves = { [COLL_ALLREDUCE] = { dbtree_allreduce_build, 5 } },
    .cost = dbtree_cost,
    .group = &dbtree_group,
};
