/*
 * shm.h - internal objects of the shm provider (fabric/shm/), for ranks on
 * one node.
 *
 * A connection is one memfd segment made by the connector and handed to the
 * acceptor over an authenticated unix socket (SCM_RIGHTS). It holds two
 * single-producer/single-consumer rings of fixed slots, one per direction,
 * with head (producer) and tail (consumer) on separate cache lines. Small
 * payloads travel inline in the slot; larger ones are copied once, by the
 * receiver, straight from the sender's buffer into the receive buffer or the
 * registered target range with process_vm_readv (cross-memory attach). The
 * receiver checks every remote key against its own registration table before
 * copying. The consumer advances tail only after the copy, so the sender's op
 * completes when tail passes its slot, with the status the consumer left in
 * the slot. The unix socket stays open to notice a peer that died.
 *
 * Files: shm_provider.c (domain, cq, registrations, probe, connection
 * set-up), shm_data.c (posts, ring traffic, errors and flush).
 */
#ifndef GX_FABRIC_SHM_SHM_H
#define GX_FABRIC_SHM_SHM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/auth.h"
#include "fabric/fabric_provider.h"

#define SHM_SEG_MAGIC 0x53485847u  /* "GXHS" */
#define SHM_ADDR_MAGIC 0x41485847u /* "GXHA" */
#define SHM_VERSION 3 /* 3: the handover carries the two doorbell eventfds */
#define SHM_NSLOTS 256u
#define SHM_SLOT_SIZE 4096u
#define SHM_CACHELINE 64

enum shm_slot_op { SHM_OP_SEND = 1, SHM_OP_WRITE_IMM = 2 };

struct shm_slot {
    uint8_t op;
    uint8_t inl;          /* payload is in data[] */
    uint16_t reserved;
    uint32_t imm;
    uint64_t tag;
    uint64_t len;
    uint64_t src;         /* sender's address of the payload when not inline */
    uint64_t raddr;
    uint32_t rkey_index;
    int32_t status;       /* written by the consumer before it advances tail */
    uint64_t rkey_cookie;
    int32_t prov_err;
    uint32_t reserved2;
    uint8_t data[];
};
_Static_assert(sizeof(struct shm_slot) == 64, "shm slot header layout");
#define SHM_INLINE_MAX (SHM_SLOT_SIZE - sizeof(struct shm_slot))

struct shm_ring_ctl {
    _Alignas(SHM_CACHELINE) uint64_t head; /* producer's: next slot to fill */
    _Alignas(SHM_CACHELINE) uint64_t tail; /* consumer's: next slot to consume */
};

struct shm_seg {
    uint32_t magic;
    uint32_t version;
    uint32_t nslots;
    uint32_t slot_size;
    _Alignas(SHM_CACHELINE) struct shm_ring_ctl ctl[2]; /* [0] connector->acceptor */
    /* Doorbell: sleeping[i] is set by the side that consumes ring i while it
     * sleeps in poll(); the other side, after it moved a head or a tail,
     * clears it and rings that side's eventfd (bell i, made by the connector
     * and handed over with the segment) to wake it. */
    _Alignas(SHM_CACHELINE) uint32_t sleeping[2];
    /* then slots of ring 0, slots of ring 1 */
};

static inline size_t shm_seg_size(void)
{
    return sizeof(struct shm_seg) + 2ull * SHM_NSLOTS * SHM_SLOT_SIZE;
}
static inline struct shm_slot *shm_slot_at(struct shm_seg *seg, int ring, uint64_t seq)
{
    char *base = (char *)seg + sizeof(*seg) + (size_t)ring * SHM_NSLOTS * SHM_SLOT_SIZE;
    return (struct shm_slot *)(base + (seq % SHM_NSLOTS) * SHM_SLOT_SIZE);
}

/* Listener address blob. */
struct shm_addr {
    uint32_t magic;
    uint32_t version;
    int32_t pid;
    uint32_t reserved;
    uint8_t boot_id[16]; /* same kernel instance = same node */
    char name[64];       /* abstract unix socket name (without the leading NUL) */
};

/* Connector -> acceptor after the job-key handshake, with the memfd. */
struct shm_handover {
    uint32_t magic;
    uint32_t version;
    int32_t pid;
    uint32_t nslots;
    uint32_t slot_size;
    uint32_t reserved;
    uint64_t seg_size;
};

struct shm_domain {
    struct gx_fab_domain base;
    struct gx_auth_key key;
    struct gx_fab_mrtab mrtab;
    uint8_t boot_id[16];
};

#define SHM_CQ_LISTENERS 4
struct shm_cq {
    struct gx_fab_swcq sw;
    struct shm_listener *lst[SHM_CQ_LISTENERS]; /* listeners bound to it (their fds wake a sleep) */
};

struct shm_txop {
    uint64_t context;
    uint8_t op;
    uint8_t inl;
    uint32_t imm;
    uint64_t tag;
    const void *buf;
    uint64_t len;
    uint64_t raddr;
    uint32_t rkey_index;
    uint64_t rkey_cookie;
    uint64_t seq; /* ring slot sequence once pushed */
    bool onesided; /* post_write / post_read: done at post, only its completion waits */
    int32_t status;
};

struct shm_rx {
    uint64_t context;
    char *buf;
    size_t len;
};

enum shm_ep_state { SHM_CONNECTING, SHM_CHALLENGE, SHM_ESTABLISHED, SHM_ERROR };

struct shm_ep {
    struct gx_fab_ep base;
    struct shm_domain *dom;
    struct shm_cq *cq;
    enum shm_ep_state state;
    int error;
    int sock;               /* unix socket: set-up, then liveness */
    struct gx_auth_client auth; /* connector: the handshake so far */
    bool auth_started;
    pid_t peer_pid;
    struct shm_seg *seg;
    int out_ring, in_ring;  /* indices into seg->ctl */
    uint64_t deadline;
    struct shm_addr peer_addr;
    int memfd;              /* connector: sent at establish, then closed */
    int bell[2];            /* eventfds: bell[i] wakes the consumer of ring i; we
                               sleep on bell[in_ring] and ring bell[out_ring] */
    bool peer_gone;
    uint32_t depth;
    /* sends/writes: posted [tx_done, tx_post), pushed into the ring up to tx_pushed */
    struct shm_txop *txops;
    uint64_t tx_post, tx_pushed, tx_done;
    uint64_t out_head;      /* local copy of our producer head */
    /* receives */
    struct shm_rx *rx;
    uint64_t rx_post, rx_done;
    uint64_t in_tail;       /* local copy of our consumer tail */
    uint32_t live_tick;
    uint64_t live_next_ns;
};

struct shm_halfopen {
    int fd;
    bool authed;
    struct gx_auth_server auth;
    uint64_t deadline;
};

struct shm_listener {
    struct gx_fab_listener base;
    struct shm_domain *dom;
    int fd;
    struct shm_halfopen *half;
    int nhalf, half_cap;
};

/* shm_data.c */
int shm_cq_wait_fds(struct gx_fab_cq *cq, struct pollfd *fds, int max, int *nfds);
void shm_cq_wait_done(struct gx_fab_cq *cq, const struct pollfd *fds, int nfds);
int shm_ep_alloc(struct shm_domain *dom, struct shm_cq *cq, struct shm_ep **out);
void shm_ep_free(struct shm_ep *ep);
void shm_ep_progress(struct gx_fab_ep *ep);
void shm_ep_close(struct gx_fab_ep *ep);
int shm_post_send(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                  uint64_t tag, uint64_t context);
int shm_post_recv(struct gx_fab_ep *ep, void *buf, size_t len, struct gx_fab_mr *mr,
                  uint64_t context);
int shm_post_write_imm(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                       uint64_t raddr, const struct gx_fab_rkey *rkey, uint32_t imm,
                       uint64_t context);
/* One-sided (GX_FAB_CAP_RMA): the origin copies straight into or out of the
 * target's registered range with process_vm_writev/readv at post time; the
 * target runs nothing. The range is checked against the packed key, which
 * the target made for exactly its registration. */
int shm_post_write(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                   uint64_t raddr, const struct gx_fab_rkey *rkey, uint64_t context);
int shm_post_read(struct gx_fab_ep *ep, void *buf, size_t len, struct gx_fab_mr *mr,
                  uint64_t raddr, const struct gx_fab_rkey *rkey, uint64_t context);

/* shm_conn.c */
int shm_listen(struct gx_fab_domain *dom, struct gx_fab_cq *cq, struct gx_fab_listener **out,
               struct gx_fab_addr *addr_out);
int shm_accept(struct gx_fab_listener *lst, struct gx_fab_ep **out);
void shm_listener_close(struct gx_fab_listener *lst);
int shm_connect(struct gx_fab_domain *dom, struct gx_fab_cq *cq, const struct gx_fab_addr *peer,
                const struct gx_fab_conn_param *param, struct gx_fab_ep **out);
int shm_ep_establish(struct gx_fab_ep *ep);

#endif
