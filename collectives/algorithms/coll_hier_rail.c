/*
 * coll_hier_rail.c - the rails of the hierarchical all-reduce (coll_hier.c):
 * one all-reduce of a shard among the ranks that hold it on every node, with
 * the flat algorithm the cost model picked for that rail (coll_tune.c
 * coll_hier_rail_algo; GX_HIER_RAIL forces it): ring, rhd, tree or dbtree,
 * each run over a group through its descriptor's group form (algo.h). Here
 * the dispatch (how many message numbers and scratch bytes a rail of
 * `count` elements takes, and the builder call) and the hierarchical
 * all-reduce's cost: its three phases, the rails' pick and their link.
 */
#include "collectives/algorithms/algo.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/arena/node_shm.h"
#include "common/param.h"

/* ---- the rail's builder ------------------------------------------------------ */

enum coll_algo hier_rail_algo(enum coll_algo inner)
{
    const struct coll_algo_desc *d = coll_algo_desc(inner);
    return d && d->group ? inner : COLL_ALGO_RING;
}

static const struct coll_group_algo *rail_group(enum coll_algo rail)
{
    return coll_algo_desc(hier_rail_algo(rail))->group;
}

uint32_t hier_rail_msgs(enum coll_algo rail, int n, size_t count, size_t es)
{
    struct coll_group g = { .n = n };
    return rail_group(rail)->msgs(&g, count, es);
}

size_t hier_rail_scratch(enum coll_algo rail, const struct coll_group *g, size_t count, size_t es)
{
    return rail_group(rail)->scratch(g, count, es);
}

int hier_rail_allreduce(struct coll_op *op, enum coll_algo rail, const struct coll_group *g,
                        void *buf, size_t count)
{
    return rail_group(rail)->allreduce(op, g, buf, buf, count);
}

/* ---- the hierarchical all-reduce's cost ------------------------------------ */

bool coll_tune_hier_applies(const struct node_shape *sh)
{
    return sh->nodes > 1 && sh->L > 1;
}

/* The rails' candidates, in the order ties go. */
const enum coll_algo coll_rail_algos[COLL_RAIL_ALGOS] = { COLL_ALGO_RING, COLL_ALGO_RHD,
                                                          COLL_ALGO_TREE, COLL_ALGO_DBTREE };

/* GX_HIER_RAIL: COLL_ALGO_AUTO, or the forced rail algorithm. */
enum coll_algo coll_tune_forced_rail(void)
{
    int i = 0; /* malformed: gx_param_check_environment failed init already */
    (void)gx_param_enum(&gx_param_hier_rail, &i);
    return i >= 1 && i <= COLL_RAIL_ALGOS ? coll_rail_algos[i - 1] : COLL_ALGO_AUTO;
}

/* One rail: an all-reduce of `shard` bytes among `nodes` ranks (one per
 * node) over `link`, by the fastest of ring, rhd, tree and dbtree (the flat
 * model, predict), or by `want` (not AUTO). Returns its time; *out (may be
 * NULL) gets the algorithm, times[] (may be NULL) each candidate's. */
double coll_tune_rail_pick(size_t shard, int nodes, const struct link_cost *link,
                           enum coll_algo want, enum coll_algo *out, double times[COLL_RAIL_ALGOS])
{
    enum coll_algo best = COLL_ALGO_RING;
    double best_t = -1;
    for (int i = 0; i < COLL_RAIL_ALGOS; i++) {
        double t = coll_tune_predict(COLL_ALLREDUCE, coll_rail_algos[i], shard, nodes, nodes,
                                     link);
        if (times)
            times[i] = t;
        bool pick = want != COLL_ALGO_AUTO ? coll_rail_algos[i] == want
                                             : t >= 0 && (best_t < 0 || t < best_t);
        if (pick) {
            best = coll_rail_algos[i];
            best_t = t;
        }
    }
    if (out)
        *out = best;
    return best_t;
}

/* A rail's link: the network link with its bandwidth shared by the node's L
 * rails over min(L, GX_SOCKET_IFNAME entries) links. */
struct link_cost coll_tune_rail_link(const struct node_shape *sh, const struct link_cost *net)
{
    int links = sh->rails < 1 ? 1 : sh->rails > sh->L ? sh->L : sh->rails;
    return (struct link_cost){ "rail", net->alpha, net->beta * sh->L / links };
}

/* Three phases per segment: a reduce-scatter of the segment inside the node
 * (in the node arena, priced like the one-node arena's moves of 1/L blocks;
 * with GX_HIER_ARENA=off a ring over shm links), one all-reduce of a 1/L
 * shard along each rail (the network; the L rails of a node share its
 * links - one, or as many as GX_SOCKET_IFNAME lists - so a rail sees
 * links/L of a link's bandwidth), an all-gather inside the node (arena or
 * ring). Segments overlap the phases: the slowest plus 1/K of the others. */
double coll_tune_predict_hier(size_t bytes, const struct node_shape *sh,
                              const struct link_cost *net, enum coll_algo *rail_out)
{
    if (!coll_tune_hier_applies(sh))
        return -1;
    double S = (double)bytes, L = sh->L, shard = S / L;
    const struct link_cost *l = coll_tune_node_link();
    double t_rs = (L - 1) * (l->alpha + shard * (l->beta + coll_tune_gamma()));
    double t_ag = (L - 1) * (l->alpha + shard * l->beta);
    if (node_shm_hier_planned() && !coll_tune_node_given()) { /* arena_node.c */
        t_rs = arena_moves_time(shard, sh->L, sh->L, L - 1, L - 1);
        t_ag = arena_moves_time(shard, sh->L, 1, L - 1, 0);
    }
    struct link_cost rail = coll_tune_rail_link(sh, net);
    double t_rail = coll_tune_rail_pick((size_t)shard, sh->nodes, &rail, coll_tune_forced_rail(),
                                        rail_out, NULL);
    int K = coll_hier_segments(bytes);
    double sum = t_rs + t_rail + t_ag, mx = t_rs;
    mx = t_rail > mx ? t_rail : mx;
    mx = t_ag > mx ? t_ag : mx;
    return mx + (sum - mx) / K;
}

