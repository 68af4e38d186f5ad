/*
 * sched_sim_setup.c - the schedule simulator's set-up (sched_sim.h): fake
 * communicators with a node layout and shared segments, the inputs, every
 * rank's schedule from the builder under test (checked to stay inside its
 * buffers), the reductions that check what they combine, and the
 * teardown. Running the schedules is sched_sim.c's.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/arena/node_shm.h"
#include "collectives/comm/comm_internal.h"
#include "tests/collectives/algorithms/sched_sim_internal.h"

struct sim *sim_current;

void sim_problem(struct sim *s, const char *fmt, ...)
{
    if (s->problems++ >= MAX_SHOWN)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", s->what);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

void sim_describe(const struct sim_case *c, char *buf, size_t len)
{
    int w = snprintf(buf, len, "%s %s n=%d count=%zu root=%d %s %s", coll_algo_name(c->algo),
                     coll_kind_name(c->kind), c->n, c->count, c->root,
                     c->op == GX_AVG ? "avg" : "sum", c->in_place ? "in-place" : "out-of-place");
    if (w > 0 && (size_t)w < len && c->nodes > 1) {
        w += snprintf(buf + w, len - (size_t)w, " nodes=");
        for (int m = 0; m < c->nodes && (size_t)w < len; m++)
            w += snprintf(buf + w, len - (size_t)w, "%s%d", m ? "+" : "", c->node_size[m]);
    }
    if (w > 0 && (size_t)w < len && c->arena)
        w += snprintf(buf + w, len - (size_t)w, " arena(slot %zu)", c->slot_bytes);
    if (w > 0 && (size_t)w < len && c->algo == COLL_ALGO_HIER)
        snprintf(buf + w, len - (size_t)w, " rail=%s", coll_algo_name(c->rail));
}

/* ---- the reductions --------------------------------------------------------- */

bool sim_readable(const struct elem *e)
{
    return e->mark == MARK_WRITTEN || e->mark == MARK_AVERAGED;
}

static void combine(struct elem *out, const struct elem *a, const struct elem *b, size_t i)
{
    struct sim *s = sim_current;
    if (a->mark != MARK_WRITTEN || b->mark != MARK_WRITTEN) {
        sim_problem(s, "rank %d step %d reduces element %zu %s", s->at_rank, s->at_step, i,
                !sim_readable(a) || !sim_readable(b) ? "before it was written" : "after averaging it");
    } else if (a->idx != b->idx) {
        sim_problem(s, "rank %d step %d combines element %u with element %u", s->at_rank, s->at_step,
                a->idx, b->idx);
    } else if (a->mask & b->mask) {
        sim_problem(s, "rank %d step %d counts rank(s) 0x%llx twice in element %u", s->at_rank,
                s->at_step, (unsigned long long)(a->mask & b->mask), a->idx);
    }
    *out = (struct elem){ a->mask | b->mask, a->idx, MARK_WRITTEN };
}

static void sim_reduce(void *inout, const void *in, size_t count)
{
    struct elem *d = inout;
    const struct elem *x = in;
    for (size_t i = 0; i < count; i++) {
        struct elem a = d[i];
        combine(&d[i], &a, &x[i], i);
    }
}

static void sim_reduce3(void *out, const void *a, const void *b, size_t count)
{
    const struct elem *x = a, *y = b;
    struct elem *o = out;
    for (size_t i = 0; i < count; i++) {
        struct elem ea = x[i], eb = y[i];
        combine(&o[i], &ea, &eb, i);
    }
}

/* ---- set-up ------------------------------------------------------------------ */

static void fill(struct elem *e, size_t n, uint64_t mask, uint32_t idx0)
{
    for (size_t i = 0; i < n; i++)
        e[i] = (struct elem){ mask, idx0 + (uint32_t)i, MARK_WRITTEN };
}

/* Buffers by kind (counts in elements; n ranks). */
static void sizes(enum coll_kind k, size_t count, int n, size_t *send_n, size_t *recv_n)
{
    size_t all = count * (size_t)n;
    *send_n = k == COLL_REDUCE_SCATTER || k == COLL_SCATTER || k == COLL_ALLTOALL ? all : count;
    *recv_n = k == COLL_ALLGATHER || k == COLL_GATHER || k == COLL_ALLTOALL ? all : count;
}

/* The inputs, and the in-place forms of docs/api.md (gx.h). */
static int setup_buffers(struct sim *s, int r, struct coll_args *a)
{
    const struct sim_case *c = s->c;
    struct sim_rank *R = &s->r[r];
    uint64_t me = 1ull << r;
    sizes(c->kind, c->count, s->n, &R->send_n, &R->recv_n);
    R->send = calloc(R->send_n + 1, sizeof(struct elem));
    R->recv = calloc(R->recv_n + 1, sizeof(struct elem));
    if (!R->send || !R->recv)
        return -1;
    fill(R->send, R->send_n, me, 0);
    a->sendbuf = R->send;
    a->recvbuf = R->recv;
    if (!c->in_place)
        return 0;
    size_t cnt = c->count;
    bool root = r == c->root;
    switch (c->kind) {
    case COLL_ALLREDUCE:
    case COLL_REDUCE:
    case COLL_BROADCAST:
    case COLL_ALLTOALL:
        fill(R->recv, R->recv_n, me, 0);
        a->sendbuf = R->recv;
        break;
    case COLL_ALLGATHER:
        fill(R->recv + (size_t)r * cnt, cnt, me, 0);
        a->sendbuf = R->recv + (size_t)r * cnt;
        break;
    case COLL_REDUCE_SCATTER: /* recvbuf == sendbuf + rank * recvcount */
        a->recvbuf = R->send + (size_t)r * cnt;
        break;
    case COLL_GATHER:
        if (root) {
            fill(R->recv + (size_t)r * cnt, cnt, me, 0);
            a->sendbuf = R->recv + (size_t)r * cnt;
        }
        break;
    case COLL_SCATTER:
        if (root)
            a->recvbuf = R->send + (size_t)r * cnt;
        break;
    default:
        break;
    }
    return 0;
}

/* A segment shared by `members` (comm ranks), one struct per member. */
static int make_segment(struct sim *s, const int *members, int m)
{
    size_t slot = s->c->slot_bytes;
    struct node_shm_ctl *ctl = aligned_alloc(64, (size_t)m * sizeof(*ctl));
    char *data = calloc((size_t)m * NODE_SHM_NBUF, slot);
    if (!ctl || !data) {
        free(ctl);
        free(data);
        return -1;
    }
    memset(ctl, 0, (size_t)m * sizeof(*ctl));
    s->segments[s->nsegments++] = ctl;
    s->segments[s->nsegments++] = data;
    for (int i = 0; i < m; i++) {
        struct node_shm *a = calloc(1, sizeof(*a));
        int *ranks = m < s->n ? malloc((size_t)m * sizeof(int)) : NULL;
        if (!a || (m < s->n && !ranks)) {
            free(a);
            free(ranks);
            return -1;
        }
        if (ranks)
            memcpy(ranks, members, (size_t)m * sizeof(int));
        *a = (struct node_shm){ .nranks = m, .rank = i, .ranks = ranks, .slot_bytes = slot,
                                .ctl = ctl, .data = data };
        s->arenas[members[i]] = a;
    }
    return 0;
}

/* Fake communicators with the case's node layout (nodes in rank order). */
static int setup_comms(struct sim *s)
{
    const struct sim_case *c = s->c;
    int nodes = c->nodes > 1 ? c->nodes : 1, first = 0;
    int one_node[1] = { s->n };
    const int *sizes_of = c->nodes > 1 ? c->node_size : one_node;
    for (int r = 0; r < s->n; r++) {
        struct gx_comm *g = gx_comm_alloc(NULL, r, s->n);
        if (!g)
            return -1;
        s->r[r].comm = g;
        snprintf(g->name, sizeof(g->name), "sim");
        g->op_timeout_ms = 1000;
        for (int i = 0; i < s->n; i++)
            g->world_ranks[i] = i;
        if (gx_comm_layout_sizes(g, nodes, sizes_of) != GX_OK)
            return -1;
    }
    for (int m = 0; m < nodes; m++) {
        int size = sizes_of[m];
        int members[64];
        for (int i = 0; i < size; i++)
            members[i] = first + i;
        if (c->arena && size > 1 && make_segment(s, members, size) != 0)
            return -1;
        first += size;
    }
    for (int r = 0; r < s->n; r++) {
        struct gx_comm *g = s->r[r].comm;
        if (nodes == 1)
            g->shm = s->arenas[r];
        else
            g->node_shm = s->arenas[r];
    }
    return 0;
}

/* ---- the schedules ------------------------------------------------------------- */

void sim_teardown(struct sim *s)
{
    for (int r = 0; r < s->n; r++) {
        struct sim_rank *R = &s->r[r];
        free(R->op.steps);
        if (R->op.scratch)
            coll_scratch_give(&R->pool, R->op.scratch, R->op.scratch_size);
        coll_scratch_pool_fini(&R->pool);
        free(R->send);
        free(R->recv);
        free(R->state);
        free(R->partner);
        free(R->inflight);
        if (R->comm)
            gx_comm_free(R->comm);
        if (s->arenas[r]) {
            free(s->arenas[r]->ranks);
            free(s->arenas[r]);
        }
    }
    for (int k = 0; k < s->nsegments; k++)
        free(s->segments[k]);
}

/* Is [p, p+len) inside one of rank r's buffers (its send and receive
 * vectors, its scratch, its segment's slots and counters)? */
static bool inside(const struct sim *s, int r, const void *p, size_t len)
{
    const struct sim_rank *R = &s->r[r];
    const struct node_shm *a = s->arenas[r];
    struct {
        const void *base;
        size_t bytes;
    } bufs[] = {
        { R->send, R->send_n * sizeof(struct elem) },
        { R->recv, R->recv_n * sizeof(struct elem) },
        { R->op.scratch, R->op.scratch ? R->op.scratch_size : 0 },
        { a ? a->data : NULL, a ? (size_t)a->nranks * NODE_SHM_NBUF * a->slot_bytes : 0 },
        { a ? (const void *)a->ctl : NULL, a ? (size_t)a->nranks * sizeof(*a->ctl) : 0 },
    };
    if (!len)
        return true;
    for (size_t k = 0; k < sizeof(bufs) / sizeof(bufs[0]); k++) {
        uintptr_t b = (uintptr_t)bufs[k].base, x = (uintptr_t)p;
        if (bufs[k].base && x >= b && x + len <= b + bufs[k].bytes)
            return true;
    }
    return false;
}

/* SCHED_SIM_DUMP=1: every rank's steps, buffers as (which, element). */
static void dump(const struct sim *s, int r)
{
    static const char *const kinds[] = { "?",   "send", "recv", "reduce", "reduce3", "copy",
                                         "avg", "nop",  "set",  "wait" };
    const struct sim_rank *R = &s->r[r];
    const struct coll_op *op = &R->op;
    char where[3][48];
    for (int i = 0; i < op->nsteps; i++) {
        const struct coll_step *st = &op->steps[i];
        const void *ptr[3] = { st->dst, st->src, st->src2 };
        for (int k = 0; k < 3; k++) {
            uintptr_t p = (uintptr_t)ptr[k];
            const char *name = "-";
            uintptr_t base = 0;
            if (p >= (uintptr_t)R->send && p < (uintptr_t)(R->send + R->send_n + 1))
                name = "send", base = (uintptr_t)R->send;
            else if (p >= (uintptr_t)R->recv && p < (uintptr_t)(R->recv + R->recv_n + 1))
                name = "recv", base = (uintptr_t)R->recv;
            else if (op->scratch && p >= (uintptr_t)op->scratch &&
                     p < (uintptr_t)op->scratch + op->scratch_size)
                name = "scratch", base = (uintptr_t)op->scratch;
            else if (p)
                name = "other", base = p;
            snprintf(where[k], sizeof(where[k]), "%s+%zu", name,
                     (size_t)(p - base) / sizeof(struct elem));
        }
        fprintf(stderr, "  rank %d step %d: %s peer %d msg %u len %zu dst %s src %s src2 %s "
                "deps %d %d %d\n", r, i, kinds[st->kind < 10 ? st->kind : 0], st->peer, st->msg,
                st->len, where[0], where[1], where[2], st->dep[0], st->dep[1], st->dep[2]);
    }
}

/* Every step touches only the rank's own buffers. */
static void check_bounds(struct sim *s, int r)
{
    const struct coll_op *op = &s->r[r].op;
    size_t es = sizeof(struct elem);
    for (int i = 0; i < op->nsteps; i++) {
        const struct coll_step *st = &op->steps[i];
        size_t bytes = st->kind == CS_REDUCE || st->kind == CS_REDUCE3 || st->kind == CS_AVG
                           ? st->len * es
                           : st->len;
        bool ok = true;
        switch (st->kind) {
        case CS_SEND: ok = inside(s, r, st->src, bytes); break;
        case CS_RECV: ok = inside(s, r, st->dst, bytes); break;
        case CS_COPY:
        case CS_REDUCE: ok = inside(s, r, st->src, bytes) && inside(s, r, st->dst, bytes); break;
        case CS_REDUCE3:
            ok = inside(s, r, st->src, bytes) && inside(s, r, st->src2, bytes) &&
                 inside(s, r, st->dst, bytes);
            break;
        case CS_AVG: ok = inside(s, r, st->dst, bytes); break;
        case CS_FLAG_SET: ok = inside(s, r, st->dst, sizeof(uint64_t)); break;
        default: break;
        }
        if (!ok)
            sim_problem(s, "rank %d step %d (kind %d, %zu bytes) reaches past its buffers", r, i,
                    st->kind, bytes);
    }
}

static int build_all(struct sim *s)
{
    const struct sim_case *c = s->c;
    const struct coll_algo_desc *d = coll_algo_desc(c->algo);
    coll_build_fn build = c->build ? c->build : d ? d->serves[c->kind].build : NULL;
    if (!build) {
        sim_problem(s, "the algorithm does not serve this collective");
        return -1;
    }
    for (int r = 0; r < s->n; r++) {
        struct sim_rank *R = &s->r[r];
        struct coll_op *op = &R->op;
        coll_scratch_pool_init(&R->pool);
        *op = (struct coll_op){ .comm = R->comm, .pool = &R->pool, .algo = c->algo,
                                .inner_algo = c->rail, .seq = 1, .fn = sim_reduce,
                                .fn3 = sim_reduce3, .desc_recv_step = -1 };
        op->a = (struct coll_args){ .kind = c->kind, .count = c->count, .dtype = GX_FLOAT64,
                                    .op = c->op, .root = c->root, .es = sizeof(struct elem) };
        if (setup_buffers(s, r, &op->a) != 0)
            return -1;
        int rc = build(op);
        if (rc == GX_OK)
            rc = op->build_status;
        if (rc != GX_OK) {
            sim_problem(s, "rank %d: the builder failed (%s)", r, gx_strerror(rc));
            return -1;
        }
        if (getenv("SCHED_SIM_DUMP"))
            dump(s, r);
        check_bounds(s, r);
        if (s->problems)
            return -1; /* running it would write past a buffer */
        /* Scratch comes from malloc: nothing in it counts as written. */
        if (op->scratch)
            memset(op->scratch, 0, op->scratch_size);
        size_t n = (size_t)op->nsteps + 1;
        R->state = calloc(n, 1);
        R->partner = calloc(n, sizeof(int));
        R->inflight = calloc(n, sizeof(int));
        if (!R->state || !R->partner || !R->inflight)
            return -1;
    }
    return 0;
}

int sim_setup(struct sim *s)
{
    return setup_comms(s) == 0 && build_all(s) == 0 ? 0 : -1;
}
