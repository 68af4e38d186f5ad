/*
 * ddp_mlp - data-parallel training of a small multi-layer perceptron with
 * the gx DDP bucket scheduler, checked against the same training in one
 * process.
 *
 *   gx-run -n 4 build/bin/ddp_mlp [--steps-per-epoch K] [--epochs E]
 *                                 [--view] [--hook fp16|bf16] [--quiet]
 *                                 [--checkpoint DIR [--crash-rank R --crash-epoch E]]
 *
 * With --checkpoint, rank 0 saves the weights after every epoch and a new
 * run resumes from the last save; --crash-rank/--crash-epoch make rank R
 * die after epoch E in the first run only (GX_RESTART_COUNT unset or 0), so
 * `gx-run --max-restarts 1` shows a job that fails, restarts and finishes
 * with the same weights as an uninterrupted run.
 *
 * The model: 32 inputs -> 64 tanh -> 64 tanh -> 8 logits, softmax
 * cross-entropy, trained with plain SGD on synthetic data (inputs uniform in
 * [-1, 1], labels from a fixed random "teacher" network; all seeds fixed).
 * Each step uses a global batch of 240 samples; rank r of N trains on its
 * 240/N-sample shard, computes the mean-loss gradient over that shard with a
 * hand-written backward pass, and hands each layer's gradients to
 * gx_ddp_grad_ready() the moment they exist (last layer first), so the
 * scheduler's all-reduce of the top layers runs while the lower layers'
 * gradients are still being computed. Averaging the N shard means gives the
 * mean over the whole batch, so the replicas follow the single-process run.
 *
 * Built as ddp_mlp_cuda (GX_MLP_CUDA, when the CUDA toolkit is there): the
 * gradients live in CUDA device memory (gx_device_alloc; the arithmetic
 * stays on the host and each layer's gradient is uploaded before
 * gx_ddp_grad_ready), the scheduler keeps its buckets in device memory
 * (device_buckets = 1) and all-reduces them on the stream; after
 * gx_ddp_finish the averaged gradients are read back for the SGD step.
 * No --view or --hook there (both would touch the buckets with the CPU).
 *
 * At the end every rank repeats the training alone on the whole batch and
 * compares weights; see REL_TOL for why they may differ at all. Exit status
 * 0 when they agree (or the check is off with a compression hook), 1 if not.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gx/gx.h"

#define D_IN 32
#define HID 64
#define N_OUT 8
#define GLOBAL_BATCH 240
#define LR 0.1f

/*
 * Why the DDP weights can differ from the single-process ones at all: each
 * gradient element is a float32 sum of GLOBAL_BATCH per-sample terms. The
 * single process sums them in sample order and divides by 240; DDP sums each
 * shard, divides by 240/N, then the all-reduce sums the N shard means and
 * divides by N. Different grouping, different rounding: by the standard
 * bound each sum is within n*u*sum|terms| (u = 2^-24, n = 240), i.e. about
 * 1.4e-5 relative in the worst case and ~1e-6 typically (errors behave like
 * a random walk: sqrt(n)*u). Over the run, SGD adds lr * (gradient
 * difference) per step and the smooth tanh network does not amplify small
 * perturbations much over a few dozen steps, so a relative difference of
 * 1e-4 of the weight's scale (1 + |w|) bounds the worst case with margin,
 * while a real bug (a missing, stale or doubly counted gradient) moves
 * weights by ~lr * |g| ~ 1e-3 or more.
 */
#define REL_TOL 1e-4

enum { W1, B1, W2, B2, W3, B3, NPARAMS };
static const size_t param_count[NPARAMS] = {
    HID * D_IN, HID, HID * HID, HID, N_OUT * HID, N_OUT,
};
static const char *const param_name[NPARAMS] = {
    "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias",
};

struct mlp {
    float *p[NPARAMS]; /* weights, row-major [out][in] */
};

static uint64_t rng_state;
static float uniform(void) /* in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static void mlp_alloc(struct mlp *m)
{
    for (int i = 0; i < NPARAMS; i++)
        m->p[i] = calloc(param_count[i], sizeof(float));
}

static void mlp_init(struct mlp *m, uint64_t seed)
{
    rng_state = seed;
    for (int i = 0; i < NPARAMS; i++) {
        size_t fan_in = i == W1 ? D_IN : HID;
        float scale = (i % 2 == 0) ? 1.0f / sqrtf((float)fan_in) : 0.1f;
        for (size_t k = 0; k < param_count[i]; k++)
            m->p[i][k] = uniform() * scale;
    }
}

/* ---- the synthetic data set --------------------------------------------------- */

struct dataset {
    size_t n;
    float *x;   /* n x D_IN */
    int *label; /* n */
};

static void dense(const float *w, const float *b, const float *in, float *out, int n_out,
                  int n_in)
{
    for (int o = 0; o < n_out; o++) {
        float s = b[o];
        for (int i = 0; i < n_in; i++)
            s += w[o * n_in + i] * in[i];
        out[o] = s;
    }
}

static void make_dataset(struct dataset *ds, size_t n)
{
    struct mlp teacher;
    mlp_alloc(&teacher);
    mlp_init(&teacher, 7);
    ds->n = n;
    ds->x = malloc(n * D_IN * sizeof(float));
    ds->label = malloc(n * sizeof(int));
    rng_state = 42;
    for (size_t s = 0; s < n; s++) {
        float *x = ds->x + s * D_IN, h1[HID], h2[HID], out[N_OUT];
        for (int i = 0; i < D_IN; i++)
            x[i] = uniform();
        dense(teacher.p[W1], teacher.p[B1], x, h1, HID, D_IN);
        for (int i = 0; i < HID; i++)
            h1[i] = tanhf(3 * h1[i]);
        dense(teacher.p[W2], teacher.p[B2], h1, h2, HID, HID);
        for (int i = 0; i < HID; i++)
            h2[i] = tanhf(3 * h2[i]);
        dense(teacher.p[W3], teacher.p[B3], h2, out, N_OUT, HID);
        int best = 0;
        for (int o = 1; o < N_OUT; o++)
            if (out[o] > out[best])
                best = o;
        ds->label[s] = best;
    }
    for (int i = 0; i < NPARAMS; i++)
        free(teacher.p[i]);
}

/* ---- forward and the hand-written backward ------------------------------------ */

struct ddp_ctx {
    struct gx_ddp *ddp; /* NULL: single-process reference */
    int view;
    int rc;
    void **dev;         /* GX_MLP_CUDA: the gradients' device copies */
};

/* Gradient buffers for one step: the scheduler's bucket slots with --view,
 * else our own. */
static float *grad_buf(struct ddp_ctx *c, float **own, int i)
{
    return c->ddp && c->view ? gx_ddp_grad_buffer(c->ddp, (size_t)i) : own[i];
}

static void ready(struct ddp_ctx *c, float *g, int i)
{
    if (!c->ddp || c->rc != GX_OK)
        return;
    void *grad = c->view ? NULL : g;
    if (c->dev) { /* the gradient lives in device memory: upload what the host computed */
        int up = gx_device_copy(c->dev[i], g, param_count[i] * sizeof(float));
        if (up != GX_OK) {
            fprintf(stderr, "upload of %s: %s\n", param_name[i], gx_last_error());
            c->rc = up;
            return;
        }
        grad = c->dev[i];
    }
    int rc = gx_ddp_grad_ready(c->ddp, (size_t)i, grad);
    if (rc != GX_OK) {
        fprintf(stderr, "gx_ddp_grad_ready(%s): %s\n", param_name[i], gx_last_error());
        c->rc = rc;
    }
}

/* Mean cross-entropy over samples [first, first + m) and its gradient,
 * layer by layer from the top; returns the loss sum (not the mean). */
static double train_step(struct mlp *net, const struct dataset *ds, size_t first, size_t m,
                         float **own_grad, struct ddp_ctx *c)
{
    float *h1 = malloc(m * HID * sizeof(float)), *h2 = malloc(m * HID * sizeof(float));
    float *dlog = malloc(m * N_OUT * sizeof(float));
    float *dh2 = malloc(m * HID * sizeof(float)), *dh1 = malloc(m * HID * sizeof(float));
    float *g[NPARAMS];
    for (int i = 0; i < NPARAMS; i++) {
        g[i] = grad_buf(c, own_grad, i);
        memset(g[i], 0, param_count[i] * sizeof(float));
    }
    double loss = 0;
    const float inv_m = 1.0f / (float)m;
    for (size_t s = 0; s < m; s++) {
        const float *x = ds->x + (first + s) * D_IN;
        float *a1 = h1 + s * HID, *a2 = h2 + s * HID, out[N_OUT];
        dense(net->p[W1], net->p[B1], x, a1, HID, D_IN);
        for (int i = 0; i < HID; i++)
            a1[i] = tanhf(a1[i]);
        dense(net->p[W2], net->p[B2], a1, a2, HID, HID);
        for (int i = 0; i < HID; i++)
            a2[i] = tanhf(a2[i]);
        dense(net->p[W3], net->p[B3], a2, out, N_OUT, HID);
        float mx = out[0], z = 0;
        for (int o = 1; o < N_OUT; o++)
            mx = out[o] > mx ? out[o] : mx;
        for (int o = 0; o < N_OUT; o++)
            z += expf(out[o] - mx);
        int y = ds->label[first + s];
        loss += (double)(logf(z) + mx - out[y]);
        for (int o = 0; o < N_OUT; o++)
            dlog[s * N_OUT + o] = (expf(out[o] - mx) / z - (o == y ? 1.0f : 0.0f)) * inv_m;
    }
    /* Layer 3: its gradients are complete first; hand them over now. */
    for (size_t s = 0; s < m; s++)
        for (int o = 0; o < N_OUT; o++) {
            float d = dlog[s * N_OUT + o];
            for (int i = 0; i < HID; i++)
                g[W3][o * HID + i] += d * h2[s * HID + i];
            g[B3][o] += d;
        }
    ready(c, g[W3], W3);
    ready(c, g[B3], B3);
    /* Layer 2 (its all-reduce overlaps with layer 1's backward). */
    for (size_t s = 0; s < m; s++)
        for (int i = 0; i < HID; i++) {
            float d = 0;
            for (int o = 0; o < N_OUT; o++)
                d += net->p[W3][o * HID + i] * dlog[s * N_OUT + o];
            float a = h2[s * HID + i];
            dh2[s * HID + i] = d * (1 - a * a);
        }
    for (size_t s = 0; s < m; s++)
        for (int o = 0; o < HID; o++) {
            float d = dh2[s * HID + o];
            for (int i = 0; i < HID; i++)
                g[W2][o * HID + i] += d * h1[s * HID + i];
            g[B2][o] += d;
        }
    ready(c, g[W2], W2);
    ready(c, g[B2], B2);
    /* Layer 1. */
    for (size_t s = 0; s < m; s++)
        for (int i = 0; i < HID; i++) {
            float d = 0;
            for (int o = 0; o < HID; o++)
                d += net->p[W2][o * HID + i] * dh2[s * HID + o];
            float a = h1[s * HID + i];
            dh1[s * HID + i] = d * (1 - a * a);
        }
    for (size_t s = 0; s < m; s++)
        for (int o = 0; o < HID; o++) {
            float d = dh1[s * HID + o];
            const float *x = ds->x + (first + s) * D_IN;
            for (int i = 0; i < D_IN; i++)
                g[W1][o * D_IN + i] += d * x[i];
            g[B1][o] += d;
        }
    ready(c, g[W1], W1);
    ready(c, g[B1], B1);
    free(h1);
    free(h2);
    free(dlog);
    free(dh2);
    free(dh1);
    return loss;
}

static void sgd(struct mlp *net, float **grad)
{
    for (int i = 0; i < NPARAMS; i++)
        for (size_t k = 0; k < param_count[i]; k++)
            net->p[i][k] -= LR * grad[i][k];
}

/* ---- main ---------------------------------------------------------------------- */

/* The checkpoint: a magic line, the epochs done, every parameter raw. */
#define CKPT_MAGIC "gx-ddp-mlp-checkpoint 1\n"

static int load_checkpoint(const char *dir, struct mlp *net, int *epochs_done)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/ddp_mlp.ckpt", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0; /* no checkpoint yet: start from scratch */
    char magic[sizeof(CKPT_MAGIC)] = "";
    int ok = fread(magic, 1, sizeof(CKPT_MAGIC) - 1, f) == sizeof(CKPT_MAGIC) - 1 &&
             !strcmp(magic, CKPT_MAGIC) && fread(epochs_done, sizeof(int), 1, f) == 1;
    for (int i = 0; ok && i < NPARAMS; i++)
        ok = fread(net->p[i], sizeof(float), param_count[i], f) == param_count[i];
    fclose(f);
    if (!ok) {
        fprintf(stderr, "ddp_mlp: %s is not a checkpoint of this model\n", path);
        return -1;
    }
    return 1;
}

static int save_checkpoint(const char *dir, const struct mlp *net, int epochs_done)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/ddp_mlp.ckpt", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return -1;
    int ok = fwrite(CKPT_MAGIC, 1, sizeof(CKPT_MAGIC) - 1, f) == sizeof(CKPT_MAGIC) - 1 &&
             fwrite(&epochs_done, sizeof(int), 1, f) == 1;
    for (int i = 0; ok && i < NPARAMS; i++)
        ok = fwrite(net->p[i], sizeof(float), param_count[i], f) == param_count[i];
    ok = fclose(f) == 0 && ok;
    return ok && rename(tmp, path) == 0 ? 0 : -1; /* a crash never leaves half a file */
}

int main(int argc, char **argv)
{
    int steps_per_epoch = 4, epochs = 5, view = 0, quiet = 0;
    int crash_rank = -1, crash_epoch = -1;
    const char *hook = NULL, *ckpt_dir = NULL;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--steps-per-epoch") && a + 1 < argc)
            steps_per_epoch = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--epochs") && a + 1 < argc)
            epochs = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--view"))
            view = 1;
        else if (!strcmp(argv[a], "--hook") && a + 1 < argc)
            hook = argv[++a];
        else if (!strcmp(argv[a], "--quiet"))
            quiet = 1;
        else if (!strcmp(argv[a], "--checkpoint") && a + 1 < argc)
            ckpt_dir = argv[++a];
        else if (!strcmp(argv[a], "--crash-rank") && a + 1 < argc)
            crash_rank = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--crash-epoch") && a + 1 < argc)
            crash_epoch = atoi(argv[++a]);
        else {
            fprintf(stderr, "usage: %s [--steps-per-epoch K] [--epochs E] [--view] "
                    "[--hook fp16|bf16] [--quiet] [--checkpoint DIR [--crash-rank R --crash-epoch E]]\n",
                    argv[0]);
            return 2;
        }
    }
    struct gx_comm *comm;
    if (gx_comm_init_env(&comm) != GX_OK) {
        fprintf(stderr, "ddp_mlp: gx_comm_init_env: %s\n", gx_last_error());
        return 1;
    }
    int rank = gx_comm_rank(comm), nranks = gx_comm_size(comm);
    if (GLOBAL_BATCH % nranks) {
        fprintf(stderr, "ddp_mlp: %d ranks do not divide the global batch of %d\n", nranks,
                GLOBAL_BATCH);
        return 1;
    }
    size_t shard = GLOBAL_BATCH / nranks;
    struct dataset ds;
    make_dataset(&ds, (size_t)steps_per_epoch * GLOBAL_BATCH);

    /* Every rank initialises differently on purpose: broadcast_params makes
     * them equal (rank 0's values), as DDP does at construction. */
    struct mlp net;
    mlp_alloc(&net);
    mlp_init(&net, 1000 + (uint64_t)rank);
    float *grad[NPARAMS];
    struct gx_ddp_param params[NPARAMS];
    for (int i = 0; i < NPARAMS; i++) {
        grad[i] = calloc(param_count[i], sizeof(float));
        params[i] = (struct gx_ddp_param){ sizeof(struct gx_ddp_param), param_count[i],
                                           GX_FLOAT32, param_name[i], net.p[i] };
    }
    struct gx_ddp_config cfg = GX_DDP_CONFIG_INIT;
    cfg.bucket_cap_bytes = 16 << 10; /* small model: small buckets, so several */
    cfg.first_bucket_bytes = 2 << 10; /* fc3 alone: it goes out first */
    cfg.gradient_as_bucket_view = view;
    void *dgrad[NPARAMS] = { 0 };
    int rc = GX_OK;
#ifdef GX_MLP_CUDA
    if (view || hook) {
        fprintf(stderr, "ddp_mlp_cuda: --view and --hook need host buckets; use ddp_mlp\n");
        return 2;
    }
    cfg.device_buckets = 1; /* buckets and their all-reduces on the device */
    for (int i = 0; i < NPARAMS && rc == GX_OK; i++)
        rc = gx_device_alloc(&dgrad[i], param_count[i] * sizeof(float));
    if (rc != GX_OK) {
        fprintf(stderr, "ddp_mlp_cuda: device gradients: %s\n", gx_last_error());
        return rc == GX_EUNSUPPORTED ? 77 : 1;
    }
    if (rank == 0 && !quiet)
        printf("gradients and buckets in CUDA device memory (%d GPU(s))\n", gx_device_count());
#endif
    struct gx_ddp *ddp;
    if (rc == GX_OK)
        rc = gx_ddp_create(comm, params, NPARAMS, &cfg, &ddp);
    if (rc == GX_OK && hook)
        rc = gx_ddp_set_comm_hook(ddp, !strcmp(hook, "bf16") ? gx_ddp_bf16_compress_hook()
                                                             : gx_ddp_fp16_compress_hook(), NULL);
    /* Resume: rank 0 loads the last checkpoint; the broadcast below gives
     * every rank its weights, as after a fresh start. */
    int start_epoch = 0;
    if (rc == GX_OK && ckpt_dir && rank == 0 && load_checkpoint(ckpt_dir, &net, &start_epoch) < 0)
        start_epoch = -1;
    if (rc == GX_OK && ckpt_dir)
        rc = gx_broadcast(comm, &start_epoch, &start_epoch, 1, GX_INT32, 0);
    if (rc == GX_OK && start_epoch < 0)
        rc = GX_EINVAL;
    if (rc == GX_OK && start_epoch > 0 && rank == 0)
        printf("resumed from the checkpoint after epoch %d (run %s)\n", start_epoch,
               getenv("GX_RESTART_COUNT") ? getenv("GX_RESTART_COUNT") : "0");
    if (rc == GX_OK)
        rc = gx_ddp_broadcast_params(ddp, 0);
    if (rc != GX_OK) {
        fprintf(stderr, "ddp_mlp rank %d: setup: %s\n", rank, gx_last_error());
        return 1;
    }

    struct ddp_ctx ctx = { ddp, view, GX_OK, dgrad[0] ? dgrad : NULL };
    const char *restarts = getenv("GX_RESTART_COUNT");
    bool first_run = !restarts || atoi(restarts) == 0;
    for (int e = start_epoch; e < epochs; e++) {
        double loss = 0;
        for (int s = 0; s < steps_per_epoch; s++) {
            size_t first = (size_t)s * GLOBAL_BATCH + (size_t)rank * shard;
            loss += train_step(&net, &ds, first, shard, grad, &ctx);
            rc = ctx.rc != GX_OK ? ctx.rc : gx_ddp_finish(ddp, 30000);
            if (rc != GX_OK) {
                fprintf(stderr, "ddp_mlp rank %d: step %d: %s\n", rank, s, gx_last_error());
                return 1;
            }
            float *g[NPARAMS];
            for (int i = 0; i < NPARAMS; i++) {
                g[i] = view ? gx_ddp_grad_buffer(ddp, (size_t)i) : grad[i];
                if (ctx.dev && gx_device_copy(grad[i], dgrad[i], param_count[i] * sizeof(float)) !=
                                   GX_OK) { /* the averaged gradient, back for the host SGD */
                    fprintf(stderr, "ddp_mlp rank %d: download: %s\n", rank, gx_last_error());
                    return 1;
                }
            }
            sgd(&net, g);
        }
        /* The program's own communication, between iterations. */
        double total = 0;
        gx_allreduce(comm, &loss, &total, 1, GX_FLOAT64, GX_SUM);
        if (rank == 0 && !quiet)
            printf("epoch %d: loss %.6f\n", e + 1,
                   total / ((double)steps_per_epoch * GLOBAL_BATCH));
        if (ckpt_dir && rank == 0 && save_checkpoint(ckpt_dir, &net, e + 1) != 0) {
            fprintf(stderr, "ddp_mlp: cannot write a checkpoint in %s\n", ckpt_dir);
            return 1;
        }
        /* The program's own barrier: the checkpoint exists before anyone dies. */
        gx_barrier(comm);
        if (first_run && rank == crash_rank && e + 1 == crash_epoch) {
            fprintf(stderr, "ddp_mlp rank %d: crashing after epoch %d (--crash-rank)\n", rank,
                    e + 1);
            fflush(NULL);
            _exit(3);
        }
    }

    struct gx_ddp_stats st = GX_DDP_STATS_INIT;
    gx_ddp_get_stats(ddp, &st);
    if (rank == 0)
        printf("ddp: %d ranks, %llu iterations, %d buckets%s, %llu bucket all-reduces, "
               "%.2f MB; communication %.2f ms, %.2f ms of it during backward (%.0f%%), "
               "finish waited %.2f ms\n", nranks, (unsigned long long)st.iterations,
               st.buckets, st.rebuilt ? " (rebuilt)" : "",
               (unsigned long long)st.buckets_reduced, (double)st.bytes_reduced / 1e6,
               st.comm_seconds * 1e3, st.overlap_seconds * 1e3,
               st.comm_seconds > 0 ? 100 * st.overlap_seconds / st.comm_seconds : 0,
               st.finish_wait_seconds * 1e3);

    /* The same training in one process on the whole batch. */
    struct mlp ref;
    mlp_alloc(&ref);
    mlp_init(&ref, 1000); /* rank 0's initial values */
    struct ddp_ctx none = { NULL, 0, GX_OK, NULL };
    for (int e = 0; e < epochs; e++)
        for (int s = 0; s < steps_per_epoch; s++) {
            train_step(&ref, &ds, (size_t)s * GLOBAL_BATCH, GLOBAL_BATCH, grad, &none);
            sgd(&ref, grad);
        }
    double worst = 0;
    int worst_param = 0;
    for (int i = 0; i < NPARAMS; i++)
        for (size_t k = 0; k < param_count[i]; k++) {
            double d = fabs((double)net.p[i][k] - ref.p[i][k]) / (1 + fabs(ref.p[i][k]));
            if (d > worst) {
                worst = d;
                worst_param = i;
            }
        }
    int ok = worst <= REL_TOL || hook;
    int all_ok = 0;
    gx_allreduce(comm, &ok, &all_ok, 1, GX_INT32, GX_MIN);
    if (rank == 0 || !ok)
        printf("rank %d: after %d steps the weights %s the single-process run: largest "
               "difference %.3g relative (%s), tolerance %.0e%s\n", rank, epochs * steps_per_epoch,
               ok ? "match" : "DIFFER from", worst, param_name[worst_param], REL_TOL,
               hook ? " (not enforced with a compression hook)" : "");
    gx_ddp_destroy(ddp);
    rc = gx_comm_finalize(comm);
    gx_comm_destroy(comm);
    for (int i = 0; i < NPARAMS; i++) {
        free(net.p[i]);
        free(ref.p[i]);
        free(grad[i]);
        if (dgrad[i])
            gx_device_free(dgrad[i]);
    }
    free(ds.x);
    free(ds.label);
    return all_ok && rc == GX_OK ? 0 : 1;
}
