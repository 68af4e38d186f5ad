/*
 * net_gx_dev.c - the NCCL net plugin's devices and logging.
 *
 * Devices are gx fabric devices: every active verbs port that GX_IB_HCA keeps
 * when the verbs provider is built and finds one, else the one interface the tcp provider
 * uses (GX_SOCKET_IFNAME picks it, as for every gx job). GX_NCCL_PROVIDER
 * forces one. Speeds and PCI paths come from the topology layer (hwloc), with
 * the kernel's /sys/class/net/<if>/speed and 10 Gb/s as fallbacks.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "common/sock.h"
#include "plugins/nccl-net/net_gx.h"
#include "topology/hca_filter.h"
#include "topology/topo.h"

GX_PARAM_DEFINE(gx_param_nccl_provider, "GX_NCCL_PROVIDER", GX_PARAM_ENUM, "auto",
                "auto|tcp|verbs",
                "Fabric provider behind libnccl-net-gx.so: auto = verbs when an HCA is "
                "active, else tcp.");

#define GXN_DEFAULT_SPEED_MBPS 10000

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static bool inited;
static struct gxn_dev devs[GXN_MAX_DEVS];
static int ndevs;
static gxn_logger_t nccl_log;

void gxn_log(int level, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (nccl_log)
        nccl_log(level, GXN_LOGSYS_NET | GXN_LOGSYS_INIT, "net_gx", 0, "NET/gx : %s", msg);
    else if (level == GXN_LOG_WARN)
        fprintf(stderr, "NET/gx : %s\n", msg);
}

gxn_result_t gxn_fail(int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gxn_log(GXN_LOG_WARN, "%s: %s", msg, gx_strerror(status));
    switch (status) {
    case GX_EINVAL:
        return GXN_NCCL_INVALID_ARG;
    case GX_EUNSUPPORTED:
    case GX_ESTATE:
        return GXN_NCCL_INVALID_USAGE;
    case GX_ENOMEM:
    case GX_ESYSTEM:
        return GXN_NCCL_SYSTEM;
    case GX_ETIMEOUT:
    case GX_EPEER:
    case GX_ECONNECT:
    case GX_EPROTO:
    case GX_EAUTH:
    case GX_ETRUNCATE:
        return GXN_NCCL_REMOTE;
    default:
        return GXN_NCCL_INTERNAL;
    }
}

/* Speed and PCI path of a network interface or HCA from the topology. */
static void fill_from_topo(struct gx_topo *topo, struct gxn_dev *d, const char *netdev,
                           enum gx_topo_kind kind)
{
    int n = topo ? gx_topo_device_count(topo, kind) : 0;
    for (int i = 0; i < n; i++) {
        struct gx_topo_device td = GX_TOPO_DEVICE_INIT;
        if (gx_topo_device_get(topo, kind, i, &td) != GX_OK)
            continue;
        if (strcmp(td.name, netdev) != 0 && strcmp(td.netdev, netdev) != 0)
            continue;
        if (td.link_gbps > 0)
            d->speed_mbps = (int)(td.link_gbps * 1000.0);
        if (td.busid[0]) {
            char path[128];
            snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", td.busid);
            d->pci_path = realpath(path, NULL);
        }
        return;
    }
}

static void fill_from_sysfs(struct gxn_dev *d, const char *ifname)
{
    char path[160];
    if (!d->speed_mbps) {
        snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
        FILE *f = fopen(path, "re");
        int mbps = 0;
        if (f && fscanf(f, "%d", &mbps) == 1 && mbps > 0)
            d->speed_mbps = mbps;
        if (f)
            fclose(f);
    }
    if (!d->pci_path) {
        snprintf(path, sizeof(path), "/sys/class/net/%s/device", ifname);
        d->pci_path = realpath(path, NULL);
    }
}

static void add_dev(const struct gx_fab_provider *prov, const char *fab_device,
                    const char *label, struct gx_topo *topo, enum gx_topo_kind kind, int port)
{
    if (ndevs >= GXN_MAX_DEVS)
        return;
    struct gxn_dev *d = &devs[ndevs++];
    memset(d, 0, sizeof(*d));
    d->prov = prov;
    snprintf(d->fab_device, sizeof(d->fab_device), "%s", fab_device);
    snprintf(d->name, sizeof(d->name), "gx-%s:%s", prov->name, label);
    d->port = port;
    char base[64];
    snprintf(base, sizeof(base), "%s", label);
    char *colon = strchr(base, ':');
    if (colon)
        *colon = '\0';
    fill_from_topo(topo, d, base, kind);
    if (kind == GX_TOPO_ETH_NIC)
        fill_from_sysfs(d, base);
    if (!d->speed_mbps)
        d->speed_mbps = GXN_DEFAULT_SPEED_MBPS;
}

static int add_verbs_devs(struct gx_topo *topo)
{
    const struct gx_fab_provider *prov = NULL;
    for (size_t i = 0; (prov = gx_fab_provider_at(i)) != NULL; i++)
        if (strcmp(prov->name, "verbs") == 0)
            break;
    if (!prov)
        return 0;
    struct gx_fab_devinfo info[GXN_MAX_DEVS];
    int count = 0;
    if (gx_fab_probe(prov, info, GXN_MAX_DEVS, &count) != GX_OK)
        return 0;
    int before = ndevs;
    const char *spec = gx_topo_hca_spec(); /* GX_IB_HCA, or NCCL_IB_HCA */
    for (int i = 0; i < count && i < GXN_MAX_DEVS; i++) {
        char hca[64];
        snprintf(hca, sizeof(hca), "%s", info[i].name);
        char *colon = strchr(hca, ':');
        int port = colon ? atoi(colon + 1) : 1;
        if (colon)
            *colon = '\0';
        /* probe lists every port; NCCL gets the active ones the filter keeps */
        if (info[i].link_bps == 0 || !gx_topo_hca_filter_match(spec, hca, port))
            continue;
        add_dev(prov, info[i].name, info[i].name, topo, GX_TOPO_RDMA_NIC, port);
        devs[ndevs - 1].speed_mbps = (int)(info[i].link_bps * 8 / 1000000);
    }
    return ndevs - before;
}

static int add_tcp_dev(struct gx_topo *topo)
{
    const struct gx_fab_provider *prov = gx_fab_provider_find("tcp");
    struct gx_sockaddr sa;
    char ifname[64];
    if (!prov)
        return GX_EUNSUPPORTED;
    int rc = gx_sock_pick_interface(&sa, ifname, sizeof(ifname));
    if (rc != GX_OK)
        return rc;
    add_dev(prov, "", ifname, topo, GX_TOPO_ETH_NIC, 0);
    return GX_OK;
}

gxn_result_t gxn_init(gxn_logger_t log)
{
    pthread_mutex_lock(&init_lock);
    if (log)
        nccl_log = log;
    if (inited) {
        pthread_mutex_unlock(&init_lock);
        return GXN_NCCL_OK;
    }
    const char *want = gx_param_text(&gx_param_nccl_provider);
    if (!want || !want[0])
        want = "auto";
    if (strcmp(want, "auto") != 0 && strcmp(want, "tcp") != 0 && strcmp(want, "verbs") != 0) {
        pthread_mutex_unlock(&init_lock);
        return gxn_fail(GX_EINVAL, "GX_NCCL_PROVIDER='%s' is not one of auto, tcp, verbs", want);
    }
    struct gx_topo *topo = NULL;
    if (gx_topo_open(&topo) != GX_OK)
        topo = NULL; /* speeds fall back to sysfs */
    int rc = GX_OK;
    if (strcmp(want, "tcp") != 0 && add_verbs_devs(topo) == 0 && strcmp(want, "verbs") == 0)
        rc = GX_EUNSUPPORTED;
    if (rc == GX_OK && ndevs == 0)
        rc = add_tcp_dev(topo);
    if (topo)
        gx_topo_free(topo);
    if (rc != GX_OK) {
        pthread_mutex_unlock(&init_lock);
        return gxn_fail(rc, "no gx device for NCCL (GX_NCCL_PROVIDER=%s; built providers: %s)",
                        want, gx_fab_provider_names());
    }
    for (int i = 0; i < ndevs; i++)
        gxn_log(GXN_LOG_INFO, "device %d: %s, %d Mb/s, %s", i, devs[i].name, devs[i].speed_mbps,
                devs[i].pci_path ? devs[i].pci_path : "no PCI path");
    const char *key = getenv("GX_JOB_KEY");
    if (!key || !key[0])
        gxn_log(GXN_LOG_WARN, "GX_JOB_KEY is not set: connections are authenticated with an "
                "empty key, so any process running this plugin can connect; set the same "
                "GX_JOB_KEY on every rank");
    inited = true;
    pthread_mutex_unlock(&init_lock);
    return GXN_NCCL_OK;
}

gxn_result_t gxn_devices(int *n)
{
    *n = ndevs;
    return GXN_NCCL_OK;
}

struct gxn_dev *gxn_dev_at(int dev)
{
    return dev >= 0 && dev < ndevs ? &devs[dev] : NULL;
}

gxn_result_t gxn_get_props(int dev, struct gxn_props *out)
{
    struct gxn_dev *d = gxn_dev_at(dev);
    if (!d)
        return gxn_fail(GX_EINVAL, "getProperties: device %d does not exist (%d devices)", dev,
                        ndevs);
    out->name = d->name;
    out->pci_path = d->pci_path;
    out->guid = (uint64_t)dev;
    out->speed_mbps = d->speed_mbps;
    out->port = d->port;
    out->max_comms = 65536;
    out->ptr_support = gxn_dev_ptr_support(d);
    return GXN_NCCL_OK;
}

int gxn_dom_open(struct gxn_dev *d, struct gxn_dom **out)
{
    struct gxn_dom *fd = calloc(1, sizeof(*fd));
    if (!fd)
        return GX_ENOMEM;
    struct gx_fab_domain_attr attr = GX_FAB_DOMAIN_ATTR_INIT;
    attr.device = d->fab_device[0] ? d->fab_device : NULL;
    attr.gpu_path = gxn_dev_gpu_path(d); /* the GPUDirect verdict's path (net_gx_gpu.c) */
    /* Providers take the key as given; the bootstrap layer that reads
     * GX_JOB_KEY for libgx is not here, so read it (read at every open: a
     * forked rank may set its own). */
    const char *key = getenv("GX_JOB_KEY");
    attr.job_key = key && key[0] ? key : NULL;
    int rc = gx_fab_domain_open(d->prov, &attr, &fd->dom);
    if (rc == GX_OK) {
        rc = gx_fab_cq_open(fd->dom, &fd->cq);
        if (rc != GX_OK)
            gx_fab_domain_close(fd->dom);
    }
    if (rc != GX_OK) {
        free(fd);
        return rc;
    }
    pthread_mutex_init(&fd->lock, NULL);
    fd->dev = d;
    fd->refs = 1;
    *out = fd;
    return GX_OK;
}

void gxn_dom_put(struct gxn_dom *fd)
{
    if (!fd)
        return;
    pthread_mutex_lock(&fd->lock);
    int left = --fd->refs;
    pthread_mutex_unlock(&fd->lock);
    if (left > 0)
        return;
    gx_fab_cq_close(fd->cq);
    gx_fab_domain_close(fd->dom);
    pthread_mutex_destroy(&fd->lock);
    free(fd);
}
