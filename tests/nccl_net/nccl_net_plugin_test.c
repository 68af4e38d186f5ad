/*
 * nccl_net_plugin_test.c - drives libnccl-net-gx.so the way NCCL does, with
 * no GPU: dlopen, look up the versioned table (v11, then v10, v9, v8), a
 * service thread connecting while the main thread accepts, then two
 * progress threads (the two ranks' proxies) posting isend / irecv and
 * testing, with more messages than NCCL's 32 outstanding requests, sizes
 * from 0 bytes to 8 MiB, a receive smaller than its send (a clear error),
 * CUDA registration (refused by name), and closing.
 *
 * "fork": two processes, as two NCCL ranks: a child with another job key is
 * refused (its connect fails by name, the listener yields no comm), then a
 * child with the right key sends messages the parent receives and checks.
 *
 * Usage: nccl_net_plugin_test <path to libnccl-net-gx.so> [name=PREFIX] [8|9|10|11|fork]...
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugins/nccl-net/nccl_net_abi.h"

/* The layouts NCCL's ext-net headers give on LP64 (offsets checked here so
 * an edit to nccl_net_abi.h that moves a member fails the build). */
_Static_assert(offsetof(struct gxn_props_v8, ptr_support) == 24, "v8 ptrSupport");
_Static_assert(offsetof(struct gxn_props_v8, speed_mbps) == 32, "v8 speed (no forceFlush)");
_Static_assert(sizeof(struct gxn_props_v8) == 64, "v8 properties");
_Static_assert(offsetof(struct gxn_props_v9, speed_mbps) == 36, "v9 speed after forceFlush");
_Static_assert(offsetof(struct gxn_props_v9, vprops) == 64, "v9 vProps");
_Static_assert(offsetof(struct gxn_props_v9, max_p2p_bytes) == 88, "v9 maxP2pBytes");
_Static_assert(sizeof(struct gxn_props_v11) == 112, "v11 properties");
_Static_assert(offsetof(gxn_net_v8_t, irecv_consumed) == 18 * sizeof(void *), "v8 table");
_Static_assert(offsetof(gxn_net_v9_t, make_vdevice) == 19 * sizeof(void *), "v9 table");
_Static_assert(offsetof(gxn_net_v11_t, set_net_attr) == 21 * sizeof(void *), "v11 table");

#define NMSG 100
#define WINDOW 8
#define DEADLINE_S 30

static const char *want_name = "gx-"; /* "name=PREFIX": device 0's name starts so */

#include "tests/nccl_net/nccl_net_harness.h"

static size_t msg_size(int i)
{
    static const size_t sizes[] = { 0, 1, 7, 4096, 65536 + 3, 1u << 20, 8u << 20 };
    return sizes[i % (int)(sizeof(sizes) / sizeof(sizes[0]))];
}

static unsigned char pattern(int msg, size_t off)
{
    return (unsigned char)(msg * 31 + off * 7 + 1);
}

#define MAXBUF (8u << 20)

struct rank {
    void *comm;
    unsigned char *buf[WINDOW];
    void *mh[WINDOW];
};

static void test_until_done(void *req, int *size_out, const char *what, int i)
{
    int done = 0;
    double end = now_s() + DEADLINE_S;
    while (!done) {
        CHECK(T8->test(req, &done, size_out) == GXN_NCCL_OK, "test of %s %d failed", what, i);
        CHECK(now_s() < end, "%s %d did not complete in %d s", what, i, DEADLINE_S);
    }
}

static void *sender_progress(void *p)
{
    struct rank *r = p;
    void *reqs[WINDOW] = { 0 };
    int idx[WINDOW];
    for (int i = 0; i < NMSG + WINDOW; i++) {
        int w = i % WINDOW;
        if (reqs[w]) {
            int sz = -1;
            test_until_done(reqs[w], &sz, "send", idx[w]);
            CHECK((size_t)sz == msg_size(idx[w]), "send %d reported %d bytes", idx[w], sz);
            reqs[w] = NULL;
        }
        if (i >= NMSG)
            continue;
        size_t n = msg_size(i);
        for (size_t k = 0; k < n; k++)
            r->buf[w][k] = pattern(i, k);
        idx[w] = i;
        double end = now_s() + DEADLINE_S;
        while (!reqs[w]) { /* NULL request: NCCL calls again later */
            CHECK(p_isend(r->comm, r->buf[w], n, i, r->mh[w], &reqs[w]) == GXN_NCCL_OK,
                  "isend %d failed", i);
            CHECK(now_s() < end, "isend %d got no request in %d s", i, DEADLINE_S);
        }
    }
    return NULL;
}

static void *receiver_progress(void *p)
{
    struct rank *r = p;
    void *reqs[WINDOW] = { 0 };
    int idx[WINDOW];
    for (int i = 0; i < NMSG + WINDOW; i++) {
        int w = i % WINDOW;
        if (reqs[w]) {
            int sz = -1, m = idx[w];
            test_until_done(reqs[w], &sz, "recv", m);
            CHECK((size_t)sz == msg_size(m), "recv %d: %d bytes, expected %zu", m, sz, msg_size(m));
            for (size_t k = 0; k < (size_t)sz; k++)
                CHECK(r->buf[w][k] == pattern(m, k), "recv %d: byte %zu wrong", m, k);
            reqs[w] = NULL;
        }
        if (i >= NMSG)
            continue;
        idx[w] = i;
        /* the receive is always the full buffer: NCCL posts its slot size */
        double end = now_s() + DEADLINE_S;
        while (!reqs[w]) {
            CHECK(p_irecv(r->comm, r->buf[w], MAXBUF, i, r->mh[w], &reqs[w]) == GXN_NCCL_OK,
                  "irecv %d failed", i);
            CHECK(now_s() < end, "irecv %d got no request", i);
        }
    }
    return NULL;
}

static void run_version(void *lib, int v)
{
    char sym[32];
    snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
    tables = dlsym(lib, sym);
    version = v;
    CHECK(tables, "%s not exported: %s", sym, dlerror());
    CHECK(strcmp(T8->name, "gx") == 0, "%s name is '%s', expected 'gx' (NCCL_NET=gx)", sym,
          T8->name);
    void *ctx = NULL;
    if (v == 11)
        CHECK(((gxn_net_v11_t *)tables)->init(&ctx, 42, NULL, logger, NULL) == GXN_NCCL_OK, "init");
    else if (v == 10)
        CHECK(((gxn_net_v10_t *)tables)->init(logger, NULL) == GXN_NCCL_OK, "init");
    else
        CHECK(T8->init(logger) == GXN_NCCL_OK, "init");
    int ndev = 0;
    CHECK(T8->devices(&ndev) == GXN_NCCL_OK && ndev >= 1, "devices: %d", ndev);
    const char *dname;
    int speed, ptr, maxrecvs;
    if (v == 8) {
        struct gxn_props_v8 pr;
        CHECK(T8->get_properties(0, &pr) == GXN_NCCL_OK, "getProperties");
        dname = pr.name, speed = pr.speed_mbps, ptr = pr.ptr_support, maxrecvs = pr.max_recvs;
    } else {
        struct gxn_props_v11 pr; /* v9/v10 fill its first part */
        memset(&pr, 0xee, sizeof(pr));
        CHECK(((gxn_net_v9_t *)tables)->get_properties(0, &pr.base) == GXN_NCCL_OK, "props");
        dname = pr.base.name, speed = pr.base.speed_mbps, ptr = pr.base.ptr_support;
        maxrecvs = pr.base.max_recvs;
        CHECK(pr.base.vprops.ndevs == 1 && pr.base.max_p2p_bytes == GXN_MAX_NET_SIZE, "v9 tail");
        if (v == 11)
            CHECK(pr.max_multi_request_size == 1, "v11 maxMultiRequestSize");
    }
    CHECK(strncmp(dname, want_name, strlen(want_name)) == 0 && speed > 0 && ptr == GXN_PTR_HOST && maxrecvs == 1,
          "device 0: name '%s' speed %d ptrSupport %d maxRecvs %d", dname, speed, ptr, maxrecvs);
    fprintf(stderr, "v%d: %d device(s), device 0 %s at %d Mb/s\n", v, ndev, dname, speed);

    void *lc, *rcomm;
    void *scomm = connect_pair(ctx, &lc, &rcomm);

    struct rank snd = { .comm = scomm }, rcv = { .comm = rcomm };
    for (int w = 0; w < WINDOW; w++) {
        snd.buf[w] = malloc(MAXBUF);
        rcv.buf[w] = malloc(MAXBUF);
        CHECK(T8->reg_mr(snd.comm, snd.buf[w], MAXBUF, GXN_PTR_HOST, &snd.mh[w]) == GXN_NCCL_OK,
              "regMr host");
        CHECK(T8->reg_mr(rcv.comm, rcv.buf[w], MAXBUF, GXN_PTR_HOST, &rcv.mh[w]) == GXN_NCCL_OK,
              "regMr host");
    }
    void *cuda_mh = NULL;
    int w0 = atomic_load(&warnings);
    CHECK(T8->reg_mr(snd.comm, snd.buf[0], 4096, GXN_PTR_CUDA, &cuda_mh) != GXN_NCCL_OK &&
              atomic_load(&warnings) > w0, "regMr of CUDA memory must fail with a warning");

    pthread_t ts, tr;
    pthread_create(&tr, NULL, receiver_progress, &rcv);
    pthread_create(&ts, NULL, sender_progress, &snd);
    pthread_join(ts, NULL);
    pthread_join(tr, NULL);

    /* A send larger than its receive fails by name, and the receive stays
     * usable for a send that fits. */
    void *rreq = NULL, *sreq = NULL;
    CHECK(p_irecv(rcv.comm, rcv.buf[0], 100, 7, rcv.mh[0], &rreq) == GXN_NCCL_OK && rreq, "irecv");
    gxn_result_t res = GXN_NCCL_OK;
    double end = now_s() + DEADLINE_S;
    w0 = atomic_load(&warnings);
    while (res == GXN_NCCL_OK && !sreq) {
        res = p_isend(snd.comm, snd.buf[0], 200, 7, snd.mh[0], &sreq);
        CHECK(now_s() < end, "oversized isend neither failed nor started");
    }
    CHECK(res != GXN_NCCL_OK && !sreq && atomic_load(&warnings) > w0,
          "an isend of 200 bytes into a 100-byte receive must fail");
    memset(snd.buf[0], 0x5a, 100);
    CHECK(p_isend(snd.comm, snd.buf[0], 100, 7, snd.mh[0], &sreq) == GXN_NCCL_OK && sreq, "isend");
    int sz = 0;
    test_until_done(sreq, &sz, "send", 7);
    test_until_done(rreq, &sz, "recv", 7);
    CHECK(sz == 100 && rcv.buf[0][99] == 0x5a, "fitting send after the refused one");

    void *freq = (void *)1;
    int fsz = 100;
    void *data0 = rcv.buf[0], *mh0 = rcv.mh[0];
    CHECK(T8->iflush(rcv.comm, 1, &data0, &fsz, &mh0, &freq) == GXN_NCCL_OK && !freq,
          "iflush of host memory: nothing to wait for");

    for (int w = 0; w < WINDOW; w++) {
        CHECK(T8->dereg_mr(snd.comm, snd.mh[w]) == GXN_NCCL_OK, "deregMr");
        CHECK(T8->dereg_mr(rcv.comm, rcv.mh[w]) == GXN_NCCL_OK, "deregMr");
        free(snd.buf[w]);
        free(rcv.buf[w]);
    }
    CHECK(T8->close_send(snd.comm) == GXN_NCCL_OK, "closeSend");
    CHECK(T8->close_recv(rcv.comm) == GXN_NCCL_OK, "closeRecv");
    CHECK(T8->close_listen(lc) == GXN_NCCL_OK, "closeListen");
    if (v == 11)
        CHECK(((gxn_net_v11_t *)tables)->finalize(ctx) == GXN_NCCL_OK, "finalize");
    fprintf(stderr, "v%d: %d messages of 0..8 MiB checked\n", v, NMSG);
}

/* ---- two processes (v11) ---------------------------------------------- */

#define FORK_MSGS 40

static void *init_v11(void)
{
    static void *ctx;
    version = 11;
    CHECK(((gxn_net_v11_t *)tables)->init(&ctx, 7, NULL, logger, NULL) == GXN_NCCL_OK, "init");
    return ctx;
}

/* The connecting rank: exit 0 when it did what `expect_ok` says. */
static int fork_child(const unsigned char *handle, const char *key, int expect_ok)
{
    setenv("GX_JOB_KEY", key, 1);
    void *ctx = init_v11();
    unsigned char h[GXN_HANDLE_MAXSIZE];
    memcpy(h, handle, sizeof(h));
    void *sc = NULL;
    struct gxn_dev_handle *dc = NULL;
    double end = now_s() + DEADLINE_S;
    gxn_result_t r = GXN_NCCL_OK;
    while (!sc && r == GXN_NCCL_OK && now_s() < end)
        r = ((gxn_net_v11_t *)tables)->connect(ctx, 0, h, &sc, &dc);
    if (!expect_ok) {
        CHECK(r != GXN_NCCL_OK && !sc, "a connect with the wrong job key must fail");
        return 0;
    }
    CHECK(r == GXN_NCCL_OK && sc, "connect from the child failed");
    static unsigned char buf[1 << 16];
    void *mh = NULL;
    CHECK(T8->reg_mr(sc, buf, sizeof(buf), GXN_PTR_HOST, &mh) == GXN_NCCL_OK, "child regMr");
    for (int i = 0; i < FORK_MSGS; i++) {
        size_t n = (size_t)(i * 1637) % sizeof(buf);
        for (size_t k = 0; k < n; k++)
            buf[k] = pattern(i, k);
        void *req = NULL;
        end = now_s() + DEADLINE_S;
        while (!req) {
            CHECK(p_isend(sc, buf, n, i, mh, &req) == GXN_NCCL_OK, "child isend %d", i);
            CHECK(now_s() < end, "child isend %d got no request", i);
        }
        int sz = -1;
        test_until_done(req, &sz, "child send", i);
    }
    CHECK(T8->dereg_mr(sc, mh) == GXN_NCCL_OK && T8->close_send(sc) == GXN_NCCL_OK, "close");
    return 0;
}

static void run_fork(void)
{
    setenv("GX_JOB_KEY", "nccl-net-plugin-test", 1);
    void *ctx = init_v11();
    unsigned char handle[GXN_HANDLE_MAXSIZE];
    void *lc = NULL, *rc = NULL;
    CHECK(((gxn_net_v11_t *)tables)->listen(ctx, 0, handle, &lc) == GXN_NCCL_OK, "listen");
    struct gxn_dev_handle *dc = NULL;
    for (int round = 0; round < 2; round++) {
        int good = round == 1;
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0)
            _exit(fork_child(handle, good ? "nccl-net-plugin-test" : "another-job", good));
        int status = -1, exited = 0;
        double end = now_s() + DEADLINE_S;
        while (!exited || (good && !rc)) { /* accept as NCCL's service thread does */
            if (!rc)
                CHECK(T8->accept(lc, &rc, &dc) == GXN_NCCL_OK, "accept");
            CHECK(good || !rc, "a connection with the wrong job key was accepted");
            if (!exited && waitpid(pid, &status, WNOHANG) == pid)
                exited = 1;
            if (exited && !good)
                break;
            if (good && rc)
                break;
            CHECK(now_s() < end, "round %d: no outcome in %d s", round, DEADLINE_S);
        }
        if (!good) {
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "wrong-key child failed");
            continue;
        }
        static unsigned char buf[1 << 16];
        void *mh = NULL;
        CHECK(T8->reg_mr(rc, buf, sizeof(buf), GXN_PTR_HOST, &mh) == GXN_NCCL_OK, "regMr");
        for (int i = 0; i < FORK_MSGS; i++) {
            void *req = NULL;
            end = now_s() + DEADLINE_S;
            while (!req) {
                CHECK(p_irecv(rc, buf, sizeof(buf), i, mh, &req) == GXN_NCCL_OK, "irecv %d", i);
                CHECK(now_s() < end, "irecv %d got no request", i);
            }
            int sz = -1;
            test_until_done(req, &sz, "recv from the child", i);
            size_t n = (size_t)(i * 1637) % sizeof(buf);
            CHECK((size_t)sz == n, "message %d from the child: %d bytes, expected %zu", i, sz, n);
            for (size_t k = 0; k < n; k++)
                CHECK(buf[k] == pattern(i, k), "message %d byte %zu", i, k);
        }
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "child failed");
        CHECK(T8->dereg_mr(rc, mh) == GXN_NCCL_OK && T8->close_recv(rc) == GXN_NCCL_OK, "close");
    }
    CHECK(T8->close_listen(lc) == GXN_NCCL_OK, "closeListen");
    fprintf(stderr, "fork: wrong job key refused; %d messages between two processes checked\n",
            FORK_MSGS);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s <libnccl-net-gx.so> [8|9|10|11]...\n", argv[0]);
        return 2;
    }
    setenv("GX_JOB_KEY", "nccl-net-plugin-test", 0);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "FAIL: dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    CHECK(dlsym(lib, "gx_fab_post_send") == NULL && dlsym(lib, "gx_init") == NULL,
          "the plugin exports gx internals (only ncclNetPlugin_v* should be visible)");
    if (argc == 2) {
        run_version(lib, 11);
        run_version(lib, 8);
    }
    for (int i = 2; i < argc; i++) {
        if (strncmp(argv[i], "name=", 5) == 0) {
            want_name = argv[i] + 5;
        } else if (strcmp(argv[i], "fork") == 0) {
            tables = dlsym(lib, "ncclNetPlugin_v11");
            CHECK(tables, "ncclNetPlugin_v11 not exported");
            run_fork();
        } else {
            run_version(lib, atoi(argv[i]));
        }
    }
    dlclose(lib);
    printf("PASS\n");
    return 0;
}
