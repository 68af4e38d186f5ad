/*
 * ddp_stats.c - how long the buckets communicated and how much of it hid
 * behind backward.
 *
 * Owns: the timing fields of struct gx_ddp (t, stats). Must not touch the
 * buckets' data or the communicator. Every ddp_stats_* helper runs under
 * ddp->lock.
 *
 * Communication time is the union of the buckets' in-flight intervals (from
 * launch to the progress thread seeing completion), so two buckets in flight
 * together count once. The overlapped part is the share of that union before
 * gx_ddp_finish() was called, i.e. while backward was still computing; what
 * remains after is exposed (finish waits for it).
 */
#include <string.h>

#include "collectives/ddp/ddp_internal.h"
#include "common/clock.h"
#include "common/log.h"

static double seconds(uint64_t ns)
{
    return (double)ns * 1e-9;
}

void ddp_stats_first_ready(struct gx_ddp *ddp, uint64_t now)
{
    if (ddp->t.first_ready_ns == 0)
        ddp->t.first_ready_ns = now;
}

void ddp_stats_launch(struct gx_ddp *ddp, uint64_t now)
{
    if (ddp->t.inflight++ == 0)
        ddp->t.busy_start_ns = now;
}

void ddp_stats_done(struct gx_ddp *ddp, struct ddp_bucket *b, uint64_t now)
{
    if (--ddp->t.inflight == 0)
        ddp->t.busy_ns += now - ddp->t.busy_start_ns;
    ddp->stats.buckets_reduced++;
    ddp->stats.bytes_reduced += b->bytes;
}

void ddp_stats_finish_called(struct gx_ddp *ddp, uint64_t now)
{
    ddp->t.finish_call_ns = now;
    ddp->t.overlap_ns = ddp->t.busy_ns + (ddp->t.inflight ? now - ddp->t.busy_start_ns : 0);
}

void ddp_stats_iteration_end(struct gx_ddp *ddp, uint64_t now, bool synced)
{
    struct gx_ddp_stats *s = &ddp->stats;
    if (synced) {
        uint64_t first = ddp->t.first_ready_ns ? ddp->t.first_ready_ns : ddp->t.finish_call_ns;
        s->iterations++;
        s->last_comm_seconds = seconds(ddp->t.busy_ns);
        s->last_overlap_seconds = seconds(ddp->t.overlap_ns);
        s->last_finish_wait_seconds = seconds(now - ddp->t.finish_call_ns);
        s->last_backward_seconds = seconds(ddp->t.finish_call_ns - first);
        s->comm_seconds += s->last_comm_seconds;
        s->overlap_seconds += s->last_overlap_seconds;
        s->finish_wait_seconds += s->last_finish_wait_seconds;
        s->backward_seconds += s->last_backward_seconds;
    } else {
        s->no_sync_iterations++;
    }
    memset(&ddp->t, 0, sizeof(ddp->t));
}

GX_API int gx_ddp_get_stats(const struct gx_ddp *ddp, struct gx_ddp_stats *stats)
{
    gx_clear_last_error();
    if (!ddp)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_get_stats: ddp is NULL");
    if (!stats)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_get_stats: stats is NULL");
    if (stats->size < sizeof(size_t))
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_get_stats: stats->size is %zu; initialise "
                       "it with GX_DDP_STATS_INIT", stats->size);
    struct gx_ddp *d = (struct gx_ddp *)ddp; /* the lock is not part of the value */
    struct gx_ddp_stats copy;
    pthread_mutex_lock(&d->lock);
    copy = d->stats;
    copy.buckets = (int)d->nbuckets;
    copy.rebuilt = d->rebuilt;
    pthread_mutex_unlock(&d->lock);
    size_t n = stats->size < sizeof(copy) ? stats->size : sizeof(copy);
    copy.size = stats->size;
    memcpy(stats, &copy, n);
    return GX_OK;
}

GX_API int gx_ddp_reset_stats(struct gx_ddp *ddp)
{
    gx_clear_last_error();
    if (!ddp)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_reset_stats: ddp is NULL");
    pthread_mutex_lock(&ddp->lock);
    memset(&ddp->stats, 0, sizeof(ddp->stats));
    ddp->stats.size = sizeof(ddp->stats);
    pthread_mutex_unlock(&ddp->lock);
    return GX_OK;
}
