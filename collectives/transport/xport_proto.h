/*
 * xport_proto.h - wire format of the transport's messages. The message type
 * and the user tag travel in the fabric send's 64-bit tag; control payloads
 * are the structs below. Rendezvous payloads arrive by write-with-immediate
 * whose immediate is the receiver's rendezvous id, in one write or in
 * several (pieces of the sender's GX_WRITE_WINDOW, in order): the receive
 * completes once its bytes have all landed. Version 2 added the pieces.
 */
#ifndef GX_XPORT_PROTO_H
#define GX_XPORT_PROTO_H

#include <stdint.h>

#include "fabric/fabric.h"

#define XP_PROTO_VERSION 2

enum xp_msg_type {
    XP_MSG_EAGER = 1, /* payload = the message */
    XP_MSG_RTS = 2,   /* payload = struct xp_rts */
    XP_MSG_CTS = 3,   /* payload = struct xp_cts */
    XP_MSG_HELLO = 4, /* payload = struct xp_hello: first message of an accepted
                         connection, the acceptor keeps it (xport_conn.c) */
    /* Active messages of the one-sided and remote-call services
     * (xport_am.c): not matched by tag, handed to their service. */
    XP_MSG_AM = 5,     /* payload = struct xp_am_hdr, then the body */
    XP_MSG_AM_RTS = 6, /* payload = struct xp_rts, then struct xp_am_hdr; the body
                          follows by write-with-immediate after the target's CTS,
                          to where the service put it (a CTS status < 0 refuses) */
};

#define XP_WIRE_TAG(type, tag) (((uint64_t)(type) << 56) | ((uint64_t)XP_PROTO_VERSION << 48) | (tag))
#define XP_WIRE_TYPE(wire) ((unsigned)((wire) >> 56) & 0x7f)
/* GX_CHECKSUM: the sender sets the flag and puts the 16-bit folded CRC-32C
 * of the payload in bits 32..47 (an RTS also carries the CRC-32C of the data
 * the write will bring, in xp_rts.crc32c). */
#define XP_WIRE_CSUM_FLAG (1ull << 63)
#define XP_WIRE_CSUM(wire) ((uint16_t)((wire) >> 32))
#define XP_WIRE_WITH_CSUM(wire, cs16) ((wire) | XP_WIRE_CSUM_FLAG | ((uint64_t)(cs16) << 32))
#define XP_WIRE_VERSION(wire) ((unsigned)(((wire) >> 48) & 0xff))
#define XP_WIRE_USER_TAG(wire) ((uint32_t)(wire))

struct xp_rts {
    uint64_t size;      /* message bytes */
    uint32_t send_id;   /* sender's id for the CTS */
    uint32_t crc32c;    /* of the message, when the RTS carries XP_WIRE_CSUM_FLAG */
};

#define XP_HELLO_MAGIC 0x4f4c4548u /* "HELO" */
struct xp_hello {
    uint32_t magic;
    int32_t rank;       /* the acceptor's communicator rank */
};

struct xp_cts {
    uint32_t send_id;   /* echoes the RTS */
    int32_t status;     /* GX_OK, or GX_ETRUNCATE when the receive is too small */
    uint32_t recv_id;   /* immediate to use for the write */
    uint32_t reserved;
    uint64_t raddr;     /* where to write */
    uint64_t capacity;  /* receive size (for the error message) */
    struct gx_fab_rkey rkey;
};

/* An active message's header. `service` picks the receiver (enum xp_svc in
 * xport_am.h); the other fields are the service's (xport_rma.c,
 * xport_rpc.c say what each kind puts where). */
struct xp_am_hdr {
    uint8_t service;
    uint8_t kind;
    uint16_t flags;
    uint32_t object;    /* rma: window id; rpc: handler id */
    uint64_t id;        /* the origin's operation id, echoed by the answer */
    uint64_t offset;    /* rma: target offset in bytes; rpc: deadline, ms from now */
    uint64_t len;       /* rma: bytes the operation covers */
    uint16_t dtype;     /* rma accumulate: enum gx_datatype */
    uint16_t redop;     /* rma accumulate: enum gx_redop (or GX_REPLACE) */
    int32_t status;     /* answers: GX_OK or why the target refused */
};
_Static_assert(sizeof(struct xp_am_hdr) == 40, "xp_am_hdr layout");

#endif
