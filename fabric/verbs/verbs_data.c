/*
 * verbs_data.c - the verbs provider's data path: posting, completions and
 * failing an endpoint (its memory and its close are verbs_ep.c's).
 *
 * Receiver-driven flow control, so a sender never meets a receiver without
 * a receive WQE (no RNR):
 *   post_recv k   -> the receiver RDMA-writes a clear-to-send record (its
 *                    buffer address, rkey and size) into slot k of the
 *                    sender's cts ring (inline, unsignaled);
 *   post_send k   -> once cts k is there, the sender RDMA-writes the payload
 *                    into that buffer, then a fin record (length, tag) into
 *                    slot k of the receiver's fin ring with WRITE WITH
 *                    IMMEDIATE (imm = k), which consumes one receive WQE and
 *                    completes receive k at the receiver;
 *   write_imm k   -> the same, but the payload goes where the caller's rkey
 *                    says and the receive completes with the caller's imm.
 * Messages of at least GX_IB_STRIPE_MIN bytes are striped across the
 * endpoint's QPs; each stripe ends with its own WRITE WITH IMMEDIATE and the
 * receive completes when the fin and all stripes have arrived.
 *
 * Selective signaling: one signaled WR per op and QP (its last), control
 * writes unsignaled except one in every sq_depth/2 so the send queue always
 * drains. No malloc, lock or system call per message on registered memory:
 * rings are sized at connection time and posting/polling are user-space
 * doorbells. A buffer posted without a registration is registered through
 * the registration cache: for this operation only by default
 * (GX_IB_RCACHE=per-op, an ibv_reg_mr/ibv_dereg_mr pair), kept with
 * GX_IB_RCACHE=cache (docs/verbs.md).
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/verbs/verbs.h"

#define NO_OP UINT64_MAX
#define RQ_REFILL 32
#define MAX_WR_BYTES (1ull << 30)

/* ---- failing -------------------------------------------------------------- */
void verbs_ep_flush_all(struct verbs_ep *ep, int status, int prov_err, enum verbs_fail_op first)
{
    struct verbs_domain *dom = ep->dom;
    struct gx_fab_cqe e = { .ep = &ep->base, .status = status, .prov_err = prov_err };
    for (; ep->tx_done < ep->tx_post; ep->tx_done++) {
        struct verbs_txop *op = &ep->tx[ep->tx_done % ep->depth];
        e.context = op->context;
        e.op = op->op;
        e.flags = first == FAIL_TX ? 0 : GX_FAB_CQE_FLUSHED;
        first = FAIL_NONE;
        verbs_key_put(dom, op->rce_dst ? dom->rc_dst : dom->rc_src, op->rce);
        op->rce = NULL;
        gx_fab_swcq_push(&ep->cq->sw, &e);
    }
    ep->tx_issued = ep->tx_post;
    e.op = GX_FAB_OP_RECV;
    for (; ep->rx_done < ep->rx_post; ep->rx_done++) {
        struct verbs_rxslot *r = &ep->rx[ep->rx_done % ep->depth];
        e.context = r->context;
        e.flags = first == FAIL_RX ? 0 : GX_FAB_CQE_FLUSHED;
        first = FAIL_NONE;
        verbs_key_put(dom, dom->rc_dst, r->rce);
        r->rce = NULL;
        gx_fab_swcq_push(&ep->cq->sw, &e);
    }
    ep->rx_cts = ep->rx_post;
}

void verbs_ep_fail(struct verbs_ep *ep, int status, int prov_err, enum verbs_fail_op first,
                   const char *fmt, ...)
{
    if (ep->state == VEP_ERROR)
        return;
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gx_fab_log_ep_failure("verbs", ep->base.name,
                          ep->tx_post != ep->tx_done || ep->rx_post != ep->rx_done, status, msg);
    ep->state = VEP_ERROR;
    ep->error = status;
    for (int i = 0; i < ep->nqps; i++)
        verbs_qp_to_error(ep, &ep->qps[i]);
    verbs_qp_to_error(ep, &ep->flush_qp);
    verbs_ep_flush_all(ep, status, prov_err, first);
    verbs_cm_notify(ep, GX_VERBS_CTL_ERROR, status, prov_err);
}

/* ---- posting WRs ---------------------------------------------------------- */
static inline uint32_t sq_room(const struct verbs_qp *q)
{
    return q->sq_depth - (uint32_t)(q->wr_posted - q->wr_retired);
}

/* One RDMA WRITE (imm == NULL) or WRITE WITH IMMEDIATE. Signaled when it
 * ends op `op`, or when the queue needs a signaled WR to retire into. */
static int post_write(struct verbs_ep *ep, struct verbs_qp *q, const void *laddr, uint64_t len,
                      uint32_t lkey, uint64_t raddr, uint32_t rkey, const uint32_t *imm,
                      uint64_t op, bool inline_ok)
{
    bool sig = op != NO_OP || q->wr_posted + 1 - q->last_signaled >= q->sq_depth / 2;
    struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)laddr, .length = (uint32_t)len,
                           .lkey = lkey };
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = verbs_wr_id(q, WR_CTRL | (sig ? WR_SIGNALED : 0));
    wr.sg_list = len ? &sge : NULL;
    wr.num_sge = len ? 1 : 0;
    wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = (sig ? IBV_SEND_SIGNALED : 0) |
                    (inline_ok && len && len <= ep->dom->max_inline ? IBV_SEND_INLINE : 0);
    if (imm)
        wr.imm_data = htonl(*imm);
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    int err = ibv_post_send(q->qp, &wr, &bad);
    if (err) {
        verbs_ep_fail(ep, GX_ESYSTEM, err, FAIL_NONE, "ibv_post_send on QP 0x%x failed: %s",
                      q->qp->qp_num, strerror(err));
        return GX_ESYSTEM;
    }
    q->wr_posted++;
    if (sig) {
        q->sig[q->sig_tail++ % q->sq_depth] = (struct verbs_sig){ q->wr_posted, op };
        q->last_signaled = q->wr_posted;
    }
    return GX_OK;
}

/* Advertise posted receives to the peer, as far as credits and room allow. */
static void issue_cts(struct verbs_ep *ep)
{
    struct verbs_qp *q = &ep->qps[0];
    while (ep->rx_cts < ep->rx_post && ep->rx_cts - ep->rx_done < ep->credits &&
           sq_room(q) >= 1 && ep->state == VEP_ESTABLISHED) {
        uint64_t k = ep->rx_cts;
        uint32_t i = (uint32_t)(k % ep->depth);
        const struct verbs_rxslot *r = &ep->rx[i];
        struct gx_verbs_cts *c = &ep->cts_out[i];
        c->seq_head = (uint32_t)(k + 1);
        c->rkey = r->rkey;
        c->addr = (uint64_t)(uintptr_t)r->buf;
        c->len = r->len;
        c->reserved = 0;
        c->seq = (uint32_t)(k + 1);
        if (post_write(ep, q, c, sizeof(*c), ep->ring_out_mr->lkey,
                       ep->peer.cts_addr + (uint64_t)i * sizeof(*c), ep->peer.cts_rkey, NULL,
                       NO_OP, true) != GX_OK)
            return;
        ep->rx_cts++;
    }
}

static inline uint32_t nwrites(uint64_t len)
{
    return len ? (uint32_t)((len + MAX_WR_BYTES - 1) / MAX_WR_BYTES) : 0;
}

/* Write [src, src+len) to raddr on `q` in WRs of at most MAX_WR_BYTES; the
 * last one carries `imm` and is signaled for `op` when imm is given. */
static int write_span(struct verbs_ep *ep, struct verbs_qp *q, const char *src, uint64_t len,
                      uint32_t lkey, uint64_t raddr, uint32_t rkey, const uint32_t *imm,
                      uint64_t op, bool inline_ok)
{
    for (uint64_t off = 0; off < len; off += MAX_WR_BYTES) {
        uint64_t n = len - off < MAX_WR_BYTES ? len - off : MAX_WR_BYTES;
        bool last = off + n == len;
        int rc = post_write(ep, q, src + off, n, lkey, raddr + off, rkey, last ? imm : NULL,
                            last && imm ? op : NO_OP, inline_ok);
        if (rc != GX_OK)
            return rc;
    }
    return GX_OK;
}

/* Issue sends and writes, in post order, whose clear-to-send has arrived
 * (one-sided operations need none). */
void verbs_issue_tx(struct verbs_ep *ep)
{
    while (ep->tx_issued < ep->tx_post && ep->state == VEP_ESTABLISHED) {
        uint64_t k = ep->tx_issued;
        uint32_t i = (uint32_t)(k % ep->depth);
        struct verbs_txop *op = &ep->tx[i];
        if (verbs_op_onesided(op->op)) {
            if (!verbs_rma_issue(ep, op, k))
                return; /* the send queue is full: retried from progress */
            ep->tx_issued++;
            continue;
        }
        /* Messages are numbered apart from the ring: one-sided ops take a
         * ring slot but no receive, and message m pairs with receive m. */
        uint64_t msg = op->msg_seq;
        uint32_t mi = (uint32_t)(msg % ep->depth);
        const struct gx_verbs_cts *c = &ep->cts_in[mi];
        uint32_t want = (uint32_t)(msg + 1);
        if (__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) != want ||
            __atomic_load_n(&c->seq_head, __ATOMIC_ACQUIRE) != want)
            return; /* the peer has not posted receive k yet */
        uint16_t kind;
        uint64_t dst = 0, len = op->len;
        uint32_t rkey = 0;
        if (op->op == GX_FAB_OP_SEND) {
            if (op->len > c->len) {
                kind = GX_VERBS_FIN_TRUNC;
                op->trunc = true;
                op->peer_len = c->len;
                len = 0;
            } else {
                kind = GX_VERBS_FIN_SEND;
                dst = c->addr;
                rkey = c->rkey;
            }
        } else {
            kind = GX_VERBS_FIN_WRITE;
            dst = op->raddr;
            rkey = op->rkey;
        }
        /* Plan the stripes, then check every QP has room before posting. */
        int m = ep->nqps > 1 && len >= ep->dom->set.stripe_min ? ep->nqps : 1;
        uint64_t chunk = m > 1 ? (((len + (uint64_t)m - 1) / (uint64_t)m) + 4095) & ~4095ull : len;
        uint64_t off[GX_VERBS_MAX_QPS], cl[GX_VERBS_MAX_QPS];
        int used = 0;
        for (int s = 0; s < m; s++) {
            off[s] = (uint64_t)s * chunk;
            cl[s] = off[s] < len ? (len - off[s] < chunk ? len - off[s] : chunk) : 0;
            if (s > 0 && cl[s])
                used++;
            if (sq_room(&ep->qps[s]) < nwrites(cl[s]) + (s == 0 ? 1 : 0))
                return; /* a send queue is full: retried from progress */
        }
        op->pending = (uint8_t)(1 + used);
        uint32_t seq32 = (uint32_t)msg;
        for (int s = 1; s < m; s++) {
            if (!cl[s])
                continue;
            if (write_span(ep, &ep->qps[s], op->buf + off[s], cl[s], op->lkey, dst + off[s],
                           rkey, &seq32, k, !op->device) != GX_OK)
                return;
        }
        if (cl[0] && write_span(ep, &ep->qps[0], op->buf, cl[0], op->lkey, dst, rkey, NULL,
                                NO_OP, !op->device) != GX_OK)
            return;
        struct gx_verbs_fin *f = &ep->fin_out[mi];
        f->len = op->len;
        f->tag = op->tag;
        f->imm = op->imm;
        f->kind = kind;
        f->nparts = (uint8_t)used;
        f->flags = 0;
        f->seq = seq32;
        f->flush_rkey = 0;
        if (kind == GX_VERBS_FIN_WRITE && op->flush_target && op->len) {
            f->flags = GX_VERBS_FIN_FLUSH; /* the receiver reads our last byte back */
            f->flush_addr = op->raddr + op->len - 1;
            f->flush_rkey = op->rkey;
        }
        if (post_write(ep, &ep->qps[0], f, sizeof(*f), ep->ring_out_mr->lkey,
                       ep->peer.fin_addr + (uint64_t)mi * sizeof(*f), ep->peer.fin_rkey, &seq32, k,
                       true) != GX_OK)
            return;
        ep->tx_issued++;
    }
}

void verbs_ep_progress(struct gx_fab_ep *base)
{
    struct verbs_ep *ep = (struct verbs_ep *)base;
    if (ep->state != VEP_ESTABLISHED)
        return;
    if (ep->rx_cts < ep->rx_post)
        issue_cts(ep);
    if (ep->tx_issued < ep->tx_post)
        verbs_issue_tx(ep);
}

/* ---- completions ---------------------------------------------------------- */
static void complete_tx(struct verbs_ep *ep)
{
    struct verbs_domain *dom = ep->dom;
    while (ep->tx_done < ep->tx_issued) {
        struct verbs_txop *op = &ep->tx[ep->tx_done % ep->depth];
        if (op->pending)
            return;
        if (op->trunc) {
            verbs_ep_fail(ep, GX_ETRUNCATE, 0, FAIL_TX,
                          "send of %" PRIu64 " bytes (tag %" PRIu64 ") is larger than the "
                          "receive rank %d posted (%" PRIu64 " bytes); nothing was written",
                          op->len, op->tag, ep->base.peer_rank, op->peer_len);
            return;
        }
        verbs_key_put(dom, op->rce_dst ? dom->rc_dst : dom->rc_src, op->rce);
        op->rce = NULL;
        if (op->op == GX_FAB_OP_ATOMIC && op->result)
            *op->result = __atomic_load_n(&ep->atom_buf[ep->tx_done % ep->depth],
                                          __ATOMIC_ACQUIRE);
        struct gx_fab_cqe e = { .context = op->context, .ep = &ep->base, .op = op->op,
                                .len = op->len };
        gx_fab_swcq_push(&ep->cq->sw, &e);
        ep->tx_done++;
    }
}

static void complete_rx(struct verbs_ep *ep)
{
    struct verbs_domain *dom = ep->dom;
    while (ep->rx_done < ep->rx_cts) {
        uint32_t i = (uint32_t)(ep->rx_done % ep->depth);
        struct verbs_rxslot *r = &ep->rx[i];
        const struct gx_verbs_fin *f = &ep->fin_in[i];
        if (!r->fin || r->parts < f->nparts || r->flush == FLUSH_POSTED)
            return; /* not all there, or its flush READ is in flight */
        struct gx_fab_cqe e = { .context = r->context, .ep = &ep->base, .op = GX_FAB_OP_RECV,
                                .len = f->len };
        switch (f->kind) {
        case GX_VERBS_FIN_SEND:
            if (f->len > r->len) {
                verbs_ep_fail(ep, GX_EPROTO, 0, FAIL_RX, "peer wrote %" PRIu64 " bytes into a "
                              "receive of %" PRIu64 " (a gx bug)", f->len, r->len);
                return;
            }
            e.tag = f->tag;
            break;
        case GX_VERBS_FIN_WRITE:
            e.flags = GX_FAB_CQE_IMM;
            e.imm = f->imm;
            break;
        case GX_VERBS_FIN_TRUNC:
            verbs_ep_fail(ep, GX_ETRUNCATE, 0, FAIL_RX,
                          "message of %" PRIu64 " bytes (tag %" PRIu64 ") is larger than the "
                          "posted receive of %" PRIu64 " bytes", f->len, f->tag, r->len);
            return;
        default:
            verbs_ep_fail(ep, GX_EPROTO, 0, FAIL_RX, "fin record of unknown kind %u", f->kind);
            return;
        }
        verbs_key_put(dom, dom->rc_dst, r->rce);
        r->rce = NULL;
        r->fin = false;
        r->parts = 0;
        r->flush = FLUSH_NONE;
        gx_fab_swcq_push(&ep->cq->sw, &e);
        ep->rx_done++;
    }
}

static void on_recv(struct verbs_ep *ep, struct verbs_qp *q, const struct ibv_wc *wc)
{
    if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
        verbs_ep_fail(ep, GX_EPROTO, 0, FAIL_RX, "QP 0x%x received opcode %d without an "
                      "immediate (not a gx verbs peer?)", q->qp->qp_num, (int)wc->opcode);
        return;
    }
    uint32_t s = ntohl(wc->imm_data);
    uint64_t k = ep->rx_done + (uint32_t)(s - (uint32_t)ep->rx_done);
    if (k >= ep->rx_cts) {
        verbs_ep_fail(ep, GX_EPROTO, 0, FAIL_RX, "QP 0x%x: message %u arrived without a "
                      "clear-to-send (a gx flow-control bug)", q->qp->qp_num, s);
        return;
    }
    struct verbs_rxslot *r = &ep->rx[k % ep->depth];
    if (q->index == 0) {
        const struct gx_verbs_fin *f = &ep->fin_in[k % ep->depth];
        if (f->seq != s) {
            verbs_ep_fail(ep, GX_EPROTO, 0, FAIL_RX, "fin record %u carries sequence %u",
                          s, f->seq);
            return;
        }
        r->fin = true;
    } else {
        r->parts++;
    }
    verbs_flush_arrived(ep, k);
    complete_rx(ep);
}

void verbs_cq_process(struct verbs_cq *cq, const struct ibv_wc *wc)
{
    struct verbs_qp *q = verbs_qp_lookup(cq->dom, wc->wr_id);
    if (!q)
        return; /* a late completion of a destroyed QP */
    struct verbs_ep *ep = q->ep;
    if (wc->wr_id & WR_FLUSH) {
        if (verbs_flush_completed(ep, q, wc))
            complete_rx(ep);
        return;
    }
    struct verbs_sig sig = { 0, NO_OP };
    if (wc->wr_id & WR_RECV) {
        q->rq_out--;
    } else if (wc->wr_id & WR_SIGNALED) {
        sig = q->sig[q->sig_head++ % q->sq_depth];
        q->wr_retired = sig.mark;
    }
    if (ep->state != VEP_ESTABLISHED)
        return; /* flushes after a failure or close: already reported */
    if (wc->status != IBV_WC_SUCCESS) {
        verbs_wc_error(ep, q, wc);
        return;
    }
    if (wc->wr_id & WR_RECV) {
        on_recv(ep, q, wc);
        if (q->rq_depth - q->rq_out >= RQ_REFILL && ep->state == VEP_ESTABLISHED &&
            verbs_qp_fill_rq(ep, q) != GX_OK)
            verbs_ep_fail(ep, GX_ESYSTEM, 0, FAIL_NONE, "cannot repost receive WQEs");
        if (ep->rx_cts < ep->rx_post)
            issue_cts(ep); /* credits came back */
    } else if (sig.op != NO_OP) {
        struct verbs_txop *op = &ep->tx[sig.op % ep->depth];
        if (op->pending)
            op->pending--;
        complete_tx(ep);
    }
}

/* ---- posts ---------------------------------------------------------------- */
static inline int post_check(const struct verbs_ep *ep)
{
    if (ep->state == VEP_ESTABLISHED)
        return GX_OK;
    return ep->state == VEP_ERROR ? ep->error : GX_ESTATE;
}

static int post_tx(struct verbs_ep *ep, uint8_t fab_op, const void *buf, size_t len,
                   struct gx_fab_mr *mr, uint64_t tag, uint64_t raddr, uint32_t rkey,
                   bool flush_target, uint32_t imm, uint64_t context)
{
    int rc = post_check(ep);
    if (rc != GX_OK)
        return rc;
    if (ep->tx_post - ep->tx_done >= ep->depth)
        return GX_ENOMEM; /* queue full: poll, then post again */
    struct verbs_txop *op = &ep->tx[ep->tx_post % ep->depth];
    rc = verbs_src_key(ep, buf, len, mr, &op->lkey, &op->rce);
    if (rc != GX_OK)
        return rc;
    op->context = context;
    op->buf = buf;
    op->len = len;
    op->tag = tag;
    op->raddr = raddr;
    op->rkey = rkey;
    op->imm = imm;
    op->op = fab_op;
    op->pending = 0;
    op->trunc = false;
    op->flush_target = flush_target;
    op->device = mr && mr->type == GX_FAB_MEM_CUDA;
    op->rce_dst = false;
    op->msg_seq = ep->tx_msgs++;
    ep->tx_post++;
    verbs_issue_tx(ep);
    return GX_OK;
}

int verbs_post_send(struct gx_fab_ep *base, const void *buf, size_t len, struct gx_fab_mr *mr,
                    uint64_t tag, uint64_t context)
{
    return post_tx((struct verbs_ep *)base, GX_FAB_OP_SEND, buf, len, mr, tag, 0, 0, false, 0,
                   context);
}

int verbs_post_write_imm(struct gx_fab_ep *base, const void *buf, size_t len, struct gx_fab_mr *mr,
                         uint64_t raddr, const struct gx_fab_rkey *rkey, uint32_t imm,
                         uint64_t context)
{
    struct verbs_ep *ep = (struct verbs_ep *)base;
    struct gx_verbs_rkey k;
    if (!rkey || rkey->len != sizeof(k))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "verbs: %s: remote key of %u bytes, this "
                       "provider packs %zu (a key of another provider, or corrupted)",
                       ep->base.name, rkey ? rkey->len : 0, sizeof(k));
    memcpy(&k, rkey->bytes, sizeof(k));
    if (k.magic != GX_VERBS_RKEY_MAGIC)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "verbs: %s: remote key has a bad magic 0x%08x",
                       ep->base.name, k.magic);
    if (raddr < k.base || len > k.len || raddr - k.base > k.len - len)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC,
                       "verbs: %s: remote write of %zu bytes at 0x%" PRIx64
                       " is outside the registration [0x%" PRIx64 ", +%" PRIu64 ")",
                       ep->base.name, len, raddr, k.base, k.len);
    if (len && !(k.access & GX_FAB_ACCESS_REMOTE_WRITE))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "verbs: %s: the target registration has no "
                       "remote write access", ep->base.name);
    return post_tx(ep, GX_FAB_OP_WRITE_IMM, buf, len, mr, 0, raddr, k.rkey,
                   (k.access & GX_VERBS_RKEY_FLUSH) != 0, imm, context);
}

int verbs_post_recv(struct gx_fab_ep *base, void *buf, size_t len, struct gx_fab_mr *mr,
                    uint64_t context)
{
    struct verbs_ep *ep = (struct verbs_ep *)base;
    int rc = post_check(ep);
    if (rc != GX_OK)
        return rc;
    if (ep->rx_post - ep->rx_done >= ep->depth)
        return GX_ENOMEM;
    struct verbs_rxslot *r = &ep->rx[ep->rx_post % ep->depth];
    rc = verbs_dst_key(ep, buf, len, mr, &r->rkey, &r->rce);
    if (rc != GX_OK)
        return rc;
    r->context = context;
    r->buf = buf;
    r->len = len;
    r->fin = false;
    r->parts = 0;
    r->flush = FLUSH_NONE;
    /* The registration the peer writes through says whether it is flushed. */
    const struct verbs_mr *dst = r->rce ? gx_fab_rcache_handle(r->rce) : (struct verbs_mr *)mr;
    r->flush_buf = buf && len && dst && dst->flush_read;
    ep->rx_post++;
    issue_cts(ep);
    return GX_OK;
}
