/*
 * xport_p2p.c - the transport's message protocol (see xport.h): matching,
 * eager delivery, rendezvous (RTS / CTS / write-with-immediate), send-slot
 * accounting and failure of a peer's operations. Runs under the transport
 * lock.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/comm_internal.h"
#include "collectives/transport/xport_internal.h"
#include "common/crc32c.h"
#include "common/log.h"

enum xp_state { XP_ST_NEW = 0, XP_ST_EAGER, XP_ST_RTS_SENT, XP_ST_WRITING, XP_ST_RNDV_RECV };

static void op_finish(struct xp_op *op, int status)
{
    op->status = status;
    __atomic_store_n(&op->done, true, __ATOMIC_RELEASE);
}

static void op_fail(struct xp_op *op, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void op_fail(struct xp_op *op, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(op->err, sizeof(op->err), fmt, ap);
    va_end(ap);
    gx_fail(status, GX_SUB_COLL, "%s", op->err);
    op_finish(op, status);
}

static void queue_push(struct xp_op **head, struct xp_op **tail, struct xp_op *op)
{
    op->next = NULL;
    if (*tail)
        (*tail)->next = op;
    else
        *head = op;
    *tail = op;
}

/* Remove and return the first op with `tag` (tail may be NULL for lists
 * without one). */
static struct xp_op *queue_take_tag(struct xp_op **head, struct xp_op **tail, uint32_t tag)
{
    struct xp_op *prev = NULL;
    for (struct xp_op *op = *head; op; prev = op, op = op->next) {
        if (op->tag != tag)
            continue;
        if (prev)
            prev->next = op->next;
        else
            *head = op->next;
        if (tail && *tail == op)
            *tail = prev;
        op->next = NULL;
        return op;
    }
    return NULL;
}

int xp_post_recv_slot(struct xp_slot *slot)
{
    struct xp_peer *p = slot->peer;
    return gx_fab_post_recv(p->ep, slot->buf, p->x->eager_limit, p->slab_mr, (uint64_t)(uintptr_t)slot);
}

static struct xp_slot *take_send_slot(struct xp_peer *p)
{
    if (p->send_free == 0)
        return NULL;
    for (int i = 0; i < XP_SEND_SLOTS; i++) {
        if (!p->send_slots[i].busy) {
            p->send_slots[i].busy = true;
            p->send_free--;
            return &p->send_slots[i];
        }
    }
    return NULL;
}

static void release_send_slot(struct xp_slot *s)
{
    s->busy = false;
    s->op = NULL;
    s->peer->send_free++;
}

static uint16_t fold16(uint32_t crc)
{
    return (uint16_t)(crc ^ (crc >> 16));
}

/* GX_FAULT corrupt: flip one bit of the next data message from the peer,
 * as a fabric that missed an error would deliver it. */
static void maybe_corrupt(struct xp_peer *p, uint32_t tag, void *data, size_t len)
{
    if (!p->inject_corrupt || p->corrupt_tag != tag || len == 0)
        return;
    p->inject_corrupt = false;
    ((unsigned char *)data)[len / 2] ^= 0x10;
    GX_WARN(GX_SUB_COLL, "GX_FAULT: corrupted byte %zu of a %zu-byte message from rank %d",
            len / 2, len, p->rank);
}

static int post_msg(struct xp_peer *p, struct xp_slot *slot, int type, uint32_t tag,
                    const void *payload, size_t len)
{
    if (payload != slot->buf)
        memcpy(slot->buf, payload, len);
    uint64_t wire = XP_WIRE_TAG(type, tag);
    if (p->x->checksum)
        wire = XP_WIRE_WITH_CSUM(wire, fold16(gx_crc32c(0, slot->buf, len)));
    int rc = gx_fab_post_send(p->ep, slot->buf, len, p->slab_mr, wire, (uint64_t)(uintptr_t)slot);
    if (rc != GX_OK)
        release_send_slot(slot);
    return rc;
}

/* GX_FAULT regfail: the registration fails as a pinned-memory limit would. */
static int take_injected_regfail(struct gx_xport *x)
{
    if (!x->inject_regfail)
        return GX_OK;
    x->inject_regfail = false;
    return gx_fail(GX_ENOMEM, GX_SUB_COLL, "memory registration failed (injected by GX_FAULT)");
}

void gx_xport_inject(struct gx_xport *x, int peer, enum xp_inject what)
{
    pthread_mutex_lock(&x->lock);
    if (what == XP_INJECT_REGFAIL)
        x->inject_regfail = true;
    else if (peer >= 0 && peer < x->size && peer != x->rank)
        xp_fail_peer(&x->peers[peer], GX_EPEER, "the connection was closed (injected by GX_FAULT)");
    pthread_mutex_unlock(&x->lock);
}

void gx_xport_inject_corrupt(struct gx_xport *x, int peer, uint32_t tag)
{
    pthread_mutex_lock(&x->lock);
    if (peer >= 0 && peer < x->size) {
        x->peers[peer].inject_corrupt = true;
        x->peers[peer].corrupt_tag = tag;
    }
    pthread_mutex_unlock(&x->lock);
}

void xp_fail_peer(struct xp_peer *p, int status, const char *why)
{
    struct gx_xport *x = p->x;
    if (!p->failed)
        p->failed = status;
    struct xp_op *lists[3] = { p->posted_head, p->wait_head, p->rts_head };
    p->posted_head = p->posted_tail = NULL;
    p->wait_head = p->wait_tail = NULL;
    p->rts_head = NULL;
    for (int l = 0; l < 3; l++) {
        for (struct xp_op *op = lists[l], *next; op; op = next) {
            next = op->next;
            op_fail(op, status, "rank %d: %s with rank %d (tag %u) failed: %s", x->rank,
                    op->kind == XP_OP_SEND ? "send" : "receive", p->rank, op->tag, why);
        }
    }
    for (int i = 0; i < XP_SEND_SLOTS; i++) {
        struct xp_slot *s = &p->send_slots[i];
        if (s->busy && s->op && !s->op->done)
            op_fail(s->op, status, "rank %d: send to rank %d (tag %u) failed: %s", x->rank,
                    p->rank, s->op->tag, why);
        s->op = NULL;
    }
    for (int i = 0; i < XP_RNDV_TABLE; i++) {
        struct xp_op *op = x->rndv[i];
        if (op && op->peer == p->rank) {
            x->rndv[i] = NULL;
            op_fail(op, status, "rank %d: receive from rank %d (tag %u) failed: %s", x->rank,
                    p->rank, op->tag, why);
        }
    }
}

/* ---- sending -------------------------------------------------------------- */

static int start_send(struct xp_peer *p, struct xp_op *op)
{
    struct gx_xport *x = p->x;
    struct xp_slot *slot = take_send_slot(p);
    if (!slot)
        return GX_INPROGRESS;
    int rc;
    if (op->len <= x->eager_limit) {
        slot->op = op;
        op->state = XP_ST_EAGER;
        rc = op->dev ? gx_xport_mem_copy(slot->buf, false, op->buf, true, op->len) : GX_OK;
        if (rc != GX_OK)
            release_send_slot(slot);
        else
            rc = post_msg(p, slot, XP_MSG_EAGER, op->tag, op->dev ? slot->buf : op->buf,
                          op->len);
    } else {
        op->id = x->next_send_id++;
        struct xp_rts rts = { .size = op->len, .send_id = op->id };
        if (x->checksum && !op->dev) /* gx_xport_gdr_check refuses GX_CHECKSUM */
            rts.crc32c = gx_crc32c(0, op->buf, op->len);
        op->state = XP_ST_RTS_SENT;
        rc = post_msg(p, slot, XP_MSG_RTS, op->tag, &rts, sizeof(rts));
        if (rc == GX_OK) {
            op->next = p->rts_head;
            p->rts_head = op;
        }
    }
    return rc;
}

static void send_pending(struct xp_peer *p)
{
    while (p->ctl_count > 0 && p->send_free > 0) {
        struct xp_slot *slot = take_send_slot(p);
        struct xp_cts cts = p->ctl[0];
        memmove(p->ctl, p->ctl + 1, (size_t)(--p->ctl_count) * sizeof(p->ctl[0]));
        int rc = post_msg(p, slot, XP_MSG_CTS, 0, &cts, sizeof(cts));
        if (rc != GX_OK) {
            xp_fail_peer(p, rc, "could not post a control message");
            return;
        }
    }
    while (p->wait_head && p->send_free > 0) {
        struct xp_op *op = p->wait_head;
        p->wait_head = op->next;
        if (!p->wait_head)
            p->wait_tail = NULL;
        int rc = start_send(p, op);
        if (rc != GX_OK)
            op_fail(op, rc, "rank %d: posting a send to rank %d failed", p->x->rank, p->rank);
    }
}

static void send_cts(struct xp_peer *p, const struct xp_cts *cts)
{
    if (p->ctl_count == p->ctl_cap) {
        /* Control path: grows with the receives posted ahead of the sender. */
        int cap = p->ctl_cap ? 2 * p->ctl_cap : 16;
        struct xp_cts *bigger = realloc(p->ctl, (size_t)cap * sizeof(*bigger));
        if (!bigger) {
            xp_fail_peer(p, GX_ENOMEM, "no memory to queue a rendezvous answer");
            return;
        }
        p->ctl = bigger;
        p->ctl_cap = cap;
    }
    p->ctl[p->ctl_count++] = *cts;
    send_pending(p);
}

/* ---- receiving ------------------------------------------------------------ */

static void truncated(struct xp_op *op, int from, int to, size_t msg, size_t cap)
{
    op_fail(op, GX_ETRUNCATE,
            "message from rank %d to rank %d (tag %u) is %zu bytes but the receive buffer holds "
            "only %zu: post a receive at least as large as the message", from, to, op->tag, msg,
            cap);
}

/* An eager message meets its receive: `cs` is its folded CRC-32C when the
 * sender checksummed it (else -1), checked here rather than on arrival so a
 * message that waited as unexpected is checked (and corruptible) alike. */
static void deliver_eager(struct xp_peer *p, struct xp_op *op, void *data, size_t len, int32_t cs)
{
    if (len > op->len) {
        truncated(op, p->rank, p->x->rank, len, op->len);
        return;
    }
    if (p->rank != p->x->rank)
        maybe_corrupt(p, op->tag, data, len);
    if (cs >= 0 && fold16(gx_crc32c(0, data, len)) != (uint16_t)cs) {
        op_fail(op, GX_EPROTO, "rank %d: a %zu-byte message from rank %d (tag %u) failed its "
                "checksum: corrupted on the way (GX_CHECKSUM)", p->x->rank, len, p->rank,
                op->tag);
        xp_fail_peer(p, GX_EPROTO, "a message failed its checksum");
        return;
    }
    if (len && op->dev) {
        int rc = gx_xport_mem_copy(op->buf, true, data, false, len);
        if (rc != GX_OK) {
            op_fail(op, rc, "rank %d: copying a %zu-byte message from rank %d into device "
                    "memory failed: %s", p->x->rank, len, p->rank, gx_last_error());
            return;
        }
    } else if (len) {
        memcpy(op->buf, data, len);
    }
    op->received = len;
    op_finish(op, GX_OK);
}

static void start_rndv_recv(struct xp_peer *p, struct xp_op *op, const struct xp_rts *rts,
                            bool rts_crc)
{
    struct gx_xport *x = p->x;
    struct xp_cts cts = { .send_id = rts->send_id, .capacity = op->len };
    if (rts->size > op->len) {
        truncated(op, p->rank, x->rank, rts->size, op->len);
        cts.status = GX_ETRUNCATE;
        send_cts(p, &cts);
        return;
    }
    struct gx_fab_rcache_entry *e = NULL;
    int rc = take_injected_regfail(x);
    if (rc == GX_OK)
        rc = gx_fab_rcache_get(p->d->rcache_recv, op->buf, rts->size,
                               op->dev ? GX_FAB_MEM_CUDA : GX_FAB_MEM_HOST, &e);
    if (rc == GX_OK)
        rc = gx_fab_mr_pack_rkey(gx_fab_rcache_handle(e), &cts.rkey);
    if (rc != GX_OK) {
        if (e)
            gx_fab_rcache_put(p->d->rcache_recv, e);
        op_fail(op, rc, "rank %d: registering a %zu-byte receive buffer failed", x->rank, op->len);
        cts.status = rc;
        send_cts(p, &cts);
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
    send_cts(p, &cts);
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

static void on_message(struct xp_peer *p, uint8_t type, uint32_t tag, void *data, size_t len,
                       int32_t cs)
{
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
            op_fail(op, cts.status, "rank %d could not take the message from rank %d (tag %u)",
                    p->rank, p->x->rank, op->tag);
            return;
        }
        struct gx_fab_rcache_entry *e = NULL;
        int rc = take_injected_regfail(p->x);
        if (rc == GX_OK)
            rc = gx_fab_rcache_get(p->d->rcache_send, op->buf, op->len,
                                   op->dev ? GX_FAB_MEM_CUDA : GX_FAB_MEM_HOST, &e);
        if (rc == GX_OK) {
            op->reg = e;
            op->state = XP_ST_WRITING;
            rc = gx_fab_post_write_imm(p->ep, op->buf, op->len, gx_fab_rcache_handle(e),
                                       cts.raddr, &cts.rkey, cts.recv_id, (uint64_t)(uintptr_t)op);
        }
        if (rc != GX_OK) {
            if (e)
                gx_fab_rcache_put(p->d->rcache_send, e);
            op->reg = NULL;
            op_fail(op, rc, "rank %d: writing %zu bytes to rank %d failed", p->x->rank, op->len,
                    p->rank);
        }
        return;
    }
    struct xp_op *op = queue_take_tag(&p->posted_head, &p->posted_tail, tag);
    if (!op) {
        add_unexpected(p, type, tag, data, len, cs);
        return;
    }
    if (type == XP_MSG_EAGER)
        deliver_eager(p, op, data, len, cs);
    else
        start_rndv_recv(p, op, data, cs >= 0);
}

int xp_handle_cqe(struct gx_xport *x, const struct gx_fab_cqe *e)
{
    uint8_t ctx_type = *(const uint8_t *)(uintptr_t)e->context;
    if (ctx_type == XP_CTX_SEND_SLOT) {
        struct xp_slot *slot = (struct xp_slot *)(uintptr_t)e->context;
        struct xp_peer *p = slot->peer;
        struct xp_op *op = slot->op;
        release_send_slot(slot);
        if (e->status != GX_OK) {
            if (op && !op->done)
                op_fail(op, e->status, "rank %d: send to rank %d (tag %u) failed on %s",
                        x->rank, p->rank, op->tag, gx_fab_ep_name(p->ep));
            xp_fail_peer(p, e->status, "the link broke");
            return GX_OK;
        }
        if (op)
            op_finish(op, GX_OK);
        send_pending(p);
        return GX_OK;
    }
    if (ctx_type == XP_CTX_OP) {
        struct xp_op *op = (struct xp_op *)(uintptr_t)e->context;
        struct xp_peer *p = &x->peers[op->peer];
        if (op->reg)
            gx_fab_rcache_put(p->d->rcache_send, op->reg);
        op->reg = NULL;
        if (e->status != GX_OK) {
            op_fail(op, e->status, "rank %d: writing %zu bytes to rank %d failed on %s", x->rank,
                    op->len, p->rank, gx_fab_ep_name(p->ep));
            xp_fail_peer(p, e->status, "the link broke");
        } else {
            op_finish(op, GX_OK);
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
        if (op && op->id == e->imm) {
            x->rndv[e->imm % XP_RNDV_TABLE] = NULL;
            gx_fab_rcache_put(p->d->rcache_recv, op->reg);
            op->reg = NULL;
            if (!op->dev) /* device memory: the CPU must not read it */
                maybe_corrupt(p, op->tag, op->buf, op->received);
            if (op->has_crc && !op->dev && gx_crc32c(0, op->buf, op->received) != op->crc) {
                op_fail(op, GX_EPROTO, "rank %d: the %zu bytes rank %d wrote (tag %u) fail "
                        "their checksum: corrupted on the way (GX_CHECKSUM)", x->rank,
                        op->received, p->rank, op->tag);
                xp_fail_peer(p, GX_EPROTO, "a message failed its checksum");
                return GX_OK;
            }
            op_finish(op, GX_OK);
        }
    } else if (XP_WIRE_VERSION(e->tag) != XP_PROTO_VERSION) {
        xp_fail_peer(p, GX_EPROTO, "it speaks another transport protocol version");
        return GX_OK;
    } else {
        uint8_t type = (uint8_t)XP_WIRE_TYPE(e->tag);
        int32_t cs = (e->tag & XP_WIRE_CSUM_FLAG) ? (int32_t)XP_WIRE_CSUM(e->tag) : -1;
        /* Control messages are checked now; eager payloads when delivered. */
        if (type != XP_MSG_EAGER && cs >= 0 &&
            fold16(gx_crc32c(0, slot->buf, e->len)) != (uint16_t)cs) {
            char why[200];
            snprintf(why, sizeof(why), "a %zu-byte message from rank %d (tag %u) failed its "
                     "checksum: corrupted on the way (GX_CHECKSUM)", (size_t)e->len, p->rank,
                     XP_WIRE_USER_TAG(e->tag));
            xp_fail_peer(p, GX_EPROTO, why);
            return GX_OK;
        }
        on_message(p, type, XP_WIRE_USER_TAG(e->tag), slot->buf, e->len, cs);
    }
    int rc = xp_post_recv_slot(slot);
    if (rc != GX_OK)
        xp_fail_peer(p, rc, "could not re-post a receive slot");
    return GX_OK;
}

/* ---- posting ---------------------------------------------------------------- */

static int check_post(struct gx_xport *x, int peer, const char *what)
{
    if (x->aborted)
        return gx_fail(GX_EABORTED, GX_SUB_COLL, "%s: the communicator was aborted", what);
    if (peer < 0 || peer >= x->size)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: peer %d is out of range (communicator of %d)",
                       what, peer, x->size);
    if (x->peers[peer].failed)
        return gx_fail(x->peers[peer].failed, GX_SUB_COLL, "%s: the link to rank %d failed "
                       "earlier", what, peer);
    return GX_OK;
}

static struct xp_peer *peer_if_in_range(struct gx_xport *x, int peer)
{
    return peer >= 0 && peer < x->size ? &x->peers[peer] : NULL;
}

static void init_op(struct xp_op *op, int kind, int peer, uint32_t tag, void *buf, size_t len)
{
    memset(op, 0, sizeof(*op));
    op->ctx_type = XP_CTX_OP;
    op->kind = (uint8_t)kind;
    op->peer = peer;
    op->tag = tag;
    op->buf = buf;
    op->len = len;
}

/* A message to this rank from device memory: through host memory first. */
static void self_send_dev(struct xp_peer *p, uint32_t tag, const void *buf, size_t len,
                          struct xp_op *op)
{
    void *tmp = malloc(len ? len : 1);
    int rc = tmp ? gx_xport_mem_copy(tmp, false, buf, true, len) : GX_ENOMEM;
    if (rc == GX_OK)
        on_message(p, XP_MSG_EAGER, tag, tmp, len, -1);
    free(tmp);
    op_finish(op, rc);
}

int gx_xport_send_mem(struct gx_xport *x, struct xp_op *op, int peer, uint32_t tag,
                      const void *buf, size_t len, bool dev)
{
    pthread_mutex_lock(&x->lock);
    int rc = check_post(x, peer, "send");
    if (rc != GX_OK) {
        pthread_mutex_unlock(&x->lock);
        return rc;
    }
    init_op(op, XP_OP_SEND, peer, tag, (void *)buf, len);
    op->dev = dev && len;
    struct xp_peer *p = &x->peers[peer];
    if (peer == x->rank && op->dev) {
        self_send_dev(p, tag, buf, len, op);
    } else if (peer == x->rank) {
        on_message(p, XP_MSG_EAGER, tag, (void *)buf, len, -1); /* to self: deliver now */
        op_finish(op, GX_OK);
    } else if (p->wait_head || (rc = start_send(p, op)) == GX_INPROGRESS) {
        queue_push(&p->wait_head, &p->wait_tail, op);
        rc = GX_OK;
    }
    pthread_mutex_unlock(&x->lock);
    return rc;
}

int gx_xport_recv_mem(struct gx_xport *x, struct xp_op *op, int peer, uint32_t tag, void *buf,
                      size_t len, bool dev)
{
    pthread_mutex_lock(&x->lock);
    struct xp_peer *p = x->aborted ? NULL : peer_if_in_range(x, peer);
    struct xp_unexpected *prev = NULL, *u = p ? p->unexp_head : NULL;
    while (u && u->tag != tag) {
        prev = u;
        u = u->next;
    }
    /* A peer that sent and then left (a broadcast root that exits at once)
     * failed its link, but what it sent whole still counts: an eager
     * message that arrived before the failure is delivered. */
    int rc = u && u->type == XP_MSG_EAGER ? GX_OK : check_post(x, peer, "receive");
    if (rc != GX_OK) {
        pthread_mutex_unlock(&x->lock);
        return rc;
    }
    init_op(op, XP_OP_RECV, peer, tag, buf, len);
    op->dev = dev && len;
    if (!u) {
        queue_push(&p->posted_head, &p->posted_tail, op);
    } else {
        if (prev)
            prev->next = u->next;
        else
            p->unexp_head = u->next;
        if (p->unexp_tail == u)
            p->unexp_tail = prev;
        if (u->type == XP_MSG_EAGER)
            deliver_eager(p, op, u->data, u->len, u->cs);
        else
            start_rndv_recv(p, op, &u->rts, u->cs >= 0);
        free(u);
    }
    pthread_mutex_unlock(&x->lock);
    return GX_OK;
}
