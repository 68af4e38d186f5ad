/*
 * gpu_gdr.c - is GPUDirect RDMA usable on a NIC, and why not: the
 * GX_NET_GDR_LEVEL limit on the GPU-to-NIC path, dmabuf support (probed by
 * the provider with ibv_reg_dmabuf_mr(fd -1)), the nvidia-peermem module,
 * and a GPU driver at all. The verdict text is what gx-info prints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "common/param.h"
#include "gpudirect/gpudirect.h"

GX_PARAM_DEFINE(gx_param_gdr_level, "GX_NET_GDR_LEVEL", GX_PARAM_STRING, "PXB", NULL,
                "Farthest GPU-to-NIC path over which GPUDirect RDMA is used, as NCCL: "
                "LOC (never), PIX, PXB, PHB, NODE, SYS (always); or NCCL's numbers 0 LOC, "
                "1 PIX, 2 PXB, 3 PHB, 4 SYS.");
GX_PARAM_DEFINE(gx_param_gdr_sysfs_root, "GX_GDR_SYSFS_ROOT", GX_PARAM_STRING, "", NULL,
                "Prefix of /sys and /proc when looking for nvidia-peermem (tests only).");

static const char *const path_names[] = { "LOC", "PIX", "PXB", "PHB", "NODE", "SYS", "unknown" };

const char *gx_gpu_path_name(enum gx_topo_path p)
{
    return (unsigned)p <= GX_TOPO_PATH_UNKNOWN ? path_names[p] : "?";
}

int gx_gpu_gdr_level(enum gx_topo_path *out)
{
    const char *v = gx_param_text(&gx_param_gdr_level);
    for (int i = 0; i <= GX_TOPO_PATH_SYS; i++) {
        if (strcasecmp(v, path_names[i]) == 0) {
            *out = (enum gx_topo_path)i;
            return GX_OK;
        }
    }
    /* Numbers as NCCL_NET_GDR_LEVEL's: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 (and
     * more) SYS; NODE has no number there. */
    static const enum gx_topo_path nccl_num[] = { GX_TOPO_PATH_SELF, GX_TOPO_PATH_PIX,
                                                  GX_TOPO_PATH_PXB, GX_TOPO_PATH_PHB,
                                                  GX_TOPO_PATH_SYS };
    char *end = NULL;
    long n = v[0] >= '0' && v[0] <= '9' ? strtol(v, &end, 10) : -1;
    if (n >= 0 && end && *end == '\0') {
        *out = nccl_num[n > 4 ? 4 : n];
        return GX_OK;
    }
    return gx_fail(GX_EINVAL, GX_SUB_GPU, "GX_NET_GDR_LEVEL=%s: expected LOC, PIX, PXB, PHB, "
                   "NODE, SYS, or a number as NCCL_NET_GDR_LEVEL's (0 LOC, 1 PIX, 2 PXB, "
                   "3 PHB, 4 SYS)", v);
}

static bool file_has_module(const char *path, const char *const *names)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        for (int i = 0; names[i]; i++) {
            size_t n = strlen(names[i]);
            if (strncmp(line, names[i], n) == 0 && line[n] == ' ')
                found = true;
        }
    }
    fclose(f);
    return found;
}

bool gx_gpu_peermem_loaded(char *why, size_t why_len)
{
    static const char *const names[] = { "nvidia_peermem", "nv_peer_mem", NULL };
    const char *root = gx_param_text(&gx_param_gdr_sysfs_root);
    char path[512];
    for (int i = 0; names[i]; i++) {
        snprintf(path, sizeof(path), "%s/sys/module/%s", root, names[i]);
        if (access(path, F_OK) == 0) {
            if (why)
                snprintf(why, why_len, "%s module loaded", names[i]);
            return true;
        }
    }
    snprintf(path, sizeof(path), "%s/proc/modules", root);
    if (file_has_module(path, names)) {
        if (why)
            snprintf(why, why_len, "nvidia_peermem listed in /proc/modules");
        return true;
    }
    if (why)
        snprintf(why, why_len, "no nvidia_peermem module (modprobe nvidia-peermem)");
    return false;
}

enum gx_gdr_method gx_gdr_verdict(const struct gx_gdr_inputs *in, char *why, size_t why_len)
{
    const char *nic = in->nic;
    if (!in->driver) {
        snprintf(why, why_len, "%s: GPUDirect RDMA not usable: %s", nic, in->driver_why);
        return GX_GDR_NONE;
    }
    if (!in->level_valid) {
        snprintf(why, why_len, "%s: GPUDirect RDMA off: bad GX_NET_GDR_LEVEL", nic);
        return GX_GDR_NONE;
    }
    if (in->level == GX_TOPO_PATH_SELF && in->path != GX_TOPO_PATH_SELF) {
        snprintf(why, why_len, "%s: GPUDirect RDMA off: GX_NET_GDR_LEVEL=LOC", nic);
        return GX_GDR_NONE;
    }
    if (in->path != GX_TOPO_PATH_UNKNOWN && in->path > in->level) {
        snprintf(why, why_len, "%s: GPUDirect RDMA off: the GPU-to-NIC path is %s, farther "
                 "than GX_NET_GDR_LEVEL=%s", nic, gx_gpu_path_name(in->path),
                 gx_gpu_path_name(in->level));
        return GX_GDR_NONE;
    }
    char path_note[64];
    if (in->path == GX_TOPO_PATH_UNKNOWN)
        snprintf(path_note, sizeof(path_note), " (path class unknown)");
    else
        snprintf(path_note, sizeof(path_note), " (path %s, GX_NET_GDR_LEVEL=%s)",
                 gx_gpu_path_name(in->path), gx_gpu_path_name(in->level));
    if (in->dmabuf == 1) {
        snprintf(why, why_len, "%s: GPUDirect RDMA with dmabuf (ibv_reg_dmabuf_mr supported)%s",
                 nic, path_note);
        return GX_GDR_DMABUF;
    }
    if (in->peermem) {
        snprintf(why, why_len, "%s: GPUDirect RDMA with nvidia-peermem (%s; dmabuf %s)%s", nic,
                 in->peermem_why, in->dmabuf == 0 ? "unsupported" : "not probed", path_note);
        return GX_GDR_PEERMEM;
    }
    snprintf(why, why_len, "%s: GPUDirect RDMA not usable: %s, and %s", nic,
             in->dmabuf == 0 ? "no dmabuf support in the kernel/driver (ibv_reg_dmabuf_mr "
                               "EOPNOTSUPP)"
                             : "dmabuf support unknown",
             in->peermem_why);
    return GX_GDR_NONE;
}

enum gx_gdr_method gx_gdr_decide(const struct gx_gdr_nic *nic, char *why, size_t why_len)
{
    char drv[160], peer[96];
    struct gx_gdr_inputs in = { .nic = nic->name, .path = nic->path, .dmabuf = nic->dmabuf,
                                .driver_why = drv, .peermem_why = peer };
    in.driver = gx_gpu_driver_available(drv, sizeof(drv));
    if (in.driver) {
        in.level_valid = gx_gpu_gdr_level(&in.level) == GX_OK;
        /* peermem is looked at only when dmabuf cannot be used */
        in.peermem = nic->dmabuf != 1 && gx_gpu_peermem_loaded(peer, sizeof(peer));
    }
    return gx_gdr_verdict(&in, why, why_len);
}
