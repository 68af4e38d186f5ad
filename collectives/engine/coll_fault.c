/*
 * coll_fault.c - fault injection for any run (GX_FAULT), so failure handling
 * can be tested and measured without the hardware or kernel features
 * (netem) that would cause the faults for real.
 *
 * Grammar (docs/reliability.md): rules separated by ';', each
 *   ACTION:KEY=VALUE[,KEY=VALUE...]
 * ACTION  kill | stop | drop | delay | close | regfail | corrupt
 * KEYS    rank=R   the communicator rank that acts (required)
 *         coll=S   the collective's sequence number on that communicator
 *                  (required but for delay; 1 is the first collective)
 *         step=K   the step of that collective's schedule, by index (default
 *                  0: the mismatch-descriptor send every collective starts
 *                  with); drop loses the first send at or after it,
 *                  corrupt acts on the first receive at or after it
 *         comm=N   only on the communicator named N (default: any)
 *         ms=M     delay: how long each send waits (default 10)
 *         prob=P   delay: the share of sends delayed, 0..1 (default 1)
 * kill/stop raise SIGKILL/SIGSTOP in the rank, also when step K is a node
 * arena flag being raised (a rank dying inside the arena); drop loses one message
 * silently (the sender's step completes, the receiver never gets it); delay
 * holds sends back; close breaks the rank's link to the step's peer; regfail
 * makes the transport's next memory registration fail; corrupt flips a bit
 * of the receive's message as it arrives (only the sender's GX_CHECKSUM=1
 * can catch it: no other check would).
 *
 * Owns: parsing GX_FAULT once per process and deciding, per step, whether a
 * rule fires. Each rule fires once (delay: on every matching send). Must
 * not touch the engine's state beyond the step it is given.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collectives/comm/comm_internal.h"
#include "collectives/engine/coll_fault.h"
#include "common/log.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_fault, "GX_FAULT", GX_PARAM_STRING, "", NULL,
                "Fault injection for tests: 'ACTION:rank=R,coll=S[,step=K][,comm=N]' rules "
                "separated by ';' (kill, stop, drop, delay with ms= and prob=, close, regfail, corrupt); "
                "see docs/reliability.md.");

#define MAX_RULES 16

struct fault_rule {
    enum coll_fault_action action;
    int rank;
    unsigned long long coll;
    int step;
    int ms;
    double prob;
    char comm[32];
    bool fired;
};

static struct fault_rule rules[MAX_RULES];
static int nrules;
static bool parse_failed;
static char parse_error[300];
static pthread_once_t parse_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t fire_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *const action_names[] = {
    [COLL_FAULT_NONE] = "none", [COLL_FAULT_KILL] = "kill",   [COLL_FAULT_STOP] = "stop",
    [COLL_FAULT_DROP] = "drop", [COLL_FAULT_DELAY] = "delay", [COLL_FAULT_CLOSE] = "close",
    [COLL_FAULT_REGFAIL] = "regfail", [COLL_FAULT_CORRUPT] = "corrupt",
};

static int parse_rule(char *text, struct fault_rule *r)
{
    char *colon = strchr(text, ':');
    if (!colon)
        return -1;
    *colon = 0;
    *r = (struct fault_rule){ .rank = -1, .step = 0, .ms = 10, .prob = 1.0 };
    for (int a = COLL_FAULT_KILL; a <= COLL_FAULT_CORRUPT; a++)
        if (strcmp(text, action_names[a]) == 0)
            r->action = (enum coll_fault_action)a;
    if (r->action == COLL_FAULT_NONE)
        return -1;
    char *save = NULL;
    for (char *kv = strtok_r(colon + 1, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return -1;
        *eq = 0;
        const char *v = eq + 1;
        char *end = NULL;
        if (strcmp(kv, "rank") == 0)
            r->rank = (int)strtol(v, &end, 10);
        else if (strcmp(kv, "coll") == 0)
            r->coll = strtoull(v, &end, 10);
        else if (strcmp(kv, "step") == 0)
            r->step = (int)strtol(v, &end, 10);
        else if (strcmp(kv, "ms") == 0)
            r->ms = (int)strtol(v, &end, 10);
        else if (strcmp(kv, "prob") == 0)
            r->prob = strtod(v, &end);
        else if (strcmp(kv, "comm") == 0)
            snprintf(r->comm, sizeof(r->comm), "%s", v), end = (char *)v + strlen(v);
        else
            return -1;
        if (!end || *end || end == v)
            return -1;
    }
    bool needs_coll = r->action != COLL_FAULT_DELAY;
    if (r->rank < 0 || (needs_coll && r->coll == 0) || r->step < 0 || r->ms < 0 ||
        r->prob < 0 || r->prob > 1)
        return -1;
    return 0;
}

static void parse(void)
{
    const char *text = gx_param_text(&gx_param_fault);
    if (!*text)
        return;
    char *copy = strdup(text), *save = NULL;
    if (!copy) {
        parse_failed = true;
        return;
    }
    for (char *rule = strtok_r(copy, ";", &save); rule; rule = strtok_r(NULL, ";", &save)) {
        char shown[128];
        snprintf(shown, sizeof(shown), "%s", rule);
        if (nrules == MAX_RULES || parse_rule(rule, &rules[nrules]) != 0) {
            snprintf(parse_error, sizeof(parse_error), "GX_FAULT: cannot use the rule '%s' "
                     "(expected ACTION:rank=R,coll=S[,step=K][,comm=N][,ms=M][,prob=P] with "
                     "ACTION one of kill stop drop delay close regfail corrupt; at most %d rules)", shown,
                     MAX_RULES);
            parse_failed = true;
            nrules = 0;
            break;
        }
        nrules++;
    }
    free(copy);
    if (nrules)
        GX_WARN(GX_SUB_COLL, "GX_FAULT is set: %d fault rule(s) will be injected (%s)", nrules,
                text);
}

int coll_fault_setup(void)
{
    pthread_once(&parse_once, parse);
    return parse_failed ? gx_fail(GX_EINVAL, GX_SUB_COLL, "%s", parse_error) : GX_OK;
}

bool coll_fault_any(void)
{
    return nrules > 0;
}

static enum coll_fault_action fault_fire(const struct gx_comm *c, uint64_t seq, int msg_step,
                                         bool is_send, bool flag_step, int *delay_ms)
{
    enum coll_fault_action act = COLL_FAULT_NONE;
    pthread_mutex_lock(&fire_mu);
    for (int i = 0; i < nrules && act == COLL_FAULT_NONE; i++) {
        struct fault_rule *r = &rules[i];
        if (r->rank != c->rank || (r->comm[0] && strcmp(r->comm, c->name) != 0))
            continue;
        if (flag_step && r->action != COLL_FAULT_KILL && r->action != COLL_FAULT_STOP)
            continue; /* an arena flag moves no message: only a rank's death or stop fits */
        if (r->action == COLL_FAULT_DELAY) {
            if (is_send && (r->coll == 0 || r->coll == seq) &&
                (r->prob >= 1.0 || (double)rand() / RAND_MAX < r->prob)) {
                *delay_ms = r->ms;
                act = COLL_FAULT_DELAY;
            }
            continue;
        }
        if (r->fired || r->coll != seq)
            continue;
        if (r->action == COLL_FAULT_DROP ? !is_send || msg_step < r->step
            : r->action == COLL_FAULT_CORRUPT ? is_send || msg_step < r->step
                                              : msg_step != r->step)
            continue;
        r->fired = true;
        act = r->action;
    }
    pthread_mutex_unlock(&fire_mu);
    if (act != COLL_FAULT_NONE && act != COLL_FAULT_DELAY)
        GX_WARN(GX_SUB_COLL, "GX_FAULT: %s at collective #%llu, %s step %d, on rank %d of "
                "communicator '%s'", action_names[act], (unsigned long long)seq,
                flag_step ? "arena flag" : "message", msg_step, c->rank, c->name);
    if (act == COLL_FAULT_KILL)
        raise(SIGKILL);
    if (act == COLL_FAULT_STOP)
        raise(SIGSTOP); /* returns once someone sends SIGCONT */
    if (act == COLL_FAULT_DELAY) {
        struct timespec ts = { *delay_ms / 1000, (long)(*delay_ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    return act;
}

enum coll_fault_action coll_fault_at_step(const struct gx_comm *c, uint64_t seq, int msg_step,
                                          bool is_send, int *delay_ms)
{
    return fault_fire(c, seq, msg_step, is_send, false, delay_ms);
}

enum coll_fault_action coll_fault_at_flag_set(const struct gx_comm *c, uint64_t seq, int step)
{
    int unused = 0;
    return fault_fire(c, seq, step, false, true, &unused);
}
