/*
 * fakecuda.c - a fake CUDA driver (libcuda) for tests only; never installed.
 * gx loads it through GX_CUDA_LIB.
 *
 * What it proves:
 *  - gx never touches device memory with the CPU: "device memory" is a memfd
 *    mapped twice, PROT_NONE at the address gx is given (any load or store
 *    by gx faults) and read-write at an alias only this fake uses;
 *  - gx waits for asynchronous work: an async copy poisons its destination
 *    (0xCD bytes) when queued on an idle stream and lands only when its
 *    stream or an event after it is synchronized (or a stream waiting on
 *    that event is);
 *  - host functions (cuLaunchHostFunc) run in stream order at the sync, the
 *    stream waiting for them to return;
 *  - gx makes a context current before copies, stream and event calls
 *    (CUDA_ERROR_INVALID_CONTEXT otherwise);
 *  - gx resolves entry points by version: the only exported driver symbol is
 *    cuGetProcAddress_v2, which hands out the _v2 variants (cuMemAlloc at
 *    version >= 3020) and refuses older versions.
 * Environment: FAKECUDA_DEVICES (default 1; 0 = cuInit fails with no
 * device), FAKECUDA_FAIL=<base name> makes that entry point fail with
 * CUDA_ERROR_UNKNOWN (999).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define OK 0
#define E_INVALID_VALUE 1
#define E_NOT_INITIALIZED 3
#define E_NO_DEVICE 100
#define E_INVALID_DEVICE 101
#define E_INVALID_CONTEXT 201
#define E_UNKNOWN 999
#define POISON 0xCD

typedef unsigned long long dptr;

struct fctx { int magic, dev; };
struct falloc {
    struct falloc *next;
    char *addr;      /* what gx sees: PROT_NONE */
    char *alias;     /* the fake's writable view; == addr for pinned host memory */
    size_t size, map;
    int fd;          /* memfd, -1 for host memory */
    unsigned long long id;
    struct fctx *ctx;
};
enum { OP_COPY, OP_WAIT, OP_HOST };
struct fop {
    int kind;
    char *dst;
    const char *src;
    size_t len;
    struct fstream *other;
    unsigned long long ticket;
    void (*fn)(void *); /* OP_HOST */
    void *arg;
};
struct fstream {
    struct fop *ops;
    size_t nops, cap;
    unsigned long long submitted, done;
    int running; /* an op taken off the queue is still running (a host function) */
};
struct fevent { struct fstream *s; unsigned long long ticket; };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int ndev = -1;
static struct fctx ctxs[8];
static struct falloc *allocs;
static unsigned long long next_id = 1;
static struct fstream legacy;
static _Thread_local struct fctx *cur[16];
static _Thread_local int ncur;
static unsigned long long stat_attr_calls, stat_copies, stat_host_allocs;
static int ctx_used[8]; /* a device's primary context was retained or made current */

/* Test hook: whether gx (or the test) ever used device `dev`'s context: a
 * process on GPU 1 must not create a context on GPU 0. */
EXPORT int fakecuda_ctx_used(int dev)
{
    return dev >= 0 && dev < 8 ? __atomic_load_n(&ctx_used[dev], __ATOMIC_RELAXED) : 0;
}

/* Test hook: calls so far (pointer queries, copies, pinned allocations). */
EXPORT void fakecuda_stats(unsigned long long *attr_calls, unsigned long long *copies,
                           unsigned long long *host_allocs)
{
    pthread_mutex_lock(&mu);
    *attr_calls = stat_attr_calls;
    *copies = stat_copies;
    *host_allocs = stat_host_allocs;
    pthread_mutex_unlock(&mu);
}

static struct falloc *find(uintptr_t p);
static char *view(uintptr_t p, size_t len);

/* Test hook: read device memory as it is now, without synchronizing. */
EXPORT int fakecuda_peek(dptr p, void *out, size_t len)
{
    pthread_mutex_lock(&mu);
    char *v = find((uintptr_t)p) ? view((uintptr_t)p, len) : NULL;
    if (v)
        memcpy(out, v, len);
    pthread_mutex_unlock(&mu);
    return v ? OK : E_INVALID_VALUE;
}

static int failing(const char *name)
{
    const char *f = getenv("FAKECUDA_FAIL");
    return f && strcmp(f, name) == 0;
}
#define FAILPOINT(name) do { if (failing(name)) return E_UNKNOWN; } while (0)
#define NEED_CTX() do { if (ncur == 0 || !cur[ncur - 1]) return E_INVALID_CONTEXT; } while (0)

static struct falloc *find(uintptr_t p)
{
    for (struct falloc *a = allocs; a; a = a->next)
        if (p >= (uintptr_t)a->addr && p < (uintptr_t)a->addr + a->size)
            return a;
    return NULL;
}

/* The fake's own view of [p, p+len): device memory through its alias, host
 * memory as is. NULL when a device range runs past its allocation. */
static char *view(uintptr_t p, size_t len)
{
    struct falloc *a = find(p);
    if (!a)
        return (char *)p; /* pageable or pinned host memory */
    if (p + len > (uintptr_t)a->addr + a->size)
        return NULL;
    return a->alias + (p - (uintptr_t)a->addr);
}

static void flush(struct fstream *s, unsigned long long upto);
static void run_op(struct fop *o)
{
    if (o->kind == OP_COPY) {
        memcpy(o->dst, o->src, o->len);
        stat_copies++;
    } else if (o->kind == OP_HOST) {
        /* A host function may block (gx's waits for its collective): run it
         * without the lock, as the driver runs it on its own thread. */
        pthread_mutex_unlock(&mu);
        o->fn(o->arg);
        pthread_mutex_lock(&mu);
    } else {
        flush(o->other, o->ticket);
    }
}

static void flush(struct fstream *s, unsigned long long upto)
{
    while (s->done < upto && s->done < s->submitted) {
        if (s->running) { /* another thread runs this stream's host function */
            pthread_mutex_unlock(&mu);
            usleep(100);
            pthread_mutex_lock(&mu);
            continue;
        }
        struct fop o = s->ops[0];
        memmove(s->ops, s->ops + 1, (s->nops - 1) * sizeof(*s->ops));
        s->nops--;
        s->running = 1;
        run_op(&o);
        s->running = 0;
        s->done++;
    }
}

static int enqueue(struct fstream *s, struct fop o)
{
    if (!s)
        s = &legacy;
    if (s->nops == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct fop *n = realloc(s->ops, cap * sizeof(*n));
        if (!n)
            return E_UNKNOWN;
        s->ops = n;
        s->cap = cap;
    }
    s->ops[s->nops++] = o;
    s->submitted++;
    return OK;
}

/* ---- init, devices, contexts ---------------------------------------------- */
static int fk_init(unsigned flags)
{
    FAILPOINT("cuInit");
    pthread_mutex_lock(&mu);
    const char *d = getenv("FAKECUDA_DEVICES");
    ndev = d ? atoi(d) : 1;
    if (ndev > 8)
        ndev = 8;
    for (int i = 0; i < 8; i++)
        ctxs[i] = (struct fctx){ 0xC0DA, i };
    pthread_mutex_unlock(&mu);
    return ndev > 0 ? OK : E_NO_DEVICE;
}
static int fk_driver_version(int *v) { *v = 12040; return OK; }
static int fk_device_count(int *n)
{
    if (ndev < 0)
        return E_NOT_INITIALIZED;
    *n = ndev;
    return OK;
}
static int fk_device_get(int *dev, int ord)
{
    if (ord < 0 || ord >= ndev)
        return E_INVALID_DEVICE;
    *dev = ord;
    return OK;
}
static int fk_device_name(char *name, int len, int dev)
{
    snprintf(name, (size_t)len, "fakecuda GPU %d", dev);
    return OK;
}
static int fk_total_mem(size_t *b, int dev) { *b = (size_t)16 << 30; return OK; }
static int fk_bus_id(char *bus, int len, int dev)
{
    snprintf(bus, (size_t)len, "0000:%02x:00.0", 0x17 + dev);
    return OK;
}
static int fk_primary_retain(struct fctx **c, int dev)
{
    if (dev < 0 || dev >= ndev)
        return E_INVALID_DEVICE;
    __atomic_store_n(&ctx_used[dev], 1, __ATOMIC_RELAXED);
    *c = &ctxs[dev];
    return OK;
}
static int fk_primary_release(int dev) { return OK; }
static int fk_ctx_push(struct fctx *c)
{
    if (!c || c->magic != 0xC0DA || ncur == 16)
        return E_INVALID_CONTEXT;
    __atomic_store_n(&ctx_used[c->dev], 1, __ATOMIC_RELAXED);
    cur[ncur++] = c;
    return OK;
}
static int fk_ctx_pop(struct fctx **c)
{
    if (ncur == 0)
        return E_INVALID_CONTEXT;
    *c = cur[--ncur];
    return OK;
}
static int fk_ctx_get_current(struct fctx **c) { *c = ncur ? cur[ncur - 1] : NULL; return OK; }
static int fk_ctx_set_current(struct fctx *c)
{
    if (ncur == 0)
        ncur = 1;
    cur[ncur - 1] = c;
    return OK;
}

/* ---- memory --------------------------------------------------------------- */
static int fk_mem_alloc(dptr *out, size_t size)
{
    FAILPOINT("cuMemAlloc");
    NEED_CTX();
    size_t map = (size + 4095) & ~(size_t)4095;
    struct falloc *a = calloc(1, sizeof(*a));
    int fd = memfd_create("fakecuda", MFD_CLOEXEC);
    if (!a || fd < 0 || ftruncate(fd, (off_t)map) != 0) {
        free(a);
        if (fd >= 0)
            close(fd);
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    }
    a->addr = mmap(NULL, map, PROT_NONE, MAP_SHARED, fd, 0);
    a->alias = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (a->addr == MAP_FAILED || a->alias == MAP_FAILED) {
        close(fd);
        free(a);
        return 2;
    }
    memset(a->alias, POISON, map); /* fresh device memory is not zero */
    a->size = size;
    a->map = map;
    a->fd = fd;
    a->ctx = cur[ncur - 1];
    pthread_mutex_lock(&mu);
    a->id = next_id++;
    a->next = allocs;
    allocs = a;
    pthread_mutex_unlock(&mu);
    *out = (dptr)(uintptr_t)a->addr;
    return OK;
}

static int free_alloc(void *p, int want_device)
{
    NEED_CTX();
    pthread_mutex_lock(&mu);
    struct falloc **pp = &allocs;
    while (*pp && (*pp)->addr != (char *)p)
        pp = &(*pp)->next;
    struct falloc *a = *pp;
    if (!a || (a->fd >= 0) != want_device) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    *pp = a->next;
    pthread_mutex_unlock(&mu);
    munmap(a->addr, a->map);
    if (a->fd >= 0) {
        munmap(a->alias, a->map);
        close(a->fd);
    }
    free(a);
    return OK;
}
static int fk_mem_free(dptr p) { return free_alloc((void *)(uintptr_t)p, 1); }

static int fk_host_alloc(void **out, size_t size, unsigned flags)
{
    FAILPOINT("cuMemHostAlloc");
    NEED_CTX();
    size_t map = (size + 4095) & ~(size_t)4095;
    struct falloc *a = calloc(1, sizeof(*a));
    char *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!a || p == MAP_FAILED) {
        free(a);
        return 2;
    }
    *a = (struct falloc){ .addr = p, .alias = p, .size = size, .map = map, .fd = -1,
                          .ctx = cur[ncur - 1] };
    pthread_mutex_lock(&mu);
    stat_host_allocs++;
    a->id = next_id++;
    a->next = allocs;
    allocs = a;
    pthread_mutex_unlock(&mu);
    *out = p;
    return OK;
}
static int fk_free_host(void *p) { return free_alloc(p, 0); }

static int fk_get_attributes(unsigned n, int *attrs, void **data, dptr p)
{
    FAILPOINT("cuPointerGetAttributes");
    pthread_mutex_lock(&mu);
    stat_attr_calls++;
    struct falloc *a = find((uintptr_t)p);
    for (unsigned i = 0; i < n; i++) {
        switch (attrs[i]) {
        case 1: *(struct fctx **)data[i] = a ? a->ctx : NULL; break;
        case 2: *(unsigned *)data[i] = !a ? 0 : a->fd >= 0 ? 2 : 1; break;
        case 7: *(unsigned long long *)data[i] = a ? a->id : 0; break;
        case 8: *(unsigned *)data[i] = 0; break;
        case 9: *(int *)data[i] = a ? a->ctx->dev : -1; break;
        case 11: *(dptr *)data[i] = a ? (dptr)(uintptr_t)a->addr : 0; break;
        case 12: *(size_t *)data[i] = a ? a->size : 0; break;
        default: pthread_mutex_unlock(&mu); return E_INVALID_VALUE;
        }
    }
    pthread_mutex_unlock(&mu);
    return OK;
}

static int fk_get_attribute(void *data, int attr, dptr p)
{
    FAILPOINT("cuPointerGetAttribute");
    pthread_mutex_lock(&mu);
    stat_attr_calls++;
    struct falloc *a = find((uintptr_t)p);
    int rc = OK;
    if (!a)
        rc = E_INVALID_VALUE; /* as the real driver: not a CUDA pointer */
    else if (attr == 7)
        *(unsigned long long *)data = a->id;
    else if (attr == 2)
        *(unsigned *)data = a->fd >= 0 ? 2 : 1;
    else
        rc = E_INVALID_VALUE;
    pthread_mutex_unlock(&mu);
    return rc;
}

/* ---- copies ---------------------------------------------------------------- */
static int copy_now(char *dst_addr, const char *src_addr, size_t len, uintptr_t devp,
                    const char *what)
{
    FAILPOINT(what);
    NEED_CTX();
    pthread_mutex_lock(&mu);
    if (!find(devp)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    flush(&legacy, legacy.submitted);
    char *d = view((uintptr_t)dst_addr, len);
    const char *s = view((uintptr_t)src_addr, len);
    int rc = d && s ? OK : E_INVALID_VALUE;
    if (rc == OK) {
        memcpy(d, s, len);
        stat_copies++;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}
static int fk_dtoh(void *dst, dptr src, size_t len)
{
    return copy_now(dst, (const char *)(uintptr_t)src, len, (uintptr_t)src, "cuMemcpyDtoH");
}
static int fk_htod(dptr dst, const void *src, size_t len)
{
    return copy_now((char *)(uintptr_t)dst, src, len, (uintptr_t)dst, "cuMemcpyHtoD");
}

static int copy_async(char *dst_addr, const char *src_addr, size_t len, struct fstream *s,
                      uintptr_t devp, const char *what)
{
    FAILPOINT(what);
    NEED_CTX();
    pthread_mutex_lock(&mu);
    if (!find(devp)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    char *d = view((uintptr_t)dst_addr, len);
    const char *src = view((uintptr_t)src_addr, len);
    int rc = d && src ? OK : E_INVALID_VALUE;
    if (rc == OK) {
        /* Readers outside the stream see poison until the sync; an earlier op
         * still queued on the stream might read it, so then it stays as is. */
        struct fstream *q = s ? s : &legacy;
        if (q->nops == 0 && !q->running)
            memset(d, POISON, len);
        rc = enqueue(s, (struct fop){ .kind = OP_COPY, .dst = d, .src = src, .len = len });
    }
    pthread_mutex_unlock(&mu);
    return rc;
}
static int fk_dtoh_async(void *dst, dptr src, size_t len, struct fstream *s)
{
    return copy_async(dst, (const char *)(uintptr_t)src, len, s, (uintptr_t)src,
                      "cuMemcpyDtoHAsync");
}
static int fk_htod_async(dptr dst, const void *src, size_t len, struct fstream *s)
{
    return copy_async((char *)(uintptr_t)dst, src, len, s, (uintptr_t)dst,
                      "cuMemcpyHtoDAsync");
}

/* ---- streams and events ------------------------------------------------------ */
static int fk_stream_create(struct fstream **s, unsigned flags)
{
    NEED_CTX();
    *s = calloc(1, sizeof(**s));
    return *s ? OK : 2;
}
static int fk_stream_destroy(struct fstream *s)
{
    NEED_CTX();
    pthread_mutex_lock(&mu);
    flush(s, s->submitted);
    pthread_mutex_unlock(&mu);
    free(s->ops);
    free(s);
    return OK;
}
static int fk_stream_sync(struct fstream *s)
{
    FAILPOINT("cuStreamSynchronize");
    NEED_CTX();
    pthread_mutex_lock(&mu);
    if (!s)
        s = &legacy;
    flush(s, s->submitted);
    pthread_mutex_unlock(&mu);
    return OK;
}
static int fk_event_create(struct fevent **e, unsigned flags)
{
    NEED_CTX();
    *e = calloc(1, sizeof(**e));
    return *e ? OK : 2;
}
static int fk_event_record(struct fevent *e, struct fstream *s)
{
    FAILPOINT("cuEventRecord");
    NEED_CTX();
    pthread_mutex_lock(&mu);
    e->s = s ? s : &legacy;
    e->ticket = e->s->submitted;
    pthread_mutex_unlock(&mu);
    return OK;
}
static int fk_event_sync(struct fevent *e)
{
    FAILPOINT("cuEventSynchronize");
    NEED_CTX();
    pthread_mutex_lock(&mu);
    if (e->s)
        flush(e->s, e->ticket);
    pthread_mutex_unlock(&mu);
    return OK;
}
static int fk_event_query(struct fevent *e)
{
    NEED_CTX();
    pthread_mutex_lock(&mu);
    int done = !e->s || e->s->done >= e->ticket;
    pthread_mutex_unlock(&mu);
    return done ? OK : 600; /* CUDA_ERROR_NOT_READY: a query runs nothing */
}
static int fk_event_destroy(struct fevent *e) { NEED_CTX(); free(e); return OK; }
static int fk_stream_wait_event(struct fstream *s, struct fevent *e, unsigned flags)
{
    FAILPOINT("cuStreamWaitEvent");
    NEED_CTX();
    pthread_mutex_lock(&mu);
    int rc = e->s ? enqueue(s, (struct fop){ .kind = OP_WAIT, .other = e->s,
                                              .ticket = e->ticket })
                  : OK;
    pthread_mutex_unlock(&mu);
    return rc;
}

static int fk_launch_host_func(struct fstream *s, void (*fn)(void *), void *arg)
{
    FAILPOINT("cuLaunchHostFunc");
    NEED_CTX();
    pthread_mutex_lock(&mu);
    int rc = enqueue(s, (struct fop){ .kind = OP_HOST, .fn = fn, .arg = arg });
    pthread_mutex_unlock(&mu);
    return rc;
}

static int fk_dmabuf(void *handle, dptr p, size_t len, int type, unsigned long long flags)
{
    pthread_mutex_lock(&mu);
    struct falloc *a = find((uintptr_t)p);
    /* The fd's offset 0 must be `p`: a dup of the memfd gives that only for a
     * range that starts where the allocation starts. */
    int ok = a && a->fd >= 0 && (char *)(uintptr_t)p == a->addr &&
             (uintptr_t)p + len <= (uintptr_t)a->addr + a->map;
    int fd = ok ? dup(a->fd) : -1;
    pthread_mutex_unlock(&mu);
    if (fd < 0)
        return E_INVALID_VALUE;
    *(int *)handle = fd;
    return OK;
}

static int fk_error_name(int r, const char **s)
{
    switch (r) {
    case OK: *s = "CUDA_SUCCESS"; return OK;
    case E_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case E_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
    case E_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return OK;
    case E_UNKNOWN: *s = "CUDA_ERROR_UNKNOWN"; return OK;
    default: *s = NULL; return E_INVALID_VALUE;
    }
}

/* ---- cuGetProcAddress ---------------------------------------------------------- */
static const struct { const char *name; int min_version; void *fn; } procs[] = {
    { "cuInit", 2000, (void *)fk_init },
    { "cuDriverGetVersion", 2020, (void *)fk_driver_version },
    { "cuDeviceGetCount", 2000, (void *)fk_device_count },
    { "cuDeviceGet", 2000, (void *)fk_device_get },
    { "cuDeviceGetName", 2000, (void *)fk_device_name },
    { "cuDeviceTotalMem", 3020, (void *)fk_total_mem },      /* _v2 */
    { "cuDeviceGetPCIBusId", 4010, (void *)fk_bus_id },
    { "cuDevicePrimaryCtxRetain", 7000, (void *)fk_primary_retain },
    { "cuDevicePrimaryCtxRelease", 11000, (void *)fk_primary_release }, /* _v2 */
    { "cuCtxPushCurrent", 4000, (void *)fk_ctx_push },       /* _v2 */
    { "cuCtxPopCurrent", 4000, (void *)fk_ctx_pop },         /* _v2 */
    { "cuCtxGetCurrent", 4000, (void *)fk_ctx_get_current },
    { "cuCtxSetCurrent", 4000, (void *)fk_ctx_set_current },
    { "cuPointerGetAttributes", 7000, (void *)fk_get_attributes },
    { "cuPointerGetAttribute", 4000, (void *)fk_get_attribute },
    { "cuMemAlloc", 3020, (void *)fk_mem_alloc },            /* _v2 */
    { "cuMemFree", 3020, (void *)fk_mem_free },              /* _v2 */
    { "cuMemHostAlloc", 3020, (void *)fk_host_alloc },
    { "cuMemFreeHost", 2000, (void *)fk_free_host },
    { "cuMemcpyDtoH", 3020, (void *)fk_dtoh },               /* _v2 */
    { "cuMemcpyHtoD", 3020, (void *)fk_htod },               /* _v2 */
    { "cuMemcpyDtoHAsync", 3020, (void *)fk_dtoh_async },    /* _v2 */
    { "cuMemcpyHtoDAsync", 3020, (void *)fk_htod_async },    /* _v2 */
    { "cuStreamCreate", 2000, (void *)fk_stream_create },
    { "cuStreamDestroy", 4000, (void *)fk_stream_destroy },  /* _v2 */
    { "cuStreamSynchronize", 2000, (void *)fk_stream_sync },
    { "cuStreamWaitEvent", 3020, (void *)fk_stream_wait_event },
    { "cuEventCreate", 2000, (void *)fk_event_create },
    { "cuEventRecord", 2000, (void *)fk_event_record },
    { "cuEventSynchronize", 2000, (void *)fk_event_sync },
    { "cuEventQuery", 2000, (void *)fk_event_query },
    { "cuEventDestroy", 4000, (void *)fk_event_destroy },    /* _v2 */
    { "cuMemGetHandleForAddressRange", 11070, (void *)fk_dmabuf },
    { "cuLaunchHostFunc", 10000, (void *)fk_launch_host_func },
    { "cuGetErrorName", 6000, (void *)fk_error_name },
};

EXPORT int cuGetProcAddress_v2(const char *sym, void **pfn, int version,
                               unsigned long long flags, int *status)
{
    int st = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    *pfn = NULL;
    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
        if (strcmp(procs[i].name, sym) != 0)
            continue;
        if (version < procs[i].min_version) {
            st = 2; /* VERSION_NOT_SUFFICIENT: this fake has no v1 entry points */
            break;
        }
        *pfn = procs[i].fn;
        st = 0;
        break;
    }
    if (status)
        *status = st;
    return st == 0 ? OK : 500; /* CUDA_ERROR_NOT_FOUND */
}
