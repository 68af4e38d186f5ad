/*
 * softverbs network: the UDP socket of a device instance, packet send
 * (through fault injection) and receive, and the progress engine that both
 * the per-context progress thread and ibv_poll_cq() run.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sv_internal.h"

#define SV_RX_BATCH 64
#define SV_SOCKBUF (8 << 20)
static void sv_sockbuf(int fd, int opt_force, int opt)
{
	int v = SV_SOCKBUF;

	if (setsockopt(fd, SOL_SOCKET, opt_force, &v, sizeof(v)) != 0)
		setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
}

/* Binds one port of the device's range (sv_internal.h): the first free one
 * from a pseudo-random start, so that processes opening the device at the
 * same time rarely race for the same port. */
int sv_net_open(struct sv_ctx *c)
{
	struct sockaddr_in sa;
	uint16_t base = sv_dev_base_port(c->dev_index);
	uint32_t start;
	int fd, err = EADDRINUSE;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return errno;
	sv_sockbuf(fd, SO_RCVBUFFORCE, SO_RCVBUF);
	sv_sockbuf(fd, SO_SNDBUFFORCE, SO_SNDBUF);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = sv_cfg.ip;
	start = (uint32_t)getpid() * 7919u + (uint32_t)(sv_now_ns() / 1000);
	for (uint32_t i = 0; i < SV_NODE_PROCS; i++) {
		uint32_t idx = (start + i) % SV_NODE_PROCS;

		sa.sin_port = htons((uint16_t)(base + idx));
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			c->sock = fd;
			c->ip = sv_cfg.ip;
			c->base = base;
			c->port = (uint16_t)(base + idx);
			c->qpn_hi = (idx + 1) << SV_QPN_SLOT_BITS;
			return 0;
		}
		err = errno;
		if (err != EADDRINUSE)
			break;
	}
	sv_log(1, "softverbs%d: cannot bind a UDP port in %u..%u on SOFTVERBS_ADDR: %s",
	       c->dev_index, base, base + SV_NODE_PROCS - 1, strerror(err));
	close(fd);
	return err;
}

void sv_net_close(struct sv_ctx *c)
{
	while (c->delayed) {
		struct sv_delayed *d = c->delayed;
		c->delayed = d->next;
		free(d);
	}
	if (c->sock >= 0)
		close(c->sock);
	c->sock = -1;
}

int sv_net_port_down(void)
{
	if (sv_cfg.port_down)
		return 1;
	return sv_cfg.port_down_file[0] && access(sv_cfg.port_down_file, F_OK) == 0;
}

static void sv_hdr_swap(struct sv_hdr *h)
{
	h->magic = htole32(h->magic);
	h->dst_qpn = htole32(h->dst_qpn);
	h->src_qpn = htole32(h->src_qpn);
	h->psn = htole32(h->psn);
	h->rkey = htole32(h->rkey);
	h->dma_len = htole32(h->dma_len);
	h->va = htole64(h->va);
	h->offset = htole32(h->offset);
	h->src_lid = htole16(h->src_lid);
	h->payload_len = htole16(h->payload_len);
	/* imm is carried as the application's big-endian value, unchanged */
}

void sv_net_send(struct sv_ctx *c, const struct sockaddr_in *to, struct sv_hdr *h,
		 const void *payload, uint32_t plen)
{
	struct iovec iov[2];
	struct msghdr mh;
	uint8_t pkt[SV_WIRE_MAX_PKT];
	int copies;

	h->magic = SV_WIRE_MAGIC;
	h->payload_len = (uint16_t)plen;
	h->psn &= 0xffffff;
	sv_hdr_swap(h);
	c->st.tx_pkts++;
	c->st.tx_bytes += plen;
	if (sv_cfg.drop_pct > 0 || sv_cfg.dup_pct > 0 || sv_cfg.reorder_pct > 0 ||
	    sv_cfg.delay_us || sv_cfg.port_down || sv_cfg.port_down_file[0]) {
		memcpy(pkt, h, sizeof(*h));
		if (plen)
			memcpy(pkt + sizeof(*h), payload, plen);
		copies = sv_fault_apply(c, to, pkt, sizeof(*h) + plen);
	} else {
		copies = 1;
	}
	iov[0].iov_base = h;
	iov[0].iov_len = sizeof(*h);
	iov[1].iov_base = (void *)(uintptr_t)payload;
	iov[1].iov_len = plen;
	memset(&mh, 0, sizeof(mh));
	mh.msg_name = (void *)(uintptr_t)to;
	mh.msg_namelen = sizeof(*to);
	mh.msg_iov = iov;
	mh.msg_iovlen = plen ? 2 : 1;
	for (int i = 0; i < copies; i++) {
		/* a full socket buffer is a lost packet; the RC engine recovers */
		if (sendmsg(c->sock, &mh, MSG_DONTWAIT) < 0)
			c->st.tx_fail++;
	}
	sv_hdr_swap(h); /* give the caller its header back in host order */
}

static void sv_dispatch(struct sv_ctx *c, uint8_t *buf, size_t n)
{
	struct sv_hdr *h = (struct sv_hdr *)(void *)buf;
	struct sv_qp *qp;
	uint32_t slot;

	if (n < sizeof(*h)) {
		c->st.bad_pkts++;
		return;
	}
	sv_hdr_swap(h);
	if (h->magic != SV_WIRE_MAGIC || h->payload_len != n - sizeof(*h) ||
	    h->payload_len > SV_WIRE_MAX_PAYLOAD) {
		c->st.bad_pkts++;
		return;
	}
	c->st.rx_pkts++;
	c->st.rx_bytes += h->payload_len;
	slot = h->dst_qpn & ((1u << SV_QPN_SLOT_BITS) - 1);
	if (slot >= SV_MAX_QP || !(qp = c->qps[slot]) ||
	    qp->qpx.qp_base.qp_num != h->dst_qpn)
		return; /* no such QP: dropped, as by an HCA */
	if (h->op == SV_OP_READ_RESP || h->op == SV_OP_ACK)
		sv_req_on_response(qp, h, buf + sizeof(*h));
	else
		sv_resp_on_request(qp, h, buf + sizeof(*h));
}

/* One round of progress. Called with the context lock held. */
void sv_progress(struct sv_ctx *c)
{
	uint64_t now;
	int down = (sv_cfg.port_down || sv_cfg.port_down_file[0]) && sv_net_port_down();

	for (int i = 0; i < SV_RX_BATCH; i++) {
		ssize_t n = recv(c->sock, c->rxbuf, sizeof(c->rxbuf), MSG_DONTWAIT);
		if (n < 0)
			break;
		if (down) {
			c->st.dropped++;
			continue;
		}
		sv_dispatch(c, c->rxbuf, (size_t)n);
	}
	now = sv_now_ns();
	sv_fault_release(c, now);
	for (int i = 0; i < c->nlive; i++) {
		struct sv_qp *qp = c->live[i];
		sv_resp_flush_ack(qp);
		sv_req_timers(qp, now);
	}
}

static int sv_busy(struct sv_ctx *c)
{
	if (c->delayed)
		return 1;
	for (int i = 0; i < c->nlive; i++)
		if (c->live[i]->timer_due || c->live[i]->rnr_due)
			return 1;
	return 0;
}

void *sv_progress_thread(void *arg)
{
	struct sv_ctx *c = arg;
	int wait_ms = 20;

	while (!atomic_load(&c->stop)) {
		struct pollfd pfd = { .fd = c->sock, .events = POLLIN };

		poll(&pfd, 1, wait_ms);
		pthread_mutex_lock(&c->lock);
		sv_progress(c);
		wait_ms = sv_busy(c) ? 1 : 20;
		pthread_mutex_unlock(&c->lock);
	}
	return NULL;
}
