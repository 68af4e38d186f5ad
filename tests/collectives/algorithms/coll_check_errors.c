/*
 * coll_check_errors.c - coll_check mismatch, dead and badinput: every rank
 * fails the way gx.h promises, naming the culprit.
 */
#include "coll_check.h"

void mode_mismatch(struct gx_comm *comm, const char *what)
{
    float buf[64] = { 0 }, out[64 * 16];
    int rc;
    bool odd = me == 1;
    /* A few good collectives first, to be sure state carries over. */
    CHECK(gx_allreduce(comm, buf, out, 8, GX_FLOAT32, GX_SUM) == GX_OK, "warm-up");
    if (!strcmp(what, "count"))
        rc = gx_allreduce(comm, buf, out, odd ? 40 : 8, GX_FLOAT32, GX_SUM);
    else if (!strcmp(what, "kind"))
        rc = odd ? gx_broadcast(comm, buf, out, 8, GX_FLOAT32, 0)
                 : gx_allreduce(comm, buf, out, 8, GX_FLOAT32, GX_SUM);
    else if (!strcmp(what, "dtype"))
        rc = gx_allreduce(comm, buf, out, 8, odd ? GX_INT32 : GX_FLOAT32, GX_SUM);
    else if (!strcmp(what, "op"))
        rc = gx_allreduce(comm, buf, out, 8, GX_FLOAT32, odd ? GX_MAX : GX_SUM);
    else if (!strcmp(what, "root"))
        rc = gx_broadcast(comm, buf, out, 8, GX_FLOAT32, odd ? 1 : 0);
    else if (!strcmp(what, "skip")) {
        /* rank 1's call fails its argument checks; its next one pairs with
         * the others' first */
        if (odd) {
            rc = gx_allreduce(comm, NULL, out, 8, GX_FLOAT32, GX_SUM);
            CHECK(rc == GX_EINVAL, "NULL sendbuf: %s", gx_strerror(rc));
        }
        rc = gx_allreduce(comm, buf, out, 8, GX_FLOAT32, GX_SUM);
    } else {
        CHECK(0, "unknown mismatch '%s'", what);
    }
    if (rc == GX_OK) {
        /* A rank whose own neighbours agreed with it (e.g. the root of a
         * broadcast that only sends) may complete; the ranks that detected
         * the mismatch report it, and its next call fails with it. */
        rc = gx_allreduce(comm, buf, out, 8, GX_FLOAT32, GX_SUM);
    }
    const char *msg = gx_last_error();
    CHECK(rc == GX_EMISMATCH, "mismatch %s: got %s, expected GX_EMISMATCH", what,
          gx_strerror(rc));
    CHECK(strstr(msg, "mismatch") || strstr(msg, "disagree") || strstr(msg, "expected"),
          "message does not explain: %s", msg);
    printf("PASS rank %d mismatch %s: %s\n", me, what, msg);
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank 2's killer when it dies in flight: after kill_after_ms. */
static long kill_after_ms;
static void *killer(void *arg)
{
    (void)arg;
    struct timespec ts = { kill_after_ms / 1000, (kill_after_ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
    raise(SIGKILL);
    return NULL;
}

void mode_dead(struct gx_comm *comm, long in_flight_ms)
{
    size_t count = 1 << 20;
    float *in = calloc(count, 4), *out = calloc(count, 4);
    const char *to = getenv("GX_TIMEOUT");
    double timeout = to ? atof(to) : 30.0; /* GX_TIMEOUT is in seconds */
    for (int it = 0;; it++) {
        struct gx_request *req;
        if (me == 2 && it == 5 && in_flight_ms < 0)
            raise(SIGKILL);
        if (me == 2 && it == 5) { /* die in the middle of this one */
            pthread_t t;
            kill_after_ms = in_flight_ms;
            CHECK(pthread_create(&t, NULL, killer, NULL) == 0, "pthread_create");
        }
        double t0 = now_s();
        int rc = gx_iallreduce(comm, in, out, count, GX_FLOAT32, GX_SUM, &req);
        if (rc == GX_OK) {
            rc = gx_wait(req, -1);
            gx_request_free(req);
        }
        if (rc == GX_OK) {
            CHECK(it < 1000, "all-reduces keep succeeding with rank 2 dead");
            continue;
        }
        double took = now_s() - t0;
        const char *msg = gx_last_error();
        char async[512];
        int as = gx_comm_get_async_error(comm, async, sizeof(async));
        CHECK(strstr(msg, "rank 2"), "error does not name rank 2: %s", msg);
        CHECK(took < 2 * timeout, "took %.1f s (GX_TIMEOUT %.1f s)", took, timeout);
        CHECK(as != GX_OK, "no async error after the failure");
        printf("DEADCHECK ok rank %d after %.2f s: %s (%s)\n", me, took, gx_strerror(rc), msg);
        fflush(stdout);
        exit(0);
    }
}
static 
void expect_einval(int rc, const char *what, const char *word)
{
    CHECK(rc == GX_EINVAL, "%s: got %s, expected GX_EINVAL", what, gx_strerror(rc));
    CHECK(strstr(gx_last_error(), word), "%s: message '%s' does not name '%s'", what,
          gx_last_error(), word);
    checks++;
}

void mode_badinput(struct gx_comm *comm)
{
    int n = nranks;
    float a[64] = { 0 }, b[64 * 16] = { 0 };
    struct gx_request *req = NULL;
    /* Every rank makes the same bad calls, so their sequence numbers stay in
     * step and the communicator remains usable. */
    expect_einval(gx_allreduce(NULL, a, b, 4, GX_FLOAT32, GX_SUM), "NULL comm", "comm");
    expect_einval(gx_allreduce(comm, NULL, b, 4, GX_FLOAT32, GX_SUM), "NULL sendbuf", "sendbuf");
    expect_einval(gx_allreduce(comm, a, NULL, 4, GX_FLOAT32, GX_SUM), "NULL recvbuf", "recvbuf");
    CHECK(gx_allreduce(comm, NULL, NULL, 0, GX_FLOAT32, GX_SUM) == GX_OK, "NULL with count 0");
    expect_einval(gx_allreduce(comm, a, b, 4, (enum gx_datatype)99, GX_SUM), "bad dtype",
                  "dtype");
    expect_einval(gx_allreduce(comm, a, b, 4, GX_FLOAT32, (enum gx_redop)-3), "bad op", "op");
    expect_einval(gx_allreduce(comm, a, b, SIZE_MAX / 2, GX_FLOAT32, GX_SUM), "overflow",
                  "overflows");
    expect_einval(gx_allgather(comm, a, b, SIZE_MAX / 4 / (size_t)n + 1, GX_FLOAT32),
                  "allgather overflow", "overflows");
    expect_einval(gx_allreduce(comm, a, a + 1, 4, GX_FLOAT32, GX_SUM), "overlap", "overlap");
    expect_einval(gx_alltoall(comm, a, a + 1, 2, GX_FLOAT32), "alltoall overlap", "overlap");
    if (n > 1)
        expect_einval(gx_allgather(comm, b + 1, b, 2, GX_FLOAT32), "allgather wrong in-place",
                      "overlap");
    expect_einval(gx_broadcast(comm, a, b, 4, GX_FLOAT32, n), "root too big", "root");
    expect_einval(gx_reduce(comm, a, b, 4, GX_FLOAT32, GX_SUM, -1), "negative root", "root");
    expect_einval(gx_gather(comm, a, NULL, 4, GX_FLOAT32, me), "NULL gather recvbuf at root",
                  "recvbuf");
    expect_einval(gx_scatter(comm, NULL, b, 4, GX_FLOAT32, me), "NULL scatter sendbuf at root",
                  "sendbuf");
    expect_einval(gx_iallreduce(comm, a, b, 4, GX_FLOAT32, GX_SUM, NULL), "NULL req", "req");
    (void)req;
    /* Still usable, and nothing was sent by the bad calls. */
    for (int i = 0; i < 64; i++)
        a[i] = (float)(me + i);
    CHECK(gx_allreduce(comm, a, b, 64, GX_FLOAT32, GX_SUM) == GX_OK, "allreduce after bad input");
    for (int i = 0; i < 64; i++)
        CHECK(b[i] == (float)(n * (n - 1) / 2 + n * i), "element %d wrong after bad input", i);
    /* sendbuf is ignored (may be NULL) on ranks other than the root */
    CHECK(gx_broadcast(comm, me == n - 1 ? a : NULL, b, 4, GX_FLOAT32, n - 1) == GX_OK,
          "broadcast with NULL sendbuf on non-roots");
    CHECK(b[3] == (float)(n - 1 + 3), "broadcast result");
}
