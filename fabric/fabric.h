/*
 * fabric.h - the provider interface: how bytes move between two processes.
 *
 * Owns: the ops table every provider fills (shm, tcp, verbs, dpdk),
 * the static provider registry, and the thin inline wrappers the layers above
 * call (one indirect call per data-path operation, never a NULL test: missing
 * ops are stubs that return GX_EUNSUPPORTED).
 * Must not touch: communicators, ranks' bootstrap, tag matching (those live in
 * collectives/, which sits on top of this header and fabric_mesh.h).
 *
 * Objects (all opaque to callers; the structs below are shown only so the
 * inline wrappers can reach the ops table):
 *   domain    an opened device of one provider; owns memory registrations
 *   cq        a completion queue; polling it also drives the progress of every
 *             endpoint bound to it (software providers have no hardware engine)
 *   mr        a memory registration; gx_fab_mr_pack_rkey() gives the packed
 *             remote key a peer passes to gx_fab_post_write_imm()
 *   listener  accepts connections; its address is an opaque blob (at most
 *             GX_FAB_ADDR_MAX bytes) that a communicator exchanges through its
 *             bootstrap (see fabric_mesh.h)
 *   ep        a reliable connected endpoint to exactly one peer
 *
 * Contract (every provider; the conformance suite in tests/fabric/ checks it):
 *  - reliable, in-order delivery per endpoint; completions of one endpoint's
 *    sends/writes come back in post order, and so do its receives;
 *  - a send or a write-with-immediate consumes exactly one posted receive at the
 *    target, in order. A send lands in that receive's buffer; a write lands at
 *    the remote address and its receive completes with the immediate
 *    (GX_FAB_CQE_IMM) and no data in the buffer. A posted receive is therefore
 *    needed for both, as with RDMA RC;
 *  - a post that fails (return value < 0) yields no completion;
 *  - an errored completion carries a status and the provider's own code and
 *    moves the endpoint to error: every outstanding op completes with that
 *    status (GX_FAB_CQE_FLUSHED) and every later post returns it;
 *  - closing an endpoint completes its outstanding ops with GX_EABORTED and
 *    GX_FAB_CQE_FLUSHED before the close returns (poll them from the cq);
 *  - non-blocking set-up: gx_fab_accept() and gx_fab_ep_establish() return
 *    GX_INPROGRESS ("again") until ready; posting on an endpoint that is not
 *    established returns GX_ESTATE;
 *  - threads: a domain and everything created from it is used by one thread at
 *    a time (the progress thread); the data path takes no lock, and shm does no
 *    malloc or system call per message.
 */
#ifndef GX_FABRIC_FABRIC_H
#define GX_FABRIC_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#include "common/auth.h" /* GX_INPROGRESS */
#include "common/trace.h"  /* GX_TRACE: posts on the provider track */
#include "gx/gx.h"

#define GX_FAB_ADDR_MAX 128 /* bytes of an endpoint/listener address blob */
#define GX_FAB_RKEY_MAX 64  /* bytes of a packed remote key */
#define GX_FAB_NAME_MAX 96

struct pollfd;
struct gx_fab_provider;
struct gx_fab_domain;
struct gx_fab_cq;
struct gx_fab_mr;
struct gx_fab_listener;
struct gx_fab_ep;

enum gx_fab_mem_type {
    GX_FAB_MEM_HOST = 0,
    GX_FAB_MEM_CUDA = 1,
    GX_FAB_MEM_TYPE_COUNT
};

/* Access a registration grants (verbs maps them to IBV_ACCESS_*). */
enum gx_fab_access {
    GX_FAB_ACCESS_LOCAL = 1u << 0,        /* source/target of local posts */
    GX_FAB_ACCESS_REMOTE_WRITE = 1u << 1, /* target of peers' writes */
    GX_FAB_ACCESS_REMOTE_READ = 1u << 2,
    GX_FAB_ACCESS_REMOTE_ATOMIC = 1u << 3, /* target of peers' 8-byte atomics */
};

/* What a domain's endpoints do besides the message contract above (struct
 * gx_fab_domain.caps). One-sided operations need no receive and no code at
 * the target: the provider reaches the target's registered memory itself. */
enum gx_fab_caps {
    GX_FAB_CAP_RMA = 1u << 0,    /* post_write and post_read */
    GX_FAB_CAP_ATOMIC = 1u << 1, /* post_atomic, atomic with the target CPU's own
                                    atomic instructions on the same 8 bytes */
    /* One ordered byte stream per connection, an operation complete once the
     * stream took it (tcp): what is posted after bulk writes waits for all of
     * them to drain at the link's rate, so the transport keeps few ahead
     * (GX_WRITE_WINDOW). */
    GX_FAB_CAP_STREAM = 1u << 2,
};

/* 8-byte atomics of post_atomic. */
enum gx_fab_atomic_op {
    GX_FAB_ATOMIC_FETCH_ADD = 1, /* *target += operand */
    GX_FAB_ATOMIC_CMP_SWAP = 2,  /* if (*target == compare) *target = operand */
};

/** An opaque address blob; exchange `len` bytes of `bytes` verbatim. */
struct gx_fab_addr {
    uint32_t len;
    uint8_t bytes[GX_FAB_ADDR_MAX];
};

/** A packed remote key: the peer copies it and passes it back unchanged. */
struct gx_fab_rkey {
    uint32_t len;
    uint8_t bytes[GX_FAB_RKEY_MAX];
};

struct gx_fab_devinfo {
    char name[64];        /* e.g. "shm", "lo", "mlx5_0:1" */
    char detail[128];     /* human-readable: address, link rate, why limited */
    uint64_t link_bps;    /* nominal bandwidth in bytes/s, 0 if unknown */
};

struct gx_fab_domain_attr {
    size_t size;           /* sizeof(struct gx_fab_domain_attr) */
    const char *job_key;   /* authenticates every connection; NULL = the empty key
                              (callers read GX_JOB_KEY: the communicator, gx-bw,
                              the NCCL plugin) */
    int rank;              /* this process's rank (logs, handshake); -1 unknown */
    const char *device;    /* provider device name; NULL = provider's choice */
    enum gx_topo_path gpu_path; /* this rank's GPU to `device` (GPUDirect verdict) */
    int rail;              /* tcp: entry of GX_SOCKET_IFNAME's list to use (the local
                              rank; gx_sock_pick_rail); -1 = the whole list */
    uint8_t job_id[8];     /* rank 0's random per-job id for the challenges; 0 = unknown */
};
#define GX_FAB_DOMAIN_ATTR_INIT \
    { sizeof(struct gx_fab_domain_attr), NULL, -1, NULL, GX_TOPO_PATH_UNKNOWN, -1, { 0 } }

struct gx_fab_conn_param {
    size_t size;           /* sizeof(struct gx_fab_conn_param) */
    int peer_rank;         /* rank we expect at the other end (-1 unknown) */
    int timeout_ms;        /* set-up deadline; 0 = GX_FAB_CONNECT_TIMEOUT */
};
#define GX_FAB_CONN_PARAM_INIT { sizeof(struct gx_fab_conn_param), -1, 0 }

enum gx_fab_op {
    GX_FAB_OP_SEND = 1,
    GX_FAB_OP_WRITE_IMM = 2,
    GX_FAB_OP_RECV = 3,
    GX_FAB_OP_WRITE = 4,  /* one-sided (GX_FAB_CAP_RMA) */
    GX_FAB_OP_READ = 5,
    GX_FAB_OP_ATOMIC = 6, /* GX_FAB_CAP_ATOMIC */
};

enum gx_fab_cqe_flags {
    GX_FAB_CQE_IMM = 1u << 0,     /* RECV consumed by a write: `imm` is valid */
    GX_FAB_CQE_FLUSHED = 1u << 1, /* not executed: endpoint in error or closed */
};

/** One completion. Like libfabric's cq entry and error entry in one. */
struct gx_fab_cqe {
    uint64_t context;      /* the caller's context from the post */
    struct gx_fab_ep *ep;  /* endpoint; may be closed already: compare only */
    int status;            /* GX_OK or a GX_E* code */
    int prov_err;          /* provider's own code (errno, wc status, ...) */
    uint8_t op;            /* enum gx_fab_op */
    uint8_t flags;         /* enum gx_fab_cqe_flags */
    uint32_t imm;          /* RECV with GX_FAB_CQE_IMM */
    uint64_t tag;          /* RECV of a send: the sender's tag */
    size_t len;            /* RECV: bytes received (or written by the peer) */
};

/* ---------------------------------------------------------------------------
 * The ops table. A provider fills what it implements; the registry fills the
 * rest with stubs returning GX_EUNSUPPORTED.
 * ------------------------------------------------------------------------ */
struct gx_fab_ops {
    int (*probe)(struct gx_fab_devinfo *devs, int max, int *count);
    int (*domain_open)(const struct gx_fab_provider *prov, const struct gx_fab_domain_attr *attr,
                       struct gx_fab_domain **out);
    void (*domain_close)(struct gx_fab_domain *dom);

    int (*cq_open)(struct gx_fab_domain *dom, struct gx_fab_cq **out);
    void (*cq_close)(struct gx_fab_cq *cq);
    /* Drive progress, then return up to `max` completions (>= 0), or < 0. */
    int (*cq_poll)(struct gx_fab_cq *cq, struct gx_fab_cqe *out, int max);

    int (*mr_reg)(struct gx_fab_domain *dom, void *addr, size_t len, enum gx_fab_mem_type type,
                  unsigned access, struct gx_fab_mr **out);
    int (*mr_dereg)(struct gx_fab_mr *mr);
    int (*mr_pack_rkey)(const struct gx_fab_mr *mr, struct gx_fab_rkey *out);

    int (*listen)(struct gx_fab_domain *dom, struct gx_fab_cq *cq, struct gx_fab_listener **out,
                  struct gx_fab_addr *addr_out);
    int (*accept)(struct gx_fab_listener *lst, struct gx_fab_ep **out);
    void (*listener_close)(struct gx_fab_listener *lst);
    int (*connect)(struct gx_fab_domain *dom, struct gx_fab_cq *cq, const struct gx_fab_addr *peer,
                   const struct gx_fab_conn_param *param, struct gx_fab_ep **out);
    int (*ep_establish)(struct gx_fab_ep *ep);
    void (*ep_close)(struct gx_fab_ep *ep);

    int (*post_send)(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                     uint64_t tag, uint64_t context);
    int (*post_recv)(struct gx_fab_ep *ep, void *buf, size_t len, struct gx_fab_mr *mr,
                     uint64_t context);
    int (*post_write_imm)(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                          uint64_t raddr, const struct gx_fab_rkey *rkey, uint32_t imm,
                          uint64_t context);
    /* One-sided (domain caps): no receive consumed, nothing at the target. */
    int (*post_write)(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                      uint64_t raddr, const struct gx_fab_rkey *rkey, uint64_t context);
    int (*post_read)(struct gx_fab_ep *ep, void *buf, size_t len, struct gx_fab_mr *mr,
                     uint64_t raddr, const struct gx_fab_rkey *rkey, uint64_t context);
    int (*post_atomic)(struct gx_fab_ep *ep, enum gx_fab_atomic_op op, uint64_t operand,
                       uint64_t compare, uint64_t *result, uint64_t raddr,
                       const struct gx_fab_rkey *rkey, uint64_t context);

    /* Sleeping (waits that yield; gx_fab_cq_wait_fds below). */
    int (*cq_wait_fds)(struct gx_fab_cq *cq, struct pollfd *fds, int max, int *nfds);
    void (*cq_wait_done)(struct gx_fab_cq *cq, const struct pollfd *fds, int nfds);
};

struct gx_fab_provider {
    const char *name;         /* "shm", "tcp", "verbs", "dpdk" */
    const char *description;
    struct gx_fab_ops ops;    /* as written by the provider (may hold NULLs) */
};

/* Base objects. Providers embed them first in their own structs; callers
 * treat them as opaque. */
struct gx_fab_domain {
    struct gx_fab_ops ops;    /* by value, stubs filled: one indirect call */
    const struct gx_fab_provider *prov;
    int rank;
    /* Set by a provider whose registrations pin pages and cannot see memory
     * being freed (verbs without ODP): registration caches on this domain
     * keep an entry only while an operation holds it (rcache.h). */
    uint8_t rcache_per_op;
    uint8_t caps;             /* enum gx_fab_caps: set by the provider at open */
};

struct gx_fab_cq {
    struct gx_fab_domain *dom;
};

struct gx_fab_mr {
    struct gx_fab_domain *dom;
    void *addr;
    size_t len;
    enum gx_fab_mem_type type;
    unsigned access;
};

struct gx_fab_listener {
    struct gx_fab_domain *dom;
    struct gx_fab_cq *cq;
};

struct gx_fab_ep {
    const struct gx_fab_ops *ops;
    struct gx_fab_domain *dom;
    struct gx_fab_cq *cq;
    int peer_rank;
    char name[GX_FAB_NAME_MAX]; /* "tcp rank 3 (10.0.0.2:41234)" for logs */
};

/* ---------------------------------------------------------------------------
 * Registry.
 * ------------------------------------------------------------------------ */

/** The i-th built provider (with stubs filled), or NULL past the end. */
const struct gx_fab_provider *gx_fab_provider_at(size_t i);
/** A provider by name, or NULL (and a logged error naming the built ones). */
const struct gx_fab_provider *gx_fab_provider_find(const char *name);
/** Comma list of built provider names, e.g. "shm,tcp". */
const char *gx_fab_provider_names(void);

int gx_fab_probe(const struct gx_fab_provider *prov, struct gx_fab_devinfo *devs, int max,
                 int *count);
int gx_fab_domain_open(const struct gx_fab_provider *prov, const struct gx_fab_domain_attr *attr,
                       struct gx_fab_domain **out);
void gx_fab_domain_close(struct gx_fab_domain *dom);

/** Outstanding-op capacity of each endpoint queue (GX_FAB_QUEUE_DEPTH). */
int gx_fab_queue_depth(void);
/** Connection set-up deadline in ms (GX_FAB_CONNECT_TIMEOUT). */
int gx_fab_connect_timeout_ms(void);

/* ---------------------------------------------------------------------------
 * Inline wrappers: one indirect call each.
 * ------------------------------------------------------------------------ */
static inline int gx_fab_cq_open(struct gx_fab_domain *dom, struct gx_fab_cq **out)
{
    return dom->ops.cq_open(dom, out);
}
static inline void gx_fab_cq_close(struct gx_fab_cq *cq)
{
    if (cq)
        cq->dom->ops.cq_close(cq);
}
static inline int gx_fab_cq_poll(struct gx_fab_cq *cq, struct gx_fab_cqe *out, int max)
{
    return cq->dom->ops.cq_poll(cq, out, max);
}
static inline int gx_fab_mr_reg(struct gx_fab_domain *dom, void *addr, size_t len,
                                enum gx_fab_mem_type type, unsigned access,
                                struct gx_fab_mr **out)
{
    return dom->ops.mr_reg(dom, addr, len, type, access, out);
}
static inline int gx_fab_mr_dereg(struct gx_fab_mr *mr)
{
    return mr ? mr->dom->ops.mr_dereg(mr) : GX_OK;
}
static inline int gx_fab_mr_pack_rkey(const struct gx_fab_mr *mr, struct gx_fab_rkey *out)
{
    return mr->dom->ops.mr_pack_rkey(mr, out);
}
static inline int gx_fab_listen(struct gx_fab_domain *dom, struct gx_fab_cq *cq,
                                struct gx_fab_listener **out, struct gx_fab_addr *addr_out)
{
    return dom->ops.listen(dom, cq, out, addr_out);
}
/** GX_OK with a new endpoint (its peer_rank says who), GX_INPROGRESS when
 *  none is ready yet, or an error of the listener itself. */
static inline int gx_fab_accept(struct gx_fab_listener *lst, struct gx_fab_ep **out)
{
    return lst->dom->ops.accept(lst, out);
}
static inline void gx_fab_listener_close(struct gx_fab_listener *lst)
{
    if (lst)
        lst->dom->ops.listener_close(lst);
}
/** Start connecting; then call gx_fab_ep_establish() until it is not
 *  GX_INPROGRESS. On failure of establish, close the endpoint. */
static inline int gx_fab_connect(struct gx_fab_domain *dom, struct gx_fab_cq *cq,
                                 const struct gx_fab_addr *peer,
                                 const struct gx_fab_conn_param *param, struct gx_fab_ep **out)
{
    return dom->ops.connect(dom, cq, peer, param, out);
}
static inline int gx_fab_ep_establish(struct gx_fab_ep *ep)
{
    return ep->ops->ep_establish(ep);
}
static inline void gx_fab_ep_close(struct gx_fab_ep *ep)
{
    if (ep)
        ep->ops->ep_close(ep);
}
static inline const char *gx_fab_ep_name(const struct gx_fab_ep *ep)
{
    return ep->name;
}
/* GX_TRACE: a post on the provider track (common/trace.h). */
static inline void gx_fab_trace_post(const struct gx_fab_ep *ep, const char *what, size_t len)
{
    struct gx_trace_rec r = { .ts = gx_trace_now(), .name = what, .cat = "provider",
                              .key = { "peer", "bytes" },
                              .val = { ep->peer_rank, (int64_t)len },
                              .skey = "provider", .sval = ep->dom->prov->name,
                              .lane = GX_LANE_WIRE, .kind = GX_TR_INSTANT };
    gx_trace_emit(&r);
}

/** Send `len` bytes with a 64-bit tag; lands in the peer's next receive. */
static inline int gx_fab_post_send(struct gx_fab_ep *ep, const void *buf, size_t len,
                                   struct gx_fab_mr *mr, uint64_t tag, uint64_t context)
{
    if (gx_trace_on())
        gx_fab_trace_post(ep, "post send", len);
    return ep->ops->post_send(ep, buf, len, mr, tag, context);
}
static inline int gx_fab_post_recv(struct gx_fab_ep *ep, void *buf, size_t len,
                                   struct gx_fab_mr *mr, uint64_t context)
{
    if (gx_trace_on())
        gx_fab_trace_post(ep, "post recv", len);
    return ep->ops->post_recv(ep, buf, len, mr, context);
}
/** RDMA write of `len` bytes to the peer's `raddr` (inside the registration
 *  `rkey` describes), then deliver `imm` through the peer's next receive. */
static inline int gx_fab_post_write_imm(struct gx_fab_ep *ep, const void *buf, size_t len,
                                        struct gx_fab_mr *mr, uint64_t raddr,
                                        const struct gx_fab_rkey *rkey, uint32_t imm,
                                        uint64_t context)
{
    if (gx_trace_on())
        gx_fab_trace_post(ep, "post write_imm", len);
    return ep->ops->post_write_imm(ep, buf, len, mr, raddr, rkey, imm, context);
}

/** One-sided RDMA write of `len` bytes to the peer's `raddr` (inside the
 *  registration `rkey` describes, which needs GX_FAB_ACCESS_REMOTE_WRITE).
 *  Consumes no receive and runs no code at the target; its completion means
 *  the bytes are in the target's memory. Completes in post order with the
 *  endpoint's other operations, but is not ordered with their effect at the
 *  target. GX_EUNSUPPORTED without GX_FAB_CAP_RMA. */
static inline int gx_fab_post_write(struct gx_fab_ep *ep, const void *buf, size_t len,
                                    struct gx_fab_mr *mr, uint64_t raddr,
                                    const struct gx_fab_rkey *rkey, uint64_t context)
{
    return ep->ops->post_write(ep, buf, len, mr, raddr, rkey, context);
}
/** One-sided read of `len` bytes at the peer's `raddr` into `buf` (remote
 *  read access needed); done when its completion is reported. */
static inline int gx_fab_post_read(struct gx_fab_ep *ep, void *buf, size_t len,
                                   struct gx_fab_mr *mr, uint64_t raddr,
                                   const struct gx_fab_rkey *rkey, uint64_t context)
{
    return ep->ops->post_read(ep, buf, len, mr, raddr, rkey, context);
}
/** One-sided 8-byte atomic at the peer's `raddr` (8-byte aligned, remote
 *  atomic access): the value before the operation lands in `*result`
 *  before the completion is reported. GX_EUNSUPPORTED without
 *  GX_FAB_CAP_ATOMIC. */
static inline int gx_fab_post_atomic(struct gx_fab_ep *ep, enum gx_fab_atomic_op op,
                                     uint64_t operand, uint64_t compare, uint64_t *result,
                                     uint64_t raddr, const struct gx_fab_rkey *rkey,
                                     uint64_t context)
{
    return ep->ops->post_atomic(ep, op, operand, compare, result, raddr, rkey, context);
}

/**
 * Sleeping until a cq may have work, for a waiting rank that has spun long
 * enough (GX_SPIN_US). Returns GX_OK with `*nfds` pollfds filled that
 * become ready when the cq may have work (its endpoints' sockets, the shm
 * doorbell, a verbs completion channel, listeners and half-open connections
 * bound to it); GX_INPROGRESS when work is pending already (a poll of the cq
 * would find a completion: poll it, do not sleep); GX_ENOMEM when more than
 * `max` fds would be needed; GX_EUNSUPPORTED when the provider cannot sleep
 * (dpdk polls a NIC in user space; verbs without completion channels, or
 * while a send waits for its clear-to-send, which lands in memory with no
 * event). On the last two, keep polling (with naps). The provider looks at its endpoints once more
 * before it says sleep: GX_OK promises that nothing is pending that no fd
 * announces (tests/fabric: sleep_wakes). After a GX_OK, and the poll() on
 * the fds, whatever woke it, call gx_fab_cq_wait_done() with the fds this
 * cq filled and their revents: a provider reads what woke it only there.
 */
static inline int gx_fab_cq_wait_fds(struct gx_fab_cq *cq, struct pollfd *fds, int max,
                                     int *nfds)
{
    *nfds = 0;
    return cq->dom->ops.cq_wait_fds(cq, fds, max, nfds);
}
static inline void gx_fab_cq_wait_done(struct gx_fab_cq *cq, const struct pollfd *fds, int nfds)
{
    cq->dom->ops.cq_wait_done(cq, fds, nfds);
}

/**
 * Wait for at least one completion until `deadline` (gx_now_ns() value;
 * UINT64_MAX = never): spins a bounded number of polls, then yields, then
 * sleeps with a growing back-off (capped at GX_FAB_POLL_SLEEP_MAX_US) so many
 * ranks on few cores still progress. Returns the count (> 0), GX_ETIMEOUT, or
 * an error from the provider.
 */
int gx_fab_cq_wait(struct gx_fab_cq *cq, struct gx_fab_cqe *out, int max, uint64_t deadline);

/** Name of an op for log lines ("send", "write_imm", "recv"). */
const char *gx_fab_op_name(int op);

#endif
