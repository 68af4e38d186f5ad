/*
 * coll_engine.h - what the step engine's files share (not installed):
 * the per-communicator engine state, the step states and the transport
 * state of posted steps. coll_engine.c owns the lifecycle of collectives,
 * the progress thread and the failure policy; coll_issue.c issues them (the
 * choice and the build through the algorithm table, request glue);
 * coll_steps.c runs one collective's steps.
 */
#ifndef GX_COLL_ENGINE_H
#define GX_COLL_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collectives/algorithms/algo.h"
#include "collectives/engine/coll.h"
#include "collectives/engine/coll_flight.h"
#include "collectives/transport/xport.h"
#include "collectives/engine/coll_stall.h"

#define STEP_WAITING 0
#define STEP_POSTED 1
#define STEP_DONE 2
/* coll_step.announced (GX_RTS_AHEAD): 0 not looked at yet. */
#define STEP_ANNOUNCED 1
#define STEP_UNANNOUNCEABLE 2
/* Steps looked at per pass, from the first not done: the step window.
 * Steps further on run too, but only once a pass over the window has
 * changed nothing for FAR_IDLE_MS (then on every pass while they run or
 * have messages posted): a schedule that needs a step further on is
 * slower, not stalled (hier on uneven nodes, 3+1+2, needed one at 64 MiB
 * with a window of 1024 and at 256 MiB with 4096; test
 * unit.test_schedules, hier_many_chunks). The window is also what keeps
 * the engine from posting sends far ahead of the ones the peers wait for. */
#define STEP_WINDOW 4096
#define FAR_IDLE_MS 100
/* Receives posted at once per communicator: each pins a registration and
 * may queue a CTS in the transport, so keep them bounded. Sends are not
 * limited (they wait in the transport's queue), so a rank never starves its
 * peers. */
#define RECV_BUDGET 32

/* The transport state of step i while it is posted. A step posted inside
 * the window [op->first, op->first + STEP_WINDOW) uses slot i % STEP_WINDOW
 * of op->xops (min(nsteps, STEP_WINDOW) entries, coll_issue.c): op->first
 * passes only steps that are done, so steps i and i + STEP_WINDOW never
 * hold that slot at once. A step posted past the window has its own
 * (op->far_xops[i], until the op is freed), so the window's slots stay its
 * steps'. A step is a plan only (schedule.h). */
static inline struct xp_op *coll_step_xop(const struct coll_op *op, int i)
{
    if (op->far_xops && op->far_xops[i])
        return op->far_xops[i];
    return &op->xops[i % STEP_WINDOW];
}

struct coll_comm {
    struct gx_comm *comm;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct coll_op *head, *tail;   /* outstanding collectives in issue order */
    unsigned nactive;
    int recvs_posted;              /* receives in the transport (RECV_BUDGET) */
    uint64_t seq;                  /* collectives issued (incl. rejected calls) */
    uint64_t next_boot_poll;
    unsigned progress_calls;       /* the clock is read every BOOT_POLL_EVERY of them */
    /* The last algorithm choice: a loop of equal calls skips the model. */
    int memo_kind;
    size_t memo_bytes;
    enum coll_algo memo_algo;
    enum coll_algo memo_inner;  /* hier: the rails' algorithm for memo_bytes */
    bool use_thread;
    int waiters;                   /* callers inside gx_wait: they progress, the thread rests */
    bool thread_started;
    bool stop;
    pthread_t thread;
    /* Scratch buffers of finished collectives, kept for the next ones. */
    struct coll_scratch_pool scratch;
    struct coll_flight *flight;
    struct coll_stall *stall;      /* GX_STALL_WARN (coll_stall.c); NULL: off */
    struct coll_skip *skip;        /* other ranks' rejected calls and finalize (coll_skip.c) */
    unsigned stall_calls;          /* engine passes: the service runs every 32nd */
    /* What this rank last issued and completed (stall survey answers). */
    uint64_t last_issued_seq, last_done_seq, last_done_ns;
    uint8_t last_issued_kind, last_done_kind;    /* the last GX_FLIGHT collectives (coll_flight.c); NULL: off */
};

/* ---- coll_engine.c, for coll_issue.c ------------------------------------- */

/** The communicator's engine state, created on first use (NULL: no memory). */
struct coll_comm *coll_comm_get(struct gx_comm *c);
/** One engine pass over every outstanding op; cc->mu held. True on progress. */
bool coll_progress_locked(struct coll_comm *cc);
/** The communicator failed for a reason outside one op's arguments: set the
 *  async error, tell the other ranks, abort the transport. cc->mu held. */
void coll_comm_broken(struct coll_comm *cc, int status, const char *msg, int failed_world_rank);
/** Retire an op from the engine's list. cc->mu held. */
void coll_op_finish(struct coll_comm *cc, struct coll_op *op);

/* ---- coll_steps.c ---------------------------------------------------------- */

/** "allreduce #12 on communicator 'world' (rank 1 of 4)". */
void coll_describe_op(const struct coll_op *op, char *buf, size_t len);
/** Fail the op (first failure wins; nothing once it finished). */
void coll_op_set_error(struct coll_op *op, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** One pass over an op's window of steps; true when anything changed. */
bool coll_op_pass(struct coll_op *op);
/** The messages and flags an op still waits for, for a timeout message. */
void coll_stall_report(const struct coll_op *op, char *buf, size_t len);

/** The op waits on memory a peer writes (the node arena's flags), which
 *  no provider event announces: its waiters nap instead of sleeping in the
 *  transport. */
bool coll_op_polls_memory(const struct coll_op *op);

#endif
