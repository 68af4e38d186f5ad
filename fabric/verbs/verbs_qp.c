/*
 * verbs_qp.c - the RC queue pairs of a verbs endpoint: creation, the
 * INIT -> RTR -> RTS transitions from the peer's connection info, the pool
 * of zero-length receive WQEs that WRITE WITH IMMEDIATE consumes, and the
 * domain table that maps a completion's wr_id back to its QP (slot plus
 * generation, so completions of a destroyed QP are recognised and dropped).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/sock.h"
#include "fabric/verbs/verbs.h"

#define VERBS_SQ_DEPTH 1024
#define VERBS_RQ_SLACK 64
#define VERBS_RQ_BATCH 32
#define VERBS_MAX_INLINE 64

int verbs_qp_table_add(struct verbs_domain *dom, struct verbs_qp *q)
{
    uint32_t s = 0;
    while (s < dom->nqptab && dom->qptab[s])
        s++;
    if (s == dom->nqptab) {
        uint32_t n = dom->nqptab ? dom->nqptab * 2 : 64;
        if (n > (1u << 27))
            return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: too many QPs");
        struct verbs_qp **t = realloc(dom->qptab, n * sizeof(*t));
        if (!t)
            return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory (QP table)");
        dom->qptab = t;
        uint32_t *g = realloc(dom->qpgen, n * sizeof(*g));
        if (!g)
            return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory (QP table)");
        dom->qpgen = g;
        memset(t + dom->nqptab, 0, (n - dom->nqptab) * sizeof(*t));
        memset(g + dom->nqptab, 0, (n - dom->nqptab) * sizeof(*g));
        dom->nqptab = n;
    }
    dom->qptab[s] = q;
    q->slot = s;
    q->gen = ++dom->qpgen[s];
    return GX_OK;
}

struct verbs_qp *verbs_qp_lookup(struct verbs_domain *dom, uint64_t wr_id)
{
    uint32_t slot = (uint32_t)(wr_id >> 4) & 0x0fffffff, gen = (uint32_t)(wr_id >> 32);
    if (slot >= dom->nqptab || !dom->qptab[slot] || dom->qpgen[slot] != gen)
        return NULL;
    return dom->qptab[slot];
}

uint32_t verbs_ep_cq_need_max(const struct verbs_domain *dom, int nqps, uint32_t depth)
{
    /* verbs_qp_create's send and receive depths, plus the flush QP's send
     * depth (verbs_flush.c), each capped by max_qp_wr as they are there */
    uint32_t maxwr = dom->dattr.max_qp_wr > 0 ? (uint32_t)dom->dattr.max_qp_wr : 1024;
    uint32_t sq = VERBS_SQ_DEPTH < maxwr ? VERBS_SQ_DEPTH : maxwr;
    uint32_t rq = depth + VERBS_RQ_SLACK < maxwr ? depth + VERBS_RQ_SLACK : maxwr;
    uint32_t flush = depth < maxwr ? depth : maxwr;
    return (uint32_t)nqps * (sq + rq) + flush;
}

int verbs_qp_create(struct verbs_ep *ep, struct verbs_qp *q, int index)
{
    struct verbs_domain *dom = ep->dom;
    const struct gx_verbs_api *api = dom->api;
    memset(q, 0, sizeof(*q));
    q->ep = ep;
    q->index = index;
    uint32_t maxwr = dom->dattr.max_qp_wr > 0 ? (uint32_t)dom->dattr.max_qp_wr : 1024;
    q->sq_depth = VERBS_SQ_DEPTH < maxwr ? VERBS_SQ_DEPTH : maxwr;
    q->rq_depth = ep->depth + VERBS_RQ_SLACK < maxwr ? ep->depth + VERBS_RQ_SLACK : maxwr;
    q->sig = calloc(q->sq_depth, sizeof(*q->sig));
    if (!q->sig)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory creating a QP");
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = ep->hw->cq;
    ia.recv_cq = ep->hw->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 0;
    ia.cap.max_send_wr = q->sq_depth;
    ia.cap.max_recv_wr = q->rq_depth;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = VERBS_MAX_INLINE;
    q->qp = api->create_qp(dom->pd, &ia);
    if (!q->qp) {
        ia.cap.max_inline_data = 0; /* some HCAs have no inline: stage instead */
        q->qp = api->create_qp(dom->pd, &ia);
    }
    if (!q->qp) {
        int err = errno;
        free(q->sig);
        q->sig = NULL;
        return gx_fail(err == ENOMEM ? GX_ENOMEM : GX_ESYSTEM, GX_SUB_FABRIC,
                       "verbs: ibv_create_qp(RC, %u send / %u receive WRs) on %s failed: %s",
                       q->sq_depth, q->rq_depth, dom->port.dev, strerror(err));
    }
    dom->max_inline = ia.cap.max_inline_data;
    int rc = verbs_qp_table_add(dom, q);
    if (rc != GX_OK)
        goto err_destroy;
    uint32_t psn;
    if (gx_random_bytes(&psn, sizeof(psn)) != GX_OK)
        psn = (uint32_t)(uintptr_t)q;
    q->psn = psn & 0xffffff;

    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = (uint8_t)dom->port.port;
    a.qp_access_flags = dom->qp_access; /* peers write; reads and atomics once a window asks */
    int err = api->modify_qp(q->qp, &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (err) {
        rc = gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: QP 0x%x to INIT failed: %s",
                     q->qp->qp_num, strerror(err));
        goto err_untable;
    }
    /* Receive WQEs before the peer can know our QP number: no RNR ever. */
    rc = verbs_qp_fill_rq(ep, q);
    if (rc != GX_OK)
        goto err_untable;
    return GX_OK;

err_untable:
    dom->qptab[q->slot] = NULL;
err_destroy:
    api->destroy_qp(q->qp);
    q->qp = NULL;
    free(q->sig);
    q->sig = NULL;
    return rc;
}

/* READs and atomics in flight per QP, both ways (one-sided windows). */
int verbs_rd_atomic_depth(const struct verbs_domain *dom)
{
    int d = dom->dattr.max_qp_rd_atom < dom->dattr.max_qp_init_rd_atom
                ? dom->dattr.max_qp_rd_atom
                : dom->dattr.max_qp_init_rd_atom;
    return d < 1 ? 1 : d > 16 ? 16 : d;
}

int verbs_qp_to_rtr_rts(struct verbs_ep *ep, struct verbs_qp *q, const struct gx_verbs_conn *peer,
                        int index)
{
    struct verbs_domain *dom = ep->dom;
    const struct gx_verbs_settings *s = &dom->set;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    enum ibv_mtu mine = dom->port.attr.active_mtu;
    a.path_mtu = peer->mtu && peer->mtu < mine ? (enum ibv_mtu)peer->mtu : mine;
    a.dest_qp_num = peer->qpn[index];
    a.rq_psn = peer->psn[index];
    a.max_dest_rd_atomic = (uint8_t)verbs_rd_atomic_depth(dom);
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = (uint8_t)dom->port.port;
    a.ah_attr.sl = (uint8_t)s->sl;
    a.ah_attr.dlid = peer->lid;
    bool eth = dom->port.attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    if (eth || peer->lid == 0 || s->gid_index >= 0) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)(dom->port.gid_index > 0 ? dom->port.gid_index : 0);
        a.ah_attr.grh.hop_limit = 255;
        a.ah_attr.grh.traffic_class = (uint8_t)s->tc;
    }
    int err = dom->api->modify_qp(q->qp, &a,
                                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                      IBV_QP_MIN_RNR_TIMER);
    if (err)
        return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: %s: QP 0x%x to RTR (peer QP 0x%x, "
                       "LID %u) failed: %s%s", ep->base.name, q->qp->qp_num, peer->qpn[index],
                       peer->lid, strerror(err),
                       eth ? " (RoCE: check GX_IB_GID_INDEX and the peer's GID)" : "");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = q->psn;
    a.timeout = (uint8_t)s->timeout;
    a.retry_cnt = (uint8_t)s->retry_cnt;
    /* Receiver-driven flow control never lets a write find no receive WQE:
     * an RNR is a gx bug and should surface at once, not be retried. */
    a.rnr_retry = 0;
    a.max_rd_atomic = (uint8_t)verbs_rd_atomic_depth(dom);
    /* A window registered meanwhile (never for the loopback flush QP). */
    int widened = dom->qp_access != IBV_ACCESS_REMOTE_WRITE && q != &ep->flush_qp;
    a.qp_access_flags = dom->qp_access;
    err = dom->api->modify_qp(q->qp, &a,
                              IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
                                  (widened ? IBV_QP_ACCESS_FLAGS : 0));
    if (err)
        return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: %s: QP 0x%x to RTS failed: %s",
                       ep->base.name, q->qp->qp_num, strerror(err));
    q->rts = true;
    return GX_OK;
}

void verbs_qps_widen(struct verbs_domain *dom, unsigned fab_access)
{
    int want = dom->qp_access;
    if (fab_access & GX_FAB_ACCESS_REMOTE_READ)
        want |= IBV_ACCESS_REMOTE_READ;
    if ((fab_access & GX_FAB_ACCESS_REMOTE_ATOMIC) && dom->dattr.atomic_cap != IBV_ATOMIC_NONE)
        want |= IBV_ACCESS_REMOTE_ATOMIC;
    if (want == dom->qp_access)
        return;
    dom->qp_access = want;
    for (uint32_t s = 0; s < dom->nqptab; s++) {
        struct verbs_qp *q = dom->qptab[s];
        if (!q || !q->qp || !q->rts || q->in_error || q == &q->ep->flush_qp)
            continue;
        struct ibv_qp_attr a;
        memset(&a, 0, sizeof(a));
        a.qp_access_flags = want;
        int err = dom->api->modify_qp(q->qp, &a, IBV_QP_ACCESS_FLAGS);
        if (err)
            GX_WARN(GX_SUB_FABRIC, "verbs: %s: QP 0x%x: widening its access for one-sided "
                    "reads and atomics failed: %s (those to this rank will fail)",
                    q->ep->base.name, q->qp->qp_num, strerror(err));
    }
}

void verbs_qp_to_error(struct verbs_ep *ep, struct verbs_qp *q)
{
    if (!q->qp || q->in_error)
        return;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_ERR;
    ep->dom->api->modify_qp(q->qp, &a, IBV_QP_STATE);
    q->in_error = true;
}

void verbs_qp_destroy(struct verbs_ep *ep, struct verbs_qp *q)
{
    struct verbs_domain *dom = ep->dom;
    if (!q->qp)
        return;
    dom->qptab[q->slot] = NULL; /* late completions of this QP are dropped */
    int err = dom->api->destroy_qp(q->qp);
    if (err)
        GX_WARN(GX_SUB_FABRIC, "verbs: ibv_destroy_qp(0x%x) failed: %s", q->qp->qp_num,
                strerror(err));
    q->qp = NULL;
    free(q->sig);
    q->sig = NULL;
}

int verbs_qp_fill_rq(struct verbs_ep *ep, struct verbs_qp *q)
{
    struct ibv_recv_wr wr[VERBS_RQ_BATCH];
    uint64_t id = verbs_wr_id(q, WR_RECV);
    while (q->rq_out < q->rq_depth) {
        uint32_t n = q->rq_depth - q->rq_out;
        if (n > VERBS_RQ_BATCH)
            n = VERBS_RQ_BATCH;
        for (uint32_t i = 0; i < n; i++) {
            wr[i].wr_id = id;
            wr[i].sg_list = NULL;
            wr[i].num_sge = 0;
            wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
        }
        struct ibv_recv_wr *bad = NULL;
        int err = ibv_post_recv(q->qp, wr, &bad);
        if (err)
            return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: %s: ibv_post_recv on QP 0x%x "
                           "failed: %s", ep->base.name, q->qp->qp_num, strerror(err));
        q->rq_out += n;
    }
    return GX_OK;
}
