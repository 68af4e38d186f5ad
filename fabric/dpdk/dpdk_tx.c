/*
 * dpdk_tx.c - the sending half of a dpdk connection: posting sends and
 * emulated RDMA writes with immediate, segmentation to the port MTU, the
 * sending window with AIMD congestion control, ACK and selective-ACK
 * processing, loss detection (a segment sent more than GX_DPDK_DUPTHRESH
 * transmissions before one the peer has is lost) and retransmission on an
 * RTT-estimated timer (RFC 6298 style, backed off on repeated timeouts).
 *
 * Zero copy or one: a segment's frame points into the caller's buffer
 * where the port allows (dpdk_zc.c: net_memif), else the segment is copied
 * into a packet buffer, when it is (re)transmitted; the caller's buffer
 * stays untouched until the op completes, as with RDMA, so no copy is kept
 * for retransmits.
 */
#include <string.h>

#include <rte_mbuf.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/stats.h"
#include "fabric/dpdk/dpdk.h"

#define DUPTHRESH 3
#define W GX_DPDK_WINDOW

static inline uint32_t now_us(void)
{
    return (uint32_t)(gx_now_ns() / 1000);
}

static inline struct dpdk_seg *seg_at(struct dpdk_ep *ep, uint32_t psn)
{
    return &ep->segs[psn % W];
}

/* ---- frames ------------------------------------------------------------- */
/* Ethernet/IPv4/UDP and gx headers at `f` for `payload` bytes after them. */
static void frame_hdrs(struct dpdk_ep *ep, uint8_t *f, size_t payload, struct gx_dpdk_hdr *h)
{
    gx_dpdk_put_l2l4(f, &ep->addr, sizeof(*h) + payload);
    h->magic = GX_DPDK_MAGIC;
    h->version = GX_DPDK_VERSION;
    h->conn_id = ep->peer_conn_id;
    h->cookie = ep->peer_cookie;
    h->ack = ep->rcv_nxt;
    h->len = (uint16_t)payload;
    memcpy(f + GX_DPDK_L2L4_LEN, h, sizeof(*h));
}

static struct rte_mbuf *frame_alloc(struct dpdk_ep *ep, size_t payload, struct gx_dpdk_hdr *h)
{
    struct rte_mbuf *m;
    if (dpdk_port_alloc(&m, 1) != GX_OK)
        return NULL;
    uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(GX_DPDK_HDRS_LEN + payload));
    if (!f) {
        rte_pktmbuf_free(m);
        return NULL;
    }
    frame_hdrs(ep, f, payload, h);
    return m;
}

int dpdk_tx_ctrl(struct dpdk_ep *ep, uint8_t type, int16_t status, const uint8_t *sack,
                 size_t sack_len)
{
    struct gx_dpdk_hdr h;
    memset(&h, 0, sizeof(h));
    h.type = type;
    h.status = status;
    h.ts = ep->ts_echo;
    struct rte_mbuf *m = frame_alloc(ep, sack_len, &h);
    if (!m)
        return GX_ENOMEM;
    if (sack_len)
        memcpy(rte_pktmbuf_mtod_offset(m, uint8_t *, GX_DPDK_HDRS_LEN), sack, sack_len);
    return dpdk_port_tx(&m, 1) == 1 ? GX_OK : GX_ENOMEM;
}

static struct rte_mbuf *data_frame(struct dpdk_ep *ep, uint32_t psn, uint64_t op_index)
{
    const struct dpdk_txop *op = &ep->txops[op_index % ep->depth];
    uint64_t off = (uint64_t)(psn - op->first_psn) * ep->mss;
    size_t plen = op->len - off < ep->mss ? (size_t)(op->len - off) : ep->mss;
    struct gx_dpdk_hdr h;
    memset(&h, 0, sizeof(h));
    h.type = GX_DPDK_T_DATA;
    h.op = op->op == GX_FAB_OP_SEND ? GX_DPDK_OP_SEND : GX_DPDK_OP_WRITE_IMM;
    h.psn = psn;
    h.msg_seq = (uint32_t)op_index;
    h.last_psn = op->last_psn;
    h.imm = op->imm;
    h.msg_len = op->len;
    h.offset = off;
    h.tag = op->tag;
    h.rkey_cookie = op->rkey_cookie;
    h.rkey_index = op->rkey_index;
    h.ts = now_us();
    /* Short payloads are copied: one buffer is cheaper than a chain of two
     * for memif to walk (the 8-byte latency path). */
    if (plen >= DPDK_ZC_MIN && dpdk_zc_on()) { /* the payload stays in the caller's buffer */
        uint8_t *f;
        struct rte_mbuf *m = dpdk_zc_frame(ep, op->buf + off, plen, &f);
        if (m)
            frame_hdrs(ep, f, plen, &h);
        return m;
    }
    struct rte_mbuf *m = frame_alloc(ep, plen, &h);
    if (m && plen)
        memcpy(rte_pktmbuf_mtod_offset(m, uint8_t *, GX_DPDK_HDRS_LEN), op->buf + off, plen);
    return m;
}

/* ---- posting ------------------------------------------------------------ */
static int post_check(struct dpdk_ep *ep)
{
    if (ep->state == EP_ERROR)
        return ep->error;
    if (ep->state != EP_ESTABLISHED)
        return GX_ESTATE;
    if (ep->tx_post - ep->tx_done >= ep->depth)
        return GX_ENOMEM;
    return GX_OK;
}

static int post_tx(struct dpdk_ep *ep, uint8_t op, const void *buf, size_t len, uint64_t tag,
                   uint32_t imm, uint32_t rkey_index, uint64_t rkey_cookie, uint64_t context)
{
    if (len > GX_DPDK_MAX_MSG)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "dpdk: %s: message of %zu bytes is over the "
                       "limit", ep->base.name, len);
    uint64_t nseg = len ? (len + ep->mss - 1) / ep->mss : 1;
    struct dpdk_txop *t = &ep->txops[ep->tx_post % ep->depth];
    t->context = context;
    t->buf = buf;
    t->len = len;
    t->tag = tag;
    t->imm = imm;
    t->rkey_index = rkey_index;
    t->rkey_cookie = rkey_cookie;
    t->op = op;
    t->first_psn = ep->psn_next;
    t->last_psn = ep->psn_next + (uint32_t)(nseg - 1);
    ep->psn_next += (uint32_t)nseg;
    ep->tx_post++;
    dpdk_tx_progress(ep);
    return GX_OK;
}

int dpdk_post_send(struct gx_fab_ep *base, const void *buf, size_t len, struct gx_fab_mr *mr,
                   uint64_t tag, uint64_t context)
{
    struct dpdk_ep *ep = (struct dpdk_ep *)base;
    int rc = post_check(ep);
    if (rc != GX_OK)
        return rc;
    return post_tx(ep, GX_FAB_OP_SEND, buf, len, tag, 0, 0, 0, context);
}

int dpdk_post_write_imm(struct gx_fab_ep *base, const void *buf, size_t len, struct gx_fab_mr *mr,
                        uint64_t raddr, const struct gx_fab_rkey *rkey, uint32_t imm,
                        uint64_t context)
{
    struct dpdk_ep *ep = (struct dpdk_ep *)base;
    int rc = post_check(ep);
    if (rc != GX_OK)
        return rc;
    struct gx_fab_swkey key;
    rc = gx_fab_swkey_unpack(base, rkey, raddr, len, &key);
    if (rc != GX_OK)
        return rc;
    return post_tx(ep, GX_FAB_OP_WRITE_IMM, buf, len, raddr, imm, key.index, key.cookie, context);
}

/* ---- acknowledgements --------------------------------------------------- */
/* RTO from the estimates; ACK progress also ends a timeout back-off. */
static void rto_update(struct dpdk_ep *ep)
{
    if (!ep->srtt_ns)
        return;
    uint64_t rto = ep->srtt_ns + 4 * ep->rttvar_ns;
    if (rto < dpdk_tuning.rto_min_ns)
        rto = dpdk_tuning.rto_min_ns;
    if (rto > dpdk_tuning.rto_max_ns)
        rto = dpdk_tuning.rto_max_ns;
    ep->rto_ns = rto;
}

static void rtt_sample(struct dpdk_ep *ep, uint64_t rtt)
{
    if (!ep->srtt_ns) {
        ep->srtt_ns = rtt;
        ep->rttvar_ns = rtt / 2;
    } else {
        uint64_t d = rtt > ep->srtt_ns ? rtt - ep->srtt_ns : ep->srtt_ns - rtt;
        ep->rttvar_ns = (3 * ep->rttvar_ns + d) / 4;
        ep->srtt_ns = (7 * ep->srtt_ns + rtt) / 8;
    }
}

static void seg_leave(struct dpdk_ep *ep, struct dpdk_seg *s)
{
    if (s->state == SEG_INFLIGHT)
        ep->inflight--;
    else if (s->state == SEG_LOST)
        ep->nlost--;
    else if (s->state == SEG_SACKED)
        ep->nsacked--;
}

static void complete_ops(struct dpdk_ep *ep)
{
    struct gx_fab_cqe e = { .ep = &ep->base, .status = GX_OK };
    if (!dpdk_zc_idle(ep))
        return; /* a frame still points into a caller's buffer (dpdk_zc.c) */
    while (ep->tx_done < ep->tx_post) {
        const struct dpdk_txop *op = &ep->txops[ep->tx_done % ep->depth];
        if (!gx_dpdk_psn_lt(op->last_psn, ep->snd_una))
            break;
        e.context = op->context;
        e.op = op->op;
        e.len = op->len;
        gx_fab_swcq_push(&ep->cq->sw, &e);
        ep->tx_done++;
    }
}

static void enter_recovery(struct dpdk_ep *ep)
{
    if (ep->in_recovery)
        return;
    double floor = dpdk_tuning.cwnd_min;
    ep->ssthresh = ep->cwnd / 2 < floor ? floor : ep->cwnd / 2;
    ep->cwnd = ep->ssthresh;
    ep->in_recovery = true;
    ep->recover_psn = ep->snd_nxt;
}

void dpdk_tx_ack_in(struct dpdk_ep *ep, const struct gx_dpdk_hdr *h, const uint8_t *sack,
                    size_t sack_len)
{
    uint32_t a = h->ack;
    if (gx_dpdk_psn_lt(ep->snd_una, a) && gx_dpdk_psn_le(a, ep->snd_nxt)) {
        uint64_t now = gx_now_ns();
        uint32_t newly = a - ep->snd_una;
        if (h->type == GX_DPDK_T_ACK && h->ts) {
            /* The echo dates the transmission that arrived, retransmission
             * or not. One from before our last timeout means the original
             * got there: the timeout was spurious (a slow peer), so undo
             * its window cut (Eifel, RFC 3522). */
            uint32_t age = now_us() - h->ts;
            if (age < 10u * 1000 * 1000)
                rtt_sample(ep, (uint64_t)age * 1000);
            if (ep->undo_cwnd > 0 && (int32_t)(h->ts - ep->timeout_us) < 0) {
                ep->cwnd = ep->undo_cwnd;
                ep->ssthresh = ep->undo_ssthresh;
                ep->in_recovery = false;
                ep->n_spurious++;
            }
            ep->undo_cwnd = 0;
        }
        for (uint32_t p = ep->snd_una; p != a; p++) {
            struct dpdk_seg *s = seg_at(ep, p);
            seg_leave(ep, s);
            if ((int32_t)(s->txno - ep->delivered_txno) > 0)
                ep->delivered_txno = s->txno;
            s->state = SEG_FREE;
        }
        ep->snd_una = a;
        ep->progress_ns = now;
        ep->probed = false;
        rto_update(ep);
        if (gx_dpdk_psn_lt(ep->lost_scan, a))
            ep->lost_scan = a;
        if (ep->in_recovery && gx_dpdk_psn_le(ep->recover_psn, a))
            ep->in_recovery = false;
        if (!ep->in_recovery) {
            if (ep->cwnd < ep->ssthresh)
                ep->cwnd += newly;
            else
                ep->cwnd += (double)newly / ep->cwnd;
            if (ep->cwnd > ep->cwnd_cap)
                ep->cwnd = ep->cwnd_cap;
        }
        complete_ops(ep);
    }
    if (!sack_len)
        return;
    /* Selective ACKs, then every older segment sent well before one the
     * peer has is lost. */
    uint32_t high = ep->snd_una;
    bool any = false;
    for (size_t i = 0; i < sack_len * 8; i++) {
        if (!(sack[i / 8] & (1u << (i % 8))))
            continue;
        uint32_t p = a + 1 + (uint32_t)i;
        if (gx_dpdk_psn_lt(p, ep->snd_una) || !gx_dpdk_psn_lt(p, ep->snd_nxt))
            continue;
        struct dpdk_seg *s = seg_at(ep, p);
        if (s->state == SEG_INFLIGHT || s->state == SEG_LOST) {
            seg_leave(ep, s);
            s->state = SEG_SACKED;
            ep->nsacked++;
        }
        if ((int32_t)(s->txno - ep->delivered_txno) > 0)
            ep->delivered_txno = s->txno;
        high = p;
        any = true;
    }
    if (!any)
        return;
    bool lost = false;
    for (uint32_t p = ep->snd_una; p != high; p++) {
        struct dpdk_seg *s = seg_at(ep, p);
        if (s->state == SEG_INFLIGHT && (int32_t)(ep->delivered_txno - s->txno) > DUPTHRESH) {
            ep->inflight--;
            s->state = SEG_LOST;
            ep->nlost++;
            if (gx_dpdk_psn_lt(p, ep->lost_scan))
                ep->lost_scan = p;
            lost = true;
        }
    }
    if (lost)
        enter_recovery(ep);
}

/* ---- timers and transmission --------------------------------------------- */
static void on_timeout(struct dpdk_ep *ep, uint64_t now)
{
    ep->n_timeouts++;
    if (ep->undo_cwnd == 0) { /* first timeout of a series: what to restore */
        ep->undo_cwnd = ep->cwnd;
        ep->undo_ssthresh = ep->ssthresh;
    }
    ep->timeout_us = (uint32_t)(now / 1000);
    for (uint32_t p = ep->snd_una; p != ep->snd_nxt; p++) {
        struct dpdk_seg *s = seg_at(ep, p);
        if (s->state == SEG_INFLIGHT) {
            ep->inflight--;
            s->state = SEG_LOST;
            ep->nlost++;
        }
    }
    ep->lost_scan = ep->snd_una;
    double floor = dpdk_tuning.cwnd_min;
    ep->ssthresh = ep->cwnd / 2 < floor ? floor : ep->cwnd / 2;
    ep->cwnd = floor; /* random loss is not congestion; the back-off protects a dead link */
    ep->in_recovery = true;
    ep->recover_psn = ep->snd_nxt;
    ep->rto_ns = ep->rto_ns * 2 > dpdk_tuning.rto_max_ns ? dpdk_tuning.rto_max_ns : ep->rto_ns * 2;
    ep->progress_ns = now;
}

/* Tail loss probe: no ACK progress for about two round trips while data is
 * out. A lost ACK or a lost last segment would otherwise wait for the full
 * timeout; sending the newest unacknowledged segment again draws an ACK
 * (with its SACKs) from the peer, and costs one frame when nothing was lost. */
static void tail_probe(struct dpdk_ep *ep)
{
    ep->probed = true;
    for (uint32_t p = ep->snd_nxt; p-- != ep->snd_una;) {
        struct dpdk_seg *s = seg_at(ep, p);
        if (s->state != SEG_INFLIGHT)
            continue;
        ep->inflight--;
        s->state = SEG_LOST;
        ep->nlost++;
        if (gx_dpdk_psn_lt(p, ep->lost_scan))
            ep->lost_scan = p;
        ep->n_probes++;
        return;
    }
}

struct batch {
    struct rte_mbuf *m[DPDK_BURST];
    uint32_t psn[DPDK_BURST];
    bool fresh[DPDK_BURST]; /* a new segment, not a retransmission */
    unsigned n;
};

static void batch_flush(struct dpdk_ep *ep, struct batch *b)
{
    unsigned sent = dpdk_port_tx(b->m, b->n);
    ep->n_data_tx += sent;
    /* The port's ring was full: what did not go is taken back as if never
     * sent (new segments rejoin the unsent tail, retransmissions stay lost),
     * with no congestion signal. The unsent ones are the batch's tail. */
    for (unsigned i = b->n; i-- > sent;) {
        struct dpdk_seg *s = seg_at(ep, b->psn[i]);
        ep->inflight--;
        if (b->fresh[i]) {
            s->state = SEG_FREE;
            ep->snd_nxt = b->psn[i];
            ep->seg_op = s->op_index;
        } else {
            s->state = SEG_LOST;
            ep->nlost++;
            ep->n_retx--;
            if (gx_dpdk_psn_lt(b->psn[i], ep->lost_scan))
                ep->lost_scan = b->psn[i];
        }
    }
    if (sent < b->n)
        ep->tx_blocked = true;
    b->n = 0;
}

/* Transmit `psn` (new or lost); false when no packet buffer was free. */
static bool transmit(struct dpdk_ep *ep, struct batch *b, uint32_t psn, uint64_t op_index,
                     bool fresh, uint64_t now)
{
    struct rte_mbuf *m = data_frame(ep, psn, op_index);
    if (!m)
        return false;
    struct dpdk_seg *s = seg_at(ep, psn);
    s->sent_ns = now;
    s->op_index = op_index;
    s->txno = ++ep->txno;
    s->state = SEG_INFLIGHT;
    ep->inflight++;
    b->m[b->n] = m;
    b->fresh[b->n] = fresh;
    b->psn[b->n++] = psn;
    if (b->n == DPDK_BURST)
        batch_flush(ep, b);
    return !ep->tx_blocked;
}

void dpdk_tx_progress(struct dpdk_ep *ep)
{
    if (ep->state != EP_ESTABLISHED)
        return;
    uint64_t now = gx_now_ns();
    bool busy = ep->snd_una != ep->psn_next;
    if (!busy) {
        if (ep->tx_done != ep->tx_post)
            complete_ops(ep); /* held back by dpdk_zc_idle() */
        return;
    }
    if (ep->snd_una != ep->snd_nxt && now - ep->progress_ns > ep->rto_ns)
        on_timeout(ep, now);
    else if (ep->snd_una != ep->snd_nxt && !ep->probed && ep->srtt_ns &&
             now - ep->progress_ns > 2 * ep->srtt_ns + dpdk_tuning.rto_min_ns / 4)
        tail_probe(ep);
    if (ep->snd_una != ep->snd_nxt && now - ep->heard_ns > dpdk_tuning.peer_timeout_ns) {
        struct dpdk_port_stats st;
        dpdk_port_stats(&st);
        GX_INFO(GX_SUB_FABRIC, "dpdk: port rx %llu tx %llu tx-full %llu unknown %llu cookie %llu "
                "not-gx %llu", (unsigned long long)st.rx_frames, (unsigned long long)st.tx_frames,
                (unsigned long long)st.tx_full, (unsigned long long)st.unknown_conn,
                (unsigned long long)st.bad_cookie, (unsigned long long)st.drops[1]);
        dpdk_ep_fail(ep, GX_ETIMEOUT, 0, true, "no answer for %.1f s with %u segments "
                     "unacknowledged after %llu retransmissions (is the process stopped or "
                     "the link down?)", (double)(now - ep->heard_ns) / 1e9,
                     ep->snd_nxt - ep->snd_una, (unsigned long long)ep->n_retx);
        return;
    }
    struct batch b = { .n = 0 };
    ep->tx_blocked = false;
    uint32_t budget = ep->cwnd > ep->inflight ? (uint32_t)ep->cwnd - ep->inflight : 0;
    /* 1. Lost segments, oldest first. */
    for (uint32_t p = ep->lost_scan; ep->nlost && budget && p != ep->snd_nxt; p++) {
        struct dpdk_seg *s = seg_at(ep, p);
        ep->lost_scan = p;
        if (s->state != SEG_LOST)
            continue;
        ep->nlost--;
        s->state = SEG_FREE;
        s->retx = 1;
        ep->n_retx++;
        budget--;
        if (!transmit(ep, &b, p, s->op_index, false, now)) {
            if (s->state == SEG_FREE) { /* no packet buffer */
                s->state = SEG_LOST;
                ep->nlost++;
                ep->n_retx--;
            }
            goto out;
        }
        gx_pstat_add(GX_PSTAT_RETRANSMITS, 1); /* gx_comm_stats */
    }
    /* 2. New segments, inside the window. */
    if (ep->snd_una == ep->snd_nxt && budget) {
        ep->progress_ns = now;
        ep->heard_ns = now; /* the silence timer starts with the first unanswered frame */
    }
    while (budget && ep->snd_nxt != ep->psn_next && ep->snd_nxt - ep->snd_una < W) {
        while (gx_dpdk_psn_lt(ep->txops[ep->seg_op % ep->depth].last_psn, ep->snd_nxt))
            ep->seg_op++;
        uint32_t p = ep->snd_nxt;
        seg_at(ep, p)->retx = 0;
        ep->snd_nxt++;
        budget--;
        if (!transmit(ep, &b, p, ep->seg_op, true, now)) {
            if (seg_at(ep, p)->state == SEG_FREE && !ep->tx_blocked)
                ep->snd_nxt = p; /* no packet buffer */
            break;
        }
    }
out:
    if (b.n)
        batch_flush(ep, &b);
}
