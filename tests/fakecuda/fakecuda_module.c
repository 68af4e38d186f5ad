/*
 * fakecuda_module.c - the fake libcuda's modules and kernel launches
 * (branch kernels). It cannot run a fatbin, so:
 *  - cuModuleLoadData accepts exactly the image libgx embeds (the fatbin nvcc
 *    built, or the placeholder of a build without nvcc): this file links the
 *    same bytes (gx_kernels_image) and compares; anything else is
 *    CUDA_ERROR_INVALID_IMAGE;
 *  - cuModuleGetFunction knows gx's kernel names (gpudirect/kernels/
 *    gx_kernel_names.h); FAKECUDA_NO_KERNEL=<name> makes one missing;
 *  - cuLaunchKernel runs the kernel's CPU twin, the very element functions
 *    of gx_kernel_ops.h that nvcc compiles into the kernels, on the fake's
 *    RW aliases, queued in stream order: the result lands when the stream
 *    (or an event after it) is synchronized, like the async copies. Every
 *    buffer must be fake device memory of the current context or pinned
 *    host memory from cuMemHostAlloc (a real GPU faults on pageable memory).
 */
#include "fakecuda_internal.h"
#include "gpudirect/kernels/gx_kernel_names.h"
#include "gpudirect/kernels/gx_kernel_ops.h"

#define E_INVALID_IMAGE 200
#define E_INVALID_HANDLE 400
#define E_NOT_FOUND 500
#define E_ILLEGAL_ADDRESS 700

extern const unsigned char gx_kernels_image_start[];
extern const unsigned char gx_kernels_image_end[];

typedef void (*red_fn)(void *d, const void *a, const void *b, size_t n);
typedef void (*div_fn)(void *d, size_t n, int nranks);

#define FK_REDUCE(op, t, T)                                                                \
    static void k_##op##_##t(void *d_, const void *a_, const void *b_, size_t n)           \
    {                                                                                      \
        T *d = d_;                                                                         \
        const T *a = a_, *b = b_;                                                          \
        for (size_t i = 0; i < n; i++)                                                     \
            d[i] = gxk_##op##_##t(a[i], b[i]);                                             \
    }
#define FK_ALL(t, T, size)                                                                 \
    FK_REDUCE(sum, t, T) FK_REDUCE(prod, t, T) FK_REDUCE(min, t, T) FK_REDUCE(max, t, T)   \
    static void k_div_##t(void *d_, size_t n, int nranks)                                  \
    {                                                                                      \
        T *d = d_;                                                                         \
        for (size_t i = 0; i < n; i++)                                                     \
            d[i] = gxk_div_##t(d[i], nranks);                                              \
    }
GXK_TYPES(FK_ALL)

static const struct kdef { const char *name; size_t size; red_fn red; div_fn div; } kdefs[] = {
#define FK_ROW(t, T, size)                                                                 \
    { "gx_reduce_sum_" #t, size, k_sum_##t, NULL },                                        \
    { "gx_reduce_prod_" #t, size, k_prod_##t, NULL },                                      \
    { "gx_reduce_min_" #t, size, k_min_##t, NULL },                                        \
    { "gx_reduce_max_" #t, size, k_max_##t, NULL },                                        \
    { "gx_divide_" #t, size, NULL, k_div_##t },
    GXK_TYPES(FK_ROW)
};
#define NKDEFS (sizeof(kdefs) / sizeof(kdefs[0]))

struct fmodule { int magic; struct ffunc { int magic; const struct kdef *k; } f[NKDEFS]; };
static unsigned long long launches;

EXPORT unsigned long long fakecuda_launches(void)
{
    return __atomic_load_n(&launches, __ATOMIC_RELAXED);
}

/* The image libgx embeds, and nothing else: fatbin magic + the size its
 * header gives, or the placeholder's magic, then every byte. */
static int image_ok(const unsigned char *p)
{
    size_t len = (size_t)(gx_kernels_image_end - gx_kernels_image_start);
    uint32_t magic;
    memcpy(&magic, p, sizeof(magic));
    if (magic == GXK_FATBIN_MAGIC) {
        unsigned long long fat;
        memcpy(&fat, p + 8, sizeof(fat));
        if (16 + fat != len)
            return 0;
    } else if (memcmp(p, GXK_PLACEHOLDER_MAGIC, 16) != 0) {
        return 0;
    }
    return memcmp(p, gx_kernels_image_start, len) == 0;
}

int fk_module_load(struct fmodule **m, const void *image)
{
    FAILPOINT("cuModuleLoadData");
    NEED_CTX();
    if (!m || !image || !image_ok(image))
        return E_INVALID_IMAGE;
    *m = calloc(1, sizeof(**m));
    if (!*m)
        return 2;
    (*m)->magic = 0x30D;
    return OK;
}

int fk_module_unload(struct fmodule *m)
{
    if (!m || m->magic != 0x30D)
        return E_INVALID_HANDLE;
    m->magic = 0;
    free(m);
    return OK;
}

int fk_module_get_function(struct ffunc **f, struct fmodule *m, const char *name)
{
    FAILPOINT("cuModuleGetFunction");
    NEED_CTX();
    if (!m || m->magic != 0x30D)
        return E_INVALID_HANDLE;
    const char *missing = getenv("FAKECUDA_NO_KERNEL");
    for (size_t i = 0; i < NKDEFS; i++) {
        if (strcmp(kdefs[i].name, name) != 0)
            continue;
        if (missing && strcmp(missing, name) == 0)
            break;
        m->f[i] = (struct ffunc){ 0xF00, &kdefs[i] };
        *f = &m->f[i];
        return OK;
    }
    return E_NOT_FOUND;
}

struct job { const struct kdef *k; char *d; const char *a, *b; size_t n; int nranks; };

static void run_job(void *arg)
{
    struct job *j = arg;
    if (j->k->red)
        j->k->red(j->d, j->a, j->b, j->n);
    else
        j->k->div(j->d, j->n, j->nranks);
    free(j);
}

/* The fake's view of a kernel argument: fake memory only (device memory of
 * the current context, or pinned host memory). With mu held. */
static char *arg_view(void *p, size_t len, int *rc)
{
    struct falloc *a = find((uintptr_t)p);
    char *v = a ? view((uintptr_t)p, len) : NULL;
    if (!v)
        *rc = E_ILLEGAL_ADDRESS;
    else if (a->fd >= 0 && a->ctx != cur[ncur - 1])
        *rc = E_INVALID_VALUE; /* another context's memory, no peer access */
    return v;
}

int fk_launch_kernel(struct ffunc *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                     unsigned by, unsigned bz, unsigned shared, struct fstream *s,
                     void **params, void **extra)
{
    FAILPOINT("cuLaunchKernel");
    NEED_CTX();
    if (!f || f->magic != 0xF00)
        return E_INVALID_HANDLE;
    if (!params || extra || !gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024)
        return E_INVALID_VALUE;
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return 2;
    j->k = f->k;
    void *d, *a = NULL, *b = NULL;
    unsigned long long n;
    memcpy(&d, params[0], sizeof(d));
    if (f->k->red) {
        memcpy(&a, params[1], sizeof(a));
        memcpy(&b, params[2], sizeof(b));
        memcpy(&n, params[3], sizeof(n));
    } else {
        memcpy(&n, params[1], sizeof(n));
        memcpy(&j->nranks, params[2], sizeof(j->nranks));
    }
    j->n = (size_t)n;
    size_t len = j->n * f->k->size;
    int rc = OK;
    pthread_mutex_lock(&mu);
    j->d = arg_view(d, len, &rc);
    if (f->k->red) {
        j->a = arg_view(a, len, &rc);
        j->b = arg_view(b, len, &rc);
    }
    if (rc == OK && n)
        rc = enqueue(s, (struct fop){ .kind = OP_HOST, .fn = run_job, .arg = j });
    if (rc == OK)
        launches++;
    pthread_mutex_unlock(&mu);
    if (rc != OK || !n)
        free(j);
    return rc;
}

const char *fk_module_error_name(int r)
{
    switch (r) {
    case E_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case E_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case E_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case E_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    default: return NULL;
    }
}
