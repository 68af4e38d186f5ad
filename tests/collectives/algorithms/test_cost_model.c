/* Unit test of the cost model's terms added after gx-sim's regret table
 * (docs/scale.md): the one-thread reduction bound of ring and dbtree, and
 * the node's link and reduction rate as inputs (GX_COLL_NODE_LINK,
 * GX_COLL_REDUCE_GBPS, coll_tune_set_node). Each check compares the model
 * with a figure worked out here from its inputs, or a choice with the one
 * those inputs must give. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "tests/unit/check.h"
#include "collectives/algorithms/coll_dbtree.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/schedule/schedule.h"

static bool near(double x, double y, double tol)
{
    return fabs(x - y) <= tol * fabs(y);
}

/* The ring all-reduce's overlapped time, as coll_ring.c wrote it before the
 * bound (transfers, one round's reductions exposed). */
static double ring_overlap(double S, int n, const struct link_cost *l, double g)
{
    double blk = S / n, k = coll_chunks((size_t)blk);
    return 2 * (n - 1) * (k * l->alpha + blk * l->beta) + blk * g * (1 + (n - 2) / k);
}

int main(void)
{
    /* Read before any prediction: the environment is read once. */
    setenv("GX_COLL_REDUCE_GBPS", "8", 1);
    setenv("GX_COLL_NODE_LINK", "2:30", 1);
    double g = coll_tune_gamma();
    CHECK(near(g, 1 / 8e9, 1e-9), "GX_COLL_REDUCE_GBPS=8: gamma %g s/B, want %g", g, 1 / 8e9);
    const struct link_cost *nl = coll_tune_node_link();
    CHECK(near(nl->alpha, 2e-6, 1e-9) && near(nl->beta, 1 / 30e9, 1e-9),
          "GX_COLL_NODE_LINK=2:30: %g s, %g s/B", nl->alpha, nl->beta);

    /* Ring, 64 ranks on 64 nodes. Over tcp (1.2 GB/s) the transfers are
     * slower than the reductions (8 GB/s): the bound must not change the
     * time. Over 50 GB/s the reductions bind: (n-1)/n S g. */
    const double S = 64.0 * (1 << 20);
    const int n = 64;
    double t = coll_tune_predict(COLL_ALLREDUCE, COLL_ALGO_RING, (size_t)S, n, n, &coll_link_tcp);
    double want = ring_overlap(S, n, &coll_link_tcp, g);
    CHECK(near(t, want, 1e-9), "ring over tcp: %g s, the overlapped time is %g s", t, want);
    struct link_cost fast = { "fast", 2e-6, 1 / 50e9 };
    t = coll_tune_predict(COLL_ALLREDUCE, COLL_ALGO_RING, (size_t)S, n, n, &fast);
    want = (n - 1.0) / n * S * g;
    CHECK(ring_overlap(S, n, &fast, g) < want, "the test's case must be reduction-bound");
    CHECK(near(t, want, 1e-9), "ring at 50 GB/s: %g s, reductions alone take %g s", t, want);

    /* dbtree over the fast link: at least S g (an inner rank reduces two
     * children's halves) plus the pipeline's fill, (k + D - 1) 2 c g. */
    double k = coll_chunks((size_t)(S / 2)), c = S / 2 / k, D = dbtree_depth(n);
    t = coll_tune_predict(COLL_ALLREDUCE, COLL_ALGO_DBTREE, (size_t)S, n, n, &fast);
    want = (k + D - 1) * 2 * c * g;
    CHECK(t >= S * g, "dbtree at 50 GB/s: %g s, below S g = %g s", t, S * g);
    CHECK(near(t, want, 1e-9), "dbtree at 50 GB/s: %g s, worked out %g s", t, want);
    /* Small: latency-bound, the bound must not bind (it is k = 1 chunk). */
    t = coll_tune_predict(COLL_ALLREDUCE, COLL_ALGO_DBTREE, 4096, n, n, &fast);
    CHECK(t > (1 + D - 1) * 2 * 2048 * g, "dbtree at 4 KiB: %g s", t);

    /* The node's link prices hier's intra-node phases: 8 nodes x 8 ranks,
     * 8 rails, 64 MiB over the fast network. With host shared memory (3
     * GB/s, reductions at 4 GB/s) the flat algorithms win; with an NVLink
     * node (1 us, 450 GB/s, reductions at 100 GB/s) hier must, and its
     * predicted time must fall. */
    struct node_shape sh = { 8, 8, false, 8 };
    bool forced;
    coll_tune_set_node(coll_link_shm.alpha, coll_link_shm.beta, coll_gamma_reduce);
    CHECK(coll_tune_node_given(), "GX_COLL_NODE_LINK was set: the node's link is given");
    double host = coll_tune_predict_hier((size_t)S, &sh, &fast, NULL);
    enum coll_algo a = coll_tune_choose(COLL_ALLREDUCE, (size_t)S, 64, &sh, false, &fast, &forced);
    CHECK(a != COLL_ALGO_HIER, "host node: the model picked hier (%s)", coll_algo_name(a));
    coll_tune_set_node(1e-6, 1 / 450e9, 1 / 100e9);
    CHECK(near(coll_tune_gamma(), 1 / 100e9, 1e-9), "coll_tune_set_node's gamma");
    double nvl = coll_tune_predict_hier((size_t)S, &sh, &fast, NULL);
    a = coll_tune_choose(COLL_ALLREDUCE, (size_t)S, 64, &sh, false, &fast, &forced);
    CHECK(a == COLL_ALGO_HIER, "NVLink node: the model picked %s, not hier", coll_algo_name(a));
    CHECK(nvl < host / 4, "hier at 64 MiB: %g s on NVLink, %g s on host shm", nvl, host);
    /* <= 0 keeps a value. */
    coll_tune_set_node(0, 0, -1);
    CHECK(near(coll_tune_node_link()->beta, 1 / 450e9, 1e-9) &&
          near(coll_tune_gamma(), 1 / 100e9, 1e-9), "coll_tune_set_node(0, 0, -1) changed it");
    CHECK_DONE("test_cost_model");
}
