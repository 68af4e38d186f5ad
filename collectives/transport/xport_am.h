/*
 * xport_am.h - active messages: the transport mechanics under one-sided
 * windows (xport_rma.c) and remote calls (xport_rpc.c).
 *
 * An active message is a header (struct xp_am_hdr, xport_proto.h) and a
 * body of any size, sent to one peer over its endpoint and handed, on
 * arrival, to the service the header names, not matched by tag. Small ones
 * travel eagerly through the peer's bounce slots (XP_MSG_AM). A larger one
 * sends its header first (XP_MSG_AM_RTS): the target's service decides
 * where the body goes (a window's own memory, a buffer of the right size)
 * and answers with the transport's CTS, after which the origin writes the
 * body there with write-with-immediate; a CTS with an error status refuses
 * it and nothing is written. The origin's operation is a struct xp_op of
 * kind XP_OP_AM whose on_done the service sets.
 *
 * Every connection a message arrives on has proved the job key (the fabric's
 * handshake), so a service only ever hears authenticated ranks.
 *
 * Room transport/ (xport_am.c). Everything here runs under the transport
 * lock. Peers are reached only through xp_svc_peer().
 */
#ifndef GX_XPORT_AM_H
#define GX_XPORT_AM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collectives/transport/xport_internal.h"

enum xp_svc_id { XP_SVC_RMA = 1, XP_SVC_RPC = 2 };

struct xp_rma_state;
struct xp_rpc_state;

/* The services of one transport (gx_xport.svc), made on first use. */
struct xp_svc {
    struct xp_rma_state *rma;
    struct xp_rpc_state *rpc;
    uint64_t next_id;          /* operation ids, echoed by answers */
};

/** The services of `x`, made on first use; NULL when out of memory. */
struct xp_svc *xp_svc_get(struct gx_xport *x);
/** Free them (gx_xport_close, after every peer failed its operations). */
void xp_svc_free(struct gx_xport *x);

/** The one way the services reach a peer: its endpoint state, or NULL for a
 *  rank outside the communicator. (When connections are made on demand,
 *  this is where the services ask for one.) */
struct xp_peer *xp_svc_peer(struct gx_xport *x, int rank);
/** GX_OK when an active message can be posted to `rank` now, else the
 *  reason (logged, naming `what` and the rank). */
int xp_svc_check_peer(struct gx_xport *x, int rank, const char *what);

/** Prepare `op` as an active message of `hdr` (kept by the caller until the
 *  message went out) and `len` bytes at `body`; on_done gets its local
 *  completion (the body may be reused) or its failure. */
void xp_am_op_init(struct xp_op *op, int peer, const struct xp_am_hdr *hdr, const void *body,
                   size_t len, void (*on_done)(struct xp_op *op));
/** Send it (or queue it behind the peer's earlier messages). GX_OK, or the
 *  error of a post that failed (then on_done is not called). */
int xp_am_send(struct xp_peer *p, struct xp_op *op);
/** An answer of the services: header and body copied or, when `owned` is
 *  set, body owned (freed with free() once sent). GX_OK or why not. */
int xp_am_answer(struct xp_peer *p, const struct xp_am_hdr *hdr, const void *body, size_t len,
                 void *owned);
/** From the transport's send path: put `op` on the wire from `slot`. */
int xp_am_start(struct xp_peer *p, struct xp_slot *slot, struct xp_op *op);

/** A message of type XP_MSG_AM or XP_MSG_AM_RTS arrived (`crc`: the RTS
 *  carries the body's CRC-32C for GX_CHECKSUM). */
void xp_am_arrived(struct xp_peer *p, uint8_t type, const void *data, size_t len, bool crc);

/** Target side of an XP_MSG_AM_RTS: take its body into `buf` (rts->size
 *  bytes) with `op`, whose on_done hears when it is all there; or refuse it
 *  (the origin's operation fails with `status`, nothing is written). */
void xp_am_take_body(struct xp_peer *p, struct xp_op *op, const struct xp_rts *rts, bool crc,
                     void *buf, void (*on_done)(struct xp_op *op));
void xp_am_refuse_body(struct xp_peer *p, const struct xp_rts *rts, int status);

/** Expect the peer to write `len` bytes into `buf` with write-with-immediate
 *  (a large get's answer): `op` is registered for the immediate `*imm`,
 *  `buf` for remote write (its key in `rkey`). on_done hears the arrival or
 *  the failure. xp_am_unexpect undoes it (the peer refused). */
int xp_am_expect_write(struct xp_peer *p, struct xp_op *op, void *buf, size_t len,
                       void (*on_done)(struct xp_op *op), uint32_t *imm,
                       struct gx_fab_rkey *rkey);
void xp_am_unexpect(struct xp_peer *p, struct xp_op *op);
/** Write `len` bytes at `buf` to the peer's (raddr, rkey) with immediate
 *  `imm` (the answer to its large get); GX_OK or why the post failed. */
int xp_am_write_to(struct xp_peer *p, const void *buf, size_t len, uint64_t raddr,
                   const struct gx_fab_rkey *rkey, uint32_t imm);

/** The link to the peer broke: every service fails what it owes or awaits. */
void xp_am_peer_failed(struct xp_peer *p, int status, const char *why);
/* The connection to p is up (xp_send_pending): one-sided fabric operations
 * deferred until then are posted. */
void xp_am_peer_up(struct xp_peer *p);

/* ---- the services' entry points (xport_rma.c, xport_rpc.c) ------------- */
void xp_rma_arrived(struct xp_peer *p, const struct xp_am_hdr *h, const void *body, size_t len,
                    const struct xp_rts *rts, bool crc);
void xp_rma_peer_failed(struct xp_peer *p, int status, const char *why);
void xp_rma_peer_up(struct xp_peer *p);
/** A window's one-sided fabric operation completed (context XP_CTX_RMA). */
void xp_rma_fabric_done(struct gx_xport *x, const struct gx_fab_cqe *e);
void xp_rma_free(struct gx_xport *x);

void xp_rpc_arrived(struct xp_peer *p, const struct xp_am_hdr *h, const void *body, size_t len,
                    const struct xp_rts *rts, bool crc);
void xp_rpc_peer_failed(struct xp_peer *p, int status, const char *why);
void xp_rpc_free(struct gx_xport *x);

#endif
