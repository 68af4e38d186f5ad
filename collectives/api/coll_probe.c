/*
 * coll_probe.c - a quick probe of the network link at communicator set-up,
 * which refines the cost model's latency and bandwidth
 * (algorithms/coll_tune.c).
 *
 * Only between nodes: inside a node the shared-memory arena and the shm
 * ring costs were measured once (algorithms/), while a network may be
 * loopback tcp, a 25 Gb/s Ethernet or a 400 Gb/s InfiniBand rail, a hundred
 * times apart. The first rank of each even-numbered node ping-pongs with
 * the first rank of the next node through the transport (8 bytes for the
 * latency, 256 KiB for the bandwidth, medians of a few round trips); the
 * ranks all-gather the results and every rank takes the slowest pair, so
 * all ranks feed the model the same numbers and choose the same algorithm.
 * Not when a host runs more ranks than it has CPUs (then an idle ping-pong
 * measures a link the collectives never see); GX_COLL_PROBE=off keeps the
 * defaults too.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/comm/comm_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_coll_probe, "GX_COLL_PROBE", GX_PARAM_ENUM, "on", "on|off",
                "Measure the network link's latency and bandwidth when a communicator spans "
                "several nodes (a few ms at set-up) and feed them to the algorithm choice (on), "
                "or use the built-in tcp figures (off).");

#define PROBE_TAG 0x7ffffe00
#define SMALL_BYTES 8
#define SMALL_TRIPS 16
#define LARGE_BYTES (256u << 10)
#define LARGE_TRIPS 4
#define WARMUP_TRIPS 2

/* The first rank of node `node` (nodes numbered by their first rank, as
 * compute_nodes() does), or -1. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median round-trip time (seconds) of `trips` exchanges of `bytes`. */
static int round_trips(struct gx_comm *c, int peer, bool first, void *buf, size_t bytes,
                       int trips, double *median)
{
    double t[SMALL_TRIPS + WARMUP_TRIPS];
    for (int i = 0; i < trips + WARMUP_TRIPS; i++) {
        uint64_t t0 = gx_now_ns();
        int rc = first ? gx_send(c, buf, bytes, GX_UINT8, peer, PROBE_TAG) : GX_OK;
        if (rc == GX_OK)
            rc = gx_recv(c, buf, bytes, GX_UINT8, peer, PROBE_TAG, NULL);
        if (rc == GX_OK && !first)
            rc = gx_send(c, buf, bytes, GX_UINT8, peer, PROBE_TAG);
        if (rc != GX_OK)
            return rc;
        t[i] = (double)(gx_now_ns() - t0) * 1e-9;
    }
    qsort(t + WARMUP_TRIPS, (size_t)trips, sizeof(double), cmp_double);
    *median = t[WARMUP_TRIPS + trips / 2];
    return GX_OK;
}

/* Latency (s) and seconds per byte of the link to `peer`; only the side
 * that starts (`first`) gets meaningful numbers. */
static int measure(struct gx_comm *c, int peer, bool first, double out[2])
{
    char *buf = calloc(1, LARGE_BYTES);
    if (!buf)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "link probe: out of memory");
    double small, large;
    int rc = round_trips(c, peer, first, buf, SMALL_BYTES, SMALL_TRIPS, &small);
    if (rc == GX_OK)
        rc = round_trips(c, peer, first, buf, LARGE_BYTES, LARGE_TRIPS, &large);
    free(buf);
    if (rc != GX_OK || !first)
        return rc;
    double alpha = small / 2, one_way = large / 2;
    out[0] = alpha;
    out[1] = (one_way > alpha ? one_way - alpha : one_way / 2) / LARGE_BYTES;
    return GX_OK;
}

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

int gx_coll_probe(struct gx_comm *c)
{
    c->net_alpha = c->net_beta = 0;
    int mode = 0;
    if (c->node_count < 2 || gx_param_enum(&gx_param_coll_probe, &mode) != GX_OK || mode != 0)
        return GX_OK; /* node_count and the setting are the same on every rank */
    /* With more ranks than CPUs on a host, an idle ping-pong measures a link
     * the collectives never see (each of their messages waits for a CPU):
     * two netns "nodes" of 2 ranks on 2 CPUs probed 13 us and 2.9 GB/s, and
     * the model then preferred the ring, 15-25% slower there than rhd. The
     * built-in figures were measured under such load. */
    bool skip = c->oversubscribed;
    double mine[2] = { 0, 0 };
    int partner = -1;
    if (c->local_rank == 0 && (c->node_index ^ 1) < c->node_count)
        partner = c->node_first[c->node_index ^ 1];
    /* Whether to measure must agree per pair: decide from the whole job's
     * view first (an all-gather of the oversubscribed flags). */
    int32_t *flags = calloc((size_t)c->size, sizeof(*flags));
    if (!flags)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "link probe: out of memory");
    int32_t my_flag = skip;
    int frc = gx_comm_boot_allgather(c, &my_flag, flags, sizeof(my_flag));
    for (int r = 0; frc == GX_OK && r < c->size; r++)
        skip = skip || flags[r];
    free(flags);
    if (frc != GX_OK)
        return frc;
    if (skip) {
        GX_INFO(GX_SUB_COLL, "communicator '%s': network link not probed: a host runs more "
                "ranks than it has CPUs; using the built-in figures", c->name);
        return GX_OK;
    }
    if (partner >= 0) {
        int rc = measure(c, partner, c->node_index % 2 == 0, mine);
        if (rc != GX_OK)
            return rc;
    }
    double *all = calloc((size_t)c->size * 2, sizeof(double));
    if (!all)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "link probe: out of memory");
    int rc = gx_comm_boot_allgather(c, mine, all, sizeof(mine));
    if (rc == GX_OK) {
        /* The slowest pair bounds a ring or a tree across the nodes. */
        double alpha = 0, beta = 0;
        for (int r = 0; r < c->size; r++) {
            alpha = all[2 * r] > alpha ? all[2 * r] : alpha;
            beta = all[2 * r + 1] > beta ? all[2 * r + 1] : beta;
        }
        if (alpha > 0 && beta > 0) {
            c->net_alpha = clamp(alpha, 0.5e-6, 1e-3);
            c->net_beta = clamp(beta, 1.0 / 100e9, 1.0 / 10e6);
            GX_INFO(GX_SUB_COLL, "communicator '%s': network link probed: latency %.1f us, "
                    "%.2f GB/s (slowest of %d node pairs)", c->name, c->net_alpha * 1e6,
                    1e-9 / c->net_beta, c->node_count / 2);
        }
    }
    free(all);
    return rc;
}
