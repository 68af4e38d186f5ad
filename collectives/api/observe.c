/*
 * observe.c - what an operator sees of a communicator: gx_comm_stats (the
 * counters, docs/observability.md), the start of the timeline (GX_TRACE,
 * common/trace.h) with the clock offset that puts every rank on rank 0's
 * clock, and the list of live communicators the metrics file
 * (GX_METRICS_FILE, metrics.c) reports.
 *
 * Room api/. Reads the counters the rooms below keep (the transport's per
 * peer, the communicator's tally, common/stats.h's process-wide ones);
 * changes nothing in them.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/bootstrap/boot.h"
#include "collectives/bootstrap/boot_coll.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/engine/coll.h"
#include "collectives/transport/xport.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"
#include "common/stats.h"
#include "common/trace.h"

GX_PARAM_DEFINE(gx_param_trace_clock, "GX_TRACE_CLOCK", GX_PARAM_ENUM, "auto", "auto|exchange",
                "How a trace (GX_TRACE) aligns clocks: auto measures the offset to rank 0 "
                "over the bootstrap for ranks on other machines only (a machine's processes "
                "share one clock); exchange measures every rank (for tests).");

#define CLOCK_SYNC_MS 5000 /* a slow or absent peer only costs the trace its alignment */

/* ---- the live communicators (metrics.c reports them) ------------------ */

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gx_comm **live;
static int nlive, live_cap;

void gx_observe_lock(void)
{
    pthread_mutex_lock(&live_mu);
}

void gx_observe_unlock(void)
{
    pthread_mutex_unlock(&live_mu);
}

int gx_observe_live(struct gx_comm ***comms)
{
    *comms = live;
    return nlive;
}

static void align_clock(struct gx_comm *c)
{
    int mode = 0;
    (void)gx_param_enum(&gx_param_trace_clock, &mode);
    struct boot_group g = gx_comm_group(c);
    int64_t offset = 0;
    uint64_t rtt = 0;
    uint64_t deadline = gx_deadline_after_ms(CLOCK_SYNC_MS);
    int rc = boot_clock_offset(&g, gx_comm_next_seq(c), mode == 1, deadline, &offset, &rtt);
    if (rc != GX_OK) {
        GX_WARN(GX_SUB_INIT, "trace: could not measure this rank's clock against rank 0's "
                "(%s); its events keep their own clock", gx_strerror(rc));
        return;
    }
    gx_trace_set_clock_offset(offset, rtt);
    if (rtt)
        GX_INFO(GX_SUB_INIT, "trace: clock offset to rank 0 %lld ns (+- %llu ns)",
                (long long)offset, (unsigned long long)(rtt / 2));
}

void gx_observe_comm_up(struct gx_comm *c)
{
    if (c->comm_id == WORLD_COMM_ID && gx_trace_wanted()) {
        const struct boot_rank_record *me = gx_boot_record(c->boot, c->world_ranks[c->rank]);
        /* Only the communicator that started the trace sets its clock: a
         * later one (torch makes one per process group) has another rank 0. */
        if (gx_trace_start(c->world_ranks[c->rank], gx_boot_record(c->boot, 0)->world_size,
                           me->host))
            align_clock(c);
    }
    pthread_mutex_lock(&live_mu);
    if (nlive == live_cap) {
        int cap = live_cap ? 2 * live_cap : 8;
        struct gx_comm **n = realloc(live, (size_t)cap * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&live_mu);
            return; /* not reported in the metrics file; nothing else changes */
        }
        live = n;
        live_cap = cap;
    }
    live[nlive++] = c;
    pthread_mutex_unlock(&live_mu);
    gx_metrics_comm_up(c->world_ranks[c->rank], gx_boot_record(c->boot, 0)->world_size);
}

void gx_observe_comm_down(struct gx_comm *c)
{
    bool found = false;
    pthread_mutex_lock(&live_mu);
    for (int i = 0; i < nlive; i++)
        if (live[i] == c) {
            found = true;
            break;
        }
    pthread_mutex_unlock(&live_mu);
    if (!found)
        return;
    gx_metrics_write_now(); /* its last figures, before it goes */
    pthread_mutex_lock(&live_mu);
    for (int i = 0; i < nlive; i++)
        if (live[i] == c) {
            live[i] = live[--nlive];
            break;
        }
    int left = nlive;
    pthread_mutex_unlock(&live_mu);
    if (c->comm_id == WORLD_COMM_ID)
        gx_trace_flush("destroy");
    if (left == 0)
        gx_metrics_stop();
}

/* ---- gx_comm_stats --------------------------------------------------------- */

void gx_observe_fill(struct gx_comm *c, struct gx_comm_stats *s)
{
    memset(s, 0, sizeof(*s));
    s->size = sizeof(*s);
    if (c->xport)
        gx_xport_stats(c->xport, s);
    s->collectives = coll_issued(c); /* the engine's sequence: no count on the hot path */
    s->collectives_failed = __atomic_load_n(&c->tally.collectives_failed, __ATOMIC_RELAXED);
    s->p2p = __atomic_load_n(&c->tally.p2p, __ATOMIC_RELAXED);
    s->stalls = __atomic_load_n(&c->tally.stalls, __ATOMIC_RELAXED);
    s->wait_ns = __atomic_load_n(&c->tally.wait_ns, __ATOMIC_RELAXED);
    s->retransmits = gx_pstat_get(GX_PSTAT_RETRANSMITS);
    struct boot_stats bs;
    gx_boot_stats(c->boot, &bs);
    s->boot_sockets = bs.sockets;
    s->boot_msgs_sent = bs.msgs_sent;
    s->boot_bytes_sent = bs.bytes_sent;
}

GX_API int gx_comm_stats(const struct gx_comm *comm, struct gx_comm_stats *stats)
{
    gx_clear_last_error();
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_stats: comm is NULL");
    if (!stats)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_stats: stats is NULL");
    size_t want = stats->size;
    if (want < offsetof(struct gx_comm_stats, providers) || want > sizeof(struct gx_comm_stats))
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_stats: stats->size is %zu; this libgx "
                       "%s fills %zu bytes at most: start from GX_COMM_STATS_INIT", want,
                       gx_version(), sizeof(struct gx_comm_stats));
    struct gx_comm_stats all;
    gx_observe_fill((struct gx_comm *)comm, &all);
    all.size = want;
    memcpy(stats, &all, want);
    return GX_OK;
}
