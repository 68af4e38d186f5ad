/*
 * verbs_ep.c - a verbs endpoint's memory and its close: the QPs' rings and
 * slots sized at connection time, freed in one place, and a close that lets
 * the hardware flush the endpoint's work requests before its QPs go (the
 * data path is verbs_data.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/verbs/verbs.h"

#define CLOSE_DRAIN_MS 200

/* ---- endpoint memory --------------------------------------------------- */
int verbs_ep_alloc(struct verbs_domain *dom, struct verbs_cq *cq, int nqps, uint32_t depth,
                   struct verbs_ep **out)
{
    const struct gx_verbs_api *api = dom->api;
    struct verbs_ep *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory creating an endpoint");
    int rc = GX_ENOMEM;
    ep->dom = dom;
    ep->cq = cq;
    ep->depth = depth;
    ep->nqps = nqps;
    ep->fd = -1;
    ep->state = VEP_CONNECTING;
    ep->base.ops = &dom->base.ops;
    ep->base.dom = &dom->base;
    ep->base.cq = &cq->sw.base;
    ep->base.peer_rank = -1;
    ep->tx = calloc(depth, sizeof(*ep->tx));
    ep->rx = calloc(depth, sizeof(*ep->rx));
    size_t ring = (size_t)depth * 32;
    if (!ep->tx || !ep->rx || posix_memalign(&ep->ring_mem, 4096, 4 * ring) != 0) {
        ep->ring_mem = NULL;
        gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory creating an endpoint");
        goto err_free;
    }
    memset(ep->ring_mem, 0, 4 * ring);
    ep->cts_in = ep->ring_mem;
    ep->fin_in = (void *)((char *)ep->ring_mem + ring);
    ep->cts_out = (void *)((char *)ep->ring_mem + 2 * ring);
    ep->fin_out = (void *)((char *)ep->ring_mem + 3 * ring);
    /* The rings peers write: remote write. Our staging rings: read by our
     * HCA only (no access flag). */
    ep->ring_in_mr = api->reg_mr(dom->pd, ep->cts_in, 2 * ring,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ep->ring_out_mr = api->reg_mr(dom->pd, ep->cts_out, 2 * ring, 0);
    if (!ep->ring_in_mr || !ep->ring_out_mr) {
        rc = gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: cannot register %zu bytes of control "
                     "rings on %s: %m (ulimit -l?)", 4 * ring, dom->port.dev);
        goto err_dereg;
    }
    /* Every WR and receive WQE of this endpoint can complete at once: pick
     * (or grow, or add) an ibv_cq with room for them before the QPs exist. */
    uint32_t need = verbs_ep_cq_need_max(dom, nqps, depth);
    rc = verbs_cq_reserve(cq, (int)need, &ep->hw);
    if (rc != GX_OK)
        goto err_dereg;
    ep->cq_need = need;
    for (int i = 0; i < nqps; i++) {
        rc = verbs_qp_create(ep, &ep->qps[i], i);
        if (rc != GX_OK) {
            for (int j = 0; j < i; j++)
                verbs_qp_destroy(ep, &ep->qps[j]);
            goto err_unreserve;
        }
    }
    rc = verbs_flush_open(ep);
    if (rc != GX_OK) {
        for (int j = 0; j < nqps; j++)
            verbs_qp_destroy(ep, &ep->qps[j]);
        goto err_unreserve;
    }
    ep->credits = ep->qps[0].rq_depth - 64 < depth ? ep->qps[0].rq_depth - 64 : depth;
    for (int i = 1; i < nqps; i++)
        if (ep->qps[i].rq_depth - 64 < ep->credits)
            ep->credits = ep->qps[i].rq_depth - 64;
    rc = gx_fab_swcq_attach(&cq->sw, &ep->base, 2 * depth);
    if (rc != GX_OK)
        goto err_destroy_qps;
    *out = ep;
    return GX_OK;

err_destroy_qps:
    verbs_flush_close(ep);
    for (int i = 0; i < nqps; i++)
        verbs_qp_destroy(ep, &ep->qps[i]);
err_unreserve:
    ep->hw->reserved -= (int)ep->cq_need;
err_dereg:
    if (ep->ring_in_mr)
        api->dereg_mr(ep->ring_in_mr);
    if (ep->ring_out_mr)
        api->dereg_mr(ep->ring_out_mr);
err_free:
    free(ep->ring_mem);
    free(ep->tx);
    free(ep->rx);
    free(ep);
    return rc;
}

void verbs_ep_free(struct verbs_ep *ep)
{
    const struct gx_verbs_api *api = ep->dom->api;
    verbs_rdmacm_ep_release(ep); /* GX_IB_CM=rdmacm: before the QPs go */
    verbs_flush_close(ep);
    for (int i = 0; i < ep->nqps; i++)
        verbs_qp_destroy(ep, &ep->qps[i]);
    api->dereg_mr(ep->ring_in_mr);
    api->dereg_mr(ep->ring_out_mr);
    if (ep->atom_mr)
        api->dereg_mr(ep->atom_mr);
    free(ep->atom_buf);
    gx_fab_swcq_detach(&ep->cq->sw, &ep->base, 2 * ep->depth);
    ep->hw->reserved -= (int)ep->cq_need;
    if (ep->fd >= 0)
        close(ep->fd);
    free(ep->ring_mem);
    free(ep->tx);
    free(ep->rx);
    free(ep);
}

/* ---- close ---------------------------------------------------------------- */
static bool qps_quiet(const struct verbs_ep *ep)
{
    for (int i = 0; i < ep->nqps; i++)
        if (ep->qps[i].qp && (ep->qps[i].rq_out || ep->qps[i].sig_head != ep->qps[i].sig_tail))
            return false;
    return !ep->flush_qp.qp || ep->flush_posted == ep->flush_done;
}

void verbs_ep_close(struct gx_fab_ep *base)
{
    struct verbs_ep *ep = (struct verbs_ep *)base;
    if (ep->state == VEP_ESTABLISHED)
        verbs_cm_notify(ep, GX_VERBS_CTL_BYE, 0, 0);
    if (ep->state != VEP_ERROR) {
        ep->state = VEP_ERROR;
        ep->error = GX_EABORTED;
        for (int i = 0; i < ep->nqps; i++)
            verbs_qp_to_error(ep, &ep->qps[i]);
        verbs_qp_to_error(ep, &ep->flush_qp);
        verbs_ep_flush_all(ep, GX_EABORTED, 0, FAIL_NONE);
    }
    /* Let the hardware flush this endpoint's WQEs before its QPs go, so the
     * cq never holds more than it was sized for. Other endpoints' entries
     * met on the way are processed normally. */
    uint64_t until = gx_deadline_after_ms(CLOSE_DRAIN_MS);
    while (!qps_quiet(ep) && gx_now_ns() < until)
        if (verbs_cq_drain(ep->cq) != GX_OK)
            break;
    verbs_ep_free(ep);
}
