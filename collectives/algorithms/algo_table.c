/*
 * algo_table.c - the algorithms, one row each (algo.h): the only list of
 * them. A row's place is its id, which travels in the mismatch descriptor.
 */
#include "collectives/algorithms/algo.h"

static const struct coll_algo_desc *const table[COLL_ALGO_COUNT] = {
    [COLL_ALGO_RING] = &coll_algo_ring,
    [COLL_ALGO_TREE] = &coll_algo_tree,
    [COLL_ALGO_RHD] = &coll_algo_rhd,
    [COLL_ALGO_RD] = &coll_algo_rd,
    [COLL_ALGO_LINEAR] = &coll_algo_linear,
    [COLL_ALGO_DBTREE] = &coll_algo_dbtree,
    [COLL_ALGO_SHM] = &coll_algo_shm,
    [COLL_ALGO_HIER] = &coll_algo_hier,
};

const struct coll_algo_desc *coll_algo_desc(enum coll_algo a)
{
    return (unsigned)a < COLL_ALGO_COUNT ? table[a] : NULL;
}

const char *coll_algo_name(enum coll_algo a)
{
    const struct coll_algo_desc *d = coll_algo_desc(a);
    return a == COLL_ALGO_AUTO ? "auto" : d ? d->name : "?";
}

bool coll_algo_serves(enum coll_kind k, enum coll_algo a)
{
    const struct coll_algo_desc *d = coll_algo_desc(a);
    return d && (unsigned)k < COLL_KIND_COUNT && d->serves[k].build;
}

int coll_algo_candidates(enum coll_kind k, enum coll_algo out[COLL_ALGO_COUNT])
{
    int n = 0;
    for (int a = 0; a < COLL_ALGO_COUNT; a++) {
        if (!coll_algo_serves(k, (enum coll_algo)a))
            continue;
        /* Insert by order (stable for equal orders: table order). */
        int pos = n++;
        while (pos > 0 && table[out[pos - 1]]->serves[k].order > table[a]->serves[k].order) {
            out[pos] = out[pos - 1];
            pos--;
        }
        out[pos] = (enum coll_algo)a;
    }
    return n;
}

int coll_algo_build(struct coll_op *op)
{
    if (!coll_algo_serves(op->a.kind, (enum coll_algo)op->algo))
        return GX_EINVAL;
    return coll_algo_desc((enum coll_algo)op->algo)->serves[op->a.kind].build(op);
}
