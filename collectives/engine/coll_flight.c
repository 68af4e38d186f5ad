/*
 * coll_flight.c - the flight recorder (see coll_flight.h).
 *
 * Dump format, one text file per rank and communicator,
 * GX_FLIGHT_DIR/gx-flight-<comm id>-r<rank>.txt:
 *   # gx-flight 1
 *   comm <id> name <name> rank <r> size <n> world_rank <w> host <h> pid <p>
 *        now_us <t> capacity <N> recorded <total> reason <why>      (one line)
 *   op <seq> <kind> <count> <dtype> <redop> <root> <algo> <state> <status>
 *      <issued_us> <ended_us>                                       (one line each)
 * Times are the rank's monotonic clock in microseconds (compare them with
 * now_us of the same file); ended_us is 0 while in flight; state is
 * issued, done, failed or rejected; dtype, redop and algo are names ("-"
 * where none applies).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectives/algorithms/algo.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/engine/coll_flight.h"
#include "collectives/schedule/schedule.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/safe_file.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_flight, "GX_FLIGHT", GX_PARAM_INT, "2000", NULL,
                "Collectives each communicator remembers in its flight recorder (0: none); "
                "dumped to GX_FLIGHT_DIR on failure, timeout, abort and SIGUSR1.");
GX_PARAM_DEFINE(gx_param_flight_dir, "GX_FLIGHT_DIR", GX_PARAM_STRING, "", NULL,
                "Directory for flight-recorder dumps (gx-flight-<comm>-r<rank>.txt, mode "
                "0600); unset: no dumps. Merge them with gx-info --flight DIR.");

#define FLIGHT_MAX 1000000 /* entries per communicator, whatever GX_FLIGHT says */

enum flight_state { FL_ISSUED, FL_DONE, FL_FAILED, FL_REJECTED };
static const char *const state_names[] = { "issued", "done", "failed", "rejected" };

struct flight_entry {
    uint64_t seq;
    uint64_t count;
    uint64_t issued_ns, ended_ns;
    int32_t root;
    int32_t status;
    uint8_t kind, dtype, redop, algo, state;
};

struct coll_flight {
    struct flight_entry *ring;
    size_t cap;
    uint64_t recorded;        /* entries ever written; the ring holds the last cap */
    unsigned seen_signals;
    bool dumped_failure;
};

static atomic_uint flight_signals;

static void on_sigusr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&flight_signals, 1);
}

/* SIGUSR1 asks for dumps, unless the application handles it itself. */
static void install_signal_once(void)
{
    static atomic_flag done = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&done))
        return;
    struct sigaction old;
    if (sigaction(SIGUSR1, NULL, &old) != 0 || old.sa_handler != SIG_DFL)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigusr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGUSR1, &sa, NULL);
}

struct coll_flight *coll_flight_new(void)
{
    long long n = 0;
    if (gx_param_int(&gx_param_flight, &n) != GX_OK || n <= 0)
        return NULL;
    if (n > FLIGHT_MAX)
        n = FLIGHT_MAX;
    struct coll_flight *f = calloc(1, sizeof(*f));
    if (f)
        f->ring = calloc((size_t)n, sizeof(*f->ring));
    if (!f || !f->ring) {
        free(f);
        GX_WARN(GX_SUB_COLL, "flight recorder: no memory for %lld entries; not recording", n);
        return NULL;
    }
    f->cap = (size_t)n;
    f->seen_signals = atomic_load(&flight_signals);
    if (gx_param_is_set(&gx_param_flight_dir))
        install_signal_once();
    return f;
}

void coll_flight_free(struct coll_flight *f)
{
    if (f)
        free(f->ring);
    free(f);
}

static struct flight_entry *slot_of(struct coll_flight *f, uint64_t seq)
{
    /* Sequence numbers grow by one per call, so the ring is indexed by them
     * and an entry is found again at its end without a search. */
    return &f->ring[seq % f->cap];
}

static void record(struct coll_flight *f, uint64_t seq, const struct coll_args *a, int algo,
                   int state, int status)
{
    struct flight_entry *e = slot_of(f, seq);
    *e = (struct flight_entry){
        .seq = seq, .count = a->count, .issued_ns = gx_now_ns(), .root = a->root,
        .status = status, .kind = (uint8_t)a->kind, .dtype = (uint8_t)a->dtype,
        .redop = (uint8_t)a->op, .algo = (uint8_t)algo, .state = (uint8_t)state,
    };
    if (state == FL_REJECTED)
        e->ended_ns = e->issued_ns;
    f->recorded++;
}

void coll_flight_issued(struct coll_flight *f, const struct coll_op *op)
{
    if (f)
        record(f, op->seq, &op->a, (int)op->algo, FL_ISSUED, GX_OK);
}

void coll_flight_rejected(struct coll_flight *f, uint64_t seq, const struct coll_args *a,
                          int status)
{
    if (f)
        record(f, seq, a, COLL_ALGO_AUTO, FL_REJECTED, status);
}

void coll_flight_finished(struct coll_flight *f, const struct coll_op *op)
{
    if (!f)
        return;
    struct flight_entry *e = slot_of(f, op->seq);
    if (e->seq != op->seq || e->state != FL_ISSUED)
        return; /* overwritten by a newer collective: nothing to update */
    e->ended_ns = gx_now_ns();
    e->status = op->status;
    e->state = op->status == GX_OK ? FL_DONE : FL_FAILED;
}

bool coll_flight_signalled(struct coll_flight *f)
{
    if (!f)
        return false;
    unsigned now = atomic_load(&flight_signals);
    if (now == f->seen_signals)
        return false;
    f->seen_signals = now;
    return true;
}

/* Open the dump file: never through a symlink, never someone else's file. */
static FILE *open_dump(const char *path)
{
    char err[768];
    int fd = gx_safe_open(path, O_WRONLY | O_CREAT | O_TRUNC, err, sizeof(err));
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out) {
        if (fd >= 0)
            close(fd);
        GX_WARN(GX_SUB_COLL, "flight recorder: %s (GX_FLIGHT_DIR)", err);
    }
    return out;
}

static const char *dtype_name(const struct flight_entry *e)
{
    const char *n = gx_datatype_name((enum gx_datatype)e->dtype);
    return n && *n ? n : "-";
}

void coll_flight_dump(struct coll_flight *f, const struct gx_comm *c, const char *reason)
{
    bool is_signal = strcmp(reason, "SIGUSR1") == 0;
    if (!f || !gx_param_is_set(&gx_param_flight_dir) || (!is_signal && f->dumped_failure))
        return;
    if (!is_signal)
        f->dumped_failure = true;
    char path[4096];
    snprintf(path, sizeof(path), "%s/gx-flight-%016llx-r%d.txt",
             gx_param_text(&gx_param_flight_dir), (unsigned long long)c->comm_id, c->rank);
    FILE *out = open_dump(path);
    if (!out)
        return;
    const struct boot_rank_record *me = gx_boot_record(c->boot, c->world_ranks[c->rank]);
    char why[128], name[sizeof(c->name)];
    snprintf(why, sizeof(why), "%s", reason);
    snprintf(name, sizeof(name), "%s", c->name[0] ? c->name : "-");
    for (char *p = why; *p; p++)
        if (*p == ' ')
            *p = '_';
    for (char *p = name; *p; p++)
        if (*p == ' ' || *p == '\t' || *p == '\n')
            *p = '_';
    fprintf(out, "# gx-flight %d\ncomm %016llx name %s rank %d size %d world_rank %d host %s "
            "pid %d now_us %llu capacity %zu recorded %llu reason %s\n",
            FLIGHT_FORMAT_VERSION, (unsigned long long)c->comm_id, name, c->rank, c->size,
            c->world_ranks[c->rank], me->host, (int)getpid(),
            (unsigned long long)(gx_now_ns() / 1000), f->cap,
            (unsigned long long)f->recorded, why);
    /* Slot = seq % cap: walk the last cap sequence numbers up to the newest
     * recorded one; a slot holding another number was skipped (a call that
     * failed before its arguments were checked) or overwritten. */
    uint64_t newest = 0, n = 0;
    for (size_t i = 0; i < f->cap; i++)
        if (f->ring[i].seq > newest)
            newest = f->ring[i].seq;
    uint64_t first = newest >= f->cap ? newest - f->cap + 1 : 1;
    for (uint64_t s = first; newest && s <= newest; s++) {
        const struct flight_entry *e = slot_of(f, s);
        if (e->seq != s)
            continue;
        n++;
        fprintf(out, "op %llu %s %llu %s %s %d %s %s %d %llu %llu\n",
                (unsigned long long)e->seq, coll_kind_name((enum coll_kind)e->kind),
                (unsigned long long)e->count, dtype_name(e),
                e->redop < GX_REDOP_COUNT ? gx_redop_name((enum gx_redop)e->redop) : "-",
                e->root, e->state == FL_REJECTED ? "-" : coll_algo_name((enum coll_algo)e->algo),
                state_names[e->state], e->status, (unsigned long long)(e->issued_ns / 1000),
                (unsigned long long)(e->ended_ns / 1000));
    }
    if (fclose(out) != 0)
        GX_WARN(GX_SUB_COLL, "flight recorder: writing %s failed: %s", path, strerror(errno));
    else
        GX_INFO(GX_SUB_COLL, "flight recorder: %llu collectives of communicator '%s' written to "
                "%s (%s)", (unsigned long long)n, c->name, path, reason);
}
