/*
 * verbs_gdr.c - what a verbs domain does about GPU memory: the GPUDirect
 * RDMA verdict for its port (gpudirect's decision table, fed with the
 * topology's GPU-to-NIC path class that the communicator passes in
 * gx_fab_domain_attr.gpu_path, and the dmabuf probe), and GX_IB_GDR_FLUSH,
 * which says which receives are flushed with an RDMA READ before they
 * complete (verbs_flush.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "fabric/verbs/verbs.h"
#include "gpudirect/gpudirect.h"
#include "topology/topo.h"

GX_PARAM_DEFINE(gx_param_ib_gdr_flush, "GX_IB_GDR_FLUSH", GX_PARAM_STRING, "auto", NULL,
                "Flush after GPU-destined receives (an RDMA READ of one byte through a "
                "loopback QP before the receive completes, as NCCL's GDR flush): auto (GPU "
                "memory, when GPUDirect RDMA is in use), on (every receive, host memory too: "
                "for tests), off.");

int verbs_gdr_domain_init(struct verbs_domain *dom, const struct gx_fab_domain_attr *attr)
{
    dom->gdr_method = -1;
    dom->gpu_path = attr && attr->size >= offsetof(struct gx_fab_domain_attr, gpu_path) +
                                              sizeof(attr->gpu_path)
                        ? attr->gpu_path
                        : GX_TOPO_PATH_UNKNOWN;
    const char *v = gx_param_text(&gx_param_ib_gdr_flush);
    if (strcmp(v, "auto") == 0)
        dom->flush_mode = VERBS_FLUSH_AUTO;
    else if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0)
        dom->flush_mode = VERBS_FLUSH_ON;
    else if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0)
        dom->flush_mode = VERBS_FLUSH_OFF;
    else
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "GX_IB_GDR_FLUSH=%s: expected auto, on or off", v);
    return GX_OK;
}

/* ibv_reg_dmabuf_mr with fd -1 fails with EOPNOTSUPP where the kernel or
 * driver has no dmabuf support, and with EBADF (or similar) where it has. */
static int dmabuf_probe(struct verbs_domain *dom)
{
    if (dom->dmabuf >= 0)
        return dom->dmabuf;
    if (!dom->api->reg_dmabuf_mr) {
        dom->dmabuf = 0;
        return 0;
    }
    errno = 0;
    struct ibv_mr *mr = dom->api->reg_dmabuf_mr(dom->pd, 0, 4096, 0, -1, 0);
    if (mr) {
        dom->api->dereg_mr(mr);
        dom->dmabuf = 1;
    } else {
        dom->dmabuf = errno == EOPNOTSUPP || errno == EPROTONOSUPPORT ? 0 : 1;
    }
    return dom->dmabuf;
}

int verbs_gdr_method(struct verbs_domain *dom)
{
    if (dom->gdr_method >= 0)
        return dom->gdr_method;
    char nic[96];
    snprintf(nic, sizeof(nic), "%s:%d", dom->port.dev, dom->port.port);
    struct gx_gdr_nic g = { .name = nic, .dmabuf = dmabuf_probe(dom), .path = dom->gpu_path };
    dom->gdr_method = (int)gx_gdr_decide(&g, dom->gdr_why, sizeof(dom->gdr_why));
    GX_INFO(GX_SUB_FABRIC, "verbs: %s", dom->gdr_why);
    return dom->gdr_method;
}

bool verbs_flush_needed(const struct verbs_domain *dom, enum gx_fab_mem_type type)
{
    switch (dom->flush_mode) {
    case VERBS_FLUSH_ON:
        return true;
    case VERBS_FLUSH_OFF:
        return false;
    default: /* device memory is registered only where GPUDirect RDMA is usable */
        return type == GX_FAB_MEM_CUDA;
    }
}

bool verbs_flush_wanted(struct verbs_domain *dom)
{
    if (dom->flush_mode == VERBS_FLUSH_ON)
        return true;
    return dom->flush_mode == VERBS_FLUSH_AUTO && verbs_gdr_method(dom) != GX_GDR_NONE;
}

/* The topology, loaded once and kept (as the communicator does: freeing
 * hwloc's last topology unloads its PCI plugin, which LeakSanitizer then
 * reports). */
static pthread_mutex_t topo_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gx_topo *report_topo;
static bool report_topo_failed;

enum gx_topo_path verbs_gdr_nearest_gpu_path(const char *dev)
{
    pthread_mutex_lock(&topo_lock);
    if (!report_topo && !report_topo_failed)
        report_topo_failed = gx_topo_open(&report_topo) != GX_OK;
    const struct gx_topo *t = report_topo;
    pthread_mutex_unlock(&topo_lock);
    enum gx_topo_path best = GX_TOPO_PATH_UNKNOWN;
    if (!t)
        return best;
    size_t dl = strcspn(dev, ":");
    int nics = gx_topo_device_count(t, GX_TOPO_RDMA_NIC);
    int gpus = gx_topo_device_count(t, GX_TOPO_GPU);
    for (int n = 0; n < nics; n++) {
        struct gx_topo_device d = GX_TOPO_DEVICE_INIT;
        if (gx_topo_device_get(t, GX_TOPO_RDMA_NIC, n, &d) != GX_OK ||
            strlen(d.name) != dl || strncmp(d.name, dev, dl) != 0)
            continue;
        for (int g = 0; g < gpus; g++) {
            enum gx_topo_path p;
            if (gx_topo_path_get(t, GX_TOPO_GPU, g, GX_TOPO_RDMA_NIC, n, &p) == GX_OK &&
                (best == GX_TOPO_PATH_UNKNOWN || p < best))
                best = p;
        }
    }
    return best;
}
