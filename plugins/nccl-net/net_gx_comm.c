/*
 * net_gx_comm.c - the NCCL net plugin's connections and registrations:
 * listen / connect / accept on a gx fabric provider (tcp streams or verbs
 * QPs, each authenticated with the job key, GX_JOB_KEY), closing, regMr.
 *
 * connect and accept never block: they return no comm until the provider's
 * non-blocking set-up has finished, and NCCL calls again. The handle NCCL
 * exchanges carries the listener's address; the connector keeps its
 * half-made comm in the handle's last bytes between calls (NCCL keeps the
 * handle for exactly that purpose).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpudirect/gpudirect.h"
#include "plugins/nccl-net/net_gx.h"

#define GXN_HANDLE_MAGIC 0x67784e31u /* "gxN1" */

struct gxn_handle {
    uint32_t magic;
    uint32_t addr_len;
    uint8_t addr[GXN_HANDLE_MAXSIZE - 8 - sizeof(void *)];
    struct gxn_comm *pending; /* connector's comm between calls; NULL from listen */
};
_Static_assert(sizeof(struct gxn_handle) <= GXN_HANDLE_MAXSIZE, "handle must fit NCCL's");

gxn_result_t gxn_listen(int dev, void *handle, void **listen_comm)
{
    struct gxn_dev *d = gxn_dev_at(dev);
    *listen_comm = NULL;
    if (!d)
        return gxn_fail(GX_EINVAL, "listen: device %d does not exist", dev);
    struct gxn_comm *c = calloc(1, sizeof(*c));
    if (!c)
        return gxn_fail(GX_ENOMEM, "listen on %s", d->name);
    c->kind = GXN_LISTEN;
    c->dev = d;
    struct gx_fab_addr addr;
    int rc = gxn_dom_open(d, &c->fd);
    if (rc == GX_OK)
        rc = gx_fab_listen(c->fd->dom, c->fd->cq, &c->lst, &addr);
    if (rc == GX_OK && addr.len > sizeof(((struct gxn_handle *)0)->addr)) {
        gx_fab_listener_close(c->lst);
        rc = GX_EUNSUPPORTED;
    }
    if (rc != GX_OK) {
        gxn_dom_put(c->fd);
        free(c);
        return gxn_fail(rc, "listen on %s (an address longer than NCCL's %d-byte handle is "
                        "unsupported)", d->name, GXN_HANDLE_MAXSIZE);
    }
    struct gxn_handle h;
    memset(&h, 0, sizeof(h));
    h.magic = GXN_HANDLE_MAGIC;
    h.addr_len = addr.len;
    memcpy(h.addr, addr.bytes, addr.len);
    memcpy(handle, &h, sizeof(h));
    *listen_comm = c;
    return GXN_NCCL_OK;
}

/* Register the comm itself (the clear-to-send buffers live in it); the
 * sender posts its clear-to-send receives. Caller holds the lock. */
static int comm_ready_locked(struct gxn_comm *c)
{
    int rc = gx_fab_mr_reg(c->fd->dom, c, sizeof(*c), GX_FAB_MEM_HOST, GX_FAB_ACCESS_LOCAL,
                           &c->self_mr);
    if (rc == GX_OK && c->kind == GXN_SEND)
        rc = gxn_post_cts_recvs_locked(c);
    return rc;
}

/* Close the endpoint and hand its flushed ops out before the memory they
 * point into goes away. Caller holds the lock. */
static void comm_teardown_locked(struct gxn_comm *c)
{
    if (c->ep) {
        gx_fab_ep_close(c->ep);
        while (gxn_progress_locked(c->fd) > 0) {
        }
        c->ep = NULL;
    }
    gx_fab_mr_dereg(c->self_mr);
    c->self_mr = NULL;
    gx_fab_listener_close(c->lst);
    c->lst = NULL;
}

gxn_result_t gxn_connect(int dev, void *handle, void **send_comm)
{
    struct gxn_dev *d = gxn_dev_at(dev);
    struct gxn_handle *h = handle;
    *send_comm = NULL;
    if (!d)
        return gxn_fail(GX_EINVAL, "connect: device %d does not exist", dev);
    if (h->magic != GXN_HANDLE_MAGIC || h->addr_len > sizeof(h->addr))
        return gxn_fail(GX_EPROTO, "connect on %s: the handle is not from libnccl-net-gx.so "
                        "(is NCCL_NET_PLUGIN the same on every rank?)", d->name);
    struct gxn_comm *c = h->pending;
    int rc = GX_OK;
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (!c)
            return gxn_fail(GX_ENOMEM, "connect on %s", d->name);
        c->kind = GXN_SEND;
        c->dev = d;
        rc = gxn_dom_open(d, &c->fd);
        if (rc == GX_OK) {
            struct gx_fab_addr peer = { .len = h->addr_len };
            memcpy(peer.bytes, h->addr, h->addr_len);
            struct gx_fab_conn_param param = GX_FAB_CONN_PARAM_INIT;
            pthread_mutex_lock(&c->fd->lock);
            rc = gx_fab_connect(c->fd->dom, c->fd->cq, &peer, &param, &c->ep);
            pthread_mutex_unlock(&c->fd->lock);
        }
        if (rc != GX_OK) {
            gxn_dom_put(c->fd);
            free(c);
            return gxn_fail(rc, "connect on %s", d->name);
        }
        h->pending = c;
    }
    pthread_mutex_lock(&c->fd->lock);
    rc = gx_fab_ep_establish(c->ep);
    if (rc == GX_INPROGRESS) {
        pthread_mutex_unlock(&c->fd->lock);
        return GXN_NCCL_OK; /* NCCL calls again */
    }
    h->pending = NULL;
    if (rc == GX_OK)
        rc = comm_ready_locked(c);
    if (rc != GX_OK) {
        char name[GX_FAB_NAME_MAX];
        snprintf(name, sizeof(name), "%s", gx_fab_ep_name(c->ep));
        comm_teardown_locked(c);
        pthread_mutex_unlock(&c->fd->lock);
        gxn_dom_put(c->fd);
        free(c);
        return gxn_fail(rc, "connect on %s to %s (same GX_JOB_KEY on every rank?)", d->name,
                        name);
    }
    pthread_mutex_unlock(&c->fd->lock);
    gxn_log(GXN_LOG_INFO, "connected %s", gx_fab_ep_name(c->ep));
    *send_comm = c;
    return GXN_NCCL_OK;
}

gxn_result_t gxn_accept(void *listen_comm, void **recv_comm)
{
    struct gxn_comm *l = listen_comm;
    struct gxn_dom *fd = l->fd;
    *recv_comm = NULL;
    struct gx_fab_ep *ep = NULL;
    pthread_mutex_lock(&fd->lock);
    int rc = gx_fab_accept(l->lst, &ep);
    if (rc == GX_INPROGRESS) {
        pthread_mutex_unlock(&fd->lock);
        return GXN_NCCL_OK;
    }
    if (rc != GX_OK) {
        pthread_mutex_unlock(&fd->lock);
        return gxn_fail(rc, "accept on %s", l->dev->name);
    }
    struct gxn_comm *c = calloc(1, sizeof(*c));
    if (!c) {
        gx_fab_ep_close(ep);
        while (gxn_progress_locked(fd) > 0) {
        }
        pthread_mutex_unlock(&fd->lock);
        return gxn_fail(GX_ENOMEM, "accept on %s", l->dev->name);
    }
    c->kind = GXN_RECV;
    c->dev = l->dev;
    c->fd = fd;
    c->ep = ep;
    rc = comm_ready_locked(c);
    if (rc != GX_OK) {
        comm_teardown_locked(c);
        pthread_mutex_unlock(&fd->lock);
        free(c);
        return gxn_fail(rc, "accept on %s", l->dev->name);
    }
    fd->refs++; /* the recv comm keeps the listener's domain */
    pthread_mutex_unlock(&fd->lock);
    gxn_log(GXN_LOG_INFO, "accepted %s", gx_fab_ep_name(ep));
    *recv_comm = c;
    return GXN_NCCL_OK;
}

gxn_result_t gxn_close(void *comm)
{
    struct gxn_comm *c = comm;
    if (!c)
        return GXN_NCCL_OK;
    pthread_mutex_lock(&c->fd->lock);
    comm_teardown_locked(c);
    pthread_mutex_unlock(&c->fd->lock);
    gxn_dom_put(c->fd);
    free(c);
    return GXN_NCCL_OK;
}

gxn_result_t gxn_reg_mr(void *comm, void *data, size_t size, int type, void **mh)
{
    struct gxn_comm *c = comm;
    *mh = NULL;
    if (type == GXN_PTR_CUDA)
        return gxn_reg_mr_cuda(c, data, size, "regMr", mh);
    if (type != GXN_PTR_HOST)
        return gxn_fail(GX_EINVAL, "regMr of %zu bytes at %p: unknown memory type %d (NCCL "
                        "passes NCCL_PTR_HOST or NCCL_PTR_CUDA)", size, data, type);
    struct gxn_mr *m = calloc(1, sizeof(*m));
    if (!m)
        return gxn_fail(GX_ENOMEM, "regMr of %zu bytes", size);
    m->fd = c->fd;
    if (size > 0) {
        pthread_mutex_lock(&c->fd->lock);
        int rc = gx_fab_mr_reg(c->fd->dom, data, size, GX_FAB_MEM_HOST,
                               GX_FAB_ACCESS_LOCAL | GX_FAB_ACCESS_REMOTE_WRITE, &m->mr);
        pthread_mutex_unlock(&c->fd->lock);
        if (rc != GX_OK) {
            free(m);
            return gxn_fail(rc, "regMr of %zu bytes at %p on %s", size, data, c->dev->name);
        }
    }
    /* the registration keeps the domain: NCCL may close the comm first */
    pthread_mutex_lock(&c->fd->lock);
    c->fd->refs++;
    pthread_mutex_unlock(&c->fd->lock);
    *mh = m;
    return GXN_NCCL_OK;
}

gxn_result_t gxn_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
                               int fd, void **mh)
{
    if (type == GXN_PTR_HOST)
        return gxn_reg_mr(comm, data, size, type, mh);
    *mh = NULL;
    if (type != GXN_PTR_CUDA)
        return gxn_fail(GX_EINVAL, "regMrDmaBuf of %zu bytes at %p (fd %d): unknown memory "
                        "type %d", size, data, fd, type);
    struct gxn_comm *c = comm;
    if (gxn_dev_gdr(c->dev, NULL) != GX_GDR_DMABUF)
        return gxn_fail(GX_EUNSUPPORTED, "regMrDmaBuf of %zu bytes at %p (fd %d): %s does not "
                        "offer NCCL_PTR_DMABUF (%s)", size, data, fd, c->dev->name,
                        c->dev->gdr_why);
    /* The provider exports the same range again (cuMemGetHandleForAddressRange)
     * when it registers by dmabuf; NCCL's fd and offset describe that range. */
    (void)offset;
    return gxn_reg_mr_cuda(c, data, size, "regMrDmaBuf", mh);
}

gxn_result_t gxn_dereg_mr(void *comm, void *mh)
{
    struct gxn_mr *m = mh;
    if (!m)
        return GXN_NCCL_OK;
    pthread_mutex_lock(&m->fd->lock);
    int rc = gx_fab_mr_dereg(m->mr);
    pthread_mutex_unlock(&m->fd->lock);
    gxn_dom_put(m->fd);
    free(m);
    return rc == GX_OK ? GXN_NCCL_OK : gxn_fail(rc, "deregMr");
}
