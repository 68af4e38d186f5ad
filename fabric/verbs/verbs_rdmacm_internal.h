/*
 * verbs_rdmacm_internal.h - what the two files of the rdmacm connection
 * path share (verbs_rdmacm.c: domain, acceptor, pump; verbs_rdmacm_connect.c:
 * connector). Not for the rest of the provider: verbs_rdmacm.h is its face.
 */
#ifndef GX_VERBS_RDMACM_INTERNAL_H
#define GX_VERBS_RDMACM_INTERNAL_H

#include <stdint.h>
#include <sys/socket.h>

#include "fabric/verbs/verbs_rdmacm.h"

enum id_kind { ID_LISTEN = 1, ID_ACTIVE = 2, ID_PASSIVE = 3 };
enum id_state { S_NONE, S_ADDR, S_ROUTE, S_CONNECT, S_DONE };

/* The context of every CM id gx creates or accepts. */
struct verbs_rdmacm_id {
    int kind;
    int state;
    int index;                        /* QP index within the endpoint */
    struct rdma_cm_id *id;
    struct verbs_ep *ep;              /* ID_ACTIVE, ID_PASSIVE */
    struct verbs_rdmacm_listen *lst;  /* ID_LISTEN */
};

struct verbs_rdmacm_listen {
    struct verbs_rdmacm_id ctx;       /* first: listen ids' context */
    struct verbs_domain *dom;
    struct gx_fab_listener *base;
};

struct verbs_rdmacm_ep {
    struct verbs_rdmacm_id ids[GX_VERBS_MAX_QPS];
    int ndone;
    int error;                        /* first failure, already logged */
    struct gx_sockaddr dst;           /* connector: the peer's CM address */
};

struct verbs_rdmacm_dom {
    const struct gx_rdmacm_api *api;
    struct rdma_event_channel *ch;
    struct ibv_context **devs;        /* librdmacm's contexts; ours is one */
};

/* Milliseconds to hand the CM for a step: what is left of `deadline`,
 * clamped to 100 ms .. 60 s. */
int rdmacm_ms_left(uint64_t deadline);
void rdmacm_sockaddr_with_port(const struct gx_sockaddr *in, uint16_t port,
                               struct sockaddr_storage *out);
/* The device and port a CM id is bound to must be the domain's. */
int rdmacm_check_device(struct verbs_domain *dom, struct rdma_cm_id *id, const char *who,
                        const char *what);
/* QP `i` of `ep` to RTR and RTS with the CM's attributes for `id`. */
int rdmacm_qp_up(struct verbs_ep *ep, int i, struct rdma_cm_id *id);
/* The endpoint's rdmacm state, allocated on first use (NULL: no memory). */
struct verbs_rdmacm_ep *rdmacm_ep_state(struct verbs_ep *ep);
/* A failure event for `c`: the gx status with the peer named and the hint. */
int rdmacm_event_failure(struct verbs_rdmacm_id *c, int type, int status, const void *pd,
                         size_t pd_len);
/* verbs_rdmacm_connect.c: an event for a connector's CM id. */
int rdmacm_active_event(struct verbs_rdmacm_id *c, int type, int status, const void *pd,
                        size_t pd_len);

#endif
