/*
 * fakenccl.c - a stand-in libnccl for tests (GX_NCCL_LIB), never installed.
 * Built against the real nccl.h when the build found one (so the ABI of what
 * it exports is NCCL's, and the static asserts below check gx's own
 * declarations in gpudirect/nccl_api.h against it), else against the
 * declarations in fakenccl_abi.h.
 *
 * Collectives among the processes of one node really move the bytes: a
 * communicator is a shared-memory header named by the unique id; each
 * collective is queued on the caller's fake CUDA stream (tests/fakecuda's
 * fakecuda_enqueue_poll hook), and when the stream gets there the rank
 * publishes its send buffer in a shared-memory segment of its own, waits for
 * every rank's, and writes the result into its receive buffer (through
 * fakecuda's writable view of device memory). So, as with the real library,
 * nothing lands before the stream runs (synchronize, or cuStreamQuery, which
 * runs what is ready), and a peer that never comes leaves the stream busy.
 * Reductions take the ranks in order 0..n-1 (each step rounded for f16/bf16).
 *
 * Fault injection: FAKENCCL_FAIL=<call> makes that call return
 * ncclSystemError; FAKENCCL_HANG=<call> makes it never complete (init
 * blocks, a collective stays on the stream until ncclCommAbort);
 * FAKENCCL_ASYNC=<call> leaves the collective pending and reports
 * ncclRemoteError from ncclCommGetAsyncError.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fakenccl_abi.h"
#include "fakenccl_reduce.h"

#define EXPORT __attribute__((visibility("default")))
#define MAXR 64
#define MAGIC 0x66616b656e63636cull

struct hdr {
    uint64_t magic;
    _Atomic int joined;
    _Atomic uint64_t pub[MAXR];  /* last collective each rank published */
    _Atomic uint64_t done[MAXR]; /* last collective each rank finished reading */
};

struct seg { uint64_t seq; struct seg *next; };

struct ncclComm {
    struct hdr *h;
    int nranks, rank;
    char name[96];
    uint64_t seq;
    atomic_int aborted;
    atomic_int async_err;
    atomic_int refs;             /* the owner's + one per queued collective */
    pthread_mutex_t mu;          /* guards segs */
    struct seg *segs;            /* my published segments not yet unlinked */
};

struct job {
    struct ncclComm *c;
    uint64_t seq;
    int kind, dt, op, root, state, hang, async;
    const char *send;
    char *recv;
    size_t count;
};
enum { K_ALLREDUCE, K_BROADCAST, K_REDUCE, K_ALLGATHER, K_REDUCE_SCATTER };

static atomic_ullong calls_landed;
static int (*enqueue_poll)(void *s, int (*poll)(void *), void *arg);
static void *(*dev_view)(unsigned long long p, size_t len);

static int env_is(const char *var, const char *call)
{
    const char *f = getenv(var);
    return f && strcmp(f, call) == 0;
}

static int hooks(void)
{
    if (enqueue_poll && dev_view)
        return 1;
    const char *lib = getenv("GX_CUDA_LIB");
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (!h)
        return 0;
    *(void **)&enqueue_poll = dlsym(h, "fakecuda_enqueue_poll");
    *(void **)&dev_view = dlsym(h, "fakecuda_view");
    return enqueue_poll && dev_view;
}

static void seg_name(const struct ncclComm *c, uint64_t seq, int rank, char *buf, size_t len)
{
    snprintf(buf, len, "/%s-%llu-%d", c->name, (unsigned long long)seq, rank);
}

static uint64_t min_done(const struct ncclComm *c)
{
    uint64_t m = UINT64_MAX;
    for (int r = 0; r < c->nranks; r++) {
        uint64_t d = atomic_load(&c->h->done[r]);
        m = d < m ? d : m;
    }
    return m;
}

/* Unlink my segments every rank has read (all of them with `all`). */
static void reap(struct ncclComm *c, int all)
{
    uint64_t m = all ? UINT64_MAX : min_done(c);
    pthread_mutex_lock(&c->mu);
    for (struct seg **p = &c->segs; *p;) {
        if ((*p)->seq <= m) {
            struct seg *s = *p;
            char n[160];
            seg_name(c, s->seq, c->rank, n, sizeof(n));
            shm_unlink(n);
            *p = s->next;
            free(s);
        } else {
            p = &(*p)->next;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* Drop a reference: the last one unmaps and frees. */
static void unref(struct ncclComm *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    munmap(c->h, sizeof(struct hdr));
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static size_t send_bytes(const struct job *j)
{
    size_t b = j->count * fk_dt_size(j->dt);
    if (j->kind == K_BROADCAST)
        return j->c->rank == j->root ? b : 0;
    return j->kind == K_REDUCE_SCATTER ? b * (size_t)j->c->nranks : b;
}

static int publish(struct job *j)
{
    struct ncclComm *c = j->c;
    size_t len = send_bytes(j);
    if (len) {
        char n[160];
        seg_name(c, j->seq, c->rank, n, sizeof(n));
        int fd = shm_open(n, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
            return -1;
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        const void *src = dev_view((unsigned long long)(uintptr_t)j->send, len);
        if (m == MAP_FAILED || !src)
            return -1;
        memcpy(m, src, len);
        munmap(m, len);
        struct seg *s = calloc(1, sizeof(*s));
        pthread_mutex_lock(&c->mu);
        s->seq = j->seq;
        s->next = c->segs;
        c->segs = s;
        pthread_mutex_unlock(&c->mu);
    }
    atomic_store(&c->h->pub[c->rank], j->seq);
    return 0;
}

static const char *peer_data(const struct job *j, int r, size_t len, void **map)
{
    char n[160];
    seg_name(j->c, j->seq, r, n, sizeof(n));
    int fd = shm_open(n, O_RDONLY, 0);
    if (fd < 0)
        return NULL;
    *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    return *map == MAP_FAILED ? NULL : *map;
}

/* Read every rank's segment and write my result. */
static int land(struct job *j)
{
    struct ncclComm *c = j->c;
    int n = c->nranks, me = c->rank;
    size_t es = fk_dt_size(j->dt), b = j->count * es;
    size_t out = j->kind == K_ALLGATHER ? b * (size_t)n : b;
    int writes = j->kind != K_REDUCE || me == j->root;
    char *res = malloc(out ? out : 1);
    if (!res)
        return -1;
    int rc = 0;
    for (int r = 0; r < n && rc == 0; r++) {
        if (j->kind == K_BROADCAST && r != j->root)
            continue;
        size_t len = j->kind == K_BROADCAST ? b : (j->kind == K_REDUCE_SCATTER ? b * n : b);
        void *map = NULL;
        const char *d = len ? peer_data(j, r, len, &map) : "";
        if (!d) {
            rc = -1;
            break;
        }
        if (j->kind == K_BROADCAST)
            memcpy(res, d, b);
        else if (j->kind == K_ALLGATHER)
            memcpy(res + (size_t)r * b, d, b);
        else {
            const char *blk = j->kind == K_REDUCE_SCATTER ? d + (size_t)me * b : d;
            if (r == 0)
                memcpy(res, blk, b);
            else
                fk_reduce(j->dt, j->op, res, blk, j->count);
        }
        if (len)
            munmap(map, len);
    }
    if (rc == 0 && j->op == 4 /* avg */ && j->kind != K_BROADCAST && j->kind != K_ALLGATHER)
        fk_divide(j->dt, res, j->count, n);
    if (rc == 0 && writes && out) {
        char *dst = dev_view((unsigned long long)(uintptr_t)j->recv, out);
        if (dst)
            memcpy(dst, res, out);
        else
            rc = -1;
    }
    free(res);
    atomic_store(&c->h->done[me], j->seq);
    return rc;
}

/* fakecuda runs this when the stream reaches the collective: 1 when done. */
static int job_poll(void *arg)
{
    struct job *j = arg;
    struct ncclComm *c = j->c;
    if (atomic_load(&c->aborted)) {
        free(j);
        unref(c);
        return 1;
    }
    if (j->hang)
        return 0;
    if (j->async) {
        atomic_store(&c->async_err, ncclRemoteError);
        return 0;
    }
    if (j->state == 0) {
        if (publish(j) != 0) {
            atomic_store(&c->async_err, ncclSystemError);
            j->state = 2;
            return 0;
        }
        j->state = 1;
    }
    if (j->state == 2)
        return 0;
    for (int r = 0; r < c->nranks; r++)
        if (atomic_load(&c->h->pub[r]) < j->seq)
            return 0;
    if (land(j) != 0) {
        atomic_store(&c->async_err, ncclSystemError);
        j->state = 2;
        return 0;
    }
    reap(c, 0);
    free(j);
    atomic_fetch_add(&calls_landed, 1);
    unref(c);
    return 1;
}

/* Test hook: collectives this process completed through the fake. */
EXPORT unsigned long long fakenccl_calls(void)
{
    return atomic_load(&calls_landed);
}

static ncclResult_t post(int kind, const char *call, const void *s, void *r, size_t count,
                         ncclDataType_t dt, int op, int root, ncclComm_t c, cudaStream_t st)
{
    if (env_is("FAKENCCL_FAIL", call))
        return ncclSystemError;
    if (!c || atomic_load(&c->aborted) || fk_dt_size((int)dt) == 0 || !hooks())
        return ncclInvalidArgument;
    if (kind != K_BROADCAST && kind != K_ALLGATHER && (op < 0 || op > 4))
        return ncclInvalidArgument;
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return ncclSystemError;
    *j = (struct job){ .c = c, .seq = ++c->seq, .kind = kind, .dt = (int)dt, .op = op,
                       .root = root, .send = s, .recv = r, .count = count,
                       .hang = env_is("FAKENCCL_HANG", call),
                       .async = env_is("FAKENCCL_ASYNC", call) };
    atomic_fetch_add(&c->refs, 1);
    if (enqueue_poll((void *)st, job_poll, j) != 0) {
        free(j);
        unref(c);
        return ncclSystemError;
    }
    return ncclSuccess;
}

EXPORT ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static atomic_uint counter;
    if (env_is("FAKENCCL_FAIL", "ncclGetUniqueId"))
        return ncclSystemError;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, sizeof(*id));
    snprintf(id->internal, sizeof(id->internal), "fakenccl-%d-%u-%lx", (int)getpid(),
             atomic_fetch_add(&counter, 1), (unsigned long)ts.tv_nsec);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
    if (env_is("FAKENCCL_FAIL", "ncclCommInitRank"))
        return ncclSystemError;
    while (env_is("FAKENCCL_HANG", "ncclCommInitRank"))
        sleep(1);
    if (nranks < 1 || nranks > MAXR || rank < 0 || rank >= nranks ||
        strncmp(id.internal, "fakenccl-", 9) != 0 || !hooks())
        return ncclInvalidArgument;
    struct ncclComm *c = calloc(1, sizeof(*c));
    if (!c)
        return ncclSystemError;
    snprintf(c->name, sizeof(c->name), "%.90s", id.internal);
    c->nranks = nranks;
    c->rank = rank;
    atomic_store(&c->refs, 1);
    pthread_mutex_init(&c->mu, NULL);
    char n[160];
    snprintf(n, sizeof(n), "/%s", c->name);
    int fd = shm_open(n, O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(struct hdr)) != 0) {
        free(c);
        return ncclSystemError;
    }
    c->h = mmap(NULL, sizeof(struct hdr), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->h == MAP_FAILED) {
        free(c);
        return ncclSystemError;
    }
    atomic_fetch_add(&c->h->joined, 1);
    while (atomic_load(&c->h->joined) < nranks) /* init is collective, as NCCL's */
        usleep(200);
    if (rank == 0)
        shm_unlink(n);
    *out = c;
    return ncclSuccess;
}

static void release(struct ncclComm *c, int wait)
{
    /* My segments stay until every rank has read them (bounded: 10 s). */
    for (int i = 0; wait && i < 100000 && min_done(c) < c->seq; i++)
        usleep(100);
    reap(c, 1);
}

EXPORT ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    if (!c)
        return ncclInvalidArgument;
    release(c, 1);
    unref(c);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommAbort(ncclComm_t c)
{
    if (!c)
        return ncclInvalidArgument;
    /* Queued collectives still point at it: they see `aborted`, finish
     * without landing and drop their references; the last one frees it. */
    atomic_store(&c->aborted, 1);
    release(c, 0);
    /* A peer that died leaves its segments behind: unlink every rank's from
     * the oldest one anyone may not have finished with (best effort). */
    uint64_t lo = min_done(c);
    for (uint64_t q = lo ? lo : 1; q <= c->seq + 1; q++)
        for (int r = 0; r < c->nranks; r++) {
            char n[160];
            seg_name(c, q, r, n, sizeof(n));
            shm_unlink(n);
        }
    unref(c);
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e)
{
    if (!c || !e)
        return ncclInvalidArgument;
    *e = (ncclResult_t)atomic_load(&c->async_err);
    return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error (fakenccl)";
    case ncclSystemError: return "injected system error (fakenccl)";
    case ncclInvalidArgument: return "invalid argument (fakenccl)";
    case ncclRemoteError: return "injected remote error (fakenccl)";
    default: return "error (fakenccl)";
    }
}

EXPORT ncclResult_t ncclGroupStart(void)
{
    return env_is("FAKENCCL_FAIL", "ncclGroupStart") ? ncclSystemError : ncclSuccess;
}

EXPORT ncclResult_t ncclGroupEnd(void)
{
    return env_is("FAKENCCL_FAIL", "ncclGroupEnd") ? ncclSystemError : ncclSuccess;
}

EXPORT ncclResult_t ncclAllReduce(const void *s, void *r, size_t count, ncclDataType_t dt,
                                  ncclRedOp_t op, ncclComm_t c, cudaStream_t st)
{
    return post(K_ALLREDUCE, "ncclAllReduce", s, r, count, dt, (int)op, -1, c, st);
}

EXPORT ncclResult_t ncclBroadcast(const void *s, void *r, size_t count, ncclDataType_t dt,
                                  int root, ncclComm_t c, cudaStream_t st)
{
    return post(K_BROADCAST, "ncclBroadcast", s, r, count, dt, 0, root, c, st);
}

EXPORT ncclResult_t ncclReduce(const void *s, void *r, size_t count, ncclDataType_t dt,
                               ncclRedOp_t op, int root, ncclComm_t c, cudaStream_t st)
{
    return post(K_REDUCE, "ncclReduce", s, r, count, dt, (int)op, root, c, st);
}

EXPORT ncclResult_t ncclAllGather(const void *s, void *r, size_t sendcount, ncclDataType_t dt,
                                  ncclComm_t c, cudaStream_t st)
{
    return post(K_ALLGATHER, "ncclAllGather", s, r, sendcount, dt, 0, -1, c, st);
}

EXPORT ncclResult_t ncclReduceScatter(const void *s, void *r, size_t recvcount,
                                      ncclDataType_t dt, ncclRedOp_t op, ncclComm_t c,
                                      cudaStream_t st)
{
    return post(K_REDUCE_SCATTER, "ncclReduceScatter", s, r, recvcount, dt, (int)op, -1, c, st);
}
