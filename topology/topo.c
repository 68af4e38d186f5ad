/*
 * topo.c - loading, dumping and querying the topology (public gx_topo_*
 * getters and the internal gx_topo_open / gpu lookups).
 */
#include "topology/topo.h"
#include "topology/topo_internal.h"

#include "common/log.h"
#include "common/param.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

GX_PARAM_DEFINE(gx_param_topo_file, "GX_TOPO_FILE", GX_PARAM_STRING, "", NULL,
                "hwloc XML topology to use instead of probing the machine (for VMs whose "
                "sysfs hides the PCIe layout); make one with GX_TOPO_DUMP or lstopo --of xml");
GX_PARAM_DEFINE(gx_param_topo_dump, "GX_TOPO_DUMP", GX_PARAM_STRING, "", NULL,
                "write the detected topology to this file as hwloc XML, to inspect, fix and "
                "feed back with GX_TOPO_FILE");

int topo_numa_by_os_index(const struct gx_topo *t, int os_index)
{
    for (int i = 0; i < t->nnuma; i++)
        if (t->numa[i].os_index == os_index)
            return i;
    return -1;
}

GX_API int gx_topo_load(const char *xml_path, struct gx_topo **out)
{
    if (out == NULL)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "gx_topo_load: out is NULL");
    if (xml_path == NULL && gx_param_is_set(&gx_param_topo_file))
        xml_path = gx_param_text(&gx_param_topo_file);
    if (xml_path != NULL && xml_path[0] == '\0')
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "topology file name is empty");

    struct gx_topo *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return gx_fail(GX_ENOMEM, GX_SUB_TOPO, "out of memory");
    int rc = topo_discover(t, xml_path);
    if (rc != GX_OK) {
        gx_topo_free(t);
        return rc;
    }
    if (gx_param_is_set(&gx_param_topo_dump)) {
        const char *dump = gx_param_text(&gx_param_topo_dump);
        rc = topo_discover_export(t, dump);
        if (rc != GX_OK) {
            gx_topo_free(t);
            return rc;
        }
        GX_INFO(GX_SUB_TOPO, "wrote the topology (%s) to %s (GX_TOPO_DUMP)", t->source, dump);
    }
    *out = t;
    return GX_OK;
}

int gx_topo_open(struct gx_topo **out)
{
    return gx_topo_load(NULL, out);
}

GX_API void gx_topo_free(struct gx_topo *topo)
{
    if (topo == NULL)
        return;
    topo_discover_free(topo);
    free(topo->dev);
    free(topo->path);
    free(topo->numa);
    free(topo->numa_dist);
    free(topo);
}

GX_API const char *gx_topo_source(const struct gx_topo *topo)
{
    return topo ? topo->source : "";
}

GX_API int gx_topo_export_xml(const struct gx_topo *topo, const char *path)
{
    if (topo == NULL || path == NULL)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "gx_topo_export_xml: NULL argument");
    return topo_discover_export(topo, path);
}

GX_API int gx_topo_device_count(const struct gx_topo *topo, enum gx_topo_kind kind)
{
    if (topo == NULL || (unsigned)kind >= GX_TOPO_KIND_COUNT)
        return 0;
    return topo->kind_count[kind];
}

static int check_index(const struct gx_topo *topo, enum gx_topo_kind kind, int index)
{
    if (topo == NULL || (unsigned)kind >= GX_TOPO_KIND_COUNT)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "invalid topology or device kind");
    if (index < 0 || index >= topo->kind_count[kind])
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "%s index %d is out of range: %d found",
                       gx_topo_kind_name(kind), index, topo->kind_count[kind]);
    return GX_OK;
}

GX_API int gx_topo_device_get(const struct gx_topo *topo, enum gx_topo_kind kind, int index,
                              struct gx_topo_device *out)
{
    int rc = check_index(topo, kind, index);
    if (rc != GX_OK)
        return rc;
    if (out == NULL || out->size == 0 || out->size > sizeof(*out))
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "gx_topo_device_get: out->size must be set (GX_TOPO_DEVICE_INIT)");
    size_t size = out->size;
    memcpy(out, topo_dev(topo, kind, index), size);
    out->size = size;
    return GX_OK;
}

GX_API int gx_topo_path_get(const struct gx_topo *topo, enum gx_topo_kind kind_a, int index_a,
                            enum gx_topo_kind kind_b, int index_b, enum gx_topo_path *out)
{
    int rc = check_index(topo, kind_a, index_a);
    if (rc == GX_OK)
        rc = check_index(topo, kind_b, index_b);
    if (rc != GX_OK)
        return rc;
    if (out == NULL)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "gx_topo_path_get: out is NULL");
    *out = topo_path_of(topo, kind_a, index_a, kind_b, index_b);
    return GX_OK;
}

GX_API const char *gx_topo_path_name(enum gx_topo_path path)
{
    switch (path) {
    case GX_TOPO_PATH_SELF: return "X";
    case GX_TOPO_PATH_PIX: return "PIX";
    case GX_TOPO_PATH_PXB: return "PXB";
    case GX_TOPO_PATH_PHB: return "PHB";
    case GX_TOPO_PATH_NODE: return "NODE";
    case GX_TOPO_PATH_SYS: return "SYS";
    case GX_TOPO_PATH_UNKNOWN: break;
    }
    return "?";
}

GX_API const char *gx_topo_kind_name(enum gx_topo_kind kind)
{
    switch (kind) {
    case GX_TOPO_GPU: return "gpu";
    case GX_TOPO_RDMA_NIC: return "rdma";
    case GX_TOPO_ETH_NIC: return "eth";
    case GX_TOPO_KIND_COUNT: break;
    }
    return "?";
}

GX_API int gx_topo_numa_count(const struct gx_topo *topo)
{
    return topo ? topo->nnuma : 0;
}

GX_API int gx_topo_numa_get(const struct gx_topo *topo, int index, struct gx_topo_numa *out)
{
    if (topo == NULL || index < 0 || index >= topo->nnuma)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "NUMA index %d is out of range: %d found", index,
                       topo ? topo->nnuma : 0);
    if (out == NULL || out->size == 0 || out->size > sizeof(*out))
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "gx_topo_numa_get: out->size must be set (GX_TOPO_NUMA_INIT)");
    size_t size = out->size;
    memcpy(out, &topo->numa[index], size);
    out->size = size;
    return GX_OK;
}

GX_API int gx_topo_numa_distance(const struct gx_topo *topo, int a, int b, unsigned *out)
{
    if (topo == NULL || a < 0 || b < 0 || a >= topo->nnuma || b >= topo->nnuma || out == NULL)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "NUMA distance: index out of range");
    *out = topo->numa_dist[a * topo->nnuma + b];
    return GX_OK;
}

GX_API const char *gx_topo_machine_cpuset(const struct gx_topo *topo)
{
    return topo ? topo->machine_cpuset : "";
}

/* "0000:17:00.0" and CUDA's "00000000:17:00.0" name the same function. */
static const char *busid_tail(const char *busid)
{
    const char *colon = strchr(busid, ':');
    return colon ? colon + 1 : busid;
}

int gx_topo_gpu_by_busid(const struct gx_topo *topo, const char *busid, int *gpu_out)
{
    if (topo == NULL || busid == NULL || gpu_out == NULL)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "gx_topo_gpu_by_busid: NULL argument");
    for (int i = 0; i < topo->kind_count[GX_TOPO_GPU]; i++) {
        const struct gx_topo_device *d = topo_dev(topo, GX_TOPO_GPU, i);
        if (strcasecmp(busid_tail(d->busid), busid_tail(busid)) == 0) {
            *gpu_out = i;
            return GX_OK;
        }
    }
    return gx_fail(GX_EINVAL, GX_SUB_TOPO, "no GPU with PCI bus id %s among the %d GPUs of %s", busid,
                   topo->kind_count[GX_TOPO_GPU], topo->source);
}

int gx_topo_gpu_for_rank(const struct gx_topo *topo, int local_rank, int *gpu_out)
{
    if (topo == NULL || gpu_out == NULL || local_rank < 0)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "gx_topo_gpu_for_rank: invalid argument");
    int ngpu = topo->kind_count[GX_TOPO_GPU];
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (ngpu == 0 || (cvd != NULL && cvd[0] == '\0')) {
        *gpu_out = -1;
        return GX_OK;
    }
    if (cvd != NULL) {
        int list[256], n = 0;
        bool numeric = true;
        const char *p = cvd;
        while (*p != '\0' && n < 256) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || (*end != ',' && *end != '\0')) {
                numeric = false;
                break;
            }
            list[n++] = (int)v;
            p = *end == ',' ? end + 1 : end;
        }
        if (numeric && n > 0) {
            int gpu = n == 1 ? list[0] : list[local_rank % n];
            if (gpu >= ngpu)
                return gx_fail(GX_EINVAL, GX_SUB_TOPO,
                               "CUDA_VISIBLE_DEVICES=%s names GPU %d but %s has %d GPUs", cvd, gpu,
                               topo->source, ngpu);
            *gpu_out = gpu;
            return GX_OK;
        }
        GX_INFO(GX_SUB_TOPO, "CUDA_VISIBLE_DEVICES=%s is not a list of indices; assuming local rank %d uses GPU %d",
                cvd, local_rank, local_rank % ngpu);
    }
    *gpu_out = local_rank % ngpu;
    return GX_OK;
}
