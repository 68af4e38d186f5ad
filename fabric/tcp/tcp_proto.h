/*
 * tcp_proto.h - wire format of the tcp provider's data streams.
 *
 * A connection is GX_TCP_NSTREAMS TCP sockets, each opened with the job-key
 * handshake (common/auth_proto.h, purpose GX_AUTH_TCP_DATA) whose conn_id
 * says which connection and which stream it is (gx_tcp_conn_id()). After
 * that every stream carries frames: a fixed 72-byte header, then
 * `frame_len` payload bytes.
 *
 * A message (send or write-with-immediate) has a per-direction sequence
 * number and is carried by one frame, or striped over several streams as
 * frames with their own offset. The receiver places each frame directly in
 * the receive buffer (send) or the registered target range (write), and
 * completes messages in sequence order. NAK reports a fatal error on the
 * receiver's side (bad key, truncation) before it drops the connection.
 *
 * All integers are little-endian (the host order of every supported target).
 */
#ifndef GX_FABRIC_TCP_PROTO_H
#define GX_FABRIC_TCP_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define GX_TCP_MAGIC 0x44545847u /* "GXTD" */
#define GX_TCP_VERSION 1
#define GX_TCP_MAX_MSG (1ull << 40) /* sanity bound on a message length */
#define GX_TCP_MAX_STREAMS 32

enum gx_tcp_op {
    GX_TCP_OP_SEND = 1,      /* lands in the next posted receive; `tag` valid */
    GX_TCP_OP_WRITE_IMM = 2, /* lands at raddr under rkey; consumes a receive */
    GX_TCP_OP_NAK = 3,       /* receiver refused message msg_seq; `status` says why */
};

struct gx_tcp_hdr {
    uint32_t magic;
    uint8_t version;
    uint8_t op;           /* enum gx_tcp_op */
    uint16_t hdr_len;     /* sizeof(struct gx_tcp_hdr) */
    uint32_t imm;         /* WRITE_IMM: the immediate */
    uint32_t msg_seq;     /* per-direction message number */
    uint64_t tag;         /* SEND: the sender's tag */
    uint64_t msg_len;     /* whole message */
    uint64_t offset;      /* of this frame's payload within the message */
    uint64_t frame_len;   /* payload bytes after this header */
    uint64_t raddr;       /* WRITE_IMM: target address of the message start */
    uint32_t rkey_index;  /* WRITE_IMM: target's registration index */
    int32_t status;       /* NAK: gx status (negative) */
    uint64_t rkey_cookie; /* WRITE_IMM: target's registration cookie */
};
_Static_assert(sizeof(struct gx_tcp_hdr) == 72, "tcp header layout");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "tcp wire format is little-endian");

/* Handshake conn_id: | token (48 bits) | nstreams (8) | stream index (8) |. */
static inline uint64_t gx_tcp_conn_id(uint64_t token, unsigned nstreams, unsigned idx)
{
    return (token << 16) | ((uint64_t)(nstreams & 0xff) << 8) | (idx & 0xff);
}

/* Address blob published by a tcp listener. */
#define GX_TCP_ADDR_MAGIC 0x41545847u /* "GXTA" */
struct gx_tcp_addr {
    uint32_t magic;
    uint16_t version;
    uint16_t family; /* AF_INET or AF_INET6 */
    uint16_t port;   /* host order */
    uint16_t reserved;
    uint8_t ip[16];
};
_Static_assert(sizeof(struct gx_tcp_addr) == 28, "tcp address layout");

/**
 * Check a received header. GX_OK when `buf` holds a well-formed header
 * (copied to *out), GX_INPROGRESS when fewer than sizeof(*out) bytes are
 * there, GX_EPROTO otherwise with *why naming the first problem. Pure: no
 * logging, no allocation (the fuzz target drives it directly).
 */
int gx_tcp_hdr_parse(const void *buf, size_t len, struct gx_tcp_hdr *out, const char **why);

#endif
