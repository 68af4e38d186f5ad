/*
 * fake_rdmacm.c - a small stand-in for librdmacm, for tests only: the
 * handful of rdma_* calls gx's GX_IB_CM=rdmacm path makes, over the
 * softverbs emulator (linked) and kernel TCP sockets on loopback, so the
 * connect/accept state machine runs end to end where there is no kernel
 * rdma_cm. Loaded with GX_RDMACM_LIB; exports the same symbol versions.
 *
 * What it models: one event channel whose fd (an epoll fd) is readable when
 * an event is pending; address and route resolution bound to a softverbs
 * device (FAKE_RDMACM_DEVICE, default the first); a CM exchange of
 * REQ/REP/RTU/REJ/DISC messages carrying QP number, PSN, LID, GID, MTU and
 * private data; user-managed QPs (CONNECT_RESPONSE on the active side,
 * rdma_establish, rdma_init_qp_attr from the exchanged values).
 * What it does not: IB CM timers and retries, path records, iWARP, QPs
 * created by the CM (rdma_create_qp), multicast, rsockets.
 * Fault injection: FAKE_RDMACM_NO_CM=1 (no kernel rdma_cm: the channel
 * cannot be created), FAKE_RDMACM_FAIL=addr|route|unreachable.
 */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define PD_MAX 196

enum msg_type { M_REQ = 1, M_REP, M_REJ, M_RTU, M_DISC };

struct msg {
    uint32_t type;
    uint32_t qpn;
    uint32_t psn;
    uint16_t lid;
    uint8_t mtu;
    uint8_t pd_len;
    uint8_t gid[16];
    uint8_t pd[PD_MAX];
};

struct fchan;

struct fid {
    struct rdma_cm_id id; /* first: the caller's handle */
    struct fchan *ch;
    int fd;
    struct sockaddr_storage dst;
    uint32_t my_psn;
    struct msg peer;
    int have_peer;
    int listening;
    struct fid *next;
};

struct fevent {
    struct rdma_cm_event ev; /* first */
    uint8_t pd[PD_MAX];
    struct fevent *next;
};

struct fchan {
    struct rdma_event_channel ch; /* first; fd = epoll fd */
    int evfd;                     /* readable while events are queued */
    struct fevent *head, *tail;
    struct fid *ids;
};

/* ---- devices ---------------------------------------------------------------- */
static struct ibv_context **devs;
static int ndevs;

static int open_devices(void)
{
    if (devs)
        return 0;
    int n = 0;
    struct ibv_device **l = ibv_get_device_list(&n);
    if (!l)
        return -1;
    devs = calloc((size_t)n + 1, sizeof(*devs));
    for (int i = 0; devs && i < n; i++)
        if ((devs[ndevs] = ibv_open_device(l[i])) != NULL)
            ndevs++;
    ibv_free_device_list(l);
    return devs ? 0 : -1;
}

static struct ibv_context *pick_device(void)
{
    if (open_devices() != 0 || ndevs == 0)
        return NULL;
    const char *want = getenv("FAKE_RDMACM_DEVICE");
    for (int i = 0; want && i < ndevs; i++)
        if (strcmp(ibv_get_device_name(devs[i]->device), want) == 0)
            return devs[i];
    return devs[0];
}

struct ibv_context **rdma_get_devices(int *num)
{
    if (open_devices() != 0)
        return NULL;
    struct ibv_context **copy = calloc((size_t)ndevs + 1, sizeof(*copy));
    if (copy)
        memcpy(copy, devs, (size_t)ndevs * sizeof(*copy));
    if (num)
        *num = ndevs;
    return copy;
}

void rdma_free_devices(struct ibv_context **list)
{
    free(list);
}

/* ---- channel and events ------------------------------------------------------- */
struct rdma_event_channel *rdma_create_event_channel(void)
{
    if (getenv("FAKE_RDMACM_NO_CM")) {
        errno = ENODEV;
        return NULL;
    }
    struct fchan *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->ch.fd = epoll_create1(EPOLL_CLOEXEC);
    c->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event e = { .events = EPOLLIN, .data.ptr = NULL };
    if (c->ch.fd < 0 || c->evfd < 0 || epoll_ctl(c->ch.fd, EPOLL_CTL_ADD, c->evfd, &e) != 0) {
        free(c);
        return NULL;
    }
    return &c->ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
    struct fchan *c = (struct fchan *)channel;
    while (c->head) {
        struct fevent *e = c->head;
        c->head = e->next;
        free(e);
    }
    close(c->evfd);
    close(c->ch.fd);
    free(c);
}

static void push(struct fid *f, struct fid *listen, enum rdma_cm_event_type type, int status,
                 const struct msg *m)
{
    struct fchan *c = f->ch;
    struct fevent *e = calloc(1, sizeof(*e));
    if (!e)
        return;
    e->ev.id = &f->id;
    e->ev.listen_id = listen ? &listen->id : NULL;
    e->ev.event = type;
    e->ev.status = status;
    if (m) {
        memcpy(e->pd, m->pd, m->pd_len);
        e->ev.param.conn.private_data = m->pd_len ? e->pd : NULL;
        e->ev.param.conn.private_data_len = m->pd_len;
        e->ev.param.conn.qp_num = m->qpn;
    }
    if (c->tail)
        c->tail->next = e;
    else
        c->head = e;
    c->tail = e;
    uint64_t one = 1;
    (void)!write(c->evfd, &one, sizeof(one));
}

static void watch(struct fid *f)
{
    struct epoll_event e = { .events = EPOLLIN, .data.ptr = f };
    epoll_ctl(f->ch->ch.fd, EPOLL_CTL_ADD, f->fd, &e);
}

static void unwatch(struct fid *f)
{
    if (f->fd >= 0)
        epoll_ctl(f->ch->ch.fd, EPOLL_CTL_DEL, f->fd, NULL);
}

static int send_msg(int fd, const struct msg *m)
{
    return send(fd, m, sizeof(*m), MSG_NOSIGNAL) == (ssize_t)sizeof(*m) ? 0 : -1;
}

static void fill_local(struct fid *f, struct msg *m, int type, uint32_t qpn, const void *pd,
                       size_t pd_len)
{
    memset(m, 0, sizeof(*m));
    m->type = (uint32_t)type;
    m->qpn = qpn;
    m->psn = f->my_psn;
    struct ibv_port_attr pa;
    if (f->id.verbs && ibv_query_port(f->id.verbs, f->id.port_num, &pa) == 0) {
        m->lid = pa.lid;
        m->mtu = (uint8_t)pa.active_mtu;
    }
    union ibv_gid gid;
    if (f->id.verbs && ibv_query_gid(f->id.verbs, f->id.port_num, 0, &gid) == 0)
        memcpy(m->gid, gid.raw, 16);
    if (pd_len > PD_MAX)
        pd_len = PD_MAX;
    if (pd && pd_len)
        memcpy(m->pd, pd, pd_len);
    m->pd_len = (uint8_t)pd_len;
}

static struct fid *new_id(struct fchan *c, void *context)
{
    struct fid *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->id.channel = &c->ch;
    f->id.context = context;
    f->id.ps = RDMA_PS_TCP;
    f->id.qp_type = IBV_QPT_RC;
    f->ch = c;
    f->fd = -1;
    f->my_psn = (uint32_t)rand() & 0xffffff;
    f->next = c->ids;
    c->ids = f;
    return f;
}

static void on_listen_ready(struct fid *l)
{
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct msg m;
    if (recv(fd, &m, sizeof(m), MSG_WAITALL) != (ssize_t)sizeof(m) || m.type != M_REQ) {
        close(fd);
        return;
    }
    struct fid *f = new_id(l->ch, l->id.context);
    if (!f) {
        close(fd);
        return;
    }
    f->id.verbs = l->id.verbs;
    f->id.port_num = l->id.port_num;
    f->fd = fd;
    f->peer = m;
    f->have_peer = 1;
    watch(f);
    push(f, l, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &m);
}

static void on_conn_ready(struct fid *f)
{
    struct msg m;
    ssize_t n = recv(f->fd, &m, sizeof(m), MSG_WAITALL);
    if (n != (ssize_t)sizeof(m)) {
        unwatch(f);
        push(f, NULL, f->have_peer ? RDMA_CM_EVENT_DISCONNECTED : RDMA_CM_EVENT_CONNECT_ERROR,
             f->have_peer ? 0 : -ECONNRESET, NULL);
        close(f->fd);
        f->fd = -1;
        return;
    }
    switch (m.type) {
    case M_REP:
        f->peer = m;
        f->have_peer = 1;
        push(f, NULL, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, &m);
        break;
    case M_REJ:
        unwatch(f);
        push(f, NULL, RDMA_CM_EVENT_REJECTED, 28 /* consumer reject */, &m);
        break;
    case M_RTU:
        push(f, NULL, RDMA_CM_EVENT_ESTABLISHED, 0, NULL);
        break;
    case M_DISC:
        unwatch(f);
        push(f, NULL, RDMA_CM_EVENT_DISCONNECTED, 0, NULL);
        break;
    }
}

static void pump(struct fchan *c)
{
    struct epoll_event ev[16];
    int n = epoll_wait(c->ch.fd, ev, 16, 0);
    for (int i = 0; i < n; i++) {
        struct fid *f = ev[i].data.ptr;
        if (!f)
            continue; /* the queue's eventfd */
        if (f->listening)
            on_listen_ready(f);
        else
            on_conn_ready(f);
    }
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
    struct fchan *c = (struct fchan *)channel;
    for (;;) {
        pump(c);
        if (c->head) {
            struct fevent *e = c->head;
            c->head = e->next;
            if (!c->head)
                c->tail = NULL;
            uint64_t v;
            (void)!read(c->evfd, &v, sizeof(v));
            if (c->head) {
                uint64_t one = 1;
                (void)!write(c->evfd, &one, sizeof(one));
            }
            *event = &e->ev;
            return 0;
        }
        if (fcntl(c->ch.fd, F_GETFL) & O_NONBLOCK) {
            errno = EAGAIN;
            return -1;
        }
        struct epoll_event ev;
        epoll_wait(c->ch.fd, &ev, 1, -1);
    }
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
    free(event);
    return 0;
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
    static const char *names[] = {
        "RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
        "RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
        "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
        "RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_REJECTED",
        "RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED",
        "RDMA_CM_EVENT_DEVICE_REMOVAL", "RDMA_CM_EVENT_MULTICAST_JOIN",
        "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
        "RDMA_CM_EVENT_TIMEWAIT_EXIT",
    };
    return (unsigned)event < sizeof(names) / sizeof(names[0]) ? names[event]
                                                              : "UNKNOWN EVENT";
}

/* ---- ids ------------------------------------------------------------------------ */
int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
                   enum rdma_port_space ps)
{
    if (!channel || ps != RDMA_PS_TCP) {
        errno = EINVAL;
        return -1;
    }
    struct fid *f = new_id((struct fchan *)channel, context);
    if (!f) {
        errno = ENOMEM;
        return -1;
    }
    *id = &f->id;
    return 0;
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
    struct fid *f = (struct fid *)id;
    struct fchan *c = f->ch;
    unwatch(f);
    if (f->fd >= 0)
        close(f->fd);
    /* Drop its queued events, as the kernel does. */
    struct fevent **pp = &c->head, *last = NULL;
    while (*pp) {
        struct fevent *e = *pp;
        if (e->ev.id == id || e->ev.listen_id == id) {
            if (e->ev.listen_id == id && e->ev.id != id)
                rdma_destroy_id(e->ev.id); /* an unfetched request on a closing listener */
            *pp = e->next;
            free(e);
            pp = &c->head; /* the list may have changed: rescan */
            last = NULL;
            continue;
        }
        last = e;
        pp = &e->next;
    }
    for (struct fevent *e = c->head; e; e = e->next)
        last = e;
    c->tail = last;
    if (!c->head) {
        uint64_t v;
        (void)!read(c->evfd, &v, sizeof(v));
    }
    for (struct fid **q = &c->ids; *q; q = &(*q)->next)
        if (*q == f) {
            *q = f->next;
            break;
        }
    free(f);
    return 0;
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
    struct fid *f = (struct fid *)id;
    id->verbs = pick_device();
    id->port_num = 1;
    if (!id->verbs) {
        errno = ENODEV;
        return -1;
    }
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    socklen_t len = addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                : sizeof(struct sockaddr_in);
    if (fd < 0 || bind(fd, addr, len) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        errno = err;
        return -1;
    }
    f->fd = fd;
    return 0;
}

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
    struct fid *f = (struct fid *)id;
    if (f->fd < 0 || listen(f->fd, backlog) != 0)
        return -1;
    f->listening = 1;
    watch(f);
    return 0;
}

uint16_t rdma_get_src_port(struct rdma_cm_id *id)
{
    struct fid *f = (struct fid *)id;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (f->fd < 0 || getsockname(f->fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    return ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                    : ((struct sockaddr_in *)&ss)->sin_port;
}

static int fail_mode(const char *what)
{
    const char *f = getenv("FAKE_RDMACM_FAIL");
    return f && strcmp(f, what) == 0;
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                      int timeout_ms)
{
    (void)src, (void)timeout_ms;
    struct fid *f = (struct fid *)id;
    memcpy(&f->dst, dst, dst->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                    : sizeof(struct sockaddr_in));
    id->verbs = pick_device();
    id->port_num = 1;
    if (fail_mode("addr") || !id->verbs)
        push(f, NULL, RDMA_CM_EVENT_ADDR_ERROR, -ENETUNREACH, NULL);
    else
        push(f, NULL, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL);
    return 0;
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
    (void)timeout_ms;
    struct fid *f = (struct fid *)id;
    push(f, NULL, fail_mode("route") ? RDMA_CM_EVENT_ROUTE_ERROR : RDMA_CM_EVENT_ROUTE_RESOLVED,
         fail_mode("route") ? -EHOSTUNREACH : 0, NULL);
    return 0;
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
    struct fid *f = (struct fid *)id;
    if (fail_mode("unreachable")) {
        push(f, NULL, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL);
        return 0;
    }
    int fd = socket(f->dst.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len = f->dst.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                 : sizeof(struct sockaddr_in);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&f->dst, len) != 0) {
        close(fd);
        push(f, NULL, RDMA_CM_EVENT_REJECTED, 8 /* invalid service ID */, NULL);
        return 0;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    f->fd = fd;
    struct msg m;
    fill_local(f, &m, M_REQ, param->qp_num, param->private_data, param->private_data_len);
    if (send_msg(fd, &m) != 0)
        return -1;
    watch(f);
    return 0;
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
    struct fid *f = (struct fid *)id;
    struct msg m;
    fill_local(f, &m, M_REP, param ? param->qp_num : 0, param ? param->private_data : NULL,
               param ? param->private_data_len : 0);
    return send_msg(f->fd, &m);
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
    struct fid *f = (struct fid *)id;
    struct msg m;
    fill_local(f, &m, M_REJ, 0, private_data, private_data_len);
    return send_msg(f->fd, &m);
}

int rdma_establish(struct rdma_cm_id *id)
{
    struct fid *f = (struct fid *)id;
    struct msg m;
    fill_local(f, &m, M_RTU, 0, NULL, 0);
    return send_msg(f->fd, &m);
}

int rdma_disconnect(struct rdma_cm_id *id)
{
    struct fid *f = (struct fid *)id;
    if (f->fd < 0)
        return 0;
    struct msg m;
    fill_local(f, &m, M_DISC, 0, NULL, 0);
    send_msg(f->fd, &m);
    return 0;
}

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *attr, int *mask)
{
    struct fid *f = (struct fid *)id;
    enum ibv_qp_state want = attr->qp_state;
    struct ibv_port_attr pa;
    if (!id->verbs || ibv_query_port(id->verbs, id->port_num, &pa) != 0) {
        errno = ENODEV;
        return -1;
    }
    memset(attr, 0, sizeof(*attr));
    attr->qp_state = want;
    switch (want) {
    case IBV_QPS_INIT:
        attr->port_num = id->port_num;
        attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        return 0;
    case IBV_QPS_RTR:
        if (!f->have_peer)
            break;
        attr->path_mtu = f->peer.mtu && f->peer.mtu < pa.active_mtu ? (enum ibv_mtu)f->peer.mtu
                                                                    : pa.active_mtu;
        attr->dest_qp_num = f->peer.qpn;
        attr->rq_psn = f->peer.psn;
        attr->max_dest_rd_atomic = 1;
        attr->min_rnr_timer = 12;
        attr->ah_attr.port_num = id->port_num;
        attr->ah_attr.dlid = f->peer.lid;
        if (pa.link_layer == IBV_LINK_LAYER_ETHERNET || f->peer.lid == 0) {
            attr->ah_attr.is_global = 1;
            memcpy(attr->ah_attr.grh.dgid.raw, f->peer.gid, 16);
            attr->ah_attr.grh.hop_limit = 64;
        }
        *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        return 0;
    case IBV_QPS_RTS:
        attr->sq_psn = f->my_psn;
        attr->timeout = 14;
        attr->retry_cnt = 7;
        attr->rnr_retry = 7;
        attr->max_rd_atomic = 1;
        *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        return 0;
    default:
        break;
    }
    errno = EINVAL;
    return -1;
}
