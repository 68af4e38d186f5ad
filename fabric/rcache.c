/*
 * rcache.c - registration cache (see rcache.h). Entries live on one list in
 * recency order (most recent first); lookups scan it, which is fine for the
 * few hundred buffers a training job registers. A tree keyed by address would
 * replace the scan if a job ever held thousands.
 */
#include "fabric/rcache.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_rcache_entries, "GX_FAB_RCACHE_ENTRIES", GX_PARAM_INT, "1024", NULL,
                "Most registrations the fabric registration cache keeps.");
GX_PARAM_DEFINE(gx_param_rcache_bytes, "GX_FAB_RCACHE_BYTES", GX_PARAM_SIZE, "16G", NULL,
                "Most bytes of memory the fabric registration cache keeps registered.");

struct gx_fab_rcache_entry {
    struct gx_fab_rcache_entry *prev, *next; /* recency list; detached when invalid */
    uintptr_t start, end;                    /* registered range, page aligned */
    enum gx_fab_mem_type type;
    void *handle;
    int refs;
    bool invalid;
};

struct gx_fab_rcache {
    struct gx_fab_rcache_ops ops;
    void *ctx;
    size_t max_entries, max_bytes;
    struct gx_fab_rcache_entry *head, *tail;
    struct gx_fab_rcache_stats st;
    int held_invalid; /* invalidated entries still referenced */
    struct gx_fab_domain *dom;
    unsigned access;
    bool per_op; /* drop entries at their last put */
};

int gx_fab_rcache_create(const struct gx_fab_rcache_ops *ops, void *ctx, size_t max_entries,
                         size_t max_bytes, struct gx_fab_rcache **out)
{
    struct gx_fab_rcache *rc = calloc(1, sizeof(*rc));
    if (!rc)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "rcache: out of memory");
    rc->ops = *ops;
    rc->ctx = ctx;
    rc->max_entries = max_entries ? max_entries : 1;
    rc->max_bytes = max_bytes ? max_bytes : SIZE_MAX;
    *out = rc;
    return GX_OK;
}

static int dom_reg(void *ctx, void *addr, size_t len, enum gx_fab_mem_type type, void **handle)
{
    struct gx_fab_rcache *rc = ctx;
    struct gx_fab_mr *mr;
    int r = gx_fab_mr_reg(rc->dom, addr, len, type, rc->access, &mr);
    if (r == GX_OK)
        *handle = mr;
    return r;
}

static void dom_dereg(void *ctx, void *handle)
{
    gx_fab_mr_dereg(handle);
}

int gx_fab_rcache_create_domain(struct gx_fab_domain *dom, unsigned access,
                                struct gx_fab_rcache **out)
{
    long long entries = 1024;
    size_t bytes = (size_t)16 << 30;
    if (gx_param_int(&gx_param_rcache_entries, &entries) != GX_OK ||
        gx_param_size(&gx_param_rcache_bytes, &bytes) != GX_OK)
        return GX_EINVAL;
    static const struct gx_fab_rcache_ops ops = { dom_reg, dom_dereg };
    int r = gx_fab_rcache_create(&ops, NULL, entries > 0 ? (size_t)entries : 1, bytes, out);
    if (r != GX_OK)
        return r;
    (*out)->ctx = *out;
    (*out)->dom = dom;
    (*out)->access = access;
    (*out)->per_op = dom->rcache_per_op != 0;
    return GX_OK;
}

static void unlink_entry(struct gx_fab_rcache *rc, struct gx_fab_rcache_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        rc->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        rc->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(struct gx_fab_rcache *rc, struct gx_fab_rcache_entry *e)
{
    e->prev = NULL;
    e->next = rc->head;
    if (rc->head)
        rc->head->prev = e;
    rc->head = e;
    if (!rc->tail)
        rc->tail = e;
}

static void release(struct gx_fab_rcache *rc, struct gx_fab_rcache_entry *e)
{
    rc->ops.dereg(rc->ctx, e->handle);
    free(e);
}

/* Drop an entry from the cache's accounting; deregister it if idle. */
static void retire(struct gx_fab_rcache *rc, struct gx_fab_rcache_entry *e)
{
    unlink_entry(rc, e);
    rc->st.entries--;
    rc->st.bytes -= e->end - e->start;
    if (e->refs == 0) {
        release(rc, e);
    } else {
        e->invalid = true;
        rc->held_invalid++;
    }
}

static void evict(struct gx_fab_rcache *rc)
{
    struct gx_fab_rcache_entry *e = rc->tail;
    while (e && (rc->st.entries > rc->max_entries || rc->st.bytes > rc->max_bytes)) {
        struct gx_fab_rcache_entry *prev = e->prev;
        if (e->refs == 0) {
            retire(rc, e);
            rc->st.evictions++;
        }
        e = prev;
    }
}

int gx_fab_rcache_get(struct gx_fab_rcache *rc, void *addr, size_t len, enum gx_fab_mem_type type,
                      struct gx_fab_rcache_entry **out)
{
    uintptr_t start = (uintptr_t)addr, end = start + (len ? len : 1);
    if (!addr || end < start)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "rcache: invalid range %p+%zu", addr, len);
    for (struct gx_fab_rcache_entry *e = rc->head; e; e = e->next) {
        if (e->type == type && e->start <= start && end <= e->end) {
            unlink_entry(rc, e);
            push_front(rc, e);
            e->refs++;
            rc->st.hits++;
            *out = e;
            return GX_OK;
        }
    }
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t rstart = start & ~(page - 1);
    uintptr_t rend = end > UINTPTR_MAX - page ? end : (end + page - 1) & ~(page - 1);
    struct gx_fab_rcache_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "rcache: out of memory");
    int r = rc->ops.reg(rc->ctx, (void *)rstart, rend - rstart, type, &e->handle);
    if (r != GX_OK) {
        free(e);
        return r;
    }
    e->start = rstart;
    e->end = rend;
    e->type = type;
    e->refs = 1;
    push_front(rc, e);
    rc->st.misses++;
    rc->st.entries++;
    rc->st.bytes += rend - rstart;
    evict(rc);
    *out = e;
    return GX_OK;
}

void gx_fab_rcache_put(struct gx_fab_rcache *rc, struct gx_fab_rcache_entry *e)
{
    if (!e)
        return;
    if (--e->refs > 0)
        return;
    if (e->invalid) {
        rc->held_invalid--;
        release(rc, e);
        return;
    }
    if (rc->per_op) {
        retire(rc, e);
        rc->st.per_op_releases++;
        return;
    }
    evict(rc);
}

void gx_fab_rcache_set_per_op(struct gx_fab_rcache *rc, bool per_op)
{
    rc->per_op = per_op;
    if (!per_op)
        return;
    for (struct gx_fab_rcache_entry *e = rc->head; e;) {
        struct gx_fab_rcache_entry *next = e->next;
        if (e->refs == 0) {
            retire(rc, e);
            rc->st.per_op_releases++;
        }
        e = next;
    }
}

void *gx_fab_rcache_handle(const struct gx_fab_rcache_entry *e)
{
    return e->handle;
}

void gx_fab_rcache_invalidate(struct gx_fab_rcache *rc, const void *addr, size_t len)
{
    uintptr_t start = (uintptr_t)addr, end = start + len;
    for (struct gx_fab_rcache_entry *e = rc->head; e;) {
        struct gx_fab_rcache_entry *next = e->next;
        if (e->start < end && start < e->end) {
            retire(rc, e);
            rc->st.invalidations++;
        }
        e = next;
    }
}

void gx_fab_rcache_stats(const struct gx_fab_rcache *rc, struct gx_fab_rcache_stats *out)
{
    *out = rc->st;
}

void gx_fab_rcache_destroy(struct gx_fab_rcache *rc)
{
    if (!rc)
        return;
    if (rc->held_invalid)
        GX_WARN(GX_SUB_FABRIC, "rcache: destroyed with %d invalidated registrations still in use",
                rc->held_invalid);
    for (struct gx_fab_rcache_entry *e = rc->head; e;) {
        struct gx_fab_rcache_entry *next = e->next;
        if (e->refs)
            GX_WARN(GX_SUB_FABRIC, "rcache: destroyed while a registration of %zu bytes is "
                    "still in use", (size_t)(e->end - e->start));
        release(rc, e);
        e = next;
    }
    free(rc);
}
