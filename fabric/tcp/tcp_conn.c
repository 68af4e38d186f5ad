/*
 * tcp_conn.c - tcp provider connection set-up: a listener on the interface
 * GX_SOCKET_IFNAME selects, connectors opening GX_TCP_NSTREAMS sockets, and
 * the job-key handshake on every socket. Everything is non-blocking for the
 * acceptor: a silent or hostile connection never stalls the others, and is
 * dropped with a log line at its deadline.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/tcp/tcp.h"

GX_FAB_SOCK_ADDR_LAYOUT_CHECK(struct gx_tcp_addr);

/* ---- listener ----------------------------------------------------------- */
int tcp_listen(struct gx_fab_domain *base, struct gx_fab_cq *cq, struct gx_fab_listener **out,
               struct gx_fab_addr *addr_out)
{
    struct tcp_domain *dom = (struct tcp_domain *)base;
    struct tcp_listener *l = calloc(1, sizeof(*l));
    if (!l)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "tcp: out of memory creating a listener");
    int rc = gx_fab_sock_listen("tcp", &dom->local, dom->ifname, GX_TCP_ADDR_MAGIC,
                                GX_TCP_VERSION, &l->fd, addr_out);
    if (rc != GX_OK) {
        free(l);
        return rc;
    }
    gx_fab_sock_pending_init(&l->half, sizeof(struct gx_fab_sock_half));
    l->base.dom = base;
    l->base.cq = cq;
    l->dom = dom;
    struct tcp_cq *tcq = (struct tcp_cq *)cq;
    for (int i = 0; i < TCP_CQ_LISTENERS; i++) {
        if (!tcq->lst[i]) {
            tcq->lst[i] = l;
            break;
        }
    }
    *out = &l->base;
    return GX_OK;
}

void tcp_listener_close(struct gx_fab_listener *base)
{
    struct tcp_listener *l = (struct tcp_listener *)base;
    struct tcp_cq *tcq = (struct tcp_cq *)l->base.cq;
    for (int i = 0; i < TCP_CQ_LISTENERS; i++)
        if (tcq->lst[i] == l)
            tcq->lst[i] = NULL;
    close(l->fd);
    for (int i = 0; i < l->half.n; i++)
        close(gx_fab_sock_pending_at(&l->half, i)->fd);
    for (int i = 0; i < l->ngroups; i++)
        for (int j = 0; j < l->groups[i].nstreams; j++)
            if (l->groups[i].fds[j] >= 0)
                close(l->groups[i].fds[j]);
    gx_fab_sock_pending_free(&l->half);
    free(l->groups);
    free(l);
}

static void drop_half(struct tcp_listener *l, int i, bool close_fd)
{
    if (close_fd)
        close(gx_fab_sock_pending_at(&l->half, i)->fd);
    gx_fab_sock_pending_remove(&l->half, i);
}

/* An authenticated stream: file it into its connection's group. */
static void file_stream(struct tcp_listener *l, const struct gx_fab_sock_half *h)
{
    char a[64];
    uint64_t id = h->auth.hello.conn_id;
    uint64_t token = id >> 16;
    int nstreams = (int)((id >> 8) & 0xff), idx = (int)(id & 0xff);
    int rank = h->auth.hello.rank;
    if (nstreams < 1 || nstreams > GX_TCP_MAX_STREAMS || idx >= nstreams) {
        GX_WARN(GX_SUB_FABRIC, "tcp: dropped connection from %s (rank %d): bad stream %d of %d",
                gx_sock_addr_str(&h->from, a, sizeof(a)), rank, idx, nstreams);
        close(h->fd);
        return;
    }
    struct tcp_group *g = NULL;
    for (int i = 0; i < l->ngroups; i++)
        if (l->groups[i].rank == rank && l->groups[i].token == token)
            g = &l->groups[i];
    if (!g) {
        if (gx_fab_sock_grow("tcp", (void **)&l->groups, &l->groups_cap, l->ngroups,
                             sizeof(*g)) != GX_OK) {
            close(h->fd);
            return;
        }
        g = &l->groups[l->ngroups++];
        memset(g, 0, sizeof(*g));
        g->rank = rank;
        g->token = token;
        g->nstreams = nstreams;
        g->deadline = h->deadline;
        g->from = h->from;
        for (int j = 0; j < GX_TCP_MAX_STREAMS; j++)
            g->fds[j] = -1;
    }
    if (g->nstreams != nstreams || g->fds[idx] >= 0) {
        GX_WARN(GX_SUB_FABRIC, "tcp: dropped duplicate or inconsistent stream %d from rank %d (%s)",
                idx, rank, gx_sock_addr_str(&h->from, a, sizeof(a)));
        close(h->fd);
        return;
    }
    g->fds[idx] = h->fd;
    g->have++;
}

static int make_accepted_ep(struct tcp_listener *l, struct tcp_group *g, struct gx_fab_ep **out)
{
    struct tcp_ep *ep;
    int rc = tcp_ep_alloc(l->dom, (struct tcp_cq *)l->base.cq, g->nstreams, &ep);
    if (rc != GX_OK)
        return rc;
    for (int i = 0; i < g->nstreams; i++) {
        ep->streams[i].fd = g->fds[i];
        ep->streams[i].stage = STAGE_READY;
        tcp_stream_ready(l->dom, g->fds[i]);
        g->fds[i] = -1;
    }
    char a[64];
    gx_fab_ep_set_name(&ep->base, "tcp", g->rank, gx_sock_addr_str(&g->from, a, sizeof(a)));
    ep->base.peer_rank = g->rank;
    ep->state = EP_ESTABLISHED;
    GX_INFO(GX_SUB_FABRIC, "tcp: accepted %s with %d streams", ep->base.name, g->nstreams);
    *out = &ep->base;
    return GX_OK;
}

int tcp_accept(struct gx_fab_listener *base, struct gx_fab_ep **out)
{
    struct tcp_listener *l = (struct tcp_listener *)base;
    /* 1. New sockets: send the challenge. */
    int rc = gx_fab_sock_accept_new("tcp", l->fd, &l->dom->key, &l->half);
    if (rc != GX_OK)
        return rc;
    /* 2. Handshakes in progress. */
    for (int i = 0; i < l->half.n;) {
        struct gx_fab_sock_half *h = gx_fab_sock_pending_at(&l->half, i);
        rc = gx_fab_sock_half_auth("tcp", h, &l->dom->key, GX_AUTH_TCP_DATA, "tcp data stream");
        if (rc == GX_INPROGRESS) {
            if (gx_fab_sock_half_expired("tcp", h, "no handshake")) {
                drop_half(l, i, true);
                continue;
            }
            i++;
            continue;
        }
        if (rc == GX_OK) {
            struct gx_fab_sock_half done = *h;
            drop_half(l, i, false);
            file_stream(l, &done);
            continue;
        }
        drop_half(l, i, true);
    }
    /* 3. A complete group becomes an endpoint; stale partial ones are dropped. */
    for (int i = 0; i < l->ngroups; i++) {
        struct tcp_group *g = &l->groups[i];
        if (g->have == g->nstreams) {
            rc = make_accepted_ep(l, g, out);
            l->groups[i] = l->groups[--l->ngroups];
            return rc;
        }
        if (gx_now_ns() > g->deadline + 1000000000ull) {
            GX_WARN(GX_SUB_FABRIC, "tcp: dropped half-open connection from rank %d: %d of %d "
                    "streams arrived", g->rank, g->have, g->nstreams);
            for (int j = 0; j < g->nstreams; j++)
                if (g->fds[j] >= 0)
                    close(g->fds[j]);
            l->groups[i--] = l->groups[--l->ngroups];
        }
    }
    return GX_INPROGRESS;
}

/* ---- connector ---------------------------------------------------------- */
static int stream_start_connect(struct tcp_ep *ep, struct tcp_stream *s)
{
    /* Rails: leave from this domain's interface to peers on its subnet
     * (elsewhere routing decides, and a bound source could be dropped by
     * reverse-path filtering on the way back). */
    struct tcp_domain *dom = ep->dom;
    const struct gx_sockaddr *src =
        dom->rail >= 0 && gx_sock_same_subnet(&dom->local, &dom->mask, &ep->peer) ? &dom->local
                                                                                   : NULL;
    int rc = gx_fab_sock_connect_start_from("tcp", src, &ep->peer, ep->base.name, &s->fd);
    if (rc != GX_OK)
        return rc; /* GX_INPROGRESS: refused, retried until the deadline */
    s->stage = STAGE_TCP;
    return GX_OK;
}

int tcp_connect(struct gx_fab_domain *base, struct gx_fab_cq *cq, const struct gx_fab_addr *peer,
                const struct gx_fab_conn_param *param, struct gx_fab_ep **out)
{
    struct tcp_domain *dom = (struct tcp_domain *)base;
    struct gx_fab_conn_param def = GX_FAB_CONN_PARAM_INIT;
    if (!param)
        param = &def;
    struct gx_sockaddr sa;
    int rc = gx_fab_sock_addr_unpack("tcp", peer, GX_TCP_ADDR_MAGIC, GX_TCP_VERSION, &sa);
    if (rc != GX_OK)
        return rc;
    struct tcp_ep *ep;
    rc = tcp_ep_alloc(dom, (struct tcp_cq *)cq, dom->nstreams, &ep);
    if (rc != GX_OK)
        return rc;
    ep->peer = sa;
    ep->base.peer_rank = param->peer_rank;
    char a[64];
    gx_fab_ep_set_name(&ep->base, "tcp", param->peer_rank, gx_sock_addr_str(&sa, a, sizeof(a)));
    ep->deadline = gx_fab_sock_connect_deadline(param);
    if (gx_random_bytes(&ep->token, sizeof(ep->token)) != GX_OK)
        ep->token = gx_now_ns();
    ep->token &= (1ull << 48) - 1;
    for (int i = 0; i < ep->nstreams; i++) {
        rc = stream_start_connect(ep, &ep->streams[i]);
        if (rc < 0) {
            tcp_ep_free(ep);
            return rc;
        }
    }
    *out = &ep->base;
    return GX_OK;
}

/* Advance one stream's set-up; GX_OK once authenticated. */
static int stream_establish(struct tcp_ep *ep, int idx)
{
    struct tcp_stream *s = &ep->streams[idx];
    if (s->stage == STAGE_READY)
        return GX_OK;
    if (s->fd < 0) {
        int rc = stream_start_connect(ep, s);
        if (rc != GX_OK)
            return rc;
        if (s->fd < 0)
            return GX_INPROGRESS;
    }
    if (s->stage == STAGE_TCP) {
        int rc = gx_fab_sock_connect_check("tcp", &s->fd, ep->base.name);
        if (rc != GX_OK)
            return rc; /* GX_INPROGRESS: still connecting, or refused and retried */
        s->stage = STAGE_CHALLENGE;
        gx_auth_client_start(&s->auth, s->fd, &ep->dom->key, GX_AUTH_TCP_DATA,
                             ep->dom->base.rank,
                             gx_tcp_conn_id(ep->token, (unsigned)ep->nstreams, (unsigned)idx));
        return GX_INPROGRESS;
    }
    /* Never waits: the acceptor answers from its own accept loop, which may
     * be the one of a rank connecting to us at this moment. */
    int rc = gx_auth_client_progress(&s->auth);
    switch (rc) {
    case GX_INPROGRESS:
        return GX_INPROGRESS;
    case GX_OK:
        s->stage = STAGE_READY;
        tcp_stream_ready(ep->dom, s->fd);
        return GX_OK;
    case GX_EAUTH:
        return gx_fail(GX_EAUTH, GX_SUB_FABRIC, "tcp: %s refused our job key, or is another job "
                       "(check GX_JOB_KEY on both sides)", ep->base.name);
    case GX_EPROTO:
        return gx_fail(GX_EPROTO, GX_SUB_FABRIC, "tcp: %s is not a gx tcp listener or speaks "
                       "another handshake version", ep->base.name);
    case GX_ETIMEOUT:
        return gx_fail(GX_ETIMEOUT, GX_SUB_FABRIC, "tcp: handshake with %s timed out",
                       ep->base.name);
    default:
        return gx_fail(rc, GX_SUB_FABRIC, "tcp: handshake with %s failed: %s", ep->base.name,
                       gx_strerror(rc));
    }
}

int tcp_ep_establish(struct gx_fab_ep *base)
{
    struct tcp_ep *ep = (struct tcp_ep *)base;
    if (ep->state == EP_ESTABLISHED)
        return GX_OK;
    if (ep->state == EP_ERROR)
        return ep->error;
    int ready = 0;
    for (int i = 0; i < ep->nstreams; i++) {
        int rc = stream_establish(ep, i);
        if (rc == GX_OK) {
            ready++;
        } else if (rc != GX_INPROGRESS) {
            ep->state = EP_ERROR;
            ep->error = rc;
            return rc;
        }
    }
    if (ready == ep->nstreams) {
        ep->state = EP_ESTABLISHED;
        GX_INFO(GX_SUB_FABRIC, "tcp: connected %s with %d streams", ep->base.name, ep->nstreams);
        return GX_OK;
    }
    if (gx_now_ns() > ep->deadline) {
        ep->state = EP_ERROR;
        ep->error = GX_ETIMEOUT;
        return gx_fail(GX_ETIMEOUT, GX_SUB_FABRIC, "tcp: connecting %s: %d of %d streams "
                       "established before the deadline (is the peer accepting?)",
                       ep->base.name, ready, ep->nstreams);
    }
    return GX_INPROGRESS;
}
