/*
 * boot_proto.h - wire format of bootstrap messages. Every bootstrap
 * connection is one-way (the connecting rank sends, the accepting rank
 * receives) and starts with the job-key handshake of common/auth_proto.h.
 * After it, a stream of messages: struct boot_msg_header + `len` bytes. The
 * one message that travels back is BOOT_MSG_REFUSE: the acceptor's reason
 * for dropping an authenticated connection (its rank is already taken).
 * Integers are in host order (ranks of a job share an architecture).
 */
#ifndef GX_BOOT_PROTO_H
#define GX_BOOT_PROTO_H

#include <stdint.h>

#define BOOT_MSG_MAGIC 0x4d425847u /* "GXBM" */
#define BOOT_MSG_MAX_LEN (64u << 20)

enum boot_msg_type {
    BOOT_MSG_DATA = 1,  /* payload for a bootstrap operation */
    BOOT_MSG_ABORT = 2, /* payload: struct boot_abort_payload */
    BOOT_MSG_REFUSE = 3, /* acceptor -> connector: payload is the reason, text */
    BOOT_MSG_BYE = 4,   /* connector -> acceptor, no payload: this stream ends on
                           purpose (a registration with rank 0); the same rank may
                           connect again later */
};
#define BOOT_REFUSE_MAX_LEN 400u

struct boot_msg_header {
    uint32_t magic;
    uint16_t type;
    uint16_t reserved;
    uint64_t comm_id; /* which communicator the operation belongs to */
    uint64_t tag;     /* BOOT_TAG(seq, kind, round) */
    uint32_t len;
    uint32_t reserved2;
};

/* A tag names one message of one operation: the communicator's sequence
 * number of the operation, its kind (so a rank that called something else is
 * detected) and the round within it. */
#define BOOT_TAG(seq, kind, round) (((uint64_t)(seq) << 16) | ((uint64_t)(kind) << 8) | (round))
#define BOOT_TAG_SEQ(tag) ((tag) >> 16)
#define BOOT_TAG_KIND(tag) (((tag) >> 8) & 0xff)

enum boot_op_kind {
    BOOT_OP_REGISTER = 1,
    BOOT_OP_TABLE = 2,
    BOOT_OP_BARRIER = 3,
    BOOT_OP_ALLGATHER = 4,
    BOOT_OP_BCAST = 5,
    BOOT_OP_SPLIT = 6,
    BOOT_OP_FINALIZE = 7,
    BOOT_OP_USER = 8, /* other layers' exchanges (fabric addresses, ...) */
    BOOT_OP_SHRINK = 9, /* gx_comm_shrink's agreement on who is gone */
    BOOT_OP_CLOCK = 10, /* clock offsets for the trace (boot_clock.c) */
};

struct boot_abort_payload {
    int32_t origin_rank; /* rank that first detected the failure */
    int32_t failed_rank; /* rank that failed (-1 if unknown) */
    int32_t status;      /* gx status */
    uint32_t epoch;      /* sender's recovery epoch: older ones are stale */
    char message[496];
};

/* One rank's registration record. */
struct boot_rank_record {
    int32_t rank;
    int32_t world_size;
    int32_t pid;
    uint16_t addr_len;
    uint16_t reserved;
    uint8_t addr[28]; /* sockaddr_in or sockaddr_in6 of its bootstrap listener */
    char host[64];
    char node_id[64];
};

#endif
