/*
 * arena_allreduce.c - all-reduce in the node's shared-memory segment
 * (arena/node_shm.h), and the round helpers every arena algorithm shares.
 *
 * The vector goes through the arena in rounds of at most one slot. In each
 * round every rank copies its piece of the input into its slot and raises
 * in[b]; then
 *  - small rounds (ARENA_SMALL_BYTES or fewer): every rank reduces the whole
 *    piece from its own and all other slots into its output, raises done[b]
 *    - one synchronisation per round;
 *  - larger rounds: rank r stages all but block r of its piece (nobody else
 *    reads that block), reduces block r from its input and the other slots
 *    into its output and copies it into its own slot, raises red[b], then
 *    copies the other ranks' reduced blocks out of their slots into its
 *    output, raises done[b].
 * A slot is refilled two rounds later, once every rank's done[b] says it has
 * finished reading it; so round k+1 is staged while round k is reduced.
 * Each reduced block is computed by one rank and copied to the others, so
 * every rank holds the same bits. The caller's output is written only after
 * the round's input is staged (in place, block r is reduced into itself),
 * so in-place calls need no extra copy.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "collectives/algorithms/algo.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/arena/node_shm.h"
#include "collectives/comm/comm_internal.h"

#define ARENA_SMALL_BYTES (16u << 10)

/* Every block is reduced by one rank only, so the operand order need not be
 * the same on all ranks. */
int arena_reduce_all(struct coll_op *op, const struct node_shm *ar, unsigned b, size_t off,
                     const void *own, void *dst, size_t count, int dep)
{
    int n = ar->nranks, r = ar->rank;
    int s = cs_reduce3(op, dst, own, node_shm_slot(ar, (r + 1) % n, b) + off, count, dep, -1, -1);
    for (int j = 2; j < n; j++)
        s = cs_reduce(op, dst, node_shm_slot(ar, (r + j) % n, b) + off, count, s, -1, -1);
    if (op->a.op == GX_AVG)
        s = cs_avg(op, dst, count, s, -1, -1);
    return s;
}

struct arena_round arena_round_begin(struct coll_op *op, struct node_shm *a, uint64_t g)
{
    struct arena_round rd = { .v = g + 1, .b = (unsigned)(g % NODE_SHM_NBUF), .slot_free = -1 };
    if (g >= NODE_SHM_NBUF)
        rd.slot_free = cs_flag_wait(op, &a->ctl[0].done[rd.b], sizeof(struct node_shm_ctl),
                                    g + 1 - NODE_SHM_NBUF, -1, -1, -1);
    return rd;
}

int arena_all_staged(struct coll_op *op, struct node_shm *a, const struct arena_round *rd,
                     int dep)
{
    int set = cs_flag_set(op, &a->ctl[a->rank].in[rd->b], rd->v, dep, -1, -1);
    return cs_flag_wait(op, &a->ctl[0].in[rd->b], sizeof(struct node_shm_ctl), rd->v, set, -1,
                        -1);
}

int arena_allreduce_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    struct node_shm *ar = op->comm->shm;
    if (!ar || ar->nranks < 2 || a->count == 0)
        return ar || a->count == 0 ? GX_OK : GX_EINVAL;
    int n = ar->nranks, r = ar->rank;
    size_t es = a->es, count = a->count;
    size_t rounds;
    uint64_t g0 = node_shm_take_rounds(ar, count, ar->slot_bytes / es, &rounds);
    const size_t stride = sizeof(struct node_shm_ctl);
    struct node_shm_ctl *ctl = ar->ctl;
    const char *sb = a->sendbuf;
    char *rb = a->recvbuf;

    for (size_t k = 0; k < rounds && op->build_status == GX_OK; k++) { /* stop at the cap */
        struct arena_round rd = arena_round_begin(op, ar, g0 + k);
        uint64_t v = rd.v;
        unsigned b = rd.b;
        int free_slot = rd.slot_free;
        size_t off = block_off(count, (int)rounds, (int)k), len = block_len(count, (int)rounds,
                                                                           (int)k);
        char *mine = node_shm_slot(ar, r, b);
        bool small = len * es <= ARENA_SMALL_BYTES || len < (size_t)n;
        size_t mo = block_off(len, n, r), ml = block_len(len, n, r);
        /* Stage what the others read: everything for small rounds, else
         * all but block r (this rank reduces that one from its input). */
        int staged;
        if (small) {
            staged = cs_copy(op, mine, sb + off * es, len * es, free_slot, -1, -1);
        } else {
            staged = cs_copy(op, mine, sb + off * es, mo * es, free_slot, -1, -1);
            size_t tail = mo + ml;
            staged = cs_copy(op, mine + tail * es, sb + (off + tail) * es, (len - tail) * es,
                             staged, -1, -1);
        }
        int all_in = arena_all_staged(op, ar, &rd, staged);
        if (small) {
            int red = arena_reduce_all(op, ar, b, 0, mine, rb + off * es, len, all_in);
            cs_flag_set(op, &ctl[r].done[b], v, red, -1, -1);
            continue;
        }
        int red = arena_reduce_all(op, ar, b, mo * es, sb + (off + mo) * es, rb + (off + mo) * es, ml,
                             all_in);
        red = cs_copy(op, mine + mo * es, rb + (off + mo) * es, ml * es, red, -1, -1);
        red = cs_flag_set(op, &ctl[r].red[b], v, red, -1, -1);
        int last = cs_flag_wait(op, &ctl[0].red[b], stride, v, red, -1, -1);
        for (int j = 1; j < n; j++) {
            int p = (r + j) % n; /* start after ourselves: ranks spread over the slots */
            size_t po = block_off(len, n, p), pl = block_len(len, n, p);
            last = cs_copy(op, rb + (off + po) * es, node_shm_slot(ar, p, b) + po * es, pl * es, last,
                           -1, -1);
        }
        cs_flag_set(op, &ctl[r].done[b], v, last, -1, -1);
    }
    return GX_OK;
}

/* ---- cost and descriptor (algo.h) ------------------------------------------- */

/* The shared-memory arena: a flag handoff between ranks (when there are
 * more ranks than CPUs, a handoff waits for the scheduler), and
 * memcpy into and out of the arena (cache-resident slots). Measured with
 * gx-perf on the development machine, 2 and 4 ranks on 2 CPUs. */
static const double shm_handoff = 1.5e-6;
/* With more ranks than CPUs: a small round waits for every rank to be
 * scheduled in turn; in large rounds the waits overlap others' copying. */
static const double shm_handoff_oversubscribed_small = 30e-6;
static const double shm_handoff_oversubscribed_large = 8e-6;
static const double shm_copy_beta = 1.0 / 8.0e9;
#define SHM_ROUND_BYTES (256u << 10) /* GX_COLL_SHM_SLOT's default */
#define SHM_SMALL_ROUND ARENA_SMALL_BYTES

/* Read once (sysconf reads /sys); communicators in several threads may race
 * to fill it in, with the same value. */
static long online_cpus(void)
{
    static long cached_cpus;
    long cpus = __atomic_load_n(&cached_cpus, __ATOMIC_RELAXED);
    if (!cpus) {
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
        __atomic_store_n(&cached_cpus, cpus, __ATOMIC_RELAXED);
    }
    return cpus;
}

/* Broadcast, all-gather, reduce-scatter in the arena (arena_moves.c)
 * for S bytes per block: one handoff per round of `per_slot` blocks, `copies`
 * block copies and `reductions` block reductions per rank. */
double arena_moves_time(double S, int n, int per_slot, double copies, double reductions)
{
    long cpus = online_cpus();
    double per_round = (double)SHM_ROUND_BYTES / per_slot;
    double rounds = S > per_round ? ceil(S / per_round) : 1;
    double handoff = n > cpus ? (S / rounds <= SHM_SMALL_ROUND ? shm_handoff_oversubscribed_small
                                                              : shm_handoff_oversubscribed_large)
                              : shm_handoff;
    return rounds * handoff + copies * S * shm_copy_beta + reductions * S * coll_tune_gamma();
}

static double shm_allreduce_time(double S, int n)
{
    long cpus = online_cpus();
    double rounds = S > SHM_ROUND_BYTES ? ceil(S / SHM_ROUND_BYTES) : 1, piece = S / rounds;
    bool over = n > cpus;
    if (piece <= SHM_SMALL_ROUND) /* stage all; every rank reduces everything */
        return rounds * (over ? shm_handoff_oversubscribed_small : shm_handoff) +
               S * shm_copy_beta + S * (n - 1) * coll_tune_gamma();
    double handoff = over ? shm_handoff_oversubscribed_large : shm_handoff;
    /* stage (n-1)/n, copy back 1/n, copy out (n-1)/n; reduce one block */
    return rounds * 2 * handoff + S * shm_copy_beta * (2.0 * n - 1) / n +
           S * (n - 1) / n * coll_tune_gamma();
}

static double arena_cost(const struct coll_model *m)
{
    int n = m->n;
    double S = m->S;
    if (m->nodes > 1) /* only inside one node */
        return -1;
    switch (m->kind) {
    case COLL_ALLREDUCE:
        return shm_allreduce_time(S, n);
    case COLL_BROADCAST:
        return arena_moves_time(S, n, 1, 2, 0);
    case COLL_ALLGATHER:
        return arena_moves_time(S, n, 1, n, 0);
    case COLL_REDUCE_SCATTER:
        return arena_moves_time(S, n, n, n - 1, n - 1);
    default:
        return -1;
    }
}

/* Only where the communicator has a one-node segment (gx_comm.shm). */
static bool arena_usable(const struct node_shape *sh, bool arena)
{
    (void)sh;
    return arena;
}

const struct coll_algo_desc coll_algo_shm = {
    .id = COLL_ALGO_SHM,
    .name = "shm",
    .serves = {
        [COLL_ALLREDUCE] = { arena_allreduce_build, 6 },
        [COLL_BROADCAST] = { arena_bcast_build, 3 },
        [COLL_ALLGATHER] = { arena_allgather_build, 2 },
        [COLL_REDUCE_SCATTER] = { arena_reduce_scatter_build, 2 },
    },
    .cost = arena_cost,
    .usable = arena_usable,
};
