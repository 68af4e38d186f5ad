/*
 * accept_node.c - node checks: each node's leader rank gathers the facts of
 * its machine (topology through gx_topo, the CPU frequency governor, huge
 * pages, versions), rank 0 judges them against the spec, node by node, and
 * measures the clock skew to every node leader.
 *
 * Owns the node facts and their verdicts; must not time the fabric.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "accept.h"

#define FACT_MAX_NICS 8
#define FACT_MAX_RANKS 8

struct node_facts {
    int valid;              /* sent by a node leader */
    char name[ACCEPT_NAME_MAX];
    int topo_ok;
    char topo_note[200];    /* where the topology came from, or why it failed */
    int gpus, rdma_nics, eth_nics;
    char gpu_list[160];
    int nic_count;          /* the NICs gx would use */
    char nic_names[FACT_MAX_NICS][GX_TOPO_NAME_MAX];
    double nic_gbps[FACT_MAX_NICS];
    int nplaced;
    char placement[FACT_MAX_RANKS][96];
    int worst_path;         /* enum gx_topo_path of the farthest rank->NIC path */
    int governor_cpus;      /* CPUs with a cpufreq governor; 0 = no cpufreq */
    char governors[64];     /* distinct governors, comma separated */
    int meminfo_ok;
    long hugepages_total, hugepages_free, hugepage_kb;
    char gx_version[32], kernel[96], os[96], driver[96];
};

static void read_line(const char *path, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    if (fgets(out, (int)len, f))
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

static void governor_facts(struct node_facts *f)
{
    for (int cpu = 0; cpu < 4096; cpu++) {
        char path[96], gov[32];
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor",
                 cpu);
        read_line(path, gov, sizeof(gov));
        if (!gov[0]) {
            snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d", cpu);
            if (access(path, F_OK) != 0)
                break; /* past the last CPU */
            continue;
        }
        f->governor_cpus++;
        char padded[80];
        snprintf(padded, sizeof(padded), ",%s,", f->governors);
        char want[40];
        snprintf(want, sizeof(want), ",%s,", gov);
        size_t n = strlen(f->governors);
        if (!strstr(padded, want) && n + strlen(gov) + 2 < sizeof(f->governors))
            snprintf(f->governors + n, sizeof(f->governors) - n, "%s%s", n ? "," : "", gov);
    }
}

static void meminfo_facts(struct node_facts *f)
{
    FILE *m = fopen("/proc/meminfo", "re");
    if (!m)
        return;
    char line[128];
    while (fgets(line, sizeof(line), m)) {
        long v;
        if (sscanf(line, "HugePages_Total: %ld", &v) == 1)
            f->hugepages_total = v, f->meminfo_ok = 1;
        else if (sscanf(line, "HugePages_Free: %ld", &v) == 1)
            f->hugepages_free = v;
        else if (sscanf(line, "Hugepagesize: %ld kB", &v) == 1)
            f->hugepage_kb = v;
    }
    fclose(m);
}

static void version_facts(struct node_facts *f)
{
    struct utsname u;
    snprintf(f->gx_version, sizeof(f->gx_version), "%s", gx_version());
    if (uname(&u) == 0)
        snprintf(f->kernel, sizeof(f->kernel), "%s %s", u.sysname, u.release);
    FILE *o = fopen("/etc/os-release", "re");
    char line[160];
    while (o && fgets(line, sizeof(line), o))
        if (strncmp(line, "PRETTY_NAME=", 12) == 0) {
            char *s = line + 12;
            s += *s == '"';
            s[strcspn(s, "\"\n")] = '\0';
            snprintf(f->os, sizeof(f->os), "%s", s);
        }
    if (o)
        fclose(o);
    char nv[96], mlx[48];
    read_line("/sys/module/nvidia/version", nv, sizeof(nv));
    read_line("/sys/module/mlx5_core/version", mlx, sizeof(mlx));
    snprintf(f->driver, sizeof(f->driver), "nvidia %s, mlx5_core %s", nv[0] ? nv : "none",
             mlx[0] ? mlx : "none");
}

static void topology_facts(struct node_facts *f, const struct accept_node_spec *ns,
                           int local_size)
{
    struct gx_topo *topo;
    const char *xml = ns->topology_xml[0] ? ns->topology_xml : NULL;
    if (gx_topo_load(xml, &topo) != GX_OK) {
        snprintf(f->topo_note, sizeof(f->topo_note), "%s", gx_last_error());
        return;
    }
    f->topo_ok = 1;
    snprintf(f->topo_note, sizeof(f->topo_note), "topology from %s", gx_topo_source(topo));
    f->gpus = gx_topo_device_count(topo, GX_TOPO_GPU);
    f->rdma_nics = gx_topo_device_count(topo, GX_TOPO_RDMA_NIC);
    f->eth_nics = gx_topo_device_count(topo, GX_TOPO_ETH_NIC);
    size_t n = 0;
    for (int i = 0; i < f->gpus && n < sizeof(f->gpu_list) - 1; i++) {
        struct gx_topo_device d = GX_TOPO_DEVICE_INIT;
        if (gx_topo_device_get(topo, GX_TOPO_GPU, i, &d) == GX_OK)
            n += (size_t)snprintf(f->gpu_list + n, sizeof(f->gpu_list) - n, "%s%s %s",
                                  n ? ", " : "", d.name, d.busid);
    }
    enum gx_topo_kind kind = f->rdma_nics ? GX_TOPO_RDMA_NIC : GX_TOPO_ETH_NIC;
    f->nic_count = f->rdma_nics ? f->rdma_nics : f->eth_nics;
    for (int i = 0; i < f->nic_count && i < FACT_MAX_NICS; i++) {
        struct gx_topo_device d = GX_TOPO_DEVICE_INIT;
        if (gx_topo_device_get(topo, kind, i, &d) == GX_OK) {
            snprintf(f->nic_names[i], sizeof(f->nic_names[i]), "%s", d.name);
            f->nic_gbps[i] = d.link_gbps;
        }
    }
    int nr = local_size < FACT_MAX_RANKS ? local_size : FACT_MAX_RANKS;
    struct gx_topo_placement pl[FACT_MAX_RANKS];
    for (int r = 0; r < nr; r++)
        pl[r] = (struct gx_topo_placement)GX_TOPO_PLACEMENT_INIT;
    f->worst_path = GX_TOPO_PATH_SELF;
    if (gx_topo_place(topo, nr, NULL, NULL, pl) == GX_OK) {
        f->nplaced = nr;
        for (int r = 0; r < nr; r++) {
            char gpu[16] = "no GPU";
            if (pl[r].gpu >= 0)
                snprintf(gpu, sizeof(gpu), "GPU%d", pl[r].gpu);
            snprintf(f->placement[r], sizeof(f->placement[r]), "rank %d: %s -> %s (%s)", r, gpu,
                     pl[r].nic_count ? pl[r].nic_names[0] : "no NIC",
                     gx_topo_path_name(pl[r].nic_path));
            if (pl[r].nic_count && (int)pl[r].nic_path > f->worst_path)
                f->worst_path = (int)pl[r].nic_path;
        }
    } else {
        snprintf(f->placement[0], sizeof(f->placement[0]), "placement failed: %.70s",
                 gx_last_error());
    }
    gx_topo_free(topo);
}

static int path_rank(const char *name)
{
    static const char *const names[] = { "X", "PIX", "PXB", "PHB", "NODE", "SYS" };
    for (int i = 0; i < 6; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return GX_TOPO_PATH_UNKNOWN;
}

static void judge_topology(struct accept_results *r, const struct node_facts *f,
                           const struct accept_node_spec *ns)
{
    const char *who = f->name;
    if (!f->topo_ok) {
        accept_add(r, "node", "topology", who, ACCEPT_FAIL, "cannot read the topology: %s",
                   f->topo_note);
        return;
    }
    accept_add(r, "node", "gpu_count", who, f->gpus == (int)ns->gpus ? ACCEPT_PASS : ACCEPT_FAIL,
               "found %d GPU%s%s%s%s, spec wants %.0f (%s)", f->gpus, f->gpus == 1 ? "" : "s",
               f->gpus ? " (" : "", f->gpu_list, f->gpus ? ")" : "", ns->gpus, f->topo_note);
    char nics[FACT_MAX_NICS * 80] = "";
    size_t n = 0;
    for (int i = 0; i < f->nic_count && i < FACT_MAX_NICS; i++)
        n += (size_t)snprintf(nics + n, sizeof(nics) - n, "%s%s %.0f Gb/s", n ? ", " : "",
                              f->nic_names[i], f->nic_gbps[i]);
    accept_add(r, "node", "nic_count", who,
               f->nic_count == (int)ns->nics ? ACCEPT_PASS : ACCEPT_FAIL,
               "found %d %s NIC%s%s%s%s, spec wants %.0f (%s)", f->nic_count,
               f->rdma_nics ? "RDMA" : "Ethernet", f->nic_count == 1 ? "" : "s",
               f->nic_count ? " (" : "", nics, f->nic_count ? ")" : "", ns->nics, f->topo_note);
    if (ns->nic_min_gbps == ACCEPT_UNSET || f->nic_count == 0) {
        accept_add(r, "node", "nic_rate", who, ACCEPT_SKIP, "%s",
                   f->nic_count ? "spec gives no node.nic_min_gbps" : "no NIC to check");
    } else {
        int bad = 0, unknown = 0;
        for (int i = 0; i < f->nic_count && i < FACT_MAX_NICS; i++) {
            unknown += f->nic_gbps[i] <= 0;
            bad += f->nic_gbps[i] > 0 && f->nic_gbps[i] < ns->nic_min_gbps;
        }
        accept_add(r, "node", "nic_rate", who,
                   bad ? ACCEPT_FAIL : unknown ? ACCEPT_SKIP : ACCEPT_PASS,
                   "%s; spec wants at least %g Gb/s%s", nics, ns->nic_min_gbps,
                   unknown ? " (0 = rate unknown)" : "");
    }
    char pl[FACT_MAX_RANKS * 100] = "";
    n = 0;
    for (int i = 0; i < f->nplaced; i++)
        n += (size_t)snprintf(pl + n, sizeof(pl) - n, "%s%s", n ? "; " : "", f->placement[i]);
    if (!f->nplaced)
        snprintf(pl, sizeof(pl), "%s", f->placement[0]);
    if (!ns->max_nic_path[0])
        accept_add(r, "node", "placement", who, f->nplaced ? ACCEPT_PASS : ACCEPT_FAIL,
                   "%s (spec gives no node.max_nic_path)", pl);
    else
        accept_add(r, "node", "placement", who,
                   f->nplaced && f->worst_path <= path_rank(ns->max_nic_path) ? ACCEPT_PASS
                                                                             : ACCEPT_FAIL,
                   "%s; spec allows up to %s", pl, ns->max_nic_path);
}

static void judge_node(struct accept_results *r, const struct node_facts *f,
                       const struct accept_node_spec *ns)
{
    judge_topology(r, f, ns);
    const char *who = f->name;
    if (!ns->cpu_governor[0])
        accept_add(r, "node", "cpu_governor", who, ACCEPT_SKIP, "not in the spec; found %s",
                   f->governor_cpus ? f->governors : "no cpufreq");
    else if (!f->governor_cpus)
        accept_add(r, "node", "cpu_governor", who, ACCEPT_SKIP,
                   "no cpufreq governor in sysfs (a VM or a fixed-frequency CPU); spec wants %s",
                   ns->cpu_governor);
    else
        accept_add(r, "node", "cpu_governor", who,
                   strcmp(f->governors, ns->cpu_governor) == 0 ? ACCEPT_PASS : ACCEPT_FAIL,
                   "%d CPUs run %s; spec wants %s", f->governor_cpus, f->governors,
                   ns->cpu_governor);
    if (!ns->dpdk) {
        accept_add(r, "node", "hugepages", who, ACCEPT_SKIP, "dpdk not requested (%ld x %ld kB "
                   "huge pages, %ld free)", f->hugepages_total, f->hugepage_kb,
                   f->hugepages_free);
    } else {
        double free_mb = (double)f->hugepages_free * (double)f->hugepage_kb / 1024.0;
        double want = ns->hugepages_min_mb == ACCEPT_UNSET ? 1 : ns->hugepages_min_mb;
        accept_add(r, "node", "hugepages", who,
                   f->meminfo_ok && free_mb >= want ? ACCEPT_PASS : ACCEPT_FAIL,
                   "%ld x %ld kB huge pages, %ld free = %.0f MB; dpdk wants at least %.0f MB",
                   f->hugepages_total, f->hugepage_kb, f->hugepages_free, free_mb, want);
    }
    accept_add(r, "node", "versions", who, ACCEPT_PASS, "gx %s; %s; %s; drivers: %s",
               f->gx_version, f->kernel, f->os[0] ? f->os : "os unknown", f->driver);
}

/* The odd one out of a per-node string (gx version, kernel) fails, named. */
static void judge_consistency(struct accept_results *r, const struct node_facts *all, int n,
                              size_t field_off, const char *what)
{
    const char *ref = (const char *)&all[0] + field_off;
    int agree = 0;
    for (int i = 0; i < n; i++)
        agree += strcmp((const char *)&all[i] + field_off, ref) == 0;
    if (agree * 2 < n) /* the first node is the odd one: compare against the second */
        ref = (const char *)&all[1] + field_off;
    int odd = 0;
    for (int i = 0; i < n; i++) {
        const char *v = (const char *)&all[i] + field_off;
        if (strcmp(v, ref) != 0) {
            accept_add(r, "node", what, all[i].name, ACCEPT_FAIL, "%s here, %s on most nodes", v,
                       ref);
            odd++;
        }
    }
    if (!odd)
        accept_add(r, "node", what, "all nodes", ACCEPT_PASS, "%s on all %d nodes", ref, n);
}

int accept_node_checks(struct accept_ctx *x)
{
    struct node_facts mine;
    memset(&mine, 0, sizeof(mine));
    if (x->local_rank == 0) {
        const struct accept_node_spec *ns = accept_spec_for_node(&x->spec, x->node_name);
        mine.valid = 1;
        snprintf(mine.name, sizeof(mine.name), "%s", x->node_name);
        topology_facts(&mine, ns, x->local_size);
        governor_facts(&mine);
        meminfo_facts(&mine);
        version_facts(&mine);
    }
    struct node_facts *all = x->rank == 0 ? calloc((size_t)x->nranks, sizeof(*all)) : NULL;
    if (x->rank == 0 && !all)
        return GX_ENOMEM;
    int rc = accept_gather(x, &mine, all, sizeof(mine));
    if (rc || x->rank != 0)
        return rc;
    struct accept_results *r = x->res;
    struct node_facts *nodes = calloc((size_t)x->nnodes, sizeof(*nodes));
    if (!nodes) {
        free(all);
        return GX_ENOMEM;
    }
    for (int k = 0; k < x->nnodes; k++)
        nodes[k] = all[x->leader_of_node[k]];
    if (x->spec.nodes != ACCEPT_UNSET)
        accept_add(r, "node", "node_count", "job",
                   x->nnodes == (int)x->spec.nodes ? ACCEPT_PASS : ACCEPT_FAIL,
                   "%d nodes in the job, spec wants %.0f", x->nnodes, x->spec.nodes);
    for (int k = 0; k < x->nnodes; k++) {
        int local = 0;
        for (int q = 0; q < x->nranks; q++)
            local += x->node_of_rank[q] == k;
        if (x->spec.ranks_per_node != ACCEPT_UNSET)
            accept_add(r, "node", "ranks", nodes[k].name,
                       local == (int)x->spec.ranks_per_node ? ACCEPT_PASS : ACCEPT_FAIL,
                       "%d ranks on this node, spec wants %.0f", local, x->spec.ranks_per_node);
        judge_node(r, &nodes[k], accept_spec_for_node(&x->spec, nodes[k].name));
    }
    for (int i = 0; i < x->spec.noverrides; i++) {
        int found = 0;
        for (int k = 0; k < x->nnodes; k++)
            found |= strcmp(nodes[k].name, x->spec.overrides[i].node) == 0;
        if (!found)
            accept_add(r, "node", "override", x->spec.overrides[i].node, ACCEPT_FAIL,
                       "node_overrides names a node that is not in the job");
    }
    judge_consistency(r, nodes, x->nnodes, offsetof(struct node_facts, gx_version), "gx_version");
    judge_consistency(r, nodes, x->nnodes, offsetof(struct node_facts, kernel), "kernel");
    free(nodes);
    free(all);
    return 0;
}

static double realtime_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Rank 0 sends its clock to each node leader in turn; the leader answers with
 * its own. offset = theirs - (sent + received) / 2, best of 5 (smallest round trip). */
int accept_clock_check(struct accept_ctx *x)
{
    int rc;
    for (int k = 1; k < x->nnodes; k++) {
        int peer = x->leader_of_node[k];
        if (x->rank != 0 && x->rank != peer)
            continue;
        double best_rtt = 1e9, best_off = 0;
        for (int i = 0; i < 5; i++) {
            double t[2] = { 0, 0 };
            if (x->rank == 0) {
                double t0 = realtime_s();
                if ((rc = gx_send(x->comm, &t0, 1, GX_FLOAT64, peer, ACCEPT_TAG_CLOCK)) ||
                    (rc = gx_recv(x->comm, t, 2, GX_FLOAT64, peer, ACCEPT_TAG_CLOCK, NULL)))
                    return rc;
                double t1 = realtime_s();
                if (t1 - t0 < best_rtt) {
                    best_rtt = t1 - t0;
                    best_off = t[1] - (t0 + t1) / 2;
                }
            } else {
                if ((rc = gx_recv(x->comm, t, 1, GX_FLOAT64, 0, ACCEPT_TAG_CLOCK, NULL)))
                    return rc;
                t[1] = realtime_s();
                if ((rc = gx_send(x->comm, t, 2, GX_FLOAT64, 0, ACCEPT_TAG_CLOCK)))
                    return rc;
            }
        }
        if (x->rank == 0) {
            double skew_ms = best_off * 1e3;
            double abs_ms = skew_ms < 0 ? -skew_ms : skew_ms;
            accept_add(x->res, "node", "clock_skew", x->res->node_names[k],
                       abs_ms <= x->spec.max_clock_skew_ms ? ACCEPT_PASS : ACCEPT_FAIL,
                       "%+.3f ms against %s (round trip %.0f us); spec allows %g ms", skew_ms,
                       x->res->node_names[0], best_rtt * 1e6, x->spec.max_clock_skew_ms);
        }
    }
    if (x->rank == 0 && x->nnodes == 1)
        accept_add(x->res, "node", "clock_skew", x->res->node_names[0], ACCEPT_SKIP,
                   "one node: no other clock to compare");
    return 0;
}
