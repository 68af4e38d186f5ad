/*
 * svc.h - a communicator's service for one-sided windows and remote calls
 * (api/svc.c), shared by api/win.c and api/rpc.c. Not installed.
 *
 * With GX_RPC_PROGRESS=thread (the default) it runs, from the first window
 * or handler on, one poller thread that keeps the transport moving (so a
 * window's target applies what arrives and calls are received with no user
 * call on that rank) and GX_RPC_THREADS handler threads that run arrived
 * calls and the completion callbacks of asynchronous calls. With
 * GX_RPC_PROGRESS=caller there are no threads: gx_rpc_progress and the
 * waits of windows and calls do that work in the calling thread.
 */
#ifndef GX_API_SVC_H
#define GX_API_SVC_H

#include <stdbool.h>
#include <stdint.h>

#include "gx/gx.h"

struct gx_comm;
struct gx_svc;
struct xp_rpc_incoming;

/** The communicator's service, made (and its threads started) on first
 *  use. GX_OK, or why not (logged, naming `fn`). */
int gx_svc_get(struct gx_comm *c, const char *fn, struct gx_svc **out);
/** Stop the threads and free the service (comm teardown, before the
 *  transport closes). A handler that never returns is left behind after
 *  a grace period, with a warning naming it; nothing of gx it still holds
 *  is touched again. */
void gx_svc_close(struct gx_comm *c);

/** Caller mode (or any waiter): poll the transport, run completion
 *  callbacks and, in caller mode, the calls that arrived. Returns how many
 *  calls and callbacks ran, or a transport error. */
int gx_svc_progress(struct gx_comm *c);
bool gx_svc_threaded(const struct gx_svc *s);
struct gx_comm *gx_svc_comm(const struct gx_svc *s);
/** Teardown went ahead without a stuck handler's thread. */
bool gx_svc_abandoned(const struct gx_svc *s);

/** Handlers (rpc.c owns the table's meaning). */
int gx_svc_register(struct gx_svc *s, uint32_t id, gx_rpc_handler fn, void *user);
/** Run one arrived call and answer it (rpc.c); *abandoned when teardown
 *  went ahead meanwhile (nothing of the communicator was touched after). */
void gx_rpc_run_incoming(struct gx_svc *s, struct xp_rpc_incoming *in, bool *abandoned);
/** The handler of `id`, or false. */
bool gx_svc_handler(struct gx_svc *s, uint32_t id, gx_rpc_handler *fn, void **user);

/** Wait, spinning then napping, until `done(arg)` or the deadline
 *  (gx_now_ns() value), progressing the service meanwhile. GX_OK or
 *  GX_ETIMEOUT (not logged), or a transport error. */
int gx_svc_wait(struct gx_comm *c, bool (*done)(void *arg), void *arg, uint64_t deadline);

#endif
