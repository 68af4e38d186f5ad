/*
 * verbs_rma.c - the verbs provider's one-sided operations (fabric.h:
 * post_write, post_read, post_atomic; GX_FAB_CAP_RMA and, when the HCA's
 * atomics are atomic with the CPU's too (IBV_ATOMIC_GLOB), GX_FAB_CAP_ATOMIC):
 * RDMA WRITE, RDMA READ, ATOMIC FETCH_AND_ADD / CMP_AND_SWP straight into
 * the peer's registered memory, with nothing running at the peer.
 *
 * Each takes one slot of the endpoint's tx ring, so it completes in post
 * order with the endpoint's sends and writes, and is issued in that order
 * too (verbs_issue_tx), but without waiting for a clear-to-send: it consumes
 * no receive. It is one signaled WR on QP 0. The initiator checks the packed
 * key's range and access first (the HCA checks them again), so a bad address
 * fails the post with GX_EINVAL instead of breaking the connection. A READ's
 * destination is registered for local write (the rc_dst cache); an atomic's
 * old value lands in the endpoint's registered atom_buf slot and is copied to
 * the caller's `result` when the completion is reported.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "fabric/verbs/verbs.h"

#define MAX_ONESIDED_BYTES (1ull << 30)

static inline uint32_t sq_room(const struct verbs_qp *q)
{
    return q->sq_depth - (uint32_t)(q->wr_posted - q->wr_retired);
}

int verbs_rkey_check(struct verbs_ep *ep, const struct gx_fab_rkey *rkey, uint64_t raddr,
                     size_t len, unsigned access, const char *what, uint32_t *rkey_out,
                     uint32_t *access_out)
{
    struct gx_verbs_rkey k;
    if (!rkey || rkey->len != sizeof(k))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "verbs: %s: %s: remote key of %u bytes, this "
                       "provider packs %zu (a key of another provider, or corrupted)",
                       ep->base.name, what, rkey ? rkey->len : 0, sizeof(k));
    memcpy(&k, rkey->bytes, sizeof(k));
    if (k.magic != GX_VERBS_RKEY_MAGIC)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "verbs: %s: %s: remote key has a bad magic "
                       "0x%08x", ep->base.name, what, k.magic);
    if (raddr < k.base || len > k.len || raddr - k.base > k.len - len)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "verbs: %s: %s of %zu bytes at 0x%" PRIx64
                       " is outside the registration [0x%" PRIx64 ", +%" PRIu64 ")",
                       ep->base.name, what, len, raddr, k.base, k.len);
    if (len && (k.access & access) != access)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "verbs: %s: %s: the target registration "
                       "lacks the access it needs (has 0x%x, needs 0x%x)", ep->base.name,
                       what, k.access & ~GX_VERBS_RKEY_FLUSH, access);
    *rkey_out = k.rkey;
    if (access_out)
        *access_out = k.access;
    return GX_OK;
}

int verbs_post_tx_slot(struct verbs_ep *ep, struct verbs_txop **out)
{
    if (ep->state != VEP_ESTABLISHED)
        return ep->state == VEP_ERROR ? ep->error : GX_ESTATE;
    if (ep->tx_post - ep->tx_done >= ep->depth)
        return GX_ENOMEM; /* queue full: poll, then post again */
    struct verbs_txop *op = &ep->tx[ep->tx_post % ep->depth];
    memset(op, 0, sizeof(*op));
    *out = op;
    return GX_OK;
}

bool verbs_rma_issue(struct verbs_ep *ep, struct verbs_txop *op, uint64_t k)
{
    struct verbs_qp *q = &ep->qps[0];
    if (sq_room(q) < 1)
        return false;
    struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)op->buf, .length = (uint32_t)op->len,
                           .lkey = op->lkey };
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = verbs_wr_id(q, WR_CTRL | WR_SIGNALED);
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = op->len ? &sge : NULL;
    wr.num_sge = op->len ? 1 : 0;
    if (op->op == GX_FAB_OP_ATOMIC) {
        uint32_t slot = (uint32_t)(k % ep->depth);
        sge.addr = (uint64_t)(uintptr_t)&ep->atom_buf[slot];
        sge.length = 8;
        sge.lkey = ep->atom_mr->lkey;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = op->atomic_op == GX_FAB_ATOMIC_CMP_SWAP ? IBV_WR_ATOMIC_CMP_AND_SWP
                                                            : IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = op->raddr;
        wr.wr.atomic.rkey = op->rkey;
        wr.wr.atomic.compare_add = op->atomic_op == GX_FAB_ATOMIC_CMP_SWAP ? op->compare
                                                                           : op->operand;
        wr.wr.atomic.swap = op->operand;
    } else {
        wr.opcode = op->op == GX_FAB_OP_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = op->raddr;
        wr.wr.rdma.rkey = op->rkey;
        if (op->op == GX_FAB_OP_WRITE && op->len && op->len <= ep->dom->max_inline)
            wr.send_flags |= IBV_SEND_INLINE;
    }
    int err = ibv_post_send(q->qp, &wr, &bad);
    if (err) {
        verbs_ep_fail(ep, GX_ESYSTEM, err, FAIL_NONE, "ibv_post_send (one-sided %s) on QP 0x%x "
                      "failed: %s", gx_fab_op_name(op->op), q->qp->qp_num, strerror(err));
        return false;
    }
    q->wr_posted++;
    q->sig[q->sig_tail++ % q->sq_depth] = (struct verbs_sig){ q->wr_posted, k };
    q->last_signaled = q->wr_posted;
    op->pending = 1;
    return true;
}

static int post_onesided(struct verbs_ep *ep, uint8_t fab_op, void *buf, size_t len,
                         struct gx_fab_mr *mr, uint64_t raddr, const struct gx_fab_rkey *rkey,
                         uint64_t context)
{
    if (len > MAX_ONESIDED_BYTES)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "verbs: %s: one-sided %s of %zu bytes: at most "
                       "%llu per operation", ep->base.name, gx_fab_op_name(fab_op), len,
                       MAX_ONESIDED_BYTES);
    uint32_t rk;
    int rc = verbs_rkey_check(ep, rkey, raddr, len,
                              fab_op == GX_FAB_OP_WRITE ? GX_FAB_ACCESS_REMOTE_WRITE
                                                        : GX_FAB_ACCESS_REMOTE_READ,
                              gx_fab_op_name(fab_op), &rk, NULL);
    struct verbs_txop *op = NULL;
    if (rc == GX_OK)
        rc = verbs_post_tx_slot(ep, &op);
    if (rc != GX_OK)
        return rc;
    if (fab_op == GX_FAB_OP_READ) {
        /* The HCA writes here: a registration with local write. */
        rc = len ? gx_fab_rcache_get(ep->dom->rc_dst, buf, len, GX_FAB_MEM_HOST, &op->rce)
                 : GX_OK;
        if (rc != GX_OK)
            return rc;
        op->rce_dst = true;
        op->lkey = op->rce ? ((struct verbs_mr *)gx_fab_rcache_handle(op->rce))->mr->lkey : 0;
    } else {
        rc = verbs_src_key(ep, buf, len, mr, &op->lkey, &op->rce);
        if (rc != GX_OK)
            return rc;
    }
    op->context = context;
    op->buf = buf;
    op->len = len;
    op->raddr = raddr;
    op->rkey = rk;
    op->op = fab_op;
    ep->tx_post++;
    verbs_issue_tx(ep);
    return GX_OK;
}

int verbs_post_write(struct gx_fab_ep *base, const void *buf, size_t len, struct gx_fab_mr *mr,
                     uint64_t raddr, const struct gx_fab_rkey *rkey, uint64_t context)
{
    return post_onesided((struct verbs_ep *)base, GX_FAB_OP_WRITE, (void *)buf, len, mr, raddr,
                         rkey, context);
}

int verbs_post_read(struct gx_fab_ep *base, void *buf, size_t len, struct gx_fab_mr *mr,
                    uint64_t raddr, const struct gx_fab_rkey *rkey, uint64_t context)
{
    return post_onesided((struct verbs_ep *)base, GX_FAB_OP_READ, buf, len, mr, raddr, rkey,
                         context);
}

int verbs_post_atomic(struct gx_fab_ep *base, enum gx_fab_atomic_op aop, uint64_t operand,
                      uint64_t compare, uint64_t *result, uint64_t raddr,
                      const struct gx_fab_rkey *rkey, uint64_t context)
{
    struct verbs_ep *ep = (struct verbs_ep *)base;
    if (!(ep->dom->base.caps & GX_FAB_CAP_ATOMIC))
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "verbs: %s: %s has no atomics usable "
                       "alongside the CPU's (atomic_cap is not IBV_ATOMIC_GLOB)", ep->base.name,
                       ep->dom->port.dev);
    if ((raddr & 7) || (aop != GX_FAB_ATOMIC_FETCH_ADD && aop != GX_FAB_ATOMIC_CMP_SWAP))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "verbs: %s: atomic %d at 0x%" PRIx64 ": needs "
                       "an 8-byte aligned address and fetch-add or compare-swap", ep->base.name,
                       (int)aop, raddr);
    uint32_t rk;
    int rc = verbs_rkey_check(ep, rkey, raddr, 8, GX_FAB_ACCESS_REMOTE_ATOMIC, "atomic", &rk,
                              NULL);
    if (rc == GX_OK && !ep->atom_buf) {
        ep->atom_buf = calloc(ep->depth, sizeof(uint64_t));
        ep->atom_mr = ep->atom_buf ? ep->dom->api->reg_mr(ep->dom->pd, ep->atom_buf,
                                                          ep->depth * sizeof(uint64_t),
                                                          IBV_ACCESS_LOCAL_WRITE)
                                   : NULL;
        if (!ep->atom_mr) {
            free(ep->atom_buf);
            ep->atom_buf = NULL;
            rc = gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "verbs: %s: registering the atomics' result "
                         "slots failed: %m", ep->base.name);
        }
    }
    struct verbs_txop *op = NULL;
    if (rc == GX_OK)
        rc = verbs_post_tx_slot(ep, &op);
    if (rc != GX_OK)
        return rc;
    op->context = context;
    op->len = 8;
    op->raddr = raddr;
    op->rkey = rk;
    op->op = GX_FAB_OP_ATOMIC;
    op->atomic_op = (uint8_t)aop;
    op->operand = operand;
    op->compare = compare;
    op->result = result;
    ep->tx_post++;
    verbs_issue_tx(ep);
    return GX_OK;
}
