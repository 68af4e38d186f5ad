/*
 * request.h - struct gx_request: a non-blocking operation stepped by
 * gx_test()/gx_wait(). An operation supplies a step function that returns
 * GX_OK when finished, GX_INPROGRESS while waiting, or an error.
 */
#ifndef GX_REQUEST_H
#define GX_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "collectives/bootstrap/boot_coll.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/transport/xport.h"

struct gx_request {
    struct gx_comm *comm;
    const char *op_name;
    int (*step)(struct gx_request *req);
    void (*release)(struct gx_request *req); /* may be NULL */
    /* Around a gx_wait() on this request (may be NULL): lets an engine with
     * a progress thread hand progress to the waiting caller meanwhile. */
    void (*wait_begin)(struct gx_request *req);
    void (*wait_end)(struct gx_request *req);
    uint64_t seq;
    uint64_t deadline;
    int status;
    bool done;
    union {
        struct boot_barrier_state barrier;
        struct {
            struct xp_op op;
            size_t elem_size;
        } p2p;
    } u;
    void *priv;
    /* Device buffers staged through pinned host memory (stage.h), or NULL:
     * the copy back runs when the request completes. */
    struct gx_stage *stage;
};

/** Allocate a request for `op_name` on `comm` with the op's deadline. */
struct gx_request *gx_request_new(struct gx_comm *comm, const char *op_name,
                                  int (*step)(struct gx_request *));

/** Free a request whose operation never started (its post failed): nothing
 * can complete it, so it must not be waited for. */
void gx_request_discard(struct gx_request *req);

#endif
