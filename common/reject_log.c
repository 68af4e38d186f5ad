/* reject_log.c - see reject_log.h. */
#include "common/reject_log.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/param.h"
#include "gx/gx.h"

GX_PARAM_DEFINE(gx_param_log_reject_interval, "GX_LOG_REJECT_INTERVAL", GX_PARAM_INT, "10", NULL,
                "Seconds between summary lines of refused connections from one address (the "
                "first refusal is logged in full, later ones are counted by reason).");

#define REJECT_SOURCES 64

static const char *const reason_names[GX_REJECT_COUNT] = {
    "wrong job key", "not a gx handshake", "closed before the handshake (probes)",
    "no handshake in time", "claimed a rank or purpose it cannot have",
};

struct reject_source {
    char addr[64];       /* "127.0.0.1" (no port), "" = unused */
    enum gx_subsys sub;
    char what[24];
    uint64_t window_ns;  /* start of the current interval */
    uint64_t last_ns;    /* last refusal: the least recent slot is reused */
    unsigned counts[GX_REJECT_COUNT]; /* refusals not logged in full yet */
};

static pthread_mutex_t reject_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reject_source sources[REJECT_SOURCES];

static uint64_t interval_ns(void)
{
    long long s = 10;
    if (gx_param_int(&gx_param_log_reject_interval, &s) != GX_OK || s < 0)
        s = 10;
    return (uint64_t)s * 1000000000ull;
}

static void host_of(const struct gx_sockaddr *from, char *out, size_t len)
{
    if (!from) {
        snprintf(out, len, "a local socket");
        return;
    }
    struct gx_sockaddr a = *from;
    gx_sock_set_port(&a, 0);
    char buf[64];
    gx_sock_addr_str(&a, buf, sizeof(buf));
    /* Drop the ":0" the port leaves behind. */
    char *colon = strrchr(buf, ':');
    if (colon && strcmp(colon, ":0") == 0)
        *colon = '\0';
    snprintf(out, len, "%s", buf);
}

/* Lock held. Log the source's summary and start a new interval. */
static void summarise(struct reject_source *s, uint64_t now)
{
    unsigned total = 0;
    char list[400] = "";
    size_t n = 0;
    for (int r = 0; r < GX_REJECT_COUNT; r++) {
        if (!s->counts[r])
            continue;
        total += s->counts[r];
        int w = snprintf(list + n, sizeof(list) - n, "%s%u %s", n ? ", " : "", s->counts[r],
                         reason_names[r]);
        n += w > 0 && (size_t)w < sizeof(list) - n ? (size_t)w : 0;
    }
    if (total)
        GX_WARN(s->sub, "%s: rejected %u more connection(s) from %s in the last %.1f s: %s",
                s->what, total, s->addr, (double)(now - s->window_ns) / 1e9, list);
    memset(s->counts, 0, sizeof(s->counts));
    s->window_ns = now;
}

static void flush_locked(bool force, uint64_t now)
{
    uint64_t every = interval_ns();
    for (int i = 0; i < REJECT_SOURCES; i++) {
        struct reject_source *s = &sources[i];
        if (s->addr[0] && (force || now - s->window_ns >= every))
            summarise(s, now);
    }
}

void gx_reject_flush(bool force)
{
    pthread_mutex_lock(&reject_lock);
    flush_locked(force, gx_now_ns());
    pthread_mutex_unlock(&reject_lock);
}

void gx_reject_note(enum gx_subsys sub, const char *what, const struct gx_sockaddr *from,
                    enum gx_reject_reason why, const char *fmt, ...)
{
    char addr[64];
    host_of(from, addr, sizeof(addr));
    uint64_t now = gx_now_ns();
    pthread_mutex_lock(&reject_lock);
    flush_locked(false, now);
    struct reject_source *s = NULL, *oldest = &sources[0];
    for (int i = 0; i < REJECT_SOURCES && !s; i++) {
        if (sources[i].addr[0] && strcmp(sources[i].addr, addr) == 0 &&
            strcmp(sources[i].what, what) == 0)
            s = &sources[i];
        else if (sources[i].last_ns < oldest->last_ns)
            oldest = &sources[i];
    }
    bool full = s == NULL;
    if (!s) {
        s = oldest;
        if (s->addr[0])
            summarise(s, now); /* evicted: say what it had */
        memset(s, 0, sizeof(*s));
        snprintf(s->addr, sizeof(s->addr), "%s", addr);
        snprintf(s->what, sizeof(s->what), "%s", what);
        s->sub = sub;
        s->window_ns = now;
    }
    s->last_ns = now;
    if (!full)
        s->counts[why]++;
    pthread_mutex_unlock(&reject_lock);
    if (full && gx_log_enabled(GX_LOG_WARN, sub)) {
        char msg[600];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        gx_log_write(GX_LOG_WARN, sub, "%s (further refusals from %s are summed up every "
                     "%llu s)", msg, addr, (unsigned long long)(interval_ns() / 1000000000ull));
    }
}
