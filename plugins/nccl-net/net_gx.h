/*
 * net_gx.h - the NCCL net plugin's core, independent of NCCL's ABI versions
 * (plugins/nccl-net/). net_gx_abi.c adapts it to ncclNet_v8 .. v11.
 *
 * Owns: the plugin's devices (one gx fabric domain and completion queue
 * each, opened on first use), its comms and requests, and the clear-to-send
 * protocol that keeps every send matched to a posted receive.
 * Must not touch: NCCL's structures (the adapters fill them).
 *
 * Threads: NCCL calls listen/connect/accept/regMr/close from its proxy
 * service thread and isend/irecv/test from its proxy progress thread. A
 * fabric domain is single-threaded (fabric.h), so each has a mutex that every
 * call on it takes. Each listen comm (shared by the recv comms it accepts) and
 * each send comm has its own domain: a provider's connect handshake may wait
 * for the acceptor (tcp's does, briefly), and must not hold up the acceptor or
 * other comms' progress, even when both ends live in one process.
 *
 * Protocol on each connection (one gx endpoint per send/recv comm pair):
 *   receiver: irecv posts a fabric receive into the user's buffer, then sends
 *             a 16-byte clear-to-send (tag, size) to the sender;
 *   sender:   keeps GXN_MAX_REQUESTS receives posted for clear-to-sends; isend
 *             returns no request (NCCL retries) until one has arrived, checks
 *             the tag and size against it, then posts the data send.
 * So a data send never arrives before its receive is posted, on any provider
 * (verbs RC included), and a mismatch is reported by name instead of
 * truncating.
 */
#ifndef GX_PLUGINS_NCCL_NET_GX_H
#define GX_PLUGINS_NCCL_NET_GX_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric/fabric.h"
#include "plugins/nccl-net/nccl_net_abi.h"

#define GXN_MAX_DEVS 16
#define GXN_REQS 64           /* request slots per comm (NCCL keeps <= 32) */

struct gxn_props {            /* version-neutral device properties */
    char *name;
    char *pci_path;           /* /sys path of the PCI device, NULL when virtual */
    uint64_t guid;
    int speed_mbps;
    int port;
    int max_comms;
    int ptr_support;          /* NCCL_PTR_* bits (net_gx_gpu.c) */
};

struct gxn_dev {
    const struct gx_fab_provider *prov;
    char fab_device[64];      /* provider device name ("" = provider's choice) */
    char name[96];            /* "gx-tcp:eth0" */
    char *pci_path;
    int speed_mbps;
    int port;
    /* GPUDirect RDMA verdict (net_gx_gpu.c), decided at first use */
    bool gdr_decided;
    int gdr;                  /* enum gx_gdr_method */
    char gdr_why[400];
};

/* A fabric domain with its completion queue, shared by a listen comm and the
 * recv comms it accepts, or owned by one send comm. */
struct gxn_dom {
    pthread_mutex_t lock;     /* serialises every use of dom and cq */
    struct gxn_dev *dev;
    struct gx_fab_domain *dom;
    struct gx_fab_cq *cq;
    int refs;                 /* comms using it (changed under lock) */
};

/* What a completion's context points at (the first member of each). */
enum gxn_op_kind { GXN_OP_REQ = 1, GXN_OP_CTS_RECV = 2, GXN_OP_CTS_SEND = 3 };

struct gxn_cts {              /* the clear-to-send message */
    uint32_t magic;
    int32_t tag;
    uint64_t size;
};

struct gxn_comm;
struct gxn_req;

struct gxn_op_ref {           /* a context naming a request */
    int kind;
    struct gxn_req *req;
};

struct gxn_req {
    int kind;                 /* GXN_OP_REQ */
    struct gxn_comm *comm;
    bool in_use;
    bool data_done;
    bool cts_pending;         /* recv: our clear-to-send not completed yet */
    int status;               /* GX_OK or the first failure */
    size_t size;              /* send: bytes; recv: bytes received */
    struct gxn_op_ref cts_op;  /* GXN_OP_CTS_SEND */
    struct gxn_cts cts;       /* recv: what we tell the sender */
};

struct gxn_cts_slot {
    int kind;                 /* GXN_OP_CTS_RECV */
    struct gxn_comm *comm;
};

enum gxn_comm_kind { GXN_LISTEN = 1, GXN_SEND = 2, GXN_RECV = 3 };

struct gxn_comm {
    enum gxn_comm_kind kind;
    struct gxn_dev *dev;
    struct gxn_dom *fd;
    struct gx_fab_listener *lst;   /* GXN_LISTEN */
    struct gx_fab_ep *ep;          /* GXN_SEND, GXN_RECV */
    int failed;                    /* first endpoint error (GX_E*), 0 = none */
    struct gxn_req reqs[GXN_REQS];
    /* clear-to-send buffers: the sender receives into them, the receiver
     * sends from its requests; one registration covers this whole struct */
    struct gxn_cts cts_in[GXN_MAX_REQUESTS];
    struct gxn_cts_slot cts_slot[GXN_MAX_REQUESTS];
    uint64_t cts_arrived, cts_used; /* sender: counters over cts_in */
    struct gx_fab_mr *self_mr;
};

/* The mhandle NCCL holds. */
struct gxn_mr {
    struct gx_fab_mr *mr;
    struct gxn_dom *fd;
    bool cuda;                /* CUDA memory (net_gx_gpu.c) */
};

/* Device table and logging (net_gx_dev.c). */
gxn_result_t gxn_init(gxn_logger_t log);
gxn_result_t gxn_devices(int *ndev);
gxn_result_t gxn_get_props(int dev, struct gxn_props *out);
struct gxn_dev *gxn_dev_at(int dev);
/** Open a domain and cq on `dev` with one reference. */
int gxn_dom_open(struct gxn_dev *dev, struct gxn_dom **out);
/** Drop a reference (caller does not hold the lock); the last one closes. */
void gxn_dom_put(struct gxn_dom *fd);
void gxn_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Log `msg` as a warning and map a gx status to NCCL's result. */
gxn_result_t gxn_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Connections (net_gx_comm.c). */
gxn_result_t gxn_listen(int dev, void *handle, void **listen_comm);
gxn_result_t gxn_connect(int dev, void *handle, void **send_comm);
gxn_result_t gxn_accept(void *listen_comm, void **recv_comm);
gxn_result_t gxn_close(void *comm);
gxn_result_t gxn_reg_mr(void *comm, void *data, size_t size, int type, void **mh);
gxn_result_t gxn_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
                               int fd, void **mh);
gxn_result_t gxn_dereg_mr(void *comm, void *mh);

/* Data path (net_gx_data.c). */
gxn_result_t gxn_isend(void *send_comm, void *data, size_t size, int tag, void *mh, void **req);
gxn_result_t gxn_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
                       void **mhs, void **req);
gxn_result_t gxn_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhs, void **req);
gxn_result_t gxn_test(void *req, int *done, int *sizes);
/** Post the sender's clear-to-send receives (caller holds dev->lock). */
int gxn_post_cts_recvs_locked(struct gxn_comm *c);
/** Poll the domain's cq once and hand completions to their ops (locked). */
int gxn_progress_locked(struct gxn_dom *fd);

/* CUDA memory (net_gx_gpu.c). */
/** The GPUDirect RDMA method (enum gx_gdr_method) for `dev`, and why. */
int gxn_dev_gdr(struct gxn_dev *dev, const char **why);
/** getProperties' ptrSupport for `dev` (NCCL_PTR_* bits). */
int gxn_dev_ptr_support(struct gxn_dev *dev);
/** The GPU-to-NIC path class for the domain attribute (UNKNOWN off verbs). */
enum gx_topo_path gxn_dev_gpu_path(const struct gxn_dev *dev);
/** Register CUDA memory for regMr / regMrDmaBuf (`call` names which). */
gxn_result_t gxn_reg_mr_cuda(struct gxn_comm *c, void *data, size_t size, const char *call,
                             void **mh);

#endif
