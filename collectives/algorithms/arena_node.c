/*
 * arena_node.c - the node's shared-memory segment (gx_comm.node_shm, made
 * per node in arena/node_shm.c) as the intra-node engine of the
 * hierarchical all-reduce (algorithms.h, struct coll_node_engine).
 *
 * Both phases run over the node group (member i = local rank i = arena
 * index i) with its block bounds, in rounds of the arena's slots:
 *  - reduce-scatter: in round k every member stages piece k of each block
 *    the others reduce (block j's piece in sub-slot j of its slot), raises
 *    in[b], and reduces piece k of its own block (me+1) mod n from its input
 *    and sub-slot (me+1) mod n of every other slot into recvbuf;
 *  - all-gather: every member stages piece k of its block in its slot,
 *    raises in[b], and copies piece k of every other member's block out.
 * A block is reduced by one rank and copied to the others, so every rank
 * ends with the same bits. Pieces: each block cut into `rounds` pieces of at
 * most slot / n elements, rounds the same for both phases. The rounds are
 * numbered from g->round, handed out by node_reserve in issue order
 * (coll_hier.c reserves all reduce-scatters' rounds, then all all-gathers').
 * Nothing here averages (the rails do).
 */
#include "collectives/algorithms/algorithms.h"
#include "collectives/arena/node_shm.h"
#include "collectives/comm/comm_internal.h"
#include "common/log.h"

/* The step of a phase's first raised in[] flag (tests aim GX_FAULT's kill at
 * it: a rank dying inside the arena phase). */
static void trace_first_flag(const struct coll_op *op, const char *phase, int wait_step)
{
    GX_TRACE(GX_SUB_COLL, "allreduce #%llu: hier arena %s: first flag step %d",
             (unsigned long long)op->seq, phase, wait_step - 1);
}

/* Elements of one block a round carries (a sub-slot). */
static size_t per_round(const struct node_shm *ar, const struct coll_group *g, size_t es)
{
    size_t per = ar->slot_bytes / ((size_t)g->n * es);
    return per ? per : 1; /* node_shm.c makes no arena this small */
}

static size_t node_rounds(const struct gx_comm *c, const struct coll_group *g, size_t count,
                          size_t es)
{
    size_t most = 0;
    for (int j = 0; j < g->n; j++) {
        size_t l = coll_group_blk_len(g, count, j);
        if (l > most)
            most = l;
    }
    size_t per = per_round(c->node_shm, g, es);
    return (most + per - 1) / per;
}

static uint64_t node_reserve(struct gx_comm *c, size_t rounds)
{
    size_t got;
    return node_shm_take_rounds(c->node_shm, rounds, 1, &got);
}

/* Piece k of block j (elements, from the segment's start). */
static void piece(const struct coll_group *g, size_t count, int j, size_t rounds, size_t k,
                  size_t *off, size_t *len)
{
    size_t b0 = coll_group_blk_off(g, count, j), bl = coll_group_blk_len(g, count, j);
    *off = b0 + block_off(bl, (int)rounds, (int)k);
    *len = block_len(bl, (int)rounds, (int)k);
}

static int node_rs(struct coll_op *op, const struct coll_group *g, const void *sendbuf,
                   void *recvbuf, size_t count)
{
    struct node_shm *ar = op->comm->node_shm;
    size_t es = op->a.es, rounds = node_rounds(op->comm, g, count, es);
    size_t sub = per_round(ar, g, es) * es;
    int n = g->n, r = g->me, mb = (r + 1) % n;
    const char *sb = sendbuf;
    char *rb = recvbuf;
    for (size_t k = 0; k < rounds && op->build_status == GX_OK; k++) { /* stop at the cap */
        struct arena_round rd = arena_round_begin(op, ar, g->round + k);
        char *mine = node_shm_slot(ar, r, rd.b);
        size_t po, pl;
        int last = rd.slot_free;
        for (int j = 0; j < n; j++) {
            piece(g, count, j, rounds, k, &po, &pl);
            if (j != mb && pl)
                last = cs_copy(op, mine + (size_t)j * sub, sb + po * es, pl * es, last, -1, -1);
        }
        last = arena_all_staged(op, ar, &rd, last);
        if (k == 0)
            trace_first_flag(op, "reduce-scatter", last);
        piece(g, count, mb, rounds, k, &po, &pl);
        if (pl) {
            last = cs_reduce3(op, rb + po * es, sb + po * es,
                              node_shm_slot(ar, (r + 1) % n, rd.b) + (size_t)mb * sub, pl, last, -1,
                              -1);
            for (int j = 2; j < n; j++)
                last = cs_reduce(op, rb + po * es,
                                 node_shm_slot(ar, (r + j) % n, rd.b) + (size_t)mb * sub, pl, last,
                                 -1, -1);
        }
        cs_flag_set(op, &ar->ctl[r].done[rd.b], rd.v, last, -1, -1);
    }
    return GX_OK;
}

static int node_ag(struct coll_op *op, const struct coll_group *g, void *recvbuf, size_t count)
{
    struct node_shm *ar = op->comm->node_shm;
    size_t es = op->a.es, rounds = node_rounds(op->comm, g, count, es);
    int n = g->n, r = g->me, mb = (r + 1) % n;
    char *rb = recvbuf;
    for (size_t k = 0; k < rounds && op->build_status == GX_OK; k++) { /* stop at the cap */
        struct arena_round rd = arena_round_begin(op, ar, g->round + k);
        size_t po, pl;
        piece(g, count, mb, rounds, k, &po, &pl);
        int last = rd.slot_free;
        if (pl)
            last = cs_copy(op, node_shm_slot(ar, r, rd.b), rb + po * es, pl * es, last, -1, -1);
        last = arena_all_staged(op, ar, &rd, last);
        if (k == 0)
            trace_first_flag(op, "all-gather", last);
        for (int j = 1; j < n; j++) {
            int p = (r + j) % n; /* member p holds block p+1 */
            piece(g, count, (p + 1) % n, rounds, k, &po, &pl);
            if (pl)
                last = cs_copy(op, rb + po * es, node_shm_slot(ar, p, rd.b), pl * es, last, -1, -1);
        }
        cs_flag_set(op, &ar->ctl[r].done[rd.b], rd.v, last, -1, -1);
    }
    return GX_OK;
}

const struct coll_node_engine arena_node_engine = {
    .name = "arena",
    .rounds = node_rounds,
    .reserve = node_reserve,
    .reduce_scatter = node_rs,
    .all_gather = node_ag,
};
