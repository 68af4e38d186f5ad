/*
 * ddp_overlap_bench - how much gradient communication the DDP bucket
 * scheduler hides behind backward. Run under gx-run:
 *
 *   gx-run -n 2 build/bin/ddp_overlap_bench [--model resnet50|gpt125m]
 *       [--ratio 0.5,1,2] [--layer-us U] [--compute sleep|spin] [--iters N]
 *       [--warmup W] [--bucket-cap BYTES] [--first-bucket BYTES] [--copy]
 *       [--record FILE]
 *
 * A synthetic backward pass walks a real model's parameter list (ResNet-50's
 * 161 tensors, 25.6M float32 parameters, or a GPT-2-small-sized 125M
 * transformer) from the last layer to the first, spending the same compute
 * time on every layer, then marks the layer's gradient ready. Three ways of
 * running an iteration, each timed from a barrier to the end of backward's
 * communication (median over --iters):
 *   none   compute only, no communication (the floor);
 *   after  compute, then one gx_allreduce of all gradients (one flat buffer);
 *   ddp    gx_ddp_grad_ready() per layer as it finishes, gx_ddp_finish().
 * comm = after - none is what communication costs when nothing hides it;
 * the fraction hidden by DDP is (after - ddp) / (after - none).
 *
 * The per-layer compute time is --layer-us, or for each --ratio R, R times
 * the measured time of the all-reduce of all gradients, spread evenly over
 * the layers (R >= 1: compute >= comm, where the goal is >= 70% hidden).
 * --compute sleep (default) models an accelerator: the CPU is free for the
 * communication meanwhile; spin burns the core like CPU training would (on a
 * machine with fewer cores than ranks x 2 threads that measures contention
 * more than overlap).
 *
 * Buckets are gradient views by default (no copies, as the benchmark writes
 * no real gradients); --copy measures the copy-in/copy-out mode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gx/gx.h"

#define MAX_PARAMS 256

struct layer_list {
    size_t n;
    size_t count[MAX_PARAMS];
    char name[MAX_PARAMS][48];
};

static void add(struct layer_list *l, const char *name, size_t count)
{
    if (l->n < MAX_PARAMS) {
        snprintf(l->name[l->n], sizeof(l->name[0]), "%s", name);
        l->count[l->n++] = count;
    }
}

/* torchvision's resnet50(), in registration (forward) order. */
static void resnet50(struct layer_list *l)
{
    char nm[48];
    add(l, "conv1.weight", 64 * 3 * 7 * 7);
    add(l, "bn1.weight", 64);
    add(l, "bn1.bias", 64);
    static const int planes[4] = { 64, 128, 256, 512 }, blocks[4] = { 3, 4, 6, 3 };
    size_t inplanes = 64;
    for (int s = 0; s < 4; s++)
        for (int b = 0; b < blocks[s]; b++) {
            size_t p = (size_t)planes[s];
            const size_t conv[3] = { p * inplanes, p * p * 9, 4 * p * p };
            const size_t bn[3] = { p, p, 4 * p };
            for (int c = 0; c < 3; c++) {
                snprintf(nm, sizeof(nm), "layer%d.%d.conv%d.weight", s + 1, b, c + 1);
                add(l, nm, conv[c]);
                snprintf(nm, sizeof(nm), "layer%d.%d.bn%d.weight", s + 1, b, c + 1);
                add(l, nm, bn[c]);
                snprintf(nm, sizeof(nm), "layer%d.%d.bn%d.bias", s + 1, b, c + 1);
                add(l, nm, bn[c]);
            }
            if (b == 0) {
                snprintf(nm, sizeof(nm), "layer%d.0.downsample.0.weight", s + 1);
                add(l, nm, 4 * p * inplanes);
                snprintf(nm, sizeof(nm), "layer%d.0.downsample.1.weight", s + 1);
                add(l, nm, 4 * p);
                snprintf(nm, sizeof(nm), "layer%d.0.downsample.1.bias", s + 1);
                add(l, nm, 4 * p);
            }
            inplanes = 4 * p;
        }
    add(l, "fc.weight", 1000 * 2048);
    add(l, "fc.bias", 1000);
}

/* GPT-2 small shape (124M): 12 layers, d=768, vocab 50257, context 1024. */
static void gpt125m(struct layer_list *l)
{
    char nm[48];
    const size_t d = 768;
    add(l, "wte.weight", 50257 * d);
    add(l, "wpe.weight", 1024 * d);
    for (int i = 0; i < 12; i++) {
        static const char *const part[] = { "ln_1.weight", "ln_1.bias", "attn.c_attn.weight",
                                            "attn.c_attn.bias", "attn.c_proj.weight",
                                            "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                            "mlp.c_fc.weight", "mlp.c_fc.bias",
                                            "mlp.c_proj.weight", "mlp.c_proj.bias" };
        const size_t cnt[] = { d, d, d * 3 * d, 3 * d, d * d, d, d, d, d * 4 * d, 4 * d,
                               4 * d * d, d };
        for (int k = 0; k < 12; k++) {
            snprintf(nm, sizeof(nm), "h.%d.%s", i, part[k]);
            add(l, nm, cnt[k]);
        }
    }
    add(l, "ln_f.weight", d);
    add(l, "ln_f.bias", d);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int spin_compute;

/* Compute until `until_ms` (absolute): layer k of an iteration ends at
 * start + k * layer time, so timer overshoot of one layer does not add up
 * over 161 layers. */
static void compute_until(double until_ms)
{
    if (spin_compute) {
        while (now_ms() < until_ms)
            ;
        return;
    }
    struct timespec ts;
    ts.tv_sec = (time_t)(until_ms / 1e3);
    ts.tv_nsec = (long)((until_ms - (double)ts.tv_sec * 1e3) * 1e6);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int rank, nranks;
static struct gx_comm *comm;

#define DIE(...)                                                               \
    do {                                                                       \
        fprintf(stderr, "ddp_overlap_bench rank %d: ", rank);                  \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, ": %s\n", gx_last_error());                            \
        exit(1);                                                               \
    } while (0)

enum mode { MODE_NONE, MODE_AFTER, MODE_DDP };

/* One iteration; returns its time in ms (the slowest rank's). */
static double iteration(enum mode m, const struct layer_list *l, double layer_us, float *flat,
                        size_t total, struct gx_ddp *ddp, float **grads, int view)
{
    if (gx_barrier(comm) != GX_OK)
        DIE("barrier");
    double t0 = now_ms();
    for (size_t i = l->n, k = 1; i-- > 0; k++) {
        if (layer_us > 0)
            compute_until(t0 + (double)k * layer_us * 1e-3);
        if (m == MODE_DDP && gx_ddp_grad_ready(ddp, i, view ? NULL : grads[i]) != GX_OK)
            DIE("grad_ready %zu", i);
    }
    if (m == MODE_AFTER && gx_allreduce(comm, flat, flat, total, GX_FLOAT32, GX_AVG) != GX_OK)
        DIE("allreduce");
    if (m == MODE_DDP && gx_ddp_finish(ddp, 120000) != GX_OK)
        DIE("finish");
    double t = now_ms() - t0, slowest = 0;
    if (gx_allreduce(comm, &t, &slowest, 1, GX_FLOAT64, GX_MAX) != GX_OK)
        DIE("allreduce of the time");
    return slowest;
}

int main(int argc, char **argv)
{
    const char *model = "resnet50", *ratios = "0.5,1,2", *record = NULL;
    double layer_us = -1;
    int iters = 5, warmup = 2, view = 1;
    size_t cap = 25 << 20, first = 1 << 20;
    for (int a = 1; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(argv[a], "--model") && v)
            model = argv[++a];
        else if (!strcmp(argv[a], "--ratio") && v)
            ratios = argv[++a];
        else if (!strcmp(argv[a], "--layer-us") && v)
            layer_us = atof(argv[++a]);
        else if (!strcmp(argv[a], "--compute") && v)
            spin_compute = !strcmp(argv[++a], "spin");
        else if (!strcmp(argv[a], "--iters") && v)
            iters = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--warmup") && v)
            warmup = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--bucket-cap") && v)
            cap = (size_t)atoll(argv[++a]);
        else if (!strcmp(argv[a], "--first-bucket") && v)
            first = (size_t)atoll(argv[++a]);
        else if (!strcmp(argv[a], "--copy"))
            view = 0;
        else if (!strcmp(argv[a], "--record") && v)
            record = argv[++a];
        else {
            fprintf(stderr, "usage: %s [--model resnet50|gpt125m] [--ratio R,R..] [--layer-us U]"
                    " [--compute sleep|spin] [--iters N] [--warmup W] [--bucket-cap B]"
                    " [--first-bucket B] [--copy] [--record FILE]\n", argv[0]);
            return 2;
        }
    }
    if (iters < 1 || iters > 1000)
        iters = 5;
    struct layer_list l = { 0 };
    if (!strcmp(model, "gpt125m"))
        gpt125m(&l);
    else
        resnet50(&l);
    size_t total = 0;
    for (size_t i = 0; i < l.n; i++)
        total += l.count[i];

    if (gx_comm_init_env(&comm) != GX_OK)
        DIE("gx_comm_init_env");
    rank = gx_comm_rank(comm);
    nranks = gx_comm_size(comm);

    float *flat = calloc(total, sizeof(float));
    float *grads[MAX_PARAMS];
    struct gx_ddp_param params[MAX_PARAMS];
    size_t off = 0;
    for (size_t i = 0; i < l.n; i++) {
        grads[i] = flat + off; /* copy mode reads the gradients from here */
        off += l.count[i];
        params[i] = (struct gx_ddp_param){ sizeof(struct gx_ddp_param), l.count[i], GX_FLOAT32,
                                           l.name[i], NULL };
    }
    for (size_t k = 0; k < total; k++)
        flat[k] = (float)(k % 1000) * 1e-3f;
    struct gx_ddp_config cfg = GX_DDP_CONFIG_INIT;
    cfg.bucket_cap_bytes = cap;
    cfg.first_bucket_bytes = first;
    cfg.gradient_as_bucket_view = view;
    struct gx_ddp *ddp;
    if (gx_ddp_create(comm, params, l.n, &cfg, &ddp) != GX_OK)
        DIE("gx_ddp_create");

    /* Communication alone: one all-reduce of everything. */
    double samples[1000];
    for (int i = 0; i < warmup + iters; i++) {
        double t = iteration(MODE_AFTER, &l, 0, flat, total, ddp, grads, view);
        if (i >= warmup)
            samples[i - warmup] = t;
    }
    double comm_ms = median(samples, iters);
    if (rank == 0) {
        printf("# %s: %zu tensors, %.1fM parameters, %.1f MB float32; %d ranks; buckets: cap "
               "%zu, first %zu, %s; compute %s\n", model, l.n, (double)total / 1e6,
               (double)total * 4 / 1e6, nranks, cap, first, view ? "gradient views" : "copies",
               spin_compute ? "spin" : "sleep");
        printf("# one all-reduce of all gradients: %.1f ms (%.2f GB/s algorithm bandwidth)\n",
               comm_ms, (double)total * 4 / comm_ms / 1e6);
        printf("%-6s %9s %10s %9s %9s %9s %8s %9s %8s\n", "ratio", "layer_us", "compute_ms",
               "none_ms", "after_ms", "ddp_ms", "hidden", "stat_ovl", "buckets");
    }
    FILE *rec = NULL;
    if (record && rank == 0) {
        rec = fopen(record, "a");
        if (!rec)
            DIE("cannot open %s", record);
        fprintf(rec, "\n### %s, %d ranks, compute %s, buckets cap %zu / first %zu (%s)\n\n",
                model, nranks, spin_compute ? "spin" : "sleep", cap, first,
                view ? "views" : "copies");
        fprintf(rec, "One all-reduce of all %.1f MB: %.1f ms (median of %d).\n\n",
                (double)total * 4 / 1e6, comm_ms, iters);
        fprintf(rec, "| compute/comm | layer µs | none ms | after ms | ddp ms | hidden | "
                "scheduler overlap | buckets |\n|---|---|---|---|---|---|---|---|\n");
    }

    char *list = strdup(ratios), *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        double ratio = atof(tok);
        double lus = layer_us >= 0 ? layer_us : ratio * comm_ms * 1e3 / (double)l.n;
        double t[3];
        for (int m = MODE_NONE; m <= MODE_DDP; m++) {
            if (m == MODE_DDP)
                gx_ddp_reset_stats(ddp);
            for (int i = 0; i < warmup + iters; i++) {
                if (m == MODE_DDP && i == warmup)
                    gx_ddp_reset_stats(ddp); /* the rebuild is warm-up */
                double s = iteration((enum mode)m, &l, lus, flat, total, ddp, grads, view);
                if (i >= warmup)
                    samples[i - warmup] = s;
            }
            t[m] = median(samples, iters);
        }
        struct gx_ddp_stats st = GX_DDP_STATS_INIT;
        gx_ddp_get_stats(ddp, &st);
        double comm_cost = t[MODE_AFTER] - t[MODE_NONE];
        double hidden = comm_cost > 0 ? (t[MODE_AFTER] - t[MODE_DDP]) / comm_cost : 0;
        double stat_ovl = st.comm_seconds > 0 ? st.overlap_seconds / st.comm_seconds : 0;
        if (rank == 0) {
            printf("%-6s %9.0f %10.1f %9.1f %9.1f %9.1f %7.0f%% %8.0f%% %8d\n",
                   layer_us >= 0 ? "-" : tok, lus, lus * (double)l.n / 1e3, t[MODE_NONE],
                   t[MODE_AFTER], t[MODE_DDP], 100 * hidden, 100 * stat_ovl, st.buckets);
            fflush(stdout);
            if (rec)
                fprintf(rec, "| %s | %.0f | %.1f | %.1f | %.1f | %.0f%% | %.0f%% | %d |\n",
                        layer_us >= 0 ? "-" : tok, lus, t[MODE_NONE], t[MODE_AFTER],
                        t[MODE_DDP], 100 * hidden, 100 * stat_ovl, st.buckets);
        }
        if (layer_us >= 0)
            break;
    }
    free(list);
    /* The layout the figures were measured with (after the rebuild). */
    char sizes[1024] = "";
    size_t len = 0;
    for (int b = 0; b < gx_ddp_bucket_count(ddp) && len < sizeof(sizes); b++) {
        struct gx_ddp_bucket info = GX_DDP_BUCKET_INIT;
        if (gx_ddp_bucket_info(ddp, b, &info) == GX_OK)
            len += (size_t)snprintf(sizes + len, sizeof(sizes) - len, "%s%.1f", b ? " " : "",
                                    (double)info.count * 4 / 1e6);
    }
    if (rank == 0)
        printf("# buckets in launch order (MB): %s\n", sizes);
    if (rec) {
        fprintf(rec, "\nBuckets in launch order (MB): %s.\n", sizes);
        fclose(rec);
    }
    gx_ddp_destroy(ddp);
    int rc = gx_comm_finalize(comm);
    gx_comm_destroy(comm);
    free(flat);
    return rc == GX_OK ? 0 : 1;
}
