/*
 * tcp_conn.c - tcp provider connection set-up: a listener on the interface
 * GX_SOCKET_IFNAME selects, connectors opening GX_TCP_NSTREAMS sockets, and
 * the job-key handshake on every socket. Everything is non-blocking for the
 * acceptor: a silent or hostile connection never stalls the others, and is
 * dropped with a log line at its deadline.
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
#include "fabric/tcp/tcp.h"

/* ---- address blobs ------------------------------------------------------ */
static void addr_pack(const struct gx_sockaddr *sa, struct gx_fab_addr *out)
{
    struct gx_tcp_addr a = { .magic = GX_TCP_ADDR_MAGIC, .version = GX_TCP_VERSION,
                             .family = (uint16_t)sa->u.sa.sa_family,
                             .port = (uint16_t)gx_sock_port(sa) };
    if (sa->u.sa.sa_family == AF_INET)
        memcpy(a.ip, &sa->u.in4.sin_addr, 4);
    else
        memcpy(a.ip, &sa->u.in6.sin6_addr, 16);
    memset(out, 0, sizeof(*out));
    out->len = sizeof(a);
    memcpy(out->bytes, &a, sizeof(a));
}

static int addr_unpack(const struct gx_fab_addr *in, struct gx_sockaddr *sa)
{
    struct gx_tcp_addr a;
    if (!in || in->len != sizeof(a))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC,
                       "tcp: peer address of %u bytes, expected %zu (an address of another "
                       "provider?)", in ? in->len : 0, sizeof(a));
    memcpy(&a, in->bytes, sizeof(a));
    if (a.magic != GX_TCP_ADDR_MAGIC || a.version != GX_TCP_VERSION ||
        (a.family != AF_INET && a.family != AF_INET6))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "tcp: malformed peer address blob");
    memset(sa, 0, sizeof(*sa));
    if (a.family == AF_INET) {
        sa->len = sizeof(struct sockaddr_in);
        sa->u.in4.sin_family = AF_INET;
        memcpy(&sa->u.in4.sin_addr, a.ip, 4);
    } else {
        sa->len = sizeof(struct sockaddr_in6);
        sa->u.in6.sin6_family = AF_INET6;
        memcpy(&sa->u.in6.sin6_addr, a.ip, 16);
    }
    gx_sock_set_port(sa, a.port);
    return GX_OK;
}

/* ---- listener ----------------------------------------------------------- */
int tcp_listen(struct gx_fab_domain *base, struct gx_fab_cq *cq, struct gx_fab_listener **out,
               struct gx_fab_addr *addr_out)
{
    struct tcp_domain *dom = (struct tcp_domain *)base;
    struct tcp_listener *l = calloc(1, sizeof(*l));
    if (!l)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "tcp: out of memory creating a listener");
    struct gx_sockaddr sa = dom->local;
    gx_sock_set_port(&sa, 0);
    if (gx_sock_listen(&sa, 128, &l->fd) != GX_OK) {
        char a[64];
        int err = errno;
        free(l);
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "tcp: cannot listen on %s (%s): %s",
                       gx_sock_addr_str(&sa, a, sizeof(a)), dom->ifname, strerror(err));
    }
    l->base.dom = base;
    l->base.cq = cq;
    l->dom = dom;
    addr_pack(&sa, addr_out);
    *out = &l->base;
    return GX_OK;
}

void tcp_listener_close(struct gx_fab_listener *base)
{
    struct tcp_listener *l = (struct tcp_listener *)base;
    close(l->fd);
    for (int i = 0; i < l->nhalf; i++)
        close(l->half[i].fd);
    for (int i = 0; i < l->ngroups; i++)
        for (int j = 0; j < l->groups[i].nstreams; j++)
            if (l->groups[i].fds[j] >= 0)
                close(l->groups[i].fds[j]);
    free(l->half);
    free(l->groups);
    free(l);
}

static int grow(void **arr, int *cap, int n, size_t elem)
{
    if (n < *cap)
        return GX_OK;
    int ncap = *cap ? *cap * 2 : 8;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "tcp: out of memory accepting");
    *arr = p;
    *cap = ncap;
    return GX_OK;
}

static void drop_half(struct tcp_listener *l, int i, bool close_fd)
{
    if (close_fd)
        close(l->half[i].fd);
    l->half[i] = l->half[--l->nhalf];
}

/* An authenticated stream: file it into its connection's group. */
static void file_stream(struct tcp_listener *l, const struct tcp_halfopen *h)
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
        if (grow((void **)&l->groups, &l->groups_cap, l->ngroups, sizeof(*g)) != GX_OK) {
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
    char a[64];
    /* 1. New sockets: send the challenge. */
    for (;;) {
        struct tcp_halfopen h = { .fd = -1 };
        int rc = gx_sock_accept(l->fd, &h.fd, &h.from);
        if (rc == GX_ETIMEOUT)
            break;
        if (rc != GX_OK)
            return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "tcp: accept failed: %m");
        if (grow((void **)&l->half, &l->half_cap, l->nhalf, sizeof(h)) != GX_OK) {
            close(h.fd);
            return GX_ENOMEM;
        }
        h.deadline = gx_deadline_after_ms(gx_fab_connect_timeout_ms());
        if (gx_auth_server_start(&h.auth, h.fd, &l->dom->key) != GX_OK) {
            close(h.fd);
            continue;
        }
        l->half[l->nhalf++] = h;
    }
    /* 2. Handshakes in progress. The auth state holds a pointer to the key,
     *    and entries move in the array, so fix the fd up before each call. */
    for (int i = 0; i < l->nhalf;) {
        struct tcp_halfopen *h = &l->half[i];
        h->auth.fd = h->fd;
        int rc = gx_auth_server_progress(&h->auth);
        if (rc == GX_INPROGRESS) {
            if (gx_now_ns() > h->deadline) {
                GX_WARN(GX_SUB_FABRIC, "tcp: dropped connection from %s: no handshake within "
                        "%d ms", gx_sock_addr_str(&h->from, a, sizeof(a)),
                        gx_fab_connect_timeout_ms());
                drop_half(l, i, true);
                continue;
            }
            i++;
            continue;
        }
        if (rc == GX_OK) {
            if (h->auth.hello.purpose != GX_AUTH_TCP_DATA) {
                GX_WARN(GX_SUB_FABRIC, "tcp: dropped connection from %s: handshake purpose %u "
                        "is not a tcp data stream", gx_sock_addr_str(&h->from, a, sizeof(a)),
                        h->auth.hello.purpose);
                drop_half(l, i, true);
                continue;
            }
            struct tcp_halfopen done = *h;
            drop_half(l, i, false);
            file_stream(l, &done);
            continue;
        }
        GX_WARN(GX_SUB_FABRIC, "tcp: rejected connection from %s: %s", 
                gx_sock_addr_str(&h->from, a, sizeof(a)),
                rc == GX_EAUTH    ? "wrong job key (is it another job, or is GX_JOB_KEY unset?)"
                : rc == GX_EPROTO ? "not a gx peer or another handshake version"
                                  : "it closed during the handshake");
        drop_half(l, i, true);
    }
    /* 3. A complete group becomes an endpoint; stale partial ones are dropped. */
    for (int i = 0; i < l->ngroups; i++) {
        struct tcp_group *g = &l->groups[i];
        if (g->have == g->nstreams) {
            int rc = make_accepted_ep(l, g, out);
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
    s->fd = socket(ep->peer.u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "tcp: socket() failed: %m");
    gx_sock_set_nodelay(s->fd);
    if (connect(s->fd, &ep->peer.u.sa, ep->peer.len) != 0 && errno != EINPROGRESS) {
        int err = errno;
        close(s->fd);
        s->fd = -1;
        if (err == ECONNREFUSED || err == EAGAIN)
            return GX_INPROGRESS; /* retried until the deadline */
        return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "tcp: connect to %s failed: %s", ep->base.name,
                       strerror(err));
    }
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
    int rc = addr_unpack(peer, &sa);
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
    ep->deadline = gx_deadline_after_ms(param->timeout_ms > 0 ? param->timeout_ms
                                                              : gx_fab_connect_timeout_ms());
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
    struct pollfd pfd = { .fd = s->fd, .events = s->stage == STAGE_TCP ? POLLOUT : POLLIN };
    if (poll(&pfd, 1, 0) <= 0)
        return GX_INPROGRESS;
    if (s->stage == STAGE_TCP) {
        int err = 0;
        socklen_t elen = sizeof(err);
        getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &elen);
        if (err) {
            close(s->fd);
            s->fd = -1;
            if (err == ECONNREFUSED)
                return GX_INPROGRESS; /* not listening yet: retry until the deadline */
            return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "tcp: connect to %s failed: %s",
                           ep->base.name, strerror(err));
        }
        s->stage = STAGE_CHALLENGE;
        return GX_INPROGRESS;
    }
    /* The challenge is there: the rest of the handshake is two short messages
     * the acceptor answers from its own accept loop. */
    int rc = gx_auth_connect(s->fd, &ep->dom->key, GX_AUTH_TCP_DATA, ep->dom->base.rank,
                             gx_tcp_conn_id(ep->token, (unsigned)ep->nstreams, (unsigned)idx),
                             ep->deadline);
    switch (rc) {
    case GX_OK:
        s->stage = STAGE_READY;
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
