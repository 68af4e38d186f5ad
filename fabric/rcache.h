/*
 * rcache.h - registration cache: repeated collectives on the same buffers
 * register once.
 *
 * Owns: a bounded set of registrations keyed by (address range, memory type).
 * A lookup hits when a cached registration of the same memory type covers the
 * whole range; a miss registers the range widened to whole pages. Entries are
 * reference counted while in use; when the cache holds more than max_entries
 * or max_bytes, the least recently used idle entries are deregistered.
 * gx_fab_rcache_invalidate() must be called when memory is freed or remapped
 * (the cache does not intercept munmap): overlapping idle entries are
 * deregistered at once, busy ones when their last user puts them back.
 *
 * Per-operation mode (gx_fab_rcache_set_per_op, and every domain cache of a
 * domain with rcache_per_op set, e.g. verbs with GX_IB_RCACHE=per-op, the
 * default): an entry is deregistered as soon as its last user puts it back,
 * so a registration never outlives the operations that use it and memory
 * freed and mapped again between operations is registered afresh. Ops in
 * flight on the same range still share one registration.
 * Not thread-safe: one per domain, used by the progress thread.
 */
#ifndef GX_FABRIC_RCACHE_H
#define GX_FABRIC_RCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric/fabric.h"

struct gx_fab_rcache;
struct gx_fab_rcache_entry;

/** How the cache registers and deregisters (a domain, or a test double). */
struct gx_fab_rcache_ops {
    int (*reg)(void *ctx, void *addr, size_t len, enum gx_fab_mem_type type, void **handle);
    void (*dereg)(void *ctx, void *handle);
};

struct gx_fab_rcache_stats {
    uint64_t hits, misses, evictions, invalidations;
    uint64_t per_op_releases;  /* entries dropped at their last put (per-op mode) */
    size_t entries, bytes;
};

int gx_fab_rcache_create(const struct gx_fab_rcache_ops *ops, void *ctx, size_t max_entries,
                         size_t max_bytes, struct gx_fab_rcache **out);
/** A cache over a domain's gx_fab_mr_reg with `access`; handles are
 *  struct gx_fab_mr *. Limits from GX_FAB_RCACHE_ENTRIES / GX_FAB_RCACHE_BYTES;
 *  per-operation when the domain says so (dom->rcache_per_op). */
int gx_fab_rcache_create_domain(struct gx_fab_domain *dom, unsigned access,
                                struct gx_fab_rcache **out);
/** Keep idle entries (false, the default of gx_fab_rcache_create) or
 *  deregister each entry when its last user puts it back (true). */
void gx_fab_rcache_set_per_op(struct gx_fab_rcache *rc, bool per_op);
/** Deregisters everything; entries still held are reported and released. */
void gx_fab_rcache_destroy(struct gx_fab_rcache *rc);

/** Find or make a registration covering [addr, addr+len); hold it until put. */
int gx_fab_rcache_get(struct gx_fab_rcache *rc, void *addr, size_t len, enum gx_fab_mem_type type,
                      struct gx_fab_rcache_entry **out);
void gx_fab_rcache_put(struct gx_fab_rcache *rc, struct gx_fab_rcache_entry *e);
/** The provider's registration (struct gx_fab_mr * for a domain cache). */
void *gx_fab_rcache_handle(const struct gx_fab_rcache_entry *e);

/** Forget every registration overlapping [addr, addr+len). */
void gx_fab_rcache_invalidate(struct gx_fab_rcache *rc, const void *addr, size_t len);

void gx_fab_rcache_stats(const struct gx_fab_rcache *rc, struct gx_fab_rcache_stats *out);

#endif
