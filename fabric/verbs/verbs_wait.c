/*
 * verbs_wait.c - sleeping until a verbs cq has work (waits that yield,
 * GX_SPIN_US; gx_fab_cq_wait_fds in fabric.h): one completion channel per gx
 * cq, every ibv_cq of it created on the channel, armed with
 * ibv_req_notify_cq before a sleep and its event taken and acknowledged
 * after. Connection work and the endpoints' side channels (a peer that dies
 * says so there) wake a sleep too: verbs_cm_wait_fds.
 *
 * The order that loses no wake-up: arm every ibv_cq, then look once more
 * (the endpoints' deferred work, such as the CTS a posted receive owes its
 * sender, and every completion that arrived before the arm); a completion
 * after the arm raises the channel's event. What no event announces: a
 * clear-to-send arriving for one of our sends (an RDMA write into our cts
 * ring, verbs_data.c); while a send waits for one, the wait polls.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>

#include "common/log.h"
#include "fabric/verbs/verbs.h"

void verbs_wait_channel_open(struct verbs_cq *cq)
{
    const struct gx_verbs_api *api = cq->dom->api;
    if (!api->create_comp_channel || !api->destroy_comp_channel || !api->get_cq_event ||
        !api->ack_cq_events) {
        GX_INFO(GX_SUB_FABRIC, "verbs: the library has no completion channels: waits on %s "
                "poll (GX_SPIN_US does not apply)", cq->dom->port.dev);
        return;
    }
    struct ibv_comp_channel *ch = api->create_comp_channel(cq->dom->ctx);
    if (!ch) {
        GX_INFO(GX_SUB_FABRIC, "verbs: ibv_create_comp_channel on %s failed (%m): waits poll",
                cq->dom->port.dev);
        return;
    }
    int fl = fcntl(ch->fd, F_GETFL);
    if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        GX_INFO(GX_SUB_FABRIC, "verbs: completion channel of %s: fcntl: %m: waits poll",
                cq->dom->port.dev);
        api->destroy_comp_channel(ch);
        return;
    }
    cq->ch = ch;
}

/* After every ibv_cq on it is destroyed (each event taken was acknowledged
 * in verbs_cq_wait_done, so ibv_destroy_cq does not wait for one). */
void verbs_wait_channel_close(struct verbs_cq *cq)
{
    if (!cq->ch)
        return;
    int err = cq->dom->api->destroy_comp_channel(cq->ch);
    if (err)
        GX_WARN(GX_SUB_FABRIC, "verbs: ibv_destroy_comp_channel on %s failed: %s",
                cq->dom->port.dev, strerror(err));
    cq->ch = NULL;
}

int verbs_cq_wait_fds(struct gx_fab_cq *base, struct pollfd *fds, int max, int *nfds)
{
    struct verbs_cq *cq = (struct verbs_cq *)base;
    struct gx_fab_swcq *sw = &cq->sw;
    if (!cq->ch)
        return GX_EUNSUPPORTED;
    if (sw->head != sw->tail)
        return GX_INPROGRESS;
    if (max < 1)
        return GX_ENOMEM;
    for (int i = 0; i < cq->nhw; i++) {
        struct verbs_hwcq *hw = &cq->hw[i];
        if (hw->armed)
            continue;
        int err = ibv_req_notify_cq(hw->cq, 0);
        if (err) {
            GX_INFO(GX_SUB_FABRIC, "verbs: ibv_req_notify_cq on %s failed: %s: waits poll",
                    cq->dom->port.dev, strerror(err));
            return GX_EUNSUPPORTED;
        }
        hw->armed = true;
    }
    for (int i = 0; i < sw->neps; i++)
        sw->progress(sw->eps[i]);
    int rc = verbs_cq_drain(cq);
    if (rc != GX_OK)
        return rc;
    if (sw->head != sw->tail)
        return GX_INPROGRESS;
    /* A send still waiting for its clear-to-send waits for a record the
     * receiver RDMA-writes into our memory: no completion, no event. Poll
     * (with the caller's naps) until it is issued. */
    for (int i = 0; i < sw->neps; i++) {
        const struct verbs_ep *ep = (const struct verbs_ep *)sw->eps[i];
        if (ep->state == VEP_ESTABLISHED && ep->tx_issued < ep->tx_post)
            return GX_EUNSUPPORTED;
    }
    fds[0] = (struct pollfd){ .fd = cq->ch->fd, .events = POLLIN };
    int n = verbs_cm_wait_fds(cq, fds + 1, max - 1);
    if (n < 0)
        return GX_ENOMEM;
    *nfds = n + 1;
    return GX_OK;
}

void verbs_cq_wait_done(struct gx_fab_cq *base, const struct pollfd *fds, int nfds)
{
    struct verbs_cq *cq = (struct verbs_cq *)base;
    /* fds[0] is the channel (verbs_cq_wait_fds): nothing to take unless it
     * became readable. */
    if (!cq->ch || nfds < 1 || !(fds[0].revents & POLLIN))
        return;
    const struct gx_verbs_api *api = cq->dom->api;
    struct ibv_cq *ev_cq;
    void *ev_ctx;
    /* The fd is non-blocking: -1 with EAGAIN once every event is taken. */
    while (api->get_cq_event(cq->ch, &ev_cq, &ev_ctx) == 0) {
        api->ack_cq_events(ev_cq, 1);
        for (int i = 0; i < cq->nhw; i++)
            if (cq->hw[i].cq == ev_cq)
                cq->hw[i].armed = false;
    }
}
