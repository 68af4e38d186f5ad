/*
 * request.h - struct gx_request: a non-blocking operation stepped by
 * gx_test()/gx_wait(). An operation supplies a step function that returns
 * GX_OK when finished, GX_INPROGRESS while waiting, or an error. The
 * request knows no transport: an operation keeps its own state (the
 * engine's op in priv; a point-to-point call's message or a barrier's
 * progress after the request).
 */
#ifndef GX_REQUEST_H
#define GX_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "collectives/comm/comm_internal.h"

struct gx_request {
    struct gx_comm *comm;
    const char *op_name;
    int (*step)(struct gx_request *req);
    void (*release)(struct gx_request *req); /* may be NULL */
    /* Around a gx_wait() on this request (may be NULL): lets an engine with
     * a progress thread hand progress to the waiting caller meanwhile. */
    void (*wait_begin)(struct gx_request *req);
    void (*wait_end)(struct gx_request *req);
    /* Waits that yield (may be NULL): sleep until the operation's provider
     * may have work, at most timeout_ms (the maker's: the engine or p2p
     * sleep in the transport, gx_xport_wait). gx_wait calls it once the
     * request has spun for GX_SPIN_US. */
    void (*block)(struct gx_request *req, int timeout_ms);
    uint64_t seq;
    uint64_t deadline;
    int status;
    bool done;
    bool private_failure;   /* its failure concerns it alone (a remote call's deadline or
                               handler status): the communicator stays usable */
    void *priv;             /* the maker's (the engine's op); a larger request's
                               tail is its maker's too (gx_request_alloc) */
    /* Device buffers staged through pinned host memory (stage.h), or NULL:
     * the copy back runs when the request completes. */
    struct gx_stage *stage;
};

/** Allocate a request for `op_name` on `comm` with the op's deadline. */
struct gx_request *gx_request_new(struct gx_comm *comm, const char *op_name,
                                  int (*step)(struct gx_request *));
/** The same, `size` bytes (>= sizeof(struct gx_request)) zeroed: a maker
 *  that embeds struct gx_request first in its own struct keeps its state
 *  there (one allocation; gx_request_free frees it all). */
struct gx_request *gx_request_alloc(struct gx_comm *comm, const char *op_name,
                                    int (*step)(struct gx_request *), size_t size);
/** Step the request once (its step function, the deadline, the copy back
 *  of staged buffers when it finishes). */
void gx_request_step(struct gx_request *req);

/** GX_SPIN_US checked (communicator init): GX_EINVAL naming it when bad. */
int gx_spin_check(void);
/** GX_SPIN_US in ns: how long a waiter polls before it sleeps on its
 *  provider's events (oversubscribed or not); UINT64_MAX never sleeps (-1). */
uint64_t gx_spin_ns(void);

/** GX_YIELD_WHEN_IDLE: polls before a waiting rank first yields its CPU
 *  (it naps after 10x that), on a host with more ranks than CPUs or not;
 *  UINT_MAX never yields (0: a busy poll). Set in comm->wait_yield_after. */
unsigned gx_wait_yield_after(bool oversubscribed);

/** Free a request whose operation never started (its post failed): nothing
 * can complete it, so it must not be waited for. */
void gx_request_discard(struct gx_request *req);

#endif
