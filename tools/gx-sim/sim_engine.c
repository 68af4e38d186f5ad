/*
 * sim_engine.c - a plan's steps as SimGrid actors (sim_engine.h).
 */
#include <errno.h>
#include <stdbool.h>
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
static const struct sim_machine *the_machine;
static double msg_flops; /* a message's software cost on its sender, in the host's flops */
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
    int *queue, nqueued;        /* ready steps: a heap by index (the engine's scan order) */
    /* Posted receives: the "live" ones (their send is posted) are waited
     * for; waiting on thousands of early receives made every wait cost
     * thousands. */
    sg_comm_t *posted;          /* per step */
    int *ordinal;               /* receive: its place among those from its peer */
    int *sends_seen, *next_live; /* per peer: sends it posted to us; our next receive
                                    from it not yet live (-1 none) */
    sg_comm_t *comms;           /* the live ones, then the wake-up receive */
    int *comm_step, ninflight;
    bool waiting, wake_sent;
    sg_comm_t wake;             /* receive on our wake-up mailbox, or NULL */
    double *due;                /* per step: the earliest it may run (its deps' ends) */
    double last_end;            /* the latest end of a step */
    bool finished;              /* every step done: the tx actor may end */
    /* The rank's transmit queue (its tx actor, tx_main). */
    unsigned char *wired;       /* per send: its bytes are across */
    int *to_put, put_head, put_tail; /* sends the tx actor puts on the wire next */
    int *sent, sent_head, sent_tail; /* sends across, for the rank to complete */
    sg_comm_t *tx_comms, tx_wake;
    int *tx_step, tx_n;
    bool tx_waiting, tx_wake_sent;
    void *payload;              /* where receives put the (empty) payloads */
};

static struct rank_run *runs;   /* every rank's, so senders can make receives live */

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
    free(rr->posted);
    free(rr->ordinal);
    free(rr->sends_seen);
    free(rr->next_live);
    free(rr->due);
    free(rr->wired);
    free(rr->to_put);
    free(rr->sent);
    free(rr->tx_comms);
    free(rr->tx_step);
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
    rr->comms = malloc((sz + 1) * sizeof(sg_comm_t));
    rr->comm_step = malloc(sz * sizeof(int));
    rr->posted = calloc(sz, sizeof(sg_comm_t));
    rr->ordinal = calloc(sz, sizeof(int));
    rr->sends_seen = calloc((size_t)the_plan->nranks, sizeof(int));
    rr->next_live = malloc((size_t)the_plan->nranks * sizeof(int));
    rr->due = calloc(sz, sizeof(double));
    rr->wired = calloc(sz, 1);
    rr->to_put = malloc(sz * sizeof(int));
    rr->sent = malloc(sz * sizeof(int));
    rr->tx_comms = malloc((sz + 1) * sizeof(sg_comm_t));
    rr->tx_step = malloc(sz * sizeof(int));
    if (!rr->state || !rr->indeg || !rr->child_first || !rr->child || !rr->order_prev ||
        !rr->order_next || !rr->queue || !rr->comms || !rr->comm_step || !rr->posted ||
        !rr->ordinal || !rr->sends_seen || !rr->next_live || !rr->due ||
        !rr->wired || !rr->to_put || !rr->sent || !rr->tx_comms || !rr->tx_step)
        return -1;
    for (int r = 0; r < the_plan->nranks; r++)
        rr->next_live[r] = -1;
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
    for (int k = 0; k < nmsg; k++) {
        int i = rr->comm_step[k], prev = rr->order_prev[i];
        if (rr->steps[i].kind != CS_RECV)
            continue;
        rr->ordinal[i] = prev >= 0 ? rr->ordinal[prev] + 1 : 0;
        if (prev < 0)
            rr->next_live[rr->steps[i].peer] = i;
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
    int k = rr->nqueued++;
    while (k > 0 && rr->queue[(k - 1) / 2] > i) {
        rr->queue[k] = rr->queue[(k - 1) / 2];
        k = (k - 1) / 2;
    }
    rr->queue[k] = i;
}

static int take_ready(struct rank_run *rr)
{
    int top = rr->queue[0], last = rr->queue[--rr->nqueued], k = 0;
    for (;;) {
        int c = 2 * k + 1;
        if (c >= rr->nqueued)
            break;
        if (c + 1 < rr->nqueued && rr->queue[c + 1] < rr->queue[c])
            c++;
        if (rr->queue[c] >= last)
            break;
        rr->queue[k] = rr->queue[c];
        k = c;
    }
    if (rr->nqueued)
        rr->queue[k] = last;
    return top;
}

static double latency(int from, int to);

/* Step i is done: now, or for a send when its bytes were across (kept in
 * due[i]); a receive's effects come a latency later (the platform's links
 * carry none, so that a pair's messages follow each other on the wire
 * without gaps): its dependants may not run before. */
static void complete(struct rank_run *rr, int i)
{
    double end = rr->steps[i].kind == CS_SEND ? rr->due[i] : simgrid_get_clock();
    if (rr->steps[i].kind == CS_RECV)
        end += latency(rr->steps[i].peer, rr->rank);
    if (end > rr->last_end)
        rr->last_end = end;
    rr->state[i] = DONE;
    rr->ndone++;
    for (int k = rr->child_first[i]; k < rr->child_first[i + 1]; k++) {
        int c = rr->child[k];
        if (end > rr->due[c])
            rr->due[c] = end;
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

static void make_live(struct rank_run *rr, int i)
{
    rr->comms[rr->ninflight] = rr->posted[i];
    rr->comm_step[rr->ninflight++] = i;
}

static void wake_rank(struct rank_run *rr);

/* A rank's wake-up mailbox ("wake"), its tx actor's ("tx"). */
static sg_mailbox_t rank_mailbox(const char *what, int rank)
{
    char name[32];
    snprintf(name, sizeof(name), "%s%d", what, rank);
    return sg_mailbox_by_name(name);
}

/* The receives from `peer` whose sends are posted join the wait; a rank
 * waiting without them is woken by an empty message, which arrives no
 * later than the data (the same route's latency, no bytes). */
static void receives_live(struct rank_run *rr, int peer)
{
    bool added = false;
    int i;
    while ((i = rr->next_live[peer]) >= 0 && rr->ordinal[i] < rr->sends_seen[peer] &&
           rr->state[i] == POSTED) {
        make_live(rr, i);
        rr->next_live[peer] = rr->order_next[i];
        added = true;
    }
    if (added)
        wake_rank(rr);
}

/* An empty message to a waiting actor's wake-up mailbox, once per wait.
 * Detached: nobody waits for a wake-up's send, and SimGrid keeps an
 * actor's unfinished comms in a list it searches on every completion, so
 * undetached ones (never released: 3.32 aborts on releasing a started
 * comm) made each completion cost as much as the wake-ups sent so far. */
static void wake(bool waiting, bool *sent, const char *what, int rank)
{
    if (waiting && !*sent) {
        *sent = true;
        sg_comm_detach(sg_mailbox_put_init(rank_mailbox(what, rank), &message_token, 0), NULL);
    }
}

static void wake_rank(struct rank_run *rr) { wake(rr->waiting, &rr->wake_sent, "wake", rr->rank); }
static void wake_tx(struct rank_run *rr) { wake(rr->tx_waiting, &rr->tx_wake_sent, "tx", rr->rank); }

/* Send i's bytes are across: the rank completes it; the pair's next
 * message, if the rank has posted it, goes on the wire. */
static void wire_done(struct rank_run *rr, int i)
{
    rr->wired[i] = 1;
    rr->due[i] = simgrid_get_clock();
    rr->sent[rr->sent_tail++] = i;
    int next = rr->order_next[i];
    if (next >= 0 && rr->state[next] == POSTED)
        rr->to_put[rr->put_tail++] = next;
    wake_rank(rr);
}

static void tx_remove(struct rank_run *rr, int k)
{
    int i = rr->tx_step[k];
    rr->tx_n--;
    rr->tx_comms[k] = rr->tx_comms[rr->tx_n];
    rr->tx_step[k] = rr->tx_step[rr->tx_n];
    wire_done(rr, i);
}

/* The tx actor: puts the queued sends on the wire, waits for them. */
static void tx_main(int argc, char **argv)
{
    struct rank_run *rr = &runs[argc > 1 ? atoi(argv[1]) : 0];
    for (;;) {
        while (rr->put_head < rr->put_tail) {
            int i = rr->to_put[rr->put_head++];
            const struct sim_step *s = &rr->steps[i];
            rr->tx_comms[rr->tx_n] = sg_mailbox_put_async(pair_mailbox(rr->rank, s->peer),
                                                          &message_token, s->bytes);
            rr->tx_step[rr->tx_n++] = i;
        }
        if (rr->tx_n == 0 && rr->finished)
            return;
        rr->tx_waiting = true; /* before the simcall, as the rank's wait */
        if (!rr->tx_wake)
            rr->tx_wake = sg_mailbox_get_async(rank_mailbox("tx", rr->rank), &rr->payload);
        if (rr->put_head < rr->put_tail) {
            rr->tx_waiting = false;
            continue;
        }
        int n = rr->tx_n;
        rr->tx_comms[n] = rr->tx_wake;
        ssize_t k = sg_comm_wait_any(rr->tx_comms, (size_t)n + 1);
        rr->tx_waiting = false;
        if (k == n) {
            rr->tx_wake = NULL;
            rr->tx_wake_sent = false;
            continue;
        }
        if (k < 0 || k > n) {
            snprintf(failure, sizeof(failure), "rank %d: a send's wait failed", rr->rank);
            return;
        }
        tx_remove(rr, (int)k);
        for (int j = 0; j < rr->tx_n;) /* the ones that finished at the same time */
            if (sg_comm_test(rr->tx_comms[j]))
                tx_remove(rr, j);
            else
                j++;
    }
}

/* A pair's messages cross its connection one after the other, in message
 * order (a tcp stream, a queue pair, a shm ring): a send is queued for the
 * tx actor when the pair's previous one is across, else wire_done()
 * queues it. Concurrent sends of one pair sharing the link would finish
 * together and undo the chunks' pipelining. */
static void run_step(struct rank_run *rr, int i)
{
    const struct sim_step *s = &rr->steps[i];
    if (s->kind == CS_SEND) {
        if (msg_flops > 0)
            sg_actor_execute(msg_flops);
        rr->state[i] = POSTED;
        int prev = rr->order_prev[i];
        if (prev < 0 || rr->wired[prev]) {
            rr->to_put[rr->put_tail++] = i;
            wake_tx(rr);
        }
        runs[s->peer].sends_seen[rr->rank]++;
        receives_live(&runs[s->peer], rr->rank);
        make_ready(rr, rr->order_next[i]);
        return;
    }
    if (s->kind == CS_RECV) {
        rr->posted[i] = sg_mailbox_get_async(pair_mailbox(s->peer, rr->rank), &rr->payload);
        rr->state[i] = POSTED;
        receives_live(rr, s->peer);
        make_ready(rr, rr->order_next[i]);
        return;
    }
    double bytes = traffic(s);
    if (bytes > 0)
        sg_actor_execute(bytes);
    complete(rr, i);
}

/* One-way latency from `from` to `to` (sim_platform_path). */
static double latency(int from, int to)
{
    double lat = 0, bw = 0;
    sim_platform_path(the_machine, from, to, &lat, &bw);
    return lat;
}

static void rank_main(int argc, char **argv)
{
    int rank = argc > 1 ? atoi(argv[1]) : 0;
    struct rank_run *rr = &runs[rank];
    for (int i = 0; i < rr->nsteps; i++)
        make_ready(rr, i);
    while (rr->ndone < rr->nsteps) {
        while (rr->sent_head < rr->sent_tail)
            complete(rr, rr->sent[rr->sent_head++]);
        while (rr->nqueued) {
            int i = take_ready(rr);
            if (rr->due[i] > simgrid_get_clock())
                sg_actor_sleep_until(rr->due[i]); /* a receive it needs is not in yet */
            run_step(rr, i);
        }
        if (rr->ndone == rr->nsteps)
            break;
        /* Waiting from here: posting the wake-up is a simcall, in which the
         * tx actor or a sender may run (and must wake us). */
        rr->waiting = true;
        if (!rr->wake)
            rr->wake = sg_mailbox_get_async(rank_mailbox("wake", rank), &rr->payload);
        if (rr->sent_head < rr->sent_tail) {
            rr->waiting = false;
            continue;
        }
        /* Senders append live receives while this waits (from slot n on,
         * over the wake-up's slot): the answer is read against n. */
        int n = rr->ninflight;
        rr->comms[n] = rr->wake;
        ssize_t k = sg_comm_wait_any(rr->comms, (size_t)n + 1);
        rr->waiting = false;
        if (k == n) { /* woken: a receive became live, or a send is across */
            rr->wake = NULL;
            rr->wake_sent = false;
            continue;
        }
        if (k < 0 || k > n) {
            snprintf(failure, sizeof(failure), "rank %d: a wait failed", rank);
            break;
        }
        int i = rr->comm_step[k];
        rr->ninflight--;
        rr->comms[k] = rr->comms[rr->ninflight];
        rr->comm_step[k] = rr->comm_step[rr->ninflight];
        complete(rr, i);
        /* Whatever else finished by now, before any step runs. */
        for (int j = 0; j < rr->ninflight;) {
            if (!sg_comm_test(rr->comms[j])) {
                j++;
                continue;
            }
            int done = rr->comm_step[j];
            rr->ninflight--;
            rr->comms[j] = rr->comms[rr->ninflight];
            rr->comm_step[j] = rr->comm_step[rr->ninflight];
            complete(rr, done);
        }
    }
    rr->finished = true;
    wake_tx(rr);
    if (rr->ndone == rr->nsteps) {
        if (rr->last_end > simgrid_get_clock())
            sg_actor_sleep_until(rr->last_end); /* the last receive's latency */
        ranks_finished++;
        if (simgrid_get_clock() > last_finish)
            last_finish = simgrid_get_clock();
    }
    /* Stay, as a daemon, until the tx actors are gone: an actor that ends
     * fails the messages it left in flight (the wake-ups its tx actor
     * waits for). The simulation ends with the last tx actor. Sleeping
     * instead would hide a deadlock: the clock would run on for ever. */
    sg_actor_daemonize(sg_actor_self());
    (void)sg_mailbox_get(rank_mailbox("never", rank)); /* blocked, not sleeping: a
                                                          deadlock is still found */
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
        the_machine = m;
        msg_flops = m->msg_us * 1e-6 * m->mem_gbytes * 1e9;
        runs = calloc((size_t)plan->nranks, sizeof(*runs));
        for (int r = 0; r < plan->nranks; r++)
            if (!runs || rank_run_init(&runs[r], r) != 0) {
                snprintf(ans.why, sizeof(ans.why), "out of memory for %d ranks' runs", r);
                _exit(write(fd, &ans, sizeof(ans)) == (ssize_t)sizeof(ans) ? 0 : 1);
            }
        simgrid_init(&argc, args);
        simgrid_load_platform(path);
        for (int r = 0; r < plan->nranks; r++) {
            char host[32], name[32];
            snprintf(host, sizeof(host), "g%d", r);
            snprintf(name, sizeof(name), "%d", r);
            const char *argv[] = { "rank", name };
            sg_actor_create_(name, sg_host_by_name(host), rank_main, 2, argv);
            sg_actor_create_("tx", sg_host_by_name(host), tx_main, 2, argv);
        }
        simgrid_run();
        for (int r = 0; r < plan->nranks; r++)
            rank_run_free(&runs[r]);
        free(runs);
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
