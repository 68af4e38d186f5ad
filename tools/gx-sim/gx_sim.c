/*
 * gx_sim.c - gx-sim: gx's collectives at sizes this machine cannot run,
 * simulated on SimGrid (sim_engine.h) from the schedules gx's own builders
 * write (sim_plan.h). Two reports: the table (per collective, algorithm
 * and size: time, algbw, busbw in gx-perf's columns) and --regret (the
 * cost model's all-reduce choice against the fastest simulated one).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/algorithms/coll_tune.h"
#include "tools/gx-sim/sim_engine.h"
#include "tools/gx-sim/sim_opts.h"

/* nccl-tests' bus bandwidth factors (as gx-perf's perf_coll.c). */
static double bus_factor(enum coll_kind k, int n)
{
    switch (k) {
    case COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
    case COLL_BROADCAST:
    case COLL_REDUCE: return 1.0;
    default: return (double)(n - 1) / n;
    }
}

static struct node_shape shape_of(const struct sim_machine *m, int n)
{
    int g = m->gpus_per_node, nics = sim_nics(m);
    struct node_shape sh = { (n + g - 1) / g, g < n ? g : n, n % g != 0, nics };
    if (m->layout_nodes) {
        sh.nodes = m->layout_nodes, sh.L = 0, sh.uneven = false;
        for (int k = 0; k < m->layout_nodes; k++) {
            sh.L = m->layout[k] > sh.L ? m->layout[k] : sh.L;
            sh.uneven |= m->layout[k] != m->layout[0];
        }
    }
    return sh;
}

/* The link between nodes as the cost model's set-up probe would measure it
 * (rank 0 and the first rank of node 1: coll_probe.c's partner). */
static struct link_cost net_of(const struct sim_machine *m, int n)
{
    double lat = 0, bw = 1;
    int first = sim_nodes_of(m, n) > 1 ? sim_node_first(m, 1) : n - 1;
    sim_platform_path(m, 0, first, &lat, &bw);
    struct link_cost l = { "sim", lat, 1.0 / bw };
    return l;
}

/* The cost model's choice for an all-reduce of `bytes` (hier: its rail). */
static struct sim_algo model_choice(const struct sim_machine *m, int n, size_t bytes)
{
    struct node_shape sh = shape_of(m, n);
    struct link_cost net = net_of(m, n);
    bool forced = false;
    struct sim_algo a = { coll_tune_choose(COLL_ALLREDUCE, bytes, n, &sh, false, &net, &forced),
                          COLL_ALGO_AUTO };
    if (a.algo == COLL_ALGO_HIER)
        (void)coll_tune_predict_hier(bytes, &sh, &net, &a.rail);
    return a;
}

/* Simulate one case: 0 and *seconds, or -1 with why in err. */
static int simulate(const struct sim_opts *o, int n, enum coll_kind kind, struct sim_algo a,
                    size_t size, double *seconds, char *err, size_t errlen)
{
    struct sim_layout lay = { n, o->machine.gpus_per_node,
                              o->machine.layout_nodes ? o->machine.layout : NULL,
                              o->machine.layout_nodes };
    struct sim_plan plan;
    if (sim_count_of(kind, size, n) == 0) {
        snprintf(err, errlen, "size %zu is under one element per rank", size);
        return -1;
    }
    if (a.algo == COLL_ALGO_HIER && a.rail == COLL_ALGO_AUTO) { /* the model's rail */
        struct node_shape sh = shape_of(&o->machine, n);
        struct link_cost net = net_of(&o->machine, n);
        (void)coll_tune_predict_hier(size, &sh, &net, &a.rail);
    }
    if (sim_plan_build(&plan, &lay, kind, a.algo, a.rail, size, o->max_steps, err, errlen) != 0)
        return -1;
    int rc = sim_engine_run(&plan, &o->machine, seconds, err, errlen);
    sim_plan_free(&plan);
    return rc;
}

static void print_header(const struct sim_opts *o, int n, enum coll_kind kind)
{
    const struct sim_machine *m = &o->machine;
    char shape[SIM_MAX_LAYOUT * 4 + 32] = "";
    if (m->layout_nodes) {
        for (int k = 0; k < m->layout_nodes; k++)
            snprintf(shape + strlen(shape), sizeof(shape) - strlen(shape), "%s%d", k ? "+" : "",
                     m->layout[k]);
    } else {
        snprintf(shape, sizeof(shape), "%d x %d", sim_nodes_of(m, n), m->gpus_per_node);
    }
    printf("# gx-sim: %s on %d GPUs (%d node(s): %s), %d NIC(s) per node, NIC %g Gb/s, "
           "NVLink %g Gb/s, oversubscription %g, %d nodes per leaf, latency %g us (+%g through "
           "the spines, %g inside a node), memory %g GB/s, %g us per message\n",
           coll_kind_name(kind), n, sim_nodes_of(m, n), shape, sim_nics(m), m->nic_gbps,
           m->nvlink_gbps, m->oversub, m->nodes_per_leaf, m->nic_lat_us, m->spine_lat_us,
           m->nvlink_lat_us, m->mem_gbytes, m->msg_us);
    printf("# %10s  %12s  %8s  %6s  %6s  %-11s  %9s  %7s  %7s\n", "size", "count", "type",
           "redop", "root", "algo", "time", "algbw", "busbw");
    printf("# %10s  %12s  %8s  %6s  %6s  %-11s  %9s  %7s  %7s\n", "(B)", "(elements)", "", "",
           "", "", "(us)", "(GB/s)", "(GB/s)");
}

static int candidates(const struct sim_opts *o, enum coll_kind kind, struct sim_algo *out)
{
    if (o->nalgos) {
        int k = 0;
        for (int i = 0; i < o->nalgos; i++)
            if (coll_algo_serves(kind, o->algos[i].algo))
                out[k++] = o->algos[i];
        return k;
    }
    enum coll_algo all[COLL_ALGO_COUNT];
    int n = coll_algo_candidates(kind, all), k = 0;
    for (int i = 0; i < n; i++)
        if (all[i] != COLL_ALGO_SHM)
            out[k++] = (struct sim_algo){ all[i], COLL_ALGO_AUTO };
    return k;
}

/* Rows that cannot be simulated say why (N/A); they are not failures. */
static int run_table(const struct sim_opts *o)
{
    for (int gi = 0; gi < o->ngpus; gi++) {
        int n = o->gpus[gi];
        for (int ci = 0; ci < o->ncolls; ci++) {
            enum coll_kind kind = o->colls[ci];
            struct sim_algo algos[SIM_MAX_LIST + COLL_ALGO_COUNT];
            int na = candidates(o, kind, algos);
            print_header(o, n, kind);
            for (int si = 0; si < o->nsizes; si++) {
                size_t size = o->sizes[si];
                for (int ai = 0; ai < na; ai++) {
                    char name[32], err[512];
                    double t = 0;
                    sim_algo_name(&algos[ai], name, sizeof(name));
                    printf("  %10zu  %12zu  %8s  %6s  %6s  %-11s", size,
                           sim_count_of(kind, size, n), "float", "sum",
                           kind == COLL_BROADCAST || kind == COLL_REDUCE ? "0" : "-1", name);
                    fflush(stdout);
                    if (simulate(o, n, kind, algos[ai], size, &t, err, sizeof(err)) != 0) {
                        printf("  %9s  %7s  %7s  # %s\n", "N/A", "N/A", "N/A", err);
                        continue;
                    }
                    double algbw = (double)size / t / 1e9;
                    printf("  %9.2f  %7.2f  %7.2f\n", t * 1e6, algbw, algbw * bus_factor(kind, n));
                }
            }
            printf("\n");
            fflush(stdout);
        }
    }
    return 0;
}

/* --regret: per size, the model's all-reduce against the fastest simulated. */
static int run_regret(const struct sim_opts *o)
{
    static const enum coll_algo flat[] = { COLL_ALGO_RING, COLL_ALGO_TREE, COLL_ALGO_RHD,
                                           COLL_ALGO_RD, COLL_ALGO_DBTREE, COLL_ALGO_LINEAR };
    for (int gi = 0; gi < o->ngpus; gi++) {
        int n = o->gpus[gi];
        struct sim_algo algos[SIM_MAX_LIST + 16];
        int na = 0;
        struct node_shape sh = shape_of(&o->machine, n);
        if (o->nalgos) { /* --algo: the best among these (and the model's choice) */
            na = candidates(o, COLL_ALLREDUCE, algos);
        } else {
            for (size_t i = 0; i < sizeof(flat) / sizeof(flat[0]); i++)
                if (coll_algo_serves(COLL_ALLREDUCE, flat[i]))
                    algos[na++] = (struct sim_algo){ flat[i], COLL_ALGO_AUTO };
            for (int i = 0; i < COLL_RAIL_ALGOS && coll_tune_hier_applies(&sh); i++)
                algos[na++] = (struct sim_algo){ COLL_ALGO_HIER, coll_rail_algos[i] };
        }
        printf("# gx-sim --regret: allreduce on %d GPUs (%d x %d), NIC %g Gb/s, NVLink %g "
               "Gb/s, oversubscription %g; the model's node: %.1f us, %.1f GB/s, reductions "
               "%.1f GB/s\n", n, sh.nodes, o->machine.gpus_per_node, o->machine.nic_gbps,
               o->machine.nvlink_gbps, o->machine.oversub, coll_tune_node_link()->alpha * 1e6,
               1e-9 / coll_tune_node_link()->beta, 1e-9 / coll_tune_gamma());
        printf("# %10s  %-11s  %10s  %-11s  %10s  %7s  %s\n", "size", "model", "time(us)",
               "best", "time(us)", "regret", "skipped");
        for (int si = 0; si < o->nsizes; si++) {
            size_t size = o->sizes[si];
            struct sim_algo pick = model_choice(&o->machine, n, size);
            double best = -1, picked = -1;
            char best_name[32] = "-", pick_name[32], skipped[512] = "";
            sim_algo_name(&pick, pick_name, sizeof(pick_name));
            for (int ai = 0; ai < na; ai++) {
                char name[32], err[512];
                double t;
                sim_algo_name(&algos[ai], name, sizeof(name));
                if (simulate(o, n, COLL_ALLREDUCE, algos[ai], size, &t, err, sizeof(err)) != 0) {
                    size_t used = strlen(skipped);
                    snprintf(skipped + used, sizeof(skipped) - used, "%s%s", used ? "," : "",
                             name);
                    continue;
                }
                if (best < 0 || t < best) {
                    best = t;
                    snprintf(best_name, sizeof(best_name), "%s", name);
                }
                if (algos[ai].algo == pick.algo && algos[ai].rail == pick.rail)
                    picked = t;
            }
            if (picked < 0) {
                char err[512];
                if (simulate(o, n, COLL_ALLREDUCE, pick, size, &picked, err, sizeof(err)) != 0)
                    picked = -1;
                else if (best < 0 || picked < best) { /* a choice --algo left out */
                    best = picked;
                    snprintf(best_name, sizeof(best_name), "%s", pick_name);
                }
            }
            printf("  %10zu  %-11s  ", size, pick_name);
            if (picked > 0 && best > 0) {
                double regret = picked / best - 1;
                printf("%10.2f  %-11s  %10.2f  %6.1f%%  %s%s\n", picked * 1e6, best_name,
                       best * 1e6, regret * 100, skipped[0] ? skipped : "-",
                       regret > 0.10 ? "  # over 10%" : "");
            } else {
                char best_us[32] = "N/A";
                if (best > 0)
                    snprintf(best_us, sizeof(best_us), "%.2f", best * 1e6);
                printf("%10s  %-11s  %10s  %7s  %s\n", "N/A", best_name, best_us, "N/A",
                       skipped[0] ? skipped : "-");
            }
            fflush(stdout);
        }
        printf("\n");
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct sim_opts o;
    int rc = sim_opts_parse(&o, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    /* The cost model's node: the simulated one's link and reduction rate (a
     * reduction is 3 bytes of memory traffic per byte reduced). */
    if (!o.model_host)
        coll_tune_set_node(o.machine.nvlink_lat_us * 1e-6, 8 / (o.machine.nvlink_gbps * 1e9),
                           3 / (o.machine.mem_gbytes * 1e9));
    return o.regret ? run_regret(&o) : run_table(&o);
}
