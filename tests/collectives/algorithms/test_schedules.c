/*
 * test_schedules.c - every algorithm's schedules, built and run without a
 * transport (sched_sim.h) for 1..64 ranks: for each row of the algorithm
 * table (algorithms/algo.h) and each collective it serves, at counts that
 * give one and several pipelining chunks (GX_COLL_CHUNK=4096 here), in and
 * out of place, every rooted collective from the first and the last rank,
 * sum and average; the arena's on one node with a shared segment, hier's
 * on even, uneven and one-rank nodes with each rail algorithm, with and
 * without node segments. Each run checks that every send meets its
 * receive, every block is reduced exactly once, no step reads a buffer
 * before it is written or races a message in flight, nothing stalls, and
 * the results are the collective's.
 *
 * First the checker itself must reject broken schedules (planted below).
 * An algorithm added to the table is checked here without a change.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/algorithms/algorithms.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/engine/coll_engine.h"
#include "tests/collectives/algorithms/sched_sim.h"
#include "tests/collectives/algorithms/sched_sim_internal.h"
#include "tests/unit/check.h"

static int runs;

static void run(const struct sim_case *c)
{
    runs++;
    char what[200];
    sim_describe(c, what, sizeof(what));
    if (getenv("TEST_SCHEDULES_VERBOSE"))
        fprintf(stderr, "%s\n", what);
    int problems = sim_run(c);
    CHECK(problems == 0, "%s: %d problem(s)", what, problems);
}

static bool reducing(enum coll_kind k)
{
    return k == COLL_ALLREDUCE || k == COLL_REDUCE || k == COLL_REDUCE_SCATTER;
}

static bool rooted(enum coll_kind k)
{
    return k == COLL_BROADCAST || k == COLL_REDUCE || k == COLL_GATHER || k == COLL_SCATTER;
}

static const int rank_counts[] = { 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,
                                   15, 16, 17, 23, 31, 32, 33, 47, 63, 64 };

/* ---- broken schedules the checker must reject -------------------------------- */

/* Sends to the next rank, receives nothing. */
static int build_unmatched(struct coll_op *op)
{
    int n = op->comm->size, r = op->comm->rank;
    cs_send(op, (r + 1) % n, 0, op->a.sendbuf, op->a.count * op->a.es, -1, -1, -1);
    return GX_OK;
}

/* A ring all-reduce of one step that adds the neighbour's vector twice. */
static int build_twice(struct coll_op *op)
{
    int n = op->comm->size, r = op->comm->rank;
    size_t bytes = op->a.count * op->a.es;
    char *in = cs_scratch(op, bytes);
    int c = cs_copy(op, op->a.recvbuf, op->a.sendbuf, bytes, -1, -1, -1);
    int s = cs_send(op, (r + 1) % n, 0, op->a.sendbuf, bytes, -1, -1, -1);
    int v = cs_recv(op, (r + n - 1) % n, 0, in, bytes, -1, -1, -1);
    int d = cs_reduce(op, op->a.recvbuf, in, op->a.count, c, v, -1);
    cs_reduce(op, op->a.recvbuf, in, op->a.count, d, s, -1);
    return GX_OK;
}

/* Reads scratch nothing wrote. */
static int build_unwritten(struct coll_op *op)
{
    char *tmp = cs_scratch(op, op->a.count * op->a.es);
    cs_copy(op, op->a.recvbuf, tmp, op->a.count * op->a.es, -1, -1, -1);
    return GX_OK;
}

/* Overwrites the buffer a posted send still reads (no dependency). */
static int build_race(struct coll_op *op)
{
    int n = op->comm->size, r = op->comm->rank;
    size_t bytes = op->a.count * op->a.es;
    char *in = cs_scratch(op, bytes);
    cs_copy(op, op->a.recvbuf, op->a.sendbuf, bytes, -1, -1, -1);
    cs_send(op, (r + 1) % n, 0, op->a.recvbuf, bytes, -1, -1, -1);
    int v = cs_recv(op, (r + n - 1) % n, 0, in, bytes, -1, -1, -1);
    cs_reduce(op, op->a.recvbuf, in, op->a.count, v, -1, -1);
    return GX_OK;
}

/* Each rank waits for its send before it posts its receive: with no
 * buffering in between, nobody moves. */
static int build_stall(struct coll_op *op)
{
    int n = op->comm->size, r = op->comm->rank;
    size_t bytes = op->a.count * op->a.es;
    char *in = cs_scratch(op, bytes);
    int s = cs_send(op, (r + 1) % n, 0, op->a.sendbuf, bytes, -1, -1, -1);
    cs_recv(op, (r + n - 1) % n, 0, in, bytes, s, -1, -1);
    return GX_OK;
}

/* Copies the input and stops: the result misses the other ranks. */
static int build_short(struct coll_op *op)
{
    cs_copy(op, op->a.recvbuf, op->a.sendbuf, op->a.count * op->a.es, -1, -1, -1);
    return GX_OK;
}

static void checker_rejects(void)
{
    static const struct {
        const char *what;
        coll_build_fn build;
    } broken[] = {
        { "a send without a receive", build_unmatched },
        { "a contribution reduced twice", build_twice },
        { "a read of unwritten scratch", build_unwritten },
        { "a write racing a posted send", build_race },
        { "sends waiting for sends", build_stall },
        { "a result missing ranks", build_short },
    };
    for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
        struct sim_case c = { .algo = COLL_ALGO_RING, .kind = COLL_ALLREDUCE, .n = 3,
                              .count = 5, .op = GX_SUM, .build = broken[i].build };
        fprintf(stderr, "(planted: %s; the FAIL lines below are expected)\n", broken[i].what);
        CHECK(sim_run(&c) > 0, "the checker passed %s", broken[i].what);
    }
}

/* ---- the table's algorithms ----------------------------------------------------- */

static void flat_cases(enum coll_algo a, enum coll_kind k)
{
    for (size_t ni = 0; ni < sizeof(rank_counts) / sizeof(rank_counts[0]); ni++) {
        int n = rank_counts[ni];
        if (a == COLL_ALGO_SHM && n < 2)
            continue; /* no segment for one rank: never chosen there (usable()) */
        static const size_t small[] = { 0, 1, 7, 300 }, large[] = { 1, 300 };
        const size_t *counts = n <= 16 ? small : large;
        int ncounts = n <= 16 ? 4 : 2;
        for (int ci = 0; ci < ncounts; ci++)
            for (int ip = 0; ip < 2; ip++)
                for (int avg = 0; avg < (reducing(k) ? 2 : 1); avg++)
                    for (int rt = 0; rt < (rooted(k) && n > 1 ? 2 : 1); rt++) {
                        struct sim_case c = { .algo = a, .kind = k, .n = n,
                                              .count = counts[ci], .root = rt ? n - 1 : 0,
                                              .op = avg ? GX_AVG : GX_SUM, .in_place = ip };
                        if (a == COLL_ALGO_SHM) {
                            c.arena = true;
                            /* many rounds; across 17+ ranks at least 16 elements a rank */
                            c.slot_bytes = n > 16 ? 16384 : ip ? 256 : 2048;
                        }
                        run(&c);
                    }
    }
}

/* Nodes for n ranks: 0 even halves, 1 three uneven, 2 a one-rank node first. */
static int layout(int n, int kind, int *sizes)
{
    if (kind == 0) {
        sizes[0] = n / 2;
        sizes[1] = n - n / 2;
        return 2;
    }
    if (kind == 1 && n >= 3) {
        sizes[0] = n / 3 + 1;
        sizes[1] = n / 3 > 1 ? n / 3 - 1 : 1;
        sizes[2] = n - sizes[0] - sizes[1];
        return sizes[2] > 0 ? 3 : 0;
    }
    if (kind == 2 && n >= 3) {
        sizes[0] = 1;
        sizes[1] = n - 1;
        return 2;
    }
    return 0;
}

static void hier_cases(void)
{
    static const int ns[] = { 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 24, 33, 64 };
    static const enum coll_algo rails[] = { COLL_ALGO_RING, COLL_ALGO_RHD, COLL_ALGO_TREE,
                                            COLL_ALGO_DBTREE };
    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++)
        for (int lk = 0; lk < 3; lk++) {
            struct sim_case c = { .algo = COLL_ALGO_HIER, .kind = COLL_ALLREDUCE, .n = ns[ni] };
            c.nodes = layout(c.n, lk, c.node_size);
            if (c.nodes < 2)
                continue;
            for (int ri = 0; ri < 4; ri++)
                for (int ar = 0; ar < 2; ar++)
                    for (int v = 0; v < 3; v++) {
                        static const size_t counts[] = { 7, 300, 5000 };
                        if (v == 2 && c.n > 8)
                            continue;
                        c.rail = rails[ri];
                        c.arena = ar;
                        c.slot_bytes = 4096;
                        c.count = counts[v];
                        c.op = v == 1 ? GX_AVG : GX_SUM; /* averaged by the rails */
                        c.in_place = v == 1;
                        run(&c);
                    }
        }
}

/* hier on uneven nodes with many chunks: 3+1+2 with the node arena, ring
 * rails, 64 MiB's chunk count (64 slots a rank at 4 KiB here) and 16 times
 * as many. The arena numbers every all-gather round after every
 * reduce-scatter round, so a segment's all-gather waits for every
 * segment's reduce-scatter; while the builder put its steps right after
 * the segment's rails, a rank's flag wait needed one of its own steps far
 * further on: every rank stalled with a step window of 1024 at 64 slots
 * (netns nodes at 64 MiB, GX_TIMEOUT after 600 s), and with 4096 at 256
 * (256 MiB) and at 2048 slots the engine's look past its window took one
 * 100 ms wait per round. Now the all-gathers come after every segment's
 * reduce-scatter and rails: no rank ever gets stuck in its window. */
static void hier_many_chunks(void)
{
    for (int mul = 1; mul <= 16; mul *= 4) {
        int far = 0;
        struct sim_case c = { .algo = COLL_ALGO_HIER, .kind = COLL_ALLREDUCE, .n = 6,
                              .nodes = 3, .node_size = { 3, 1, 2 }, .arena = true,
                              .slot_bytes = 4096, .rail = COLL_ALGO_RING,
                              .count = (size_t)mul * 256 * 4096 / 16, .op = GX_SUM,
                              .far_rounds = &far };
        run(&c);
        CHECK(far == 0, "hier 3+1+2 at %d slots a rank: every rank stuck in its step window "
              "%d time(s)", 64 * mul, far);
    }
}

/* A step a peer waits for past the step window: rank 0 receives, then
 * runs STEP_WINDOW + 8 steps that wait for nothing, then sends what rank
 * 1's send (the one rank 0 receives) waits for. Every rank is stuck in its
 * window; the engine, and the simulator, then run the steps past it. */
static int build_far_send(struct coll_op *op)
{
    int r = op->comm->rank;
    size_t bytes = op->a.count * op->a.es;
    char *in = cs_scratch(op, bytes);
    int c = cs_copy(op, op->a.recvbuf, op->a.sendbuf, bytes, -1, -1, -1);
    int v;
    if (r == 0) {
        v = cs_recv(op, 1, 0, in, bytes, -1, -1, -1);
        for (int i = 0; i < STEP_WINDOW + 8; i++)
            cs_nop(op, -1, -1, -1);
        cs_send(op, 1, 1, op->a.sendbuf, bytes, -1, -1, -1);
    } else {
        v = cs_recv(op, 0, 1, in, bytes, -1, -1, -1);
        cs_send(op, 0, 0, op->a.sendbuf, bytes, v, -1, -1);
    }
    cs_reduce(op, op->a.recvbuf, in, op->a.count, v, c, -1);
    return GX_OK;
}

static void past_the_window(void)
{
    int far = 0;
    struct sim_case c = { .algo = COLL_ALGO_RING, .kind = COLL_ALLREDUCE, .n = 2, .count = 5,
                          .op = GX_SUM, .build = build_far_send, .far_rounds = &far };
    CHECK(sim_run(&c) == 0, "a send past rank 0's step window: the simulation failed");
    CHECK(far > 0, "a send past rank 0's step window ran without a look past it (%d)", far);
}

/* The tree's reduction keeps its children at most 4 chunks ahead
 * (coll_tree.c, TREE_AHEAD): a receive of chunk c >= 4 from a child waits
 * for chunk c - 4 to have gone to the parent (on the root: to be reduced),
 * the first 4 wait for nothing. Without it, a child on a free link ran
 * ahead and took the root's link from a slower one (docs/scale.md,
 * "Calibration"). */
static void tree_children_bounded(void)
{
    struct sim_case c = { .algo = COLL_ALGO_TREE, .kind = COLL_REDUCE, .n = 8,
                          .count = 16 * 256, .root = 0, .op = GX_SUM };
    struct sim *s = sim_new(&c);
    CHECK(s != NULL, "tree reduce n=8: no simulation");
    if (!s)
        return;
    int bounded = 0;
    if (sim_setup(s) == 0) {
        for (int r = 0; r < c.n; r++) {
            const struct coll_op *op = &s->r[r].op;
            for (int i = 0; i < op->nsteps; i++) {
                const struct coll_step *st = &op->steps[i];
                if (st->kind != CS_RECV)
                    continue;
                int d = st->dep[0];
                if (st->msg < 4) {
                    CHECK(d < 0, "tree reduce rank %d: chunk %u from rank %d waits for step "
                          "%d", r, st->msg, st->peer, d);
                    continue;
                }
                const struct coll_step *w = d >= 0 ? &op->steps[d] : NULL;
                bool ok = w && (r == 0 ? w->kind != CS_SEND && w->kind != CS_RECV
                                       : w->kind == CS_SEND && w->msg == st->msg - 4);
                CHECK(ok, "tree reduce rank %d: chunk %u from rank %d does not wait for chunk "
                      "%u to be passed on (step %d)", r, st->msg, st->peer, st->msg - 4, d);
                bounded += ok;
            }
        }
    } else {
        CHECK(0, "tree reduce n=8: set-up failed");
    }
    /* 7 children in all, 12 chunks each past the first 4. */
    CHECK(bounded == 7 * 12, "tree reduce n=8: %d bounded receives, expected 84", bounded);
    sim_teardown(s);
    free(s);
}

int main(void)
{
    /* Chunks of 256 elements: a few hundred elements already pipeline. */
    setenv("GX_COLL_CHUNK", "4096", 1);
    checker_rejects();
    for (int a = 1; a < COLL_ALGO_COUNT; a++) {
        const struct coll_algo_desc *d = coll_algo_desc((enum coll_algo)a);
        CHECK(d != NULL && (int)d->id == a, "table row %d", a);
        if (!d || a == COLL_ALGO_HIER)
            continue;
        for (int k = 0; k < COLL_KIND_COUNT; k++)
            if (d->serves[k].build)
                flat_cases((enum coll_algo)a, (enum coll_kind)k);
    }
    hier_cases();
    hier_many_chunks();
    past_the_window();
    tree_children_bounded();
    printf("%d schedules run\n", runs);
    CHECK_DONE("test_schedules");
}
