/*
 * schedule.h - a collective as a schedule of steps (send, receive, reduce,
 * copy, average, arena flags) with dependencies, and the builder that the
 * algorithm files (collectives/algorithms/) use to write one. The step
 * engine (engine/coll_engine.c, coll_steps.c) runs what is built here.
 *
 * Owns: struct coll_op (one issued collective), struct coll_step, struct
 * coll_args, the cs_* builder (coll_schedule.c) and the small arithmetic
 * helpers every algorithm shares (blocks, folding, pipelining chunks from
 * coll_chunk.c), the scratch pool (coll_scratch.c), the collectives' names
 * (coll_names.c), the tag layout and descriptor (coll_proto.h). Must not
 * touch: the engine's state (coll_engine.h; struct coll_op carries a few
 * engine fields the builders leave alone) or the transport: a step is a
 * plan, and the engine keeps the transport state of the steps it posts.
 */
#ifndef GX_COLL_SCHEDULE_H
#define GX_COLL_SCHEDULE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collectives/schedule/coll_proto.h"
#include "collectives/reduce/reduce.h"
#include "gx/gx.h"

struct gx_comm;
struct gx_param;
struct gx_request;
struct gx_stage;
struct coll_pipe;
struct xp_op;

enum coll_kind {
    COLL_ALLREDUCE = 0,
    COLL_BROADCAST,
    COLL_REDUCE,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_GATHER,
    COLL_SCATTER,
    COLL_ALLTOALL,
    COLL_KIND_COUNT
};

const char *coll_kind_name(enum coll_kind k);

enum coll_step_kind {
    CS_SEND = 1,
    CS_RECV,
    CS_REDUCE,  /* dst op= src */
    CS_REDUCE3, /* dst = src op src2 */
    CS_COPY,    /* memcpy(dst, src, len) */
    CS_AVG,     /* dst /= nranks */
    CS_NOP,     /* joins dependencies */
    CS_FLAG_SET,  /* store-release len into the u64 at dst (shared-memory arena) */
    CS_FLAG_WAIT, /* until every rank's u64 at src + rank * msg bytes is >= len (msg 0:
                     only rank peer's, at src) */
};

#define CS_MAX_DEPS 3

/* The most steps one collective's schedule may hold (64 bytes each: 16 MB
 * at most): a 64 GiB all-reduce in the node arena fits; a larger count is
 * almost surely wrong and fails at once instead of planning for minutes. */
#define COLL_MAX_STEPS (1 << 18)

/* One step of the plan. The builder writes it; the engine marks its
 * progress in `state` and `failed` (and may name the rank a flag wait is
 * stuck on in `peer`), and keeps the transport state of a posted send or
 * receive itself (coll_engine.h, op->xops). */
struct coll_step {
    uint8_t kind;
    uint8_t state;          /* 0 waiting, 1 posted, 2 done */
    uint8_t failed;         /* done with an error (a message, or a flag wait's rank gone) */
    uint8_t announced;      /* GX_RTS_AHEAD (coll_steps.c): STEP_ANNOUNCED, a send whose
                               xop is in the transport before its data was ready; or
                               STEP_UNANNOUNCEABLE, one the engine posts when ready */
    int peer;
    uint32_t msg;           /* message index inside the collective */
    void *dst;
    const void *src;
    const void *src2;
    size_t len;             /* bytes (send, receive, copy) or elements (reduce) */
    int dep[CS_MAX_DEPS];   /* earlier steps that must be done first, -1 none */
};

/* The arguments of one call, as every rank must pass them. */
struct coll_args {
    enum coll_kind kind;
    const void *sendbuf;
    void *recvbuf;
    size_t count;           /* the caller's count argument */
    enum gx_datatype dtype;
    enum gx_redop op;       /* GX_REDOP_COUNT when none */
    int root;               /* -1 when none */
    size_t es;              /* element size */
    bool will_wait;         /* blocking call: the caller waits at once (drives progress) */
    const int *gate;        /* NULL, or the op starts only once *gate != 0 (the stream
                               forms: set when the caller's CUDA stream reaches it) */
    /* branch kernels: staged device buffers whose reduce steps run on the GPU
     * (coll_gpu.c): n regions, each a pinned stand-in `host` for device `dev`;
     * dev_in: the device copy is the input (a send buffer apart from the
     * receive buffer), read in place. n == 0: reduce on the CPU. */
    struct { int n; char *host[2], *dev[2]; size_t len[2]; bool dev_in[2]; } gpu;
    const char *gdr_lo[2], *gdr_hi[2]; /* device ranges handed to the fabric as they are
                               (GPUDirect RDMA, api/gdr.c); NULL: none */
    struct gx_stage *pipe;  /* staged with deferred copies: the engine copies in and
                               back in chunks (coll_pipe.c); NULL: none */
};

struct coll_op {
    struct gx_comm *comm;
    struct coll_comm *cc;
    struct gx_request *req;
    struct coll_op *next;   /* engine's issue-order list */
    struct coll_args a;
    int algo;               /* enum coll_algo (algorithms/algo.h): whose builder wrote it */
    int inner_algo;         /* hier: the rails' algorithm (coll_tune.c) */
    uint64_t seq;
    uint64_t deadline;
    uint64_t issued_ns;     /* gx_now_ns() at issue (the stall report) */
    bool stall_warned;      /* GX_STALL_WARN logged for it */
    gx_reduce_fn fn;
    gx_reduce3_fn fn3;

    struct coll_step *steps;
    int nsteps, cap;
    struct xp_op *xops;     /* the engine's: transport state of posted steps (coll_engine.h) */
    struct xp_op **far_xops; /* ... of steps posted past the step window, one each
                               (coll_steps.c); NULL until the first */
    int far_posted;         /* of those, posted and not finished */
    bool far_busy;          /* the last look past the window ran or finished a step */
    bool far_told;          /* the first look past it was logged (GX_LOG=info) */
    uint64_t window_moved_ns; /* large schedules: when a pass over the window last changed
                               something (gx_now_ns) */
    int first;              /* first step not done */
    int announce_next;      /* GX_RTS_AHEAD: the first step not yet announced or posted */
    int recvs_posted;       /* this op's share of the engine's receive budget */
    unsigned flag_polls;    /* unmet shared-memory flag checks (liveness checks) */
    int build_status;       /* first builder failure (GX_ENOMEM) */
    bool steps_capped;      /* the build reached COLL_MAX_STEPS */
    size_t scratch_failed;  /* bytes of scratch the build could not get */
    struct coll_pipe *pipe; /* chunked staging copies (coll_pipe.c), or NULL */
    struct coll_scratch_pool *pool; /* where cs_scratch takes from (the engine's, per comm) */
    void *scratch;          /* back to the pool when the op finishes */
    size_t scratch_size;

    struct coll_desc desc_out, desc_in;
    int desc_recv_step;     /* index of the descriptor receive, or -1 */
    bool desc_checked;
    char anomaly[300];      /* data arrived in an unexpected shape */

    /* Set once by the engine under cc->mu. */
    bool finished;
    bool active;            /* in the engine's list */
    bool waiting;           /* counted in cc->waiters by a gx_wait (caller's thread) */
    int status;
    char errmsg[512];
};

/* ---- schedule builder (the algorithm files) ---------------------------- */

/* Each returns the new step's index (-1 never: failures are remembered in
 * op->build_status and checked once the schedule is complete). Dependencies
 * of -1 are ignored. */
int cs_send(struct coll_op *op, int peer, uint32_t msg, const void *buf, size_t bytes, int d0,
            int d1, int d2);
int cs_recv(struct coll_op *op, int peer, uint32_t msg, void *buf, size_t bytes, int d0, int d1,
            int d2);
int cs_reduce(struct coll_op *op, void *inout, const void *in, size_t count, int d0, int d1,
              int d2);
int cs_reduce3(struct coll_op *op, void *out, const void *a, const void *b, size_t count, int d0,
               int d1, int d2);
int cs_copy(struct coll_op *op, void *dst, const void *src, size_t bytes, int d0, int d1, int d2);
int cs_avg(struct coll_op *op, void *buf, size_t count, int d0, int d1, int d2);
int cs_nop(struct coll_op *op, int d0, int d1, int d2);
/* Shared-memory arena flags (algorithms/arena_*.c): set this rank's counter; wait for
 * every rank's counter (rank r's at first + r * stride bytes). */
int cs_flag_set(struct coll_op *op, uint64_t *flag, uint64_t value, int d0, int d1, int d2);
int cs_flag_wait(struct coll_op *op, const uint64_t *first, size_t stride, uint64_t value, int d0,
                 int d1, int d2);
/* Wait for one rank's counter only (its address is `flag`). */
int cs_flag_wait_one(struct coll_op *op, const uint64_t *flag, int rank, uint64_t value, int d0,
                     int d1, int d2);
/* Composing schedules (coll_hier.c runs one algorithm after another inside
 * one collective): cs_gate makes every step from index `from` on that has no
 * dependency wait for step `dep` (-1: nothing); cs_join returns a step that
 * is done when every step from `from` on is (-1 when there is none). */
void cs_gate(struct coll_op *op, int from, int dep);
int cs_join(struct coll_op *op, int from);
/* Allocate op->scratch (from op->pool); NULL and build_status set on
 * failure. */
void *cs_scratch(struct coll_op *op, size_t bytes);

/* ---- scratch pool (coll_scratch.c) -------------------------------------- */

/* Buffers of a communicator's finished collectives, kept for the next ones
 * (the engine embeds one per communicator and gives an op's back when it
 * finishes): take the smallest kept buffer that fits, else a new one; give
 * one back (kept, or freed). */
#define SCRATCH_POOL 8
struct coll_scratch_pool {
    pthread_mutex_t mu;
    void *buf[SCRATCH_POOL];
    size_t size[SCRATCH_POOL];
};
void coll_scratch_pool_init(struct coll_scratch_pool *p);
void coll_scratch_pool_fini(struct coll_scratch_pool *p);
void *coll_scratch_take(struct coll_scratch_pool *p, size_t bytes, size_t *size_out);
void coll_scratch_give(struct coll_scratch_pool *p, void *buf, size_t size);

/* Combine `a` (the lower-ranked contribution) and `b` into `out` so every
 * rank computes the same bits whichever side it is on. `out` must not
 * overlap `a` or `b`. */
static inline int cs_combine(struct coll_op *op, void *out, const void *lower, const void *upper,
                             size_t count, int d0, int d1, int d2)
{
    return cs_reduce3(op, out, lower, upper, count, d0, d1, d2);
}

/* Split `count` elements into `parts` blocks as evenly as possible: block i
 * starts at block_off(count, parts, i) and has block_len(...) elements. */
static inline size_t block_off(size_t count, int parts, int i)
{
    size_t base = count / (size_t)parts, rem = count % (size_t)parts;
    return base * (size_t)i + ((size_t)i < rem ? (size_t)i : rem);
}
static inline size_t block_len(size_t count, int parts, int i)
{
    return count / (size_t)parts + ((size_t)i < count % (size_t)parts ? 1 : 0);
}

/* Non-power-of-two rank counts (rd, rhd): with p the largest power of two
 * <= n and rem = n - p, the first 2*rem ranks pair up; the even one of each
 * pair hands its vector to the odd one first and gets the result back last.
 * The other p ranks run the power-of-two algorithm under a new rank. */
static inline int coll_pof2(int n)
{
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    return p;
}
static inline int fold_newrank(int r, int rem)
{
    if (r < 2 * rem)
        return (r % 2) ? r / 2 : -1;
    return r - rem;
}
static inline int fold_realrank(int nr, int rem)
{
    return nr < rem ? nr * 2 + 1 : nr + rem;
}

/* ---- chunking (coll_chunk.c) ------------------------------------------- */

/* Pipelining: how many chunks to cut `bytes` into (GX_COLL_CHUNK, 1 to 64). */
int coll_chunks(size_t bytes);
/* The hierarchical all-reduce's pipeline segments for `bytes`: one per 8
 * pipelining chunks, 1 to 4. */
int coll_hier_segments(size_t bytes);
/* GX_COLL_CHUNK (gx-info --tuning prints its text). */
extern const struct gx_param gx_param_coll_chunk;

#endif
