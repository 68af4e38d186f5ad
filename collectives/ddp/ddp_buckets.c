/*
 * ddp_buckets.c - which gradients share a bucket, the buckets' memory, and
 * the one-time rebuild from the observed ready order.
 *
 * Owns: the assignment rule (ddp_assign, pure and unit-tested), building a
 * layout (struct ddp_bucket array, parameter offsets) and swapping it for a
 * new one. Must not launch or wait for communication, except the rebuild's
 * broadcast of rank 0's order.
 *
 * The rule, as PyTorch's Reducer: walk the parameters in fill order (reverse
 * registration at first, the observed order after the rebuild), keeping one
 * open bucket per datatype (a bucket's all-reduce has one datatype). Add the
 * parameter to its datatype's open bucket; once the bucket holds at least the
 * limit it closes. The limit is the first-bucket cap for a datatype's first
 * bucket, the bucket cap after that, so the gradients ready first go out in a
 * small bucket early. A bucket can exceed its limit by its last parameter
 * (a parameter larger than the cap closes the bucket it lands in). Buckets
 * launch in the order of the fill position of their last
 * parameter, the order in which they are expected to complete.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/ddp/ddp_internal.h"
#include "common/log.h"

void ddp_default_order(size_t *order, size_t n)
{
    for (size_t i = 0; i < n; i++)
        order[i] = n - 1 - i;
}

void ddp_assignment_free(struct ddp_assignment *a)
{
    free(a->start);
    free(a->members);
    memset(a, 0, sizeof(*a));
}

struct open_bucket {
    long id;        /* -1 = none open */
    size_t bytes;
    bool first_closed;
};

int ddp_assign(const struct ddp_param_shape *shapes, size_t n, const size_t *order,
               size_t first_cap, size_t cap, struct ddp_assignment *out)
{
    size_t *bucket_of = calloc(n + 1, sizeof(*bucket_of));   /* per fill position */
    size_t *last_pos = calloc(n + 1, sizeof(*last_pos));     /* per bucket id */
    size_t *size_of = calloc(n + 1, sizeof(*size_of));       /* members per bucket id */
    size_t *rank_of = calloc(n + 1, sizeof(*rank_of));       /* bucket id -> launch index */
    size_t *id_at = calloc(n + 1, sizeof(*id_at));           /* launch index -> bucket id */
    unsigned char *seen = calloc(n + 1, 1);
    struct ddp_assignment a = { 0, calloc(n + 2, sizeof(size_t)), calloc(n + 1, sizeof(size_t)) };
    int rc = GX_ENOMEM;
    if (!bucket_of || !last_pos || !size_of || !rank_of || !id_at || !seen || !a.start ||
        !a.members) {
        gx_fail(rc, GX_SUB_DDP, "bucket assignment of %zu parameters: out of memory", n);
        goto out;
    }
    rc = GX_EINVAL;
    struct open_bucket open[GX_DATATYPE_COUNT];
    for (int d = 0; d < GX_DATATYPE_COUNT; d++)
        open[d] = (struct open_bucket){ -1, 0, false };
    size_t nb = 0;
    for (size_t pos = 0; pos < n; pos++) {
        size_t p = order[pos];
        if (p >= n || seen[p]) {
            gx_fail(rc, GX_SUB_DDP, "bucket order: entry %zu is parameter %zu, %s", pos, p,
                    p >= n ? "out of range" : "listed twice");
            goto out;
        }
        seen[p] = 1;
        int d = (int)shapes[p].dtype;
        if (d < 0 || d >= GX_DATATYPE_COUNT) {
            gx_fail(rc, GX_SUB_DDP, "bucket assignment: parameter %zu has invalid datatype %d",
                    p, d);
            goto out;
        }
        if (open[d].id < 0) {
            open[d].id = (long)nb++;
            open[d].bytes = 0;
        }
        size_t id = (size_t)open[d].id;
        bucket_of[pos] = id;
        size_of[id]++;
        last_pos[id] = pos;
        open[d].bytes += shapes[p].bytes;
        if (open[d].bytes >= (open[d].first_closed ? cap : first_cap)) {
            open[d].id = -1;
            open[d].first_closed = true;
        }
    }
    /* Launch order: by the fill position of each bucket's last member. Ids
     * were handed out in order of first member; sort them (insertion sort on
     * a usually sorted array). */
    for (size_t i = 0; i < nb; i++) {
        size_t j = i;
        while (j > 0 && last_pos[id_at[j - 1]] > last_pos[i]) {
            id_at[j] = id_at[j - 1];
            j--;
        }
        id_at[j] = i;
    }
    for (size_t k = 0; k < nb; k++)
        rank_of[id_at[k]] = k;
    a.nbuckets = nb;
    a.start[0] = 0;
    for (size_t k = 0; k < nb; k++)
        a.start[k + 1] = a.start[k] + size_of[id_at[k]];
    /* Members keep their fill order within a bucket; reuse size_of as the
     * next free slot of each bucket. */
    for (size_t k = 0; k < nb; k++)
        size_of[id_at[k]] = a.start[k];
    for (size_t pos = 0; pos < n; pos++)
        a.members[size_of[bucket_of[pos]]++] = order[pos];
    *out = a;
    memset(&a, 0, sizeof(a));
    rc = GX_OK;
out:
    ddp_assignment_free(&a);
    free(bucket_of);
    free(last_pos);
    free(size_of);
    free(rank_of);
    free(id_at);
    free(seen);
    return rc;
}

static void free_buckets(struct gx_ddp *ddp, struct ddp_bucket *buckets, size_t n)
{
    for (size_t b = 0; b < n; b++) {
        ddp_bucket_release_hook_data(ddp, &buckets[b]);
        ddp_mem_free(ddp, buckets[b].pub.data);
        free(buckets[b].params);
    }
    free(buckets);
}

void ddp_layout_free(struct gx_ddp *ddp)
{
    free_buckets(ddp, ddp->buckets, ddp->nbuckets);
    ddp->buckets = NULL;
    ddp->nbuckets = 0;
}

int ddp_layout_build(struct gx_ddp *ddp, const size_t *order)
{
    size_t n = ddp->nparams;
    struct ddp_param_shape *shapes = calloc(n + 1, sizeof(*shapes));
    if (!shapes)
        return gx_fail(GX_ENOMEM, GX_SUB_DDP, "ddp '%s': out of memory", ddp->name);
    for (size_t i = 0; i < n; i++)
        shapes[i] = (struct ddp_param_shape){ ddp->params[i].bytes, ddp->params[i].dtype };
    struct ddp_assignment a;
    int rc = ddp_assign(shapes, n, order, ddp->cfg.first_bucket_bytes, ddp->cfg.bucket_cap_bytes,
                        &a);
    free(shapes);
    if (rc != GX_OK)
        return rc;

    struct ddp_bucket *nb = calloc(a.nbuckets + 1, sizeof(*nb));
    size_t *offset = calloc(n + 1, sizeof(*offset));
    int *bucket = calloc(n + 1, sizeof(*bucket));
    if (!nb || !offset || !bucket) {
        rc = gx_fail(GX_ENOMEM, GX_SUB_DDP, "ddp '%s': out of memory", ddp->name);
        goto err_free;
    }
    for (size_t k = 0; k < a.nbuckets; k++) {
        struct ddp_bucket *b = &nb[k];
        size_t m = a.start[k + 1] - a.start[k];
        b->params = malloc(m * sizeof(size_t) + 1);
        if (!b->params) {
            rc = gx_fail(GX_ENOMEM, GX_SUB_DDP, "ddp '%s': out of memory", ddp->name);
            goto err_free;
        }
        size_t bytes = 0, count = 0;
        for (size_t j = 0; j < m; j++) {
            size_t p = a.members[a.start[k] + j];
            b->params[j] = p;
            offset[p] = bytes;
            bucket[p] = (int)k;
            bytes += ddp->params[p].bytes;
            count += ddp->params[p].count;
        }
        /* Cache-line aligned and zeroed: unused gradients read as zero. Host
         * or CUDA device memory (ddp_device.c). */
        size_t alloc = (bytes + 63) / 64 * 64 + 64;
        rc = ddp_mem_alloc(ddp, alloc, &b->pub.data);
        if (rc != GX_OK) {
            rc = gx_fail(rc, GX_SUB_DDP, "ddp '%s': cannot allocate a %zu-byte %s bucket: %s",
                         ddp->name, bytes, ddp->dev ? "device" : "host", DDP_PREV_ERROR);
            goto err_free;
        }
        b->bytes = bytes;
        b->pub.size = sizeof(b->pub);
        b->pub.index = (int)k;
        b->pub.count = count;
        b->pub.dtype = ddp->params[b->params[0]].dtype;
        b->pub.op = ddp->cfg.op;
        b->pub.params = b->params;
        b->pub.num_params = m;
        b->pending = m;
    }

    /* Swap in the new layout; a rebuild carries the gradients over (with
     * bucket views they are the reduced gradients the optimizer reads). */
    pthread_mutex_lock(&ddp->lock);
    for (size_t p = 0; p < n; p++) {
        struct ddp_param *pp = &ddp->params[p];
        char *to = (char *)nb[bucket[p]].pub.data + offset[p];
        const char *from = ddp->buckets ? (char *)ddp->buckets[pp->bucket].pub.data + pp->offset
                                        : NULL;
        if (from && ddp->dev && ddp_grad_copy(ddp, to, from, pp->bytes) != GX_OK)
            GX_WARN(GX_SUB_DDP, "ddp '%s': carrying parameter %zu over to the new buckets: %s",
                    ddp->name, p, gx_last_error()); /* queued before the old ones are freed */
        else if (from && !ddp->dev)
            memcpy(to, from, pp->bytes);
        pp->bucket = bucket[p];
        pp->offset = offset[p];
    }
    struct ddp_bucket *old = ddp->buckets;
    size_t old_n = ddp->nbuckets;
    ddp->buckets = nb;
    ddp->nbuckets = a.nbuckets;
    pthread_mutex_unlock(&ddp->lock);
    free_buckets(ddp, old, old_n);
    free(offset);
    free(bucket);
    ddp_assignment_free(&a);
    return GX_OK;

err_free:
    if (nb)
        free_buckets(ddp, nb, a.nbuckets);
    free(offset);
    free(bucket);
    ddp_assignment_free(&a);
    return rc;
}

void ddp_rebuild_order(const size_t *observed, size_t nobserved, size_t n, size_t *order)
{
    unsigned char *seen = calloc(n + 1, 1);
    if (!seen) { /* out of memory: keep reverse registration order */
        ddp_default_order(order, n);
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < nobserved; i++)
        if (observed[i] < n && !seen[observed[i]]) {
            seen[observed[i]] = 1;
            order[k++] = observed[i];
        }
    for (size_t i = n; i-- > 0;)
        if (!seen[i])
            order[k++] = i;
    free(seen);
}

int ddp_rebuild(struct gx_ddp *ddp)
{
    size_t n = ddp->nparams;
    uint64_t *order64 = calloc(n + 1, sizeof(*order64));
    size_t *order = calloc(n + 1, sizeof(*order));
    int rc = GX_ENOMEM;
    if (!order64 || !order) {
        rc = gx_fail(rc, GX_SUB_DDP, "ddp '%s': out of memory", ddp->name);
        goto out;
    }
    if (ddp->rank == 0) {
        ddp_rebuild_order(ddp->ready_order, ddp->ready_order_len, n, order);
        for (size_t i = 0; i < n; i++)
            order64[i] = order[i];
    }
    rc = gx_broadcast(ddp->comm, order64, order64, n, GX_UINT64, 0);
    if (rc != GX_OK) {
        rc = gx_fail(rc, GX_SUB_DDP, "ddp '%s': broadcast of rank 0's bucket order failed: %s",
                     ddp->name, DDP_PREV_ERROR);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = order64[i] < n ? (size_t)order64[i] : n; /* ddp_assign rejects n */
    size_t before = ddp->nbuckets;
    rc = ddp_layout_build(ddp, order);
    if (rc == GX_OK) {
        ddp->rebuilt = true;
        GX_INFO(GX_SUB_DDP, "ddp '%s': rebuilt %zu buckets (were %zu) from rank 0's ready order",
                ddp->name, ddp->nbuckets, before);
    }
out:
    free(order64);
    free(order);
    return rc;
}
