/*
 * verbs_device.c - RDMA devices and ports as the verbs provider sees them:
 * which ports are usable (ACTIVE, passing GX_IB_HCA or the device the
 * topology layer chose), their link layer and rate, the GID a RoCE port
 * uses, and the GX_IB_* connection settings.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "fabric/verbs/verbs.h"
#include "gpudirect/gpudirect.h"
#include "topology/hca_filter.h"

GX_PARAM_DEFINE(gx_param_ib_gid_index, "GX_IB_GID_INDEX", GX_PARAM_INT, "-1", NULL,
                "GID table index for RoCE (and GRH) addressing; -1 chooses a RoCE v2 "
                "IPv4-mapped GID matching the interface address (GX_SOCKET_IFNAME).");
GX_PARAM_DEFINE(gx_param_ib_tc, "GX_IB_TC", GX_PARAM_INT, "0", NULL,
                "Traffic class (RoCE: DSCP << 2) of the verbs provider's QPs.");
GX_PARAM_DEFINE(gx_param_ib_sl, "GX_IB_SL", GX_PARAM_INT, "0", NULL,
                "InfiniBand service level of the verbs provider's QPs.");
GX_PARAM_DEFINE(gx_param_ib_timeout, "GX_IB_TIMEOUT", GX_PARAM_INT, "18", NULL,
                "Local ACK timeout exponent: 4.096 us * 2^value per try (18 = 1.07 s).");
GX_PARAM_DEFINE(gx_param_ib_retry_cnt, "GX_IB_RETRY_CNT", GX_PARAM_INT, "7", NULL,
                "Transport retries before a QP fails with 'retry exceeded' (0..7).");
GX_PARAM_DEFINE(gx_param_ib_qps, "GX_IB_QPS_PER_CONN", GX_PARAM_INT, "1", NULL,
                "RC QPs per verbs connection; messages of at least GX_IB_STRIPE_MIN bytes "
                "are striped across them (1..8).");
GX_PARAM_DEFINE(gx_param_ib_stripe_min, "GX_IB_STRIPE_MIN", GX_PARAM_SIZE, "512K", NULL,
                "Smallest message the verbs provider stripes across GX_IB_QPS_PER_CONN QPs.");
GX_PARAM_DEFINE(gx_param_ib_cm, "GX_IB_CM", GX_PARAM_ENUM, "tcp", "tcp|rdmacm",
                "How verbs connections exchange QP information: tcp (the job-key "
                "authenticated side channel) or rdmacm (librdmacm resolves addresses and "
                "connects the QPs; untested on hardware, docs/verbs.md).");

static int read_int(const struct gx_param *p, int lo, int hi, int *out)
{
    long long v;
    int rc = gx_param_int(p, &v);
    if (rc != GX_OK)
        return rc;
    if (v < lo || v > hi)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "%s=%lld is outside %d..%d", p->name, v, lo, hi);
    *out = (int)v;
    return GX_OK;
}

int gx_verbs_settings_read(struct gx_verbs_settings *s)
{
    int rc, cm = 0;
    if ((rc = read_int(&gx_param_ib_gid_index, -1, 65535, &s->gid_index)) != GX_OK ||
        (rc = read_int(&gx_param_ib_tc, 0, 255, &s->tc)) != GX_OK ||
        (rc = read_int(&gx_param_ib_sl, 0, 15, &s->sl)) != GX_OK ||
        (rc = read_int(&gx_param_ib_timeout, 1, 31, &s->timeout)) != GX_OK ||
        (rc = read_int(&gx_param_ib_retry_cnt, 0, 7, &s->retry_cnt)) != GX_OK ||
        (rc = read_int(&gx_param_ib_qps, 1, GX_VERBS_MAX_QPS, &s->nqps)) != GX_OK)
        return rc;
    s->stripe_min = 512 * 1024;
    if ((rc = gx_param_size(&gx_param_ib_stripe_min, &s->stripe_min)) != GX_OK)
        return rc;
    if (s->stripe_min < 4096)
        s->stripe_min = 4096;
    if ((rc = gx_param_enum(&gx_param_ib_cm, &cm)) != GX_OK)
        return rc;
    s->cm_rdmacm = cm == 1;
    return GX_OK;
}

double gx_verbs_port_gbps(const struct ibv_port_attr *a, char *label, size_t label_len)
{
    int lanes = 0;
    switch (a->active_width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    }
    /* Per-lane data rates, as NCCL counts them. */
    double lane = 0;
    const char *name = "?";
    switch ((int)a->active_speed) { /* XDR (256) only in active_speed_ex */
    case 1: lane = 2.5; name = "SDR"; break;
    case 2: lane = 5.0; name = "DDR"; break;
    case 4: lane = 10.0; name = "QDR"; break;
    case 8: lane = 10.0; name = "FDR10"; break;
    case 16: lane = 14.0; name = "FDR"; break;
    case 32: lane = 25.0; name = "EDR"; break;
    case 64: lane = 50.0; name = "HDR"; break;
    case 128: lane = 100.0; name = "NDR"; break;
    case 256: lane = 200.0; name = "XDR"; break;
    }
    if (label)
        snprintf(label, label_len, "%dx %s", lanes, name);
    return lanes * lane;
}

/* ::ffff:a.b.c.d, leniently: bytes 8-9 are not checked (the emulator keeps
 * its UDP port there; real IPv4-mapped GIDs have zeros). */
static bool gid_ipv4_mapped(const union ibv_gid *g, uint32_t *ip4)
{
    for (int i = 0; i < 8; i++)
        if (g->raw[i])
            return false;
    if (g->raw[10] != 0xff || g->raw[11] != 0xff)
        return false;
    memcpy(ip4, &g->raw[12], 4);
    return true;
}

static bool gid_zero(const union ibv_gid *g)
{
    for (int i = 0; i < 16; i++)
        if (g->raw[i])
            return false;
    return true;
}

int gx_verbs_pick_gid(const struct gx_verbs_api *api, struct ibv_context *ctx, int port,
                      const struct ibv_port_attr *pa, int forced, uint32_t want_ip4,
                      struct gx_verbs_port *out)
{
    const char *dev = api->get_device_name(ctx->device);
    if (forced >= 0) {
        if (api->query_gid(ctx, (uint8_t)port, forced, &out->gid) != 0)
            return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "verbs: %s:%d has no GID index %d "
                           "(GX_IB_GID_INDEX; the table has %d entries)",
                           dev, port, forced, pa->gid_tbl_len);
        out->gid_index = forced;
        snprintf(out->gid_why, sizeof(out->gid_why), "GX_IB_GID_INDEX=%d", forced);
        return GX_OK;
    }
    if (pa->link_layer != IBV_LINK_LAYER_ETHERNET) {
        /* InfiniBand: LID routing; GID 0 carried for completeness. */
        out->gid_index = api->query_gid(ctx, (uint8_t)port, 0, &out->gid) == 0 ? 0 : -1;
        snprintf(out->gid_why, sizeof(out->gid_why), "InfiniBand: LID routing");
        return GX_OK;
    }
    int best = -1, best_score = -1;
    union ibv_gid best_gid;
    memset(&best_gid, 0, sizeof(best_gid));
    int n = pa->gid_tbl_len > 0 ? pa->gid_tbl_len : 1;
    struct ibv_gid_entry *tab = NULL;
    ssize_t got = -1;
    if (api->query_gid_table) {
        tab = calloc((size_t)n, sizeof(*tab));
        if (tab)
            got = api->query_gid_table(ctx, tab, (size_t)n, 0, sizeof(*tab));
    }
    int count = got >= 0 ? (int)got : n;
    for (int i = 0; i < count; i++) {
        struct ibv_gid_entry e;
        memset(&e, 0, sizeof(e));
        if (got >= 0) {
            e = tab[i];
            if (e.port_num != (uint32_t)port)
                continue;
        } else if (api->query_gid_ex) {
            if (api->query_gid_ex(ctx, (uint32_t)port, (uint32_t)i, &e, 0, sizeof(e)) != 0)
                continue;
        } else {
            if (api->query_gid(ctx, (uint8_t)port, i, &e.gid) != 0)
                continue;
            e.gid_index = (uint32_t)i;
            e.gid_type = IBV_GID_TYPE_ROCE_V2; /* unknown: assume v2 */
        }
        if (gid_zero(&e.gid))
            continue;
        uint32_t ip4 = 0;
        bool mapped = gid_ipv4_mapped(&e.gid, &ip4);
        int score = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
        if (score && mapped)
            score = (want_ip4 && ip4 == want_ip4) ? 3 : 2;
        if (score > best_score) {
            best_score = score;
            best = (int)e.gid_index;
            best_gid = e.gid;
        }
    }
    free(tab);
    if (best < 0)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "verbs: RoCE port %s:%d has no usable "
                       "GID (is an IP address configured on its netdev?)", dev, port);
    out->gid_index = best;
    out->gid = best_gid;
    static const char *why[] = { "RoCE v1 (no v2 GID)", "RoCE v2, not IPv4-mapped",
                                 "RoCE v2 IPv4-mapped, not the interface's address",
                                 "RoCE v2 IPv4-mapped, the interface's address" };
    snprintf(out->gid_why, sizeof(out->gid_why), "%s", why[best_score]);
    return GX_OK;
}

/* "name" or "name:port" from a device request. */
static void parse_want(const char *want, char *name, size_t len, int *port)
{
    snprintf(name, len, "%s", want);
    *port = 0;
    char *colon = strchr(name, ':');
    if (colon) {
        *port = atoi(colon + 1);
        *colon = '\0';
    }
}

int gx_verbs_open_port(const struct gx_verbs_api *api, const char *want,
                       const struct gx_verbs_settings *s, uint32_t want_ip4,
                       struct ibv_context **ctx_out, struct gx_verbs_port *out)
{
    struct ibv_device **list;
    int n;
    gx_verbs_device_list(api, &list, &n);
    if (n == 0)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "verbs: no RDMA devices on this host");
    char wname[64] = "";
    int wport = 0;
    if (want && want[0])
        parse_want(want, wname, sizeof(wname), &wport);
    const char *spec = gx_topo_hca_spec();
    char seen[256] = "";
    size_t off = 0;
    int rc = GX_EUNSUPPORTED;
    for (int d = 0; d < n; d++) {
        const char *name = api->get_device_name(list[d]);
        if (wname[0] ? strcmp(name, wname) != 0 : !gx_topo_hca_filter_match(spec, name, 0))
            continue;
        struct ibv_context *ctx = api->open_device(list[d]);
        if (!ctx) {
            off += (size_t)snprintf(seen + off, sizeof(seen) - off, "%s%s: cannot open (%s)",
                                    off ? ", " : "", name, strerror(errno));
            continue;
        }
        struct ibv_device_attr da;
        int nports = api->query_device(ctx, &da) == 0 ? da.phys_port_cnt : 1;
        for (int p = 1; p <= nports; p++) {
            if (wport ? p != wport : (!wname[0] && !gx_topo_hca_filter_match(spec, name, p)))
                continue;
            struct ibv_port_attr pa;
            if (gx_verbs_query_port(api, ctx, (uint8_t)p, &pa) != 0)
                continue;
            if (pa.state != IBV_PORT_ACTIVE) {
                off += (size_t)snprintf(seen + off, sizeof(seen) - off, "%s%s:%d %s",
                                        off ? ", " : "", name, p,
                                        pa.state == IBV_PORT_DOWN ? "DOWN" : "not ACTIVE");
                continue;
            }
            memset(out, 0, sizeof(*out));
            snprintf(out->dev, sizeof(out->dev), "%s", name);
            out->port = p;
            out->attr = pa;
            out->gbps = gx_verbs_port_gbps(&pa, NULL, 0);
            rc = gx_verbs_pick_gid(api, ctx, p, &pa, s->gid_index, want_ip4, out);
            if (rc != GX_OK)
                continue;
            api->free_device_list(list);
            *ctx_out = ctx;
            return GX_OK;
        }
        api->close_device(ctx);
    }
    api->free_device_list(list);
    if (rc != GX_EUNSUPPORTED)
        return rc;
    return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC,
                   "verbs: no ACTIVE port matches %s%s%s (seen: %s)",
                   wname[0] ? "device " : "GX_IB_HCA=", wname[0] ? want : spec[0] ? spec : "(any)",
                   "", seen[0] ? seen : "nothing");
}

int gx_verbs_probe(struct gx_fab_devinfo *devs, int max, int *count)
{
    const struct gx_verbs_api *api;
    *count = 0;
    if (gx_verbs_load(&api) != GX_OK) {
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "verbs: %s",
                       gx_verbs_unavailable_reason());
    }
    struct ibv_device **list;
    int n;
    gx_verbs_device_list(api, &list, &n);
    int k = 0;
    const char *spec = gx_topo_hca_spec();
    for (int d = 0; d < n; d++) {
        const char *name = api->get_device_name(list[d]);
        struct ibv_context *ctx = api->open_device(list[d]);
        if (!ctx)
            continue;
        struct ibv_device_attr da;
        int nports = api->query_device(ctx, &da) == 0 ? da.phys_port_cnt : 1;
        for (int p = 1; p <= nports; p++) {
            struct ibv_port_attr pa;
            if (gx_verbs_query_port(api, ctx, (uint8_t)p, &pa) != 0)
                continue;
            if (k < max) {
                char label[32];
                double gbps = gx_verbs_port_gbps(&pa, label, sizeof(label));
                bool active = pa.state == IBV_PORT_ACTIVE;
                snprintf(devs[k].name, sizeof(devs[k].name), "%s:%d", name, p);
                snprintf(devs[k].detail, sizeof(devs[k].detail), "%s %s, %s%s",
                         pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", label,
                         active ? "ACTIVE" : "not active (skipped)",
                         gx_topo_hca_filter_match(spec, name, p) ? "" : ", excluded by GX_IB_HCA");
                devs[k].link_bps = active ? (uint64_t)(gbps * 1e9 / 8) : 0;
            }
            k++;
        }
        api->close_device(ctx);
    }
    if (list)
        api->free_device_list(list);
    *count = k;
    return GX_OK;
}

int gx_verbs_gdr_report(char *out, size_t len)
{
    const struct gx_verbs_api *api;
    size_t off = 0;
    out[0] = '\0';
    if (gx_verbs_load(&api) != GX_OK) {
        snprintf(out, len, "verbs: GPUDirect RDMA not usable: %s\n",
                 gx_verbs_unavailable_reason());
        return GX_OK;
    }
    struct ibv_device **list;
    int n;
    gx_verbs_device_list(api, &list, &n);
    if (n == 0)
        snprintf(out, len, "verbs: GPUDirect RDMA not usable: no RDMA devices\n");
    for (int d = 0; d < n && off < len; d++) {
        const char *name = api->get_device_name(list[d]);
        struct ibv_context *ctx = api->open_device(list[d]);
        if (!ctx)
            continue;
        /* dmabuf probe: fd -1 fails with EOPNOTSUPP where unsupported. */
        int dmabuf = 0;
        struct ibv_pd *pd = api->alloc_pd(ctx);
        if (pd && api->reg_dmabuf_mr) {
            errno = 0;
            struct ibv_mr *mr = api->reg_dmabuf_mr(pd, 0, 4096, 0, -1, 0);
            if (mr)
                api->dereg_mr(mr);
            dmabuf = mr || (errno != EOPNOTSUPP && errno != EPROTONOSUPPORT);
        }
        if (pd)
            api->dealloc_pd(pd);
        struct ibv_device_attr da;
        int nports = api->query_device(ctx, &da) == 0 ? da.phys_port_cnt : 1;
        for (int p = 1; p <= nports && off < len; p++) {
            char nic[80], why[384];
            snprintf(nic, sizeof(nic), "%s:%d", name, p);
            struct gx_gdr_nic g = { .name = nic, .dmabuf = dmabuf,
                                    .path = verbs_gdr_nearest_gpu_path(name) };
            gx_gdr_decide(&g, why, sizeof(why));
            off += (size_t)snprintf(out + off, len - off, "%s\n", why);
        }
        api->close_device(ctx);
    }
    if (list)
        api->free_device_list(list);
    return GX_OK;
}
