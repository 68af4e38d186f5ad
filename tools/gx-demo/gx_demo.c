/*
 * gx-demo - the main job of ./gx.sh demo: what a training binary does with
 * gx, on whatever transports this machine has. Run it under gx-run:
 *
 *   gx-run -n 4 gx-demo
 *
 * It initialises a communicator, says where every rank runs and which
 * provider reaches each peer, times barriers, passes messages around a ring
 * at growing sizes (checking every byte), all-reduces gradients-sized float
 * buffers (checking the sums), and finalises. Exit status 0 means every check
 * passed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gx/gx.h"

static int rank_ = -1;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "gx-demo rank %d: ", rank_);                       \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, " (%s)\n", gx_last_error());                       \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void ring(struct gx_comm *comm)
{
    int n = gx_comm_size(comm);
    int next = (rank_ + 1) % n, prev = (rank_ + n - 1) % n;
    if (rank_ == 0)
        printf("\n[ring] each rank sends to rank+1 and receives from rank-1\n"
               "%12s %8s %12s %12s\n", "bytes", "iters", "time/iter", "MB/s/rank");
    for (size_t bytes = 8; bytes <= (16u << 20); bytes *= 16) {
        uint8_t *out = malloc(bytes), *in = malloc(bytes);
        for (size_t i = 0; i < bytes; i++)
            out[i] = (uint8_t)(rank_ + i * 3);
        int iters = bytes <= 65536 ? 200 : 10;
        CHECK(gx_barrier(comm) == GX_OK, "barrier");
        double t0 = now_s();
        for (int it = 0; it < iters; it++) {
            struct gx_request *r, *s;
            CHECK(gx_irecv(comm, in, bytes, GX_UINT8, prev, 1, &r) == GX_OK, "irecv");
            CHECK(gx_isend(comm, out, bytes, GX_UINT8, next, 1, &s) == GX_OK, "isend");
            CHECK(gx_wait(s, -1) == GX_OK && gx_wait(r, -1) == GX_OK, "ring step");
            gx_request_free(s);
            gx_request_free(r);
        }
        double dt = (now_s() - t0) / iters;
        for (size_t i = 0; i < bytes; i++)
            CHECK(in[i] == (uint8_t)(prev + i * 3), "byte %zu of %zu from rank %d", i, bytes, prev);
        if (rank_ == 0)
            printf("%12zu %8d %10.1f us %12.1f\n", bytes, iters, dt * 1e6, bytes / dt / 1e6);
        free(out);
        free(in);
    }
}

static void allreduce(struct gx_comm *comm)
{
    int n = gx_comm_size(comm);
    if (rank_ == 0)
        printf("\n[all-reduce] float32 sum, checked on every rank\n"
               "%12s %8s %12s %12s\n", "bytes", "iters", "time/iter", "busbw MB/s");
    for (size_t count = 1; count <= (4u << 20); count *= 32) {
        float *buf = malloc(count * sizeof(float));
        int iters = count <= 1024 ? 100 : 5;
        double t0 = 0;
        for (int it = 0; it < iters + 1; it++) {
            for (size_t i = 0; i < count; i++)
                buf[i] = (float)((rank_ + 1) * (int)(i % 7));
            if (it == 1)
                t0 = now_s(); /* the first round warms up */
            CHECK(gx_allreduce(comm, buf, buf, count, GX_FLOAT32, GX_SUM) == GX_OK, "all-reduce");
        }
        double dt = (now_s() - t0) / iters;
        float ranks_sum = (float)n * (float)(n + 1) / 2.0f;
        for (size_t i = 0; i < count; i++)
            CHECK(buf[i] == ranks_sum * (float)(i % 7), "element %zu: %g", i, (double)buf[i]);
        double busbw = (double)count * sizeof(float) * 2.0 * (n - 1) / n / dt / 1e6;
        if (rank_ == 0)
            printf("%12zu %8d %10.1f us %12.1f\n", count * sizeof(float), iters, dt * 1e6, busbw);
        free(buf);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct gx_comm *comm;
    int rc = gx_comm_init_env(&comm);
    if (rc != GX_OK) {
        fprintf(stderr, "gx-demo: init failed: %s: %s\n(run it under gx-run: gx-run -n 4 gx-demo)\n",
                gx_strerror(rc), gx_last_error());
        return 1;
    }
    rank_ = gx_comm_rank(comm);
    int n = gx_comm_size(comm);
    printf("rank %d of %d: local rank %d of %d on node %d of %d\n", rank_, n,
           gx_comm_local_rank(comm), gx_comm_local_size(comm), gx_comm_node_index(comm),
           gx_comm_node_count(comm));
    CHECK(gx_barrier(comm) == GX_OK, "barrier");

    double t0 = now_s();
    for (int i = 0; i < 100; i++)
        CHECK(gx_barrier(comm) == GX_OK, "barrier %d", i);
    if (rank_ == 0)
        printf("\n[barrier] %d ranks: %.1f us per barrier (100 rounds)\n", n,
               (now_s() - t0) / 100 * 1e6);
    ring(comm);
    allreduce(comm);

    CHECK(gx_comm_finalize(comm) == GX_OK, "finalize");
    gx_comm_destroy(comm);
    if (rank_ == 0)
        printf("\ngx-demo: init, barrier, ring and all-reduce checks passed on %d ranks\n", n);
    return 0;
}
