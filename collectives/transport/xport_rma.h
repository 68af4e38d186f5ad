/*
 * xport_rma.h - the window service's private state, shared by
 * xport_rma.c (windows, the origin's operations and their completion) and
 * xport_rma_target.c (what the target does with an arriving request, and
 * how an accumulate is applied). See xport_svc.h for the model. Runs under
 * the transport lock.
 */
#ifndef GX_XPORT_RMA_H
#define GX_XPORT_RMA_H

#include "collectives/transport/xport_am.h"
#include "collectives/transport/xport_svc.h"

/* Request kinds of XP_SVC_RMA besides enum xp_rma_kind. */
enum { XP_RMA_ANSWER = 8 };

enum xp_rma_path { XP_PATH_SELF = 1, XP_PATH_FABRIC = 2, XP_PATH_AM = 3 };

#define XP_RMA_FABRIC_WINDOW 64 /* one-sided fabric ops in flight per target */
#define XP_RMA_BUCKETS 256      /* ops awaiting an answer, by id */

/* A large get's request body: where the target writes the answer. */
struct xp_rma_get_dest {
    uint64_t raddr;
    uint32_t imm;
    uint32_t reserved;
    struct gx_fab_rkey rkey;
};

struct xp_win_peer {
    struct xp_win_info info;
    uint8_t path;               /* put and get */
    uint8_t domain;             /* index of its transport domain (rkey) */
    uint64_t pending;           /* operations to it not complete */
    int fabric_inflight;
    struct xp_rma_op *deferred_head, *deferred_tail; /* fabric ops over the window */
    int error;                  /* first error since the last flush */
    char *error_msg;
};

struct xp_win {
    struct gx_xport *x;
    struct xp_win *next;        /* the service's open windows */
    uint32_t id;
    char *base;
    size_t size;
    struct gx_fab_mr *mr[XP_WIN_DOMAINS];
    struct xp_win_peer *peers;  /* NULL until connected */
    struct xp_rma_op *live;     /* operations not complete */
    bool atomics;               /* single 8-byte integer sums over the HCA */
};

struct xp_rma_op {
    struct xp_op msg;           /* first: the active message, or a fabric op's context */
    struct xp_op data;          /* a large get over active messages: the target's write */
    struct xp_am_hdr hdr;
    struct xp_rma_get_dest dest;
    struct gx_xport *x;
    struct xp_win *win;         /* NULL once its window closed */
    struct xp_rma_op *live_prev, *live_next;
    struct xp_rma_op *wait_next; /* in the service's answer buckets */
    struct xp_rma_op *defer_next;
    uint64_t id;
    char *buf;
    size_t len;
    uint64_t atomic_result;
    const char *fn;
    uint64_t offset;
    int target;
    uint8_t kind;
    bool msg_pending;           /* the message or fabric op is not complete locally */
    bool answer_pending;        /* the target's answer has not come */
    bool data_pending;          /* a large get's write has not come */
    bool waiting;               /* in an answer bucket */
    bool held;                  /* the caller holds it (xp_rma_release not yet) */
    bool done;
    int status;
    char err[320];
};

struct xp_rma_state {
    struct xp_win *wins;
    struct xp_rma_op *waiting[XP_RMA_BUCKETS];
    uint32_t next_win_id;
};

/* xport_rma.c */
/** GX_WIN_ORIGIN_CHECK: check bounds and alignment on the origin too. */
bool xp_rma_origin_checks(void);
/** Fail `op` with a message naming its call, target, window and offset (the
 *  first failure stays). */
void xp_rma_fail(struct xp_rma_op *op, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void xp_rma_unwait(struct gx_xport *x, struct xp_rma_op *op);
/** Finish `op` once nothing of it is outstanding (frees it if not held). */
void xp_rma_maybe_complete(struct xp_rma_op *op);
/** on_done of the op's message, and of a large get's write. */
void xp_rma_msg_done(struct xp_op *m);
void xp_rma_data_done(struct xp_op *d);
/** An accumulate the HCA's atomics do (a single 8-byte integer sum). */
bool xp_rma_atomic_eligible(const struct xp_win *w, const struct xp_rma_op *op);
struct xp_rma_state *xp_rma_service(struct gx_xport *x);
struct xp_win *xp_rma_find_win(struct gx_xport *x, uint32_t id);
/** The origin's side of an answer (kind XP_RMA_ANSWER). */
void xp_rma_on_answer(struct xp_peer *p, const struct xp_am_hdr *h, const void *body, size_t len);

/* xport_rma_target.c */
/** Check a request against this rank's window: GX_OK, or GX_EINVAL with
 *  the reason in `why`. */
int xp_rma_target_check(const struct xp_win *w, const struct xp_am_hdr *h, char *why,
                        size_t why_len);
/** Apply an accumulate of `count` elements in place. */
void xp_rma_apply(char *dst, const void *src, size_t count, int dtype, int redop, bool atomics);
/** A request of another rank (put, get, accumulate) arrived. */
void xp_rma_on_request(struct xp_peer *p, const struct xp_am_hdr *h, const void *body,
                       size_t len, const struct xp_rts *rts, bool crc);

#endif
