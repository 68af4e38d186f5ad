/*
 * verbs_proto.h - wire formats of the verbs provider: the listener address
 * blob, the connection-info messages exchanged over the authenticated TCP
 * side channel, the side channel's after-set-up messages, the packed remote
 * key, and the two control records peers RDMA-write into each other's
 * memory (clear-to-send and fin). All integers little-endian (x86/arm64
 * hosts); the side channel carries a version so a mismatch is refused.
 */
#ifndef GX_FABRIC_VERBS_VERBS_PROTO_H
#define GX_FABRIC_VERBS_VERBS_PROTO_H

#include <stdint.h>

#include "common/auth.h"

#define GX_VERBS_VERSION 1
#define GX_VERBS_ADDR_MAGIC 0x41425847u /* "GXBA": listener address blob */
#define GX_VERBS_CONN_MAGIC 0x43425847u /* "GXBC": connection info */
#define GX_VERBS_CTL_MAGIC 0x4c425847u  /* "GXBL": side-channel control */
#define GX_VERBS_RKEY_MAGIC 0x4b425847u /* "GXBK": packed remote key */
#define GX_VERBS_MAX_QPS 8

/* Handshake purpose on the side channel (common/auth.h). */
#define GX_VERBS_AUTH_PURPOSE GX_AUTH_VERBS_CM

/* Listener address: where the side channel listens. */
struct gx_verbs_addr {
    uint32_t magic;
    uint16_t version;
    uint16_t family; /* AF_INET / AF_INET6 */
    uint16_t port;
    uint16_t reserved;
    uint8_t ip[16];
};

enum gx_verbs_conn_type {
    GX_VERBS_CONN_REQ = 1,   /* connector -> acceptor: my QPs (INIT) */
    GX_VERBS_CONN_REP = 2,   /* acceptor -> connector: my QPs (RTS) */
    GX_VERBS_CONN_READY = 3, /* connector -> acceptor: my QPs are RTS */
};

/* Everything a peer needs to bring its QPs to RTR and to write into our
 * control rings. */
struct gx_verbs_conn {
    uint32_t magic;
    uint16_t version;
    uint16_t type;           /* enum gx_verbs_conn_type */
    int32_t rank;
    uint16_t nqps;
    uint8_t link_layer;      /* IBV_LINK_LAYER_* */
    uint8_t mtu;             /* enum ibv_mtu, active */
    uint16_t lid;
    uint16_t reserved;
    uint32_t depth;          /* ring entries of the control rings below */
    uint8_t gid[16];
    uint32_t qpn[GX_VERBS_MAX_QPS];
    uint32_t psn[GX_VERBS_MAX_QPS];
    uint64_t cts_addr;       /* where the peer writes clear-to-send records */
    uint64_t fin_addr;       /* where the peer writes fin records */
    uint32_t cts_rkey;
    uint32_t fin_rkey;
};
_Static_assert(sizeof(struct gx_verbs_conn) == 128, "conn layout");

/* After set-up the side channel stays open: the kernel closing it is the
 * fastest sign that a peer process died, and it carries why an endpoint
 * failed when the peer's hardware cannot say. */
enum gx_verbs_ctl_type {
    GX_VERBS_CTL_BYE = 1,   /* the peer closed the endpoint */
    GX_VERBS_CTL_ERROR = 2, /* the peer's endpoint failed with `status` */
};

struct gx_verbs_ctl {
    uint32_t magic;
    uint16_t type;
    uint16_t wc_status;  /* ibv_wc_status the peer saw, 0 if none */
    int32_t status;      /* gx status */
    uint32_t reserved;
};
_Static_assert(sizeof(struct gx_verbs_ctl) == 16, "ctl layout");

/* Packed remote key: the same 32-byte shape as the software providers'
 * keys (base at byte 16, length at byte 24), so the initiator can refuse an
 * out-of-range write before posting it. The HCA checks rkey and range again. */
/* In gx_verbs_rkey.access beside enum gx_fab_access: the owner flushes
 * after writes into this registration (GPU memory, or GX_IB_GDR_FLUSH=on),
 * so a writer's fin must say where it wrote. */
#define GX_VERBS_RKEY_FLUSH 0x80000000u

struct gx_verbs_rkey {
    uint32_t magic;
    uint32_t rkey;
    uint32_t access;     /* enum gx_fab_access of the registration | GX_VERBS_RKEY_FLUSH */
    uint32_t reserved;
    uint64_t base;
    uint64_t len;
};
_Static_assert(sizeof(struct gx_verbs_rkey) == 32, "rkey layout");

/*
 * Clear-to-send: the receiver's posted receive k, RDMA-written (inline) into
 * slot k % depth of the sender's cts ring. The sender polls `seq`, which
 * holds k + 1 (so a zeroed ring never matches); seq_head repeats it at the
 * other end of the record, and both must match before the record is used,
 * so a record landing in two pieces is never read half-written.
 */
struct gx_verbs_cts {
    uint32_t seq_head;
    uint32_t rkey;
    uint64_t addr;
    uint64_t len;
    uint32_t reserved;
    uint32_t seq;
};
_Static_assert(sizeof(struct gx_verbs_cts) == 32, "cts layout");

enum gx_verbs_fin_kind {
    GX_VERBS_FIN_SEND = 1,  /* payload is in the posted receive's buffer */
    GX_VERBS_FIN_WRITE = 2, /* payload was written where the sender's rkey said */
    GX_VERBS_FIN_TRUNC = 3, /* a send larger than the posted receive: not written */
};

#define GX_VERBS_FIN_FLUSH 0x01 /* flags: WRITE into a flushed registration */

/*
 * Fin: describes message k. Written with RDMA WRITE WITH IMMEDIATE (imm = k)
 * into slot k % depth of the receiver's fin ring, on QP 0, after the
 * payload; stripes on QPs 1.. end with a WRITE WITH IMMEDIATE of their own
 * (imm = k) and are counted against `nparts`.
 * A WRITE with GX_VERBS_FIN_FLUSH names the last byte it wrote and the key
 * the receiver gave for it, so the receiver can RDMA-read that byte back
 * (the flush after GPU-destined writes, verbs_flush.c). Receivers that do
 * not know the flag ignore it: the fields were reserved (zero) before.
 */
struct gx_verbs_fin {
    uint64_t len;
    union {
        uint64_t tag;        /* SEND: the sender's tag */
        uint64_t flush_addr; /* WRITE with GX_VERBS_FIN_FLUSH: last byte written */
    };
    uint32_t imm;
    uint16_t kind;     /* enum gx_verbs_fin_kind */
    uint8_t nparts;    /* stripes on other QPs */
    uint8_t flags;     /* GX_VERBS_FIN_FLUSH */
    uint32_t seq;      /* k (low 32 bits) */
    uint32_t flush_rkey; /* WRITE with GX_VERBS_FIN_FLUSH: the receiver's rkey */
};
_Static_assert(sizeof(struct gx_verbs_fin) == 32, "fin layout");

#endif
