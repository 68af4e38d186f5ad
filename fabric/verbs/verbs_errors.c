/*
 * verbs_errors.c - what a failed work completion means, in words a cluster
 * operator can act on. Every errored completion becomes one gx status (by
 * blast radius: peer/link, protocol/bug, local system) and one log line that
 * names the peer rank, its host, the QP and the hint. A flush without a
 * local error is explained with the QP's async event when the HCA raised
 * one (e.g. this side refused the peer's write), else blamed on the peer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "fabric/verbs/verbs.h"

extern const struct gx_param gx_param_ib_retry_cnt; /* verbs_device.c */

int verbs_wc_status_map(enum ibv_wc_status st, const char **hint)
{
    switch (st) {
    case IBV_WC_RETRY_EXC_ERR: {
        /* Lossy links exhaust the retries too (softverbs at 20% loss did,
         * with the peer up): do not claim the peer is down. */
        static _Thread_local char text[512];
        long long retries = 7;
        if (gx_param_int(&gx_param_ib_retry_cnt, &retries) != GX_OK)
            retries = 7;
        snprintf(text, sizeof(text), "transport retries exhausted: the peer is down, or the "
                 "link loses packets (%lld retries, GX_IB_RETRY_CNT). Check that the peer "
                 "process and host are alive, the cables, switch ports and their error "
                 "counters, and on RoCE the GID index (GX_IB_GID_INDEX) and IP routing; "
                 "GX_IB_TIMEOUT and GX_IB_RETRY_CNT set how long detection takes", retries);
        *hint = text;
        return GX_EPEER;
    }
    case IBV_WC_RESP_TIMEOUT_ERR:
        *hint = "the peer stopped answering: peer down or link problem (cables, switch)";
        return GX_EPEER;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        *hint = "receiver not ready: a write arrived with no receive WQE posted. gx's "
                "receiver-driven flow control should make this impossible: a gx flow-control "
                "bug, please report it with this log";
        return GX_EPROTO;
    case IBV_WC_REM_ACCESS_ERR:
        *hint = "remote access error: the peer's HCA refused the RDMA write. The remote key is "
                "stale or wrong, the range is outside the peer's registration, or the peer "
                "deregistered the buffer too early: a bug in gx or its caller, not the network";
        return GX_EPROTO;
    case IBV_WC_REM_INV_REQ_ERR:
        *hint = "the peer's HCA found the request invalid (length or QP settings mismatch): a gx "
                "bug or mismatched gx versions";
        return GX_EPROTO;
    case IBV_WC_REM_OP_ERR:
        *hint = "the peer's HCA could not complete the request on its side: see the peer's log";
        return GX_EPROTO;
    case IBV_WC_REM_ABORT_ERR:
        *hint = "the peer aborted the operation";
        return GX_EPEER;
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_MW_BIND_ERR:
        *hint = "local protection or length error: a buffer was not registered, was "
                "deregistered while in use, or a QP limit was exceeded: a bug in gx or its caller";
        return GX_EINVAL;
    case IBV_WC_BAD_RESP_ERR:
    case IBV_WC_INV_EECN_ERR:
    case IBV_WC_INV_EEC_STATE_ERR:
        *hint = "unexpected response from the peer's HCA: mismatched QPs (stale connection?)";
        return GX_EPROTO;
    case IBV_WC_FATAL_ERR:
        *hint = "the HCA reported a fatal error: check dmesg and the device; a reset may be "
                "needed";
        return GX_ESYSTEM;
    case IBV_WC_WR_FLUSH_ERR:
        *hint = "flushed: the QP was already in error";
        return GX_EPEER;
    default:
        *hint = "unexpected completion error: check dmesg and the device";
        return GX_ESYSTEM;
    }
}

int verbs_async_drain(struct verbs_domain *dom, const struct verbs_ep *ep)
{
    struct ibv_async_event ev;
    while (dom->api->get_async_event(dom->ctx, &ev) == 0) {
        switch (ev.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_PATH_MIG_ERR:
        case IBV_EVENT_COMM_EST:
        case IBV_EVENT_SQ_DRAINED:
        case IBV_EVENT_QP_LAST_WQE_REACHED:
            if (ev.element.qp) {
                unsigned n = dom->async_next++ % 16;
                dom->async_seen[n].qpn = ev.element.qp->qp_num;
                dom->async_seen[n].type = (int)ev.event_type;
            }
            break;
        case IBV_EVENT_PORT_ERR:
            GX_WARN(GX_SUB_FABRIC, "verbs: port %s:%d went down (async event): check the cable "
                    "and switch port", dom->port.dev, dom->port.port);
            break;
        case IBV_EVENT_DEVICE_FATAL:
            GX_WARN(GX_SUB_FABRIC, "verbs: device %s reported a fatal error: check dmesg",
                    dom->port.dev);
            break;
        default:
            GX_INFO(GX_SUB_FABRIC, "verbs: async event on %s: %s", dom->port.dev,
                    dom->api->event_type_str(ev.event_type));
            break;
        }
        dom->api->ack_async_event(&ev);
    }
    int found = -1;
    for (int i = 0; i < ep->nqps; i++) {
        if (!ep->qps[i].qp)
            continue;
        for (int j = 0; j < 16; j++)
            if (dom->async_seen[j].type && dom->async_seen[j].qpn == ep->qps[i].qp->qp_num)
                found = dom->async_seen[j].type;
    }
    return found;
}

static const char *wc_opcode_name(const struct ibv_wc *wc)
{
    if (wc->wr_id & WR_RECV)
        return "receive";
    switch (wc->opcode) {
    case IBV_WC_RDMA_WRITE: return "RDMA write";
    case IBV_WC_SEND: return "send";
    case IBV_WC_RDMA_READ: return "RDMA read";
    default: return "work request";
    }
}

void verbs_wc_error(struct verbs_ep *ep, struct verbs_qp *q, const struct ibv_wc *wc)
{
    struct verbs_domain *dom = ep->dom;
    uint32_t qpn = q->qp->qp_num;
    if (wc->status == IBV_WC_WR_FLUSH_ERR) {
        int ev = verbs_async_drain(dom, ep);
        if (ev == IBV_EVENT_QP_ACCESS_ERR)
            verbs_ep_fail(ep, GX_EPROTO, wc->status, FAIL_RX,
                          "QP 0x%x (%d of %d, peer host %s): this HCA refused an RDMA write "
                          "from the peer (remote access violation: a stale, wrong or "
                          "out-of-range key): a bug in gx or its caller on the peer's side",
                          qpn, q->index + 1, ep->nqps, ep->peer_host);
        else if (ev == IBV_EVENT_QP_REQ_ERR)
            verbs_ep_fail(ep, GX_EPROTO, wc->status, FAIL_RX,
                          "QP 0x%x (peer host %s): the peer sent an invalid request (mismatched "
                          "gx versions or a gx bug)", qpn, ep->peer_host);
        else if (ev == IBV_EVENT_QP_FATAL)
            verbs_ep_fail(ep, GX_ESYSTEM, wc->status, FAIL_NONE,
                          "QP 0x%x (peer host %s): fatal QP error reported by the HCA: check "
                          "dmesg", qpn, ep->peer_host);
        else
            verbs_ep_fail(ep, GX_EPEER, wc->status, FAIL_NONE,
                          "QP 0x%x (peer host %s) was flushed without a local error: the peer "
                          "or the link failed (see the peer's log)", qpn, ep->peer_host);
        return;
    }
    const char *hint;
    int st = verbs_wc_status_map(wc->status, &hint);
    verbs_ep_fail(ep, st, wc->status, (wc->wr_id & WR_RECV) ? FAIL_RX : FAIL_TX,
                  "%s failed with %s (vendor error 0x%x) on QP 0x%x (%d of %d) to host %s: %s",
                  wc_opcode_name(wc), dom->api->wc_status_str(wc->status), wc->vendor_err, qpn,
                  q->index + 1, ep->nqps, ep->peer_host, hint);
}
