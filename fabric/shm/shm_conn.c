/*
 * shm_conn.c - shm connection set-up: an abstract unix socket per listener,
 * the job-key handshake, and the memfd segment handed from connector to
 * acceptor with SCM_RIGHTS, with the two doorbell eventfds (the connector
 * makes both: the handshake needs no answer). The acceptor never blocks.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/reject_log.h"
#include "common/sock.h"
#include "fabric/shm/shm.h"

static socklen_t make_sun(const char *name, struct sockaddr_un *sun)
{
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    size_t n = strnlen(name, sizeof(sun->sun_path) - 2);
    memcpy(sun->sun_path + 1, name, n); /* abstract namespace: leading NUL */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int shm_listen(struct gx_fab_domain *base, struct gx_fab_cq *cq, struct gx_fab_listener **out,
               struct gx_fab_addr *addr_out)
{
    struct shm_domain *dom = (struct shm_domain *)base;
    struct shm_listener *l = calloc(1, sizeof(*l));
    if (!l)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "shm: out of memory creating a listener");
    struct shm_addr a = { .magic = SHM_ADDR_MAGIC, .version = SHM_VERSION, .pid = getpid() };
    memcpy(a.boot_id, dom->boot_id, sizeof(a.boot_id));
    uint64_t rnd = 0;
    gx_random_bytes(&rnd, sizeof(rnd));
    snprintf(a.name, sizeof(a.name), "gx-shm-%d-%016llx", (int)a.pid, (unsigned long long)rnd);
    l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun;
    socklen_t slen = make_sun(a.name, &sun);
    if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&sun, slen) != 0 || listen(l->fd, 128) != 0) {
        int err = errno;
        if (l->fd >= 0)
            close(l->fd);
        free(l);
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "shm: cannot listen on unix socket @%s: %s",
                       a.name, strerror(err));
    }
    l->base.dom = base;
    l->base.cq = cq;
    l->dom = dom;
    struct shm_cq *scq = (struct shm_cq *)cq;
    for (int i = 0; i < SHM_CQ_LISTENERS; i++) {
        if (!scq->lst[i]) {
            scq->lst[i] = l;
            break;
        }
    }
    memset(addr_out, 0, sizeof(*addr_out));
    addr_out->len = sizeof(a);
    memcpy(addr_out->bytes, &a, sizeof(a));
    *out = &l->base;
    return GX_OK;
}

void shm_listener_close(struct gx_fab_listener *base)
{
    struct shm_listener *l = (struct shm_listener *)base;
    struct shm_cq *scq = (struct shm_cq *)l->base.cq;
    for (int i = 0; i < SHM_CQ_LISTENERS; i++)
        if (scq->lst[i] == l)
            scq->lst[i] = NULL;
    close(l->fd);
    for (int i = 0; i < l->nhalf; i++)
        close(l->half[i].fd);
    free(l->half);
    free(l);
}

static void drop_half(struct shm_listener *l, int i)
{
    close(l->half[i].fd);
    l->half[i] = l->half[--l->nhalf];
}

static int map_segment(int memfd, struct shm_seg **out)
{
    struct stat st;
    if (fstat(memfd, &st) != 0 || (size_t)st.st_size != shm_seg_size())
        return GX_EPROTO;
    /* Populated: otherwise each ring slot's first use takes page faults on
     * both sides, and the first few hundred messages of a connection cost
     * several microseconds more than the rest. */
    void *p = mmap(NULL, shm_seg_size(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                   memfd, 0);
    if (p == MAP_FAILED)
        return GX_ESYSTEM;
    struct shm_seg *seg = p;
    if (seg->magic != SHM_SEG_MAGIC || seg->version != SHM_VERSION ||
        seg->nslots != SHM_NSLOTS || seg->slot_size != SHM_SLOT_SIZE) {
        munmap(p, shm_seg_size());
        return GX_EPROTO;
    }
    *out = seg;
    return GX_OK;
}

/* Authenticated: receive the handover and the memfd, then make the endpoint.
 * GX_INPROGRESS while it has not arrived. */
static int receive_handover(struct shm_listener *l, struct shm_halfopen *h, struct gx_fab_ep **out)
{
    struct shm_handover ho;
    char cbuf[CMSG_SPACE(3 * sizeof(int))];
    struct iovec iov = { &ho, sizeof(ho) };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = sizeof(cbuf) };
    ssize_t n = recvmsg(h->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return GX_INPROGRESS;
    int fds[3] = { -1, -1, -1 }; /* the segment, bell 0, bell 1 */
    int nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        nfds = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        memcpy(fds, CMSG_DATA(c), (size_t)(nfds < 3 ? nfds : 3) * sizeof(int));
    }
    int memfd = fds[0];
    int rank = h->auth.hello.rank;
    if (n <= 0) {
        /* Closed after authenticating: a crossing connection the peer gave
         * up (the lower rank's wins), or the peer exited. Not malformed. */
        GX_INFO(GX_SUB_FABRIC, "shm: rank %d closed its connection before the segment handover "
                "(%s)", rank, n == 0 ? "it gave the connection up or exited" : strerror(errno));
        return GX_EPROTO;
    }
    if (n != (ssize_t)sizeof(ho) || nfds != 3 || ho.magic != SHM_SEG_MAGIC ||
        ho.version != SHM_VERSION || ho.seg_size != shm_seg_size()) {
        for (int i = 0; i < 3; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        GX_WARN(GX_SUB_FABRIC, "shm: dropped connection from rank %d: malformed segment "
                "handover (another gx version?)", rank);
        return GX_EPROTO;
    }
    struct shm_seg *seg;
    int rc = map_segment(memfd, &seg);
    close(memfd);
    struct shm_ep *ep = NULL;
    if (rc != GX_OK)
        GX_WARN(GX_SUB_FABRIC, "shm: dropped connection from rank %d: cannot map its segment "
                "(%s)", rank, gx_strerror(rc));
    else if ((rc = shm_ep_alloc(l->dom, (struct shm_cq *)l->base.cq, &ep)) != GX_OK)
        munmap(seg, shm_seg_size());
    if (rc != GX_OK) {
        close(fds[1]);
        close(fds[2]);
        return rc;
    }
    ep->bell[0] = fds[1];
    ep->bell[1] = fds[2];
    ep->seg = seg;
    ep->sock = h->fd;
    ep->peer_pid = ho.pid;
    ep->in_ring = 0;
    ep->out_ring = 1;
    ep->base.peer_rank = rank;
    char where[32];
    snprintf(where, sizeof(where), "pid %d", (int)ho.pid);
    gx_fab_ep_set_name(&ep->base, "shm", rank, where);
    ep->state = SHM_ESTABLISHED;
    GX_INFO(GX_SUB_FABRIC, "shm: accepted %s", ep->base.name);
    *out = &ep->base;
    return GX_OK;
}

int shm_accept(struct gx_fab_listener *base, struct gx_fab_ep **out)
{
    struct shm_listener *l = (struct shm_listener *)base;
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
                break;
            return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "shm: accept failed: %m");
        }
        if (l->nhalf == l->half_cap) {
            int cap = l->half_cap ? 2 * l->half_cap : 8;
            struct shm_halfopen *p = realloc(l->half, (size_t)cap * sizeof(*p));
            if (!p) {
                close(fd);
                return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "shm: out of memory accepting");
            }
            l->half = p;
            l->half_cap = cap;
        }
        struct shm_halfopen *h = &l->half[l->nhalf];
        memset(h, 0, sizeof(*h));
        h->fd = fd;
        h->deadline = gx_deadline_after_ms(gx_fab_connect_timeout_ms());
        if (gx_auth_server_start(&h->auth, fd, &l->dom->key) != GX_OK) {
            close(fd);
            continue;
        }
        l->nhalf++;
    }
    for (int i = 0; i < l->nhalf;) {
        struct shm_halfopen *h = &l->half[i];
        h->auth.fd = h->fd;
        int rc = GX_OK;
        if (!h->authed) {
            rc = gx_auth_server_progress(&h->auth);
            if (rc == GX_OK && h->auth.hello.purpose != GX_AUTH_SHM_DATA)
                rc = GX_EPROTO;
            if (rc == GX_OK)
                h->authed = true;
        }
        if (h->authed) {
            rc = receive_handover(l, h, out);
            if (rc == GX_OK) {
                l->half[i] = l->half[--l->nhalf]; /* the socket now belongs to the ep */
                return GX_OK;
            }
            if (rc != GX_INPROGRESS) {
                drop_half(l, i);
                continue;
            }
        }
        if (rc == GX_INPROGRESS) {
            if (gx_now_ns() > h->deadline) {
                gx_reject_note(GX_SUB_FABRIC, "shm", NULL, GX_REJECT_SILENT,
                               "shm: dropped a local connection: no handshake within %d ms",
                               gx_fab_connect_timeout_ms());
                drop_half(l, i);
                continue;
            }
            i++;
            continue;
        }
        gx_reject_note(GX_SUB_FABRIC, "shm", NULL,
                       rc == GX_EAUTH ? GX_REJECT_KEY : rc == GX_EPROTO ? GX_REJECT_PROTO
                                                                        : GX_REJECT_PROBE,
                       "shm: rejected a local connection: %s",
                       rc == GX_EAUTH    ? "wrong job key (another job, or GX_JOB_KEY differs)"
                       : rc == GX_EPROTO ? "not a gx shm peer or another handshake version"
                                         : "it closed during the handshake");
        drop_half(l, i);
    }
    return GX_INPROGRESS;
}

/* ---- connector ---------------------------------------------------------- */
static int create_segment(struct shm_ep *ep)
{
    ep->memfd = memfd_create("gx-shm", MFD_CLOEXEC);
    if (ep->memfd < 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "shm: memfd_create failed: %m");
    if (ftruncate(ep->memfd, (off_t)shm_seg_size()) != 0)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "shm: cannot size a %zu-byte segment: %m",
                       shm_seg_size());
    void *p = mmap(NULL, shm_seg_size(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                   ep->memfd, 0);
    if (p == MAP_FAILED)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "shm: cannot map a %zu-byte segment: %m",
                       shm_seg_size());
    ep->seg = p;
    ep->seg->magic = SHM_SEG_MAGIC;
    ep->seg->version = SHM_VERSION;
    ep->seg->nslots = SHM_NSLOTS;
    ep->seg->slot_size = SHM_SLOT_SIZE;
    ep->out_ring = 0;
    ep->in_ring = 1;
    for (int i = 0; i < 2; i++) {
        ep->bell[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (ep->bell[i] < 0)
            return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "shm: eventfd for a doorbell failed: %m");
    }
    return GX_OK;
}

static int try_connect(struct shm_ep *ep)
{
    ep->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ep->sock < 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "shm: socket() failed: %m");
    struct sockaddr_un sun;
    socklen_t slen = make_sun(ep->peer_addr.name, &sun);
    if (connect(ep->sock, (struct sockaddr *)&sun, slen) == 0 || errno == EINPROGRESS) {
        ep->state = SHM_CHALLENGE;
        return GX_INPROGRESS;
    }
    int err = errno;
    close(ep->sock);
    ep->sock = -1;
    if (err == EAGAIN || err == ECONNREFUSED)
        return GX_INPROGRESS; /* backlog full or not listening yet: retry */
    return gx_fail(GX_ECONNECT, GX_SUB_FABRIC, "shm: connecting %s failed: %s", ep->base.name,
                   strerror(err));
}

int shm_connect(struct gx_fab_domain *base, struct gx_fab_cq *cq, const struct gx_fab_addr *peer,
                const struct gx_fab_conn_param *param, struct gx_fab_ep **out)
{
    struct shm_domain *dom = (struct shm_domain *)base;
    struct gx_fab_conn_param def = GX_FAB_CONN_PARAM_INIT;
    if (!param)
        param = &def;
    struct shm_addr a;
    if (!peer || peer->len != sizeof(a))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "shm: peer address of %u bytes, expected %zu "
                       "(an address of another provider?)", peer ? peer->len : 0, sizeof(a));
    memcpy(&a, peer->bytes, sizeof(a));
    a.name[sizeof(a.name) - 1] = '\0';
    if (a.magic != SHM_ADDR_MAGIC || a.version != SHM_VERSION)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "shm: malformed peer address blob");
    if (memcmp(a.boot_id, dom->boot_id, sizeof(a.boot_id)) != 0)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "shm: rank %d (pid %d) runs on another "
                       "node; shm connects only ranks of one node", param->peer_rank, (int)a.pid);
    struct shm_ep *ep;
    int rc = shm_ep_alloc(dom, (struct shm_cq *)cq, &ep);
    if (rc != GX_OK)
        return rc;
    ep->peer_addr = a;
    ep->peer_pid = a.pid;
    ep->base.peer_rank = param->peer_rank;
    char where[32];
    snprintf(where, sizeof(where), "pid %d", (int)a.pid);
    gx_fab_ep_set_name(&ep->base, "shm", param->peer_rank, where);
    ep->deadline = gx_deadline_after_ms(param->timeout_ms > 0 ? param->timeout_ms
                                                              : gx_fab_connect_timeout_ms());
    rc = create_segment(ep);
    if (rc == GX_OK)
        rc = try_connect(ep);
    if (rc < 0) {
        shm_ep_free(ep);
        return rc;
    }
    *out = &ep->base;
    return GX_OK;
}

static int send_handover(struct shm_ep *ep)
{
    struct shm_handover ho = { .magic = SHM_SEG_MAGIC, .version = SHM_VERSION, .pid = getpid(),
                               .nslots = SHM_NSLOTS, .slot_size = SHM_SLOT_SIZE,
                               .seg_size = shm_seg_size() };
    char cbuf[CMSG_SPACE(3 * sizeof(int))];
    memset(cbuf, 0, sizeof(cbuf));
    struct iovec iov = { &ho, sizeof(ho) };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = sizeof(cbuf) };
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(3 * sizeof(int));
    int fds[3] = { ep->memfd, ep->bell[0], ep->bell[1] }; /* both bells: the acceptor's too */
    memcpy(CMSG_DATA(c), fds, sizeof(fds));
    /* A fresh unix socket has room for 40 bytes: this does not block. */
    if (sendmsg(ep->sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(ho))
        return gx_fail(GX_EPEER, GX_SUB_FABRIC, "shm: handing the segment to %s failed: %m",
                       ep->base.name);
    close(ep->memfd);
    ep->memfd = -1;
    return GX_OK;
}

int shm_ep_establish(struct gx_fab_ep *base)
{
    struct shm_ep *ep = (struct shm_ep *)base;
    if (ep->state == SHM_ESTABLISHED)
        return GX_OK;
    if (ep->state == SHM_ERROR)
        return ep->error;
    int rc = GX_INPROGRESS;
    if (ep->state == SHM_CONNECTING) {
        rc = try_connect(ep);
    } else {
        if (!ep->auth_started) {
            gx_auth_client_start(&ep->auth, ep->sock, &ep->dom->key, GX_AUTH_SHM_DATA,
                                 ep->dom->base.rank, 0);
            ep->auth_started = true;
        }
        /* Never waits: the acceptor may be a rank connecting to us now. */
        rc = gx_auth_client_progress(&ep->auth);
        if (rc != GX_INPROGRESS) {
            bool gone = rc != GX_OK && gx_process_gone(ep->peer_pid);
            if (gone) /* a dead peer drops the handshake too: not a key problem */
                rc = gx_fail(GX_EPEER, GX_SUB_FABRIC, "shm: %s exited during the handshake",
                             ep->base.name);
            else if (rc == GX_EAUTH)
                rc = gx_fail(GX_EAUTH, GX_SUB_FABRIC, "shm: %s refused our job key, or is "
                             "another job (check GX_JOB_KEY)", ep->base.name);
            else if (rc != GX_OK)
                rc = gx_fail(rc, GX_SUB_FABRIC, "shm: handshake with %s failed: %s",
                             ep->base.name, gx_strerror(rc));
            else
                rc = send_handover(ep);
            if (rc == GX_OK) {
                ep->state = SHM_ESTABLISHED;
                GX_INFO(GX_SUB_FABRIC, "shm: connected %s", ep->base.name);
                return GX_OK;
            }
        }
    }
    if (rc == GX_INPROGRESS && gx_now_ns() > ep->deadline)
        rc = gx_fail(GX_ETIMEOUT, GX_SUB_FABRIC, "shm: connecting %s timed out (is it "
                     "accepting?)", ep->base.name);
    if (rc != GX_INPROGRESS) {
        ep->state = SHM_ERROR;
        ep->error = rc;
    }
    return rc;
}
