/*
 * verbs_loader.c - libibverbs opened at run time: dlopen() of
 * GX_IBVERBS_LIB (tests point it at softverbs) or libibverbs.so.1, and
 * dlvsym() of each entry point with the symbol version rdma-core exports it
 * under, so libgx has no link-time dependency on rdma-core and runs on hosts
 * without it. A host without devices (no library, no kernel support:
 * ibv_get_device_list() NULL with ENOSYS) is "no devices", said once at info
 * level, never an error.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "fabric/verbs/verbs.h"

GX_PARAM_DEFINE(gx_param_ibverbs_lib, "GX_IBVERBS_LIB", GX_PARAM_STRING, "", NULL,
                "Path of a library exporting the libibverbs API to load instead of "
                "libibverbs.so.1 (the tests use the softverbs emulator).");

struct sym {
    const char *name;
    const char *version;
    size_t offset;
    bool required;
};

#define SYM(field, name, ver, req) { name, ver, offsetof(struct gx_verbs_api, field), req }
static const struct sym syms[] = {
    SYM(get_device_list, "ibv_get_device_list", "IBVERBS_1.1", true),
    SYM(free_device_list, "ibv_free_device_list", "IBVERBS_1.1", true),
    SYM(get_device_name, "ibv_get_device_name", "IBVERBS_1.1", true),
    SYM(open_device, "ibv_open_device", "IBVERBS_1.1", true),
    SYM(close_device, "ibv_close_device", "IBVERBS_1.1", true),
    SYM(query_device, "ibv_query_device", "IBVERBS_1.1", true),
    SYM(query_port, "ibv_query_port", "IBVERBS_1.1", true),
    SYM(query_gid, "ibv_query_gid", "IBVERBS_1.1", true),
    SYM(query_gid_ex, "_ibv_query_gid_ex", "IBVERBS_1.11", false),
    SYM(query_gid_table, "_ibv_query_gid_table", "IBVERBS_1.11", false),
    SYM(alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1", true),
    SYM(dealloc_pd, "ibv_dealloc_pd", "IBVERBS_1.1", true),
    SYM(reg_mr, "ibv_reg_mr", "IBVERBS_1.1", true),
    SYM(reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", false),
    SYM(dereg_mr, "ibv_dereg_mr", "IBVERBS_1.1", true),
    SYM(create_cq, "ibv_create_cq", "IBVERBS_1.1", true),
    SYM(resize_cq, "ibv_resize_cq", "IBVERBS_1.1", false),
    SYM(destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1", true),
    SYM(create_qp, "ibv_create_qp", "IBVERBS_1.1", true),
    SYM(modify_qp, "ibv_modify_qp", "IBVERBS_1.1", true),
    SYM(destroy_qp, "ibv_destroy_qp", "IBVERBS_1.1", true),
    SYM(get_async_event, "ibv_get_async_event", "IBVERBS_1.1", true),
    SYM(ack_async_event, "ibv_ack_async_event", "IBVERBS_1.1", true),
    SYM(wc_status_str, "ibv_wc_status_str", "IBVERBS_1.1", true),
    SYM(event_type_str, "ibv_event_type_str", "IBVERBS_1.1", true),
    SYM(create_comp_channel, "ibv_create_comp_channel", "IBVERBS_1.0", false),
    SYM(destroy_comp_channel, "ibv_destroy_comp_channel", "IBVERBS_1.0", false),
    SYM(get_cq_event, "ibv_get_cq_event", "IBVERBS_1.1", false),
    SYM(ack_cq_events, "ibv_ack_cq_events", "IBVERBS_1.1", false),
};
#undef SYM

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct gx_verbs_api api;
static int load_status = GX_EUNSUPPORTED;
static char load_reason[384];

static void load(void)
{
    const char *path = gx_param_text(&gx_param_ibverbs_lib);
    bool custom = path[0] != '\0';
    if (!custom)
        path = "libibverbs.so.1";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *err = dlerror();
        snprintf(load_reason, sizeof(load_reason), "cannot load %s%s: %s", path,
                 custom ? " (GX_IBVERBS_LIB)" : " (install rdma-core's libibverbs1)",
                 err ? err : "unknown error");
        GX_INFO(GX_SUB_FABRIC, "verbs: %s", load_reason);
        return;
    }
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *f = dlvsym(h, syms[i].name, syms[i].version);
        if (!f && syms[i].required) {
            snprintf(load_reason, sizeof(load_reason), "%s has no %s@%s (too old an rdma-core?)",
                     path, syms[i].name, syms[i].version);
            GX_INFO(GX_SUB_FABRIC, "verbs: %s", load_reason);
            dlclose(h);
            memset(&api, 0, sizeof(api));
            return;
        }
        memcpy((char *)&api + syms[i].offset, &f, sizeof(f));
    }
    GX_INFO(GX_SUB_FABRIC, "verbs: loaded %s%s%s", path,
            api.query_gid_table ? "" : " (no ibv_query_gid_table: GIDs read one by one)",
            api.reg_dmabuf_mr ? "" : " (no ibv_reg_dmabuf_mr: no dmabuf registration)");
    load_status = GX_OK;
    /* The handle stays open for the life of the process, as NCCL's does. */
}

int gx_verbs_load(const struct gx_verbs_api **out)
{
    pthread_once(&load_once, load);
    if (load_status == GX_OK && out)
        *out = &api;
    return load_status;
}

const char *gx_verbs_unavailable_reason(void)
{
    pthread_once(&load_once, load);
    return load_reason;
}

struct gx_verbs_api *gx_verbs_api_mutable(void)
{
    return load_status == GX_OK ? &api : NULL;
}

int gx_verbs_device_list(const struct gx_verbs_api *a, struct ibv_device ***list, int *n)
{
    static int said;
    int num = 0;
    errno = 0;
    struct ibv_device **l = a->get_device_list(&num);
    if (!l || num <= 0) {
        int err = errno;
        if (l)
            a->free_device_list(l);
        if (!said++) {
            if (!l && (err == ENOSYS || err == ENODEV || err == ENOENT || err == 0))
                GX_INFO(GX_SUB_FABRIC, "verbs: no RDMA devices (%s)",
                        err == ENOSYS ? "the kernel has no InfiniBand/RDMA support"
                                      : "none present");
            else if (!l)
                GX_INFO(GX_SUB_FABRIC, "verbs: no RDMA devices: ibv_get_device_list: %s",
                        strerror(err));
            else
                GX_INFO(GX_SUB_FABRIC, "verbs: no RDMA devices");
        }
        *list = NULL;
        *n = 0;
        return GX_OK;
    }
    *list = l;
    *n = num;
    return GX_OK;
}

int gx_verbs_query_port(const struct gx_verbs_api *a, struct ibv_context *ctx, uint8_t port,
                        struct ibv_port_attr *attr)
{
    /* What verbs.h's ___ibv_query_port() inline does, minus its call of the
     * exported symbol by name (which would link us to libibverbs). */
    struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);
    memset(attr, 0, sizeof(*attr));
    if (!vctx)
        return a->query_port(ctx, port, (struct _compat_ibv_port_attr *)attr);
    return vctx->query_port(ctx, port, attr, sizeof(*attr));
}
