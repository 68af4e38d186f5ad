/*
 * gpu_ipc_test.c - CUDA IPC handles between two processes (gpu_ipc.h): the
 * parent allocates device memory, fills it, exports a handle for a pointer
 * 4 KiB into the allocation and sends it down a pipe; the child (forked
 * before either process touched CUDA, as the driver requires) opens it, sees
 * device memory holding the parent's bytes at the exported pointer, writes
 * its own, closes it; the parent then reads the child's bytes. Also: host
 * memory is refused, a handle cannot be opened by its exporter, and (fake
 * driver) the child's open and close were counted. Exits 77 without a driver.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../unit/check.h"
#include "common/log.h"
#include "gpudirect/gpu_ipc.h"
#include "gpudirect/gpudirect.h"

#define LEN (256 * 1024 + 13)
#define OFF 4096

static size_t first_bad(const unsigned char *b, unsigned mul, unsigned add)
{
    for (size_t i = 0; i < LEN; i++)
        if (b[i] != (unsigned char)(i * mul + add))
            return i;
    return LEN;
}

static int child(int rd, int wr)
{
    struct gx_gpu_ipc_handle h;
    CHECK(read(rd, &h, sizeof(h)) == (ssize_t)sizeof(h), "child: no handle");
    void *dev = NULL, *base = NULL;
    CHECK(gx_gpu_ipc_open(&h, &dev, &base) == GX_OK, "open: %s", gx_last_error());
    CHECK((char *)dev == (char *)base + OFF && h.size >= LEN, "offset %llu size %llu",
          h.offset, h.size);
    struct gx_gpu_ptr g;
    CHECK(gx_gpu_ptr_query(dev, &g) == GX_OK && g.type == GX_GPU_MEM_CUDA,
          "opened memory is not device memory");
    unsigned char *buf = malloc(LEN);
    CHECK(buf && gx_gpu_copy_dtoh(buf, dev, LEN) == GX_OK, "dtoh: %s", gx_last_error());
    size_t bad = first_bad(buf, 7, 1);
    CHECK(bad == LEN, "child: byte %zu is %u", bad, buf[bad % LEN]);
    for (size_t i = 0; i < LEN; i++)
        buf[i] = (unsigned char)(i * 3 + 5);
    CHECK(gx_gpu_copy_htod(dev, buf, LEN) == GX_OK, "htod: %s", gx_last_error());
    CHECK(gx_gpu_ipc_close(base) == GX_OK, "close: %s", gx_last_error());
    void *lib = getenv("GX_CUDA_LIB") ? dlopen(getenv("GX_CUDA_LIB"), RTLD_NOW | RTLD_NOLOAD)
                                      : NULL;
    void (*stats)(unsigned long long *, unsigned long long *) =
        lib ? (void (*)(unsigned long long *, unsigned long long *))dlsym(lib,
                                                                       "fakecuda_ipc_stats")
            : NULL;
    if (stats) {
        unsigned long long o = 0, c = 0;
        stats(&o, &c);
        CHECK(o == 1 && c == 1, "fake driver counted %llu opens, %llu closes", o, c);
    }
    free(buf);
    char ok = 'y';
    CHECK(write(wr, &ok, 1) == 1, "child: report");
    CHECK_DONE("ipc child");
}

int main(void)
{
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0)
        return 1;
    pid_t pid = fork(); /* before CUDA: a driver's state does not survive fork */
    if (pid == 0) {
        char why[256];
        if (!gx_gpu_driver_available(why, sizeof(why)))
            _exit(3);
        _exit(child(down[0], up[1]));
    }
    char why[256];
    if (!gx_gpu_driver_available(why, sizeof(why))) {
        printf("SKIP: %s\n", why);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 77;
    }
    void *d = NULL;
    CHECK(gx_gpu_alloc(&d, LEN + OFF) == GX_OK, "alloc: %s", gx_last_error());
    unsigned char *buf = malloc(LEN);
    CHECK(buf, "oom");
    for (size_t i = 0; i < LEN; i++)
        buf[i] = (unsigned char)(i * 7 + 1);
    char *dev = (char *)d + OFF;
    CHECK(gx_gpu_copy_htod(dev, buf, LEN) == GX_OK, "htod: %s", gx_last_error());
    struct gx_gpu_ipc_handle h;
    CHECK(gx_gpu_ipc_export(buf, &h) == GX_EINVAL && strstr(gx_last_error(), "not device"),
          "host memory exported: %s", gx_last_error());
    CHECK(gx_gpu_ipc_export(dev, &h) == GX_OK, "export: %s", gx_last_error());
    CHECK(h.offset == OFF, "offset %llu", h.offset);
    void *x, *xb;
    CHECK(gx_gpu_ipc_open(&h, &x, &xb) == GX_ESYSTEM && strstr(gx_last_error(),
          "cuIpcOpenMemHandle"), "opened by the exporter: %s", gx_last_error());
    CHECK(write(down[1], &h, sizeof(h)) == (ssize_t)sizeof(h), "send handle");
    char ok = 0;
    CHECK(read(up[0], &ok, 1) == 1 && ok == 'y', "child reported nothing");
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "child failed (status %#x)", st);
    CHECK(gx_gpu_copy_dtoh(buf, dev, LEN) == GX_OK, "dtoh: %s", gx_last_error());
    size_t bad = first_bad(buf, 3, 5);
    CHECK(bad == LEN, "parent: byte %zu is %u (the child's write not seen)", bad,
          buf[bad % LEN]);
    CHECK(gx_gpu_free(d) == GX_OK, "free");
    free(buf);
    CHECK_DONE("ipc");
}
