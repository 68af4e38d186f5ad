/*
 * coll_hier_rail.c - the rails of the hierarchical all-reduce (coll_hier.c):
 * one all-reduce of a shard among the ranks that hold it on every node, with
 * the flat algorithm the cost model picked for that rail (coll_tune.c
 * coll_hier_rail_algo; GX_HIER_RAIL forces it): ring, rhd, tree or dbtree,
 * each run over a group (algorithms.h). Here only the dispatch: how many
 * message numbers and scratch bytes a rail of `count` elements takes, and
 * the builder call.
 */
#include "collectives/algorithms/algorithms.h"

enum coll_algo hier_rail_algo(enum coll_algo inner)
{
    switch (inner) {
    case COLL_ALGO_RHD:
    case COLL_ALGO_TREE:
    case COLL_ALGO_DBTREE:
        return inner;
    default:
        return COLL_ALGO_RING;
    }
}

uint32_t hier_rail_msgs(enum coll_algo rail, int n, size_t count, size_t es)
{
    struct coll_group g = { .n = n };
    switch (rail) {
    case COLL_ALGO_RHD: return rhd_group_msgs(n);
    case COLL_ALGO_TREE: return tree_group_msgs(count, es);
    case COLL_ALGO_DBTREE: return dbtree_group_msgs(count, es);
    default: return ring_group_msgs(&g, count, es);
    }
}

size_t hier_rail_scratch(enum coll_algo rail, const struct coll_group *g, size_t count, size_t es)
{
    switch (rail) {
    case COLL_ALGO_RHD: return rhd_group_scratch(count, es);
    case COLL_ALGO_TREE: return tree_group_scratch(g, count, es);
    case COLL_ALGO_DBTREE: return dbtree_group_scratch(g, count, es);
    default: return ring_group_scratch(g, count, es);
    }
}

int hier_rail_allreduce(struct coll_op *op, enum coll_algo rail, const struct coll_group *g,
                        void *buf, size_t count)
{
    switch (rail) {
    case COLL_ALGO_RHD: return rhd_allreduce_group(op, g, buf, buf, count);
    case COLL_ALGO_TREE: return tree_allreduce_group(op, g, buf, buf, count);
    case COLL_ALGO_DBTREE: return dbtree_allreduce_group(op, g, buf, buf, count);
    default: return ring_allreduce_group(op, g, buf, buf, count);
    }
}
