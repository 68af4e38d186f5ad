/*
 * nccl_check.c - the node's NCCL communicator for device collectives, under
 * gx-run with the fake libcuda and the fake libnccl (GX_NCCL_LIB):
 *
 *   nccl_check used     an all-reduce, a broadcast and an all-gather on device
 *                       buffers are right and ran through the fake NCCL
 *                       (its call counter moved); also on a real GPU with a
 *                       real libnccl and GX_NCCL=on (tests/gpu/run.sh)
 *   nccl_check staged   (GX_NCCL=off) the same are right and NCCL was never
 *                       called: the staging path
 *   nccl_check fail     (FAKENCCL_FAIL=ncclAllReduce) the all-reduce fails
 *                       with GX_ESYSTEM naming NCCL, the call and the
 *                       communicator
 *   nccl_check hang     (FAKENCCL_HANG=<call>, GX_TIMEOUT) the call fails
 *                       with GX_ETIMEOUT naming the call and the node's NCCL
 *                       communicator within 2 x GX_TIMEOUT (or GX_EPEER when
 *                       a peer that timed out first has left; the test wants
 *                       one TIMEOUT line); NCCL_CHECK_CALL names the call
 *   nccl_check async    (FAKENCCL_ASYNC=ncclAllReduce) the library's async
 *                       error fails the call before the deadline, named
 *   nccl_check dead     rank 2 SIGKILLs itself before its 6th all-reduce: the
 *                       others' pending NCCL call fails with GX_EPEER naming
 *                       a gone rank (or NCCL's async error, when a peer's
 *                       abort got there first) and the NCCL communicator well
 *                       before
 *                       GX_TIMEOUT (the test wants rank 2 named by at least
 *                       one: a survivor that failed first may be noticed
 *                       first by another)
 * Each rank prints "NCCLCHECK ok" at the end.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devmem.h"
#include "gx/gx.h"

static int me = -1;
static struct devmem dm;
#include "../lib/rank_check.h"

static unsigned long long nccl_calls(void)
{
    const char *lib = getenv("GX_NCCL_LIB");
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    unsigned long long (*f)(void) = h ? (unsigned long long (*)(void))dlsym(h, "fakenccl_calls")
                                      : NULL;
    return f ? f() : 0;
}

static bool fake_nccl(void)
{
    const char *lib = getenv("GX_NCCL_LIB");
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    return h && dlsym(h, "fakenccl_calls");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float *dev_floats(size_t n)
{
    unsigned long long p = 0;
    CHECK(dm.alloc(&p, n * sizeof(float)) == 0, "cuMemAlloc");
    return (float *)(uintptr_t)p;
}

static void put(float *d, const float *h, size_t n)
{
    CHECK(dm.htod((unsigned long long)(uintptr_t)d, h, n * sizeof(float)) == 0, "htod");
}

static void get(float *h, const float *d, size_t n)
{
    CHECK(dm.dtoh(h, (unsigned long long)(uintptr_t)d, n * sizeof(float)) == 0, "dtoh");
}

/* all-reduce, broadcast from the last rank, all-gather; all checked. */
static void three(struct gx_comm *comm, int n)
{
    enum { N = 1000 };
    float *s = dev_floats(N), *r = dev_floats((size_t)N * n);
    float *h = malloc(sizeof(float) * N * (size_t)n);
    for (int i = 0; i < N; i++)
        h[i] = (float)(me + 1) * (float)(i % 17);
    put(s, h, N);
    CHECK(gx_allreduce(comm, s, r, N, GX_FLOAT32, GX_SUM) == GX_OK, "allreduce");
    get(h, r, N);
    for (int i = 0; i < N; i++)
        CHECK(h[i] == (float)(n * (n + 1) / 2) * (float)(i % 17), "allreduce[%d] = %g", i,
              (double)h[i]);
    for (int i = 0; i < N; i++)
        h[i] = (float)(me * 1000 + i);
    put(r, h, N);
    CHECK(gx_broadcast(comm, r, r, N, GX_FLOAT32, n - 1) == GX_OK, "broadcast");
    get(h, r, N);
    for (int i = 0; i < N; i++)
        CHECK(h[i] == (float)((n - 1) * 1000 + i), "broadcast[%d] = %g", i, (double)h[i]);
    for (int i = 0; i < N; i++)
        h[i] = (float)(me * 7 + i);
    put(s, h, N);
    CHECK(gx_allgather(comm, s, r, N, GX_FLOAT32) == GX_OK, "allgather");
    get(h, r, (size_t)N * n);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < N; i++)
            CHECK(h[k * N + i] == (float)(k * 7 + i), "allgather[%d][%d]", k, i);
    free(h);
}

static void expect_error(struct gx_comm *comm, int want, const char *const *needles,
                         double limit_s)
{
    float *s = dev_floats(64), *r = dev_floats(64);
    double t0 = now_s();
    int rc = gx_allreduce(comm, s, r, 64, GX_FLOAT32, GX_SUM);
    double took = now_s() - t0;
    CHECK(rc == want, "allreduce returned %d (%s), wanted %d", rc, gx_strerror(rc), want);
    for (int i = 0; needles[i]; i++)
        CHECK(strstr(gx_last_error(), needles[i]), "error does not name '%s'", needles[i]);
    CHECK(took <= limit_s, "failed after %.2f s, limit %.2f s", took, limit_s);
    printf("rank %d: failed in %.2f s: %s\n", me, took, gx_last_error());
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (devmem_open(&dm) != 0) {
        fprintf(stderr, "nccl_check: %s\n", dm.why);
        return 77;
    }
    if (strcmp(mode, "used") != 0 && !dm.peek) {
        fprintf(stderr, "nccl_check %s: needs the fake libcuda and libnccl\n", mode);
        return 77;
    }
    struct gx_comm *comm = NULL;
    CHECK(gx_comm_init_env(&comm) == GX_OK, "init");
    me = gx_comm_rank(comm);
    int n = gx_comm_size(comm);
    double timeout_s = getenv("GX_TIMEOUT") ? atof(getenv("GX_TIMEOUT")) : 600.0;
    if (!strcmp(mode, "used")) {
        three(comm, n);
        /* The fake counts; a real libnccl (tests/gpu/run.sh, GX_NCCL=on so
         * an unusable one fails the calls) has no counter. */
        CHECK(!fake_nccl() || nccl_calls() == 3, "fake NCCL completed %llu collectives, "
              "wanted 3", nccl_calls());
    } else if (!strcmp(mode, "staged")) {
        three(comm, n);
        CHECK(nccl_calls() == 0, "fake NCCL ran %llu collectives with GX_NCCL=off",
              nccl_calls());
    } else if (!strcmp(mode, "fail")) {
        const char *const k[] = { "NCCL ncclAllReduce failed", "NCCL communicator of comm",
                                  "ncclSystemError", NULL };
        expect_error(comm, GX_ESYSTEM, k, timeout_s);
    } else if (!strcmp(mode, "hang")) {
        const char *call = getenv("NCCL_CHECK_CALL") ? getenv("NCCL_CHECK_CALL")
                                                     : "ncclAllReduce";
        /* GX_ETIMEOUT naming the call; a rank whose peer timed out a little
         * earlier and left may see that peer gone first (GX_EPEER). */
        float *s = dev_floats(64), *r = dev_floats(64);
        double t0 = now_s();
        int rc = gx_allreduce(comm, s, r, 64, GX_FLOAT32, GX_SUM);
        double took = now_s() - t0;
        const char *e = gx_last_error();
        CHECK((rc == GX_ETIMEOUT && strstr(e, call) && strstr(e, "GX_TIMEOUT")) ||
              (rc == GX_EPEER && strstr(e, " gone")), "allreduce returned %d (%s)", rc,
              gx_strerror(rc));
        CHECK(strstr(e, "NCCL communicator of comm"), "the NCCL communicator is not named");
        CHECK(took <= 2 * timeout_s, "failed after %.2f s, limit %.2f s", took, 2 * timeout_s);
        printf("rank %d: failed in %.2f s: %s\n", me, took, e);
        if (rc == GX_ETIMEOUT)
            printf("TIMEOUT named on rank %d\n", me);
    } else if (!strcmp(mode, "async")) {
        const char *const k[] = { "NCCL ncclAllReduce failed", "asynchronous error",
                                  "ncclRemoteError", NULL };
        expect_error(comm, GX_ESYSTEM, k, timeout_s);
    } else if (!strcmp(mode, "dead")) {
        CHECK(n >= 3, "needs 3+ ranks");
        float *s = dev_floats(1 << 16), *r = dev_floats(1 << 16);
        for (int it = 0;; it++) {
            if (me == 2 && it == 5)
                raise(SIGKILL);
            double t0 = now_s();
            int rc = gx_allreduce(comm, s, r, 1 << 16, GX_FLOAT32, GX_SUM);
            if (rc == GX_OK) {
                CHECK(it < 1000, "all-reduces keep succeeding with rank 2 dead");
                continue;
            }
            double took = now_s() - t0;
            /* GX_EPEER naming a gone rank, or NCCL's own (asynchronous)
             * error when a peer's abort reached the library first. */
            CHECK((rc == GX_EPEER && strstr(gx_last_error(), " gone")) ||
                  (rc == GX_ESYSTEM && strstr(gx_last_error(), "asynchronous error")),
                  "rc %d (%s): neither a gone rank nor NCCL's async error", rc,
                  gx_strerror(rc));
            CHECK(strstr(gx_last_error(), "NCCL communicator"), "the NCCL comm is not named");
            CHECK(took < timeout_s / 2, "took %.2f s (GX_TIMEOUT %.0f s)", took, timeout_s);
            printf("rank %d: failed in %.2f s: %s\n", me, took, gx_last_error());
            if (strstr(gx_last_error(), "comm rank 2,"))
                printf("NAMED rank 2 on rank %d\n", me);
            sleep(2);
            break;
        }
    } else {
        fprintf(stderr, "nccl_check: unknown mode '%s'\n", mode);
        return 2;
    }
    printf("NCCLCHECK ok rank %d\n", me);
    fflush(stdout);
    if (strcmp(mode, "used") != 0 && strcmp(mode, "staged") != 0)
        sleep(1); /* stay until the peers saw their own failure, not us leaving */
    gx_comm_destroy(comm);
    return 0;
}
