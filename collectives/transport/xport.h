/*
 * xport.h - a communicator's transport: one fabric endpoint per peer it
 * talks to (shm inside a node, the network provider between nodes), made
 * on demand, and a tagged message protocol on top of the fabric's send /
 * write-with-immediate.
 *
 * Reaching a peer: gx_xport_peer(x, rank, deadline, &p) is the one door to
 * the endpoint of `rank`. It connects on first use (the provider's job-key
 * handshake first, then the acceptor's hello; xport_conn.c), driving the
 * transport until the connection is up, the deadline passes (GX_ETIMEOUT)
 * or the connection fails (an error naming the rank and why; the peer
 * stays failed). Inside the transport, posting goes through
 * xp_peer_want() (xport_internal.h), which starts the connection without
 * blocking and lets the caller queue on the peer until it is up. Nothing
 * else opens endpoints; with GX_CONNECT=all every peer is connected at
 * open (the full mesh of earlier versions). gx_xport_stats counts them.
 *
 *  - eager: messages up to GX_EAGER_LIMIT bytes are copied into a registered
 *    send slot and land in one of the receiver's pre-posted bounce slots;
 *  - rendezvous: larger messages send an RTS; the receiver, once a matching
 *    receive is posted, registers its buffer and answers with a CTS carrying
 *    address and remote key; the sender writes the payload straight into the
 *    receive buffer with write-with-immediate (zero copy on verbs).
 *
 * Matching is per (peer, tag) in arrival order. A receive posted for
 * XP_ANY_PEER takes the first message of its tag from any peer: the one
 * that arrived first among those already waiting, else the next to
 * arrive; a message goes to the receive posted first, wildcard or not. A
 * receive smaller than the message fails on both sides with GX_ETRUNCATE
 * naming ranks and sizes.
 * Flow control is the provider's (a send waits in the provider until the
 * receiver re-posts a slot). All calls take the transport lock; the fabric
 * objects are only touched under it.
 *
 * Room transport/ (xport*.c): owns the per-peer endpoints and the tagged
 * message protocol. Must not know about collectives: the engine posts its
 * steps, and api/p2p.c the public gx_send/gx_recv, through this header
 * only. Reads the communicator (comm/); calls nothing above.
 */
#ifndef GX_XPORT_H
#define GX_XPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gx_comm;
struct gx_xport;
struct xp_peer;
struct xp_am_hdr;

/* Tags: user point-to-point tags are 0..2^31-1; collectives use the upper
 * half (XP_TAG_INTERNAL | ...), so the two never match each other. */
#define XP_TAG_INTERNAL 0x80000000u

/* XP_OP_AM: an active message of the one-sided and remote-call services
 * (xport_am.h): a header, then buf, never matched by tag. */
enum xp_op_kind { XP_OP_SEND = 1, XP_OP_RECV = 2, XP_OP_AM = 3 };

/* The peer of a receive that takes its tag's next message from any peer
 * (GX_ANY_SOURCE); op->peer names the sender once it matched. A link that
 * fails while it waits fails it (the message may have been that peer's). */
#define XP_ANY_PEER (-1)

/** One send or receive. Owned by the caller (embed it); valid until done. */
struct xp_op {
    uint8_t ctx_type;        /* must stay first: fabric contexts point here */
    uint8_t kind;            /* enum xp_op_kind */
    uint8_t state;           /* protocol state, private to p2p.c */
    bool done;
    int status;              /* valid once done */
    int peer;                /* receive: XP_ANY_PEER until it matched */
    uint32_t tag;
    void *buf;
    size_t len;              /* send: bytes; receive: capacity */
    size_t received;         /* receive: bytes of the matched message */
    uint32_t id;             /* rendezvous id */
    uint32_t crc;            /* rendezvous receive: the data's CRC-32C, when has_crc */
    bool has_crc;
    bool dev;                /* buf is CUDA device memory handed to the fabric (GPUDirect
                                RDMA, xport_gdr.c): the CPU never touches it */
    bool held;               /* announced send: its data is not ready (gx_xport_send_release) */
    uint64_t posted;         /* receive: posting order (wildcard vs specific), private */
    uint64_t t_post;         /* gx_now_ns() at the post while tracing (GX_TRACE), else 0 */
    struct xp_op *next;      /* queue link, private */
    void *reg;               /* rendezvous registration, private */
    size_t wr_posted;        /* rendezvous send: bytes of its write posted, private */
    size_t wr_done;          /* ... of them completed, private */
    int wr_error;            /* ... the first failure, reported once all came back, private */
    size_t landed;           /* rendezvous receive: bytes written into it so far, private */
    const struct xp_am_hdr *am_hdr; /* XP_OP_AM: its header (kept by the owner) */
    /* Set by a service of xport_am.h that owns the op: called with the
     * status (under the transport lock) instead of publishing `done`; it may
     * free the op. */
    void (*on_done)(struct xp_op *op);
    char err[200];           /* why it failed (already logged once) */
};

/** Open the transport of `comm` (collective: connects every peer). */
int gx_xport_open(struct gx_comm *comm, struct gx_xport **out);
/** Close every endpoint; outstanding operations fail with GX_EABORTED. */
void gx_xport_close(struct gx_xport *x);

/** Abort: fail every outstanding operation with GX_EABORTED and close the
 *  endpoints so peers notice; the memory stays valid until gx_xport_close. */
void gx_xport_abort(struct gx_xport *x);

/** Start a send or receive of `len` bytes at `buf`; completion is reported
 *  through op->done/status. A post that fails returns the error and the op
 *  is not started. `dev`: buf is CUDA device memory (only after
 *  gx_xport_gdr_check said yes for it): rendezvous registers it with the
 *  fabric as device memory, eager bytes go through the driver's copies. */
int gx_xport_send_mem(struct gx_xport *x, struct xp_op *op, int peer, uint32_t tag,
                      const void *buf, size_t len, bool dev);
int gx_xport_recv_mem(struct gx_xport *x, struct xp_op *op, int peer, uint32_t tag, void *buf,
                      size_t len, bool dev);

/** Announce a rendezvous send whose data is not ready yet: its request to
 *  send goes out now, and once the receiver's clear-to-send is back the send
 *  waits, holding it, until gx_xport_send_release says the bytes at `buf`
 *  are final; nothing reads `buf` before that. The peer matches it in the
 *  order of announcements and sends, as any send. GX_EUNSUPPORTED (op
 *  untouched, no error recorded): not announceable (eager size, self,
 *  GX_CHECKSUM, whose request carries the data's checksum): send it with
 *  gx_xport_send_mem once ready. Host memory only. Completion and failure
 *  as gx_xport_send_mem's; a held send fails with its link. */
int gx_xport_send_announce(struct gx_xport *x, struct xp_op *op, int peer, uint32_t tag,
                           const void *buf, size_t len);
/** The data of the announced send `op` is ready: write it as soon as its
 *  receiver has cleared it (at once if it has). */
void gx_xport_send_release(struct gx_xport *x, struct xp_op *op);

/** GPUDirect RDMA (xport_gdr.c): GX_OK when every peer of this rank is
 *  reached through a provider that registers the device memory [dev,
 *  dev+len) itself (verbs with a GDR verdict that allows it; tried once per
 *  transport with a registration), else GX_EUNSUPPORTED with the reason in
 *  `why` (the provider, the verdict, GX_CHECKSUM). */
int gx_xport_gdr_check(struct gx_xport *x, const void *dev, size_t len, char *why,
                       size_t why_len);
/** Cheap first look (no device buffer needed): false, with why, when
 *  GPUDirect RDMA is certainly not possible (a peer not over verbs,
 *  GX_CHECKSUM, one rank). */
bool gx_xport_gdr_maybe(struct gx_xport *x, char *why, size_t why_len);
/** memcpy where either side may be device memory (the driver copies). */
int gx_xport_mem_copy(void *dst, bool dst_dev, const void *src, bool src_dev, size_t len);

/** Poll completions and advance protocols. Returns GX_OK or a fatal error. */
int gx_xport_progress(struct gx_xport *x);

/** The up connection to `rank`, connecting on demand (see the top of this
 *  file). Call without the transport lock held (it takes it); `deadline`
 *  is a gx_now_ns() value, 0 for none beyond the attempt's own
 *  (GX_FAB_CONNECT_TIMEOUT or GX_TIMEOUT, whichever is longer). The peer
 *  stays valid until gx_xport_close; its fields are the transport's
 *  (xport_internal.h) and are touched under the transport lock only. */
int gx_xport_peer(struct gx_xport *x, int rank, uint64_t deadline, struct xp_peer **out);

/** Waits that yield: sleep until a provider has work for this transport
 *  (a message, a completion, a connection), at most `timeout_ms`. Returns
 *  at once when work is pending. A provider that cannot sleep (dpdk,
 *  verbs) makes it a short nap instead. Call without the lock. */
void gx_xport_wait(struct gx_xport *x, int timeout_ms);

/** True when the connection to `peer` is up (it does not connect). */
bool gx_xport_connected(struct gx_xport *x, int peer);

/** Add this transport's counters to `out` (xport_stats.c): bytes and
 *  messages per peer class and provider, checksum failures, connections,
 *  and the endpoints made on demand (endpoints, endpoints_node, connects,
 *  accepts). */
struct gx_comm_stats;
void gx_xport_stats(struct gx_xport *x, struct gx_comm_stats *out);

/** Name of the provider used to reach `peer` ("shm", "tcp", "self"). */
const char *gx_xport_provider_of(const struct gx_xport *x, int peer);

/* Fault injection (GX_FAULT, engine/coll_fault.c): break the link to
 * `peer` as a failed connection would, or make the next memory
 * registration fail. */
enum xp_inject { XP_INJECT_CLOSE = 1, XP_INJECT_REGFAIL };
void gx_xport_inject(struct gx_xport *x, int peer, enum xp_inject what);
/** GX_FAULT corrupt: flip a bit of the message with `tag` from `peer` when it arrives. */
void gx_xport_inject_corrupt(struct gx_xport *x, int peer, uint32_t tag);

#endif
