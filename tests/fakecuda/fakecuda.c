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
 * CUDA_ERROR_UNKNOWN (999), FAKECUDA_QUERY_NEEDS_CTX=1 makes pointer
 * queries fail with CUDA_ERROR_INVALID_CONTEXT on a thread without one.
 */
#include "fakecuda_internal.h"

pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int ndev = -1;
static struct fctx ctxs[8];
static struct falloc *allocs;
static unsigned long long next_id = 1;
struct fstream legacy;
_Thread_local struct fctx *cur[16];
_Thread_local int ncur;
static unsigned long long stat_attr_calls, stat_copies, stat_host_allocs;
static size_t stat_copy_max; /* branch gdr: largest synchronous copy */
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

int failing(const char *name)
{
    const char *f = getenv("FAKECUDA_FAIL");
    return f && strcmp(f, name) == 0;
}

struct falloc *find(uintptr_t p)
{
    for (struct falloc *a = allocs; a; a = a->next)
        if (p >= (uintptr_t)a->addr && p < (uintptr_t)a->addr + a->size)
            return a;
    return NULL;
}

/* The fake's own view of [p, p+len): device memory through its alias, host
 * memory as is. NULL when a device range runs past its allocation. */
char *view(uintptr_t p, size_t len)
{
    struct falloc *a = find(p);
    if (!a)
        return (char *)p; /* pageable or pinned host memory */
    if (p + len > (uintptr_t)a->addr + a->size)
        return NULL;
    return a->alias + (p - (uintptr_t)a->addr);
}

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
    } else if (o->kind == OP_POLL) { /* nccl branch: a fakenccl collective; a sync waits */
        pthread_mutex_unlock(&mu);
        while (!o->poll(o->arg))
            usleep(100);
        pthread_mutex_lock(&mu);
    } else {
        flush(o->other, o->ticket);
    }
}

void flush(struct fstream *s, unsigned long long upto)
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

int enqueue(struct fstream *s, struct fop o)
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
int fk_init(unsigned flags)
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
int fk_driver_version(int *v) { *v = 12040; return OK; }
int fk_device_count(int *n)
{
    if (ndev < 0)
        return E_NOT_INITIALIZED;
    *n = ndev;
    return OK;
}
int fk_device_get(int *dev, int ord)
{
    if (ord < 0 || ord >= ndev)
        return E_INVALID_DEVICE;
    *dev = ord;
    return OK;
}
int fk_device_name(char *name, int len, int dev)
{
    snprintf(name, (size_t)len, "fakecuda GPU %d", dev);
    return OK;
}
int fk_total_mem(size_t *b, int dev) { *b = (size_t)16 << 30; return OK; }
int fk_bus_id(char *bus, int len, int dev)
{
    snprintf(bus, (size_t)len, "0000:%02x:00.0", 0x17 + dev);
    return OK;
}
int fk_primary_retain(struct fctx **c, int dev)
{
    if (dev < 0 || dev >= ndev)
        return E_INVALID_DEVICE;
    __atomic_store_n(&ctx_used[dev], 1, __ATOMIC_RELAXED);
    *c = &ctxs[dev];
    return OK;
}
int fk_primary_release(int dev) { return OK; }
int fk_primary_get_state(int dev, unsigned *flags, int *active)
{
    if (dev < 0 || dev >= ndev)
        return E_INVALID_DEVICE;
    *flags = 0;
    *active = __atomic_load_n(&ctx_used[dev], __ATOMIC_RELAXED);
    return OK;
}

/* FAKECUDA_QUERY_NEEDS_CTX=1: pointer queries want a current context, as a
 * driver without unified addressing would. */
static int query_needs_ctx(void)
{
    const char *v = getenv("FAKECUDA_QUERY_NEEDS_CTX");
    return v && v[0] == '1' && (ncur == 0 || !cur[ncur - 1]);
}
int fk_ctx_push(struct fctx *c)
{
    if (!c || c->magic != 0xC0DA || ncur == 16)
        return E_INVALID_CONTEXT;
    __atomic_store_n(&ctx_used[c->dev], 1, __ATOMIC_RELAXED);
    cur[ncur++] = c;
    return OK;
}
int fk_ctx_pop(struct fctx **c)
{
    if (ncur == 0)
        return E_INVALID_CONTEXT;
    *c = cur[--ncur];
    return OK;
}
int fk_ctx_get_current(struct fctx **c) { *c = ncur ? cur[ncur - 1] : NULL; return OK; }
int fk_ctx_set_current(struct fctx *c)
{
    if (ncur == 0)
        ncur = 1;
    cur[ncur - 1] = c;
    return OK;
}

/* ---- memory --------------------------------------------------------------- */
int fk_mem_alloc(dptr *out, size_t size)
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
int fk_mem_free(dptr p) { return free_alloc((void *)(uintptr_t)p, 1); }

int fk_host_alloc(void **out, size_t size, unsigned flags)
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
int fk_free_host(void *p) { return free_alloc(p, 0); }

int fk_get_attributes(unsigned n, int *attrs, void **data, dptr p)
{
    FAILPOINT("cuPointerGetAttributes");
    if (query_needs_ctx())
        return E_INVALID_CONTEXT;
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

int fk_get_attribute(void *data, int attr, dptr p)
{
    FAILPOINT("cuPointerGetAttribute");
    if (query_needs_ctx())
        return E_INVALID_CONTEXT;
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
        if (len > stat_copy_max) /* branch gdr */
            stat_copy_max = len;
    }
    pthread_mutex_unlock(&mu);
    return rc;
}
int fk_dtoh(void *dst, dptr src, size_t len)
{
    return copy_now(dst, (const char *)(uintptr_t)src, len, (uintptr_t)src, "cuMemcpyDtoH");
}
int fk_htod(dptr dst, const void *src, size_t len)
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
int fk_dtoh_async(void *dst, dptr src, size_t len, struct fstream *s)
{
    return copy_async(dst, (const char *)(uintptr_t)src, len, s, (uintptr_t)src,
                      "cuMemcpyDtoHAsync");
}
int fk_htod_async(dptr dst, const void *src, size_t len, struct fstream *s)
{
    return copy_async((char *)(uintptr_t)dst, src, len, s, (uintptr_t)dst,
                      "cuMemcpyHtoDAsync");
}


/* ---- branch gdr: allocations made elsewhere (fakecuda_ipc.c) ---------------- */
void fk_link(struct falloc *a)
{
    pthread_mutex_lock(&mu);
    a->id = next_id++;
    a->next = allocs;
    allocs = a;
    pthread_mutex_unlock(&mu);
}

struct falloc *fk_unlink(char *addr)
{
    pthread_mutex_lock(&mu);
    struct falloc **pp = &allocs;
    while (*pp && (*pp)->addr != addr)
        pp = &(*pp)->next;
    struct falloc *a = *pp;
    if (a)
        *pp = a->next;
    pthread_mutex_unlock(&mu);
    return a;
}

/* Test hook (branch gdr): the largest synchronous copy so far, in bytes. */
EXPORT size_t fakecuda_copy_max(void)
{
    pthread_mutex_lock(&mu);
    size_t n = stat_copy_max;
    pthread_mutex_unlock(&mu);
    return n;
}

/* ---- branch plugs: device-to-device copies (DDP's device buckets) ---------- */
static unsigned long long stat_dtod;

int fk_dtod_async(dptr dst, dptr src, size_t len, struct fstream *s)
{
    pthread_mutex_lock(&mu);
    int both = find((uintptr_t)dst) && find((uintptr_t)src) &&
               find((uintptr_t)dst)->fd >= 0 && find((uintptr_t)src)->fd >= 0;
    if (both)
        stat_dtod++;
    pthread_mutex_unlock(&mu);
    if (!both)
        return E_INVALID_VALUE; /* both sides must be device memory */
    return copy_async((char *)(uintptr_t)dst, (const char *)(uintptr_t)src, len, s,
                      (uintptr_t)dst, "cuMemcpyDtoDAsync");
}

/* Test hook: device-to-device copies queued so far, and whether `p` lies in
 * device memory (1), pinned host memory of the fake (0) or neither (-1). */
EXPORT unsigned long long fakecuda_dtod_copies(void)
{
    pthread_mutex_lock(&mu);
    unsigned long long n = stat_dtod;
    pthread_mutex_unlock(&mu);
    return n;
}

EXPORT int fakecuda_mem_kind(const void *p)
{
    pthread_mutex_lock(&mu);
    struct falloc *a = find((uintptr_t)p);
    int kind = a ? (a->fd >= 0 ? 1 : 0) : -1;
    pthread_mutex_unlock(&mu);
    return kind;
}
