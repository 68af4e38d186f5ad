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
#include "common/trace.h"

static double seconds(uint64_t ns)
{
    return (double)ns * 1e-9;
}

/* ---- GX_TRACE (common/trace.h) ---------------------------------------------- */

void ddp_trace_bucket(const struct gx_ddp *ddp, const struct ddp_bucket *b, uint64_t now)
{
    struct gx_trace_rec ready = {
        .ts = b->ready_ns ? b->ready_ns : b->launch_ns, .name = "bucket ready", .cat = "ddp",
        .key = { "bucket", "iteration" },
        .val = { b->pub.index, (int64_t)ddp->stats.iterations },
        .lane = GX_LANE_DDP, .kind = GX_TR_INSTANT,
    };
    gx_trace_emit(&ready);
    struct gx_trace_rec r = {
        .ts = b->launch_ns, .dur = now - b->launch_ns, .name = "bucket all-reduce", .cat = "ddp",
        .key = { "bucket", "bytes", "params", "iteration", "ready_to_launch_ns", "status" },
        .val = { b->pub.index, (int64_t)b->bytes, (int64_t)b->pub.num_params,
                 (int64_t)ddp->stats.iterations,
                 b->ready_ns && b->launch_ns > b->ready_ns ? (int64_t)(b->launch_ns - b->ready_ns)
                                                           : 0,
                 b->status },
        .lane = GX_LANE_DDP, .kind = GX_TR_ASYNC,
    };
    gx_trace_emit(&r);
}

/* The backward pass as DDP sees it (first gradient in to gx_ddp_finish
 * called) and the wait in finish after it. */
static void trace_iteration(const struct gx_ddp *ddp, uint64_t first, uint64_t now)
{
    struct gx_trace_rec bw = {
        .ts = first, .dur = ddp->t.finish_call_ns - first, .name = "backward", .cat = "ddp",
        .key = { "iteration", "comm_overlapped_ns", "comm_ns" },
        .val = { (int64_t)ddp->stats.iterations, (int64_t)ddp->t.overlap_ns,
                 (int64_t)ddp->t.busy_ns },
        .lane = GX_LANE_BACKWARD, .kind = GX_TR_SPAN,
    };
    gx_trace_emit(&bw);
    struct gx_trace_rec fin = {
        .ts = ddp->t.finish_call_ns, .dur = now - ddp->t.finish_call_ns,
        .name = "gx_ddp_finish wait", .cat = "ddp",
        .key = { "iteration" }, .val = { (int64_t)ddp->stats.iterations },
        .lane = GX_LANE_BACKWARD, .kind = GX_TR_SPAN,
    };
    gx_trace_emit(&fin);
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
        if (gx_trace_on())
            trace_iteration(ddp, first, now);
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
