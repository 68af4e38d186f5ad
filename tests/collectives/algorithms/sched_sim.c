/*
 * sched_sim.c - the schedule simulator's engine (sched_sim.h): pairs every
 * send with its receive, runs every rank's steps with the checks there,
 * and compares the results with what the collective promises. The set-up
 * (communicators, buffers, builders, reductions) is sched_sim_setup.c's.
 * Pure: no transport, no threads, one process.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/arena/node_shm.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/engine/coll_engine.h"
#include "tests/collectives/algorithms/sched_sim_internal.h"

/* ---- pairing ------------------------------------------------------------------- */

struct msg_key {
    int src, dst;
    uint32_t msg;
    int idx;      /* the step at its own rank */
    size_t len;
};

static int key_cmp(const void *pa, const void *pb)
{
    const struct msg_key *a = pa, *b = pb;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    if (a->dst != b->dst)
        return a->dst < b->dst ? -1 : 1;
    if (a->msg != b->msg)
        return a->msg < b->msg ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* The k-th send from q to p with message m pairs with p's k-th receive
 * from q with message m (the transport matches in posting order). */
static int pair_messages(struct sim *s)
{
    size_t ns = 0, nr = 0, cap = 0;
    for (int r = 0; r < s->n; r++)
        cap += (size_t)s->r[r].op.nsteps;
    struct msg_key *snd = malloc((cap + 1) * sizeof(*snd)), *rcv = malloc((cap + 1) * sizeof(*rcv));
    if (!snd || !rcv) {
        free(snd);
        free(rcv);
        return -1;
    }
    for (int r = 0; r < s->n; r++) {
        const struct coll_op *op = &s->r[r].op;
        for (int i = 0; i < op->nsteps; i++) {
            const struct coll_step *st = &op->steps[i];
            s->r[r].partner[i] = -1;
            if (st->kind == CS_SEND)
                snd[ns++] = (struct msg_key){ r, st->peer, st->msg, i, st->len };
            else if (st->kind == CS_RECV)
                rcv[nr++] = (struct msg_key){ st->peer, r, st->msg, i, st->len };
        }
    }
    qsort(snd, ns, sizeof(*snd), key_cmp);
    qsort(rcv, nr, sizeof(*rcv), key_cmp);
    size_t i = 0, j = 0;
    while (i < ns || j < nr) {
        int cmp = i == ns ? 1 : j == nr ? -1 : key_cmp(&snd[i], &rcv[j]);
        if (i < ns && j < nr && snd[i].src == rcv[j].src && snd[i].dst == rcv[j].dst &&
            snd[i].msg == rcv[j].msg) {
            if (snd[i].len != rcv[j].len)
                sim_problem(s, "rank %d step %d sends %zu bytes (message %u) to rank %d, whose step "
                        "%d receives %zu", snd[i].src, snd[i].idx, snd[i].len, snd[i].msg,
                        snd[i].dst, rcv[j].idx, rcv[j].len);
            s->r[snd[i].src].partner[snd[i].idx] = rcv[j].idx;
            s->r[rcv[j].dst].partner[rcv[j].idx] = snd[i].idx;
            i++, j++;
        } else if (cmp < 0) {
            sim_problem(s, "rank %d step %d sends message %u to rank %d, which has no receive for it",
                    snd[i].src, snd[i].idx, snd[i].msg, snd[i].dst);
            i++;
        } else {
            sim_problem(s, "rank %d step %d receives message %u from rank %d, which never sends it",
                    rcv[j].dst, rcv[j].idx, rcv[j].msg, rcv[j].src);
            j++;
        }
    }
    free(snd);
    free(rcv);
    return 0;
}

/* ---- running ------------------------------------------------------------------- */

static bool overlap(const void *a, size_t al, const void *b, size_t bl)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return al && bl && x < y + bl && y < x + al;
}

static const void *msg_buf(const struct coll_step *st)
{
    return st->kind == CS_SEND ? st->src : st->dst;
}

/* A step touching [p, p+len) (writing when `write`) against the messages
 * in flight on its rank. */
static void check_hazard(struct sim *s, int r, int i, const void *p, size_t len, bool write)
{
    struct sim_rank *R = &s->r[r];
    for (int k = 0; k < R->ninflight; k++) {
        const struct coll_step *m = &R->op.steps[R->inflight[k]];
        if (m->kind == CS_SEND && !write)
            continue; /* two readers */
        if (overlap(p, len, msg_buf(m), m->len))
            sim_problem(s, "rank %d step %d %s a buffer that step %d (a %s in flight) %s", r, i,
                    write ? "writes" : "reads", R->inflight[k],
                    m->kind == CS_SEND ? "send" : "receive",
                    m->kind == CS_SEND ? "still reads" : "still fills");
    }
}

static void check_written(struct sim *s, int r, int i, const void *p, size_t bytes)
{
    const struct elem *e = p;
    for (size_t k = 0; k < bytes / sizeof(struct elem); k++)
        if (!sim_readable(&e[k])) {
            sim_problem(s, "rank %d step %d reads element %zu of a buffer before anything wrote it",
                    r, i, k);
            return;
        }
}

static bool deps_done(const struct sim_rank *R, const struct coll_step *st)
{
    for (int k = 0; k < CS_MAX_DEPS; k++)
        if (st->dep[k] >= 0 && R->state[st->dep[k]] != DONE)
            return false;
    return true;
}

static bool flag_ready(const struct sim_rank *R, const struct coll_step *st)
{
    const struct node_shm *ar = R->comm->shm ? R->comm->shm : R->comm->node_shm;
    bool one = st->msg == 0;
    for (int j = one ? st->peer : 0; j < (one ? st->peer + 1 : ar->nranks); j++) {
        const uint64_t *f = (const uint64_t *)((const char *)st->src + (size_t)j * st->msg);
        if (*f < st->len)
            return false;
    }
    return true;
}

static void inflight_remove(struct sim_rank *R, int i)
{
    for (int k = 0; k < R->ninflight; k++)
        if (R->inflight[k] == i) {
            R->inflight[k] = R->inflight[--R->ninflight];
            return;
        }
}

/* A compute step (the engine's run_step, with checks). */
static void run_compute(struct sim *s, int r, int i)
{
    struct sim_rank *R = &s->r[r];
    struct coll_step *st = &R->op.steps[i];
    s->at_rank = r;
    s->at_step = i;
    size_t es = sizeof(struct elem);
    switch (st->kind) {
    case CS_COPY:
        if (!st->len || st->dst == st->src)
            break;
        check_hazard(s, r, i, st->src, st->len, false);
        check_hazard(s, r, i, st->dst, st->len, true);
        check_written(s, r, i, st->src, st->len);
        memmove(st->dst, st->src, st->len);
        break;
    case CS_REDUCE:
        check_hazard(s, r, i, st->src, st->len * es, false);
        check_hazard(s, r, i, st->dst, st->len * es, true);
        R->op.fn(st->dst, st->src, st->len);
        break;
    case CS_REDUCE3:
        check_hazard(s, r, i, st->src, st->len * es, false);
        check_hazard(s, r, i, st->src2, st->len * es, false);
        check_hazard(s, r, i, st->dst, st->len * es, true);
        if (st->dst == st->src)
            R->op.fn(st->dst, st->src2, st->len);
        else if (st->dst == st->src2)
            R->op.fn(st->dst, st->src, st->len);
        else
            R->op.fn3(st->dst, st->src, st->src2, st->len);
        break;
    case CS_AVG: {
        check_hazard(s, r, i, st->dst, st->len * es, true);
        struct elem *e = st->dst;
        for (size_t k = 0; k < st->len; k++) {
            if (e[k].mark != MARK_WRITTEN || e[k].mask != s->full)
                sim_problem(s, "rank %d step %d averages element %u %s", r, i, e[k].idx,
                        e[k].mark == MARK_AVERAGED ? "twice" : "before it holds every rank's");
            e[k].mark = MARK_AVERAGED;
        }
        break;
    }
    case CS_FLAG_SET:
        *(uint64_t *)st->dst = (uint64_t)st->len;
        break;
    default:
        break;
    }
}

/* Post step i's message; with its partner posted too, move the bytes. */
static bool post_message(struct sim *s, int r, int i)
{
    struct sim_rank *R = &s->r[r];
    const struct coll_step *st = &R->op.steps[i];
    if (R->partner[i] < 0)
        return false; /* reported by pair_messages; it can never run */
    check_hazard(s, r, i, msg_buf(st), st->len, st->kind == CS_RECV);
    R->state[i] = POSTED;
    R->inflight[R->ninflight++] = i;
    struct sim_rank *P = &s->r[st->peer];
    int j = R->partner[i];
    if (P->state[j] != POSTED)
        return true;
    const struct coll_step *snd = st->kind == CS_SEND ? st : &P->op.steps[j];
    const struct coll_step *rcv = st->kind == CS_SEND ? &P->op.steps[j] : st;
    int sr = st->kind == CS_SEND ? r : st->peer, si = st->kind == CS_SEND ? i : j;
    check_written(s, sr, si, snd->src, snd->len);
    memcpy(rcv->dst, snd->src, snd->len < rcv->len ? snd->len : rcv->len);
    R->state[i] = P->state[j] = DONE;
    inflight_remove(R, i);
    inflight_remove(P, j);
    return true;
}

/* Run what rank r can: messages are posted before computations run, so a
 * computation racing a posted message shows. Like the engine, only the
 * STEP_WINDOW steps from the first not done are looked at, unless `far`:
 * the engine looks past the window once it has changed nothing for a
 * while (coll_steps.c), which here is when no rank can run anything in its
 * window. True when anything ran. */
static bool rank_pass(struct sim *s, int r, bool far)
{
    struct sim_rank *R = &s->r[r];
    bool any = false;
    int end = R->first + STEP_WINDOW < R->op.nsteps && !far ? R->first + STEP_WINDOW
                                                            : R->op.nsteps;
    for (int phase = 0; phase < 2; phase++) {
        for (int i = R->first; i < end && s->problems <= MAX_SHOWN; i++) {
            struct coll_step *st = &R->op.steps[i];
            if (R->state[i] != WAITING || !deps_done(R, st))
                continue;
            bool message = st->kind == CS_SEND || st->kind == CS_RECV;
            if (message != (phase == 0))
                continue;
            if (message) {
                any |= post_message(s, r, i);
            } else if (st->kind != CS_FLAG_WAIT || flag_ready(R, st)) {
                run_compute(s, r, i);
                R->state[i] = DONE;
                any = true;
            }
        }
    }
    while (R->first < R->op.nsteps && R->state[R->first] == DONE)
        R->first++;
    return any;
}

static void report_stall(struct sim *s)
{
    for (int r = 0; r < s->n; r++) {
        struct sim_rank *R = &s->r[r];
        if (R->first == R->op.nsteps)
            continue;
        const struct coll_step *st = &R->op.steps[R->first];
        sim_problem(s, "stalled: rank %d step %d (kind %d, peer %d, message %u) never runs", r,
                R->first, st->kind, st->peer, st->msg);
    }
}

/* ---- results ------------------------------------------------------------------- */

static void expect(struct sim *s, int r, const struct elem *e, size_t k, uint64_t mask,
                   uint32_t idx)
{
    uint32_t mark = s->c->op == GX_AVG && mask == s->full &&
                            (s->c->kind == COLL_ALLREDUCE || s->c->kind == COLL_REDUCE ||
                             s->c->kind == COLL_REDUCE_SCATTER)
                        ? MARK_AVERAGED
                        : MARK_WRITTEN;
    if (s->n == 1 && e->mark == MARK_WRITTEN)
        mark = MARK_WRITTEN; /* averaging over one rank changes nothing: a builder may skip it */
    if (e->mark != mark || e->mask != mask || e->idx != idx)
        sim_problem(s, "rank %d's result element %zu is {ranks 0x%llx, element %u%s} where "
                "{ranks 0x%llx, element %u%s} is due", r, k, (unsigned long long)e->mask,
                e->idx, e->mark == MARK_AVERAGED ? ", averaged" : e->mark ? "" : ", unwritten",
                (unsigned long long)mask, idx, mark == MARK_AVERAGED ? ", averaged" : "");
}

static void check_results(struct sim *s)
{
    const struct sim_case *c = s->c;
    size_t cnt = c->count;
    for (int r = 0; r < s->n && s->problems <= MAX_SHOWN; r++) {
        const struct elem *out = s->r[r].op.a.recvbuf;
        for (size_t k = 0; k < s->r[r].recv_n && s->problems <= MAX_SHOWN; k++) {
            size_t blk = cnt ? k / cnt : 0, i = cnt ? k % cnt : 0;
            switch (c->kind) {
            case COLL_ALLREDUCE: expect(s, r, &out[k], k, s->full, (uint32_t)k); break;
            case COLL_BROADCAST: expect(s, r, &out[k], k, 1ull << c->root, (uint32_t)k); break;
            case COLL_REDUCE:
                if (r == c->root)
                    expect(s, r, &out[k], k, s->full, (uint32_t)k);
                break;
            case COLL_ALLGATHER: expect(s, r, &out[k], k, 1ull << blk, (uint32_t)i); break;
            case COLL_REDUCE_SCATTER:
                expect(s, r, &out[k], k, s->full, (uint32_t)((size_t)r * cnt + k));
                break;
            case COLL_GATHER:
                if (r == c->root)
                    expect(s, r, &out[k], k, 1ull << blk, (uint32_t)i);
                break;
            case COLL_SCATTER:
                expect(s, r, &out[k], k, 1ull << c->root, (uint32_t)((size_t)r * cnt + k));
                break;
            case COLL_ALLTOALL:
                expect(s, r, &out[k], k, 1ull << blk, (uint32_t)((size_t)r * cnt + i));
                break;
            default: break;
            }
        }
    }
}

struct sim *sim_new(const struct sim_case *c)
{
    struct sim *s = calloc(1, sizeof(*s));
    if (!s || c->n < 1 || c->n > 64) {
        free(s);
        fprintf(stderr, "FAIL: bad case (n %d) or out of memory\n", c->n);
        return NULL;
    }
    s->c = c;
    s->n = c->n;
    s->full = c->n == 64 ? ~0ull : (1ull << c->n) - 1;
    sim_describe(c, s->what, sizeof(s->what));
    sim_current = s;
    return s;
}

int sim_run(const struct sim_case *c)
{
    struct sim *s = sim_new(c);
    if (!s)
        return 1;
    if (sim_setup(s) != 0 || pair_messages(s) != 0) {
        if (!s->problems)
            sim_problem(s, "set-up failed (out of memory, or a bad node layout)");
    } else {
        for (bool far = false;;) {
            bool any = false, left = false;
            for (int r = 0; r < s->n; r++) {
                while (rank_pass(s, r, far))
                    any = true;
                left |= s->r[r].first < s->r[r].op.nsteps;
            }
            if (!left || s->problems > MAX_SHOWN)
                break;
            if (!any && far) {
                report_stall(s);
                break;
            }
            if (!any && c->far_rounds)
                (*c->far_rounds)++;
            far = !any; /* stuck in the windows: look past them once */
        }
        if (!s->problems)
            check_results(s);
    }
    int problems = s->problems;
    sim_teardown(s);
    free(s);
    sim_current = NULL;
    return problems;
}
