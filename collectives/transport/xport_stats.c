/*
 * xport_stats.c - the transport's share of gx_comm_stats (xport.h): every
 * completed message is counted on its peer (xp_tally, under the transport
 * lock) and, while tracing, recorded on the timeline's provider track;
 * gx_xport_stats adds the peers up by peer class and provider.
 *
 * Room transport/. Reads the communicator's node layout; nothing above.
 */
#include <stdio.h>
#include <string.h>

#include "collectives/comm/comm_internal.h"
#include "collectives/transport/xport_internal.h"
#include "common/trace.h"

void xp_tally(struct xp_peer *p, const struct xp_op *op)
{
    bool send = op->kind == XP_OP_SEND;
    size_t bytes = send ? op->len : op->received;
    if (send) {
        p->sends++;
        p->bytes_sent += bytes;
    } else {
        p->receives++;
        p->bytes_received += bytes;
    }
    if (op->t_post && gx_trace_on()) {
        struct gx_trace_rec r = {
            .ts = op->t_post, .dur = gx_trace_now() - op->t_post,
            .name = send ? "message sent" : "message received", .cat = "transport",
            .key = { "peer", "bytes", "tag" },
            .val = { p->rank, (int64_t)bytes, (int64_t)op->tag },
            .skey = "provider", .sval = p->d ? p->d->prov->name : "self",
            .lane = GX_LANE_WIRE, .kind = GX_TR_ASYNC,
        };
        gx_trace_emit(&r);
    }
}

static void add(struct gx_traffic *t, const struct xp_peer *p)
{
    t->bytes_sent += p->bytes_sent;
    t->bytes_received += p->bytes_received;
    t->sends += p->sends;
    t->receives += p->receives;
}

void gx_xport_stats(struct gx_xport *x, struct gx_comm_stats *out)
{
    pthread_mutex_lock(&x->lock);
    for (int r = 0; r < x->size; r++) {
        const struct xp_peer *p = &x->peers[r];
        enum gx_peer_class cls = r == x->rank ? GX_PEER_SELF
                                 : gx_comm_same_node(x->comm, x->rank, r) ? GX_PEER_NODE
                                                                          : GX_PEER_NET;
        add(&out->peer_class[cls], p);
        if (p->ep)
            out->connections++;
        const char *name = p->d ? p->d->prov->name : "self";
        int i = 0;
        while (i < out->providers && strcmp(out->provider[i].name, name) != 0)
            i++;
        if (i == out->providers) {
            if (i == GX_STATS_PROVIDERS)
                continue; /* cannot happen: self and two domains */
            snprintf(out->provider[i].name, sizeof(out->provider[i].name), "%s", name);
            out->providers++;
        }
        add(&out->provider[i].traffic, p);
    }
    out->checksum_failures += x->checksum_failures;
    out->endpoints = x->nup;
    out->endpoints_node = x->nup_node;
    out->connects = x->nconnects;
    out->accepts = x->naccepts;
    pthread_mutex_unlock(&x->lock);
}

void xp_trace_cqe(const struct xp_domain *d, const struct gx_fab_cqe *e)
{
    struct gx_trace_rec r = {
        .ts = gx_trace_now(), .name = "completion", .cat = "provider",
        .key = { "op", "bytes", "status" },
        .val = { e->op, (int64_t)e->len, e->status },
        .skey = "provider", .sval = d->prov->name,
        .lane = GX_LANE_WIRE, .kind = GX_TR_INSTANT,
    };
    gx_trace_emit(&r);
}
