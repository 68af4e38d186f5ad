/*
 * topo_internal.h - the topology model shared by the topology/ sources only.
 *
 * Discovery (topo_hwloc.c, or topo_fallback.c in a build without hwloc) fills
 * struct gx_topo: devices grouped by kind, the path class of every device
 * pair, and the NUMA nodes. Everything after discovery (placement, the
 * public getters, binding) works on this model and never on hwloc objects.
 */
#ifndef GX_TOPOLOGY_TOPO_INTERNAL_H
#define GX_TOPOLOGY_TOPO_INTERNAL_H

#include "gx/gx.h"
#include "gx/gx_topo.h"

#include <limits.h>

struct gx_topo {
    /* Devices ordered by kind: GPUs, then RDMA NICs, then Ethernet NICs. */
    int ndev;
    struct gx_topo_device *dev;
    int kind_first[GX_TOPO_KIND_COUNT];
    int kind_count[GX_TOPO_KIND_COUNT];
    unsigned char *path; /* ndev x ndev enum gx_topo_path */

    int nnuma;
    struct gx_topo_numa *numa;
    unsigned *numa_dist; /* nnuma x nnuma, 0 = unknown */

    char machine_cpuset[GX_TOPO_CPUSET_MAX];
    char source[PATH_MAX];
    void *hw; /* hwloc_topology_t kept for export; NULL in the fallback */
};

/** Discover into a zeroed *t: probe when file is NULL, else load the XML. */
int topo_discover(struct gx_topo *t, const char *file);
/** Release what topo_discover allocated. */
void topo_discover_free(struct gx_topo *t);
/** Export the hwloc topology; GX_EUNSUPPORTED in the fallback. */
int topo_discover_export(const struct gx_topo *t, const char *path);

static inline const struct gx_topo_device *topo_dev(const struct gx_topo *t, enum gx_topo_kind k, int i)
{
    return &t->dev[t->kind_first[k] + i];
}

static inline enum gx_topo_path topo_path_of(const struct gx_topo *t, enum gx_topo_kind ka, int ia,
                                             enum gx_topo_kind kb, int ib)
{
    return (enum gx_topo_path)t->path[(t->kind_first[ka] + ia) * t->ndev + t->kind_first[kb] + ib];
}

/** Index of the NUMA node with this OS index, or -1. */
int topo_numa_by_os_index(const struct gx_topo *t, int os_index);

#endif
