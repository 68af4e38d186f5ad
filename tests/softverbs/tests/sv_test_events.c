/*
 * Completion channels (pollable fds, arming, solicited-only, event
 * accounting on destroy), shared receive queues with the limit event, and
 * the port-down switch.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "sv_test.h"

static int readable(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLIN);
}

static void send_small(struct pair *p, uint64_t id, unsigned flags)
{
	CHECK(post_one(p->qp[0], IBV_WR_SEND, id, (uint64_t)(uintptr_t)p->buf[0], 16,
		       p->mr[0]->lkey, 0, 0, IBV_SEND_SIGNALED | flags, 0) == 0,
	      "post");
	expect_wc(p->cq[0], id, IBV_WC_SUCCESS, "send");
}

struct acker {
	struct ibv_cq *cq;
	unsigned n;
};

static void *ack_later(void *arg)
{
	struct acker *a = arg;

	usleep(200 * 1000);
	ibv_ack_cq_events(a->cq, a->n);
	return NULL;
}

int case_events(void)
{
	struct pair_opts o;
	struct pair p;
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	struct ibv_wc wc;
	int fd;

	pair_opts_default(&o);
	o.use_channel = 1;
	pair_create(&p, &o);
	pair_connect(&p);
	fd = p.ch[1]->fd;
	CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0, "O_NONBLOCK");
	CHECK(ibv_get_cq_event(p.ch[1], &ev_cq, &ev_ctx) == -1 && errno == EAGAIN,
	      "event on an idle channel");

	/* armed CQ: one event, the fd becomes readable */
	CHECK(ibv_req_notify_cq(p.cq[1], 0) == 0, "arm");
	for (int i = 0; i < 4; i++)
		post_recv(&p, 1, 100 + (uint64_t)i, 0, 64);
	send_small(&p, 1, 0);
	CHECK(readable(fd, 5000), "channel fd not readable after a completion");
	CHECK(ibv_get_cq_event(p.ch[1], &ev_cq, &ev_ctx) == 0, "get_cq_event");
	CHECK(ev_cq == p.cq[1] && ev_ctx == &p, "event names the wrong CQ");
	CHECK(!readable(fd, 0), "a second event for one arming");
	expect_wc(p.cq[1], 100, IBV_WC_SUCCESS, "receive");

	/* not re-armed: no event */
	send_small(&p, 2, 0);
	CHECK(!readable(fd, 100), "event without arming");
	expect_wc(p.cq[1], 101, IBV_WC_SUCCESS, "receive");

	/* solicited only: an unsolicited send does not wake, a solicited one does */
	CHECK(ibv_req_notify_cq(p.cq[1], 1) == 0, "arm solicited");
	send_small(&p, 3, 0);
	CHECK(!readable(fd, 100), "unsolicited completion raised a solicited-only event");
	send_small(&p, 4, IBV_SEND_SOLICITED);
	CHECK(readable(fd, 5000), "solicited completion did not raise an event");
	CHECK(ibv_get_cq_event(p.ch[1], &ev_cq, &ev_ctx) == 0, "get_cq_event");
	expect_wc(p.cq[1], 102, IBV_WC_SUCCESS, "receive");
	expect_wc(p.cq[1], 103, IBV_WC_SUCCESS, "receive");
	CHECK(!poll_one(p.cq[1], &wc, 0), "extra completion");

	/* destroy waits until every delivered event is acknowledged */
	CHECK(ibv_destroy_qp(p.qp[1]) == 0, "destroy qp");
	p.qp[1] = NULL;
	struct acker a = { p.cq[1], 2 };
	pthread_t t;
	double t0 = now_s();
	CHECK(pthread_create(&t, NULL, ack_later, &a) == 0, "thread");
	CHECK(ibv_destroy_cq(p.cq[1]) == 0, "destroy_cq");
	double waited = now_s() - t0;
	pthread_join(t, NULL);
	CHECK(waited > 0.15, "ibv_destroy_cq returned after %.3f s with unacknowledged events",
	      waited);
	p.cq[1] = ibv_create_cq(p.ctx[1], 16, NULL, p.ch[1], 0); /* for pair_destroy */
	CHECK(p.cq[1], "recreate cq");
	pair_destroy(&p);
	printf("PASS events (destroy waited %.0f ms for acks)\n", waited * 1000);
	return 0;
}

int case_srq(void)
{
	struct pair_opts o;
	struct pair p;
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qa, *qb;
	struct ibv_srq_attr sa = { .srq_limit = 4 };
	struct ibv_async_event ev;
	int seen[2] = { 0, 0 };

	pair_opts_default(&o);
	o.use_srq = 1;
	pair_create(&p, &o);
	pair_connect(&p);
	/* a second connection whose responder shares side 1's SRQ */
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = p.cq[0];
	ia.srq = p.srq[0];
	ia.cap.max_send_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.qp_type = IBV_QPT_RC;
	qa = ibv_create_qp(p.pd[0], &ia);
	ia.send_cq = ia.recv_cq = p.cq[1];
	ia.srq = p.srq[1];
	qb = ibv_create_qp(p.pd[1], &ia);
	CHECK(qa && qb, "create qps");
	CHECK(qp_connect(&p, 0, qa, qb->qp_num) == 0 && qp_connect(&p, 1, qb, qa->qp_num) == 0,
	      "connect second pair");

	for (int i = 0; i < 8; i++)
		post_recv(&p, 1, 100 + (uint64_t)i, (size_t)i * 1024, 1024);
	CHECK(ibv_modify_srq(p.srq[1], &sa, IBV_SRQ_LIMIT) == 0, "arm srq limit");
	for (int i = 0; i < 8; i++) {
		struct ibv_qp *q = (i & 1) ? qa : p.qp[0];
		CHECK(post_one(q, IBV_WR_SEND, (uint64_t)i, (uint64_t)(uintptr_t)p.buf[0], 200,
			       p.mr[0]->lkey, 0, 0, IBV_SEND_SIGNALED, 0) == 0,
		      "post");
	}
	for (int i = 0; i < 8; i++) {
		struct ibv_wc wc;
		CHECK(poll_one(p.cq[1], &wc, 10000) && wc.status == IBV_WC_SUCCESS, "srq receive");
		CHECK(wc.qp_num == qb->qp_num || wc.qp_num == p.qp[1]->qp_num, "qp_num");
		seen[wc.qp_num == qb->qp_num]++;
	}
	CHECK(seen[0] == 4 && seen[1] == 4, "receives per QP %d/%d", seen[0], seen[1]);
	for (int i = 0; i < 8; i++) {
		struct ibv_wc wc;
		CHECK(poll_one(p.cq[0], &wc, 10000) && wc.status == IBV_WC_SUCCESS, "send");
	}
	CHECK(readable(p.ctx[1]->async_fd, 2000), "no SRQ limit event");
	CHECK(ibv_get_async_event(p.ctx[1], &ev) == 0, "get_async_event");
	CHECK(ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == p.srq[1],
	      "async event %s", ibv_event_type_str(ev.event_type));
	ibv_ack_async_event(&ev);
	CHECK(ibv_destroy_srq(p.srq[1]) == EBUSY, "destroy of an SRQ in use");
	CHECK(ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0, "destroy");
	pair_destroy(&p);
	printf("PASS srq\n");
	return 0;
}

int case_port_down(void)
{
	char path[] = "/tmp/softverbs-port-down-XXXXXX";
	struct pair_opts o;
	struct pair p;
	struct ibv_port_attr pa;
	int fd = mkstemp(path);

	CHECK(fd >= 0, "mkstemp");
	close(fd);
	unlink(path);
	setenv("SOFTVERBS_PORT_DOWN_FILE", path, 1); /* read at the first verbs call */
	pair_opts_default(&o);
	o.timeout = 8;
	o.retry_cnt = 2;
	pair_create(&p, &o);
	pair_connect(&p);
	post_recv(&p, 1, 100, 0, 64);
	send_small(&p, 1, 0);
	CHECK(ibv_query_port(p.ctx[0], 1, &pa) == 0 && pa.state == IBV_PORT_ACTIVE, "port up");
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0, "create %s", path);
	close(fd);
	CHECK(ibv_query_port(p.ctx[0], 1, &pa) == 0 && pa.state == IBV_PORT_DOWN, "port not down");
	CHECK(post_one(p.qp[0], IBV_WR_SEND, 2, (uint64_t)(uintptr_t)p.buf[0], 16, p.mr[0]->lkey,
		       0, 0, IBV_SEND_SIGNALED, 0) == 0,
	      "post");
	expect_wc(p.cq[0], 2, IBV_WC_RETRY_EXC_ERR, "send while the port is down");
	unlink(path);
	pair_destroy(&p);
	printf("PASS port_down\n");
	return 0;
}
