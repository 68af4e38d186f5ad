/*
 * verbs_mr.c - memory registrations of the verbs provider, each with the
 * narrowest access it needs:
 *   send / write sources       0 (the HCA only reads them: local read is implicit)
 *   receive targets            LOCAL_WRITE | REMOTE_WRITE (peers RDMA-write them)
 *   REMOTE_READ                only when the caller asks, or on a receive
 *                              target that is flushed (GPU memory with
 *                              GX_IB_GDR_FLUSH=auto, every one with =on)
 * Buffers posted without a registration go through two registration caches
 * (one per access class), so repeated collectives register once. Device
 * memory is registered with ibv_reg_dmabuf_mr or, with nvidia-peermem, with
 * ibv_reg_mr on the device pointer, as the gpudirect service decides.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/param.h"
#include "fabric/verbs/verbs.h"
#include "gpudirect/gpudirect.h"

int verbs_access_flags(unsigned access, enum gx_fab_mem_type type, bool flush_read)
{
    int f = 0;
    if (access & GX_FAB_ACCESS_REMOTE_WRITE)
        f |= IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE; /* the spec ties them */
    if ((access & GX_FAB_ACCESS_REMOTE_READ) ||
        (flush_read && (access & GX_FAB_ACCESS_REMOTE_WRITE)))
        f |= IBV_ACCESS_REMOTE_READ;
    if (access & GX_FAB_ACCESS_REMOTE_ATOMIC)
        f |= IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC; /* the spec ties them */
    (void)type;
    return f;
}

static struct ibv_mr *reg_device(struct verbs_domain *dom, void *addr, size_t len, int flags)
{
    switch (verbs_gdr_method(dom)) {
    case GX_GDR_DMABUF: {
        int fd;
        uint64_t off;
        if (gx_gpu_dmabuf_export(addr, len, &fd, &off) != GX_OK)
            return NULL;
        struct ibv_mr *mr = dom->api->reg_dmabuf_mr(dom->pd, off, len, (uint64_t)(uintptr_t)addr,
                                                    fd, flags);
        int err = errno;
        close(fd);
        errno = err;
        return mr;
    }
    case GX_GDR_PEERMEM:
        return dom->api->reg_mr(dom->pd, addr, len, flags);
    default:
        gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "verbs: cannot register device memory: %s",
                dom->gdr_why);
        errno = EOPNOTSUPP;
        return NULL;
    }
}

int verbs_mr_reg(struct gx_fab_domain *base, void *addr, size_t len, enum gx_fab_mem_type type,
                 unsigned access, struct gx_fab_mr **out)
{
    struct verbs_domain *dom = (struct verbs_domain *)base;
    if (!out || (!addr && len) || (uintptr_t)addr + len < (uintptr_t)addr ||
        type >= GX_FAB_MEM_TYPE_COUNT)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "verbs: mr_reg: invalid range %p+%zu", addr, len);
    struct verbs_mr *m = calloc(1, sizeof(*m));
    if (!m)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: mr_reg: out of memory");
    /* A remote-write target that will be flushed is read back by our own
     * flush QP: remote read on exactly those registrations. */
    m->flush_read = (access & GX_FAB_ACCESS_REMOTE_WRITE) && verbs_flush_needed(dom, type);
    int flags = verbs_access_flags(access, type, m->flush_read);
    if (access & (GX_FAB_ACCESS_REMOTE_READ | GX_FAB_ACCESS_REMOTE_ATOMIC))
        verbs_qps_widen(dom, access); /* a one-sided window: its peers' reads reach the QPs */
    /* A zero-length registration still yields keys: register one byte. */
    void *raddr = addr ? addr : (void *)m;
    size_t rlen = len ? len : 1;
    errno = 0;
    m->mr = type == GX_FAB_MEM_CUDA ? reg_device(dom, raddr, rlen, flags)
                                    : dom->api->reg_mr(dom->pd, raddr, rlen, flags);
    if (!m->mr) {
        int err = errno;
        free(m);
        if (type == GX_FAB_MEM_CUDA && err == EOPNOTSUPP)
            return GX_EUNSUPPORTED;
        return gx_fail(err == ENOMEM || err == EAGAIN ? GX_ENOMEM : GX_ESYSTEM, GX_SUB_FABRIC,
                       "verbs: ibv_reg_mr(%p, %zu, access 0x%x) on %s failed: %s%s", addr, len,
                       flags, dom->port.dev, strerror(err),
                       err == ENOMEM || err == EAGAIN ? " (raise ulimit -l: memlock)" : "");
    }
    m->base.dom = base;
    m->base.addr = addr;
    m->base.len = len;
    m->base.type = type;
    m->base.access = access;
    *out = &m->base;
    return GX_OK;
}

int verbs_mr_dereg(struct gx_fab_mr *base)
{
    struct verbs_mr *m = (struct verbs_mr *)base;
    struct verbs_domain *dom = (struct verbs_domain *)base->dom;
    int err = dom->api->dereg_mr(m->mr);
    free(m);
    if (err)
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: ibv_dereg_mr failed: %s (a QP may "
                       "still use it)", strerror(err));
    return GX_OK;
}

int verbs_mr_pack_rkey(const struct gx_fab_mr *base, struct gx_fab_rkey *out)
{
    const struct verbs_mr *m = (const struct verbs_mr *)base;
    struct gx_verbs_rkey k = {
        .magic = GX_VERBS_RKEY_MAGIC,
        .rkey = m->mr->rkey,
        .access = base->access | (m->flush_read ? GX_VERBS_RKEY_FLUSH : 0),
        .base = (uint64_t)(uintptr_t)base->addr,
        .len = base->len,
    };
    memset(out, 0, sizeof(*out));
    out->len = sizeof(k);
    memcpy(out->bytes, &k, sizeof(k));
    return GX_OK;
}

GX_PARAM_DEFINE(gx_param_ib_rcache, "GX_IB_RCACHE", GX_PARAM_ENUM, "per-op", "per-op|cache",
                "Registrations of buffers posted without one (and the communicator's "
                "rendezvous caches): per-op registers for the operation and deregisters when "
                "it completes (safe when memory is freed and mapped again); cache keeps them "
                "for reuse (faster, but the application must not free and remap a buffer gx "
                "has seen while the communicator lives: the MR would pin the old pages).");

int verbs_rcache_open(struct verbs_domain *dom)
{
    int mode = 0;
    if (gx_param_enum(&gx_param_ib_rcache, &mode) != GX_OK)
        return GX_EINVAL;
    dom->base.rcache_per_op = mode == 0;
    int rc = gx_fab_rcache_create_domain(&dom->base, GX_FAB_ACCESS_LOCAL, &dom->rc_src);
    if (rc != GX_OK)
        return rc;
    rc = gx_fab_rcache_create_domain(&dom->base, GX_FAB_ACCESS_REMOTE_WRITE, &dom->rc_dst);
    if (rc != GX_OK) {
        gx_fab_rcache_destroy(dom->rc_src);
        dom->rc_src = NULL;
    }
    return rc;
}

void verbs_rcache_close(struct verbs_domain *dom)
{
    gx_fab_rcache_destroy(dom->rc_dst);
    gx_fab_rcache_destroy(dom->rc_src);
}

static bool mr_covers(const struct gx_fab_mr *mr, const void *buf, size_t len)
{
    uintptr_t b = (uintptr_t)buf, base = (uintptr_t)mr->addr;
    return b >= base && len <= mr->len && b - base <= mr->len - len;
}

int verbs_src_key(struct verbs_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                  uint32_t *lkey, struct gx_fab_rcache_entry **rce)
{
    *rce = NULL;
    *lkey = 0;
    if (len == 0)
        return GX_OK;
    if (mr) {
        if (mr->dom != &ep->dom->base || !mr_covers(mr, buf, len))
            return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "%s: source %p+%zu is outside its "
                           "registration %p+%zu (or of another domain)", ep->base.name, buf, len,
                           mr->addr, mr->len);
        *lkey = ((struct verbs_mr *)mr)->mr->lkey;
        return GX_OK;
    }
    int rc = gx_fab_rcache_get(ep->dom->rc_src, (void *)buf, len, GX_FAB_MEM_HOST, rce);
    if (rc != GX_OK)
        return rc;
    *lkey = ((struct verbs_mr *)gx_fab_rcache_handle(*rce))->mr->lkey;
    return GX_OK;
}

int verbs_dst_key(struct verbs_ep *ep, void *buf, size_t len, struct gx_fab_mr *mr,
                  uint32_t *rkey, struct gx_fab_rcache_entry **rce)
{
    *rce = NULL;
    *rkey = 0;
    if (len == 0 || !buf)
        return GX_OK;
    if (mr && (mr->access & GX_FAB_ACCESS_REMOTE_WRITE)) {
        if (mr->dom != &ep->dom->base || !mr_covers(mr, buf, len))
            return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "%s: receive buffer %p+%zu is outside its "
                           "registration %p+%zu", ep->base.name, buf, len, mr->addr, mr->len);
        *rkey = ((struct verbs_mr *)mr)->mr->rkey;
        return GX_OK;
    }
    /* No registration, or one without remote write: peers write receive
     * buffers, so use (or make) a remote-write registration of the range. */
    int rc = gx_fab_rcache_get(ep->dom->rc_dst, buf, len,
                               mr ? mr->type : GX_FAB_MEM_HOST, rce);
    if (rc != GX_OK)
        return rc;
    *rkey = ((struct verbs_mr *)gx_fab_rcache_handle(*rce))->mr->rkey;
    return GX_OK;
}

void verbs_key_put(struct verbs_domain *dom, struct gx_fab_rcache *rc,
                   struct gx_fab_rcache_entry *rce)
{
    (void)dom;
    if (rce)
        gx_fab_rcache_put(rc, rce);
}
