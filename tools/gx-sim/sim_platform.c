/*
 * sim_platform.c - the SimGrid platform file of gx-sim's machine
 * (sim_platform.h).
 */
#include <stdint.h>
#include <stdlib.h>

#include "collectives/schedule/schedule.h"
#include "tools/gx-sim/sim_platform.h"

int sim_node_of(const struct sim_machine *m, int r)
{
    if (!m->layout_nodes)
        return r / m->gpus_per_node;
    int k = 0;
    while (k < m->layout_nodes - 1 && r >= m->layout[k])
        r -= m->layout[k++];
    return k;
}

int sim_node_first(const struct sim_machine *m, int k)
{
    if (!m->layout_nodes)
        return k * m->gpus_per_node;
    int first = 0;
    for (int i = 0; i < k && i < m->layout_nodes; i++)
        first += m->layout[i];
    return first;
}

int sim_local_of(const struct sim_machine *m, int r)
{
    return r - sim_node_first(m, sim_node_of(m, r));
}

int sim_nodes_of(const struct sim_machine *m, int n)
{
    return m->layout_nodes ? m->layout_nodes : (n + m->gpus_per_node - 1) / m->gpus_per_node;
}

int sim_nics(const struct sim_machine *m)
{
    return m->nics_per_node > 0 ? m->nics_per_node : m->gpus_per_node;
}

static int node_of(const struct sim_machine *m, int r) { return sim_node_of(m, r); }
static int rail_of(const struct sim_machine *m, int r) { return sim_local_of(m, r) % sim_nics(m); }
static int nic_of(const struct sim_machine *m, int r)
{
    return node_of(m, r) * sim_nics(m) + rail_of(m, r);
}

/* Leaf switches are numbered group-major: group * NICs per node + rail. */
static int leaf_of(const struct sim_machine *m, int r)
{
    return node_of(m, r) / m->nodes_per_leaf * sim_nics(m) + rail_of(m, r);
}

void sim_platform_path(const struct sim_machine *m, int a, int b, double *lat_s, double *bytes_s)
{
    if (node_of(m, a) == node_of(m, b)) {
        *lat_s = m->nvlink_lat_us * 1e-6;
        *bytes_s = m->nvlink_gbps * 1e9 / 8;
        return;
    }
    *lat_s = (m->nic_lat_us + (leaf_of(m, a) != leaf_of(m, b) ? m->spine_lat_us : 0)) * 1e-6;
    *bytes_s = m->nic_gbps * 1e9 / 8;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The (sender, receiver) pairs of the plan's sends, sorted and unique. */
static uint64_t *plan_pairs(const struct sim_plan *p, size_t *count)
{
    size_t n = 0, cap = 1024;
    uint64_t *pairs = malloc(cap * sizeof(*pairs));
    for (int r = 0; pairs && r < p->nranks; r++) {
        const struct sim_rank_plan *rp = &p->rank[r];
        for (int i = 0; i < rp->nsteps; i++) {
            if (rp->steps[i].kind != CS_SEND || rp->steps[i].peer == r)
                continue;
            if (n == cap) {
                uint64_t *more = realloc(pairs, 2 * cap * sizeof(*pairs));
                if (!more) {
                    free(pairs);
                    return NULL;
                }
                pairs = more, cap *= 2;
            }
            pairs[n++] = (uint64_t)r << 32 | (uint32_t)rp->steps[i].peer;
        }
        /* Keep the list short: a ring's thousands of sends are one pair. */
        if (n > cap / 2) {
            qsort(pairs, n, sizeof(*pairs), cmp_u64);
            size_t u = 0;
            for (size_t k = 0; k < n; k++)
                if (!u || pairs[u - 1] != pairs[k])
                    pairs[u++] = pairs[k];
            n = u;
        }
    }
    if (!pairs)
        return NULL;
    qsort(pairs, n, sizeof(*pairs), cmp_u64);
    size_t u = 0;
    for (size_t k = 0; k < n; k++)
        if (!u || pairs[u - 1] != pairs[k])
            pairs[u++] = pairs[k];
    *count = u;
    return pairs;
}

/* Links carry no latency: the engine adds a pair's latency at the receiver
 * (sim_engine.c), so messages of one pair follow each other without gaps. */
static void write_link(FILE *f, const char *prefix, int id, double bytes_s, double lat_s)
{
    lat_s = 0;
    fprintf(f, "  <link id=\"%s%d\" bandwidth=\"%.6gBps\" latency=\"%.6gs\" "
            "sharing_policy=\"SPLITDUPLEX\"/>\n", prefix, id, bytes_s, lat_s);
}

static void write_route(FILE *f, const struct sim_machine *m, int a, int b)
{
    fprintf(f, "  <route src=\"g%d\" dst=\"g%d\" symmetrical=\"NO\">", a, b);
    if (node_of(m, a) == node_of(m, b)) {
        fprintf(f, "<link_ctn id=\"nvl%d\" direction=\"UP\"/><link_ctn id=\"nvl%d\" "
                "direction=\"DOWN\"/>", a, b);
    } else {
        fprintf(f, "<link_ctn id=\"nic%d\" direction=\"UP\"/>", nic_of(m, a));
        if (leaf_of(m, a) != leaf_of(m, b))
            fprintf(f, "<link_ctn id=\"up%d\" direction=\"UP\"/><link_ctn id=\"up%d\" "
                    "direction=\"DOWN\"/>", leaf_of(m, a), leaf_of(m, b));
        fprintf(f, "<link_ctn id=\"nic%d\" direction=\"DOWN\"/>", nic_of(m, b));
    }
    fprintf(f, "</route>\n");
}

int sim_platform_write(FILE *f, const struct sim_machine *m, const struct sim_plan *plan)
{
    size_t npairs = 0;
    uint64_t *pairs = plan_pairs(plan, &npairs);
    if (!pairs)
        return -1;
    int n = plan->nranks;
    int nodes = sim_nodes_of(m, n);
    int groups = (nodes + m->nodes_per_leaf - 1) / m->nodes_per_leaf;
    int leaves = groups * sim_nics(m);
    double nic = m->nic_gbps * 1e9 / 8, nvl = m->nvlink_gbps * 1e9 / 8;
    fprintf(f, "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM "
            "\"https://simgrid.org/simgrid.dtd\">\n<platform version=\"4.1\">\n"
            "<zone id=\"gx-sim\" routing=\"Full\">\n");
    for (int r = 0; r < n; r++)
        fprintf(f, "  <host id=\"g%d\" speed=\"%.6gf\"/>\n", r, m->mem_gbytes * 1e9);
    for (int r = 0; r < n; r++)
        write_link(f, "nvl", r, nvl, m->nvlink_lat_us * 1e-6 / 2);
    for (int k = 0; k < nodes * sim_nics(m); k++)
        write_link(f, "nic", k, nic, m->nic_lat_us * 1e-6 / 2);
    for (int l = 0; l < leaves; l++)
        write_link(f, "up", l, nic * m->nodes_per_leaf / m->oversub, m->spine_lat_us * 1e-6 / 2);
    for (size_t k = 0; k < npairs; k++)
        write_route(f, m, (int)(pairs[k] >> 32), (int)(uint32_t)pairs[k]);
    fprintf(f, "</zone>\n</platform>\n");
    free(pairs);
    return ferror(f) ? -1 : 0;
}
