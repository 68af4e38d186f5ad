/*
 * observe_check.c - one rank of the observability tests (observe_test.sh):
 *
 *   observe_check ring OUTDIR   two ring all-reduces (GX_ALGO=ring, 1000 and
 *                               262144 floats), checked; then the steps the
 *                               schedule builder makes for the same calls are
 *                               written to OUTDIR/expected-r<rank>.txt for
 *                               trace_verify.py to compare with the trace
 *   observe_check kill          all-reduces until GX_FAULT kills a rank; the
 *                               survivors must fail naming a peer error
 *   observe_check stats OUTDIR  gx_comm_stats against the bytes this rank
 *                               moved: a point-to-point message of known size
 *                               and the schedule's sends of an all-reduce;
 *                               the size field's rules; the figures written to
 *                               OUTDIR/stats-r<rank>.txt for the metrics check
 *
 * Builds the expected schedule with the real builder (algorithms/algo.h) on
 * the real communicator, so it is the schedule the engine ran.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/algorithms/algo.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/schedule/schedule.h"
#include "gx/gx.h"

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "FAIL rank %d: ", rank);                            \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, " (%s)\n", gx_last_error());                        \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

static int rank = -1;

static const char *kind_name(int k)
{
    switch (k) {
    case CS_SEND: return "send";
    case CS_RECV: return "recv";
    case CS_REDUCE: return "reduce";
    case CS_REDUCE3: return "reduce3";
    case CS_COPY: return "copy";
    case CS_AVG: return "average";
    case CS_FLAG_SET: return "flag_set";
    case CS_FLAG_WAIT: return "flag_wait";
    default: return NULL; /* nop: not traced */
    }
}

/* Build the ring schedule of an all-reduce of `count` floats as the engine
 * does (after the two descriptor steps it adds first). */
static int build(struct gx_comm *c, struct coll_op *op, struct coll_scratch_pool *pool,
                 float *send, float *recv, size_t count)
{
    memset(op, 0, sizeof(*op));
    op->comm = c;
    op->pool = pool;
    op->a = (struct coll_args){ .kind = COLL_ALLREDUCE, .sendbuf = send, .recvbuf = recv,
                                .count = count, .dtype = GX_FLOAT32, .op = GX_SUM, .root = -1,
                                .es = sizeof(float) };
    op->algo = COLL_ALGO_RING;
    op->desc_recv_step = -1;
    if (gx_reduce_lookup(GX_FLOAT32, GX_SUM, &op->fn) != GX_OK ||
        gx_reduce3_lookup(GX_FLOAT32, GX_SUM, &op->fn3) != GX_OK)
        return -1;
    cs_nop(op, -1, -1, -1); /* stand-ins for the descriptor send and receive */
    cs_nop(op, -1, -1, -1);
    int rc = coll_algo_build(op);
    return rc == GX_OK && op->build_status == GX_OK ? 0 : -1;
}

static void run_ring(struct gx_comm *c, const char *outdir)
{
    size_t counts[2] = { 1000, 262144 };
    char path[4096];
    snprintf(path, sizeof(path), "%s/expected-r%d.txt", outdir, rank);
    FILE *out = fopen(path, "w");
    CHECK(out, "cannot write %s", path);
    int n = gx_comm_size(c);
    for (int call = 0; call < 2; call++) {
        size_t count = counts[call];
        float *send = malloc(count * sizeof(float)), *recv = malloc(count * sizeof(float));
        CHECK(send && recv, "out of memory");
        for (size_t i = 0; i < count; i++)
            send[i] = (float)(rank + 1) + (float)(i % 7);
        CHECK(gx_allreduce(c, send, recv, count, GX_FLOAT32, GX_SUM) == GX_OK, "allreduce %d",
              call);
        for (size_t i = 0; i < count; i++)
            CHECK(recv[i] == (float)(n * (n + 1) / 2) + (float)n * (float)(i % 7),
                  "allreduce %d: element %zu is %g", call, i, (double)recv[i]);
        struct coll_op op;
        struct coll_scratch_pool pool;
        coll_scratch_pool_init(&pool);
        CHECK(build(c, &op, &pool, send, recv, count) == 0, "building the ring schedule");
        for (int i = 2; i < op.nsteps; i++) {
            const struct coll_step *s = &op.steps[i];
            const char *k = kind_name(s->kind);
            if (!k)
                continue;
            bool msg = s->kind == CS_SEND || s->kind == CS_RECV;
            bool elems = s->kind == CS_REDUCE || s->kind == CS_REDUCE3 || s->kind == CS_AVG;
            fprintf(out, "%d %d %s %d %zu %lld\n", call, i, k, msg ? s->peer : -1,
                    elems ? s->len * sizeof(float) : s->len, msg ? (long long)s->msg : -1LL);
        }
        free(op.steps);
        if (op.scratch)
            free(op.scratch);
        coll_scratch_pool_fini(&pool);
        free(send);
        free(recv);
    }
    CHECK(fclose(out) == 0, "writing %s", path);
}

static void run_kill(struct gx_comm *c)
{
    float buf[4096];
    for (int i = 0; i < 50; i++) {
        for (int k = 0; k < 4096; k++)
            buf[k] = 1.0f;
        int rc = gx_allreduce(c, buf, buf, 4096, GX_FLOAT32, GX_SUM);
        if (rc != GX_OK) {
            printf("FAILED rank %d: %s\n", rank, gx_last_error());
            CHECK(GX_IS_PEER_ERROR(rc) || rc == GX_EABORTED, "expected a peer error, got %s",
                  gx_strerror(rc));
            exit(3); /* survivors exit 3: the script checks it */
        }
    }
    CHECK(0, "the injected kill never came");
}

static unsigned long long sent_all(const struct gx_comm_stats *s)
{
    unsigned long long b = 0;
    for (int k = 0; k < GX_PEER_CLASS_COUNT; k++)
        b += s->peer_class[k].bytes_sent;
    return b;
}

static void run_stats(struct gx_comm *c, const char *outdir)
{
    int n = gx_comm_size(c);
    struct gx_comm_stats a = GX_COMM_STATS_INIT, b = GX_COMM_STATS_INIT;
    CHECK(gx_comm_stats(c, &a) == GX_OK, "gx_comm_stats");
    /* A message of known size from rank 0 to rank 1 (another process of
     * this node: peer class "node"). */
    enum { P2P_BYTES = 12345 };
    static char msg[P2P_BYTES];
    if (rank == 0)
        CHECK(gx_send(c, msg, P2P_BYTES, GX_UINT8, 1, 7) == GX_OK, "gx_send");
    else if (rank == 1)
        CHECK(gx_recv(c, msg, P2P_BYTES, GX_UINT8, 0, 7, NULL) == GX_OK, "gx_recv");
    CHECK(gx_comm_stats(c, &b) == GX_OK, "gx_comm_stats");
    if (rank == 0) {
        CHECK(b.peer_class[GX_PEER_NODE].bytes_sent - a.peer_class[GX_PEER_NODE].bytes_sent ==
                  P2P_BYTES && b.peer_class[GX_PEER_NODE].sends - a.peer_class[GX_PEER_NODE].sends == 1,
              "rank 0 sent %d bytes in 1 message; the counters moved by %llu bytes, %llu messages",
              P2P_BYTES, b.peer_class[GX_PEER_NODE].bytes_sent - a.peer_class[GX_PEER_NODE].bytes_sent,
              b.peer_class[GX_PEER_NODE].sends - a.peer_class[GX_PEER_NODE].sends);
    }
    if (rank == 1)
        CHECK(b.peer_class[GX_PEER_NODE].bytes_received -
                  a.peer_class[GX_PEER_NODE].bytes_received == P2P_BYTES,
              "rank 1 received %d bytes; the counter moved by %llu", P2P_BYTES,
              b.peer_class[GX_PEER_NODE].bytes_received -
                  a.peer_class[GX_PEER_NODE].bytes_received);
    CHECK(b.p2p - a.p2p == (rank <= 1 ? 1u : 0u), "p2p calls moved by %llu", b.p2p - a.p2p);
    /* Connections are made on demand (GX_CONNECT): ranks 0 and 1 have the
     * one their message needed; none has more than its peers; `endpoints`
     * (docs/scale.md) counts the same. */
    CHECK(b.connections >= (rank <= 1 ? 1u : 0u) && b.connections <= (unsigned long long)(n - 1) &&
              b.connections == (unsigned long long)b.endpoints,
          "%llu connections (endpoints %d) for %d peers", b.connections, b.endpoints, n - 1);
    /* An all-reduce moves exactly its schedule's sends plus the descriptor
     * each collective sends its neighbour. */
    size_t count = 100000;
    float *send = calloc(count, sizeof(float)), *recv = calloc(count, sizeof(float));
    CHECK(send && recv, "out of memory");
    struct coll_op op;
    struct coll_scratch_pool pool;
    coll_scratch_pool_init(&pool);
    CHECK(build(c, &op, &pool, send, recv, count) == 0, "building the ring schedule");
    unsigned long long want = sizeof(struct coll_desc);
    for (int i = 0; i < op.nsteps; i++)
        if (op.steps[i].kind == CS_SEND)
            want += op.steps[i].len;
    free(op.steps);
    free(op.scratch);
    coll_scratch_pool_fini(&pool);
    CHECK(gx_comm_stats(c, &a) == GX_OK, "gx_comm_stats");
    CHECK(gx_allreduce(c, send, recv, count, GX_FLOAT32, GX_SUM) == GX_OK, "allreduce");
    CHECK(gx_comm_stats(c, &b) == GX_OK, "gx_comm_stats");
    CHECK(sent_all(&b) - sent_all(&a) == want, "the all-reduce's schedule sends %llu bytes; "
          "the counters moved by %llu", want, sent_all(&b) - sent_all(&a));
    CHECK(b.collectives - a.collectives == 1, "collectives moved by %llu",
          b.collectives - a.collectives);
    unsigned long long prov = 0;
    for (int i = 0; i < b.providers; i++)
        prov += b.provider[i].traffic.bytes_sent;
    CHECK(prov == sent_all(&b), "per provider %llu bytes, per peer class %llu", prov,
          sent_all(&b));
    free(send);
    free(recv);
    /* The size field: too small or too large is refused, naming it; an older,
     * shorter struct gets the fields it has and nothing past them. */
    struct gx_comm_stats bad = GX_COMM_STATS_INIT;
    bad.size = sizeof(bad) + 8;
    CHECK(gx_comm_stats(c, &bad) == GX_EINVAL && strstr(gx_last_error(), "stats->size"),
          "a size past the struct was not refused");
    bad.size = 4;
    CHECK(gx_comm_stats(c, &bad) == GX_EINVAL, "a size of 4 was not refused");
    CHECK(gx_comm_stats(NULL, &b) == GX_EINVAL && gx_comm_stats(c, NULL) == GX_EINVAL,
          "NULL arguments were not refused");
    struct gx_comm_stats part;
    memset(&part, 0xab, sizeof(part));
    part.size = offsetof(struct gx_comm_stats, providers);
    CHECK(gx_comm_stats(c, &part) == GX_OK, "a shorter struct");
    CHECK(part.peer_class[GX_PEER_NODE].bytes_sent >= b.peer_class[GX_PEER_NODE].bytes_sent &&
              part.providers == (int)0xabababab,
          "a shorter struct was not filled up to its size only");
    /* What the metrics file must say after this (the script compares). */
    CHECK(gx_comm_stats(c, &b) == GX_OK, "gx_comm_stats");
    char path[4096];
    snprintf(path, sizeof(path), "%s/stats-r%d.txt", outdir, rank);
    FILE *out = fopen(path, "w");
    CHECK(out, "cannot write %s", path);
    fprintf(out, "gx_bytes_sent_total node %llu\ngx_bytes_received_total node %llu\n"
            "gx_collectives_total - %llu\ngx_p2p_total - %llu\ngx_connections - %llu\n",
            b.peer_class[GX_PEER_NODE].bytes_sent, b.peer_class[GX_PEER_NODE].bytes_received,
            b.collectives, b.p2p, b.connections);
    CHECK(fclose(out) == 0, "writing %s", path);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: observe_check ring OUTDIR | kill | stats OUTDIR\n");
        return 2;
    }
    struct gx_comm *c;
    if (gx_comm_init_env(&c) != GX_OK) {
        fprintf(stderr, "init failed: %s\n", gx_last_error());
        return 1;
    }
    rank = gx_comm_rank(c);
    if (strcmp(argv[1], "ring") == 0 && argc > 2)
        run_ring(c, argv[2]);
    else if (strcmp(argv[1], "kill") == 0)
        run_kill(c);
    else if (strcmp(argv[1], "stats") == 0 && argc > 2)
        run_stats(c, argv[2]);
    else
        CHECK(0, "unknown mode '%s'", argv[1]);
    CHECK(gx_comm_finalize(c) == GX_OK, "finalize");
    gx_comm_destroy(c);
    printf("PASS rank %d %s\n", rank, argv[1]);
    return 0;
}
