/*
 * xport_match.c - the transport's message protocol (see xport.h), the side
 * of what the fabric hands back: xp_handle_cqe takes each completion (a
 * send slot free again, a rendezvous write done, a message or a write's
 * immediate arrived), checks protocol version and GX_CHECKSUM, and hands
 * a message to its match: a CTS to the send waiting for it (which then
 * writes, xport_write.c), an eager message or an RTS to the first posted
 * receive of its tag (the peer's own or a wildcard one, whichever was
 * posted first), or else to the peer's unexpected queue. Delivering an
 * eager payload and setting up a rendezvous receive are here too
 * (xport_p2p.c calls them when a receive finds its message already
 * queued). Posting is in xport_p2p.c. Runs under the transport lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/comm_internal.h"
#include "collectives/transport/xport_am.h"
#include "collectives/transport/xport_internal.h"
#include "common/crc32c.h"
#include "common/log.h"

static void truncated(struct xp_op *op, int from, int to, size_t msg, size_t cap)
{
    xp_op_fail(op, GX_ETRUNCATE,
               "message from rank %d to rank %d (tag %u) is %zu bytes but the receive buffer holds "
               "only %zu: post a receive at least as large as the message", from, to, op->tag, msg,
               cap);
}

/* An eager message meets its receive: `cs` is its folded CRC-32C when the
 * sender checksummed it (else -1), checked here rather than on arrival so a
 * message that waited as unexpected is checked (and corruptible) alike. */
void xp_deliver_eager(struct xp_peer *p, struct xp_op *op, void *data, size_t len, int32_t cs)
{
    if (len > op->len) {
        truncated(op, p->rank, p->x->rank, len, op->len);
        return;
    }
    if (p->rank != p->x->rank)
        xp_maybe_corrupt(p, op->tag, data, len);
    if (cs >= 0 && xp_fold16(gx_crc32c(0, data, len)) != (uint16_t)cs) {
        xp_op_fail(op, GX_EPROTO, "rank %d: a %zu-byte message from rank %d (tag %u) failed its "
                   "checksum: corrupted on the way (GX_CHECKSUM)", p->x->rank, len, p->rank,
                   op->tag);
        p->x->checksum_failures++;
        xp_fail_peer(p, GX_EPROTO, "a message failed its checksum");
        return;
    }
    if (len && op->dev) {
        int rc = gx_xport_mem_copy(op->buf, true, data, false, len);
        if (rc != GX_OK) {
            xp_op_fail(op, rc, "rank %d: copying a %zu-byte message from rank %d into device "
                       "memory failed: %s", p->x->rank, len, p->rank, gx_last_error());
            return;
        }
    } else if (len) {
        memcpy(op->buf, data, len);
    }
    op->received = len;
    xp_op_done(p, op);
}

void xp_start_rndv_recv(struct xp_peer *p, struct xp_op *op, const struct xp_rts *rts,
                        bool rts_crc)
{
    struct gx_xport *x = p->x;
    struct xp_cts cts = { .send_id = rts->send_id, .capacity = op->len };
    if (rts->size > op->len) {
        truncated(op, p->rank, x->rank, rts->size, op->len);
        cts.status = GX_ETRUNCATE;
        xp_send_cts(p, &cts);
        return;
    }
    struct gx_fab_rcache_entry *e = NULL;
    int rc = xp_take_injected_regfail(x);
    if (rc == GX_OK)
        rc = gx_fab_rcache_get(p->d->rcache_recv, op->buf, rts->size,
                               op->dev ? GX_FAB_MEM_CUDA : GX_FAB_MEM_HOST, &e);
    if (rc == GX_OK)
        rc = gx_fab_mr_pack_rkey(gx_fab_rcache_handle(e), &cts.rkey);
    if (rc != GX_OK) {
        if (e)
            gx_fab_rcache_put(p->d->rcache_recv, e);
        xp_op_fail(op, rc, "rank %d: registering a %zu-byte receive buffer failed", x->rank,
                   op->len);
        cts.status = rc;
        xp_send_cts(p, &cts);
        return;
    }
    uint32_t id;
    do {
        id = x->next_recv_id++;
    } while (id == 0 || x->rndv[id % XP_RNDV_TABLE]);
    op->id = id;
    op->reg = e;
    op->state = XP_ST_RNDV_RECV;
    op->received = rts->size;
    op->has_crc = rts_crc;
    op->crc = rts->crc32c;
    x->rndv[id % XP_RNDV_TABLE] = op;
    cts.recv_id = id;
    cts.raddr = (uint64_t)(uintptr_t)op->buf;
    xp_send_cts(p, &cts);
}

static void add_unexpected(struct xp_peer *p, uint8_t type, uint32_t tag, const void *data,
                           size_t len, int32_t cs)
{
    struct xp_unexpected *u = malloc(sizeof(*u) + (type == XP_MSG_EAGER ? len : 0));
    if (!u) {
        xp_fail_peer(p, GX_ENOMEM, "no memory to hold an unexpected message");
        return;
    }
    u->next = NULL;
    u->tag = tag;
    u->arrived = ++p->x->arrived_count;
    u->type = type;
    u->cs = cs;
    u->len = len;
    if (type == XP_MSG_EAGER)
        memcpy(u->data, data, len);
    else
        memcpy(&u->rts, data, sizeof(u->rts));
    if (p->unexp_tail)
        p->unexp_tail->next = u;
    else
        p->unexp_head = u;
    p->unexp_tail = u;
}

static struct xp_op *first_with_tag(struct xp_op *op, uint32_t tag)
{
    while (op && op->tag != tag)
        op = op->next;
    return op;
}

/* The receive a message from `p` with `tag` goes to: the first posted of
 * p's own receives and the wildcard ones (which then names p). */
static struct xp_op *take_receive(struct xp_peer *p, uint32_t tag)
{
    struct gx_xport *x = p->x;
    struct xp_op *any = x->any_head ? first_with_tag(x->any_head, tag) : NULL;
    if (any) {
        struct xp_op *own = first_with_tag(p->posted_head, tag);
        if (!own || any->posted < own->posted) {
            xp_queue_take_tag(&x->any_head, &x->any_tail, tag);
            any->peer = p->rank;
            return any;
        }
    }
    return xp_queue_take_tag(&p->posted_head, &p->posted_tail, tag);
}

void xp_fail_any(struct gx_xport *x, int status, int who, const char *why)
{
    struct xp_op *op = x->any_head;
    x->any_head = x->any_tail = NULL;
    for (struct xp_op *next; op; op = next) {
        next = op->next;
        if (who >= 0)
            xp_op_fail(op, status, "rank %d: receive from any rank (tag %u) failed: the link "
                       "to rank %d failed: %s", x->rank, op->tag, who, why);
        else
            xp_op_fail(op, status, "rank %d: receive from any rank (tag %u) failed: %s", x->rank,
                       op->tag, why);
    }
}

void xp_on_message(struct xp_peer *p, uint8_t type, uint32_t tag, void *data, size_t len,
                   int32_t cs)
{
    if (type == XP_MSG_AM || type == XP_MSG_AM_RTS) {
        xp_am_arrived(p, type, data, len, cs >= 0); /* a window's or a call's service */
        return;
    }
    if (type == XP_MSG_CTS) {
        struct xp_cts cts;
        memcpy(&cts, data, sizeof(cts));
        struct xp_op **pp = &p->rts_head;
        while (*pp && (*pp)->id != cts.send_id)
            pp = &(*pp)->next;
        struct xp_op *op = *pp;
        if (!op)
            return;
        *pp = op->next;
        op->next = NULL;
        if (cts.status == GX_ETRUNCATE) {
            truncated(op, p->x->rank, p->rank, op->len, (size_t)cts.capacity);
            return;
        }
        if (cts.status != GX_OK) {
            xp_op_fail(op, cts.status, "rank %d could not take the message from rank %d (tag %u)",
                       p->rank, p->x->rank, op->tag);
            return;
        }
        if (op->held)
            xp_write_hold(p, op, &cts); /* announced: its data is not ready yet */
        else
            xp_write_start(p, op, &cts);
        return;
    }
    struct xp_op *op = take_receive(p, tag);
    if (!op) {
        add_unexpected(p, type, tag, data, len, cs);
        return;
    }
    if (type == XP_MSG_EAGER)
        xp_deliver_eager(p, op, data, len, cs);
    else
        xp_start_rndv_recv(p, op, data, cs >= 0);
}

int xp_handle_cqe(struct gx_xport *x, const struct gx_fab_cqe *e)
{
    uint8_t ctx_type = *(const uint8_t *)(uintptr_t)e->context;
    if (ctx_type == XP_CTX_RMA) {
        xp_rma_fabric_done(x, e); /* a window's one-sided write, read or atomic */
        return GX_OK;
    }
    if (ctx_type == XP_CTX_HELLO) {
        xp_conn_hello_cqe(x, e);
        return GX_OK;
    }
    if (ctx_type == XP_CTX_SEND_SLOT) {
        struct xp_slot *slot = (struct xp_slot *)(uintptr_t)e->context;
        struct xp_peer *p = slot->peer;
        struct xp_op *op = slot->op;
        xp_release_send_slot(slot);
        if (e->status != GX_OK) {
            if (op && !op->done)
                xp_op_fail(op, e->status, "rank %d: send to rank %d (tag %u) failed on %s",
                           x->rank, p->rank, op->tag, gx_fab_ep_name(p->ep));
            xp_fail_peer(p, e->status, "the link broke");
            return GX_OK;
        }
        if (op)
            xp_op_done(p, op);
        xp_send_pending(p);
        return GX_OK;
    }
    if (ctx_type == XP_CTX_OP) {
        struct xp_op *op = (struct xp_op *)(uintptr_t)e->context;
        struct xp_peer *p = &x->peers[op->peer];
        if (op->wr_posted) {
            xp_write_cqe(p, op, e); /* a piece of a rendezvous send (xport_write.c) */
            return GX_OK;
        }
        if (op->reg)
            gx_fab_rcache_put(p->d->rcache_send, op->reg);
        op->reg = NULL;
        if (e->status != GX_OK) {
            xp_op_fail(op, e->status, "rank %d: writing %zu bytes to rank %d failed on %s", x->rank,
                       op->len, p->rank, gx_fab_ep_name(p->ep));
            xp_fail_peer(p, e->status, "the link broke");
        } else {
            xp_op_done(p, op);
        }
        return GX_OK;
    }
    struct xp_slot *slot = (struct xp_slot *)(uintptr_t)e->context;
    struct xp_peer *p = slot->peer;
    if (e->status != GX_OK || (e->flags & GX_FAB_CQE_FLUSHED)) {
        if (!p->failed && e->status != GX_EABORTED) {
            char why[160];
            snprintf(why, sizeof(why), "the link on %s broke (%s)", gx_fab_ep_name(p->ep),
                     gx_strerror(e->status));
            xp_fail_peer(p, e->status == GX_OK ? GX_EPEER : e->status, why);
        }
        return GX_OK;
    }
    if (e->flags & GX_FAB_CQE_IMM) {
        struct xp_op *op = x->rndv[e->imm % XP_RNDV_TABLE];
        if (op && op->id == e->imm && op->landed + e->len < op->received) {
            op->landed += e->len; /* a piece (xport_write.c): the last completes it */
        } else if (op && op->id == e->imm) {
            x->rndv[e->imm % XP_RNDV_TABLE] = NULL;
            gx_fab_rcache_put(p->d->rcache_recv, op->reg);
            op->reg = NULL;
            if (!op->dev) /* device memory: the CPU must not read it */
                xp_maybe_corrupt(p, op->tag, op->buf, op->received);
            if (op->has_crc && !op->dev && gx_crc32c(0, op->buf, op->received) != op->crc) {
                xp_op_fail(op, GX_EPROTO, "rank %d: the %zu bytes rank %d wrote (tag %u) fail "
                           "their checksum: corrupted on the way (GX_CHECKSUM)", x->rank,
                           op->received, p->rank, op->tag);
                x->checksum_failures++;
                xp_fail_peer(p, GX_EPROTO, "a message failed its checksum");
                return GX_OK;
            }
            xp_op_done(p, op);
        }
    } else if (XP_WIRE_VERSION(e->tag) != XP_PROTO_VERSION) {
        xp_fail_peer(p, GX_EPROTO, "it speaks another transport protocol version");
        return GX_OK;
    } else {
        uint8_t type = (uint8_t)XP_WIRE_TYPE(e->tag);
        int32_t cs = (e->tag & XP_WIRE_CSUM_FLAG) ? (int32_t)XP_WIRE_CSUM(e->tag) : -1;
        /* Control messages are checked now; eager payloads when delivered. */
        if (type != XP_MSG_EAGER && cs >= 0 &&
            xp_fold16(gx_crc32c(0, slot->buf, e->len)) != (uint16_t)cs) {
            char why[200];
            snprintf(why, sizeof(why), "a %zu-byte message from rank %d (tag %u) failed its "
                     "checksum: corrupted on the way (GX_CHECKSUM)", (size_t)e->len, p->rank,
                     XP_WIRE_USER_TAG(e->tag));
            x->checksum_failures++;
            xp_fail_peer(p, GX_EPROTO, why);
            return GX_OK;
        }
        xp_on_message(p, type, XP_WIRE_USER_TAG(e->tag), slot->buf, e->len, cs);
    }
    int rc = xp_post_recv_slot(slot);
    if (rc != GX_OK)
        xp_fail_peer(p, rc, "could not re-post a receive slot");
    return GX_OK;
}
