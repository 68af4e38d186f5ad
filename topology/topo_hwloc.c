/*
 * topo_hwloc.c - discovery with hwloc 2.x: fills struct gx_topo from a live
 * probe or an hwloc XML file. Owns every hwloc call of gx except binding
 * (which uses sched_setaffinity on the model's CPU lists).
 *
 * Devices: GPUs are NVIDIA PCI functions of class 0x0302 (3D) or 0x0300
 * (VGA), or any PCI function carrying a CUDA/NVML OS device; RDMA NICs are
 * OpenFabrics OS devices; Ethernet NICs are network OS devices on a PCI
 * function without an OpenFabrics device. Paths: see classify_path().
 */
#include "topology/topo_internal.h"

#include "common/log.h"

#include <hwloc.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct found {
    struct gx_topo_device d;
    hwloc_obj_t anchor; /* the PCI function (or whatever the OS device hangs on) */
};

struct found_list {
    struct found *v;
    int n, cap;
};

static struct found *found_add(struct found_list *l)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        struct found *v = realloc(l->v, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        l->v = v;
        l->cap = cap;
    }
    struct found *f = &l->v[l->n++];
    memset(f, 0, sizeof(*f));
    f->d.size = sizeof(f->d);
    f->d.numa_node = -1;
    f->d.port_count = 1;
    return f;
}

/* ------------------------------------------------------------------------ */

static bool is_host_bridge(hwloc_obj_t o)
{
    return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

static bool is_pci_bridge(hwloc_obj_t o)
{
    return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

static const struct hwloc_pcidev_attr_s *pci_attr(hwloc_obj_t o)
{
    if (o->type == HWLOC_OBJ_PCI_DEVICE)
        return &o->attr->pcidev;
    if (is_pci_bridge(o))
        return &o->attr->bridge.upstream.pci;
    return NULL;
}

/*
 * A bridge is a switch (fan-out point) when two or more distinct PCI devices
 * (bus:device, so the functions of one multi-function card count once) sit
 * directly below it. A switch's downstream ports and a root port each have a
 * single device below them and are only links; a switch's upstream port has
 * several downstream ports below it. This way a switch counts once whether
 * hwloc shows its ports or a simplified XML puts the devices right under it.
 */
static bool is_switch(hwloc_obj_t bridge)
{
    unsigned first = 0;
    bool have_first = false;
    for (hwloc_obj_t c = bridge->io_first_child; c != NULL; c = c->next_sibling) {
        const struct hwloc_pcidev_attr_s *a = pci_attr(c);
        if (a == NULL)
            continue;
        unsigned key = ((unsigned)a->domain << 16) | ((unsigned)a->bus << 8) | a->dev;
        if (!have_first) {
            first = key;
            have_first = true;
        } else if (key != first) {
            return true;
        }
    }
    return false;
}

/* Common ancestor by walking parents: hwloc_get_common_ancestor_obj()
 * compares depths, which are negative special values for I/O objects. */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
    for (hwloc_obj_t x = a; x != NULL; x = x->parent)
        for (hwloc_obj_t y = b; y != NULL; y = y->parent)
            if (x == y)
                return x;
    return NULL;
}

/*
 * Path class between two devices (their anchor objects):
 *  - common ancestor is a PCI bridge: PIX when only one switch lies on the
 *    path (the common one), PXB when more do;
 *  - common ancestor is a host bridge: PHB;
 *  - common ancestor is on the CPU side (different host bridges): NODE when
 *    both devices are local to the same NUMA node, else SYS.
 */
static enum gx_topo_path classify_path(const struct found *x, const struct found *y)
{
    hwloc_obj_t a = x->anchor, b = y->anchor;
    if (a == NULL || b == NULL)
        return GX_TOPO_PATH_SYS;
    if (a == b)
        return GX_TOPO_PATH_PIX;
    hwloc_obj_t lca = common_ancestor(a, b);
    if (lca == NULL)
        return GX_TOPO_PATH_SYS;
    if (lca == a || lca == b || lca->type == HWLOC_OBJ_PCI_DEVICE)
        return GX_TOPO_PATH_PIX;
    if (is_host_bridge(lca))
        return GX_TOPO_PATH_PHB;
    if (is_pci_bridge(lca)) {
        int switches = 1;
        hwloc_obj_t ends[2] = { a, b };
        for (int i = 0; i < 2; i++)
            for (hwloc_obj_t p = ends[i]->parent; p != NULL && p != lca; p = p->parent)
                if (is_pci_bridge(p) && is_switch(p))
                    switches++;
        return switches <= 1 ? GX_TOPO_PATH_PIX : GX_TOPO_PATH_PXB;
    }
    if (x->d.numa_node >= 0 && x->d.numa_node == y->d.numa_node)
        return GX_TOPO_PATH_NODE;
    return GX_TOPO_PATH_SYS;
}

/* ------------------------------------------------------------------------ */

static void locate(hwloc_topology_t hw, struct found *f)
{
    hwloc_obj_t pci = f->anchor;
    while (pci != NULL && pci->type != HWLOC_OBJ_PCI_DEVICE && pci->type == HWLOC_OBJ_OS_DEVICE)
        pci = pci->parent;
    if (pci != NULL && pci->type == HWLOC_OBJ_PCI_DEVICE) {
        const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;
        snprintf(f->d.busid, sizeof(f->d.busid), "%04x:%02x:%02x.%x", a->domain, a->bus, a->dev, a->func);
        f->d.vendor_id = a->vendor_id;
        f->d.device_id = a->device_id;
        f->d.class_id = a->class_id;
        f->d.pci_gbytes = a->linkspeed;
    }
    hwloc_obj_t cpu = f->anchor ? hwloc_get_non_io_ancestor_obj(hw, f->anchor) : hwloc_get_root_obj(hw);
    if (cpu == NULL)
        cpu = hwloc_get_root_obj(hw);
    if (cpu->cpuset != NULL)
        hwloc_bitmap_list_snprintf(f->d.cpuset, sizeof(f->d.cpuset), cpu->cpuset);
    if (cpu->nodeset != NULL && hwloc_bitmap_weight(cpu->nodeset) == 1)
        f->d.numa_node = hwloc_bitmap_first(cpu->nodeset);
}

static double info_gbps(hwloc_obj_t o)
{
    const char *v = hwloc_obj_get_info_by_name(o, "GXLinkGbps");
    return v ? strtod(v, NULL) : 0.0;
}

/* Live probe only: the link rate from sysfs, remembered in the hwloc object
 * (GXLinkGbps) so GX_TOPO_DUMP carries it. */
static double sysfs_gbps(hwloc_obj_t o, const char *fmt, double scale)
{
    char path[256];
    snprintf(path, sizeof(path), fmt, o->name);
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return 0.0;
    double v = 0.0;
    if (fscanf(fp, "%lf", &v) != 1 || v < 0)
        v = 0.0;
    fclose(fp);
    v *= scale;
    if (v > 0) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%g", v);
        hwloc_obj_add_info(o, "GXLinkGbps", buf);
    }
    return v;
}

static int count_ports(hwloc_obj_t o)
{
    int ports = 0;
    for (unsigned i = 0; i < o->infos_count; i++) {
        int p;
        char tail[16];
        if (sscanf(o->infos[i].name, "Port%dState%15s", &p, tail) == 1 && p > ports)
            ports = p;
    }
    return ports > 0 ? ports : 1;
}

static bool has_osdev(hwloc_obj_t pci, hwloc_obj_osdev_type_t type)
{
    for (hwloc_obj_t c = pci->io_first_child; c != NULL; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == type)
            return true;
    return false;
}

static hwloc_obj_t first_osdev(hwloc_obj_t parent, hwloc_obj_osdev_type_t type)
{
    if (parent == NULL)
        return NULL;
    for (hwloc_obj_t c = parent->io_first_child; c != NULL; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == type)
            return c;
    return NULL;
}

static bool is_gpu(hwloc_obj_t pci)
{
    const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;
    if (a->vendor_id == 0x10de && (a->class_id == 0x0302 || a->class_id == 0x0300))
        return true;
    for (hwloc_obj_t c = pci->io_first_child; c != NULL; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->name != NULL &&
            (strncmp(c->name, "cuda", 4) == 0 || strncmp(c->name, "nvml", 4) == 0))
            return true;
    return false;
}

static int cmp_busid(const void *a, const void *b)
{
    return strcmp(((const struct found *)a)->d.busid, ((const struct found *)b)->d.busid);
}

static int cmp_name(const void *a, const void *b)
{
    return strverscmp(((const struct found *)a)->d.name, ((const struct found *)b)->d.name);
}

static int collect_devices(hwloc_topology_t hw, bool live, struct found_list lists[GX_TOPO_KIND_COUNT])
{
    for (hwloc_obj_t pci = hwloc_get_next_pcidev(hw, NULL); pci != NULL; pci = hwloc_get_next_pcidev(hw, pci)) {
        if (!is_gpu(pci))
            continue;
        struct found *f = found_add(&lists[GX_TOPO_GPU]);
        if (f == NULL)
            return GX_ENOMEM;
        f->d.kind = GX_TOPO_GPU;
        f->anchor = pci;
        locate(hw, f);
    }
    for (hwloc_obj_t os = hwloc_get_next_osdev(hw, NULL); os != NULL; os = hwloc_get_next_osdev(hw, os)) {
        if (os->name == NULL)
            continue;
        enum hwloc_obj_osdev_type_e type = os->attr->osdev.type;
        struct found *f;
        if (type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
            if ((f = found_add(&lists[GX_TOPO_RDMA_NIC])) == NULL)
                return GX_ENOMEM;
            f->d.kind = GX_TOPO_RDMA_NIC;
            f->d.port_count = count_ports(os);
            hwloc_obj_t net = first_osdev(os->parent, HWLOC_OBJ_OSDEV_NETWORK);
            if (net != NULL && net->name != NULL)
                snprintf(f->d.netdev, sizeof(f->d.netdev), "%s", net->name);
            f->d.link_gbps = info_gbps(os);
            if (f->d.link_gbps == 0 && live)
                f->d.link_gbps = sysfs_gbps(os, "/sys/class/infiniband/%s/ports/1/rate", 1.0);
        } else if (type == HWLOC_OBJ_OSDEV_NETWORK && os->parent != NULL &&
                   os->parent->type == HWLOC_OBJ_PCI_DEVICE &&
                   !has_osdev(os->parent, HWLOC_OBJ_OSDEV_OPENFABRICS)) {
            if ((f = found_add(&lists[GX_TOPO_ETH_NIC])) == NULL)
                return GX_ENOMEM;
            f->d.kind = GX_TOPO_ETH_NIC;
            f->d.port_count = 1;
            snprintf(f->d.netdev, sizeof(f->d.netdev), "%s", os->name);
            f->d.link_gbps = info_gbps(os);
            if (f->d.link_gbps == 0 && live)
                f->d.link_gbps = sysfs_gbps(os, "/sys/class/net/%s/speed", 1e-3);
        } else {
            continue;
        }
        snprintf(f->d.name, sizeof(f->d.name), "%s", os->name);
        f->anchor = os->parent;
        locate(hw, f);
    }
    struct found_list *g = &lists[GX_TOPO_GPU];
    if (g->n > 1)
        qsort(g->v, (size_t)g->n, sizeof(*g->v), cmp_busid);
    for (int i = 0; i < g->n; i++)
        snprintf(g->v[i].d.name, sizeof(g->v[i].d.name), "GPU%d", i);
    for (int k = GX_TOPO_RDMA_NIC; k < GX_TOPO_KIND_COUNT; k++)
        if (lists[k].n > 1)
            qsort(lists[k].v, (size_t)lists[k].n, sizeof(*lists[k].v), cmp_name);
    return GX_OK;
}

static int collect_numa(hwloc_topology_t hw, struct gx_topo *t)
{
    int n = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    if (n <= 0)
        n = 0;
    t->numa = calloc(n > 0 ? (size_t)n : 1, sizeof(*t->numa));
    t->numa_dist = calloc(n > 0 ? (size_t)n * (size_t)n : 1, sizeof(*t->numa_dist));
    if (t->numa == NULL || t->numa_dist == NULL)
        return GX_ENOMEM;
    t->nnuma = n;
    for (int i = 0; i < n; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(hw, HWLOC_OBJ_NUMANODE, (unsigned)i);
        struct gx_topo_numa *m = &t->numa[i];
        m->size = sizeof(*m);
        m->os_index = (int)o->os_index;
        m->memory_bytes = o->attr->numanode.local_memory;
        hwloc_bitmap_list_snprintf(m->cpuset, sizeof(m->cpuset), o->cpuset);
    }

    unsigned nr = 1;
    struct hwloc_distances_s *dist = NULL;
    if (n > 1 && hwloc_distances_get_by_type(hw, HWLOC_OBJ_NUMANODE, &nr, &dist, 0, 0) == 0 && nr >= 1) {
        for (unsigned i = 0; i < dist->nbobjs; i++)
            for (unsigned j = 0; j < dist->nbobjs; j++) {
                int a = topo_numa_by_os_index(t, (int)dist->objs[i]->os_index);
                int b = topo_numa_by_os_index(t, (int)dist->objs[j]->os_index);
                if (a >= 0 && b >= 0)
                    t->numa_dist[a * n + b] = (unsigned)dist->values[i * dist->nbobjs + j];
            }
        hwloc_distances_release(hw, dist);
    }
    return GX_OK;
}

/* A message for a file hwloc cannot read, based on what the file holds. */
static int check_file(const char *file)
{
    FILE *fp = fopen(file, "r");
    if (fp == NULL)
        return gx_fail(errno == ENOENT ? GX_EINVAL : GX_ESYSTEM, GX_SUB_TOPO,
                       "topology file %s: cannot open it: %m", file);
    char head[4096];
    size_t len = fread(head, 1, sizeof(head) - 1, fp);
    fclose(fp);
    head[len] = '\0';
    size_t i = 0;
    while (i < len && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r'))
        i++;
    if (len == 0 || head[i] != '<')
        return gx_fail(GX_EINVAL, GX_SUB_TOPO,
                       "topology file %s is not XML (expected an hwloc topology, e.g. from lstopo --of xml)", file);
    if (strstr(head, "<topology") == NULL)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO,
                       "topology file %s is not an hwloc XML topology (no <topology> element)", file);
    return GX_OK;
}

int topo_discover(struct gx_topo *t, const char *file)
{
    hwloc_topology_t hw;
    struct found_list lists[GX_TOPO_KIND_COUNT] = { { 0 } };
    int rc;

    if (file != NULL && (rc = check_file(file)) != GX_OK)
        return rc;
    if (hwloc_topology_init(&hw) != 0)
        return gx_fail(GX_ENOMEM, GX_SUB_TOPO, "hwloc_topology_init failed: %m");
    /* Without this hwloc drops every PCI device and OS device. */
    hwloc_topology_set_io_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (file != NULL && hwloc_topology_set_xml(hw, file) != 0) {
        rc = gx_fail(GX_EINVAL, GX_SUB_TOPO,
                     "topology file %s: hwloc cannot parse it as an hwloc XML topology: %m", file);
        goto err_destroy;
    }
    if (hwloc_topology_load(hw) != 0) {
        rc = file ? gx_fail(GX_EINVAL, GX_SUB_TOPO,
                            "topology file %s: hwloc rejected it (%m); it must be an hwloc 2.x XML "
                            "topology with at least one CPU (lstopo --whole-io --of xml)", file)
                  : gx_fail(GX_ESYSTEM, GX_SUB_TOPO, "hwloc could not probe this machine: %m");
        goto err_destroy;
    }
    hwloc_obj_t root = hwloc_get_root_obj(hw);
    if (root->cpuset == NULL || hwloc_bitmap_iszero(root->cpuset) ||
        hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU) <= 0) {
        rc = gx_fail(GX_EINVAL, GX_SUB_TOPO, "topology %s describes no CPUs", file ? file : "probe");
        goto err_destroy;
    }
    hwloc_bitmap_list_snprintf(t->machine_cpuset, sizeof(t->machine_cpuset), root->cpuset);

    if ((rc = collect_numa(hw, t)) != GX_OK)
        goto err_free_lists;

    if ((rc = collect_devices(hw, file == NULL, lists)) != GX_OK)
        goto err_free_lists;

    int n = 0;
    for (int k = 0; k < GX_TOPO_KIND_COUNT; k++)
        n += lists[k].n;
    t->dev = calloc(n > 0 ? (size_t)n : 1, sizeof(*t->dev));
    t->path = calloc(n > 0 ? (size_t)n * (size_t)n : 1, 1);
    struct found **flat = calloc(n > 0 ? (size_t)n : 1, sizeof(*flat));
    if (t->dev == NULL || t->path == NULL || flat == NULL) {
        free(flat);
        rc = gx_fail(GX_ENOMEM, GX_SUB_TOPO, "out of memory describing %d devices", n);
        goto err_free_lists;
    }
    int at = 0;
    for (int k = 0; k < GX_TOPO_KIND_COUNT; k++) {
        t->kind_first[k] = at;
        t->kind_count[k] = lists[k].n;
        for (int i = 0; i < lists[k].n; i++) {
            lists[k].v[i].d.index = i;
            t->dev[at] = lists[k].v[i].d;
            flat[at++] = &lists[k].v[i];
        }
    }
    t->ndev = n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            t->path[i * n + j] = (unsigned char)(i == j ? GX_TOPO_PATH_SELF : classify_path(flat[i], flat[j]));
    free(flat);
    for (int k = 0; k < GX_TOPO_KIND_COUNT; k++)
        free(lists[k].v);
    t->hw = hw;
    snprintf(t->source, sizeof(t->source), "%s", file ? file : "probe");
    GX_INFO(GX_SUB_TOPO, "topology from %s: %d NUMA nodes, %d GPUs, %d RDMA NICs, %d Ethernet NICs",
            t->source, t->nnuma, t->kind_count[GX_TOPO_GPU], t->kind_count[GX_TOPO_RDMA_NIC],
            t->kind_count[GX_TOPO_ETH_NIC]);
    return GX_OK;

err_free_lists:
    for (int k = 0; k < GX_TOPO_KIND_COUNT; k++)
        free(lists[k].v);
err_destroy:
    hwloc_topology_destroy(hw);
    return rc;
}

void topo_discover_free(struct gx_topo *t)
{
    if (t->hw != NULL)
        hwloc_topology_destroy((hwloc_topology_t)t->hw);
    t->hw = NULL;
}

int topo_discover_export(const struct gx_topo *t, const char *path)
{
    if (hwloc_topology_export_xml((hwloc_topology_t)t->hw, path, 0) != 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_TOPO, "cannot write topology to %s: %m", path);
    return GX_OK;
}
