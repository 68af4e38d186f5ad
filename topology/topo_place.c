/*
 * topo_place.c - choosing each local rank's NIC(s), NUMA node and CPUs.
 *
 * Rules (docs/topology.md explains them to users):
 *  1. Candidate NICs are the RDMA NICs passing GX_IB_HCA; with no RDMA NIC
 *     on the machine, the Ethernet NICs.
 *  2. Each rank has a home NUMA node: its GPU's, or for a CPU-only rank the
 *     node given by spreading the ranks in blocks over the NUMA nodes.
 *  3. Ranks sharing a home node share the NICs local to that node, evenly:
 *     every such NIC gets floor(k/m) or ceil(k/m) of the k ranks (so no NIC
 *     is shared while another sits idle), and among the balanced assignments
 *     the one with the nearest paths wins (an optimal assignment, computed
 *     with the Hungarian method). Ties go to rank i <-> NIC i order.
 *  4. Ranks whose node has no NIC take the least loaded, then nearest NIC.
 *  5. A NIC still idle goes to the rank with the fewest NICs for which it is
 *     no farther than that rank's first NIC (extra rails).
 *  6. CPUs: the home NUMA node's CPUs; a GPU with unknown locality (a VM
 *     without NUMA information) gets the CPUs hwloc attaches it to.
 */
#include "topology/topo.h"
#include "topology/topo_internal.h"

#include "common/log.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Assignment cost, compared lexicographically through the weights: first
 * the sum of path classes, then earlier ranks keep nearer NICs (a later
 * rank is the one moved when a NIC is over-subscribed), then rank i pairs
 * with NIC i. Exact for up to 64 ranks and NICs per NUMA node. */
#define COST_CLASS 1000000000LL
#define COST_ORDER 4096LL
#define COST_MANDATORY 1000000000000000LL

struct place_ctx {
    const struct gx_topo *t;
    int n;                 /* ranks */
    const int *gpu;        /* per rank, -1 none */
    int *home;             /* per rank: NUMA os index or -1 */
    enum gx_topo_kind kind;
    int m;                 /* candidate NICs */
    int *nic;              /* candidate NIC indices (of kind) */
    int *port;             /* port per candidate */
    int *load;             /* ranks per candidate */
};

static enum gx_topo_path rank_nic_path(const struct place_ctx *c, int r, int ci)
{
    const struct gx_topo_device *d = topo_dev(c->t, c->kind, c->nic[ci]);
    if (c->gpu[r] >= 0)
        return topo_path_of(c->t, GX_TOPO_GPU, c->gpu[r], c->kind, c->nic[ci]);
    return (c->home[r] >= 0 && d->numa_node == c->home[r]) ? GX_TOPO_PATH_NODE : GX_TOPO_PATH_SYS;
}

static long long tie_cost(int row_pos, int nic_pos, int m)
{
    return (long long)(((nic_pos - row_pos) % m + m) % m);
}

/*
 * Minimum-cost assignment of n rows to m >= n columns (Hungarian method with
 * potentials, O(n^2 m)). a is row-major n x m; col_of_row receives the
 * column of each row.
 */
static int hungarian(int n, int m, const long long *a, int *col_of_row)
{
    const long long inf = (long long)4e18;
    long long *u = calloc((size_t)n + 1, sizeof(*u));
    long long *v = calloc((size_t)m + 1, sizeof(*v));
    long long *minv = calloc((size_t)m + 1, sizeof(*minv));
    int *p = calloc((size_t)m + 1, sizeof(*p));
    int *way = calloc((size_t)m + 1, sizeof(*way));
    bool *used = calloc((size_t)m + 1, sizeof(*used));
    int rc = GX_OK;
    if (!u || !v || !minv || !p || !way || !used) {
        rc = gx_fail(GX_ENOMEM, GX_SUB_TOPO, "out of memory in placement");
        goto out;
    }
    for (int i = 1; i <= n; i++) {
        p[0] = i;
        int j0 = 0;
        for (int j = 0; j <= m; j++) {
            minv[j] = inf;
            used[j] = false;
        }
        do {
            used[j0] = true;
            int i0 = p[j0], j1 = 0;
            long long delta = inf;
            for (int j = 1; j <= m; j++) {
                if (used[j])
                    continue;
                long long cur = a[(size_t)(i0 - 1) * (size_t)m + (size_t)(j - 1)] - u[i0] - v[j];
                if (cur < minv[j]) {
                    minv[j] = cur;
                    way[j] = j0;
                }
                if (minv[j] < delta) {
                    delta = minv[j];
                    j1 = j;
                }
            }
            for (int j = 0; j <= m; j++) {
                if (used[j]) {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
        } while (p[j0] != 0);
        do {
            int j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
        } while (j0 != 0);
    }
    for (int j = 1; j <= m; j++)
        if (p[j] != 0)
            col_of_row[p[j] - 1] = j - 1;
out:
    free(u);
    free(v);
    free(minv);
    free(p);
    free(way);
    free(used);
    return rc;
}

/* Rule 3 for the k ranks `rows` sharing the local candidates `cand` (mc). */
static int assign_balanced(struct place_ctx *c, const int *rows, int k, const int *cand, int mc, int *primary)
{
    if (mc == 1) {
        /* One candidate: every row gets it, as the assignment below would
         * (k columns, all of that NIC), without its O(k^3) cost: 256 ranks
         * on a one-NIC node took 75 ms of CPU per rank, twice at init. */
        for (int i = 0; i < k; i++)
            primary[rows[i]] = cand[0];
        c->load[cand[0]] += k;
        return GX_OK;
    }
    int q = k / mc, rem = k % mc;
    int per_nic = q + (rem ? 1 : 0);
    int cols = mc * per_nic;
    long long *a = calloc((size_t)k * (size_t)cols, sizeof(*a));
    int *col_of_row = calloc((size_t)k, sizeof(*col_of_row));
    int rc = GX_OK;
    if (a == NULL || col_of_row == NULL) {
        rc = gx_fail(GX_ENOMEM, GX_SUB_TOPO, "out of memory in placement");
        goto out;
    }
    for (int i = 0; i < k; i++)
        for (int ni = 0; ni < mc; ni++) {
            long long cls = rank_nic_path(c, rows[i], cand[ni]);
            long long cost = COST_CLASS * cls + COST_ORDER * cls * (k - i) + tie_cost(i, ni, mc);
            for (int s = 0; s < per_nic; s++)
                a[(size_t)i * (size_t)cols + (size_t)(ni * per_nic + s)] = cost - (s < q ? COST_MANDATORY : 0);
        }
    rc = hungarian(k, cols, a, col_of_row);
    if (rc == GX_OK)
        for (int i = 0; i < k; i++) {
            int ci = cand[col_of_row[i] / per_nic];
            primary[rows[i]] = ci;
            c->load[ci]++;
        }
out:
    free(a);
    free(col_of_row);
    return rc;
}

static int list_nics(const struct gx_topo *t, enum gx_topo_kind kind, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < t->kind_count[kind] && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", topo_dev(t, kind, i)->name);
    if (t->kind_count[kind] == 0)
        snprintf(buf, len, "none");
    return 0;
}

/* Rule 1: the candidate NICs. */
static int pick_candidates(struct place_ctx *c, const char *spec)
{
    const struct gx_topo *t = c->t;
    c->m = 0;
    if (t->kind_count[GX_TOPO_RDMA_NIC] > 0) {
        c->kind = GX_TOPO_RDMA_NIC;
        for (int i = 0; i < t->kind_count[GX_TOPO_RDMA_NIC]; i++) {
            const struct gx_topo_device *d = topo_dev(t, GX_TOPO_RDMA_NIC, i);
            for (int p = 1; p <= d->port_count; p++)
                if (gx_topo_hca_filter_match(spec, d->name, p)) {
                    c->nic[c->m] = i;
                    c->port[c->m++] = p;
                    break;
                }
        }
        if (c->m == 0) {
            char names[1024];
            list_nics(t, GX_TOPO_RDMA_NIC, names, sizeof(names));
            return gx_fail(GX_EINVAL, GX_SUB_TOPO,
                           "GX_IB_HCA=%s matches none of the RDMA devices found in %s: %s", spec,
                           t->source, names);
        }
        return GX_OK;
    }
    if (spec != NULL && spec[0] != '\0')
        GX_INFO(GX_SUB_TOPO, "GX_IB_HCA=%s ignored for placement: %s shows no RDMA device", spec, t->source);
    c->kind = GX_TOPO_ETH_NIC;
    for (int i = 0; i < t->kind_count[GX_TOPO_ETH_NIC]; i++) {
        c->nic[c->m] = i;
        c->port[c->m++] = 0;
    }
    return GX_OK;
}

static void fill_cpuset(const struct place_ctx *c, int r, struct gx_topo_placement *pl)
{
    const struct gx_topo *t = c->t;
    int ni = c->home[r] >= 0 ? topo_numa_by_os_index(t, c->home[r]) : -1;
    pl->numa_node = c->home[r];
    if (ni >= 0)
        snprintf(pl->cpuset, sizeof(pl->cpuset), "%s", t->numa[ni].cpuset);
    else if (c->gpu[r] >= 0)
        snprintf(pl->cpuset, sizeof(pl->cpuset), "%s", topo_dev(t, GX_TOPO_GPU, c->gpu[r])->cpuset);
    else
        snprintf(pl->cpuset, sizeof(pl->cpuset), "%s", t->machine_cpuset);
}

static int place_all(struct place_ctx *c, const char *spec, struct gx_topo_placement *out)
{
    const struct gx_topo *t = c->t;
    int n = c->n, rc;
    int *primary = calloc((size_t)n, sizeof(int));
    int *rows = calloc((size_t)n, sizeof(int));
    /* c->nic has room for every NIC of the machine; so does cand. */
    int *cand = calloc((size_t)(t->kind_count[GX_TOPO_RDMA_NIC] + t->kind_count[GX_TOPO_ETH_NIC]) + 1, sizeof(int));
    bool *done = calloc((size_t)n, sizeof(bool));
    if (!primary || !rows || !cand || !done) {
        rc = gx_fail(GX_ENOMEM, GX_SUB_TOPO, "out of memory in placement");
        goto out;
    }
    if ((rc = pick_candidates(c, spec)) != GX_OK)
        goto out;

    /* Rule 2: home NUMA nodes. */
    for (int r = 0; r < n; r++) {
        primary[r] = -1;
        if (c->gpu[r] >= 0)
            c->home[r] = topo_dev(t, GX_TOPO_GPU, c->gpu[r])->numa_node;
        else
            c->home[r] = t->nnuma > 0 ? t->numa[(int)((long long)r * t->nnuma / n)].os_index : -1;
    }

    /* Rule 3: balanced, nearest assignment within each home node. */
    for (int r = 0; r < n && c->m > 0; r++) {
        if (done[r])
            continue;
        int k = 0, mc = 0;
        for (int s = r; s < n; s++)
            if (!done[s] && c->home[s] == c->home[r]) {
                rows[k++] = s;
                done[s] = true;
            }
        for (int ci = 0; ci < c->m; ci++)
            if (topo_dev(t, c->kind, c->nic[ci])->numa_node == c->home[r])
                cand[mc++] = ci;
        if (mc > 0 && (rc = assign_balanced(c, rows, k, cand, mc, primary)) != GX_OK)
            goto out;
    }

    /* Rule 4: the rest take the least loaded, then nearest NIC. */
    for (int r = 0; r < n && c->m > 0; r++) {
        if (primary[r] >= 0)
            continue;
        int best = -1;
        long long best_key = 0;
        for (int ci = 0; ci < c->m; ci++) {
            long long key = (long long)c->load[ci] * COST_CLASS * 100 + COST_CLASS * rank_nic_path(c, r, ci) +
                            tie_cost(r, ci, c->m);
            if (best < 0 || key < best_key) {
                best = ci;
                best_key = key;
            }
        }
        primary[r] = best;
        c->load[best]++;
    }

    for (int r = 0; r < n; r++) {
        struct gx_topo_placement *pl = &out[r];
        size_t size = pl->size;
        memset(pl, 0, size);
        pl->size = size;
        pl->local_rank = r;
        pl->gpu = c->gpu[r];
        pl->nic_kind = c->kind;
        pl->nic_path = GX_TOPO_PATH_UNKNOWN;
        if (primary[r] >= 0) {
            pl->nic_count = 1;
            pl->nics[0] = c->nic[primary[r]];
            pl->nic_ports[0] = c->port[primary[r]];
            pl->nic_path = rank_nic_path(c, r, primary[r]);
        }
        fill_cpuset(c, r, pl);
    }

    /* Rule 5: idle NICs become extra rails. */
    for (int ci = 0; ci < c->m; ci++) {
        if (c->load[ci] > 0)
            continue;
        int best = -1;
        for (int r = 0; r < n; r++) {
            struct gx_topo_placement *pl = &out[r];
            if (pl->nic_count == 0 || pl->nic_count >= GX_TOPO_MAX_RANK_NICS ||
                rank_nic_path(c, r, ci) > pl->nic_path)
                continue;
            if (best < 0 || pl->nic_count < out[best].nic_count ||
                (pl->nic_count == out[best].nic_count && rank_nic_path(c, r, ci) < rank_nic_path(c, best, ci)))
                best = r;
        }
        if (best >= 0) {
            struct gx_topo_placement *pl = &out[best];
            pl->nics[pl->nic_count] = c->nic[ci];
            pl->nic_ports[pl->nic_count++] = c->port[ci];
            c->load[ci]++;
        }
    }
    for (int r = 0; r < n; r++)
        for (int i = 0; i < out[r].nic_count; i++)
            snprintf(out[r].nic_names[i], sizeof(out[r].nic_names[i]), "%s",
                     topo_dev(t, c->kind, out[r].nics[i])->name);
out:
    free(primary);
    free(rows);
    free(cand);
    free(done);
    return rc;
}

GX_API int gx_topo_place(const struct gx_topo *topo, int local_size, const int *gpus,
                         const char *hca_spec, struct gx_topo_placement *out)
{
    if (topo == NULL || out == NULL || local_size <= 0)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "gx_topo_place: invalid argument (local_size %d)", local_size);
    for (int r = 0; r < local_size; r++)
        if (out[r].size == 0 || out[r].size > sizeof(out[r]) ||
            out[r].size < offsetof(struct gx_topo_placement, cpuset) + GX_TOPO_CPUSET_MAX)
            return gx_fail(GX_EINVAL, GX_SUB_TOPO, "gx_topo_place: out[%d].size must be set (GX_TOPO_PLACEMENT_INIT)", r);

    int ngpu = topo->kind_count[GX_TOPO_GPU];
    int m = topo->kind_count[GX_TOPO_RDMA_NIC] + topo->kind_count[GX_TOPO_ETH_NIC];
    struct place_ctx c = { .t = topo, .n = local_size };
    int *gpu = calloc((size_t)local_size, sizeof(int));
    c.home = calloc((size_t)local_size, sizeof(int));
    c.nic = calloc((size_t)m + 1, sizeof(int));
    c.port = calloc((size_t)m + 1, sizeof(int));
    c.load = calloc((size_t)m + 1, sizeof(int));
    struct gx_topo_placement *tmp = calloc((size_t)local_size, sizeof(*tmp));
    int rc = GX_OK;
    if (!gpu || !c.home || !c.nic || !c.port || !c.load || !tmp) {
        rc = gx_fail(GX_ENOMEM, GX_SUB_TOPO, "out of memory in placement");
        goto out;
    }
    for (int r = 0; r < local_size; r++) {
        gpu[r] = gpus ? gpus[r] : (ngpu > 0 ? r % ngpu : -1);
        if (gpu[r] < -1 || gpu[r] >= ngpu) {
            rc = gx_fail(GX_EINVAL, GX_SUB_TOPO, "local rank %d asks for GPU %d but %s has %d GPU%s", r,
                         gpu[r], topo->source, ngpu, ngpu == 1 ? "" : "s");
            goto out;
        }
        tmp[r].size = sizeof(tmp[r]);
    }
    c.gpu = gpu;
    if (hca_spec == NULL)
        hca_spec = gx_topo_hca_spec();
    rc = place_all(&c, hca_spec, tmp);
    if (rc == GX_OK)
        for (int r = 0; r < local_size; r++) {
            size_t size = out[r].size;
            memcpy(&out[r], &tmp[r], size);
            out[r].size = size;
        }
out:
    free(gpu);
    free(c.home);
    free(c.nic);
    free(c.port);
    free(c.load);
    free(tmp);
    return rc;
}

int gx_topo_place_rank(const struct gx_topo *topo, int local_rank, int local_size, int gpu,
                       struct gx_topo_placement *out)
{
    if (topo == NULL || out == NULL || local_rank < 0 || local_rank >= local_size)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "gx_topo_place_rank: local rank %d of %d is invalid",
                       local_rank, local_size);
    int rc;
    if (gpu == GX_TOPO_GPU_AUTO && (rc = gx_topo_gpu_for_rank(topo, local_rank, &gpu)) != GX_OK)
        return rc;
    int ngpu = topo->kind_count[GX_TOPO_GPU];
    int *gpus = calloc((size_t)local_size, sizeof(int));
    struct gx_topo_placement *all = calloc((size_t)local_size, sizeof(*all));
    if (gpus == NULL || all == NULL) {
        free(gpus);
        free(all);
        return gx_fail(GX_ENOMEM, GX_SUB_TOPO, "out of memory in placement");
    }
    for (int r = 0; r < local_size; r++) {
        gpus[r] = r == local_rank ? gpu : (gpu >= 0 && ngpu > 0 ? r % ngpu : -1);
        all[r].size = sizeof(all[r]);
    }
    rc = gx_topo_place(topo, local_size, gpus, NULL, all);
    if (rc == GX_OK) {
        const struct gx_topo_placement *p = &all[local_rank];
        size_t size = out->size ? out->size : sizeof(*out);
        if (size > sizeof(*out))
            size = sizeof(*out);
        memcpy(out, p, size);
        out->size = size;
        GX_INFO(GX_SUB_TOPO, "local rank %d/%d: GPU %d, NIC %s%s (%s), NUMA node %d, CPUs %s (topology: %s)",
                local_rank, local_size, p->gpu, p->nic_count ? p->nic_names[0] : "none",
                p->nic_count > 1 ? " +rails" : "", gx_topo_path_name(p->nic_path), p->numa_node,
                p->cpuset[0] ? p->cpuset : "unbound", topo->source);
    }
    free(gpus);
    free(all);
    return rc;
}
