/*
 * xport_svc.h - what api/ uses of the transport for one-sided windows
 * (api/win.c over xport_rma.c) and remote calls (api/rpc.c over
 * xport_rpc.c). Every call takes the transport lock itself.
 *
 * Windows. A window is a region of every rank's memory (size 0 allowed),
 * created collectively: xp_win_open registers it and fills this rank's
 * struct xp_win_info, the caller all-gathers them, xp_win_connect takes
 * them all. Each operation to a target takes one path:
 *   self     the origin's own window: a copy or a reduction in place;
 *   fabric   the provider reaches the target's registered memory itself
 *            (GX_FAB_CAP_RMA: verbs RDMA write/read, shm process_vm_*):
 *            put and get, nothing runs at the target;
 *   am       an active message (xport_am.h) the target's progress applies
 *            (tcp, dpdk; accumulates everywhere, except single 8-byte
 *            integer sums that go to the HCA's atomics when every rank's
 *            provider has them, GX_FAB_CAP_ATOMIC).
 * Bounds and alignment are checked twice: by the origin against what the
 * target published, and by the target against its own window before it
 * changes anything (on the fabric path, by the target's registration, which
 * covers exactly the window: there the origin's alignment check is the only
 * one). GX_WIN_ORIGIN_CHECK=0 sends active messages unchecked, so tests
 * reach the target's check.
 *
 * Remote calls: see the second half.
 */
#ifndef GX_XPORT_SVC_H
#define GX_XPORT_SVC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric/fabric.h"

struct gx_xport;
struct xp_win;
struct xp_rma_op;

#define XP_WIN_DOMAINS 2

/* One rank's window as every rank learns it at creation. */
struct xp_win_info {
    uint64_t base;
    uint64_t size;
    uint32_t id;        /* the same on every rank: windows are created in order */
    int32_t pid;
    uint32_t flags;     /* XP_WIN_INFO_* */
    uint32_t reserved;
    struct gx_fab_rkey rkey[XP_WIN_DOMAINS]; /* per transport domain; len 0 = none */
};
enum { XP_WIN_INFO_ATOMICS = 1u << 0 /* every domain of this rank has HCA atomics */ };

/** Register [base, base+size) with every domain that does one-sided
 *  operations; `*mine` is what the others must learn. */
int xp_win_open(struct gx_xport *x, void *base, size_t size, struct xp_win **out,
                struct xp_win_info *mine);
/** Take every rank's info (comm size entries, in rank order) and choose the
 *  path to each. After this the window serves and accepts operations. */
int xp_win_connect(struct xp_win *w, const struct xp_win_info *all);
/** Close: operations still awaiting an answer fail (GX_EABORTED); the
 *  memory is no longer served. */
void xp_win_close(struct xp_win *w);
uint32_t xp_win_id(const struct xp_win *w);
/** How operations to `target` go: "self", "fabric", "am" (for tests/logs). */
const char *xp_win_path(const struct xp_win *w, int target, bool accumulate);

enum xp_rma_kind { XP_RMA_PUT = 1, XP_RMA_GET = 2, XP_RMA_ACC = 3 };

struct xp_rma_args {
    int kind;           /* enum xp_rma_kind */
    int target;
    void *buf;          /* origin buffer */
    size_t count;
    int dtype;          /* enum gx_datatype */
    int redop;          /* accumulate: GX_SUM, GX_PROD, GX_MIN, GX_MAX or GX_REPLACE */
    uint64_t offset;    /* bytes into the target's window */
    const char *fn;     /* the public call, for messages */
};

/** Start an operation; `*out` is held by the caller until xp_rma_release.
 *  Errors found before anything is sent (bounds, alignment, a failed link)
 *  are returned here and nothing is started. */
int xp_rma_start(struct xp_win *w, const struct xp_rma_args *a, struct xp_rma_op **out);
/** Progress-free look: *local = the origin buffer may be reused, *done =
 *  complete at the target (or failed); *status, and *err (op's message) once done. */
void xp_rma_op_state(struct xp_rma_op *op, bool *local, bool *done, int *status, const char **err);
/** The caller lets go. An unfinished operation stays counted by its window
 *  until it completes; its error then goes to the next flush. */
void xp_rma_release(struct xp_rma_op *op);
/** Operations to `target` (-1: every rank) not complete yet; when none is
 *  left, the first error recorded for them since the last call (else
 *  GX_OK), with its message. */
int xp_win_pending(struct xp_win *w, int target, uint64_t *count, char *msg, size_t msg_len);

/* ---------------------------------------------------------------------------
 * Remote calls. A call is an active message to the target (handler id,
 * arguments of any size, the caller's deadline); the target queues it for
 * its handler runners (api/rpc.c), which answer with a status and a result
 * of any size. A call completes when its answer is in and its arguments
 * are no longer read; it fails when its deadline passes (a late answer is
 * dropped), or when the link to the target breaks (every pending call to
 * that rank fails naming it).
 * ------------------------------------------------------------------------ */
struct xp_rpc_call;     /* the caller's side */
struct xp_rpc_incoming; /* the target's side: one call to run */

/** Send a call of handler `id` to `target`; args stay in use until the call
 *  is done. `deadline`: gx_now_ns() value. On_done, if set, is called once,
 *  outside the transport lock, from whoever progresses (the call is then
 *  done). */
int xp_rpc_call_start(struct gx_xport *x, int target, uint32_t id, const void *args, size_t len,
                      uint64_t deadline, void (*on_done)(void *ctx), void *ctx,
                      struct xp_rpc_call **out);
/** Progress-free look at a call: done, status and message. Past its deadline
 *  it fails here with GX_ETIMEOUT. */
bool xp_rpc_call_done(struct xp_rpc_call *c, int *status, const char **err);
/** Take a done call's result (malloc'd, freed with free(); NULL when empty). */
void xp_rpc_call_result(struct xp_rpc_call *c, void **result, size_t *len);
/** True while the fabric still reads the call's arguments (a large call
 *  whose write is under way): they must stay valid until it is false. */
bool xp_rpc_call_args_busy(struct xp_rpc_call *c);
/** The caller lets go of the call (done or not; a pending one fails). */
void xp_rpc_call_release(struct xp_rpc_call *c);
/** Fail every pending call past its deadline (for calls nobody waits on). */
void xp_rpc_expire_all(struct gx_xport *x);

/** Next incoming call to run, or NULL. */
struct xp_rpc_incoming *xp_rpc_next_incoming(struct gx_xport *x);
/** Wait up to `ms` for one (for the gx-owned handler threads); NULL if none. */
struct xp_rpc_incoming *xp_rpc_wait_incoming(struct gx_xport *x, int ms);
/** Wake every waiter of xp_rpc_wait_incoming (closing). */
void xp_rpc_wake_all(struct gx_xport *x);
/** What a call asks for. `deadline` 0 means none. */
void xp_rpc_incoming_info(const struct xp_rpc_incoming *in, int *caller, uint32_t *id,
                          const void **args, size_t *len, uint64_t *deadline);
/** Answer it with `status` and `len` bytes of result (`owned`: result is a
 *  malloc'd buffer gx frees, else copied), and free it. */
int xp_rpc_answer(struct gx_xport *x, struct xp_rpc_incoming *in, int status, const void *result,
                  size_t len, bool owned);
/** Completed calls whose on_done must still be called (outside the lock):
 *  run them. Returns how many ran. */
int xp_rpc_run_callbacks(struct gx_xport *x);

/** Completions the transport has taken so far (an idle poller backs off
 *  while it does not move). */
uint64_t xp_svc_activity(struct gx_xport *x);
/** Free an incoming call without answering (its transport is gone). */
void xp_rpc_incoming_free(struct xp_rpc_incoming *in);

#endif
