/*
 * verbs.h - internal objects of the verbs provider (fabric/verbs/).
 *
 * Files, one object each:
 *   verbs_loader.c    libibverbs opened with dlopen, symbols by version
 *   verbs_device.c    devices, ports, link rate, GID choice, GX_IB_* settings
 *   verbs_provider.c  domain, completion queue, probe, the ops table
 *   verbs_mr.c        registrations with the narrowest access, packed keys
 *   verbs_qp.c        RC QPs: create, INIT->RTR->RTS, receive-WQE pool
 *   verbs_cm.c        listener / connect / accept over an authenticated TCP
 *                     side channel that stays open for liveness
 *   verbs_data.c      posts, receiver-driven flow control, completions
 *   verbs_ep.c        an endpoint's memory (rings, slots) and its close
 *   verbs_errors.c    work-completion and async errors -> gx status + hint
 *   verbs_rdmacm*.c   optional librdmacm connection path (verbs_rdmacm.h)
 *   verbs_gdr.c       the GPUDirect verdict of a domain (with the topology's
 *                     GPU-to-NIC path class), GX_IB_GDR_FLUSH
 *   verbs_flush.c     the flush READ after GPU-destined receives
 *
 * Must not touch: anything above the fabric layer. Uses topology's
 * GX_IB_HCA filter and the gpudirect leaf service (both below fabric).
 */
#ifndef GX_FABRIC_VERBS_VERBS_H
#define GX_FABRIC_VERBS_VERBS_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/sock.h"
#include "fabric/fabric_provider.h"
#include "fabric/rcache.h"
#include "fabric/verbs/verbs_proto.h"

/* ---------------------------------------------------------------------------
 * verbs_loader.c: the libibverbs entry points gx uses, resolved with
 * dlvsym() against rdma-core's symbol versions. post/poll go through the
 * context's ops (verbs.h inlines), so they need no symbol.
 * ------------------------------------------------------------------------ */
struct gx_verbs_api {
    struct ibv_device **(*get_device_list)(int *num);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *dev);
    struct ibv_context *(*open_device)(struct ibv_device *dev);
    int (*close_device)(struct ibv_context *ctx);
    int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
    int (*query_port)(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr);
    int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
    int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port, uint32_t index,
                        struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size);
    ssize_t (*query_gid_table)(struct ibv_context *ctx, struct ibv_gid_entry *entries,
                               size_t max, uint32_t flags, size_t entry_size);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
    struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t len,
                                    uint64_t iova, int fd, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
                                struct ibv_comp_channel *channel, int comp_vector);
    int (*resize_cq)(struct ibv_cq *cq, int cqe);
    int (*destroy_cq)(struct ibv_cq *cq);
    struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
    int (*destroy_qp)(struct ibv_qp *qp);
    int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *event);
    void (*ack_async_event)(struct ibv_async_event *event);
    const char *(*wc_status_str)(enum ibv_wc_status status);
    const char *(*event_type_str)(enum ibv_event_type type);
    /* completion channels (sleeping waits, verbs_wait.c); optional */
    struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
    int (*destroy_comp_channel)(struct ibv_comp_channel *channel);
    int (*get_cq_event)(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context);
    void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
};

/** Load the library once (GX_IBVERBS_LIB or libibverbs.so.1). GX_OK, or
 *  GX_EUNSUPPORTED with the reason logged once at info level and kept for
 *  gx_verbs_unavailable_reason(). */
int gx_verbs_load(const struct gx_verbs_api **out);
const char *gx_verbs_unavailable_reason(void);
/** The loaded table, writable: tests interpose on single entries (e.g. to
 *  record every registration's access flags). NULL before a load. */
struct gx_verbs_api *gx_verbs_api_mutable(void);
/** ibv_get_device_list with "no devices" (NULL with ENOSYS/ENODEV, or an
 *  empty list) turned into GX_OK and *n = 0, reported once at info level. */
int gx_verbs_device_list(const struct gx_verbs_api *api, struct ibv_device ***list, int *n);
/** ibv_query_port through the context's extended op when it has one. */
int gx_verbs_query_port(const struct gx_verbs_api *api, struct ibv_context *ctx, uint8_t port,
                        struct ibv_port_attr *attr);

/* ---------------------------------------------------------------------------
 * verbs_device.c
 * ------------------------------------------------------------------------ */
struct gx_verbs_settings {
    int gid_index;         /* -1: choose */
    int tc, sl, timeout, retry_cnt;
    int nqps;
    size_t stripe_min;
    int cm_rdmacm;         /* GX_IB_CM=rdmacm */
};
int gx_verbs_settings_read(struct gx_verbs_settings *s);

struct gx_verbs_port {
    char dev[64];
    int port;
    struct ibv_port_attr attr;
    double gbps;           /* nominal data rate, 0 if unknown */
    int gid_index;         /* -1 on IB without a usable GID (LID routing) */
    union ibv_gid gid;
    char gid_why[96];      /* how the GID was chosen */
};

/** Link rate in Gb/s from active_width/active_speed (0 when unknown) and a
 *  "4x EDR" style label. */
double gx_verbs_port_gbps(const struct ibv_port_attr *a, char *label, size_t label_len);
/** Choose the GID of `port` (GX_IB_GID_INDEX, else RoCE v2 IPv4-mapped
 *  matching `want_ip4` (network order, 0 = any), else the first usable). */
int gx_verbs_pick_gid(const struct gx_verbs_api *api, struct ibv_context *ctx, int port,
                      const struct ibv_port_attr *pa, int forced_index, uint32_t want_ip4,
                      struct gx_verbs_port *out);
/** Open the device/port `want` ("mlx5_0:1", "mlx5_0" or NULL for the first
 *  ACTIVE port passing GX_IB_HCA). On success the context is open. */
int gx_verbs_open_port(const struct gx_verbs_api *api, const char *want,
                       const struct gx_verbs_settings *s, uint32_t want_ip4,
                       struct ibv_context **ctx_out, struct gx_verbs_port *port_out);
int gx_verbs_probe(struct gx_fab_devinfo *devs, int max, int *count);
/** The gx-info hook: one line per RDMA port saying whether GPUDirect RDMA
 *  is usable there and exactly why not (driver, dmabuf, peermem, level). */
int gx_verbs_gdr_report(char *out, size_t len);
/** Flush READs completed in this process so far (tests: the GPUDirect path
 *  of the collectives flushed its device-destined receives). */
unsigned long long gx_verbs_flush_count(void);

/* ---------------------------------------------------------------------------
 * domain, cq (verbs_provider.c)
 * ------------------------------------------------------------------------ */
struct verbs_qp;

struct verbs_domain {
    struct gx_fab_domain base;
    const struct gx_verbs_api *api;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_device_attr dattr;
    struct gx_verbs_port port;
    struct gx_verbs_settings set;
    struct gx_auth_key key;
    struct gx_sockaddr local;
    char ifname[64];
    struct gx_fab_rcache *rc_src;  /* send / write sources: local read only */
    struct gx_fab_rcache *rc_dst;  /* receive targets: local + remote write */
    struct verbs_qp **qptab;       /* completion wr_id -> QP, by slot */
    uint32_t *qpgen;
    uint32_t nqptab;
    uint32_t max_inline;
    int qp_access;                /* remote access of the data QPs: REMOTE_WRITE, widened to
                                     READ (and ATOMIC) once a window registers (verbs_qp.c) */
    struct { uint32_t qpn; int type; } async_seen[16]; /* recent QP async events */
    unsigned async_next;
    int dmabuf;                    /* 1 supported, 0 not, -1 not probed */
    struct verbs_rdmacm_dom *rdmacm; /* GX_IB_CM=rdmacm: event channel, cm's context */
    enum gx_topo_path gpu_path;    /* this rank's GPU to this port (attr->gpu_path) */
    int gdr_method;                /* enum gx_gdr_method, -1 not decided yet */
    char gdr_why[320];             /* the verdict, for errors */
    int flush_mode;                /* enum verbs_flush_mode (GX_IB_GDR_FLUSH) */
};

/* One ibv_cq of a gx cq. A gx cq grows by ibv_resize_cq; on a device
 * without it (or past its max_cqe) it adds another ibv_cq for the next
 * endpoints, so existing QPs never move. */
struct verbs_hwcq {
    struct ibv_cq *cq;
    int cap;                       /* ibv cq entries */
    int reserved;                  /* entries promised to endpoints' QPs */
    bool armed;                    /* ibv_req_notify_cq'd, its event not taken yet */
};

#define VERBS_CQ_HW_MAX 64
#define VERBS_CQ_LISTENERS 4

struct verbs_cq {
    struct gx_fab_swcq sw;         /* output ring + bound endpoints */
    struct verbs_domain *dom;
    struct verbs_hwcq hw[VERBS_CQ_HW_MAX];
    int nhw;
    bool no_resize;                /* ibv_resize_cq missing or EOPNOTSUPP */
    uint64_t next_liveness_ns;
    struct ibv_comp_channel *ch;   /* every ibv_cq's events (verbs_wait.c); NULL: no sleeping */
    struct gx_fab_listener *lst[VERBS_CQ_LISTENERS]; /* bound to it: their fds wake a sleep */
};

/* The ibv_cq for an endpoint that may need `need` entries at once (growing
 * one or adding one); reserves them. verbs_provider.c. */
int verbs_cq_reserve(struct verbs_cq *cq, int need, struct verbs_hwcq **out);
/* The entries an endpoint's QPs (and its flush QP) can complete at once:
 * the sum of their queue depths, computed before the QPs exist. */
uint32_t verbs_ep_cq_need_max(const struct verbs_domain *dom, int nqps, uint32_t depth);

/* ---------------------------------------------------------------------------
 * QP (verbs_qp.c)
 * ------------------------------------------------------------------------ */
enum verbs_wr_type {
    WR_CTRL = 1,     /* cts write, fin write, payload write */
    WR_SIGNALED = 2, /* flag: this WR was signaled (a sig record exists) */
    WR_RECV = 4,
    WR_FLUSH = 8,    /* a flush READ on the endpoint's loopback QP */
};

struct verbs_sig {
    uint64_t mark;   /* wr_posted after this WR */
    uint64_t op;     /* tx op sequence, or UINT64_MAX for control */
};

struct verbs_ep;

struct verbs_qp {
    struct ibv_qp *qp;
    struct verbs_ep *ep;
    int index;                 /* within its endpoint */
    uint32_t slot, gen;        /* domain table: wr_id = gen<<32 | slot<<4 | type */
    uint32_t psn;
    uint32_t sq_depth;
    uint64_t wr_posted, wr_retired, last_signaled;
    struct verbs_sig *sig;     /* ring of sq_depth */
    uint64_t sig_head, sig_tail;
    uint32_t rq_depth;
    uint32_t rq_out;           /* receive WQEs posted and not completed */
    bool in_error;
    bool rts;                  /* connected (RTS): its access can be widened in place */
};

static inline uint64_t verbs_wr_id(const struct verbs_qp *q, unsigned type)
{
    return (uint64_t)q->gen << 32 | (uint64_t)q->slot << 4 | type;
}

int verbs_qp_create(struct verbs_ep *ep, struct verbs_qp *q, int index);
int verbs_qp_to_rtr_rts(struct verbs_ep *ep, struct verbs_qp *q, const struct gx_verbs_conn *peer,
                        int index);
void verbs_qp_to_error(struct verbs_ep *ep, struct verbs_qp *q);
void verbs_qp_destroy(struct verbs_ep *ep, struct verbs_qp *q);
/** Post receive WQEs until rq_out == rq_depth (batched, one doorbell). */
int verbs_qp_fill_rq(struct verbs_ep *ep, struct verbs_qp *q);
struct verbs_qp *verbs_qp_lookup(struct verbs_domain *dom, uint64_t wr_id);
/** Give `q` a slot in the domain's wr_id table (verbs_qp_create does). */
int verbs_qp_table_add(struct verbs_domain *dom, struct verbs_qp *q);

/* ---------------------------------------------------------------------------
 * endpoint (verbs_cm.c, verbs_data.c)
 * ------------------------------------------------------------------------ */
struct verbs_txop {
    uint64_t context;
    const char *buf;
    uint64_t len;
    uint64_t tag;
    uint64_t raddr;
    uint32_t rkey, lkey;
    uint32_t imm;
    uint8_t op;         /* enum gx_fab_op */
    uint8_t pending;    /* signaled WRs still to complete */
    bool trunc;         /* sent as a TRUNC fin: fails when it completes */
    uint64_t peer_len;  /* TRUNC: the receive the peer posted */
    struct gx_fab_rcache_entry *rce;
    bool flush_target;  /* write_imm: the target's owner flushes after it */
    bool device;        /* source is device memory: never IBV_SEND_INLINE (the CPU would copy it) */
    bool rce_dst;       /* rce is of rc_dst (a READ's destination), not rc_src */
    uint64_t msg_seq;   /* send / write_imm: its number among the endpoint's messages,
                           which pairs it with the peer's receive of that number */
    uint8_t atomic_op;  /* GX_FAB_OP_ATOMIC: enum gx_fab_atomic_op */
    uint64_t operand, compare;
    uint64_t *result;   /* GX_FAB_OP_ATOMIC: where the old value goes at completion */
};

enum verbs_flush_state { FLUSH_NONE = 0, FLUSH_POSTED = 1, FLUSH_DONE = 2 };

struct verbs_rxslot {
    uint64_t context;
    char *buf;
    uint64_t len;
    struct gx_fab_rcache_entry *rce;
    uint32_t rkey;
    uint8_t parts;      /* stripes arrived on QPs 1.. */
    bool fin;
    bool flush_buf;     /* a send into `buf` must be flushed before completing */
    uint8_t flush;      /* enum verbs_flush_state */
};

enum verbs_ep_state { VEP_CONNECTING, VEP_ESTABLISHED, VEP_ERROR };

enum verbs_cm_stage {
    CM_TCP,        /* connector: TCP connect in progress */
    CM_CHALLENGE,  /* connector: reading the challenge */
    CM_PROOF,      /* connector: reading the acceptor's proof */
    CM_REP,        /* connector: reading the acceptor's QPs */
    CM_RDMACM,     /* connector: GX_IB_CM=rdmacm connecting the QPs */
    CM_DONE,
};

struct verbs_ep {
    struct gx_fab_ep base;
    struct verbs_domain *dom;
    struct verbs_cq *cq;
    enum verbs_ep_state state;
    int error;
    int nqps;
    struct verbs_qp qps[GX_VERBS_MAX_QPS];
    uint32_t depth;     /* ops per direction (GX_FAB_QUEUE_DEPTH) */
    uint32_t credits;   /* receives advertised and not completed, at most */
    struct verbs_hwcq *hw;  /* the ibv_cq of this endpoint's QPs */
    uint32_t cq_need;   /* cq entries reserved */

    /* control rings: the peer writes *_in, we stage *_out for our writes */
    void *ring_mem;
    struct gx_verbs_cts *cts_in;
    struct gx_verbs_fin *fin_in;
    struct ibv_mr *ring_in_mr;
    struct gx_verbs_cts *cts_out;
    struct gx_verbs_fin *fin_out;
    struct ibv_mr *ring_out_mr;
    struct gx_verbs_conn peer;

    /* flush after GPU-destined receives (verbs_flush.c): a QP connected to
     * itself that RDMA-reads one byte of what arrived; qp NULL = no flush */
    struct verbs_qp flush_qp;
    void *flush_sink;             /* where the READs land (host, LOCAL_WRITE) */
    struct ibv_mr *flush_sink_mr;
    uint64_t *flush_fifo;         /* receive number of each READ, in post order */
    uint64_t flush_posted, flush_done;

    uint64_t *atom_buf;           /* one-sided atomics' results land here (slot per tx op) */
    struct ibv_mr *atom_mr;

    struct verbs_txop *tx;        /* ring of depth */
    uint64_t tx_post, tx_issued, tx_done;
    uint64_t tx_msgs;             /* sends and write_imms posted (one-sided ops are not) */
    struct verbs_rxslot *rx;      /* ring of depth */
    uint64_t rx_post, rx_cts, rx_done;

    /* side channel */
    int fd;
    enum verbs_cm_stage stage;
    uint8_t cmbuf[256];
    size_t cmgot;
    struct gx_auth_hello hello;
    uint64_t deadline;
    struct gx_sockaddr peer_sa;
    char peer_host[64];
    bool bye_sent;
    struct verbs_rdmacm_ep *rdmacm; /* GX_IB_CM=rdmacm: the QPs' CM ids */
};

/* verbs_qp.c */
int verbs_rd_atomic_depth(const struct verbs_domain *dom);
/** A registration grants remote read or atomics (a one-sided window): let
 *  the data QPs serve them too, the connected ones at once and later ones
 *  when they connect. Until then QPs allow remote write only. */
void verbs_qps_widen(struct verbs_domain *dom, unsigned fab_access);

/* verbs_rma.c: one-sided write, read and 8-byte atomics (GX_FAB_CAP_RMA,
 * GX_FAB_CAP_ATOMIC). They take a slot of the endpoint's tx ring like the
 * other posts, are issued in order with them but need no clear-to-send, and
 * complete when their one signaled WR does. */
int verbs_post_write(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                     uint64_t raddr, const struct gx_fab_rkey *rkey, uint64_t context);
int verbs_post_read(struct gx_fab_ep *ep, void *buf, size_t len, struct gx_fab_mr *mr,
                    uint64_t raddr, const struct gx_fab_rkey *rkey, uint64_t context);
int verbs_post_atomic(struct gx_fab_ep *ep, enum gx_fab_atomic_op op, uint64_t operand,
                      uint64_t compare, uint64_t *result, uint64_t raddr,
                      const struct gx_fab_rkey *rkey, uint64_t context);
static inline bool verbs_op_onesided(uint8_t op)
{
    return op == GX_FAB_OP_WRITE || op == GX_FAB_OP_READ || op == GX_FAB_OP_ATOMIC;
}
/** Issue tx op `k` (one-sided) on QP 0; false when the send queue is full. */
bool verbs_rma_issue(struct verbs_ep *ep, struct verbs_txop *op, uint64_t k);
/** Check a packed key for [raddr, raddr+len) with `access`; GX_OK or EINVAL. */
int verbs_rkey_check(struct verbs_ep *ep, const struct gx_fab_rkey *rkey, uint64_t raddr,
                     size_t len, unsigned access, const char *what, uint32_t *rkey_out,
                     uint32_t *access_out);
/** Take a tx slot for a one-sided op (queue full: GX_ENOMEM) and issue what can go. */
int verbs_post_tx_slot(struct verbs_ep *ep, struct verbs_txop **out);
void verbs_issue_tx(struct verbs_ep *ep);

/* verbs_data.c */
int verbs_ep_alloc(struct verbs_domain *dom, struct verbs_cq *cq, int nqps, uint32_t depth,
                   struct verbs_ep **out);
void verbs_ep_free(struct verbs_ep *ep);
void verbs_ep_progress(struct gx_fab_ep *ep);
void verbs_ep_close(struct gx_fab_ep *ep);
/* Which op an endpoint failure is reported on without GX_FAB_CQE_FLUSHED. */
enum verbs_fail_op { FAIL_NONE = 0, FAIL_TX = 1, FAIL_RX = 2 };
/** Move `ep` to error once: log (naming the endpoint), QPs to error, every
 *  outstanding op completed with `status`, the peer told. */
void verbs_ep_fail(struct verbs_ep *ep, int status, int prov_err, enum verbs_fail_op first,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/** Complete every outstanding op of `ep` with `status` (the endpoint is in
 *  error already; verbs_data.c, for verbs_ep.c's close too). */
void verbs_ep_flush_all(struct verbs_ep *ep, int status, int prov_err, enum verbs_fail_op first);
void verbs_cq_process(struct verbs_cq *cq, const struct ibv_wc *wc);
int verbs_post_send(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                    uint64_t tag, uint64_t context);
int verbs_post_recv(struct gx_fab_ep *ep, void *buf, size_t len, struct gx_fab_mr *mr,
                    uint64_t context);
int verbs_post_write_imm(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                         uint64_t raddr, const struct gx_fab_rkey *rkey, uint32_t imm,
                         uint64_t context);
/** Drain `cq`'s hardware queue into its output ring (all entries). */
int verbs_cq_drain(struct verbs_cq *cq);

/* verbs_wait.c: sleeping until the cq has work (gx_fab_cq_wait_fds). The
 * channel is made at cq_open when the library has completion channels (its
 * absence only means waits keep polling); every ibv_cq is created on it. */
void verbs_wait_channel_open(struct verbs_cq *cq);
void verbs_wait_channel_close(struct verbs_cq *cq);
int verbs_cq_wait_fds(struct gx_fab_cq *cq, struct pollfd *fds, int max, int *nfds);
void verbs_cq_wait_done(struct gx_fab_cq *cq, const struct pollfd *fds, int nfds);

/* verbs_cm.c */
int verbs_listen(struct gx_fab_domain *dom, struct gx_fab_cq *cq, struct gx_fab_listener **out,
                 struct gx_fab_addr *addr_out);
int verbs_accept(struct gx_fab_listener *lst, struct gx_fab_ep **out);
void verbs_listener_close(struct gx_fab_listener *lst);
int verbs_connect(struct gx_fab_domain *dom, struct gx_fab_cq *cq, const struct gx_fab_addr *peer,
                  const struct gx_fab_conn_param *param, struct gx_fab_ep **out);
int verbs_ep_establish(struct gx_fab_ep *ep);
/** Check the side channels of `cq`'s endpoints (one poll() call). */
void verbs_cm_liveness(struct verbs_cq *cq);
/** The fds that wake a sleeping wait on `cq` for connection work and for
 *  its endpoints' side channels (a peer that dies or fails): listeners,
 *  half-open connections, established endpoints, the domain's rdmacm
 *  channel. Their count, or -1 when more than `max`. */
int verbs_cm_wait_fds(struct verbs_cq *cq, struct pollfd *fds, int max);
/** Tell the peer why we failed / that we close (best effort, non-blocking). */
void verbs_cm_notify(struct verbs_ep *ep, int type, int status, int wc_status);
void verbs_conn_fill(struct verbs_ep *ep, struct gx_verbs_conn *c, int type);
/* verbs_rdmacm.c: disconnect and destroy an endpoint's CM ids (no-op on the
 * TCP path); called by verbs_ep_free before the QPs are destroyed. */
void verbs_rdmacm_ep_release(struct verbs_ep *ep);
/* verbs_gdr.c */
enum verbs_flush_mode { VERBS_FLUSH_AUTO = 0, VERBS_FLUSH_ON = 1, VERBS_FLUSH_OFF = 2 };
/** At domain open: the GPU path from `attr`, GX_IB_GDR_FLUSH. */
int verbs_gdr_domain_init(struct verbs_domain *dom, const struct gx_fab_domain_attr *attr);
/** The domain's GPUDirect method (decided once, dmabuf probed once). */
int verbs_gdr_method(struct verbs_domain *dom);
/** Path class from the nearest GPU to RDMA device `dev` (topology), or
 *  GX_TOPO_PATH_UNKNOWN. For the gx-info report. */
enum gx_topo_path verbs_gdr_nearest_gpu_path(const char *dev);
/** Must a receive into memory of `type` be flushed before it completes? */
bool verbs_flush_needed(const struct verbs_domain *dom, enum gx_fab_mem_type type);
/** Does an endpoint of this domain need a flush QP at all? */
bool verbs_flush_wanted(struct verbs_domain *dom);

/* verbs_flush.c */
/** Create the endpoint's loopback flush QP when the domain wants one. */
int verbs_flush_open(struct verbs_ep *ep);
void verbs_flush_close(struct verbs_ep *ep);
/** Receive k has fully arrived: post its flush READ if it needs one. */
void verbs_flush_arrived(struct verbs_ep *ep, uint64_t k);
/** A completion of the flush QP; true when a receive may now complete. */
bool verbs_flush_completed(struct verbs_ep *ep, struct verbs_qp *q, const struct ibv_wc *wc);

/* verbs_mr.c */
int verbs_mr_reg(struct gx_fab_domain *dom, void *addr, size_t len, enum gx_fab_mem_type type,
                 unsigned access, struct gx_fab_mr **out);
int verbs_mr_dereg(struct gx_fab_mr *mr);
int verbs_mr_pack_rkey(const struct gx_fab_mr *mr, struct gx_fab_rkey *out);
/** The ibv access flags a registration with gx access `access` gets;
 *  `flush_read` adds REMOTE_READ to a remote-write target (the owner's
 *  flush QP reads it, verbs_flush.c). */
int verbs_access_flags(unsigned access, enum gx_fab_mem_type type, bool flush_read);
int verbs_rcache_open(struct verbs_domain *dom);
void verbs_rcache_close(struct verbs_domain *dom);
/** lkey for a local source [buf, buf+len): from `mr` or the source cache. */
int verbs_src_key(struct verbs_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                  uint32_t *lkey, struct gx_fab_rcache_entry **rce);
/** rkey for a receive target: `mr` if it grants remote write, else the cache. */
int verbs_dst_key(struct verbs_ep *ep, void *buf, size_t len, struct gx_fab_mr *mr,
                  uint32_t *rkey, struct gx_fab_rcache_entry **rce);
void verbs_key_put(struct verbs_domain *dom, struct gx_fab_rcache *rc,
                   struct gx_fab_rcache_entry *rce);

struct verbs_mr {
    struct gx_fab_mr base;
    struct ibv_mr *mr;
    bool flush_read;    /* REMOTE_READ granted for the owner's flush READs */
};

/* verbs_errors.c */
/** gx status, short name and operator hint for a work-completion status. */
int verbs_wc_status_map(enum ibv_wc_status st, const char **hint);
/** Read pending async events (non-blocking), logging port and device
 *  events; returns the last event type seen for one of `ep`'s QPs, or -1. */
int verbs_async_drain(struct verbs_domain *dom, const struct verbs_ep *ep);
/** Fail `ep` for an errored completion `wc` on QP `q`, with the hint. */
void verbs_wc_error(struct verbs_ep *ep, struct verbs_qp *q, const struct ibv_wc *wc);

extern const struct gx_fab_provider gx_fab_verbs_provider;

#endif
