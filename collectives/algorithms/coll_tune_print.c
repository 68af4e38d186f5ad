/*
 * coll_tune_print.c - the tables `gx-info --tuning` prints: for a rank and
 * node count (and optionally a measured network link), each all-reduce
 * algorithm's predicted time per size and the one chosen, the hierarchical
 * all-reduce's rails, and the choice for the other collectives. It only
 * reads the cost model of coll_tune.c (through coll_tune.h); it decides
 * nothing a collective runs with.
 */
#include <stdio.h>

#include "collectives/algorithms/coll_tune.h"
#include "collectives/arena/node_shm.h"
#include "common/log.h"
#include "common/param.h"
#include "common/sock.h"

static void fmt_time(char *buf, size_t len, double s)
{
    if (s < 0)
        snprintf(buf, len, "-");
    else if (s < 1e-3)
        snprintf(buf, len, "%.1fus", s * 1e6);
    else if (s < 1)
        snprintf(buf, len, "%.2fms", s * 1e3);
    else
        snprintf(buf, len, "%.2fs", s);
}

static void fmt_size(char *buf, size_t len, size_t b)
{
    if (b >= (1u << 30))
        snprintf(buf, len, "%zuG", b >> 30);
    else if (b >= (1u << 20))
        snprintf(buf, len, "%zuM", b >> 20);
    else if (b >= 1024)
        snprintf(buf, len, "%zuK", b >> 10);
    else
        snprintf(buf, len, "%zu", b);
}

/* The rails' algorithm per all-reduce size: each candidate's predicted time
 * for the 1/L shard and the pick (the `rail` column above). */
static void print_rails(FILE *f, const struct node_shape *sh, const struct link_cost *net)
{
    struct link_cost rl = coll_tune_rail_link(sh, net);
    enum coll_algo want = coll_tune_forced_rail();
    fprintf(f, "\nhier rails: one all-reduce of the 1/%d shard among %d nodes per rail "
            "(GX_HIER_RAIL=%s; * = the rail's algorithm)\n", sh->L, sh->nodes,
            gx_param_text(&gx_param_hier_rail));
    fprintf(f, "%10s %10s", "bytes", "shard");
    for (int i = 0; i < COLL_RAIL_ALGOS; i++)
        fprintf(f, " %11s", coll_algo_name(coll_rail_algos[i]));
    fprintf(f, "   rail\n");
    for (size_t b = 4; b <= ((size_t)1 << 30); b *= 4) {
        size_t shard = b / (size_t)sh->L;
        double t[COLL_RAIL_ALGOS];
        enum coll_algo pick;
        (void)coll_tune_rail_pick(shard, sh->nodes, &rl, want, &pick, t);
        char sz[16], shs[16];
        fmt_size(sz, sizeof(sz), b);
        fmt_size(shs, sizeof(shs), shard);
        fprintf(f, "%10s %10s", sz, shs);
        for (int i = 0; i < COLL_RAIL_ALGOS; i++) {
            char tm[24], cell[32];
            fmt_time(tm, sizeof(tm), t[i]);
            snprintf(cell, sizeof(cell), "%s%s", tm, pick == coll_rail_algos[i] ? "*" : "");
            fprintf(f, " %11s", cell);
        }
        fprintf(f, "   %s%s\n", coll_algo_name(pick), want != COLL_ALGO_AUTO ? " (GX_HIER_RAIL)" : "");
    }
}

int gx_coll_tuning_print_net(FILE *f, int nranks, int nnodes, double net_alpha, double net_beta)
{
    struct link_cost given = { "given (--link)", net_alpha, net_beta };
    const struct link_cost *net = net_alpha > 0 && net_beta > 0 ? &given : &coll_link_tcp;
    if (nranks < 1 || nnodes < 1 || nnodes > nranks)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "tuning: need 1 <= nodes (%d) <= ranks (%d)",
                       nnodes, nranks);
    const struct link_cost *l = nnodes > 1 ? net : coll_tune_node_link();
    fprintf(f, "collective algorithms for %d rank(s) on %d node(s)\n", nranks, nnodes);
    fprintf(f, "cost model: link %s alpha %.1f us, %.2f GB/s; reduction %.2f GB/s; "
            "pipelining chunk GX_COLL_CHUNK=%s\n", l->name, l->alpha * 1e6, 1e-9 / l->beta,
            1e-9 / coll_tune_gamma(), gx_param_text(&gx_param_coll_chunk));
    if (nnodes > 1) {
        const struct link_cost *nl = coll_tune_node_link();
        fprintf(f, "inside a node: %s alpha %.1f us, %.2f GB/s (GX_COLL_NODE_LINK)\n", nl->name,
                nl->alpha * 1e6, 1e-9 / nl->beta);
    }
    if (nnodes > 1 && net == &coll_link_tcp)
        fprintf(f, "(a communicator across nodes replaces the tcp figures with its own link's, "
                "probed at set-up: GX_COLL_PROBE; GX_DEBUG=info shows them)\n");
    fprintf(f, "GX_ALGO=%s\n\n", gx_param_text(&gx_param_algo));
    /* Nodes as even as the counts allow: the first nranks % nnodes get one more. */
    struct node_shape sh = { nnodes, (nranks + nnodes - 1) / nnodes, nranks % nnodes != 0,
                             gx_sock_rail_count() };
    if (nnodes > 1 && !coll_tune_hier_applies(&sh))
        fprintf(f, "hier: not applicable (one rank per node: the rails are the whole "
                "communicator)\n");
    else if (nnodes > 1 && sh.uneven)
        fprintf(f, "hier: nodes of %d and %d ranks: uneven, generalised (every segment cut "
                "into %d shards, the largest node's rank count; a smaller node's ranks own "
                "several shards and join several rails), not a flat fallback\n",
                sh.L, sh.L - 1, sh.L);
    else if (nnodes > 1)
        fprintf(f, "hier: %d nodes x %d ranks: reduce-scatter inside the node, %d rails "
                "between nodes (one per local rank, over %d network link(s) per node: "
                "GX_SOCKET_IFNAME's list), all-gather inside the node\n", nnodes, sh.L, sh.L,
                sh.rails < sh.L ? sh.rails : sh.L);
    if (nnodes > 1 && coll_tune_hier_applies(&sh))
        fprintf(f, "hier intra-node engine: %s%s\n", node_shm_hier_plan(),
                sh.uneven || nranks < 2 * nnodes ? "; a node of one rank has no intra-node phase"
                                                 : "");
    fprintf(f, "all_reduce (predicted time per algorithm; * = chosen; flat = best of the "
            "one-level ones)\n");
    /* One node: assume the shared-memory arena (GX_COLL_SHM=auto, shm links). */
    bool arena = nnodes == 1 && nranks > 1;
    /* A column per all-reduce algorithm, in candidate order (algo_table.c). */
    enum coll_algo ar[COLL_ALGO_COUNT];
    int nar = coll_algo_candidates(COLL_ALLREDUCE, ar);
    fprintf(f, "%10s", "bytes");
    for (int i = 0; i < nar; i++)
        fprintf(f, " %11s", coll_algo_name(ar[i]));
    fprintf(f, "   %-6s %s\n", "rail", "choice");
    for (size_t b = 4; b <= ((size_t)1 << 30); b *= 4) {
        bool forced_flag;
        enum coll_algo c = coll_tune_choose(COLL_ALLREDUCE, b, nranks, &sh, arena, net,
                                  &forced_flag);
        enum coll_algo rail = COLL_ALGO_RING;
        double th = coll_tune_predict_hier(b, &sh, net, &rail), flat = -1;
        char sz[16];
        fmt_size(sz, sizeof(sz), b);
        fprintf(f, "%10s", sz);
        for (int i = 0; i < nar; i++) {
            const struct coll_algo_desc *d = coll_algo_desc(ar[i]);
            char t[24], cell[32];
            double p = ar[i] == COLL_ALGO_HIER
                           ? th
                           : coll_tune_predict(COLL_ALLREDUCE, ar[i], b, nranks, nnodes, net);
            /* flat: the best one-level algorithm that can run here */
            if (!d->two_level && p >= 0 && (!d->usable || d->usable(&sh, arena)) &&
                (flat < 0 || p < flat))
                flat = p;
            fmt_time(t, sizeof(t), p);
            snprintf(cell, sizeof(cell), "%s%s", t, c == ar[i] ? "*" : "");
            fprintf(f, " %11s", cell);
        }
        char ratio[32] = "";
        if (th > 0 && flat > 0)
            snprintf(ratio, sizeof(ratio), " (hier/flat %.2f)", th / flat);
        fprintf(f, "   %-6s %s%s%s\n", th >= 0 ? coll_algo_name(rail) : "-", coll_algo_name(c),
                forced_flag ? " (GX_ALGO)" : "", ratio);
    }
    if (coll_tune_hier_applies(&sh))
        print_rails(f, &sh, net);
    fprintf(f, "\nother collectives (chosen algorithm and predicted time; bytes per rank's "
            "block for allgather, reduce_scatter, gather, scatter, alltoall)\n");
    fprintf(f, "%10s", "bytes");
    for (int k = 1; k < COLL_KIND_COUNT; k++)
        fprintf(f, " %18s", coll_kind_name((enum coll_kind)k));
    fprintf(f, "\n");
    for (size_t b = 4; b <= ((size_t)1 << 30); b *= 16) {
        char sz[16];
        fmt_size(sz, sizeof(sz), b);
        fprintf(f, "%10s", sz);
        for (int k = 1; k < COLL_KIND_COUNT; k++) {
            bool forced_flag;
            enum coll_algo c = coll_tune_choose((enum coll_kind)k, b, nranks, &sh, arena, net,
                                      &forced_flag);
            char t[24], cell[40];
            fmt_time(t, sizeof(t),
                     coll_tune_predict((enum coll_kind)k, c, b, nranks, nnodes, net));
            snprintf(cell, sizeof(cell), "%s %s", coll_algo_name(c), t);
            fprintf(f, " %18s", cell);
        }
        fprintf(f, "\n");
    }
    return GX_OK;
}
