/* xport_internal.h - the transport's private state, shared by xport.c
 * (set-up, teardown, progress), xport_conn.c (connections on demand),
 * xport_p2p.c (protocol: posting), xport_match.c (protocol: completions,
 * arrivals, matching) and xport_write.c (rendezvous writes). */
#ifndef GX_XPORT_INTERNAL_H
#define GX_XPORT_INTERNAL_H

#include <pthread.h>

#include "collectives/transport/xport.h"
#include "collectives/transport/xport_proto.h"
#include "fabric/fabric.h"
#include "fabric/rcache.h"

#define XP_RECV_SLOTS 16
#define XP_SEND_SLOTS 16
#define XP_RNDV_TABLE 1024

/* XP_CTX_RMA: a one-sided fabric operation (write, read, atomic) of a
 * window (xport_rma.c). */
enum xp_ctx_type {
    XP_CTX_OP = 1,
    XP_CTX_RECV_SLOT = 2,
    XP_CTX_SEND_SLOT = 3,
    XP_CTX_HELLO = 4,
    XP_CTX_RMA = 5,
};

/* A peer's connection (xport_conn.c). Self is UP from the start. */
enum xp_conn_state {
    XP_CONN_NONE = 0,   /* nobody asked for it yet */
    XP_CONN_CONNECTING, /* our connect is being established */
    XP_CONN_CONFIRM,    /* ours is established; waiting for the acceptor's HELLO */
    XP_CONN_WAIT_IN,    /* the lower rank dropped ours: its own connection is coming */
    XP_CONN_UP,         /* p->ep carries messages */
};

struct xp_slot {
    uint8_t ctx_type;        /* first: fabric contexts point here */
    struct xp_peer *peer;
    char *buf;
    struct xp_op *op;        /* send slot: the eager send it carries, or NULL */
    bool busy;
};

struct xp_unexpected {
    struct xp_unexpected *next;
    uint32_t tag;
    uint64_t arrived;        /* arrival order over all peers (wildcard receives) */
    uint8_t type;            /* XP_MSG_EAGER or XP_MSG_RTS */
    int32_t cs;              /* GX_CHECKSUM: eager payload's folded CRC, or for an RTS
                                any value >= 0 when it carries the data's CRC-32C; -1 none */
    struct xp_rts rts;
    size_t len;
    char data[];             /* eager payload */
};

/* A send its receiver cleared (the CTS) while the peer's write window was
 * full: written, in arrival order, once earlier writes complete. */
struct xp_write_wait {
    struct xp_op *op;
    struct xp_cts cts;
};

struct xp_domain {
    const struct gx_fab_provider *prov;
    struct gx_fab_domain *dom;
    struct gx_fab_cq *cq;
    struct gx_fab_listener *lst;        /* accepts peers' connections (on demand) */
    struct gx_fab_rcache *rcache_send;  /* local access */
    struct gx_fab_rcache *rcache_recv;  /* remote write */
    size_t write_window;                /* GX_WRITE_WINDOW for its peers, 0 none */
};

struct xp_peer {
    int rank;
    struct gx_xport *x;
    struct xp_domain *d;     /* the domain that reaches it (planned at open); NULL for self */
    struct gx_fab_ep *ep;    /* the connection messages use, once conn == XP_CONN_UP */
    uint8_t conn;            /* enum xp_conn_state */
    int pend_index;          /* its place in x->pend while connecting, else -1 */
    struct gx_fab_ep *out_ep;                    /* our own attempt until it is up or dropped */
    struct gx_fab_ep *parked;                    /* its crossing attempt, closed once we are up */
    uint64_t conn_deadline;                      /* gx_now_ns() limit of the attempt */
    struct xp_slot hello;                        /* on out_ep: the acceptor's XP_MSG_HELLO */
    char *slab;              /* recv + send slots + the hello buffer */
    struct gx_fab_mr *slab_mr;
    struct xp_slot recv_slots[XP_RECV_SLOTS];
    struct xp_slot send_slots[XP_SEND_SLOTS];
    int send_free;
    struct xp_op *posted_head, *posted_tail;     /* receives awaiting a message */
    struct xp_unexpected *unexp_head, *unexp_tail;
    struct xp_op *wait_head, *wait_tail;         /* sends awaiting a slot */
    struct xp_op *rts_head;                      /* sends awaiting their CTS */
    struct xp_write_wait *wq;                    /* cleared sends awaiting the window (ring) */
    int wq_head, wq_count, wq_cap;
    size_t wr_inflight;                          /* rendezvous bytes posted, not completed */
    struct xp_write_wait *held;                  /* announced sends cleared before their data
                                                    was ready (xport_write.c) */
    int held_count, held_cap;
    struct xp_cts *ctl;                          /* CTS awaiting a slot (grows) */
    int ctl_count;
    int ctl_cap;
    int failed;                                  /* status once the link broke */
    uint64_t bytes_sent, bytes_received;         /* completed messages (gx_comm_stats) */
    uint64_t sends, receives;
    bool inject_corrupt;                         /* GX_FAULT: corrupt its message with */
    uint32_t corrupt_tag;                        /* this tag when it arrives */
};

struct gx_xport {
    pthread_mutex_t lock;
    /* Connections (xport_conn.c): each peer's listener address in the domain
     * that reaches it, the peers being connected, counters for stats. */
    struct gx_fab_addr *addrs;
    int *pend;
    int npend;
    uint64_t next_accept_ns;
    uint64_t next_watch_ns;
    int nup;                                     /* peers with an endpoint, self excluded */
    int nup_node;                                /* ... of them on this node */
    int nconnects, naccepts;
    struct gx_comm *comm;
    int rank;
    int size;
    size_t eager_limit;
    struct xp_domain doms[2];
    int ndoms;
    struct xp_peer *peers;
    struct xp_op *any_head, *any_tail;           /* XP_ANY_PEER receives awaiting a message */
    uint64_t posted_count;                       /* receives posted (xp_op.posted) */
    uint64_t arrived_count;                      /* unexpected messages (xp_unexpected.arrived) */
    bool aborted;
    uint32_t next_send_id;
    uint32_t next_recv_id;
    struct xp_op *rndv[XP_RNDV_TABLE];           /* receives by recv_id % table */
    bool inject_regfail;                         /* GX_FAULT: fail the next registration */
    bool checksum;                               /* GX_CHECKSUM: checksum what we send */
    uint64_t checksum_failures;                  /* messages that failed it (gx_comm_stats) */
    int gdr;                                     /* branch gdr: 0 not asked, 1 yes, -1 no */
    char gdr_why[240];                           /* why not (xport_gdr.c) */
    struct xp_svc *svc;                          /* windows and remote calls (xport_am.h),
                                                    made on first use */
    uint64_t polled;                             /* completions taken so far (atomic) */
    /* Waits that yield with two threads on one transport (a caller asleep
     * in gx_xport_wait while the remote-call poller or the collectives'
     * progress thread takes completions): the sleeper polls wake_fd too,
     * and a progress pass that took completions while sleepers > 0 writes
     * it; the fabric fds alone miss it (a tcp socket another thread read
     * is no longer readable). Both under lock; wake_fd -1: no eventfd. */
    int wake_fd;
    int sleepers;
};

/* An operation's protocol state (xp_op.state). */
enum xp_state { XP_ST_NEW = 0, XP_ST_EAGER, XP_ST_RTS_SENT, XP_ST_WRITING, XP_ST_RNDV_RECV };

/* Done with `status`: published to the waiter last, or handed to the
 * service that owns the op (which may free it). */
static inline void xp_op_finish(struct xp_op *op, int status)
{
    op->status = status;
    if (op->on_done) {
        op->on_done(op);
        return;
    }
    __atomic_store_n(&op->done, true, __ATOMIC_RELEASE);
}

/** GX_TRACE: a completion on the provider track (xport_stats.c). */
void xp_trace_cqe(const struct xp_domain *d, const struct gx_fab_cqe *e);
/** Count a completed message (xport_stats.c; traced under GX_TRACE). */
void xp_tally(struct xp_peer *p, const struct xp_op *op);

/* Done with success: counted, then published to the waiter. */
static inline void xp_op_done(struct xp_peer *p, struct xp_op *op)
{
    xp_tally(p, op);
    xp_op_finish(op, GX_OK);
}

/* GX_CHECKSUM of a message in the wire tag: its CRC-32C folded to 16 bits. */
static inline uint16_t xp_fold16(uint32_t crc)
{
    return (uint16_t)(crc ^ (crc >> 16));
}

/* ---- xport_p2p.c: posting --------------------------------------------- */
int xp_post_recv_slot(struct xp_slot *slot);
void xp_fail_peer(struct xp_peer *p, int status, const char *why);
/** Fail the op with a message (kept in op->err and as the last error). */
void xp_op_fail(struct xp_op *op, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** Remove and return the first op with `tag` (tail may be NULL for lists
 *  without one). */
struct xp_op *xp_queue_take_tag(struct xp_op **head, struct xp_op **tail, uint32_t tag);
/** Fail the XP_ANY_PEER receives waiting: the link to rank `who` failed,
 *  or (who < 0) the whole transport, for `why`. */
void xp_fail_any(struct gx_xport *x, int status, int who, const char *why);
void xp_release_send_slot(struct xp_slot *s);
/** Post a message of `type` from a taken send slot (the slot is released
 *  when the post fails). */
int xp_post_msg(struct xp_peer *p, struct xp_slot *slot, int type, uint32_t tag,
                const void *payload, size_t len);
/** Start (or queue, when no send slot is free) a send or an active message
 *  to the peer; GX_OK, or the error of a post that failed. */
int xp_send_or_queue(struct xp_peer *p, struct xp_op *op);
/** GX_FAULT corrupt: flip a bit of the next data message from the peer. */
void xp_maybe_corrupt(struct xp_peer *p, uint32_t tag, void *data, size_t len);
/** GX_FAULT regfail: GX_ENOMEM once when injected, else GX_OK. */
int xp_take_injected_regfail(struct gx_xport *x);
/** Send a control message (no user op) in a free send slot; up peers only. */
int xp_post_ctl(struct xp_peer *p, int type, const void *payload, size_t len);
/** Post queued CTS answers, then waiting sends, while send slots are free. */
void xp_send_pending(struct xp_peer *p);
/** Queue a CTS answer to the peer and post what fits. */
void xp_send_cts(struct xp_peer *p, const struct xp_cts *cts);
/* Rendezvous writes (xport_write.c): `op`'s receiver cleared it with
 * `cts`; write it, in pieces of the peer's window when it has one. */
void xp_write_start(struct xp_peer *p, struct xp_op *op, const struct xp_cts *cts);
/* Post the cleared sends' pieces that fit in the window. */
void xp_write_pending(struct xp_peer *p);
/* An announced send (op->held) was cleared before its data was ready: keep
 * `cts` until xp_write_release. */
void xp_write_hold(struct xp_peer *p, struct xp_op *op, const struct xp_cts *cts);
/* The held send's data is ready: start its write if it was cleared (else
 * its CTS starts it when it comes). */
void xp_write_release(struct xp_peer *p, struct xp_op *op);
/* A piece of `op` completed (CQE `e`). */
void xp_write_cqe(struct xp_peer *p, struct xp_op *op, const struct gx_fab_cqe *e);
/* Take `op` out of the window's queue (a call taken back before it wrote):
 * true when it was there and had written nothing. */
bool xp_write_unqueue(struct xp_peer *p, struct xp_op *op);
/* Fail every send in the window's queue and every held one (the link
 * broke); one with pieces in flight fails when the last of them comes back. */
void xp_write_fail_all(struct xp_peer *p, int status, const char *why);

/* ---- xport.c ------------------------------------------------------------- */
/** Drive connections and poll every domain's completions. Lock held. */
int xp_progress_locked(struct gx_xport *x);

/* ---- xport_conn.c: connections on demand ------------------------------- */
/** Listen in every domain and exchange the addresses (collective, at open). */
int xp_conn_open(struct gx_xport *x);
/** GX_CONNECT=all: connect every peer now (collective, at open). */
int xp_conn_all(struct gx_xport *x, uint64_t deadline);
/** The peer `rank` (in range), its connection started if nobody asked yet;
 *  it may not be up: callers queue what they post. Lock held. */
struct xp_peer *xp_peer_want(struct gx_xport *x, int rank);
/** Drive connections: accept, establish, deadlines. Lock held. */
void xp_conn_progress(struct gx_xport *x);
/** A completion of a hello receive (XP_CTX_HELLO). Lock held. */
void xp_conn_hello_cqe(struct gx_xport *x, const struct gx_fab_cqe *e);
/** Close every endpoint and listener (abort, close). Lock held. */
void xp_conn_close_all(struct gx_xport *x);
/** Free the peer's bounce slots (close). */
void xp_conn_free_peer(struct xp_peer *p);
/** The peer leaves the set being connected (failed or up). Lock held. */
void xp_conn_unpend(struct gx_xport *x, struct xp_peer *p);

/* ---- xport_match.c: completions and arrivals ---------------------------- */
int xp_handle_cqe(struct gx_xport *x, const struct gx_fab_cqe *e);
/** A message from the peer: a CTS to its send, else to the first posted
 *  receive of `tag` or the unexpected queue. `cs`: its folded CRC, or -1. */
void xp_on_message(struct xp_peer *p, uint8_t type, uint32_t tag, void *data, size_t len,
                   int32_t cs);
/** An eager message meets its receive (checks its size and checksum). */
void xp_deliver_eager(struct xp_peer *p, struct xp_op *op, void *data, size_t len, int32_t cs);
/** An RTS meets its receive: register the buffer and answer with a CTS. */
void xp_start_rndv_recv(struct xp_peer *p, struct xp_op *op, const struct xp_rts *rts,
                        bool rts_crc);

#endif
