/*
 * gpu_mem_test.c - gpudirect/ against the fake libcuda (GX_CUDA_LIB).
 *
 *   gpu_mem_test nolib      GX_CUDA_LIB names a missing file: the driver is
 *                           "not available" and the reason names the path
 *   gpu_mem_test query      device vs host vs pinned, the range cache (hits,
 *                           a freed and reused address seen as new), the
 *                           query from a thread with no current context
 *   gpu_mem_test fault      a CPU load of a device pointer faults (the fake's
 *                           guard that makes every staging test meaningful)
 *   gpu_mem_test error      a failing driver query is an error, not "host"
 *   gpu_mem_test copy       synchronous copies, the pinned pool's reuse
 *   gpu_mem_test stream     copies and a host function queued on a stream
 *                           land / run only when it is synchronized, in order
 *   gpu_mem_test stagefence the stand-ins of a stream-form stage (send and
 *                           receive) go back to the pool fenced: no other call
 *                           gets them before the stream is past the call
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../unit/check.h"
#include "collectives/comm/stage.h"
#include "common/log.h"
#include "gpudirect/gpudirect.h"

static void *fake_sym(const char *name)
{
    (void)gx_gpu_driver_available(NULL, 0); /* gx opens the library first */
    void *h = dlopen(getenv("GX_CUDA_LIB"), RTLD_NOW | RTLD_NOLOAD);
    return h ? dlsym(h, name) : NULL;
}

static int t_nolib(void)
{
    char why[256];
    CHECK(!gx_gpu_driver_available(why, sizeof(why)), "driver from a missing library");
    CHECK(strstr(why, "no libcuda") && strstr(why, "/nonexistent/libcuda.so.1"), "%s", why);
    CHECK(gx_gpu_mem_type(why) == GX_GPU_MEM_HOST, "host without a driver");
    void *d = NULL;
    CHECK(gx_gpu_alloc(&d, 64) == GX_EUNSUPPORTED, "alloc without a driver");
    CHECK_DONE("nolib");
}

static void *query_thread(void *arg)
{
    struct gx_gpu_ptr g;
    int rc = gx_gpu_ptr_query(arg, &g);
    return (void *)(intptr_t)(rc == GX_OK && g.type == GX_GPU_MEM_CUDA);
}

static int t_query(void)
{
    char why[256];
    CHECK(gx_gpu_driver_available(why, sizeof(why)), "%s", why);
    if (fake_sym("fakecuda_peek")) /* the fake's figures; a real driver has its own */
        CHECK(gx_gpu_driver_version() == 12040 && gx_gpu_device_count() == 1, "%d %d",
              gx_gpu_driver_version(), gx_gpu_device_count());
    else
        CHECK(gx_gpu_driver_version() >= 11030 && gx_gpu_device_count() >= 1, "%d %d",
              gx_gpu_driver_version(), gx_gpu_device_count());
    char *d = NULL;
    CHECK(gx_gpu_alloc((void **)&d, 1 << 20) == GX_OK, "alloc");
    struct gx_gpu_ptr g;
    unsigned long long h0, m0, h1, m1;
    gx_gpu_cache_stats(&h0, &m0);
    CHECK(gx_gpu_ptr_query(d + 1000, &g) == GX_OK && g.type == GX_GPU_MEM_CUDA, "device");
    CHECK(g.base == (uintptr_t)d && g.size == 1 << 20 && g.device == 0 && g.ctx, "range");
    CHECK(gx_gpu_ptr_query(d + 5000, &g) == GX_OK && g.type == GX_GPU_MEM_CUDA, "again");
    gx_gpu_cache_stats(&h1, &m1);
    CHECK(h1 == h0 + 1 && m1 == m0 + 1, "one miss then one hit: %llu/%llu", h1 - h0, m1 - m0);
    pthread_t t;
    void *ok = NULL;
    pthread_create(&t, NULL, query_thread, d);
    pthread_join(t, &ok);
    CHECK(ok, "query from a thread with no current context");
    char host[64];
    CHECK(gx_gpu_mem_type(host) == GX_GPU_MEM_HOST, "stack memory");
    size_t cap = 0;
    void *pinned = gx_gpu_pinned_get(100, NULL, &cap);
    CHECK(pinned && gx_gpu_mem_type(pinned) == GX_GPU_MEM_HOST, "pinned host memory");
    gx_gpu_pinned_put(pinned, cap);
    /* Free and allocate again (the address is often the same): the old
     * cache entry must not answer for the new allocation. */
    unsigned long long id = g.id;
    CHECK(gx_gpu_free(d) == GX_OK, "free");
    char *e = NULL;
    CHECK(gx_gpu_alloc((void **)&e, 1 << 19) == GX_OK, "alloc 2");
    CHECK(gx_gpu_ptr_query(e, &g) == GX_OK && g.id != id && g.size == 1 << 19, "new id");
    CHECK(gx_gpu_free(e) == GX_OK, "free 2");
    CHECK_DONE("query");
}

static int t_fault(void)
{
    char *d = NULL;
    CHECK(gx_gpu_alloc((void **)&d, 4096) == GX_OK, "alloc");
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        volatile char c = *(volatile char *)d;
        (void)c;
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "a CPU load of device memory must "
          "fault (status 0x%x)", st);
    CHECK_DONE("fault");
}

static int t_error(void)
{
    char *d = NULL;
    CHECK(gx_gpu_alloc((void **)&d, 4096) == GX_OK, "alloc");
    setenv("FAKECUDA_FAIL", "cuPointerGetAttributes", 1);
    struct gx_gpu_ptr g;
    char host[8];
    CHECK(gx_gpu_ptr_query(host, &g) == GX_ESYSTEM, "a failing query is an error");
    CHECK(strstr(gx_last_error(), "cuPointerGetAttributes"), "%s", gx_last_error());
    unsetenv("FAKECUDA_FAIL");
    CHECK(gx_gpu_ptr_query(host, &g) == GX_OK && g.type == GX_GPU_MEM_HOST, "recovers");
    CHECK_DONE("error");
}

static int t_copy(void)
{
    enum { N = 300000 };
    char *d = NULL;
    CHECK(gx_gpu_alloc((void **)&d, N) == GX_OK, "alloc");
    char *a = malloc(N), *b = malloc(N);
    for (int i = 0; i < N; i++)
        a[i] = (char)(i * 7);
    CHECK(gx_gpu_copy_htod(d, a, N) == GX_OK, "htod");
    CHECK(gx_gpu_copy_dtoh(b, d, N) == GX_OK && memcmp(a, b, N) == 0, "round trip");
    CHECK(gx_gpu_copy_htod(a, b, 10) == GX_EINVAL, "htod to host memory is refused");
    void (*stats)(unsigned long long *, unsigned long long *, unsigned long long *) =
        (void (*)(unsigned long long *, unsigned long long *, unsigned long long *))fake_sym(
            "fakecuda_stats");
    unsigned long long q0 = 0, c0 = 0, h0 = 0, h1 = 0;
    size_t cap = 0, cap2 = 0;
    void *p = gx_gpu_pinned_get(100000, NULL, &cap);
    CHECK(p && cap == 128 * 1024, "cap %zu", cap);
    memset(p, 1, cap); /* it is host memory */
    gx_gpu_pinned_put(p, cap);
    if (stats)
        stats(&q0, &c0, &h0);
    void *q = gx_gpu_pinned_get(70000, NULL, &cap2);
    CHECK(q == p && cap2 == cap, "pool reuse");
    memset(q, 2, cap2); /* still mapped: the pool kept it */
    if (stats) {
        stats(&q0, &c0, &h1);
        CHECK(h1 == h0, "a reused block allocates nothing (%llu new)", h1 - h0);
    }
    gx_gpu_pinned_put(q, cap2);
    free(a);
    free(b);
    gx_gpu_free(d);
    CHECK_DONE("copy");
}

struct host_fn_probe {
    const char *host;
    char seen;
    int ran;
};

static void host_fn(void *arg)
{
    struct host_fn_probe *p = arg;
    p->seen = p->host[0]; /* the copy queued before it has landed */
    p->ran = 1;
}

static int t_stream(void)
{
    int (*peek)(unsigned long long, void *, size_t) =
        (int (*)(unsigned long long, void *, size_t))fake_sym("fakecuda_peek");
    CHECK(peek, "fakecuda_peek");
    if (!peek)
        CHECK_DONE("stream");
    enum { N = 4096 };
    char *d = NULL;
    CHECK(gx_gpu_alloc((void **)&d, N) == GX_OK, "alloc");
    size_t cap;
    char *h = gx_gpu_pinned_get(N, d, &cap);
    memset(h, 0x42, N);
    void *fence = NULL;
    CHECK(gx_gpu_stream_copy_htod(NULL, d, h, N, &fence) == GX_OK && fence, "queue htod");
    char v[N];
    peek((uintptr_t)d, v, N);
    CHECK((unsigned char)v[0] == 0xCD && (unsigned char)v[N - 1] == 0xCD,
          "poison before the stream is synchronized: %x", (unsigned char)v[0]);
    /* Back to host, then a host function that must see it. */
    char *h2 = malloc(N);
    memset(h2, 0, N);
    struct host_fn_probe probe = { h2, 0, 0 };
    CHECK(gx_gpu_stream_copy_dtoh(NULL, h2, d, N) == GX_OK, "queue dtoh");
    CHECK(gx_gpu_stream_host_fn(NULL, d, host_fn, &probe) == GX_OK, "queue host fn");
    CHECK(!probe.ran, "the host function ran before the stream reached it");
    CHECK(gx_gpu_stream_wait(NULL, d) == GX_OK, "stream wait");
    peek((uintptr_t)d, v, N);
    CHECK(v[0] == 0x42 && v[N - 1] == 0x42, "landed after the stream: %x", v[0]);
    CHECK(probe.ran && probe.seen == 0x42, "host function in stream order (ran %d, saw %x)",
          probe.ran, probe.seen);
    gx_gpu_pinned_put_after(h, cap, fence);
    free(h2);
    gx_gpu_free(d);
    CHECK_DONE("stream");
}

static int t_stagefence(void)
{
    enum { N = 100000 };
    char *ds = NULL, *dr = NULL;
    CHECK(gx_gpu_alloc((void **)&ds, N) == GX_OK && gx_gpu_alloc((void **)&dr, N) == GX_OK,
          "alloc");
    const void *send = ds;
    void *recv = dr;
    struct gx_stage *st = NULL;
    CHECK(gx_stage_begin("test", &send, N, &recv, N, true, NULL, &st) == GX_OK && st, "begin");
    CHECK(send != ds && recv != dr, "stand-ins");
    CHECK(gx_stage_stream_out(st) == GX_OK, "stream out");
    gx_stage_free(st, true);
    size_t c1, c2;
    void *p1 = gx_gpu_pinned_get(N, ds, &c1), *p2 = gx_gpu_pinned_get(N, ds, &c2);
    CHECK(p1 != send && p1 != recv && p2 != send && p2 != recv,
          "a stand-in the stream still uses was handed out again (send %p recv %p, got %p %p)",
          send, recv, p1, p2);
    gx_gpu_pinned_put(p1, c1);
    gx_gpu_pinned_put(p2, c2);
    CHECK(gx_gpu_stream_wait(NULL, ds) == GX_OK, "stream wait");
    void *p3 = gx_gpu_pinned_get(N, ds, &c1);
    CHECK(p3, "get");
    gx_gpu_pinned_put(p3, c1);
    gx_gpu_free(ds);
    gx_gpu_free(dr);
    CHECK_DONE("stagefence");
}

int main(int argc, char **argv)
{
    const char *t = argc > 1 ? argv[1] : "";
    if (!strcmp(t, "nolib"))
        return t_nolib();
    if (!strcmp(t, "query"))
        return t_query();
    if (!strcmp(t, "fault"))
        return t_fault();
    if (!strcmp(t, "error"))
        return t_error();
    if (!strcmp(t, "copy"))
        return t_copy();
    if (!strcmp(t, "stream"))
        return t_stream();
    if (!strcmp(t, "stagefence"))
        return t_stagefence();
    fprintf(stderr, "usage: gpu_mem_test nolib|query|fault|error|copy|stream|stagefence\n");
    return 2;
}
