/*
 * softverbs fault injection and counters. Every outgoing packet passes
 * sv_fault_apply(): with the configured percentages it is dropped,
 * duplicated, held back so later packets overtake it (reordering), or
 * delayed; "port down" drops everything. The random stream is a xorshift64*
 * seeded from SOFTVERBS_SEED and the device index, so a run's fault pattern
 * depends only on the seed and on the sequence of packets sent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sv_internal.h"

#define SV_REORDER_HOLD_US 300

void sv_fault_init(struct sv_ctx *c)
{
	c->rng = (sv_cfg.seed + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(c->dev_index + 1);
	if (!c->rng)
		c->rng = 1;
}

static double sv_rand_pct(struct sv_ctx *c)
{
	uint64_t x = c->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	c->rng = x;
	return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / (double)(1ull << 53) * 100.0;
}

static void sv_delay_queue(struct sv_ctx *c, const struct sockaddr_in *to, const void *pkt,
			   size_t len, uint64_t due)
{
	struct sv_delayed *d = malloc(sizeof(*d) + len), **pp;

	if (!d) {
		c->st.dropped++;
		return;
	}
	d->due_ns = due;
	d->to = *to;
	d->len = len;
	memcpy(d->data, pkt, len);
	for (pp = &c->delayed; *pp && (*pp)->due_ns <= due; pp = &(*pp)->next)
		;
	d->next = *pp;
	*pp = d;
}

int sv_fault_apply(struct sv_ctx *c, const struct sockaddr_in *to, const void *pkt,
		   size_t len)
{
	uint64_t now, due;
	int copies = 1;

	if (sv_net_port_down()) {
		c->st.dropped++;
		return 0;
	}
	if (sv_cfg.drop_pct > 0 && sv_rand_pct(c) < sv_cfg.drop_pct) {
		c->st.dropped++;
		return 0;
	}
	if (sv_cfg.dup_pct > 0 && sv_rand_pct(c) < sv_cfg.dup_pct) {
		c->st.duplicated++;
		copies = 2;
	}
	due = 0;
	if (sv_cfg.reorder_pct > 0 && sv_rand_pct(c) < sv_cfg.reorder_pct) {
		c->st.reordered++;
		due = SV_REORDER_HOLD_US * 1000ull;
	}
	if (sv_cfg.delay_us) {
		c->st.delayed++;
		due += sv_cfg.delay_us * 1000ull;
	}
	if (!due)
		return copies;
	now = sv_now_ns();
	for (int i = 0; i < copies; i++)
		sv_delay_queue(c, to, pkt, len, now + due);
	return 0;
}

void sv_fault_release(struct sv_ctx *c, uint64_t now)
{
	while (c->delayed && c->delayed->due_ns <= now) {
		struct sv_delayed *d = c->delayed;

		c->delayed = d->next;
		if (sendto(c->sock, d->data, d->len, MSG_DONTWAIT, (struct sockaddr *)&d->to,
			   sizeof(d->to)) < 0)
			c->st.tx_fail++;
		free(d);
	}
}

void sv_stats_print(struct sv_ctx *c)
{
	const struct sv_stats *s = &c->st;

	if (!sv_cfg.stats)
		return;
	fprintf(stderr,
		"softverbs[%d] softverbs%d udp %u: tx_pkts=%llu rx_pkts=%llu tx_bytes=%llu "
		"rx_bytes=%llu dropped=%llu duplicated=%llu reordered=%llu delayed=%llu "
		"tx_fail=%llu retransmits=%llu timeouts=%llu nak_seq_sent=%llu "
		"nak_seq_rcvd=%llu rnr_nak_sent=%llu rnr_nak_rcvd=%llu acks_sent=%llu "
		"bad_pkts=%llu\n",
		(int)getpid(), c->dev_index, c->port, (unsigned long long)s->tx_pkts,
		(unsigned long long)s->rx_pkts, (unsigned long long)s->tx_bytes,
		(unsigned long long)s->rx_bytes, (unsigned long long)s->dropped,
		(unsigned long long)s->duplicated, (unsigned long long)s->reordered,
		(unsigned long long)s->delayed, (unsigned long long)s->tx_fail,
		(unsigned long long)s->retransmits, (unsigned long long)s->timeouts,
		(unsigned long long)s->nak_seq_sent, (unsigned long long)s->nak_seq_rcvd,
		(unsigned long long)s->rnr_nak_sent, (unsigned long long)s->rnr_nak_rcvd,
		(unsigned long long)s->acks_sent, (unsigned long long)s->bad_pkts);
}
