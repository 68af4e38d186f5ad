/*
 * net_gx_data.c - the NCCL net plugin's data path: isend / irecv / test /
 * iflush and the dispatch of fabric completions to requests (the
 * clear-to-send protocol is described in net_gx.h).
 */
#include <inttypes.h>
#include <string.h>

#include "plugins/nccl-net/net_gx.h"

#define GXN_CTS_MAGIC 0x43545331u /* "CTS1" */
#define GXN_POLL_BATCH 16

static struct gx_fab_mr *fab_mr(void *mh)
{
    return mh ? ((struct gxn_mr *)mh)->mr : NULL;
}

static struct gxn_req *req_get(struct gxn_comm *c)
{
    for (int i = 0; i < GXN_REQS; i++)
        if (!c->reqs[i].in_use) {
            struct gxn_req *r = &c->reqs[i];
            memset(r, 0, sizeof(*r));
            r->kind = GXN_OP_REQ;
            r->comm = c;
            r->in_use = true;
            return r;
        }
    return NULL;
}

static int post_cts_recv(struct gxn_comm *c, unsigned slot)
{
    c->cts_slot[slot].kind = GXN_OP_CTS_RECV;
    c->cts_slot[slot].comm = c;
    return gx_fab_post_recv(c->ep, &c->cts_in[slot], sizeof(c->cts_in[slot]), c->self_mr,
                            (uint64_t)(uintptr_t)&c->cts_slot[slot]);
}

int gxn_post_cts_recvs_locked(struct gxn_comm *c)
{
    for (unsigned i = 0; i < GXN_MAX_REQUESTS; i++) {
        int rc = post_cts_recv(c, i);
        if (rc != GX_OK)
            return rc;
    }
    return GX_OK;
}

static void dispatch(const struct gx_fab_cqe *e)
{
    int kind = *(const int *)(uintptr_t)e->context;
    if (kind == GXN_OP_REQ) {
        struct gxn_req *r = (struct gxn_req *)(uintptr_t)e->context;
        r->data_done = true;
        if (r->status == GX_OK)
            r->status = e->status;
        if (e->op == GX_FAB_OP_RECV)
            r->size = e->len;
        if (e->status != GX_OK && !r->comm->failed)
            r->comm->failed = e->status;
    } else if (kind == GXN_OP_CTS_SEND) {
        struct gxn_req *r = ((const struct gxn_op_ref *)(uintptr_t)e->context)->req;
        /* Its status does not matter: if it failed, so does the receive of
         * the data it announced; if the data arrived, the peer had it. */
        r->cts_pending = false;
    } else if (kind == GXN_OP_CTS_RECV) {
        struct gxn_comm *c = ((struct gxn_cts_slot *)(uintptr_t)e->context)->comm;
        int st = e->status;
        if (st == GX_OK && e->len != sizeof(struct gxn_cts))
            st = GX_EPROTO;
        if (st == GX_OK)
            c->cts_arrived++;
        else if (!c->failed)
            c->failed = st;
    }
}

int gxn_progress_locked(struct gxn_dom *d)
{
    struct gx_fab_cqe e[GXN_POLL_BATCH];
    int n = gx_fab_cq_poll(d->cq, e, GXN_POLL_BATCH);
    for (int i = 0; i < n; i++)
        dispatch(&e[i]);
    return n;
}

gxn_result_t gxn_isend(void *send_comm, void *data, size_t size, int tag, void *mh, void **req)
{
    struct gxn_comm *c = send_comm;
    struct gxn_dom *d = c->fd;
    *req = NULL;
    pthread_mutex_lock(&d->lock);
    if (c->cts_arrived == c->cts_used && !c->failed)
        (void)gxn_progress_locked(d);
    if (c->failed) {
        int st = c->failed;
        pthread_mutex_unlock(&d->lock);
        return gxn_fail(st, "isend of %zu bytes (tag %d) on %s: the connection failed", size, tag,
                        gx_fab_ep_name(c->ep));
    }
    if (c->cts_arrived == c->cts_used) {
        pthread_mutex_unlock(&d->lock);
        return GXN_NCCL_OK; /* the receiver has not posted it yet: NCCL retries */
    }
    unsigned slot = (unsigned)(c->cts_used % GXN_MAX_REQUESTS);
    struct gxn_cts cts = c->cts_in[slot];
    const char *why = NULL;
    if (cts.magic != GXN_CTS_MAGIC)
        why = "the peer's clear-to-send is malformed";
    else if (cts.tag != tag)
        why = "the receiver posted a different tag";
    else if (size > cts.size)
        why = "the receiver posted a smaller buffer";
    if (why) {
        pthread_mutex_unlock(&d->lock);
        return gxn_fail(GX_EMISMATCH, "isend of %zu bytes with tag %d on %s: %s (receive of %" PRIu64
                        " bytes with tag %d)", size, tag, gx_fab_ep_name(c->ep), why, cts.size,
                        cts.tag);
    }
    struct gxn_req *r = req_get(c);
    if (!r) {
        pthread_mutex_unlock(&d->lock);
        return GXN_NCCL_OK;
    }
    r->size = size;
    int rc = gx_fab_post_send(c->ep, data, size, fab_mr(mh), (uint64_t)(uint32_t)tag,
                              (uint64_t)(uintptr_t)r);
    if (rc == GX_OK) {
        c->cts_used++;
        rc = post_cts_recv(c, slot);
    } else {
        r->in_use = false;
    }
    pthread_mutex_unlock(&d->lock);
    if (rc != GX_OK)
        return gxn_fail(rc, "isend of %zu bytes (tag %d) on %s", size, tag, gx_fab_ep_name(c->ep));
    *req = r;
    return GXN_NCCL_OK;
}

gxn_result_t gxn_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
                       void **mhs, void **req)
{
    struct gxn_comm *c = recv_comm;
    struct gxn_dom *d = c->fd;
    *req = NULL;
    if (n != 1)
        return gxn_fail(GX_EINVAL, "irecv of %d grouped receives: libnccl-net-gx.so reports "
                        "maxRecvs 1", n);
    pthread_mutex_lock(&d->lock);
    if (c->failed) {
        int st = c->failed;
        pthread_mutex_unlock(&d->lock);
        return gxn_fail(st, "irecv of %zu bytes (tag %d) on %s: the connection failed", sizes[0],
                        tags[0], gx_fab_ep_name(c->ep));
    }
    int busy = 0;
    for (int i = 0; i < GXN_REQS; i++)
        busy += c->reqs[i].in_use;
    struct gxn_req *r = busy < GXN_MAX_REQUESTS ? req_get(c) : NULL;
    if (!r) {
        pthread_mutex_unlock(&d->lock);
        return GXN_NCCL_OK;
    }
    r->cts.magic = GXN_CTS_MAGIC;
    r->cts.tag = tags[0];
    r->cts.size = sizes[0];
    r->cts_op.kind = GXN_OP_CTS_SEND;
    r->cts_op.req = r;
    int rc = gx_fab_post_recv(c->ep, data[0], sizes[0], fab_mr(mhs[0]), (uint64_t)(uintptr_t)r);
    if (rc != GX_OK) {
        r->in_use = false;
    } else {
        rc = gx_fab_post_send(c->ep, &r->cts, sizeof(r->cts), c->self_mr, 0,
                              (uint64_t)(uintptr_t)&r->cts_op);
        /* on failure the posted receive is flushed into r, which stays in use */
        r->cts_pending = rc == GX_OK;
        if (rc != GX_OK)
            c->failed = rc;
    }
    pthread_mutex_unlock(&d->lock);
    if (rc != GX_OK)
        return gxn_fail(rc, "irecv of %zu bytes (tag %d) on %s", sizes[0], tags[0],
                        gx_fab_ep_name(c->ep));
    *req = r;
    return GXN_NCCL_OK;
}

gxn_result_t gxn_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhs, void **req)
{
    /* Host memory: what the provider completed is visible already. CUDA
     * memory: the verbs provider flushed each receive into it (one RDMA READ,
     * verbs_flush.c) before completing it. A NULL request tells NCCL there is
     * nothing to wait for. */
    *req = NULL;
    return GXN_NCCL_OK;
}

gxn_result_t gxn_test(void *request, int *done, int *sizes)
{
    struct gxn_req *r = request;
    struct gxn_comm *c = r->comm;
    struct gxn_dom *d = c->fd;
    *done = 0;
    pthread_mutex_lock(&d->lock);
    if (!r->data_done || r->cts_pending)
        (void)gxn_progress_locked(d);
    if (!r->data_done || r->cts_pending) {
        pthread_mutex_unlock(&d->lock);
        return GXN_NCCL_OK;
    }
    int st = r->status;
    size_t size = r->size;
    r->in_use = false;
    pthread_mutex_unlock(&d->lock);
    if (st != GX_OK)
        return gxn_fail(st, "%s of %zu bytes on %s", c->kind == GXN_SEND ? "send" : "receive",
                        size, gx_fab_ep_name(c->ep));
    *done = 1;
    if (sizes)
        sizes[0] = (int)size;
    return GXN_NCCL_OK;
}
