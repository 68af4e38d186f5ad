/*
 * dpdk.h - internal objects of the dpdk provider (fabric/dpdk/).
 *
 * Files: dpdk_proto.{h,c} (wire format, parser), dpdk_port.c (EAL, the one
 * port of the process, mempool, receive dispatch, transmit, fault
 * injection), dpdk_provider.c (domain, cq, registrations, probe, params),
 * dpdk_conn.c (listen / accept / connect over the authenticated side
 * channel), dpdk_tx.c (posts, segmentation, window, congestion control,
 * retransmission, ACK processing), dpdk_rx.c (data placement, duplicate
 * suppression, ACK generation, completions, failure and flush).
 *
 * Threads: EAL and the port are per process and shared by every domain. A
 * domain is used by one thread at a time (the fabric contract); the port's
 * queues are taken with a spinlock (uncontended with one domain), and a
 * frame received for another domain's endpoint is handed over through that
 * domain's lock-free ring, so endpoint state is only touched by its owner.
 */
#ifndef GX_FABRIC_DPDK_DPDK_H
#define GX_FABRIC_DPDK_DPDK_H

#include <stdbool.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/param.h"
#include "common/sock.h"
#include "fabric/dpdk/dpdk_proto.h"
#include "fabric/fabric_provider.h"
#include "fabric/fabric_sock.h"

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;

#define DPDK_BURST 32
#define DPDK_MAX_CONNS 65536u /* connection-id slots per process (low 16 bits) */
#define DPDK_PARK_MAX 2048u   /* early write segments one endpoint may hold */

struct dpdk_domain {
    struct gx_fab_domain base;
    struct gx_auth_key key;
    struct gx_fab_mrtab mrtab;
    struct gx_sockaddr local; /* side-channel interface address */
    char ifname[64];
    struct rte_ring *ring;    /* frames for our endpoints received by another domain */
};

struct dpdk_cq {
    struct gx_fab_swcq sw;
};

/* One message being sent (send or write-with-immediate). */
struct dpdk_txop {
    uint64_t context;
    const char *buf;
    uint64_t len;
    uint64_t tag;        /* send tag, or write target address */
    uint64_t rkey_cookie;
    uint32_t rkey_index;
    uint32_t imm;
    uint32_t first_psn, last_psn;
    uint8_t op;          /* enum gx_fab_op */
};

enum dpdk_seg_state { SEG_FREE = 0, SEG_INFLIGHT, SEG_SACKED, SEG_LOST };

/* One PSN the sender has not seen acknowledged, at psn % GX_DPDK_WINDOW. */
struct dpdk_seg {
    uint64_t sent_ns;
    uint64_t op_index;   /* its message in txops */
    uint32_t txno;       /* transmission order (loss detection) */
    uint8_t state;       /* enum dpdk_seg_state */
    uint8_t retx;        /* transmitted more than once (no RTT sample) */
};

struct dpdk_rxslot {
    uint64_t context;
    char *buf;
    size_t len;
    bool started;
    uint8_t op;
    uint32_t last_psn;
    uint64_t msg_len;
    uint64_t tag;
    uint32_t imm;
};

enum dpdk_ep_state { EP_CONNECTING, EP_ESTABLISHED, EP_ERROR };

struct dpdk_ep {
    struct gx_fab_ep base;
    struct dpdk_domain *dom;
    struct dpdk_cq *cq;
    enum dpdk_ep_state state;
    int error;
    uint32_t depth;
    uint32_t conn_id, cookie;           /* ours: frames to us carry them */
    uint32_t peer_conn_id, peer_cookie; /* theirs */
    struct gx_dpdk_l2l4 addr;           /* frames to the peer */
    uint32_t mss;                       /* payload bytes per segment */
    /* side channel: set-up, then the liveness signal */
    int fd;
    int cm_stage;                       /* dpdk_conn.c */
    struct gx_auth_client auth;         /* dpdk_conn.c: the connector's handshake */
    uint64_t deadline;
    struct gx_sockaddr peer_sa;
    struct gx_dpdk_conn_info peer_info;
    size_t peer_info_got;
    uint64_t next_fd_check_ns;
    uint8_t side_buf[64];               /* side-channel ACK records, partly read */
    size_t side_got;
    uint64_t side_ack_ns;               /* when we last sent one */
    /* sender */
    struct dpdk_txop *txops;
    uint64_t tx_post, tx_done;
    uint32_t psn_next;                  /* first PSN of the next posted message */
    uint32_t snd_una, snd_nxt;
    uint64_t seg_op;                    /* op of snd_nxt */
    struct dpdk_seg *segs;
    uint32_t inflight, nlost, nsacked;
    uint32_t lost_scan;                 /* lowest PSN that may be SEG_LOST */
    uint32_t txno, delivered_txno;
    double cwnd, ssthresh;
    uint32_t cwnd_cap;                  /* segments: GX_DPDK_INFLIGHT_MAX / mss */
    uint32_t recover_psn;               /* no new window cut until snd_una passes it */
    bool in_recovery;
    bool probed;                        /* tail loss probe sent since the last progress */
    bool tx_blocked;                    /* the port's ring was full this round */
    uint64_t srtt_ns, rttvar_ns, rto_ns;
    double undo_cwnd, undo_ssthresh;    /* before a timeout, for the spurious-timeout undo */
    uint32_t timeout_us;                /* our clock at the last timeout */
    uint32_t ts_echo;                   /* ts of the newest DATA from the peer */
    uint64_t progress_ns;               /* last ACK progress (RTO base) */
    uint64_t heard_ns;                  /* last frame from the peer, or start of waiting */
    /* receiver */
    struct dpdk_rxslot *rx;
    uint64_t rx_post, rx_done;
    uint32_t rcv_nxt, rcv_high;         /* next expected, one past the highest seen */
    uint8_t *rbits;                     /* received flags, psn % GX_DPDK_WINDOW */
    bool ack_due;
    struct rte_mbuf **parked;           /* early write segments, DPDK_PARK_MAX */
    uint32_t nparked;
    uint32_t unacked;                   /* segments since our last ACK */
    uint64_t err_rx;                    /* receive whose message failed the ep */
    void *zc_shinfo;                    /* dpdk_zc.c: shared info of attached buffers */
    /* counters (dpdk_ep_stats) */
    uint64_t n_retx, n_timeouts, n_dup_rx, n_rnr, n_data_rx, n_data_tx, n_probes, n_early, n_spurious, n_parked;
};

/* ---- dpdk_port.c -------------------------------------------------------- */
struct dpdk_port_stats {
    uint64_t rx_frames, tx_frames, tx_full, link_down;
    uint64_t drops[GX_DPDK_DROP_REASONS];
    uint64_t unknown_conn, bad_cookie, ring_full;
    uint64_t inj_drop, inj_dup, inj_reorder;
    uint64_t restarts;  /* port (re)starts after the first (dpdk_link.c) */
    bool peer_left;     /* memif client: the link went down after it was up */
    /* CPU cost of the data path with GX_DPDK_COST=1 (logged at close,
     * GX_DEBUG=info): the thread's CPU time in the polls that received
     * frames and the endpoint turns that sent some. CPU time, not wall
     * time, so a descheduled thread does not count: the figure holds on a
     * loaded machine. */
    uint64_t work_ns, work_calls;
};

/** Bring up EAL and the port once per process (idempotent); `rank` picks
 *  the entry of a ';'-separated GX_DPDK_VDEV list. */
int dpdk_port_up(int rank);
/** Register a domain with the port (its handover ring); undo at close. */
int dpdk_port_attach(struct dpdk_domain *dom);
void dpdk_port_detach(struct dpdk_domain *dom);
/** A peer sent its connection record: its port is started (a memif
 *  zero-copy client waits for this before it starts its own). */
void dpdk_port_peer_up(void);
/** Our MAC, IPv4 (network order), UDP port and IP MTU. */
void dpdk_port_local(uint8_t mac[6], uint32_t *ip, uint16_t *udp_port, uint16_t *mtu);
/** Take a free connection id for `ep` (control path). */
int dpdk_port_conn_add(struct dpdk_ep *ep);
void dpdk_port_conn_del(struct dpdk_ep *ep);
/** Receive: drain `dom`'s handover ring and the port, process our frames. */
void dpdk_port_poll(struct dpdk_domain *dom);
/** Allocate `n` mbufs; GX_OK or GX_ENOMEM (nothing allocated). */
int dpdk_port_alloc(struct rte_mbuf **m, unsigned n);
/** Transmit; returns how many were taken (the rest are freed here). */
unsigned dpdk_port_tx(struct rte_mbuf **m, unsigned n);
void dpdk_port_stats(struct dpdk_port_stats *out);
/** Data-path CPU accounting (GX_DPDK_COST): the thread's CPU time now, 0
 *  when off; then dpdk_port_work(t0) adds the time since if t0 != 0. */
uint64_t dpdk_port_cpu_ns(void);
void dpdk_port_work(uint64_t t0);
/* dpdk_cost.c: reads GX_DPDK_COST; the totals so far. */
void dpdk_cost_init(void);
void dpdk_cost_read(uint64_t *ns, uint64_t *calls);
/** Send one raw frame as given (tests: malformed input). */
int dpdk_port_send_raw(const void *frame, size_t len);
/** Name of the port's device and driver, for probe and logs. */
int dpdk_port_describe(char *name, size_t nlen, char *detail, size_t dlen);

/** Take one packet buffer out of the process's parking budget (a quarter of
 *  the pool, so parked segments never starve the receive ring). */
bool dpdk_port_park(void);
/** Free a parked buffer and give its place back to the budget. */
void dpdk_port_unpark(struct rte_mbuf *m);
/** The gx header and payload of a frame that parsed before. */
void dpdk_port_frame(struct rte_mbuf *m, struct gx_dpdk_hdr *h, const uint8_t **payload);

/* ---- dpdk_memif.c ------------------------------------------------------- */
/* What gx asks of a net_memif port (none of it when the port is another). */
struct dpdk_memif_plan {
    bool memif, client;
    bool zc;        /* memif's zero-copy mode (a client only) */
    bool add_zc;    /* ... which gx adds to the vdev string */
    uint32_t mtu;   /* GX_DPDK_MTU, else on memif the largest frame a buffer holds */
};
/** The plan for the process's GX_DPDK_VDEV entry and GX_DPDK_MTU (0: unset). */
int dpdk_memif_plan(const char *vdev, long long user_mtu, struct dpdk_memif_plan *out);
/** Appends to `args` (the EAL command line, ending with the vdev string) the
 *  vdev options (bsize, rsize, zero-copy) and EAL options the plan needs and
 *  `vdev` / `user` do not name; returns the new length. */
size_t dpdk_memif_args(const struct dpdk_memif_plan *pl, const char *vdev, const char *user,
                       char *args, size_t n, size_t cap);
/** GX_OK when memif's zero copy can use `pool` (DPDK 22.11 names region 1);
 *  remembers the memory file memif will share. */
int dpdk_memif_zc_check(struct rte_mempool *pool);
/** The memory file is still the one dpdk_memif_zc_check saw: DPDK 22.11's
 *  memif closes it when a zero-copy client's connection ends, and a later
 *  connection would share whatever took its number. */
bool dpdk_memif_zc_file_intact(void);
/** memif buffer size for an IP MTU: the frame, rounded up to 1 KiB. */
uint32_t dpdk_memif_bsize(uint32_t mtu);

/* ---- dpdk_zc.c ---------------------------------------------------------- */
#define DPDK_ZC_MIN 1024u /* payload bytes from which a send frame is zero copy */
/** Zero-copy sends on `port_id` if its driver allows (GX_DPDK_ZCOPY; not on
 *  a memif client in memif's zero-copy mode, `memif_zc`, whose frames must
 *  live in its packet buffers); returns the tx offloads the port must be
 *  configured with (0: sends copy). */
uint64_t dpdk_zc_setup(uint16_t port_id, unsigned nmbufs, bool memif_zc);
bool dpdk_zc_on(void);
/** A data frame whose payload points at `payload` (not copied); `*hdrs` gets
 *  where its GX_DPDK_HDRS_LEN header bytes go. NULL when out of buffers. */
struct rte_mbuf *dpdk_zc_frame(struct dpdk_ep *ep, const void *payload, size_t plen,
                               uint8_t **hdrs);
/** No frame of `ep` points into a caller's buffer any more. */
bool dpdk_zc_idle(struct dpdk_ep *ep);
void dpdk_zc_ep_free(struct dpdk_ep *ep);

/* ---- dpdk_link.c -------------------------------------------------------- */
enum dpdk_link_op { DPDK_LINK_START, DPDK_LINK_STOP, DPDK_LINK_RESTART, DPDK_LINK_CLOSE };
struct dpdk_link_state {
    bool started, closed;
    bool restart_when_down; /* a memif client: (re)start until the link is up */
    bool was_up, peer_left; /* the link carried frames; it went down after that */
    bool zc_client;         /* memif zero copy: start only once peer_up, never without
                             * the memory file (dpdk_memif_zc_file_intact) */
    bool peer_up;           /* dpdk_port_peer_up() */
    bool zc_broken;         /* ... which DPDK closed: the port stays down */
    uint64_t last_kick, last_start; /* timer cycles */
    uint64_t restarts;
};
/** A link that takes nothing: start a port not started yet, restart a memif
 *  client whose link stays down before it was ever up (at most every 50 ms,
 *  restarts 3 s apart); counts `*link_down`. Caller holds the port lock. */
void dpdk_link_kick(uint16_t port, struct dpdk_link_state *l, uint64_t *link_down);
/** Runs `op` on the port on EAL's interrupt thread (never beside the memif
 *  PMD's own disconnect handling there) and waits up to `timeout_ms`;
 *  `*op_rc` gets the ethdev call's result. GX_ETIMEOUT: it did not run in
 *  time (it may still run later). */
int dpdk_link_ctl(uint16_t port, enum dpdk_link_op op, unsigned timeout_ms, int *op_rc);

/* ---- dpdk_rx.c ---------------------------------------------------------- */
/** Process one frame for `ep`; true when the endpoint kept `m` (parked). */
bool dpdk_rx_frame(struct dpdk_ep *ep, const struct gx_dpdk_hdr *h, const uint8_t *payload,
                   struct rte_mbuf *m);
void dpdk_rx_drop_parked(struct dpdk_ep *ep);
/** Send the pending ACK of `ep` (if any). */
void dpdk_rx_send_ack(struct dpdk_ep *ep);
void dpdk_ep_fail(struct dpdk_ep *ep, int status, int prov_err, bool tell_peer, const char *fmt,
                  ...) __attribute__((format(printf, 5, 6)));
void dpdk_ep_flush_all(struct dpdk_ep *ep, int status, int prov_err);
int dpdk_post_recv(struct gx_fab_ep *ep, void *buf, size_t len, struct gx_fab_mr *mr,
                   uint64_t context);

/* ---- dpdk_tx.c ---------------------------------------------------------- */
void dpdk_tx_ack_in(struct dpdk_ep *ep, const struct gx_dpdk_hdr *h, const uint8_t *sack,
                    size_t sack_len);
void dpdk_tx_progress(struct dpdk_ep *ep);
/** Build one control frame (ACK with `sack_len` bitmap bytes, or CLOSE). */
int dpdk_tx_ctrl(struct dpdk_ep *ep, uint8_t type, int16_t status, const uint8_t *sack,
                 size_t sack_len);
int dpdk_post_send(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                   uint64_t tag, uint64_t context);
int dpdk_post_write_imm(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                        uint64_t raddr, const struct gx_fab_rkey *rkey, uint32_t imm,
                        uint64_t context);

/* ---- dpdk_conn.c -------------------------------------------------------- */
int dpdk_listen(struct gx_fab_domain *dom, struct gx_fab_cq *cq, struct gx_fab_listener **out,
                struct gx_fab_addr *addr_out);
int dpdk_accept(struct gx_fab_listener *lst, struct gx_fab_ep **out);
void dpdk_listener_close(struct gx_fab_listener *lst);
int dpdk_connect(struct gx_fab_domain *dom, struct gx_fab_cq *cq, const struct gx_fab_addr *peer,
                 const struct gx_fab_conn_param *param, struct gx_fab_ep **out);
int dpdk_ep_establish(struct gx_fab_ep *ep);
void dpdk_ep_close(struct gx_fab_ep *ep);
/** Per-poll endpoint work: liveness of the side channel, timers, transmit. */
void dpdk_ep_progress(struct gx_fab_ep *ep);

/* ---- dpdk_provider.c ---------------------------------------------------- */
struct dpdk_tuning {
    uint64_t rto_min_ns, rto_max_ns, peer_timeout_ns, fd_check_ns;
    uint32_t cwnd_init, cwnd_min;
    uint64_t inflight_max;              /* bytes */
};
extern struct dpdk_tuning dpdk_tuning;
/* GX_DPDK_INFLIGHT_MAX, also read by dpdk_port.c to size the memif ring. */
extern const struct gx_param gx_param_dpdk_inflight_max;
struct dpdk_ep *dpdk_ep_alloc(struct dpdk_domain *dom, struct dpdk_cq *cq);
void dpdk_ep_free(struct dpdk_ep *ep);

#endif
