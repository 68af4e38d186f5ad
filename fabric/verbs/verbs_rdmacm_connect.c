/*
 * verbs_rdmacm_connect.c - GX_IB_CM=rdmacm, the connector's side: after the
 * side channel's REP, resolve the address and route of each QP, connect
 * with gx's private data, and bring each QP up on CONNECT_RESPONSE
 * (verbs_rdmacm.c has the overview, the acceptor and the event pump).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/verbs/verbs_rdmacm_internal.h"

/* ---- connector ------------------------------------------------------------- */
int verbs_rdmacm_connect_start(struct verbs_ep *ep, uint16_t cm_port)
{
    struct verbs_domain *dom = ep->dom;
    const struct gx_rdmacm_api *api = dom->rdmacm->api;
    if (cm_port == 0)
        return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: %s does not connect QPs through "
                       "librdmacm (its GX_IB_CM is tcp, this rank's is rdmacm): set the same "
                       "GX_IB_CM on every rank", ep->base.name);
    struct verbs_rdmacm_ep *re = rdmacm_ep_state(ep);
    if (!re)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory (rdmacm)");
    re->dst = ep->peer_sa;
    struct sockaddr_storage src, dst;
    rdmacm_sockaddr_with_port(&dom->local, 0, &src);
    rdmacm_sockaddr_with_port(&ep->peer_sa, cm_port, &dst);
    for (int i = 0; i < ep->nqps; i++) {
        struct verbs_rdmacm_id *c = &re->ids[i];
        c->kind = ID_ACTIVE;
        c->ep = ep;
        c->index = i;
        if (api->create_id(dom->rdmacm->ch, &c->id, c, RDMA_PS_TCP) != 0) {
            int err = errno;
            c->id = NULL;
            return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: rdmacm: %s: rdma_create_id "
                           "failed: %s", ep->base.name, strerror(err));
        }
        if (api->resolve_addr(c->id, (struct sockaddr *)&src, (struct sockaddr *)&dst,
                              rdmacm_ms_left(ep->deadline)) != 0) {
            int err = errno;
            return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: rdmacm: %s: rdma_resolve_addr "
                           "failed: %s (is %s an RDMA netdev with a route to the peer?)",
                           ep->base.name, strerror(err), dom->ifname);
        }
        c->state = S_ADDR;
    }
    return GX_OK;
}

static const char *waiting_for(int state)
{
    switch (state) {
    case S_ADDR: return "address resolution";
    case S_ROUTE: return "route resolution";
    case S_CONNECT: return "the peer's connect response";
    default: return "nothing";
    }
}

int verbs_rdmacm_connect_step(struct verbs_ep *ep)
{
    verbs_rdmacm_pump(ep->dom);
    struct verbs_rdmacm_ep *re = ep->rdmacm;
    if (!re)
        return GX_ESTATE;
    if (re->error != GX_OK)
        return re->error;
    if (re->ndone == ep->nqps)
        return GX_OK;
    if (gx_now_ns() > ep->deadline) {
        for (int i = 0; i < ep->nqps; i++)
            if (re->ids[i].state != S_DONE) {
                re->error = gx_fail(GX_ETIMEOUT, GX_SUB_FABRIC, "verbs: rdmacm: %s: QP %d of %d "
                                    "still waiting for %s at the set-up deadline "
                                    "(GX_FAB_CONNECT_TIMEOUT)", ep->base.name, i + 1, ep->nqps,
                                    waiting_for(re->ids[i].state));
                return re->error;
            }
    }
    return GX_INPROGRESS;
}

int rdmacm_active_event(struct verbs_rdmacm_id *c, int type, int status, const void *pd,
                        size_t pd_len)
{
    struct verbs_ep *ep = c->ep;
    struct verbs_domain *dom = ep->dom;
    const struct gx_rdmacm_api *api = dom->rdmacm->api;
    int i = c->index;
    switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: {
        int rc = rdmacm_check_device(dom, c->id, ep->base.name, "the peer's address");
        if (rc != GX_OK)
            return rc;
        if (api->resolve_route(c->id, rdmacm_ms_left(ep->deadline)) != 0) {
            int err = errno;
            return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: rdmacm: %s: rdma_resolve_route "
                           "failed: %s", ep->base.name, strerror(err));
        }
        c->state = S_ROUTE;
        return GX_OK;
    }
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        struct gx_verbs_cm_pd req;
        gx_verbs_cm_pd_encode(&req, GX_VERBS_CM_PD_REQ, i, ep->nqps, dom->base.rank,
                              ep->qps[i].qp->qp_num, ep->peer.qpn[i], 0);
        struct rdma_conn_param p;
        memset(&p, 0, sizeof(p));
        p.private_data = &req;
        p.private_data_len = sizeof(req);
        p.responder_resources = 1;
        p.initiator_depth = 1;
        p.retry_count = (uint8_t)dom->set.retry_cnt;
        p.rnr_retry_count = 0;
        p.qp_num = ep->qps[i].qp->qp_num;
        if (api->connect(c->id, &p) != 0) {
            int err = errno;
            return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: rdmacm: %s: rdma_connect failed: "
                           "%s", ep->base.name, strerror(err));
        }
        c->state = S_CONNECT;
        return GX_OK;
    }
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
    case RDMA_CM_EVENT_ESTABLISHED: {
        if (c->state == S_DONE)
            return GX_OK;
        struct gx_verbs_cm_pd rep;
        char why[160];
        if (gx_verbs_cm_pd_decode(pd, pd_len, GX_VERBS_CM_PD_REP, &rep, why, sizeof(why)) !=
            GX_OK)
            return gx_fail(GX_EPROTO, GX_SUB_FABRIC, "verbs: rdmacm: %s: QP %d: the accept "
                           "carries bad private data: %s", ep->base.name, i + 1, why);
        if (rep.qp_index != i || rep.qpn != ep->peer.qpn[i] ||
            rep.peer_qpn != ep->qps[i].qp->qp_num || rep.rank != ep->base.peer_rank)
            return gx_fail(GX_EPROTO, GX_SUB_FABRIC, "verbs: rdmacm: %s: QP %d was accepted by "
                           "rank %d for QPs 0x%x -> 0x%x, the side channel announced 0x%x -> "
                           "0x%x (a stale or foreign connection)", ep->base.name, i + 1,
                           rep.rank, rep.qpn, rep.peer_qpn, ep->peer.qpn[i],
                           ep->qps[i].qp->qp_num);
        int rc = rdmacm_qp_up(ep, i, c->id);
        if (rc != GX_OK)
            return rc;
        if (type == RDMA_CM_EVENT_CONNECT_RESPONSE && api->establish(c->id) != 0) {
            int err = errno;
            return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: rdmacm: %s: rdma_establish "
                           "failed: %s", ep->base.name, strerror(err));
        }
        c->state = S_DONE;
        ep->rdmacm->ndone++;
        return GX_OK;
    }
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
        /* After set-up the side channel reports the peer's end. */
        return c->state == S_DONE ? GX_OK : rdmacm_event_failure(c, type, status, pd, pd_len);
    default:
        return rdmacm_event_failure(c, type, status, pd, pd_len);
    }
}
