/*
 * coll_stall.c - the stall report and the survey (see coll_stall.h).
 *
 * Messages (struct stall_msg, one size for all) travel on the bootstrap
 * under the communicator's id XOR STALL_COMM_SALT:
 *   NOTE   a stalled rank -> the surveyor: "my #seq has waited GX_STALL_WARN"
 *   QUERY  the surveyor -> every rank: "what did you last issue and complete?"
 *   REPLY  every rank -> the surveyor: the answer, tagged with the survey's id
 * The surveyor is rank 0; a stalled rank that gets no QUERY within
 * NOTE_FALLBACK_MS notes rank 1, then 2, ... (or surveys itself when its
 * turn comes), so a stopped or dead rank 0 does not silence the report.
 * A survey waits SURVEY_GRACE_MS for the replies, then logs one summary.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/bootstrap/boot_proto.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/engine/coll_trace.h"
#include "collectives/engine/coll_engine.h"
#include "collectives/engine/coll_stall.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_stall_warn, "GX_STALL_WARN", GX_PARAM_INT, "60", NULL,
                "Seconds a collective may wait before each waiting rank logs what it waits for "
                "and rank 0 (or the next rank, if rank 0 is silent) asks every rank over the "
                "bootstrap what it last did; 0: off. "
                "Keep it well below GX_TIMEOUT.");

#define STALL_COMM_SALT 0x5354414c4c5f5f31ull /* "STALL__1" */
#define STALL_MAGIC 0x67785354u
#define STALL_SERVICE_NS 100000000ull         /* look at the bootstrap at most 10x a second */
#define STALL_IDLE_MS 200                     /* idle progress thread wakes this often */
#define SURVEY_GRACE_MS 2000
#define NOTE_FALLBACK_MS 1000                 /* no query this long: note the next rank */
#define STALL_SEND_MS 200                     /* a send to a rank that does not read */
#define STALL_CONNECT_MS 1500                 /* ... that needs a new connection first */

enum stall_type { STALL_NOTE = 1, STALL_QUERY = 2, STALL_REPLY = 3 };

struct stall_msg {
    uint32_t magic;
    uint16_t type;
    uint8_t kind;            /* NOTE/QUERY: the stalled collective's kind */
    uint8_t in_flight;       /* REPLY: collectives outstanding on the sender */
    uint64_t survey;         /* QUERY/REPLY: the survey's id */
    uint64_t seq;            /* NOTE/QUERY: the stalled collective */
    uint64_t issued_seq;     /* REPLY: the sender's last issued collective */
    uint64_t done_seq;       /* REPLY: its last completed one */
    uint64_t done_age_ms;    /* REPLY: how long ago it completed */
    uint8_t issued_kind, done_kind;
    uint8_t pad[6];
};

struct stall_reply {
    bool answered;
    struct stall_msg m;
};

struct coll_stall {
    int warn_ms;
    unsigned checks;             /* coll_stall_check_op reads the clock 1 call in 16 */
    uint64_t next_service_ns;
    /* This rank's stalled collective and whom it told (the surveyor role
     * falls back along ranks 0, 1, 2, ... while nobody queries us). */
    uint64_t stalled_seq;
    uint8_t stalled_kind;
    int note_target;
    uint64_t note_ns;
    bool queried;
    /* The survey this rank runs, as the surveyor. */
    bool surveying;
    uint64_t survey_id, survey_seq, surveyed_up_to;
    uint8_t survey_kind;
    uint64_t survey_end_ns;
    struct stall_reply *replies; /* one per comm rank */
};

static uint64_t stall_comm(const struct coll_comm *cc)
{
    return cc->comm->comm_id ^ STALL_COMM_SALT;
}

static uint64_t stall_tag(enum stall_type t)
{
    return BOOT_TAG(0, BOOT_OP_USER, t);
}

void coll_stall_init(struct coll_comm *cc)
{
    long long s = 0;
    cc->stall = NULL;
    if (gx_param_int(&gx_param_stall_warn, &s) != GX_OK || s <= 0 || cc->comm->size < 2)
        return;
    struct coll_stall *st = calloc(1, sizeof(*st));
    if (st)
        st->replies = calloc((size_t)cc->comm->size, sizeof(*st->replies));
    if (!st || !st->replies) {
        free(st);
        return; /* best effort: the timeout still names the peers */
    }
    st->warn_ms = s > 86400 ? 86400 * 1000 : (int)(s * 1000);
    cc->stall = st;
}

void coll_stall_fini(struct coll_comm *cc)
{
    if (cc->stall)
        free(cc->stall->replies);
    free(cc->stall);
    cc->stall = NULL;
}

int coll_stall_idle_ms(const struct coll_comm *cc)
{
    return cc->stall ? STALL_IDLE_MS : 0;
}

/* Best effort, never the job's failure: a rank that does not answer is what
 * the survey reports. Over an open bootstrap connection a rank that does not
 * read costs STALL_SEND_MS. Bootstrap connections are made on demand, and
 * the handshake of a new one needs the peer to service its bootstrap, which
 * a rank waiting in a collective does every STALL_SERVICE_NS or
 * STALL_IDLE_MS: a new connection gets STALL_CONNECT_MS. */
static void send_to(struct coll_comm *cc, int comm_rank, struct stall_msg *m)
{
    m->magic = STALL_MAGIC;
    struct gx_comm *c = cc->comm;
    int world = c->world_ranks[comm_rank];
    uint64_t tag = stall_tag((enum stall_type)m->type);
    if (gx_boot_notify(c->boot, world, stall_comm(cc), tag, m, sizeof(*m),
                       gx_deadline_after_ms(STALL_SEND_MS), false) == GX_EINVAL)
        (void)gx_boot_notify(c->boot, world, stall_comm(cc), tag, m, sizeof(*m),
                             gx_deadline_after_ms(STALL_CONNECT_MS), true);
}

/* One poll of the bootstrap, whichever rank sent. Messages of other
 * communicators sharing the bootstrap have other comm ids. It only reads
 * what has arrived: a closed connection is not the stall report's to
 * judge (blaming it here once named a survivor instead of a dead rank). */
static bool recv_any(struct coll_comm *cc, enum stall_type t, struct stall_msg *m, int *world)
{
    return gx_boot_try_recv_any(cc->comm->boot, stall_comm(cc), stall_tag(t), m, sizeof(*m),
                                world) == GX_OK &&
           m->magic == STALL_MAGIC && m->type == t;
}

static int comm_rank_of(const struct gx_comm *c, int world)
{
    for (int r = 0; r < c->size; r++)
        if (c->world_ranks[r] == world)
            return r;
    return -1;
}

static void survey_start(struct coll_comm *cc, uint64_t seq, uint8_t kind)
{
    struct coll_stall *st = cc->stall;
    if (st->surveying || seq <= st->surveyed_up_to)
        return;
    st->surveying = true;
    st->survey_id++;
    st->survey_seq = seq;
    st->survey_kind = kind;
    st->surveyed_up_to = seq;
    st->survey_end_ns = gx_now_ns() + SURVEY_GRACE_MS * 1000000ull;
    memset(st->replies, 0, (size_t)cc->comm->size * sizeof(*st->replies));
    struct stall_msg q = { .type = STALL_QUERY, .kind = kind, .survey = st->survey_id, .seq = seq };
    for (int r = 0; r < cc->comm->size; r++)
        if (r != cc->comm->rank)
            send_to(cc, r, &q);
    if (st->stalled_seq == seq)
        st->queried = true;
}

/* What this rank last did, as a reply to `survey`. */
static struct stall_msg my_state(const struct coll_comm *cc, uint64_t survey)
{
    struct stall_msg m = {
        .type = STALL_REPLY, .survey = survey, .in_flight = cc->nactive > 0,
        .issued_seq = cc->last_issued_seq, .issued_kind = cc->last_issued_kind,
        .done_seq = cc->last_done_seq, .done_kind = cc->last_done_kind,
    };
    if (cc->last_done_ns)
        m.done_age_ms = (gx_now_ns() - cc->last_done_ns) / 1000000ull;
    return m;
}

/* Append " r" or ",r" / ranges to a list string. */
static void list_add(char *buf, size_t len, int r)
{
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, "%s%d", n ? "," : "", r);
}

static void survey_report(struct coll_comm *cc)
{
    struct coll_stall *st = cc->stall;
    struct gx_comm *c = cc->comm;
    st->replies[c->rank] = (struct stall_reply){ true, my_state(cc, st->survey_id) };
    char waiting[256] = "", silent[256] = "", never[1024] = "", past[256] = "";
    for (int r = 0; r < c->size; r++) {
        const struct stall_reply *rp = &st->replies[r];
        if (!rp->answered) {
            list_add(silent, sizeof(silent), r);
        } else if (rp->m.issued_seq < st->survey_seq) {
            size_t n = strlen(never);
            if (rp->m.done_seq)
                snprintf(never + n, sizeof(never) - n, "%srank %d never entered it (last "
                         "completed %s #%llu %.1f s ago)", n ? "; " : "", r,
                         coll_kind_name((enum coll_kind)rp->m.done_kind),
                         (unsigned long long)rp->m.done_seq, (double)rp->m.done_age_ms / 1e3);
            else
                snprintf(never + n, sizeof(never) - n, "%srank %d never entered it (no "
                         "collective completed yet)", n ? "; " : "", r);
        } else if (rp->m.done_seq >= st->survey_seq) {
            list_add(past, sizeof(past), r);
        } else {
            list_add(waiting, sizeof(waiting), r);
        }
    }
    GX_WARN(GX_SUB_COLL, "stall survey of %s #%llu on communicator '%s' (by rank %d): %s%s%s%s%s%s%s%s",
            coll_kind_name((enum coll_kind)st->survey_kind),
            (unsigned long long)st->survey_seq, c->name, c->rank, never,
            silent[0] ? (never[0] ? "; no answer from ranks " : "no answer from ranks ") : "",
            silent, silent[0] ? " (stopped, dead, or never ran a collective)" : "",
            waiting[0] ? "; ranks waiting in it: " : "", waiting,
            past[0] ? "; ranks past it: " : "", past);
    st->surveying = false;
}

/* Tell the current surveyor candidate, or survey ourselves when it is us. */
static void note_stall(struct coll_comm *cc)
{
    struct coll_stall *st = cc->stall;
    st->note_ns = gx_now_ns();
    if (st->note_target == cc->comm->rank) {
        survey_start(cc, st->stalled_seq, st->stalled_kind);
        return;
    }
    struct stall_msg note = { .type = STALL_NOTE, .kind = st->stalled_kind,
                              .seq = st->stalled_seq };
    send_to(cc, st->note_target, &note);
}

void coll_stall_check_op(struct coll_comm *cc, struct coll_op *op)
{
    struct coll_stall *st = cc->stall;
    if (!st || op->stall_warned || (++st->checks & 15) != 0 ||
        gx_now_ns() - op->issued_ns < (uint64_t)st->warn_ms * 1000000ull)
        return;
    op->stall_warned = true;
    __atomic_fetch_add(&op->comm->tally.stalls, 1, __ATOMIC_RELAXED);
    if (gx_trace_on())
        coll_trace_event(op, "stall");
    char what[160], waits[300];
    coll_describe_op(op, what, sizeof(what));
    coll_stall_report(op, waits, sizeof(waits));
    GX_WARN(GX_SUB_COLL, "%s has waited %.1f s (GX_STALL_WARN); step %d of %d; waiting on: %s",
            what, (double)(gx_now_ns() - op->issued_ns) / 1e9, op->first, op->nsteps, waits);
    if (op->seq <= st->stalled_seq)
        return;
    st->stalled_seq = op->seq;
    st->stalled_kind = (uint8_t)op->a.kind;
    st->queried = false;
    st->note_target = 0;
    note_stall(cc);
}

void coll_stall_service(struct coll_comm *cc)
{
    struct coll_stall *st = cc->stall;
    if (!st || gx_now_ns() < st->next_service_ns)
        return;
    st->next_service_ns = gx_now_ns() + STALL_SERVICE_NS;
    struct gx_comm *c = cc->comm;
    struct stall_msg m;
    int world;
    while (recv_any(cc, STALL_QUERY, &m, &world)) {
        int from = comm_rank_of(c, world);
        if (from < 0)
            continue;
        if (m.seq >= st->stalled_seq)
            st->queried = true; /* somebody surveys our stall */
        struct stall_msg reply = my_state(cc, m.survey);
        send_to(cc, from, &reply);
    }
    while (recv_any(cc, STALL_NOTE, &m, &world))
        survey_start(cc, m.seq, m.kind);
    /* Our surveyor candidate is silent (stopped, dead, or not in gx): the
     * next rank in order takes the role; every stalled rank walks the same
     * order, so they meet at the first rank that answers. */
    if (st->stalled_seq && !st->queried && st->note_target < c->size - 1 &&
        gx_now_ns() - st->note_ns >= NOTE_FALLBACK_MS * 1000000ull && !st->surveying) {
        st->note_target++;
        note_stall(cc);
    }
    while (recv_any(cc, STALL_REPLY, &m, &world)) {
        int r = comm_rank_of(c, world);
        if (st->surveying && m.survey == st->survey_id && r >= 0)
            st->replies[r] = (struct stall_reply){ true, m };
    }
    if (!st->surveying)
        return;
    bool all = true;
    for (int r = 0; r < c->size && all; r++)
        all = r == c->rank || st->replies[r].answered;
    if (all || gx_now_ns() >= st->survey_end_ns)
        survey_report(cc);
}
