/*
 * softverbs atomics: 8-byte fetch-and-add and compare-and-swap over a
 * connected pair, checked for exactly-once execution (an atomic retried
 * after a lost response must not run twice: the responder replays its saved
 * result), in-order execution, the returned original values, and the
 * responder's checks (QP and MR access, alignment).
 */
#include <inttypes.h>
#include <string.h>

#include "sv_test.h"

#define N_ATOMIC 300
#define WINDOW 32

static int post_atomic(struct pair *p, enum ibv_wr_opcode op, uint64_t wr_id, uint64_t *local,
		       uint64_t raddr, uint64_t cmp_add, uint64_t swap)
{
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = 8, .lkey = p->mr[0]->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = p->mr[1]->rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	return ibv_post_send(p->qp[0], &wr, &bad);
}

/* Runs N_ATOMIC atomics of one kind against side 1's counter at offset 0,
 * WINDOW outstanding; results land in side 0's buffer from offset 64. */
static void run(struct pair *p, enum ibv_wr_opcode op, uint64_t start)
{
	uint64_t *counter = (uint64_t *)(void *)p->buf[1];
	uint64_t *res = (uint64_t *)(void *)(p->buf[0] + 64);
	uint64_t raddr = (uintptr_t)p->buf[1];
	int posted = 0, done = 0;
	struct ibv_wc wc;

	*counter = start;
	memset(res, 0xee, N_ATOMIC * 8);
	while (done < N_ATOMIC) {
		while (posted < N_ATOMIC && posted - done < WINDOW) {
			uint64_t i = (uint64_t)posted;
			int err = op == IBV_WR_ATOMIC_FETCH_AND_ADD ?
				post_atomic(p, op, i, &res[i], raddr, i + 1, 0) :
				post_atomic(p, op, i, &res[i], raddr, start + i, start + i + 1);
			CHECK(err == 0, "post atomic %d: %s", posted, strerror(err));
			posted++;
		}
		CHECK(poll_one(p->cq[0], &wc, 20000), "atomic %d: no completion", done);
		CHECK(wc.status == IBV_WC_SUCCESS, "atomic %d: %s", done,
		      ibv_wc_status_str(wc.status));
		CHECK(wc.wr_id == (uint64_t)done, "completion order: got %" PRIu64 ", want %d",
		      wc.wr_id, done);
		CHECK(wc.opcode == (op == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD
								      : IBV_WC_COMP_SWAP),
		      "wc opcode %d", wc.opcode);
		CHECK(wc.byte_len == 8, "byte_len %u", wc.byte_len);
		done++;
	}
	uint64_t want = start;
	for (uint64_t i = 0; i < N_ATOMIC; i++) {
		CHECK(res[i] == want, "atomic %" PRIu64 " returned %" PRIu64 ", want %" PRIu64
		      " (executed twice or out of order?)", i, res[i], want);
		want += op == IBV_WR_ATOMIC_FETCH_AND_ADD ? i + 1 : 1;
	}
	CHECK(*counter == want, "counter %" PRIu64 ", want %" PRIu64, *counter, want);
}

static void expect_refused(struct pair_opts *o, uint64_t raddr_off, const char *what)
{
	struct pair p;
	struct ibv_wc wc;

	pair_create(&p, o);
	pair_connect(&p);
	CHECK(post_atomic(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, 7, (uint64_t *)(void *)p.buf[0],
			  (uintptr_t)p.buf[1] + raddr_off, 1, 0) == 0, "post");
	CHECK(poll_one(p.cq[0], &wc, 20000), "%s: no completion", what);
	CHECK(wc.wr_id == 7 && wc.status != IBV_WC_SUCCESS, "%s: status %s", what,
	      ibv_wc_status_str(wc.status));
	printf("  %s: refused with %s\n", what, ibv_wc_status_str(wc.status));
	pair_destroy(&p);
}

int case_atomic(void)
{
	const unsigned atomic = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_device_attr da;
	struct pair_opts o;
	struct pair p;

	pair_opts_default(&o);
	o.qp_access = o.mr_access = atomic;
	pair_create(&p, &o);
	CHECK(ibv_query_device(p.ctx[0], &da) == 0, "query_device");
	CHECK(da.atomic_cap != IBV_ATOMIC_NONE, "atomic_cap is IBV_ATOMIC_NONE");
	pair_connect(&p);
	run(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, 1000);
	run(&p, IBV_WR_ATOMIC_CMP_AND_SWP, 0xfffffffffffffff0ull);
	/* a compare that fails leaves memory alone and returns the value */
	uint64_t *counter = (uint64_t *)(void *)p.buf[1], *r = (uint64_t *)(void *)(p.buf[0] + 8);
	struct ibv_wc wc;
	*counter = 42;
	*r = 0;
	CHECK(post_atomic(&p, IBV_WR_ATOMIC_CMP_AND_SWP, 9, r, (uintptr_t)p.buf[1], 41, 7) == 0,
	      "post");
	CHECK(poll_one(p.cq[0], &wc, 20000) && wc.status == IBV_WC_SUCCESS, "failed CAS");
	CHECK(*r == 42 && *counter == 42, "failed CAS: returned %" PRIu64 ", memory %" PRIu64,
	      *r, *counter);
	pair_destroy(&p);

	o.qp_access = atomic & ~IBV_ACCESS_REMOTE_ATOMIC;
	expect_refused(&o, 0, "QP without REMOTE_ATOMIC");
	o.qp_access = atomic;
	o.mr_access = atomic & ~IBV_ACCESS_REMOTE_ATOMIC;
	expect_refused(&o, 0, "MR without REMOTE_ATOMIC");
	o.mr_access = atomic;
	expect_refused(&o, 4, "unaligned remote address");
	printf("PASS: %d fetch-adds and %d compare-swaps executed once each, in order\n",
	       N_ATOMIC, N_ATOMIC);
	return 0;
}
