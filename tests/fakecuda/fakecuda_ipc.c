/*
 * fakecuda_ipc.c - CUDA IPC memory handles in the fake libcuda (tests only):
 * cuIpcGetMemHandle puts the exporting process's pid and its allocation's
 * memfd into the 64-byte handle; cuIpcOpenMemHandle in another process opens
 * /proc/<pid>/fd/<fd> (the same memory, as a real driver maps the same device
 * pages), maps it like cuMemAlloc does (no access at the address the caller
 * sees, a writable alias for the fake's copies) and lists it as device
 * memory of the opening context; cuIpcCloseMemHandle unmaps it. As with a
 * real driver: the handle names the allocation's base, opening it in the
 * exporting process fails, and memory opened this way is not cuMemFree'd.
 * Also cuMemcpyDtoD.
 */
#include <fcntl.h>
#include <stdint.h>

#include "fakecuda_internal.h"

#define IPC_MAGIC 0x43504946u /* "FIPC" */

struct ipc_wire {
    uint32_t magic;
    int32_t pid, fd;
    uint32_t pad;
    uint64_t size, map;
};

static unsigned long long stat_opened, stat_closed;

/* Test hook: handles opened and closed in this process so far. */
EXPORT void fakecuda_ipc_stats(unsigned long long *opened, unsigned long long *closed)
{
    pthread_mutex_lock(&mu);
    *opened = stat_opened;
    *closed = stat_closed;
    pthread_mutex_unlock(&mu);
}

int fk_ipc_get(void *handle, dptr p)
{
    FAILPOINT("cuIpcGetMemHandle");
    NEED_CTX();
    pthread_mutex_lock(&mu);
    struct falloc *a = find((uintptr_t)p);
    int ok = a && a->fd >= 0 && (char *)(uintptr_t)p == a->addr;
    struct ipc_wire w = { .magic = IPC_MAGIC, .pid = (int32_t)getpid(), .fd = ok ? a->fd : -1,
                          .size = ok ? a->size : 0, .map = ok ? a->map : 0 };
    pthread_mutex_unlock(&mu);
    if (!ok)
        return E_INVALID_VALUE;
    memset(handle, 0, sizeof(struct fk_ipc_handle));
    memcpy(handle, &w, sizeof(w));
    return OK;
}

int fk_ipc_open(dptr *out, struct fk_ipc_handle h, unsigned flags)
{
    (void)flags;
    FAILPOINT("cuIpcOpenMemHandle");
    NEED_CTX();
    struct ipc_wire w;
    memcpy(&w, h.data, sizeof(w));
    if (w.magic != IPC_MAGIC || w.fd < 0 || w.map == 0)
        return E_INVALID_VALUE;
    if (w.pid == (int32_t)getpid())
        return E_INVALID_CONTEXT; /* as the driver: not in the exporting process */
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)w.pid, (int)w.fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return E_INVALID_VALUE; /* the exporter is gone */
    struct falloc *a = calloc(1, sizeof(*a));
    char *addr = mmap(NULL, w.map, PROT_NONE, MAP_SHARED, fd, 0);
    char *alias = mmap(NULL, w.map, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!a || addr == MAP_FAILED || alias == MAP_FAILED) {
        if (addr != MAP_FAILED)
            munmap(addr, w.map);
        if (alias != MAP_FAILED)
            munmap(alias, w.map);
        close(fd);
        free(a);
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    }
    *a = (struct falloc){ .addr = addr, .alias = alias, .size = w.size, .map = w.map, .fd = fd,
                          .ctx = cur[ncur - 1] };
    fk_link(a);
    pthread_mutex_lock(&mu);
    stat_opened++;
    pthread_mutex_unlock(&mu);
    *out = (dptr)(uintptr_t)addr;
    return OK;
}

int fk_ipc_close(dptr p)
{
    FAILPOINT("cuIpcCloseMemHandle");
    NEED_CTX();
    struct falloc *a = fk_unlink((char *)(uintptr_t)p);
    if (!a)
        return E_INVALID_VALUE;
    munmap(a->addr, a->map);
    munmap(a->alias, a->map);
    close(a->fd);
    free(a);
    pthread_mutex_lock(&mu);
    stat_closed++;
    pthread_mutex_unlock(&mu);
    return OK;
}

int fk_dtod(dptr dst, dptr src, size_t len)
{
    FAILPOINT("cuMemcpyDtoD");
    NEED_CTX();
    pthread_mutex_lock(&mu);
    flush(&legacy, legacy.submitted);
    char *d = find((uintptr_t)dst) ? view((uintptr_t)dst, len) : NULL;
    const char *s = find((uintptr_t)src) ? view((uintptr_t)src, len) : NULL;
    if (d && s)
        memmove(d, s, len);
    pthread_mutex_unlock(&mu);
    return d && s ? OK : E_INVALID_VALUE;
}
