/*
 * win_bench - one-sided put/get against gx's own send/receive between 2
 * ranks, on whatever provider the job picked (GX_PROVIDER; perf/win_bench.sh
 * runs shm, tcp and verbs over softverbs). Public API only.
 *
 *   gx-run -n 2 build/bin/win_bench [--sizes 4096,65536,1048576] [--reps R]
 *
 * Rank 0 is the origin, rank 1 the target. For each size S:
 *   put   B:   K gx_iput of S bytes into rank 1's window, then
 *              gx_win_flush(win, 1) (the data is at the target): K*S / time
 *   get   B:   K gx_iget of S bytes, waited
 *   send  B:   K gx_isend of S bytes, rank 1 has K gx_irecv posted; then a
 *              0-byte answer from rank 1 (everything arrived): K*S / time
 * K = max(8, 64 MiB / S) capped at 256, so each measure moves 16-64 MiB at
 * the large sizes. Latency at 8 bytes: put + flush, get, and half of a
 * send/receive ping-pong. Each figure is the median of R repetitions
 * (default 5) after one warm-up. Rank 0 prints
 *   RESULT <path> <op> <bytes> <value>     (value: GB/s, or us for "lat")
 * with the window's path to rank 1 (gx_win_path: fabric or am). Exit 1 on
 * any error or when a get reads back other bytes than were put.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gx/gx.h"

#define MAX_K 256
#define WAIT_MS 60000

static int me;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void ok(int rc, const char *what)
{
    if (rc != GX_OK) {
        fprintf(stderr, "win_bench rank %d: %s: %s (%s)\n", me, what, gx_strerror(rc),
                gx_last_error());
        exit(1);
    }
}

static void wait_all(struct gx_request **reqs, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        ok(gx_wait(reqs[i], WAIT_MS), what);
        gx_request_free(reqs[i]);
    }
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum op { OP_PUT, OP_GET, OP_SEND };

/* One measure of K operations of `size` bytes; seconds (rank 0). */
static double measure(struct gx_comm *comm, struct gx_win *win, enum op op, char *buf,
                      size_t size, int k)
{
    struct gx_request *reqs[MAX_K];
    ok(gx_barrier(comm), "barrier");
    double t0 = now_s();
    if (op == OP_SEND) {
        for (int i = 0; i < k; i++) {
            if (me == 0)
                ok(gx_isend(comm, buf, size, GX_UINT8, 1, 7, &reqs[i]), "isend");
            else
                ok(gx_irecv(comm, buf, size, GX_UINT8, 0, 7, &reqs[i]), "irecv");
        }
        wait_all(reqs, k, me == 0 ? "send" : "recv");
        if (me == 0)
            ok(gx_recv(comm, NULL, 0, GX_UINT8, 1, 8, NULL), "answer");
        else
            ok(gx_send(comm, NULL, 0, GX_UINT8, 0, 8), "answer");
    } else if (me == 0) {
        for (int i = 0; i < k; i++) {
            if (op == OP_PUT)
                ok(gx_iput(win, buf, size, GX_UINT8, 1, 0, &reqs[i]), "iput");
            else
                ok(gx_iget(win, buf, size, GX_UINT8, 1, 0, &reqs[i]), "iget");
        }
        wait_all(reqs, k, op == OP_PUT ? "put" : "get");
        if (op == OP_PUT)
            ok(gx_win_flush(win, 1), "flush");
    }
    return now_s() - t0;
}

static double latency_us(struct gx_comm *comm, struct gx_win *win, enum op op, char *buf)
{
    enum { N = 500 };
    ok(gx_barrier(comm), "barrier");
    double t0 = now_s();
    for (int i = 0; i < N; i++) {
        if (op == OP_SEND) {
            if (me == 0) {
                ok(gx_send(comm, buf, 8, GX_UINT8, 1, 9), "ping");
                ok(gx_recv(comm, buf, 8, GX_UINT8, 1, 9, NULL), "pong");
            } else {
                ok(gx_recv(comm, buf, 8, GX_UINT8, 0, 9, NULL), "ping");
                ok(gx_send(comm, buf, 8, GX_UINT8, 0, 9), "pong");
            }
        } else if (me == 0 && op == OP_PUT) {
            ok(gx_put(win, buf, 8, GX_UINT8, 1, 0), "put");
            ok(gx_win_flush(win, 1), "flush");
        } else if (me == 0) {
            ok(gx_get(win, buf, 8, GX_UINT8, 1, 0), "get");
        }
    }
    double us = (now_s() - t0) * 1e6 / N;
    return op == OP_SEND ? us / 2 : us;
}

static size_t parse_sizes(const char *s, size_t *out, int max)
{
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) {
        char *end;
        unsigned long long v = strtoull(t, &end, 10);
        if (*end || v == 0) {
            fprintf(stderr, "win_bench: --sizes: '%s' is not a positive byte count\n", t);
            exit(2);
        }
        out[n++] = (size_t)v;
    }
    free(copy);
    return (size_t)n;
}

int main(int argc, char **argv)
{
    size_t sizes[16] = { 4096, 65536, 1048576, 4194304 };
    size_t nsizes = 4;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
            nsizes = parse_sizes(argv[++i], sizes, 16);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: win_bench [--sizes B,B,...] [--reps R>0] (bad: %s)\n",
                    argv[i]);
            return 2;
        }
    }
    struct gx_comm *comm;
    ok(gx_comm_init_env(&comm), "init");
    me = gx_comm_rank(comm);
    if (gx_comm_size(comm) != 2) {
        fprintf(stderr, "win_bench: needs 2 ranks, not %d\n", gx_comm_size(comm));
        return 2;
    }
    size_t max = 8;
    for (size_t i = 0; i < nsizes; i++)
        max = sizes[i] > max ? sizes[i] : max;
    char *win_mem = malloc(max), *buf = malloc(max);
    if (!win_mem || !buf)
        return 1;
    memset(win_mem, 0, max);
    for (size_t i = 0; i < max; i++)
        buf[i] = (char)(i * 7 + 3);
    struct gx_win *win;
    ok(gx_win_create(comm, win_mem, max, &win), "win_create");
    const char *path = me == 0 ? gx_win_path(win, 1) : "-";
    /* correctness first: a put then a get of the largest size */
    if (me == 0) {
        char *back = malloc(max);
        ok(gx_put(win, buf, max, GX_UINT8, 1, 0), "check put");
        ok(gx_win_flush(win, 1), "check flush");
        ok(gx_get(win, back, max, GX_UINT8, 1, 0), "check get");
        if (memcmp(back, buf, max) != 0) {
            fprintf(stderr, "win_bench: the get read other bytes than the put wrote\n");
            return 1;
        }
        free(back);
    }
    static const char *names[] = { "put", "get", "send" };
    for (int op = OP_PUT; op <= OP_SEND; op++) {
        double v[64];
        int r = reps < 64 ? reps : 64;
        (void)latency_us(comm, win, (enum op)op, buf);
        for (int i = 0; i < r; i++)
            v[i] = latency_us(comm, win, (enum op)op, buf);
        if (me == 0)
            printf("RESULT %s %s_lat 8 %.2f\n", path, names[op], median(v, r));
    }
    for (size_t s = 0; s < nsizes; s++) {
        size_t size = sizes[s];
        int k = (int)((64u << 20) / size);
        k = k < 8 ? 8 : k > MAX_K ? MAX_K : k;
        for (int op = OP_PUT; op <= OP_SEND; op++) {
            double v[64];
            int r = reps < 64 ? reps : 64;
            (void)measure(comm, win, (enum op)op, buf, size, k);
            for (int i = 0; i < r; i++)
                v[i] = (double)size * k / measure(comm, win, (enum op)op, buf, size, k) / 1e9;
            if (me == 0)
                printf("RESULT %s %s %zu %.3f\n", path, names[op], size, median(v, r));
        }
    }
    fflush(stdout);
    ok(gx_win_free(win), "win_free");
    ok(gx_comm_finalize(comm), "finalize");
    gx_comm_destroy(comm);
    free(win_mem);
    free(buf);
    return 0;
}
