/*
 * xport_gdr.c - GPUDirect RDMA in the transport: whether this rank's peers
 * can take device memory straight from / into the fabric, and the copies
 * the protocol makes when a device buffer meets host memory (an eager
 * message's bounce slot, a message to self).
 *
 * Yes only when every other rank is reached through verbs (the one provider
 * that registers device memory: dmabuf or nvidia-peermem, as the gpudirect
 * verdict says; the flush READ after device-destined receives is the
 * provider's), GX_CHECKSUM is off (it reads the data with the CPU), and a
 * trial registration of a device buffer as GX_FAB_MEM_CUDA succeeded. The
 * answer is kept for the transport's life: the verdict is per domain.
 */
#include <stdio.h>
#include <string.h>

#include "collectives/transport/xport_internal.h"
#include "common/log.h"
#include "gpudirect/gpudirect.h"

int gx_xport_mem_copy(void *dst, bool dst_dev, const void *src, bool src_dev, size_t len)
{
    if (!len || dst == src)
        return GX_OK;
    if (dst_dev && src_dev)
        return gx_gpu_copy_dtod(dst, src, len);
    if (dst_dev)
        return gx_gpu_copy_htod(dst, src, len);
    if (src_dev)
        return gx_gpu_copy_dtoh(dst, src, len);
    memcpy(dst, src, len);
    return GX_OK;
}

/* What can be told without a device buffer: -1 (no, x->gdr_why says why)
 * or 0 (maybe: the trial registration decides). */
static int gdr_static(struct gx_xport *x)
{
    if (x->checksum) {
        snprintf(x->gdr_why, sizeof(x->gdr_why), "GX_CHECKSUM=1 checksums every message with "
                 "the CPU, which must not read device memory");
        return -1;
    }
    bool any = false;
    for (int r = 0; r < x->size; r++) {
        if (r == x->rank)
            continue;
        const char *prov = gx_xport_provider_of(x, r);
        if (strcmp(prov, "verbs") != 0) {
            snprintf(x->gdr_why, sizeof(x->gdr_why), "rank %d is reached through the %s "
                     "provider, which cannot take device memory (only verbs registers it)", r,
                     prov);
            return -1;
        }
        any = true;
    }
    if (!any) {
        snprintf(x->gdr_why, sizeof(x->gdr_why), "no network peer (one rank)");
        return -1;
    }
    return 0;
}

static int gdr_decide(struct gx_xport *x, const void *dev, size_t len)
{
    if (gdr_static(x) < 0)
        return -1;
    for (int i = 0; i < x->ndoms; i++) {
        struct gx_fab_mr *mr = NULL;
        if (!x->doms[i].dom)
            continue;
        int rc = gx_fab_mr_reg(x->doms[i].dom, (void *)dev, len ? len : 1, GX_FAB_MEM_CUDA,
                               GX_FAB_ACCESS_LOCAL, &mr);
        if (rc != GX_OK) {
            snprintf(x->gdr_why, sizeof(x->gdr_why), "the verbs provider cannot register "
                     "device memory: %s", gx_last_error());
            return -1;
        }
        gx_fab_mr_dereg(mr);
    }
    snprintf(x->gdr_why, sizeof(x->gdr_why), "verbs registers device memory");
    return 1;
}

int gx_xport_gdr_check(struct gx_xport *x, const void *dev, size_t len, char *why,
                       size_t why_len)
{
    pthread_mutex_lock(&x->lock);
    if (x->gdr == 0)
        x->gdr = gdr_decide(x, dev, len);
    int yes = x->gdr > 0;
    if (why)
        snprintf(why, why_len, "%s", x->gdr_why);
    pthread_mutex_unlock(&x->lock);
    return yes ? GX_OK : GX_EUNSUPPORTED;
}

bool gx_xport_gdr_maybe(struct gx_xport *x, char *why, size_t why_len)
{
    pthread_mutex_lock(&x->lock);
    int v = x->gdr;
    if (v == 0 && gdr_static(x) < 0)
        v = x->gdr = -1;
    if (why)
        snprintf(why, why_len, "%s", v < 0 ? x->gdr_why : "");
    pthread_mutex_unlock(&x->lock);
    return v >= 0;
}
