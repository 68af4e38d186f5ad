/*
 * fabric_mrtab.c - registration table and packed remote keys of the software
 * providers. The target checks every remote write against this table, so a
 * stale, forged or out-of-range key never reaches memory it does not cover.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/sock.h"
#include "fabric/fabric_provider.h"

int gx_fab_mrtab_init(struct gx_fab_mrtab *tab)
{
    memset(tab, 0, sizeof(*tab));
    if (gx_random_bytes(&tab->cookie_seed, sizeof(tab->cookie_seed)) != GX_OK)
        tab->cookie_seed = gx_now_ns() * 0x9e3779b97f4a7c15ull;
    return GX_OK;
}

void gx_fab_mrtab_fini(struct gx_fab_mrtab *tab)
{
    uint32_t leaked = 0;
    for (uint32_t i = 0; i < tab->nslots; i++) {
        if (tab->slots[i]) {
            leaked++;
            free(tab->slots[i]);
        }
    }
    if (leaked)
        GX_INFO(GX_SUB_FABRIC, "domain closed with %u memory registrations still open", leaked);
    free(tab->slots);
    memset(tab, 0, sizeof(*tab));
}

static uint64_t next_cookie(struct gx_fab_mrtab *tab)
{
    /* splitmix64: unpredictable enough to refuse stale keys of reused slots. */
    uint64_t z = (tab->cookie_seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int gx_fab_mrtab_reg(struct gx_fab_mrtab *tab, struct gx_fab_domain *dom, void *addr, size_t len,
                     enum gx_fab_mem_type type, unsigned access, struct gx_fab_mr **out)
{
    if (!out || (!addr && len) || (uintptr_t)addr + len < (uintptr_t)addr)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "mr_reg: invalid range %p+%zu", addr, len);
    if (type != GX_FAB_MEM_HOST)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC,
                       "%s: only host memory can be registered (memory type %d)",
                       dom->prov->name, (int)type);
    uint32_t idx = 0;
    while (idx < tab->nslots && tab->slots[idx])
        idx++;
    if (idx == tab->nslots) {
        uint32_t n = tab->nslots ? tab->nslots * 2 : 64;
        struct gx_fab_swmr **slots = realloc(tab->slots, n * sizeof(*slots));
        if (!slots)
            return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "mr_reg: out of memory");
        memset(slots + tab->nslots, 0, (n - tab->nslots) * sizeof(*slots));
        tab->slots = slots;
        tab->nslots = n;
    }
    struct gx_fab_swmr *mr = calloc(1, sizeof(*mr));
    if (!mr)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "mr_reg: out of memory");
    mr->base.dom = dom;
    mr->base.addr = addr;
    mr->base.len = len;
    mr->base.type = type;
    mr->base.access = access;
    mr->index = idx;
    mr->cookie = next_cookie(tab);
    mr->in_use = true;
    tab->slots[idx] = mr;
    *out = &mr->base;
    return GX_OK;
}

int gx_fab_mrtab_dereg(struct gx_fab_mrtab *tab, struct gx_fab_mr *base)
{
    struct gx_fab_swmr *mr = (struct gx_fab_swmr *)base;
    if (mr->index >= tab->nslots || tab->slots[mr->index] != mr)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "mr_dereg: unknown registration %p", (void *)mr);
    tab->slots[mr->index] = NULL;
    free(mr);
    return GX_OK;
}

int gx_fab_mrtab_pack(const struct gx_fab_mr *base, struct gx_fab_rkey *out)
{
    const struct gx_fab_swmr *mr = (const struct gx_fab_swmr *)base;
    struct gx_fab_swkey key = {
        .magic = GX_FAB_SWKEY_MAGIC,
        .index = mr->index,
        .cookie = mr->cookie,
        .base = (uint64_t)(uintptr_t)base->addr,
        .len = base->len,
    };
    memset(out, 0, sizeof(*out));
    out->len = sizeof(key);
    memcpy(out->bytes, &key, sizeof(key));
    return GX_OK;
}

int gx_fab_swkey_unpack(const struct gx_fab_ep *ep, const struct gx_fab_rkey *rkey, uint64_t raddr,
                        size_t len, struct gx_fab_swkey *out)
{
    struct gx_fab_swkey key;
    if (!rkey || rkey->len != sizeof(key))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC,
                       "%s: remote key of %u bytes, this provider packs %zu (key from another "
                       "provider or corrupted)",
                       ep->name, rkey ? rkey->len : 0, sizeof(key));
    memcpy(&key, rkey->bytes, sizeof(key));
    if (key.magic != GX_FAB_SWKEY_MAGIC)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "%s: remote key has a bad magic 0x%08x",
                       ep->name, key.magic);
    if (raddr < key.base || len > key.len || raddr - key.base > key.len - len)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC,
                       "%s: remote write of %zu bytes at 0x%" PRIx64
                       " is outside the registration [0x%" PRIx64 ", +%" PRIu64 ")",
                       ep->name, len, raddr, key.base, key.len);
    *out = key;
    return GX_OK;
}

void *gx_fab_mrtab_resolve(const struct gx_fab_mrtab *tab, uint32_t index, uint64_t cookie,
                           uint64_t raddr, uint64_t len)
{
    if (index >= tab->nslots || !tab->slots[index])
        return NULL;
    const struct gx_fab_swmr *mr = tab->slots[index];
    if (mr->cookie != cookie || !(mr->base.access & GX_FAB_ACCESS_REMOTE_WRITE))
        return NULL;
    uint64_t base = (uint64_t)(uintptr_t)mr->base.addr;
    if (raddr < base || len > mr->base.len || raddr - base > mr->base.len - len)
        return NULL;
    return (void *)(uintptr_t)raddr;
}
