/*
 * trace.c - the timeline's ring and writer (see trace.h).
 *
 * File layout, one per rank (DIR/gx-trace-r<rank>.json), one event a line:
 *   {"traceEvents":[
 *   {...metadata: process and thread names...},
 *   {...event...},
 *   ],"displayTimeUnit":"ns","otherData":{...rank, clock offset, counts...}}
 * gx-info --trace (tools/gx-info/trace_merge.c) reads it line by line:
 * every event line starts with '{' and ends with '}' or '},'.
 *
 * Times are written in microseconds on rank 0's clock: CLOCK_MONOTONIC
 * (one clock for the processes of a machine) minus the offset to rank 0
 * that api/observe.c measured over the bootstrap (0 on rank 0's machine).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"
#include "common/safe_file.h"
#include "common/trace.h"
#include "gx/gx.h"

GX_PARAM_DEFINE(gx_param_trace, "GX_TRACE", GX_PARAM_STRING, "", NULL,
                "Directory for a timeline of every collective, its steps, provider posts and "
                "DDP buckets: one Chrome/Perfetto trace-event file per rank "
                "(gx-trace-r<rank>.json, mode 0600); merge with gx-info --trace DIR. Unset: "
                "no trace (docs/observability.md).");
GX_PARAM_DEFINE(gx_param_trace_events, "GX_TRACE_EVENTS", GX_PARAM_INT, "65536", NULL,
                "Events the trace ring holds between two writes (160 bytes each); when it is "
                "full, new events are dropped and counted in the file's otherData.dropped.");
GX_PARAM_DEFINE(gx_param_trace_flush_ms, "GX_TRACE_FLUSH_MS", GX_PARAM_INT, "200", NULL,
                "How often (ms) the trace writer thread empties the ring into the file; it "
                "also writes when the ring is half full, at finalize, failure and exit.");

int gx_trace_active;

#define TRACE_MAX_EVENTS (1 << 22)

static struct {
    int ring_lock;                    /* the ring and its counters (ring_lock()) */
    pthread_mutex_t wake_mu;          /* the writer's sleep */
    pthread_cond_t wake;
    struct gx_trace_rec *ring, *out;  /* out: the writer's copy */
    size_t cap;
    uint64_t head, tail;              /* recorded into / taken from the ring */
    uint64_t dropped;
    uint64_t recorded, dropped_seen;  /* the writer's copies of head and dropped */
    bool stop;                        /* under wake_mu */
    pthread_mutex_t write_mu;         /* the file */
    int fd;
    off_t data_end;                   /* where the next events go (the tail starts there) */
    uint64_t next_id;                 /* async span ids, unique across ranks */
    char *buf;
    size_t buf_cap;
    int rank, size;
    int64_t offset_ns;
    uint64_t rtt_ns;
    long flush_ms;
    char why[64];
    pthread_t writer;
    bool started;
} T = { .wake_mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
        .write_mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static const char *const lane_names[GX_LANE_COUNT] = {
    [GX_LANE_CALLS] = "calls",        [GX_LANE_STEPS] = "schedule steps",
    [GX_LANE_WIRE] = "provider",      [GX_LANE_GPU] = "gpu",
    [GX_LANE_DDP] = "ddp buckets",    [GX_LANE_BACKWARD] = "backward",
    [GX_LANE_EVENTS] = "stalls and faults",
};

bool gx_trace_wanted(void)
{
    return gx_param_is_set(&gx_param_trace);
}

uint64_t gx_trace_now(void)
{
    return gx_now_ns();
}

/* The ring's lock: held for a 160-byte copy, so a spin (then yield) costs
 * less than a mutex, whose contention between a rank's caller and its
 * progress thread put both to sleep on every event (8 B all-reduces ran
 * 3-10x slower with tracing on). */
static void ring_lock(void)
{
    for (unsigned spins = 0; __atomic_exchange_n(&T.ring_lock, 1, __ATOMIC_ACQUIRE); spins++)
        while (__atomic_load_n(&T.ring_lock, __ATOMIC_RELAXED))
            if (++spins > 100)
                sched_yield();
}

static void ring_unlock(void)
{
    __atomic_store_n(&T.ring_lock, 0, __ATOMIC_RELEASE);
}

void gx_trace_emit(const struct gx_trace_rec *rec)
{
    if (!gx_trace_on())
        return;
    ring_lock();
    uint64_t used = T.head - T.tail;
    bool wake = false;
    if (used >= T.cap) {
        T.dropped++;
    } else {
        T.ring[T.head % T.cap] = *rec;
        T.head++;
        wake = used + 1 == T.cap / 2;
    }
    ring_unlock();
    if (wake) {
        pthread_mutex_lock(&T.wake_mu);
        pthread_cond_signal(&T.wake);
        pthread_mutex_unlock(&T.wake_mu);
    }
}

void gx_trace_counts(uint64_t *recorded, uint64_t *dropped)
{
    ring_lock();
    *recorded = T.head;
    *dropped = T.dropped;
    ring_unlock();
}

void gx_trace_set_clock_offset(int64_t offset_ns, uint64_t rtt_ns)
{
    pthread_mutex_lock(&T.write_mu);
    T.offset_ns = offset_ns;
    T.rtt_ns = rtt_ns;
    pthread_mutex_unlock(&T.write_mu);
}

/* ---- formatting ---------------------------------------------------------- */

static bool reserve(size_t more)
{
    if (more <= T.buf_cap)
        return true;
    size_t cap = T.buf_cap ? T.buf_cap : 1 << 16;
    while (cap < more)
        cap *= 2;
    char *b = realloc(T.buf, cap);
    if (!b)
        return false;
    T.buf = b;
    T.buf_cap = cap;
    return true;
}

/* Append printf output to T.buf at *len (grows it; false: out of memory). */
static bool put(size_t *len, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool put(size_t *len, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = T.buf_cap - *len;
        int n = vsnprintf(T.buf + *len, room, fmt, ap);
        va_end(ap);
        if (n < 0)
            return false;
        if ((size_t)n < room) {
            *len += (size_t)n;
            return true;
        }
        if (!reserve(*len + (size_t)n + 1))
            return false;
    }
}

/* Static text is ours, but quote it properly all the same. Copied a byte
 * at a time without printf: the writer formats every event's names. */
static bool put_str(size_t *len, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (!reserve(*len + 6 * n + 3))
        return false;
    char *o = T.buf + *len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            *o++ = '\\';
            *o++ = (char)ch;
        } else if (ch < 0x20) {
            o += snprintf(o, 7, "\\u%04x", ch);
        } else {
            *o++ = (char)ch;
        }
    }
    *o++ = '"';
    *o = 0;
    *len = (size_t)(o - T.buf);
    return true;
}

/* Microseconds on rank 0's clock, with the nanoseconds kept. */
/* ---- one event, without printf: the writer formats every event, and on a
 * busy machine its CPU is taken from the ranks (vfprintf was half of it). */

/* Each event is at most this long: 6 arguments, names of static text. */
#define EVENT_MAX 2048

static char *lit(char *o, const char *s)
{
    while (*s)
        *o++ = *s++;
    return o;
}

static char *u64(char *o, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    while (n)
        *o++ = tmp[--n];
    return o;
}

static char *i64(char *o, int64_t v)
{
    if (v < 0) {
        *o++ = '-';
        return u64(o, (uint64_t)(-(v + 1)) + 1);
    }
    return u64(o, (uint64_t)v);
}

/* Microseconds with the nanoseconds kept: "123.045". */
static char *micros(char *o, int64_t ns)
{
    if (ns < 0) {
        *o++ = '-';
        ns = -ns;
    }
    o = u64(o, (uint64_t)ns / 1000);
    unsigned f = (unsigned)((uint64_t)ns % 1000);
    *o++ = '.';
    *o++ = (char)('0' + f / 100);
    *o++ = (char)('0' + f / 10 % 10);
    *o++ = (char)('0' + f % 10);
    return o;
}

static char *hex(char *o, uint64_t v)
{
    char tmp[16];
    int n = 0;
    do
        tmp[n++] = "0123456789abcdef"[v & 15];
    while (v >>= 4);
    while (n)
        *o++ = tmp[--n];
    return o;
}

/* Quoted static text; the rare byte JSON must escape is escaped. */
static char *str(char *o, const char *s, const char *end)
{
    *o++ = '"';
    for (; s && *s && o + 8 < end; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            *o++ = '\\';
            *o++ = (char)ch;
        } else if (ch < 0x20) {
            o = lit(o, "\\u00");
            *o++ = "0123456789abcdef"[ch >> 4];
            *o++ = "0123456789abcdef"[ch & 15];
        } else {
            *o++ = (char)ch;
        }
    }
    *o++ = '"';
    return o;
}

static char *head(char *o, const char *end, const struct gx_trace_rec *r, const char *ph,
                  uint64_t ns)
{
    o = lit(o, ",\n{\"name\":");
    o = str(o, r->name, end);
    o = lit(o, ",\"cat\":");
    o = str(o, r->cat ? r->cat : "gx", end);
    o = lit(lit(lit(o, ",\"ph\":\""), ph), "\",\"pid\":");
    o = i64(o, T.rank);
    o = lit(o, ",\"tid\":");
    o = u64(o, r->lane);
    o = lit(o, ",\"ts\":");
    return micros(o, (int64_t)ns - T.offset_ns);
}

static char *args(char *o, const char *end, const struct gx_trace_rec *r)
{
    const char *sep = "";
    o = lit(o, ",\"args\":{");
    for (int i = 0; i < GX_TRACE_ARGS && r->key[i]; i++, sep = ",") {
        o = str(lit(o, sep), r->key[i], end);
        *o++ = ':';
        o = i64(o, r->val[i]);
    }
    if (r->skey) {
        o = str(lit(o, sep), r->skey, end);
        *o++ = ':';
        o = str(o, r->sval ? r->sval : "", end);
    }
    *o++ = '}';
    return o;
}

static bool put_event(size_t *len, const struct gx_trace_rec *r)
{
    if (!reserve(*len + EVENT_MAX))
        return false;
    char *o = T.buf + *len, *end = o + EVENT_MAX - 64;
    if (r->kind == GX_TR_SPAN) {
        o = head(o, end, r, "X", r->ts);
        o = micros(lit(o, ",\"dur\":"), (int64_t)r->dur);
        o = args(o, end, r);
        *o++ = '}';
    } else if (r->kind == GX_TR_ASYNC) {
        uint64_t id = ((uint64_t)(unsigned)T.rank << 40) | ++T.next_id;
        o = head(o, end, r, "b", r->ts);
        o = lit(hex(lit(o, ",\"id\":\"0x"), id), "\"");
        o = args(o, end, r);
        *o++ = '}';
        o = head(o, end, r, "e", r->ts + r->dur);
        o = lit(hex(lit(o, ",\"id\":\"0x"), id), "\"}");
    } else {
        o = head(o, end, r, "i", r->ts);
        o = lit(o, ",\"s\":\"t\"");
        o = args(o, end, r);
        *o++ = '}';
    }
    *len = (size_t)(o - T.buf);
    return true;
}

/* The closing tail: valid JSON up to here. */
static bool put_tail(size_t *len)
{
    return put(len, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"gx_trace_version\":1,"
               "\"rank\":%d,\"world_size\":%d,\"clock_offset_ns\":%" PRId64 ",\"clock_rtt_ns\":%"
               PRIu64 ",\"recorded\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"last_write\":",
               T.rank, T.size, T.offset_ns, T.rtt_ns, T.recorded, T.dropped_seen) &&
           put_str(len, T.why) && put(len, "}}\n");
}

static bool write_all(const char *p, size_t n, off_t at)
{
    while (n) {
        ssize_t w = pwrite(T.fd, p, n, at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
        at += w;
    }
    return true;
}

/* Empty the ring into the file; write_mu held. */
static void flush_locked(void)
{
    if (T.fd < 0)
        return;
    /* Taken in slices, so emitters never wait for a whole ring's copy. */
    size_t n = 0;
    for (bool more = true; more;) {
        ring_lock();
        size_t k = (size_t)(T.head - T.tail);
        if (k > 4096)
            k = 4096;
        if (k > T.cap - n)
            k = T.cap - n; /* the rest waits for the next write */
        for (size_t i = 0; i < k; i++, n++)
            T.out[n] = T.ring[(T.tail + i) % T.cap];
        T.tail += k;
        more = k == 4096 && n < T.cap;
        uint64_t recorded = T.head, dropped = T.dropped;
        ring_unlock();
        T.recorded = recorded;
        T.dropped_seen = dropped;
    }
    size_t len = 0;
    bool ok = reserve(1 << 16);
    for (size_t i = 0; ok && i < n; i++)
        ok = put_event(&len, &T.out[i]);
    size_t data = len;
    ok = ok && put_tail(&len);
    if (!ok || !write_all(T.buf, len, T.data_end) ||
        ftruncate(T.fd, T.data_end + (off_t)len) != 0) {
        GX_WARN(GX_SUB_INIT, "trace: writing rank %d's trace failed (%s); tracing stops",
                T.rank, ok ? strerror(errno) : "out of memory");
        __atomic_store_n(&gx_trace_active, 0, __ATOMIC_RELAXED);
        close(T.fd);
        T.fd = -1;
        return;
    }
    T.data_end += (off_t)data;
}

void gx_trace_flush(const char *why)
{
    if (!__atomic_load_n(&T.started, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&T.write_mu);
    snprintf(T.why, sizeof(T.why), "%s", why);
    flush_locked();
    pthread_mutex_unlock(&T.write_mu);
}

static void *writer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&T.wake_mu);
    while (!T.stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)T.flush_ms * 1000000ull;
        until.tv_sec += (time_t)(ns / 1000000000ull);
        until.tv_nsec = (long)(ns % 1000000000ull);
        pthread_cond_timedwait(&T.wake, &T.wake_mu, &until);
        if (T.stop)
            break;
        pthread_mutex_unlock(&T.wake_mu);
        gx_trace_flush("background");
        pthread_mutex_lock(&T.wake_mu);
    }
    pthread_mutex_unlock(&T.wake_mu);
    return NULL;
}

static int pending_rank, pending_size;
static char pending_host[64];
static bool writer_running;

static void trace_at_exit(void)
{
    pthread_mutex_lock(&T.wake_mu);
    T.stop = true;
    pthread_cond_signal(&T.wake);
    pthread_mutex_unlock(&T.wake_mu);
    if (writer_running)
        pthread_join(T.writer, NULL);
    gx_trace_flush("exit");
}

/* The header: the array's opening and the names of the rank's tracks. */
static bool put_header(size_t *len, const char *host)
{
    if (!put(len, "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
             "\"tid\":0,\"args\":{\"name\":\"rank %d (%s:%d)\"}}", T.rank, T.rank, host,
             (int)getpid()) ||
        !put(len, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
             "\"args\":{\"sort_index\":%d}}", T.rank, T.rank))
        return false;
    for (int l = 1; l < GX_LANE_COUNT; l++)
        if (!put(len, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                 "\"args\":{\"name\":\"%s\"}}", T.rank, l, lane_names[l]))
            return false;
    return true;
}

static int open_file(const char *dir)
{
    char path[4096], err[768];
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        GX_WARN(GX_SUB_INIT, "trace: cannot create GX_TRACE directory '%s': %s; not tracing",
                dir, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/gx-trace-r%d.json", dir, T.rank);
    int fd = gx_safe_open(path, O_WRONLY | O_CREAT | O_TRUNC, err, sizeof(err));
    if (fd < 0)
        GX_WARN(GX_SUB_INIT, "trace: %s (GX_TRACE); not tracing", err);
    return fd;
}


static void start_now(void)
{
    if (!gx_param_is_set(&gx_param_trace))
        return;
    long long events = 0, flush_ms = 0;
    if (gx_param_int(&gx_param_trace_events, &events) != GX_OK || events < 64 ||
        gx_param_int(&gx_param_trace_flush_ms, &flush_ms) != GX_OK || flush_ms < 1) {
        GX_WARN(GX_SUB_INIT, "trace: GX_TRACE_EVENTS must be >= 64 and GX_TRACE_FLUSH_MS >= 1; "
                "not tracing");
        return;
    }
    T.rank = pending_rank;
    T.size = pending_size;
    T.cap = (size_t)(events > TRACE_MAX_EVENTS ? TRACE_MAX_EVENTS : events);
    T.flush_ms = (long)flush_ms;
    T.ring = calloc(T.cap, sizeof(*T.ring));
    T.out = calloc(T.cap, sizeof(*T.out));
    T.fd = T.ring && T.out ? open_file(gx_param_text(&gx_param_trace)) : -1;
    size_t len = 0;
    snprintf(T.why, sizeof(T.why), "start");
    if (T.fd < 0 || !reserve(1 << 16) || !put_header(&len, pending_host) ||
        !write_all(T.buf, len, 0)) {
        if (T.fd >= 0)
            close(T.fd);
        T.fd = -1;
        free(T.ring);
        free(T.out);
        T.ring = T.out = NULL;
        return;
    }
    T.data_end = (off_t)len;
    __atomic_store_n(&T.started, true, __ATOMIC_RELEASE);
    __atomic_store_n(&gx_trace_active, 1, __ATOMIC_RELEASE);
    writer_running = pthread_create(&T.writer, NULL, writer_main, NULL) == 0;
    if (!writer_running)
        GX_WARN(GX_SUB_INIT, "trace: no writer thread; the trace is written at finalize, "
                "failure and exit only");
    atexit(trace_at_exit);
    pthread_mutex_lock(&T.write_mu);
    flush_locked(); /* valid JSON from the start */
    pthread_mutex_unlock(&T.write_mu);
    GX_INFO(GX_SUB_INIT, "trace: rank %d writes its timeline to %s/gx-trace-r%d.json", T.rank,
            gx_param_text(&gx_param_trace), T.rank);
}

bool gx_trace_start(int world_rank, int world_size, const char *host)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu); /* the first caller's rank names the file */
    bool first = !pending_size;
    if (first) {
        pending_rank = world_rank;
        pending_size = world_size > 0 ? world_size : 1;
        snprintf(pending_host, sizeof(pending_host), "%s", host ? host : "?");
        start_now();
    }
    pthread_mutex_unlock(&mu);
    return first;
}
