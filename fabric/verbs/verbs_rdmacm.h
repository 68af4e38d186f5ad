/*
 * verbs_rdmacm.h - the optional librdmacm connection path of the verbs
 * provider (GX_IB_CM=rdmacm), for iWARP (whose QPs can only be connected by
 * the connection manager) and for address/route resolution.
 *
 * Files:
 *   verbs_rdmacm_loader.c  librdmacm.so.1 (or GX_RDMACM_LIB) opened with
 *                          dlopen, symbols by version; availability probe
 *   verbs_rdmacm_wire.c    pure parts: the CM private data (encode/decode),
 *                          CM event -> gx status and operator hint
 *   verbs_rdmacm.c         domain event channel, listener id, the active
 *                          and passive state machines, endpoint release
 *   verbs_rdmacm_absent.c  stubs when rdma/rdma_cma.h was not found at build
 *
 * Design (docs/verbs.md, "GX_IB_CM=rdmacm"): the authenticated TCP side
 * channel still carries the job-key handshake, REQ/REP/READY (control rings,
 * QP count, depth) and the liveness/BYE/ERROR messages; the CM resolves the
 * peer's address and route and connects each QP (one cm_id per QP). QPs are
 * gx's own (user-managed: handed to the CM by number, moved to RTR/RTS with
 * rdma_init_qp_attr's attributes). The domain's verbs context is the one
 * librdmacm opened for the chosen device, and an address that resolves to
 * another device or port is refused, naming both.
 */
#ifndef GX_FABRIC_VERBS_VERBS_RDMACM_H
#define GX_FABRIC_VERBS_VERBS_RDMACM_H

#include <stddef.h>
#include <stdint.h>

#include "fabric/verbs/verbs.h"

struct verbs_rdmacm_listen;

/* ---- wire: CM private data (verbs_rdmacm_wire.c) ----------------------- */
#define GX_VERBS_CM_PD_MAGIC 0x52425847u /* "GXBR" */
#define GX_VERBS_CM_PD_VERSION 1
/* IB CM connect requests carry at most 56 bytes of private data for
 * RDMA_PS_TCP; ours must fit the smallest limit. */
#define GX_VERBS_CM_PD_MAX 56

enum gx_verbs_cm_pd_kind {
    GX_VERBS_CM_PD_REQ = 1, /* connector -> acceptor, with rdma_connect */
    GX_VERBS_CM_PD_REP = 2, /* acceptor -> connector, with rdma_accept */
    GX_VERBS_CM_PD_REJ = 3, /* acceptor -> connector, with rdma_reject */
};

/* Binds one CM connection to the endpoint set up over the authenticated
 * side channel: the QP numbers were exchanged there (REQ/REP), so a CM
 * request naming other QPs, or another rank, is rejected. */
struct gx_verbs_cm_pd {
    uint32_t magic;
    uint8_t version;
    uint8_t kind;      /* enum gx_verbs_cm_pd_kind */
    uint8_t qp_index;  /* which of the endpoint's QPs this connection is */
    uint8_t nqps;
    int32_t rank;      /* sender's rank */
    uint32_t qpn;      /* sender's QP number */
    uint32_t peer_qpn; /* the receiver's QP number it pairs with */
    int32_t status;    /* REJ: the gx status why; else 0 */
};
_Static_assert(sizeof(struct gx_verbs_cm_pd) == 24, "cm private data layout");
_Static_assert(sizeof(struct gx_verbs_cm_pd) <= GX_VERBS_CM_PD_MAX, "cm private data size");

void gx_verbs_cm_pd_encode(struct gx_verbs_cm_pd *out, int kind, int qp_index, int nqps, int rank,
                           uint32_t qpn, uint32_t peer_qpn, int status);
/** Decode `len` bytes (CMs pad private data with zeros: longer is fine).
 *  GX_OK, or GX_EPROTO with why in `why` (nothing logged: the caller
 *  names the peer). */
int gx_verbs_cm_pd_decode(const void *data, size_t len, int want_kind, struct gx_verbs_cm_pd *out,
                          char *why, size_t why_len);

/** gx status of CM event `event` (enum rdma_cm_event_type) with event
 *  status `ev_status`, and the operator hint (what failed, what to check).
 *  GX_OK for events that are not failures. */
int gx_verbs_cm_event_status(int event, int ev_status, char *hint, size_t hint_len);

/* ---- loader (verbs_rdmacm_loader.c) ------------------------------------ */
/* Built when librdmacm's header is there (fabric/CMakeLists.txt makes the
 * same test to choose verbs_rdmacm*.c or verbs_rdmacm_absent.c). */
#if __has_include(<rdma/rdma_cma.h>)
#include <rdma/rdma_cma.h>
/* The librdmacm entry points gx uses, resolved with dlvsym(). */
struct gx_rdmacm_api {
    struct rdma_event_channel *(*create_event_channel)(void);
    void (*destroy_event_channel)(struct rdma_event_channel *ch);
    int (*create_id)(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *context,
                     enum rdma_port_space ps);
    int (*destroy_id)(struct rdma_cm_id *id);
    int (*bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
    int (*listen)(struct rdma_cm_id *id, int backlog);
    int (*resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                        int timeout_ms);
    int (*resolve_route)(struct rdma_cm_id *id, int timeout_ms);
    int (*connect)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    int (*accept)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    int (*reject)(struct rdma_cm_id *id, const void *private_data, uint8_t len);
    int (*establish)(struct rdma_cm_id *id);
    int (*disconnect)(struct rdma_cm_id *id);
    int (*get_cm_event)(struct rdma_event_channel *ch, struct rdma_cm_event **event);
    int (*ack_cm_event)(struct rdma_cm_event *event);
    int (*init_qp_attr)(struct rdma_cm_id *id, struct ibv_qp_attr *attr, int *mask);
    const char *(*event_str)(enum rdma_cm_event_type event);
    uint16_t (*get_src_port)(struct rdma_cm_id *id); /* network order */
    struct ibv_context **(*get_devices)(int *num);
    void (*free_devices)(struct ibv_context **list);
};
/** Load librdmacm once (GX_RDMACM_LIB or librdmacm.so.1). GX_OK, or
 *  GX_EUNSUPPORTED with the reason in gx_verbs_rdmacm_reason(). */
int gx_verbs_rdmacm_load(const struct gx_rdmacm_api **out);
#endif

/** GX_OK when librdmacm loaded and an event channel can be created (the
 *  kernel's rdma_cm is there); else GX_EUNSUPPORTED with the reason in
 *  gx_verbs_rdmacm_reason(). Nothing is logged above info level. */
int gx_verbs_rdmacm_available(void);
const char *gx_verbs_rdmacm_reason(void);
/** The gx-info line: "rdmacm: available (librdmacm.so.1)" or why not. */
int gx_verbs_rdmacm_report(char *out, size_t len);

/* ---- the connection path (verbs_rdmacm.c) ------------------------------ */
/** Domain open with GX_IB_CM=rdmacm: event channel, and the domain moves
 *  to librdmacm's verbs context of its device. GX_EUNSUPPORTED (logged with
 *  the reason) when the path is unavailable. */
int verbs_rdmacm_domain_open(struct verbs_domain *dom);
void verbs_rdmacm_domain_close(struct verbs_domain *dom);
/** Listener: a CM id bound to the domain's address and listening; its port
 *  goes to connectors in REP. */
int verbs_rdmacm_listen(struct verbs_domain *dom, struct gx_fab_listener *lst,
                        struct verbs_rdmacm_listen **out, uint16_t *port);
void verbs_rdmacm_listen_close(struct verbs_rdmacm_listen *l);
/** Connector, after REP: resolve, route and connect each QP (non-blocking). */
int verbs_rdmacm_connect_start(struct verbs_ep *ep, uint16_t cm_port);
/** GX_OK once every QP is connected (RTS, established), GX_INPROGRESS, or
 *  the failure (logged naming the peer). */
int verbs_rdmacm_connect_step(struct verbs_ep *ep);
/** Acceptor: pump CM events (connect requests are matched to pending
 *  endpoints through verbs_listener_find()). */
void verbs_rdmacm_pump(struct verbs_domain *dom);
/** The domain's CM event channel fd (a sleeping wait watches it), or -1. */
int verbs_rdmacm_wait_fd(const struct verbs_domain *dom);
/** Acceptor: GX_OK when every QP of `ep` was accepted, GX_INPROGRESS, or
 *  the failure recorded for it. */
int verbs_rdmacm_accepted(struct verbs_ep *ep);
/** Disconnect and destroy the endpoint's CM ids (from verbs_ep_free). */
void verbs_rdmacm_ep_release(struct verbs_ep *ep);

/* verbs_cm.c: the pending endpoint of listener `lst` that a CM connect
 * request from `rank` for QP `qp_index` (ours `my_qpn`, theirs `peer_qpn`)
 * belongs to, or NULL. */
struct verbs_ep *verbs_listener_find(struct gx_fab_listener *lst, int rank, int qp_index,
                                     uint32_t my_qpn, uint32_t peer_qpn);

#endif
