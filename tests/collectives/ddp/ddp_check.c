/*
 * ddp_check - multi-process checks of the DDP bucket scheduler. Run under
 * gx-run. Modes:
 *   ddp_check order      random ready orders per rank and iteration, one
 *                        thread; copy and bucket-view modes, average and sum;
 *                        results bit-exact; the rebuild agrees across ranks
 *   ddp_check threads    the same with 4 threads marking concurrently with
 *                        random delays (thread interleavings)
 *   ddp_check unused     find_unused_parameters with a different unused set
 *                        per rank; no_sync gradient accumulation
 *   ddp_check hooks      fp16 / bf16 compression within tolerance, a custom
 *                        hook, a hook failing on one rank
 *   ddp_check broadcast  gx_ddp_broadcast_params from a non-zero root
 *   ddp_check bad        bad input: each error names the parameter or rank on
 *                        every rank, and the next iteration works again
 *   ddp_check dead       rank 1 dies in the middle of backward: the others'
 *                        finish fails (peer error or timeout), no hang
 * Seeds are fixed (rank, iteration), so a failure reproduces.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gx/gx.h"

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL rank %d line %d: ", my_rank, __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, " [last error: %s]\n", gx_last_error());           \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static int my_rank = -1, nranks = 0;
static struct gx_comm *comm;

/* Element counts (float32) of a small "model": several buckets with the
 * caps below, parameters from 1 element to 1.2 MB. */
static const size_t sizes[] = { 1000, 10, 300000, 7, 5000, 250000, 1, 64, 40000, 3, 0, 777 };
#define NP (sizeof(sizes) / sizeof(sizes[0]))
static char names[NP][32];
static float *grads[NP];

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void shuffle(size_t *a, size_t n, uint64_t *s)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(rng_next(s) % i);
        size_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* Gradient values: multiples of 1/8 below 2^10, so every sum over ranks is
 * exact in float32 and the average is the exact sum divided once. */
static float grad_value(int rank, size_t p, size_t i, int iter)
{
    return (float)(rank + 1) * 0.25f + (float)(p % 5) * 0.5f + (float)(i % 7) * 0.125f +
           (float)(iter % 4);
}

static float expected(size_t p, size_t i, int iter, enum gx_redop op, int accumulate)
{
    float sum = 0;
    for (int r = 0; r < nranks; r++)
        sum += grad_value(r, p, i, iter) * (float)accumulate;
    return op == GX_AVG ? sum / (float)nranks : sum;
}

static struct gx_ddp *make_ddp(const struct gx_ddp_config *cfg)
{
    struct gx_ddp_param params[NP];
    for (size_t p = 0; p < NP; p++) {
        snprintf(names[p], sizeof(names[p]), "layer%zu.%s", p / 2, p % 2 ? "bias" : "weight");
        params[p] = (struct gx_ddp_param)GX_DDP_PARAM_INIT;
        params[p].count = sizes[p];
        params[p].dtype = GX_FLOAT32;
        params[p].name = names[p];
        if (!grads[p])
            grads[p] = calloc(sizes[p] + 1, sizeof(float));
    }
    struct gx_ddp *ddp = NULL;
    CHECK(gx_ddp_create(comm, params, NP, cfg, &ddp) == GX_OK, "gx_ddp_create");
    return ddp;
}

static float *grad_ptr(struct gx_ddp *ddp, size_t p, int view)
{
    return view ? gx_ddp_grad_buffer(ddp, p) : grads[p];
}

/* ---- marking from one or several threads ---------------------------------- */

struct marker {
    struct gx_ddp *ddp;
    const size_t *order;
    size_t first, step, n;
    int view, iter;
    uint64_t seed;
    int rc;
};

static void *mark_thread(void *arg)
{
    struct marker *m = arg;
    for (size_t k = m->first; k < m->n; k += m->step) {
        size_t p = m->order[k];
        float *g = grad_ptr(m->ddp, p, m->view);
        for (size_t i = 0; i < sizes[p]; i++)
            g[i] = grad_value(my_rank, p, i, m->iter);
        /* A little "compute" of random length so threads interleave. */
        struct timespec ts = { 0, (long)(rng_next(&m->seed) % 200000) };
        nanosleep(&ts, NULL);
        int rc = gx_ddp_grad_ready(m->ddp, p, m->view ? NULL : g);
        if (rc != GX_OK && m->rc == GX_OK)
            m->rc = rc;
    }
    return NULL;
}

static void backward(struct gx_ddp *ddp, int iter, int nthreads, int view)
{
    size_t order[NP];
    for (size_t p = 0; p < NP; p++)
        order[p] = p;
    uint64_t seed = 1000003ull * (uint64_t)(my_rank + 1) + (uint64_t)iter;
    shuffle(order, NP, &seed);
    pthread_t th[8];
    struct marker m[8];
    for (int t = 0; t < nthreads; t++) {
        m[t] = (struct marker){ ddp, order, (size_t)t, (size_t)nthreads, NP, view, iter,
                                seed + (uint64_t)t * 77, GX_OK };
        if (nthreads == 1)
            mark_thread(&m[t]);
        else
            CHECK(pthread_create(&th[t], NULL, mark_thread, &m[t]) == 0, "pthread_create");
    }
    for (int t = 0; t < nthreads && nthreads > 1; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < nthreads; t++)
        CHECK(m[t].rc == GX_OK, "grad_ready in thread %d: %s", t, gx_strerror(m[t].rc));
}

static void verify(struct gx_ddp *ddp, int iter, enum gx_redop op, int view, const char *what)
{
    for (size_t p = 0; p < NP; p++) {
        const float *g = grad_ptr(ddp, p, view);
        for (size_t i = 0; i < sizes[p]; i++) {
            float want = expected(p, i, iter, op, 1);
            CHECK(g[i] == want, "%s iteration %d: parameter %zu element %zu is %g, want %g",
                  what, iter, p, i, (double)g[i], (double)want);
        }
    }
}

/* Same bucket layout on every rank? Compare a hash of it. */
static void check_layout_agrees(struct gx_ddp *ddp)
{
    uint64_t h = 1469598103934665603ull;
    int nb = gx_ddp_bucket_count(ddp);
    for (int b = 0; b < nb; b++) {
        struct gx_ddp_bucket info = GX_DDP_BUCKET_INIT;
        CHECK(gx_ddp_bucket_info(ddp, b, &info) == GX_OK, "bucket_info %d", b);
        for (size_t j = 0; j < info.num_params; j++)
            h = (h ^ (info.params[j] + 1)) * 1099511628211ull;
        h = (h ^ 0xffff) * 1099511628211ull;
    }
    uint64_t *all = calloc((size_t)nranks, sizeof(uint64_t));
    CHECK(gx_allgather(comm, &h, all, 1, GX_UINT64) == GX_OK, "allgather of layout hash");
    for (int r = 0; r < nranks; r++)
        CHECK(all[r] == all[0], "rank %d has a different bucket layout than rank 0", r);
    free(all);
}

static void run_order(int nthreads)
{
    for (int view = 0; view <= 1; view++)
        for (int opi = 0; opi <= 1; opi++) {
            enum gx_redop op = opi ? GX_SUM : GX_AVG;
            struct gx_ddp_config cfg = GX_DDP_CONFIG_INIT;
            cfg.bucket_cap_bytes = 256 << 10;
            cfg.first_bucket_bytes = 16 << 10;
            cfg.gradient_as_bucket_view = view;
            cfg.op = op;
            struct gx_ddp *ddp = make_ddp(&cfg);
            int before = gx_ddp_bucket_count(ddp);
            CHECK(before >= 4, "expected several buckets, got %d", before);
            check_layout_agrees(ddp);
            char what[64];
            snprintf(what, sizeof(what), "%s/%s/%d threads", view ? "view" : "copy",
                     gx_redop_name(op), nthreads);
            for (int iter = 0; iter < 6; iter++) {
                backward(ddp, iter, nthreads, view);
                CHECK(gx_ddp_finish(ddp, 20000) == GX_OK, "%s finish %d", what, iter);
                verify(ddp, iter, op, view, what);
                if (iter == 0)
                    check_layout_agrees(ddp); /* rebuilt from rank 0's order */
            }
            struct gx_ddp_stats st = GX_DDP_STATS_INIT;
            CHECK(gx_ddp_get_stats(ddp, &st) == GX_OK, "stats");
            CHECK(st.iterations == 6 && st.rebuilt == 1, "stats: %llu iterations, rebuilt %d",
                  (unsigned long long)st.iterations, st.rebuilt);
            CHECK(st.buckets_reduced == (uint64_t)(before + 5 * st.buckets),
                  "stats: %llu bucket reductions, want %d + 5 x %d",
                  (unsigned long long)st.buckets_reduced, before, st.buckets);
            size_t total = 0;
            for (size_t p = 0; p < NP; p++)
                total += sizes[p] * sizeof(float);
            CHECK(st.bytes_reduced == 6 * total, "stats: %llu bytes reduced, want 6 x %zu",
                  (unsigned long long)st.bytes_reduced, total);
            CHECK(st.overlap_seconds <= st.comm_seconds + 1e-9, "overlap %g > comm %g",
                  st.overlap_seconds, st.comm_seconds);
            if (my_rank == 0)
                printf("%s: %d -> %d buckets, comm %.1f ms, overlapped %.1f ms, "
                       "finish waited %.1f ms\n", what, before, st.buckets,
                       st.comm_seconds * 1e3, st.overlap_seconds * 1e3,
                       st.finish_wait_seconds * 1e3);
            gx_ddp_destroy(ddp);
        }
}

/* ---- find_unused_parameters and no_sync ------------------------------------- */

static void run_unused(void)
{
    struct gx_ddp_config cfg = GX_DDP_CONFIG_INIT;
    cfg.bucket_cap_bytes = 128 << 10;
    cfg.first_bucket_bytes = 8 << 10;
    cfg.find_unused_parameters = 1;
    struct gx_ddp *ddp = make_ddp(&cfg);
    for (int iter = 0; iter < 4; iter++) {
        /* Rank r leaves out parameter (r + iter) % NP: its gradient counts as
         * zero, and the others' contributions still arrive. */
        size_t skip = (size_t)(my_rank + iter) % NP;
        for (size_t p = NP; p-- > 0;) {
            if (p == skip)
                continue;
            for (size_t i = 0; i < sizes[p]; i++)
                grads[p][i] = grad_value(my_rank, p, i, iter);
            CHECK(gx_ddp_grad_ready(ddp, p, grads[p]) == GX_OK, "grad_ready %zu", p);
        }
        CHECK(gx_ddp_finish(ddp, 20000) == GX_OK, "finish with unused parameters");
        for (size_t p = 0; p < NP; p++) {
            const float *g = gx_ddp_grad_buffer(ddp, p);
            for (size_t i = 0; i < sizes[p]; i++) {
                float sum = 0;
                for (int r = 0; r < nranks; r++)
                    if ((size_t)(r + iter) % NP != p)
                        sum += grad_value(r, p, i, iter);
                float want = sum / (float)nranks;
                CHECK(g[i] == want, "unused iter %d: param %zu elem %zu is %g, want %g", iter, p,
                      i, (double)g[i], (double)want);
                if (p != skip)
                    CHECK(grads[p][i] == want, "unused: copy-back of param %zu", p);
            }
        }
    }
    struct gx_ddp_stats st = GX_DDP_STATS_INIT;
    CHECK(gx_ddp_get_stats(ddp, &st) == GX_OK, "stats");
    CHECK(st.unused_params == 4, "unused_params %llu, want 4", (unsigned long long)st.unused_params);
    gx_ddp_destroy(ddp);

    /* no_sync: three local accumulation steps, then a synchronised one. */
    cfg.find_unused_parameters = 0;
    ddp = make_ddp(&cfg);
    for (size_t p = 0; p < NP; p++)
        memset(grads[p], 0, sizes[p] * sizeof(float));
    for (int step = 0; step < 4; step++) {
        CHECK(gx_ddp_no_sync(ddp, step < 3) == GX_OK, "no_sync");
        for (size_t p = NP; p-- > 0;) {
            for (size_t i = 0; i < sizes[p]; i++)
                grads[p][i] += grad_value(my_rank, p, i, 1);
            CHECK(gx_ddp_grad_ready(ddp, p, grads[p]) == GX_OK, "grad_ready %zu", p);
        }
        CHECK(gx_ddp_finish(ddp, 20000) == GX_OK, "finish step %d", step);
    }
    for (size_t p = 0; p < NP; p++)
        for (size_t i = 0; i < sizes[p]; i++)
            CHECK(grads[p][i] == expected(p, i, 1, GX_AVG, 4), "no_sync: param %zu elem %zu "
                  "is %g", p, i, (double)grads[p][i]);
    struct gx_ddp_stats st2 = GX_DDP_STATS_INIT;
    CHECK(gx_ddp_get_stats(ddp, &st2) == GX_OK && st2.no_sync_iterations == 3 &&
          st2.iterations == 1, "no_sync stats");
    gx_ddp_destroy(ddp);
}

/* ---- hooks ------------------------------------------------------------------ */

struct counting_state {
    int starts, completes, fail_on_rank;
};

static int counting_start(void *state, struct gx_comm *c, struct gx_ddp_bucket *b,
                          struct gx_request **req)
{
    struct counting_state *s = state;
    if (s->fail_on_rank == my_rank && b->index == 1)
        return GX_EINVAL;
    s->starts++;
    return gx_iallreduce(c, b->data, b->data, b->count, b->dtype, b->op, req);
}

static int counting_complete(void *state, struct gx_ddp_bucket *b)
{
    ((struct counting_state *)state)->completes++;
    return GX_OK;
}

static void run_hooks(void)
{
    struct gx_ddp_config cfg = GX_DDP_CONFIG_INIT;
    cfg.bucket_cap_bytes = 256 << 10;
    cfg.first_bucket_bytes = 16 << 10;
    struct gx_ddp *ddp = make_ddp(&cfg);
    const struct gx_ddp_comm_hook *hooks[2] = { gx_ddp_fp16_compress_hook(),
                                                gx_ddp_bf16_compress_hook() };
    for (int h = 0; h < 2; h++) {
        CHECK(gx_ddp_set_comm_hook(ddp, hooks[h], NULL) == GX_OK, "set hook %s", hooks[h]->name);
        for (int iter = 0; iter < 2; iter++) {
            backward(ddp, iter, 1, 0);
            CHECK(gx_ddp_finish(ddp, 20000) == GX_OK, "finish with %s", hooks[h]->name);
            /* f16: 11 significant bits, bf16: 8; plus one rounding per
             * partial sum of the reduction. */
            double rel = h == 0 ? 4e-3 : 3e-2;
            for (size_t p = 0; p < NP; p++)
                for (size_t i = 0; i < sizes[p]; i++) {
                    double want = expected(p, i, iter, GX_AVG, 1);
                    double err = grads[p][i] - want;
                    CHECK((err < 0 ? -err : err) <= rel * want + 1e-6, "%s: param %zu elem %zu "
                          "is %g, want %g", hooks[h]->name, p, i, (double)grads[p][i], want);
                }
        }
    }
    /* A custom hook sees every bucket once per iteration. */
    struct counting_state cs = { 0, 0, -1 };
    struct gx_ddp_comm_hook mine = GX_DDP_COMM_HOOK_INIT;
    mine.name = "counting";
    mine.start = counting_start;
    mine.complete = counting_complete;
    CHECK(gx_ddp_set_comm_hook(ddp, &mine, &cs) == GX_OK, "set counting hook");
    backward(ddp, 3, 1, 0);
    CHECK(gx_ddp_finish(ddp, 20000) == GX_OK, "finish with counting hook");
    verify(ddp, 3, GX_AVG, 0, "counting hook");
    int nb = gx_ddp_bucket_count(ddp);
    CHECK(cs.starts == nb && cs.completes == nb, "hook saw %d starts, %d completes for %d "
          "buckets", cs.starts, cs.completes, nb);

    /* The hook fails on the last rank: every rank's finish fails naming it,
     * and the next iteration works. */
    cs.fail_on_rank = nranks - 1;
    backward(ddp, 1, 1, 0);
    int rc = gx_ddp_finish(ddp, 20000);
    if (my_rank == nranks - 1) {
        CHECK(rc == GX_EINVAL, "failing hook: finish returned %s", gx_strerror(rc));
        CHECK(strstr(gx_last_error(), "counting") != NULL, "message names the hook");
    } else {
        char want[32];
        snprintf(want, sizeof(want), "rank %d", nranks - 1);
        CHECK(rc == GX_EMISMATCH, "peer of failing hook: finish returned %s", gx_strerror(rc));
        CHECK(strstr(gx_last_error(), want) && strstr(gx_last_error(), "counting"),
              "message names the rank and hook");
    }
    cs.fail_on_rank = -1;
    backward(ddp, 2, 1, 0);
    CHECK(gx_ddp_finish(ddp, 20000) == GX_OK, "iteration after the hook failure");
    verify(ddp, 2, GX_AVG, 0, "after hook failure");
    gx_ddp_destroy(ddp);
}

/* ---- broadcast -------------------------------------------------------------- */

static void run_broadcast(void)
{
    struct gx_ddp_param params[3];
    float *data[3];
    size_t counts[3] = { 5, 100000, 1 };
    for (int i = 0; i < 3; i++) {
        data[i] = malloc(counts[i] * sizeof(float));
        for (size_t k = 0; k < counts[i]; k++)
            data[i][k] = (float)(my_rank * 1000 + i) + (float)(k % 100);
        params[i] = (struct gx_ddp_param){ sizeof(struct gx_ddp_param), counts[i], GX_FLOAT32,
                                           NULL, i == 1 ? NULL : data[i] };
    }
    struct gx_ddp *ddp;
    CHECK(gx_ddp_create(comm, params, 3, NULL, &ddp) == GX_OK, "create");
    CHECK(gx_ddp_set_param_data(ddp, 1, data[1]) == GX_OK, "set_param_data");
    int root = nranks - 1;
    CHECK(gx_ddp_broadcast_params(ddp, root) == GX_OK, "broadcast_params");
    for (int i = 0; i < 3; i++)
        for (size_t k = 0; k < counts[i]; k++)
            CHECK(data[i][k] == (float)(root * 1000 + i) + (float)(k % 100), "param %d elem %zu",
                  i, k);
    gx_ddp_destroy(ddp);
    for (int i = 0; i < 3; i++)
        free(data[i]);
}

/* ---- bad input -------------------------------------------------------------- */

static void expect_everywhere(int rc, int bad_rank, int bad_status, const char *local_text,
                              const char *what)
{
    const char *msg = gx_last_error();
    if (my_rank == bad_rank) {
        CHECK(rc == bad_status, "%s: the faulty rank got %s", what, gx_strerror(rc));
        CHECK(strstr(msg, local_text) != NULL, "%s: message '%s' lacks '%s'", what, msg,
              local_text);
    } else {
        char r[32];
        snprintf(r, sizeof(r), "rank %d", bad_rank);
        CHECK(rc == GX_EMISMATCH, "%s: a peer got %s", what, gx_strerror(rc));
        CHECK(strstr(msg, r) != NULL, "%s: peer message '%s' does not name %s", what, msg, r);
    }
    if (my_rank == 0)
        printf("ok: %s -> '%s'\n", what, msg);
}

static void good_iteration(struct gx_ddp *ddp, int iter, const char *after)
{
    backward(ddp, iter, 1, 0);
    CHECK(gx_ddp_finish(ddp, 20000) == GX_OK, "the iteration after %s failed", after);
    verify(ddp, iter, GX_AVG, 0, after);
}

static void run_bad(void)
{
    struct gx_ddp_config cfg = GX_DDP_CONFIG_INIT;
    cfg.bucket_cap_bytes = 256 << 10;
    cfg.first_bucket_bytes = 16 << 10;
    struct gx_ddp *ddp = make_ddp(&cfg);
    int bad = nranks - 1;

    /* Index out of range. */
    backward(ddp, 0, 1, 0);
    if (my_rank == bad) {
        CHECK(gx_ddp_grad_ready(ddp, NP + 3, grads[0]) == GX_EINVAL, "out of range accepted");
        CHECK(strstr(gx_last_error(), "out of range"), "message: %s", gx_last_error());
    }
    expect_everywhere(gx_ddp_finish(ddp, 20000), bad, GX_EINVAL, "out of range",
                      "index out of range");
    good_iteration(ddp, 1, "index out of range");

    /* Marked twice. */
    backward(ddp, 2, 1, 0);
    if (my_rank == bad)
        CHECK(gx_ddp_grad_ready(ddp, 4, grads[4]) == GX_EINVAL, "marked twice accepted");
    expect_everywhere(gx_ddp_finish(ddp, 20000), bad, GX_EINVAL, "'layer2.weight' on rank",
                      "marked twice");
    good_iteration(ddp, 3, "marked twice");

    /* A parameter never marked: the faulty rank's finish times out naming
     * it, the others fail with a mismatch naming the rank, nobody hangs. */
    for (size_t p = NP; p-- > 0;) {
        if (my_rank == bad && p == 5)
            continue;
        for (size_t i = 0; i < sizes[p]; i++)
            grads[p][i] = grad_value(my_rank, p, i, 0);
        CHECK(gx_ddp_grad_ready(ddp, p, grads[p]) == GX_OK, "grad_ready %zu", p);
    }
    expect_everywhere(gx_ddp_finish(ddp, 1500), bad, GX_ETIMEOUT, "5 'layer2.bias'",
                      "parameter never marked");
    good_iteration(ddp, 0, "a missing parameter");

    /* NULL gradient without bucket views. */
    backward(ddp, 1, 1, 0);
    if (my_rank == bad)
        CHECK(gx_ddp_grad_ready(ddp, 0, NULL) == GX_EINVAL, "NULL grad accepted");
    expect_everywhere(gx_ddp_finish(ddp, 20000), bad, GX_EINVAL, "grad is NULL", "NULL grad");

    /* Settings calls in the middle of an iteration. */
    CHECK(gx_ddp_grad_ready(ddp, 0, grads[0]) == GX_OK, "grad_ready");
    CHECK(gx_ddp_no_sync(ddp, 1) == GX_ESTATE, "no_sync during an iteration accepted");
    CHECK(gx_ddp_set_comm_hook(ddp, NULL, NULL) == GX_ESTATE, "set_comm_hook during iteration");
    for (size_t p = 1; p < NP; p++)
        CHECK(gx_ddp_grad_ready(ddp, p, grads[p]) == GX_OK, "grad_ready %zu", p);
    CHECK(gx_ddp_finish(ddp, 20000) == GX_OK, "finish");

    /* Broadcast root out of range (local, before any communication). */
    CHECK(gx_ddp_broadcast_params(ddp, nranks) == GX_EINVAL, "bad root accepted");
    CHECK(strstr(gx_last_error(), "root rank"), "message: %s", gx_last_error());
    gx_ddp_destroy(ddp);

    /* A datatype differing on one rank: every rank's create fails naming the
     * parameter and the rank. */
    struct gx_ddp_param params[3];
    for (int i = 0; i < 3; i++)
        params[i] = (struct gx_ddp_param){ sizeof(struct gx_ddp_param), 10, GX_FLOAT32,
                                           i == 2 ? "head.weight" : NULL, NULL };
    if (my_rank == bad)
        params[2].dtype = GX_FLOAT16;
    struct gx_ddp *d2 = NULL;
    int rc = gx_ddp_create(comm, params, 3, NULL, &d2);
    CHECK(rc == GX_EMISMATCH && d2 == NULL, "datatype mismatch: %s", gx_strerror(rc));
    char r[32];
    snprintf(r, sizeof(r), "rank %d", bad);
    CHECK(strstr(gx_last_error(), "'head.weight'") && strstr(gx_last_error(), r) &&
          strstr(gx_last_error(), "float16"), "datatype mismatch message: %s", gx_last_error());
    if (my_rank == 0)
        printf("ok: datatype mismatch -> '%s'\n", gx_last_error());

    /* A different number of parameters. */
    rc = gx_ddp_create(comm, params, my_rank == bad ? 2 : 3, NULL, &d2);
    CHECK(rc == GX_EMISMATCH && strstr(gx_last_error(), "number of parameters"),
          "count mismatch: %s", gx_strerror(rc));

    /* Invalid arguments on one rank: it fails with EINVAL, the others with
     * a mismatch naming it, at once. */
    params[2].dtype = GX_FLOAT32;
    struct gx_ddp_config bad_cfg = GX_DDP_CONFIG_INIT;
    if (my_rank == bad)
        bad_cfg.op = GX_MAX;
    rc = gx_ddp_create(comm, params, 3, &bad_cfg, &d2);
    expect_everywhere(rc, bad, GX_EINVAL, "GX_AVG or GX_SUM", "invalid op on one rank");
}

static void run_dead(void)
{
    struct gx_ddp_config cfg = GX_DDP_CONFIG_INIT;
    cfg.bucket_cap_bytes = 256 << 10;
    cfg.first_bucket_bytes = 16 << 10;
    struct gx_ddp *ddp = make_ddp(&cfg);
    backward(ddp, 0, 1, 0);
    CHECK(gx_ddp_finish(ddp, 20000) == GX_OK, "first iteration");
    for (size_t p = NP; p-- > 0;) {
        if (my_rank == 1 && p == NP / 2)
            _exit(9); /* dies with some buckets launched */
        CHECK(gx_ddp_grad_ready(ddp, p, grads[p]) == GX_OK, "grad_ready %zu", p);
    }
    int rc = gx_ddp_finish(ddp, 5000);
    CHECK(rc != GX_OK, "finish succeeded although rank 1 died");
    printf("PASS rank %d: finish after rank 1 died returned %s: %s\n", my_rank, gx_strerror(rc),
           gx_last_error());
    fflush(stdout);
    gx_comm_abort(comm);
    gx_ddp_destroy(ddp);
    gx_comm_destroy(comm);
    exit(0);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "order";
    CHECK(gx_comm_init_env(&comm) == GX_OK, "gx_comm_init_env");
    my_rank = gx_comm_rank(comm);
    nranks = gx_comm_size(comm);
    if (!strcmp(mode, "order"))
        run_order(1);
    else if (!strcmp(mode, "threads"))
        run_order(4);
    else if (!strcmp(mode, "unused"))
        run_unused();
    else if (!strcmp(mode, "hooks"))
        run_hooks();
    else if (!strcmp(mode, "broadcast"))
        run_broadcast();
    else if (!strcmp(mode, "bad"))
        run_bad();
    else if (!strcmp(mode, "dead"))
        run_dead();
    else
        CHECK(0, "unknown mode %s", mode);
    CHECK(gx_comm_finalize(comm) == GX_OK, "finalize");
    gx_comm_destroy(comm);
    for (size_t p = 0; p < NP; p++)
        free(grads[p]);
    printf("PASS rank %d: %s\n", my_rank, mode);
    return 0;
}
