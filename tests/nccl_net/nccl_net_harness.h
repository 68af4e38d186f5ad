/*
 * nccl_net_harness.h - what the NCCL net plugin tests share: the logger NCCL
 * would hand the plugin (counting warnings), CHECK, a clock, the version-
 * independent connect/isend/irecv calls over `tables` (the plugin's ncclNet
 * table of `version`, v8..v11), and connect_pair(): listen on device 0,
 * connect from a service thread as NCCL's proxy does, accept until both
 * ends are up. Included once by each test program (static definitions).
 * Needs <pthread.h>, <stdarg.h>, <stdatomic.h>, <stdio.h>, <stdlib.h>,
 * <time.h>, nccl_net_abi.h and DEADLINE_S.
 */
#ifndef GX_TESTS_NCCL_NET_HARNESS_H
#define GX_TESTS_NCCL_NET_HARNESS_H

static atomic_int warnings;
static int version;
static void *tables;

static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[nccl-log %d] ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (level == GXN_LOG_WARN)
        atomic_fetch_add(&warnings, 1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL (v%d) %s:%d: ", version, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* The calls the test needs, over whichever version is under test. */
static gxn_result_t p_connect(int dev, void *h, void **sc)
{
    struct gxn_dev_handle *dc = NULL;
    switch (version) {
    case 11: return ((gxn_net_v11_t *)tables)->connect(&version, dev, h, sc, &dc);
    case 10: return ((gxn_net_v10_t *)tables)->connect(dev, NULL, h, sc, &dc);
    case 9: return ((gxn_net_v9_t *)tables)->connect(dev, h, sc, &dc);
    default: return ((gxn_net_v8_t *)tables)->connect(dev, h, sc, &dc);
    }
}

static gxn_result_t p_isend(void *sc, void *data, size_t size, int tag, void *mh, void **req)
{
    switch (version) {
    case 11: return ((gxn_net_v11_t *)tables)->isend(sc, data, size, tag, mh, NULL, req);
    case 10: return ((gxn_net_v10_t *)tables)->isend(sc, data, size, tag, mh, NULL, req);
    case 9: return ((gxn_net_v9_t *)tables)->isend(sc, data, size, tag, mh, req);
    default: return ((gxn_net_v8_t *)tables)->isend(sc, data, (int)size, tag, mh, req);
    }
}

static gxn_result_t p_irecv(void *rc, void *data, size_t size, int tag, void *mh, void **req)
{
    int t = tag;
    void *d = data, *m = mh;
    if (version == 8) {
        int s = (int)size;
        return ((gxn_net_v8_t *)tables)->irecv(rc, 1, &d, &s, &t, &m, req);
    }
    size_t s = size;
    if (version == 9)
        return ((gxn_net_v9_t *)tables)->irecv(rc, 1, &d, &s, &t, &m, req);
    /* v10 and v11 share the data-path layout up to here */
    return ((gxn_net_v10_t *)tables)->irecv(rc, 1, &d, &s, &t, &m, NULL, req);
}

/* Members at the same place in every version (nccl_net_plugin_test.c
 * static-asserts the tables' layouts). */
#define T8 ((gxn_net_v8_t *)tables)

struct conn_arg {
    unsigned char handle[GXN_HANDLE_MAXSIZE];
    void *send_comm;
};

static void *service_thread(void *p)
{
    struct conn_arg *a = p;
    double end = now_s() + DEADLINE_S;
    while (!a->send_comm) {
        CHECK(p_connect(0, a->handle, &a->send_comm) == GXN_NCCL_OK, "connect failed");
        CHECK(now_s() < end, "connect did not finish in %d s", DEADLINE_S);
    }
    return NULL;
}

/* Listens on device 0 (ctx: v11's init context), connects from a service
 * thread and accepts here; returns the send comm, *lc and *rc the listen and
 * receive comms. Both ends within DEADLINE_S or the test fails. */
static void *connect_pair(void *ctx, void **lc, void **rc)
{
    struct conn_arg ca = { .send_comm = NULL };
    struct gxn_dev_handle *dc = NULL;
    *lc = *rc = NULL;
    if (version == 11)
        CHECK(((gxn_net_v11_t *)tables)->listen(ctx, 0, ca.handle, lc) == GXN_NCCL_OK, "listen");
    else
        CHECK(T8->listen(0, ca.handle, lc) == GXN_NCCL_OK, "listen");
    pthread_t svc;
    pthread_create(&svc, NULL, service_thread, &ca);
    double end = now_s() + DEADLINE_S;
    while (!*rc) {
        CHECK(T8->accept(*lc, rc, &dc) == GXN_NCCL_OK, "accept failed");
        CHECK(now_s() < end, "accept did not finish");
    }
    pthread_join(svc, NULL);
    return ca.send_comm;
}

#endif
