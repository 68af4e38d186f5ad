/*
 * metrics.c - GX_METRICS_FILE: every live communicator's counters
 * (gx_comm_stats) in the Prometheus text exposition format that node
 * exporter's textfile collector reads, rewritten every GX_METRICS_INTERVAL
 * seconds by a background thread, when a communicator is destroyed, and
 * read back by gx-info --stats. docs/observability.md lists the metrics.
 *
 * The file is written whole to a temporary name beside it and renamed over
 * it, so a reader never sees half a file; both go through the safe-open
 * helper. "%r" in the path stands for the world rank; without it a job of
 * several ranks gets "-r<rank>" before the extension, so ranks never share
 * a file.
 *
 * Room api/. Reads what observe.c collects; nothing else.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collectives/api/api.h"
#include "collectives/comm/comm_internal.h"
#include "common/log.h"
#include "common/param.h"
#include "common/safe_file.h"

GX_PARAM_DEFINE(gx_param_metrics_file, "GX_METRICS_FILE", GX_PARAM_STRING, "", NULL,
                "Prometheus text file (node exporter's textfile format) with every "
                "communicator's counters, rewritten every GX_METRICS_INTERVAL seconds; %r is "
                "the world rank (else -r<rank> goes before the extension when there are "
                "several ranks). Read with gx-info --stats. Unset: none.");
GX_PARAM_DEFINE(gx_param_metrics_interval, "GX_METRICS_INTERVAL", GX_PARAM_INT, "5", NULL,
                "Seconds between two writes of GX_METRICS_FILE (1 or more).");

static struct {
    pthread_mutex_t mu;     /* the thread's state */
    pthread_cond_t wake;
    pthread_mutex_t write_mu;
    pthread_t thread;
    bool running, stop;
    long interval_s;
    int rank, size;
    char path[4096];
} M = { .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
        .write_mu = PTHREAD_MUTEX_INITIALIZER };

/* ---- the text ------------------------------------------------------------- */

struct text {
    char *p;
    size_t len, cap;
    bool failed;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct text *t, const char *fmt, ...)
{
    while (!t->failed) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? 2 * t->cap : 16384;
        while (n >= 0 && cap < t->len + (size_t)n + 1)
            cap *= 2;
        char *q = n >= 0 ? realloc(t->p, cap) : NULL;
        if (!q) {
            t->failed = true;
            return;
        }
        t->p = q;
        t->cap = cap;
    }
}

/* A label value: backslash, double quote and newline escaped. */
static void escaped(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (; *in && o + 3 < len; in++) {
        if (*in == '\\' || *in == '"')
            out[o++] = '\\', out[o++] = *in;
        else if (*in == '\n')
            out[o++] = '\\', out[o++] = 'n';
        else
            out[o++] = *in;
    }
    out[o] = 0;
}

struct snap {
    char name[80];
    uint64_t id;
    int rank, size;
    struct gx_comm_stats s;
};

static const char *const class_names[GX_PEER_CLASS_COUNT] = { "self", "node", "net" };

/* One metric: its HELP and TYPE, then a sample per communicator (and per
 * peer class or provider where `by` says so). */
enum by { BY_COMM, BY_CLASS, BY_PROVIDER };

static uint64_t value_of(const struct gx_comm_stats *s, size_t off, enum by by, int i)
{
    const char *base = by == BY_CLASS      ? (const char *)&s->peer_class[i]
                       : by == BY_PROVIDER ? (const char *)&s->provider[i].traffic
                                           : (const char *)s;
    return *(const unsigned long long *)(base + off);
}

static void metric(struct text *t, const struct snap *snaps, int n, const char *name,
                   const char *type, const char *help, enum by by, size_t off, double scale)
{
    add(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (int k = 0; k < n; k++) {
        const struct snap *sn = &snaps[k];
        int parts = by == BY_CLASS ? GX_PEER_CLASS_COUNT : by == BY_PROVIDER ? sn->s.providers : 1;
        for (int i = 0; i < parts; i++) {
            add(t, "%s{rank=\"%d\",comm=\"%s\",comm_id=\"%016" PRIx64 "\"", name, sn->rank,
                sn->name, sn->id);
            if (by == BY_CLASS)
                add(t, ",peer_class=\"%s\"", class_names[i]);
            else if (by == BY_PROVIDER)
                add(t, ",provider=\"%s\"", sn->s.provider[i].name);
            uint64_t v = value_of(&sn->s, off, by, i);
            if (scale == 1.0)
                add(t, "} %" PRIu64 "\n", v);
            else
                add(t, "} %.9f\n", (double)v * scale);
        }
    }
}

#define F(field) offsetof(struct gx_comm_stats, field)
#define T(field) offsetof(struct gx_traffic, field)

static void format(struct text *t, const struct snap *s, int n)
{
    add(t, "# gx %s, rank %d: gx_comm_stats of %d communicator(s); docs/observability.md\n",
        gx_version(), M.rank, n);
    metric(t, s, n, "gx_bytes_sent_total", "counter", "Payload bytes of completed sends, by "
           "peer class (self, node, net).", BY_CLASS, T(bytes_sent), 1.0);
    metric(t, s, n, "gx_bytes_received_total", "counter", "Payload bytes of completed "
           "receives, by peer class.", BY_CLASS, T(bytes_received), 1.0);
    metric(t, s, n, "gx_messages_sent_total", "counter", "Completed sends, by peer class.",
           BY_CLASS, T(sends), 1.0);
    metric(t, s, n, "gx_messages_received_total", "counter", "Completed receives, by peer "
           "class.", BY_CLASS, T(receives), 1.0);
    metric(t, s, n, "gx_provider_bytes_sent_total", "counter", "Payload bytes of completed "
           "sends, by fabric provider.", BY_PROVIDER, T(bytes_sent), 1.0);
    metric(t, s, n, "gx_provider_bytes_received_total", "counter", "Payload bytes of "
           "completed receives, by fabric provider.", BY_PROVIDER, T(bytes_received), 1.0);
    metric(t, s, n, "gx_provider_messages_sent_total", "counter", "Completed sends, by fabric "
           "provider.", BY_PROVIDER, T(sends), 1.0);
    metric(t, s, n, "gx_provider_messages_received_total", "counter", "Completed receives, by "
           "fabric provider.", BY_PROVIDER, T(receives), 1.0);
    metric(t, s, n, "gx_collectives_total", "counter", "Collectives called, including ones "
           "refused for their arguments.", BY_COMM, F(collectives), 1.0);
    metric(t, s, n, "gx_collectives_failed_total", "counter", "Collectives that finished with "
           "an error.", BY_COMM, F(collectives_failed), 1.0);
    metric(t, s, n, "gx_p2p_total", "counter", "Point-to-point sends and receives started.",
           BY_COMM, F(p2p), 1.0);
    metric(t, s, n, "gx_connections", "gauge", "Peers with an open fabric endpoint.", BY_COMM,
           F(connections), 1.0);
    metric(t, s, n, "gx_checksum_failures_total", "counter", "Messages that failed their "
           "GX_CHECKSUM check.", BY_COMM, F(checksum_failures), 1.0);
    metric(t, s, n, "gx_retransmits_total", "counter", "Segments a provider sent again "
           "(whole process).", BY_COMM, F(retransmits), 1.0);
    metric(t, s, n, "gx_stalls_total", "counter", "Collectives reported by GX_STALL_WARN.",
           BY_COMM, F(stalls), 1.0);
    metric(t, s, n, "gx_wait_seconds_total", "counter", "Seconds callers spent blocked "
           "waiting for requests.", BY_COMM, F(wait_ns), 1e-9);
}

/* ---- the file ------------------------------------------------------------- */

static void write_file(const char *text, size_t len)
{
    char tmp[4200], err[768];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", M.path, (int)getpid());
    int fd = gx_safe_open(tmp, O_WRONLY | O_CREAT | O_TRUNC, err, sizeof(err));
    if (fd < 0) {
        GX_WARN(GX_SUB_INIT, "metrics: %s (GX_METRICS_FILE)", err);
        return;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    bool ok = off == len && close(fd) == 0;
    if (off != len)
        close(fd);
    if (!ok || rename(tmp, M.path) != 0) {
        GX_WARN(GX_SUB_INIT, "metrics: writing %s failed: %s (GX_METRICS_FILE)", M.path,
                strerror(errno));
        unlink(tmp);
    }
}

void gx_metrics_write_now(void)
{
    if (!M.path[0])
        return;
    pthread_mutex_lock(&M.write_mu);
    gx_observe_lock();
    struct gx_comm **comms;
    int n = gx_observe_live(&comms);
    struct snap *snaps = calloc(n > 0 ? (size_t)n : 1, sizeof(*snaps));
    for (int i = 0; snaps && i < n; i++) {
        struct gx_comm *c = comms[i];
        escaped(c->name, snaps[i].name, sizeof(snaps[i].name));
        snaps[i].id = c->comm_id;
        snaps[i].rank = c->world_ranks[c->rank];
        gx_observe_fill(c, &snaps[i].s);
    }
    gx_observe_unlock();
    struct text t = { 0 };
    if (snaps)
        format(&t, snaps, n);
    if (snaps && !t.failed)
        write_file(t.p, t.len);
    else
        GX_WARN(GX_SUB_INIT, "metrics: out of memory; %s not written", M.path);
    free(t.p);
    free(snaps);
    pthread_mutex_unlock(&M.write_mu);
}

static void *metrics_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&M.mu);
    while (!M.stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += M.interval_s;
        pthread_cond_timedwait(&M.wake, &M.mu, &until);
        if (M.stop)
            break;
        pthread_mutex_unlock(&M.mu);
        gx_metrics_write_now();
        pthread_mutex_lock(&M.mu);
    }
    pthread_mutex_unlock(&M.mu);
    return NULL;
}

/* The path with %r replaced, or -r<rank> added before the extension. */
static void resolve_path(const char *pattern, int rank, int size)
{
    char out[sizeof(M.path)];
    size_t o = 0;
    bool had_rank = false;
    for (const char *p = pattern; *p && o + 16 < sizeof(out); p++) {
        if (p[0] == '%' && p[1] == 'r') {
            o += (size_t)snprintf(out + o, sizeof(out) - o, "%d", rank);
            had_rank = true;
            p++;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = 0;
    if (!had_rank && size > 1) {
        const char *slash = strrchr(out, '/'), *dot = strrchr(out, '.');
        size_t at = dot && (!slash || dot > slash) ? (size_t)(dot - out) : o;
        snprintf(M.path, sizeof(M.path), "%.*s-r%d%s", (int)at, out, rank, out + at);
    } else {
        snprintf(M.path, sizeof(M.path), "%s", out);
    }
}

void gx_metrics_comm_up(int world_rank, int world_size)
{
    if (!gx_param_is_set(&gx_param_metrics_file))
        return;
    pthread_mutex_lock(&M.mu);
    if (M.running) {
        pthread_mutex_unlock(&M.mu);
        return;
    }
    long long every = 5;
    if (gx_param_int(&gx_param_metrics_interval, &every) != GX_OK || every < 1) {
        GX_WARN(GX_SUB_INIT, "metrics: GX_METRICS_INTERVAL must be a whole number of seconds "
                ">= 1; writing every 5 s");
        every = 5;
    }
    M.interval_s = (long)every;
    M.rank = world_rank;
    M.size = world_size;
    pthread_mutex_lock(&M.write_mu);
    resolve_path(gx_param_text(&gx_param_metrics_file), world_rank, world_size);
    pthread_mutex_unlock(&M.write_mu);
    M.stop = false;
    M.running = pthread_create(&M.thread, NULL, metrics_main, NULL) == 0;
    if (!M.running)
        GX_WARN(GX_SUB_INIT, "metrics: no writer thread; %s is written when a communicator "
                "is destroyed only", M.path);
    pthread_mutex_unlock(&M.mu);
    GX_INFO(GX_SUB_INIT, "metrics: writing %s every %ld s", M.path, M.interval_s);
}

void gx_metrics_stop(void)
{
    pthread_mutex_lock(&M.mu);
    bool was = M.running;
    M.stop = true;
    M.running = false;
    pthread_cond_signal(&M.wake);
    pthread_mutex_unlock(&M.mu);
    if (was)
        pthread_join(M.thread, NULL);
}
