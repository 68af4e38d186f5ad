/*
 * net_gx_gpu.c - CUDA memory in the NCCL net plugin.
 *
 * Owns: the per-device answer to "may NCCL hand this device CUDA buffers"
 * (getProperties' ptrSupport), and the registration of CUDA buffers
 * (regMr with NCCL_PTR_CUDA, regMrDmaBuf).
 *
 * The answer is the verbs provider's own GPUDirect RDMA verdict for that
 * HCA (gpudirect/'s gx_gdr_decide: driver, GX_NET_GDR_LEVEL, the GPU-NIC
 * path, the dmabuf probe, nvidia-peermem), asked of a domain opened on the
 * device once, so what getProperties promises is exactly what a later
 * registration does: dmabuf -> NCCL_PTR_HOST|CUDA|DMABUF, peermem ->
 * NCCL_PTR_HOST|CUDA, none -> NCCL_PTR_HOST (NCCL then stages device
 * buffers through host memory itself and never asks us to register them).
 * The tcp provider moves bytes with the CPU, so its devices are host-only.
 *
 * A CUDA registration is checked with gpudirect/'s pointer query (it must
 * be device memory, wholly inside one allocation) and handed to the
 * provider as GX_FAB_MEM_CUDA; the provider exports the dmabuf itself (for
 * regMrDmaBuf too: NCCL's fd describes the same range; we do not keep it)
 * or registers the pointer under nvidia-peermem, and flushes each receive
 * into it before completing it (verbs_flush.c), so iflush has nothing left
 * to do. The plugin never touches device memory with the CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpudirect/gpudirect.h"
#include "gx_build_config.h"
#include "plugins/nccl-net/net_gx.h"
#if GX_HAVE_VERBS
#include "fabric/verbs/verbs.h"
#endif

static pthread_mutex_t gdr_lock = PTHREAD_MUTEX_INITIALIZER;

enum gx_topo_path gxn_dev_gpu_path(const struct gxn_dev *d)
{
#if GX_HAVE_VERBS
    if (strcmp(d->prov->name, "verbs") == 0) {
        char hca[64];
        snprintf(hca, sizeof(hca), "%s", d->fab_device);
        char *colon = strchr(hca, ':');
        if (colon)
            *colon = '\0';
        return verbs_gdr_nearest_gpu_path(hca);
    }
#endif
    (void)d;
    return GX_TOPO_PATH_UNKNOWN;
}

/* The verdict for `d`, decided once (under gdr_lock). */
static int decide_locked(struct gxn_dev *d)
{
    if (d->gdr_decided)
        return d->gdr;
    d->gdr_decided = true;
    d->gdr = GX_GDR_NONE;
    if (strcmp(d->prov->name, "verbs") != 0) {
        snprintf(d->gdr_why, sizeof(d->gdr_why), "%s: the %s provider moves bytes with the "
                 "CPU: host memory only (NCCL stages CUDA buffers)", d->name, d->prov->name);
        return d->gdr;
    }
#if GX_HAVE_VERBS
    struct gx_fab_domain_attr attr = GX_FAB_DOMAIN_ATTR_INIT;
    attr.device = d->fab_device[0] ? d->fab_device : NULL;
    attr.gpu_path = gxn_dev_gpu_path(d);
    struct gx_fab_domain *dom = NULL;
    int rc = gx_fab_domain_open(d->prov, &attr, &dom);
    if (rc != GX_OK) {
        snprintf(d->gdr_why, sizeof(d->gdr_why), "%s: cannot open a domain to ask about "
                 "GPUDirect RDMA (%s): host memory only", d->name, gx_strerror(rc));
        return d->gdr;
    }
    struct verbs_domain *vd = (struct verbs_domain *)dom;
    d->gdr = verbs_gdr_method(vd);
    snprintf(d->gdr_why, sizeof(d->gdr_why), "%s: %s", d->name, vd->gdr_why);
    gx_fab_domain_close(dom);
#else
    snprintf(d->gdr_why, sizeof(d->gdr_why), "%s: built without verbs", d->name);
#endif
    return d->gdr;
}

int gxn_dev_gdr(struct gxn_dev *d, const char **why)
{
    pthread_mutex_lock(&gdr_lock);
    int m = decide_locked(d);
    pthread_mutex_unlock(&gdr_lock);
    if (why)
        *why = d->gdr_why;
    return m;
}

int gxn_dev_ptr_support(struct gxn_dev *d)
{
    bool first = false;
    pthread_mutex_lock(&gdr_lock);
    first = !d->gdr_decided;
    int m = decide_locked(d);
    pthread_mutex_unlock(&gdr_lock);
    if (first)
        gxn_log(GXN_LOG_INFO, "%s", d->gdr_why);
    switch (m) {
    case GX_GDR_DMABUF:
        return GXN_PTR_HOST | GXN_PTR_CUDA | GXN_PTR_DMABUF;
    case GX_GDR_PEERMEM:
        return GXN_PTR_HOST | GXN_PTR_CUDA;
    default:
        return GXN_PTR_HOST;
    }
}

gxn_result_t gxn_reg_mr_cuda(struct gxn_comm *c, void *data, size_t size, const char *call,
                             void **mh)
{
    *mh = NULL;
    const char *why = NULL;
    if (gxn_dev_gdr(c->dev, &why) == GX_GDR_NONE)
        return gxn_fail(GX_EUNSUPPORTED, "%s of %zu bytes of CUDA memory at %p: %s (its "
                        "getProperties reports ptrSupport NCCL_PTR_HOST, so NCCL should have "
                        "staged this buffer)", call, size, data, why);
    struct gx_gpu_ptr q;
    int rc = gx_gpu_ptr_query(data, &q);
    if (rc != GX_OK)
        return gxn_fail(rc, "%s of %zu bytes at %p: the CUDA pointer query failed", call, size,
                        data);
    if (q.type != GX_GPU_MEM_CUDA)
        return gxn_fail(GX_EINVAL, "%s of %zu bytes at %p: NCCL says CUDA memory, the driver "
                        "says host memory", call, size, data);
    if ((uintptr_t)data + size > q.base + q.size)
        return gxn_fail(GX_EINVAL, "%s of %zu bytes at %p: runs past the end of its CUDA "
                        "allocation (%zu bytes at 0x%jx)", call, size, data, q.size,
                        (uintmax_t)q.base);
    struct gxn_mr *m = calloc(1, sizeof(*m));
    if (!m)
        return gxn_fail(GX_ENOMEM, "%s of %zu bytes", call, size);
    m->fd = c->fd;
    m->cuda = true;
    pthread_mutex_lock(&c->fd->lock);
    rc = size ? gx_fab_mr_reg(c->fd->dom, data, size, GX_FAB_MEM_CUDA,
                              GX_FAB_ACCESS_LOCAL | GX_FAB_ACCESS_REMOTE_WRITE, &m->mr)
              : GX_OK;
    if (rc == GX_OK)
        c->fd->refs++; /* the registration keeps the domain: NCCL may close the comm first */
    pthread_mutex_unlock(&c->fd->lock);
    if (rc != GX_OK) {
        free(m);
        return gxn_fail(rc, "%s of %zu bytes of CUDA memory at %p on %s (GPU %d)", call, size,
                        data, c->dev->name, q.device);
    }
    gxn_log(GXN_LOG_INFO, "%s: %zu bytes of GPU %d memory at %p registered on %s", call, size,
            q.device, data, c->dev->name);
    *mh = m;
    return GXN_NCCL_OK;
}
