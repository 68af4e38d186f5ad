/*
 * barrier.c - gx_barrier and gx_ibarrier: a barrier over the bootstrap
 * network, which stays usable when the data path is broken. The blocking
 * form first takes its place in the sequence of collectives (the engine's
 * gx_coll_barrier_enter), so a peer in another collective with that number
 * fails at once with GX_EMISMATCH.
 */
#include "collectives/comm/comm_internal.h"
#include "collectives/comm/request.h"
#include "collectives/engine/coll.h"
#include "common/log.h"

/* A non-blocking barrier: the request, then its progress. */
struct barrier_request {
    struct gx_request req; /* first: gx_request_free frees the whole */
    struct boot_barrier_state state;
};

static int barrier_step(struct gx_request *req)
{
    struct barrier_request *b = (struct barrier_request *)req;
    struct boot_group g = gx_comm_group(req->comm);
    return boot_barrier_step(&g, req->seq, &b->state, req->deadline);
}

GX_API int gx_ibarrier(struct gx_comm *comm, struct gx_request **req_out)
{
    gx_clear_last_error();
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_ibarrier: comm is NULL");
    if (!req_out)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_ibarrier: req is NULL");
    int rc = gx_comm_check_usable(comm, "gx_ibarrier");
    if (rc != GX_OK)
        return rc;
    struct barrier_request *b = (struct barrier_request *)gx_request_alloc(
        comm, "barrier", barrier_step, sizeof(struct barrier_request));
    if (!b)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "gx_ibarrier: out of memory");
    struct gx_request *req = &b->req;
    req->seq = gx_comm_next_seq(comm);
    boot_barrier_start(&b->state);
    gx_request_step(req);
    *req_out = req;
    return GX_OK;
}

GX_API int gx_barrier(struct gx_comm *comm)
{
    gx_clear_last_error();
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_barrier: comm is NULL");
    int rc = gx_comm_check_usable(comm, "gx_barrier");
    if (rc != GX_OK)
        return rc;
    (void)gx_coll_barrier_enter(comm, &rc);
    if (rc != GX_OK)
        return rc;
    struct boot_group g = gx_comm_group(comm);
    rc = boot_barrier(&g, gx_comm_next_seq(comm), BOOT_OP_BARRIER, gx_comm_op_deadline(comm));
    return gx_comm_note_failure(comm, rc);
}
