/*
 * sim_engine.c - a plan's steps as SimGrid actors (sim_engine.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>

#include "collectives/schedule/schedule.h"
#include "tools/gx-sim/sim_engine.h"

enum { WAITING, QUEUED, POSTED, DONE };

/* What the child's actors share (one simulation per process). */
static const struct sim_plan *the_plan;
static int ranks_finished;
static double last_finish;
static char failure[256];
static int message_token; /* SimGrid refuses empty payloads: every message carries this */

/* One rank's progress through its steps. */
struct rank_run {
    int rank, nsteps, ndone;
    const struct sim_step *steps;
    unsigned char *state;
    int *indeg;
    int *child_first, *child;   /* steps that depend on step i: child[child_first[i]..] */
    int *order_prev, *order_next; /* same direction and peer, by message number */
    int *queue, head, tail;
    sg_comm_t *comms;
    int *comm_step, ninflight;
    void *payload;              /* where receives put the (empty) payloads */
};

static bool is_message(const struct sim_step *s)
{
    return s->kind == CS_SEND || s->kind == CS_RECV;
}

static const struct sim_step *sort_steps; /* the rank qsort orders (actors never interleave in it) */

static int by_direction_peer_msg(const void *a, const void *b)
{
    const struct sim_step *x = &sort_steps[*(const int *)a], *y = &sort_steps[*(const int *)b];
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->peer != y->peer)
        return x->peer < y->peer ? -1 : 1;
    return x->msg < y->msg ? -1 : x->msg > y->msg;
}

static void rank_run_free(struct rank_run *rr)
{
    free(rr->state);
    free(rr->indeg);
    free(rr->child_first);
    free(rr->child);
    free(rr->order_prev);
    free(rr->order_next);
    free(rr->queue);
    free(rr->comms);
    free(rr->comm_step);
}

/* Dependency counts, the reverse edges and the message order chains. */
static int rank_run_init(struct rank_run *rr, int rank)
{
    const struct sim_rank_plan *rp = &the_plan->rank[rank];
    int n = rp->nsteps;
    size_t sz = (size_t)n + 1;
    memset(rr, 0, sizeof(*rr));
    rr->rank = rank, rr->nsteps = n, rr->steps = rp->steps;
    rr->state = calloc(sz, 1);
    rr->indeg = calloc(sz, sizeof(int));
    rr->child_first = calloc(sz + 1, sizeof(int));
    rr->child = malloc(sz * CS_MAX_DEPS * sizeof(int));
    rr->order_prev = malloc(sz * sizeof(int));
    rr->order_next = malloc(sz * sizeof(int));
    rr->queue = malloc(sz * sizeof(int));
    rr->comms = malloc(sz * sizeof(sg_comm_t));
    rr->comm_step = malloc(sz * sizeof(int));
    if (!rr->state || !rr->indeg || !rr->child_first || !rr->child || !rr->order_prev ||
        !rr->order_next || !rr->queue || !rr->comms || !rr->comm_step)
        return -1;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < CS_MAX_DEPS; d++) {
            int dep = rr->steps[i].dep[d];
            if (dep >= 0 && dep < i) {
                rr->indeg[i]++;
                rr->child_first[dep + 1]++;
            }
        }
    for (int i = 0; i < n; i++)
        rr->child_first[i + 1] += rr->child_first[i];
    int *fill = rr->queue; /* borrowed as the fill cursor */
    memcpy(fill, rr->child_first, (size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
        for (int d = 0; d < CS_MAX_DEPS; d++) {
            int dep = rr->steps[i].dep[d];
            if (dep >= 0 && dep < i)
                rr->child[fill[dep]++] = i;
        }
    int nmsg = 0;
    for (int i = 0; i < n; i++) {
        rr->order_prev[i] = rr->order_next[i] = -1;
        if (is_message(&rr->steps[i]))
            rr->comm_step[nmsg++] = i; /* borrowed as the list to sort */
    }
    sort_steps = rr->steps;
    qsort(rr->comm_step, (size_t)nmsg, sizeof(int), by_direction_peer_msg);
    for (int k = 1; k < nmsg; k++) {
        const struct sim_step *a = &rr->steps[rr->comm_step[k - 1]];
        const struct sim_step *b = &rr->steps[rr->comm_step[k]];
        if (a->kind == b->kind && a->peer == b->peer) {
            rr->order_next[rr->comm_step[k - 1]] = rr->comm_step[k];
            rr->order_prev[rr->comm_step[k]] = rr->comm_step[k - 1];
        }
    }
    return 0;
}

static void make_ready(struct rank_run *rr, int i)
{
    if (i < 0 || rr->state[i] != WAITING || rr->indeg[i] > 0)
        return;
    int prev = rr->order_prev[i];
    if (prev >= 0 && rr->state[prev] < POSTED)
        return; /* its pair's earlier message first */
    rr->state[i] = QUEUED;
    rr->queue[rr->tail++] = i;
}

static void complete(struct rank_run *rr, int i)
{
    rr->state[i] = DONE;
    rr->ndone++;
    for (int k = rr->child_first[i]; k < rr->child_first[i + 1]; k++) {
        int c = rr->child[k];
        rr->indeg[c]--;
        make_ready(rr, c);
    }
}

static sg_mailbox_t pair_mailbox(int from, int to)
{
    char name[32];
    snprintf(name, sizeof(name), "%d>%d", from, to);
    return sg_mailbox_by_name(name);
}

/* Bytes of memory traffic a local step makes (reads and writes). */
static double traffic(const struct sim_step *s)
{
    switch (s->kind) {
    case CS_REDUCE:
    case CS_REDUCE3: return 3.0 * s->bytes;
    case CS_COPY:
    case CS_AVG: return 2.0 * s->bytes;
    default: return 0;
    }
}

static void run_step(struct rank_run *rr, int i)
{
    const struct sim_step *s = &rr->steps[i];
    if (is_message(s)) {
        sg_comm_t c = s->kind == CS_SEND
                          ? sg_mailbox_put_async(pair_mailbox(rr->rank, s->peer), &message_token,
                                                 s->bytes)
                          : sg_mailbox_get_async(pair_mailbox(s->peer, rr->rank), &rr->payload);
        rr->state[i] = POSTED;
        rr->comms[rr->ninflight] = c;
        rr->comm_step[rr->ninflight++] = i;
        make_ready(rr, rr->order_next[i]);
        return;
    }
    double bytes = traffic(s);
    if (bytes > 0)
        sg_actor_execute(bytes);
    complete(rr, i);
}

static void rank_main(int argc, char **argv)
{
    struct rank_run rr;
    int rank = argc > 1 ? atoi(argv[1]) : 0;
    if (rank_run_init(&rr, rank) != 0) {
        snprintf(failure, sizeof(failure), "rank %d: out of memory", rank);
        rank_run_free(&rr);
        return;
    }
    for (int i = 0; i < rr.nsteps; i++)
        make_ready(&rr, i);
    while (rr.ndone < rr.nsteps) {
        while (rr.head < rr.tail)
            run_step(&rr, rr.queue[rr.head++]);
        if (rr.ndone == rr.nsteps)
            break;
        if (rr.ninflight == 0) {
            snprintf(failure, sizeof(failure), "rank %d stalls: %d of %d steps done and "
                     "nothing posted", rank, rr.ndone, rr.nsteps);
            break;
        }
        ssize_t k = sg_comm_wait_any(rr.comms, (size_t)rr.ninflight);
        if (k < 0 || k >= rr.ninflight) {
            snprintf(failure, sizeof(failure), "rank %d: a wait failed", rank);
            break;
        }
        int i = rr.comm_step[k];
        rr.ninflight--;
        rr.comms[k] = rr.comms[rr.ninflight];
        rr.comm_step[k] = rr.comm_step[rr.ninflight];
        complete(&rr, i);
    }
    if (rr.ndone == rr.nsteps) {
        ranks_finished++;
        if (simgrid_get_clock() > last_finish)
            last_finish = simgrid_get_clock();
    }
    rank_run_free(&rr);
}

struct answer {
    int ok;
    double seconds;
    char why[256];
};

/* The child: platform file, SimGrid, one actor per rank; the answer to fd. */
static void simulate(const struct sim_plan *plan, const struct sim_machine *m, int fd)
{
    struct answer ans = { 0 };
    char path[] = "/tmp/gx-sim-XXXXXX.xml";
    int pfd = mkstemps(path, 4);
    FILE *f = pfd >= 0 ? fdopen(pfd, "w") : NULL;
    if (!f || sim_platform_write(f, m, plan) != 0 || fclose(f) != 0) {
        snprintf(ans.why, sizeof(ans.why), "cannot write the platform file %s: %s", path,
                 strerror(errno));
    } else {
        char *args[] = { "gx-sim", "--log=root.thres:critical", "--cfg=network/model:CM02",
                         "--cfg=network/crosstraffic:0", "--cfg=network/TCP-gamma:0",
                         "--cfg=contexts/stack-size:256", NULL };
        int argc = 6;
        the_plan = plan;
        simgrid_init(&argc, args);
        simgrid_load_platform(path);
        for (int r = 0; r < plan->nranks; r++) {
            char host[32], name[32];
            snprintf(host, sizeof(host), "g%d", r);
            snprintf(name, sizeof(name), "%d", r);
            const char *argv[] = { "rank", name };
            sg_actor_create_(name, sg_host_by_name(host), rank_main, 2, argv);
        }
        simgrid_run();
        ans.ok = ranks_finished == plan->nranks && !failure[0];
        ans.seconds = last_finish;
        if (!ans.ok)
            snprintf(ans.why, sizeof(ans.why), "%d of %d ranks finished%s%s", ranks_finished,
                     plan->nranks, failure[0] ? ": " : " (the rest wait for messages: a "
                     "deadlock)", failure);
    }
    if (pfd >= 0)
        unlink(path);
    ssize_t w = write(fd, &ans, sizeof(ans));
    _exit(w == (ssize_t)sizeof(ans) ? 0 : 1);
}

int sim_engine_run(const struct sim_plan *plan, const struct sim_machine *m, double *seconds,
                   char *err, size_t errlen)
{
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        simulate(plan, m, fds[1]);
    }
    close(fds[1]);
    struct answer ans;
    size_t got = 0;
    while (got < sizeof(ans)) {
        ssize_t k = read(fds[0], (char *)&ans + got, sizeof(ans) - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got != sizeof(ans)) {
        snprintf(err, errlen, "the simulation died (%s %d) before answering",
                 WIFSIGNALED(status) ? "signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        return -1;
    }
    if (!ans.ok) {
        snprintf(err, errlen, "%s", ans.why);
        return -1;
    }
    *seconds = ans.seconds;
    return 0;
}
