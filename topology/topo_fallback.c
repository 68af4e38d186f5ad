/*
 * topo_fallback.c - discovery in a build without hwloc: no PCIe paths, no
 * GPUs; RDMA NICs from /sys/class/infiniband and one NUMA node with no CPU
 * list (so nothing is bound). Placement then hands NICs out round-robin.
 * Says so once.
 */
#include "topology/topo_internal.h"

#include "common/log.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_dev(const void *a, const void *b)
{
    return strverscmp(((const struct gx_topo_device *)a)->name, ((const struct gx_topo_device *)b)->name);
}

int topo_discover(struct gx_topo *t, const char *file)
{
    static int warned;
    if (file != NULL)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_TOPO,
                       "cannot read topology file %s: gx was built without hwloc (apt-get install libhwloc-dev and rebuild)",
                       file);
    if (!warned++)
        GX_WARN(GX_SUB_TOPO, "gx was built without hwloc: ranks get NICs round-robin and are not bound to CPUs");

    t->numa = calloc(1, sizeof(*t->numa));
    t->numa_dist = calloc(1, sizeof(*t->numa_dist));
    if (t->numa == NULL || t->numa_dist == NULL)
        return gx_fail(GX_ENOMEM, GX_SUB_TOPO, "out of memory");
    t->nnuma = 1;
    t->numa[0].size = sizeof(t->numa[0]);

    int n = 0, cap = 0;
    DIR *dir = opendir("/sys/class/infiniband");
    struct dirent *e;
    while (dir != NULL && (e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            struct gx_topo_device *v = realloc(t->dev, (size_t)cap * sizeof(*v));
            if (v == NULL) {
                closedir(dir);
                return gx_fail(GX_ENOMEM, GX_SUB_TOPO, "out of memory");
            }
            t->dev = v;
        }
        struct gx_topo_device *d = &t->dev[n++];
        memset(d, 0, sizeof(*d));
        d->size = sizeof(*d);
        d->kind = GX_TOPO_RDMA_NIC;
        d->port_count = 1;
        d->numa_node = -1;
        snprintf(d->name, sizeof(d->name), "%s", e->d_name);
    }
    if (dir != NULL)
        closedir(dir);
    if (n > 1)
        qsort(t->dev, (size_t)n, sizeof(*t->dev), cmp_dev);
    t->path = malloc(n > 0 ? (size_t)n * (size_t)n : 1);
    if (t->path == NULL)
        return gx_fail(GX_ENOMEM, GX_SUB_TOPO, "out of memory");
    memset(t->path, GX_TOPO_PATH_UNKNOWN, (size_t)n * (size_t)n);
    for (int i = 0; i < n; i++) {
        t->dev[i].index = i;
        t->path[i * n + i] = GX_TOPO_PATH_SELF;
    }
    t->ndev = n;
    t->kind_first[GX_TOPO_GPU] = 0;
    t->kind_first[GX_TOPO_RDMA_NIC] = 0;
    t->kind_first[GX_TOPO_ETH_NIC] = n;
    t->kind_count[GX_TOPO_RDMA_NIC] = n;
    snprintf(t->source, sizeof(t->source), "fallback");
    return GX_OK;
}

void topo_discover_free(struct gx_topo *t)
{
    (void)t;
}

int topo_discover_export(const struct gx_topo *t, const char *path)
{
    (void)t;
    return gx_fail(GX_EUNSUPPORTED, GX_SUB_TOPO, "cannot write %s: gx was built without hwloc", path);
}
