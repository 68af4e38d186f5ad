/*
 * coll_scratch.c - the scratch pool a communicator's schedules draw from
 * (schedule.h, struct coll_scratch_pool; cs_scratch takes, the engine gives
 * back when an op finishes). Kept buffers spare the next collective a fresh
 * large malloc, which costs a page fault per 4 KiB (the kernel zeroes every
 * page) and dominated large all-reduces.
 *
 * Owns: the pool's buffers and its lock. Must not touch: the engine's
 * state (the pool is embedded in it, but knows nothing of it).
 */
#include <stdlib.h>

#include "collectives/schedule/schedule.h"
#include "common/log.h"

void coll_scratch_pool_init(struct coll_scratch_pool *p)
{
    pthread_mutex_init(&p->mu, NULL);
    for (int i = 0; i < SCRATCH_POOL; i++) {
        p->buf[i] = NULL;
        p->size[i] = 0;
    }
}

void coll_scratch_pool_fini(struct coll_scratch_pool *p)
{
    for (int i = 0; i < SCRATCH_POOL; i++)
        free(p->buf[i]);
    pthread_mutex_destroy(&p->mu);
}

/* Take the smallest pooled buffer that fits, or allocate. */
void *coll_scratch_take(struct coll_scratch_pool *p, size_t bytes, size_t *size_out)
{
    pthread_mutex_lock(&p->mu);
    int best = -1;
    for (int i = 0; i < SCRATCH_POOL; i++)
        if (p->buf[i] && p->size[i] >= bytes && (best < 0 || p->size[i] < p->size[best]))
            best = i;
    void *buf = NULL;
    if (best >= 0) {
        buf = p->buf[best];
        *size_out = p->size[best];
        p->buf[best] = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    if (!buf) {
        buf = malloc(bytes);
        *size_out = bytes;
        GX_TRACE(GX_SUB_COLL, "scratch: new %zu-byte buffer", bytes);
    }
    return buf;
}

/* Give a buffer back: kept in a free slot, else in place of a smaller one. */
void coll_scratch_give(struct coll_scratch_pool *p, void *buf, size_t size)
{
    pthread_mutex_lock(&p->mu);
    int slot = -1;
    for (int i = 0; i < SCRATCH_POOL && slot < 0; i++)
        if (!p->buf[i])
            slot = i;
    for (int i = 0; i < SCRATCH_POOL && slot < 0; i++)
        if (p->size[i] < size)
            slot = i;
    void *drop = buf;
    if (slot >= 0) {
        drop = p->buf[slot];
        p->buf[slot] = buf;
        p->size[slot] = size;
    }
    pthread_mutex_unlock(&p->mu);
    free(drop);
}
