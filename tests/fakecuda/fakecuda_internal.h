/*
 * fakecuda_internal.h - what the files of the fake libcuda share
 * (fakecuda.c: devices, contexts, memory, copies; fakecuda_stream.c:
 * streams, events, host functions, dmabuf, cuGetProcAddress). Tests only.
 */
#ifndef GX_FAKECUDA_INTERNAL_H
#define GX_FAKECUDA_INTERNAL_H

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
enum { OP_COPY, OP_WAIT, OP_HOST, OP_POLL /* nccl branch: fakenccl's collectives */ };
struct fop {
    int kind;
    char *dst;
    const char *src;
    size_t len;
    struct fstream *other;
    unsigned long long ticket;
    void (*fn)(void *); /* OP_HOST */
    void *arg;
    int (*poll)(void *); /* OP_POLL: 1 when done (runs without the lock) */
};
struct fstream {
    struct fop *ops;
    size_t nops, cap;
    unsigned long long submitted, done;
    int running; /* an op taken off the queue is still running (a host function) */
};
/* CUipcMemHandle (64 bytes): the exporter's memfd, reachable from another
 * process of the same user as /proc/<pid>/fd/<fd>. */
struct fk_ipc_handle { unsigned char data[64]; };
struct fevent { struct fstream *s; unsigned long long ticket; };

extern pthread_mutex_t mu;          /* guards everything below */
extern struct fstream legacy;       /* the NULL stream */
extern _Thread_local struct fctx *cur[16];
extern _Thread_local int ncur;

int failing(const char *name);
#define FAILPOINT(name) do { if (failing(name)) return E_UNKNOWN; } while (0)
#define NEED_CTX() do { if (ncur == 0 || !cur[ncur - 1]) return E_INVALID_CONTEXT; } while (0)

struct falloc *find(uintptr_t p);
char *view(uintptr_t p, size_t len);
void flush(struct fstream *s, unsigned long long upto);
int enqueue(struct fstream *s, struct fop o);

int fk_init(unsigned flags);
int fk_driver_version(int *v);
int fk_device_count(int *n);
int fk_device_get(int *dev, int ord);
int fk_device_name(char *name, int len, int dev);
int fk_total_mem(size_t *b, int dev);
int fk_bus_id(char *bus, int len, int dev);
int fk_primary_retain(struct fctx **c, int dev);
int fk_primary_release(int dev);
int fk_primary_get_state(int dev, unsigned *flags, int *active);
int fk_ctx_push(struct fctx *c);
int fk_ctx_pop(struct fctx **c);
int fk_ctx_get_current(struct fctx **c);
int fk_ctx_set_current(struct fctx *c);
int fk_mem_alloc(dptr *out, size_t size);
int fk_mem_free(dptr p);
int fk_host_alloc(void **out, size_t size, unsigned flags);
int fk_free_host(void *p);
int fk_get_attributes(unsigned n, int *attrs, void **data, dptr p);
int fk_get_attribute(void *data, int attr, dptr p);
int fk_dtoh(void *dst, dptr src, size_t len);
int fk_htod(dptr dst, const void *src, size_t len);
int fk_dtoh_async(void *dst, dptr src, size_t len, struct fstream *s);
int fk_htod_async(dptr dst, const void *src, size_t len, struct fstream *s);
int fk_dtod_async(dptr dst, dptr src, size_t len, struct fstream *s); /* branch plugs */

/* fakecuda_module.c (branch kernels): modules and launches of gx's kernels */
struct fmodule;
struct ffunc;
int fk_module_load(struct fmodule **m, const void *image);
int fk_module_unload(struct fmodule *m);
int fk_module_get_function(struct ffunc **f, struct fmodule *m, const char *name);
int fk_launch_kernel(struct ffunc *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                     unsigned by, unsigned bz, unsigned shared, struct fstream *s,
                     void **params, void **extra);
const char *fk_module_error_name(int r);

/* branch gdr: CUDA IPC (fakecuda_ipc.c) */
void fk_link(struct falloc *a);
struct falloc *fk_unlink(char *addr);
int fk_ipc_get(void *handle, dptr p);
int fk_ipc_open(dptr *out, struct fk_ipc_handle h, unsigned flags);
int fk_ipc_close(dptr p);
int fk_dtod(dptr dst, dptr src, size_t len);

#endif
