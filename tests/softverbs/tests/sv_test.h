/*
 * softverbs behaviour tests: a connected pair of RC QPs in one process
 * (two opened contexts of one device; every packet still crosses UDP, to the
 * device's own port), polling with
 * deadlines, and the case table. Each case is one ctest test.
 */
#ifndef SV_TEST_H
#define SV_TEST_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SV_SKIP 77

#define CHECK(cond, ...)                                                          \
	do {                                                                      \
		if (!(cond)) {                                                    \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                             \
			fprintf(stderr, "\n");                                    \
			exit(1);                                                  \
		}                                                                 \
	} while (0)

struct pair_opts {
	uint8_t timeout;       /* QP timeout exponent (default 13: ~34 ms) */
	uint8_t retry_cnt;     /* default 7 */
	uint8_t rnr_retry;     /* default 7 (forever) */
	uint8_t min_rnr_timer; /* default 1 (10 us) */
	enum ibv_mtu mtu;      /* default IBV_MTU_1024 */
	unsigned qp_access;    /* default local write | remote write | remote read */
	unsigned mr_access;    /* default the same */
	size_t len;            /* buffer bytes per side, default 1 MiB */
	uint32_t max_send_wr, max_recv_wr; /* default 256 */
	int use_srq, use_channel, sq_sig_all, send_ops;
};

struct pair {
	struct ibv_context *ctx[2];
	struct ibv_pd *pd[2];
	struct ibv_cq *cq[2];
	struct ibv_comp_channel *ch[2];
	struct ibv_srq *srq[2];
	struct ibv_qp *qp[2];
	struct ibv_mr *mr[2];
	uint8_t *buf[2];
	size_t len;
	struct pair_opts o;
};

void pair_opts_default(struct pair_opts *o);
void pair_create(struct pair *p, const struct pair_opts *o);
void pair_connect(struct pair *p);
void pair_destroy(struct pair *p);
/* Moves qp (side s) RESET -> RTS towards the peer QP number and address. */
int qp_connect(struct pair *p, int s, struct ibv_qp *qp, uint32_t dest_qpn);

/* Polls until one completion or the deadline; returns 1 or 0. */
int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_ms);
void expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st, const char *what);
void post_recv(struct pair *p, int s, uint64_t wr_id, size_t off, uint32_t len);
int post_one(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, uint64_t laddr,
	     uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, unsigned flags,
	     uint32_t imm);
void fill_pattern(uint8_t *b, size_t n, uint32_t seed);
double now_s(void);

/* cases */
int case_data(const char *op);
int case_mix(void);
int case_qp_ex(void);
int case_bad_rkey(void);
int case_bad_lkey(void);
int case_dead_peer(void);
int case_rnr_exceeded(void);
int case_rnr_recover(void);
int case_qp_misuse(void);
int case_recv_too_small(void);
int case_events(void);
int case_srq(void);
int case_port_down(void);
int case_flush(void);
int case_atomic(void);

#endif
