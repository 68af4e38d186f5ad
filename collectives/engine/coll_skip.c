/*
 * coll_skip.c - see coll_skip.h. A notice travels on the bootstrap under
 * the communicator's id XOR SKIP_COMM_SALT, so it never matches an
 * operation's messages, and carries the sender's error text.
 */
#include "collectives/engine/coll_skip.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/bootstrap/boot_proto.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/engine/coll.h"
#include "collectives/engine/coll_engine.h"
#include "common/clock.h"
#include "common/log.h"

#define SKIP_COMM_SALT 0x534b49505f5f5f31ull /* "SKIP___1" */
#define SKIP_MAGIC 0x67784b53u
#define SKIP_POLL_NS 5000000ull              /* look at the bootstrap at most every 5 ms */
#define SKIP_KEEP 16                         /* rejected calls remembered per communicator */

enum skip_type { SKIP_REJECTED = 1, SKIP_FINALIZED = 2, SKIP_BARRIER = 3 };

struct skip_msg {
    uint32_t magic;
    uint16_t type;
    uint8_t kind;      /* REJECTED: the collective's kind (BARRIER: none) */
    uint8_t pad;
    int32_t status;    /* REJECTED: the error the call got */
    uint32_t reserved;
    uint64_t seq;      /* REJECTED, BARRIER: the call; FINALIZED: the last collective */
    char text[240];    /* REJECTED: the error message */
};

struct skip_notice {
    int rank;          /* comm rank, -1: unused */
    struct skip_msg m;
};

struct coll_skip {
    uint64_t next_poll_ns;
    unsigned calls;
    struct skip_notice rejected[SKIP_KEEP]; /* ring of the latest */
    int next;
    unsigned received;                      /* notices so far: 0 keeps the check off */
    uint64_t *finalized_after;              /* per comm rank; UINT64_MAX: not finalized */
    uint64_t max_seq, min_finalized;        /* an op past every notice and before every
                                             * finalize has nothing to find (the fast path) */
};

static uint64_t skip_comm(const struct gx_comm *c)
{
    return c->comm_id ^ SKIP_COMM_SALT;
}

static uint64_t skip_tag(enum skip_type t)
{
    return BOOT_TAG(0, BOOT_OP_USER, t);
}

/* A rejected call is rare: every peer is told. A barrier is frequent, and
 * a finalize happens on every rank at once (every rank telling every rank
 * opened N^2 bootstrap connections at the end of a job): the two ring
 * neighbours (every collective's descriptor exchange waits on them; their
 * ABORT then reaches the rest), the peers this rank already has a bootstrap
 * connection to and, for a finalize, those its transport is connected to
 * (the peers its collectives wait on), so each costs O(log n) messages.
 * A connection not yet open gets the communicator's full deadline: a short
 * one could leave the acceptor with a stream the connector gave up. */
static void send_all(struct gx_comm *c, struct skip_msg *m)
{
    m->magic = SKIP_MAGIC;
    bool everyone = m->type == SKIP_REJECTED;
    int next = (c->rank + 1) % c->size, prev = (c->rank + c->size - 1) % c->size;
    for (int r = 0; r < c->size; r++)
        if (r != c->rank)
            (void)gx_boot_notify(c->boot, c->world_ranks[r], skip_comm(c),
                                 skip_tag((enum skip_type)m->type), m, sizeof(*m),
                                 gx_comm_op_deadline(c),
                                 everyone || r == next || r == prev ||
                                     (m->type == SKIP_FINALIZED && c->xport &&
                                      gx_xport_connected(c->xport, r)));
}

void coll_skip_announce_rejected(struct gx_comm *c, uint64_t seq, int kind, int status,
                                 const char *msg)
{
    if (c->size < 2)
        return;
    struct skip_msg m = { .type = SKIP_REJECTED, .kind = (uint8_t)kind, .status = status,
                          .seq = seq };
    snprintf(m.text, sizeof(m.text), "%s", msg);
    send_all(c, &m);
}

void coll_skip_announce_finalized(struct gx_comm *c, uint64_t last_seq)
{
    if (c->size < 2)
        return;
    struct skip_msg m = { .type = SKIP_FINALIZED, .seq = last_seq };
    send_all(c, &m);
}

static struct coll_skip *skip_get(struct coll_comm *cc)
{
    if (cc->skip)
        return cc->skip;
    struct coll_skip *s = calloc(1, sizeof(*s));
    if (s && !(s->finalized_after = malloc((size_t)cc->comm->size * sizeof(uint64_t)))) {
        free(s);
        s = NULL;
    }
    if (!s)
        return NULL; /* best effort: GX_TIMEOUT still ends the wait */
    for (int i = 0; i < SKIP_KEEP; i++)
        s->rejected[i].rank = -1;
    for (int r = 0; r < cc->comm->size; r++)
        s->finalized_after[r] = UINT64_MAX;
    s->min_finalized = UINT64_MAX;
    cc->skip = s;
    return s;
}

static int comm_rank_of(const struct gx_comm *c, int world)
{
    for (int r = 0; r < c->size; r++)
        if (c->world_ranks[r] == world)
            return r;
    return -1;
}

static void poll_notices(struct coll_comm *cc, struct coll_skip *s)
{
    struct gx_comm *c = cc->comm;
    s->next_poll_ns = gx_now_ns() + SKIP_POLL_NS;
    struct skip_msg m;
    int world;
    for (int t = SKIP_REJECTED; t <= SKIP_BARRIER; t++) {
        while (gx_boot_try_recv_any(c->boot, skip_comm(c), skip_tag((enum skip_type)t), &m,
                                    sizeof(m), &world) == GX_OK) {
            int r = comm_rank_of(c, world);
            if (m.magic != SKIP_MAGIC || r < 0)
                continue;
            m.text[sizeof(m.text) - 1] = '\0';
            s->received++;
            m.type = (uint16_t)t;
            if (t == SKIP_FINALIZED) {
                s->finalized_after[r] = m.seq;
                s->min_finalized = m.seq < s->min_finalized ? m.seq : s->min_finalized;
            } else {
                s->max_seq = m.seq > s->max_seq ? m.seq : s->max_seq;
                s->rejected[s->next] = (struct skip_notice){ r, m };
                s->next = (s->next + 1) % SKIP_KEEP;
            }
        }
    }
}

void coll_skip_service(struct coll_comm *cc)
{
    if (cc->comm->size < 2)
        return;
    struct coll_skip *s = skip_get(cc);
    if (!s || (++s->calls & 15) != 0 || gx_now_ns() < s->next_poll_ns)
        return;
    poll_notices(cc, s);
}

bool coll_skip_explains(struct coll_comm *cc, struct coll_op *op, int wait_ms)
{
    struct coll_skip *s = cc->comm->size < 2 ? NULL : skip_get(cc);
    if (!s)
        return false;
    uint64_t until = gx_deadline_after_ms(wait_ms);
    for (;;) {
        gx_boot_progress(cc->comm->boot, 0);
        poll_notices(cc, s);
        int before = op->status;
        char msg[sizeof(op->errmsg)];
        snprintf(msg, sizeof(msg), "%s", op->errmsg);
        op->status = GX_OK; /* let a notice about this op take the error's place */
        coll_skip_check_op(cc, op);
        if (op->status != GX_OK)
            return true;
        op->status = before;
        snprintf(op->errmsg, sizeof(op->errmsg), "%s", msg);
        if (gx_ms_left(until) == 0)
            return false;
        gx_boot_progress(cc->comm->boot, 5);
    }
}

void coll_skip_check_op(struct coll_comm *cc, struct coll_op *op)
{
    struct coll_skip *s = cc->skip;
    if (!s || !s->received || (op->seq > s->max_seq && op->seq <= s->min_finalized))
        return;
    char what[160];
    for (int i = 0; i < SKIP_KEEP; i++) {
        const struct skip_notice *n = &s->rejected[i];
        if (n->rank < 0 || n->m.seq != op->seq)
            continue;
        coll_describe_op(op, what, sizeof(what));
        if (n->m.type == SKIP_BARRIER) {
            coll_op_set_error(op, GX_EMISMATCH, "%s failed: collective mismatch: rank %d called "
                              "gx_barrier as #%llu", what, n->rank,
                              (unsigned long long)n->m.seq);
            return;
        }
        coll_op_set_error(op, GX_EMISMATCH, "%s failed: collective mismatch: rank %d's call "
                          "#%llu (%s) was rejected there with %s, so it never takes part: %s",
                          what, n->rank,
                          (unsigned long long)n->m.seq, coll_kind_name((enum coll_kind)n->m.kind),
                          gx_strerror(n->m.status), n->m.text);
        return;
    }
    for (int r = 0; r < cc->comm->size; r++) {
        if (s->finalized_after[r] == UINT64_MAX || op->seq <= s->finalized_after[r])
            continue;
        coll_describe_op(op, what, sizeof(what));
        coll_op_set_error(op, GX_EMISMATCH, "%s failed: collective mismatch: rank %d finalized "
                          "after #%llu, so it never takes part in #%llu", what, r,
                          (unsigned long long)s->finalized_after[r],
                          (unsigned long long)op->seq);
        return;
    }
}

void coll_skip_fini(struct coll_comm *cc)
{
    if (!cc->skip)
        return;
    free(cc->skip->finalized_after);
    free(cc->skip);
    cc->skip = NULL;
}

void gx_coll_comm_finalizing(struct gx_comm *c)
{
    struct coll_comm *cc = c->coll;
    uint64_t last = 0;
    if (cc) {
        pthread_mutex_lock(&cc->mu);
        last = cc->seq;
        pthread_mutex_unlock(&cc->mu);
    }
    coll_skip_announce_finalized(c, last);
}

uint64_t gx_coll_barrier_enter(struct gx_comm *c, int *status)
{
    uint64_t seq = coll_next_seq(c, status);
    if (*status != GX_OK || c->size < 2)
        return seq;
    struct skip_msg m = { .type = SKIP_BARRIER, .seq = seq };
    send_all(c, &m);
    return seq;
}
