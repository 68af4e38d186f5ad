/*
 * softverbs RC responder: executes in-sequence requests (SEND into a
 * receive WQE from the RQ or SRQ, RDMA WRITE into a registered region,
 * RDMA READ back to the requester, 8-byte compare-and-swap and fetch-and-add
 * executed once and replayed for duplicates), checks rkeys, access and bounds,
 * answers with coalesced ACKs, one NAK per sequence gap, RNR NAKs when no
 * receive WQE is posted, and error NAKs that move the QP to the error state.
 *
 * Everything here runs with the context lock held.
 */
#include <endian.h>
#include <string.h>

#include "sv_internal.h"

static void sv_resp_reply(struct sv_qp *qp, uint8_t syndrome, uint32_t psn, uint8_t timer)
{
	struct sv_hdr h;

	memset(&h, 0, sizeof(h));
	h.op = SV_OP_ACK;
	h.syndrome = syndrome;
	h.timer = timer;
	h.psn = psn;
	h.dst_qpn = qp->attr.dest_qp_num;
	h.src_qpn = qp->qpx.qp_base.qp_num;
	h.src_lid = qp->ctx->roce ? 0 : qp->ctx->port;
	sv_net_send(qp->ctx, &qp->peer, &h, NULL, 0);
	if (syndrome == SV_SYN_ACK)
		qp->ctx->st.acks_sent++;
}

void sv_resp_flush_ack(struct sv_qp *qp)
{
	if (!qp->ack_pending)
		return;
	qp->ack_pending = 0;
	qp->since_ack = 0;
	sv_resp_reply(qp, SV_SYN_ACK, sv_psn_add(qp->epsn, 0xffffff), 0);
}

/* A fatal request error: NAK it, complete the receive WQE if one is
 * consumed, and move this QP to the error state. */
static void sv_resp_fail(struct sv_qp *qp, const struct sv_hdr *h, uint8_t syndrome,
			 enum ibv_wc_status rwqe_status, const char *why)
{
	sv_resp_flush_ack(qp);
	sv_resp_reply(qp, syndrome, h->psn, 0);
	if (qp->have_cur && rwqe_status != IBV_WC_SUCCESS) {
		struct ibv_wc wc;

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = qp->cur.wr_id;
		wc.status = rwqe_status;
		wc.opcode = IBV_WC_RECV;
		wc.qp_num = qp->qpx.qp_base.qp_num;
		wc.src_qp = h->src_qpn;
		wc.vendor_err = 0x200 + rwqe_status;
		sv_cq_push(qp->rcq, &wc, 1);
		qp->have_cur = 0;
	}
	sv_qp_to_error(qp, syndrome == SV_SYN_NAK_ACCESS ? IBV_EVENT_QP_ACCESS_ERR :
			   IBV_EVENT_QP_REQ_ERR, why);
}

static int sv_rwqe_take(struct sv_qp *qp)
{
	if (qp->srq) {
		struct sv_srq *s = qp->srq;

		if (s->head == s->tail)
			return 0;
		qp->cur = s->ring[s->head++ % s->cap];
		if (s->limit && s->tail - s->head < s->limit) {
			s->limit = 0; /* one shot, re-armed by ibv_modify_srq */
			sv_async_event(qp->ctx, IBV_EVENT_SRQ_LIMIT_REACHED, &s->srq);
		}
	} else {
		if (qp->rq_head == qp->rq_tail)
			return 0;
		qp->cur = qp->rq[qp->rq_head++ % qp->rq_cap];
	}
	qp->have_cur = 1;
	qp->cur_off = 0;
	return 1;
}

static void sv_rnr(struct sv_qp *qp, const struct sv_hdr *h)
{
	sv_resp_flush_ack(qp);
	sv_resp_reply(qp, SV_SYN_NAK_RNR, h->psn, (uint8_t)qp->attr.min_rnr_timer);
	qp->ctx->st.rnr_nak_sent++;
	qp->nak_sent = 1; /* the rest of the window is dropped silently */
	qp->nak_hi = h->psn;
}

static void sv_recv_complete(struct sv_qp *qp, const struct sv_hdr *h,
			     enum ibv_wc_opcode op, uint32_t len)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = qp->cur.wr_id;
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = op;
	wc.byte_len = len;
	wc.qp_num = qp->qpx.qp_base.qp_num;
	wc.src_qp = h->src_qpn;
	wc.slid = h->src_lid;
	if (h->flags & SV_F_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = h->imm;
	}
	qp->have_cur = 0;
	sv_cq_push(qp->rcq, &wc, (h->flags & SV_F_SOLICITED) != 0);
}

static void sv_resp_send(struct sv_qp *qp, const struct sv_hdr *h, const uint8_t *payload)
{
	uint64_t room = 0;

	if (h->flags & SV_F_FIRST) {
		if (qp->in_msg) {
			sv_resp_fail(qp, h, SV_SYN_NAK_INV, IBV_WC_SUCCESS, "SEND FIRST inside a message");
			return;
		}
		if (!sv_rwqe_take(qp)) {
			sv_rnr(qp, h);
			return;
		}
		qp->in_msg = 1;
	} else if (!qp->in_msg || !qp->have_cur || h->offset != qp->cur_off) {
		sv_resp_fail(qp, h, SV_SYN_NAK_INV, IBV_WC_SUCCESS, "SEND packet out of message");
		return;
	}
	for (uint32_t i = 0; i < qp->cur.nsge; i++)
		room += qp->cur.sge[i].length;
	if ((uint64_t)qp->cur_off + h->payload_len > room) {
		qp->in_msg = 0;
		sv_resp_fail(qp, h, SV_SYN_NAK_INV, IBV_WC_LOC_LEN_ERR,
			     "SEND longer than the receive WQE");
		return;
	}
	/* scatter, checking each touched SGE's lkey for local write */
	uint32_t off = qp->cur_off, len = h->payload_len;
	const uint8_t *src = payload;
	for (uint32_t i = 0; i < qp->cur.nsge && len; i++) {
		struct ibv_sge *s = &qp->cur.sge[i];
		uint8_t *dst;

		if (off >= s->length) {
			off -= s->length;
			continue;
		}
		uint32_t n = s->length - off < len ? s->length - off : len;
		if (sv_mr_check(qp->ctx, s->lkey, &qp->pd->pd, s->addr + off, n,
				IBV_ACCESS_LOCAL_WRITE, 0, &dst)) {
			qp->in_msg = 0;
			sv_resp_fail(qp, h, SV_SYN_NAK_OPER, IBV_WC_LOC_PROT_ERR,
				     "receive WQE lkey check failed");
			return;
		}
		memcpy(dst, src, n);
		src += n;
		len -= n;
		off = 0;
	}
	qp->cur_off += h->payload_len;
	if (h->flags & SV_F_LAST) {
		qp->in_msg = 0;
		sv_recv_complete(qp, h, IBV_WC_RECV, qp->cur_off);
	}
	qp->epsn = sv_psn_add(qp->epsn, 1);
	qp->ack_pending = 1;
}

static void sv_resp_write(struct sv_qp *qp, const struct sv_hdr *h, const uint8_t *payload)
{
	uint8_t *dst;

	if (h->flags & SV_F_FIRST) {
		if (qp->in_msg) {
			sv_resp_fail(qp, h, SV_SYN_NAK_INV, IBV_WC_SUCCESS, "WRITE FIRST inside a message");
			return;
		}
		if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE)) {
			sv_resp_fail(qp, h, SV_SYN_NAK_ACCESS, IBV_WC_SUCCESS,
				     "RDMA WRITE to a QP without IBV_ACCESS_REMOTE_WRITE");
			return;
		}
		/* the RETH names the whole message: check it at once */
		if (h->dma_len && sv_mr_check(qp->ctx, h->rkey, &qp->pd->pd, h->va, h->dma_len,
					      IBV_ACCESS_REMOTE_WRITE, 1, &dst)) {
			sv_resp_fail(qp, h, SV_SYN_NAK_ACCESS, IBV_WC_SUCCESS,
				     "RDMA WRITE rkey / bounds / access check failed");
			return;
		}
		qp->cur_off = 0;
	} else if (!qp->in_msg || h->offset != qp->cur_off) {
		sv_resp_fail(qp, h, SV_SYN_NAK_INV, IBV_WC_SUCCESS, "WRITE packet out of message");
		return;
	}
	if ((h->flags & SV_F_LAST) && (h->flags & SV_F_IMM) && !qp->have_cur &&
	    !sv_rwqe_take(qp)) {
		qp->in_msg = !(h->flags & SV_F_FIRST) || qp->in_msg;
		sv_rnr(qp, h);
		return;
	}
	qp->in_msg = !(h->flags & SV_F_LAST);
	if (h->payload_len) {
		if (sv_mr_check(qp->ctx, h->rkey, &qp->pd->pd, h->va, h->payload_len,
				IBV_ACCESS_REMOTE_WRITE, 1, &dst)) {
			sv_resp_fail(qp, h, SV_SYN_NAK_ACCESS, IBV_WC_SUCCESS,
				     "RDMA WRITE rkey / bounds / access check failed");
			return;
		}
		memcpy(dst, payload, h->payload_len);
	}
	qp->cur_off += h->payload_len;
	if ((h->flags & SV_F_LAST) && (h->flags & SV_F_IMM))
		sv_recv_complete(qp, h, IBV_WC_RECV_RDMA_WITH_IMM, h->dma_len);
	qp->epsn = sv_psn_add(qp->epsn, 1);
	qp->ack_pending = 1;
}

/* Executes (or, for a duplicate, re-executes) an RDMA READ request. */
static void sv_resp_read(struct sv_qp *qp, const struct sv_hdr *h, int in_seq)
{
	struct sv_ctx *c = qp->ctx;
	uint8_t *src = NULL;
	uint32_t n;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ)) {
		sv_resp_fail(qp, h, SV_SYN_NAK_ACCESS, IBV_WC_SUCCESS,
			     "RDMA READ from a QP without IBV_ACCESS_REMOTE_READ");
		return;
	}
	if (h->dma_len && sv_mr_check(c, h->rkey, &qp->pd->pd, h->va, h->dma_len,
				      IBV_ACCESS_REMOTE_READ, 1, &src)) {
		sv_resp_fail(qp, h, SV_SYN_NAK_ACCESS, IBV_WC_SUCCESS,
			     "RDMA READ rkey / bounds / access check failed");
		return;
	}
	sv_resp_flush_ack(qp);
	n = h->dma_len ? (h->dma_len + qp->mtu - 1) / qp->mtu : 1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t off = i * qp->mtu;
		uint32_t plen = h->dma_len - off < qp->mtu ? h->dma_len - off : qp->mtu;
		struct sv_hdr r;

		memset(&r, 0, sizeof(r));
		r.op = SV_OP_READ_RESP;
		r.flags = (i == 0 ? SV_F_FIRST : 0) | (i == n - 1 ? SV_F_LAST : 0);
		r.psn = sv_psn_add(h->psn, i);
		r.dst_qpn = qp->attr.dest_qp_num;
		r.src_qpn = qp->qpx.qp_base.qp_num;
		r.src_lid = c->roce ? 0 : c->port;
		r.offset = off;
		sv_net_send(c, &qp->peer, &r, src ? src + off : NULL, plen);
	}
	if (in_seq)
		qp->epsn = sv_psn_add(h->psn, n);
}

/* Executes an atomic (in sequence) once, or answers a duplicate with the
 * original value it returned then; the answer is one read response. */
static void sv_resp_atomic(struct sv_qp *qp, const struct sv_hdr *h, const uint8_t *payload,
			   int in_seq)
{
	struct sv_ctx *c = qp->ctx;
	uint64_t ops[2], orig = 0, v;
	uint8_t *dst;
	struct sv_hdr r;
	int found = 0;

	if (!in_seq) {
		for (unsigned i = 0; i < SV_MAX_RD_ATOM; i++) {
			if (qp->atom[i].valid && qp->atom[i].psn == h->psn) {
				orig = qp->atom[i].orig;
				found = 1;
			}
		}
		if (!found)
			return; /* older than every saved result: nobody waits for it */
	} else {
		if (h->payload_len != sizeof(ops)) {
			c->st.bad_pkts++;
			return;
		}
		if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC)) {
			sv_resp_fail(qp, h, SV_SYN_NAK_ACCESS, IBV_WC_SUCCESS,
				     "atomic on a QP without IBV_ACCESS_REMOTE_ATOMIC");
			return;
		}
		if (h->va & 7) {
			sv_resp_fail(qp, h, SV_SYN_NAK_INV, IBV_WC_SUCCESS,
				     "atomic at a remote address not 8-byte aligned");
			return;
		}
		if (sv_mr_check(c, h->rkey, &qp->pd->pd, h->va, 8, IBV_ACCESS_REMOTE_ATOMIC, 1,
				&dst)) {
			sv_resp_fail(qp, h, SV_SYN_NAK_ACCESS, IBV_WC_SUCCESS,
				     "atomic rkey / bounds / access check failed");
			return;
		}
		memcpy(ops, payload, sizeof(ops));
		ops[0] = le64toh(ops[0]);
		ops[1] = le64toh(ops[1]);
		if (((uintptr_t)dst & 7) == 0) {
			/* atomic against the owner's CPU as well */
			uint64_t *p = (uint64_t *)(void *)dst;

			if (h->flags & SV_F_CMP_SWAP) {
				orig = ops[0];
				__atomic_compare_exchange_n(p, &orig, ops[1], 0, __ATOMIC_SEQ_CST,
							    __ATOMIC_SEQ_CST);
			} else {
				orig = __atomic_fetch_add(p, ops[0], __ATOMIC_SEQ_CST);
			}
		} else { /* a zero-based MR at an odd address: atomic w.r.t. the HCA */
			memcpy(&orig, dst, 8);
			v = (h->flags & SV_F_CMP_SWAP) ? (orig == ops[0] ? ops[1] : orig)
						       : orig + ops[0];
			memcpy(dst, &v, 8);
		}
		qp->atom[qp->atom_next].psn = h->psn;
		qp->atom[qp->atom_next].orig = orig;
		qp->atom[qp->atom_next].valid = 1;
		qp->atom_next = (qp->atom_next + 1) % SV_MAX_RD_ATOM;
		qp->epsn = sv_psn_add(h->psn, 1);
	}
	sv_resp_flush_ack(qp);
	memset(&r, 0, sizeof(r));
	r.op = SV_OP_READ_RESP;
	r.flags = SV_F_FIRST | SV_F_LAST;
	r.psn = h->psn;
	r.dst_qpn = qp->attr.dest_qp_num;
	r.src_qpn = qp->qpx.qp_base.qp_num;
	r.src_lid = c->roce ? 0 : c->port;
	/* the original value as the requester's memory holds it (host order) */
	sv_net_send(c, &qp->peer, &r, &orig, sizeof(orig));
}

void sv_resp_on_request(struct sv_qp *qp, const struct sv_hdr *h, const uint8_t *payload)
{
	enum ibv_qp_state s = qp->attr.qp_state;
	int32_t d;

	if ((s != IBV_QPS_RTR && s != IBV_QPS_RTS && s != IBV_QPS_SQD) ||
	    h->src_qpn != qp->attr.dest_qp_num)
		return; /* silently dropped, as by an HCA */
	if (h->payload_len > qp->mtu) {
		qp->ctx->st.bad_pkts++;
		return;
	}
	d = sv_psn_diff(h->psn, qp->epsn);
	if (d > 0) {
		/* One NAK per gap, as IB requires; but when the requester has
		 * visibly gone back (a PSN not above the previous one) and the
		 * gap is still there, its retransmission was lost too: NAK again
		 * rather than wait for its timer. */
		if (!qp->nak_sent || sv_psn_diff(h->psn, qp->nak_hi) <= 0) {
			sv_resp_flush_ack(qp);
			sv_resp_reply(qp, SV_SYN_NAK_SEQ, qp->epsn, 0);
			qp->ctx->st.nak_seq_sent++;
			qp->nak_sent = 1;
			qp->nak_hi = h->psn;
		} else {
			qp->nak_hi = h->psn;
		}
		return;
	}
	if (d < 0) {
		if (h->op == SV_OP_READ_REQ)
			sv_resp_read(qp, h, 0);
		else if (h->op == SV_OP_ATOMIC)
			sv_resp_atomic(qp, h, payload, 0);
		else
			qp->ack_pending = 1; /* duplicate: acknowledge again */
		return;
	}
	qp->nak_sent = 0;
	switch (h->op) {
	case SV_OP_SEND:
		sv_resp_send(qp, h, payload);
		break;
	case SV_OP_WRITE:
		sv_resp_write(qp, h, payload);
		break;
	case SV_OP_READ_REQ:
		sv_resp_read(qp, h, 1);
		break;
	case SV_OP_ATOMIC:
		sv_resp_atomic(qp, h, payload, 1);
		break;
	default:
		qp->ctx->st.bad_pkts++;
		return;
	}
	if (++qp->since_ack >= SV_ACK_EVERY)
		sv_resp_flush_ack(qp);
}
