/*
 * Error cases: the completions an HCA reports for protection violations,
 * a dead peer, a missing receive, a short receive buffer and QP misuse, and
 * the error state with flushed work that follows.
 */
#include <errno.h>
#include <string.h>

#include "sv_test.h"

static void expect_state(struct ibv_qp *qp, enum ibv_qp_state want, const char *what)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	CHECK(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0, "query_qp");
	CHECK(a.qp_state == want, "%s: QP state %d, want %d", what, a.qp_state, want);
}

static uint64_t addr(struct pair *p, int s, size_t off)
{
	return (uint64_t)(uintptr_t)(p->buf[s] + off);
}

/* One remote violation: wr 1 fails with REM_ACCESS_ERR, wr 2 is flushed,
 * both QPs end in the error state and the responder's receive is flushed. */
static void remote_violation(struct pair_opts *o, enum ibv_wr_opcode op, int bad_key,
			     size_t roff, uint32_t len, const char *what)
{
	struct pair p;

	pair_create(&p, o);
	pair_connect(&p);
	post_recv(&p, 1, 500, 0, 4096);
	CHECK(post_one(p.qp[0], op, 1, addr(&p, 0, 0), len, p.mr[0]->lkey, addr(&p, 1, roff),
		       bad_key ? p.mr[1]->rkey ^ 0x5500 : p.mr[1]->rkey, IBV_SEND_SIGNALED,
		       0) == 0,
	      "post");
	CHECK(post_one(p.qp[0], IBV_WR_SEND, 2, addr(&p, 0, 0), 8, p.mr[0]->lkey, 0, 0, 0, 0) == 0,
	      "post 2");
	expect_wc(p.cq[0], 1, IBV_WC_REM_ACCESS_ERR, what);
	expect_wc(p.cq[0], 2, IBV_WC_WR_FLUSH_ERR, "following WR flushed");
	expect_wc(p.cq[1], 500, IBV_WC_WR_FLUSH_ERR, "responder receive flushed");
	expect_state(p.qp[0], IBV_QPS_ERR, what);
	expect_state(p.qp[1], IBV_QPS_ERR, "responder");
	/* posting to a QP in error completes with a flush, it does not fail */
	CHECK(post_one(p.qp[0], IBV_WR_SEND, 3, addr(&p, 0, 0), 8, p.mr[0]->lkey, 0, 0, 0, 0) == 0,
	      "post in error");
	expect_wc(p.cq[0], 3, IBV_WC_WR_FLUSH_ERR, "post in error state");
	pair_destroy(&p);
}

int case_bad_rkey(void)
{
	struct pair_opts o;

	pair_opts_default(&o);
	remote_violation(&o, IBV_WR_RDMA_WRITE, 1, 0, 100, "write with a bad rkey");
	remote_violation(&o, IBV_WR_RDMA_READ, 1, 0, 100, "read with a bad rkey");
	remote_violation(&o, IBV_WR_RDMA_READ, 0, o.len - 10, 100, "read past the region");
	remote_violation(&o, IBV_WR_RDMA_WRITE, 0, o.len - 4000, 5000, "write past the region");
	o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	remote_violation(&o, IBV_WR_RDMA_WRITE, 0, 0, 100, "write to a region without remote write");
	pair_opts_default(&o);
	o.qp_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	remote_violation(&o, IBV_WR_RDMA_READ, 0, 0, 100, "read from a QP without remote read");
	printf("PASS bad_rkey\n");
	return 0;
}

int case_bad_lkey(void)
{
	struct pair_opts o;
	struct pair p;

	pair_opts_default(&o);
	pair_create(&p, &o);
	pair_connect(&p);
	post_recv(&p, 1, 500, 0, 4096);
	CHECK(post_one(p.qp[0], IBV_WR_SEND, 1, addr(&p, 0, 0), 64, p.mr[0]->lkey + 0x100, 0, 0,
		       IBV_SEND_SIGNALED, 0) == 0,
	      "post");
	CHECK(post_one(p.qp[0], IBV_WR_SEND, 2, addr(&p, 0, 0), 8, p.mr[0]->lkey, 0, 0, 0, 0) == 0,
	      "post 2");
	expect_wc(p.cq[0], 1, IBV_WC_LOC_PROT_ERR, "send with a bad lkey");
	expect_wc(p.cq[0], 2, IBV_WC_WR_FLUSH_ERR, "following WR flushed");
	expect_state(p.qp[0], IBV_QPS_ERR, "after local protection error");
	pair_destroy(&p);

	/* an SGE outside its region is a local protection error too */
	pair_create(&p, &o);
	pair_connect(&p);
	CHECK(post_one(p.qp[0], IBV_WR_RDMA_WRITE, 1, addr(&p, 0, o.len - 10), 64, p.mr[0]->lkey,
		       addr(&p, 1, 0), p.mr[1]->rkey, IBV_SEND_SIGNALED, 0) == 0,
	      "post");
	expect_wc(p.cq[0], 1, IBV_WC_LOC_PROT_ERR, "SGE past its region");
	pair_destroy(&p);

	/* a receive WQE with a bad lkey: the receiver reports a local
	 * protection error, the sender a remote operational error */
	pair_create(&p, &o);
	pair_connect(&p);
	{
		struct ibv_sge rs = { addr(&p, 1, 0), 256, p.mr[1]->lkey ^ 0x300 };
		struct ibv_recv_wr rw = { .wr_id = 700, .sg_list = &rs, .num_sge = 1 }, *rb;
		CHECK(ibv_post_recv(p.qp[1], &rw, &rb) == 0, "post_recv");
	}
	CHECK(post_one(p.qp[0], IBV_WR_SEND, 1, addr(&p, 0, 0), 64, p.mr[0]->lkey, 0, 0,
		       IBV_SEND_SIGNALED, 0) == 0,
	      "post");
	expect_wc(p.cq[1], 700, IBV_WC_LOC_PROT_ERR, "receive WQE with a bad lkey");
	expect_wc(p.cq[0], 1, IBV_WC_REM_OP_ERR, "sender to a bad receive WQE");
	pair_destroy(&p);

	/* RDMA READ lands in local memory: needs IBV_ACCESS_LOCAL_WRITE */
	o.mr_access = IBV_ACCESS_REMOTE_READ;
	pair_create(&p, &o);
	pair_connect(&p);
	CHECK(post_one(p.qp[0], IBV_WR_RDMA_READ, 1, addr(&p, 0, 0), 64, p.mr[0]->lkey,
		       addr(&p, 1, 0), p.mr[1]->rkey, IBV_SEND_SIGNALED, 0) == 0,
	      "post");
	expect_wc(p.cq[0], 1, IBV_WC_LOC_PROT_ERR, "read into a region without local write");
	pair_destroy(&p);
	printf("PASS bad_lkey\n");
	return 0;
}

int case_dead_peer(void)
{
	struct pair_opts o;
	struct pair p;
	double t0, dt;

	pair_opts_default(&o);
	o.timeout = 8; /* 4.096 us * 2^8 = ~1 ms */
	o.retry_cnt = 3;
	pair_create(&p, &o);
	pair_connect(&p);
	post_recv(&p, 1, 500, 0, 4096);
	CHECK(post_one(p.qp[0], IBV_WR_SEND, 1, addr(&p, 0, 0), 64, p.mr[0]->lkey, 0, 0,
		       IBV_SEND_SIGNALED, 0) == 0,
	      "post");
	expect_wc(p.cq[0], 1, IBV_WC_SUCCESS, "send while the peer lives");
	/* the peer goes away: its QP no longer answers */
	CHECK(ibv_destroy_qp(p.qp[1]) == 0, "destroy peer qp");
	p.qp[1] = NULL;
	t0 = now_s();
	CHECK(post_one(p.qp[0], IBV_WR_RDMA_WRITE, 2, addr(&p, 0, 0), 5000, p.mr[0]->lkey,
		       addr(&p, 1, 0), p.mr[1]->rkey, IBV_SEND_SIGNALED, 0) == 0,
	      "post");
	CHECK(post_one(p.qp[0], IBV_WR_SEND, 3, addr(&p, 0, 0), 64, p.mr[0]->lkey, 0, 0, 0, 0) == 0,
	      "post");
	expect_wc(p.cq[0], 2, IBV_WC_RETRY_EXC_ERR, "write to a dead peer");
	dt = now_s() - t0;
	expect_wc(p.cq[0], 3, IBV_WC_WR_FLUSH_ERR, "flushed after retry exceeded");
	/* (retry_cnt + 1) timeouts of ~1 ms each, give or take scheduling */
	CHECK(dt >= 0.003 && dt < 5.0, "retry exhaustion took %.3f s", dt);
	expect_state(p.qp[0], IBV_QPS_ERR, "after retry exceeded");
	pair_destroy(&p);
	printf("PASS dead_peer: retry exceeded after %.1f ms\n", dt * 1000);
	return 0;
}

int case_rnr_exceeded(void)
{
	struct pair_opts o;
	struct pair p;

	pair_opts_default(&o);
	o.rnr_retry = 2;
	o.min_rnr_timer = 1;
	pair_create(&p, &o);
	pair_connect(&p);
	/* no receive posted at the responder */
	CHECK(post_one(p.qp[0], IBV_WR_SEND, 1, addr(&p, 0, 0), 64, p.mr[0]->lkey, 0, 0,
		       IBV_SEND_SIGNALED, 0) == 0,
	      "post");
	expect_wc(p.cq[0], 1, IBV_WC_RNR_RETRY_EXC_ERR, "send without a posted receive");
	expect_state(p.qp[0], IBV_QPS_ERR, "after RNR retry exceeded");
	/* write-with-immediate needs a receive WQE as well */
	pair_destroy(&p);
	pair_create(&p, &o);
	pair_connect(&p);
	CHECK(post_one(p.qp[0], IBV_WR_RDMA_WRITE_WITH_IMM, 1, addr(&p, 0, 0), 3000,
		       p.mr[0]->lkey, addr(&p, 1, 0), p.mr[1]->rkey, IBV_SEND_SIGNALED, 5) == 0,
	      "post");
	expect_wc(p.cq[0], 1, IBV_WC_RNR_RETRY_EXC_ERR, "write-imm without a posted receive");
	pair_destroy(&p);
	printf("PASS rnr_exceeded\n");
	return 0;
}

int case_rnr_recover(void)
{
	struct pair_opts o;
	struct pair p;
	struct ibv_wc wc;

	pair_opts_default(&o);
	o.rnr_retry = 7;       /* retry forever */
	o.min_rnr_timer = 14;  /* 1.28 ms */
	pair_create(&p, &o);
	pair_connect(&p);
	fill_pattern(p.buf[0], 8192, 3);
	CHECK(post_one(p.qp[0], IBV_WR_SEND, 1, addr(&p, 0, 0), 6000, p.mr[0]->lkey, 0, 0,
		       IBV_SEND_SIGNALED, 0) == 0,
	      "post");
	CHECK(!poll_one(p.cq[0], &wc, 100), "send completed before any receive was posted");
	post_recv(&p, 1, 500, 0, 8192);
	expect_wc(p.cq[0], 1, IBV_WC_SUCCESS, "send after the receive was posted");
	expect_wc(p.cq[1], 500, IBV_WC_SUCCESS, "receive");
	CHECK(!memcmp(p.buf[0], p.buf[1], 6000), "data after RNR retries");
	pair_destroy(&p);
	printf("PASS rnr_recover\n");
	return 0;
}

int case_recv_too_small(void)
{
	struct pair_opts o;
	struct pair p;

	pair_opts_default(&o);
	pair_create(&p, &o);
	pair_connect(&p);
	post_recv(&p, 1, 500, 0, 100);
	post_recv(&p, 1, 501, 4096, 100);
	CHECK(post_one(p.qp[0], IBV_WR_SEND, 1, addr(&p, 0, 0), 1000, p.mr[0]->lkey, 0, 0,
		       IBV_SEND_SIGNALED, 0) == 0,
	      "post");
	expect_wc(p.cq[1], 500, IBV_WC_LOC_LEN_ERR, "receive shorter than the send");
	expect_wc(p.cq[1], 501, IBV_WC_WR_FLUSH_ERR, "next receive flushed");
	expect_wc(p.cq[0], 1, IBV_WC_REM_INV_REQ_ERR, "sender of an oversized message");
	pair_destroy(&p);
	printf("PASS recv_too_small\n");
	return 0;
}

int case_flush(void)
{
	struct pair_opts o;
	struct pair p;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	pair_opts_default(&o);
	pair_create(&p, &o);
	pair_connect(&p);
	for (int i = 0; i < 5; i++)
		post_recv(&p, 1, 500 + (uint64_t)i, 0, 100);
	CHECK(ibv_modify_qp(p.qp[1], &a, IBV_QP_STATE) == 0, "modify to ERR");
	for (int i = 0; i < 5; i++)
		expect_wc(p.cq[1], 500 + (uint64_t)i, IBV_WC_WR_FLUSH_ERR, "flushed receive");
	post_recv(&p, 1, 600, 0, 100);
	expect_wc(p.cq[1], 600, IBV_WC_WR_FLUSH_ERR, "receive posted in error");
	/* ERR -> RESET -> usable again */
	a.qp_state = IBV_QPS_RESET;
	CHECK(ibv_modify_qp(p.qp[1], &a, IBV_QP_STATE) == 0, "modify to RESET");
	CHECK(qp_connect(&p, 1, p.qp[1], p.qp[0]->qp_num) == 0, "reconnect");
	pair_destroy(&p);
	printf("PASS flush\n");
	return 0;
}

int case_qp_misuse(void)
{
	struct pair_opts o;
	struct pair p;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr ia;
	struct ibv_send_wr wr[6], *bad = NULL;
	struct ibv_sge sge;
	const int base = IBV_QP_STATE;

	pair_opts_default(&o);
	o.max_send_wr = 4;
	pair_create(&p, &o);

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = p.cq[0];
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.qp_type = IBV_QPT_UD;
	CHECK(!ibv_create_qp(p.pd[0], &ia) && errno == EOPNOTSUPP, "UD QP created");
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_sge = 99;
	CHECK(!ibv_create_qp(p.pd[0], &ia), "QP with 99 SGEs created");
	ia.cap.max_send_sge = 1;
	qp = ibv_create_qp(p.pd[0], &ia);
	CHECK(qp, "create_qp");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	CHECK(ibv_modify_qp(qp, &a, base | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS) == EINVAL,
	      "RESET->INIT without IBV_QP_PORT accepted");
	CHECK(ibv_modify_qp(qp, &a, base | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS |
					    IBV_QP_SQ_PSN) == EINVAL,
	      "RESET->INIT with IBV_QP_SQ_PSN accepted");
	a.port_num = 2;
	CHECK(ibv_modify_qp(qp, &a, base | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ==
		      EINVAL,
	      "port 2 accepted");
	a.qp_state = IBV_QPS_RTS;
	CHECK(ibv_modify_qp(qp, &a, base) == EINVAL, "RESET->RTS accepted");
	memset(&sge, 0, sizeof(sge));
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *rbad;
	CHECK(ibv_post_recv(qp, &rwr, &rbad) == EINVAL, "post_recv in RESET accepted");

	CHECK(qp_connect(&p, 0, qp, p.qp[1]->qp_num) == 0, "valid connect");
	a.qp_state = IBV_QPS_INIT;
	CHECK(ibv_modify_qp(qp, &a, base) == EINVAL, "RTS->INIT accepted");
	ibv_destroy_qp(qp);

	/* each required attribute of INIT->RTR and RTR->RTS is enforced */
	qp = ibv_create_qp(p.pd[0], &ia);
	CHECK(qp, "create_qp");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	CHECK(ibv_modify_qp(qp, &a, base | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ==
		      0,
	      "RESET->INIT");
	const int rtr_req[] = { IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_DEST_QPN, IBV_QP_RQ_PSN,
				IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_MIN_RNR_TIMER };
	const int rtr_all = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(p.ctx[1], 1, &pa) == 0, "query_port");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = p.qp[1]->qp_num;
	a.ah_attr.dlid = pa.lid;
	a.ah_attr.port_num = 1;
	if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		CHECK(ibv_query_gid(p.ctx[1], 1, 0, &a.ah_attr.grh.dgid) == 0, "gid");
	}
	for (size_t i = 0; i < sizeof(rtr_req) / sizeof(rtr_req[0]); i++)
		CHECK(ibv_modify_qp(qp, &a, base | (rtr_all & ~rtr_req[i])) == EINVAL,
		      "INIT->RTR without attribute 0x%x accepted", rtr_req[i]);
	CHECK(ibv_modify_qp(qp, &a, base | rtr_all | IBV_QP_SQ_PSN) == EINVAL,
	      "INIT->RTR with IBV_QP_SQ_PSN accepted");
	CHECK(ibv_modify_qp(qp, &a, base | rtr_all) == 0, "INIT->RTR");
	sge = (struct ibv_sge){ addr(&p, 0, 0), 8, p.mr[0]->lkey };
	memset(wr, 0, sizeof(wr));
	wr[0].opcode = IBV_WR_SEND;
	wr[0].sg_list = &sge;
	wr[0].num_sge = 1;
	CHECK(ibv_post_send(qp, &wr[0], &bad) == EINVAL && bad == &wr[0],
	      "post_send in RTR accepted");
	const int rts_req[] = { IBV_QP_SQ_PSN, IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY,
				IBV_QP_MAX_QP_RD_ATOMIC };
	const int rts_all = IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			    IBV_QP_MAX_QP_RD_ATOMIC;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	for (size_t i = 0; i < sizeof(rts_req) / sizeof(rts_req[0]); i++)
		CHECK(ibv_modify_qp(qp, &a, base | (rts_all & ~rts_req[i])) == EINVAL,
		      "RTR->RTS without attribute 0x%x accepted", rts_req[i]);
	a.retry_cnt = 8;
	CHECK(ibv_modify_qp(qp, &a, base | rts_all) == EINVAL, "retry_cnt 8 accepted");
	a.retry_cnt = 7;
	CHECK(ibv_modify_qp(qp, &a, base | rts_all) == 0, "RTR->RTS");
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_TIMEOUT) == EINVAL, "RTS->RTS with timeout accepted");

	/* post-time checks: too many SGEs, send queue overflow */
	struct ibv_sge sges[2] = { sge, sge };
	wr[0].sg_list = sges;
	wr[0].num_sge = 2;
	bad = NULL;
	CHECK(ibv_post_send(qp, &wr[0], &bad) == EINVAL && bad == &wr[0], "2 SGEs on a 1-SGE QP");
	wr[0].num_sge = 1;
	for (int i = 0; i < 6; i++) {
		wr[i] = wr[0];
		wr[i].wr_id = (uint64_t)i;
		wr[i].next = i < 5 ? &wr[i + 1] : NULL;
	}
	bad = NULL;
	CHECK(ibv_post_send(qp, &wr[0], &bad) == ENOMEM && bad == &wr[4],
	      "send queue overflow: bad_wr should be the 5th WR");
	/* resources in use cannot be freed */
	CHECK(ibv_destroy_cq(p.cq[0]) == EBUSY, "destroy of a CQ in use");
	CHECK(ibv_dealloc_pd(p.pd[0]) == EBUSY, "dealloc of a PD in use");
	CHECK(!ibv_reg_mr(p.pd[0], p.buf[0], 64, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL,
	      "remote write without local write registered");
	CHECK(ibv_destroy_qp(qp) == 0, "destroy");
	pair_destroy(&p);
	printf("PASS qp_misuse\n");
	return 0;
}
