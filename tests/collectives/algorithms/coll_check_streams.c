/*
 * coll_check_streams.c - coll_check random (rounding of float sums) and
 * interleave (outstanding non-blocking collectives waited in random order).
 */
#include "coll_check.h"

void mode_random(struct gx_comm *comm, uint32_t seed)
{
    static const enum gx_datatype types[] = { GX_FLOAT32, GX_FLOAT64, GX_FLOAT16, GX_BFLOAT16 };
    static const size_t counts[] = { 1, 7, 1023, 100003, 300001 };
    for (size_t ti = 0; ti < 4; ti++) {
        enum gx_datatype t = types[ti];
        size_t es = gx_datatype_size(t);
        double eps = t == GX_FLOAT64 ? 1.2e-16 : t == GX_FLOAT32 ? 6e-8 : t == GX_FLOAT16 ? 4.9e-4
                                                                                          : 3.9e-3;
        for (size_t ci = 0; ci < 5; ci++) {
            size_t count = counts[ci];
            unsigned char *in = malloc(count * es), *out = malloc(count * es);
            unsigned char *all = malloc(count * es * (size_t)nranks);
            for (size_t i = 0; i < count; i++) {
                uint32_t h = mix(seed ^ mix((uint32_t)me * 7919u + (uint32_t)i));
                set_f(in, t, i, ((double)h / 4294967296.0 - 0.5) * 8);
            }
            CHECK(gx_allreduce(comm, in, out, count, t, GX_SUM) == GX_OK, "random allreduce");
            CHECK(gx_allgather(comm, in, all, count, t) == GX_OK, "allgather of the inputs");
            for (size_t i = 0; i < count; i++) {
                double exact = 0, mag = 0;
                for (int r = 0; r < nranks; r++) {
                    double x = get_f(all + (size_t)r * count * es, t, i);
                    exact += x;
                    mag += x < 0 ? -x : x;
                }
                /* n-1 roundings of partial sums, plus the final rounding */
                double bound = (nranks + 1) * eps * mag + 1e-300;
                double err = get_f(out, t, i) - exact;
                CHECK(err <= bound && -err <= bound, "%s sum element %zu: %g vs exact %g "
                      "(bound %g)", gx_datatype_name(t), i, get_f(out, t, i), exact, bound);
            }
            /* bitwise equal on every rank: gather everyone's result */
            CHECK(gx_allgather(comm, out, all, count, t) == GX_OK, "allgather of the results");
            for (int r = 0; r < nranks; r++)
                CHECK(memcmp(all + (size_t)r * count * es, out, count * es) == 0,
                      "%s sum of %zu: rank %d's result differs from rank %d's",
                      gx_datatype_name(t), count, r, me);
            checks++;
            free(in);
            free(out);
            free(all);
        }
    }
}

struct pending {
    struct gx_request *req;
    int kind;
    enum gx_datatype t;
    enum gx_redop op;
    size_t count;
    int root;
    uint32_t seed;
    unsigned char *send, *recv;
};
static 
void verify_pending(struct pending *p)
{
    int n = nranks;
    size_t es = gx_datatype_size(p->t), count = p->count;
    unsigned char *expect = malloc(count * es * (size_t)n + 1);
    bool check = true;
    size_t len = count;
    switch (p->kind) {
    case ALLREDUCE:
        for (size_t i = 0; i < count; i++)
            ref_reduce(expect, i, p->t, p->op, n, p->seed, i);
        break;
    case BROADCAST:
        fill(expect, p->t, p->op, count, p->root, p->seed, 0);
        break;
    case REDUCE:
        check = me == p->root;
        for (size_t i = 0; check && i < count; i++)
            ref_reduce(expect, i, p->t, p->op, n, p->seed, i);
        break;
    default: /* ALLGATHER */
        for (int b = 0; b < n; b++)
            fill(expect + (size_t)b * count * es, p->t, p->op, count, b, p->seed, 0);
        len = count * (size_t)n;
        break;
    }
    for (size_t i = 0; check && i < len; i++) {
        if (same_elem(p->recv, expect, p->t, i))
            continue;
        if (p->op == GX_AVG && is_float(p->t)) {
            double g = get_f(p->recv, p->t, i), e = get_f(expect, p->t, i);
            if (g - e < 1e-2 * (e < 0 ? -e : e) + 1e-2 && e - g < 1e-2 * (e < 0 ? -e : e) + 1e-2)
                continue;
        }
        CHECK(0, "interleaved %s %s count %zu seed %u: element %zu wrong", kind_names[p->kind],
              gx_datatype_name(p->t), count, p->seed, i);
    }
    free(expect);
}

void mode_interleave(struct gx_comm *comm, uint32_t seed, int total, int window)
{
    struct pending *q = calloc((size_t)window, sizeof(*q));
    uint32_t shared = seed;                       /* same sequence on every rank */
    uint32_t local = seed ^ mix((uint32_t)me + 1); /* differs per rank */
    int issued = 0, live = 0;
    static const size_t sizes[] = { 0, 1, 5, 300, 4099, 70000, 300007 };
    static const enum gx_datatype dts[] = { GX_FLOAT32, GX_INT32, GX_FLOAT16, GX_UINT8, GX_INT64,
                                            GX_FLOAT64 };
    while (issued < total || live > 0) {
        local = mix(local + 1);
        bool issue = issued < total && (live == 0 || (live < window && (local & 3) != 0));
        if (issue) {
            shared = mix(shared + 7);
            struct pending *p = NULL;
            for (int i = 0; i < window; i++)
                if (!q[i].req) {
                    p = &q[i];
                    break;
                }
            p->kind = (int)(shared % 4); /* allreduce, broadcast, reduce, allgather */
            p->t = dts[(shared >> 4) % 6];
            p->op = (enum gx_redop)((shared >> 8) % GX_REDOP_COUNT);
            p->count = sizes[(shared >> 12) % 7];
            p->root = (int)((shared >> 16) % (uint32_t)nranks);
            p->seed = shared;
            size_t es = gx_datatype_size(p->t);
            size_t rn = p->kind == ALLGATHER ? p->count * (size_t)nranks : p->count;
            p->send = malloc(p->count * es + 1);
            p->recv = malloc(rn * es + 1);
            fill(p->send, p->t, p->op, p->count, me, p->seed, 0);
            int rc;
            switch (p->kind) {
            case ALLREDUCE:
                rc = gx_iallreduce(comm, p->send, p->recv, p->count, p->t, p->op, &p->req);
                break;
            case BROADCAST:
                fill(p->send, p->t, p->op, p->count, p->root, p->seed, 0);
                if (me != p->root)
                    fill(p->send, p->t, p->op, p->count, me + 100, p->seed, 0);
                rc = gx_ibroadcast(comm, p->send, p->recv, p->count, p->t, p->root, &p->req);
                break;
            case REDUCE:
                rc = gx_ireduce(comm, p->send, p->recv, p->count, p->t, p->op, p->root, &p->req);
                break;
            default:
                rc = gx_iallgather(comm, p->send, p->recv, p->count, p->t, &p->req);
                break;
            }
            CHECK(rc == GX_OK, "issue #%d: %s", issued, gx_strerror(rc));
            issued++;
            live++;
            continue;
        }
        /* Complete a random outstanding one (rank-specific order), or test. */
        int pick = (int)(local % (uint32_t)window);
        for (int i = 0; i < window; i++) {
            struct pending *p = &q[(pick + i) % window];
            if (!p->req)
                continue;
            int rc;
            if ((local >> 8) & 1) {
                int done = 0;
                rc = gx_test(p->req, &done);
                if (!done)
                    break;
            } else {
                rc = gx_wait(p->req, -1);
            }
            CHECK(rc == GX_OK, "interleaved %s: %s", kind_names[p->kind], gx_strerror(rc));
            verify_pending(p);
            gx_request_free(p->req);
            free(p->send);
            free(p->recv);
            memset(p, 0, sizeof(*p));
            live--;
            checks++;
            break;
        }
    }
    free(q);
}
