/*
 * tcp_data.c - the tcp provider's data path: posting sends, receives and
 * emulated RDMA writes with immediate, moving frames over the streams, and
 * failing an endpoint (every outstanding op flushed with the same status).
 *
 * Progress reads every stream before writing so a peer's close or NAK is seen
 * before more data is queued behind it. Payloads are received straight into
 * the receive buffer or the registered target range: no staging copy.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/tcp/tcp.h"

#define TX_IOV_MAX 64

int tcp_ep_alloc(struct tcp_domain *dom, struct tcp_cq *cq, int nstreams, struct tcp_ep **out)
{
    struct tcp_ep *ep = calloc(1, sizeof(*ep));
    if (!ep)
        goto err_nomem;
    ep->depth = (uint32_t)gx_fab_queue_depth();
    ep->nstreams = nstreams;
    ep->streams = calloc((size_t)nstreams, sizeof(*ep->streams));
    ep->txops = calloc(ep->depth, sizeof(*ep->txops));
    ep->rx = calloc(ep->depth, sizeof(*ep->rx));
    if (!ep->streams || !ep->txops || !ep->rx)
        goto err_free_ep;
    for (int i = 0; i < nstreams; i++) {
        ep->streams[i].fd = -1;
        ep->streams[i].txq = calloc(ep->depth, sizeof(struct tcp_frame));
        ep->streams[i].rc_buf = malloc(GX_TCP_RCACHE_BYTES);
        if (!ep->streams[i].txq || !ep->streams[i].rc_buf)
            goto err_free_ep;
    }
    ep->base.ops = &dom->base.ops;
    ep->base.dom = &dom->base;
    ep->base.cq = &cq->sw.base;
    ep->base.peer_rank = -1;
    ep->dom = dom;
    ep->cq = cq;
    ep->state = EP_CONNECTING;
    if (gx_fab_swcq_attach(&cq->sw, &ep->base, 2 * ep->depth) != GX_OK)
        goto err_free_ep;
    *out = ep;
    return GX_OK;

err_free_ep:
    if (ep && ep->streams)
        for (int i = 0; i < nstreams; i++) {
            free(ep->streams[i].txq);
            free(ep->streams[i].rc_buf);
        }
    if (ep) {
        free(ep->streams);
        free(ep->txops);
        free(ep->rx);
        free(ep);
    }
err_nomem:
    return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "tcp: out of memory creating an endpoint");
}

void tcp_ep_free(struct tcp_ep *ep)
{
    gx_fab_swcq_detach(&ep->cq->sw, &ep->base, 2 * ep->depth);
    for (int i = 0; i < ep->nstreams; i++) {
        if (ep->streams[i].fd >= 0)
            close(ep->streams[i].fd);
        free(ep->streams[i].txq);
        free(ep->streams[i].rc_buf);
    }
    free(ep->streams);
    free(ep->txops);
    free(ep->rx);
    free(ep);
}

/* Complete every outstanding op with `status` and drop the queued frames. */
static void flush_all(struct tcp_ep *ep, int status, int prov_err)
{
    struct gx_fab_cqe e = { .ep = &ep->base, .status = status, .prov_err = prov_err,
                            .flags = GX_FAB_CQE_FLUSHED };
    for (; ep->tx_done < ep->tx_post; ep->tx_done++) {
        struct tcp_txop *op = &ep->txops[ep->tx_done % ep->depth];
        e.context = op->context;
        e.op = op->op;
        gx_fab_swcq_push(&ep->cq->sw, &e);
    }
    e.op = GX_FAB_OP_RECV;
    for (; ep->rx_done < ep->rx_post; ep->rx_done++) {
        e.context = ep->rx[ep->rx_done % ep->depth].context;
        gx_fab_swcq_push(&ep->cq->sw, &e);
    }
    for (int i = 0; i < ep->nstreams; i++) {
        ep->streams[i].txq_head = ep->streams[i].txq_tail;
        ep->streams[i].tx_off = 0;
    }
}

/* Move the endpoint to error, log once with its name, flush, and shut the
 * sockets so the peer learns at once. */
static void ep_fail(struct tcp_ep *ep, int status, int prov_err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void ep_fail(struct tcp_ep *ep, int status, int prov_err, const char *fmt, ...)
{
    if (ep->state == EP_ERROR)
        return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gx_fab_log_ep_failure("tcp", ep->base.name,
                          ep->tx_post != ep->tx_done || ep->rx_post != ep->rx_done, status, msg);
    ep->state = EP_ERROR;
    ep->error = status;
    flush_all(ep, status, prov_err);
    for (int i = 0; i < ep->nstreams; i++)
        if (ep->streams[i].fd >= 0)
            shutdown(ep->streams[i].fd, SHUT_RDWR);
}

/* Tell the sender why we refuse its message, best effort, then fail. */
static void nak_and_fail(struct tcp_ep *ep, struct tcp_stream *s, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void nak_and_fail(struct tcp_ep *ep, struct tcp_stream *s, int status, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    struct gx_tcp_hdr nak = { .magic = GX_TCP_MAGIC, .version = GX_TCP_VERSION,
                              .op = GX_TCP_OP_NAK, .hdr_len = sizeof(nak),
                              .msg_seq = s->rx_hdr.msg_seq, .status = status };
    /* Only when nothing is half-sent on this stream, or the NAK would land
     * inside another frame; the shutdown below informs the peer anyway. */
    if (s->tx_off == 0)
        (void)!send(s->fd, &nak, sizeof(nak), MSG_NOSIGNAL | MSG_DONTWAIT);
    ep_fail(ep, status, 0, "%s", msg);
}

static void complete_tx(struct tcp_ep *ep)
{
    while (ep->tx_done < ep->tx_post) {
        struct tcp_txop *op = &ep->txops[ep->tx_done % ep->depth];
        if (op->frames_left)
            break;
        struct gx_fab_cqe e = { .context = op->context, .ep = &ep->base, .op = op->op };
        gx_fab_swcq_push(&ep->cq->sw, &e);
        ep->tx_done++;
    }
}

static void complete_rx(struct tcp_ep *ep)
{
    while (ep->rx_done < ep->rx_post) {
        struct tcp_rxslot *r = &ep->rx[ep->rx_done % ep->depth];
        if (!r->started || r->got != r->msg_len)
            break;
        struct gx_fab_cqe e = { .context = r->context, .ep = &ep->base, .op = GX_FAB_OP_RECV,
                                .len = r->msg_len };
        if (r->op == GX_TCP_OP_WRITE_IMM) {
            e.flags = GX_FAB_CQE_IMM;
            e.imm = r->imm;
        } else {
            e.tag = r->tag;
        }
        gx_fab_swcq_push(&ep->cq->sw, &e);
        ep->rx_done++;
    }
}

/* ---- transmit ---------------------------------------------------------- */
static void stream_tx(struct tcp_ep *ep, struct tcp_stream *s)
{
    while (s->txq_head != s->txq_tail && ep->state == EP_ESTABLISHED) {
        struct iovec iov[TX_IOV_MAX];
        int n = 0;
        size_t total = 0;
        size_t off = s->tx_off;
        for (uint64_t i = s->txq_head; i != s->txq_tail && n + 2 <= TX_IOV_MAX; i++) {
            struct tcp_frame *f = &s->txq[i % ep->depth];
            size_t plen = (size_t)f->hdr.frame_len;
            size_t hoff = off < sizeof(f->hdr) ? off : sizeof(f->hdr);
            if (hoff < sizeof(f->hdr)) {
                iov[n].iov_base = (char *)&f->hdr + hoff;
                iov[n].iov_len = sizeof(f->hdr) - hoff;
                total += iov[n++].iov_len;
            }
            size_t poff = off - hoff;
            if (plen > poff) {
                iov[n].iov_base = (char *)f->payload + poff;
                iov[n].iov_len = plen - poff;
                total += iov[n++].iov_len;
            }
            off = 0;
        }
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)n };
        ssize_t sent = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            int err = errno;
            ep_fail(ep, err == EPIPE || err == ECONNRESET ? GX_EPEER : GX_ESYSTEM, err,
                    "send on stream %d: %s", (int)(s - ep->streams), strerror(err));
            return;
        }
        size_t left = (size_t)sent;
        while (s->txq_head != s->txq_tail) {
            struct tcp_frame *f = &s->txq[s->txq_head % ep->depth];
            size_t rest = sizeof(f->hdr) + (size_t)f->hdr.frame_len - s->tx_off;
            if (left < rest) {
                s->tx_off += left;
                break;
            }
            left -= rest;
            s->tx_off = 0;
            s->txq_head++;
            ep->txops[f->op_index % ep->depth].frames_left--;
        }
        if ((size_t)sent < total)
            return; /* socket buffer full: wait for the next progress */
    }
}

/* ---- receive ----------------------------------------------------------- */

/* A header has arrived on `s`: find where its payload goes. Returns false
 * when the frame must wait (its receive is not posted yet). */
static bool rx_place_frame(struct tcp_ep *ep, struct tcp_stream *s)
{
    const struct gx_tcp_hdr *h = &s->rx_hdr;
    uint32_t k = h->msg_seq - (uint32_t)ep->rx_done;
    if (k >= (1u << 31)) {
        nak_and_fail(ep, s, GX_EPROTO, "frame of message %u arrived after that message completed",
                     h->msg_seq);
        return true;
    }
    /* Frames are placed only for the oldest incomplete message: stripes of one
     * message land in parallel, but a later message never overtakes an
     * earlier one (overlapping writes land in post order, as on RDMA RC). */
    if (k != 0 || ep->rx_done >= ep->rx_post)
        return false; /* earlier message in flight, or receive posted late */
    struct tcp_rxslot *r = &ep->rx[(ep->rx_done + k) % ep->depth];
    if (!r->started) {
        if (h->op == GX_TCP_OP_SEND && h->msg_len > r->len) {
            nak_and_fail(ep, s, GX_ETRUNCATE,
                         "message %u of %" PRIu64 " bytes (tag %" PRIu64
                         ") is larger than the posted receive of %zu bytes",
                         h->msg_seq, h->msg_len, h->tag, r->len);
            return true;
        }
        r->started = true;
        r->op = h->op;
        r->msg_len = h->msg_len;
        r->got = 0;
        r->tag = h->tag;
        r->imm = h->imm;
    } else if (r->op != h->op || r->msg_len != h->msg_len) {
        nak_and_fail(ep, s, GX_EPROTO, "frames of message %u disagree on its op or length",
                     h->msg_seq);
        return true;
    }
    if (h->frame_len > r->msg_len - r->got) {
        nak_and_fail(ep, s, GX_EPROTO, "message %u receives more bytes than its length",
                     h->msg_seq);
        return true;
    }
    if (h->op == GX_TCP_OP_SEND) {
        s->rx_dest = r->buf + h->offset;
    } else {
        s->rx_dest = gx_fab_mrtab_resolve(&ep->dom->mrtab, h->rkey_index, h->rkey_cookie,
                                          h->raddr + h->offset, h->frame_len);
        if (!s->rx_dest) {
            nak_and_fail(ep, s, GX_EPROTO,
                         "write_imm %u of %" PRIu64 " bytes at 0x%" PRIx64
                         " with key %u: no such registration, stale key, no remote write "
                         "access, or out of its bounds",
                         h->msg_seq, h->frame_len, h->raddr + h->offset, h->rkey_index);
            return true;
        }
    }
    s->rx_slot = r;
    s->rx_left = h->frame_len;
    s->rx_state = RX_PAYLOAD;
    return true;
}

/* recv() returned n <= 0: classify it. */
static void rx_io_end(struct tcp_ep *ep, struct tcp_stream *s, ssize_t n)
{
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    int err = n == 0 ? 0 : errno;
    bool midframe = s->rx_state == RX_PAYLOAD || s->rx_hdr_got > 0;
    if (n == 0 && !midframe) {
        /* A clean close between frames: what the peer wrote on its other
         * streams before closing is still to be read, so the endpoint fails
         * only once every stream has ended. */
        s->rx_eof = true;
        if (!ep->eof_ns)
            ep->eof_ns = gx_now_ns();
        for (int i = 0; i < ep->nstreams; i++)
            if (!ep->streams[i].rx_eof)
                return; /* tcp_ep_progress() bounds the wait */
    }
    if (n == 0)
        ep_fail(ep, GX_EPEER, 0, "peer closed the connection%s (process exited or endpoint closed)",
                midframe ? " in the middle of a frame" : "");
    else
        ep_fail(ep, err == ECONNRESET ? GX_EPEER : GX_ESYSTEM, err, "recv on stream %d: %s",
                (int)(s - ep->streams), strerror(err));
}

/* Take up to `want` bytes of the read cache into `dst`; returns how many. */
static size_t rc_take(struct tcp_stream *s, void *dst, size_t want)
{
    size_t n = s->rc_len - s->rc_off;
    if (n > want)
        n = want;
    memcpy(dst, s->rc_buf + s->rc_off, n);
    s->rc_off += (uint32_t)n;
    return n;
}

/* Read what the socket holds, once the read cache is empty: into the cache,
 * or for a payload of GX_TCP_RCACHE_BYTES or more straight into its
 * destination. A cache fill shorter than asked means the socket was empty:
 * *drained stops this pass before a read that would only say EAGAIN. A
 * short payload read does not: the rest of a large frame is usually still
 * arriving, and reading on costs less than another progress pass.
 * Returns false when nothing came (the end was classified). */
static bool rx_read(struct tcp_ep *ep, struct tcp_stream *s, bool *drained)
{
    bool direct = s->rx_state == RX_PAYLOAD && s->rx_left >= GX_TCP_RCACHE_BYTES;
    char *dst = direct ? s->rx_dest : s->rc_buf;
    size_t want = direct ? (size_t)s->rx_left : GX_TCP_RCACHE_BYTES;
    ssize_t n = recv(s->fd, dst, want, MSG_DONTWAIT);
    if (n <= 0) {
        rx_io_end(ep, s, n);
        return false;
    }
    *drained = !direct && (size_t)n < want;
    if (direct) {
        s->rx_dest += n;
        s->rx_left -= (uint64_t)n;
    } else {
        s->rc_off = 0;
        s->rc_len = (uint32_t)n;
    }
    return true;
}

static void stream_rx(struct tcp_ep *ep, struct tcp_stream *s)
{
    bool drained = false;
    while (ep->state == EP_ESTABLISHED && !s->rx_eof) {
        bool cached = s->rc_off < s->rc_len;
        if (s->rx_state == RX_HDR) {
            if (s->rx_hdr_got < sizeof(s->rx_hdr)) {
                if (!cached) {
                    if (drained || !rx_read(ep, s, &drained))
                        return;
                    continue;
                }
                s->rx_hdr_got += rc_take(s, (char *)&s->rx_hdr + s->rx_hdr_got,
                                         sizeof(s->rx_hdr) - s->rx_hdr_got);
                if (s->rx_hdr_got < sizeof(s->rx_hdr))
                    continue;
                const char *why;
                struct gx_tcp_hdr h;
                if (gx_tcp_hdr_parse(&s->rx_hdr, sizeof(s->rx_hdr), &h, &why) != GX_OK) {
                    ep_fail(ep, GX_EPROTO, 0, "malformed frame header on stream %d: %s",
                            (int)(s - ep->streams), why);
                    return;
                }
                if (h.op == GX_TCP_OP_NAK) {
                    ep_fail(ep, h.status, 0, "peer refused message %u: %s (see the peer's log)",
                            h.msg_seq, gx_strerror(h.status));
                    return;
                }
            }
            /* A complete, valid header: place it (or wait for its receive). */
            if (!rx_place_frame(ep, s) || ep->state != EP_ESTABLISHED)
                return;
            continue;
        }
        if (s->rx_left && cached) {
            size_t n = rc_take(s, s->rx_dest, (size_t)s->rx_left);
            s->rx_dest += n;
            s->rx_left -= n;
        } else if (s->rx_left) {
            if (drained || !rx_read(ep, s, &drained))
                return;
        }
        if (s->rx_left)
            continue;
        s->rx_slot->got += s->rx_hdr.frame_len;
        s->rx_state = RX_HDR;
        s->rx_hdr_got = 0;
        complete_rx(ep);
    }
}

void tcp_ep_progress(struct gx_fab_ep *base)
{
    struct tcp_ep *ep = (struct tcp_ep *)base;
    if (ep->state != EP_ESTABLISHED)
        return;
    for (int i = 0; i < ep->nstreams; i++)
        stream_rx(ep, &ep->streams[i]);
    /* A stream still open after another ended may be waiting for a receive
     * that is never posted: the peer is gone all the same. */
    if (ep->state == EP_ESTABLISHED && ep->eof_ns &&
        gx_now_ns() - ep->eof_ns > GX_TCP_EOF_GRACE_NS) {
        int open = 0;
        for (int i = 0; i < ep->nstreams; i++)
            open += !ep->streams[i].rx_eof;
        ep_fail(ep, GX_EPEER, 0, "peer closed the connection (process exited or endpoint "
                "closed; %d of %d streams still held a message no receive was posted for "
                "after 1 s)", open, ep->nstreams);
    }
    for (int i = 0; i < ep->nstreams; i++)
        stream_tx(ep, &ep->streams[i]);
    if (ep->state == EP_ESTABLISHED)
        complete_tx(ep);
}

/* ---- posts ------------------------------------------------------------- */
static int post_check(struct tcp_ep *ep)
{
    if (ep->state == EP_ESTABLISHED)
        return GX_OK;
    if (ep->state == EP_ERROR)
        return ep->error;
    return GX_ESTATE;
}

static int post_tx(struct tcp_ep *ep, uint8_t fab_op, const struct gx_tcp_hdr *proto,
                   const void *buf, size_t len, uint64_t context)
{
    int rc = post_check(ep);
    if (rc != GX_OK)
        return rc;
    if (ep->tx_post - ep->tx_done >= ep->depth)
        return GX_ENOMEM; /* queue full: poll, then post again */
    if (len > GX_TCP_MAX_MSG)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "tcp: %s: message of %zu bytes is too large",
                       ep->base.name, len);
    uint64_t idx = ep->tx_post;
    struct tcp_txop *op = &ep->txops[idx % ep->depth];
    op->context = context;
    op->op = fab_op;
    int nframes = 1;
    size_t chunk = len;
    if (len >= ep->dom->stripe_min && ep->nstreams > 1) {
        nframes = ep->nstreams;
        chunk = ((len + (size_t)nframes - 1) / (size_t)nframes + 4095) & ~(size_t)4095;
        nframes = (int)((len + chunk - 1) / chunk);
    }
    op->frames_left = (uint32_t)nframes;
    int first = (int)(ep->rr++ % (unsigned)ep->nstreams);
    for (int i = 0; i < nframes; i++) {
        struct tcp_stream *s = &ep->streams[(first + i) % ep->nstreams];
        struct tcp_frame *f = &s->txq[s->txq_tail % ep->depth];
        size_t off = (size_t)i * chunk;
        f->hdr = *proto;
        f->hdr.msg_seq = (uint32_t)idx;
        f->hdr.msg_len = len;
        f->hdr.offset = off;
        f->hdr.frame_len = len - off < chunk ? len - off : chunk;
        f->payload = (const char *)buf + off;
        f->op_index = idx;
        s->txq_tail++;
    }
    ep->tx_post++;
    /* Eager: start writing now; the rest goes out on later polls. What the
     * socket took whole completes now, so a caller writing in pieces
     * (the transport's GX_WRITE_WINDOW) posts the next one in the same
     * poll instead of one piece per progress pass. */
    for (int i = 0; i < nframes; i++)
        stream_tx(ep, &ep->streams[(first + i) % ep->nstreams]);
    if (ep->state == EP_ESTABLISHED)
        complete_tx(ep);
    return GX_OK;
}

int tcp_post_send(struct gx_fab_ep *base, const void *buf, size_t len, struct gx_fab_mr *mr,
                  uint64_t tag, uint64_t context)
{
    struct tcp_ep *ep = (struct tcp_ep *)base;
    struct gx_tcp_hdr h = { .magic = GX_TCP_MAGIC, .version = GX_TCP_VERSION,
                            .op = GX_TCP_OP_SEND, .hdr_len = sizeof(h), .tag = tag };
    return post_tx(ep, GX_FAB_OP_SEND, &h, buf, len, context);
}

int tcp_post_write_imm(struct gx_fab_ep *base, const void *buf, size_t len, struct gx_fab_mr *mr,
                       uint64_t raddr, const struct gx_fab_rkey *rkey, uint32_t imm,
                       uint64_t context)
{
    struct tcp_ep *ep = (struct tcp_ep *)base;
    int rc = post_check(ep);
    if (rc != GX_OK)
        return rc;
    struct gx_fab_swkey key;
    rc = gx_fab_swkey_unpack(base, rkey, raddr, len, &key);
    if (rc != GX_OK)
        return rc;
    struct gx_tcp_hdr h = { .magic = GX_TCP_MAGIC, .version = GX_TCP_VERSION,
                            .op = GX_TCP_OP_WRITE_IMM, .hdr_len = sizeof(h), .imm = imm,
                            .raddr = raddr, .rkey_index = key.index, .rkey_cookie = key.cookie };
    return post_tx(ep, GX_FAB_OP_WRITE_IMM, &h, buf, len, context);
}

int tcp_post_recv(struct gx_fab_ep *base, void *buf, size_t len, struct gx_fab_mr *mr,
                  uint64_t context)
{
    struct tcp_ep *ep = (struct tcp_ep *)base;
    int rc = post_check(ep);
    if (rc != GX_OK)
        return rc;
    if (ep->rx_post - ep->rx_done >= ep->depth)
        return GX_ENOMEM;
    struct tcp_rxslot *r = &ep->rx[ep->rx_post % ep->depth];
    memset(r, 0, sizeof(*r));
    r->context = context;
    r->buf = buf;
    r->len = len;
    ep->rx_post++;
    return GX_OK;
}

void tcp_ep_close(struct gx_fab_ep *base)
{
    struct tcp_ep *ep = (struct tcp_ep *)base;
    if (ep->state != EP_ERROR) {
        ep->state = EP_ERROR;
        ep->error = GX_EABORTED;
        flush_all(ep, GX_EABORTED, 0);
    }
    tcp_ep_free(ep);
}

/* ---- sleeping ------------------------------------------------------------- */

int tcp_cq_wait_fds(struct gx_fab_cq *base, struct pollfd *fds, int max, int *nfds)
{
    struct tcp_cq *cq = (struct tcp_cq *)base;
    struct gx_fab_swcq *sw = &cq->sw;
    if (sw->head != sw->tail)
        return GX_INPROGRESS;
    /* Look once more before sleeping, as a poll would: a post writes its
     * frames at once (post_tx) but completes them only in a progress pass,
     * and a header parsed before its receive was posted is placed only by
     * one. Neither has an event to wake us: a send whose bytes had all left
     * slept out a whole slice (20 ms a message of gx-accept's p2p matrix). */
    for (int i = 0; i < sw->neps; i++)
        sw->progress(sw->eps[i]);
    if (sw->head != sw->tail)
        return GX_INPROGRESS;
    int n = 0;
    for (int i = 0; i < sw->neps; i++) {
        struct tcp_ep *ep = (struct tcp_ep *)sw->eps[i];
        if (ep->state == EP_ERROR)
            continue;
        if (ep->state == EP_ESTABLISHED && ep->eof_ns)
            return GX_INPROGRESS; /* a stream ended: its grace period is timed by polling */
        for (int k = 0; k < ep->nstreams; k++) {
            struct tcp_stream *s = &ep->streams[k];
            if (s->fd < 0)
                continue;
            if (s->rc_len > s->rc_off)
                return GX_INPROGRESS; /* bytes read ahead wait to be parsed */
            short ev = POLLIN;
            if (ep->state != EP_ESTABLISHED || s->txq_head != s->txq_tail)
                ev |= POLLOUT;
            if (n == max)
                return GX_ENOMEM;
            fds[n++] = (struct pollfd){ .fd = s->fd, .events = ev };
        }
    }
    for (int k = 0; k < TCP_CQ_LISTENERS; k++) {
        struct tcp_listener *l = cq->lst[k];
        if (!l)
            continue;
        if (n + 1 + l->half.n > max)
            return GX_ENOMEM;
        fds[n++] = (struct pollfd){ .fd = l->fd, .events = POLLIN };
        for (int i = 0; i < l->half.n; i++)
            fds[n++] = (struct pollfd){ .fd = gx_fab_sock_pending_at(&l->half, i)->fd,
                                        .events = POLLIN };
    }
    *nfds = n;
    return GX_OK;
}
