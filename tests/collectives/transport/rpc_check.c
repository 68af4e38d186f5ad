/*
 * rpc_check - multi-process checks of remote calls (gx_rpc.h). Run under
 * gx-run; GX_PROVIDER / GX_NODE_ID pick the providers.
 *   rpc_check basic   to every rank (itself included): arguments and results
 *                     of 0 B to 4 MiB, the caller's rank, a failing handler's
 *                     status and text, an unknown handler, a handler that
 *                     calls out, 1,000 concurrent async calls (wait and
 *                     on_done), a handler that never returns (the caller's
 *                     deadline fires, the communicator stays usable)
 *   rpc_check caller  GX_RPC_PROGRESS=caller: handlers run only inside the
 *                     target's own gx_rpc_progress
 *   rpc_check kill    rank 1 dies while calls to it are pending: each fails
 *                     naming it, within the calls' deadline; calls to the
 *                     other ranks still work
 *   rpc_check barrier ranks 1.. wait in gx_barrier while rank 0 calls rank 1,
 *                     whose handler calls rank 2 over a connection not yet
 *                     made: rank 1's gx threads must connect while its main
 *                     thread's barrier holds the bootstrap (it deadlocked:
 *                     the connection watch waited for the bootstrap's lock)
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gx/gx.h"

#include "../../lib/rank_check.h"

enum { H_ECHO = 1, H_WHO, H_FAIL, H_BIG, H_NESTED, H_FOREVER, H_SLOW, H_DIE, H_FLAG };
#define FAIL_STATUS (-1234)

static int me = -1, nranks;
static atomic_int flag_calls;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint8_t pat(size_t i, int salt)
{
    return (uint8_t)(i * 13 + (size_t)salt * 7 + (i >> 10));
}

static int h_echo(struct gx_rpc_ctx *ctx, const void *args, size_t len, void *user)
{
    return gx_rpc_reply(ctx, args, len);
}

static int h_who(struct gx_rpc_ctx *ctx, const void *args, size_t len, void *user)
{
    int32_t v[2] = { gx_rpc_caller(ctx), gx_comm_rank(gx_rpc_comm(ctx)) };
    return gx_rpc_reply(ctx, v, sizeof(v));
}

static int h_fail(struct gx_rpc_ctx *ctx, const void *args, size_t len, void *user)
{
    const char msg[] = "handler says no";
    gx_rpc_reply(ctx, msg, sizeof(msg));
    return FAIL_STATUS;
}

static int h_big(struct gx_rpc_ctx *ctx, const void *args, size_t len, void *user)
{
    uint64_t n;
    memcpy(&n, args, 8);
    if (len >= 16) { /* a second word: fill gx_rpc_reply_buffer's buffer in place */
        void *out = NULL;
        int rc = gx_rpc_reply_buffer(ctx, n, &out);
        for (size_t i = 0; rc == GX_OK && i < n; i++)
            ((uint8_t *)out)[i] = pat(i, me);
        return rc;
    }
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        b[i] = pat(i, me);
    int rc = gx_rpc_reply(ctx, b, n);
    free(b);
    return rc;
}

/* Calls the next rank's H_WHO and returns what it said plus its own rank. */
static int h_nested(struct gx_rpc_ctx *ctx, const void *args, size_t len, void *user)
{
    struct gx_comm *comm = gx_rpc_comm(ctx);
    int next = (me + 1) % nranks;
    void *res = NULL;
    size_t n = 0;
    int rc = gx_rpc_call(comm, next, H_WHO, NULL, 0, &res, &n, NULL);
    if (rc != GX_OK)
        return rc;
    int32_t v[3];
    memcpy(v, res, 8);
    v[2] = me;
    gx_rpc_free(res);
    return gx_rpc_reply(ctx, v, sizeof(v));
}

static int h_forever(struct gx_rpc_ctx *ctx, const void *args, size_t len, void *user)
{
    for (;;)
        pause();
    return GX_OK;
}

static int h_slow(struct gx_rpc_ctx *ctx, const void *args, size_t len, void *user)
{
    int32_t ms;
    memcpy(&ms, args, 4);
    usleep((useconds_t)ms * 1000);
    return gx_rpc_reply(ctx, &ms, 4);
}

static int h_die(struct gx_rpc_ctx *ctx, const void *args, size_t len, void *user)
{
    fflush(stdout);
    raise(SIGKILL);
    return GX_OK;
}

static int h_flag(struct gx_rpc_ctx *ctx, const void *args, size_t len, void *user)
{
    atomic_fetch_add(&flag_calls, 1);
    return gx_rpc_reply(ctx, args, len);
}

static void register_all(struct gx_comm *comm)
{
    CHECK(gx_rpc_register(comm, H_ECHO, h_echo, NULL) == GX_OK, "register");
    CHECK(gx_rpc_register(comm, H_WHO, h_who, NULL) == GX_OK, "register");
    CHECK(gx_rpc_register(comm, H_FAIL, h_fail, NULL) == GX_OK, "register");
    CHECK(gx_rpc_register(comm, H_BIG, h_big, NULL) == GX_OK, "register");
    CHECK(gx_rpc_register(comm, H_NESTED, h_nested, NULL) == GX_OK, "register");
    CHECK(gx_rpc_register(comm, H_FOREVER, h_forever, NULL) == GX_OK, "register");
    CHECK(gx_rpc_register(comm, H_SLOW, h_slow, NULL) == GX_OK, "register");
    CHECK(gx_rpc_register(comm, H_DIE, h_die, NULL) == GX_OK, "register");
    CHECK(gx_rpc_register(comm, H_FLAG, h_flag, NULL) == GX_OK, "register");
}

/* ---- basic ------------------------------------------------------------------ */

static void sizes(struct gx_comm *comm, int t)
{
    static const size_t sz[] = { 0, 1, 100, 16384 - 40, 16384 - 39, 16384, 100000, 4u << 20 };
    for (size_t k = 0; k < sizeof(sz) / sizeof(sz[0]); k++) {
        size_t n = sz[k];
        uint8_t *a = malloc(n + 1);
        for (size_t i = 0; i < n; i++)
            a[i] = pat(i, (int)k);
        void *res = NULL;
        size_t rn = 99;
        CHECK(gx_rpc_call(comm, t, H_ECHO, a, n, &res, &rn, NULL) == GX_OK, "echo of %zu B to "
              "rank %d", n, t);
        CHECK(rn == n && (n == 0 || memcmp(res, a, n) == 0), "echo of %zu B from rank %d came "
              "back as %zu B or different", n, t, rn);
        gx_rpc_free(res);
        free(a);
    }
    uint64_t big = 3u << 20;
    void *res = NULL;
    size_t rn = 0;
    CHECK(gx_rpc_call(comm, t, H_BIG, &big, 8, &res, &rn, NULL) == GX_OK, "big result");
    CHECK(rn == big, "big result of %zu B, expected %llu", rn, (unsigned long long)big);
    for (size_t i = 0; i < rn; i++)
        CHECK(((uint8_t *)res)[i] == pat(i, t), "byte %zu of rank %d's big result", i, t);
    gx_rpc_free(res);
    uint64_t inplace[2] = { (3u << 20) + 5, 1 }; /* the same through gx_rpc_reply_buffer */
    CHECK(gx_rpc_call(comm, t, H_BIG, inplace, 16, &res, &rn, NULL) == GX_OK, "in-place result");
    CHECK(rn == inplace[0], "in-place result of %zu B, expected %llu", rn,
          (unsigned long long)inplace[0]);
    for (size_t i = 0; i < rn; i++)
        CHECK(((uint8_t *)res)[i] == pat(i, t), "byte %zu of rank %d's in-place result", i, t);
    gx_rpc_free(res);
}

static void semantics(struct gx_comm *comm, int t)
{
    void *res = NULL;
    size_t rn = 0;
    CHECK(gx_rpc_call(comm, t, H_WHO, NULL, 0, &res, &rn, NULL) == GX_OK, "who");
    int32_t v[3];
    memcpy(v, res, 8);
    CHECK(rn == 8 && v[0] == me && v[1] == t, "rank %d saw caller %d and itself as %d", t,
          v[0], v[1]);
    gx_rpc_free(res);
    int rc = gx_rpc_call(comm, t, H_FAIL, NULL, 0, &res, &rn, NULL);
    CHECK(rc == FAIL_STATUS, "failing handler returned %d, expected %d", rc, FAIL_STATUS);
    CHECK(strstr(gx_last_error(), "handler says no"), "the handler's text is missing: %s",
          gx_last_error());
    rc = gx_rpc_call(comm, t, 999, NULL, 0, &res, &rn, NULL);
    CHECK(rc == GX_EINVAL && strstr(gx_last_error(), "no handler 999"),
          "unknown handler returned %s: %s", gx_strerror(rc), gx_last_error());
    CHECK(gx_rpc_call(comm, t, H_NESTED, NULL, 0, &res, &rn, NULL) == GX_OK, "nested");
    memcpy(v, res, 12);
    int next = (t + 1) % nranks;
    CHECK(rn == 12 && v[0] == t && v[1] == next && v[2] == t, "nested call through rank %d: "
          "%d %d %d", t, v[0], v[1], v[2]);
    gx_rpc_free(res);
}

struct cb_state {
    atomic_int done;
    atomic_int bad;
};

static void on_done(struct gx_request *req, void *user)
{
    struct cb_state *s = user;
    void *res = NULL;
    size_t n = 0;
    if (gx_rpc_result(req, &res, &n) != GX_OK || n != 8)
        atomic_fetch_add(&s->bad, 1);
    gx_rpc_free(res);
    gx_request_free(req);
    atomic_fetch_add(&s->done, 1);
}

static void many(struct gx_comm *comm)
{
    enum { N = 1000 };
    struct gx_request **reqs = calloc(N, sizeof(*reqs));
    uint64_t *args = calloc(N, sizeof(*args));
    for (int i = 0; i < N; i++) {
        args[i] = (uint64_t)i * 1000003u + (uint64_t)me;
        CHECK(gx_rpc_call_async(comm, i % nranks, H_ECHO, &args[i], 8, NULL, &reqs[i]) == GX_OK,
              "async call %d", i);
    }
    for (int i = N - 1; i >= 0; i--) {
        CHECK(gx_wait(reqs[i], -1) == GX_OK, "wait for call %d", i);
        void *res = NULL;
        size_t n = 0;
        CHECK(gx_rpc_result(reqs[i], &res, &n) == GX_OK && n == 8 && memcmp(res, &args[i], 8) == 0,
              "result of call %d", i);
        gx_rpc_free(res);
        gx_request_free(reqs[i]);
    }
    struct cb_state s = { 0, 0 };
    struct gx_rpc_opts o = GX_RPC_OPTS_INIT;
    o.on_done = on_done;
    o.user = &s;
    for (int i = 0; i < N; i++) {
        struct gx_request *r;
        CHECK(gx_rpc_call_async(comm, (i + 1) % nranks, H_ECHO, &args[i], 8, &o, &r) == GX_OK,
              "async call %d with a callback", i);
    }
    double t0 = now_ms();
    while (atomic_load(&s.done) < N && now_ms() - t0 < 60000) {
        gx_rpc_progress(comm);
        usleep(100);
    }
    CHECK(atomic_load(&s.done) == N && atomic_load(&s.bad) == 0, "callbacks: %d of %d, %d bad",
          atomic_load(&s.done), N, atomic_load(&s.bad));
    free(reqs);
    free(args);
}

static void deadline(struct gx_comm *comm, int t)
{
    struct gx_rpc_opts o = GX_RPC_OPTS_INIT;
    o.timeout_ms = 300;
    void *res = NULL;
    size_t rn = 0;
    double t0 = now_ms();
    int rc = gx_rpc_call(comm, t, H_FOREVER, NULL, 0, &res, &rn, &o);
    double took = now_ms() - t0;
    CHECK(rc == GX_ETIMEOUT, "a handler that never returns: %s", gx_strerror(rc));
    CHECK(strstr(gx_last_error(), "deadline"), "the error does not say deadline: %s",
          gx_last_error());
    CHECK(took >= 290 && took < 300 + 5000, "the 300 ms deadline fired after %.0f ms", took);
    /* The target's other handler threads and the communicator carry on. */
    int32_t ms = 1;
    CHECK(gx_rpc_call(comm, t, H_SLOW, &ms, 4, &res, &rn, NULL) == GX_OK, "a call after it");
    gx_rpc_free(res);
    printf("rank %d: deadline to rank %d fired after %.0f ms\n", me, t, took);
}

static void basic(struct gx_comm *comm)
{
    register_all(comm);
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    for (int k = 0; k < nranks; k++) {
        int t = (me + k) % nranks;
        sizes(comm, t);
        semantics(comm, t);
    }
    many(comm);
    deadline(comm, (me + 1) % nranks);
    CHECK(gx_barrier(comm) == GX_OK, "barrier after the deadline");
    void *res;
    size_t rn;
    CHECK(gx_rpc_call(comm, 0, 999, NULL, 0, NULL, &rn, NULL) == GX_EINVAL, "NULL result");
    CHECK(gx_rpc_call(comm, nranks, H_ECHO, NULL, 0, &res, &rn, NULL) == GX_EINVAL &&
              strstr(gx_last_error(), "rank"), "rank out of range");
    CHECK(gx_rpc_call(comm, 0, H_ECHO, NULL, 5, &res, &rn, NULL) == GX_EINVAL, "NULL args");
    CHECK(gx_barrier(comm) == GX_OK, "final barrier");
    printf("PASS rank %d: remote calls\n", me);
}

/* ---- handlers on the caller's progress ------------------------------------- */

static void caller_mode(struct gx_comm *comm)
{
    CHECK(gx_rpc_register(comm, H_FLAG, h_flag, NULL) == GX_OK, "register");
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    if (me == 0) {
        for (int t = 1; t < nranks; t++) {
            int32_t v = 77 + t;
            void *res = NULL;
            size_t n = 0;
            CHECK(gx_rpc_call(comm, t, H_FLAG, &v, 4, &res, &n, NULL) == GX_OK && n == 4 &&
                      memcmp(res, &v, 4) == 0, "call to rank %d", t);
            gx_rpc_free(res);
        }
    } else {
        /* Nothing runs until this rank progresses itself. */
        usleep(200000);
        CHECK(atomic_load(&flag_calls) == 0, "a handler ran without the rank's progress");
        double t0 = now_ms();
        while (atomic_load(&flag_calls) == 0 && now_ms() - t0 < 30000)
            CHECK(gx_rpc_progress(comm) >= 0, "progress");
        CHECK(atomic_load(&flag_calls) == 1, "the call did not run in gx_rpc_progress");
    }
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    printf("PASS rank %d: handlers on the caller's progress\n", me);
}

/* ---- a target killed while calls are pending --------------------------------- */

static void kill_target(struct gx_comm *comm)
{
    register_all(comm);
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    if (me == 1) {
        for (;;)
            pause(); /* dies inside h_die */
    }
    if (me == 0) {
        /* Fewer slow calls than the target's handler threads (the test sets
         * GX_RPC_THREADS=4), so the call that kills it runs at once. */
        enum { N = 3 };
        struct gx_request *reqs[N];
        int32_t ms = 20000;
        for (int i = 0; i < N; i++)
            CHECK(gx_rpc_call_async(comm, 1, H_SLOW, &ms, 4, NULL, &reqs[i]) == GX_OK, "call");
        struct gx_request *die;
        CHECK(gx_rpc_call_async(comm, 1, H_DIE, NULL, 0, NULL, &die) == GX_OK, "call to die");
        double t0 = now_ms();
        for (int i = 0; i < N; i++) {
            int rc = gx_wait(reqs[i], -1);
            CHECK(GX_IS_PEER_ERROR(rc), "pending call %d to the dead rank: %s", i,
                  gx_strerror(rc));
            CHECK(strstr(gx_last_error(), "rank 1"), "call %d's error does not name rank 1: %s",
                  i, gx_last_error());
            gx_request_free(reqs[i]);
        }
        char first[512];
        snprintf(first, sizeof(first), "%s", gx_last_error());
        CHECK(now_ms() - t0 < 15000, "the calls failed only after %.0f ms", now_ms() - t0);
        int rc = gx_wait(die, -1);
        CHECK(rc != GX_OK, "the call that killed rank 1 returned GX_OK");
        gx_request_free(die);
        /* A call made after the death fails too, naming the rank. */
        void *res = NULL;
        size_t rn = 0;
        rc = gx_rpc_call(comm, 1, H_ECHO, &ms, 4, &res, &rn, NULL);
        CHECK(rc != GX_OK && strstr(gx_last_error(), "rank 1"),
              "a call after the death: %s (%s)", gx_strerror(rc), gx_last_error());
        printf("PASS rank 0: pending calls to the killed rank 1 failed: %s\n", first);
    }
    /* Calls between the survivors still work: each calls every survivor
     * (itself included) and stays until every survivor has called it. */
    for (int t = 0; t < nranks; t++) {
        if (t == 1)
            continue;
        int32_t v = 5;
        void *res = NULL;
        size_t n = 0;
        CHECK(gx_rpc_call(comm, t, H_FLAG, &v, 4, &res, &n, NULL) == GX_OK && n == 4,
              "call to the surviving rank %d", t);
        gx_rpc_free(res);
    }
    double t1 = now_ms();
    while (atomic_load(&flag_calls) < nranks - 1 && now_ms() - t1 < 60000)
        usleep(1000);
    CHECK(atomic_load(&flag_calls) == nranks - 1, "%d of the %d survivors called this rank",
          atomic_load(&flag_calls), nranks - 1);
    printf("PASS rank %d: calls to the survivors work\n", me);
    gx_comm_destroy(comm);
    exit(0);
}

/* ---- barrier -------------------------------------------------------------- */

static void barrier_connect(struct gx_comm *comm)
{
    CHECK(nranks >= 3, "barrier needs 3 ranks at least, not %d", nranks);
    register_all(comm);
    CHECK(gx_barrier(comm) == GX_OK, "barrier: every handler is in");
    if (me == 0) {
        struct gx_rpc_opts o = GX_RPC_OPTS_INIT;
        o.timeout_ms = 20000;
        void *res = NULL;
        size_t rn = 0;
        double t0 = now_ms();
        int rc = gx_rpc_call(comm, 1, H_NESTED, NULL, 0, &res, &rn, &o);
        CHECK(rc == GX_OK, "a call through rank 1 (waiting in gx_barrier) to rank 2: %s after "
              "%.0f ms", gx_strerror(rc), now_ms() - t0);
        int32_t v[3];
        CHECK(rn == 12, "nested result of %zu bytes", rn);
        memcpy(v, res, 12);
        CHECK(v[0] == 1 && v[1] == 2 && v[2] == 1, "nested call through rank 1: %d %d %d", v[0],
              v[1], v[2]);
        gx_rpc_free(res);
        printf("PASS rank 0: a call through rank 1, waiting in a barrier, in %.0f ms\n",
               now_ms() - t0);
    }
    CHECK(gx_barrier(comm) == GX_OK, "barrier after the call");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct gx_comm *comm;
    int rc = gx_comm_init_env(&comm);
    CHECK(rc == GX_OK, "init: %s", gx_strerror(rc));
    me = gx_comm_rank(comm);
    nranks = gx_comm_size(comm);
    const char *mode = argc > 1 ? argv[1] : "basic";
    if (strcmp(mode, "basic") == 0)
        basic(comm);
    else if (strcmp(mode, "caller") == 0)
        caller_mode(comm);
    else if (strcmp(mode, "kill") == 0)
        kill_target(comm);
    else if (strcmp(mode, "barrier") == 0)
        barrier_connect(comm);
    else
        CHECK(0, "unknown mode %s", mode);
    CHECK(gx_comm_finalize(comm) == GX_OK, "finalize");
    gx_comm_destroy(comm);
    return 0;
}
