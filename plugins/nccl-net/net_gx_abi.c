/*
 * net_gx_abi.c - the versioned tables NCCL looks up in libnccl-net-gx.so
 * (ncclNetPlugin_v11 .. v8), each an adapter over the core in net_gx.h.
 * Nothing else is exported (libnccl-net-gx.map).
 */
#include <string.h>

#include "plugins/nccl-net/net_gx.h"

#define GXN_EXPORT __attribute__((visibility("default")))
#define GXN_NAME "gx" /* what NCCL_NET=gx selects */

static void fill_v9(int dev, struct gxn_props_v9 *p, const struct gxn_props *g)
{
    memset(p, 0, sizeof(*p));
    p->name = g->name;
    p->pci_path = g->pci_path;
    p->guid = g->guid;
    p->ptr_support = g->ptr_support; /* per device: net_gx_gpu.c */
    p->speed_mbps = g->speed_mbps;
    p->port = g->port;
    p->max_comms = g->max_comms;
    p->max_recvs = 1;
    p->net_device_type = GXN_NET_DEVICE_HOST;
    p->vprops.ndevs = 1;
    p->vprops.devs[0] = dev;
    p->max_p2p_bytes = GXN_MAX_NET_SIZE;
    p->max_coll_bytes = GXN_MAX_NET_SIZE;
}

static gxn_result_t props_v8(int dev, struct gxn_props_v8 *p)
{
    struct gxn_props g;
    gxn_result_t r = gxn_get_props(dev, &g);
    if (r != GXN_NCCL_OK)
        return r;
    struct gxn_props_v9 v9;
    fill_v9(dev, &v9, &g);
    memset(p, 0, sizeof(*p));
    p->name = v9.name;
    p->pci_path = v9.pci_path;
    p->guid = v9.guid;
    p->ptr_support = v9.ptr_support;
    p->speed_mbps = v9.speed_mbps;
    p->port = v9.port;
    p->max_comms = v9.max_comms;
    p->max_recvs = v9.max_recvs;
    p->net_device_type = v9.net_device_type;
    return GXN_NCCL_OK;
}

static gxn_result_t props_v9(int dev, struct gxn_props_v9 *p)
{
    struct gxn_props g;
    gxn_result_t r = gxn_get_props(dev, &g);
    if (r == GXN_NCCL_OK)
        fill_v9(dev, p, &g);
    return r;
}

static gxn_result_t props_v11(int dev, struct gxn_props_v11 *p)
{
    gxn_result_t r = props_v9(dev, &p->base);
    if (r == GXN_NCCL_OK)
        p->max_multi_request_size = 1;
    return r;
}

static gxn_result_t init_v10(gxn_logger_t log, gxn_profiler_cb_t prof)
{
    return gxn_init(log);
}

/* v11 hands a context per NCCL communicator; the devices are per process. */
static int v11_ctx_token;

static gxn_result_t init_v11(void **ctx, uint64_t comm_id, struct gxn_comm_config *cfg,
                             gxn_logger_t log, gxn_profiler_cb_t prof)
{
    *ctx = &v11_ctx_token;
    return gxn_init(log);
}

static gxn_result_t finalize_v11(void *ctx)
{
    return GXN_NCCL_OK;
}

static gxn_result_t set_net_attr_v11(void *ctx, struct gxn_net_attr *attr)
{
    return GXN_NCCL_OK; /* concurrency hints: one endpoint per comm needs none */
}

static gxn_result_t listen_v11(void *ctx, int dev, void *handle, void **lc)
{
    return gxn_listen(dev, handle, lc);
}

static gxn_result_t connect_v9(int dev, void *handle, void **sc, struct gxn_dev_handle **dc)
{
    return gxn_connect(dev, handle, sc);
}

static gxn_result_t connect_v10(int dev, struct gxn_comm_config *cfg, void *handle, void **sc,
                                struct gxn_dev_handle **dc)
{
    return gxn_connect(dev, handle, sc);
}

static gxn_result_t connect_v11(void *ctx, int dev, void *handle, void **sc,
                                struct gxn_dev_handle **dc)
{
    return gxn_connect(dev, handle, sc);
}

static gxn_result_t accept_any(void *lc, void **rc, struct gxn_dev_handle **dc)
{
    return gxn_accept(lc, rc);
}

static gxn_result_t isend_v8(void *sc, void *data, int size, int tag, void *mh, void **req)
{
    if (size < 0)
        return gxn_fail(GX_EINVAL, "isend: negative size %d", size);
    return gxn_isend(sc, data, (size_t)size, tag, mh, req);
}

static gxn_result_t irecv_v8(void *rc, int n, void **data, int *sizes, int *tags, void **mhs,
                             void **req)
{
    if (n != 1 || sizes[0] < 0)
        return gxn_fail(GX_EINVAL, "irecv: %d receives (maxRecvs is 1) or negative size", n);
    size_t s = (size_t)sizes[0];
    return gxn_irecv(rc, n, data, &s, tags, mhs, req);
}

static gxn_result_t isend_v9(void *sc, void *data, size_t size, int tag, void *mh, void **req)
{
    return gxn_isend(sc, data, size, tag, mh, req);
}

static gxn_result_t irecv_v9(void *rc, int n, void **data, size_t *sizes, int *tags, void **mhs,
                             void **req)
{
    return gxn_irecv(rc, n, data, sizes, tags, mhs, req);
}

static gxn_result_t isend_v10(void *sc, void *data, size_t size, int tag, void *mh, void *ph,
                              void **req)
{
    return gxn_isend(sc, data, size, tag, mh, req);
}

static gxn_result_t irecv_v10(void *rc, int n, void **data, size_t *sizes, int *tags, void **mhs,
                              void **phs, void **req)
{
    return gxn_irecv(rc, n, data, sizes, tags, mhs, req);
}

#define GXN_COMMON_TAIL                                                                        \
    .accept = accept_any, .reg_mr = gxn_reg_mr, .reg_mr_dmabuf = gxn_reg_mr_dmabuf,            \
    .dereg_mr = gxn_dereg_mr, .iflush = gxn_iflush, .test = gxn_test, .close_send = gxn_close, \
    .close_recv = gxn_close, .close_listen = gxn_close, .get_device_mr = NULL,                 \
    .irecv_consumed = NULL

GXN_EXPORT const gxn_net_v11_t ncclNetPlugin_v11 = {
    .name = GXN_NAME, .init = init_v11, .devices = gxn_devices, .get_properties = props_v11,
    .listen = listen_v11, .connect = connect_v11, .isend = isend_v10, .irecv = irecv_v10,
    GXN_COMMON_TAIL, .make_vdevice = NULL, .finalize = finalize_v11,
    .set_net_attr = set_net_attr_v11,
};

GXN_EXPORT const gxn_net_v10_t ncclNetPlugin_v10 = {
    .name = GXN_NAME, .init = init_v10, .devices = gxn_devices, .get_properties = props_v9,
    .listen = gxn_listen, .connect = connect_v10, .isend = isend_v10, .irecv = irecv_v10,
    GXN_COMMON_TAIL, .make_vdevice = NULL,
};

GXN_EXPORT const gxn_net_v9_t ncclNetPlugin_v9 = {
    .name = GXN_NAME, .init = gxn_init, .devices = gxn_devices, .get_properties = props_v9,
    .listen = gxn_listen, .connect = connect_v9, .isend = isend_v9, .irecv = irecv_v9,
    GXN_COMMON_TAIL, .make_vdevice = NULL,
};

GXN_EXPORT const gxn_net_v8_t ncclNetPlugin_v8 = {
    .name = GXN_NAME, .init = gxn_init, .devices = gxn_devices, .get_properties = props_v8,
    .listen = gxn_listen, .connect = connect_v9, .isend = isend_v8, .irecv = irecv_v8,
    GXN_COMMON_TAIL,
};
