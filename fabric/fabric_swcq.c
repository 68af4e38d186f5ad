/*
 * fabric_swcq.c - the software completion queue shared by shm and tcp: a ring
 * sized by what bound endpoints reserved (so pushing never fails and never
 * allocates), and a poll that first drives every bound endpoint's progress.
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "fabric/fabric_provider.h"

int gx_fab_swcq_init(struct gx_fab_swcq *cq, struct gx_fab_domain *dom,
                     void (*progress)(struct gx_fab_ep *ep))
{
    memset(cq, 0, sizeof(*cq));
    cq->base.dom = dom;
    cq->progress = progress;
    cq->cap = 64;
    cq->ring = calloc(cq->cap, sizeof(*cq->ring));
    if (!cq->ring)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "completion queue: out of memory");
    return GX_OK;
}

void gx_fab_swcq_fini(struct gx_fab_swcq *cq)
{
    if (cq->neps)
        GX_WARN(GX_SUB_FABRIC, "completion queue closed with %d endpoints still bound", cq->neps);
    free(cq->ring);
    free(cq->eps);
    cq->ring = NULL;
    cq->eps = NULL;
}

static int grow_ring(struct gx_fab_swcq *cq, uint32_t want)
{
    if (want <= cq->cap)
        return GX_OK;
    uint32_t cap = cq->cap;
    while (cap < want)
        cap *= 2;
    struct gx_fab_cqe *ring = calloc(cap, sizeof(*ring));
    if (!ring)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "completion queue: cannot grow to %u", cap);
    uint64_t n = cq->head - cq->tail;
    for (uint64_t i = 0; i < n; i++)
        ring[i] = cq->ring[(cq->tail + i) % cq->cap];
    free(cq->ring);
    cq->ring = ring;
    cq->cap = cap;
    cq->tail = 0;
    cq->head = n;
    return GX_OK;
}

int gx_fab_swcq_attach(struct gx_fab_swcq *cq, struct gx_fab_ep *ep, uint32_t entries)
{
    int rc = grow_ring(cq, cq->reserved + entries + 64);
    if (rc != GX_OK)
        return rc;
    if (cq->neps == cq->eps_cap) {
        int cap = cq->eps_cap ? cq->eps_cap * 2 : 8;
        struct gx_fab_ep **eps = realloc(cq->eps, (size_t)cap * sizeof(*eps));
        if (!eps)
            return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "completion queue: out of memory");
        cq->eps = eps;
        cq->eps_cap = cap;
    }
    cq->eps[cq->neps++] = ep;
    cq->reserved += entries;
    return GX_OK;
}

void gx_fab_swcq_detach(struct gx_fab_swcq *cq, struct gx_fab_ep *ep, uint32_t entries)
{
    for (int i = 0; i < cq->neps; i++) {
        if (cq->eps[i] == ep) {
            cq->eps[i] = cq->eps[--cq->neps];
            cq->reserved -= entries;
            return;
        }
    }
}

int gx_fab_swcq_poll(struct gx_fab_swcq *cq, struct gx_fab_cqe *out, int max)
{
    /* Endpoints may detach themselves while progressing (never in practice:
     * close is the caller's), so iterate by index over a stable count. */
    for (int i = 0; i < cq->neps; i++)
        cq->progress(cq->eps[i]);
    int n = 0;
    while (n < max && cq->tail != cq->head) {
        out[n++] = cq->ring[cq->tail % cq->cap];
        cq->tail++;
    }
    return n;
}
