/*
 * softverbs internals: the objects behind the libibverbs handles and the
 * functions the emulator's modules share. Nothing here is exported; the
 * exported API is the libibverbs one (see softverbs.map).
 *
 * The device model (docs/testing.md, "Devices and addressing"): a device
 * softverbs<d> on a node (an IPv4 address) owns the UDP ports
 * base + d * 4096 ... + SV_NODE_PROCS - 1. Its LID / GID name the first
 * port; each process that opens it binds one port of the range, and a QP
 * number carries that port's index above its 12-bit slot, so every context
 * of every process of the node shares one LID, one GID and one QP number
 * space, and a sender finds the UDP port from (LID or GID, QP number) alone.
 *
 * Objects: struct sv_ctx is the device as one process sees it (one UDP port,
 * one progress thread, QPs, MRs), shared by every ibv_open_device() of that
 * device in the process; struct sv_open is one opened context (its
 * ibv_context, async event queue and command fd).
 *
 * Locking: one mutex per device instance (sv_ctx.lock) protects every QP,
 * CQ, SRQ and MR on it and the UDP socket. Completion channels have their
 * own lock (taken after the device lock, never before), because
 * ibv_get_cq_event() runs without the device lock; so do async queues.
 */
#ifndef SV_INTERNAL_H
#define SV_INTERNAL_H

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sv_wire.h"

#define SV_EXPORT __attribute__((visibility("default")))

#define SV_MAX_DEVICES 8
#define SV_MAX_QP 4096
#define SV_QPN_SLOT_BITS 12  /* QPN = (port index + 1) << 12 | slot */
#define SV_NODE_PORTS 4096   /* UDP ports reserved per device on a node */
#define SV_NODE_PROCS 4094   /* port indexes usable (QPN stays < 0xffffff) */
#define SV_PORT_BASE 12000   /* default SOFTVERBS_UDP_PORT */
#define SV_MAX_SGE 16
#define SV_MAX_INLINE 256
#define SV_MAX_WR 16384
#define SV_MAX_CQE 262143
#define SV_MAX_SRQ_WR 16384
#define SV_MAX_RD_ATOM 16
#define SV_WINDOW_PKTS 128 /* unacknowledged packets per QP */
#define SV_ACK_EVERY 16    /* responder ACKs at least this often */
#define SV_MAX_MSG (1u << 31)

#define SV_CONTAINER_OF(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ---- configuration (SOFTVERBS_* environment, read once) ---------------- */
struct sv_config {
	uint32_t ip;        /* network order; SOFTVERBS_ADDR */
	int roce;           /* SOFTVERBS_LINK=roce */
	int ndev;           /* SOFTVERBS_NDEV */
	double drop_pct;    /* SOFTVERBS_DROP_PCT */
	double dup_pct;     /* SOFTVERBS_DUP_PCT */
	double reorder_pct; /* SOFTVERBS_REORDER_PCT */
	uint32_t delay_us;  /* SOFTVERBS_DELAY_US */
	int port_down;      /* SOFTVERBS_PORT_DOWN */
	char port_down_file[256]; /* SOFTVERBS_PORT_DOWN_FILE */
	uint64_t seed;      /* SOFTVERBS_SEED */
	int stats;          /* SOFTVERBS_STATS */
	int debug;          /* SOFTVERBS_DEBUG: 0 quiet, 1 errors, 2 trace */
	uint32_t min_timeout_us; /* SOFTVERBS_MIN_TIMEOUT_US */
	uint16_t udp_port;  /* SOFTVERBS_UDP_PORT: the node's first port */
	int no_resize_cq;   /* SOFTVERBS_NO_RESIZE_CQ: ibv_resize_cq -> EOPNOTSUPP */
	uint32_t max_cqe;   /* SOFTVERBS_MAX_CQE: advertised and enforced */
};

extern struct sv_config sv_cfg;
void sv_config_init(void);
uint64_t sv_now_ns(void);
void sv_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- statistics -------------------------------------------------------- */
struct sv_stats {
	uint64_t tx_pkts, rx_pkts, tx_bytes, rx_bytes;
	uint64_t dropped, duplicated, reordered, delayed, tx_fail;
	uint64_t retransmits, timeouts, nak_seq_sent, nak_seq_rcvd;
	uint64_t rnr_nak_sent, rnr_nak_rcvd, acks_sent, bad_pkts;
};

struct sv_delayed {
	struct sv_delayed *next;
	uint64_t due_ns;
	struct sockaddr_in to;
	size_t len;
	uint8_t data[];
};

struct sv_qp;
struct sv_mr;

/* ---- device and context ------------------------------------------------ */
struct sv_device {
	struct ibv_device dev;
	int index;
};

struct sv_open;

struct sv_ctx {
	pthread_mutex_t lock;
	int sock;
	uint32_t ip;    /* network order */
	uint16_t port;  /* host order: this process's UDP port */
	uint16_t base;  /* host order: the device's first port; its LID in IB mode */
	uint32_t qpn_hi; /* (port - base + 1) << SV_QPN_SLOT_BITS */
	int roce;
	int dev_index;
	int refs;       /* opened contexts sharing this device instance */
	struct sv_open *opens;
	uint64_t rng;
	pthread_t thread;
	int thread_started;
	atomic_int stop;

	struct sv_qp *qps[SV_MAX_QP];
	struct sv_qp **live;   /* compact list of existing QPs */
	int nlive;
	uint32_t next_qp_slot;

	struct sv_mr **mrs;    /* indexed by key >> 8 */
	uint32_t mr_cap;
	uint8_t key_gen;

	struct sv_delayed *delayed;
	struct sv_stats st;
	uint8_t txbuf[SV_WIRE_MAX_PKT];
	uint8_t rxbuf[SV_WIRE_MAX_PKT + 64];

	struct sv_ctx *next_open;
};

/* One ibv_open_device(): what a context owns on its own. */
struct sv_open {
	struct sv_ctx *hca;
	struct sv_open *next;   /* hca->opens, under hca->lock */
	int async_fd;
	int cmd_fd;
	pthread_mutex_t async_lock;
	struct ibv_async_event aq[64];
	unsigned aq_head, aq_count;
	struct verbs_context vctx; /* must be last: ibv_context ends it */
};

static inline struct sv_open *sv_open_of(struct ibv_context *c)
{
	return SV_CONTAINER_OF(c, struct sv_open, vctx.context);
}

static inline struct sv_ctx *sv_ctx_of(struct ibv_context *c)
{
	return sv_open_of(c)->hca;
}

/* ---- PD and MR ---------------------------------------------------------- */
struct sv_pd {
	struct ibv_pd pd;
	int refs;
};

struct sv_mr {
	struct ibv_mr mr;
	uint64_t iova;
	unsigned access;
	uint32_t slot;
	uint8_t *dmabuf_data;	/* a dmabuf registration: its bytes, mapped here */
	void *dmabuf_map;	/* the page-aligned mapping to unmap */
	size_t dmabuf_map_len;
};

/*
 * Check an access to registered memory. For a local key, addr is a virtual
 * address of this process; for a remote key it is in the MR's iova space.
 * Returns 0 and the local pointer, or the ibv_wc_status the HCA reports.
 */
int sv_mr_check(struct sv_ctx *c, uint32_t key, struct ibv_pd *pd, uint64_t addr,
		uint64_t len, unsigned need_access, int remote, uint8_t **ptr);

/* ---- CQ, channel, SRQ --------------------------------------------------- */
struct sv_channel {
	struct ibv_comp_channel ch;
	pthread_mutex_t lock;
	struct sv_cq **q;
	unsigned qcap, qhead, qcount;
};

struct sv_cq {
	struct ibv_cq cq;
	struct sv_ctx *ctx;
	struct ibv_wc *ring;
	uint32_t cap, head, count;
	int armed, solicited_only, overflowed;
	int refs;
	uint32_t events_reported; /* events handed out by ibv_get_cq_event */
};

struct sv_rwqe {
	uint64_t wr_id;
	uint32_t nsge;
	struct ibv_sge sge[SV_MAX_SGE];
};

struct sv_srq {
	struct ibv_srq srq;
	struct sv_ctx *ctx;
	struct sv_rwqe *ring;
	uint32_t cap, head, tail, max_sge, limit;
	int refs;
};

void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, int solicited);
void sv_async_event(struct sv_ctx *c, enum ibv_event_type type, void *elem);

/* ---- QP ---------------------------------------------------------------- */
struct sv_swqe {
	uint64_t wr_id;
	uint32_t opcode;  /* enum ibv_wr_opcode */
	uint32_t flags;   /* enum ibv_send_flags */
	uint32_t imm;     /* big endian, as posted */
	uint32_t rkey;
	uint64_t raddr;
	uint64_t cmp_add, swap; /* atomics */
	uint32_t len, nsge;
	uint32_t first_psn, npkts;
	uint32_t rd_next;   /* READ: responses received in order */
	uint32_t rd_rereq;  /* READ: rd_next at the last re-request */
	uint32_t rd_hi;     /* READ: index of the last response seen */
	uint8_t checked, done;
	uint16_t err;       /* pending error status + 1, reported at head */
	struct ibv_sge *sge;
};

struct sv_xwr; /* ibv_qp_ex builder state, sv_qp_ex.c */

struct sv_qp {
	struct ibv_qp_ex qpx; /* first: ibv_qp is its first member */
	struct sv_ctx *ctx;
	int send_ops;       /* created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS */
	uint32_t slot;
	struct ibv_qp_cap cap;
	int sq_sig_all;
	struct sv_cq *scq, *rcq;
	struct sv_srq *srq;
	struct sv_pd *pd;

	struct ibv_qp_attr attr; /* current attributes, attr.qp_state is truth */
	uint32_t mtu;
	struct sockaddr_in peer;
	uint16_t peer_lid;

	/* send queue: counters grow forever, slot = counter % sq_cap */
	struct sv_swqe *sq;
	struct ibv_sge *sq_sge;
	uint8_t *sq_inline;
	uint32_t sq_cap, sq_head, sq_tail, tx_cur, tx_pkt;
	uint32_t next_psn;  /* PSN for the next posted WQE */
	uint32_t una_psn;   /* oldest PSN not acknowledged */
	uint32_t tx_psn;    /* PSN of the next packet to transmit */
	uint32_t hi_psn;    /* one past the highest PSN ever transmitted */
	uint64_t timer_due, rnr_due;
	int retry_left, rnr_left;

	/* receive queue (unused with an SRQ) */
	struct sv_rwqe *rq;
	uint32_t rq_cap, rq_head, rq_tail;

	/* responder */
	uint32_t epsn;
	int nak_sent, ack_pending, since_ack;
	uint32_t nak_hi;     /* last out-of-sequence PSN seen since the NAK */
	int in_msg;          /* a SEND / WRITE_IMM message is in progress */
	struct sv_rwqe cur;  /* receive WQE consumed by the current SEND */
	int have_cur;
	uint32_t cur_off;

	struct sv_xwr *xwr;
	uint32_t nxwr;
	int xwr_err;

	/* responder: results of recent atomics, replayed for duplicates
	 * (an atomic must not execute twice) */
	struct { uint32_t psn; int valid; uint64_t orig; } atom[SV_MAX_RD_ATOM];
	uint32_t atom_next;
};

/* RDMA READ and the atomics: one request, answered by read responses. */
static inline int sv_read_like(uint32_t wr_opcode)
{
	return wr_opcode == IBV_WR_RDMA_READ || wr_opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       wr_opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static inline struct sv_qp *sv_qp_of(struct ibv_qp *q)
{
	return (struct sv_qp *)(void *)q;
}

static inline int32_t sv_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

static inline uint32_t sv_psn_add(uint32_t a, uint32_t n)
{
	return (a + n) & 0xffffff;
}

void sv_qp_to_error(struct sv_qp *qp, enum ibv_event_type ev, const char *why);
void sv_qp_drop_ctx(struct sv_ctx *c, struct ibv_context *ctx);
int sv_post_send_locked(struct sv_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad);
void sv_qp_ex_init(struct sv_qp *qp);
void sv_qp_ex_fini(struct sv_qp *qp);

/* ---- RC engine ---------------------------------------------------------- */
void sv_req_push(struct sv_qp *qp);
void sv_req_on_response(struct sv_qp *qp, const struct sv_hdr *h,
			const uint8_t *payload);
void sv_req_timers(struct sv_qp *qp, uint64_t now);
void sv_req_retire(struct sv_qp *qp);
void sv_resp_on_request(struct sv_qp *qp, const struct sv_hdr *h,
			const uint8_t *payload);
void sv_resp_flush_ack(struct sv_qp *qp);

/* ---- network ------------------------------------------------------------ */
int sv_net_open(struct sv_ctx *c);
void sv_net_close(struct sv_ctx *c);
void sv_net_send(struct sv_ctx *c, const struct sockaddr_in *to,
		 struct sv_hdr *h, const void *payload, uint32_t plen);
int sv_net_port_down(void);
void sv_progress(struct sv_ctx *c);
void *sv_progress_thread(void *arg);
void sv_fault_init(struct sv_ctx *c);
/* Returns how many copies to send now (0, 1 or 2); may queue a delayed copy. */
int sv_fault_apply(struct sv_ctx *c, const struct sockaddr_in *to,
		   const void *pkt, size_t len);
void sv_fault_release(struct sv_ctx *c, uint64_t now);
void sv_stats_print(struct sv_ctx *c);

/* ---- context ops installed by ibv_open_device -------------------------- */
int sv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int sv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int sv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad);
struct ibv_qp *sv_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a);
int sv_query_port_op(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a,
		     size_t len);
int sv_query_device_ex_op(struct ibv_context *c,
			  const struct ibv_query_device_ex_input *in,
			  struct ibv_device_attr_ex *a, size_t len);

const char *sv_qp_state_str(enum ibv_qp_state s);

/* ---- addressing --------------------------------------------------------- */
void sv_make_gid(const struct sv_ctx *c, union ibv_gid *gid);
/* The UDP address of QP dqpn behind an address vector; EINVAL when the AV
 * names no softverbs device. */
int sv_addr_from_ah(const struct sv_ctx *c, const struct ibv_ah_attr *ah,
		    uint32_t dqpn, struct sockaddr_in *out);
uint16_t sv_dev_base_port(int dev_index);
void sv_fill_device_attr(struct sv_ctx *c, struct ibv_device_attr *a);

#endif
