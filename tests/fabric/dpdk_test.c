/*
 * dpdk_test.c - dpdk provider tests beyond the conformance suite, two ranks
 * over net_memif (or the GX_DPDK_VDEV given). Usage: fab_dpdk_test TEST
 *   stopped_peer  rank 1 stops (SIGSTOP); rank 0's send fails with a timeout
 *                 naming rank 1 after GX_DPDK_PEER_TIMEOUT_MS, never hangs,
 *                 and rank 1, continued, finds its endpoint failed too.
 *   malformed     rank 1 sends malformed and foreign frames; rank 0 drops
 *                 and counts each kind, and the connection keeps working.
 *   peer_left     rank 0 (the memif server) exits more than 3 s after the
 *                 start while rank 1 (the client) keeps sending: rank 1's
 *                 endpoint fails naming the peer, and its port is not
 *                 reconnected (a client reconnecting to a server in its exit
 *                 path made DPDK 22.11 abort that server; docs/dpdk.md).
 *   refused       rank 1's memif client names an id the server does not
 *                 have, so every handshake is refused ("ID not found", as
 *                 when a server has not started its port yet); rank 1 only
 *                 polls, never transmits: its port is restarted all the same
 *                 (it used to wait with its link down for good).
 *   bandwidth     (perf, label long) rank 1 writes 4 MiB with immediate
 *                 repeatedly; prints MB/s (compare runs with GX_DPDK_DROP).
 */
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "fab_harness.h"
#include "fabric/dpdk/dpdk.h"

static void ping_pong(struct fab_ctx *c, struct gx_fab_ep *ep)
{
    uint64_t out = 1000u + (uint64_t)c->rank, in = 0;
    FAB_OK(gx_fab_post_recv(ep, &in, sizeof(in), NULL, 1));
    FAB_OK(gx_fab_post_send(ep, &out, sizeof(out), NULL, 7, 2));
    for (int i = 0; i < 2; i++) {
        struct gx_fab_cqe e = fab_wait1(c, 20000);
        FAB_CHECK(e.status == GX_OK, "%s: %s", gx_fab_op_name(e.op), gx_strerror(e.status));
    }
    FAB_CHECK(in == 1000u + (uint64_t)(1 - c->rank), "ping-pong payload %llu",
              (unsigned long long)in);
}

static int t_stopped_peer(struct fab_ctx *c)
{
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    ping_pong(c, ep);
    int pid = (int)getpid(), pids[2];
    fab_allgather(c, &pid, pids, sizeof(pid));
    /* More than the memif ring holds, so rank 1 cannot have it all. */
    const size_t len = 8u << 20;
    char *buf = calloc(1, len);
    if (c->rank == 1) {
        FAB_OK(gx_fab_post_recv(ep, buf, len, NULL, 5));
        raise(SIGSTOP); /* rank 0 continues us once it has given up on us */
        struct gx_fab_cqe e = fab_wait1(c, 10000);
        FAB_CHECK(GX_IS_PEER_ERROR(e.status), "after being stopped: %s", gx_strerror(e.status));
        gx_fab_ep_close(ep);
        free(buf);
        return 0;
    }
    usleep(100 * 1000); /* rank 1 is stopped by now */
    uint64_t t0 = gx_now_ns();
    FAB_OK(gx_fab_post_send(ep, buf, len, NULL, 1, 1));
    struct gx_fab_cqe e = fab_wait1(c, 20000);
    double s = (double)(gx_now_ns() - t0) / 1e9;
    kill(pids[1], SIGCONT);
    FAB_CHECK(e.status == GX_ETIMEOUT, "send to a stopped peer completed with %s",
              gx_strerror(e.status));
    FAB_CHECK(strstr(gx_last_error(), "rank 1"), "error does not name the peer: %s",
              gx_last_error());
    /* Not before the peer timeout (two thirds of it: the clock starts at the
     * post, the link's at its last sign of life), and not long after it:
     * four times it plus 4 s for a loaded machine (docs/testing.md). */
    const char *pt = getenv("GX_DPDK_PEER_TIMEOUT_MS");
    double peer_s = (pt ? atof(pt) : 0) / 1000;
    FAB_CHECK(peer_s > 0, "the test needs GX_DPDK_PEER_TIMEOUT_MS");
    FAB_CHECK(s >= peer_s * 2 / 3 && s < 4 * peer_s + 4, "gave up after %.2f s (GX_DPDK_PEER_TIMEOUT_MS=%s)",
              s, pt);
    fprintf(stderr, "stopped peer named after %.2f s: %s\n", s, gx_last_error());
    gx_fab_ep_close(ep);
    free(buf);
    return 0;
}

/* One well-formed frame to `ep`'s peer, then spoiled by `spoil`. */
static size_t frame(const struct dpdk_ep *ep, uint8_t *f, int spoil)
{
    struct gx_dpdk_hdr h;
    memset(&h, 0, sizeof(h));
    h.magic = GX_DPDK_MAGIC;
    h.version = GX_DPDK_VERSION;
    h.type = GX_DPDK_T_ACK;
    h.conn_id = ep->peer_conn_id;
    h.cookie = ep->peer_cookie;
    h.ack = ep->rcv_nxt;
    size_t l4 = sizeof(h);
    if (spoil == 3)
        h.len = 50; /* claims a payload it does not have */
    if (spoil == 1)
        h.magic ^= 1;
    if (spoil == 2)
        h.version = 9;
    if (spoil == 7)
        h.conn_id ^= 0x5a5a0000u;
    if (spoil == 8)
        h.cookie ^= 1;
    size_t n = gx_dpdk_put_l2l4(f, &ep->addr, l4);
    memcpy(f + n, &h, sizeof(h));
    n += l4;
    if (spoil == 4)
        f[GX_DPDK_ETH_LEN + 10] ^= 0xff; /* IPv4 checksum */
    if (spoil == 5)
        f[GX_DPDK_ETH_LEN + GX_DPDK_IP_LEN + 5] += 4; /* UDP length */
    if (spoil == 6)
        n = 30; /* cut inside the IPv4 header */
    return n;
}

/* A raw frame, sent again while the port's ring is full (memif's 64-slot
 * ring at the default frame size fills with a burst), up to 2 s. */
static int send_raw(const void *f, size_t n)
{
    uint64_t until = gx_deadline_after_ms(2000);
    int rc;
    while ((rc = dpdk_port_send_raw(f, n)) == GX_ENOMEM && gx_now_ns() < until)
        sched_yield();
    return rc;
}

static uint64_t drops(const struct dpdk_port_stats *s, int why)
{
    return s->drops[why];
}

static int t_malformed(struct fab_ctx *c)
{
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    ping_pong(c, ep);
    struct dpdk_port_stats before, after;
    dpdk_port_stats(&before);
    fab_barrier(c);
    enum { RANDOM = 300 };
    if (c->rank == 1) {
        uint8_t f[256];
        for (int spoil = 1; spoil <= 8; spoil++)
            FAB_OK(send_raw(f, frame((struct dpdk_ep *)ep, f, spoil)));
        uint64_t x = 88172645463325252ull;
        for (int i = 0; i < RANDOM; i++) { /* random bytes behind valid L2-L4 headers */
            size_t n = frame((struct dpdk_ep *)ep, f, 0);
            for (size_t j = GX_DPDK_L2L4_LEN; j < n; j++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                f[j] = (uint8_t)x;
            }
            if (i % 2) /* keep the magic and version: the deeper checks run */
                memcpy(f + GX_DPDK_L2L4_LEN, "GXDP\x01", 5);
            FAB_OK(send_raw(f, n));
        }
    } else {
        uint64_t until = gx_deadline_after_ms(500);
        struct gx_fab_cqe e;
        while (gx_now_ns() < until)
            FAB_CHECK(gx_fab_cq_poll(c->cq, &e, 1) == 0, "a malformed frame made a completion");
        dpdk_port_stats(&after);
        static const int kinds[] = { GX_DPDK_DROP_MAGIC, GX_DPDK_DROP_VERSION,
                                     GX_DPDK_DROP_FIELDS, GX_DPDK_DROP_IP, GX_DPDK_DROP_UDP,
                                     GX_DPDK_DROP_SHORT };
        uint64_t total = 0;
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
            uint64_t d = drops(&after, kinds[i]) - drops(&before, kinds[i]);
            FAB_CHECK(d >= 1, "no %s frame counted", gx_dpdk_drop_name(kinds[i]));
            total += d;
        }
        FAB_CHECK(after.unknown_conn > before.unknown_conn, "unknown connection not counted");
        FAB_CHECK(after.bad_cookie > before.bad_cookie, "wrong cookie not counted");
        total += (after.unknown_conn - before.unknown_conn) + (after.bad_cookie - before.bad_cookie);
        fprintf(stderr, "malformed: %llu frames dropped and counted (magic %llu version %llu "
                "fields %llu ip %llu udp %llu short %llu, unknown id %llu, cookie %llu)\n",
                (unsigned long long)total,
                (unsigned long long)(drops(&after, 5) - drops(&before, 5)),
                (unsigned long long)(drops(&after, 6) - drops(&before, 6)),
                (unsigned long long)(drops(&after, 7) - drops(&before, 7)),
                (unsigned long long)(drops(&after, 3) - drops(&before, 3)),
                (unsigned long long)(drops(&after, 4) - drops(&before, 4)),
                (unsigned long long)(drops(&after, 2) - drops(&before, 2)),
                (unsigned long long)(after.unknown_conn - before.unknown_conn),
                (unsigned long long)(after.bad_cookie - before.bad_cookie));
        /* Random ACK-typed frames may parse (they are then only ACKs with
         * nonsense that the window checks ignore); most must be refused. */
        FAB_CHECK(total >= 8 + RANDOM / 2, "only %llu of %d bad frames counted",
                  (unsigned long long)total, 8 + RANDOM);
    }
    fab_barrier(c);
    ping_pong(c, ep); /* the connection survived */
    fab_barrier(c);
    gx_fab_ep_close(ep);
    return 0;
}

static int t_peer_left(struct fab_ctx *c)
{
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    ping_pong(c, ep);
    usleep(3300 * 1000); /* past the 3 s between restarts of a link that is down */
    ping_pong(c, ep);
    fab_barrier(c);
    if (c->rank == 0) {
        gx_fab_ep_close(ep);
        return 0; /* the process exits and closes its port */
    }
    uint64_t in = 0;
    FAB_OK(gx_fab_post_recv(ep, &in, sizeof(in), NULL, 3));
    struct gx_fab_cqe e = fab_wait1(c, 10000);
    FAB_CHECK(GX_IS_PEER_ERROR(e.status), "receive after the peer left: %s",
              gx_strerror(e.status));
    struct dpdk_port_stats st0, st;
    dpdk_port_stats(&st0);
    /* Frames into a link that is down: each kicks the port (every 50 ms). */
    uint8_t f[128];
    memset(f, 0, sizeof(f));
    uint64_t t0 = gx_now_ns(), down_at = 0;
    do {
        dpdk_port_send_raw(f, sizeof(f));
        usleep(10 * 1000);
        dpdk_port_stats(&st);
        if (!down_at && st.link_down > st0.link_down)
            down_at = gx_now_ns();
    } while (gx_now_ns() - t0 < 5000000000ull &&
             (!down_at || gx_now_ns() - down_at < 500000000ull));
    FAB_CHECK(down_at, "the link never went down after the peer left");
    FAB_CHECK(st.restarts == st0.restarts, "the port was restarted %llu times after the peer left",
              (unsigned long long)(st.restarts - st0.restarts));
    FAB_CHECK(st.peer_left, "the port does not say that the peer left");
    fprintf(stderr, "peer left: endpoint failed (%s), link down, not reconnected\n",
            gx_strerror(e.status));
    gx_fab_ep_close(ep);
    return 0;
}

static int t_refused(struct fab_ctx *c)
{
    if (c->rank == 1) {
        struct dpdk_port_stats st0, st;
        dpdk_port_stats(&st0);
        uint64_t t0 = gx_now_ns();
        struct gx_fab_cqe e;
        do { /* receive polls only: 3 s between restarts, 10 s to see one */
            (void)gx_fab_cq_poll(c->cq, &e, 1);
            usleep(1000);
            dpdk_port_stats(&st);
        } while (st.restarts == st0.restarts && gx_now_ns() - t0 < 10000000000ull);
        FAB_CHECK(st.restarts > st0.restarts, "a refused memif client that only polls was not "
                  "restarted in 10 s (link down %llu times)",
                  (unsigned long long)(st.link_down - st0.link_down));
        fprintf(stderr, "refused: the client's port restarted after %.1f s\n",
                (double)(gx_now_ns() - t0) / 1e9);
    }
    fab_barrier(c);
    return 0;
}

static int t_bandwidth(struct fab_ctx *c)
{
    const size_t len = 4u << 20;
    const int iters = 20;
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    char *buf = calloc(1, len);
    struct gx_fab_mr *mr = fab_reg(c, buf, len, GX_FAB_ACCESS_LOCAL | GX_FAB_ACCESS_REMOTE_WRITE);
    struct gx_fab_rkey key, keys[2];
    FAB_OK(gx_fab_mr_pack_rkey(mr, &key));
    fab_allgather(c, &key, keys, sizeof(key));
    if (c->rank == 0)
        for (int i = 0; i < iters; i++)
            FAB_OK(gx_fab_post_recv(ep, NULL, 0, NULL, (uint64_t)i));
    fab_barrier(c);
    uint64_t t0 = gx_now_ns();
    if (c->rank == 1) {
        uint64_t base;
        memcpy(&base, keys[0].bytes + 16, sizeof(base));
        for (int i = 0; i < iters; i++)
            FAB_OK(gx_fab_post_write_imm(ep, buf, len, mr, base, &keys[0], (uint32_t)i,
                                         (uint64_t)i));
    }
    for (int i = 0; i < iters; i++)
        FAB_CHECK(fab_wait1(c, 60000).status == GX_OK, "write %d", i);
    double s = (double)(gx_now_ns() - t0) / 1e9;
    if (c->rank == 0)
        printf("dpdk bandwidth: %d x 4 MiB write_imm in %.3f s = %.1f MB/s\n", iters, s,
               (double)len * iters / s / 1e6);
    fab_barrier(c);
    FAB_OK(gx_fab_mr_dereg(mr));
    gx_fab_ep_close(ep);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        fab_test_fn fn;
    } tests[] = { { "stopped_peer", t_stopped_peer }, { "malformed", t_malformed },
                  { "bandwidth", t_bandwidth }, { "peer_left", t_peer_left },
                  { "refused", t_refused } };
    if (argc != 2) {
        fprintf(stderr, "usage: %s stopped_peer|malformed|bandwidth|peer_left|refused\n",
                argv[0]);
        return 2;
    }
    if (!getenv("GX_DPDK_VDEV")) {
        char v[256];
        /* refused: a copy-mode client (a zero-copy one starts only once a
         * peer connected) with an id the server does not have. */
        bool refused = strcmp(argv[1], "refused") == 0;
        snprintf(v, sizeof(v), "net_memif0,role=server,socket=/tmp/gx-memif-%d.sock;"
                 "net_memif0,role=client,socket=/tmp/gx-memif-%d.sock%s", (int)getpid(),
                 (int)getpid(), refused ? ",id=7,zero-copy=no" : "");
        setenv("GX_DPDK_VDEV", v, 1);
    }
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        if (strcmp(tests[i].name, argv[1]) != 0)
            continue;
        int rc = fab_run("dpdk", 2, 55, "dpdk-test", tests[i].fn);
        printf("dpdk %s: %s\n", argv[1], rc == 0 ? "PASS" : rc == 77 ? "SKIP" : "FAIL");
        return rc;
    }
    fprintf(stderr, "unknown test %s\n", argv[1]);
    return 2;
}
