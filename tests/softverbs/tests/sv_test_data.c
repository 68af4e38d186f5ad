/*
 * Data-path cases: every RC operation moves the right bytes, completes in
 * order with the right opcode / length / immediate, with selective
 * signaling, multi-SGE and inline sends, and survives the loss, duplication
 * and reordering the environment injects.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "sv_test.h"

#define NMSG 120
#define SLOT 10240

static const uint32_t sizes[] = { 1, 100, 1023, 1024, 1025, 3000, 0, 4096, 9000, 64 };

static enum ibv_wr_opcode op_of(const char *name, int i)
{
	static const enum ibv_wr_opcode mix[] = { IBV_WR_SEND, IBV_WR_RDMA_WRITE,
						  IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ,
						  IBV_WR_RDMA_WRITE_WITH_IMM };

	if (!strcmp(name, "send") || !strcmp(name, "inline"))
		return IBV_WR_SEND;
	if (!strcmp(name, "send_imm"))
		return IBV_WR_SEND_WITH_IMM;
	if (!strcmp(name, "write"))
		return IBV_WR_RDMA_WRITE;
	if (!strcmp(name, "write_imm"))
		return IBV_WR_RDMA_WRITE_WITH_IMM;
	if (!strcmp(name, "read"))
		return IBV_WR_RDMA_READ;
	return mix[i % 5];
}

static int consumes_recv(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

int case_data(const char *name)
{
	struct pair_opts o;
	struct pair p;
	int inl = !strcmp(name, "inline");
	int nrecv = 0, nsig = 0;
	double t0 = now_s();

	if (strcmp(name, "mix") && strcmp(name, "send") && strcmp(name, "inline") &&
	    strcmp(name, "send_imm") && strcmp(name, "write") && strcmp(name, "write_imm") &&
	    strcmp(name, "read")) {
		fprintf(stderr, "unknown data op %s\n", name);
		return 2;
	}
	pair_opts_default(&o);
	o.len = (size_t)NMSG * SLOT;
	pair_create(&p, &o);
	pair_connect(&p);
	fill_pattern(p.buf[0], p.len, 1);
	fill_pattern(p.buf[1], p.len, 2);

	for (int i = 0; i < NMSG; i++) {
		if (consumes_recv(op_of(name, i))) {
			post_recv(&p, 1, 1000 + (uint64_t)i, (size_t)i * SLOT, SLOT);
			nrecv++;
		}
	}
	for (int i = 0; i < NMSG; i++) {
		enum ibv_wr_opcode op = op_of(name, i);
		uint32_t len = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
		size_t off = (size_t)i * SLOT;
		int sig = (i % 3 == 0) || i == NMSG - 1;
		struct ibv_sge sge[2];
		struct ibv_send_wr wr, *bad;
		int src = op == IBV_WR_RDMA_READ ? 1 : 0; /* side the data comes from */

		if (inl && len > 200)
			len = 200;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)i;
		wr.opcode = op;
		wr.sg_list = sge;
		/* two SGEs on odd messages: gather / scatter across both */
		sge[0] = (struct ibv_sge){ (uint64_t)(uintptr_t)(p.buf[0] + off), len / 2,
					   p.mr[0]->lkey };
		sge[1] = (struct ibv_sge){ (uint64_t)(uintptr_t)(p.buf[0] + off + len / 2),
					   len - len / 2, p.mr[0]->lkey };
		wr.num_sge = (i & 1) ? 2 : 1;
		if (!(i & 1))
			sge[0].length = len;
		wr.send_flags = (sig ? IBV_SEND_SIGNALED : 0) | (inl ? IBV_SEND_INLINE : 0);
		wr.imm_data = htonl(0xab000000u + (uint32_t)i);
		wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)(p.buf[1] + off);
		wr.wr.rdma.rkey = p.mr[1]->rkey;
		CHECK(ibv_post_send(p.qp[0], &wr, &bad) == 0, "post_send %d: %s", i, strerror(errno));
		if (inl) /* inline data is copied at post time */
			memset(p.buf[0] + off, 0xee, len);
		nsig += sig;
		(void)src;
	}
	if (inl) /* restore what was sent, for the comparison below */
		fill_pattern(p.buf[0], p.len, 1);

	/* sender completions: only the signaled ones, in order */
	for (int i = 0, got = 0; got < nsig; i++) {
		struct ibv_wc wc;
		if (!((i % 3 == 0) || i == NMSG - 1))
			continue;
		CHECK(poll_one(p.cq[0], &wc, 20000), "sender completion %d missing", i);
		CHECK(wc.status == IBV_WC_SUCCESS, "wr %llu: %s", (unsigned long long)wc.wr_id,
		      ibv_wc_status_str(wc.status));
		CHECK(wc.wr_id == (uint64_t)i, "completion order: got %llu want %d",
		      (unsigned long long)wc.wr_id, i);
		enum ibv_wr_opcode op = op_of(name, i);
		enum ibv_wc_opcode want = op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ :
					  (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM) ?
					  IBV_WC_SEND : IBV_WC_RDMA_WRITE;
		CHECK(wc.opcode == want, "wr %d opcode %d want %d", i, wc.opcode, want);
		got++;
	}
	/* receiver completions, in order */
	for (int i = 0; i < NMSG; i++) {
		enum ibv_wr_opcode op = op_of(name, i);
		uint32_t len = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
		struct ibv_wc wc;

		if (inl && len > 200)
			len = 200;
		if (!consumes_recv(op))
			continue;
		CHECK(poll_one(p.cq[1], &wc, 20000), "receive completion %d missing", i);
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1000 + (uint64_t)i,
		      "recv %d: wr_id %llu %s", i, (unsigned long long)wc.wr_id,
		      ibv_wc_status_str(wc.status));
		CHECK(wc.byte_len == len, "recv %d byte_len %u want %u", i, wc.byte_len, len);
		CHECK(wc.opcode == (op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM
								    : IBV_WC_RECV),
		      "recv %d opcode %d", i, wc.opcode);
		int has_imm = op != IBV_WR_SEND;
		CHECK(!!(wc.wc_flags & IBV_WC_WITH_IMM) == has_imm, "recv %d imm flag", i);
		if (has_imm)
			CHECK(wc.imm_data == htonl(0xab000000u + (uint32_t)i), "recv %d imm", i);
		CHECK(wc.qp_num == p.qp[1]->qp_num && wc.src_qp == p.qp[0]->qp_num,
		      "recv %d qp numbers", i);
		nrecv--;
	}
	CHECK(nrecv == 0, "receive count");
	/* bytes: destination slot equals source slot for the message length,
	 * and the bytes after the message are untouched */
	uint8_t *orig[2] = { malloc(p.len), malloc(p.len) };
	CHECK(orig[0] && orig[1], "alloc");
	fill_pattern(orig[0], p.len, 1);
	fill_pattern(orig[1], p.len, 2);
	for (int i = 0; i < NMSG; i++) {
		uint32_t len = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
		size_t off = (size_t)i * SLOT;
		int from = op_of(name, i) == IBV_WR_RDMA_READ ? 1 : 0;

		if (inl && len > 200)
			len = 200;
		CHECK(memcmp(p.buf[!from] + off, p.buf[from] + off, len) == 0,
		      "message %d (%u bytes) corrupted", i, len);
		CHECK(memcmp(p.buf[!from] + off + len, orig[!from] + off + len, 8) == 0,
		      "message %d wrote past its end", i);
	}
	free(orig[0]);
	free(orig[1]);
	struct ibv_wc extra;
	CHECK(ibv_poll_cq(p.cq[0], 1, &extra) == 0, "unexpected extra send completion");
	pair_destroy(&p);
	printf("PASS data_%s: %d messages in %.2f s\n", name, NMSG, now_s() - t0);
	return 0;
}

int case_mix(void)
{
	return case_data("mix");
}

/* The extended post API (ibv_wr_*), as perftest and newer code use it. */
int case_qp_ex(void)
{
	struct pair_opts o;
	struct pair p;
	struct ibv_qp_ex *qx;
	struct ibv_wc wc;

	pair_opts_default(&o);
	o.send_ops = 1;
	pair_create(&p, &o);
	pair_connect(&p);
	qx = ibv_qp_to_qp_ex(p.qp[0]);
	CHECK(qx, "ibv_qp_to_qp_ex returned NULL");
	fill_pattern(p.buf[0], 65536, 7);
	fill_pattern(p.buf[1] + 65536, 65536, 8);
	post_recv(&p, 1, 77, 0, 8192);

	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(qx, htonl(42));
	ibv_wr_set_sge(qx, p.mr[0]->lkey, (uint64_t)(uintptr_t)p.buf[0], 5000);
	qx->wr_id = 2;
	qx->wr_flags = 0;
	ibv_wr_rdma_write(qx, p.mr[1]->rkey, (uint64_t)(uintptr_t)(p.buf[1] + 16384));
	ibv_wr_set_sge(qx, p.mr[0]->lkey, (uint64_t)(uintptr_t)(p.buf[0] + 8192), 7000);
	qx->wr_id = 3;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(qx, p.mr[1]->rkey, (uint64_t)(uintptr_t)(p.buf[1] + 65536));
	ibv_wr_set_sge(qx, p.mr[0]->lkey, (uint64_t)(uintptr_t)(p.buf[0] + 65536), 6000);
	qx->wr_id = 4;
	qx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_rdma_write(qx, p.mr[1]->rkey, (uint64_t)(uintptr_t)(p.buf[1] + 32768));
	ibv_wr_set_inline_data(qx, "inline!", 8);
	CHECK(ibv_wr_complete(qx) == 0, "ibv_wr_complete");

	expect_wc(p.cq[0], 1, IBV_WC_SUCCESS, "wr send_imm");
	expect_wc(p.cq[0], 3, IBV_WC_SUCCESS, "wr read");
	expect_wc(p.cq[0], 4, IBV_WC_SUCCESS, "wr inline write");
	CHECK(poll_one(p.cq[1], &wc, 5000) && wc.wr_id == 77 && wc.byte_len == 5000 &&
		      wc.imm_data == htonl(42),
	      "receive of wr send_imm");
	CHECK(!memcmp(p.buf[1], p.buf[0], 5000), "send data");
	CHECK(!memcmp(p.buf[1] + 16384, p.buf[0] + 8192, 7000), "write data");
	CHECK(!memcmp(p.buf[0] + 65536, p.buf[1] + 65536, 6000), "read data");
	CHECK(!memcmp(p.buf[1] + 32768, "inline!", 8), "inline write data");

	/* a builder error makes the whole batch fail, nothing is posted */
	ibv_wr_start(qx);
	qx->wr_id = 9;
	ibv_wr_send(qx);
	ibv_wr_set_sge_list(qx, 99, NULL);
	CHECK(ibv_wr_complete(qx) != 0, "bad batch accepted");
	CHECK(!poll_one(p.cq[0], &wc, 50), "bad batch produced a completion");
	pair_destroy(&p);
	printf("PASS qp_ex\n");
	return 0;
}
