/*
 * verbs_errors_test.c - work-completion errors of the verbs provider become
 * gx statuses whose messages name the peer rank, host and QP and carry the
 * operator hint, within a deadline:
 *   status_map     every ibv_wc_status maps to the intended blast radius;
 *   link_down      the port drops every packet (SOFTVERBS_PORT_DOWN_FILE):
 *                  retry exceeded -> GX_EPEER, "peer is down, or the link loses packets";
 *   bad_key        a forged remote key: initiator "remote access error",
 *                  target "refused an RDMA write" (GX_EPROTO both);
 *   killed_peer    the sender exits mid-transfer: the receiver fails with
 *                  GX_EPEER naming it within 2 s.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "fab_harness.h"
#include "fabric/verbs/verbs.h"

static char down_file[256];

/* How long the QP may take to give up on a silent peer, as gx configures it:
 * (GX_IB_RETRY_CNT + 1) transport timeouts of 4.096 us * 2^GX_IB_TIMEOUT.
 * A detection check allows four times that plus 5 s of scheduling on a
 * loaded machine (docs/testing.md, "Timed assertions"). */
static double detection_limit_ms(void)
{
    const char *t = getenv("GX_IB_TIMEOUT"), *r = getenv("GX_IB_RETRY_CNT");
    int timeout = t ? atoi(t) : 18, retries = r ? atoi(r) : 7;
    double promise_ms = (retries + 1) * 4.096e-3 * (double)(1u << timeout);
    return 4 * promise_ms + 5000;
}

static void expect_text(const char *what, const char *needle)
{
    FAB_CHECK(strstr(gx_last_error(), needle) != NULL, "%s: error lacks '%s': %s", what, needle,
              gx_last_error());
}

static int t_status_map(void)
{
    static const struct {
        enum ibv_wc_status st;
        int status;
        const char *hint;
    } cases[] = {
        { IBV_WC_RETRY_EXC_ERR, GX_EPEER, "the peer is down, or the link loses packets (7 retries" },
        { IBV_WC_RETRY_EXC_ERR, GX_EPEER, "GID index" },
        { IBV_WC_RNR_RETRY_EXC_ERR, GX_EPROTO, "flow-control bug" },
        { IBV_WC_REM_ACCESS_ERR, GX_EPROTO, "stale or wrong" },
        { IBV_WC_REM_INV_REQ_ERR, GX_EPROTO, "gx bug" },
        { IBV_WC_LOC_PROT_ERR, GX_EINVAL, "not registered" },
        { IBV_WC_LOC_LEN_ERR, GX_EINVAL, "bug in gx" },
        { IBV_WC_FATAL_ERR, GX_ESYSTEM, "dmesg" },
        { IBV_WC_RESP_TIMEOUT_ERR, GX_EPEER, "peer down" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *hint = "";
        int st = verbs_wc_status_map(cases[i].st, &hint);
        if (st != cases[i].status || !strstr(hint, cases[i].hint)) {
            fprintf(stderr, "wc status %d: got %s / '%s'\n", cases[i].st, gx_strerror(st), hint);
            return 1;
        }
    }
    fprintf(stderr, "status_map: %zu cases ok\n", sizeof(cases) / sizeof(cases[0]));
    return 0;
}

static int t_link_down(struct fab_ctx *c)
{
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    char b[64] = { 0 };
    fab_barrier(c);
    if (c->rank == 0) {
        FILE *f = fopen(down_file, "w");
        FAB_CHECK(f != NULL, "create %s", down_file);
        fclose(f);
    }
    fab_barrier(c);
    uint64_t t0 = gx_now_ns();
    if (c->rank == 1) {
        /* The clear-to-send write of this receive never gets an ACK. */
        FAB_OK(gx_fab_post_recv(ep, b, sizeof(b), NULL, 1));
        struct gx_fab_cqe e = fab_wait1(c, (int)detection_limit_ms() + 5000);
        FAB_CHECK(e.status == GX_EPEER, "got %s", gx_strerror(e.status));
        expect_text("link down", "rank 0");
        expect_text("link down", "retries exhausted");
        expect_text("link down", "QP 0x");
        expect_text("link down", "127.0.0.1");
    } else {
        FAB_OK(gx_fab_post_send(ep, b, sizeof(b), NULL, 1, 1));
        struct gx_fab_cqe e = fab_wait1(c, (int)detection_limit_ms() + 5000);
        FAB_CHECK(GX_IS_PEER_ERROR(e.status), "got %s", gx_strerror(e.status));
        expect_text("link down (other side)", "rank 1");
    }
    double ms = (double)(gx_now_ns() - t0) / 1e6;
    fprintf(stderr, "rank %d: link down detected in %.0f ms: %s\n", c->rank, ms, gx_last_error());
    FAB_CHECK(ms < detection_limit_ms(), "detection took %.0f ms, limit %.0f ms", ms,
              detection_limit_ms());
    fab_barrier(c);
    if (c->rank == 0)
        unlink(down_file);
    gx_fab_ep_close(ep);
    return 0;
}

static int t_bad_key(struct fab_ctx *c)
{
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    const size_t len = 4096;
    char *buf = calloc(1, 4 * len);
    struct gx_fab_rkey key, keys[2];
    memset(&key, 0, sizeof(key));
    struct gx_fab_mr *mr = NULL;
    if (c->rank == 0) {
        mr = fab_reg(c, buf + len, len, GX_FAB_ACCESS_REMOTE_WRITE);
        FAB_OK(gx_fab_mr_pack_rkey(mr, &key));
        FAB_OK(gx_fab_post_recv(ep, NULL, 0, NULL, 1));
    }
    fab_allgather(c, &key, keys, sizeof(key));
    if (c->rank == 1) {
        struct gx_fab_rkey forged = keys[0];
        uint64_t base, big = 3 * len;
        memcpy(&base, forged.bytes + 16, sizeof(base));
        memcpy(forged.bytes + 24, &big, sizeof(big));
        FAB_OK(gx_fab_post_write_imm(ep, buf, 2 * len, NULL, base, &forged, 9, 2));
        struct gx_fab_cqe e = fab_wait1(c, 10000);
        FAB_CHECK(e.status == GX_EPROTO && e.prov_err == IBV_WC_REM_ACCESS_ERR, "got %s (%d)",
                  gx_strerror(e.status), e.prov_err);
        expect_text("bad key initiator", "remote access error");
        expect_text("bad key initiator", "stale or wrong");
        expect_text("bad key initiator", "rank 0");
    } else {
        struct gx_fab_cqe e = fab_wait1(c, 10000);
        FAB_CHECK(e.status == GX_EPROTO, "target got %s", gx_strerror(e.status));
        expect_text("bad key target", "refused an RDMA write");
        expect_text("bad key target", "rank 1");
    }
    fab_barrier(c);
    if (mr)
        FAB_OK(gx_fab_mr_dereg(mr));
    gx_fab_ep_close(ep);
    free(buf);
    return 0;
}

static int t_killed_peer(struct fab_ctx *c)
{
    /* Rank 0 posts one receive more than rank 1 sends, so however far rank
     * 1 got before it died, a receive is still outstanding and must fail
     * (rank 1 dies after its 4th completion, sends usually still in flight). */
    enum { N = 64 };
    const size_t len = 1 << 20;
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    char *buf = malloc((N + 1) * len);
    memset(buf, 5, (N + 1) * len);
    if (c->rank == 0)
        for (int i = 0; i <= N; i++)
            FAB_OK(gx_fab_post_recv(ep, buf + (size_t)i * len, len, NULL, (uint64_t)i));
    fab_barrier(c);
    if (c->rank == 1) {
        for (int i = 0; i < N; i++)
            FAB_OK(gx_fab_post_send(ep, buf + (size_t)i * len, len, NULL, 0, (uint64_t)i));
        for (int i = 0; i < 4; i++)
            fab_wait1(c, 10000);
        _exit(0); /* dies: nothing closed */
    }
    uint64_t t0 = gx_now_ns();
    int ok = 0, failed = 0;
    for (int i = 0; i <= N; i++) {
        struct gx_fab_cqe e = fab_wait1(c, (int)detection_limit_ms() + 5000);
        if (e.status == GX_OK) {
            ok++;
            t0 = gx_now_ns();
            continue;
        }
        FAB_CHECK(GX_IS_PEER_ERROR(e.status), "got %s", gx_strerror(e.status));
        failed++;
    }
    double ms = (double)(gx_now_ns() - t0) / 1e6;
    FAB_CHECK(failed > 0 && ok <= N, "no failure after the peer died (%d received)", ok);
    expect_text("killed peer", "rank 1");
    fprintf(stderr, "killed peer: %d received, %d failed, last failure %.0f ms after the last "
            "success: %s\n", ok, failed, ms, gx_last_error());
    /* the side channel's close is seen within 1 ms of polling; a send still
     * in flight gives up by the QP's retries at the latest */
    FAB_CHECK(ms < detection_limit_ms(), "took %.0f ms, limit %.0f ms", ms, detection_limit_ms());
    gx_fab_ep_close(ep);
    free(buf);
    return 0;
}

int main(void)
{
    if (!getenv("GX_IBVERBS_LIB")) {
        printf("GX_IBVERBS_LIB unset: needs the softverbs emulator; skipping\n");
        return 77;
    }
    /* Read by softverbs once per process: set before the children start. */
    snprintf(down_file, sizeof(down_file), "/tmp/gx-verbs-linkdown-%d", (int)getpid());
    unlink(down_file);
    setenv("SOFTVERBS_PORT_DOWN_FILE", down_file, 1);
    int fails = 0;
    fails += t_status_map() != 0;
    static const struct {
        const char *name;
        fab_test_fn fn;
    } tests[] = { { "link_down", t_link_down }, { "bad_key", t_bad_key },
                  { "killed_peer", t_killed_peer } };
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        int rc = fab_run("verbs", 2, 40, "errors", tests[i].fn);
        printf("verbs errors %s: %s\n", tests[i].name, rc == 0 ? "PASS" : "FAIL");
        fails += rc != 0;
    }
    unlink(down_file);
    return fails ? 1 : 0;
}
