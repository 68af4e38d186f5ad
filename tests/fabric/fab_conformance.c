/*
 * fab_conformance.c - the provider conformance suite: the same multi-process
 * tests for every provider. Usage: fab_conformance PROVIDER TEST
 * (ctest registers every PROVIDER x TEST pair; a new provider joins by being
 * added to the list in CMakeLists.txt).
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "fab_harness.h"
#include "fabric/fabric_mesh.h"

#define MiB (1024ull * 1024)
#define WAIT_MS 20000

static void fill(void *buf, size_t len, uint32_t seed)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 12));
}

static int check_fill(const void *buf, size_t len, uint32_t seed)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < len; i++)
        if (p[i] != (uint8_t)(seed * 131u + i * 7u + (i >> 12)))
            return (int)(i < 0x7fffffff ? i : 0x7fffffff) + 1;
    return 0;
}

/* Rank 0 and rank 1 swap one message of `len` bytes each way. */
static void ping_pong(struct fab_ctx *c, struct gx_fab_ep *ep, size_t len)
{
    char *out = malloc(len + 1), *in = calloc(1, len + 1);
    fill(out, len, (uint32_t)c->rank);
    FAB_OK(gx_fab_post_recv(ep, in, len, NULL, 1));
    FAB_OK(gx_fab_post_send(ep, out, len, NULL, 42u + (uint64_t)c->rank, 2));
    int got = 0;
    while (got < 2) {
        struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
        FAB_CHECK(e.status == GX_OK, "%s completion: %s", gx_fab_op_name(e.op),
                  gx_strerror(e.status));
        if (e.op == GX_FAB_OP_RECV) {
            FAB_CHECK(e.len == len && e.tag == 42u + (uint64_t)(1 - c->rank), "len %zu tag %llu",
                      e.len, (unsigned long long)e.tag);
            FAB_CHECK(check_fill(in, len, (uint32_t)(1 - c->rank)) == 0, "payload differs");
        }
        got++;
    }
    free(out);
    free(in);
}

static int t_connect_both_ways(struct fab_ctx *c)
{
    struct gx_fab_ep *a = fab_pair(c, 0, 1);
    ping_pong(c, a, 100);
    struct gx_fab_ep *b = fab_pair(c, 1, 0);
    ping_pong(c, b, 5000);
    ping_pong(c, a, 0);
    fab_barrier(c);
    gx_fab_ep_close(a);
    gx_fab_ep_close(b);
    return 0;
}

/* Writes of 0 B, 1 B and 64 MiB land in the target range and nowhere else. */
static int t_write_imm_sizes(struct fab_ctx *c)
{
    const size_t big = 64 * MiB, guard = 4096;
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    struct gx_fab_rkey key, keys[2];
    char *buf = NULL;
    struct gx_fab_mr *mr = NULL;
    memset(&key, 0, sizeof(key));
    if (c->rank == 0) {
        buf = calloc(1, big + 2 * guard);
        mr = fab_reg(c, buf + guard, big, GX_FAB_ACCESS_LOCAL | GX_FAB_ACCESS_REMOTE_WRITE);
        FAB_OK(gx_fab_mr_pack_rkey(mr, &key));
        for (int i = 0; i < 3; i++)
            FAB_OK(gx_fab_post_recv(ep, NULL, 0, NULL, (uint64_t)i));
    } else {
        buf = malloc(big);
        fill(buf, big, 9);
    }
    fab_allgather(c, &key, keys, sizeof(key));
    if (c->rank == 1) {
        uint64_t base;
        memcpy(&base, keys[0].bytes + 16, sizeof(base)); /* the target's address, from its key */
        struct gx_fab_mr *lmr = fab_reg(c, buf, big, GX_FAB_ACCESS_LOCAL);
        FAB_OK(gx_fab_post_write_imm(ep, buf, 0, lmr, base, &keys[0], 100, 0));
        FAB_OK(gx_fab_post_write_imm(ep, buf, 1, lmr, base + 7, &keys[0], 101, 1));
        FAB_OK(gx_fab_post_write_imm(ep, buf, big, lmr, base, &keys[0], 102, 2));
        for (int i = 0; i < 3; i++) {
            struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
            FAB_CHECK(e.status == GX_OK && e.op == GX_FAB_OP_WRITE_IMM && e.context == (uint64_t)i,
                      "write %d: status %s op %d ctx %llu", i, gx_strerror(e.status), e.op,
                      (unsigned long long)e.context);
        }
        fab_barrier(c);
        FAB_OK(gx_fab_mr_dereg(lmr));
    } else {
        const uint32_t imm[3] = { 100, 101, 102 };
        const size_t len[3] = { 0, 1, big };
        for (int i = 0; i < 3; i++) {
            struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
            FAB_CHECK(e.status == GX_OK && e.op == GX_FAB_OP_RECV, "recv %d: %s", i,
                      gx_strerror(e.status));
            FAB_CHECK((e.flags & GX_FAB_CQE_IMM) && e.imm == imm[i] && e.len == len[i] &&
                          e.context == (uint64_t)i,
                      "recv %d: flags %x imm %u len %zu", i, e.flags, e.imm, e.len);
        }
        int bad = check_fill(buf + guard, big, 9);
        FAB_CHECK(bad == 0, "64 MiB payload differs at byte %d", bad - 1);
        for (size_t i = 0; i < guard; i++)
            FAB_CHECK(buf[i] == 0 && buf[guard + big + i] == 0, "write outside its range");
        fab_barrier(c);
        FAB_OK(gx_fab_mr_dereg(mr));
    }
    gx_fab_ep_close(ep);
    free(buf);
    return 0;
}

static int t_send_sizes(struct fab_ctx *c)
{
    static const size_t sizes[] = { 0, 1, 8, 4031, 4032, 4033, 65536, 300000, 4 * MiB + 3 };
    const int n = (int)(sizeof(sizes) / sizeof(sizes[0]));
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    char *bufs[16];
    for (int i = 0; i < n; i++) {
        bufs[i] = malloc(sizes[i] + 1);
        if (c->rank == 1)
            fill(bufs[i], sizes[i], (uint32_t)i);
        else
            FAB_OK(gx_fab_post_recv(ep, bufs[i], sizes[i] + 1, NULL, (uint64_t)i));
    }
    fab_barrier(c);
    if (c->rank == 1)
        for (int i = 0; i < n; i++)
            FAB_OK(gx_fab_post_send(ep, bufs[i], sizes[i], NULL, 1000u + (uint64_t)i, (uint64_t)i));
    for (int i = 0; i < n; i++) {
        struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
        FAB_CHECK(e.status == GX_OK && e.context == (uint64_t)i, "op %d: %s ctx %llu", i,
                  gx_strerror(e.status), (unsigned long long)e.context);
        if (c->rank == 0) {
            FAB_CHECK(e.len == sizes[i] && e.tag == 1000u + (uint64_t)i, "size %zu: got len %zu",
                      sizes[i], e.len);
            FAB_CHECK(check_fill(bufs[i], sizes[i], (uint32_t)i) == 0, "size %zu differs",
                      sizes[i]);
        }
    }
    fab_barrier(c);
    for (int i = 0; i < n; i++)
        free(bufs[i]);
    gx_fab_ep_close(ep);
    return 0;
}

/* 1000 sends and 1000 writes outstanding at once, interleaved, in order. */
static int t_outstanding_1000(struct fab_ctx *c)
{
    enum { N = 1000, SZ = 8192 };
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    char *buf = calloc(2 * N, SZ);
    struct gx_fab_rkey key, keys[2];
    memset(&key, 0, sizeof(key));
    struct gx_fab_mr *mr = fab_reg(c, buf, (size_t)2 * N * SZ,
                                   GX_FAB_ACCESS_LOCAL | GX_FAB_ACCESS_REMOTE_WRITE);
    FAB_OK(gx_fab_mr_pack_rkey(mr, &key));
    if (c->rank == 0)
        for (int i = 0; i < 2 * N; i++)
            FAB_OK(gx_fab_post_recv(ep, buf + (size_t)i * SZ, SZ, mr, (uint64_t)i));
    fab_allgather(c, &key, keys, sizeof(key));
    if (c->rank == 1) {
        uint64_t base;
        memcpy(&base, keys[0].bytes + 16, sizeof(base));
        for (int i = 0; i < 2 * N; i++) {
            size_t len = (size_t)(i * 37) % SZ;
            fill(buf + (size_t)i * SZ, len, (uint32_t)i);
            if (i % 2)
                FAB_OK(gx_fab_post_write_imm(ep, buf + (size_t)i * SZ, len, mr,
                                             base + (uint64_t)i * SZ, &keys[0], (uint32_t)i,
                                             (uint64_t)i));
            else
                FAB_OK(gx_fab_post_send(ep, buf + (size_t)i * SZ, len, mr, (uint64_t)i,
                                        (uint64_t)i));
        }
    }
    for (int i = 0; i < 2 * N; i++) {
        struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
        FAB_CHECK(e.status == GX_OK && e.context == (uint64_t)i, "completion %d: %s ctx %llu", i,
                  gx_strerror(e.status), (unsigned long long)e.context);
        if (c->rank == 0) {
            size_t len = (size_t)(i * 37) % SZ;
            FAB_CHECK(e.len == len, "op %d len %zu", i, e.len);
            if (i % 2)
                FAB_CHECK((e.flags & GX_FAB_CQE_IMM) && e.imm == (uint32_t)i, "imm %u", e.imm);
            else
                FAB_CHECK(e.tag == (uint64_t)i, "tag %llu", (unsigned long long)e.tag);
            FAB_CHECK(check_fill(buf + (size_t)i * SZ, len, (uint32_t)i) == 0, "op %d data", i);
        }
    }
    fab_barrier(c);
    FAB_OK(gx_fab_mr_dereg(mr));
    gx_fab_ep_close(ep);
    free(buf);
    return 0;
}

/* Mixed small / striped / pulled messages complete in post order. */
static int t_ordering(struct fab_ctx *c)
{
    enum { N = 60 };
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    static const size_t sizes[] = { 1, 600 * 1024, 8, 5000, 2 * 1024 * 1024, 0 };
    char *bufs[N];
    for (int i = 0; i < N; i++) {
        size_t len = sizes[i % 6];
        bufs[i] = malloc(len + 1);
        if (c->rank == 1)
            fill(bufs[i], len, (uint32_t)i);
        else
            FAB_OK(gx_fab_post_recv(ep, bufs[i], len, NULL, (uint64_t)i));
    }
    fab_barrier(c);
    if (c->rank == 1)
        for (int i = 0; i < N; i++)
            FAB_OK(gx_fab_post_send(ep, bufs[i], sizes[i % 6], NULL, (uint64_t)i, (uint64_t)i));
    for (int i = 0; i < N; i++) {
        struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
        FAB_CHECK(e.status == GX_OK && e.context == (uint64_t)i, "out of order: expected %d, got "
                  "%llu (%s)", i, (unsigned long long)e.context, gx_strerror(e.status));
        if (c->rank == 0)
            FAB_CHECK(e.tag == (uint64_t)i && check_fill(bufs[i], sizes[i % 6], (uint32_t)i) == 0,
                      "message %d", i);
    }
    fab_barrier(c);
    for (int i = 0; i < N; i++)
        free(bufs[i]);
    gx_fab_ep_close(ep);
    return 0;
}

/* The sender runs ahead; receives are posted 300 ms later. */
static int t_recv_late(struct fab_ctx *c)
{
    enum { N = 8 };
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    const size_t len = 1 * MiB;
    char *buf = malloc(N * len);
    if (c->rank == 1) {
        for (int i = 0; i < N; i++) {
            fill(buf + (size_t)i * len, len, (uint32_t)i);
            FAB_OK(gx_fab_post_send(ep, buf + (size_t)i * len, len, NULL, (uint64_t)i,
                                    (uint64_t)i));
        }
    } else {
        struct gx_fab_cqe e;
        FAB_CHECK(gx_fab_cq_wait(c->cq, &e, 1, gx_deadline_after_ms(300)) == GX_ETIMEOUT,
                  "a completion without a posted receive");
        for (int i = 0; i < N; i++)
            FAB_OK(gx_fab_post_recv(ep, buf + (size_t)i * len, len, NULL, (uint64_t)i));
    }
    for (int i = 0; i < N; i++) {
        struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
        FAB_CHECK(e.status == GX_OK && e.context == (uint64_t)i, "op %d: %s", i,
                  gx_strerror(e.status));
        if (c->rank == 0)
            FAB_CHECK(check_fill(buf + (size_t)i * len, len, (uint32_t)i) == 0, "msg %d", i);
    }
    fab_barrier(c);
    gx_fab_ep_close(ep);
    free(buf);
    return 0;
}

/* Sleeping until the cq has work (gx_fab_cq_wait_fds, GX_SPIN_US): take one
 * completion the way a waiting rank does, asleep in poll() on the provider's
 * fds. The contract: the fds may be slept on only when the cq has no work; a
 * sleep that ends with none of them ready must find the cq empty. Returns
 * the completion; *slept_empty counts such sleeps (fine), a cqe found after
 * one fails the test (a missed wake-up: a waiting rank sleeps out its slice). */
static struct gx_fab_cqe sleep_wait1(struct fab_ctx *c, int *slept_empty)
{
    uint64_t deadline = gx_deadline_after_ms(WAIT_MS);
    for (;;) {
        /* Asleep first, as a rank is after the progress pass that posted. */
        struct gx_fab_cqe e;
        struct pollfd fds[64];
        int nfds = 0, ready = 1;
        int rc = gx_fab_cq_wait_fds(c->cq, fds, 64, &nfds);
        FAB_CHECK(rc == GX_OK || rc == GX_INPROGRESS || rc == GX_EUNSUPPORTED,
                  "cq_wait_fds: %s", gx_strerror(rc));
        if (rc == GX_EUNSUPPORTED)
            usleep(50); /* cannot sleep now (verbs: a send awaits its CTS): poll */
        if (rc == GX_OK) {
            FAB_CHECK(nfds > 0 && nfds <= 64, "cq_wait_fds: %d fds to sleep on", nfds);
            c->slept++;
            ready = poll(fds, (nfds_t)nfds, 300);
            gx_fab_cq_wait_done(c->cq, fds, ready > 0 ? nfds : 0);
        }
        int n = gx_fab_cq_poll(c->cq, &e, 1);
        FAB_CHECK(n >= 0, "cq poll: %s", gx_strerror(n));
        FAB_CHECK(n == 0 || ready > 0, "a %s completion (context %llu, %s) was pending while "
                  "the provider's %d fds said sleep (none became ready in 300 ms)",
                  gx_fab_op_name(e.op), (unsigned long long)e.context, gx_strerror(e.status),
                  nfds);
        if (n == 1)
            return e;
        *slept_empty += ready == 0;
        FAB_CHECK(gx_ms_left(deadline) > 0, "no completion within %d ms of sleeping waits",
                  WAIT_MS);
    }
}

/* Waits that sleep wake for every completion: a send whose bytes left at
 * the post, a receive posted after its message (and a 0-byte one: nothing
 * follows its header) arrived, a message that arrives while asleep. */
static int t_sleep_wakes(struct fab_ctx *c)
{
    struct pollfd probe[64];
    int nprobe = 0, rc = gx_fab_cq_wait_fds(c->cq, probe, 64, &nprobe);
    if (rc == GX_EUNSUPPORTED) {
        printf("SKIP: %s cannot sleep on its cq (it polls; GX_SPIN_US does not apply)\n",
               c->provider);
        return 77;
    }
    if (rc == GX_OK)
        gx_fab_cq_wait_done(c->cq, probe, 0);
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    char out[3][64] = { "first", "", "third" }, in[3][64];
    const size_t len[3] = { 6, 0, 6 };
    int empty = 0;
    if (c->rank == 1) {
        for (int i = 0; i < 2; i++)
            FAB_OK(gx_fab_post_send(ep, out[i], len[i], NULL, (uint64_t)i, (uint64_t)i));
        for (int i = 0; i < 2; i++) {
            struct gx_fab_cqe e = sleep_wait1(c, &empty);
            FAB_CHECK(e.status == GX_OK && e.op == GX_FAB_OP_SEND, "send %d: %s", i,
                      gx_strerror(e.status));
        }
        fab_barrier(c); /* rank 0 has both; the third goes to a sleeping receiver */
        usleep(200000);
        FAB_OK(gx_fab_post_send(ep, out[2], len[2], NULL, 2, 2));
        struct gx_fab_cqe e = sleep_wait1(c, &empty);
        FAB_CHECK(e.status == GX_OK && e.context == 2, "send 2: %s", gx_strerror(e.status));
    } else {
        FAB_OK(gx_fab_post_recv(ep, in[0], sizeof(in[0]), NULL, 0));
        usleep(200000); /* both messages are here; the second waits for its receive */
        for (int i = 0; i < 3; i++) {
            if (i > 0)
                FAB_OK(gx_fab_post_recv(ep, in[i], sizeof(in[i]), NULL, (uint64_t)i));
            struct gx_fab_cqe e = sleep_wait1(c, &empty);
            FAB_CHECK(e.status == GX_OK && e.op == GX_FAB_OP_RECV && e.context == (uint64_t)i &&
                          e.len == len[i] && memcmp(in[i], out[i], len[i]) == 0,
                      "receive %d: %s, len %zu", i, gx_strerror(e.status), e.len);
            if (i == 1)
                fab_barrier(c);
        }
        /* The third message comes 200 ms after the barrier: that wait sleeps. */
        FAB_CHECK(c->slept > 0, "%s never slept on its fds (cq_wait_fds never said sleep)",
                  c->provider);
    }
    fab_barrier(c);
    gx_fab_ep_close(ep);
    return 0;
}

/* Rank 1 dies without closing anything; rank 0's ops fail, naming it, fast. */
static int t_dead_peer(struct fab_ctx *c)
{
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    ping_pong(c, ep, 10);
    fab_barrier(c);
    if (c->rank == 1)
        _exit(0); /* like a crash: nothing closed, the kernel drops its sockets */
    usleep(50 * 1000);
    const size_t len = 16 * MiB;
    char *buf = malloc(len), rbuf[16];
    memset(buf, 1, len);
    uint64_t t0 = gx_now_ns();
    int rc = gx_fab_post_send(ep, buf, len, NULL, 1, 1);
    int rc2 = gx_fab_post_recv(ep, rbuf, sizeof(rbuf), NULL, 2);
    int errors = (rc != GX_OK) + (rc2 != GX_OK);
    int expect = 2 - errors;
    for (int i = 0; i < expect; i++) {
        struct gx_fab_cqe e = fab_wait1(c, 5000);
        if (e.status != GX_OK)
            errors++;
        FAB_CHECK(e.status == GX_OK || GX_IS_PEER_ERROR(e.status), "status %s",
                  gx_strerror(e.status));
    }
    FAB_CHECK(errors > 0, "no error after the peer died");
    double ms = (double)(gx_now_ns() - t0) / 1e6;
    FAB_CHECK(strstr(gx_last_error(), "rank 1") != NULL, "error does not name the endpoint: '%s'",
              gx_last_error());
    FAB_CHECK(gx_fab_post_send(ep, buf, 1, NULL, 1, 3) != GX_OK, "post after error succeeded");
    fprintf(stderr, "dead peer detected in %.1f ms: %s\n", ms, gx_last_error());
    gx_fab_ep_close(ep);
    free(buf);
    return 0;
}

/* The target deregisters before a write arrives: errors, no crash, no write. */
static int t_dereg_outstanding(struct fab_ctx *c)
{
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    const size_t len = 1 * MiB;
    char *buf = calloc(1, len);
    struct gx_fab_rkey key, keys[2];
    memset(&key, 0, sizeof(key));
    if (c->rank == 0) {
        struct gx_fab_mr *mr = fab_reg(c, buf, len, GX_FAB_ACCESS_REMOTE_WRITE);
        FAB_OK(gx_fab_mr_pack_rkey(mr, &key));
        FAB_OK(gx_fab_post_recv(ep, NULL, 0, NULL, 7));
        FAB_OK(gx_fab_mr_dereg(mr));
    }
    fab_allgather(c, &key, keys, sizeof(key));
    if (c->rank == 1) {
        uint64_t base;
        memcpy(&base, keys[0].bytes + 16, sizeof(base));
        memset(buf, 0xab, len);
        char r[8];
        FAB_OK(gx_fab_post_write_imm(ep, buf, len, NULL, base, &keys[0], 5, 1));
        FAB_OK(gx_fab_post_recv(ep, r, sizeof(r), NULL, 2));
        int errors = 0;
        for (int i = 0; i < 2; i++) {
            struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
            errors += e.status != GX_OK;
        }
        FAB_CHECK(errors > 0, "the initiator saw no error");
    } else {
        struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
        FAB_CHECK(e.status != GX_OK && e.context == 7, "the target's receive completed with %s",
                  gx_strerror(e.status));
        for (size_t i = 0; i < len; i++)
            FAB_CHECK(buf[i] == 0, "a write landed in deregistered memory");
    }
    fab_barrier(c);
    gx_fab_ep_close(ep);
    free(buf);
    return 0;
}

/* Closing with receives posted flushes them; the peer's ops fail. */
static int t_close_outstanding(struct fab_ctx *c)
{
    enum { N = 100 };
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    static char bufs[N][64];
    for (int i = 0; i < N; i++)
        FAB_OK(gx_fab_post_recv(ep, bufs[i], sizeof(bufs[i]), NULL, (uint64_t)i));
    fab_barrier(c);
    if (c->rank == 0) {
        gx_fab_ep_close(ep);
        for (int i = 0; i < N; i++) {
            struct gx_fab_cqe e = fab_wait1(c, 1000);
            FAB_CHECK(e.status == GX_EABORTED && (e.flags & GX_FAB_CQE_FLUSHED) &&
                          e.context == (uint64_t)i,
                      "flush %d: %s flags %x", i, gx_strerror(e.status), e.flags);
        }
        struct gx_fab_cqe e;
        FAB_CHECK(gx_fab_cq_poll(c->cq, &e, 1) == 0, "extra completion after the flush");
    } else {
        for (int i = 0; i < N; i++) {
            struct gx_fab_cqe e = fab_wait1(c, 5000);
            FAB_CHECK(GX_IS_PEER_ERROR(e.status) && e.context == (uint64_t)i,
                      "peer-side flush %d: %s", i, gx_strerror(e.status));
        }
        gx_fab_ep_close(ep);
    }
    fab_barrier(c);
    return 0;
}

/* Wrong-size, out-of-bounds and forged remote keys. */
static int t_bad_rkey(struct fab_ctx *c)
{
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    const size_t len = 4096;
    char *buf = calloc(1, 3 * len);
    struct gx_fab_rkey key, keys[2];
    memset(&key, 0, sizeof(key));
    if (c->rank == 0) {
        struct gx_fab_mr *mr = fab_reg(c, buf + len, len, GX_FAB_ACCESS_REMOTE_WRITE);
        FAB_OK(gx_fab_mr_pack_rkey(mr, &key));
        FAB_OK(gx_fab_post_recv(ep, NULL, 0, NULL, 1));
    }
    fab_allgather(c, &key, keys, sizeof(key));
    if (c->rank == 1) {
        uint64_t base;
        memcpy(&base, keys[0].bytes + 16, sizeof(base));
        struct gx_fab_rkey wrong = keys[0];
        wrong.len = 12;
        FAB_CHECK(gx_fab_post_write_imm(ep, buf, 8, NULL, base, &wrong, 0, 0) == GX_EINVAL,
                  "wrong-size key accepted");
        FAB_CHECK(gx_fab_post_write_imm(ep, buf, 8, NULL, base + len - 4, &keys[0], 0, 0) ==
                      GX_EINVAL, "out-of-bounds write accepted");
        FAB_CHECK(gx_fab_post_write_imm(ep, buf, 8, NULL, base - 8, &keys[0], 0, 0) == GX_EINVAL,
                  "write below the range accepted");
        /* A forged key claiming a larger range: only the target can refuse it. */
        struct gx_fab_rkey forged = keys[0];
        uint64_t big = 3 * len;
        memcpy(forged.bytes + 24, &big, sizeof(big));
        memset(buf, 0xcd, 3 * len);
        FAB_OK(gx_fab_post_write_imm(ep, buf, 2 * len, NULL, base, &forged, 9, 2));
        char r[8];
        FAB_OK(gx_fab_post_recv(ep, r, sizeof(r), NULL, 3));
        int errors = 0;
        for (int i = 0; i < 2; i++)
            errors += fab_wait1(c, WAIT_MS).status != GX_OK;
        FAB_CHECK(errors > 0, "forged key: the initiator saw no error");
    } else {
        struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
        FAB_CHECK(e.status == GX_EPROTO, "forged key: target receive completed with %s",
                  gx_strerror(e.status));
        for (size_t i = 0; i < 3 * len; i++)
            FAB_CHECK(buf[i] == 0, "forged write landed at offset %zu", i);
    }
    fab_barrier(c);
    gx_fab_ep_close(ep);
    free(buf);
    return 0;
}

/* Send larger than the posted receive: an error naming sizes, not truncation. */
static int t_recv_too_small(struct fab_ctx *c)
{
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    char small[16] = { 0 }, big[64];
    memset(big, 7, sizeof(big));
    if (c->rank == 0) {
        FAB_OK(gx_fab_post_recv(ep, small, sizeof(small), NULL, 1));
        struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
        FAB_CHECK(e.status == GX_ETRUNCATE, "got %s", gx_strerror(e.status));
        FAB_CHECK(strstr(gx_last_error(), "64 bytes") && strstr(gx_last_error(), "16 bytes"),
                  "error does not name both sizes: %s", gx_last_error());
        for (size_t i = 0; i < sizeof(small); i++)
            FAB_CHECK(small[i] == 0, "truncated data was written");
    } else {
        char r[8];
        FAB_OK(gx_fab_post_send(ep, big, sizeof(big), NULL, 3, 1));
        FAB_OK(gx_fab_post_recv(ep, r, sizeof(r), NULL, 2));
        int errors = 0;
        for (int i = 0; i < 2; i++)
            errors += fab_wait1(c, WAIT_MS).status != GX_OK;
        FAB_CHECK(errors > 0, "sender saw no error");
    }
    fab_barrier(c);
    gx_fab_ep_close(ep);
    return 0;
}

/* The mesh helper over the harness's all-gather: 4 ranks, a ring exchange. */
static int t_mesh4(struct fab_ctx *c)
{
    struct gx_fab_mesh_attr a = GX_FAB_MESH_ATTR_INIT;
    a.rank = c->rank;
    a.nranks = c->nranks;
    a.allgather = fab_allgather;
    a.allgather_ctx = c;
    struct gx_fab_mesh *m;
    FAB_OK(gx_fab_mesh_create(c->dom, c->cq, &a, &m));
    FAB_CHECK(gx_fab_mesh_ep(m, c->rank) == NULL, "endpoint to self");
    int next = (c->rank + 1) % c->nranks, prev = (c->rank + c->nranks - 1) % c->nranks;
    int out = c->rank * 10, in = -1;
    FAB_OK(gx_fab_post_recv(gx_fab_mesh_ep(m, prev), &in, sizeof(in), NULL, 1));
    FAB_OK(gx_fab_post_send(gx_fab_mesh_ep(m, next), &out, sizeof(out), NULL, 5, 2));
    for (int i = 0; i < 2; i++) {
        struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
        FAB_CHECK(e.status == GX_OK, "%s", gx_strerror(e.status));
        if (e.op == GX_FAB_OP_RECV)
            FAB_CHECK(e.ep == gx_fab_mesh_ep(m, prev) && in == prev * 10, "ring got %d", in);
    }
    fab_barrier(c);
    gx_fab_mesh_destroy(m);
    return 0;
}

/* A connector with another job key is refused; the listener keeps going
 * until the connector has its answer (a flag file beside the harness: the
 * relay's barrier blocks, and the listener must keep accepting meanwhile),
 * bounded by the connector's own deadline plus a margin, not by a guess of
 * how long the connector's key stretch takes on a loaded machine. */
enum { WRONG_KEY_CONNECT_MS = 5000 };

static void wrong_key_flag(char *path, size_t len)
{
    snprintf(path, len, "/tmp/gx-fab-wrong-key.%d", (int)getppid());
}

static int t_wrong_key_child(struct fab_ctx *c)
{
    char flag[64];
    wrong_key_flag(flag, sizeof(flag));
    struct gx_fab_addr addr, all[2];
    memset(&addr, 0, sizeof(addr));
    struct gx_fab_listener *lst = NULL;
    if (c->rank == 0)
        FAB_OK(gx_fab_listen(c->dom, c->cq, &lst, &addr));
    fab_allgather(c, &addr, all, sizeof(addr));
    if (c->rank == 1) {
        struct gx_fab_domain *other;
        struct gx_fab_domain_attr attr = GX_FAB_DOMAIN_ATTR_INIT;
        attr.job_key = "another job";
        attr.rank = 1;
        FAB_OK(gx_fab_domain_open(c->prov, &attr, &other));
        struct gx_fab_cq *cq;
        FAB_OK(gx_fab_cq_open(other, &cq));
        struct gx_fab_ep *ep;
        struct gx_fab_conn_param p = GX_FAB_CONN_PARAM_INIT;
        p.peer_rank = 0;
        p.timeout_ms = WRONG_KEY_CONNECT_MS;
        FAB_OK(gx_fab_connect(other, cq, &all[0], &p, &ep));
        int rc;
        while ((rc = gx_fab_ep_establish(ep)) == GX_INPROGRESS)
            usleep(100);
        int fd = open(flag, O_CREAT | O_WRONLY | O_TRUNC, 0600);
        if (fd >= 0)
            close(fd);
        FAB_CHECK(rc == GX_EAUTH, "wrong key gave %s", gx_strerror(rc));
        gx_fab_ep_close(ep);
        gx_fab_cq_close(cq);
        gx_fab_domain_close(other);
        fab_barrier(c);
    } else {
        /* Keep accepting until the other side reports; no endpoint may appear. */
        struct gx_fab_ep *ep = NULL;
        uint64_t until = gx_deadline_after_ms(WRONG_KEY_CONNECT_MS + 5000);
        while (gx_now_ns() < until && access(flag, F_OK) != 0) {
            FAB_CHECK(gx_fab_accept(lst, &ep) == GX_INPROGRESS, "accepted a wrong key");
            usleep(1000);
        }
        unlink(flag);
        fab_barrier(c);
        gx_fab_listener_close(lst);
    }
    return 0;
}

struct test {
    const char *name;
    int nranks;
    fab_test_fn fn;
};

static const struct test tests[] = {
    { "connect_both_ways", 2, t_connect_both_ways },
    { "write_imm_sizes", 2, t_write_imm_sizes },
    { "send_sizes", 2, t_send_sizes },
    { "outstanding_1000", 2, t_outstanding_1000 },
    { "ordering", 2, t_ordering },
    { "recv_late", 2, t_recv_late },
    { "sleep_wakes", 2, t_sleep_wakes },
    { "recv_too_small", 2, t_recv_too_small },
    { "dead_peer", 2, t_dead_peer },
    { "dereg_outstanding", 2, t_dereg_outstanding },
    { "close_outstanding", 2, t_close_outstanding },
    { "bad_rkey", 2, t_bad_rkey },
    { "wrong_key", 2, t_wrong_key_child },
    { "mesh4", 4, t_mesh4 },
};

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PROVIDER TEST\ntests:", argv[0]);
        for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
            fprintf(stderr, " %s", tests[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    /* dpdk: two ranks over net_memif, on a socket of this run's own;
     * FAB_MEMIF_CLIENT_ARGS adds options to the client's entry (tests:
     * zero-copy=no, memif's copy mode). */
    if (strcmp(argv[1], "dpdk") == 0 && !getenv("GX_DPDK_VDEV")) {
        char v[384];
        const char *more = getenv("FAB_MEMIF_CLIENT_ARGS");
        snprintf(v, sizeof(v), "net_memif0,role=server,socket=/tmp/gx-memif-%d.sock;"
                 "net_memif0,role=client,socket=/tmp/gx-memif-%d.sock%s%s", (int)getpid(),
                 (int)getpid(), more && more[0] ? "," : "", more ? more : "");
        setenv("GX_DPDK_VDEV", v, 1);
    }
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        if (strcmp(tests[i].name, argv[2]) != 0)
            continue;
        int rc = fab_run(argv[1], tests[i].nranks, 50, "conformance", tests[i].fn);
        printf("%s %s: %s\n", argv[1], argv[2], rc == 0 ? "PASS" : rc == 77 ? "SKIP" : "FAIL");
        return rc;
    }
    fprintf(stderr, "unknown test %s\n", argv[2]);
    return 2;
}
