/*
 * dpdk_zc.c - zero-copy transmission: a data frame is a chain of two packet
 * buffers, a small one holding the Ethernet/IPv4/UDP/gx headers and one
 * attached (rte_pktmbuf_attach_extbuf) to the segment's bytes in the
 * caller's buffer, so the provider copies nothing on send.
 *
 * Used only where the PMD is known to copy a frame in software inside
 * rte_eth_tx_burst and to free its packet buffers before it returns
 * (net_memif, except a client in memif's zero-copy mode): the caller's buffer is then never read after
 * the transmit call, so a completed op never has a frame pointing into it.
 * A NIC would read the bytes by DMA later, from memory it must have mapped
 * (rte_extmem_register + rte_dev_dma_map of the registrations): not done,
 * such ports keep the one copy. GX_DPDK_ZCOPY=0 turns it off everywhere.
 *
 * The attached buffers of an endpoint share its rte_mbuf_ext_shared_info
 * (touched by the endpoint's thread only: DPDK updates a count of 1 without
 * an atomic), whose count must be back to its base after every transmit:
 * dpdk_zc_idle() checks it, and the sender completes ops only when it holds.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "common/log.h"
#include "common/param.h"
#include "fabric/dpdk/dpdk.h"

GX_PARAM_DEFINE(gx_param_dpdk_zcopy, "GX_DPDK_ZCOPY", GX_PARAM_INT, "1", NULL,
                "1: the dpdk provider sends without copying (frames point into the caller's "
                "buffer) on ports whose driver copies in software (net_memif); 0: always one "
                "copy into packet buffers.");

static struct {
    bool on;
    struct rte_mempool *pool; /* header buffers and attach buffers */
} Z;

static void ext_free(void *addr, void *opaque)
{
    (void)addr;
    (void)opaque; /* the caller's buffer: nothing to free */
}

uint64_t dpdk_zc_setup(uint16_t port_id, unsigned nmbufs, bool memif_zc)
{
    long long want = 1;
    if (gx_param_int(&gx_param_dpdk_zcopy, &want) != GX_OK)
        want = 1;
    if (want && memif_zc) {
        /* memif's zero-copy client hands the server its packet buffers by
         * offset into its shared memory: a frame attached to a caller's
         * buffer is outside it (the server crashed reading one). The one
         * copy into a packet buffer is the only copy of that direction on
         * this side. */
        GX_INFO(GX_SUB_FABRIC, "dpdk: memif zero-copy client: sends are copied into packet "
                "buffers");
        return 0;
    }
    struct rte_eth_dev_info info;
    memset(&info, 0, sizeof(info));
    if (!want || rte_eth_dev_info_get(port_id, &info) != 0 || !info.driver_name ||
        strcmp(info.driver_name, "net_memif") != 0 ||
        !(info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS))
        return 0;
    char name[64];
    snprintf(name, sizeof(name), "gx_zc_%d", (int)getpid());
    /* Room for the headers only; an attached buffer uses none of its own. */
    Z.pool = rte_pktmbuf_pool_create(name, 2 * nmbufs + 1, 256, 0,
                                     RTE_PKTMBUF_HEADROOM + GX_DPDK_HDRS_LEN + 64,
                                     rte_eth_dev_socket_id(port_id));
    if (!Z.pool) {
        GX_WARN(GX_SUB_FABRIC, "dpdk: no pool for zero-copy sends (%s); sends copy",
                rte_strerror(rte_errno));
        return 0;
    }
    Z.on = true;
    GX_INFO(GX_SUB_FABRIC, "dpdk: zero-copy sends on port %u (%s)", port_id, info.driver_name);
    return RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
}

bool dpdk_zc_on(void)
{
    return Z.on;
}

bool dpdk_zc_idle(struct dpdk_ep *ep)
{
    const struct rte_mbuf_ext_shared_info *sh = ep->zc_shinfo;
    return !sh || rte_mbuf_ext_refcnt_read(sh) == 1;
}

void dpdk_zc_ep_free(struct dpdk_ep *ep)
{
    if (!dpdk_zc_idle(ep)) { /* a frame still points at it: leak rather than free */
        GX_WARN(GX_SUB_FABRIC, "dpdk: %s: the port still holds zero-copy frames at close",
                ep->base.name);
        return;
    }
    free(ep->zc_shinfo);
    ep->zc_shinfo = NULL;
}

struct rte_mbuf *dpdk_zc_frame(struct dpdk_ep *ep, const void *payload, size_t plen,
                               uint8_t **hdrs)
{
    struct rte_mbuf_ext_shared_info *sh = ep->zc_shinfo;
    if (!sh) {
        sh = calloc(1, sizeof(*sh));
        if (!sh)
            return NULL;
        sh->free_cb = ext_free;
        rte_mbuf_ext_refcnt_set(sh, 1);
        ep->zc_shinfo = sh;
    }
    struct rte_mbuf *m[2];
    if (rte_pktmbuf_alloc_bulk(Z.pool, m, 2) != 0)
        return NULL;
    *hdrs = (uint8_t *)rte_pktmbuf_append(m[0], GX_DPDK_HDRS_LEN);
    void *addr = (void *)(uintptr_t)payload;
    rte_iova_t iova = rte_eal_iova_mode() == RTE_IOVA_VA ? (rte_iova_t)(uintptr_t)addr
                                                         : RTE_BAD_IOVA;
    rte_mbuf_ext_refcnt_update(sh, 1);
    rte_pktmbuf_attach_extbuf(m[1], addr, iova, (uint16_t)plen, sh);
    m[1]->data_len = (uint16_t)plen;
    m[1]->pkt_len = (uint32_t)plen;
    if (!*hdrs || rte_pktmbuf_chain(m[0], m[1]) != 0) {
        rte_pktmbuf_free(m[0]);
        rte_pktmbuf_free(m[1]);
        return NULL;
    }
    return m[0];
}
