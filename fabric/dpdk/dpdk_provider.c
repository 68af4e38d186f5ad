/*
 * dpdk_provider.c - the dpdk provider's domain, completion queue,
 * registrations, endpoint memory, probe and tuning parameters.
 *
 * Polling is driven by gx's progress engine: every cq poll first receives
 * from the port (dispatching frames to their endpoints), then gives each
 * bound endpoint its turn (ACKs, timers, transmission), then returns
 * completions. Nothing runs in the background.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"
#include "fabric/dpdk/dpdk.h"

GX_PARAM_DEFINE(gx_param_dpdk_rto_min, "GX_DPDK_RTO_MIN_US", GX_PARAM_INT, "4000", NULL,
                "Smallest retransmission timeout of the dpdk provider, in microseconds (lower it "
                "where ranks own their cores; a descheduled peer looks like loss).");
GX_PARAM_DEFINE(gx_param_dpdk_rto_max, "GX_DPDK_RTO_MAX_US", GX_PARAM_INT, "100000", NULL,
                "Largest (backed-off) retransmission timeout of the dpdk provider, in us.");
GX_PARAM_DEFINE(gx_param_dpdk_peer_timeout, "GX_DPDK_PEER_TIMEOUT_MS", GX_PARAM_INT, "5000", NULL,
                "The retransmit budget: a dpdk connection with data unacknowledged and no frame "
                "from its peer for this long fails, naming the peer.");
GX_PARAM_DEFINE(gx_param_dpdk_cwnd_init, "GX_DPDK_CWND_INIT", GX_PARAM_INT, "64", NULL,
                "Initial congestion window of a dpdk connection, in segments.");
GX_PARAM_DEFINE(gx_param_dpdk_cwnd_min, "GX_DPDK_CWND_MIN", GX_PARAM_INT, "64", NULL,
                "Smallest window a loss halves (or a timeout sets) a dpdk connection's congestion "
                "window to, in segments: random loss then costs retransmissions, not the rate.");

GX_PARAM_DEFINE(gx_param_dpdk_inflight_max, "GX_DPDK_INFLIGHT_MAX", GX_PARAM_SIZE, "2M", NULL,
                "Most bytes a dpdk connection keeps unacknowledged (caps the congestion window: "
                "more only fills queues and inflates the round trip).");

struct dpdk_tuning dpdk_tuning;

static int read_tuning(void)
{
    size_t inflight = 2u << 20;
    long long rto_min = 4000, rto_max = 100000, peer = 5000, cw = 64, cwmin = 64;
    if (gx_param_int(&gx_param_dpdk_rto_min, &rto_min) != GX_OK ||
        gx_param_int(&gx_param_dpdk_rto_max, &rto_max) != GX_OK ||
        gx_param_int(&gx_param_dpdk_peer_timeout, &peer) != GX_OK ||
        gx_param_int(&gx_param_dpdk_cwnd_init, &cw) != GX_OK ||
        gx_param_int(&gx_param_dpdk_cwnd_min, &cwmin) != GX_OK ||
        gx_param_size(&gx_param_dpdk_inflight_max, &inflight) != GX_OK)
        return GX_EINVAL;
    if (rto_min < 10 || rto_max < rto_min || peer < 10 || cw < 1 || cw > (long long)GX_DPDK_WINDOW ||
        cwmin < 1 || cwmin > cw)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "dpdk: need 10 <= GX_DPDK_RTO_MIN_US <= "
                       "GX_DPDK_RTO_MAX_US, GX_DPDK_PEER_TIMEOUT_MS >= 10 and "
                       "1 <= GX_DPDK_CWND_MIN <= GX_DPDK_CWND_INIT <= %u", GX_DPDK_WINDOW);
    dpdk_tuning.rto_min_ns = (uint64_t)rto_min * 1000;
    dpdk_tuning.rto_max_ns = (uint64_t)rto_max * 1000;
    dpdk_tuning.peer_timeout_ns = (uint64_t)peer * 1000000;
    dpdk_tuning.fd_check_ns = 1000000;
    dpdk_tuning.cwnd_init = (uint32_t)cw;
    dpdk_tuning.cwnd_min = (uint32_t)cwmin;
    dpdk_tuning.inflight_max = inflight;
    return GX_OK;
}

static int dpdk_domain_open(const struct gx_fab_provider *prov,
                            const struct gx_fab_domain_attr *attr, struct gx_fab_domain **out)
{
    int rc = read_tuning();
    if (rc != GX_OK)
        return rc;
    rc = dpdk_port_up(attr->rank);
    if (rc != GX_OK)
        return rc;
    struct dpdk_domain *dom = calloc(1, sizeof(*dom));
    if (!dom)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "dpdk: out of memory opening a domain");
    rc = gx_sock_pick_interface(&dom->local, dom->ifname, sizeof(dom->ifname));
    if (rc != GX_OK)
        goto err_free_dom;
    rc = dpdk_port_attach(dom);
    if (rc != GX_OK)
        goto err_free_dom;
    gx_auth_key_derive(attr->job_key, &dom->key);
    gx_fab_mrtab_init(&dom->mrtab);
    *out = &dom->base;
    return GX_OK;

err_free_dom:
    free(dom);
    return rc;
}

static void dpdk_domain_close(struct gx_fab_domain *base)
{
    struct dpdk_domain *dom = (struct dpdk_domain *)base;
    struct dpdk_port_stats st;
    dpdk_port_stats(&st);
    GX_INFO(GX_SUB_FABRIC, "dpdk: port counters: rx %llu tx %llu (ring full %llu), dropped: "
            "malformed %llu unknown-connection %llu bad-cookie %llu; injected drop %llu dup %llu "
            "reorder %llu", (unsigned long long)st.rx_frames, (unsigned long long)st.tx_frames,
            (unsigned long long)st.tx_full,
            (unsigned long long)(st.drops[GX_DPDK_DROP_SHORT] + st.drops[GX_DPDK_DROP_IP] +
                                 st.drops[GX_DPDK_DROP_UDP] + st.drops[GX_DPDK_DROP_MAGIC] +
                                 st.drops[GX_DPDK_DROP_VERSION] + st.drops[GX_DPDK_DROP_FIELDS]),
            (unsigned long long)st.unknown_conn, (unsigned long long)st.bad_cookie,
            (unsigned long long)st.inj_drop, (unsigned long long)st.inj_dup,
            (unsigned long long)st.inj_reorder);
    if (st.work_calls)
        GX_INFO(GX_SUB_FABRIC, "dpdk: data-path work %.3f ms of CPU in %llu busy polls/turns",
                (double)st.work_ns / 1e6, (unsigned long long)st.work_calls);
    dpdk_port_detach(dom);
    gx_fab_mrtab_fini(&dom->mrtab);
    free(dom);
}

static int dpdk_cq_open(struct gx_fab_domain *dom, struct gx_fab_cq **out)
{
    struct dpdk_cq *cq = calloc(1, sizeof(*cq));
    if (!cq)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "dpdk: out of memory opening a cq");
    int rc = gx_fab_swcq_init(&cq->sw, dom, dpdk_ep_progress);
    if (rc != GX_OK) {
        free(cq);
        return rc;
    }
    *out = &cq->sw.base;
    return GX_OK;
}

static void dpdk_cq_close(struct gx_fab_cq *base)
{
    struct dpdk_cq *cq = (struct dpdk_cq *)base;
    gx_fab_swcq_fini(&cq->sw);
    free(cq);
}

static int dpdk_cq_poll(struct gx_fab_cq *base, struct gx_fab_cqe *out, int max)
{
    dpdk_port_poll((struct dpdk_domain *)base->dom);
    return gx_fab_swcq_poll(&((struct dpdk_cq *)base)->sw, out, max);
}

static int dpdk_mr_reg(struct gx_fab_domain *base, void *addr, size_t len,
                       enum gx_fab_mem_type type, unsigned access, struct gx_fab_mr **out)
{
    if (type != GX_FAB_MEM_HOST)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "dpdk: only host memory can be "
                       "registered (stage device buffers through the host)");
    return gx_fab_mrtab_reg(&((struct dpdk_domain *)base)->mrtab, base, addr, len, type, access,
                            out);
}

static int dpdk_mr_dereg(struct gx_fab_mr *mr)
{
    return gx_fab_mrtab_dereg(&((struct dpdk_domain *)mr->dom)->mrtab, mr);
}

struct dpdk_ep *dpdk_ep_alloc(struct dpdk_domain *dom, struct dpdk_cq *cq)
{
    struct dpdk_ep *ep = calloc(1, sizeof(*ep));
    if (!ep)
        goto err_nomem;
    ep->depth = (uint32_t)gx_fab_queue_depth();
    ep->txops = calloc(ep->depth, sizeof(*ep->txops));
    ep->rx = calloc(ep->depth, sizeof(*ep->rx));
    ep->segs = calloc(GX_DPDK_WINDOW, sizeof(*ep->segs));
    ep->rbits = calloc(GX_DPDK_WINDOW, 1);
    ep->parked = calloc(DPDK_PARK_MAX, sizeof(*ep->parked));
    if (!ep->txops || !ep->rx || !ep->segs || !ep->rbits || !ep->parked)
        goto err_free_ep;
    ep->fd = -1;
    ep->base.ops = &dom->base.ops;
    ep->base.dom = &dom->base;
    ep->base.cq = &cq->sw.base;
    ep->base.peer_rank = -1;
    ep->dom = dom;
    ep->cq = cq;
    ep->state = EP_CONNECTING;
    ep->err_rx = UINT64_MAX;
    ep->cwnd = dpdk_tuning.cwnd_init;
    ep->ssthresh = GX_DPDK_WINDOW;
    ep->rto_ns = dpdk_tuning.rto_min_ns * 4;
    if (gx_random_bytes(&ep->cookie, sizeof(ep->cookie)) != GX_OK)
        ep->cookie = (uint32_t)gx_now_ns();
    if (gx_random_bytes(&ep->psn_next, sizeof(ep->psn_next)) != GX_OK)
        ep->psn_next = (uint32_t)(gx_now_ns() >> 10);
    ep->snd_una = ep->snd_nxt = ep->lost_scan = ep->psn_next;
    if (dpdk_port_conn_add(ep) != GX_OK)
        goto err_free_ep;
    if (gx_fab_swcq_attach(&cq->sw, &ep->base, 2 * ep->depth) != GX_OK) {
        dpdk_port_conn_del(ep);
        goto err_free_ep;
    }
    return ep;

err_free_ep:
    free(ep->txops);
    free(ep->rx);
    free(ep->segs);
    free(ep->rbits);
    free(ep->parked);
    free(ep);
err_nomem:
    gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "dpdk: out of memory creating an endpoint");
    return NULL;
}

void dpdk_ep_free(struct dpdk_ep *ep)
{
    if (ep->state != EP_CONNECTING)
        GX_INFO(GX_SUB_FABRIC, "dpdk: %s: segments sent %llu received %llu, retransmitted %llu, "
                "timeouts %llu (spurious %llu), probes %llu, duplicates %llu, not yet posted %llu, early writes parked %llu dropped %llu, srtt %.1f us, rto %.1f us, "
                "cwnd %.1f", ep->base.name, (unsigned long long)ep->n_data_tx,
                (unsigned long long)ep->n_data_rx, (unsigned long long)ep->n_retx,
                (unsigned long long)ep->n_timeouts, (unsigned long long)ep->n_spurious,
                (unsigned long long)ep->n_probes,
                (unsigned long long)ep->n_dup_rx,
                (unsigned long long)ep->n_rnr, (unsigned long long)ep->n_parked,
                (unsigned long long)ep->n_early, (double)ep->srtt_ns / 1e3,
                (double)ep->rto_ns / 1e3, ep->cwnd);
    dpdk_port_conn_del(ep);
    gx_fab_swcq_detach(&ep->cq->sw, &ep->base, 2 * ep->depth);
    if (ep->fd >= 0)
        close(ep->fd);
    dpdk_rx_drop_parked(ep);
    dpdk_zc_ep_free(ep);
    free(ep->parked);
    free(ep->txops);
    free(ep->rx);
    free(ep->segs);
    free(ep->rbits);
    free(ep);
}

static int dpdk_probe(struct gx_fab_devinfo *devs, int max, int *count)
{
    if (!getenv("GX_DPDK_VDEV") && !getenv("GX_DPDK_EAL_ARGS")) {
        /* EAL is not started just to look when nothing names a port; say so
         * (recorded, not logged: probing is not an error). */
        gx_set_last_error("no port named: set GX_DPDK_VDEV to a vdev (net_memif0,role=server; "
                          "net_af_packet0,iface=eth1) or a PCI address bound to vfio-pci");
        return GX_EUNSUPPORTED;
    }
    int rc = dpdk_port_up(-1);
    if (rc != GX_OK)
        return rc;
    if (max > 0)
        dpdk_port_describe(devs[0].name, sizeof(devs[0].name), devs[0].detail,
                           sizeof(devs[0].detail));
    *count = 1;
    return GX_OK;
}

const struct gx_fab_provider gx_fab_dpdk_provider = {
    .name = "dpdk",
    .description = "DPDK userspace Ethernet (UDP/IPv4 frames) with its own reliability",
    .ops = {
        .probe = dpdk_probe,
        .domain_open = dpdk_domain_open,
        .domain_close = dpdk_domain_close,
        .cq_open = dpdk_cq_open,
        .cq_close = dpdk_cq_close,
        .cq_poll = dpdk_cq_poll,
        .mr_reg = dpdk_mr_reg,
        .mr_dereg = dpdk_mr_dereg,
        .mr_pack_rkey = gx_fab_mrtab_pack,
        .listen = dpdk_listen,
        .accept = dpdk_accept,
        .listener_close = dpdk_listener_close,
        .connect = dpdk_connect,
        .ep_establish = dpdk_ep_establish,
        .ep_close = dpdk_ep_close,
        .post_send = dpdk_post_send,
        .post_recv = dpdk_post_recv,
        .post_write_imm = dpdk_post_write_imm,
    },
};
