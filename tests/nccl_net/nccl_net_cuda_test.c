/*
 * nccl_net_cuda_test.c - CUDA buffers through libnccl-net-gx.so, driven as
 * NCCL drives it, with no GPU: the fake libcuda (GX_CUDA_LIB, its "device
 * memory" faults on any CPU touch) and softverbs as the HCA.
 *
 *   expect=dmabuf   getProperties says NCCL_PTR_HOST|CUDA|DMABUF; regMr
 *                   (NCCL_PTR_CUDA) and regMrDmaBuf register device memory;
 *                   device-to-device messages of 0 B..1 MiB arrive intact
 *                   (read back with cuMemcpyDtoH); iflush leaves nothing to
 *                   wait for; a host pointer called CUDA, a range past its
 *                   allocation, and an unknown type are refused by name.
 *   expect=peermem  (the test makes a fake /sys/module/nvidia_peermem):
 *                   NCCL_PTR_HOST|CUDA without DMABUF; regMrDmaBuf refused.
 *   expect=host     getProperties says NCCL_PTR_HOST (tcp, or verbs with no
 *                   GPUDirect RDMA); regMr and regMrDmaBuf of CUDA memory
 *                   fail with a warning, host registration still works.
 *
 * Usage: nccl_net_cuda_test <libnccl-net-gx.so> expect=dmabuf|peermem|host [8|11]
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plugins/nccl-net/nccl_net_abi.h"
#include "tests/gpu/devmem.h"

#define DEADLINE_S 30
#define LEN (1024 * 1024)

#include "tests/nccl_net/nccl_net_harness.h"

static int ptr_support_of_dev0(void)
{
    if (version == 8) {
        struct gxn_props_v8 pr;
        CHECK(T8->get_properties(0, &pr) == GXN_NCCL_OK, "getProperties");
        return pr.ptr_support;
    }
    struct gxn_props_v11 pr;
    CHECK(((gxn_net_v11_t *)tables)->get_properties(0, &pr) == GXN_NCCL_OK, "getProperties");
    CHECK(pr.base.force_flush == 0, "forceFlush: the provider flushes GPU receives itself");
    return pr.base.ptr_support;
}

static unsigned char pat(int msg, size_t i)
{
    return (unsigned char)(msg * 31 + i * 7 + (i >> 9));
}

/* One message S[soff..] -> R[roff..] of `len` bytes, checked on R. */
static void one_message(struct devmem *dm, void *sc, void *rc, unsigned long long S,
                        unsigned long long R, void *smh, void *rmh, size_t soff, size_t roff,
                        size_t len, int msg)
{
    unsigned char *h = malloc(LEN);
    for (size_t i = 0; i < LEN; i++)
        h[i] = pat(msg, i);
    CHECK(dm->htod(S, h, LEN) == 0, "fill send buffer");
    memset(h, 0xee, LEN);
    CHECK(dm->htod(R, h, LEN) == 0, "clear receive buffer");
    void *rreq = NULL, *sreq = NULL;
    CHECK(p_irecv(rc, (void *)(uintptr_t)(R + roff), len, msg, rmh, &rreq) == GXN_NCCL_OK && rreq,
          "irecv %d", msg);
    double end = now_s() + DEADLINE_S;
    int rdone = 0, sdone = 0, rsize = -1, ssize = -1;
    while (!sreq) {
        CHECK(p_isend(sc, (void *)(uintptr_t)(S + soff), len, msg, smh, &sreq) == GXN_NCCL_OK,
              "isend %d", msg);
        if (!sreq && !rdone)
            CHECK(T8->test(rreq, &rdone, &rsize) == GXN_NCCL_OK, "test recv %d", msg);
        CHECK(now_s() < end, "isend %d never started", msg);
    }
    while (!rdone || !sdone) {
        if (!sdone)
            CHECK(T8->test(sreq, &sdone, &ssize) == GXN_NCCL_OK, "test send %d", msg);
        if (!rdone)
            CHECK(T8->test(rreq, &rdone, &rsize) == GXN_NCCL_OK, "test recv %d", msg);
        CHECK(now_s() < end, "message %d (%zu bytes) did not complete", msg, len);
    }
    CHECK(rsize == (int)len, "message %d: received %d bytes, sent %zu", msg, rsize, len);
    void *freq = (void *)1, *data = (void *)(uintptr_t)(R + roff);
    int fsz = (int)len;
    CHECK(T8->iflush(rc, 1, &data, &fsz, &rmh, &freq) == GXN_NCCL_OK && !freq,
          "iflush: the provider flushed already");
    CHECK(dm->dtoh(h, R, LEN) == 0, "read back");
    for (size_t i = 0; i < LEN; i++) {
        unsigned char want = i >= roff && i < roff + len ? pat(msg, i - roff + soff) : 0xee;
        CHECK(h[i] == want, "message %d (%zu bytes, send offset %zu, recv offset %zu): byte %zu "
              "of the receive buffer is 0x%02x, expected 0x%02x", msg, len, soff, roff, i, h[i],
              want);
    }
    free(h);
    fprintf(stderr, "v%d: message %d: %zu bytes device -> device checked\n", version, msg, len);
}

static void fake_peermem(void)
{
    char dir[] = "/tmp/gx-plugs-peermem-XXXXXX";
    CHECK(mkdtemp(dir), "mkdtemp");
    char p[160];
    snprintf(p, sizeof(p), "%s/sys", dir);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/sys/module", dir);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/sys/module/nvidia_peermem", dir);
    CHECK(mkdir(p, 0700) == 0, "mkdir %s", p);
    setenv("GX_GDR_SYSFS_ROOT", dir, 1);
}

int main(int argc, char **argv)
{
    if (argc < 3 || strncmp(argv[2], "expect=", 7) != 0) {
        fprintf(stderr, "usage: %s <libnccl-net-gx.so> expect=dmabuf|peermem|host [8|11]\n",
                argv[0]);
        return 2;
    }
    const char *expect = argv[2] + 7;
    version = argc > 3 ? atoi(argv[3]) : 11;
    struct devmem dm;
    if (devmem_open(&dm) != 0) {
        fprintf(stderr, "SKIP: %s\n", dm.why);
        return 77;
    }
    if (strcmp(expect, "peermem") == 0)
        fake_peermem();
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECK(lib, "dlopen %s: %s", argv[1], dlerror());
    char sym[32];
    snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", version);
    tables = dlsym(lib, sym);
    CHECK(tables, "%s not exported", sym);
    void *ctx = NULL;
    if (version == 11)
        CHECK(((gxn_net_v11_t *)tables)->init(&ctx, 3, NULL, logger, NULL) == GXN_NCCL_OK, "init");
    else
        CHECK(T8->init(logger) == GXN_NCCL_OK, "init");

    int ptr = ptr_support_of_dev0();
    int want = strcmp(expect, "dmabuf") == 0    ? GXN_PTR_HOST | GXN_PTR_CUDA | GXN_PTR_DMABUF
               : strcmp(expect, "peermem") == 0 ? GXN_PTR_HOST | GXN_PTR_CUDA
                                                : GXN_PTR_HOST;
    CHECK(ptr == want, "device 0: ptrSupport 0x%x, expected 0x%x (%s)", ptr, want, expect);

    void *lc, *rc;
    void *sc = connect_pair(ctx, &lc, &rc);

    unsigned long long S = 0, R = 0;
    CHECK(dm.alloc(&S, LEN) == 0 && dm.alloc(&R, LEN) == 0, "cuMemAlloc");
    void *smh = NULL, *rmh = NULL, *mh = NULL;
    int w0 = atomic_load(&warnings);
    if (strcmp(expect, "dmabuf") == 0) {
        CHECK(T8->reg_mr(sc, (void *)(uintptr_t)S, LEN, GXN_PTR_CUDA, &smh) == GXN_NCCL_OK && smh,
              "regMr of CUDA memory");
        /* NCCL's fd for regMrDmaBuf: any fd (the plugin re-exports the range) */
        int fd = dup(2);
        CHECK(T8->reg_mr_dmabuf(rc, (void *)(uintptr_t)R, LEN, GXN_PTR_CUDA, 0, fd, &rmh) ==
                  GXN_NCCL_OK && rmh, "regMrDmaBuf of CUDA memory");
        close(fd);
        CHECK(atomic_load(&warnings) == w0, "registrations warned");
        one_message(&dm, sc, rc, S, R, smh, rmh, 0, 0, LEN, 1);
        one_message(&dm, sc, rc, S, R, smh, rmh, 0, 0, 0, 2);
        one_message(&dm, sc, rc, S, R, smh, rmh, 3, 4097, 1, 3);
        one_message(&dm, sc, rc, S, R, smh, rmh, 4096, 100, 300001, 4);
        /* refusals, each with a warning */
        char host[64];
        w0 = atomic_load(&warnings);
        CHECK(T8->reg_mr(sc, host, sizeof(host), GXN_PTR_CUDA, &mh) != GXN_NCCL_OK && !mh &&
                  atomic_load(&warnings) > w0, "host memory called CUDA must be refused");
        w0 = atomic_load(&warnings);
        CHECK(T8->reg_mr(sc, (void *)(uintptr_t)(S + 4096), LEN, GXN_PTR_CUDA, &mh) !=
                  GXN_NCCL_OK && !mh && atomic_load(&warnings) > w0,
              "a range past its allocation must be refused");
        w0 = atomic_load(&warnings);
        CHECK(T8->reg_mr(sc, (void *)(uintptr_t)S, 64, 0x40, &mh) != GXN_NCCL_OK && !mh &&
                  atomic_load(&warnings) > w0, "an unknown memory type must be refused");
        CHECK(T8->dereg_mr(sc, smh) == GXN_NCCL_OK && T8->dereg_mr(rc, rmh) == GXN_NCCL_OK,
              "deregMr");
    } else {
        if (strcmp(expect, "host") == 0)
            CHECK(T8->reg_mr(sc, (void *)(uintptr_t)S, LEN, GXN_PTR_CUDA, &mh) !=
                      GXN_NCCL_OK && !mh && atomic_load(&warnings) > w0,
                  "regMr of CUDA memory must fail with a warning (%s)", expect);
        w0 = atomic_load(&warnings);
        CHECK(T8->reg_mr_dmabuf(rc, (void *)(uintptr_t)R, LEN, GXN_PTR_CUDA, 0, 2, &mh) !=
                  GXN_NCCL_OK && !mh && atomic_load(&warnings) > w0,
              "regMrDmaBuf must fail with a warning (%s)", expect);
        char *h = malloc(4096);
        CHECK(T8->reg_mr(sc, h, 4096, GXN_PTR_HOST, &mh) == GXN_NCCL_OK && mh, "host regMr");
        CHECK(T8->dereg_mr(sc, mh) == GXN_NCCL_OK, "deregMr");
        free(h);
    }
    CHECK(dm.free_(S) == 0 && dm.free_(R) == 0, "cuMemFree");
    CHECK(T8->close_send(sc) == GXN_NCCL_OK && T8->close_recv(rc) == GXN_NCCL_OK &&
              T8->close_listen(lc) == GXN_NCCL_OK, "close");
    if (version == 11)
        CHECK(((gxn_net_v11_t *)tables)->finalize(ctx) == GXN_NCCL_OK, "finalize");
    if (getenv("GX_GDR_SYSFS_ROOT") && strcmp(expect, "peermem") == 0) {
        char p[200];
        snprintf(p, sizeof(p), "%s/sys/module/nvidia_peermem", getenv("GX_GDR_SYSFS_ROOT"));
        rmdir(p);
        snprintf(p, sizeof(p), "%s/sys/module", getenv("GX_GDR_SYSFS_ROOT"));
        rmdir(p);
        snprintf(p, sizeof(p), "%s/sys", getenv("GX_GDR_SYSFS_ROOT"));
        rmdir(p);
        rmdir(getenv("GX_GDR_SYSFS_ROOT"));
    }
    fprintf(stderr, "PASS: %s (v%d)\n", expect, version);
    return 0;
}
