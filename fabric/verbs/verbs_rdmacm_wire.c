/*
 * verbs_rdmacm_wire.c - the pure parts of the librdmacm path: the private
 * data a CM connection carries (which endpoint and QP it belongs to, or why
 * it was rejected) and the mapping of CM events to gx statuses with an
 * operator hint. No librdmacm call here: unit-tested without the library.
 */
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "fabric/verbs/verbs_rdmacm.h"

void gx_verbs_cm_pd_encode(struct gx_verbs_cm_pd *out, int kind, int qp_index, int nqps, int rank,
                           uint32_t qpn, uint32_t peer_qpn, int status)
{
    memset(out, 0, sizeof(*out));
    out->magic = GX_VERBS_CM_PD_MAGIC;
    out->version = GX_VERBS_CM_PD_VERSION;
    out->kind = (uint8_t)kind;
    out->qp_index = (uint8_t)qp_index;
    out->nqps = (uint8_t)nqps;
    out->rank = rank;
    out->qpn = qpn;
    out->peer_qpn = peer_qpn;
    out->status = status;
}

static bool known_status(int st)
{
    switch (st) {
    case GX_EINVAL: case GX_ESTATE: case GX_ETRUNCATE: case GX_EMISMATCH: case GX_ESYSTEM:
    case GX_ENOMEM: case GX_EPEER: case GX_EPROTO: case GX_EAUTH: case GX_ECONNECT:
    case GX_ETIMEOUT: case GX_EABORTED: case GX_EUNSUPPORTED:
        return true;
    default:
        return false;
    }
}

int gx_verbs_cm_pd_decode(const void *data, size_t len, int want_kind, struct gx_verbs_cm_pd *out,
                          char *why, size_t why_len)
{
    if (!data || len < sizeof(*out)) {
        snprintf(why, why_len, "%zu bytes of private data, a gx peer sends %zu (not a gx peer?)",
                 data ? len : 0, sizeof(*out));
        return GX_EPROTO;
    }
    memcpy(out, data, sizeof(*out));
    if (out->magic != GX_VERBS_CM_PD_MAGIC) {
        snprintf(why, why_len, "private data has magic 0x%08x, not gx's (not a gx peer?)",
                 out->magic);
        return GX_EPROTO;
    }
    if (out->version != GX_VERBS_CM_PD_VERSION) {
        snprintf(why, why_len, "private data version %u, this gx speaks %u (mismatched gx "
                 "versions)", out->version, GX_VERBS_CM_PD_VERSION);
        return GX_EPROTO;
    }
    if (out->kind != want_kind) {
        snprintf(why, why_len, "private data of kind %u where kind %d was expected",
                 out->kind, want_kind);
        return GX_EPROTO;
    }
    if (want_kind == GX_VERBS_CM_PD_REJ) {
        if (out->status >= 0 || !known_status(out->status)) {
            snprintf(why, why_len, "reject carries status %d, not a gx error", out->status);
            return GX_EPROTO;
        }
        return GX_OK;
    }
    if (out->nqps < 1 || out->nqps > GX_VERBS_MAX_QPS || out->qp_index >= out->nqps) {
        snprintf(why, why_len, "private data names QP %u of %u (at most %d)", out->qp_index,
                 out->nqps, GX_VERBS_MAX_QPS);
        return GX_EPROTO;
    }
    if (out->rank < 0 || out->qpn == 0 || out->qpn > 0xffffff || out->peer_qpn == 0 ||
        out->peer_qpn > 0xffffff || out->status != 0) {
        snprintf(why, why_len, "private data has rank %d, QP 0x%x -> 0x%x, status %d "
                 "(garbage)", out->rank, out->qpn, out->peer_qpn, out->status);
        return GX_EPROTO;
    }
    return GX_OK;
}

/* IB CM reject reasons that mean something to an operator (IBTA 12.6.7.2;
 * librdmacm reports them as the REJECTED event's status). */
static const char *ib_reject_reason(int r)
{
    switch (r) {
    case 1: return "no QP available at the peer";
    case 8: return "invalid service ID: nothing listens at that address and port (peer not "
                   "started yet, or an old listener address)";
    case 9: return "transport type not supported by the peer";
    case 10: return "stale connection";
    case 28: return "rejected by the peer's application";
    default: return NULL;
    }
}

int gx_verbs_cm_event_status(int event, int ev_status, char *hint, size_t hint_len)
{
    const char *rr;
    switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
    case RDMA_CM_EVENT_CONNECT_REQUEST:
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
    case RDMA_CM_EVENT_ESTABLISHED:
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
        snprintf(hint, hint_len, "not a failure");
        return GX_OK;
    case RDMA_CM_EVENT_ADDR_ERROR:
        snprintf(hint, hint_len, "address resolution failed (status %d): no RDMA device has a "
                 "route to the peer's IP; check that both hosts' GX_SOCKET_IFNAME interfaces are "
                 "RDMA netdevs with IP addresses (rdma link show; ip route get PEER_IP)",
                 ev_status);
        return ev_status == -ETIMEDOUT ? GX_ETIMEOUT : GX_ECONNECT;
    case RDMA_CM_EVENT_ROUTE_ERROR:
        snprintf(hint, hint_len, "route resolution failed (status %d): on InfiniBand the "
                 "subnet manager returned no path (is an SM running? ibstat, sminfo); on RoCE "
                 "and iWARP the peer's IP has no neighbour entry on the RDMA netdev (ip neigh)",
                 ev_status);
        return ev_status == -ETIMEDOUT ? GX_ETIMEOUT : GX_ECONNECT;
    case RDMA_CM_EVENT_UNREACHABLE:
        snprintf(hint, hint_len, "the peer's connection manager did not answer (status %d): "
                 "the peer host is down or unreachable over RDMA, or (iWARP) a firewall drops "
                 "the CM's TCP port", ev_status);
        return ev_status == -ETIMEDOUT ? GX_ETIMEOUT : GX_ECONNECT;
    case RDMA_CM_EVENT_REJECTED:
        rr = ib_reject_reason(ev_status);
        if (rr)
            snprintf(hint, hint_len, "the peer rejected the connection: %s (reason %d)", rr,
                     ev_status);
        else if (ev_status == -ECONNREFUSED)
            snprintf(hint, hint_len, "the peer refused the connection (iWARP: nothing listens "
                     "on that port, or the peer's application rejected it)");
        else
            snprintf(hint, hint_len, "the peer rejected the connection (reason %d): see the "
                     "peer's log", ev_status);
        return GX_ECONNECT;
    case RDMA_CM_EVENT_CONNECT_ERROR:
        snprintf(hint, hint_len, "the connection could not be established (status %d): a QP "
                 "transition failed at one end or the CM exchange broke; see both hosts' logs "
                 "and dmesg", ev_status);
        return GX_ECONNECT;
    case RDMA_CM_EVENT_DISCONNECTED:
        snprintf(hint, hint_len, "the peer disconnected: its process closed the endpoint or "
                 "exited");
        return GX_EPEER;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        snprintf(hint, hint_len, "the RDMA device was removed (driver unloaded or device "
                 "reset): check dmesg");
        return GX_ESYSTEM;
    case RDMA_CM_EVENT_ADDR_CHANGE:
        snprintf(hint, hint_len, "the local address moved to another device (bonding "
                 "failover?): connections on the old device are no longer valid");
        return GX_EPEER;
    default:
        snprintf(hint, hint_len, "unexpected connection manager event %d (status %d)", event,
                 ev_status);
        return GX_EPROTO;
    }
}
