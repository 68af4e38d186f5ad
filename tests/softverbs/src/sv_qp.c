/*
 * softverbs queue pairs: create / modify / query / destroy, the RC state
 * machine with the kernel's required and optional attribute masks per
 * transition (ib_modify_qp_is_ok), and the move to the error state with
 * flush completions. Only RC is modelled.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sv_internal.h"

/* Attribute masks per RC transition, as the kernel's qp_state_table. */
struct sv_trans {
	int valid;
	unsigned req, opt;
};

#define QS(x) IBV_QPS_##x
static const struct sv_trans sv_rc_table[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[QS(RESET)] = {
		[QS(RESET)] = { 1, 0, 0 },
		[QS(ERR)] = { 1, 0, 0 },
		[QS(INIT)] = { 1, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0 },
	},
	[QS(INIT)] = {
		[QS(RESET)] = { 1, 0, 0 },
		[QS(ERR)] = { 1, 0, 0 },
		[QS(INIT)] = { 1, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS },
		[QS(RTR)] = { 1,
			      IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
			      IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX },
	},
	[QS(RTR)] = {
		[QS(RESET)] = { 1, 0, 0 },
		[QS(ERR)] = { 1, 0, 0 },
		[QS(RTS)] = { 1,
			      IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
			      IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
				      IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE },
	},
	[QS(RTS)] = {
		[QS(RESET)] = { 1, 0, 0 },
		[QS(ERR)] = { 1, 0, 0 },
		[QS(RTS)] = { 1, 0,
			      IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
				      IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER },
		[QS(SQD)] = { 1, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY },
	},
	[QS(SQD)] = {
		[QS(RESET)] = { 1, 0, 0 },
		[QS(ERR)] = { 1, 0, 0 },
		[QS(RTS)] = { 1, 0,
			      IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
				      IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE },
		[QS(SQD)] = { 1, 0,
			      IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_AV | IBV_QP_ALT_PATH |
				      IBV_QP_ACCESS_FLAGS | IBV_QP_MAX_QP_RD_ATOMIC |
				      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_CUR_STATE |
				      IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				      IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE },
	},
	[QS(SQE)] = {
		[QS(RESET)] = { 1, 0, 0 },
		[QS(ERR)] = { 1, 0, 0 },
	},
	[QS(ERR)] = {
		[QS(RESET)] = { 1, 0, 0 },
		[QS(ERR)] = { 1, 0, 0 },
	},
};
#undef QS

static void sv_qp_set_state(struct sv_qp *qp, enum ibv_qp_state s)
{
	qp->attr.qp_state = s;
	qp->qpx.qp_base.state = s;
}

static void sv_qp_reset(struct sv_qp *qp)
{
	qp->sq_head = qp->sq_tail = qp->tx_cur = qp->tx_pkt = 0;
	qp->rq_head = qp->rq_tail = 0;
	qp->timer_due = qp->rnr_due = 0;
	qp->nak_sent = qp->ack_pending = qp->since_ack = 0;
	qp->in_msg = qp->have_cur = 0;
	qp->cur_off = 0;
}

static void sv_flush_wc(struct sv_qp *qp, struct sv_cq *cq, uint64_t wr_id,
			enum ibv_wc_opcode op)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wr_id;
	wc.status = IBV_WC_WR_FLUSH_ERR;
	wc.opcode = op;
	wc.qp_num = qp->qpx.qp_base.qp_num;
	wc.vendor_err = 0x244;
	sv_cq_push(cq, &wc, 0);
}

void sv_qp_to_error(struct sv_qp *qp, enum ibv_event_type ev, const char *why)
{
	if (qp->attr.qp_state == IBV_QPS_ERR)
		return;
	if (why)
		sv_log(1, "qp 0x%x -> error: %s", qp->qpx.qp_base.qp_num, why);
	sv_qp_set_state(qp, IBV_QPS_ERR);
	for (; qp->sq_head != qp->sq_tail; qp->sq_head++) {
		struct sv_swqe *w = &qp->sq[qp->sq_head % qp->sq_cap];
		sv_flush_wc(qp, qp->scq, w->wr_id,
			    w->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ :
			    (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM) ?
			    IBV_WC_SEND : IBV_WC_RDMA_WRITE);
	}
	qp->tx_cur = qp->sq_tail;
	qp->tx_pkt = 0;
	if (qp->have_cur) {
		sv_flush_wc(qp, qp->rcq, qp->cur.wr_id, IBV_WC_RECV);
		qp->have_cur = 0;
	}
	if (!qp->srq) {
		for (; qp->rq_head != qp->rq_tail; qp->rq_head++)
			sv_flush_wc(qp, qp->rcq, qp->rq[qp->rq_head % qp->rq_cap].wr_id,
				    IBV_WC_RECV);
	}
	qp->timer_due = qp->rnr_due = 0;
	if ((int)ev >= 0)
		sv_async_event(qp->ctx, ev, &qp->qpx.qp_base);
	if (qp->srq)
		sv_async_event(qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, &qp->qpx.qp_base);
}

static int sv_cap_check(struct ibv_qp_cap *cap, int has_srq)
{
	if (cap->max_send_wr > SV_MAX_WR || cap->max_send_sge > SV_MAX_SGE ||
	    cap->max_inline_data > SV_MAX_INLINE)
		return EINVAL;
	if (!has_srq && (cap->max_recv_wr > SV_MAX_WR || cap->max_recv_sge > SV_MAX_SGE))
		return EINVAL;
	return 0;
}

static int sv_qp_alloc_queues(struct sv_qp *qp)
{
	uint32_t sge = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;

	qp->sq_cap = qp->cap.max_send_wr ? qp->cap.max_send_wr : 1;
	qp->sq = calloc(qp->sq_cap, sizeof(*qp->sq));
	qp->sq_sge = calloc((size_t)qp->sq_cap * sge, sizeof(*qp->sq_sge));
	qp->sq_inline = calloc(qp->sq_cap, SV_MAX_INLINE);
	if (!qp->sq || !qp->sq_sge || !qp->sq_inline)
		return ENOMEM;
	for (uint32_t i = 0; i < qp->sq_cap; i++)
		qp->sq[i].sge = &qp->sq_sge[(size_t)i * sge];
	if (!qp->srq) {
		qp->rq_cap = qp->cap.max_recv_wr ? qp->cap.max_recv_wr : 1;
		qp->rq = calloc(qp->rq_cap, sizeof(*qp->rq));
		if (!qp->rq)
			return ENOMEM;
	}
	return 0;
}

static void sv_qp_free(struct sv_qp *qp)
{
	sv_qp_ex_fini(qp);
	free(qp->sq);
	free(qp->sq_sge);
	free(qp->sq_inline);
	free(qp->rq);
	free(qp);
}

/* ibv_close_device() with QPs of that context still open: they leave the
 * shared device instance (as the kernel destroys them when a real context
 * closes), so that no packet reaches them and no event names the closed
 * context. Called with c->lock held. */
void sv_qp_drop_ctx(struct sv_ctx *c, struct ibv_context *ctx)
{
	for (int i = 0; i < c->nlive;) {
		struct sv_qp *qp = c->live[i];

		if (qp->qpx.qp_base.context != ctx) {
			i++;
			continue;
		}
		sv_log(2, "ibv_close_device: qp 0x%x was still open: destroyed",
		       qp->qpx.qp_base.qp_num);
		c->qps[qp->slot] = NULL;
		c->live[i] = c->live[--c->nlive];
		sv_qp_free(qp);
	}
}

static int sv_qp_register(struct sv_ctx *c, struct sv_qp *qp)
{
	struct sv_qp **live;

	for (uint32_t n = 0; n < SV_MAX_QP; n++) {
		uint32_t s = (c->next_qp_slot + n) % SV_MAX_QP;
		if (c->qps[s])
			continue;
		live = realloc(c->live, (size_t)(c->nlive + 1) * sizeof(*live));
		if (!live)
			return ENOMEM;
		c->live = live;
		c->live[c->nlive++] = qp;
		c->qps[s] = qp;
		c->next_qp_slot = s + 1;
		qp->slot = s;
		qp->qpx.qp_base.qp_num = c->qpn_hi | s;
		return 0;
	}
	return ENOMEM;
}

struct ibv_qp *sv_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct sv_ctx *c = sv_ctx_of(ctx);
	const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			       IBV_QP_INIT_ATTR_CREATE_FLAGS;
	struct sv_qp *qp;
	int err;

	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || (a->comp_mask & ~known) ||
	    a->pd->context != ctx) {
		sv_log(1, "ibv_create_qp_ex: EINVAL: %s", !(a->comp_mask & IBV_QP_INIT_ATTR_PD) ||
		       !a->pd ? "no PD" : a->pd->context != ctx ? "PD of another context" :
		       "comp_mask has bits softverbs does not know");
		errno = EINVAL;
		return NULL;
	}
	/* A create flag the device lacks is EOPNOTSUPP; flags 0 is no request. */
	if (a->qp_type != IBV_QPT_RC ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags)) {
		sv_log(2, "ibv_create_qp_ex: EOPNOTSUPP: %s", a->qp_type != IBV_QPT_RC ?
		       "only RC QPs are modelled" : "create_flags not supported");
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!a->send_cq || !a->recv_cq || a->send_cq->context != ctx ||
	    a->recv_cq->context != ctx || (a->srq && a->srq->context != ctx) ||
	    sv_cap_check(&a->cap, a->srq != NULL)) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->ctx = c;
	qp->cap = a->cap;
	if (qp->cap.max_inline_data < SV_MAX_INLINE)
		qp->cap.max_inline_data = SV_MAX_INLINE; /* HCAs round up too */
	if (a->srq)
		qp->cap.max_recv_wr = qp->cap.max_recv_sge = 0;
	qp->sq_sig_all = a->sq_sig_all;
	qp->scq = (struct sv_cq *)(void *)a->send_cq;
	qp->rcq = (struct sv_cq *)(void *)a->recv_cq;
	qp->srq = (struct sv_srq *)(void *)a->srq;
	qp->pd = (struct sv_pd *)(void *)a->pd;
	err = sv_qp_alloc_queues(qp);
	if (err)
		goto err_free;

	struct ibv_qp *b = &qp->qpx.qp_base;
	b->context = ctx;
	b->qp_context = a->qp_context;
	b->pd = a->pd;
	b->send_cq = a->send_cq;
	b->recv_cq = a->recv_cq;
	b->srq = a->srq;
	b->qp_type = IBV_QPT_RC;
	b->handle = (uint32_t)(uintptr_t)qp;
	pthread_mutex_init(&b->mutex, NULL);
	pthread_cond_init(&b->cond, NULL);
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		const uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
				     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
				     IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
		if (a->send_ops_flags & ~ops) {
			sv_log(2, "ibv_create_qp_ex: EOPNOTSUPP: send_ops_flags 0x%llx: only "
			       "SEND, SEND_WITH_IMM, RDMA_WRITE(_WITH_IMM), RDMA_READ, "
			       "ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD",
			       (unsigned long long)a->send_ops_flags);
			err = EOPNOTSUPP;
			goto err_free;
		}
		qp->send_ops = 1;
		sv_qp_ex_init(qp);
		if (!qp->xwr) {
			err = ENOMEM;
			goto err_free;
		}
	}
	sv_qp_set_state(qp, IBV_QPS_RESET);
	qp->attr.port_num = 1;

	pthread_mutex_lock(&c->lock);
	err = sv_qp_register(c, qp);
	if (!err) {
		qp->scq->refs++;
		qp->rcq->refs++;
		qp->pd->refs++;
		if (qp->srq)
			qp->srq->refs++;
	}
	pthread_mutex_unlock(&c->lock);
	if (err)
		goto err_free;
	a->cap = qp->cap;
	return b;

err_free:
	sv_qp_free(qp);
	errno = err;
	return NULL;
}

SV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	struct ibv_qp *qp;

	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, attr, sizeof(*attr));
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	qp = sv_create_qp_ex(pd->context, &ex);
	if (qp)
		attr->cap = ex.cap;
	return qp;
}

SV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	struct sv_qp *qp = sv_qp_of(ibqp);

	return qp->send_ops ? &qp->qpx : NULL;
}

/* Values an HCA refuses; returns a reason or NULL. */
static const char *sv_attr_invalid(struct sv_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct ibv_port_attr pa;

	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return "port_num must be 1";
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return "pkey_index out of range";
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (a->qp_access_flags & ~(unsigned)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
		return "unknown qp_access_flags";
	sv_query_port_op(qp->qpx.qp_base.context, 1, &pa, sizeof(pa));
	if ((mask & IBV_QP_PATH_MTU) &&
	    (a->path_mtu < IBV_MTU_256 || a->path_mtu > pa.active_mtu))
		return "path_mtu above the port's active MTU";
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > SV_MAX_RD_ATOM)
		return "max_dest_rd_atomic above device max_qp_rd_atom";
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > SV_MAX_RD_ATOM)
		return "max_rd_atomic above device max_qp_init_rd_atom";
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return "min_rnr_timer > 31";
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return "timeout > 31";
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return "retry_cnt > 7";
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return "rnr_retry > 7";
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		return "dest_qp_num > 24 bits";
	if ((mask & (IBV_QP_RQ_PSN)) && a->rq_psn > 0xffffff)
		return "rq_psn > 24 bits";
	if ((mask & (IBV_QP_SQ_PSN)) && a->sq_psn > 0xffffff)
		return "sq_psn > 24 bits";
	if ((mask & IBV_QP_AV) && a->ah_attr.port_num && a->ah_attr.port_num != 1)
		return "ah_attr.port_num must be 1";
	if ((mask & IBV_QP_AV) && qp->ctx->roce && !a->ah_attr.is_global)
		return "RoCE requires a GRH (ah_attr.is_global)";
	return NULL;
}

SV_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
	struct sv_qp *qp = sv_qp_of(ibqp);
	struct sv_ctx *c = qp->ctx;
	enum ibv_qp_state cur, next = IBV_QPS_RESET;
	const struct sv_trans *t;
	const char *why = NULL;
	struct sockaddr_in peer;
	unsigned m = (unsigned)mask & ~(unsigned)IBV_QP_STATE;

	pthread_mutex_lock(&c->lock);
	cur = qp->attr.qp_state;
	if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != cur) {
		why = "cur_qp_state does not match the QP's state";
		goto err_inval;
	}
	next = (mask & IBV_QP_STATE) ? a->qp_state : cur;
	if (next > IBV_QPS_ERR) {
		why = "unknown qp_state";
		goto err_inval;
	}
	t = &sv_rc_table[cur][next];
	if (!t->valid) {
		why = "transition not allowed for RC";
		goto err_inval;
	}
	if ((m & t->req) != t->req) {
		why = "a required attribute for this transition is missing";
		goto err_inval;
	}
	if (m & ~(t->req | t->opt)) {
		why = "an attribute not allowed in this transition is set";
		goto err_inval;
	}
	why = sv_attr_invalid(qp, a, mask);
	if (why)
		goto err_inval;
	if ((mask & IBV_QP_AV) &&
	    sv_addr_from_ah(c, &a->ah_attr, (mask & IBV_QP_DEST_QPN) ? a->dest_qp_num
								   : qp->attr.dest_qp_num,
			    &peer)) {
		why = "ah_attr does not name a softverbs port";
		goto err_inval;
	}

	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = a->port_num;
	if (mask & IBV_QP_AV) {
		qp->attr.ah_attr = a->ah_attr;
		qp->peer = peer;
		qp->peer_lid = a->ah_attr.dlid;
	}
	if (mask & IBV_QP_PATH_MTU) {
		qp->attr.path_mtu = a->path_mtu;
		qp->mtu = 128u << a->path_mtu;
	}
	if (mask & IBV_QP_DEST_QPN) {
		qp->attr.dest_qp_num = a->dest_qp_num;
		/* the UDP port depends on the QP number as well as the AV */
		if (!(mask & IBV_QP_AV) &&
		    sv_addr_from_ah(c, &qp->attr.ah_attr, a->dest_qp_num, &peer) == 0)
			qp->peer = peer;
	}
	if (mask & IBV_QP_RQ_PSN) {
		qp->attr.rq_psn = a->rq_psn;
		qp->epsn = a->rq_psn;
	}
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		qp->attr.max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		qp->attr.min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_SQ_PSN) {
		qp->attr.sq_psn = a->sq_psn;
		qp->next_psn = qp->una_psn = qp->tx_psn = qp->hi_psn = a->sq_psn;
	}
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT) {
		qp->attr.retry_cnt = a->retry_cnt;
		qp->retry_left = a->retry_cnt;
	}
	if (mask & IBV_QP_RNR_RETRY) {
		qp->attr.rnr_retry = a->rnr_retry;
		qp->rnr_left = a->rnr_retry;
	}
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		qp->attr.en_sqd_async_notify = a->en_sqd_async_notify;

	if (next == IBV_QPS_ERR) {
		sv_qp_to_error(qp, (enum ibv_event_type)-1, NULL);
	} else if (next == IBV_QPS_RESET) {
		sv_qp_reset(qp);
		sv_qp_set_state(qp, IBV_QPS_RESET);
	} else {
		sv_qp_set_state(qp, next);
		if (next == IBV_QPS_RTS)
			sv_req_push(qp); /* WQEs posted while in SQD */
	}
	pthread_mutex_unlock(&c->lock);
	return 0;

err_inval:
	pthread_mutex_unlock(&c->lock);
	sv_log(1, "ibv_modify_qp(qp 0x%x, %s -> %s, mask 0x%x): EINVAL: %s", ibqp->qp_num,
	       sv_qp_state_str(cur), sv_qp_state_str(next), (unsigned)mask, why);
	return EINVAL;
}

SV_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			   struct ibv_qp_init_attr *init)
{
	struct sv_qp *qp = sv_qp_of(ibqp);

	pthread_mutex_lock(&qp->ctx->lock);
	*attr = qp->attr;
	attr->cur_qp_state = qp->attr.qp_state;
	attr->cap = qp->cap;
	attr->path_mig_state = IBV_MIG_MIGRATED;
	attr->sq_draining = 0;
	pthread_mutex_unlock(&qp->ctx->lock);
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = ibqp->qp_context;
		init->send_cq = ibqp->send_cq;
		init->recv_cq = ibqp->recv_cq;
		init->srq = ibqp->srq;
		init->cap = qp->cap;
		init->qp_type = IBV_QPT_RC;
		init->sq_sig_all = qp->sq_sig_all;
	}
	return 0;
}

SV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
					 uint32_t flags)
{
	return 0; /* data may be placed out of order, as on most HCAs */
}

SV_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sv_qp *qp = sv_qp_of(ibqp);
	struct sv_ctx *c = qp->ctx;

	pthread_mutex_lock(&c->lock);
	c->qps[qp->slot] = NULL;
	for (int i = 0; i < c->nlive; i++) {
		if (c->live[i] == qp) {
			c->live[i] = c->live[--c->nlive];
			break;
		}
	}
	qp->scq->refs--;
	qp->rcq->refs--;
	qp->pd->refs--;
	if (qp->srq)
		qp->srq->refs--;
	pthread_mutex_unlock(&c->lock);
	sv_qp_free(qp);
	return 0;
}
