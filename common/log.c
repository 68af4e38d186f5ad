/*
 * log.c - logging to stderr or GX_DEBUG_FILE, and per-thread last error.
 * Owns the GX_DEBUG* parameters. Reads its configuration once. The log file is
 * opened through gx_safe_open (no symbolic links, no other user's file).
 */
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/param.h"
#include "common/safe_file.h"

GX_PARAM_DEFINE(gx_param_debug, "GX_DEBUG", GX_PARAM_ENUM, "warn", "none|warn|info|trace",
                "Log level: none, warn (errors and warnings), info, trace.");
GX_PARAM_DEFINE(gx_param_debug_subsys, "GX_DEBUG_SUBSYS", GX_PARAM_STRING, "all", NULL,
                "Comma list of subsystems to log (init,boot,fabric,coll,topo,gpu,ddp,param,tool); "
                "'all', or '^name' to exclude.");
GX_PARAM_DEFINE(gx_param_debug_file, "GX_DEBUG_FILE", GX_PARAM_STRING, "", NULL,
                "Write log lines to this file instead of stderr; %h expands to the host name, "
                "%p to the process id. Created with mode 0600; a symbolic link, another user's "
                "file or one that group/others may write is refused (logging stays on stderr).");

static const char *const subsys_names[GX_SUB_COUNT] = {
    "init", "boot", "fabric", "coll", "topo", "gpu", "ddp", "param", "tool",
};

static const char *const level_names[] = { "NONE", "WARN", "INFO", "TRACE" };

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_level = GX_LOG_WARN;
static unsigned log_subsys_mask = ~0u;
static FILE *log_stream;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int log_rank = -1;
static char log_host[64];

static _Thread_local char last_error[1024];

const char *gx_subsys_name(enum gx_subsys sub)
{
    return (unsigned)sub < GX_SUB_COUNT ? subsys_names[sub] : "?";
}

static unsigned parse_subsys_list(const char *text)
{
    if (!text[0] || strcmp(text, "all") == 0)
        return ~0u;
    bool exclude = text[0] == '^';
    if (exclude)
        text++;
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", text);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        bool known = false;
        for (int i = 0; i < GX_SUB_COUNT; i++) {
            if (strcmp(tok, subsys_names[i]) == 0) {
                mask |= 1u << i;
                known = true;
            }
        }
        if (!known)
            fprintf(stderr, "gx: GX_DEBUG_SUBSYS: unknown subsystem '%s' ignored\n", tok);
    }
    return exclude ? ~mask : mask;
}

static FILE *open_log_file(const char *pattern)
{
    char path[512];
    size_t n = 0;
    for (const char *p = pattern; *p && n + 1 < sizeof(path); p++) {
        if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
            int w = p[1] == 'h' ? snprintf(path + n, sizeof(path) - n, "%s", log_host)
                                : snprintf(path + n, sizeof(path) - n, "%d", (int)getpid());
            n += (w > 0 && (size_t)w < sizeof(path) - n) ? (size_t)w : 0;
            p++;
        } else {
            path[n++] = *p;
        }
    }
    path[n] = '\0';
    /* Created 0600; a planted link or someone else's file is refused. */
    char err[768];
    int fd = gx_safe_open(path, O_WRONLY | O_CREAT | O_APPEND, err, sizeof(err));
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (!f) {
        if (fd >= 0) {
            snprintf(err, sizeof(err), "cannot open '%s': %s", path, strerror(errno));
            close(fd);
        }
        fprintf(stderr, "gx: GX_DEBUG_FILE: %s; logging to stderr\n", err);
        return stderr;
    }
    setvbuf(f, NULL, _IOLBF, 0);
    return f;
}

static void log_init(void)
{
    if (gethostname(log_host, sizeof(log_host)) != 0)
        snprintf(log_host, sizeof(log_host), "unknown");
    log_host[sizeof(log_host) - 1] = '\0';
    /* Parsed by hand: gx_param_enum() reports errors through this logger. */
    static const char *const levels[] = { "none", "warn", "info", "trace" };
    const char *text = gx_param_text(&gx_param_debug);
    int level = -1;
    for (int i = 0; i < 4; i++)
        if (strcasecmp(text, levels[i]) == 0)
            level = i;
    if (level < 0) {
        fprintf(stderr, "gx: GX_DEBUG='%s' is not one of none|warn|info|trace; using warn\n",
                text);
        level = GX_LOG_WARN;
    }
    log_level = level;
    log_subsys_mask = parse_subsys_list(gx_param_text(&gx_param_debug_subsys));
    const char *file = gx_param_text(&gx_param_debug_file);
    log_stream = file[0] ? open_log_file(file) : stderr;
}

bool gx_log_enabled(enum gx_log_level level, enum gx_subsys sub)
{
    pthread_once(&log_once, log_init);
    return (int)level <= log_level && level != GX_LOG_NONE && ((log_subsys_mask >> sub) & 1u);
}

void gx_log_set_rank(int rank)
{
    atomic_store(&log_rank, rank);
}

void gx_log_vwrite(enum gx_log_level level, enum gx_subsys sub, const char *fmt, va_list ap)
{
    pthread_once(&log_once, log_init);
    char msg[1200];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char rank[16] = "-";
    int r = atomic_load(&log_rank);
    if (r >= 0)
        snprintf(rank, sizeof(rank), "%d", r);
    pthread_mutex_lock(&log_lock);
    fprintf(log_stream, "%02d:%02d:%02d.%06ld %s:%d:%ld [%s] gx %s %s: %s\n", tm.tm_hour,
            tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000, log_host, (int)getpid(),
            (long)syscall(SYS_gettid), rank, level_names[level], gx_subsys_name(sub), msg);
    fflush(log_stream);
    pthread_mutex_unlock(&log_lock);
}

void gx_log_write(enum gx_log_level level, enum gx_subsys sub, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gx_log_vwrite(level, sub, fmt, ap);
    va_end(ap);
}

int gx_vfail(int status, enum gx_subsys sub, const char *fmt, va_list ap)
{
    /* Format aside first: callers may pass gx_last_error() as an argument. */
    char msg[sizeof(last_error)];
    va_list copy;
    va_copy(copy, ap);
    vsnprintf(msg, sizeof(msg), fmt, copy);
    va_end(copy);
    memcpy(last_error, msg, sizeof(msg));
    if (gx_log_enabled(GX_LOG_WARN, sub))
        gx_log_write(GX_LOG_WARN, sub, "%s", last_error);
    return status;
}

int gx_fail(int status, enum gx_subsys sub, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gx_vfail(status, sub, fmt, ap);
    va_end(ap);
    return status;
}

void gx_set_last_error(const char *msg)
{
    if (msg != last_error)
        snprintf(last_error, sizeof(last_error), "%s", msg);
}

void gx_clear_last_error(void)
{
    last_error[0] = '\0';
}

const char *gx_last_error_text(void)
{
    return last_error;
}
