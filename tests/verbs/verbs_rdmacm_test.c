/*
 * verbs_rdmacm_test.c - GX_IB_CM=rdmacm without an RDMA NIC. One forked
 * process per case (librdmacm is loaded once per process):
 *   host_cm       the host's librdmacm.so.1: on a machine without the
 *                 kernel's rdma_cm a domain refuses to open, GX_EUNSUPPORTED,
 *                 the message saying why (a real assertion, not a skip)
 *   missing_lib   GX_RDMACM_LIB names no file: "librdmacm missing"
 *   fake_no_cm    the fake librdmacm with no event channel: "kernel rdma_cm
 *                 unavailable"; gx-info's report line says the same
 *   wire          private data encode/decode: round trip, every bounds and
 *                 garbage check, random bytes
 *   events        CM event -> gx status and hint
 *   addr_error, route_error, unreachable, wrong_device
 *                 (fake librdmacm, two processes) a connect fails with the
 *                 status, names the peer rank and gives the operator hint;
 *                 the acceptor stays healthy
 * Usage: verbs_rdmacm_test SOFTVERBS_LIB FAKE_RDMACM_LIB [CASE]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "fab_harness.h"
#include "fabric/verbs/verbs_rdmacm.h"

static const char *sv, *fake;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, " (last error: %s)\n", gx_last_error());                      \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static int open_dom(struct gx_fab_domain **dom)
{
    const struct gx_fab_provider *p = gx_fab_provider_find("verbs");
    CHECK(p != NULL, "verbs provider not built in");
    struct gx_fab_domain_attr a = GX_FAB_DOMAIN_ATTR_INIT;
    a.rank = 0;
    return gx_fab_domain_open(p, &a, dom);
}

/* ---- availability ------------------------------------------------------------ */
static int c_host_cm(void)
{
    setenv("GX_IBVERBS_LIB", sv, 1);
    setenv("GX_IB_CM", "rdmacm", 1);
    unsetenv("GX_RDMACM_LIB");
    bool kernel_cm = access("/dev/infiniband/rdma_cm", F_OK) == 0;
    struct gx_fab_domain *dom = NULL;
    int rc = open_dom(&dom);
    fprintf(stderr, "host_cm: %s: %s\n", gx_strerror(rc), gx_last_error());
    /* softverbs0 is not a device the host's librdmacm knows, so even with
     * a kernel rdma_cm this must fail, cleanly. */
    CHECK(rc == GX_EUNSUPPORTED, "domain open returned %s", gx_strerror(rc));
    CHECK(strstr(gx_last_error(), "GX_IB_CM=rdmacm"), "message does not name the setting");
    if (!kernel_cm)
        CHECK(strstr(gx_last_error(), "kernel rdma_cm unavailable") ||
                  strstr(gx_last_error(), "librdmacm missing"),
              "no /dev/infiniband/rdma_cm here, the reason must say so");
    char line[512];
    gx_verbs_rdmacm_report(line, sizeof(line));
    fprintf(stderr, "host_cm: gx-info: %s\n", line);
    if (!kernel_cm)
        CHECK(strstr(line, "rdmacm: not available: "), "%s", line);
    /* The TCP path still works in the same process. */
    setenv("GX_IB_CM", "tcp", 1);
    CHECK(open_dom(&dom) == GX_OK, "tcp path after a refused rdmacm domain");
    gx_fab_domain_close(dom);
    return 0;
}

static int c_missing_lib(void)
{
    setenv("GX_IBVERBS_LIB", sv, 1);
    setenv("GX_IB_CM", "rdmacm", 1);
    setenv("GX_RDMACM_LIB", "/nonexistent/librdmacm.so.1", 1);
    struct gx_fab_domain *dom;
    CHECK(open_dom(&dom) == GX_EUNSUPPORTED, "domain open");
    CHECK(strstr(gx_last_error(), "librdmacm missing") &&
              strstr(gx_last_error(), "GX_RDMACM_LIB"), "reason");
    return 0;
}

static int c_fake_no_cm(void)
{
    setenv("GX_IBVERBS_LIB", sv, 1);
    setenv("GX_IB_CM", "rdmacm", 1);
    setenv("GX_RDMACM_LIB", fake, 1);
    setenv("FAKE_RDMACM_NO_CM", "1", 1);
    struct gx_fab_domain *dom;
    CHECK(open_dom(&dom) == GX_EUNSUPPORTED, "domain open");
    CHECK(strstr(gx_last_error(), "kernel rdma_cm unavailable") &&
              strstr(gx_last_error(), "/dev/infiniband/rdma_cm"), "reason");
    char line[512];
    gx_verbs_rdmacm_report(line, sizeof(line));
    CHECK(strstr(line, "not available: kernel rdma_cm unavailable"), "%s", line);
    return 0;
}

/* ---- wire -------------------------------------------------------------------- */
static int c_wire(void)
{
    struct gx_verbs_cm_pd pd, out;
    char why[160];
    uint8_t buf[GX_VERBS_CM_PD_MAX];
    gx_verbs_cm_pd_encode(&pd, GX_VERBS_CM_PD_REQ, 1, 2, 7, 0x123, 0x456, 0);
    memset(buf, 0, sizeof(buf));
    memcpy(buf, &pd, sizeof(pd));
    /* round trip, also with the IB CM's zero padding */
    CHECK(gx_verbs_cm_pd_decode(&pd, sizeof(pd), GX_VERBS_CM_PD_REQ, &out, why, sizeof(why)) ==
              GX_OK, "%s", why);
    CHECK(out.qp_index == 1 && out.nqps == 2 && out.rank == 7 && out.qpn == 0x123 &&
              out.peer_qpn == 0x456, "fields");
    CHECK(gx_verbs_cm_pd_decode(buf, sizeof(buf), GX_VERBS_CM_PD_REQ, &out, why, sizeof(why)) ==
              GX_OK, "padded: %s", why);
    /* missing and short */
    CHECK(gx_verbs_cm_pd_decode(NULL, 0, GX_VERBS_CM_PD_REQ, &out, why, sizeof(why)) ==
              GX_EPROTO && strstr(why, "not a gx peer"), "%s", why);
    for (size_t n = 0; n < sizeof(pd); n++)
        CHECK(gx_verbs_cm_pd_decode(&pd, n, GX_VERBS_CM_PD_REQ, &out, why, sizeof(why)) ==
                  GX_EPROTO, "short %zu accepted", n);
    /* each field corrupted */
    struct gx_verbs_cm_pd b;
#define SPOIL(stmt, kind, expect)                                                           \
    do {                                                                                    \
        b = pd;                                                                             \
        stmt;                                                                               \
        int rc_ = gx_verbs_cm_pd_decode(&b, sizeof(b), kind, &out, why, sizeof(why));       \
        CHECK(rc_ == GX_EPROTO && strstr(why, expect), "%s: %s", #stmt, why);               \
    } while (0)
    SPOIL(b.magic ^= 1, GX_VERBS_CM_PD_REQ, "magic");
    SPOIL(b.version = 9, GX_VERBS_CM_PD_REQ, "version");
    SPOIL((void)0, GX_VERBS_CM_PD_REP, "kind");
    SPOIL(b.nqps = 0, GX_VERBS_CM_PD_REQ, "QP");
    SPOIL(b.nqps = GX_VERBS_MAX_QPS + 1, GX_VERBS_CM_PD_REQ, "QP");
    SPOIL(b.qp_index = 2, GX_VERBS_CM_PD_REQ, "QP 2 of 2");
    SPOIL(b.rank = -1, GX_VERBS_CM_PD_REQ, "garbage");
    SPOIL(b.qpn = 0, GX_VERBS_CM_PD_REQ, "garbage");
    SPOIL(b.peer_qpn = 0x1000000, GX_VERBS_CM_PD_REQ, "garbage");
    SPOIL(b.status = GX_EPROTO, GX_VERBS_CM_PD_REQ, "garbage");
    /* reject: only a gx error status */
    gx_verbs_cm_pd_encode(&pd, GX_VERBS_CM_PD_REJ, 0, 0, -1, 0, 0, GX_ECONNECT);
    CHECK(gx_verbs_cm_pd_decode(&pd, sizeof(pd), GX_VERBS_CM_PD_REJ, &out, why, sizeof(why)) ==
              GX_OK && out.status == GX_ECONNECT, "%s", why);
    SPOIL(b.status = 5, GX_VERBS_CM_PD_REJ, "not a gx error");
    SPOIL(b.status = -12345, GX_VERBS_CM_PD_REJ, "not a gx error");
    SPOIL(b.status = 0, GX_VERBS_CM_PD_REJ, "not a gx error");
#undef SPOIL
    /* random bytes: never accepted unless they happen to carry the magic */
    srand(1);
    int accepted = 0;
    for (int i = 0; i < 100000; i++) {
        for (size_t k = 0; k < sizeof(buf); k++)
            buf[k] = (uint8_t)rand();
        if (i & 1)
            memcpy(buf, &(uint32_t){ GX_VERBS_CM_PD_MAGIC }, 4);
        size_t n = (size_t)rand() % (sizeof(buf) + 1);
        int kind = 1 + rand() % 3;
        if (gx_verbs_cm_pd_decode(buf, n, kind, &out, why, sizeof(why)) == GX_OK) {
            accepted++;
            CHECK(out.magic == GX_VERBS_CM_PD_MAGIC && out.kind == kind, "accepted garbage");
            if (kind != GX_VERBS_CM_PD_REJ)
                CHECK(out.qp_index < out.nqps && out.nqps <= GX_VERBS_MAX_QPS && out.rank >= 0,
                      "accepted out-of-range fields");
        }
    }
    fprintf(stderr, "wire: %d of 100000 random buffers decoded (all in range)\n", accepted);
    CHECK(accepted < 100, "too much garbage accepted (%d)", accepted);
    return 0;
}

static int c_events(void)
{
    char hint[384];
    struct {
        int ev, status, want;
        const char *hint;
    } t[] = {
        { RDMA_CM_EVENT_ADDR_RESOLVED, 0, GX_OK, "not a failure" },
        { RDMA_CM_EVENT_ADDR_ERROR, -ENETUNREACH, GX_ECONNECT, "GX_SOCKET_IFNAME" },
        { RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT, GX_ETIMEOUT, "address resolution" },
        { RDMA_CM_EVENT_ROUTE_ERROR, -EHOSTUNREACH, GX_ECONNECT, "subnet manager" },
        { RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, GX_ETIMEOUT, "did not answer" },
        { RDMA_CM_EVENT_UNREACHABLE, -EIO, GX_ECONNECT, "firewall" },
        { RDMA_CM_EVENT_REJECTED, 8, GX_ECONNECT, "nothing listens" },
        { RDMA_CM_EVENT_REJECTED, 28, GX_ECONNECT, "peer's application" },
        { RDMA_CM_EVENT_REJECTED, -ECONNREFUSED, GX_ECONNECT, "iWARP" },
        { RDMA_CM_EVENT_REJECTED, 99, GX_ECONNECT, "reason 99" },
        { RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL, GX_ECONNECT, "QP transition" },
        { RDMA_CM_EVENT_DISCONNECTED, 0, GX_EPEER, "disconnected" },
        { RDMA_CM_EVENT_DEVICE_REMOVAL, 0, GX_ESYSTEM, "dmesg" },
        { RDMA_CM_EVENT_ADDR_CHANGE, 0, GX_EPEER, "bonding" },
        { RDMA_CM_EVENT_MULTICAST_JOIN, 0, GX_EPROTO, "unexpected" },
        { 1234, 0, GX_EPROTO, "unexpected" },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int rc = gx_verbs_cm_event_status(t[i].ev, t[i].status, hint, sizeof(hint));
        CHECK(rc == t[i].want && strstr(hint, t[i].hint), "event %d status %d: %s, '%s'",
              t[i].ev, t[i].status, gx_strerror(rc), hint);
    }
    return 0;
}

/* ---- failing connections through the fake (two processes) -------------------- */
static const char *expect_status_name, *expect_text;
static int expect_status;

/* Rank 0 listens and keeps accepting (nothing must arrive); rank 1
 * connects and must fail with the expected status and text. */
static int t_connect_fails(struct fab_ctx *c)
{
    struct gx_fab_addr addr, all[2];
    struct gx_fab_listener *lst = NULL;
    memset(&addr, 0, sizeof(addr));
    if (c->rank == 0)
        FAB_OK(gx_fab_listen(c->dom, c->cq, &lst, &addr));
    FAB_CHECK(fab_allgather(c, &addr, all, sizeof(addr)) == GX_OK, "address exchange");
    if (c->rank == 1) {
        struct gx_fab_conn_param p = GX_FAB_CONN_PARAM_INIT;
        p.peer_rank = 0;
        struct gx_fab_ep *ep;
        FAB_OK(gx_fab_connect(c->dom, c->cq, &all[0], &p, &ep));
        uint64_t deadline = gx_deadline_after_ms(20000);
        int rc;
        while ((rc = gx_fab_ep_establish(ep)) == GX_INPROGRESS)
            FAB_CHECK(gx_now_ns() < deadline, "connect neither failed nor finished");
        fprintf(stderr, "[rank 1] %s: %s\n", gx_strerror(rc), gx_last_error());
        FAB_CHECK(rc == expect_status, "establish returned %s, expected %s", gx_strerror(rc),
                  expect_status_name);
        FAB_CHECK(strstr(gx_last_error(), "rank 0") != NULL, "the peer rank is not named");
        FAB_CHECK(strstr(gx_last_error(), expect_text) != NULL, "no '%s' in the message",
                  expect_text);
        gx_fab_ep_close(ep);
    }
    if (c->rank == 0) {
        /* Drive the side channel and the CM while the connector fails;
         * nothing may come out of accept. */
        struct gx_fab_ep *ep = NULL;
        uint64_t until = gx_deadline_after_ms(2000);
        while (gx_now_ns() < until) {
            FAB_CHECK(gx_fab_accept(lst, &ep) == GX_INPROGRESS, "accepted a failed connect");
            usleep(200);
        }
        gx_fab_listener_close(lst);
    }
    fab_barrier(c);
    return 0;
}

static int run_fail(const char *fail, const char *text, int status, const char *status_name)
{
    setenv("GX_IBVERBS_LIB", sv, 1);
    setenv("GX_IB_CM", "rdmacm", 1);
    setenv("GX_RDMACM_LIB", fake, 1);
    if (fail)
        setenv("FAKE_RDMACM_FAIL", fail, 1);
    expect_text = text;
    expect_status = status;
    expect_status_name = status_name;
    return fab_run("verbs", 2, 60, "rdmacm-test", t_connect_fails);
}

static int c_addr_error(void)
{
    return run_fail("addr", "address resolution failed", GX_ECONNECT, "GX_ECONNECT");
}

static int c_route_error(void)
{
    return run_fail("route", "route resolution failed", GX_ECONNECT, "GX_ECONNECT");
}

static int c_unreachable(void)
{
    return run_fail("unreachable", "did not answer", GX_ETIMEOUT, "GX_ETIMEOUT");
}

static int c_wrong_device(void)
{
    /* Two emulated devices; the domain takes softverbs0, the fake CM binds
     * addresses to softverbs1: both ends must refuse, naming both devices. */
    setenv("SOFTVERBS_NDEV", "2", 1);
    setenv("GX_IB_HCA", "=softverbs0", 1);
    setenv("FAKE_RDMACM_DEVICE", "softverbs1", 1);
    setenv("GX_IBVERBS_LIB", sv, 1);
    setenv("GX_IB_CM", "rdmacm", 1);
    setenv("GX_RDMACM_LIB", fake, 1);
    struct gx_fab_domain *dom;
    CHECK(open_dom(&dom) == GX_OK, "open");
    struct gx_fab_cq *cq;
    CHECK(gx_fab_cq_open(dom, &cq) == GX_OK, "cq");
    struct gx_fab_listener *lst;
    struct gx_fab_addr addr;
    int rc = gx_fab_listen(dom, cq, &lst, &addr);
    fprintf(stderr, "wrong_device: listen: %s: %s\n", gx_strerror(rc), gx_last_error());
    CHECK(rc == GX_ECONNECT && strstr(gx_last_error(), "softverbs1") &&
              strstr(gx_last_error(), "softverbs0:1"), "listener on another device accepted");
    gx_fab_cq_close(cq);
    gx_fab_domain_close(dom);
    return 0;
}

/* ---- driver ------------------------------------------------------------------- */
struct tcase {
    const char *name;
    int (*fn)(void);
};

static const struct tcase cases[] = {
    { "host_cm", c_host_cm },         { "missing_lib", c_missing_lib },
    { "fake_no_cm", c_fake_no_cm },   { "wire", c_wire },
    { "events", c_events },           { "addr_error", c_addr_error },
    { "route_error", c_route_error }, { "unreachable", c_unreachable },
    { "wrong_device", c_wrong_device },
};

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s SOFTVERBS_LIB FAKE_RDMACM_LIB [CASE]\n", argv[0]);
        return 2;
    }
    sv = argv[1];
    fake = argv[2];
    int failed = 0, ran = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (argc > 3 && strcmp(argv[3], cases[i].name) != 0)
            continue;
        ran++;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0)
            _exit(cases[i].fn());
        int st = 0;
        waitpid(pid, &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        fprintf(stderr, "%-14s %s\n", cases[i].name, code == 0 ? "ok" : "FAILED");
        failed += code != 0;
    }
    if (!ran) {
        fprintf(stderr, "no case named %s\n", argv[3]);
        return 2;
    }
    return failed ? 1 : 0;
}
