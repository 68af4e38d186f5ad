/*
 * softverbs posting: ibv_post_send and ibv_post_recv (through ctx->ops).
 * A post either fails synchronously (EINVAL / ENOMEM, *bad_wr set, nothing
 * queued from that WR on) or queues work whose outcome is a completion.
 * Memory keys are checked when the work is processed, as an HCA does, so a
 * bad lkey is an IBV_WC_LOC_PROT_ERR completion, not a post failure.
 */
#include <errno.h>
#include <string.h>

#include "sv_internal.h"

static enum ibv_wc_opcode sv_wc_opcode(uint32_t wr_op)
{
	switch (wr_op) {
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return IBV_WC_SEND;
	default:
		return IBV_WC_RDMA_WRITE;
	}
}

static void sv_flush_now(struct sv_qp *qp, struct sv_cq *cq, uint64_t wr_id,
			 enum ibv_wc_opcode op)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wr_id;
	wc.status = IBV_WC_WR_FLUSH_ERR;
	wc.opcode = op;
	wc.qp_num = qp->qpx.qp_base.qp_num;
	sv_cq_push(cq, &wc, 0);
}

static const char *sv_opcode_str(uint32_t op)
{
	switch (op) {
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return "ATOMIC_CMP_AND_SWP";
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return "ATOMIC_FETCH_AND_ADD";
	case IBV_WR_LOCAL_INV:
		return "LOCAL_INV";
	case IBV_WR_BIND_MW:
		return "BIND_MW";
	case IBV_WR_SEND_WITH_INV:
		return "SEND_WITH_INV";
	case IBV_WR_TSO:
		return "TSO";
	default:
		return "unknown opcode";
	}
}

/* Queues one send WQE; on failure returns the errno and sets *why. */
static int sv_build_swqe(struct sv_qp *qp, const struct ibv_send_wr *wr, const char **why)
{
	struct sv_swqe *w = &qp->sq[qp->sq_tail % qp->sq_cap];
	uint64_t len = 0;

	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		break;
	default:
		/* bind, invalidate, TSO: not modelled */
		*why = sv_opcode_str(wr->opcode);
		return EINVAL;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge) {
		*why = "num_sge above the QP's max_send_sge";
		return EINVAL;
	}
	if ((wr->send_flags & IBV_SEND_INLINE) && sv_read_like(wr->opcode)) {
		*why = "IBV_SEND_INLINE on an RDMA READ or atomic";
		return EINVAL;
	}
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (wr->opcode != IBV_WR_RDMA_READ && sv_read_like(wr->opcode) && len != 8) {
		*why = "an atomic needs 8 bytes of local buffer (sum of its SGEs)";
		return EINVAL;
	}
	if (len > SV_MAX_MSG) {
		*why = "message longer than the port's max_msg_sz";
		return EINVAL;
	}

	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->flags = wr->send_flags;
	w->imm = wr->imm_data;
	if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		w->rkey = wr->wr.atomic.rkey;
		w->raddr = wr->wr.atomic.remote_addr;
		w->cmp_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else {
		w->rkey = wr->wr.rdma.rkey;
		w->raddr = wr->wr.rdma.remote_addr;
	}
	w->len = (uint32_t)len;
	w->checked = w->done = 0;
	w->err = 0;
	w->rd_next = 0;
	w->rd_rereq = UINT32_MAX;
	w->rd_hi = 0;
	if (wr->send_flags & IBV_SEND_INLINE) {
		uint8_t *buf = qp->sq_inline + (size_t)(qp->sq_tail % qp->sq_cap) * SV_MAX_INLINE;
		uint32_t off = 0;

		if (len > qp->cap.max_inline_data) {
			*why = "inline data longer than the QP's max_inline_data";
			return EINVAL;
		}
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(buf + off, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
		w->sge[0].addr = (uint64_t)(uintptr_t)buf;
		w->sge[0].length = off;
		w->sge[0].lkey = 0;
		w->nsge = 1;
		w->checked = 1; /* inline data needs no key */
	} else {
		if (wr->num_sge) /* zero-length sends may pass a NULL list */
			memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*w->sge));
		w->nsge = (uint32_t)wr->num_sge;
	}
	w->npkts = len ? (uint32_t)((len + qp->mtu - 1) / qp->mtu) : 1;
	w->first_psn = qp->next_psn;
	qp->next_psn = sv_psn_add(qp->next_psn, w->npkts);
	return 0;
}

int sv_post_send_locked(struct sv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	const char *why = NULL;
	int err = 0;

	for (; wr; wr = wr->next) {
		enum ibv_qp_state s = qp->attr.qp_state;

		if (s == IBV_QPS_ERR) {
			sv_flush_now(qp, qp->scq, wr->wr_id, sv_wc_opcode(wr->opcode));
			continue;
		}
		if (s != IBV_QPS_RTS && s != IBV_QPS_SQD) {
			err = EINVAL; /* strict: HCAs refuse sends before RTS */
			why = "QP not in RTS";
			break;
		}
		if (qp->sq_tail - qp->sq_head >= qp->sq_cap) {
			err = ENOMEM;
			why = "send queue full";
			break;
		}
		err = sv_build_swqe(qp, wr, &why);
		if (err)
			break;
		qp->sq_tail++;
	}
	if (err) {
		sv_log(1, "ibv_post_send(qp 0x%x, wr_id 0x%llx): %s: %s",
		       qp->qpx.qp_base.qp_num, wr ? (unsigned long long)wr->wr_id : 0ull,
		       err == ENOMEM ? "ENOMEM" : "EINVAL", why ? why : "?");
		if (bad)
			*bad = wr;
	}
	sv_req_push(qp);
	return err;
}

int sv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sv_qp *qp = sv_qp_of(ibqp);
	int err;

	pthread_mutex_lock(&qp->ctx->lock);
	err = sv_post_send_locked(qp, wr, bad);
	pthread_mutex_unlock(&qp->ctx->lock);
	return err;
}

static int sv_rwqe_fill(struct sv_rwqe *r, const struct ibv_recv_wr *wr, uint32_t max_sge)
{
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge)
		return EINVAL;
	r->wr_id = wr->wr_id;
	r->nsge = (uint32_t)wr->num_sge;
	if (wr->num_sge) /* a zero-SGE receive (for write-with-imm) may pass NULL */
		memcpy(r->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*r->sge));
	return 0;
}

int sv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_qp *qp = sv_qp_of(ibqp);
	int err = 0;

	pthread_mutex_lock(&qp->ctx->lock);
	for (; wr; wr = wr->next) {
		if (qp->srq || qp->attr.qp_state == IBV_QPS_RESET) {
			err = EINVAL;
			sv_log(1, "ibv_post_recv(qp 0x%x): EINVAL: %s", ibqp->qp_num,
			       qp->srq ? "QP uses an SRQ" : "QP in RESET");
			break;
		}
		if (qp->attr.qp_state == IBV_QPS_ERR) {
			sv_flush_now(qp, qp->rcq, wr->wr_id, IBV_WC_RECV);
			continue;
		}
		if (qp->rq_tail - qp->rq_head >= qp->rq_cap) {
			err = ENOMEM;
			sv_log(1, "ibv_post_recv(qp 0x%x): ENOMEM: receive queue full", ibqp->qp_num);
			break;
		}
		err = sv_rwqe_fill(&qp->rq[qp->rq_tail % qp->rq_cap], wr, qp->cap.max_recv_sge);
		if (err) {
			sv_log(1, "ibv_post_recv(qp 0x%x): EINVAL: num_sge above max_recv_sge",
			       ibqp->qp_num);
			break;
		}
		qp->rq_tail++;
	}
	if (err && bad)
		*bad = wr;
	pthread_mutex_unlock(&qp->ctx->lock);
	return err;
}

int sv_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_srq *srq = (struct sv_srq *)(void *)ibsrq;
	int err = 0;

	pthread_mutex_lock(&srq->ctx->lock);
	for (; wr; wr = wr->next) {
		if (srq->tail - srq->head >= srq->cap) {
			err = ENOMEM;
			sv_log(1, "ibv_post_srq_recv: ENOMEM: SRQ full");
			break;
		}
		err = sv_rwqe_fill(&srq->ring[srq->tail % srq->cap], wr, srq->max_sge);
		if (err) {
			sv_log(1, "ibv_post_srq_recv: EINVAL: num_sge above the SRQ's max_sge");
			break;
		}
		srq->tail++;
	}
	if (err && bad)
		*bad = wr;
	pthread_mutex_unlock(&srq->ctx->lock);
	return err;
}
