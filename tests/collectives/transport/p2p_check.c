/*
 * p2p_check - multi-process checks of gx_send / gx_recv / gx_isend / gx_irecv.
 * Run under gx-run. Modes:
 *   p2p_check all        ring exchange at many sizes, ordering, tags, self
 *                        sends, 1000 outstanding operations, truncation
 *   p2p_check dead       rank 1 dies; rank 0's receive fails naming it
 *   p2p_check sent-gone  rank 1 sends a small message and exits at once; rank 0
 *                        still receives it afterwards, and only a receive that
 *                        needs more from rank 1 fails, naming it
 * GX_PROVIDER / GX_NODE_ID select the providers under test.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int my_rank = -1;

static uint8_t pattern(int from, size_t i, int round)
{
    return (uint8_t)(from * 31 + i * 7 + (size_t)round * 13 + (i >> 12));
}

static void ring_sizes(struct gx_comm *comm)
{
    int size = gx_comm_size(comm);
    int next = (my_rank + 1) % size, prev = (my_rank + size - 1) % size;
    static const size_t sizes[] = { 0, 1, 7, 1000, 16384, 16385, 100000, 1 << 20, 64 << 20 };
    /* P2P_MAX_BYTES caps the sizes (lossy emulated links retransmit a lot). */
    size_t cap = getenv("P2P_MAX_BYTES") ? strtoull(getenv("P2P_MAX_BYTES"), NULL, 10) : SIZE_MAX;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]) && sizes[s] <= cap; s++) {
        size_t n = sizes[s];
        uint8_t *out = malloc(n + 1), *in = malloc(n + 1);
        for (size_t i = 0; i < n; i++)
            out[i] = pattern(my_rank, i, (int)s);
        memset(in, 0xee, n + 1);
        struct gx_request *rr, *sr;
        CHECK(gx_irecv(comm, in, n, GX_UINT8, prev, 5, &rr) == GX_OK, "irecv %zu", n);
        CHECK(gx_isend(comm, out, n, GX_UINT8, next, 5, &sr) == GX_OK, "isend %zu", n);
        CHECK(gx_wait(sr, 60000) == GX_OK, "send of %zu bytes", n);
        CHECK(gx_wait(rr, 60000) == GX_OK, "receive of %zu bytes", n);
        size_t got = 0;
        CHECK(gx_request_count(rr, &got) == GX_OK && got == n, "count %zu, expected %zu", got, n);
        for (size_t i = 0; i < n; i++)
            CHECK(in[i] == pattern(prev, i, (int)s), "byte %zu of %zu wrong", i, n);
        CHECK(in[n] == 0xee, "wrote past the end of a %zu-byte message", n);
        gx_request_free(rr);
        gx_request_free(sr);
        free(out);
        free(in);
    }
}

static void ordering_and_tags(struct gx_comm *comm)
{
    int size = gx_comm_size(comm);
    if (size < 2)
        return;
    if (my_rank == 0) {
        for (int i = 0; i < 100; i++)
            CHECK(gx_send(comm, &i, 1, GX_INT32, 1, 9) == GX_OK, "ordered send %d", i);
        int64_t a = 1111, b = 2222;
        CHECK(gx_send(comm, &a, 1, GX_INT64, 1, 1) == GX_OK, "tag 1");
        CHECK(gx_send(comm, &b, 1, GX_INT64, 1, 2) == GX_OK, "tag 2");
    } else if (my_rank == 1) {
        for (int i = 0; i < 100; i++) {
            int v = -1;
            CHECK(gx_recv(comm, &v, 1, GX_INT32, 0, 9, NULL) == GX_OK && v == i,
                  "ordered receive %d got %d", i, v);
        }
        int64_t a = 0, b = 0;
        /* Receive in the other order: tags keep them apart. */
        CHECK(gx_recv(comm, &b, 1, GX_INT64, 0, 2, NULL) == GX_OK && b == 2222, "tag 2 got %ld",
              (long)b);
        CHECK(gx_recv(comm, &a, 1, GX_INT64, 0, 1, NULL) == GX_OK && a == 1111, "tag 1 got %ld",
              (long)a);
    }
    /* Self: send before the receive is posted, then receive. */
    double x = 3.5, y = 0;
    struct gx_request *sr;
    CHECK(gx_isend(comm, &x, 1, GX_FLOAT64, my_rank, 77, &sr) == GX_OK, "self isend");
    CHECK(gx_recv(comm, &y, 1, GX_FLOAT64, my_rank, 77, NULL) == GX_OK && y == 3.5, "self recv");
    CHECK(gx_wait(sr, 1000) == GX_OK, "self send completes");
    gx_request_free(sr);
}

static void many_outstanding(struct gx_comm *comm)
{
    int size = gx_comm_size(comm);
    int next = (my_rank + 1) % size, prev = (my_rank + size - 1) % size;
    enum { N = 1000 };
    static int out[N], in[N];
    static struct gx_request *rr[N], *sr[N];
    for (int i = 0; i < N; i++) {
        out[i] = my_rank * 100000 + i;
        in[i] = -1;
        CHECK(gx_isend(comm, &out[i], 1, GX_INT32, next, 100 + i % 3, &sr[i]) == GX_OK, "isend %d", i);
    }
    for (int i = 0; i < N; i++)
        CHECK(gx_irecv(comm, &in[i], 1, GX_INT32, prev, 100 + i % 3, &rr[i]) == GX_OK, "irecv %d", i);
    for (int i = 0; i < N; i++) {
        CHECK(gx_wait(rr[i], 60000) == GX_OK && in[i] == prev * 100000 + i, "recv %d got %d", i, in[i]);
        CHECK(gx_wait(sr[i], 60000) == GX_OK, "send %d", i);
        gx_request_free(rr[i]);
        gx_request_free(sr[i]);
    }
}

static void truncation(struct gx_comm *comm)
{
    if (gx_comm_size(comm) < 2 || my_rank > 1)
        return;
    static const size_t msg_sizes[] = { 1000, 1 << 20 }; /* eager, rendezvous */
    for (int k = 0; k < 2; k++) {
        size_t n = msg_sizes[k];
        char *buf = calloc(1, n);
        if (my_rank == 0) {
            int rc = gx_send(comm, buf, n, GX_UINT8, 1, 30 + k);
            if (k == 1) /* the sender learns it from the receiver's answer */
                CHECK(rc == GX_ETRUNCATE && strstr(gx_last_error(), "rank 0 to rank 1"),
                      "sender of %zu: %s", n, gx_strerror(rc));
        } else {
            int rc = gx_recv(comm, buf, n / 10, GX_UINT8, 0, 30 + k, NULL);
            char want[64];
            snprintf(want, sizeof(want), "is %zu bytes", n);
            CHECK(rc == GX_ETRUNCATE, "short receive returned %s", gx_strerror(rc));
            CHECK(strstr(gx_last_error(), "rank 0 to rank 1") && strstr(gx_last_error(), want),
                  "message lacks ranks or sizes: %s", gx_last_error());
        }
        free(buf);
    }
    /* The pair still works afterwards. */
    int v = 42, w = 0;
    if (my_rank == 0)
        CHECK(gx_send(comm, &v, 1, GX_INT32, 1, 40) == GX_OK, "send after truncation");
    else
        CHECK(gx_recv(comm, &w, 1, GX_INT32, 0, 40, NULL) == GX_OK && w == 42, "recv after truncation");
}

static void bad_args(struct gx_comm *comm)
{
    int v = 0;
    struct gx_request *req;
    CHECK(gx_send(comm, &v, 1, GX_INT32, gx_comm_size(comm), 0) == GX_EINVAL &&
              strstr(gx_last_error(), "peer"), "peer out of range");
    CHECK(gx_send(comm, &v, 1, GX_INT32, 0, -1) == GX_EINVAL && strstr(gx_last_error(), "tag"),
          "negative tag");
    CHECK(gx_send(comm, NULL, 1, GX_INT32, 0, 0) == GX_EINVAL && strstr(gx_last_error(), "buf"),
          "NULL buffer");
    CHECK(gx_isend(comm, &v, SIZE_MAX / 2, GX_INT32, 0, 0, &req) == GX_EINVAL &&
              strstr(gx_last_error(), "overflows"), "count overflow");
    CHECK(gx_irecv(comm, &v, 1, (enum gx_datatype)42, 0, 0, &req) == GX_EINVAL &&
              strstr(gx_last_error(), "dtype"), "bad dtype");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct gx_comm *comm;
    int rc = gx_comm_init_env(&comm);
    CHECK(rc == GX_OK, "init: %s", gx_strerror(rc));
    my_rank = gx_comm_rank(comm);
    if (argc > 1 && strcmp(argv[1], "dead") == 0) {
        CHECK(gx_barrier(comm) == GX_OK, "barrier");
        if (my_rank == 1) {
            fflush(stdout);
            raise(SIGKILL);
        }
        if (my_rank == 0) {
            int v;
            rc = gx_recv(comm, &v, 1, GX_INT32, 1, 3, NULL);
            CHECK(GX_IS_PEER_ERROR(rc), "receive from a dead rank returned %s", gx_strerror(rc));
            CHECK(strstr(gx_last_error(), "rank 1"), "error does not name rank 1: %s", gx_last_error());
            printf("PASS rank 0: receive from the dead rank 1 failed: %s\n", gx_last_error());
        } else {
            printf("PASS rank %d\n", my_rank);
        }
        gx_comm_destroy(comm);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "sent-gone") == 0) {
        CHECK(gx_barrier(comm) == GX_OK, "barrier");
        int v = 4242;
        if (my_rank == 1) {
            CHECK(gx_send(comm, &v, 1, GX_INT32, 0, 5) == GX_OK, "send before exiting");
            printf("PASS rank 1: sent, exiting without finalize\n");
            fflush(stdout);
            _exit(0);
        }
        if (my_rank == 0) {
            /* A receive from itself keeps progress running, so the message
             * arrives unexpected and then the connection closes, all before
             * the matching receive is posted. */
            int w = 0, done = 0, self = 99;
            struct gx_request *pending = NULL;
            CHECK(gx_irecv(comm, &w, 1, GX_INT32, 0, 9, &pending) == GX_OK, "irecv from self");
            for (int i = 0; i < 500 && !done; i++) {
                CHECK(gx_test(pending, &done) == GX_OK, "test the receive from self");
                usleep(1000);
            }
            CHECK(!done, "the receive from self completed before its send");
            v = 0;
            rc = gx_recv(comm, &v, 1, GX_INT32, 1, 5, NULL);
            CHECK(rc == GX_OK && v == 4242, "a message rank 1 sent before exiting was lost: %s, "
                  "value %d", gx_strerror(rc), v);
            CHECK(gx_send(comm, &self, 1, GX_INT32, 0, 9) == GX_OK, "send to self");
            CHECK(gx_wait(pending, -1) == GX_OK && w == 99, "receive from self");
            gx_request_free(pending);
            rc = gx_recv(comm, &v, 1, GX_INT32, 1, 6, NULL);
            CHECK(GX_IS_PEER_ERROR(rc), "receive from the gone rank returned %s", gx_strerror(rc));
            CHECK(strstr(gx_last_error(), "rank 1"), "error does not name rank 1: %s",
                  gx_last_error());
            printf("PASS rank 0: got the message, then: %s\n", gx_last_error());
        }
        gx_comm_destroy(comm);
        return 0;
    }
    /* P2P_EXPECT="shm,verbs": the provider to a peer on the same node, then to
     * a peer on another node. */
    const char *expect = getenv("P2P_EXPECT");
    if (expect) {
        char same[16] = "", other[16] = "";
        sscanf(expect, "%15[^,],%15s", same, other);
        for (int p = 0; p < gx_comm_size(comm); p++) {
            if (p == my_rank)
                continue;
            const char *got = gx_comm_peer_provider(comm, p);
            const char *want = (p / 2 == my_rank / 2) ? same : other;
            CHECK(got && strcmp(got, want) == 0, "provider to rank %d is %s, expected %s", p,
                  got ? got : "NULL", want);
        }
    }
    bad_args(comm);
    ring_sizes(comm);
    ordering_and_tags(comm);
    many_outstanding(comm);
    truncation(comm);
    CHECK(gx_comm_finalize(comm) == GX_OK, "finalize");
    gx_comm_destroy(comm);
    printf("PASS rank %d: point-to-point checks\n", my_rank);
    return 0;
}
