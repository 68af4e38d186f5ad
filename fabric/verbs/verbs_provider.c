/*
 * verbs_provider.c - the verbs provider's domain (an opened RDMA port with
 * its protection domain and registration caches), its completion queue (one
 * ibv_cq whose entries become gx completions in a software ring, in each
 * endpoint's post order) and the ops table.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/verbs/verbs.h"
#include "fabric/verbs/verbs_rdmacm.h"

#define VERBS_CQ_INITIAL 16384
#define VERBS_POLL_BATCH 32
#define VERBS_LIVENESS_NS 1000000ull /* side channels checked at most every 1 ms */

static int verbs_domain_open(const struct gx_fab_provider *prov,
                             const struct gx_fab_domain_attr *attr, struct gx_fab_domain **out)
{
    const struct gx_verbs_api *api;
    if (gx_verbs_load(&api) != GX_OK)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "verbs: %s", gx_verbs_unavailable_reason());
    struct verbs_domain *dom = calloc(1, sizeof(*dom));
    if (!dom)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory opening a domain");
    dom->api = api;
    dom->dmabuf = -1;
    int rc = gx_verbs_settings_read(&dom->set);
    if (rc == GX_OK)
        rc = verbs_gdr_domain_init(dom, attr);
    if (rc != GX_OK)
        goto err_free;
    if (dom->set.cm_rdmacm && gx_verbs_rdmacm_available() != GX_OK) {
        rc = gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "verbs: GX_IB_CM=rdmacm: %s; unset GX_IB_CM "
                     "to use the authenticated TCP side channel (docs/verbs.md)",
                     gx_verbs_rdmacm_reason());
        goto err_free;
    }
    rc = gx_sock_pick_interface(&dom->local, dom->ifname, sizeof(dom->ifname));
    if (rc != GX_OK)
        goto err_free;
    uint32_t ip4 = dom->local.u.sa.sa_family == AF_INET ? dom->local.u.in4.sin_addr.s_addr : 0;
    rc = gx_verbs_open_port(api, attr->device, &dom->set, ip4, &dom->ctx, &dom->port);
    if (rc != GX_OK)
        goto err_free;
    if (dom->set.cm_rdmacm && (rc = verbs_rdmacm_domain_open(dom)) != GX_OK)
        goto err_close_dev; /* the domain's context is still its own */
    if (api->query_device(dom->ctx, &dom->dattr) != 0) {
        rc = gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: ibv_query_device(%s) failed: %m",
                     dom->port.dev);
        goto err_close_dev;
    }
    dom->pd = api->alloc_pd(dom->ctx);
    if (!dom->pd) {
        rc = gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: ibv_alloc_pd(%s) failed: %m",
                     dom->port.dev);
        goto err_close_dev;
    }
    /* Async events are read only on error paths, never blocking. */
    int fl = fcntl(dom->ctx->async_fd, F_GETFL);
    if (fl >= 0)
        fcntl(dom->ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
    gx_auth_key_derive(attr->job_key, &dom->key);
    dom->base.rank = attr->rank;
    rc = verbs_rcache_open(dom);
    if (rc != GX_OK)
        goto err_dealloc_pd;
    char label[32], gid[INET6_ADDRSTRLEN];
    gx_verbs_port_gbps(&dom->port.attr, label, sizeof(label));
    inet_ntop(AF_INET6, dom->port.gid.raw, gid, sizeof(gid));
    GX_INFO(GX_SUB_FABRIC, "verbs: domain on %s:%d (%s %s, %.0f Gb/s, LID %u, GID[%d] %s: %s), "
            "side channel on %s, %d QP(s) per connection%s",
            dom->port.dev, dom->port.port,
            dom->port.attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", label,
            dom->port.gbps, dom->port.attr.lid, dom->port.gid_index, gid, dom->port.gid_why,
            dom->ifname, dom->set.nqps, dom->rdmacm ? ", QPs connected by librdmacm" : "");
    *out = &dom->base;
    return GX_OK;

err_dealloc_pd:
    api->dealloc_pd(dom->pd);
err_close_dev:
    if (dom->rdmacm)
        verbs_rdmacm_domain_close(dom); /* the context is librdmacm's */
    else
        api->close_device(dom->ctx);
err_free:
    free(dom);
    return rc;
}

static void verbs_domain_close(struct gx_fab_domain *base)
{
    struct verbs_domain *dom = (struct verbs_domain *)base;
    verbs_rcache_close(dom);
    int err = dom->api->dealloc_pd(dom->pd);
    if (err)
        GX_WARN(GX_SUB_FABRIC, "verbs: domain %s closed with registrations or QPs still open "
                "(ibv_dealloc_pd: %s)", dom->port.dev, strerror(err));
    if (dom->rdmacm)
        verbs_rdmacm_domain_close(dom); /* the context is librdmacm's */
    else
        dom->api->close_device(dom->ctx);
    free(dom->qptab);
    free(dom->qpgen);
    free(dom);
}

static int verbs_cq_open(struct gx_fab_domain *base, struct gx_fab_cq **out)
{
    struct verbs_domain *dom = (struct verbs_domain *)base;
    struct verbs_cq *cq = calloc(1, sizeof(*cq));
    if (!cq)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory opening a cq");
    int rc = gx_fab_swcq_init(&cq->sw, base, verbs_ep_progress);
    if (rc != GX_OK) {
        free(cq);
        return rc;
    }
    cq->dom = dom;
    cq->cap = VERBS_CQ_INITIAL < dom->dattr.max_cqe ? VERBS_CQ_INITIAL : dom->dattr.max_cqe;
    cq->cq = dom->api->create_cq(dom->ctx, cq->cap, NULL, NULL, 0);
    if (!cq->cq) {
        gx_fab_swcq_fini(&cq->sw);
        free(cq);
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: ibv_create_cq(%d) on %s failed: %m",
                       VERBS_CQ_INITIAL, dom->port.dev);
    }
    cq->cap = cq->cq->cqe > 0 ? cq->cq->cqe : cq->cap;
    *out = &cq->sw.base;
    return GX_OK;
}

static void verbs_cq_close(struct gx_fab_cq *base)
{
    struct verbs_cq *cq = (struct verbs_cq *)base;
    int err = cq->dom->api->destroy_cq(cq->cq);
    if (err)
        GX_WARN(GX_SUB_FABRIC, "verbs: ibv_destroy_cq failed: %s (endpoints still open?)",
                strerror(err));
    gx_fab_swcq_fini(&cq->sw);
    free(cq);
}

int verbs_cq_drain(struct verbs_cq *cq)
{
    struct ibv_wc wc[VERBS_POLL_BATCH];
    for (;;) {
        int n = ibv_poll_cq(cq->cq, VERBS_POLL_BATCH, wc);
        if (n < 0)
            return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: ibv_poll_cq on %s failed (%d)",
                           cq->dom->port.dev, n);
        for (int i = 0; i < n; i++)
            verbs_cq_process(cq, &wc[i]);
        if (n < VERBS_POLL_BATCH)
            return GX_OK;
    }
}

static int verbs_cq_poll(struct gx_fab_cq *base, struct gx_fab_cqe *out, int max)
{
    struct verbs_cq *cq = (struct verbs_cq *)base;
    struct ibv_wc wc[VERBS_POLL_BATCH];
    for (int round = 0; round < 4; round++) {
        int n = ibv_poll_cq(cq->cq, VERBS_POLL_BATCH, wc);
        if (n < 0)
            return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: ibv_poll_cq on %s failed (%d)",
                           cq->dom->port.dev, n);
        for (int i = 0; i < n; i++)
            verbs_cq_process(cq, &wc[i]);
        if (n < VERBS_POLL_BATCH)
            break;
    }
    uint64_t now = gx_now_ns();
    if (now >= cq->next_liveness_ns) {
        cq->next_liveness_ns = now + VERBS_LIVENESS_NS;
        verbs_cm_liveness(cq);
    }
    return gx_fab_swcq_poll(&cq->sw, out, max);
}

const struct gx_fab_provider gx_fab_verbs_provider = {
    .name = "verbs",
    .description = "RDMA verbs (InfiniBand, RoCE): RC QPs, receiver-driven RDMA writes",
    .ops = {
        .probe = gx_verbs_probe,
        .domain_open = verbs_domain_open,
        .domain_close = verbs_domain_close,
        .cq_open = verbs_cq_open,
        .cq_close = verbs_cq_close,
        .cq_poll = verbs_cq_poll,
        .mr_reg = verbs_mr_reg,
        .mr_dereg = verbs_mr_dereg,
        .mr_pack_rkey = verbs_mr_pack_rkey,
        .listen = verbs_listen,
        .accept = verbs_accept,
        .listener_close = verbs_listener_close,
        .connect = verbs_connect,
        .ep_establish = verbs_ep_establish,
        .ep_close = verbs_ep_close,
        .post_send = verbs_post_send,
        .post_recv = verbs_post_recv,
        .post_write_imm = verbs_post_write_imm,
    },
};
