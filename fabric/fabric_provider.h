/*
 * fabric_provider.h - helpers for provider implementations (not for callers).
 *
 * Owns: the software completion queue that shm and tcp share (a ring of
 * completions sized by the endpoints bound to it, whose poll drives every
 * bound endpoint's progress), the registration table that checks remote keys
 * on the target side, and the list of built providers.
 * Must not touch: anything above the fabric layer.
 */
#ifndef GX_FABRIC_FABRIC_PROVIDER_H
#define GX_FABRIC_FABRIC_PROVIDER_H

#include <stdbool.h>
#include <stdint.h>

#include "fabric/fabric.h"

/* Providers built into this library (fabric_registry.c lists them). */
extern const struct gx_fab_provider gx_fab_shm_provider;
extern const struct gx_fab_provider gx_fab_tcp_provider;

/** Log an endpoint's failure once, the way every provider does: as an error
 *  (recorded as the thread's last error) when operations were outstanding or
 *  the cause is not a plain peer close, else at info level. `msg` says why. */
void gx_fab_log_ep_failure(const char *prov, const char *ep_name, bool busy, int status,
                           const char *msg);

/** Copy `prov->ops` into `ops`, replacing every NULL with its stub. */
void gx_fab_fill_ops(struct gx_fab_ops *ops, const struct gx_fab_ops *prov_ops);

/* ---------------------------------------------------------------------------
 * Software completion queue.
 * ------------------------------------------------------------------------ */
struct gx_fab_swcq {
    struct gx_fab_cq base;
    struct gx_fab_cqe *ring;
    uint32_t cap;               /* entries; sum of what bound endpoints reserved */
    uint32_t reserved;
    uint64_t head;              /* next to write */
    uint64_t tail;              /* next to read */
    struct gx_fab_ep **eps;     /* bound endpoints, progressed on every poll */
    int neps;
    int eps_cap;
    void (*progress)(struct gx_fab_ep *ep);
};

int gx_fab_swcq_init(struct gx_fab_swcq *cq, struct gx_fab_domain *dom,
                     void (*progress)(struct gx_fab_ep *ep));
void gx_fab_swcq_fini(struct gx_fab_swcq *cq);
/** Bind `ep` and reserve `entries` completions for its ops (control path). */
int gx_fab_swcq_attach(struct gx_fab_swcq *cq, struct gx_fab_ep *ep, uint32_t entries);
void gx_fab_swcq_detach(struct gx_fab_swcq *cq, struct gx_fab_ep *ep, uint32_t entries);
int gx_fab_swcq_poll(struct gx_fab_swcq *cq, struct gx_fab_cqe *out, int max);

/** Append a completion. Never fails: endpoints reserved room at attach. */
static inline void gx_fab_swcq_push(struct gx_fab_swcq *cq, const struct gx_fab_cqe *e)
{
    cq->ring[cq->head % cq->cap] = *e;
    cq->head++;
}

/* ---------------------------------------------------------------------------
 * Registration table and packed remote keys for software providers.
 *
 * A packed key is 32 bytes: magic, table index, a random per-registration
 * cookie (a stale key of a reused slot is refused) and the registered range,
 * so the initiator can refuse an out-of-bounds write before sending it; the
 * target checks index, cookie and range again against its own table.
 * ------------------------------------------------------------------------ */
#define GX_FAB_SWKEY_MAGIC 0x4b525847u /* "GXRK" */

struct gx_fab_swkey {
    uint32_t magic;
    uint32_t index;
    uint64_t cookie;
    uint64_t base;
    uint64_t len;
};
_Static_assert(sizeof(struct gx_fab_swkey) == 32, "swkey layout");

struct gx_fab_swmr {
    struct gx_fab_mr base;
    uint32_t index;
    uint64_t cookie;
    bool in_use;
};

struct gx_fab_mrtab {
    struct gx_fab_swmr **slots;
    uint32_t nslots;
    uint64_t cookie_seed;
};

int gx_fab_mrtab_init(struct gx_fab_mrtab *tab);
void gx_fab_mrtab_fini(struct gx_fab_mrtab *tab);
int gx_fab_mrtab_reg(struct gx_fab_mrtab *tab, struct gx_fab_domain *dom, void *addr, size_t len,
                     enum gx_fab_mem_type type, unsigned access, struct gx_fab_mr **out);
int gx_fab_mrtab_dereg(struct gx_fab_mrtab *tab, struct gx_fab_mr *mr);
int gx_fab_mrtab_pack(const struct gx_fab_mr *mr, struct gx_fab_rkey *out);

/** Initiator side: unpack `rkey` and check [raddr, raddr+len) lies inside it.
 *  GX_EINVAL (logged, naming the endpoint) for a wrong size/magic or range. */
int gx_fab_swkey_unpack(const struct gx_fab_ep *ep, const struct gx_fab_rkey *rkey,
                        uint64_t raddr, size_t len, struct gx_fab_swkey *out);

/** Target side: the local address for a remote write of [raddr, raddr+len)
 *  under (index, cookie), or NULL when the key is unknown/stale, the
 *  registration lacks remote write access, or the range is outside it. */
void *gx_fab_mrtab_resolve(const struct gx_fab_mrtab *tab, uint32_t index, uint64_t cookie,
                           uint64_t raddr, uint64_t len);

/** "rank 3 (pid 1234)"-style naming helper for ep->name. */
void gx_fab_ep_set_name(struct gx_fab_ep *ep, const char *prov, int peer_rank, const char *where);

#endif
