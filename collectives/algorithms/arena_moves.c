/*
 * arena_moves.c - broadcast, all-gather and reduce-scatter in the node's
 * shared-memory segment (arena/node_shm.h), with the rounds, slots and
 * counters of the all-reduce (arena_allreduce.c):
 *  - broadcast: the root stages a piece of its buffer in its slot and
 *    raises in[b]; every other rank waits for the root's counter alone and
 *    copies the piece out;
 *  - all-gather: every rank stages a piece of its block, raises in[b], and
 *    copies the same piece of every other rank's block out of its slot;
 *  - reduce-scatter: every rank stages the same piece of each block the
 *    others reduce (block j's piece in sub-slot j), raises in[b], and reduces
 *    its own block's piece from its input and sub-slot r of every slot.
 * Each round ends with done[b], which the round two later waits for on every
 * rank before it refills slot b.
 */
#include <string.h>

#include "collectives/algorithms/algorithms.h"
#include "collectives/arena/node_shm.h"
#include "collectives/comm/comm_internal.h"

int arena_bcast_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    struct node_shm *ar = op->comm->shm;
    int r = ar->rank, root = a->root;
    size_t es = a->es, count = a->count;
    if (count == 0)
        return GX_OK;
    size_t rounds;
    uint64_t g0 = node_shm_take_rounds(ar, count, ar->slot_bytes / es, &rounds);
    const char *sb = a->sendbuf;
    char *rb = a->recvbuf;
    if (r == root && sb != rb)
        cs_copy(op, rb, sb, count * es, -1, -1, -1);
    for (size_t k = 0; k < rounds && op->build_status == GX_OK; k++) { /* stop at the cap */
        struct arena_round rd = arena_round_begin(op, ar, g0 + k);
        size_t off = block_off(count, (int)rounds, (int)k) * es;
        size_t len = block_len(count, (int)rounds, (int)k) * es;
        char *root_slot = node_shm_slot(ar, root, rd.b);
        int last;
        if (r == root) {
            last = cs_copy(op, root_slot, sb + off, len, rd.slot_free, -1, -1);
            last = cs_flag_set(op, &ar->ctl[r].in[rd.b], rd.v, last, -1, -1);
        } else {
            last = cs_flag_wait_one(op, &ar->ctl[root].in[rd.b], root, rd.v, rd.slot_free, -1,
                                    -1);
            last = cs_copy(op, rb + off, root_slot, len, last, -1, -1);
        }
        cs_flag_set(op, &ar->ctl[r].done[rd.b], rd.v, last, -1, -1);
    }
    return GX_OK;
}

int arena_allgather_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    struct node_shm *ar = op->comm->shm;
    int n = ar->nranks, r = ar->rank;
    size_t es = a->es, count = a->count, block = count * es;
    if (count == 0)
        return GX_OK;
    size_t rounds;
    uint64_t g0 = node_shm_take_rounds(ar, count, ar->slot_bytes / es, &rounds);
    const char *sb = a->sendbuf;
    char *rb = a->recvbuf;
    /* Our own block goes straight across (nothing to do in place). */
    cs_copy(op, rb + (size_t)r * block, sb, block, -1, -1, -1);
    for (size_t k = 0; k < rounds && op->build_status == GX_OK; k++) { /* stop at the cap */
        struct arena_round rd = arena_round_begin(op, ar, g0 + k);
        size_t off = block_off(count, (int)rounds, (int)k) * es;
        size_t len = block_len(count, (int)rounds, (int)k) * es;
        int last = cs_copy(op, node_shm_slot(ar, r, rd.b), sb + off, len, rd.slot_free, -1, -1);
        last = arena_all_staged(op, ar, &rd, last);
        for (int j = 1; j < n; j++) {
            int p = (r + j) % n;
            last = cs_copy(op, rb + (size_t)p * block + off, node_shm_slot(ar, p, rd.b), len, last, -1,
                           -1);
        }
        cs_flag_set(op, &ar->ctl[r].done[rd.b], rd.v, last, -1, -1);
    }
    return GX_OK;
}

int arena_reduce_scatter_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    struct node_shm *ar = op->comm->shm;
    int n = ar->nranks, r = ar->rank;
    size_t es = a->es, count = a->count, block = count * es;
    if (count == 0)
        return GX_OK;
    /* A round stages the same piece of all n blocks: n sub-slots. */
    size_t per_round = ar->slot_bytes / ((size_t)n * es);
    if (per_round == 0) /* a slot smaller than one element per rank */
        return ring_reduce_scatter_build(op);
    size_t rounds, sub = per_round * es;
    uint64_t g0 = node_shm_take_rounds(ar, count, per_round, &rounds);
    const char *sb = a->sendbuf;
    char *rb = a->recvbuf;
    for (size_t k = 0; k < rounds && op->build_status == GX_OK; k++) { /* stop at the cap */
        struct arena_round rd = arena_round_begin(op, ar, g0 + k);
        size_t eoff = block_off(count, (int)rounds, (int)k);
        size_t elen = block_len(count, (int)rounds, (int)k);
        char *mine = node_shm_slot(ar, r, rd.b);
        int last = rd.slot_free;
        for (int j = 0; j < n; j++)
            if (j != r)
                last = cs_copy(op, mine + (size_t)j * sub, sb + (size_t)j * block + eoff * es,
                               elen * es, last, -1, -1);
        last = arena_all_staged(op, ar, &rd, last);
        /* Own block's piece from the input and sub-slot r of the others (in place too). */
        last = arena_reduce_all(op, ar, rd.b, (size_t)r * sub, sb + (size_t)r * block + eoff * es,
                              rb + eoff * es, elen, last);
        cs_flag_set(op, &ar->ctl[r].done[rd.b], rd.v, last, -1, -1);
    }
    return GX_OK;
}
