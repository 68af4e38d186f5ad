/*
 * softverbs RC requester: turns send-queue WQEs into packets (segmented by
 * path MTU, at most SV_WINDOW_PKTS unacknowledged), handles ACK / NAK /
 * read responses, retires WQEs in order into the send CQ, and runs the
 * retransmit timer (QP timeout, retry_cnt) and the RNR timer (rnr_retry,
 * IB RNR timer table). Recovery is go-back-N from the first missing PSN; an
 * RDMA READ is re-requested from its first missing response; an atomic is a
 * one-packet "read" whose request carries its operands.
 *
 * Everything here runs with the context lock held.
 */
#include <endian.h>
#include <stdio.h>
#include <string.h>

#include "sv_internal.h"

/* IB RNR NAK timer field -> microseconds (IBA table 45). */
static const uint32_t sv_rnr_us[32] = {
	655360, 10,    20,    30,    40,    60,     80,     120,    160,   240,   320,
	480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,  10240, 15360,
	20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

static uint64_t sv_timeout_ns(const struct sv_qp *qp)
{
	uint64_t ns, min;

	if (!qp->attr.timeout)
		return 0; /* 0 means "infinite" in IB */
	ns = 4096ull << qp->attr.timeout; /* 4.096 us * 2^timeout */
	min = (uint64_t)sv_cfg.min_timeout_us * 1000ull;
	return ns < min ? min : ns;
}

static void sv_timer_restart(struct sv_qp *qp)
{
	uint64_t t = sv_timeout_ns(qp);

	qp->timer_due = t ? sv_now_ns() + t : 0;
}

static struct sv_swqe *sv_sq_at(struct sv_qp *qp, uint32_t i)
{
	return &qp->sq[i % qp->sq_cap];
}

static int sv_outstanding(const struct sv_qp *qp)
{
	return qp->sq_head != qp->tx_cur || qp->tx_pkt != 0;
}

static void sv_complete(struct sv_qp *qp, struct sv_swqe *w, enum ibv_wc_status st)
{
	struct ibv_wc wc;

	if (st == IBV_WC_SUCCESS && !(w->flags & IBV_SEND_SIGNALED) && !qp->sq_sig_all)
		return;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr_id;
	wc.status = st;
	wc.qp_num = qp->qpx.qp_base.qp_num;
	switch (w->opcode) {
	case IBV_WR_RDMA_READ:
		wc.opcode = IBV_WC_RDMA_READ;
		wc.byte_len = w->len;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		wc.opcode = IBV_WC_COMP_SWAP;
		wc.byte_len = 8;
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		wc.opcode = IBV_WC_FETCH_ADD;
		wc.byte_len = 8;
		break;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		wc.opcode = IBV_WC_SEND;
		break;
	default:
		wc.opcode = IBV_WC_RDMA_WRITE;
		break;
	}
	if (st != IBV_WC_SUCCESS)
		wc.vendor_err = 0x100 + st;
	sv_cq_push(qp->scq, &wc, 0);
}

void sv_req_retire(struct sv_qp *qp)
{
	while (qp->sq_head != qp->sq_tail) {
		struct sv_swqe *w = sv_sq_at(qp, qp->sq_head);

		if (w->err) {
			enum ibv_wc_status st = (enum ibv_wc_status)(w->err - 1);
			char why[96];

			sv_complete(qp, w, st);
			qp->sq_head++;
			snprintf(why, sizeof(why), "send WQE failed: %s", ibv_wc_status_str(st));
			sv_qp_to_error(qp, st == IBV_WC_LOC_PROT_ERR ? IBV_EVENT_QP_ACCESS_ERR :
					   IBV_EVENT_QP_FATAL, why);
			return;
		}
		if (sv_read_like(w->opcode)) {
			if (!w->done)
				break;
		} else if (sv_psn_diff(sv_psn_add(w->first_psn, w->npkts - 1), qp->una_psn) >= 0) {
			break;
		}
		sv_complete(qp, w, IBV_WC_SUCCESS);
		qp->sq_head++;
	}
	if ((int32_t)(qp->tx_cur - qp->sq_head) < 0) {
		qp->tx_cur = qp->sq_head;
		qp->tx_pkt = 0;
		qp->tx_psn = qp->tx_cur != qp->sq_tail ? sv_sq_at(qp, qp->tx_cur)->first_psn
						       : qp->next_psn;
	}
	/* after a go-back, skip packets an ACK has since covered */
	if (qp->tx_cur != qp->sq_tail && sv_psn_diff(qp->una_psn, qp->tx_psn) > 0) {
		struct sv_swqe *w = sv_sq_at(qp, qp->tx_cur);
		int32_t d = sv_psn_diff(qp->una_psn, w->first_psn);

		if (!sv_read_like(w->opcode) && d > 0 && (uint32_t)d < w->npkts) {
			qp->tx_pkt = (uint32_t)d;
			qp->tx_psn = qp->una_psn;
		}
	}
	if (!sv_outstanding(qp))
		qp->timer_due = 0;
}

/* Checks every local SGE of w; returns 0 or an ibv_wc_status. */
static int sv_check_local(struct sv_qp *qp, struct sv_swqe *w)
{
	unsigned need = sv_read_like(w->opcode) ? IBV_ACCESS_LOCAL_WRITE : 0;
	uint8_t *p;

	if (w->flags & IBV_SEND_INLINE)
		return 0;
	for (uint32_t i = 0; i < w->nsge; i++) {
		if (!w->sge[i].length)
			continue;
		int st = sv_mr_check(qp->ctx, w->sge[i].lkey, &qp->pd->pd, w->sge[i].addr,
				     w->sge[i].length, need, 0, &p);
		if (st)
			return st;
	}
	return 0;
}

/* Copies len bytes at message offset off between the WQE's SGE list and
 * buf. The SGEs passed sv_check_local; the MR lookup again gives where the
 * bytes live here (a dmabuf region is addressed by iova, mapped elsewhere). */
static void sv_sge_copy(struct sv_qp *qp, struct sv_swqe *w, uint32_t off, uint8_t *buf,
			uint32_t len, int to_sge)
{
	struct ibv_sge *sge = w->sge;

	for (uint32_t i = 0; i < w->nsge && len; i++) {
		if (off >= sge[i].length) {
			off -= sge[i].length;
			continue;
		}
		uint32_t n = sge[i].length - off;
		if (n > len)
			n = len;
		uint8_t *p = (uint8_t *)(uintptr_t)sge[i].addr + off;
		uint8_t *mapped;

		if (!(w->flags & IBV_SEND_INLINE) &&
		    sv_mr_check(qp->ctx, sge[i].lkey, &qp->pd->pd, sge[i].addr + off, n, 0, 0,
				&mapped) == 0)
			p = mapped;
		if (to_sge)
			memcpy(p, buf, n);
		else
			memcpy(buf, p, n);
		buf += n;
		len -= n;
		off = 0;
	}
}

static void sv_hdr_init(struct sv_qp *qp, struct sv_hdr *h, uint8_t op, uint32_t psn)
{
	memset(h, 0, sizeof(*h));
	h->op = op;
	h->dst_qpn = qp->attr.dest_qp_num;
	h->src_qpn = qp->qpx.qp_base.qp_num;
	h->psn = psn;
	h->src_lid = qp->ctx->roce ? 0 : qp->ctx->port;
}

static void sv_send_data_pkt(struct sv_qp *qp, struct sv_swqe *w, uint32_t k)
{
	struct sv_ctx *c = qp->ctx;
	uint32_t off = k * qp->mtu;
	uint32_t plen = w->len - off < qp->mtu ? w->len - off : qp->mtu;
	int is_send = w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM;
	struct sv_hdr h;

	sv_hdr_init(qp, &h, is_send ? SV_OP_SEND : SV_OP_WRITE, sv_psn_add(w->first_psn, k));
	if (k == 0)
		h.flags |= SV_F_FIRST;
	if (k == w->npkts - 1)
		h.flags |= SV_F_LAST;
	if (w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		h.flags |= SV_F_IMM;
	if (w->flags & IBV_SEND_SOLICITED)
		h.flags |= SV_F_SOLICITED;
	h.imm = w->imm;
	h.rkey = w->rkey;
	h.dma_len = w->len;
	h.va = w->raddr + off;
	h.offset = off;
	sv_sge_copy(qp, w, off, c->txbuf, plen, 0);
	sv_net_send(c, &qp->peer, &h, c->txbuf, plen);
}

static void sv_send_read_req(struct sv_qp *qp, struct sv_swqe *w)
{
	uint32_t off = w->rd_next * qp->mtu;
	struct sv_hdr h;

	if (w->opcode != IBV_WR_RDMA_READ) {
		uint64_t ops[2] = { htole64(w->cmp_add), htole64(w->swap) };

		sv_hdr_init(qp, &h, SV_OP_ATOMIC, w->first_psn);
		h.flags = SV_F_FIRST | SV_F_LAST |
			  (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? SV_F_CMP_SWAP : 0);
		h.rkey = w->rkey;
		h.va = w->raddr;
		h.dma_len = 8;
		sv_net_send(qp->ctx, &qp->peer, &h, ops, sizeof(ops));
		return;
	}
	sv_hdr_init(qp, &h, SV_OP_READ_REQ, sv_psn_add(w->first_psn, w->rd_next));
	h.flags = SV_F_FIRST | SV_F_LAST;
	h.rkey = w->rkey;
	h.va = w->raddr + off;
	h.dma_len = w->len - off;
	sv_net_send(qp->ctx, &qp->peer, &h, NULL, 0);
}

static int sv_reads_in_flight(struct sv_qp *qp)
{
	int n = 0;

	for (uint32_t i = qp->sq_head; i != qp->tx_cur; i++) {
		struct sv_swqe *w = sv_sq_at(qp, i);
		n += sv_read_like(w->opcode) && !w->done;
	}
	return n;
}

void sv_req_push(struct sv_qp *qp)
{
	int max_rd = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;

	if (qp->attr.qp_state != IBV_QPS_RTS || qp->rnr_due)
		return;
	while (qp->tx_cur != qp->sq_tail) {
		struct sv_swqe *w = sv_sq_at(qp, qp->tx_cur);
		int st;

		if (w->err)
			break;
		if (sv_psn_diff(qp->tx_psn, qp->una_psn) >= SV_WINDOW_PKTS)
			break;
		st = sv_check_local(qp, w);
		if (st) {
			w->err = (uint16_t)(st + 1);
			sv_req_retire(qp);
			return;
		}
		w->checked = 1;
		if (sv_read_like(w->opcode)) {
			if (!w->done) {
				if (sv_reads_in_flight(qp) >= max_rd)
					break;
				sv_send_read_req(qp, w);
			}
			qp->tx_psn = sv_psn_add(w->first_psn, w->npkts);
			qp->tx_cur++;
			qp->tx_pkt = 0;
		} else {
			sv_send_data_pkt(qp, w, qp->tx_pkt);
			qp->tx_psn = sv_psn_add(w->first_psn, qp->tx_pkt + 1);
			if (++qp->tx_pkt == w->npkts) {
				qp->tx_cur++;
				qp->tx_pkt = 0;
			}
		}
		if (sv_psn_diff(qp->tx_psn, qp->hi_psn) > 0)
			qp->hi_psn = qp->tx_psn;
		if (!qp->timer_due)
			sv_timer_restart(qp);
	}
}

/* Go back to the WQE holding PSN p (or to w if given). */
static void sv_rewind_to(struct sv_qp *qp, uint32_t idx, uint32_t pkt)
{
	struct sv_swqe *w = sv_sq_at(qp, idx);
	uint32_t psn;

	if (sv_read_like(w->opcode)) {
		pkt = w->rd_next;
		w->rd_rereq = w->rd_next;
	}
	psn = sv_psn_add(w->first_psn, pkt);
	if (sv_psn_diff(qp->tx_psn, psn) > 0)
		qp->ctx->st.retransmits += (uint64_t)sv_psn_diff(qp->tx_psn, psn);
	qp->tx_cur = idx;
	qp->tx_pkt = sv_read_like(w->opcode) ? 0 : pkt;
	qp->tx_psn = psn;
}

static void sv_rewind_psn(struct sv_qp *qp, uint32_t psn)
{
	for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++) {
		struct sv_swqe *w = sv_sq_at(qp, i);
		int32_t d = sv_psn_diff(psn, w->first_psn);

		if ((int32_t)(i - qp->tx_cur) > 0)
			break;
		if (d >= 0 && (uint32_t)d < w->npkts) {
			sv_rewind_to(qp, i, (uint32_t)d);
			return;
		}
	}
}

static void sv_progressed(struct sv_qp *qp)
{
	qp->retry_left = qp->attr.retry_cnt;
	qp->rnr_left = qp->attr.rnr_retry;
	sv_timer_restart(qp);
}

/* Cumulative acknowledgement of every PSN up to and including psn. */
static void sv_ack_upto(struct sv_qp *qp, uint32_t psn)
{
	uint32_t next = sv_psn_add(psn, 1);

	if (sv_psn_diff(next, qp->una_psn) <= 0 || sv_psn_diff(next, qp->hi_psn) > 0)
		return; /* stale, or acknowledges what was never sent */
	qp->una_psn = next;
	sv_progressed(qp);
	sv_req_retire(qp);
}

static struct sv_swqe *sv_wqe_of_psn(struct sv_qp *qp, uint32_t psn)
{
	for (uint32_t i = qp->sq_head; i != qp->sq_tail; i++) {
		struct sv_swqe *w = sv_sq_at(qp, i);
		int32_t d = sv_psn_diff(psn, w->first_psn);
		if (d >= 0 && (uint32_t)d < w->npkts)
			return w;
	}
	return NULL;
}

static void sv_on_nak(struct sv_qp *qp, const struct sv_hdr *h)
{
	struct sv_ctx *c = qp->ctx;
	uint32_t p = h->psn;
	struct sv_swqe *w;

	sv_ack_upto(qp, sv_psn_add(p, 0xffffff)); /* everything before p */
	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD)
		return;
	switch (h->syndrome) {
	case SV_SYN_NAK_SEQ:
		c->st.nak_seq_rcvd++;
		if (!qp->rnr_due)
			sv_rewind_psn(qp, p);
		break;
	case SV_SYN_NAK_RNR:
		c->st.rnr_nak_rcvd++;
		w = sv_wqe_of_psn(qp, p);
		if (!w)
			break;
		if (qp->attr.rnr_retry != 7) { /* 7 means retry forever */
			if (qp->rnr_left <= 0) {
				w->err = IBV_WC_RNR_RETRY_EXC_ERR + 1;
				sv_req_retire(qp);
				return;
			}
			qp->rnr_left--;
		}
		qp->rnr_due = sv_now_ns() + (uint64_t)sv_rnr_us[h->timer & 31] * 1000ull;
		qp->timer_due = 0;
		sv_rewind_psn(qp, p);
		return;
	default:
		w = sv_wqe_of_psn(qp, p);
		if (!w)
			break;
		w->err = 1 + (h->syndrome == SV_SYN_NAK_ACCESS ? IBV_WC_REM_ACCESS_ERR :
			      h->syndrome == SV_SYN_NAK_INV ? IBV_WC_REM_INV_REQ_ERR :
							      IBV_WC_REM_OP_ERR);
		sv_req_retire(qp);
		return;
	}
	sv_req_push(qp);
}

static void sv_on_read_resp(struct sv_qp *qp, const struct sv_hdr *h, const uint8_t *payload)
{
	struct sv_swqe *w = NULL;
	uint32_t idx;
	int32_t k;

	for (idx = qp->sq_head; idx != qp->tx_cur; idx++) {
		struct sv_swqe *x = sv_sq_at(qp, idx);
		if (sv_read_like(x->opcode) && !x->done) {
			w = x;
			break;
		}
	}
	if (!w)
		return;
	k = sv_psn_diff(h->psn, w->first_psn);
	if (k < 0 || (uint32_t)k < w->rd_next)
		return; /* duplicate */
	if ((uint32_t)k > w->rd_next) {
		/* A response is missing: re-request from it once per gap, and
		 * again when the responder visibly restarted (an index not above
		 * the previous one: responses of one request arrive in order)
		 * and the gap is still there. */
		if (w->rd_rereq != w->rd_next || (uint32_t)k <= w->rd_hi) {
			sv_rewind_to(qp, idx, w->rd_next);
			sv_req_push(qp);
		}
		w->rd_hi = (uint32_t)k;
		return;
	}
	uint32_t off = w->rd_next * qp->mtu;
	uint32_t want = w->len - off < qp->mtu ? w->len - off : qp->mtu;
	if (h->payload_len != want) {
		qp->ctx->st.bad_pkts++;
		return;
	}
	int st = sv_check_local(qp, w);
	if (st) {
		w->err = (uint16_t)(st + 1);
		sv_req_retire(qp);
		return;
	}
	sv_sge_copy(qp, w, off, (uint8_t *)(uintptr_t)payload, want, 1);
	w->rd_next++;
	if (sv_psn_diff(sv_psn_add(h->psn, 1), qp->una_psn) > 0)
		qp->una_psn = sv_psn_add(h->psn, 1);
	sv_progressed(qp);
	if (w->rd_next == w->npkts)
		w->done = 1;
	sv_req_retire(qp);
	sv_req_push(qp);
}

void sv_req_on_response(struct sv_qp *qp, const struct sv_hdr *h, const uint8_t *payload)
{
	enum ibv_qp_state s = qp->attr.qp_state;

	if ((s != IBV_QPS_RTS && s != IBV_QPS_SQD) || h->src_qpn != qp->attr.dest_qp_num)
		return;
	if (h->op == SV_OP_READ_RESP) {
		sv_on_read_resp(qp, h, payload);
		return;
	}
	if (h->syndrome != SV_SYN_ACK) {
		sv_on_nak(qp, h);
		return;
	}
	sv_ack_upto(qp, h->psn);
	/* An ACK past an unfinished READ means its responses were lost. */
	if (qp->sq_head != qp->tx_cur) {
		struct sv_swqe *w = sv_sq_at(qp, qp->sq_head);
		if (sv_read_like(w->opcode) && !w->done &&
		    sv_psn_diff(h->psn, sv_psn_add(w->first_psn, w->npkts - 1)) >= 0 &&
		    w->rd_rereq != w->rd_next)
			sv_rewind_to(qp, qp->sq_head, w->rd_next);
	}
	sv_req_push(qp);
}

void sv_req_timers(struct sv_qp *qp, uint64_t now)
{
	if (qp->rnr_due && now >= qp->rnr_due) {
		qp->rnr_due = 0;
		sv_req_push(qp);
	}
	if (!qp->timer_due || now < qp->timer_due)
		return;
	if (!sv_outstanding(qp) || qp->attr.qp_state != IBV_QPS_RTS) {
		qp->timer_due = 0;
		return;
	}
	qp->ctx->st.timeouts++;
	if (qp->retry_left <= 0) {
		sv_sq_at(qp, qp->sq_head)->err = IBV_WC_RETRY_EXC_ERR + 1;
		sv_req_retire(qp);
		return;
	}
	qp->retry_left--;
	struct sv_swqe *w = sv_sq_at(qp, qp->sq_head);
	int32_t pkt = sv_psn_diff(qp->una_psn, w->first_psn);
	if (pkt < 0)
		pkt = 0;
	if ((uint32_t)pkt >= w->npkts)
		pkt = (int32_t)w->npkts - 1;
	sv_rewind_to(qp, qp->sq_head, (uint32_t)pkt);
	sv_timer_restart(qp);
	sv_req_push(qp);
}
