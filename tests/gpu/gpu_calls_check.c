/*
 * gpu_calls_check.c - device buffers in the calls coll_check's matrix does
 * not cover, under gx-run (public API + tests/gpu/devmem.h):
 *
 *   gpu_calls_check p2p          a ring of isend/irecv on device buffers;
 *                                the receive is larger than the message: the
 *                                count is right and the device bytes past it
 *                                are untouched
 *   gpu_calls_check nonblocking  three outstanding iallreduce on device
 *                                buffers, completed with gx_test in reverse
 *   gpu_calls_check ddp          DDP with gradients in device memory: two
 *                                iterations, every gradient averaged in place
 *   gpu_calls_check gpu1         (fake, FAKECUDA_DEVICES=2 DEVMEM_DEVICE=1) the
 *                                process works on GPU 1: blocking, stream and
 *                                p2p calls never touch GPU 0's context
 *   gpu_calls_check async        (fake) gx_allreduce_stream returns before the
 *                                exchange: nothing has changed until the
 *                                stream is synchronized, then the sum is there
 *   gpu_calls_check asyncmixed   (fake) the same with a host sendbuf and a
 *                                device recvbuf, and with host buffers only:
 *                                still queued on the stream, not run at once
 *   gpu_calls_check streamorder  (fake) a request-form all-reduce called after a
 *                                stream one: rank 0 syncs its stream before
 *                                the second call, the others after it; the
 *                                second call must still start after the
 *                                first on every rank (no mismatch)
 *   gpu_calls_check dead [stream]  rank 2 is killed among all-reduces on
 *                                device buffers (blocking, or the stream form
 *                                with a stream sync after each): every other
 *                                rank fails naming rank 2, within 2 x
 *                                GX_TIMEOUT, and no stream sync hangs
 *   gpu_calls_check queryfail    (fake only) the driver's pointer query
 *                                fails: the call fails with GX_ESYSTEM naming
 *                                sendbuf on every rank; the comm still works
 *   gpu_calls_check nodriver     GX_CUDA_LIB names no library: the stream
 *                                form is GX_EUNSUPPORTED with the reason,
 *                                host collectives still work
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devmem.h"
#include "gx/gx.h"

static int me = -1;
#include "../lib/rank_check.h"

static struct devmem dm;

static void *dev_from(const void *host, size_t len)
{
    unsigned long long d = 0;
    CHECK(dm.alloc(&d, len) == 0 && dm.htod(d, host, len) == 0, "device buffer");
    return (void *)(uintptr_t)d;
}

static void to_host(void *host, const void *dev, size_t len)
{
    CHECK(dm.dtoh(host, (uintptr_t)dev, len) == 0, "copy back");
}

static void mode_p2p(struct gx_comm *comm, int n)
{
    enum { COUNT = 70000, EXTRA = 16 };
    int *s = malloc(sizeof(int) * COUNT), *r = malloc(sizeof(int) * (COUNT + EXTRA));
    for (int i = 0; i < COUNT; i++)
        s[i] = me * 1000003 + i;
    for (int i = 0; i < COUNT + EXTRA; i++)
        r[i] = -7;
    void *ds = dev_from(s, sizeof(int) * COUNT), *dr = dev_from(r, sizeof(int) * (COUNT + EXTRA));
    struct gx_request *rq[2];
    int to = (me + 1) % n, from = (me + n - 1) % n;
    CHECK(gx_irecv(comm, dr, COUNT + EXTRA, GX_INT32, from, 5, &rq[0]) == GX_OK, "irecv");
    CHECK(gx_isend(comm, ds, COUNT, GX_INT32, to, 5, &rq[1]) == GX_OK, "isend");
    CHECK(gx_wait(rq[1], -1) == GX_OK && gx_wait(rq[0], -1) == GX_OK, "wait");
    size_t got = 0;
    CHECK(gx_request_count(rq[0], &got) == GX_OK && got == COUNT, "count %zu", got);
    gx_request_free(rq[0]);
    gx_request_free(rq[1]);
    to_host(r, dr, sizeof(int) * (COUNT + EXTRA));
    for (int i = 0; i < COUNT; i++)
        CHECK(r[i] == from * 1000003 + i, "element %d: %d", i, r[i]);
    for (int i = COUNT; i < COUNT + EXTRA; i++)
        CHECK(r[i] == -7, "byte past the message written: element %d = %d", i, r[i]);
    /* Blocking forms, device to host and host to device. */
    if (n > 1) {
        if (me == 0)
            CHECK(gx_send(comm, ds, COUNT, GX_INT32, 1, 6) == GX_OK, "send");
        if (me == 1)
            CHECK(gx_recv(comm, r, COUNT, GX_INT32, 0, 6, NULL) == GX_OK && r[5] == 5, "recv");
    }
    dm.free_((uintptr_t)ds);
    dm.free_((uintptr_t)dr);
    free(s);
    free(r);
}

static void mode_nonblocking(struct gx_comm *comm, int n)
{
    enum { K = 3, COUNT = 100003 };
    float *h = malloc(sizeof(float) * COUNT);
    void *d[K];
    struct gx_request *rq[K];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < COUNT; i++)
            h[i] = (float)(me + k + i % 17);
        d[k] = dev_from(h, sizeof(float) * COUNT);
        CHECK(gx_iallreduce(comm, d[k], d[k], COUNT, GX_FLOAT32, GX_SUM, &rq[k]) == GX_OK, "i");
    }
    for (int k = K - 1; k >= 0; k--) {
        int done = 0;
        for (int spins = 0; !done; spins++) {
            CHECK(gx_test(rq[k], &done) == GX_OK, "test");
            CHECK(spins < 50000000, "request %d never completed", k);
        }
        gx_request_free(rq[k]);
        to_host(h, d[k], sizeof(float) * COUNT);
        for (int i = 0; i < COUNT; i++) {
            float want = (float)(n * (n - 1) / 2 + n * (k + i % 17));
            CHECK(h[i] == want, "op %d element %d: %g, expected %g", k, i, h[i], want);
        }
        dm.free_((uintptr_t)d[k]);
    }
    free(h);
}

static void mode_ddp(struct gx_comm *comm, int n)
{
    enum { P = 4 };
    static const size_t counts[P] = { 1000, 70000, 3, 300000 };
    struct gx_ddp_param params[P];
    void *grads[P];
    for (int i = 0; i < P; i++) {
        params[i] = (struct gx_ddp_param)GX_DDP_PARAM_INIT;
        params[i].count = counts[i];
        CHECK(gx_device_alloc(&grads[i], counts[i] * sizeof(float)) == GX_OK, "alloc");
    }
    struct gx_ddp_config cfg = GX_DDP_CONFIG_INIT;
    cfg.bucket_cap_bytes = 256 * 1024; /* several buckets */
    struct gx_ddp *ddp = NULL;
    CHECK(gx_ddp_create(comm, params, P, &cfg, &ddp) == GX_OK, "gx_ddp_create");
    float *h = malloc(sizeof(float) * 300000);
    for (int it = 0; it < 2; it++) {
        for (int i = P - 1; i >= 0; i--) { /* backward: last parameter first */
            for (size_t k = 0; k < counts[i]; k++)
                h[k] = (float)(2 * me + it + i + (int)(k % 5));
            CHECK(gx_device_copy(grads[i], h, counts[i] * sizeof(float)) == GX_OK, "upload");
            CHECK(gx_ddp_grad_ready(ddp, (size_t)i, grads[i]) == GX_OK, "grad_ready %d", i);
        }
        CHECK(gx_ddp_finish(ddp, -1) == GX_OK, "gx_ddp_finish");
        for (int i = 0; i < P; i++) {
            CHECK(gx_device_copy(h, grads[i], counts[i] * sizeof(float)) == GX_OK, "download");
            for (size_t k = 0; k < counts[i]; k++) {
                float want = (float)(n - 1) + (float)(it + i + (int)(k % 5));
                CHECK(h[k] == want, "iteration %d param %d element %zu: %g, expected %g", it, i,
                      k, h[k], want);
            }
        }
    }
    gx_ddp_destroy(ddp);
    for (int i = 0; i < P; i++)
        gx_device_free(grads[i]);
    free(h);
}

static void mode_gpu1(struct gx_comm *comm, int n)
{
    int (*used)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "fakecuda_ctx_used");
    void *h = dlopen(getenv("GX_CUDA_LIB"), RTLD_NOW | RTLD_NOLOAD);
    if (h)
        used = (int (*)(int))dlsym(h, "fakecuda_ctx_used");
    CHECK(used && !used(0), "GPU 0's context used before gx ran");
    float v[1000];
    for (int i = 0; i < 1000; i++)
        v[i] = (float)(me + i);
    void *d = dev_from(v, sizeof(v));
    CHECK(gx_allreduce(comm, d, d, 1000, GX_FLOAT32, GX_SUM) == GX_OK, "allreduce");
    CHECK(gx_allreduce_stream(comm, d, d, 1000, GX_FLOAT32, GX_SUM, NULL) == GX_OK, "stream");
    CHECK(dm.stream_sync(NULL) == 0, "stream sync");
    void *e = NULL;
    CHECK(gx_device_alloc(&e, sizeof(v)) == GX_OK, "gx_device_alloc in the current context");
    CHECK(gx_device_copy(e, d, sizeof(v)) == GX_OK && gx_device_copy(v, e, sizeof(v)) == GX_OK,
          "device to device");
    for (int i = 0; i < 1000; i++) {
        float want = (float)(n * (n * (n - 1) / 2 + n * i));
        CHECK(v[i] == want, "element %d: %g, expected %g", i, v[i], want);
    }
    gx_device_free(e);
    dm.free_((uintptr_t)d);
    mode_p2p(comm, n);
    CHECK(!used(0), "gx created or used a context on GPU 0 in a process working on GPU 1");
}

static void mode_async(struct gx_comm *comm, int n)
{
    enum { COUNT = 5000 };
    float *v = malloc(sizeof(float) * COUNT);
    for (int i = 0; i < COUNT; i++)
        v[i] = (float)(me + i);
    void *d = dev_from(v, sizeof(float) * COUNT);
    void *s = NULL;
    CHECK(dm.stream_create(&s, 1) == 0, "stream");
    CHECK(gx_allreduce_stream(comm, d, d, COUNT, GX_FLOAT32, GX_SUM, s) == GX_OK, "queue");
    CHECK(gx_allreduce_stream(comm, d, d, COUNT, GX_FLOAT32, GX_SUM, s) == GX_OK, "queue 2");
    float now[4];
    CHECK(dm.peek((uintptr_t)d, now, sizeof(now)) == 0 && now[1] == (float)(me + 1),
          "the call waited for the exchange: element 1 is %g already", now[1]);
    CHECK(dm.stream_sync(s) == 0, "sync");
    to_host(v, d, sizeof(float) * COUNT);
    for (int i = 0; i < COUNT; i++) {
        float want = (float)n * (float)(n * (n - 1) / 2 + n * i);
        CHECK(v[i] == want, "element %d: %g, expected %g (two sums in stream order)", i, v[i],
              want);
    }
    dm.free_((uintptr_t)d);
    free(v);
}

static void mode_asyncmixed(struct gx_comm *comm, int n)
{
    enum { COUNT = 3000 };
    float *hs = malloc(sizeof(float) * COUNT), *hr = malloc(sizeof(float) * COUNT);
    for (int i = 0; i < COUNT; i++) {
        hs[i] = (float)(me + i);
        hr[i] = -1;
    }
    void *dr = dev_from(hr, sizeof(float) * COUNT);
    void *s = NULL;
    CHECK(dm.stream_create(&s, 1) == 0, "stream");
    CHECK(gx_allreduce_stream(comm, hs, dr, COUNT, GX_FLOAT32, GX_SUM, s) == GX_OK, "mixed");
    CHECK(gx_allreduce_stream(comm, hs, hr, COUNT, GX_FLOAT32, GX_SUM, s) == GX_OK, "host");
    float now[2];
    CHECK(dm.peek((uintptr_t)dr, now, sizeof(now)) == 0 && now[1] == -1 && hr[1] == -1,
          "a stream call ran before the stream got there (device %g, host %g)", now[1], hr[1]);
    CHECK(dm.stream_sync(s) == 0, "sync");
    float *got = malloc(sizeof(float) * COUNT);
    to_host(got, dr, sizeof(float) * COUNT);
    for (int i = 0; i < COUNT; i++) {
        float want = (float)(n * (n - 1) / 2 + n * i);
        CHECK(got[i] == want && hr[i] == want, "element %d: device %g, host %g, expected %g", i,
              got[i], hr[i], want);
    }
    dm.free_((uintptr_t)dr);
    free(hs);
    free(hr);
    free(got);
}

static void mode_streamorder(struct gx_comm *comm, int n)
{
    enum { COUNT = 4000 };
    float *v = malloc(sizeof(float) * COUNT), *h = malloc(sizeof(float) * COUNT);
    for (int i = 0; i < COUNT; i++) {
        v[i] = (float)(me + i);
        h[i] = (float)(2 * me + i);
    }
    void *d = dev_from(v, sizeof(float) * COUNT);
    void *s = NULL;
    CHECK(dm.stream_create(&s, 1) == 0, "stream");
    CHECK(gx_allreduce_stream(comm, d, d, COUNT, GX_FLOAT32, GX_SUM, s) == GX_OK, "queue");
    if (me == 0) /* its stream call may start at once, the others' only later */
        CHECK(dm.stream_sync(s) == 0, "sync");
    struct gx_request *req = NULL;
    CHECK(gx_iallreduce(comm, h, h, COUNT, GX_FLOAT32, GX_SUM, &req) == GX_OK,
          "iallreduce");
    if (me != 0)
        CHECK(dm.stream_sync(s) == 0, "sync");
    int rc = gx_wait(req, -1);
    CHECK(rc == GX_OK, "the request-form all-reduce after a stream one failed: %s",
          gx_last_error());
    gx_request_free(req);
    to_host(v, d, sizeof(float) * COUNT);
    for (int i = 0; i < COUNT; i++) {
        float want1 = (float)(n * (n - 1) / 2 + n * i), want2 = (float)(n * (n - 1) + n * i);
        CHECK(v[i] == want1 && h[i] == want2, "element %d: stream call %g (want %g), request "
              "call %g (want %g)", i, v[i], want1, h[i], want2);
    }
    dm.free_((uintptr_t)d);
    free(v);
    free(h);
}

static void mode_dead(struct gx_comm *comm, bool stream)
{
    size_t count = 1 << 18;
    float *h = calloc(count, sizeof(float));
    void *d = dev_from(h, count * sizeof(float));
    void *s = NULL;
    CHECK(dm.stream_create(&s, 1) == 0, "stream");
    const char *to = getenv("GX_TIMEOUT");
    double timeout = to ? atof(to) : 30.0; /* GX_TIMEOUT is in seconds */
    for (int it = 0;; it++) {
        if (me == 2 && it == 5)
            raise(SIGKILL);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc;
        if (stream) {
            rc = gx_allreduce_stream(comm, d, d, count, GX_FLOAT32, GX_SUM, s);
            CHECK(dm.stream_sync(s) == 0, "stream sync");
            if (rc == GX_OK) /* a failed exchange is the comm's async error */
                rc = gx_comm_get_async_error(comm, NULL, 0);
        } else {
            rc = gx_allreduce(comm, d, d, count, GX_FLOAT32, GX_SUM);
        }
        if (rc == GX_OK) {
            CHECK(it < 1000, "all-reduces keep succeeding with rank 2 dead");
            continue;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        char async[512];
        int as = gx_comm_get_async_error(comm, async, sizeof(async));
        CHECK(as != GX_OK && strstr(async, "rank 2"), "the failure does not name rank 2: %s",
              async);
        CHECK(took < 2 * timeout, "took %.1f s (GX_TIMEOUT %.1f s)", took, timeout);
        rc = gx_allreduce_stream(comm, d, d, count, GX_FLOAT32, GX_SUM, s);
        CHECK(rc != GX_OK, "a call after the failure succeeded");
        printf("DEADCHECK ok rank %d after %.2f s: %s\n", me, took, async);
        fflush(stdout);
        exit(0);
    }
}

static void mode_queryfail(struct gx_comm *comm, int n)
{
    float v[4] = { 1, 2, 3, 4 };
    void *d = dev_from(v, sizeof(v));
    setenv("FAKECUDA_FAIL", "cuPointerGetAttributes", 1);
    int rc = gx_allreduce(comm, d, d, 4, GX_FLOAT32, GX_SUM);
    CHECK(rc == GX_ESYSTEM && strstr(gx_last_error(), "sendbuf"), "rc %d", rc);
    unsetenv("FAKECUDA_FAIL");
    CHECK(gx_allreduce(comm, d, d, 4, GX_FLOAT32, GX_SUM) == GX_OK, "the comm still works");
    to_host(v, d, sizeof(v));
    CHECK(v[3] == 4.0f * n, "%g", v[3]);
    dm.free_((uintptr_t)d);
}

static void mode_nodriver(struct gx_comm *comm, int n)
{
    float v[4] = { 1, 2, 3, 4 };
    int rc = gx_allreduce_stream(comm, v, v, 4, GX_FLOAT32, GX_SUM, NULL);
    CHECK(rc == GX_EUNSUPPORTED && strstr(gx_last_error(), "no libcuda"), "rc %d", rc);
    CHECK(gx_allreduce(comm, v, v, 4, GX_FLOAT32, GX_SUM) == GX_OK && v[0] == n, "host");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "nodriver") != 0 && devmem_open(&dm) != 0) {
        fprintf(stderr, "gpu_calls_check: %s\n", dm.why);
        return 77;
    }
    if ((!strcmp(mode, "queryfail") || !strcmp(mode, "gpu1") || !strncmp(mode, "async", 5) || !strcmp(mode, "streamorder")) &&
        !dm.peek) {
        fprintf(stderr, "gpu_calls_check queryfail: needs the fake libcuda\n");
        return 77;
    }
    struct gx_comm *comm = NULL;
    CHECK(gx_comm_init_env(&comm) == GX_OK, "init");
    me = gx_comm_rank(comm);
    int n = gx_comm_size(comm);
    if (!strcmp(mode, "p2p"))
        mode_p2p(comm, n);
    else if (!strcmp(mode, "nonblocking"))
        mode_nonblocking(comm, n);
    else if (!strcmp(mode, "ddp"))
        mode_ddp(comm, n);
    else if (!strcmp(mode, "queryfail"))
        mode_queryfail(comm, n);
    else if (!strcmp(mode, "gpu1"))
        mode_gpu1(comm, n);
    else if (!strcmp(mode, "async"))
        mode_async(comm, n);
    else if (!strcmp(mode, "asyncmixed"))
        mode_asyncmixed(comm, n);
    else if (!strcmp(mode, "streamorder"))
        mode_streamorder(comm, n);
    else if (!strcmp(mode, "dead"))
        mode_dead(comm, argc > 2 && !strcmp(argv[2], "stream"));
    else if (!strcmp(mode, "nodriver"))
        mode_nodriver(comm, n);
    else
        CHECK(0, "usage: gpu_calls_check p2p|nonblocking|ddp|gpu1|async|asyncmixed|streamorder|dead [stream]|queryfail|nodriver");
    CHECK(gx_comm_finalize(comm) == GX_OK, "finalize");
    gx_comm_destroy(comm);
    printf("PASS %s on %d ranks\n", mode, n);
    return 0;
}
