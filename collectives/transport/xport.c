/*
 * xport.c - opening and closing a communicator's transport, progress and
 * waiting. Connections are xport_conn.c's (on demand); the protocol itself
 * is in xport_p2p.c (posting) and xport_match.c (completions, arrivals,
 * matching).
 *
 * Provider choice is made from facts every rank shares (the node layout and
 * GX_PROVIDER), so every rank opens the same domains in the same order and
 * plans the same provider for each pair: shm for peers on the same node when
 * any node has two ranks, the network provider (tcp) for peers on other
 * nodes when there are several nodes.
 */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "collectives/comm/comm_internal.h"
#include "collectives/transport/xport_am.h"
#include "collectives/transport/xport_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_provider, "GX_PROVIDER", GX_PARAM_STRING, "", NULL,
                "Force one fabric provider for every peer (shm, tcp, verbs, dpdk). Unset: shm "
                "inside a node, the network provider (GX_NET) between nodes.");
GX_PARAM_DEFINE(gx_param_net, "GX_NET", GX_PARAM_STRING, "auto", NULL,
                "Provider for peers on other nodes when GX_PROVIDER is unset: auto (verbs when "
                "every rank has an active RDMA port, else tcp), or a provider name.");
GX_PARAM_DEFINE(gx_param_write_window, "GX_WRITE_WINDOW", GX_PARAM_SIZE, "256K", NULL,
                "Rendezvous bytes a rank writes to one peer at a time; further cleared "
                "sends wait for those writes to complete, and a larger send is written in "
                "pieces of this size (0 = no limit, else at least 4K). Keeps the queue ahead "
                "of a control message short: a clear-to-send going the other way waits for "
                "at most this much bulk data, not a whole pipeline's. Unset, it applies to "
                "stream providers only (tcp); set, to every provider.");
GX_PARAM_DEFINE(gx_param_eager_limit, "GX_EAGER_LIMIT", GX_PARAM_SIZE, "16K", NULL,
                "Largest message sent eagerly (copied through bounce slots); larger ones use "
                "rendezvous and are written straight into the receive buffer.");

GX_PARAM_DEFINE(gx_param_checksum, "GX_CHECKSUM", GX_PARAM_BOOL, "0", NULL,
                "Checksum every message this rank sends (CRC-32C; the receiver verifies and "
                "fails the link naming the sender on a mismatch). Catches corruption the "
                "fabric missed, at the cost of one pass over the data on each side.");

GX_PARAM_DEFINE(gx_param_connect, "GX_CONNECT", GX_PARAM_ENUM, "demand", "demand|all",
                "When the transport connects to a peer: when something first needs it "
                "(demand: a rank holds endpoints only to the peers its algorithms and "
                "messages use, about 2*log2(N) plus its node's ranks with the default "
                "algorithms), or every peer when the communicator is created (all: N-1 "
                "endpoints per rank, the full mesh of earlier versions).");

/* The verbs device to open: the topology's NIC when verbs lists it. */
static const char *verbs_device_for(const struct gx_comm *c, char *buf, size_t len)
{
    const struct gx_fab_provider *prov = gx_fab_provider_find("verbs");
    struct gx_fab_devinfo devs[32];
    int n = 0;
    if (!prov || !c->nic_name[0] || gx_fab_probe(prov, devs, 32, &n) != GX_OK)
        return NULL;
    size_t nl = strlen(c->nic_name);
    for (int i = 0; i < n && i < 32; i++) {
        if (strncmp(devs[i].name, c->nic_name, nl) == 0 &&
            (devs[i].name[nl] == '\0' || devs[i].name[nl] == ':')) {
            snprintf(buf, len, "%s:%d", c->nic_name, c->nic_port > 0 ? c->nic_port : 1);
            return buf;
        }
    }
    return NULL;
}

/* GX_NET=auto: verbs when every rank has an active RDMA port, else tcp. The
 * answer must be the same everywhere, so the ranks vote. */
static int pick_net_provider(struct gx_xport *x, const char **out)
{
    const char *net = gx_param_text(&gx_param_net);
    if (strcmp(net, "auto") != 0) {
        *out = net;
        return GX_OK;
    }
    const struct gx_fab_provider *verbs = gx_fab_provider_find("verbs");
    struct gx_fab_devinfo devs[4];
    int n = 0;
    uint8_t mine = verbs && gx_fab_probe(verbs, devs, 4, &n) == GX_OK && n > 0;
    uint8_t *all = malloc((size_t)x->size);
    if (!all)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "transport: out of memory");
    int rc = gx_comm_boot_allgather(x->comm, &mine, all, 1);
    int missing = -1;
    for (int r = 0; rc == GX_OK && r < x->size && missing < 0; r++)
        if (!all[r])
            missing = r;
    free(all);
    if (rc != GX_OK)
        return rc;
    *out = missing < 0 ? "verbs" : "tcp";
    if (verbs && missing >= 0)
        GX_INFO(GX_SUB_COLL, "GX_NET=auto: tcp between nodes, rank %d has no active RDMA port",
                missing);
    return GX_OK;
}

static int open_domain(struct gx_xport *x, const char *name, struct xp_domain *d)
{
    struct gx_comm *c = x->comm;
    char devbuf[96];
    d->prov = gx_fab_provider_find(name);
    if (!d->prov)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "provider '%s' is not built in (built: %s)", name,
                       gx_fab_provider_names());
    struct gx_fab_domain_attr attr = GX_FAB_DOMAIN_ATTR_INIT;
    attr.job_key = c->job_key;
    attr.rank = c->rank;
    attr.rail = c->local_rank; /* tcp: this local rank's GX_SOCKET_IFNAME entry */
    gx_boot_job_id(c->boot, attr.job_id);
    if (strcmp(name, "verbs") == 0)
        attr.device = verbs_device_for(c, devbuf, sizeof(devbuf));
    if (attr.device)
        attr.gpu_path = c->gpu_nic_path; /* the topology's NIC for this rank's GPU */
    int rc = gx_fab_domain_open(d->prov, &attr, &d->dom);
    if (rc == GX_OK)
        rc = gx_fab_cq_open(d->dom, &d->cq);
    if (rc == GX_OK)
        rc = gx_fab_rcache_create_domain(d->dom, GX_FAB_ACCESS_LOCAL, &d->rcache_send);
    if (rc == GX_OK)
        rc = gx_fab_rcache_create_domain(d->dom, GX_FAB_ACCESS_LOCAL | GX_FAB_ACCESS_REMOTE_WRITE,
                                         &d->rcache_recv);
    if (rc == GX_OK)
        rc = gx_param_size(&gx_param_write_window, &d->write_window);
    if (rc == GX_OK && d->write_window && d->write_window < 4096)
        rc = gx_fail(GX_EINVAL, GX_SUB_COLL, "GX_WRITE_WINDOW=%zu must be 0 (no limit) or at "
                     "least 4 KiB", d->write_window);
    if (rc == GX_OK && !gx_param_is_set(&gx_param_write_window) &&
        !(d->dom->caps & GX_FAB_CAP_STREAM))
        d->write_window = 0; /* the default bounds stream providers only */
    return rc;
}

int gx_xport_open(struct gx_comm *c, struct gx_xport **out)
{
    struct gx_xport *x = calloc(1, sizeof(*x));
    if (x)
        x->peers = calloc((size_t)c->size, sizeof(*x->peers));
    if (!x || !x->peers) {
        if (x)
            free(x->peers);
        free(x);
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "transport: out of memory");
    }
    pthread_mutex_init(&x->lock, NULL);
    x->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); /* -1: sleepers are not woken early */
    x->comm = c;
    x->rank = c->rank;
    x->size = c->size;
    x->next_send_id = 1;
    x->next_recv_id = 1;
    /* Every peer knows its transport before anything can fail: the error
     * path (gx_xport_close -> xp_fail_peer) walks all of them. */
    for (int q = 0; q < c->size; q++) {
        x->peers[q].rank = q;
        x->peers[q].x = x;
        x->peers[q].pend_index = -1;
    }
    x->peers[c->rank].conn = XP_CONN_UP; /* self: messages are delivered in place */
    int rc = gx_param_size(&gx_param_eager_limit, &x->eager_limit);
    if (rc == GX_OK && (x->eager_limit < 256 || x->eager_limit > (1u << 20)))
        rc = gx_fail(GX_EINVAL, GX_SUB_COLL, "GX_EAGER_LIMIT=%zu must be 256 B..1 MiB",
                     x->eager_limit);
    x->eager_limit = (x->eager_limit + 63) & ~(size_t)63;
    if (rc == GX_OK)
        rc = gx_param_bool(&gx_param_checksum, &x->checksum);
    int mode = 0;
    if (rc == GX_OK)
        rc = gx_param_enum(&gx_param_connect, &mode);

    /* Which domains: decided from shared facts only (some node holds two
     * ranks exactly when there are fewer nodes than ranks). */
    bool any_shared_node = c->node_count < c->size;
    const char *forced = gx_param_text(&gx_param_provider);
    if (rc == GX_OK && forced[0]) {
        rc = open_domain(x, forced, &x->doms[x->ndoms++]);
    } else if (rc == GX_OK) {
        if (any_shared_node)
            rc = open_domain(x, "shm", &x->doms[x->ndoms++]);
        const char *net = NULL;
        if (rc == GX_OK && c->node_count > 1)
            rc = pick_net_provider(x, &net);
        if (rc == GX_OK && net)
            rc = open_domain(x, net, &x->doms[x->ndoms++]);
    }
    for (int q = 0; rc == GX_OK && q < c->size; q++) {
        if (q != c->rank)
            x->peers[q].d = (forced[0] || gx_comm_same_node(c, q, c->rank))
                                ? &x->doms[0] : &x->doms[x->ndoms - 1];
    }
    if (rc == GX_OK && c->size > 1)
        rc = xp_conn_open(x);
    if (rc == GX_OK && mode == 1 && c->size > 1) {
        /* Never past init's deadline (GX_INIT_TIMEOUT) or GX_FAB_CONNECT_TIMEOUT. */
        uint64_t deadline = gx_deadline_after_ms(gx_fab_connect_timeout_ms());
        uint64_t init = gx_comm_op_deadline(c);
        rc = xp_conn_all(x, init && init < deadline ? init : deadline);
    }
    if (rc != GX_OK) {
        gx_xport_close(x);
        return rc;
    }
    GX_INFO(GX_SUB_COLL, "transport of '%s': %s%s%s, eager limit %zu B, connections %s", c->name,
            x->ndoms > 0 ? x->doms[0].prov->name : "self only", x->ndoms > 1 ? " + " : "",
            x->ndoms > 1 ? x->doms[1].prov->name : "", x->eager_limit,
            mode == 1 ? "to every peer (GX_CONNECT=all)" : "on demand");
    *out = x;
    return GX_OK;
}

static void close_meshes_locked(struct gx_xport *x, const char *why)
{
    for (int q = 0; q < x->size; q++)
        xp_fail_peer(&x->peers[q], GX_EABORTED, why);
    xp_fail_any(x, GX_EABORTED, -1, why);
    xp_conn_close_all(x);
}

void gx_xport_abort(struct gx_xport *x)
{
    pthread_mutex_lock(&x->lock);
    if (!x->aborted) {
        x->aborted = true;
        close_meshes_locked(x, "the communicator was aborted");
    }
    pthread_mutex_unlock(&x->lock);
}

void gx_xport_close(struct gx_xport *x)
{
    if (!x)
        return;
    pthread_mutex_lock(&x->lock);
    if (!x->aborted)
        close_meshes_locked(x, "the communicator is being destroyed");
    xp_svc_free(x); /* windows and calls (xport_am.c): their ops failed above */
    for (int q = 0; q < x->size; q++) {
        struct xp_peer *p = &x->peers[q];
        xp_conn_free_peer(p);
        free(p->ctl);
        free(p->wq);
        free(p->held);
        for (struct xp_unexpected *u = p->unexp_head, *n; u; u = n) {
            n = u->next;
            free(u);
        }
    }
    for (int i = 0; i < x->ndoms; i++) {
        struct xp_domain *d = &x->doms[i];
        if (d->rcache_send)
            gx_fab_rcache_destroy(d->rcache_send);
        if (d->rcache_recv)
            gx_fab_rcache_destroy(d->rcache_recv);
        gx_fab_cq_close(d->cq);
        if (d->dom)
            gx_fab_domain_close(d->dom);
    }
    pthread_mutex_unlock(&x->lock);
    pthread_mutex_destroy(&x->lock);
    if (x->wake_fd >= 0)
        close(x->wake_fd);
    free(x->peers);
    free(x->addrs);
    free(x->pend);
    free(x);
}

int xp_progress_locked(struct gx_xport *x)
{
    struct gx_fab_cqe cqes[32];
    if (x->aborted)
        return GX_OK;
    xp_conn_progress(x);
    const uint64_t polled_before = __atomic_load_n(&x->polled, __ATOMIC_RELAXED);
    int rc = GX_OK;
    for (int i = 0; rc == GX_OK && i < x->ndoms; i++) {
        for (;;) {
            int n = gx_fab_cq_poll(x->doms[i].cq, cqes, 32);
            if (n < 0) {
                rc = n;
                break;
            }
            if (n > 0)
                __atomic_add_fetch(&x->polled, (uint64_t)n, __ATOMIC_RELAXED);
            for (int k = 0; k < n; k++) {
                if (gx_trace_on())
                    xp_trace_cqe(&x->doms[i], &cqes[k]);
                xp_handle_cqe(x, &cqes[k]);
            }
            if (n < 32)
                break;
        }
    }
    if (x->sleepers > 0 && x->wake_fd >= 0 &&
        __atomic_load_n(&x->polled, __ATOMIC_RELAXED) != polled_before) {
        uint64_t one = 1; /* a thread asleep in gx_xport_wait: its work may be among them */
        (void)!write(x->wake_fd, &one, sizeof(one));
    }
    return rc;
}

int gx_xport_progress(struct gx_xport *x)
{
    pthread_mutex_lock(&x->lock);
    int rc = xp_progress_locked(x);
    pthread_mutex_unlock(&x->lock);
    return rc;
}

#define XP_WAIT_FDS 256

void gx_xport_wait(struct gx_xport *x, int timeout_ms)
{
    struct pollfd fds[XP_WAIT_FDS];
    int n = 0;
    bool pending = false, can_sleep = true;
    pthread_mutex_lock(&x->lock);
    if (x->aborted || x->ndoms == 0)
        can_sleep = false;
    int asked = 0; /* domains whose wait_fds said sleep: each needs its wait_done */
    int first[2] = { 0, 0 }, count[2] = { 0, 0 }; /* each domain's fds */
    for (int i = 0; can_sleep && !pending && i < x->ndoms; i++) {
        int got = 0;
        int rc = gx_fab_cq_wait_fds(x->doms[i].cq, fds + n, XP_WAIT_FDS - n, &got);
        if (rc == GX_INPROGRESS)
            pending = true;
        else if (rc != GX_OK)
            can_sleep = false; /* cannot sleep (dpdk), or more fds than fit: nap */
        first[i] = n;
        count[i] = rc == GX_OK ? got : 0;
        n += count[i];
        asked += rc == GX_OK;
    }
    if (x->npend > 0 && timeout_ms > 1)
        timeout_ms = 1; /* connections being made: establish is polled */
    int wake_at = -1; /* fds[wake_at]: the in-process wake-up (x->wake_fd) */
    if (can_sleep && !pending && x->wake_fd >= 0 && n < XP_WAIT_FDS) {
        wake_at = n;
        fds[n++] = (struct pollfd){ .fd = x->wake_fd, .events = POLLIN };
    }
    x->sleepers += wake_at >= 0;
    pthread_mutex_unlock(&x->lock);
    bool polled = false;
    if (!pending) {
        if (can_sleep) {
            polled = poll(fds, (nfds_t)n, timeout_ms) > 0;
        } else {
            struct timespec ts = { 0, 50000 };
            nanosleep(&ts, NULL);
        }
    }
    pthread_mutex_lock(&x->lock);
    for (int i = 0; i < asked; i++) /* revents only if the poll returned them */
        gx_fab_cq_wait_done(x->doms[i].cq, fds + first[i], polled ? count[i] : 0);
    if (wake_at >= 0) {
        x->sleepers--;
        uint64_t v;
        if (polled && (fds[wake_at].revents & POLLIN))
            (void)!read(x->wake_fd, &v, sizeof(v)); /* resets it */
    }
    pthread_mutex_unlock(&x->lock);
}

const char *gx_xport_provider_of(const struct gx_xport *x, int peer)
{
    if (peer == x->rank)
        return "self";
    if (peer < 0 || peer >= x->size || !x->peers[peer].d)
        return "none";
    return x->peers[peer].d->prov->name;
}
