/*
 * win_check - multi-process checks of one-sided windows (gx_win.h). Run
 * under gx-run; GX_PROVIDER / GX_NODE_ID pick the providers under test.
 *   win_check model       every rank runs a random stream of put, get and
 *                         accumulate (blocking and request forms, 1 B to
 *                         1 MiB, every datatype) on its slice of every rank's
 *                         window; gets are compared with a model, and every
 *                         target replays all streams and checks its window
 *   win_check concurrent  every rank accumulates into overlapping ranges of
 *                         every window at once (sum, max, single 8-byte
 *                         counters, integer-valued floats): exact results
 *   win_check bounds      out-of-range and misaligned operations fail with
 *                         GX_EINVAL naming rank, window and offset, and write
 *                         nothing (GX_WIN_ORIGIN_CHECK=0: the target's check)
 *   win_check free        a window freed with operations still in flight
 *   win_check kill        rank 1 dies in the middle of puts: the others' next
 *                         operation or flush fails naming it, within GX_TIMEOUT
 * WIN_MAX_BYTES caps an operation (lossy emulated links); WIN_EXPECT_PATH
 * ("fabric", "am") is the path every other rank must be reached by.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gx/gx.h"
#include "win_model.h"

#include "../../lib/rank_check.h"

static int me = -1, nranks;
static size_t max_bytes = 1u << 20;

static void check_paths(struct gx_comm *comm, struct gx_win *win)
{
    const char *want = getenv("WIN_EXPECT_PATH");
    for (int t = 0; want && t < nranks; t++) {
        const char *got = gx_win_path(win, t);
        const char *exp = t == me ? "self" : want;
        CHECK(got && strcmp(got, exp) == 0, "path to rank %d is %s, expected %s (provider %s)",
              t, got ? got : "NULL", exp, gx_comm_peer_provider(comm, t));
    }
}

/* ---- model ------------------------------------------------------------------ */

#define MODEL_OPS 120

static void run_op(struct gx_win *win, int t, size_t base, const struct wm_op *op,
                   const uint8_t *model, uint8_t *got)
{
    size_t es = gx_datatype_size(op->dtype), off = base + op->offset;
    struct gx_request *req = NULL;
    int rc;
    if (getenv("WIN_TRACE"))
        fprintf(stderr, "rank %d: op %d%s %zu x %s at %zu of rank %d\n", me, op->kind,
                op->request ? " (request)" : "", op->count, gx_datatype_name(op->dtype), off, t);
    if (op->kind == WM_PUT)
        rc = op->request ? gx_iput(win, op->data, op->count, op->dtype, t, off, &req)
                         : gx_put(win, op->data, op->count, op->dtype, t, off);
    else if (op->kind == WM_ACC)
        rc = op->request ? gx_iaccumulate(win, op->data, op->count, op->dtype, op->redop, t, off,
                                          &req)
                         : gx_accumulate(win, op->data, op->count, op->dtype, op->redop, t, off);
    else
        rc = op->request ? gx_iget(win, got, op->count, op->dtype, t, off, &req)
                         : gx_get(win, got, op->count, op->dtype, t, off);
    CHECK(rc == GX_OK, "op %d of %zu x %s at %zu on rank %d", op->kind, op->count,
          gx_datatype_name(op->dtype), off, t);
    if (req) {
        CHECK(gx_wait(req, -1) == GX_OK, "request of op %d to rank %d", op->kind, t);
        gx_request_free(req);
    }
    if (op->flush_after)
        CHECK(gx_win_flush(win, t) == GX_OK, "flush of rank %d", t);
    if (op->kind == WM_GET) {
        CHECK(memcmp(got, model + op->offset, op->count * es) == 0,
              "get of %zu x %s at %zu from rank %d differs from the model", op->count,
              gx_datatype_name(op->dtype), off, t);
    }
}

/* After the barrier that follows every origin's flush, this rank reads its
 * own window, which gx's thread wrote under the transport lock. On one node
 * the barrier runs through shared memory that ThreadSanitizer cannot
 * follow; a flush to itself takes that lock, which makes the order it
 * already has visible to TSan (a no-op otherwise). */
static void sync_own_window(struct gx_win *win)
{
    CHECK(gx_win_flush(win, me) == GX_OK, "flush to itself");
}

static void model(struct gx_comm *comm)
{
    size_t slice = max_bytes < (1u << 20) ? max_bytes : (1u << 20);
    slice += 4096;
    size_t wsize = slice * (size_t)nranks;
    uint8_t *mem = malloc(wsize), *got = malloc(slice);
    for (size_t i = 0; i < wsize; i++)
        mem[i] = wm_initial(me, i);
    struct gx_win *win;
    CHECK(gx_win_create(comm, mem, wsize, &win) == GX_OK, "win_create");
    check_paths(comm, win);
    struct wm_stream *st = calloc((size_t)nranks, sizeof(*st));
    for (int t = 0; t < nranks; t++) {
        st[t] = (struct wm_stream){ .rng = 1000003ull * (uint64_t)me + (uint64_t)t,
                                    .slice = slice, .max_bytes = max_bytes,
                                    .model = malloc(slice), .scratch = malloc(slice) };
        for (size_t i = 0; i < slice; i++)
            st[t].model[i] = wm_initial(t, (size_t)me * slice + i);
    }
    /* Interleave targets, so operations to several ranks are in flight. */
    for (int i = 0; i < MODEL_OPS; i++) {
        for (int k = 0; k < nranks; k++) {
            int t = (me + k) % nranks;
            struct wm_op op;
            wm_next_op(&st[t], &op);
            run_op(win, t, (size_t)me * slice, &op, st[t].model, got);
        }
    }
    CHECK(gx_win_flush(win, GX_WIN_ALL) == GX_OK, "final flush");
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    sync_own_window(win);
    /* Replay every origin's stream to this rank. */
    for (int o = 0; o < nranks; o++) {
        struct wm_stream r = { .rng = 1000003ull * (uint64_t)o + (uint64_t)me,
                               .slice = slice, .max_bytes = max_bytes, .model = malloc(slice),
                               .scratch = malloc(slice) };
        for (size_t i = 0; i < slice; i++)
            r.model[i] = wm_initial(me, (size_t)o * slice + i);
        for (int i = 0; i < MODEL_OPS; i++) {
            struct wm_op op;
            wm_next_op(&r, &op);
        }
        for (size_t i = 0; i < slice; i++)
            CHECK(mem[(size_t)o * slice + i] == r.model[i], "byte %zu of rank %d's slice is "
                  "0x%02x, the model says 0x%02x", i, o, mem[(size_t)o * slice + i], r.model[i]);
        free(r.model);
        free(r.scratch);
    }
    CHECK(gx_win_free(win) == GX_OK, "win_free");
    for (int t = 0; t < nranks; t++) {
        free(st[t].model);
        free(st[t].scratch);
    }
    free(st);
    free(mem);
    free(got);
    printf("PASS rank %d: %d operations to each of %d ranks match the model\n", me,
           MODEL_OPS, nranks);
}

/* ---- concurrent accumulates -------------------------------------------------- */

#define CN 1024
#define CITERS 60

struct cwin {
    int64_t sum[CN];
    uint64_t counter[4];
    double fsum[CN];
    float f32sum[CN];
    int32_t max[CN];
};

static void crange(uint64_t *rng, size_t *a, size_t *n)
{
    *a = (size_t)(wm_next(rng) % CN);
    *n = 1 + (size_t)(wm_next(rng) % (CN - *a));
}

static void concurrent(struct gx_comm *comm)
{
    struct cwin *w = calloc(1, sizeof(*w));
    for (int i = 0; i < CN; i++)
        w->max[i] = -1;
    struct gx_win *win;
    CHECK(gx_win_create(comm, w, sizeof(*w), &win) == GX_OK, "win_create");
    int64_t *vals = malloc(CN * sizeof(int64_t));
    double *fv = malloc(CN * sizeof(double));
    float *f32 = malloc(CN * sizeof(float));
    int32_t *mx = malloc(CN * sizeof(int32_t));
    struct gx_request *reqs[4];
    for (int it = 0; it < CITERS; it++) {
        for (int t = 0; t < nranks; t++) {
            uint64_t rng = (uint64_t)(me * 7919 + t * 104729 + it);
            size_t a, n;
            crange(&rng, &a, &n);
            for (size_t i = 0; i < n; i++) {
                vals[i] = (int64_t)(me + 1) * (it + 1) - (int64_t)i;
                fv[i] = (double)((me + 1) * (it + 2));
                f32[i] = (float)(me + it + 1);
                mx[i] = me * 1000 + it + (int32_t)i;
            }
            uint64_t one = (uint64_t)(me + 1);
            bool req = (it + t) % 2;
            if (req) {
                CHECK(gx_iaccumulate(win, vals, n, GX_INT64, GX_SUM, t,
                                     offsetof(struct cwin, sum) + a * 8, &reqs[0]) == GX_OK, "i64");
                CHECK(gx_iaccumulate(win, &one, 1, GX_UINT64, GX_SUM, t,
                                     offsetof(struct cwin, counter) + (size_t)(it % 4) * 8,
                                     &reqs[1]) == GX_OK, "counter");
                CHECK(gx_iaccumulate(win, fv, n, GX_FLOAT64, GX_SUM, t,
                                     offsetof(struct cwin, fsum) + a * 8, &reqs[2]) == GX_OK,
                      "f64");
                CHECK(gx_iaccumulate(win, mx, n, GX_INT32, GX_MAX, t,
                                     offsetof(struct cwin, max) + a * 4, &reqs[3]) == GX_OK,
                      "max");
                for (int k = 0; k < 4; k++) {
                    CHECK(gx_wait(reqs[k], -1) == GX_OK, "accumulate request %d", k);
                    gx_request_free(reqs[k]);
                }
            } else {
                CHECK(gx_accumulate(win, vals, n, GX_INT64, GX_SUM, t,
                                    offsetof(struct cwin, sum) + a * 8) == GX_OK, "i64");
                CHECK(gx_accumulate(win, &one, 1, GX_UINT64, GX_SUM, t,
                                    offsetof(struct cwin, counter) + (size_t)(it % 4) * 8) ==
                          GX_OK, "counter");
                CHECK(gx_accumulate(win, fv, n, GX_FLOAT64, GX_SUM, t,
                                    offsetof(struct cwin, fsum) + a * 8) == GX_OK, "f64");
                CHECK(gx_accumulate(win, mx, n, GX_INT32, GX_MAX, t,
                                    offsetof(struct cwin, max) + a * 4) == GX_OK, "max");
            }
            CHECK(gx_accumulate(win, f32, n, GX_FLOAT32, GX_SUM, t,
                                offsetof(struct cwin, f32sum) + a * 4) == GX_OK, "f32");
        }
    }
    CHECK(gx_win_flush(win, GX_WIN_ALL) == GX_OK, "flush");
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    sync_own_window(win);
    struct cwin *e = calloc(1, sizeof(*e));
    for (int i = 0; i < CN; i++)
        e->max[i] = -1;
    for (int o = 0; o < nranks; o++) {
        for (int it = 0; it < CITERS; it++) {
            uint64_t rng = (uint64_t)(o * 7919 + me * 104729 + it);
            size_t a, n;
            crange(&rng, &a, &n);
            for (size_t i = 0; i < n; i++) {
                e->sum[a + i] += (int64_t)(o + 1) * (it + 1) - (int64_t)i;
                e->fsum[a + i] += (double)((o + 1) * (it + 2));
                e->f32sum[a + i] += (float)(o + it + 1);
                int32_t m = o * 1000 + it + (int32_t)i;
                if (m > e->max[a + i])
                    e->max[a + i] = m;
            }
            e->counter[it % 4] += (uint64_t)(o + 1);
        }
    }
    for (int i = 0; i < CN; i++) {
        CHECK(w->sum[i] == e->sum[i], "i64 sum[%d] = %lld, expected %lld", i,
              (long long)w->sum[i], (long long)e->sum[i]);
        CHECK(w->fsum[i] == e->fsum[i], "f64 sum[%d] = %g, expected %g", i, w->fsum[i],
              e->fsum[i]);
        CHECK(w->f32sum[i] == e->f32sum[i], "f32 sum[%d] = %g, expected %g", i,
              (double)w->f32sum[i], (double)e->f32sum[i]);
        CHECK(w->max[i] == e->max[i], "max[%d] = %d, expected %d", i, w->max[i], e->max[i]);
    }
    for (int k = 0; k < 4; k++)
        CHECK(w->counter[k] == e->counter[k], "counter %d = %llu, expected %llu", k,
              (unsigned long long)w->counter[k], (unsigned long long)e->counter[k]);
    CHECK(gx_win_free(win) == GX_OK, "win_free");
    free(w);
    free(e);
    free(vals);
    free(fv);
    free(f32);
    free(mx);
    printf("PASS rank %d: %d ranks' overlapping accumulates are exact\n", me, nranks);
}

/* ---- bounds and alignment ----------------------------------------------------- */

static void expect_refused(int rc, const char *what, int t, unsigned win_id, size_t off)
{
    char r[32], o[48], w[32];
    snprintf(r, sizeof(r), "rank %d", t);
    snprintf(o, sizeof(o), "offset %zu", off);
    snprintf(w, sizeof(w), "window %u", win_id);
    CHECK(rc == GX_EINVAL, "%s to rank %d at %zu returned %s, expected GX_EINVAL", what, t, off,
          gx_strerror(rc));
    const char *e = gx_last_error();
    CHECK(strstr(e, r) && strstr(e, o) && strstr(e, w), "%s: the error does not name %s, %s "
          "and %s: %s", what, r, w, o, e);
}

/* An operation the origin may let through: its error comes from the call or
 * from the flush after it. */
static int op_then_flush(int rc, struct gx_win *win, int t)
{
    if (rc != GX_OK)
        return rc;
    return gx_win_flush(win, t);
}

static void bounds(struct gx_comm *comm)
{
    const size_t wsize = 4096 + 8 * (size_t)me; /* sizes differ per rank */
    uint8_t *mem = malloc(wsize + 64);
    memset(mem, 0x5a, wsize + 64);
    struct gx_win *win;
    CHECK(gx_win_create(comm, mem + 8, wsize, &win) == GX_OK, "win_create"); /* 8-aligned */
    unsigned id = 1; /* the first window of the communicator */
    uint8_t src[64] = { 1, 2, 3 }, big_src[40000];
    memset(big_src, 7, sizeof(big_src));
    uint64_t dst[8];
    for (int t = 0; t < nranks; t++) {
        size_t tsize = 4096 + 8 * (size_t)t;
        int rc;
        rc = op_then_flush(gx_put(win, src, 16, GX_UINT8, t, tsize - 8), win, t);
        expect_refused(rc, "put past the end", t, id, tsize - 8);
        rc = op_then_flush(gx_put(win, big_src, sizeof(big_src), GX_UINT8, t, 16), win, t);
        expect_refused(rc, "large put past the end", t, id, 16);
        rc = gx_get(win, dst, 2, GX_INT64, t, tsize - 8);
        expect_refused(rc, "get past the end", t, id, tsize - 8);
        rc = op_then_flush(gx_accumulate(win, src, 1, GX_INT32, GX_SUM, t, tsize), win, t);
        expect_refused(rc, "accumulate at the end", t, id, tsize);
        rc = op_then_flush(gx_accumulate(win, src, 1, GX_INT32, GX_SUM, t, 2), win, t);
        expect_refused(rc, "misaligned accumulate", t, id, 2);
        rc = gx_get(win, dst, 1, GX_INT64, t, 4);
        expect_refused(rc, "misaligned get", t, id, 4);
        rc = op_then_flush(gx_put(win, src, 1, GX_INT64, t, (size_t)1 << 40), win, t);
        expect_refused(rc, "put far out", t, id, (size_t)1 << 40);
        struct gx_request *req;
        rc = gx_iput(win, src, 4, GX_INT32, t, tsize - 4, &req);
        if (rc == GX_OK) {
            rc = gx_wait(req, -1);
            gx_request_free(req);
        }
        expect_refused(rc, "iput past the end", t, id, tsize - 4);
        /* The communicator is fine after a caller's error. */
        CHECK(gx_put(win, src, 8, GX_UINT8, t, 0) == GX_OK && gx_win_flush(win, t) == GX_OK,
              "a valid put after the refusals");
    }
    CHECK(gx_accumulate(win, src, 1, GX_INT32, GX_AVG, 0, 0) == GX_EINVAL &&
              strstr(gx_last_error(), "op"), "GX_AVG refused");
    CHECK(gx_put(win, src, 1, GX_INT32, nranks, 0) == GX_EINVAL &&
              strstr(gx_last_error(), "target"), "target out of range");
    CHECK(gx_win_flush(win, nranks) == GX_EINVAL, "flush of a bad rank");
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    /* Nothing but the valid puts was written: bytes 0..7 from every rank. */
    for (size_t i = 0; i < wsize + 64; i++) {
        uint8_t want = (i >= 8 && i < 16) ? src[i - 8] : 0x5a;
        CHECK(mem[i] == want, "byte %zu of the window's memory is 0x%02x, expected 0x%02x", i,
              mem[i], want);
    }
    CHECK(gx_win_free(win) == GX_OK, "win_free");
    free(mem);
    printf("PASS rank %d: out-of-range and misaligned operations refused, nothing written\n",
           me);
}

/* ---- freed with operations in flight ---------------------------------------------- */

static void free_inflight(struct gx_comm *comm)
{
    const size_t n = 64 * 1024;
    int64_t *mem = calloc(n, sizeof(int64_t));
    int64_t *src = malloc(n * sizeof(int64_t));
    for (size_t i = 0; i < n; i++)
        src[i] = (int64_t)i + 1;
    struct gx_win *win;
    CHECK(gx_win_create(comm, mem, n * sizeof(int64_t), &win) == GX_OK, "win_create");
    const int per = 40;
    struct gx_request **reqs = calloc((size_t)(per * nranks), sizeof(*reqs));
    int k = 0;
    for (int i = 0; i < per; i++) {
        for (int t = 0; t < nranks; t++) {
            size_t cnt = i % 4 == 0 ? 8192 : 16;
            CHECK(gx_iaccumulate(win, src, cnt, GX_INT64, GX_SUM, t, 0, &reqs[k++]) == GX_OK,
                  "iaccumulate %d", i);
            CHECK(gx_accumulate(win, src, 4, GX_INT64, GX_SUM, t, 8 * 100) == GX_OK,
                  "accumulate %d", i);
        }
    }
    CHECK(gx_win_free(win) == GX_OK, "win_free with %d operations in flight", k);
    for (int i = 0; i < k; i++) {
        int done = 0;
        CHECK(gx_test(reqs[i], &done) == GX_OK && done, "request %d not complete after free", i);
        gx_request_free(reqs[i]);
    }
    for (size_t i = 0; i < 8192; i++) {
        int64_t want = 0;
        for (int j = 0; j < per; j++)
            want += (j % 4 == 0 || i < 16) ? (int64_t)(i + 1) : 0;
        if (i >= 100 && i < 104)
            want += per * (int64_t)(i - 100 + 1);
        want *= nranks;
        CHECK(mem[i] == want, "element %zu is %lld, expected %lld", i, (long long)mem[i],
              (long long)want);
    }
    free(reqs);
    free(mem);
    free(src);
    printf("PASS rank %d: window freed with %d operations in flight, all applied\n", me, k);
}

/* ---- a target killed mid-put ---------------------------------------------------- */

static void kill_target(struct gx_comm *comm)
{
    const size_t n = 256 * 1024;
    char *mem = calloc(1, n), *src = calloc(1, n);
    struct gx_win *win;
    CHECK(gx_win_create(comm, mem, n, &win) == GX_OK, "win_create");
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    if (me == 1) {
        for (int i = 0; i < 20; i++)
            (void)gx_put(win, src, n, GX_UINT8, 0, 0);
        fflush(stdout);
        raise(SIGKILL);
    }
    int rc = GX_OK;
    for (int i = 0; i < 100000 && rc == GX_OK; i++) {
        if (i % 3 == 0)
            rc = gx_put(win, src, (size_t)(1 + i % n), GX_UINT8, 1, 0);
        else if (i % 3 == 1)
            rc = gx_accumulate(win, src, 64, GX_INT32, GX_SUM, 1, 0);
        else
            rc = gx_win_flush(win, 1);
    }
    if (rc == GX_OK)
        rc = gx_win_flush(win, 1);
    CHECK(GX_IS_PEER_ERROR(rc) || GX_IS_ABORTED(rc), "operations to the dead rank 1 returned %s",
          gx_strerror(rc));
    CHECK(strstr(gx_last_error(), "rank 1"), "the error does not name rank 1: %s",
          gx_last_error());
    printf("PASS rank %d: operations to the killed rank 1 failed: %s\n", me,
           gx_last_error());
    gx_comm_destroy(comm);
    exit(0);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct gx_comm *comm;
    int rc = gx_comm_init_env(&comm);
    CHECK(rc == GX_OK, "init: %s", gx_strerror(rc));
    me = gx_comm_rank(comm);
    nranks = gx_comm_size(comm);
    if (getenv("WIN_MAX_BYTES"))
        max_bytes = strtoull(getenv("WIN_MAX_BYTES"), NULL, 10);
    const char *mode = argc > 1 ? argv[1] : "model";
    if (strcmp(mode, "model") == 0)
        model(comm);
    else if (strcmp(mode, "concurrent") == 0)
        concurrent(comm);
    else if (strcmp(mode, "bounds") == 0)
        bounds(comm);
    else if (strcmp(mode, "free") == 0)
        free_inflight(comm);
    else if (strcmp(mode, "kill") == 0)
        kill_target(comm);
    else
        CHECK(0, "unknown mode %s", mode);
    CHECK(gx_comm_finalize(comm) == GX_OK, "finalize");
    gx_comm_destroy(comm);
    return 0;
}
