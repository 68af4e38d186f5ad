/*
 * dpdk_rx.c - the receiving half of a dpdk connection: placing segments in
 * the posted receive or the registered target range (any arrival order),
 * duplicate suppression with a window of received flags, cumulative and
 * selective ACKs, in-order completions, and failing an endpoint (every
 * outstanding op flushed with the same status, the peer told).
 *
 * A segment of a message whose receive is not posted yet is dropped (and
 * answered with an ACK, so the sender knows we are alive): the sender's
 * retransmission timer brings it again, like an RNR retry on RDMA. So is a
 * segment of a write while an earlier message is incomplete (writes land in
 * order).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/dpdk/dpdk.h"

#define W GX_DPDK_WINDOW
#define ACK_EVERY 8
#define SIDE_ACK_MIN (64u << 10)
#define SIDE_ACK_GAP_NS 200000u

void dpdk_ep_flush_all(struct dpdk_ep *ep, int status, int prov_err)
{
    struct gx_fab_cqe e = { .ep = &ep->base, .status = status, .prov_err = prov_err };
    for (; ep->tx_done < ep->tx_post; ep->tx_done++) {
        struct dpdk_txop *op = &ep->txops[ep->tx_done % ep->depth];
        e.context = op->context;
        e.op = op->op;
        e.flags = GX_FAB_CQE_FLUSHED;
        gx_fab_swcq_push(&ep->cq->sw, &e);
    }
    e.op = GX_FAB_OP_RECV;
    for (; ep->rx_done < ep->rx_post; ep->rx_done++) {
        e.context = ep->rx[ep->rx_done % ep->depth].context;
        /* The receive whose message caused the failure is not a flush. */
        e.flags = ep->rx_done == ep->err_rx ? 0 : GX_FAB_CQE_FLUSHED;
        gx_fab_swcq_push(&ep->cq->sw, &e);
    }
    ep->snd_una = ep->snd_nxt = ep->psn_next;
    ep->inflight = ep->nlost = ep->nsacked = 0;
    dpdk_rx_drop_parked(ep);
}

void dpdk_ep_fail(struct dpdk_ep *ep, int status, int prov_err, bool tell_peer, const char *fmt,
                  ...)
{
    if (ep->state == EP_ERROR)
        return;
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gx_fab_log_ep_failure("dpdk", ep->base.name,
                          ep->tx_post != ep->tx_done || ep->rx_post != ep->rx_done, status, msg);
    bool was_up = ep->state == EP_ESTABLISHED;
    ep->state = EP_ERROR;
    ep->error = status;
    if (tell_peer && was_up)
        dpdk_tx_ctrl(ep, GX_DPDK_T_CLOSE, (int16_t)(status < -32768 ? -32768 : status), NULL, 0);
    dpdk_ep_flush_all(ep, status, prov_err);
    if (ep->fd >= 0)
        shutdown(ep->fd, SHUT_RDWR);
}

int dpdk_post_recv(struct gx_fab_ep *base, void *buf, size_t len, struct gx_fab_mr *mr,
                   uint64_t context)
{
    struct dpdk_ep *ep = (struct dpdk_ep *)base;
    if (ep->state == EP_ERROR)
        return ep->error;
    if (ep->state != EP_ESTABLISHED)
        return GX_ESTATE;
    if (ep->rx_post - ep->rx_done >= ep->depth)
        return GX_ENOMEM;
    struct dpdk_rxslot *r = &ep->rx[ep->rx_post % ep->depth];
    memset(r, 0, sizeof(*r));
    r->context = context;
    r->buf = buf;
    r->len = len;
    ep->rx_post++;
    return GX_OK;
}

static void replay_parked(struct dpdk_ep *ep);

/* A message completed: ACK it at once, and on the side channel as well when
 * it is large (the syscall is noise), none went lately, or no ACK frame
 * went at all (the port's ring was full: memif's zero-copy client refills
 * its ring 32 slots at a time, so a burst of ACKs fills 64 slots). The
 * receiver may stop polling after this completion; the sender must still
 * learn. */
static void ack_completion(struct dpdk_ep *ep, uint64_t msg_len)
{
    dpdk_rx_send_ack(ep);
    bool sent = !ep->ack_due;
    ep->ack_due = true;
    dpdk_rx_send_ack(ep); /* twice: one lost frame is then not a stall */
    sent |= !ep->ack_due;
    uint64_t now = gx_now_ns();
    if (sent && msg_len < SIDE_ACK_MIN && now - ep->side_ack_ns < SIDE_ACK_GAP_NS)
        return;
    ep->side_ack_ns = now;
    struct gx_dpdk_side_ack a = { .magic = GX_DPDK_SIDE_ACK_MAGIC, .ack = ep->rcv_nxt };
    if (send(ep->fd, &a, sizeof(a), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(a))
        ep->side_ack_ns = 0; /* socket full or closing: the frame ACKs stand alone */
}

static void complete_rx(struct dpdk_ep *ep)
{
    uint64_t last_len = 0;
    bool any = false;
    while (ep->rx_done < ep->rx_post) {
        const struct dpdk_rxslot *r = &ep->rx[ep->rx_done % ep->depth];
        if (!r->started || gx_dpdk_psn_le(ep->rcv_nxt, r->last_psn))
            break;
        struct gx_fab_cqe e = { .ep = &ep->base, .status = GX_OK, .op = GX_FAB_OP_RECV,
                                .context = r->context, .len = (size_t)r->msg_len };
        if (r->op == GX_DPDK_OP_WRITE_IMM) {
            e.flags = GX_FAB_CQE_IMM;
            e.imm = r->imm;
        } else {
            e.tag = r->tag;
        }
        gx_fab_swcq_push(&ep->cq->sw, &e);
        ep->rx_done++;
        any = true;
        if (ep->nparked)
            replay_parked(ep);
        last_len = r->msg_len;
    }
    if (any)
        ack_completion(ep, last_len);
}

/* Copy one write segment to its target, resolving the key again (a
 * registration may have gone while the segment was parked). */
static bool place_write(struct dpdk_ep *ep, const struct gx_dpdk_hdr *h, const uint8_t *payload)
{
    void *dst = gx_fab_mrtab_resolve(&ep->dom->mrtab, h->rkey_index, h->rkey_cookie,
                                     h->tag + h->offset, h->len);
    if (!dst) {
        ep->err_rx = ep->rx_done + (uint32_t)(h->msg_seq - (uint32_t)ep->rx_done);
        dpdk_ep_fail(ep, GX_EPROTO, 0, true, "write of %u bytes at 0x%llx (message %u) is "
                     "outside every registration its key names (deregistered, or a forged "
                     "key)", h->len, (unsigned long long)(h->tag + h->offset), h->msg_seq);
        return false;
    }
    if (h->len)
        memcpy(dst, payload, h->len);
    return true;
}

/* Parked write segments of message rx_done may land now. */
static void replay_parked(struct dpdk_ep *ep)
{
    for (uint32_t i = 0; i < ep->nparked && ep->state == EP_ESTABLISHED;) {
        struct gx_dpdk_hdr h;
        const uint8_t *payload;
        dpdk_port_frame(ep->parked[i], &h, &payload);
        if (h.msg_seq != (uint32_t)ep->rx_done) {
            i++;
            continue;
        }
        place_write(ep, &h, payload);
        dpdk_port_unpark(ep->parked[i]);
        ep->parked[i] = ep->parked[--ep->nparked];
    }
}

void dpdk_rx_drop_parked(struct dpdk_ep *ep)
{
    for (uint32_t i = 0; i < ep->nparked; i++)
        dpdk_port_unpark(ep->parked[i]);
    ep->nparked = 0;
}

static bool rx_data(struct dpdk_ep *ep, const struct gx_dpdk_hdr *h, const uint8_t *payload,
                    struct rte_mbuf *m)
{
    uint32_t p = h->psn;
    ep->ack_due = true;
    ep->ts_echo = h->ts;
    if (gx_dpdk_psn_lt(p, ep->rcv_nxt) || p - ep->rcv_nxt >= W || ep->rbits[p % W]) {
        ep->n_dup_rx++;
        return false;
    }
    uint64_t k = ep->rx_done + (uint32_t)(h->msg_seq - (uint32_t)ep->rx_done);
    if (k - ep->rx_done >= ep->rx_post - ep->rx_done) {
        ep->n_rnr++; /* its receive is not posted yet: the sender retries */
        return false;
    }
    /* Writes land in order of their messages, as on RDMA: a segment of a
     * write waits until every earlier message is complete, so a late segment
     * of an earlier write to the same bytes cannot land over it. It waits
     * parked (its packet buffer kept, counted as received) while the parking
     * budget lasts, else it is dropped and sent again. Sends land in their
     * own receive at once. */
    bool park = h->op == GX_DPDK_OP_WRITE_IMM && k != ep->rx_done;
    struct dpdk_rxslot *r = &ep->rx[k % ep->depth];
    if (!r->started) {
        r->started = true;
        r->op = h->op;
        r->msg_len = h->msg_len;
        r->last_psn = h->last_psn;
        r->tag = h->tag;
        r->imm = h->imm;
        if (h->op == GX_DPDK_OP_SEND && h->msg_len > r->len) {
            ep->err_rx = k;
            dpdk_ep_fail(ep, GX_ETRUNCATE, 0, true, "message %u of %llu bytes does not fit the "
                         "posted receive of %zu bytes", h->msg_seq,
                         (unsigned long long)h->msg_len, r->len);
            return false;
        }
        /* A write's whole range is checked once, before any byte of it lands. */
        if (h->op == GX_DPDK_OP_WRITE_IMM &&
            !gx_fab_mrtab_resolve(&ep->dom->mrtab, h->rkey_index, h->rkey_cookie, h->tag,
                                  h->msg_len)) {
            ep->err_rx = k;
            dpdk_ep_fail(ep, GX_EPROTO, 0, true, "write of %llu bytes at 0x%llx (message %u) is "
                         "outside every registration its key names (deregistered, or a forged "
                         "key)", (unsigned long long)h->msg_len, (unsigned long long)h->tag,
                         h->msg_seq);
            return false;
        }
    } else if (r->op != h->op || r->msg_len != h->msg_len || r->last_psn != h->last_psn) {
        ep->err_rx = k;
        dpdk_ep_fail(ep, GX_EPROTO, 0, true, "segment %u of message %u disagrees with its "
                     "message (length %llu, was %llu)", p, h->msg_seq,
                     (unsigned long long)h->msg_len, (unsigned long long)r->msg_len);
        return false;
    }
    if (park) {
        if (!m || ep->nparked >= DPDK_PARK_MAX || !dpdk_port_park()) {
            ep->n_early++;
            return false;
        }
        ep->parked[ep->nparked++] = m;
        ep->n_parked++;
    } else if (h->op == GX_DPDK_OP_SEND) {
        if (h->len)
            memcpy(r->buf + h->offset, payload, h->len);
    } else if (!place_write(ep, h, payload)) {
        return false;
    }
    ep->n_data_rx++;
    ep->rbits[p % W] = 1;
    if (gx_dpdk_psn_le(ep->rcv_high, p))
        ep->rcv_high = p + 1;
    while (ep->rbits[ep->rcv_nxt % W]) {
        ep->rbits[ep->rcv_nxt % W] = 0;
        ep->rcv_nxt++;
    }
    if (gx_dpdk_psn_lt(ep->rcv_high, ep->rcv_nxt))
        ep->rcv_high = ep->rcv_nxt;
    complete_rx(ep);
    /* An ACK every ACK_EVERY segments as well as after every poll: one lost
     * ACK then rarely leaves the sender waiting for its timer. */
    if (++ep->unacked >= ACK_EVERY)
        dpdk_rx_send_ack(ep);
    return park;
}

bool dpdk_rx_frame(struct dpdk_ep *ep, const struct gx_dpdk_hdr *h, const uint8_t *payload,
                   struct rte_mbuf *m)
{
    if (ep->state != EP_ESTABLISHED)
        return false;
    ep->heard_ns = gx_now_ns();
    switch (h->type) {
    case GX_DPDK_T_ACK:
        dpdk_tx_ack_in(ep, h, payload, h->len);
        break;
    case GX_DPDK_T_DATA:
        dpdk_tx_ack_in(ep, h, NULL, 0);
        return rx_data(ep, h, payload, m);
    case GX_DPDK_T_CLOSE:
        if (h->status == 0)
            dpdk_ep_fail(ep, GX_EPEER, 0, false, "the peer closed the connection");
        else
            dpdk_ep_fail(ep, GX_EPEER, h->status, false, "the peer failed the connection: %s",
                         gx_strerror(h->status));
        break;
    default:
        break;
    }
    return false;
}

void dpdk_rx_send_ack(struct dpdk_ep *ep)
{
    if (!ep->ack_due || ep->state != EP_ESTABLISHED)
        return;
    uint8_t sack[GX_DPDK_SACK_MAX_BYTES];
    size_t nbits = 0;
    if (gx_dpdk_psn_lt(ep->rcv_nxt + 1, ep->rcv_high))
        nbits = ep->rcv_high - ep->rcv_nxt - 1;
    if (nbits > 8 * sizeof(sack))
        nbits = 8 * sizeof(sack);
    size_t nbytes = (nbits + 7) / 8;
    memset(sack, 0, nbytes);
    for (size_t i = 0; i < nbits; i++)
        if (ep->rbits[(ep->rcv_nxt + 1 + (uint32_t)i) % W])
            sack[i / 8] |= (uint8_t)(1u << (i % 8));
    if (dpdk_tx_ctrl(ep, GX_DPDK_T_ACK, 0, sack, nbytes) == GX_OK) {  /* echoes ts_echo */
        ep->ack_due = false;
        ep->unacked = 0;
    }
}
