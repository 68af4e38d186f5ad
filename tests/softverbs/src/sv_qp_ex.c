/*
 * softverbs extended send API (ibv_qp_ex: ibv_wr_start ... ibv_wr_complete),
 * used by perftest by default. Builders collect work requests in a per-QP
 * batch (wr_id and wr_flags are read when the opcode builder runs, inline
 * data is copied when it is set); ibv_wr_complete posts the batch through
 * the same path as ibv_post_send, all or nothing for builder errors.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sv_internal.h"

#define SV_XWR_MAX 512

struct sv_xwr {
	struct ibv_send_wr wr;
	struct ibv_sge sge[SV_MAX_SGE];
	uint8_t inl[SV_MAX_INLINE];
};

static struct sv_qp *sv_qpx(struct ibv_qp_ex *q)
{
	return (struct sv_qp *)(void *)q;
}

static uint32_t sv_xwr_cap(const struct sv_qp *qp)
{
	return qp->sq_cap < SV_XWR_MAX ? qp->sq_cap : SV_XWR_MAX;
}

static struct sv_xwr *sv_xwr_new(struct ibv_qp_ex *q, enum ibv_wr_opcode op)
{
	struct sv_qp *qp = sv_qpx(q);
	struct sv_xwr *x;

	if (qp->nxwr == sv_xwr_cap(qp)) {
		qp->xwr_err = ENOMEM;
		return NULL;
	}
	x = &qp->xwr[qp->nxwr++];
	memset(&x->wr, 0, sizeof(x->wr));
	x->wr.wr_id = q->wr_id;
	x->wr.send_flags = q->wr_flags;
	x->wr.opcode = op;
	x->wr.sg_list = x->sge;
	return x;
}

static struct sv_xwr *sv_xwr_last(struct ibv_qp_ex *q)
{
	struct sv_qp *qp = sv_qpx(q);

	if (!qp->nxwr) {
		qp->xwr_err = EINVAL;
		return NULL;
	}
	return &qp->xwr[qp->nxwr - 1];
}

static void sv_wr_start(struct ibv_qp_ex *q)
{
	sv_qpx(q)->nxwr = 0;
	sv_qpx(q)->xwr_err = 0;
}

static int sv_wr_complete(struct ibv_qp_ex *q)
{
	struct sv_qp *qp = sv_qpx(q);
	struct ibv_send_wr *bad = NULL;
	int err = qp->xwr_err;

	if (err)
		sv_log(1, "ibv_wr_complete(qp 0x%x): %s: nothing posted: %s", q->qp_base.qp_num,
		       err == ENOMEM ? "ENOMEM" : "EINVAL", err == ENOMEM ?
		       "more work requests than the send queue holds" :
		       "a setter without an ibv_wr_<opcode> before it, more SGEs than "
		       "16 or inline data above 256 bytes");
	if (!err && qp->nxwr) {
		for (uint32_t i = 0; i + 1 < qp->nxwr; i++)
			qp->xwr[i].wr.next = &qp->xwr[i + 1].wr;
		qp->xwr[qp->nxwr - 1].wr.next = NULL;
		pthread_mutex_lock(&qp->ctx->lock);
		err = sv_post_send_locked(qp, &qp->xwr[0].wr, &bad);
		pthread_mutex_unlock(&qp->ctx->lock);
	}
	qp->nxwr = 0;
	qp->xwr_err = 0;
	return err;
}

static void sv_wr_abort(struct ibv_qp_ex *q)
{
	sv_qpx(q)->nxwr = 0;
	sv_qpx(q)->xwr_err = 0;
}

static void sv_wr_send(struct ibv_qp_ex *q)
{
	sv_xwr_new(q, IBV_WR_SEND);
}

static void sv_wr_send_imm(struct ibv_qp_ex *q, __be32 imm)
{
	struct sv_xwr *x = sv_xwr_new(q, IBV_WR_SEND_WITH_IMM);
	if (x)
		x->wr.imm_data = imm;
}

static void sv_wr_rdma(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey,
		       uint64_t raddr, __be32 imm)
{
	struct sv_xwr *x = sv_xwr_new(q, op);
	if (x) {
		x->wr.wr.rdma.rkey = rkey;
		x->wr.wr.rdma.remote_addr = raddr;
		x->wr.imm_data = imm;
	}
}

static void sv_wr_rdma_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t raddr)
{
	sv_wr_rdma(q, IBV_WR_RDMA_WRITE, rkey, raddr, 0);
}

static void sv_wr_rdma_write_imm(struct ibv_qp_ex *q, uint32_t rkey, uint64_t raddr,
				 __be32 imm)
{
	sv_wr_rdma(q, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, raddr, imm);
}

static void sv_wr_atomic(struct ibv_qp_ex *q, enum ibv_wr_opcode op, uint32_t rkey,
			 uint64_t raddr, uint64_t cmp_add, uint64_t swap)
{
	struct sv_xwr *x = sv_xwr_new(q, op);
	if (x) {
		x->wr.wr.atomic.rkey = rkey;
		x->wr.wr.atomic.remote_addr = raddr;
		x->wr.wr.atomic.compare_add = cmp_add;
		x->wr.wr.atomic.swap = swap;
	}
}

static void sv_wr_atomic_cmp_swp(struct ibv_qp_ex *q, uint32_t rkey, uint64_t raddr,
				 uint64_t compare, uint64_t swap)
{
	sv_wr_atomic(q, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, raddr, compare, swap);
}

static void sv_wr_atomic_fetch_add(struct ibv_qp_ex *q, uint32_t rkey, uint64_t raddr,
				   uint64_t add)
{
	sv_wr_atomic(q, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, raddr, add, 0);
}

static void sv_wr_rdma_read(struct ibv_qp_ex *q, uint32_t rkey, uint64_t raddr)
{
	sv_wr_rdma(q, IBV_WR_RDMA_READ, rkey, raddr, 0);
}

static void sv_wr_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr, uint32_t len)
{
	struct sv_xwr *x = sv_xwr_last(q);
	if (x) {
		x->sge[0] = (struct ibv_sge){ .addr = addr, .length = len, .lkey = lkey };
		x->wr.num_sge = 1;
	}
}

static void sv_wr_set_sge_list(struct ibv_qp_ex *q, size_t n, const struct ibv_sge *list)
{
	struct sv_xwr *x = sv_xwr_last(q);
	if (!x)
		return;
	if (n > SV_MAX_SGE) {
		sv_qpx(q)->xwr_err = EINVAL;
		return;
	}
	memcpy(x->sge, list, n * sizeof(*list));
	x->wr.num_sge = (int)n;
}

static void sv_wr_set_inline_data_list(struct ibv_qp_ex *q, size_t n,
				       const struct ibv_data_buf *bufs)
{
	struct sv_xwr *x = sv_xwr_last(q);
	size_t off = 0;

	if (!x)
		return;
	for (size_t i = 0; i < n; i++) {
		if (bufs[i].length > SV_MAX_INLINE - off) {
			sv_qpx(q)->xwr_err = EINVAL;
			return;
		}
		memcpy(x->inl + off, bufs[i].addr, bufs[i].length);
		off += bufs[i].length;
	}
	x->sge[0] = (struct ibv_sge){ .addr = (uint64_t)(uintptr_t)x->inl,
				      .length = (uint32_t)off };
	x->wr.num_sge = 1;
	x->wr.send_flags |= IBV_SEND_INLINE;
}

static void sv_wr_set_inline_data(struct ibv_qp_ex *q, void *addr, size_t len)
{
	struct ibv_data_buf b = { .addr = addr, .length = len };

	sv_wr_set_inline_data_list(q, 1, &b);
}

void sv_qp_ex_init(struct sv_qp *qp)
{
	struct ibv_qp_ex *q = &qp->qpx;

	qp->xwr = calloc(sv_xwr_cap(qp), sizeof(*qp->xwr));
	q->comp_mask = 0;
	q->wr_send = sv_wr_send;
	q->wr_send_imm = sv_wr_send_imm;
	q->wr_rdma_write = sv_wr_rdma_write;
	q->wr_rdma_write_imm = sv_wr_rdma_write_imm;
	q->wr_rdma_read = sv_wr_rdma_read;
	q->wr_atomic_cmp_swp = sv_wr_atomic_cmp_swp;
	q->wr_atomic_fetch_add = sv_wr_atomic_fetch_add;
	q->wr_set_sge = sv_wr_set_sge;
	q->wr_set_sge_list = sv_wr_set_sge_list;
	q->wr_set_inline_data = sv_wr_set_inline_data;
	q->wr_set_inline_data_list = sv_wr_set_inline_data_list;
	q->wr_start = sv_wr_start;
	q->wr_complete = sv_wr_complete;
	q->wr_abort = sv_wr_abort;
}

void sv_qp_ex_fini(struct sv_qp *qp)
{
	free(qp->xwr);
	qp->xwr = NULL;
}
