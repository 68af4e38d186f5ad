/* Unit test of the schedule room (collectives/schedule/), one process, no
 * transport: the cs_* builder (steps, dependencies, the step cap, message
 * numbers past the tag space, gating and joining composed schedules,
 * scratch), chunking (GX_COLL_CHUNK) and segment sizing, the scratch pool,
 * the collectives' names. */
#include <stdlib.h>
#include <string.h>

#include "collectives/schedule/schedule.h"
#include "tests/unit/check.h"

static void op_init(struct coll_op *op, struct coll_scratch_pool *pool)
{
    memset(op, 0, sizeof(*op));
    op->pool = pool;
    op->desc_recv_step = -1;
}

static void op_fini(struct coll_op *op)
{
    free(op->steps);
    if (op->scratch)
        coll_scratch_give(op->pool, op->scratch, op->scratch_size);
}

static void builder(void)
{
    struct coll_scratch_pool pool;
    coll_scratch_pool_init(&pool);
    struct coll_op op;
    op_init(&op, &pool);
    char a[64], b[64], c[64];
    uint64_t flag = 0;
    int s0 = cs_send(&op, 3, 7, a, 64, -1, -1, -1);
    int s1 = cs_recv(&op, 2, 7, b, 64, -1, -1, -1);
    int s2 = cs_reduce(&op, b, a, 16, s1, -1, -1);
    int s3 = cs_reduce3(&op, c, a, b, 16, s0, s2, -1);
    int s4 = cs_copy(&op, a, c, 64, s3, -1, -1);
    int s5 = cs_avg(&op, a, 16, s4, -1, -1);
    int s6 = cs_flag_set(&op, &flag, 5, s5, -1, -1);
    int s7 = cs_flag_wait_one(&op, &flag, 1, 5, s6, -1, -1);
    CHECK(op.nsteps == 8 && s0 == 0 && s7 == 7, "8 steps numbered in order (%d)", op.nsteps);
    const struct coll_step *st = op.steps;
    CHECK(st[0].kind == CS_SEND && st[0].peer == 3 && st[0].msg == 7 && st[0].src == a &&
          st[0].len == 64, "send step");
    CHECK(st[1].kind == CS_RECV && st[1].peer == 2 && st[1].dst == b, "receive step");
    CHECK(st[2].kind == CS_REDUCE && st[2].dst == b && st[2].src == a && st[2].len == 16 &&
          st[2].dep[0] == s1 && st[2].dep[1] == -1, "reduce step and its dependency");
    CHECK(st[3].kind == CS_REDUCE3 && st[3].src2 == b && st[3].dep[0] == s0 &&
          st[3].dep[1] == s2, "reduce3 step with two dependencies");
    CHECK(st[5].kind == CS_AVG && st[6].kind == CS_FLAG_SET && st[6].len == 5,
          "avg and flag steps");
    CHECK(st[7].kind == CS_FLAG_WAIT && st[7].peer == 1 && st[7].msg == 0 && st[7].len == 5,
          "a one-rank flag wait has stride 0 and names the rank");
    for (int i = 0; i < op.nsteps; i++)
        CHECK(st[i].state == 0 && !st[i].failed, "step %d starts waiting, not failed", i);
    CHECK(op.build_status == GX_OK, "no build failure");
    /* The descriptor's message number is allowed; past the tag space is not. */
    cs_send(&op, 1, UINT32_MAX, a, 8, -1, -1, -1);
    CHECK(op.build_status == GX_OK, "UINT32_MAX (the descriptor) is a valid message number");
    cs_recv(&op, 1, COLL_MSG_MAX + 1, a, 8, -1, -1, -1);
    CHECK(op.build_status == GX_EUNSUPPORTED, "a message number past COLL_MSG_MAX fails the build");
    op_fini(&op);

    /* Composing: gate the steps without dependencies, join the leaves. */
    op_init(&op, &pool);
    int first = cs_nop(&op, -1, -1, -1);
    int from = op.nsteps;
    int x = cs_copy(&op, a, b, 1, -1, -1, -1);
    int y = cs_copy(&op, b, c, 1, x, -1, -1);
    int z = cs_copy(&op, c, a, 1, -1, -1, -1);
    int w = cs_copy(&op, c, a, 1, -1, -1, -1);
    cs_gate(&op, from, first);
    CHECK(op.steps[x].dep[0] == first && op.steps[z].dep[0] == first &&
          op.steps[w].dep[0] == first && op.steps[y].dep[0] == x,
          "cs_gate: every step without a dependency waits for the gate, the others keep theirs");
    int join = cs_join(&op, from);
    /* The join must (transitively) depend on every step from `from` on. */
    bool reached[16] = { false };
    int stack[16], top = 0;
    stack[top++] = join;
    while (top) {
        int i = stack[--top];
        if (i < 0 || reached[i])
            continue;
        reached[i] = true;
        for (int k = 0; k < CS_MAX_DEPS; k++)
            if (op.steps[i].dep[k] >= 0)
                stack[top++] = op.steps[i].dep[k];
    }
    CHECK(reached[x] && reached[y] && reached[z] && reached[w], "cs_join waits for every step");
    CHECK(cs_join(&op, op.nsteps) == -1, "joining nothing gives -1");
    op_fini(&op);

    /* Scratch: from the pool; more than the machine has fails the build. */
    op_init(&op, &pool);
    char *sc = cs_scratch(&op, 1000);
    CHECK(sc && op.scratch == sc && op.scratch_size >= 1000, "cs_scratch");
    CHECK(cs_scratch(&op, (size_t)1 << 62) == NULL && op.build_status == GX_ENOMEM &&
              op.scratch_failed == (size_t)1 << 62,
          "scratch larger than the machine's memory fails with GX_ENOMEM and its size");
    op_fini(&op);
    coll_scratch_pool_fini(&pool);
}

static void step_cap(void)
{
    struct coll_op op;
    op_init(&op, NULL);
    for (int i = 0; i < COLL_MAX_STEPS + 10; i++)
        cs_nop(&op, -1, -1, -1);
    CHECK(op.nsteps == COLL_MAX_STEPS && op.steps_capped && op.build_status == GX_ENOMEM,
          "the build stops at COLL_MAX_STEPS (%d steps, capped %d)", op.nsteps, op.steps_capped);
    free(op.steps);
}

static void pool(void)
{
    struct coll_scratch_pool p;
    coll_scratch_pool_init(&p);
    size_t got;
    void *bufs[SCRATCH_POOL + 1];
    for (int i = 0; i <= SCRATCH_POOL; i++) {
        bufs[i] = coll_scratch_take(&p, (size_t)(i + 1) * 100, &got);
        CHECK(bufs[i] && got == (size_t)(i + 1) * 100, "a new buffer of the size asked");
    }
    for (int i = 0; i <= SCRATCH_POOL; i++)
        coll_scratch_give(&p, bufs[i], (size_t)(i + 1) * 100);
    /* Full: the smallest (100) was dropped for the largest (900). */
    void *b = coll_scratch_take(&p, 250, &got);
    CHECK(b == bufs[2] && got == 300, "take: the smallest kept buffer that fits (got %zu)", got);
    void *big = coll_scratch_take(&p, 901, &got);
    CHECK(got == 901, "nothing kept fits: a new one");
    coll_scratch_give(&p, b, 300);
    coll_scratch_give(&p, big, 901);
    coll_scratch_pool_fini(&p);
}

static void chunks_and_names(void)
{
    /* Read once per process: this test sets it first. */
    CHECK(coll_chunks(0) == 1 && coll_chunks(4096) == 1 && coll_chunks(4097) == 2,
          "GX_COLL_CHUNK=4096: %d %d %d", coll_chunks(0), coll_chunks(4096), coll_chunks(4097));
    CHECK(coll_chunks((size_t)1 << 40) == 64, "at most 64 chunks");
    CHECK(coll_hier_segments(4096) == 1 && coll_hier_segments(16 * 4096) == 2 &&
              coll_hier_segments((size_t)1 << 40) == 4,
          "hier segments: one per 8 chunks, 1 to 4");
    CHECK(strcmp(coll_kind_name(COLL_ALLREDUCE), "allreduce") == 0 &&
              strcmp(coll_kind_name(COLL_REDUCE_SCATTER), "reduce_scatter") == 0 &&
              strcmp(coll_kind_name(COLL_KIND_COUNT), "?") == 0,
          "collective names");
    CHECK(block_off(10, 4, 3) + block_len(10, 4, 3) == 10 && block_len(10, 4, 0) == 3 &&
              block_len(10, 4, 3) == 2,
          "blocks cover the vector, larger ones first");
    CHECK(coll_pof2(7) == 4 && fold_newrank(0, 3) == -1 && fold_newrank(1, 3) == 0 &&
              fold_realrank(0, 3) == 1 && fold_realrank(3, 3) == 6,
          "folding non-powers of two");
}

int main(void)
{
    setenv("GX_COLL_CHUNK", "4096", 1);
    chunks_and_names();
    builder();
    step_cap();
    pool();
    CHECK_DONE("test_schedule");
}
