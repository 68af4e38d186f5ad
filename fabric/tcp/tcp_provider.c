/*
 * tcp_provider.c - the tcp provider's domain, completion queue, memory
 * registrations and device probe. Works on any network; the data path is in
 * tcp_data.c, connection set-up in tcp_conn.c.
 */
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <net/if.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "fabric/tcp/tcp.h"

GX_PARAM_DEFINE(gx_param_tcp_nstreams, "GX_TCP_NSTREAMS", GX_PARAM_INT, "1", NULL,
                "TCP streams per tcp-provider connection; messages of at least "
                "GX_TCP_STRIPE_MIN bytes are striped across them (1..32). One, like "
                "Open MPI, NCCL and Gloo: the progress thread does every stream's copies "
                "itself, so more streams only pay when one TCP flow is capped.");
GX_PARAM_DEFINE(gx_param_tcp_stripe_min, "GX_TCP_STRIPE_MIN", GX_PARAM_SIZE, "256K", NULL,
                "Smallest message the tcp provider stripes across its streams.");
GX_PARAM_DEFINE(gx_param_tcp_notsent_lowat, "GX_TCP_NOTSENT_LOWAT", GX_PARAM_SIZE, "0", NULL,
                "Unsent bytes the kernel holds per tcp-provider stream (TCP_NOTSENT_LOWAT; "
                "0 = the kernel's default, up to its autotuned send buffer). Off by default: "
                "128K cost 0.5-0.7x of the bandwidth at 64 MiB on loopback; on a slow link it "
                "shortens what a rendezvous answer waits behind (docs/fabric.md).");

void tcp_stream_ready(const struct tcp_domain *dom, int fd)
{
    int v = (int)dom->notsent_lowat;
    if (v > 0 && setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof(v)) != 0)
        GX_INFO(GX_SUB_FABRIC, "tcp: TCP_NOTSENT_LOWAT=%d refused by the kernel", v);
}

static int tcp_domain_open(const struct gx_fab_provider *prov, const struct gx_fab_domain_attr *attr,
                           struct gx_fab_domain **out)
{
    struct tcp_domain *dom = calloc(1, sizeof(*dom));
    if (!dom)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "tcp: out of memory opening a domain");
    long long n = 1;
    if (gx_param_int(&gx_param_tcp_nstreams, &n) != GX_OK || n < 1 || n > GX_TCP_MAX_STREAMS) {
        free(dom);
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "GX_TCP_NSTREAMS must be 1..%d",
                       GX_TCP_MAX_STREAMS);
    }
    dom->nstreams = (int)n;
    dom->stripe_min = 256 * 1024;
    if (gx_param_size(&gx_param_tcp_stripe_min, &dom->stripe_min) != GX_OK) {
        free(dom);
        return GX_EINVAL;
    }
    if (dom->stripe_min < 4096)
        dom->stripe_min = 4096;
    if (gx_param_size(&gx_param_tcp_notsent_lowat, &dom->notsent_lowat) != GX_OK) {
        free(dom);
        return GX_EINVAL;
    }
    if (dom->notsent_lowat > (size_t)INT_MAX) {
        size_t v = dom->notsent_lowat;
        free(dom);
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "GX_TCP_NOTSENT_LOWAT=%zu is over %d bytes", v,
                       INT_MAX);
    }
    dom->base.caps = GX_FAB_CAP_STREAM;
    dom->rail = attr->size >= offsetof(struct gx_fab_domain_attr, rail) + sizeof(int)
                    ? attr->rail : -1;
    int rc = gx_sock_pick_rail(dom->rail, &dom->local, &dom->mask, dom->ifname,
                               sizeof(dom->ifname));
    if (rc != GX_OK) {
        free(dom);
        return rc;
    }
    gx_auth_key_derive(attr->job_key, &dom->key);
    memcpy(dom->key.job_id, attr->job_id, sizeof(dom->key.job_id));
    gx_fab_mrtab_init(&dom->mrtab);
    char a[64];
    GX_INFO(GX_SUB_FABRIC, "tcp: domain on %s (%s), %d streams, striping from %zu bytes%s",
            dom->ifname, gx_sock_addr_str(&dom->local, a, sizeof(a)), dom->nstreams,
            dom->stripe_min, gx_sock_rail_count() > 1 && dom->rail >= 0
                                 ? " (rail: local rank's entry of GX_SOCKET_IFNAME)" : "");
    *out = &dom->base;
    return GX_OK;
}

static void tcp_domain_close(struct gx_fab_domain *base)
{
    struct tcp_domain *dom = (struct tcp_domain *)base;
    gx_fab_mrtab_fini(&dom->mrtab);
    free(dom);
}

static int tcp_cq_open(struct gx_fab_domain *dom, struct gx_fab_cq **out)
{
    struct tcp_cq *cq = calloc(1, sizeof(*cq));
    if (!cq)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "tcp: out of memory opening a cq");
    int rc = gx_fab_swcq_init(&cq->sw, dom, tcp_ep_progress);
    if (rc != GX_OK) {
        free(cq);
        return rc;
    }
    *out = &cq->sw.base;
    return GX_OK;
}

static void tcp_cq_close(struct gx_fab_cq *base)
{
    struct tcp_cq *cq = (struct tcp_cq *)base;
    gx_fab_swcq_fini(&cq->sw);
    free(cq);
}

static int tcp_cq_poll(struct gx_fab_cq *base, struct gx_fab_cqe *out, int max)
{
    return gx_fab_swcq_poll(&((struct tcp_cq *)base)->sw, out, max);
}

static int tcp_mr_reg(struct gx_fab_domain *base, void *addr, size_t len, enum gx_fab_mem_type type,
                      unsigned access, struct gx_fab_mr **out)
{
    return gx_fab_mrtab_reg(&((struct tcp_domain *)base)->mrtab, base, addr, len, type, access, out);
}

static int tcp_mr_dereg(struct gx_fab_mr *mr)
{
    return gx_fab_mrtab_dereg(&((struct tcp_domain *)mr->dom)->mrtab, mr);
}

static int tcp_probe(struct gx_fab_devinfo *devs, int max, int *count)
{
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) != 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "tcp: getifaddrs failed: %m");
    int n = 0;
    for (struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
        if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP) || ifa->ifa_addr->sa_family != AF_INET)
            continue;
        if (n < max) {
            struct gx_sockaddr sa = { .len = sizeof(struct sockaddr_in) };
            memcpy(&sa.u.in4, ifa->ifa_addr, sizeof(sa.u.in4));
            char a[64];
            snprintf(devs[n].name, sizeof(devs[n].name), "%s", ifa->ifa_name);
            snprintf(devs[n].detail, sizeof(devs[n].detail), "%s%s",
                     gx_sock_addr_str(&sa, a, sizeof(a)),
                     (ifa->ifa_flags & IFF_LOOPBACK) ? " (loopback)" : "");
            devs[n].link_bps = 0;
        }
        n++;
    }
    freeifaddrs(list);
    *count = n;
    return GX_OK;
}

const struct gx_fab_provider gx_fab_tcp_provider = {
    .name = "tcp",
    .description = "TCP sockets: any network, several streams per connection",
    .ops = {
        .probe = tcp_probe,
        .domain_open = tcp_domain_open,
        .domain_close = tcp_domain_close,
        .cq_open = tcp_cq_open,
        .cq_close = tcp_cq_close,
        .cq_poll = tcp_cq_poll,
        .mr_reg = tcp_mr_reg,
        .mr_dereg = tcp_mr_dereg,
        .mr_pack_rkey = gx_fab_mrtab_pack,
        .listen = tcp_listen,
        .accept = tcp_accept,
        .listener_close = tcp_listener_close,
        .connect = tcp_connect,
        .ep_establish = tcp_ep_establish,
        .ep_close = tcp_ep_close,
        .post_send = tcp_post_send,
        .post_recv = tcp_post_recv,
        .post_write_imm = tcp_post_write_imm,
        .cq_wait_fds = tcp_cq_wait_fds,
    },
};
