/*
 * verbs_rdmacm.c - GX_IB_CM=rdmacm: QPs connected by librdmacm. This file
 * holds the domain, the helpers both sides share, the listener and
 * acceptor, the event pump and release; the connector's side is
 * verbs_rdmacm_connect.c.
 *
 *   connector                                 acceptor (listener + CM id)
 *   side channel: auth, REQ (QPs INIT)  --->  endpoint, QPs INIT; REP with
 *                                             the CM listener's port
 *   per QP i: rdma_resolve_addr, the resolved
 *   device must be the domain's; resolve_route;
 *   rdma_connect(qp_num, private data)  --->  CONNECT_REQUEST: private data
 *                                             names rank and QPs announced on
 *                                             the side channel; RTR, RTS from
 *                                             rdma_init_qp_attr; rdma_accept
 *   CONNECT_RESPONSE: RTR, RTS, rdma_establish
 *   side channel: READY                 --->  endpoint returned by accept()
 *
 * One event channel per domain, non-blocking: whoever drives set-up (a
 * connect's establish, a listener's accept) pumps it and every event goes
 * to the owner of its CM id (id->context). Every event is acknowledged as
 * soon as it is read, so rdma_destroy_id never waits. No wait blocks: the
 * set-up deadline (GX_FAB_CONNECT_TIMEOUT) bounds every step, and the
 * resolve timeouts given to the CM are what is left of it.
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

static const char *dev_name(struct verbs_domain *dom, struct ibv_context *ctx)
{
    return ctx ? dom->api->get_device_name(ctx->device) : "(none)";
}

/* ---- domain ---------------------------------------------------------------- */
int verbs_rdmacm_domain_open(struct verbs_domain *dom)
{
    const struct gx_rdmacm_api *api;
    if (gx_verbs_rdmacm_load(&api) != GX_OK)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "verbs: GX_IB_CM=rdmacm: %s; unset "
                       "GX_IB_CM to use the authenticated TCP side channel (docs/verbs.md)",
                       gx_verbs_rdmacm_reason());
    struct verbs_rdmacm_dom *r = calloc(1, sizeof(*r));
    if (!r)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory (rdmacm)");
    r->api = api;
    r->ch = api->create_event_channel();
    if (!r->ch) {
        int err = errno;
        free(r);
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "verbs: GX_IB_CM=rdmacm: kernel rdma_cm "
                       "unavailable: rdma_create_event_channel failed: %s", strerror(err));
    }
    int fl = fcntl(r->ch->fd, F_GETFL);
    if (fl < 0 || fcntl(r->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        int err = errno;
        api->destroy_event_channel(r->ch);
        free(r);
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: rdmacm event channel: fcntl: %s",
                       strerror(err));
    }
    /* The domain moves to librdmacm's context of the same device, so the
     * PD, CQ and QPs live where the CM's ids do. */
    int n = 0;
    r->devs = api->get_devices(&n);
    struct ibv_context *cm_ctx = NULL;
    char seen[192] = "";
    size_t off = 0;
    for (int i = 0; r->devs && i < n; i++) {
        const char *name = dev_name(dom, r->devs[i]);
        if (strcmp(name, dom->port.dev) == 0)
            cm_ctx = r->devs[i];
        if (off < sizeof(seen))
            off += (size_t)snprintf(seen + off, sizeof(seen) - off, "%s%s", i ? ", " : "", name);
    }
    if (!cm_ctx) {
        int rc = gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "verbs: GX_IB_CM=rdmacm: librdmacm "
                         "does not list device %s (it lists: %s)", dom->port.dev,
                         seen[0] ? seen : "nothing");
        if (r->devs)
            api->free_devices(r->devs);
        api->destroy_event_channel(r->ch);
        free(r);
        return rc;
    }
    struct ibv_port_attr pa;
    uint32_t ip4 = dom->local.u.sa.sa_family == AF_INET ? dom->local.u.in4.sin_addr.s_addr : 0;
    struct gx_verbs_port port = dom->port;
    int rc = gx_verbs_query_port(dom->api, cm_ctx, (uint8_t)port.port, &pa) != 0
                 ? gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: rdmacm: ibv_query_port(%s:%d) "
                           "failed", port.dev, port.port)
                 : GX_OK;
    if (rc == GX_OK) {
        port.attr = pa;
        rc = gx_verbs_pick_gid(dom->api, cm_ctx, port.port, &pa, dom->set.gid_index, ip4, &port);
    }
    if (rc != GX_OK) {
        api->free_devices(r->devs);
        api->destroy_event_channel(r->ch);
        free(r);
        return rc;
    }
    dom->api->close_device(dom->ctx);
    dom->ctx = cm_ctx;
    dom->port = port;
    dom->rdmacm = r;
    return GX_OK;
}

void verbs_rdmacm_domain_close(struct verbs_domain *dom)
{
    struct verbs_rdmacm_dom *r = dom->rdmacm;
    if (!r)
        return;
    r->api->free_devices(r->devs); /* the context stays librdmacm's */
    r->api->destroy_event_channel(r->ch);
    free(r);
    dom->rdmacm = NULL;
}

/* ---- helpers --------------------------------------------------------------- */
int rdmacm_ms_left(uint64_t deadline)
{
    uint64_t now = gx_now_ns();
    uint64_t ms = deadline > now ? (deadline - now) / 1000000u : 0;
    return ms < 100 ? 100 : ms > 60000 ? 60000 : (int)ms;
}

void rdmacm_sockaddr_with_port(const struct gx_sockaddr *in, uint16_t port,
                               struct sockaddr_storage *out)
{
    memset(out, 0, sizeof(*out));
    if (in->u.sa.sa_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)out;
        *a = in->u.in6;
        a->sin6_port = htons(port);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)out;
        *a = in->u.in4;
        a->sin_port = htons(port);
    }
}

/* The device and port a CM id is bound to must be the domain's. */
int rdmacm_check_device(struct verbs_domain *dom, struct rdma_cm_id *id, const char *who,
                        const char *what)
{
    if (id->verbs == dom->ctx && (id->port_num == 0 || id->port_num == dom->port.port))
        return GX_OK;
    return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: rdmacm: %s: %s resolves to RDMA device "
                   "%s:%u, but this rank's domain is on %s:%d (chosen by GX_IB_HCA or the "
                   "topology); make GX_SOCKET_IFNAME an interface of %s, or choose the device "
                   "that owns the address", who, what, dev_name(dom, id->verbs), id->port_num,
                   dom->port.dev, dom->port.port, dom->port.dev);
}

/* Move QP `i` of `ep` to RTR and RTS with the attributes the CM computed
 * for `id` (path, PSNs, peer QP). The retry settings are gx's. A transition
 * the CM leaves empty (iWARP: the kernel moves the QP) is skipped. */
int rdmacm_qp_up(struct verbs_ep *ep, int i, struct rdma_cm_id *id)
{
    struct verbs_domain *dom = ep->dom;
    const struct gx_rdmacm_api *api = dom->rdmacm->api;
    static const enum ibv_qp_state states[2] = { IBV_QPS_RTR, IBV_QPS_RTS };
    for (int s = 0; s < 2; s++) {
        struct ibv_qp_attr a;
        int mask = 0;
        memset(&a, 0, sizeof(a));
        a.qp_state = states[s];
        if (api->init_qp_attr(id, &a, &mask) != 0) {
            int err = errno;
            return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: rdmacm: %s: rdma_init_qp_attr(%s)"
                           " for QP 0x%x failed: %s", ep->base.name, s ? "RTS" : "RTR",
                           ep->qps[i].qp->qp_num, strerror(err));
        }
        if (mask == 0)
            continue;
        if (states[s] == IBV_QPS_RTS && (mask & IBV_QP_TIMEOUT)) {
            a.timeout = (uint8_t)dom->set.timeout;
            a.retry_cnt = (uint8_t)dom->set.retry_cnt;
            a.rnr_retry = 0; /* receiver-driven: an RNR is a gx bug (docs/verbs.md) */
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
        }
        int err = dom->api->modify_qp(ep->qps[i].qp, &a, mask);
        if (err)
            return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: rdmacm: %s: QP 0x%x to %s with "
                           "the CM's attributes failed: %s", ep->base.name,
                           ep->qps[i].qp->qp_num, s ? "RTS" : "RTR", strerror(err));
    }
    return GX_OK;
}

struct verbs_rdmacm_ep *rdmacm_ep_state(struct verbs_ep *ep)
{
    if (!ep->rdmacm)
        ep->rdmacm = calloc(1, sizeof(*ep->rdmacm));
    return ep->rdmacm;
}

static void ep_failed(struct verbs_ep *ep, int rc)
{
    struct verbs_rdmacm_ep *re = ep->rdmacm;
    if (re && re->error == GX_OK)
        re->error = rc;
}

/* A failure event for `c`: the gx status with the peer named and the hint. */
int rdmacm_event_failure(struct verbs_rdmacm_id *c, int type, int status, const void *pd,
                         size_t pd_len)
{
    struct verbs_ep *ep = c->ep;
    char hint[384];
    int rc = gx_verbs_cm_event_status(type, status, hint, sizeof(hint));
    struct gx_verbs_cm_pd rej;
    char why[160];
    if (type == RDMA_CM_EVENT_REJECTED &&
        gx_verbs_cm_pd_decode(pd, pd_len, GX_VERBS_CM_PD_REJ, &rej, why, sizeof(why)) == GX_OK)
        return gx_fail(rej.status == GX_EPROTO ? GX_EPROTO : GX_ECONNECT, GX_SUB_FABRIC,
                       "verbs: rdmacm: %s: QP %d: the peer's gx rejected the connection with %s "
                       "(see the peer's log)", ep->base.name, c->index + 1,
                       gx_strerror(rej.status));
    return gx_fail(rc == GX_OK ? GX_EPROTO : rc, GX_SUB_FABRIC, "verbs: rdmacm: %s: QP %d of %d: "
                   "%s", ep->base.name, c->index + 1, ep->nqps, hint);
}

/* ---- listener -------------------------------------------------------------- */
int verbs_rdmacm_listen(struct verbs_domain *dom, struct gx_fab_listener *lst,
                        struct verbs_rdmacm_listen **out, uint16_t *port)
{
    const struct gx_rdmacm_api *api = dom->rdmacm->api;
    struct verbs_rdmacm_listen *l = calloc(1, sizeof(*l));
    if (!l)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory (rdmacm listener)");
    l->ctx.kind = ID_LISTEN;
    l->ctx.lst = l;
    l->dom = dom;
    l->base = lst;
    char a[64];
    gx_sock_addr_str(&dom->local, a, sizeof(a));
    if (api->create_id(dom->rdmacm->ch, &l->ctx.id, &l->ctx, RDMA_PS_TCP) != 0) {
        int err = errno;
        free(l);
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: rdmacm: rdma_create_id failed: %s",
                       strerror(err));
    }
    struct sockaddr_storage sa;
    rdmacm_sockaddr_with_port(&dom->local, 0, &sa);
    int rc = GX_OK;
    if (api->bind_addr(l->ctx.id, (struct sockaddr *)&sa) != 0) {
        int err = errno;
        rc = gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: rdmacm: rdma_bind_addr(%s, %s) failed: "
                     "%s (is %s an RDMA netdev?)", a, dom->ifname, strerror(err), dom->ifname);
    } else if (l->ctx.id->verbs &&
               (rc = rdmacm_check_device(dom, l->ctx.id, "listener", "GX_SOCKET_IFNAME's address")) !=
                   GX_OK) {
        /* logged */
    } else if (api->listen(l->ctx.id, 128) != 0) {
        int err = errno;
        rc = gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: rdmacm: rdma_listen on %s failed: %s", a,
                     strerror(err));
    }
    if (rc != GX_OK) {
        api->destroy_id(l->ctx.id);
        free(l);
        return rc;
    }
    *port = ntohs(api->get_src_port(l->ctx.id));
    GX_TRACE(GX_SUB_FABRIC, "verbs: rdmacm listener on %s port %u", a, *port);
    *out = l;
    return GX_OK;
}

void verbs_rdmacm_listen_close(struct verbs_rdmacm_listen *l)
{
    if (!l)
        return;
    l->dom->rdmacm->api->destroy_id(l->ctx.id);
    free(l);
}

/* ---- acceptor -------------------------------------------------------------- */
static void reject(const struct gx_rdmacm_api *api, struct rdma_cm_id *id, int status)
{
    struct gx_verbs_cm_pd rej;
    gx_verbs_cm_pd_encode(&rej, GX_VERBS_CM_PD_REJ, 0, 0, -1, 0, 0, status);
    api->reject(id, &rej, (uint8_t)sizeof(rej));
    api->destroy_id(id);
}

static void connect_request(struct verbs_rdmacm_listen *l, struct rdma_cm_id *id,
                            const void *pd, size_t pd_len, uint32_t conn_qpn)
{
    struct verbs_domain *dom = l->dom;
    const struct gx_rdmacm_api *api = dom->rdmacm->api;
    struct gx_verbs_cm_pd req;
    char why[160];
    if (gx_verbs_cm_pd_decode(pd, pd_len, GX_VERBS_CM_PD_REQ, &req, why, sizeof(why)) != GX_OK) {
        GX_WARN(GX_SUB_FABRIC, "verbs: rdmacm: rejected a connect request: %s", why);
        reject(api, id, GX_EPROTO);
        return;
    }
    struct verbs_ep *ep = verbs_listener_find(l->base, req.rank, req.qp_index, req.peer_qpn,
                                              req.qpn);
    if (!ep || (conn_qpn && conn_qpn != req.qpn)) {
        GX_WARN(GX_SUB_FABRIC, "verbs: rdmacm: rejected a connect request from rank %d for QP "
                "%u (0x%x -> 0x%x): no endpoint set up over the side channel matches (stale "
                "connection, or not a gx peer of this job)", req.rank, req.qp_index + 1, req.qpn,
                req.peer_qpn);
        reject(api, id, GX_ECONNECT);
        return;
    }
    struct verbs_rdmacm_ep *re = rdmacm_ep_state(ep);
    int rc = GX_OK;
    if (!re)
        rc = gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory (rdmacm)");
    else if (req.nqps != ep->nqps || re->ids[req.qp_index].id)
        rc = gx_fail(GX_EPROTO, GX_SUB_FABRIC, "verbs: rdmacm: %s: a second or inconsistent "
                     "connect request for QP %u of %u", ep->base.name, req.qp_index + 1,
                     req.nqps);
    if (rc != GX_OK) {
        reject(api, id, rc);
        ep_failed(ep, rc);
        return;
    }
    struct verbs_rdmacm_id *c = &re->ids[req.qp_index];
    c->kind = ID_PASSIVE;
    c->ep = ep;
    c->index = req.qp_index;
    c->id = id;
    id->context = c;
    rc = rdmacm_check_device(dom, id, ep->base.name, "the connect request");
    if (rc == GX_OK)
        rc = rdmacm_qp_up(ep, c->index, id);
    if (rc == GX_OK) {
        struct gx_verbs_cm_pd rep;
        gx_verbs_cm_pd_encode(&rep, GX_VERBS_CM_PD_REP, c->index, ep->nqps, dom->base.rank,
                              ep->qps[c->index].qp->qp_num, req.qpn, 0);
        struct rdma_conn_param p;
        memset(&p, 0, sizeof(p));
        p.private_data = &rep;
        p.private_data_len = sizeof(rep);
        p.responder_resources = 1;
        p.initiator_depth = 1;
        p.retry_count = (uint8_t)dom->set.retry_cnt;
        p.rnr_retry_count = 0;
        p.qp_num = ep->qps[c->index].qp->qp_num;
        if (api->accept(id, &p) != 0) {
            int err = errno;
            rc = gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: rdmacm: %s: rdma_accept failed: %s",
                         ep->base.name, strerror(err));
        }
    }
    if (rc != GX_OK) {
        c->id = NULL;
        reject(api, id, rc);
        ep_failed(ep, rc);
        return;
    }
    c->state = S_DONE;
    re->ndone++;
}

static int passive_event(struct verbs_rdmacm_id *c, int type, int status, const void *pd,
                         size_t pd_len)
{
    switch (type) {
    case RDMA_CM_EVENT_ESTABLISHED:
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
        return GX_OK;
    case RDMA_CM_EVENT_DISCONNECTED:
        /* Once established the side channel reports the peer's end; before
         * READY it is a failed set-up. */
        return c->ep->state == VEP_ESTABLISHED ? GX_OK : rdmacm_event_failure(c, type, status, pd, pd_len);
    default:
        return rdmacm_event_failure(c, type, status, pd, pd_len);
    }
}

int verbs_rdmacm_accepted(struct verbs_ep *ep)
{
    struct verbs_rdmacm_ep *re = ep->rdmacm;
    if (!re)
        return GX_INPROGRESS;
    if (re->error != GX_OK)
        return re->error;
    return re->ndone == ep->nqps ? GX_OK : GX_INPROGRESS;
}

int verbs_rdmacm_wait_fd(const struct verbs_domain *dom)
{
    return dom->rdmacm ? dom->rdmacm->ch->fd : -1;
}

/* ---- the event pump -------------------------------------------------------- */
void verbs_rdmacm_pump(struct verbs_domain *dom)
{
    struct verbs_rdmacm_dom *r = dom->rdmacm;
    if (!r)
        return;
    for (int n = 0; n < 64; n++) {
        struct pollfd p = { .fd = r->ch->fd, .events = POLLIN };
        if (poll(&p, 1, 0) <= 0)
            return;
        struct rdma_cm_event *ev;
        if (r->api->get_cm_event(r->ch, &ev) != 0)
            return; /* EAGAIN: nothing after all */
        /* Copy what is needed and acknowledge at once: the event's memory
         * (private data included) goes with the acknowledgement. */
        int type = ev->event, status = ev->status;
        struct rdma_cm_id *id = ev->id;
        uint8_t pd[GX_VERBS_CM_PD_MAX];
        size_t pd_len = ev->param.conn.private_data_len;
        if (pd_len > sizeof(pd))
            pd_len = sizeof(pd);
        bool has_pd = ev->param.conn.private_data != NULL && pd_len > 0;
        if (has_pd)
            memcpy(pd, ev->param.conn.private_data, pd_len);
        uint32_t conn_qpn = ev->param.conn.qp_num;
        r->api->ack_cm_event(ev);

        struct verbs_rdmacm_id *c = id ? id->context : NULL;
        if (!c)
            continue;
        GX_TRACE(GX_SUB_FABRIC, "verbs: rdmacm event %s (status %d)", r->api->event_str(type),
                 status);
        if (c->kind == ID_LISTEN) {
            if (type == RDMA_CM_EVENT_CONNECT_REQUEST)
                connect_request(c->lst, id, has_pd ? pd : NULL, pd_len, conn_qpn);
            else
                GX_WARN(GX_SUB_FABRIC, "verbs: rdmacm listener: %s (status %d)",
                        r->api->event_str(type), status);
            continue;
        }
        struct verbs_rdmacm_ep *re = c->ep->rdmacm;
        if (re->error != GX_OK)
            continue;
        int rc = c->kind == ID_ACTIVE ? rdmacm_active_event(c, type, status, has_pd ? pd : NULL, pd_len)
                                      : passive_event(c, type, status, has_pd ? pd : NULL, pd_len);
        if (rc != GX_OK)
            re->error = rc;
    }
}

/* ---- release --------------------------------------------------------------- */
void verbs_rdmacm_ep_release(struct verbs_ep *ep)
{
    struct verbs_rdmacm_ep *re = ep->rdmacm;
    if (!re)
        return;
    const struct gx_rdmacm_api *api = ep->dom->rdmacm->api;
    for (int i = 0; i < GX_VERBS_MAX_QPS; i++) {
        struct verbs_rdmacm_id *c = &re->ids[i];
        if (!c->id)
            continue;
        if (c->state == S_DONE)
            api->disconnect(c->id);
        api->destroy_id(c->id);
    }
    free(re);
    ep->rdmacm = NULL;
}
