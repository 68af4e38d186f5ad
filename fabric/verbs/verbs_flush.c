/*
 * verbs_flush.c - the flush after GPU-destined receives.
 *
 * An RDMA write completes at the receiver when the HCA has handed the data
 * to PCIe, not when it has reached GPU memory: a consumer on the GPU could
 * read before the posted writes land. A read request from the HCA to that
 * memory cannot pass those writes (PCIe ordering), so once an RDMA READ of
 * one byte of the buffer completes, everything written before it is
 * visible. This is NCCL's GDR flush, done the same way: each endpoint that
 * may receive into flushed memory has one extra RC QP connected to itself
 * (remote read is granted on that QP only, and on the registrations it
 * reads); when receive k has fully arrived and needs a flush, a signaled
 * one-byte READ of its last byte is posted there, landing in a small host
 * sink, and receive k completes to the caller only when the READ has
 * completed. Receives still complete in post order.
 *
 * Which receives: GX_IB_GDR_FLUSH (verbs_gdr.c). A send into a receive
 * buffer whose registration is flushed reads that buffer; a write_imm into
 * a flushed registration carries the address and key to read in its fin
 * (GX_VERBS_FIN_FLUSH), as the writer learnt from the packed key.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/sock.h"
#include "fabric/verbs/verbs.h"

#define FLUSH_SINK_BYTES 64

void verbs_flush_close(struct verbs_ep *ep)
{
    const struct gx_verbs_api *api = ep->dom->api;
    verbs_qp_destroy(ep, &ep->flush_qp);
    if (ep->flush_sink_mr)
        api->dereg_mr(ep->flush_sink_mr);
    ep->flush_sink_mr = NULL;
    free(ep->flush_sink);
    ep->flush_sink = NULL;
    free(ep->flush_fifo);
    ep->flush_fifo = NULL;
}

/* INIT (remote read: the QP is the target of its own READs), then RTR/RTS
 * with itself as the peer. */
static int connect_to_self(struct verbs_ep *ep, struct verbs_qp *q)
{
    struct verbs_domain *dom = ep->dom;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.port_num = (uint8_t)dom->port.port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
    int err = dom->api->modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                                 IBV_QP_ACCESS_FLAGS);
    if (err)
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: flush QP 0x%x to INIT failed: %s",
                       q->qp->qp_num, strerror(err));
    struct gx_verbs_conn self;
    memset(&self, 0, sizeof(self));
    self.nqps = 1;
    self.mtu = (uint8_t)dom->port.attr.active_mtu;
    self.lid = dom->port.attr.lid;
    memcpy(self.gid, dom->port.gid.raw, sizeof(self.gid));
    self.qpn[0] = q->qp->qp_num;
    self.psn[0] = q->psn;
    return verbs_qp_to_rtr_rts(ep, q, &self, 0);
}

int verbs_flush_open(struct verbs_ep *ep)
{
    struct verbs_domain *dom = ep->dom;
    const struct gx_verbs_api *api = dom->api;
    struct verbs_qp *q = &ep->flush_qp;
    memset(q, 0, sizeof(*q));
    if (!verbs_flush_wanted(dom))
        return GX_OK;
    q->ep = ep;
    q->index = -1;
    uint32_t maxwr = dom->dattr.max_qp_wr > 0 ? (uint32_t)dom->dattr.max_qp_wr : 1024;
    /* At most `credits` receives are in flight, fewer than either bound. */
    q->sq_depth = ep->depth < maxwr ? ep->depth : maxwr;
    ep->flush_fifo = calloc(q->sq_depth, sizeof(*ep->flush_fifo));
    if (!ep->flush_fifo || posix_memalign(&ep->flush_sink, 64, FLUSH_SINK_BYTES) != 0) {
        ep->flush_sink = NULL;
        verbs_flush_close(ep);
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory for a flush QP");
    }
    memset(ep->flush_sink, 0, FLUSH_SINK_BYTES);
    ep->flush_sink_mr = api->reg_mr(dom->pd, ep->flush_sink, FLUSH_SINK_BYTES,
                                    IBV_ACCESS_LOCAL_WRITE); /* READs land here */
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = ep->hw->cq;
    ia.recv_cq = ep->hw->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = q->sq_depth;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    q->qp = ep->flush_sink_mr ? api->create_qp(dom->pd, &ia) : NULL;
    if (!q->qp) {
        int rc = gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "verbs: cannot create the flush QP on %s "
                         "(GX_IB_GDR_FLUSH): %m", dom->port.dev);
        verbs_flush_close(ep);
        return rc;
    }
    int rc = verbs_qp_table_add(dom, q);
    if (rc != GX_OK) {
        api->destroy_qp(q->qp);
        q->qp = NULL;
        verbs_flush_close(ep);
        return rc;
    }
    uint32_t psn;
    if (gx_random_bytes(&psn, sizeof(psn)) != GX_OK)
        psn = (uint32_t)(uintptr_t)q;
    q->psn = psn & 0xffffff;
    rc = connect_to_self(ep, q);
    if (rc != GX_OK) {
        verbs_flush_close(ep);
        return rc;
    }
    GX_TRACE(GX_SUB_FABRIC, "verbs: flush QP 0x%x on %s (%u READs deep)", q->qp->qp_num,
             dom->port.dev, q->sq_depth);
    return GX_OK;
}

/* Where to read receive k back from, if it needs a flush. */
static bool flush_target(const struct verbs_rxslot *r, const struct gx_verbs_fin *f,
                         uint64_t *addr, uint32_t *rkey)
{
    if (f->len == 0)
        return false;
    if (f->kind == GX_VERBS_FIN_SEND && r->flush_buf && f->len <= r->len) {
        *addr = (uint64_t)(uintptr_t)r->buf + f->len - 1;
        *rkey = r->rkey;
        return true;
    }
    if (f->kind == GX_VERBS_FIN_WRITE && (f->flags & GX_VERBS_FIN_FLUSH)) {
        *addr = f->flush_addr;
        *rkey = f->flush_rkey;
        return true;
    }
    return false;
}

void verbs_flush_arrived(struct verbs_ep *ep, uint64_t k)
{
    uint32_t i = (uint32_t)(k % ep->depth);
    struct verbs_rxslot *r = &ep->rx[i];
    const struct gx_verbs_fin *f = &ep->fin_in[i];
    uint64_t addr;
    uint32_t rkey;
    if (r->flush != FLUSH_NONE || !r->fin || r->parts < f->nparts ||
        !flush_target(r, f, &addr, &rkey))
        return;
    struct verbs_qp *q = &ep->flush_qp;
    if (!q->qp) {
        verbs_ep_fail(ep, GX_EPROTO, 0, FAIL_RX, "receive %" PRIu64 " must be flushed but the "
                      "endpoint has no flush QP (a registration of another domain?)", k);
        return;
    }
    if (ep->flush_posted - ep->flush_done >= q->sq_depth) {
        verbs_ep_fail(ep, GX_EPROTO, 0, FAIL_RX, "more than %u flush READs in flight (a gx "
                      "bug)", q->sq_depth);
        return;
    }
    struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)ep->flush_sink, .length = 1,
                           .lkey = ep->flush_sink_mr->lkey };
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = verbs_wr_id(q, WR_FLUSH);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    int err = ibv_post_send(q->qp, &wr, &bad);
    if (err) {
        verbs_ep_fail(ep, GX_ESYSTEM, err, FAIL_RX, "ibv_post_send(RDMA READ) on flush QP 0x%x "
                      "failed: %s", q->qp->qp_num, strerror(err));
        return;
    }
    ep->flush_fifo[ep->flush_posted++ % q->sq_depth] = k;
    r->flush = FLUSH_POSTED;
}

static unsigned long long flushes_done; /* branch gdr: process total (tests) */

unsigned long long gx_verbs_flush_count(void)
{
    return __atomic_load_n(&flushes_done, __ATOMIC_RELAXED);
}

bool verbs_flush_completed(struct verbs_ep *ep, struct verbs_qp *q, const struct ibv_wc *wc)
{
    uint64_t k = ep->flush_fifo[ep->flush_done++ % q->sq_depth];
    __atomic_fetch_add(&flushes_done, 1, __ATOMIC_RELAXED);
    if (ep->state != VEP_ESTABLISHED)
        return false; /* flushed after a failure or close: already reported */
    if (wc->status != IBV_WC_SUCCESS) {
        const char *hint;
        int st = verbs_wc_status_map(wc->status, &hint);
        verbs_ep_fail(ep, st, wc->status, FAIL_RX, "flush READ of receive %" PRIu64 " on "
                      "loopback QP 0x%x failed with %s: the receive buffer's registration "
                      "lacks remote read or was deregistered while in use (%s)", k,
                      q->qp->qp_num, ep->dom->api->wc_status_str(wc->status), hint);
        return false;
    }
    ep->rx[k % ep->depth].flush = FLUSH_DONE;
    return true;
}
