/*
 * fakecuda_stream.c - the fake libcuda's streams, events, host functions,
 * dmabuf export and cuGetProcAddress_v2 (fakecuda.c says what it proves).
 */
#include "fakecuda_internal.h"

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

static unsigned long long stat_dmabuf_exports; /* branch gdr */

/* Test hook (branch gdr): dmabuf fds handed out so far (each one is a
 * registration of device memory with the NIC). */
EXPORT unsigned long long fakecuda_dmabuf_exports(void)
{
    pthread_mutex_lock(&mu);
    unsigned long long n = stat_dmabuf_exports;
    pthread_mutex_unlock(&mu);
    return n;
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
    if (fd >= 0)
        stat_dmabuf_exports++; /* branch gdr */
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
    default: *s = fk_module_error_name(r); return *s ? OK : E_INVALID_VALUE;
    }
}

/* ---- nccl branch: cuStreamQuery and fakenccl's hooks ------------------------------ */
/* cuStreamQuery runs what is ready at the stream's head without blocking (as
 * a GPU progresses on its own): copies, host functions, fakenccl collectives
 * whose peers are there. CUDA_ERROR_NOT_READY while anything is left. */
static int fk_stream_query(struct fstream *s)
{
    FAILPOINT("cuStreamQuery");
    NEED_CTX();
    pthread_mutex_lock(&mu);
    if (!s)
        s = &legacy;
    while (!s->running && s->nops) {
        struct fop *o = &s->ops[0];
        if (o->kind == OP_POLL) {
            s->running = 1;
            pthread_mutex_unlock(&mu);
            int done = o->poll(o->arg);
            pthread_mutex_lock(&mu);
            s->running = 0;
            if (!done)
                break;
            memmove(s->ops, s->ops + 1, (s->nops - 1) * sizeof(*s->ops));
            s->nops--;
            s->done++;
        } else {
            flush(s, s->done + 1);
        }
    }
    int idle = s->done == s->submitted;
    pthread_mutex_unlock(&mu);
    return idle ? OK : 600;
}

/* Hook for fakenccl: queue `poll(arg)` on stream `s`; the stream runs it once
 * the work before it is done, again and again until it returns 1 (a
 * synchronize waits for that; cuStreamQuery asks once). */
EXPORT int fakecuda_enqueue_poll(void *s, int (*poll)(void *), void *arg)
{
    pthread_mutex_lock(&mu);
    int rc = enqueue(s, (struct fop){ .kind = OP_POLL, .poll = poll, .arg = arg });
    pthread_mutex_unlock(&mu);
    return rc;
}

/* Hook for fakenccl: the fake's writable view of [p, p+len) (device memory
 * through its alias, host memory as is); NULL past an allocation's end. */
EXPORT void *fakecuda_view(unsigned long long p, size_t len)
{
    pthread_mutex_lock(&mu);
    char *v = view((uintptr_t)p, len);
    pthread_mutex_unlock(&mu);
    return v;
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
    { "cuDevicePrimaryCtxGetState", 7000, (void *)fk_primary_get_state },
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
    /* nccl branch */
    { "cuStreamQuery", 2000, (void *)fk_stream_query },
    /* branch kernels: gx's CUDA reduction kernels (fakecuda_module.c) */
    { "cuModuleLoadData", 2000, (void *)fk_module_load },
    { "cuModuleGetFunction", 2000, (void *)fk_module_get_function },
    { "cuLaunchKernel", 4000, (void *)fk_launch_kernel },
    { "cuModuleUnload", 2000, (void *)fk_module_unload },
    /* branch gdr: CUDA IPC handles, device-to-device copies */
    { "cuIpcGetMemHandle", 4010, (void *)fk_ipc_get },
    { "cuIpcOpenMemHandle", 11000, (void *)fk_ipc_open },    /* _v2 */
    { "cuIpcCloseMemHandle", 4010, (void *)fk_ipc_close },
    { "cuMemcpyDtoD", 3020, (void *)fk_dtod },               /* _v2 */
    /* branch plugs: DDP's device buckets */
    { "cuMemcpyDtoDAsync", 3020, (void *)fk_dtod_async },    /* _v2 */
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
