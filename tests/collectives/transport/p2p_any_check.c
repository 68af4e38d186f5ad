/*
 * p2p_any_check - receives from GX_ANY_SOURCE, under gx-run. Modes:
 *   p2p_any_check all      every other rank sends eager and rendezvous
 *                          messages to rank 0, which takes them with wildcard
 *                          receives: each reports its sender, every sender's
 *                          messages keep their order, messages that waited
 *                          unexpected go first by arrival, a specific receive
 *                          posted before a wildcard one keeps its message
 *                          (and the reverse), a self send, truncation naming
 *                          both ranks, gx_request_source's argument errors
 *   p2p_any_check dead     rank 1 dies while rank 0 waits in a wildcard
 *                          receive: it fails naming rank 1, and so does the
 *                          next wildcard post
 *   p2p_any_check timeout  nobody sends: the wildcard receive fails with
 *                          GX_ETIMEOUT at the communicator's deadline, whose
 *                          message names where it came from: GX_TIMEOUT (set
 *                          to 2 by the test), or with the argument "config"
 *                          a gx_config's op_timeout_ms of 2000
 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gx/gx.h"

#include "../../lib/rank_check.h"

static int me = -1;

enum { ROUNDS = 6, BIG = 200000 }; /* BIG: past GX_EAGER_LIMIT, a rendezvous */

static size_t msg_len(int round)
{
    return round % 2 ? BIG : 64;
}

static uint8_t pattern(int from, int round, size_t i)
{
    return (uint8_t)(from * 41 + round * 7 + i);
}

/* Receive with GX_ANY_SOURCE; returns the sender and checks the bytes
 * against the sender's next round. */
static int recv_any(struct gx_comm *comm, uint8_t *buf, size_t cap, int tag, int *next_round)
{
    struct gx_request *req;
    CHECK(gx_irecv(comm, buf, cap, GX_UINT8, GX_ANY_SOURCE, tag, &req) == GX_OK, "irecv any");
    int src = -7;
    CHECK(gx_request_source(req, &src) == GX_ESTATE || src == -7,
          "gx_request_source before completion");
    CHECK(gx_wait(req, -1) == GX_OK, "wildcard receive");
    CHECK(gx_request_source(req, &src) == GX_OK, "gx_request_source");
    CHECK(src > 0 && src < gx_comm_size(comm), "sender %d out of range", src);
    int round = next_round[src]++;
    size_t got = 0;
    CHECK(gx_request_count(req, &got) == GX_OK && got == msg_len(round),
          "message %d from rank %d has %zu bytes, expected %zu (out of order?)", round, src,
          got, msg_len(round));
    for (size_t i = 0; i < got; i++)
        CHECK(buf[i] == pattern(src, round, i), "byte %zu of message %d from rank %d", i, round,
              src);
    gx_request_free(req);
    return src;
}

static void send_rounds(struct gx_comm *comm, int tag)
{
    uint8_t *buf = malloc(BIG);
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t i = 0; i < msg_len(round); i++)
            buf[i] = pattern(me, round, i);
        CHECK(gx_send(comm, buf, msg_len(round), GX_UINT8, 0, tag) == GX_OK, "send %d", round);
    }
    free(buf);
}

/* Rank 0 takes ROUNDS messages from every other rank: first while they
 * arrive, then (tag 12) after all of them waited unexpected. */
static void fan_in(struct gx_comm *comm)
{
    int size = gx_comm_size(comm);
    uint8_t *buf = malloc(BIG);
    for (int tag = 11; tag <= 12; tag++) {
        if (me != 0) {
            send_rounds(comm, tag);
        } else {
            if (tag == 12) /* everything is sent (eagers land, RTSs wait) */
                usleep(300 * 1000);
            int next_round[64] = { 0 };
            for (int k = 0; k < (size - 1) * ROUNDS; k++)
                recv_any(comm, buf, BIG, tag, next_round);
            for (int r = 1; r < size; r++)
                CHECK(next_round[r] == ROUNDS, "%d messages from rank %d", next_round[r], r);
        }
        CHECK(gx_barrier(comm) == GX_OK, "barrier");
    }
    free(buf);
}

/* The receive posted first takes the message, wildcard or not. */
static void posting_order(struct gx_comm *comm)
{
    int a = -1, b = -1, src = -1;
    struct gx_request *first, *second;
    if (me == 0) {
        CHECK(gx_irecv(comm, &a, 1, GX_INT32, 1, 21, &first) == GX_OK, "specific first");
        CHECK(gx_irecv(comm, &b, 1, GX_INT32, GX_ANY_SOURCE, 21, &second) == GX_OK, "any 2nd");
    }
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    if (me == 1) {
        for (int v = 100; v <= 101; v++)
            CHECK(gx_send(comm, &v, 1, GX_INT32, 0, 21) == GX_OK, "send %d", v);
    }
    if (me == 0) {
        CHECK(gx_wait(first, -1) == GX_OK && a == 100, "specific receive got %d", a);
        CHECK(gx_wait(second, -1) == GX_OK && b == 101, "wildcard receive got %d", b);
        CHECK(gx_request_source(first, &src) == GX_OK && src == 1, "source of a specific one");
        gx_request_free(first);
        gx_request_free(second);
        a = b = -1;
        CHECK(gx_irecv(comm, &a, 1, GX_INT32, GX_ANY_SOURCE, 22, &first) == GX_OK, "any first");
        CHECK(gx_irecv(comm, &b, 1, GX_INT32, 1, 22, &second) == GX_OK, "specific 2nd");
    }
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    if (me == 1) {
        for (int v = 200; v <= 201; v++)
            CHECK(gx_send(comm, &v, 1, GX_INT32, 0, 22) == GX_OK, "send %d", v);
    }
    if (me == 0) {
        CHECK(gx_wait(first, -1) == GX_OK && a == 200, "wildcard receive got %d", a);
        CHECK(gx_wait(second, -1) == GX_OK && b == 201, "specific receive got %d", b);
        gx_request_free(first);
        gx_request_free(second);
    }
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
}

static void self_and_errors(struct gx_comm *comm)
{
    int v = 7 + me, w = -1, src = -1;
    struct gx_request *sr, *rr;
    CHECK(gx_isend(comm, &v, 1, GX_INT32, me, 31, &sr) == GX_OK, "self send");
    CHECK(gx_irecv(comm, &w, 1, GX_INT32, GX_ANY_SOURCE, 31, &rr) == GX_OK, "any from self");
    CHECK(gx_wait(rr, -1) == GX_OK && w == v, "self message got %d", w);
    CHECK(gx_request_source(rr, &src) == GX_OK && src == me, "self source %d", src);
    CHECK(gx_wait(sr, -1) == GX_OK, "self send completes");
    CHECK(gx_request_source(sr, &src) == GX_EINVAL && strstr(gx_last_error(), "not a receive"),
          "gx_request_source on a send");
    CHECK(gx_request_source(rr, NULL) == GX_EINVAL, "NULL source_out");
    gx_request_free(rr);
    gx_request_free(sr);
    CHECK(gx_isend(comm, &v, 1, GX_INT32, GX_ANY_SOURCE, 0, &sr) == GX_EINVAL &&
              strstr(gx_last_error(), "only a receive"), "send to GX_ANY_SOURCE");
    CHECK(gx_irecv(comm, &w, 1, GX_INT32, -2, 0, &rr) == GX_EINVAL &&
              strstr(gx_last_error(), "out of range"), "peer -2");
    /* Truncation names both ranks, as for a specific receive. */
    if (me == 1) {
        char big[4000] = { 0 };
        CHECK(gx_send(comm, big, sizeof(big), GX_UINT8, 0, 32) == GX_OK, "send 4000");
    } else if (me == 0) {
        char small[10];
        int rc = gx_recv(comm, small, sizeof(small), GX_UINT8, GX_ANY_SOURCE, 32, NULL);
        CHECK(rc == GX_ETRUNCATE && strstr(gx_last_error(), "rank 1 to rank 0"),
              "short wildcard receive returned %s", gx_strerror(rc));
    }
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "all";
    bool config = argc > 2 && strcmp(argv[2], "config") == 0;
    struct gx_config cfg = GX_CONFIG_INIT;
    cfg.op_timeout_ms = config ? 2000 : 0;
    struct gx_comm *comm;
    int rc = gx_comm_init(&cfg, &comm);
    CHECK(rc == GX_OK, "init: %s", gx_strerror(rc));
    me = gx_comm_rank(comm);
    CHECK(gx_comm_size(comm) >= 2 && gx_comm_size(comm) <= 64, "needs 2..64 ranks");
    if (strcmp(mode, "dead") == 0) {
        CHECK(gx_barrier(comm) == GX_OK, "barrier");
        if (me == 1) {
            usleep(300 * 1000); /* rank 0 is waiting by now */
            raise(SIGKILL);
        }
        if (me > 1) /* stay: a rank that leaves fails the wildcard receive too */
            sleep(3);
        if (me == 0) {
            int v;
            rc = gx_recv(comm, &v, 1, GX_INT32, GX_ANY_SOURCE, 3, NULL);
            CHECK(GX_IS_PEER_ERROR(rc), "wildcard receive returned %s", gx_strerror(rc));
            CHECK(strstr(gx_last_error(), "rank 1"), "does not name rank 1: %s", gx_last_error());
            printf("PASS rank 0: the wildcard receive failed: %s\n", gx_last_error());
            struct gx_request *req;
            rc = gx_irecv(comm, &v, 1, GX_INT32, GX_ANY_SOURCE, 4, &req);
            CHECK(rc != GX_OK && strstr(gx_last_error(), "rank 1"),
                  "a wildcard post after the failure returned %s", gx_strerror(rc));
            printf("PASS rank 0: so does the next post: %s\n", gx_last_error());
        }
        gx_comm_destroy(comm);
        return 0;
    }
    if (strcmp(mode, "timeout") == 0) {
        if (me == 0) {
            int v;
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            rc = gx_recv(comm, &v, 1, GX_INT32, GX_ANY_SOURCE, 5, NULL);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
            CHECK(rc == GX_ETIMEOUT, "returned %s after %.1f s", gx_strerror(rc), s);
            CHECK(s >= 1.9, "timed out after %.1f s, before GX_TIMEOUT=2", s);
            const char *source = config ? "the op_timeout_ms of its gx_config (2000 ms)"
                                        : "GX_TIMEOUT (2000 ms)";
            CHECK(strstr(gx_last_error(), source), "the message does not name %s, where the "
                  "deadline came from: %s", source, gx_last_error());
            printf("PASS rank 0: timed out after %.1f s: %s\n", s, gx_last_error());
        } else {
            sleep(4); /* alive past rank 0's deadline: its receive must time out */
        }
        gx_comm_destroy(comm);
        return 0;
    }
    fan_in(comm);
    posting_order(comm);
    self_and_errors(comm);
    CHECK(gx_comm_finalize(comm) == GX_OK, "finalize");
    gx_comm_destroy(comm);
    printf("PASS rank %d: wildcard receives\n", me);
    return 0;
}
