/*
 * accept_fabric.c - the fabric checks:
 *   - point-to-point bandwidth (each direction) and latency between the
 *     leaders of every pair of nodes, in n-1 rounds of a perfect matching
 *     (the circle method: node 0 stays, the others rotate; a bye when n is
 *     odd), all pairs of a round at once, a barrier between rounds;
 *   - all-reduce and all-gather busbw sweeps (gx-perf's per-collective
 *     table: the same counts and bus factors as nccl-tests);
 *   - a correctness soak of mixed collectives on gx-perf's checked data.
 *
 * Owns the measurements; rank 0 turns them into checks. Must not judge
 * outliers (accept_outlier.c) or write output.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../gx-perf/perf_coll.h"
#include "../gx-perf/perf_data.h"
#include "accept.h"
#include "accept_schedule.h"

#define P2P_WINDOW 4
#define P2P_LAT_WARMUP 20
#define P2P_LAT_ITERS 200
#define WAIT_MS 120000 /* one message may not take longer than this */

static int wait_all(struct gx_request **reqs, int n)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (!reqs[i])
            continue;
        int w = gx_wait(reqs[i], WAIT_MS);
        gx_request_free(reqs[i]);
        reqs[i] = NULL;
        if (w && !rc)
            rc = w;
    }
    return rc;
}

/* Stream `total` bytes in `msg`-byte messages to (send) or from peer, then an ack. */
static int stream(struct accept_ctx *x, int peer, int send, char *buf, size_t total, size_t msg,
                  double *seconds)
{
    struct gx_request *reqs[P2P_WINDOW] = { NULL };
    size_t nmsg = (total + msg - 1) / msg;
    uint8_t ack = 1;
    int rc = 0;
    double t0 = accept_now_s();
    for (size_t i = 0; i < nmsg && !rc; i++) {
        struct gx_request **slot = &reqs[i % P2P_WINDOW];
        if (*slot)
            rc = wait_all(slot, 1);
        if (rc)
            break;
        size_t len = i + 1 < nmsg ? msg : total - i * msg;
        rc = send ? gx_isend(x->comm, buf, len, GX_UINT8, peer, ACCEPT_TAG_P2P, slot)
                  : gx_irecv(x->comm, buf, len, GX_UINT8, peer, ACCEPT_TAG_P2P, slot);
    }
    int w = wait_all(reqs, P2P_WINDOW);
    rc = rc ? rc : w;
    if (rc)
        return rc;
    /* The receiver's ack stops the sender's clock once every byte has arrived. */
    rc = send ? gx_recv(x->comm, &ack, 1, GX_UINT8, peer, ACCEPT_TAG_P2P + 1, NULL)
              : gx_send(x->comm, &ack, 1, GX_UINT8, peer, ACCEPT_TAG_P2P + 1);
    *seconds = accept_now_s() - t0;
    return rc;
}

static int ping_pong(struct accept_ctx *x, int peer, int first, double *one_way_us)
{
    char b[8] = { 0 };
    int rc = 0;
    double t0 = 0;
    for (int i = 0; i < P2P_LAT_WARMUP + P2P_LAT_ITERS && !rc; i++) {
        if (i == P2P_LAT_WARMUP)
            t0 = accept_now_s();
        if (first)
            rc = gx_send(x->comm, b, 8, GX_UINT8, peer, ACCEPT_TAG_P2P + 2);
        if (!rc)
            rc = gx_recv(x->comm, b, 8, GX_UINT8, peer, ACCEPT_TAG_P2P + 2, NULL);
        if (!rc && !first)
            rc = gx_send(x->comm, b, 8, GX_UINT8, peer, ACCEPT_TAG_P2P + 2);
    }
    *one_way_us = (accept_now_s() - t0) / P2P_LAT_ITERS / 2 * 1e6;
    return rc;
}

/* One pair: latency, then a->b and b->a, each the best of `repeats`. */
static int measure_pair(struct accept_ctx *x, int peer_node, char *buf, double *out_gbs,
                        double *lat_us)
{
    int peer = x->leader_of_node[peer_node];
    int low = x->node < peer_node;
    size_t total = (size_t)x->spec.p2p_bytes, msg = (size_t)x->spec.p2p_message_bytes;
    int rc = ping_pong(x, peer, low, lat_us);
    for (int dir = 0; dir < 2 && !rc; dir++) {
        int sending = (dir == 0) == low;
        double best = 0;
        for (int k = 0; k < (int)x->spec.p2p_repeats && !rc; k++) {
            double s = 0;
            rc = stream(x, peer, sending, buf, total, msg, &s);
            if (!rc && s > 0 && (double)total / s / 1e9 > best)
                best = (double)total / s / 1e9;
        }
        if (sending)
            *out_gbs = best;
    }
    return rc;
}

int accept_p2p_matrix(struct accept_ctx *x)
{
    int n = x->nnodes, rc = 0;
    if (n < 2) {
        if (x->rank == 0)
            accept_add(x->res, "fabric", "p2p", "all nodes", ACCEPT_SKIP,
                       "one node: no pair of nodes to measure");
        return 0;
    }
    double *row = malloc(sizeof(double) * 2 * (size_t)n);
    double *all = x->rank == 0 ? malloc(sizeof(double) * 2 * (size_t)n * (size_t)x->nranks) : NULL;
    char *buf = malloc((size_t)x->spec.p2p_message_bytes);
    if (!row || !buf || (x->rank == 0 && !all)) {
        free(row), free(all), free(buf);
        return GX_ENOMEM;
    }
    memset(buf, 0x5a, (size_t)x->spec.p2p_message_bytes);
    for (int i = 0; i < 2 * n; i++)
        row[i] = -1;
    int rounds = accept_round_count(n);
    for (int round = 0; round < rounds && !rc; round++) {
        accept_progress(x, "p2p round %d/%d", round + 1, rounds);
        int partner = x->local_rank == 0 ? accept_round_partner(round, x->node, n) : -1;
        if (partner >= 0)
            rc = measure_pair(x, partner, buf, &row[partner], &row[n + partner]);
        if (!rc)
            rc = gx_barrier(x->comm);
    }
    if (!rc)
        rc = accept_gather(x, row, all, sizeof(double) * 2 * (size_t)n);
    if (!rc && x->rank == 0) {
        struct accept_results *r = x->res;
        r->have_pairs = 1;
        for (int a = 0; a < n; a++) {
            const double *lr = all + (size_t)x->leader_of_node[a] * 2 * (size_t)n;
            for (int b = 0; b < n; b++) {
                r->pair_gbs[a * n + b] = lr[b];
                if (a < b)
                    r->pair_lat_us[a * n + b] = r->pair_lat_us[b * n + a] = lr[n + b];
            }
        }
        for (int a = 0; a < n; a++)
            for (int b = 0; b < n; b++) {
                if (a == b)
                    continue;
                char who[96];
                double g = r->pair_gbs[a * n + b];
                snprintf(who, sizeof(who), "%s->%s", r->node_names[a], r->node_names[b]);
                if (x->spec.p2p_min_gbs == ACCEPT_UNSET)
                    accept_add(r, "fabric", "p2p_bandwidth", who, ACCEPT_SKIP,
                               "%.3f GB/s; spec gives no p2p.min_gbs", g);
                else
                    accept_add(r, "fabric", "p2p_bandwidth", who,
                               g >= x->spec.p2p_min_gbs ? ACCEPT_PASS : ACCEPT_FAIL,
                               "%.3f GB/s (best of %.0f x %.0f bytes); spec wants at least "
                               "%g GB/s", g, x->spec.p2p_repeats, x->spec.p2p_bytes,
                               x->spec.p2p_min_gbs);
                if (a > b)
                    continue;
                double l = r->pair_lat_us[a * n + b];
                snprintf(who, sizeof(who), "%s<->%s", r->node_names[a], r->node_names[b]);
                if (x->spec.p2p_max_latency_us == ACCEPT_UNSET)
                    accept_add(r, "fabric", "p2p_latency", who, ACCEPT_SKIP,
                               "%.1f us one way (8 B); spec gives no p2p.max_latency_us", l);
                else
                    accept_add(r, "fabric", "p2p_latency", who,
                               l <= x->spec.p2p_max_latency_us ? ACCEPT_PASS : ACCEPT_FAIL,
                               "%.1f us one way (8 B ping-pong); spec allows %g us", l,
                               x->spec.p2p_max_latency_us);
            }
    }
    free(row), free(all), free(buf);
    return rc;
}

/* ---- busbw sweeps ------------------------------------------------------ */

static int sweep_one(struct accept_ctx *x, const struct accept_sweep_spec *sp, const char *name,
                     char *sendbuf, char *recvbuf, struct accept_sweep *out)
{
    const struct perf_coll *coll = perf_coll_find(name);
    double *times = x->rank == 0 ? malloc(sizeof(double) * (size_t)x->nranks) : NULL;
    if (!coll || (x->rank == 0 && !times))
        return GX_ENOMEM;
    int rc = 0, k = 0;
    out->coll = coll->name;
    for (double size = sp->min_bytes; size <= sp->max_bytes && k < ACCEPT_MAX_SIZES && !rc;
         size *= sp->factor, k++) {
        accept_progress(x, "%s sweep, %.0f bytes", name, size);
        struct perf_counts c;
        coll->counts((size_t)size / 4, perf_coll_align(4), x->nranks, &c);
        for (int i = 0; i < 2 && !rc; i++) /* warm-up */
            rc = coll->call(x->comm, sendbuf, recvbuf, c.param, GX_FLOAT32, GX_SUM, 0, NULL);
        if (!rc)
            rc = gx_barrier(x->comm);
        double t0 = accept_now_s();
        for (int i = 0; i < (int)sp->iters && !rc; i++)
            rc = coll->call(x->comm, sendbuf, recvbuf, c.param, GX_FLOAT32, GX_SUM, 0, NULL);
        double t = (accept_now_s() - t0) / sp->iters;
        if (!rc)
            rc = accept_gather(x, &t, times, sizeof(t));
        if (rc || x->rank != 0)
            continue;
        for (int q = 0; q < x->nranks; q++)
            t = times[q] > t ? times[q] : t; /* the slowest rank decides */
        double bytes = (double)coll->algbw_elems(c.param, x->nranks) * 4;
        out->bytes[k] = bytes;
        out->time_us[k] = t * 1e6;
        out->algbw[k] = t > 0 ? bytes / t / 1e9 : 0;
        out->busbw[k] = out->algbw[k] * coll->bus_factor(x->nranks);
        out->nsizes = k + 1;
    }
    free(times);
    if (rc || x->rank != 0)
        return rc;
    int last = out->nsizes - 1;
    if (last < 0)
        return 0;
    if (sp->min_busbw_gbs == ACCEPT_UNSET)
        accept_add(x->res, "fabric", name, "all nodes", ACCEPT_SKIP,
                   "busbw %.3f GB/s at %.0f bytes (%d ranks); spec gives no min_busbw_gbs",
                   out->busbw[last], out->bytes[last], x->nranks);
    else
        accept_add(x->res, "fabric", name, "all nodes",
                   out->busbw[last] >= sp->min_busbw_gbs ? ACCEPT_PASS : ACCEPT_FAIL,
                   "busbw %.3f GB/s at %.0f bytes (%d ranks); spec wants at least %g GB/s",
                   out->busbw[last], out->bytes[last], x->nranks, sp->min_busbw_gbs);
    return 0;
}

int accept_sweeps(struct accept_ctx *x)
{
    const struct accept_sweep_spec *sp[2] = { &x->spec.allreduce, &x->spec.allgather };
    const char *names[2] = { "all_reduce", "all_gather" };
    int rc = 0;
    for (int i = 0; i < 2 && !rc; i++) {
        if (!sp[i]->enabled) {
            if (x->rank == 0)
                accept_add(x->res, "fabric", names[i], "all nodes", ACCEPT_SKIP,
                           "no '%s' section in the spec", i ? "allgather" : "allreduce");
            continue;
        }
        size_t bytes = (size_t)sp[i]->max_bytes;
        char *s = malloc(bytes), *r = malloc(bytes);
        if (s && r) {
            memset(s, 0, bytes);
            memset(r, 0, bytes);
            struct accept_sweep *out = x->rank == 0 ? &x->res->sweeps[x->res->nsweeps++] : NULL;
            struct accept_sweep scratch;
            rc = sweep_one(x, sp[i], names[i], s, r, out ? out : &scratch);
        } else {
            rc = GX_ENOMEM;
        }
        free(s), free(r);
    }
    return rc;
}

/* ---- correctness soak -------------------------------------------------- */

static uint64_t mix(uint64_t v)
{
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdULL;
    v ^= v >> 33;
    return v;
}

int accept_soak(struct accept_ctx *x)
{
    static const char *const names[] = { "all_reduce", "all_gather", "broadcast",
                                         "reduce_scatter" };
    static const enum gx_datatype types[] = { GX_FLOAT32, GX_INT32, GX_BFLOAT16 };
    if (!x->spec.soak_enabled) {
        if (x->rank == 0)
            accept_add(x->res, "fabric", "soak", "all nodes", ACCEPT_SKIP,
                       "no 'soak' section in the spec");
        return 0;
    }
    size_t max = (size_t)x->spec.soak_max_bytes;
    char *s = malloc(max), *r = malloc(max);
    long long *wrong = x->rank == 0 ? calloc((size_t)x->nranks, sizeof(*wrong)) : NULL;
    if (!s || !r || (x->rank == 0 && !wrong)) {
        free(s), free(r), free(wrong);
        return GX_ENOMEM;
    }
    long long mine = 0, ops = 0;
    double bytes_checked = 0, t0 = accept_now_s();
    int go = 1, rc = 0;
    for (uint64_t i = 0; go && !rc; i++) {
        if (i % 8 == 0) { /* rank 0's clock decides for everyone */
            go = accept_now_s() - t0 < x->spec.soak_seconds;
            accept_progress(x, "soak, %lld collectives checked", ops);
            rc = gx_broadcast(x->comm, &go, &go, 1, GX_INT32, 0);
            if (rc || !go)
                break;
        }
        const struct perf_coll *coll = perf_coll_find(names[i % 4]);
        enum gx_datatype t = types[(i / 4) % 3];
        size_t esize = gx_datatype_size(t);
        size_t elems = 16 + mix(i) % (max / esize - 15);
        struct perf_counts c;
        coll->counts(elems, 1, x->nranks, &c); /* odd sizes on purpose */
        int has_op = (coll->flags & PERF_COLL_HAS_OP) != 0;
        int root = (int)(i % (uint64_t)x->nranks);
        perf_data_poison(r, c.recv * esize);
        perf_data_fill(s, t, 0, c.send, x->rank, x->nranks, GX_SUM, has_op);
        rc = coll->call(x->comm, s, r, c.param, t, GX_SUM, root, NULL);
        if (rc)
            break;
        mine += (long long)perf_data_check(coll, r, t, c.recv, c.param, x->rank, x->nranks,
                                           root, GX_SUM);
        bytes_checked += (double)(c.recv * esize);
        ops++;
    }
    double elapsed = accept_now_s() - t0;
    if (!rc)
        rc = accept_gather(x, &mine, wrong, sizeof(mine));
    if (!rc && x->rank == 0) {
        struct accept_results *res = x->res;
        res->soak_seconds = elapsed;
        res->soak_ops = ops;
        long long total = 0;
        for (int q = 0; q < x->nranks; q++) {
            total += wrong[q];
            if (wrong[q])
                accept_add(res, "fabric", "soak", res->node_names[x->node_of_rank[q]],
                           ACCEPT_FAIL, "rank %d received %lld wrong elements", q, wrong[q]);
        }
        res->soak_wrong = total;
        accept_add(res, "fabric", "soak", "all nodes", total ? ACCEPT_FAIL : ACCEPT_PASS,
                   "%lld collectives (all_reduce, all_gather, broadcast, reduce_scatter; f32, "
                   "i32, bf16; up to %zu bytes) in %.1f s, %.1f MB checked on rank 0, "
                   "%lld wrong", ops, max, elapsed, bytes_checked / 1e6, total);
    }
    free(s), free(r), free(wrong);
    return rc;
}
