/*
 * fabric_sock.c - authenticated TCP side-channel helpers shared by the tcp
 * and verbs providers: address blobs, the listener socket, the acceptor's
 * pending-connection table driven by the job-key state machine, and the
 * connector's non-blocking connect. Messages carry the caller's provider
 * name as their prefix.
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
#include "common/reject_log.h"
#include "fabric/fabric_sock.h"

/* ---- address blobs ------------------------------------------------------ */
void gx_fab_sock_addr_pack(const struct gx_sockaddr *sa, uint32_t magic, uint16_t version,
                           struct gx_fab_addr *out)
{
    struct gx_fab_sock_addr a = { .magic = magic, .version = version,
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

int gx_fab_sock_addr_unpack(const char *prov, const struct gx_fab_addr *in, uint32_t magic,
                            uint16_t version, struct gx_sockaddr *sa)
{
    struct gx_fab_sock_addr a;
    if (!in || in->len != sizeof(a))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC,
                       "%s: peer address of %u bytes, expected %zu (an address of another "
                       "provider?)", prov, in ? in->len : 0, sizeof(a));
    memcpy(&a, in->bytes, sizeof(a));
    if (a.magic != magic || a.version != version || (a.family != AF_INET && a.family != AF_INET6))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "%s: malformed peer address blob", prov);
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
int gx_fab_sock_listen(const char *prov, const struct gx_sockaddr *local, const char *ifname,
                       uint32_t magic, uint16_t version, int *fd_out, struct gx_fab_addr *addr_out)
{
    struct gx_sockaddr sa = *local;
    gx_sock_set_port(&sa, 0);
    if (gx_sock_listen(&sa, 128, fd_out) != GX_OK) {
        char a[64];
        int err = errno;
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "%s: cannot listen on %s (%s): %s", prov,
                       gx_sock_addr_str(&sa, a, sizeof(a)), ifname, strerror(err));
    }
    gx_fab_sock_addr_pack(&sa, magic, version, addr_out);
    return GX_OK;
}

int gx_fab_sock_grow(const char *prov, void **arr, int *cap, int n, size_t elem)
{
    if (n < *cap)
        return GX_OK;
    int ncap = *cap ? *cap * 2 : 8;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "%s: out of memory accepting", prov);
    *arr = p;
    *cap = ncap;
    return GX_OK;
}

/* ---- pending connections ------------------------------------------------ */
void gx_fab_sock_pending_remove(struct gx_fab_sock_pending *t, int i)
{
    if (i != --t->n)
        memcpy(gx_fab_sock_pending_at(t, i), gx_fab_sock_pending_at(t, t->n), t->elem);
}

void gx_fab_sock_pending_free(struct gx_fab_sock_pending *t)
{
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
}

int gx_fab_sock_accept_new(const char *prov, int listen_fd, const struct gx_auth_key *key,
                           struct gx_fab_sock_pending *t)
{
    for (;;) {
        int fd = -1;
        struct gx_sockaddr from;
        int rc = gx_sock_accept(listen_fd, &fd, &from);
        if (rc == GX_ETIMEOUT)
            return GX_OK;
        if (rc != GX_OK)
            return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "%s: accept failed: %m", prov);
        if (gx_fab_sock_grow(prov, &t->v, &t->cap, t->n, t->elem) != GX_OK) {
            close(fd);
            return GX_ENOMEM;
        }
        struct gx_fab_sock_half *h = gx_fab_sock_pending_at(t, t->n);
        memset(h, 0, t->elem);
        h->fd = fd;
        h->from = from;
        h->deadline = gx_deadline_after_ms(gx_fab_connect_timeout_ms());
        if (gx_auth_server_start(&h->auth, fd, key) != GX_OK) {
            close(fd);
            continue;
        }
        t->n++;
    }
}

int gx_fab_sock_half_auth(const char *prov, struct gx_fab_sock_half *h,
                          const struct gx_auth_key *key, enum gx_auth_purpose purpose,
                          const char *purpose_what)
{
    char a[64];
    /* Entries move in their table: fix the auth state's references up. */
    h->auth.key = key;
    h->auth.fd = h->fd;
    int rc = gx_auth_server_progress(&h->auth);
    if (rc == GX_INPROGRESS)
        return rc;
    if (rc == GX_OK) {
        if (h->auth.hello.purpose == (uint32_t)purpose)
            return GX_OK;
        GX_WARN(GX_SUB_FABRIC, "%s: dropped connection from %s: handshake purpose %u is not a %s",
                prov, gx_sock_addr_str(&h->from, a, sizeof(a)), h->auth.hello.purpose,
                purpose_what);
        return GX_EPROTO;
    }
    gx_reject_note(GX_SUB_FABRIC, prov, &h->from,
                   rc == GX_EAUTH ? GX_REJECT_KEY : rc == GX_EPROTO ? GX_REJECT_PROTO
                                                                    : GX_REJECT_PROBE,
                   "%s: rejected connection from %s: %s", prov,
                   gx_sock_addr_str(&h->from, a, sizeof(a)),
                   rc == GX_EAUTH    ? "wrong job key (is it another job, or is GX_JOB_KEY unset?)"
                   : rc == GX_EPROTO ? "not a gx peer or another handshake version"
                                     : "it closed during the handshake");
    return rc;
}

bool gx_fab_sock_half_expired(const char *prov, const struct gx_fab_sock_half *h,
                              const char *what)
{
    if (gx_now_ns() <= h->deadline)
        return false;
    char a[64];
    gx_reject_note(GX_SUB_FABRIC, prov, &h->from, GX_REJECT_SILENT,
                   "%s: dropped connection from %s: %s within %d ms", prov,
                   gx_sock_addr_str(&h->from, a, sizeof(a)), what, gx_fab_connect_timeout_ms());
    return true;
}

/* ---- connector ---------------------------------------------------------- */
uint64_t gx_fab_sock_connect_deadline(const struct gx_fab_conn_param *param)
{
    return gx_deadline_after_ms(param->timeout_ms > 0 ? param->timeout_ms
                                                      : gx_fab_connect_timeout_ms());
}

int gx_fab_sock_connect_start(const char *prov, const struct gx_sockaddr *peer, const char *name,
                              int *fd)
{
    return gx_fab_sock_connect_start_from(prov, NULL, peer, name, fd);
}

int gx_fab_sock_connect_start_from(const char *prov, const struct gx_sockaddr *src,
                                   const struct gx_sockaddr *peer, const char *name, int *fd)
{
    *fd = socket(peer->u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (*fd < 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "%s: socket() failed: %m", prov);
    gx_sock_set_nodelay(*fd);
    if (src && src->u.sa.sa_family == peer->u.sa.sa_family) {
        struct gx_sockaddr any_port = *src;
        gx_sock_set_port(&any_port, 0);
        if (bind(*fd, &any_port.u.sa, any_port.len) != 0) {
            char a[64];
            int err = errno;
            close(*fd);
            *fd = -1;
            return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "%s: binding the source address %s for "
                           "%s failed: %s", prov, gx_sock_addr_str(src, a, sizeof(a)), name,
                           strerror(err));
        }
    }
    if (connect(*fd, &peer->u.sa, peer->len) != 0 && errno != EINPROGRESS) {
        int err = errno;
        close(*fd);
        *fd = -1;
        if (err == ECONNREFUSED || err == EAGAIN)
            return GX_INPROGRESS; /* retried until the deadline */
        return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "%s: connect to %s failed: %s", prov, name,
                       strerror(err));
    }
    return GX_OK;
}

int gx_fab_sock_connect_check(const char *prov, int *fd, const char *name)
{
    struct pollfd pfd = { .fd = *fd, .events = POLLOUT };
    if (poll(&pfd, 1, 0) <= 0)
        return GX_INPROGRESS;
    int err = 0;
    socklen_t elen = sizeof(err);
    getsockopt(*fd, SOL_SOCKET, SO_ERROR, &err, &elen);
    if (err) {
        close(*fd);
        *fd = -1;
        if (err == ECONNREFUSED)
            return GX_INPROGRESS; /* not listening yet: retry until the deadline */
        return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "%s: connect to %s failed: %s", prov, name,
                       strerror(err));
    }
    return GX_OK;
}
