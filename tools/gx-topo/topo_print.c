/* topo_print.c - gx-topo output: text matrix, JSON, Graphviz dot. */
#include "topo_print.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The devices of the matrix: GPUs, RDMA NICs, Ethernet NICs. */
struct devlist {
    int n;
    struct gx_topo_device *d;
};

static struct devlist devices(const struct gx_topo *topo)
{
    struct devlist l = { 0, NULL };
    int total = 0;
    for (int k = 0; k < GX_TOPO_KIND_COUNT; k++)
        total += gx_topo_device_count(topo, (enum gx_topo_kind)k);
    l.d = calloc(total > 0 ? (size_t)total : 1, sizeof(*l.d));
    if (l.d == NULL)
        return l;
    for (int k = 0; k < GX_TOPO_KIND_COUNT; k++)
        for (int i = 0; i < gx_topo_device_count(topo, (enum gx_topo_kind)k); i++) {
            l.d[l.n].size = sizeof(l.d[l.n]);
            if (gx_topo_device_get(topo, (enum gx_topo_kind)k, i, &l.d[l.n]) == GX_OK)
                l.n++;
        }
    return l;
}

static enum gx_topo_path path(const struct gx_topo *topo, const struct gx_topo_device *a,
                              const struct gx_topo_device *b)
{
    enum gx_topo_path p = GX_TOPO_PATH_UNKNOWN;
    gx_topo_path_get(topo, a->kind, a->index, b->kind, b->index, &p);
    return p;
}

/* Nearest device of `kind` to d (not d itself); -1 when none. */
static int nearest(const struct gx_topo *topo, const struct devlist *l, const struct gx_topo_device *d,
                   enum gx_topo_kind kind, enum gx_topo_path *p_out)
{
    int best = -1;
    enum gx_topo_path bp = GX_TOPO_PATH_UNKNOWN;
    for (int i = 0; i < l->n; i++) {
        if (l->d[i].kind != kind || (l->d[i].kind == d->kind && l->d[i].index == d->index))
            continue;
        enum gx_topo_path p = path(topo, d, &l->d[i]);
        if (best < 0 || p < bp) {
            best = i;
            bp = p;
        }
    }
    *p_out = bp;
    return best;
}

static const char *nic_kind_for_nearest(const struct gx_topo *topo, enum gx_topo_kind *k)
{
    *k = gx_topo_device_count(topo, GX_TOPO_RDMA_NIC) > 0 ? GX_TOPO_RDMA_NIC : GX_TOPO_ETH_NIC;
    return gx_topo_kind_name(*k);
}

static int name_width(const struct devlist *l)
{
    int w = 7;
    for (int i = 0; i < l->n; i++)
        if ((int)strlen(l->d[i].name) + 1 > w)
            w = (int)strlen(l->d[i].name) + 1;
    return w;
}

void topo_print_matrix(FILE *out, const struct gx_topo *topo)
{
    struct devlist l = devices(topo);
    int w = name_width(&l);
    fprintf(out, "%-*s", w, "");
    for (int j = 0; j < l.n; j++)
        fprintf(out, "%-*s", w, l.d[j].name);
    fprintf(out, "%-18s%s\n", "CPU Affinity", "NUMA Affinity");
    for (int i = 0; i < l.n; i++) {
        fprintf(out, "%-*s", w, l.d[i].name);
        for (int j = 0; j < l.n; j++)
            fprintf(out, "%-*s", w, gx_topo_path_name(path(topo, &l.d[i], &l.d[j])));
        char numa[16];
        if (l.d[i].numa_node >= 0)
            snprintf(numa, sizeof(numa), "%d", l.d[i].numa_node);
        else
            snprintf(numa, sizeof(numa), "N/A");
        fprintf(out, "%-18s%s\n", l.d[i].cpuset, numa);
    }
    if (l.n == 0)
        fprintf(out, "(no GPU and no NIC found)\n");
    fprintf(out, "\nLegend:\n\n"
                 "  X    = Self\n"
                 "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
                 "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
                 "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
                 "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
                 "  PIX  = Connection traversing at most a single PCIe bridge\n\n");
    free(l.d);
}

void topo_print_text(FILE *out, const struct gx_topo *topo, int nranks, const struct gx_topo_placement *pl)
{
    struct devlist l = devices(topo);
    int w = name_width(&l);

    fprintf(out, "Topology: %s (%d NUMA node%s, CPUs %s)\n\n", gx_topo_source(topo), gx_topo_numa_count(topo),
            gx_topo_numa_count(topo) == 1 ? "" : "s",
            gx_topo_machine_cpuset(topo)[0] ? gx_topo_machine_cpuset(topo) : "unknown");
    topo_print_matrix(out, topo);

    fprintf(out, "Devices:\n\n");
    for (int i = 0; i < l.n; i++) {
        const struct gx_topo_device *d = &l.d[i];
        fprintf(out, "  %-*s %-4s %-13s", w, d->name, gx_topo_kind_name(d->kind), d->busid[0] ? d->busid : "-");
        if (d->netdev[0] && strcmp(d->netdev, d->name) != 0)
            fprintf(out, " netdev %s", d->netdev);
        if (d->link_gbps > 0)
            fprintf(out, " %g Gb/s", d->link_gbps);
        if (d->kind == GX_TOPO_RDMA_NIC && d->port_count > 1)
            fprintf(out, " %d ports", d->port_count);
        fprintf(out, "\n");
    }
    for (int i = 0; i < gx_topo_numa_count(topo); i++) {
        struct gx_topo_numa m = GX_TOPO_NUMA_INIT;
        if (gx_topo_numa_get(topo, i, &m) != GX_OK)
            continue;
        fprintf(out, "  NUMA node %d: CPUs %s", m.os_index, m.cpuset[0] ? m.cpuset : "?");
        if (m.memory_bytes)
            fprintf(out, ", %llu MiB", m.memory_bytes >> 20);
        unsigned dist;
        bool any = false;
        for (int j = 0; j < gx_topo_numa_count(topo); j++)
            if (gx_topo_numa_distance(topo, i, j, &dist) == GX_OK && dist) {
                fprintf(out, "%s%u", any ? " " : ", distances ", dist);
                any = true;
            }
        fprintf(out, "\n");
    }

    fprintf(out, "\nPlacement of %d local rank%s:\n\n", nranks, nranks == 1 ? "" : "s");
    fprintf(out, "  %-5s %-5s %-24s %-5s %-5s %s\n", "rank", "GPU", "NIC(s)", "path", "NUMA", "CPUs");
    for (int r = 0; r < nranks; r++) {
        char gpu[16], numa[16], nics[512] = "";
        snprintf(gpu, sizeof(gpu), pl[r].gpu >= 0 ? "%d" : "-", pl[r].gpu);
        snprintf(numa, sizeof(numa), pl[r].numa_node >= 0 ? "%d" : "N/A", pl[r].numa_node);
        size_t at = 0;
        for (int i = 0; i < pl[r].nic_count && at < sizeof(nics); i++)
            at += (size_t)snprintf(nics + at, sizeof(nics) - at, i ? ",%s" : "%s", pl[r].nic_names[i]);
        fprintf(out, "  %-5d %-5s %-24s %-5s %-5s %s\n", r, gpu, pl[r].nic_count ? nics : "none",
                gx_topo_path_name(pl[r].nic_path), numa, pl[r].cpuset[0] ? pl[r].cpuset : "-");
    }
    free(l.d);
}

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(out, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

void topo_print_json(FILE *out, const struct gx_topo *topo, int nranks, const struct gx_topo_placement *pl)
{
    struct devlist l = devices(topo);
    enum gx_topo_kind nic_kind;
    nic_kind_for_nearest(topo, &nic_kind);

    fprintf(out, "{\n  \"source\": ");
    json_str(out, gx_topo_source(topo));
    fprintf(out, ",\n  \"cpuset\": ");
    json_str(out, gx_topo_machine_cpuset(topo));
    fprintf(out, ",\n  \"numa\": [");
    int nn = gx_topo_numa_count(topo);
    for (int i = 0; i < nn; i++) {
        struct gx_topo_numa m = GX_TOPO_NUMA_INIT;
        gx_topo_numa_get(topo, i, &m);
        fprintf(out, "%s\n    {\"os_index\": %d, \"cpuset\": ", i ? "," : "", m.os_index);
        json_str(out, m.cpuset);
        fprintf(out, ", \"memory_bytes\": %llu, \"distances\": [", m.memory_bytes);
        for (int j = 0; j < nn; j++) {
            unsigned d = 0;
            gx_topo_numa_distance(topo, i, j, &d);
            fprintf(out, "%s%u", j ? ", " : "", d);
        }
        fprintf(out, "]}");
    }
    fprintf(out, "\n  ],\n  \"devices\": [");
    for (int i = 0; i < l.n; i++) {
        const struct gx_topo_device *d = &l.d[i];
        fprintf(out, "%s\n    {\"kind\": \"%s\", \"index\": %d, \"name\": ", i ? "," : "", gx_topo_kind_name(d->kind),
                d->index);
        json_str(out, d->name);
        fprintf(out, ", \"busid\": ");
        json_str(out, d->busid);
        fprintf(out, ", \"netdev\": ");
        json_str(out, d->netdev);
        fprintf(out, ", \"numa_node\": %d, \"cpuset\": ", d->numa_node);
        json_str(out, d->cpuset);
        fprintf(out, ", \"link_gbps\": %g, \"pci_gbytes\": %g, \"pci_id\": \"%04x:%04x\", \"pci_class\": \"%04x\"",
                d->link_gbps, d->pci_gbytes, d->vendor_id, d->device_id, d->class_id);
        /* GPUs: the nearest NIC; NICs: the nearest GPU. */
        enum gx_topo_kind want = d->kind == GX_TOPO_GPU ? nic_kind : GX_TOPO_GPU;
        enum gx_topo_path p;
        int ni = nearest(topo, &l, d, want, &p);
        fprintf(out, ", \"%s\": ", d->kind == GX_TOPO_GPU ? "nearest_nic" : "nearest_gpu");
        if (ni >= 0) {
            json_str(out, l.d[ni].name);
            fprintf(out, ", \"path\": \"%s\"", gx_topo_path_name(p));
        } else {
            fprintf(out, "null, \"path\": null");
        }
        fprintf(out, ", \"paths\": {");
        for (int j = 0; j < l.n; j++) {
            fprintf(out, "%s", j ? ", " : "");
            json_str(out, l.d[j].name);
            fprintf(out, ": \"%s\"", gx_topo_path_name(path(topo, d, &l.d[j])));
        }
        fprintf(out, "}}");
    }
    fprintf(out, "\n  ],\n  \"placement\": [");
    for (int r = 0; r < nranks; r++) {
        fprintf(out, "%s\n    {\"local_rank\": %d, \"gpu\": %d, \"nics\": [", r ? "," : "", r, pl[r].gpu);
        for (int i = 0; i < pl[r].nic_count; i++) {
            fprintf(out, "%s", i ? ", " : "");
            json_str(out, pl[r].nic_names[i]);
        }
        fprintf(out, "], \"path\": \"%s\", \"numa_node\": %d, \"cpuset\": ", gx_topo_path_name(pl[r].nic_path),
                pl[r].numa_node);
        json_str(out, pl[r].cpuset);
        fprintf(out, "}");
    }
    fprintf(out, "\n  ]\n}\n");
    free(l.d);
}

void topo_print_dot(FILE *out, const struct gx_topo *topo)
{
    struct devlist l = devices(topo);
    fprintf(out, "graph gx_topology {\n  node [shape=box];\n  label=\"%s\";\n", gx_topo_source(topo));
    for (int i = 0; i < gx_topo_numa_count(topo); i++) {
        struct gx_topo_numa m = GX_TOPO_NUMA_INIT;
        gx_topo_numa_get(topo, i, &m);
        fprintf(out, "  subgraph cluster_numa%d {\n    label=\"NUMA %d (CPUs %s)\";\n", m.os_index, m.os_index,
                m.cpuset);
        for (int j = 0; j < l.n; j++)
            if (l.d[j].numa_node == m.os_index)
                fprintf(out, "    \"%s\";\n", l.d[j].name);
        fprintf(out, "  }\n");
    }
    for (int j = 0; j < l.n; j++)
        if (l.d[j].numa_node < 0)
            fprintf(out, "  \"%s\" [style=dashed];\n", l.d[j].name);
    for (int i = 0; i < l.n; i++)
        for (int j = i + 1; j < l.n; j++) {
            enum gx_topo_path p = path(topo, &l.d[i], &l.d[j]);
            if (p == GX_TOPO_PATH_PIX || p == GX_TOPO_PATH_PXB || p == GX_TOPO_PATH_PHB)
                fprintf(out, "  \"%s\" -- \"%s\" [label=\"%s\"%s];\n", l.d[i].name, l.d[j].name,
                        gx_topo_path_name(p), p == GX_TOPO_PATH_PIX ? ", penwidth=3" : "");
        }
    fprintf(out, "}\n");
    free(l.d);
}
