/*
 * xport_am.c - active messages (xport_am.h): sending a header and a body
 * eagerly or by rendezvous, handing arrivals to their service, taking or
 * refusing a large body, the large get's write-with-immediate, answers the
 * services own, and the one helper through which the services reach a
 * peer. The services themselves are xport_rma.c (windows) and xport_rpc.c
 * (remote calls). Runs under the transport lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/transport/xport_am.h"
#include "collectives/transport/xport_svc.h"
#include "common/crc32c.h"
#include "common/log.h"

/* ---- the services of a transport --------------------------------------- */

struct xp_svc *xp_svc_get(struct gx_xport *x)
{
    if (!x->svc)
        x->svc = calloc(1, sizeof(*x->svc));
    return x->svc;
}

void xp_svc_free(struct gx_xport *x)
{
    if (!x->svc)
        return;
    xp_rma_free(x);
    xp_rpc_free(x);
    free(x->svc);
    x->svc = NULL;
}

struct xp_peer *xp_svc_peer(struct gx_xport *x, int rank)
{
    return rank >= 0 && rank < x->size ? &x->peers[rank] : NULL;
}

uint64_t xp_svc_activity(struct gx_xport *x)
{
    return __atomic_load_n(&x->polled, __ATOMIC_RELAXED);
}

int xp_svc_check_peer(struct gx_xport *x, int rank, const char *what)
{
    struct xp_peer *p = xp_svc_peer(x, rank);
    if (x->aborted)
        return gx_fail(GX_EABORTED, GX_SUB_COLL, "%s: the communicator was aborted", what);
    if (!p)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: rank %d is out of range (communicator of %d)",
                       what, rank, x->size);
    if (rank != x->rank)
        xp_peer_want(x, rank); /* connects on first use; work queues until it is up */
    if (p->failed)
        return gx_fail(p->failed, GX_SUB_COLL, "%s: the link to rank %d failed (%s)", what, rank,
                       gx_strerror(p->failed));
    return GX_OK;
}

/* ---- sending ------------------------------------------------------------- */

void xp_am_op_init(struct xp_op *op, int peer, const struct xp_am_hdr *hdr, const void *body,
                   size_t len, void (*on_done)(struct xp_op *op))
{
    memset(op, 0, sizeof(*op));
    op->ctx_type = XP_CTX_OP;
    op->kind = XP_OP_AM;
    op->peer = peer;
    op->buf = (void *)body;
    op->len = len;
    op->am_hdr = hdr;
    op->on_done = on_done;
}

int xp_am_send(struct xp_peer *p, struct xp_op *op)
{
    if (p->rank != p->x->rank)
        xp_peer_want(p->x, p->rank);
    if (p->failed)
        return gx_fail(p->failed, GX_SUB_COLL, "rank %d: the link to rank %d failed earlier",
                       p->x->rank, p->rank);
    return xp_send_or_queue(p, op);
}

int xp_am_start(struct xp_peer *p, struct xp_slot *slot, struct xp_op *op)
{
    struct gx_xport *x = p->x;
    const size_t hl = sizeof(struct xp_am_hdr);
    if (op->len <= x->eager_limit - hl) {
        slot->op = op;
        op->state = XP_ST_EAGER;
        memcpy(slot->buf, op->am_hdr, hl);
        if (op->len)
            memcpy(slot->buf + hl, op->buf, op->len);
        return xp_post_msg(p, slot, XP_MSG_AM, 0, slot->buf, hl + op->len);
    }
    op->id = x->next_send_id++;
    struct xp_rts rts = { .size = op->len, .send_id = op->id };
    if (x->checksum)
        rts.crc32c = gx_crc32c(0, op->buf, op->len);
    unsigned char payload[sizeof(struct xp_rts) + sizeof(struct xp_am_hdr)];
    memcpy(payload, &rts, sizeof(rts));
    memcpy(payload + sizeof(rts), op->am_hdr, hl);
    op->state = XP_ST_RTS_SENT;
    int rc = xp_post_msg(p, slot, XP_MSG_AM_RTS, 0, payload, sizeof(payload));
    if (rc == GX_OK) {
        op->next = p->rts_head;
        p->rts_head = op;
    }
    return rc;
}

/* An answer the service owns: freed, with its body when owned, once sent. */
struct am_answer {
    struct xp_op op;
    struct xp_am_hdr hdr;
    void *owned;
};

static void answer_done(struct xp_op *op)
{
    struct am_answer *a = (struct am_answer *)op;
    free(a->owned);
    free(a);
}

int xp_am_answer(struct xp_peer *p, const struct xp_am_hdr *hdr, const void *body, size_t len,
                 void *owned)
{
    struct am_answer *a = malloc(sizeof(*a));
    if (!a) {
        free(owned);
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "rank %d: no memory for an answer to rank %d",
                       p->x->rank, p->rank);
    }
    a->hdr = *hdr;
    a->owned = owned;
    xp_am_op_init(&a->op, p->rank, &a->hdr, body, len, answer_done);
    int rc = xp_am_send(p, &a->op);
    if (rc != GX_OK)
        answer_done(&a->op);
    return rc;
}

/* ---- arriving -------------------------------------------------------------- */

void xp_am_arrived(struct xp_peer *p, uint8_t type, const void *data, size_t len, bool crc)
{
    const size_t hl = sizeof(struct xp_am_hdr);
    struct xp_am_hdr h;
    struct xp_rts rts;
    const struct xp_rts *r = NULL;
    const unsigned char *body = NULL;
    size_t blen = 0;
    if (type == XP_MSG_AM && len >= hl) {
        memcpy(&h, data, hl);
        body = (const unsigned char *)data + hl;
        blen = len - hl;
    } else if (type == XP_MSG_AM_RTS && len == sizeof(rts) + hl) {
        memcpy(&rts, data, sizeof(rts));
        memcpy(&h, (const unsigned char *)data + sizeof(rts), hl);
        r = &rts;
    } else {
        xp_fail_peer(p, GX_EPROTO, "it sent a malformed active message");
        return;
    }
    if (h.service == XP_SVC_RMA) {
        xp_rma_arrived(p, &h, body, blen, r, crc);
    } else if (h.service == XP_SVC_RPC) {
        xp_rpc_arrived(p, &h, body, blen, r, crc);
    } else {
        char why[96];
        snprintf(why, sizeof(why), "it sent an active message for unknown service %u",
                 (unsigned)h.service);
        xp_fail_peer(p, GX_EPROTO, why);
    }
}

void xp_am_take_body(struct xp_peer *p, struct xp_op *op, const struct xp_rts *rts, bool crc,
                     void *buf, void (*on_done)(struct xp_op *op))
{
    memset(op, 0, sizeof(*op));
    op->ctx_type = XP_CTX_OP;
    op->kind = XP_OP_RECV;
    op->peer = p->rank;
    op->buf = buf;
    op->len = (size_t)rts->size;
    op->on_done = on_done;
    xp_start_rndv_recv(p, op, rts, crc); /* answers the CTS; fails op on error */
}

void xp_am_refuse_body(struct xp_peer *p, const struct xp_rts *rts, int status)
{
    struct xp_cts cts = { .send_id = rts->send_id, .status = status };
    xp_send_cts(p, &cts);
}

/* ---- a large get: the target writes straight into the origin's buffer ---- */

int xp_am_expect_write(struct xp_peer *p, struct xp_op *op, void *buf, size_t len,
                       void (*on_done)(struct xp_op *op), uint32_t *imm,
                       struct gx_fab_rkey *rkey)
{
    struct gx_xport *x = p->x;
    memset(op, 0, sizeof(*op));
    op->ctx_type = XP_CTX_OP;
    op->kind = XP_OP_RECV;
    op->peer = p->rank;
    op->buf = buf;
    op->len = len;
    op->received = len;
    op->on_done = on_done;
    struct gx_fab_rcache_entry *e = NULL;
    int rc = xp_take_injected_regfail(x);
    if (rc == GX_OK)
        rc = gx_fab_rcache_get(p->d->rcache_recv, buf, len, GX_FAB_MEM_HOST, &e);
    if (rc == GX_OK)
        rc = gx_fab_mr_pack_rkey(gx_fab_rcache_handle(e), rkey);
    if (rc != GX_OK) {
        if (e)
            gx_fab_rcache_put(p->d->rcache_recv, e);
        return gx_fail(rc, GX_SUB_COLL, "rank %d: registering a %zu-byte buffer for rank %d's "
                       "write failed", x->rank, len, p->rank);
    }
    uint32_t id;
    do {
        id = x->next_recv_id++;
    } while (id == 0 || x->rndv[id % XP_RNDV_TABLE]);
    op->id = id;
    op->reg = e;
    op->state = XP_ST_RNDV_RECV;
    x->rndv[id % XP_RNDV_TABLE] = op;
    *imm = id;
    return GX_OK;
}

void xp_am_unexpect(struct xp_peer *p, struct xp_op *op)
{
    struct gx_xport *x = p->x;
    if (x->rndv[op->id % XP_RNDV_TABLE] == op)
        x->rndv[op->id % XP_RNDV_TABLE] = NULL;
    if (op->reg)
        gx_fab_rcache_put(p->d->rcache_recv, op->reg);
    op->reg = NULL;
}

/* The target's write: a service op freed when the fabric is done with it. */
static void write_done(struct xp_op *op)
{
    free(op);
}

int xp_am_write_to(struct xp_peer *p, const void *buf, size_t len, uint64_t raddr,
                   const struct gx_fab_rkey *rkey, uint32_t imm)
{
    struct xp_op *op = calloc(1, sizeof(*op));
    if (!op)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "rank %d: no memory to answer rank %d",
                       p->x->rank, p->rank);
    op->ctx_type = XP_CTX_OP;
    op->kind = XP_OP_SEND;
    op->state = XP_ST_WRITING;
    op->peer = p->rank;
    op->buf = (void *)buf;
    op->len = len;
    op->on_done = write_done;
    struct gx_fab_rcache_entry *e = NULL;
    int rc = gx_fab_rcache_get(p->d->rcache_send, (void *)buf, len, GX_FAB_MEM_HOST, &e);
    if (rc == GX_OK) {
        op->reg = e;
        rc = gx_fab_post_write_imm(p->ep, buf, len, gx_fab_rcache_handle(e), raddr, rkey, imm,
                                   (uint64_t)(uintptr_t)op);
    }
    if (rc != GX_OK) {
        if (e)
            gx_fab_rcache_put(p->d->rcache_send, e);
        free(op);
        return gx_fail(rc, GX_SUB_COLL, "rank %d: writing %zu bytes to rank %d failed",
                       p->x->rank, len, p->rank);
    }
    return GX_OK;
}

void xp_am_peer_up(struct xp_peer *p)
{
    if (p->x->svc)
        xp_rma_peer_up(p);
}

void xp_am_peer_failed(struct xp_peer *p, int status, const char *why)
{
    if (!p->x->svc)
        return;
    xp_rma_peer_failed(p, status, why);
    xp_rpc_peer_failed(p, status, why);
}
