/*
 * dpdk_conn.c - dpdk connection set-up over the authenticated side channel
 * (a TCP socket on the GX_SOCKET_IFNAME interface, the job-key handshake of
 * common/auth.h with purpose GX_AUTH_DPDK_CM), then the exchange of
 * struct gx_dpdk_conn_info both ways: MAC, IPv4, UDP port, MTU, connection
 * id, cookie and first PSN. No ARP: ranks learn each other's addresses here.
 *
 * The socket then stays open as the liveness signal: its EOF (the peer
 * exited, crashed or closed the endpoint) fails the endpoint at once; a peer
 * that is alive but silent (stopped) is named after the retransmit budget
 * (dpdk_tx.c). Endpoint close and per-poll progress live here too.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/dpdk/dpdk.h"

GX_FAB_SOCK_ADDR_LAYOUT_CHECK(struct gx_dpdk_addr);

enum { CM_START, CM_TCP, CM_CHALLENGE, CM_INFO, CM_DONE };

struct dpdk_half {
    struct gx_fab_sock_half h;
    bool authed;
    struct gx_dpdk_conn_info info;
    size_t got;
};

struct dpdk_listener {
    struct gx_fab_listener base;
    struct dpdk_domain *dom;
    int fd;
    struct gx_fab_sock_pending half; /* of struct dpdk_half */
};

static void fill_info(const struct dpdk_ep *ep, struct gx_dpdk_conn_info *ci)
{
    memset(ci, 0, sizeof(*ci));
    uint32_t ip;
    dpdk_port_local(ci->mac, &ip, &ci->udp_port, &ci->mtu);
    if (!ip && ep->dom->local.u.sa.sa_family == AF_INET)
        ip = ep->dom->local.u.in4.sin_addr.s_addr;
    ci->magic = GX_DPDK_CM_MAGIC;
    ci->version = GX_DPDK_VERSION;
    ci->ip = ip;
    ci->conn_id = ep->conn_id;
    ci->cookie = ep->cookie;
    ci->first_psn = ep->psn_next;
    ci->rank = ep->dom->base.rank;
}

/* The peer's info is in: addresses, ids, PSNs, segment size. */
static int apply_info(struct dpdk_ep *ep, const struct gx_dpdk_conn_info *pi)
{
    if (pi->magic != GX_DPDK_CM_MAGIC || pi->version != GX_DPDK_VERSION || pi->mtu < 576)
        return gx_fail(GX_EPROTO, GX_SUB_FABRIC, "dpdk: %s sent a malformed connection record "
                       "(magic %#x version %u mtu %u)", ep->base.name, pi->magic, pi->version,
                       pi->mtu);
    struct gx_dpdk_conn_info mine;
    fill_info(ep, &mine);
    uint16_t mtu = pi->mtu < mine.mtu ? pi->mtu : mine.mtu;
    ep->mss = (uint32_t)(mtu - GX_DPDK_IP_LEN - GX_DPDK_UDP_LEN - sizeof(struct gx_dpdk_hdr));
    uint64_t cap = dpdk_tuning.inflight_max / ep->mss;
    ep->cwnd_cap = (uint32_t)(cap > GX_DPDK_WINDOW ? GX_DPDK_WINDOW
                              : cap < dpdk_tuning.cwnd_min ? dpdk_tuning.cwnd_min : cap);
    memcpy(ep->addr.src_mac, mine.mac, 6);
    memcpy(ep->addr.dst_mac, pi->mac, 6);
    ep->addr.src_ip = mine.ip;
    ep->addr.dst_ip = pi->ip;
    ep->addr.src_port = mine.udp_port;
    ep->addr.dst_port = pi->udp_port;
    ep->peer_conn_id = pi->conn_id;
    ep->peer_cookie = pi->cookie;
    ep->rcv_nxt = ep->rcv_high = pi->first_psn;
    ep->heard_ns = ep->progress_ns = gx_now_ns();
    ep->next_fd_check_ns = ep->heard_ns + dpdk_tuning.fd_check_ns;
    ep->state = EP_ESTABLISHED;
    dpdk_port_peer_up();
    return GX_OK;
}

/* Read what has arrived of a record; GX_OK when complete. */
static int read_info(int fd, struct gx_dpdk_conn_info *ci, size_t *got)
{
    while (*got < sizeof(*ci)) {
        ssize_t n = recv(fd, (char *)ci + *got, sizeof(*ci) - *got, MSG_DONTWAIT);
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

static int send_info(const struct dpdk_ep *ep, int fd)
{
    struct gx_dpdk_conn_info ci;
    fill_info(ep, &ci);
    ssize_t n = send(fd, &ci, sizeof(ci), MSG_NOSIGNAL);
    if (n != (ssize_t)sizeof(ci))
        return gx_fail(GX_EPEER, GX_SUB_FABRIC, "dpdk: sending the connection record to %s: %m",
                       ep->base.name);
    return GX_OK;
}

/* ---- listener ----------------------------------------------------------- */
int dpdk_listen(struct gx_fab_domain *base, struct gx_fab_cq *cq, struct gx_fab_listener **out,
                struct gx_fab_addr *addr_out)
{
    struct dpdk_domain *dom = (struct dpdk_domain *)base;
    struct dpdk_listener *l = calloc(1, sizeof(*l));
    if (!l)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "dpdk: out of memory creating a listener");
    int rc = gx_fab_sock_listen("dpdk", &dom->local, dom->ifname, GX_DPDK_ADDR_MAGIC,
                                GX_DPDK_VERSION, &l->fd, addr_out);
    if (rc != GX_OK) {
        free(l);
        return rc;
    }
    gx_fab_sock_pending_init(&l->half, sizeof(struct dpdk_half));
    l->base.dom = base;
    l->base.cq = cq;
    l->dom = dom;
    *out = &l->base;
    return GX_OK;
}

void dpdk_listener_close(struct gx_fab_listener *base)
{
    struct dpdk_listener *l = (struct dpdk_listener *)base;
    close(l->fd);
    for (int i = 0; i < l->half.n; i++)
        close(gx_fab_sock_pending_at(&l->half, i)->fd);
    gx_fab_sock_pending_free(&l->half);
    free(l);
}

static int make_accepted_ep(struct dpdk_listener *l, struct dpdk_half *d, struct gx_fab_ep **out)
{
    struct dpdk_ep *ep = dpdk_ep_alloc(l->dom, (struct dpdk_cq *)l->base.cq);
    if (!ep)
        return GX_ENOMEM;
    char a[64];
    int rank = d->h.auth.hello.rank;
    gx_fab_ep_set_name(&ep->base, "dpdk", rank, gx_sock_addr_str(&d->h.from, a, sizeof(a)));
    ep->base.peer_rank = rank;
    ep->fd = d->h.fd;
    int rc = send_info(ep, ep->fd);
    if (rc == GX_OK)
        rc = apply_info(ep, &d->info);
    if (rc != GX_OK) {
        dpdk_ep_free(ep);
        return rc;
    }
    GX_INFO(GX_SUB_FABRIC, "dpdk: accepted %s (segments of %u bytes)", ep->base.name, ep->mss);
    *out = &ep->base;
    return GX_OK;
}

int dpdk_accept(struct gx_fab_listener *base, struct gx_fab_ep **out)
{
    struct dpdk_listener *l = (struct dpdk_listener *)base;
    int rc = gx_fab_sock_accept_new("dpdk", l->fd, &l->dom->key, &l->half);
    if (rc != GX_OK)
        return rc;
    for (int i = 0; i < l->half.n;) {
        struct dpdk_half *d = (struct dpdk_half *)gx_fab_sock_pending_at(&l->half, i);
        if (!d->authed) {
            rc = gx_fab_sock_half_auth("dpdk", &d->h, &l->dom->key, GX_AUTH_DPDK_CM,
                                       "dpdk connection");
            if (rc == GX_OK)
                d->authed = true;
        } else {
            rc = read_info(d->h.fd, &d->info, &d->got);
        }
        if (rc == GX_INPROGRESS || (rc == GX_OK && d->got < sizeof(d->info))) {
            if (gx_fab_sock_half_expired("dpdk", &d->h, "no connection record")) {
                close(d->h.fd);
                gx_fab_sock_pending_remove(&l->half, i);
                continue;
            }
            i++;
            continue;
        }
        struct dpdk_half done = *d;
        gx_fab_sock_pending_remove(&l->half, i);
        if (rc != GX_OK) {
            close(done.h.fd);
            continue;
        }
        rc = make_accepted_ep(l, &done, out);
        if (rc != GX_OK)
            close(done.h.fd);
        return rc;
    }
    return GX_INPROGRESS;
}

/* ---- connector ---------------------------------------------------------- */
int dpdk_connect(struct gx_fab_domain *base, struct gx_fab_cq *cq, const struct gx_fab_addr *peer,
                 const struct gx_fab_conn_param *param, struct gx_fab_ep **out)
{
    struct dpdk_domain *dom = (struct dpdk_domain *)base;
    struct gx_fab_conn_param def = GX_FAB_CONN_PARAM_INIT;
    if (!param)
        param = &def;
    struct gx_sockaddr sa;
    int rc = gx_fab_sock_addr_unpack("dpdk", peer, GX_DPDK_ADDR_MAGIC, GX_DPDK_VERSION, &sa);
    if (rc != GX_OK)
        return rc;
    struct dpdk_ep *ep = dpdk_ep_alloc(dom, (struct dpdk_cq *)cq);
    if (!ep)
        return GX_ENOMEM;
    ep->peer_sa = sa;
    ep->base.peer_rank = param->peer_rank;
    char a[64];
    gx_fab_ep_set_name(&ep->base, "dpdk", param->peer_rank, gx_sock_addr_str(&sa, a, sizeof(a)));
    ep->deadline = gx_fab_sock_connect_deadline(param);
    ep->cm_stage = CM_START;
    *out = &ep->base;
    return GX_OK;
}

static int establish_step(struct dpdk_ep *ep)
{
    int rc;
    switch (ep->cm_stage) {
    case CM_START:
        rc = gx_fab_sock_connect_start("dpdk", &ep->peer_sa, ep->base.name, &ep->fd);
        if (rc != GX_OK || ep->fd < 0)
            return rc == GX_OK ? GX_INPROGRESS : rc;
        ep->cm_stage = CM_TCP;
        return GX_INPROGRESS;
    case CM_TCP:
        rc = gx_fab_sock_connect_check("dpdk", &ep->fd, ep->base.name);
        if (rc == GX_INPROGRESS && ep->fd < 0)
            ep->cm_stage = CM_START; /* refused: not listening yet */
        if (rc != GX_OK)
            return rc;
        ep->cm_stage = CM_CHALLENGE;
        gx_auth_client_start(&ep->auth, ep->fd, &ep->dom->key, GX_AUTH_DPDK_CM,
                             ep->dom->base.rank, ep->conn_id);
        return GX_INPROGRESS;
    case CM_CHALLENGE: {
        /* Never waits: the acceptor may be a rank connecting to us now. */
        rc = gx_auth_client_progress(&ep->auth);
        if (rc == GX_INPROGRESS)
            return GX_INPROGRESS;
        if (rc == GX_EAUTH)
            return gx_fail(GX_EAUTH, GX_SUB_FABRIC, "dpdk: %s refused our job key, or is another "
                           "job (check GX_JOB_KEY on both sides)", ep->base.name);
        if (rc != GX_OK)
            return gx_fail(rc, GX_SUB_FABRIC, "dpdk: handshake with %s failed: %s",
                           ep->base.name, gx_strerror(rc));
        rc = send_info(ep, ep->fd);
        if (rc != GX_OK)
            return rc;
        ep->cm_stage = CM_INFO;
        return GX_INPROGRESS;
    }
    case CM_INFO:
        rc = read_info(ep->fd, &ep->peer_info, &ep->peer_info_got);
        if (rc == GX_EPEER)
            return gx_fail(GX_EPEER, GX_SUB_FABRIC, "dpdk: %s closed the side channel before "
                           "sending its connection record", ep->base.name);
        if (rc != GX_OK)
            return rc;
        rc = apply_info(ep, &ep->peer_info);
        if (rc != GX_OK)
            return rc;
        ep->cm_stage = CM_DONE;
        GX_INFO(GX_SUB_FABRIC, "dpdk: connected %s (segments of %u bytes)", ep->base.name,
                ep->mss);
        return GX_OK;
    default:
        return GX_OK;
    }
}

int dpdk_ep_establish(struct gx_fab_ep *base)
{
    struct dpdk_ep *ep = (struct dpdk_ep *)base;
    if (ep->state == EP_ESTABLISHED)
        return GX_OK;
    if (ep->state == EP_ERROR)
        return ep->error;
    int rc = establish_step(ep);
    if (rc == GX_INPROGRESS && gx_now_ns() > ep->deadline)
        rc = gx_fail(GX_ETIMEOUT, GX_SUB_FABRIC, "dpdk: connecting %s timed out (is the peer "
                     "accepting?)", ep->base.name);
    if (rc != GX_OK && rc != GX_INPROGRESS) {
        ep->state = EP_ERROR;
        ep->error = rc;
    }
    return rc;
}

/* ---- per-poll work and close -------------------------------------------- */
static void check_side_channel(struct dpdk_ep *ep, uint64_t now)
{
    ep->next_fd_check_ns = now + dpdk_tuning.fd_check_ns;
    for (;;) {
        ssize_t n = recv(ep->fd, ep->side_buf + ep->side_got,
                         sizeof(ep->side_buf) - ep->side_got, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            dpdk_ep_fail(ep, GX_EPEER, n < 0 ? errno : 0, false, "the peer closed its side "
                         "channel (process exited or endpoint closed)");
            return;
        }
        if (n < 0)
            return;
        ep->side_got += (size_t)n;
        size_t off = 0;
        for (; ep->side_got - off >= sizeof(struct gx_dpdk_side_ack);
             off += sizeof(struct gx_dpdk_side_ack)) {
            struct gx_dpdk_side_ack a;
            memcpy(&a, ep->side_buf + off, sizeof(a));
            if (a.magic != GX_DPDK_SIDE_ACK_MAGIC) {
                dpdk_ep_fail(ep, GX_EPROTO, 0, true, "garbage on the side channel (magic %#x)",
                             a.magic);
                return;
            }
            struct gx_dpdk_hdr h = { .ack = a.ack };
            ep->heard_ns = now;
            dpdk_tx_ack_in(ep, &h, NULL, 0);
        }
        memmove(ep->side_buf, ep->side_buf + off, ep->side_got - off);
        ep->side_got -= off;
    }
}

void dpdk_ep_progress(struct gx_fab_ep *base)
{
    struct dpdk_ep *ep = (struct dpdk_ep *)base;
    if (ep->state != EP_ESTABLISHED)
        return;
    uint64_t t0 = dpdk_port_cpu_ns(), sent = ep->n_data_tx;
    bool acking = ep->ack_due;
    dpdk_rx_send_ack(ep);
    dpdk_tx_progress(ep);
    if (ep->n_data_tx != sent || (acking && !ep->ack_due))
        dpdk_port_work(t0);
    uint64_t now = gx_now_ns();
    /* Waiting for an ACK after a probe: look at the side channel now. */
    if (ep->probed && ep->snd_una != ep->snd_nxt)
        ep->next_fd_check_ns = 0;
    if (ep->state == EP_ESTABLISHED && now >= ep->next_fd_check_ns)
        check_side_channel(ep, now);
}

void dpdk_ep_close(struct gx_fab_ep *base)
{
    struct dpdk_ep *ep = (struct dpdk_ep *)base;
    if (ep->state == EP_ESTABLISHED)
        dpdk_tx_ctrl(ep, GX_DPDK_T_CLOSE, 0, NULL, 0);
    if (ep->state != EP_ERROR) {
        ep->state = EP_ERROR;
        ep->error = GX_EABORTED;
        dpdk_ep_flush_all(ep, GX_EABORTED, 0);
    }
    dpdk_ep_free(ep);
}
