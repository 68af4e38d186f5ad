/*
 * coll_hier.c - hierarchical all-reduce for communicators that span nodes:
 * reduce-scatter inside each node, all-reduce of each shard among the ranks
 * that hold it on every node (a "rail"), all-gather inside each node.
 *
 *   node 0: r0 r1      node 1: r2 r3          L = 2 shards (largest node)
 *   (a) ring reduce-scatter inside the node: r0 holds shard 1, r1 shard 0
 *       of its node's sum (the ring leaves member i with block i+1)
 *   (b) rail all-reduce of each shard between nodes: r1 <-> r3 (shard 0),
 *       r0 <-> r2 (shard 1), in parallel, each with the rail's algorithm
 *       (ring, rhd, tree or dbtree, the cost model's pick: op->inner_algo;
 *       coll_hier_rail.c)
 *   (c) ring all-gather inside the node: every rank gets every shard
 *
 * Pipelining: the vector is cut into up to 4 segments (coll_hier_segments) and
 * the three phases run per segment; a phase waits only for the previous
 * phase of its own segment (cs_gate / cs_join), so segment k crosses the
 * network while segment k+1 is reduced inside the node. With the node arena
 * the all-gathers' steps come after every segment's reduce-scatter and
 * rails (its rounds are numbered after theirs: see the builder).
 *
 * Uneven nodes (2+1+3, or a node of one rank) are generalised: a segment is
 * cut into L shards, L the largest node's rank count; a node of s ranks cuts
 * its segment into s blocks of whole shards (block b holds shards
 * [b*L/s, (b+1)*L/s)), so each rank owns one or more shards and runs one
 * rail all-reduce per shard it owns; rails of different shards may share a
 * rank (the one-rank node is in every rail), so each shard has its own
 * message numbers. Every shard is reduced along one rail and then copied,
 * so every rank ends with the same bits.
 *
 * Intra-node phases (a) and (c) run on the node's engine (algorithms.h,
 * struct coll_node_engine): the node's shared-memory arena when it has one
 * (arena_node.c: GX_HIER_ARENA=auto, 2+ ranks on the node), else
 * the ring of messages over the shm provider (coll_node_ring below).
 */
#include <stdlib.h>

#include "collectives/algorithms/algo.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/comm/comm_internal.h"
#include "common/log.h"

#define HIER_ALIGN 64

struct hier_layout {
    int nodes, L;
    int *member;  /* nodes x L: comm rank of (node, local index); -1 past a node's size */
};

static int layout_init(const struct gx_comm *c, struct hier_layout *h)
{
    h->nodes = c->node_count;
    h->L = 0;
    for (int m = 0; m < c->node_count; m++)
        if (c->node_size[m] > h->L)
            h->L = c->node_size[m];
    h->member = malloc((size_t)h->nodes * (size_t)h->L * sizeof(int));
    if (!h->member)
        return GX_ENOMEM;
    for (int i = 0; i < h->nodes * h->L; i++)
        h->member[i] = -1;
    for (int r = 0; r < c->size; r++)
        h->member[c->rank_node[r] * h->L + c->rank_local[r]] = r;
    return GX_OK;
}

/* First shard of block b on a node of s ranks (b = s: L). */
static int block_first_shard(int b, int s, int L)
{
    return (int)((long)b * L / s);
}

/* Local index of the rank that owns shard j after the node's reduce-scatter. */
static int shard_owner(int j, int s, int L)
{
    int b = 0;
    while (block_first_shard(b + 1, s, L) <= j)
        b++;
    return (b - 1 + s) % s;
}

/* Block boundaries (elements) of a node of s ranks in a segment of len. */
static void node_bounds(size_t *bounds, int s, int L, size_t len)
{
    for (int b = 0; b <= s; b++)
        bounds[b] = block_off(len, L, block_first_shard(b, s, L));
}

/* The ring of messages as a node engine (it numbers messages, not rounds). */
static size_t ring_no_rounds(const struct gx_comm *c, const struct coll_group *g, size_t count,
                             size_t es)
{
    (void)c, (void)g, (void)count, (void)es;
    return 0;
}

static uint64_t ring_no_reserve(struct gx_comm *c, size_t rounds)
{
    (void)c, (void)rounds;
    return 0;
}

const struct coll_node_engine coll_node_ring = {
    .name = "ring", .rounds = ring_no_rounds, .reserve = ring_no_reserve,
    .reduce_scatter = ring_rs_group, .all_gather = ring_ag_group,
};

static const struct coll_node_engine *node_engine(const struct gx_comm *c)
{
    return c->node_shm && c->local_size > 1 ? &arena_node_engine : &coll_node_ring;
}

static size_t align_up(size_t x)
{
    return (x + HIER_ALIGN - 1) / HIER_ALIGN * HIER_ALIGN;
}

/* Message numbers one segment needs: the node ring's (the largest over node
 * sizes, every node numbers alike) and per shard the rail's. */
static void segment_msgs(const struct gx_comm *c, const struct hier_layout *h, enum coll_algo rail,
                         size_t seg_len, size_t es, size_t *bounds, uint32_t *intra,
                         uint32_t *per_shard)
{
    *intra = 0;
    for (int m = 0; m < h->nodes; m++) {
        int s = c->node_size[m];
        node_bounds(bounds, s, h->L, seg_len);
        struct coll_group g = { .n = s, .bounds = bounds };
        uint32_t k = s > 1 ? ring_group_msgs(&g, seg_len, es) : 0;
        if (k > *intra)
            *intra = k;
    }
    *per_shard = hier_rail_msgs(rail, h->nodes, block_len(seg_len, h->L, 0), es);
}

/* (c) a segment's all-gather inside the node, once its rails are done
 * (`rail_done`), from arena round `round`. */
static void hier_all_gather(struct coll_op *op, const struct coll_node_engine *ne,
                            struct coll_group *gn, uint64_t round, char *rbk, size_t len,
                            int rail_done, int k, int K)
{
    int from = op->nsteps;
    gn->round = round;
    ne->all_gather(op, gn, rbk, len);
    cs_gate(op, from, rail_done);
    GX_TRACE(GX_SUB_COLL, "allreduce #%llu: hier segment %d of %d: node all-gather steps %d-%d",
             (unsigned long long)op->seq, k + 1, K, from, op->nsteps - 1);
}

int hier_allreduce_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    struct gx_comm *c = op->comm;
    size_t es = a->es, count = a->count;
    if (count == 0)
        return GX_OK;
    if (c->node_count < 2 || c->node_count == c->size)
        return ring_allreduce_build(op); /* one level only: coll_tune.c does not pick us */
    struct hier_layout h;
    if (layout_init(c, &h) != GX_OK) {
        op->build_status = GX_ENOMEM;
        return GX_OK;
    }
    int L = h.L, N = h.nodes, s = c->local_size, me_local = c->local_rank;
    enum coll_algo rail = hier_rail_algo(op->inner_algo);
    size_t *bounds = malloc((size_t)(L + 1) * sizeof(size_t));
    int *rail_ranks = malloc((size_t)N * sizeof(int));
    int rc = GX_OK;
    if (!bounds || !rail_ranks) {
        op->build_status = GX_ENOMEM;
        goto out;
    }
    /* Segments (coll_tune.c), fewer if their messages would not fit the tag
     * space. */
    int K = coll_hier_segments(count * es);
    if ((size_t)K > count)
        K = (int)count;
    uint32_t intra = 0, per_shard = 0;
    for (;; K--) {
        segment_msgs(c, &h, rail, block_len(count, K, 0), es, bounds, &intra, &per_shard);
        uint64_t total = (uint64_t)K * ((uint64_t)intra + (uint64_t)L * per_shard);
        if (total <= COLL_MSG_MAX)
            break;
        if (K == 1) { /* too many nodes for one tag space: stay flat */
            free(bounds);
            free(rail_ranks);
            free(h.member);
            return ring_allreduce_build(op);
        }
    }
    uint32_t seg_msgs = intra + (uint32_t)L * per_shard;
    /* My block of every segment: shards [j0, j1). */
    int my_blk = (me_local + 1) % s;
    int j0 = block_first_shard(my_blk, s, L), j1 = block_first_shard(my_blk + 1, s, L);

    /* Scratch for every segment's node ring and rails, carved from one;
     * the node engine's rounds. */
    const struct coll_node_engine *ne = node_engine(c);
    size_t need = 0, node_rounds = 0;
    for (int k = 0; k < K; k++) {
        size_t len = block_len(count, K, k);
        node_bounds(bounds, s, L, len);
        struct coll_group g = { .n = s, .bounds = bounds };
        need += align_up(s > 1 && ne == &coll_node_ring ? ring_group_scratch(&g, len, es) : 0);
        node_rounds += ne->rounds(c, &g, len, es);
        for (int j = j0; j < j1; j++) {
            size_t sl = block_len(len, L, j);
            struct coll_group gr = { .n = N, .me = c->node_index };
            need += align_up(hier_rail_scratch(rail, &gr, sl, es));
        }
    }
    char *scratch = cs_scratch(op, need), *next = scratch;
    if (!scratch)
        goto out;
    /* Every segment's reduce-scatter rounds, then every all-gather's. */
    uint64_t rs_round = node_rounds ? ne->reserve(c, 2 * node_rounds) : 0;
    uint64_t ag_round = rs_round + node_rounds;
    GX_TRACE(GX_SUB_COLL, "allreduce #%llu: hier intra-node engine %s (%zu rounds per phase)",
             (unsigned long long)op->seq, ne->name, node_rounds);

    /* A round-numbered node engine (the arena) gives every all-gather round
     * a number above every reduce-scatter round's, so through the arena's
     * flags a segment's all-gather waits for every segment's
     * reduce-scatter: its steps go after all of those, or the engine's step
     * window would hold a step that waits for one far further on (3+1+2 at
     * 8 MiB with 4 KiB slots: ~25000 steps; docs/scale.md). The ring of
     * messages numbers no rounds: a segment's all-gather follows its rails. */
    bool ag_last = node_rounds > 0;
    int seg_rail_done[4];
    char *seg_scratch[4];
    char *rb = a->recvbuf;
    const char *sb = a->sendbuf;
    for (int k = 0; k < K; k++) {
        size_t off = block_off(count, K, k), len = block_len(count, K, k);
        char *rbk = rb + off * es;
        node_bounds(bounds, s, L, len);
        struct coll_group gn = { .n = s, .me = me_local, .ranks = &h.member[c->node_index * L],
                                 .bounds = bounds, .msg_base = (uint32_t)k * seg_msgs,
                                 .scratch = next };
        if (s > 1 && ne == &coll_node_ring)
            next += align_up(ring_group_scratch(&gn, len, es));
        size_t seg_rounds = ne->rounds(c, &gn, len, es);
        /* (a) reduce-scatter inside the node. */
        int from = op->nsteps, rs_first = from;
        gn.round = rs_round;
        rs_round += seg_rounds;
        ne->reduce_scatter(op, &gn, sb + off * es, rbk, len);
        int rs_done = cs_join(op, from);
        /* (b) one all-reduce per shard I own, along its rail. */
        from = op->nsteps;
        int rail_first = from;
        for (int j = j0; j < j1; j++) {
            for (int m = 0; m < N; m++)
                rail_ranks[m] = h.member[m * L + shard_owner(j, c->node_size[m], L)];
            size_t so = block_off(len, L, j), sl = block_len(len, L, j);
            struct coll_group gr = { .n = N, .me = c->node_index, .ranks = rail_ranks,
                                     .msg_base = (uint32_t)k * seg_msgs + intra +
                                                 (uint32_t)j * per_shard,
                                     .avg = a->op == GX_AVG, .scratch = next };
            next += align_up(hier_rail_scratch(rail, &gr, sl, es));
            rc = hier_rail_allreduce(op, rail, &gr, rbk + so * es, sl);
            if (rc != GX_OK)
                goto out;
        }
        cs_gate(op, from, rs_done);
        int rail_done = cs_join(op, from);
        if (rail_done < 0) /* no shard of mine holds an element: wait for the node's phase */
            rail_done = rs_done;
        /* Step ranges (tests aim GX_FAULT at a phase with them). */
        GX_TRACE(GX_SUB_COLL, "allreduce #%llu: hier segment %d of %d: node reduce-scatter "
                 "steps %d-%d, rails (shards %d-%d, %s) steps %d-%d",
                 (unsigned long long)op->seq, k + 1, K, rs_first, rail_first - 1, j0, j1 - 1,
                 coll_algo_name(rail), rail_first, op->nsteps - 1);
        seg_rail_done[k] = rail_done;
        seg_scratch[k] = gn.scratch;
        if (!ag_last) {
            hier_all_gather(op, ne, &gn, ag_round, rbk, len, rail_done, k, K);
            ag_round += seg_rounds;
        }
    }
    for (int k = 0; ag_last && k < K; k++) { /* (c) after every segment's (a) and (b) */
        size_t off = block_off(count, K, k), len = block_len(count, K, k);
        node_bounds(bounds, s, L, len);
        struct coll_group gn = { .n = s, .me = me_local, .ranks = &h.member[c->node_index * L],
                                 .bounds = bounds, .msg_base = (uint32_t)k * seg_msgs,
                                 .scratch = seg_scratch[k] };
        hier_all_gather(op, ne, &gn, ag_round, rb + off * es, len, seg_rail_done[k], k, K);
        ag_round += ne->rounds(c, &gn, len, es);
    }
out:
    free(bounds);
    free(rail_ranks);
    free(h.member);
    return rc;
}

/* ---- cost and descriptor (algo.h) ------------------------------------------- */

/* Two levels: priced with the node layout (coll_hier_rail.c); never in the
 * flat model. */
static double hier_cost(const struct coll_model *m)
{
    if (m->kind != COLL_ALLREDUCE || !m->sh)
        return -1;
    return coll_tune_predict_hier(m->bytes, m->sh, m->net, NULL);
}

static bool hier_usable(const struct node_shape *sh, bool arena)
{
    (void)arena;
    return coll_tune_hier_applies(sh);
}

const struct coll_algo_desc coll_algo_hier = {
    .id = COLL_ALGO_HIER,
    .name = "hier",
    .serves = { [COLL_ALLREDUCE] = { hier_allreduce_build, 7 } },
    .cost = hier_cost,
    .two_level = true,
    .usable = hier_usable,
};
