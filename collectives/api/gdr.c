/*
 * gdr.c - GPUDirect RDMA for collectives (gdr.h).
 *
 * Which steps go direct: a collective that only moves data (broadcast,
 * all-gather, gather, scatter, all-to-all) has no step that needs the bytes
 * on a processor, so its sends read the device buffer and its receives land
 * in it (rendezvous: registered with the NIC by dmabuf or nvidia-peermem and
 * flushed by the provider before completion; eager: a driver copy through
 * the bounce slot), and its local copies are driver copies. All-reduce,
 * reduce and reduce-scatter stage the whole call through pinned host
 * memory: each of their algorithms interleaves reductions (CPU) with data
 * movement on the same blocks, and the all-gather half of ring all-reduce
 * reads blocks the CPU has just reduced, so it would need the reduced block
 * copied back to the device before being sent from there: more copies than
 * staging. Where CUDA reduction kernels exist that choice can change.
 */
#include <stdio.h>
#include <string.h>

#include "collectives/comm/comm_internal.h"
#include "collectives/api/gdr.h"
#include "collectives/transport/xport.h"
#include "common/log.h"
#include "common/param.h"
#include "gpudirect/gpudirect.h"

GX_PARAM_DEFINE(gx_param_gdr, "GX_GDR", GX_PARAM_ENUM, "auto", "off|auto|on",
                "GPUDirect RDMA for device buffers of collectives that only move data "
                "(broadcast, all-gather, gather, scatter, all-to-all): the verbs provider "
                "registers the device memory and the NIC reads/writes it directly. auto: when "
                "every peer is reached over verbs and the GDR verdict (GX_NET_GDR_LEVEL, dmabuf "
                "or nvidia-peermem) allows, else stage through host memory (the log says why); "
                "on: a call with device buffers fails naming why when not possible; off: "
                "always stage. Reductions always stage.");

static int logged;

static bool is_dev(const void *p, size_t bytes)
{
    struct gx_gpu_ptr g;
    /* a query error stages: stage.c queries again and names it */
    return p && bytes && gx_gpu_ptr_query(p, &g) == GX_OK && g.type == GX_GPU_MEM_CUDA &&
           (uintptr_t)p + bytes <= g.base + g.size;
}

int gx_gdr_plan(struct gx_comm *comm, const char *fn, bool data_only, const void *send,
                size_t send_bytes, const void *recv, size_t recv_bytes, struct gx_gdr_plan *out)
{
    memset(out, 0, sizeof(*out));
    int mode = 1;
    if (gx_param_enum(&gx_param_gdr, &mode) != GX_OK)
        return GX_EINVAL;
    if (mode == 0)
        return GX_OK;
    char why[256] = "no transport";
    if (mode == 1 && (!comm->xport || !gx_xport_gdr_maybe(comm->xport, why, sizeof(why)))) {
        /* certainly staged: no pointer query here (stage.c makes its own) */
        if (gx_gpu_driver_available(NULL, 0) && !__atomic_exchange_n(&logged, 1,
                                                                      __ATOMIC_RELAXED))
            GX_INFO(GX_SUB_GPU, "GX_GDR=auto: device buffers are staged through host memory: "
                    "%s", why);
        return GX_OK;
    }
    bool sdev = is_dev(send, send_bytes), rdev = is_dev(recv, recv_bytes);
    if (!sdev && !rdev)
        return GX_OK;
    const void *probe = sdev ? send : recv;
    size_t plen = sdev ? send_bytes : recv_bytes;
    int rc = comm->xport ? gx_xport_gdr_check(comm->xport, probe, plen, why, sizeof(why))
                         : GX_EUNSUPPORTED;
    if (rc != GX_OK) {
        if (mode == 2)
            return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "%s: GX_GDR=on but GPUDirect RDMA is "
                           "not possible on rank %d: %s", fn, comm->rank, why);
        if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
            GX_INFO(GX_SUB_GPU, "GX_GDR=auto: device buffers are staged through host memory: "
                    "%s", why);
        return GX_OK;
    }
    if (!data_only)
        return GX_OK; /* reductions stage (the file comment says why) */
    int n = 0;
    if (sdev) {
        out->lo[n] = send;
        out->hi[n++] = (const char *)send + send_bytes;
    }
    if (rdev) {
        out->lo[n] = recv;
        out->hi[n++] = (const char *)recv + recv_bytes;
    }
    return GX_OK;
}
