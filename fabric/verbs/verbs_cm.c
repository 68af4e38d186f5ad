/*
 * verbs_cm.c - verbs connection set-up over an authenticated TCP side
 * channel, and the side channel's life afterwards.
 *
 *   connector                              acceptor (listener)
 *   TCP connect              ------------>  accept, send challenge
 *   hello (job-key MAC) + REQ (QPs, INIT) ->  verify hello, send proof
 *                                           read REQ, create QPs, RTR, RTS
 *   verify proof, read REP   <------------  REP (its QPs, rings)
 *   RTR, RTS, READY          ------------>  endpoint returned by accept()
 *
 * Both sides are at RTR before either can post, so the first packets are
 * never dropped. Everything is non-blocking for both sides (the mesh helper
 * drives connects and accepts from one loop). The TCP socket then stays
 * open: its EOF is the fastest sign that the peer process died, and it
 * carries BYE (closed) and ERROR (why the peer failed) messages. It is
 * checked with one poll() per completion queue at most every millisecond,
 * never per message.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/fabric_sock.h"
#include "fabric/verbs/verbs.h"
#include "fabric/verbs/verbs_rdmacm.h"

struct verbs_half {
    struct gx_fab_sock_half s; /* first: the entry of a gx_fab_sock_pending table */
    int stage;        /* 0 auth, 1 reading REQ, 2 waiting for READY */
    uint8_t buf[sizeof(struct gx_verbs_conn)];
    size_t got;
    struct verbs_ep *ep;
};

struct verbs_listener {
    struct gx_fab_listener base;
    struct verbs_domain *dom;
    int fd;
    struct gx_fab_sock_pending half; /* of struct verbs_half */
    struct verbs_rdmacm_listen *cm;  /* GX_IB_CM=rdmacm: the CM's listener */
    uint16_t cm_port;
};

static struct verbs_half *half_at(struct verbs_listener *l, int i)
{
    return (struct verbs_half *)gx_fab_sock_pending_at(&l->half, i);
}

/* ---- helpers ---------------------------------------------------------------- */
GX_FAB_SOCK_ADDR_LAYOUT_CHECK(struct gx_verbs_addr);

/* Read until `want` bytes are in buf: GX_OK, GX_INPROGRESS, or GX_EPEER. */
static int read_some(int fd, void *buf, size_t want, size_t *got)
{
    while (*got < want) {
        ssize_t n = recv(fd, (char *)buf + *got, want - *got, MSG_DONTWAIT);
        if (n > 0) {
            *got += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return GX_INPROGRESS;
        return GX_EPEER;
    }
    return GX_OK;
}

static int send_small(int fd, const void *buf, size_t len)
{
    /* Set-up messages are a few hundred bytes on a fresh socket: they fit
     * the send buffer, so a short write means the peer is gone. */
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    return n == (ssize_t)len ? GX_OK : GX_EPEER;
}

void verbs_conn_fill(struct verbs_ep *ep, struct gx_verbs_conn *c, int type)
{
    struct verbs_domain *dom = ep->dom;
    memset(c, 0, sizeof(*c));
    c->magic = GX_VERBS_CONN_MAGIC;
    c->version = GX_VERBS_VERSION;
    c->type = (uint16_t)type;
    c->rank = dom->base.rank;
    c->nqps = (uint16_t)ep->nqps;
    c->link_layer = dom->port.attr.link_layer;
    c->mtu = (uint8_t)dom->port.attr.active_mtu;
    c->lid = dom->port.attr.lid;
    c->depth = ep->depth;
    memcpy(c->gid, dom->port.gid.raw, 16);
    for (int i = 0; i < ep->nqps; i++) {
        c->qpn[i] = ep->qps[i].qp->qp_num;
        c->psn[i] = ep->qps[i].psn;
    }
    c->cts_addr = (uint64_t)(uintptr_t)ep->cts_in;
    c->fin_addr = (uint64_t)(uintptr_t)ep->fin_in;
    c->cts_rkey = ep->ring_in_mr->rkey;
    c->fin_rkey = ep->ring_in_mr->rkey;
    /* GX_IB_CM=rdmacm: REQ says so (1), REP carries the CM listener's port. */
    if (type == GX_VERBS_CONN_REQ)
        c->reserved = dom->set.cm_rdmacm ? 1 : 0;
}

static int conn_check(struct verbs_domain *dom, const struct gx_verbs_conn *c, int type,
                      const char *who)
{
    if (c->magic != GX_VERBS_CONN_MAGIC || c->version != GX_VERBS_VERSION || c->type != type)
        return gx_fail(GX_EPROTO, GX_SUB_FABRIC, "verbs: %s sent a malformed connection message "
                       "(not a gx verbs peer, or another version)", who);
    if (type == GX_VERBS_CONN_READY)
        return GX_OK;
    if (c->nqps < 1 || c->nqps > GX_VERBS_MAX_QPS || c->depth < 16 || c->depth > (1u << 20))
        return gx_fail(GX_EPROTO, GX_SUB_FABRIC, "verbs: %s asks for %u QPs of depth %u",
                       who, c->nqps, c->depth);
    if (c->link_layer != dom->port.attr.link_layer)
        return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: %s is on %s, this rank on %s "
                       "(%s:%d): they cannot talk", who,
                       c->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
                       dom->port.attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
                       dom->port.dev, dom->port.port);
    if ((c->reserved != 0) != (dom->set.cm_rdmacm != 0))
        return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: %s connects QPs with GX_IB_CM=%s, "
                       "this rank with GX_IB_CM=%s: set the same GX_IB_CM on every rank", who,
                       c->reserved ? "rdmacm" : "tcp", dom->set.cm_rdmacm ? "rdmacm" : "tcp");
    return GX_OK;
}

static void ep_name(struct verbs_ep *ep, int rank)
{
    char where[80];
    gx_sock_addr_str(&ep->peer_sa, ep->peer_host, sizeof(ep->peer_host));
    char *colon = strrchr(ep->peer_host, ':');
    if (colon && ep->peer_host[0] != '[')
        *colon = '\0';
    if (ep->qps[0].qp && ep->peer.qpn[0])
        snprintf(where, sizeof(where), "%s, QP 0x%x->0x%x", ep->peer_host, ep->qps[0].qp->qp_num,
                 ep->peer.qpn[0]);
    else
        snprintf(where, sizeof(where), "%s", ep->peer_host);
    gx_fab_ep_set_name(&ep->base, "verbs", rank, where);
}

static int bring_up(struct verbs_ep *ep)
{
    for (int i = 0; i < ep->nqps; i++) {
        int rc = verbs_qp_to_rtr_rts(ep, &ep->qps[i], &ep->peer, i);
        if (rc != GX_OK)
            return rc;
    }
    return GX_OK;
}

/* ---- listener ---------------------------------------------------------------- */
int verbs_listen(struct gx_fab_domain *base, struct gx_fab_cq *cq, struct gx_fab_listener **out,
                 struct gx_fab_addr *addr_out)
{
    struct verbs_domain *dom = (struct verbs_domain *)base;
    struct verbs_listener *l = calloc(1, sizeof(*l));
    if (!l)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: out of memory creating a listener");
    int rc = gx_fab_sock_listen("verbs", &dom->local, dom->ifname, GX_VERBS_ADDR_MAGIC,
                                GX_VERBS_VERSION, &l->fd, addr_out);
    if (rc != GX_OK) {
        free(l);
        return rc;
    }
    gx_fab_sock_pending_init(&l->half, sizeof(struct verbs_half));
    l->base.dom = base;
    l->base.cq = cq;
    l->dom = dom;
    struct verbs_cq *vcq = (struct verbs_cq *)cq;
    for (int i = 0; i < VERBS_CQ_LISTENERS; i++) {
        if (!vcq->lst[i]) {
            vcq->lst[i] = &l->base; /* a fifth listener on one cq only does not wake a sleep */
            break;
        }
    }
    if (dom->set.cm_rdmacm) {
        rc = verbs_rdmacm_listen(dom, &l->base, &l->cm, &l->cm_port);
        if (rc != GX_OK) {
            close(l->fd);
            free(l);
            return rc;
        }
    }
    *out = &l->base;
    return GX_OK;
}

static void drop_half(struct verbs_listener *l, int i, bool close_all)
{
    struct verbs_half *h = half_at(l, i);
    if (close_all) {
        if (h->ep) {
            h->ep->fd = -1;
            verbs_ep_close(&h->ep->base);
        }
        close(h->s.fd);
    }
    gx_fab_sock_pending_remove(&l->half, i);
}

void verbs_listener_close(struct gx_fab_listener *base)
{
    struct verbs_listener *l = (struct verbs_listener *)base;
    struct verbs_cq *vcq = (struct verbs_cq *)base->cq;
    for (int i = 0; i < VERBS_CQ_LISTENERS; i++)
        if (vcq->lst[i] == base)
            vcq->lst[i] = NULL;
    close(l->fd);
    while (l->half.n)
        drop_half(l, 0, true);
    verbs_rdmacm_listen_close(l->cm);
    gx_fab_sock_pending_free(&l->half);
    free(l);
}

/* A verified connector's REQ is complete: make its endpoint and answer. */
static int accept_req(struct verbs_listener *l, struct verbs_half *h)
{
    struct gx_verbs_conn req;
    memcpy(&req, h->buf, sizeof(req));
    char who[96], a[64];
    snprintf(who, sizeof(who), "rank %d (%s)", h->s.auth.hello.rank,
             gx_sock_addr_str(&h->s.from, a, sizeof(a)));
    int rc = conn_check(l->dom, &req, GX_VERBS_CONN_REQ, who);
    if (rc != GX_OK)
        return rc;
    struct verbs_ep *ep;
    rc = verbs_ep_alloc(l->dom, (struct verbs_cq *)l->base.cq, req.nqps, req.depth, &ep);
    if (rc != GX_OK)
        return rc;
    h->ep = ep;
    ep->peer = req;
    ep->peer_sa = h->s.from;
    ep->base.peer_rank = h->s.auth.hello.rank;
    ep_name(ep, ep->base.peer_rank);
    rc = l->cm ? GX_OK : bring_up(ep); /* rdmacm: at the CM's connect request */
    if (rc != GX_OK)
        return rc;
    struct gx_verbs_conn rep;
    verbs_conn_fill(ep, &rep, GX_VERBS_CONN_REP);
    rep.reserved = l->cm_port;
    ep_name(ep, ep->base.peer_rank);
    if (send_small(h->s.fd, &rep, sizeof(rep)) != GX_OK)
        return gx_fail(GX_EPEER, GX_SUB_FABRIC, "verbs: %s closed during set-up", ep->base.name);
    return GX_OK;
}

int verbs_accept(struct gx_fab_listener *base, struct gx_fab_ep **out)
{
    struct verbs_listener *l = (struct verbs_listener *)base;
    char a[64];
    int rc = gx_fab_sock_accept_new("verbs", l->fd, &l->dom->key, &l->half);
    if (rc != GX_OK)
        return rc;
    if (l->cm)
        verbs_rdmacm_pump(l->dom);
    for (int i = 0; i < l->half.n;) {
        struct verbs_half *h = half_at(l, i);
        rc = GX_INPROGRESS;
        if (h->stage == 0) {
            rc = gx_fab_sock_half_auth("verbs", &h->s, &l->dom->key, GX_VERBS_AUTH_PURPOSE,
                                       "verbs side channel");
            if (rc == GX_OK) {
                h->stage = 1;
                h->got = 0;
            } else if (rc != GX_INPROGRESS) {
                drop_half(l, i, true);
                continue;
            }
        }
        if (h->stage == 1) {
            rc = read_some(h->s.fd, h->buf, sizeof(struct gx_verbs_conn), &h->got);
            if (rc == GX_OK) {
                rc = accept_req(l, h);
                if (rc != GX_OK) {
                    drop_half(l, i, true);
                    continue;
                }
                h->stage = 2;
                h->got = 0;
            }
        }
        if (h->stage == 2 && l->cm) {
            int cm = verbs_rdmacm_accepted(h->ep);
            if (cm != GX_OK && cm != GX_INPROGRESS) {
                drop_half(l, i, true); /* logged by the CM path */
                continue;
            }
        }
        if (h->stage == 2) {
            rc = read_some(h->s.fd, h->buf, sizeof(struct gx_verbs_conn), &h->got);
            if (rc == GX_OK) {
                struct gx_verbs_conn ready;
                memcpy(&ready, h->buf, sizeof(ready));
                if (conn_check(l->dom, &ready, GX_VERBS_CONN_READY, h->ep->base.name) != GX_OK) {
                    drop_half(l, i, true);
                    continue;
                }
                if (l->cm && verbs_rdmacm_accepted(h->ep) != GX_OK) {
                    gx_fail(GX_EPROTO, GX_SUB_FABRIC, "verbs: %s said READY before its QPs were "
                            "connected through librdmacm (set-up out of order)", h->ep->base.name);
                    drop_half(l, i, true);
                    continue;
                }
                struct verbs_ep *ep = h->ep;
                ep->fd = h->s.fd;
                ep->cmgot = 0;
                ep->stage = CM_DONE;
                ep->state = VEP_ESTABLISHED;
                drop_half(l, i, false);
                GX_INFO(GX_SUB_FABRIC, "verbs: accepted %s, %d QP(s)", ep->base.name, ep->nqps);
                *out = &ep->base;
                return GX_OK;
            }
        }
        if (rc == GX_EPEER) {
            GX_WARN(GX_SUB_FABRIC, "verbs: connection from %s closed during set-up",
                    gx_sock_addr_str(&h->s.from, a, sizeof(a)));
            drop_half(l, i, true);
            continue;
        }
        if (gx_fab_sock_half_expired("verbs", &h->s, "set-up not finished")) {
            drop_half(l, i, true);
            continue;
        }
        i++;
    }
    return GX_INPROGRESS;
}

/* The CM connect request of `rank` for QP `qp_index` pairs our QP `my_qpn`
 * with its `peer_qpn`: the endpoint, set up over the side channel and
 * waiting for READY, that announced exactly those QPs. */
struct verbs_ep *verbs_listener_find(struct gx_fab_listener *base, int rank, int qp_index,
                                     uint32_t my_qpn, uint32_t peer_qpn)
{
    struct verbs_listener *l = (struct verbs_listener *)base;
    for (int i = 0; i < l->half.n; i++) {
        struct verbs_ep *ep = half_at(l, i)->ep;
        if (ep && ep->base.peer_rank == rank && qp_index < ep->nqps &&
            ep->qps[qp_index].qp->qp_num == my_qpn && ep->peer.qpn[qp_index] == peer_qpn)
            return ep;
    }
    return NULL;
}

/* ---- connector ---------------------------------------------------------------- */
static int send_ready(struct verbs_ep *ep);

static int start_tcp(struct verbs_ep *ep)
{
    int rc = gx_fab_sock_connect_start("verbs", &ep->peer_sa, ep->base.name, &ep->fd);
    if (rc != GX_OK)
        return rc; /* GX_INPROGRESS: refused, retried until the deadline */
    ep->stage = CM_TCP;
    return GX_OK;
}

int verbs_connect(struct gx_fab_domain *base, struct gx_fab_cq *cq, const struct gx_fab_addr *peer,
                  const struct gx_fab_conn_param *param, struct gx_fab_ep **out)
{
    struct verbs_domain *dom = (struct verbs_domain *)base;
    struct gx_fab_conn_param def = GX_FAB_CONN_PARAM_INIT;
    if (!param)
        param = &def;
    struct gx_sockaddr sa;
    int rc = gx_fab_sock_addr_unpack("verbs", peer, GX_VERBS_ADDR_MAGIC, GX_VERBS_VERSION, &sa);
    if (rc != GX_OK)
        return rc;
    struct verbs_ep *ep;
    rc = verbs_ep_alloc(dom, (struct verbs_cq *)cq, dom->set.nqps,
                        (uint32_t)gx_fab_queue_depth(), &ep);
    if (rc != GX_OK)
        return rc;
    ep->peer_sa = sa;
    ep->base.peer_rank = param->peer_rank;
    ep_name(ep, param->peer_rank);
    ep->deadline = gx_fab_sock_connect_deadline(param);
    rc = start_tcp(ep);
    if (rc < 0) {
        verbs_ep_free(ep);
        return rc;
    }
    *out = &ep->base;
    return GX_OK;
}

static int establish_step(struct verbs_ep *ep)
{
    struct verbs_domain *dom = ep->dom;
    int rc;
    if (ep->fd < 0) {
        rc = start_tcp(ep);
        if (rc != GX_OK || ep->fd < 0)
            return rc == GX_OK ? GX_INPROGRESS : rc;
    }
    switch (ep->stage) {
    case CM_TCP: {
        rc = gx_fab_sock_connect_check("verbs", &ep->fd, ep->base.name);
        if (rc != GX_OK)
            return rc; /* GX_INPROGRESS: still connecting, or refused and retried */
        ep->stage = CM_CHALLENGE;
        ep->cmgot = 0;
        return GX_INPROGRESS;
    }
    case CM_CHALLENGE: {
        struct gx_auth_challenge ch;
        rc = read_some(ep->fd, ep->cmbuf, sizeof(ch), &ep->cmgot);
        if (rc != GX_OK)
            return rc == GX_EPEER ? gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: %s closed the "
                                            "side channel before the handshake", ep->base.name)
                                  : rc;
        memcpy(&ch, ep->cmbuf, sizeof(ch));
        rc = gx_auth_client_respond(&dom->key, &ch, GX_VERBS_AUTH_PURPOSE, dom->base.rank, 0,
                                    &ep->hello);
        if (rc != GX_OK)
            return gx_fail(rc, GX_SUB_FABRIC, "verbs: %s is not a gx listener (bad challenge)",
                           ep->base.name);
        struct {
            struct gx_auth_hello hello;
            struct gx_verbs_conn req;
        } msg;
        msg.hello = ep->hello;
        verbs_conn_fill(ep, &msg.req, GX_VERBS_CONN_REQ);
        bool same = gx_auth_same_job(&dom->key, &ch);
        if (send_small(ep->fd, &msg, same ? sizeof(msg) : sizeof(msg.hello)) != GX_OK || !same)
            return gx_fail(GX_EAUTH, GX_SUB_FABRIC, "verbs: %s refused our job key, or is "
                           "another job (check GX_JOB_KEY on both sides)", ep->base.name);
        ep->stage = CM_PROOF;
        ep->cmgot = 0;
        return GX_INPROGRESS;
    }
    case CM_PROOF: {
        struct gx_auth_accept acc;
        rc = read_some(ep->fd, ep->cmbuf, sizeof(acc), &ep->cmgot);
        if (rc == GX_EPEER)
            return gx_fail(GX_EAUTH, GX_SUB_FABRIC, "verbs: %s refused our job key, or is "
                           "another job (check GX_JOB_KEY on both sides)", ep->base.name);
        if (rc != GX_OK)
            return rc;
        memcpy(&acc, ep->cmbuf, sizeof(acc));
        if (gx_auth_client_check(&dom->key, &ep->hello, &acc) != GX_OK)
            return gx_fail(GX_EAUTH, GX_SUB_FABRIC, "verbs: %s could not prove it knows the job "
                           "key", ep->base.name);
        ep->stage = CM_REP;
        ep->cmgot = 0;
        return GX_INPROGRESS;
    }
    case CM_REP: {
        rc = read_some(ep->fd, ep->cmbuf, sizeof(struct gx_verbs_conn), &ep->cmgot);
        if (rc == GX_EPEER)
            return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: %s closed during set-up (see its "
                           "log: QP creation or transition failed?)", ep->base.name);
        if (rc != GX_OK)
            return rc;
        struct gx_verbs_conn rep;
        memcpy(&rep, ep->cmbuf, sizeof(rep));
        rc = conn_check(dom, &rep, GX_VERBS_CONN_REP, ep->base.name);
        if (rc != GX_OK)
            return rc;
        if (rep.nqps != ep->nqps || rep.depth != ep->depth)
            return gx_fail(GX_EPROTO, GX_SUB_FABRIC, "verbs: %s answered with %u QPs of depth "
                           "%u, we asked for %d of %u", ep->base.name, rep.nqps, rep.depth,
                           ep->nqps, ep->depth);
        ep->peer = rep;
        ep_name(ep, ep->base.peer_rank);
        if (dom->set.cm_rdmacm) {
            rc = verbs_rdmacm_connect_start(ep, rep.reserved);
            if (rc != GX_OK)
                return rc;
            ep->stage = CM_RDMACM;
            return GX_INPROGRESS;
        }
        rc = bring_up(ep);
        if (rc != GX_OK)
            return rc;
        return send_ready(ep);
    }
    case CM_RDMACM: {
        rc = verbs_rdmacm_connect_step(ep);
        if (rc != GX_OK)
            return rc;
        return send_ready(ep);
    }
    default:
        return GX_OK;
    }
}

/* Connector: our QPs are RTS; the acceptor may return its endpoint. */
static int send_ready(struct verbs_ep *ep)
{
    struct gx_verbs_conn ready;
    verbs_conn_fill(ep, &ready, GX_VERBS_CONN_READY);
    if (send_small(ep->fd, &ready, sizeof(ready)) != GX_OK)
        return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "verbs: %s closed during set-up",
                       ep->base.name);
    ep->stage = CM_DONE;
    ep->cmgot = 0;
    return GX_OK;
}

int verbs_ep_establish(struct gx_fab_ep *base)
{
    struct verbs_ep *ep = (struct verbs_ep *)base;
    if (ep->state == VEP_ESTABLISHED)
        return GX_OK;
    if (ep->state == VEP_ERROR)
        return ep->error;
    int rc;
    enum verbs_cm_stage before;
    do { /* run the stages whose input is already there */
        before = ep->stage;
        rc = establish_step(ep);
    } while (rc == GX_INPROGRESS && ep->stage != before);
    if (rc == GX_OK) {
        ep->state = VEP_ESTABLISHED;
        GX_INFO(GX_SUB_FABRIC, "verbs: connected %s, %d QP(s)", ep->base.name, ep->nqps);
        return GX_OK;
    }
    if (rc == GX_INPROGRESS && gx_now_ns() > ep->deadline)
        rc = gx_fail(GX_ETIMEOUT, GX_SUB_FABRIC, "verbs: connecting %s: set-up not finished "
                     "before the deadline (is the peer accepting?)", ep->base.name);
    if (rc != GX_INPROGRESS) {
        ep->state = VEP_ERROR;
        ep->error = rc;
    }
    return rc;
}

/* ---- after set-up ------------------------------------------------------------ */
void verbs_cm_notify(struct verbs_ep *ep, int type, int status, int wc_status)
{
    if (ep->fd < 0 || ep->stage != CM_DONE || ep->bye_sent)
        return;
    struct gx_verbs_ctl m = { .magic = GX_VERBS_CTL_MAGIC, .type = (uint16_t)type,
                              .wc_status = (uint16_t)wc_status, .status = status };
    (void)!send(ep->fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
    ep->bye_sent = true; /* one message: the first reason is the one that counts */
}

static void side_channel_event(struct verbs_ep *ep)
{
    int rc = read_some(ep->fd, ep->cmbuf, sizeof(struct gx_verbs_ctl), &ep->cmgot);
    if (rc == GX_INPROGRESS)
        return;
    /* Completions that arrived before the peer went away are delivered
     * first: drain the hardware queue before failing the endpoint. */
    verbs_cq_drain(ep->cq);
    if (ep->state != VEP_ESTABLISHED)
        return;
    if (rc == GX_EPEER) {
        verbs_ep_fail(ep, GX_EPEER, 0, FAIL_NONE, "the peer's side channel closed: its process "
                      "exited or crashed (host %s)", ep->peer_host);
        return;
    }
    struct gx_verbs_ctl m;
    memcpy(&m, ep->cmbuf, sizeof(m));
    ep->cmgot = 0;
    if (m.magic != GX_VERBS_CTL_MAGIC) {
        verbs_ep_fail(ep, GX_EPROTO, 0, FAIL_NONE, "garbage on the side channel");
        return;
    }
    if (m.type == GX_VERBS_CTL_BYE) {
        verbs_ep_fail(ep, GX_EPEER, 0, FAIL_NONE, "the peer closed the endpoint");
        return;
    }
    int st = m.status == GX_EPROTO || m.status == GX_ETRUNCATE ? m.status : GX_EPEER;
    verbs_ep_fail(ep, st, m.wc_status, FAIL_NONE, "the peer's end failed with %s (see the "
                  "peer's log, host %s)", gx_strerror(m.status), ep->peer_host);
}

void verbs_cm_liveness(struct verbs_cq *cq)
{
    enum { CHUNK = 64 };
    struct pollfd pfd[CHUNK];
    struct verbs_ep *eps[CHUNK];
    for (int base = 0; base < cq->sw.neps; base += CHUNK) {
        int n = 0;
        for (int i = base; i < cq->sw.neps && n < CHUNK; i++) {
            struct verbs_ep *ep = (struct verbs_ep *)cq->sw.eps[i];
            if (ep->state != VEP_ESTABLISHED || ep->fd < 0)
                continue;
            pfd[n].fd = ep->fd;
            pfd[n].events = POLLIN;
            pfd[n].revents = 0;
            eps[n++] = ep;
        }
        if (n == 0 || poll(pfd, (nfds_t)n, 0) <= 0)
            continue;
        for (int i = 0; i < n; i++)
            if (pfd[i].revents)
                side_channel_event(eps[i]);
    }
}

int verbs_cm_wait_fds(struct verbs_cq *cq, struct pollfd *fds, int max)
{
    int n = 0;
    for (int i = 0; i < cq->sw.neps; i++) {
        struct verbs_ep *ep = (struct verbs_ep *)cq->sw.eps[i];
        if (ep->state == VEP_ERROR || ep->fd < 0)
            continue;
        if (n == max)
            return -1;
        fds[n++] = (struct pollfd){ .fd = ep->fd, .events = POLLIN };
    }
    for (int k = 0; k < VERBS_CQ_LISTENERS; k++) {
        struct verbs_listener *l = (struct verbs_listener *)cq->lst[k];
        if (!l)
            continue;
        if (n + 1 + l->half.n > max)
            return -1;
        fds[n++] = (struct pollfd){ .fd = l->fd, .events = POLLIN };
        for (int i = 0; i < l->half.n; i++)
            fds[n++] = (struct pollfd){ .fd = half_at(l, i)->s.fd, .events = POLLIN };
    }
    int cm_fd = verbs_rdmacm_wait_fd(cq->dom);
    if (cm_fd >= 0) {
        if (n == max)
            return -1;
        fds[n++] = (struct pollfd){ .fd = cm_fd, .events = POLLIN };
    }
    return n;
}
