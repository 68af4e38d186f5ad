/*
 * param_server - a parameter server over one-sided windows: the servers
 * expose the model's weights, sharded, as windows; the trainers get the
 * weights, compute gradients on their share of each batch and accumulate
 * -lr * gradient into the servers' shards. No server code runs in the loop:
 * gx's progress on the servers applies the accumulates (docs/rpc.md).
 *
 *   gx-run -n 4 build/bin/param_server [--servers S] [--steps K] [--async]
 *                                      [--quiet]
 *
 * Ranks 0..S-1 are servers (default S = 1 when the job has 2 ranks, else
 * 2), the others trainers. The model: softmax regression, 32 inputs -> 8
 * classes (264 float32 parameters), on a fixed synthetic data set (1,024
 * samples, inputs uniform in [-1, 1], labels from a fixed random teacher;
 * all seeds fixed), trained by SGD with batches of 128 samples, batch k mod
 * 8 at step k.
 *
 * Synchronous (default): at each step every trainer gets the weights, adds
 * its share's gradient sum divided by the whole batch's size and flushes;
 * the trainers meet in a barrier of their own communicator after the gets
 * and after the flush, so every get of step k sees exactly steps 0..k-1. The sum of the trainers' accumulates is then exactly the batch-mean
 * step of one process, up to float32 rounding: the server adds the
 * trainers' parts in arrival order, one process sums the samples in order.
 * The check: the final loss over the whole data set within REL_TOL of the
 * single-process run's (every rank repeats it alone), and the training
 * must have lowered the loss to less than half its start (so a run that
 * applied nothing fails).
 *
 * --async: no barrier between steps; a trainer's get may see any mix of
 * the other trainers' earlier accumulates (stale weights, as in an
 * asynchronous parameter server). The trajectory then differs from the
 * single process by more than rounding, so the check is looser: the final
 * loss at most ASYNC_SLACK times the single-process loss plus 0.05, and
 * again below half the start.
 *
 * Exit status 0 when the check holds, 1 if not (the reason printed).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gx/gx.h"

#define D_IN 32
#define N_OUT 8
#define NPARAM (N_OUT * D_IN + N_OUT) /* W row-major, then b */
#define NSAMPLES 1024
#define BATCH 128
#define LR 0.5f
#define REL_TOL 1e-3
#define ASYNC_SLACK 1.25

static float xs[NSAMPLES][D_IN];
static int ys[NSAMPLES];

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float urand(void) /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void make_data(float *init)
{
    float teacher[N_OUT][D_IN];
    for (int o = 0; o < N_OUT; o++)
        for (int i = 0; i < D_IN; i++)
            teacher[o][i] = urand();
    for (int s = 0; s < NSAMPLES; s++) {
        float best = -1e30f;
        for (int i = 0; i < D_IN; i++)
            xs[s][i] = urand();
        for (int o = 0; o < N_OUT; o++) {
            float z = 0;
            for (int i = 0; i < D_IN; i++)
                z += teacher[o][i] * xs[s][i];
            if (z > best) {
                best = z;
                ys[s] = o;
            }
        }
    }
    for (int k = 0; k < NPARAM; k++)
        init[k] = 0.01f * urand();
}

/* Class probabilities of sample s under weights w. */
static void forward(const float *w, int s, float *p)
{
    float mx = -1e30f, sum = 0;
    for (int o = 0; o < N_OUT; o++) {
        float z = w[N_OUT * D_IN + o];
        for (int i = 0; i < D_IN; i++)
            z += w[o * D_IN + i] * xs[s][i];
        p[o] = z;
        mx = z > mx ? z : mx;
    }
    for (int o = 0; o < N_OUT; o++)
        sum += (p[o] = expf(p[o] - mx));
    for (int o = 0; o < N_OUT; o++)
        p[o] /= sum;
}

static double loss_all(const float *w)
{
    double l = 0;
    float p[N_OUT];
    for (int s = 0; s < NSAMPLES; s++) {
        forward(w, s, p);
        l -= log(p[ys[s]] > 1e-30f ? p[ys[s]] : 1e-30f);
    }
    return l / NSAMPLES;
}

/* step[] = -LR * (sum over samples [lo, hi) of the loss gradient) / BATCH */
static void grad_step(const float *w, int lo, int hi, float *step)
{
    float p[N_OUT];
    memset(step, 0, NPARAM * sizeof(float));
    for (int s = lo; s < hi; s++) {
        forward(w, s, p);
        for (int o = 0; o < N_OUT; o++) {
            float g = (p[o] - (o == ys[s])) * (-LR / BATCH);
            for (int i = 0; i < D_IN; i++)
                step[o * D_IN + i] += g * xs[s][i];
            step[N_OUT * D_IN + o] += g;
        }
    }
}

static void single_process(float *w, int steps)
{
    float step[NPARAM];
    for (int k = 0; k < steps; k++) {
        int lo = (k % (NSAMPLES / BATCH)) * BATCH;
        grad_step(w, lo, lo + BATCH, step);
        for (int j = 0; j < NPARAM; j++)
            w[j] += step[j];
    }
}

#define TRY(call)                                                                          \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != GX_OK) {                                                                \
            fprintf(stderr, "param_server rank %d: %s failed: %s (%s)\n", rank, #call,    \
                    gx_strerror(rc_), gx_last_error());                                    \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    int servers = -1, steps = 200;
    bool async = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--servers") == 0 && i + 1 < argc)
            servers = atoi(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--async") == 0)
            async = true;
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = true;
        else {
            fprintf(stderr, "usage: %s [--servers S] [--steps K] [--async] [--quiet]\n", argv[0]);
            return 2;
        }
    }
    struct gx_comm *comm;
    int rank = -1;
    TRY(gx_comm_init_env(&comm));
    rank = gx_comm_rank(comm);
    int size = gx_comm_size(comm);
    if (servers < 0)
        servers = size <= 2 ? 1 : 2;
    if (size < 2 || servers < 1 || servers >= size || steps < 1) {
        fprintf(stderr, "param_server: needs 1 <= servers (%d) < ranks (%d) and steps (%d) >= 1\n",
                servers, size, steps);
        return 2;
    }
    int trainers = size - servers;
    float init[NPARAM], w[NPARAM], step[NPARAM];
    make_data(init);

    /* Shard s of the parameters: [off(s), off(s + 1)). */
#define OFF(s) ((size_t)(s) * NPARAM / (size_t)servers)
    bool server = rank < servers;
    float *shard = NULL;
    size_t shard_n = server ? OFF(rank + 1) - OFF(rank) : 0;
    if (server) {
        shard = malloc(shard_n * sizeof(float));
        memcpy(shard, init + OFF(rank), shard_n * sizeof(float));
    }
    struct gx_win *win;
    TRY(gx_win_create(comm, shard, shard_n * sizeof(float), &win));
    struct gx_comm *tcomm; /* the trainers' own communicator (servers: theirs) */
    TRY(gx_comm_split(comm, server ? 0 : 1, rank, &tcomm));

    if (!server) {
        int t = rank - servers;
        for (int k = 0; k < steps; k++) {
            for (int s = 0; s < servers; s++)
                TRY(gx_get(win, w + OFF(s), OFF(s + 1) - OFF(s), GX_FLOAT32, s, 0));
            if (!async) /* nobody adds step k's part before everyone read step k's weights */
                TRY(gx_barrier(tcomm));
            int base = (k % (NSAMPLES / BATCH)) * BATCH;
            int lo = base + t * BATCH / trainers, hi = base + (t + 1) * BATCH / trainers;
            grad_step(w, lo, hi, step);
            for (int s = 0; s < servers; s++)
                TRY(gx_accumulate(win, step + OFF(s), OFF(s + 1) - OFF(s), GX_FLOAT32, GX_SUM,
                                  s, 0));
            TRY(gx_win_flush(win, GX_WIN_ALL));
            if (!async)
                TRY(gx_barrier(tcomm));
        }
        TRY(gx_barrier(tcomm)); /* every trainer's last step is in */
        for (int s = 0; s < servers; s++)
            TRY(gx_get(win, w + OFF(s), OFF(s + 1) - OFF(s), GX_FLOAT32, s, 0));
    }
    TRY(gx_barrier(comm)); /* servers wait here: nothing of theirs ran in the loop */

    int ok = 1;
    if (!server) {
        float ref[NPARAM];
        memcpy(ref, init, sizeof(ref));
        single_process(ref, steps);
        double l0 = loss_all(init), l = loss_all(w), lref = loss_all(ref);
        bool close = async ? l <= ASYNC_SLACK * lref + 0.05 : fabs(l - lref) <= REL_TOL * lref;
        ok = close && l < 0.5 * l0;
        if (!quiet || !ok)
            printf("param_server rank %d (%s, %d servers, %d trainers, %d steps): loss %.6f -> "
                   "%.6f, single process %.6f: %s\n",
                   rank, async ? "async" : "sync", servers, trainers, steps, l0, l, lref,
                   ok ? "OK" : !close ? "FAIL (loss differs from the single-process run)"
                                      : "FAIL (the loss did not halve)");
    }
    TRY(gx_win_free(win));
    TRY(gx_comm_finalize(tcomm));
    gx_comm_destroy(tcomm);
    TRY(gx_comm_finalize(comm));
    gx_comm_destroy(comm);
    free(shard);
    return ok ? 0 : 1;
}
