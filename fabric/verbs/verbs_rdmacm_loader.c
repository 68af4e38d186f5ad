/*
 * verbs_rdmacm_loader.c - librdmacm opened at run time, as libibverbs is
 * (verbs_loader.c): dlopen() of GX_RDMACM_LIB or librdmacm.so.1 and dlvsym()
 * of each entry point under the version rdma-core exports it with
 * (RDMACM_1.0, rdma_establish and rdma_init_qp_attr under RDMACM_1.2), so
 * libgx has no link-time dependency on it. The path is usable when the
 * library loads and an event channel can be created: that needs the
 * kernel's rdma_cm (/dev/infiniband/rdma_cm, module rdma_ucm).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"
#include "fabric/verbs/verbs_rdmacm.h"

GX_PARAM_DEFINE(gx_param_rdmacm_lib, "GX_RDMACM_LIB", GX_PARAM_STRING, "", NULL,
                "Path of a library exporting the librdmacm API to load instead of "
                "librdmacm.so.1 for GX_IB_CM=rdmacm (the tests use a fake over softverbs).");

struct sym {
    const char *name;
    const char *version;
    size_t offset;
};

#define SYM(field, name, ver) { name, ver, offsetof(struct gx_rdmacm_api, field) }
static const struct sym syms[] = {
    SYM(create_event_channel, "rdma_create_event_channel", "RDMACM_1.0"),
    SYM(destroy_event_channel, "rdma_destroy_event_channel", "RDMACM_1.0"),
    SYM(create_id, "rdma_create_id", "RDMACM_1.0"),
    SYM(destroy_id, "rdma_destroy_id", "RDMACM_1.0"),
    SYM(bind_addr, "rdma_bind_addr", "RDMACM_1.0"),
    SYM(listen, "rdma_listen", "RDMACM_1.0"),
    SYM(resolve_addr, "rdma_resolve_addr", "RDMACM_1.0"),
    SYM(resolve_route, "rdma_resolve_route", "RDMACM_1.0"),
    SYM(connect, "rdma_connect", "RDMACM_1.0"),
    SYM(accept, "rdma_accept", "RDMACM_1.0"),
    SYM(reject, "rdma_reject", "RDMACM_1.0"),
    SYM(establish, "rdma_establish", "RDMACM_1.2"),
    SYM(disconnect, "rdma_disconnect", "RDMACM_1.0"),
    SYM(get_cm_event, "rdma_get_cm_event", "RDMACM_1.0"),
    SYM(ack_cm_event, "rdma_ack_cm_event", "RDMACM_1.0"),
    SYM(init_qp_attr, "rdma_init_qp_attr", "RDMACM_1.2"),
    SYM(event_str, "rdma_event_str", "RDMACM_1.0"),
    SYM(get_src_port, "rdma_get_src_port", "RDMACM_1.0"),
    SYM(get_devices, "rdma_get_devices", "RDMACM_1.0"),
    SYM(free_devices, "rdma_free_devices", "RDMACM_1.0"),
};
#undef SYM

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct gx_rdmacm_api api;
static int load_status = GX_EUNSUPPORTED;
static char path_used[256];
static char reason[384];

static void load(void)
{
    const char *path = gx_param_text(&gx_param_rdmacm_lib);
    bool custom = path[0] != '\0';
    if (!custom)
        path = "librdmacm.so.1";
    snprintf(path_used, sizeof(path_used), "%s", path);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *err = dlerror();
        snprintf(reason, sizeof(reason), "librdmacm missing: cannot load %s%s: %s", path,
                 custom ? " (GX_RDMACM_LIB)" : " (install rdma-core's librdmacm1)",
                 err ? err : "unknown error");
        GX_INFO(GX_SUB_FABRIC, "verbs: %s", reason);
        return;
    }
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *f = dlvsym(h, syms[i].name, syms[i].version);
        if (!f) {
            snprintf(reason, sizeof(reason), "librdmacm unusable: %s has no %s@%s (too old an "
                     "rdma-core?)", path, syms[i].name, syms[i].version);
            GX_INFO(GX_SUB_FABRIC, "verbs: %s", reason);
            dlclose(h);
            memset(&api, 0, sizeof(api));
            return;
        }
        memcpy((char *)&api + syms[i].offset, &f, sizeof(f));
    }
    /* An event channel opens /dev/infiniband/rdma_cm: without the kernel's
     * rdma_cm (module rdma_ucm) nothing can work, so say so here. */
    errno = 0;
    struct rdma_event_channel *ch = api.create_event_channel();
    if (!ch) {
        int err = errno;
        snprintf(reason, sizeof(reason), "kernel rdma_cm unavailable: rdma_create_event_channel "
                 "failed: %s (%s; load the rdma_ucm module on a host with an RDMA NIC)",
                 err ? strerror(err) : "unknown error",
                 err == ENOENT || err == ENODEV || err == ENXIO
                     ? "/dev/infiniband/rdma_cm is missing"
                     : "/dev/infiniband/rdma_cm cannot be opened");
        GX_INFO(GX_SUB_FABRIC, "verbs: %s", reason);
        /* The library stays loaded (the handle is kept), but unusable. */
        return;
    }
    api.destroy_event_channel(ch);
    GX_INFO(GX_SUB_FABRIC, "verbs: loaded %s for GX_IB_CM=rdmacm", path);
    load_status = GX_OK;
}

int gx_verbs_rdmacm_load(const struct gx_rdmacm_api **out)
{
    pthread_once(&load_once, load);
    if (load_status == GX_OK && out)
        *out = &api;
    return load_status;
}

int gx_verbs_rdmacm_available(void)
{
    return gx_verbs_rdmacm_load(NULL);
}

const char *gx_verbs_rdmacm_reason(void)
{
    pthread_once(&load_once, load);
    return reason;
}

int gx_verbs_rdmacm_report(char *out, size_t len)
{
    if (gx_verbs_rdmacm_available() == GX_OK)
        snprintf(out, len, "rdmacm: available (%s; untested on hardware, see docs/verbs.md)",
                 path_used);
    else
        snprintf(out, len, "rdmacm: not available: %s", gx_verbs_rdmacm_reason());
    return GX_OK;
}
