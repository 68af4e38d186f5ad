/*
 * softverbs test driver and the connected-pair helpers. Usage:
 *   sv_test <case>     e.g. sv_test data_write, sv_test bad_rkey
 * The loss rate comes from the environment (SOFTVERBS_DROP_PCT, with a
 * fixed SOFTVERBS_SEED), set per test by CMake.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "sv_test.h"

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void fill_pattern(uint8_t *b, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (uint8_t)(x >> 16);
	}
}

void pair_opts_default(struct pair_opts *o)
{
	memset(o, 0, sizeof(*o));
	/* 2^13 x 4.096 us = 34 ms per attempt, 8 attempts: enough for a peer whose
	 * progress thread is starved on a loaded 2-core machine under ASan. */
	o->timeout = 13;
	o->retry_cnt = 7;
	o->rnr_retry = 7;
	o->min_rnr_timer = 1;
	o->mtu = IBV_MTU_1024;
	o->qp_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	o->mr_access = o->qp_access;
	o->len = 1 << 20;
	o->max_send_wr = 256;
	o->max_recv_wr = 256;
}

static struct ibv_qp *make_qp(struct pair *p, int s)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.send_cq = p->cq[s];
	a.recv_cq = p->cq[s];
	a.srq = p->srq[s];
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = p->o.sq_sig_all;
	a.cap.max_send_wr = p->o.max_send_wr;
	a.cap.max_recv_wr = p->o.max_recv_wr;
	a.cap.max_send_sge = 4;
	a.cap.max_recv_sge = 4;
	a.cap.max_inline_data = 64;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = p->pd[s];
	if (p->o.send_ops) {
		a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
				   IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
				   IBV_QP_EX_WITH_RDMA_READ;
	}
	qp = ibv_create_qp_ex(p->ctx[s], &a);
	CHECK(qp, "ibv_create_qp_ex: %s", strerror(errno));
	return qp;
}

void pair_create(struct pair *p, const struct pair_opts *o)
{
	struct ibv_device **list;
	int n = 0;

	memset(p, 0, sizeof(*p));
	p->o = *o;
	p->len = o->len;
	list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		printf("SKIP: no softverbs device\n");
		exit(SV_SKIP);
	}
	for (int s = 0; s < 2; s++) {
		p->ctx[s] = ibv_open_device(list[0]);
		CHECK(p->ctx[s], "ibv_open_device: %s", strerror(errno));
		p->pd[s] = ibv_alloc_pd(p->ctx[s]);
		CHECK(p->pd[s], "ibv_alloc_pd");
		if (o->use_channel) {
			p->ch[s] = ibv_create_comp_channel(p->ctx[s]);
			CHECK(p->ch[s], "ibv_create_comp_channel");
		}
		p->cq[s] = ibv_create_cq(p->ctx[s], 4096, p, p->ch[s], 0);
		CHECK(p->cq[s], "ibv_create_cq");
		if (o->use_srq) {
			struct ibv_srq_init_attr sa = { .attr = { .max_wr = 256, .max_sge = 4 } };
			p->srq[s] = ibv_create_srq(p->pd[s], &sa);
			CHECK(p->srq[s], "ibv_create_srq");
		}
		p->buf[s] = aligned_alloc(4096, p->len);
		CHECK(p->buf[s], "alloc");
		memset(p->buf[s], 0, p->len);
		p->mr[s] = ibv_reg_mr(p->pd[s], p->buf[s], p->len, (int)o->mr_access);
		CHECK(p->mr[s], "ibv_reg_mr: %s", strerror(errno));
		p->qp[s] = make_qp(p, s);
	}
	ibv_free_device_list(list);
}

int qp_connect(struct pair *p, int s, struct ibv_qp *qp, uint32_t dest_qpn)
{
	struct ibv_port_attr pa;
	struct ibv_qp_attr a;
	union ibv_gid gid;
	int err;

	CHECK(ibv_query_port(p->ctx[!s], 1, &pa) == 0, "query_port");
	CHECK(ibv_query_gid(p->ctx[!s], 1, 0, &gid) == 0, "query_gid");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = p->o.qp_access;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					    IBV_QP_ACCESS_FLAGS);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = p->o.mtu;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = 0xfffff0; /* wraps the 24-bit PSN space early in every test */
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = p->o.min_rnr_timer;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = pa.lid;
	if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = gid;
		a.ah_attr.grh.hop_limit = 1;
	}
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0xfffff0;
	a.timeout = p->o.timeout;
	a.retry_cnt = p->o.retry_cnt;
	a.rnr_retry = p->o.rnr_retry;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_MAX_QP_RD_ATOMIC);
}

void pair_connect(struct pair *p)
{
	for (int s = 0; s < 2; s++)
		CHECK(qp_connect(p, s, p->qp[s], p->qp[!s]->qp_num) == 0, "connect side %d", s);
}

void pair_destroy(struct pair *p)
{
	for (int s = 0; s < 2; s++) {
		if (p->qp[s])
			CHECK(ibv_destroy_qp(p->qp[s]) == 0, "destroy_qp");
		if (p->srq[s])
			CHECK(ibv_destroy_srq(p->srq[s]) == 0, "destroy_srq");
		CHECK(ibv_dereg_mr(p->mr[s]) == 0, "dereg_mr");
		CHECK(ibv_destroy_cq(p->cq[s]) == 0, "destroy_cq");
		if (p->ch[s])
			CHECK(ibv_destroy_comp_channel(p->ch[s]) == 0, "destroy channel");
		CHECK(ibv_dealloc_pd(p->pd[s]) == 0, "dealloc_pd");
		CHECK(ibv_close_device(p->ctx[s]) == 0, "close_device");
		free(p->buf[s]);
	}
}

int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms)
{
	double end = now_s() + timeout_ms / 1000.0;

	do {
		int n = ibv_poll_cq(cq, 1, wc);
		CHECK(n >= 0, "ibv_poll_cq failed");
		if (n == 1)
			return 1;
	} while (now_s() < end);
	return 0;
}

void expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st, const char *what)
{
	struct ibv_wc wc;

	CHECK(poll_one(cq, &wc, 10000), "%s: no completion within 10 s", what);
	CHECK(wc.wr_id == wr_id && wc.status == st,
	      "%s: got wr_id %llu status %s, want wr_id %llu status %s", what,
	      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
	      (unsigned long long)wr_id, ibv_wc_status_str(st));
}

void post_recv(struct pair *p, int s, uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge sge = { (uint64_t)(uintptr_t)(p->buf[s] + off), len, p->mr[s]->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (p->srq[s])
		CHECK(ibv_post_srq_recv(p->srq[s], &wr, &bad) == 0, "post_srq_recv");
	else
		CHECK(ibv_post_recv(p->qp[s], &wr, &bad) == 0, "post_recv");
}

int post_one(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, uint64_t laddr,
	     uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, unsigned flags,
	     uint32_t imm)
{
	struct ibv_sge sge = { laddr, len, lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = flags;
	wr.imm_data = imm;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static const struct {
	const char *name;
	int (*fn)(void);
} cases[] = {
	{ "mix", case_mix },
	{ "qp_ex", case_qp_ex },
	{ "bad_rkey", case_bad_rkey },
	{ "bad_lkey", case_bad_lkey },
	{ "dead_peer", case_dead_peer },
	{ "rnr_exceeded", case_rnr_exceeded },
	{ "rnr_recover", case_rnr_recover },
	{ "qp_misuse", case_qp_misuse },
	{ "recv_too_small", case_recv_too_small },
	{ "events", case_events },
	{ "srq", case_srq },
	{ "port_down", case_port_down },
	{ "flush", case_flush },
	{ "atomic", case_atomic },
};

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s <case>|data_<op>\n", argv[0]);
		return 2;
	}
	if (!strncmp(argv[1], "data_", 5))
		return case_data(argv[1] + 5);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!strcmp(argv[1], cases[i].name))
			return cases[i].fn();
	fprintf(stderr, "unknown case %s\n", argv[1]);
	return 2;
}
