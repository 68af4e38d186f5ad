/*
 * dpdk_proto.h - wire format of the dpdk provider (protocol only: no DPDK
 * types, so the parser and its fuzz target build without DPDK).
 *
 * Every frame is Ethernet / IPv4 / UDP (destination port GX_DPDK_UDP_PORT by
 * default), so an Ethernet fabric routes and hashes it like RoCEv2, followed
 * by an 80-byte gx header and `len` payload bytes:
 *
 *   DATA   one segment of a message (send or write-with-immediate). Every
 *          segment is self-describing (message number, message length, its
 *          offset, tag or target address and key), so the receiver places it
 *          straight into the posted receive or the registered target range
 *          whatever order segments arrive in.
 *   ACK    `ack` is the next PSN the receiver expects (cumulative); the
 *          payload is a selective-ACK bitmap: bit i set means PSN ack+1+i
 *          arrived; `ts` echoes the newest DATA segment's timestamp.
 *   CLOSE  the sender failed or closed the connection; `status` says why.
 *
 * Every frame also carries `ack` (DATA piggybacks it) and is addressed by
 * the receiver's connection id and cookie, both exchanged over the
 * authenticated side channel (struct gx_dpdk_conn_info): frames of another
 * job or a stale connection are dropped and counted.
 *
 * All gx-header integers are little-endian; IPv4/UDP fields are in network
 * order as usual.
 */
#ifndef GX_FABRIC_DPDK_PROTO_H
#define GX_FABRIC_DPDK_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define GX_DPDK_MAGIC 0x50445847u /* "GXDP" */
#define GX_DPDK_VERSION 1
#define GX_DPDK_UDP_PORT 47913
#define GX_DPDK_MAX_MSG (1ull << 40) /* sanity bound on a message length */
/* PSNs a sender may have outstanding and a receiver tracks (a power of 2). */
#define GX_DPDK_WINDOW 8192u
#define GX_DPDK_MTU_MAX 64000u /* IP MTU bound: memif frames; NICs stop at ~9600 */
#define GX_DPDK_SACK_MAX_BYTES 128 /* SACK bitmap: PSNs ack+1 .. ack+1024 */

#define GX_DPDK_ETH_LEN 14
#define GX_DPDK_IP_LEN 20
#define GX_DPDK_UDP_LEN 8
#define GX_DPDK_L2L4_LEN (GX_DPDK_ETH_LEN + GX_DPDK_IP_LEN + GX_DPDK_UDP_LEN)

enum gx_dpdk_type {
    GX_DPDK_T_DATA = 1,
    GX_DPDK_T_ACK = 2,
    GX_DPDK_T_CLOSE = 3,
};

enum gx_dpdk_op {
    GX_DPDK_OP_SEND = 1,      /* lands in the next posted receive; `tag` valid */
    GX_DPDK_OP_WRITE_IMM = 2, /* lands at raddr under the key; consumes a receive */
};

struct gx_dpdk_hdr {
    uint32_t magic;
    uint8_t version;
    uint8_t type;          /* enum gx_dpdk_type */
    uint8_t op;            /* DATA: enum gx_dpdk_op */
    uint8_t flags;         /* reserved, 0 */
    uint32_t conn_id;      /* the receiver's connection id */
    uint32_t cookie;       /* the receiver's connection cookie */
    uint32_t psn;          /* DATA: this segment's PSN */
    uint32_t ack;          /* next PSN the sender of this frame expects */
    uint32_t msg_seq;      /* DATA: message number = which posted receive */
    uint32_t last_psn;     /* DATA: PSN of the message's last segment */
    uint32_t imm;          /* DATA, WRITE_IMM: the immediate */
    uint16_t len;          /* payload bytes after this header */
    int16_t status;        /* CLOSE: gx status (negative), 0 for a plain close */
    uint64_t msg_len;      /* DATA: whole message */
    uint64_t offset;       /* DATA: this segment's payload within the message */
    uint64_t tag;          /* DATA: SEND tag, or WRITE_IMM target address of byte 0 */
    uint64_t rkey_cookie;  /* DATA, WRITE_IMM: target registration cookie */
    uint32_t rkey_index;   /* DATA, WRITE_IMM: target registration index */
    uint32_t ts;           /* DATA: sender's clock in us; ACK: the ts of the newest
                              DATA it answers (RTT of retransmissions too, and
                              spurious-timeout detection) */
};
_Static_assert(sizeof(struct gx_dpdk_hdr) == 80, "dpdk header layout");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "dpdk wire format is little-endian");

#define GX_DPDK_HDRS_LEN (GX_DPDK_L2L4_LEN + (int)sizeof(struct gx_dpdk_hdr))

/* Where a frame goes: what the side channel exchanged. */
struct gx_dpdk_l2l4 {
    uint8_t src_mac[6], dst_mac[6];
    uint32_t src_ip, dst_ip; /* network order */
    uint16_t src_port, dst_port; /* host order */
};

/* Listener address blob (layout of struct gx_fab_sock_addr). */
#define GX_DPDK_ADDR_MAGIC 0x41445847u /* "GXDA" */
struct gx_dpdk_addr {
    uint32_t magic;
    uint16_t version;
    uint16_t family;
    uint16_t port;
    uint16_t reserved;
    uint8_t ip[16];
};
_Static_assert(sizeof(struct gx_dpdk_addr) == 28, "dpdk address layout");

/* Exchanged both ways on the authenticated side channel after the job-key
 * handshake (purpose GX_AUTH_DPDK_CM); the socket then stays open as the
 * liveness signal (its EOF means the peer exited or closed). */
#define GX_DPDK_CM_MAGIC 0x4d445847u /* "GXDM" */
struct gx_dpdk_conn_info {
    uint32_t magic;
    uint16_t version;
    uint16_t mtu;        /* IP MTU of the sender's port */
    uint8_t mac[6];
    uint16_t udp_port;   /* host order */
    uint32_t ip;         /* network order */
    uint32_t conn_id;    /* the id frames to the sender of this info must carry */
    uint32_t cookie;     /* and the cookie */
    uint32_t first_psn;  /* PSN of the sender's first DATA segment */
    int32_t rank;
};
_Static_assert(sizeof(struct gx_dpdk_conn_info) == 36, "dpdk conn info layout");

/* After set-up the side channel carries only these records, receiver to
 * sender: the cumulative ACK of a completed message, sent reliably so that a
 * receiver that goes idle right after its completion (no more polling) does
 * not leave the sender retransmitting into silence when the frame ACK was
 * lost. */
#define GX_DPDK_SIDE_ACK_MAGIC 0x4b445847u /* "GXDK" */
struct gx_dpdk_side_ack {
    uint32_t magic;
    uint32_t ack;
};

/* Why a received frame was dropped by the parser (counted per reason). */
enum gx_dpdk_drop {
    GX_DPDK_DROP_NOT_GX = 1,   /* not IPv4/UDP to our port: someone else's traffic */
    GX_DPDK_DROP_SHORT,        /* shorter than the headers */
    GX_DPDK_DROP_IP,           /* bad IPv4 header (version, length, checksum, fragment) */
    GX_DPDK_DROP_UDP,          /* UDP length disagrees with the frame */
    GX_DPDK_DROP_MAGIC,        /* UDP to our port without the gx magic */
    GX_DPDK_DROP_VERSION,      /* another protocol version */
    GX_DPDK_DROP_FIELDS,       /* type, op, length or offsets out of range */
    GX_DPDK_DROP_REASONS
};

/**
 * Parse one received frame of `len` bytes. GX_OK (0) with *hdr filled and
 * *payload pointing at hdr->len payload bytes, or a positive enum
 * gx_dpdk_drop. Pure: no logging, no allocation (the fuzz target drives it).
 */
int gx_dpdk_parse(const uint8_t *frame, size_t len, uint16_t udp_port, struct gx_dpdk_hdr *hdr,
                  const uint8_t **payload);

/** Write the Ethernet, IPv4 and UDP headers of a frame whose gx header and
 *  payload come to `l4_len` bytes; returns GX_DPDK_L2L4_LEN. */
size_t gx_dpdk_put_l2l4(uint8_t *frame, const struct gx_dpdk_l2l4 *a, size_t l4_len);

/** Name of a drop reason for counters and logs. */
const char *gx_dpdk_drop_name(int reason);

/* PSN comparisons in 32-bit sequence space. */
static inline int gx_dpdk_psn_lt(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }
static inline int gx_dpdk_psn_le(uint32_t a, uint32_t b) { return (int32_t)(a - b) <= 0; }

#endif
