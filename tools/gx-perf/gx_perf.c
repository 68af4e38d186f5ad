/*
 * gx-perf - nccl-tests' all_reduce_perf family for gx: times a collective
 * over a sweep of sizes and prints nccl-tests' table (size count type redop
 * root | time algbw busbw #wrong, out-of-place then in-place, and the
 * "# Avg bus bandwidth" footer), or JSON / CSV.
 *
 *   gx-run -n 4 gx-perf all_reduce -b 8 -e 128M -f 2
 *
 * Per size and placement: fill the buffers, run the warm-up iterations,
 * barrier, time the iterations (blocking calls with -z 1; with -z 0 issue
 * non-blocking ones, at most PERF_WINDOW in flight, and wait at the end),
 * then run the -c check iterations on fresh data. Times, wrong counts and the
 * rank table reach rank 0 over gx_send/gx_recv rather than over the
 * collectives being measured, so a broken collective cannot hide its errors.
 */
#include <libgen.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gx/gx.h"
#include "perf_coll.h"
#include "perf_data.h"
#include "perf_opts.h"
#include "perf_ntjson.h"
#include "perf_report.h"

#define PERF_WINDOW 4        /* -z 0: non-blocking operations in flight (like a few DDP buckets) */
#define PERF_TAG 0x67787066  /* p2p tag of gx-perf's own bookkeeping */
#define PROGRESS_AFTER_S 3.0 /* sweeps shorter than this print no progress */

struct perf_ctx {
    const struct perf_opts *o;
    struct gx_comm *comm;
    int rank, nranks;
    char *sendbuf, *recvbuf;
    char *dsend, *drecv;  /* --device: device twins of sendbuf/recvbuf, else NULL */
    struct gx_request *reqs[PERF_WINDOW];
    /* progress (rank 0) */
    double start_s, last_progress_s;
    int progress_shown, progress_tty;
    int steps_done, steps_total;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const struct perf_ctx *x, const char *what, int rc)
{
    const char *detail = gx_last_error();
    fprintf(stderr, "gx-perf: rank %d: %s failed: %s%s%s\n", x ? x->rank : -1, what,
            gx_strerror(rc), detail[0] ? ": " : "", detail);
    exit(1);
}

static void *alloc_buffer(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes ? bytes : 64) != 0) {
        fprintf(stderr, "gx-perf: cannot allocate %zu bytes for the buffers\n", bytes);
        exit(1);
    }
    perf_data_poison(p, bytes ? bytes : 64); /* touch every page before timing */
    return p;
}

/* ---- rank 0 collects over point-to-point ------------------------------ */

static void to_rank0(struct perf_ctx *x, const void *mine, void *all, size_t len)
{
    if (x->rank != 0) {
        int rc = gx_send(x->comm, mine, len, GX_UINT8, 0, PERF_TAG);
        if (rc)
            die(x, "sending results to rank 0", rc);
        return;
    }
    memcpy(all, mine, len);
    for (int r = 1; r < x->nranks; r++) {
        int rc = gx_recv(x->comm, (char *)all + (size_t)r * len, len, GX_UINT8, r, PERF_TAG, NULL);
        if (rc)
            die(x, "receiving results from the other ranks", rc);
    }
}

struct rank_figures {
    double time_s;
    long long wrong;
};

/* The reported time (per -a) and the summed wrong count, on rank 0. */
static void combine(struct perf_ctx *x, struct rank_figures mine, double *time_s,
                    long long *wrong)
{
    struct rank_figures all[x->rank == 0 ? x->nranks : 1];
    to_rank0(x, &mine, all, sizeof(mine));
    if (x->rank != 0)
        return;
    double t = all[0].time_s;
    long long w = 0;
    for (int r = 0; r < x->nranks; r++) {
        w += all[r].wrong;
        switch (x->o->average) {
        case PERF_AVG_MEAN: t = r ? t + all[r].time_s : all[r].time_s; break;
        case PERF_AVG_MIN: t = all[r].time_s < t ? all[r].time_s : t; break;
        case PERF_AVG_MAX: t = all[r].time_s > t ? all[r].time_s : t; break;
        default: break;
        }
    }
    if (x->o->average == PERF_AVG_MEAN)
        t /= x->nranks;
    *time_s = t;
    *wrong = w;
}

/* ---- one measurement -------------------------------------------------- */

struct perf_case {
    enum gx_datatype dtype;
    enum gx_redop op;
    int root;
    size_t esize;
    struct perf_counts c;
    int in_place;
    const void *send;     /* host buffers: filled and checked here */
    void *recv;
    const void *call_send; /* what the collective gets: the host ones or device twins */
    void *call_recv;
};

/* --device: the whole host buffers to their device twins, or back. */
static void device_sync(struct perf_ctx *x, int to_device)
{
    if (!x->dsend)
        return;
    size_t n = x->o->max_bytes ? x->o->max_bytes : 64;
    int rc = to_device ? gx_device_copy(x->dsend, x->sendbuf, n) : GX_OK;
    if (rc == GX_OK)
        rc = to_device ? gx_device_copy(x->drecv, x->recvbuf, n)
                       : gx_device_copy(x->recvbuf, x->drecv, n);
    if (rc)
        die(x, "copying between host and device buffers (--device)", rc);
}

static void prepare(struct perf_ctx *x, const struct perf_case *pc)
{
    const struct perf_coll *coll = x->o->coll;
    int has_op = (coll->flags & PERF_COLL_HAS_OP) != 0;
    perf_data_poison(pc->recv, pc->c.recv * pc->esize);
    /* In place, the send data lives inside the receive buffer: write it last. */
    perf_data_fill((void *)pc->send, pc->dtype, 0, pc->c.send, x->rank, x->nranks, pc->op,
                   has_op);
    device_sync(x, 1);
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --compute_us: this thread's CPU time, not the wall clock, so the work is
 * the same however many ranks share a CPU (a rank descheduled for 5 ms has
 * done none of it). */
static void compute(int us)
{
    if (us <= 0)
        return;
    static volatile double sink;
    double acc = sink, end = thread_cpu_s() + us * 1e-6;
    do {
        for (int i = 0; i < 2000; i++)
            acc = acc * 0.999999 + 1.0;
    } while (thread_cpu_s() < end);
    sink = acc;
}

/* n operations; each after `compute_us` of CPU work (0 for the warm-up and
 * the checks). */
static void run_ops(struct perf_ctx *x, const struct perf_case *pc, int n, int blocking,
                    int compute_us)
{
    const struct perf_coll *coll = x->o->coll;
    char what[160];
    snprintf(what, sizeof(what), "gx-perf %s of %zu x %s%s", coll->name, pc->c.param,
             perf_dtype_name(pc->dtype), pc->in_place ? " in place" : "");
    if (blocking) {
        for (int i = 0; i < n; i++) {
            compute(compute_us);
            int rc = coll->call(x->comm, pc->call_send, pc->call_recv, pc->c.param, pc->dtype,
                                pc->op, pc->root, NULL);
            if (rc)
                die(x, what, rc);
        }
        return;
    }
    for (int i = 0; i < n + PERF_WINDOW; i++) {
        struct gx_request **slot = &x->reqs[i % PERF_WINDOW];
        if (i >= PERF_WINDOW && i - PERF_WINDOW < n) {
            int rc = gx_wait(*slot, -1);
            if (rc)
                die(x, what, rc);
            gx_request_free(*slot);
            *slot = NULL;
        }
        if (i < n) {
            compute(compute_us);
            int rc = coll->call(x->comm, pc->call_send, pc->call_recv, pc->c.param, pc->dtype,
                                pc->op, pc->root, slot);
            if (rc)
                die(x, what, rc);
        }
    }
}

static void barrier_or_die(struct perf_ctx *x, const char *when)
{
    int rc = gx_barrier(x->comm);
    if (rc)
        die(x, when, rc);
}

/* The timed part, per -z as nccl-tests means it: 0 every operation issued
 * non-blocking, then all waited for; 1 each waited for, then a barrier; 2
 * each waited for; 3 each waited for, and a barrier after each iteration of
 * -m operations that the time leaves out. Returns seconds per operation. */
static double timed_ops(struct perf_ctx *x, const struct perf_case *pc)
{
    const struct perf_opts *o = x->o;
    int total = o->iters * o->agg_iters;
    if (o->blocking == 0) {
        double t0 = now_s();
        run_ops(x, pc, total, 0, o->compute_us);
        return (now_s() - t0) / total;
    }
    double t = 0, t0 = now_s();
    for (int i = 0; i < o->iters; i++) {
        for (int a = 0; a < o->agg_iters; a++) {
            run_ops(x, pc, 1, 1, o->compute_us);
            if (o->blocking == 1)
                barrier_or_die(x, "gx_barrier after an operation (-z 1)");
        }
        if (o->blocking == 3) {
            t += now_s() - t0;
            barrier_or_die(x, "gx_barrier after an iteration (-z 3)");
            t0 = now_s();
        }
    }
    if (o->blocking != 3)
        t = now_s() - t0;
    return t / total;
}

/* -T: a measurement that outlives its deadline stops the program. */
static char timeout_msg[256];

static void on_timeout(int sig)
{
    (void)sig;
    ssize_t w = write(STDERR_FILENO, timeout_msg, strlen(timeout_msg));
    (void)w;
    _exit(1);
}

static void measure(struct perf_ctx *x, const struct perf_case *pc, struct perf_result *res)
{
    const struct perf_opts *o = x->o;
    if (o->timeout_s > 0) {
        snprintf(timeout_msg, sizeof(timeout_msg),
                 "gx-perf: rank %d: -T %d: %s of %zu x %s%s did not finish in %d s\n", x->rank,
                 o->timeout_s, o->coll->name, pc->c.param, perf_dtype_name(pc->dtype),
                 pc->in_place ? " in place" : "", o->timeout_s);
        alarm((unsigned)o->timeout_s);
    }
    prepare(x, pc);
    run_ops(x, pc, o->warmup, o->blocking != 0, 0);
    barrier_or_die(x, "gx_barrier before timing");
    struct rank_figures mine = { timed_ops(x, pc), 0 };

    for (int k = 0; k < o->check; k++) {
        prepare(x, pc);
        run_ops(x, pc, 1, o->blocking != 0, 0);
        device_sync(x, 0);
        mine.wrong += (long long)perf_data_check(o->coll, pc->recv, pc->dtype, pc->c.recv,
                                                 pc->c.param, x->rank, x->nranks, pc->root,
                                                 pc->op);
    }
    if (o->timeout_s > 0)
        alarm(0);
    double t = 0;
    long long wrong = 0;
    combine(x, mine, &t, &wrong);
    if (x->rank != 0)
        return;
    double elems = (double)o->coll->algbw_elems(pc->c.param, x->nranks);
    res->ran = 1;
    res->time_us = t * 1e6;
    res->algbw = t > 0 ? elems * (double)pc->esize / 1e9 / t : 0;
    res->busbw = res->algbw * o->coll->bus_factor(x->nranks);
    res->wrong = o->check ? wrong : -1;
}

/* ---- sweep ------------------------------------------------------------ */

static int next_size(const struct perf_opts *o, size_t size, size_t *next)
{
    size_t n;
    if (o->step_factor > 1 && size == 0) {
        n = 1; /* nccl-tests would stay at 0 forever */
    } else if (o->step_factor > 1) {
        if (size > SIZE_MAX / o->step_factor)
            return 0;
        n = size * o->step_factor;
    } else {
        if (size > SIZE_MAX - o->step_bytes)
            return 0;
        n = size + o->step_bytes;
    }
    if (n <= size || n > o->max_bytes)
        return 0;
    *next = n;
    return 1;
}

static int count_sizes(const struct perf_opts *o)
{
    int k = 1;
    for (size_t s = o->min_bytes, n; next_size(o, s, &n); s = n)
        k++;
    return k;
}

static void progress(struct perf_ctx *x, const char *label, size_t size)
{
    if (x->rank != 0 || !x->o->progress)
        return;
    double t = now_s();
    double elapsed = t - x->start_s;
    if (elapsed < PROGRESS_AFTER_S || t - x->last_progress_s < (x->progress_tty ? 0.5 : 5.0))
        return;
    x->last_progress_s = t;
    fprintf(stderr, "%sgx-perf: %s, size %zu: %d/%d measured, %.0f s%s",
            x->progress_tty ? "\r\033[K" : "", label, size, x->steps_done, x->steps_total,
            elapsed, x->progress_tty ? "" : "\n");
    fflush(stderr);
    x->progress_shown = 1;
}

static void sweep(struct perf_ctx *x, enum gx_datatype dtype, enum gx_redop op, int root,
                  struct perf_summary *sum, double *bw_total, int *bw_rows)
{
    const struct perf_opts *o = x->o;
    const struct perf_coll *coll = o->coll;
    int has_op = (coll->flags & PERF_COLL_HAS_OP) != 0;
    size_t esize = gx_datatype_size(dtype);
    char label[96];
    snprintf(label, sizeof(label), "%s %s%s%s", coll->name, perf_dtype_name(dtype),
             has_op ? " " : "", has_op ? gx_redop_name(op) : "");

    char *sbase = x->sendbuf + (size_t)o->unalign * esize; /* -u */
    char *rbase = x->recvbuf + (size_t)o->unalign * esize;
    for (int cycle = 0; cycle < o->run_cycles; cycle++)
    for (size_t size = o->min_bytes;;) {
        progress(x, label, size);
        struct perf_case pc = { .dtype = dtype, .op = op, .root = root < 0 ? 0 : root,
                                .esize = esize };
        coll->counts(size / esize, perf_coll_align(esize), x->nranks, &pc.c);
        struct perf_row row = {
            .bytes = (pc.c.send > pc.c.recv ? pc.c.send : pc.c.recv) * esize,
            .count = pc.c.param, .dtype = dtype, .redop = has_op ? gx_redop_name(op) : "none",
            .root = root,
        };
        /* The device buffers mirror the host ones, offset for -u alike. */
        char *dsbase = x->dsend ? x->dsend + (sbase - x->sendbuf) : sbase;
        char *drbase = x->drecv ? x->drecv + (rbase - x->recvbuf) : rbase;
        pc.send = sbase;
        pc.recv = rbase;
        pc.call_send = dsbase;
        pc.call_recv = drbase;
        measure(x, &pc, &row.out_of_place);
        if (coll->flags & PERF_COLL_INPLACE) {
            pc.in_place = 1;
            size_t soff = pc.c.send_inplace_off * (size_t)x->rank * esize;
            size_t roff = pc.c.recv_inplace_off * (size_t)x->rank * esize;
            pc.send = rbase + soff;
            pc.recv = rbase + roff;
            pc.call_send = drbase + soff;
            pc.call_recv = drbase + roff;
            measure(x, &pc, &row.in_place);
        }
        x->steps_done++;
        if (x->rank == 0) {
            if (x->progress_shown && x->progress_tty) {
                fprintf(stderr, "\r\033[K");
                x->progress_shown = 0;
            }
            perf_report_row(stdout, o, x->nranks, &row);
            perf_ntjson_row(o, &row);
            const struct perf_result *res[2] = { &row.out_of_place, &row.in_place };
            for (int k = 0; k < 2; k++) {
                if (!res[k]->ran)
                    continue;
                *bw_total += res[k]->busbw;
                (*bw_rows)++;
                if (res[k]->wrong > 0)
                    sum->wrong += res[k]->wrong;
            }
        }
        if (!next_size(o, size, &size))
            break;
    }
}

/* ---- main ------------------------------------------------------------- */

static void gather_rank_info(struct perf_ctx *x, struct perf_rank_info *all)
{
    struct perf_rank_info me = { .rank = x->rank, .pid = (int)getpid(),
                                 .node = gx_comm_node_index(x->comm) };
    if (gethostname(me.host, sizeof(me.host) - 1) != 0)
        snprintf(me.host, sizeof(me.host), "?");
    /* Which providers carry this rank's traffic: the figures mean little
     * without it (shm inside a node, tcp between, or GX_PROVIDER's). */
    for (int peer = 0; peer < x->nranks; peer++) {
        const char *name = peer == x->rank ? NULL : gx_comm_peer_provider(x->comm, peer);
        size_t len = strlen(me.providers), nlen = name ? strlen(name) : 0;
        if (!name || len + nlen + 2 > sizeof(me.providers))
            continue;
        char padded[sizeof(me.providers) + 2];
        snprintf(padded, sizeof(padded), ",%s,", me.providers);
        char want[40];
        snprintf(want, sizeof(want), ",%s,", name);
        if (strstr(padded, want))
            continue;
        snprintf(me.providers + len, sizeof(me.providers) - len, "%s%s", len ? "," : "", name);
    }
    if (!me.providers[0])
        snprintf(me.providers, sizeof(me.providers), "-");
    to_rank0(x, &me, all, sizeof(me));
}

int main(int argc, char **argv)
{
    const char *rank_env = getenv("GX_RANK");
    int loud = !rank_env || strcmp(rank_env, "0") == 0;
    char *prog = strdup(argv[0]);
    const struct perf_coll *prog_coll = prog ? perf_coll_find(basename(prog)) : NULL;
    free(prog);

    struct perf_opts o;
    int rc = perf_opts_parse(argc, argv, prog_coll, loud, &o);
    if (rc == 1)
        return 0;
    if (rc) {
        /* Every rank found the same error, only rank 0 printed it. Let rank 0
         * exit first, or gx-run may name a silent rank and stop rank 0 before
         * its message is out. */
        if (!loud)
            usleep(300 * 1000);
        return 2;
    }
    if (!(o.coll->flags & PERF_COLL_HAS_OP))
        o.nops = 1; /* the op is printed as "none" and not swept */

    struct perf_ctx x = { .o = &o, .rank = -1 };
    rc = gx_comm_init_env(&x.comm);
    if (rc)
        die(&x, "gx_comm_init_env (run gx-perf under gx-run, torchrun or mpirun)", rc);
    x.rank = gx_comm_rank(x.comm);
    x.nranks = gx_comm_size(x.comm);
    if ((o.coll->flags & PERF_COLL_HAS_ROOT) && o.root >= x.nranks) { /* -1: every root */
        if (x.rank == 0)
            fprintf(stderr, "gx-perf: -r/--root %d is out of range for %d ranks\n", o.root,
                    x.nranks);
        else
            usleep(300 * 1000); /* rank 0 first, as for a bad command line */
        gx_comm_destroy(x.comm);
        return 2;
    }

    struct perf_rank_info *ranks = calloc((size_t)x.nranks, sizeof(*ranks));
    if (!ranks) {
        fprintf(stderr, "gx-perf: out of memory\n");
        return 1;
    }
    gather_rank_info(&x, ranks);
    x.sendbuf = alloc_buffer(o.max_bytes + (size_t)o.unalign * 8);
    x.recvbuf = alloc_buffer(o.max_bytes + (size_t)o.unalign * 8);
    if (o.device) {
        size_t n = o.max_bytes + (size_t)o.unalign * 8;
        n = n ? n : 64;
        int ngpu = gx_device_count();
        /* One GPU per local rank, as nccl-tests: local rank modulo the GPUs. */
        rc = ngpu > 0 ? gx_device_select(gx_comm_local_rank(x.comm) % ngpu) : GX_OK;
        if (rc == GX_OK)
            rc = gx_device_alloc((void **)&x.dsend, n);
        if (rc == GX_OK)
            rc = gx_device_alloc((void **)&x.drecv, n);
        if (rc)
            die(&x, "--device: allocating device buffers", rc);
    }
    int root_lo = 0, root_hi = 0; /* collectives without a root print -1 */
    if (!(o.coll->flags & PERF_COLL_HAS_ROOT))
        root_lo = root_hi = -1;
    else if (o.root >= 0)
        root_lo = root_hi = o.root;
    else
        root_hi = x.nranks - 1;
    if (o.timeout_s > 0)
        signal(SIGALRM, on_timeout);
    x.start_s = now_s();
    x.progress_tty = isatty(STDERR_FILENO);
    x.steps_total = count_sizes(&o) * o.ndtypes * o.nops * (root_hi - root_lo + 1) *
                    o.run_cycles;
    if (x.rank == 0) {
        if (o.json_file && perf_ntjson_open(stdout, &o, argc, argv) == 0)
            perf_ntjson_config(&o, x.nranks, ranks);
        perf_report_begin(stdout, &o, x.nranks, gx_comm_node_count(x.comm), ranks);
    }

    struct perf_summary sum = { .checked = o.check > 0 };
    double bw_total = 0;
    int bw_rows = 0;
    for (int t = 0; t < o.ndtypes; t++)
        for (int k = 0; k < o.nops; k++)
            for (int root = root_lo; root <= root_hi; root++)
                sweep(&x, o.dtypes[t], o.ops[k], root, &sum, &bw_total, &bw_rows);

    int status = 0;
    if (x.rank == 0) {
        if (x.progress_shown && x.progress_tty)
            fprintf(stderr, "\r\033[K");
        sum.avg_busbw = bw_rows ? bw_total / bw_rows : 0;
        sum.bw_failed = o.min_bw >= 0 && sum.avg_busbw < o.min_bw;
        perf_report_end(stdout, &o, &sum);
        perf_ntjson_end(&o, &sum);
        if (sum.wrong)
            fprintf(stderr, "gx-perf: %lld wrong elements (see #wrong)\n", sum.wrong);
        if (sum.bw_failed)
            fprintf(stderr, "gx-perf: average bus bandwidth %g GB/s is below %s (%g GB/s "
                    "after its tolerance)\n", sum.avg_busbw, o.min_bw_from, o.min_bw);
        status = sum.wrong || sum.bw_failed ? 1 : 0;
    }
    rc = gx_comm_finalize(x.comm);
    if (rc)
        die(&x, "gx_comm_finalize", rc);
    gx_comm_destroy(x.comm);
    free(x.sendbuf);
    free(x.recvbuf);
    gx_device_free(x.dsend);
    gx_device_free(x.drecv);
    free(ranks);
    return status;
}
