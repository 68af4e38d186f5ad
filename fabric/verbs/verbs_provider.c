/*
 * verbs_provider.c - the verbs provider's domain (an opened RDMA port with
 * its protection domain and registration caches), its completion queue (one
 * or more ibv_cqs whose entries become gx completions in a software ring, in
 * each endpoint's post order) and the ops table.
 *
 * CQ sizing: a gx cq starts as one ibv_cq of VERBS_CQ_INITIAL entries (or the
 * device's max_cqe). Each endpoint reserves the most its QPs can complete at
 * once; when that does not fit, the ibv_cq is resized (doubling, up to
 * max_cqe), and where the device cannot resize (no ibv_resize_cq, or it
 * fails: EOPNOTSUPP on providers without it) or max_cqe is reached, another
 * ibv_cq is added for the new endpoint's QPs. Polling covers all of them.
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
    /* One-sided windows: RDMA write/read always; atomics where they are
     * atomic with the CPU's own too (gx applies other accumulates there). */
    dom->qp_access = IBV_ACCESS_REMOTE_WRITE;
    dom->base.caps = GX_FAB_CAP_RMA |
                     (dom->dattr.atomic_cap == IBV_ATOMIC_GLOB ? GX_FAB_CAP_ATOMIC : 0);
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
    memcpy(dom->key.job_id, attr->job_id, sizeof(dom->key.job_id));
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

static int verbs_hwcq_add(struct verbs_cq *cq, int want, struct verbs_hwcq **out)
{
    struct verbs_domain *dom = cq->dom;
    if (cq->nhw == VERBS_CQ_HW_MAX)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: completion queue on %s already has "
                       "%d ibv_cqs (device cannot resize them); lower GX_FAB_QUEUE_DEPTH or "
                       "GX_IB_QPS_PER_CONN", dom->port.dev, VERBS_CQ_HW_MAX);
    if (want > dom->dattr.max_cqe)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: an endpoint needs %d completion "
                       "entries, above %s's max_cqe %d (lower GX_FAB_QUEUE_DEPTH or "
                       "GX_IB_QPS_PER_CONN)", want, dom->port.dev, dom->dattr.max_cqe);
    struct verbs_hwcq *hw = &cq->hw[cq->nhw];
    hw->cq = dom->api->create_cq(dom->ctx, want, NULL, cq->ch, 0);
    if (!hw->cq)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: ibv_create_cq(%d) on %s failed: %m",
                       want, dom->port.dev);
    hw->cap = hw->cq->cqe >= want ? hw->cq->cqe : want;
    hw->reserved = 0;
    hw->armed = false;
    cq->nhw++;
    *out = hw;
    return GX_OK;
}

int verbs_cq_reserve(struct verbs_cq *cq, int need, struct verbs_hwcq **out)
{
    struct verbs_domain *dom = cq->dom;
    struct verbs_hwcq *hw = &cq->hw[cq->nhw - 1];
    if (hw->reserved + need > hw->cap && !cq->no_resize) {
        int want = hw->cap;
        while (want < hw->reserved + need && want <= dom->dattr.max_cqe / 2)
            want *= 2;
        if (want < hw->reserved + need)
            want = hw->reserved + need;
        if (want <= dom->dattr.max_cqe) {
            int err = dom->api->resize_cq ? dom->api->resize_cq(hw->cq, want) : EOPNOTSUPP;
            if (err == 0) {
                hw->cap = hw->cq->cqe >= want ? hw->cq->cqe : want;
            } else {
                cq->no_resize = true;
                GX_INFO(GX_SUB_FABRIC, "verbs: %s cannot resize a CQ (ibv_resize_cq: %s); "
                        "endpoints past %d entries get another CQ", dom->port.dev,
                        dom->api->resize_cq ? strerror(err) : "not exported", hw->cap);
            }
        }
    }
    if (hw->reserved + need > hw->cap) {
        int want = need > VERBS_CQ_INITIAL ? need : VERBS_CQ_INITIAL;
        if (want > dom->dattr.max_cqe)
            want = need; /* fails in verbs_hwcq_add if need alone is too big */
        int rc = verbs_hwcq_add(cq, want, &hw);
        if (rc != GX_OK)
            return rc;
    }
    hw->reserved += need;
    *out = hw;
    return GX_OK;
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
    verbs_wait_channel_open(cq);
    struct verbs_hwcq *hw;
    rc = verbs_hwcq_add(cq, VERBS_CQ_INITIAL < dom->dattr.max_cqe ? VERBS_CQ_INITIAL
                        : dom->dattr.max_cqe, &hw);
    if (rc != GX_OK) {
        verbs_wait_channel_close(cq);
        gx_fab_swcq_fini(&cq->sw);
        free(cq);
        return rc;
    }
    *out = &cq->sw.base;
    return GX_OK;
}

static void verbs_cq_close(struct gx_fab_cq *base)
{
    struct verbs_cq *cq = (struct verbs_cq *)base;
    for (int i = 0; i < cq->nhw; i++) {
        int err = cq->dom->api->destroy_cq(cq->hw[i].cq);
        if (err)
            GX_WARN(GX_SUB_FABRIC, "verbs: ibv_destroy_cq failed: %s (endpoints still open?)",
                    strerror(err));
    }
    verbs_wait_channel_close(cq);
    gx_fab_swcq_fini(&cq->sw);
    free(cq);
}

/* Polls one ibv_cq up to `rounds` batches (0: until empty). */
static int verbs_hwcq_poll(struct verbs_cq *cq, struct ibv_cq *hw, int rounds)
{
    struct ibv_wc wc[VERBS_POLL_BATCH];
    for (int round = 0; rounds == 0 || round < rounds; round++) {
        int n = ibv_poll_cq(hw, VERBS_POLL_BATCH, wc);
        if (n < 0)
            return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: ibv_poll_cq on %s failed (%d)",
                           cq->dom->port.dev, n);
        for (int i = 0; i < n; i++)
            verbs_cq_process(cq, &wc[i]);
        if (n < VERBS_POLL_BATCH)
            break;
    }
    return GX_OK;
}

int verbs_cq_drain(struct verbs_cq *cq)
{
    for (int i = 0; i < cq->nhw; i++) {
        int rc = verbs_hwcq_poll(cq, cq->hw[i].cq, 0);
        if (rc != GX_OK)
            return rc;
    }
    return GX_OK;
}

static int verbs_cq_poll(struct gx_fab_cq *base, struct gx_fab_cqe *out, int max)
{
    struct verbs_cq *cq = (struct verbs_cq *)base;
    for (int i = 0; i < cq->nhw; i++) {
        int rc = verbs_hwcq_poll(cq, cq->hw[i].cq, 4);
        if (rc != GX_OK)
            return rc;
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
        .post_write = verbs_post_write,
        .post_read = verbs_post_read,
        .post_atomic = verbs_post_atomic,
        .cq_wait_fds = verbs_cq_wait_fds,
        .cq_wait_done = verbs_cq_wait_done,
    },
};
