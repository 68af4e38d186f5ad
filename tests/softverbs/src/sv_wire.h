/*
 * softverbs wire format: one UDP datagram per packet, a fixed header then
 * up to one path MTU of payload. This plays the role of the IB BTH/RETH/AETH
 * headers; fields are little endian on the wire.
 */
#ifndef SV_WIRE_H
#define SV_WIRE_H

#include <stdint.h>

#define SV_WIRE_MAGIC 0x53560001u /* "SV", version 1 */
#define SV_WIRE_MAX_PAYLOAD 4096
#define SV_WIRE_MAX_PKT (SV_WIRE_MAX_PAYLOAD + (int)sizeof(struct sv_hdr))

enum sv_op {
	SV_OP_SEND = 1,      /* request: SEND, SEND_WITH_IMM */
	SV_OP_WRITE = 2,     /* request: RDMA_WRITE, RDMA_WRITE_WITH_IMM */
	SV_OP_READ_REQ = 3,  /* request: RDMA_READ */
	SV_OP_READ_RESP = 4, /* response carrying read data */
	SV_OP_ACK = 5,       /* response: ACK or NAK (see syndrome) */
	SV_OP_ATOMIC = 6,    /* request: 8-byte atomic at va; payload: compare
			      * or add, then swap (2 x u64 LE); answered by one
			      * SV_OP_READ_RESP carrying the original value */
};

enum sv_flag {
	SV_F_FIRST = 1 << 0,
	SV_F_LAST = 1 << 1,
	SV_F_IMM = 1 << 2,
	SV_F_SOLICITED = 1 << 3,
	SV_F_CMP_SWAP = 1 << 4,  /* SV_OP_ATOMIC: compare-and-swap (else fetch-add) */
};

enum sv_syndrome {
	SV_SYN_ACK = 0,
	SV_SYN_NAK_SEQ = 1,    /* PSN sequence error: resend from psn */
	SV_SYN_NAK_RNR = 2,    /* receiver not ready, rnr_timer in 'timer' */
	SV_SYN_NAK_INV = 3,    /* invalid request */
	SV_SYN_NAK_ACCESS = 4, /* remote access error */
	SV_SYN_NAK_OPER = 5,   /* remote operational error */
};

struct sv_hdr {
	uint32_t magic;
	uint8_t op;
	uint8_t flags;
	uint8_t syndrome;
	uint8_t timer;     /* RNR NAK: IB RNR timer code */
	uint32_t dst_qpn;
	uint32_t src_qpn;
	uint32_t psn;      /* 24 bits used */
	uint32_t imm;      /* immediate data, as posted (big endian value) */
	uint32_t rkey;
	uint32_t dma_len;  /* total message length / READ length requested */
	uint64_t va;       /* remote address of this packet's payload */
	uint32_t offset;   /* payload offset within the message */
	uint16_t src_lid;
	uint16_t payload_len;
};

#endif
