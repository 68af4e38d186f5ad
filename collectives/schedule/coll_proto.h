/*
 * coll_proto.h - wire format of the collectives: the tag layout of their
 * transport messages and the descriptor every rank sends with each
 * collective so that ranks calling different things fail with GX_EMISMATCH.
 *
 * Tags (31 bits; the engine sets bit 31, the transport's XP_TAG_INTERNAL,
 * so they never match user tags):
 *   bits 21..30   low 10 bits of the collective's sequence number
 *   bits 0..20    the message's index inside the collective, computed the
 *                 same way by sender and receiver (round * chunks + chunk)
 * The all-ones value is the descriptor tag. At most COLL_MAX_OUTSTANDING
 * collectives are in flight per communicator, so two live collectives never
 * share a tag.
 */
#ifndef GX_COLL_PROTO_H
#define GX_COLL_PROTO_H

#include <stdint.h>

#define COLL_PROTO_VERSION 1
#define COLL_DESC_MAGIC 0x67784344u /* "gxCD" */

#define COLL_SEQ_BITS 10
#define COLL_MSG_BITS 21
#define COLL_MSG_MAX ((1u << COLL_MSG_BITS) - 2) /* all-ones is the descriptor */
#define COLL_MAX_OUTSTANDING ((1u << COLL_SEQ_BITS) - 1)

#define COLL_TAG(seq, msg)                                                     \
    ((uint32_t)(((seq) & ((1u << COLL_SEQ_BITS) - 1)) << COLL_MSG_BITS) |  \
     (uint32_t)((msg) & ((1u << COLL_MSG_BITS) - 1)))
#define COLL_DESC_TAG 0x7fffffffu

/* Sent by every rank to rank+1 (and received from rank-1) at the start of
 * every collective, in issue order on one FIFO tag: the k-th descriptor a
 * rank receives from its left neighbour is that neighbour's k-th call. A
 * ring suffices: if every neighbour pair agrees, all ranks agree. */
struct coll_desc {
    uint32_t magic;
    uint8_t version;
    uint8_t coll;      /* enum coll_kind */
    uint8_t dtype;     /* enum gx_datatype */
    uint8_t op;        /* enum gx_redop, 0xff when none */
    uint64_t seq;      /* collectives issued on the communicator so far */
    uint64_t count;    /* as passed by the caller */
    int32_t root;      /* -1 when none */
    uint8_t algo;      /* enum coll_algo actually used */
    uint8_t inner_algo; /* hier: the rails' algorithm (enum coll_algo); else 0 */
    uint8_t reserved[2];
};

#endif
