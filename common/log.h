/*
 * log.h - leveled, per-subsystem logging and error recording.
 *
 * GX_DEBUG=warn|info|trace picks the level (default warn), GX_DEBUG_SUBSYS a
 * comma list of subsystems (default all; "^boot" excludes), GX_DEBUG_FILE a
 * file name where %h expands to the host and %p to the pid.
 *
 * Errors are logged once, where they are decided: gx_fail() records the
 * message as the thread's last error (gx_last_error()) and logs it at warn
 * level, then returns the status so callers write `return gx_fail(...)`.
 */
#ifndef GX_COMMON_LOG_H
#define GX_COMMON_LOG_H

#include <stdarg.h>
#include <stdbool.h>

enum gx_log_level {
    GX_LOG_NONE = 0,
    GX_LOG_WARN = 1,
    GX_LOG_INFO = 2,
    GX_LOG_TRACE = 3,
};

enum gx_subsys {
    GX_SUB_INIT = 0,
    GX_SUB_BOOT,
    GX_SUB_FABRIC,
    GX_SUB_COLL,
    GX_SUB_TOPO,
    GX_SUB_GPU,
    GX_SUB_DDP,
    GX_SUB_PARAM,
    GX_SUB_TOOL,
    GX_SUB_COUNT
};

/** Name of a subsystem as used in GX_DEBUG_SUBSYS ("boot"). */
const char *gx_subsys_name(enum gx_subsys sub);

/** True when a message at `level` for `sub` would be printed. */
bool gx_log_enabled(enum gx_log_level level, enum gx_subsys sub);

/** Print a message unconditionally (callers check gx_log_enabled first). */
void gx_log_write(enum gx_log_level level, enum gx_subsys sub, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void gx_log_vwrite(enum gx_log_level level, enum gx_subsys sub, const char *fmt, va_list ap);

/** The rank shown in log lines once known (-1 before). */
void gx_log_set_rank(int rank);

#define GX_LOG(level, sub, ...)                                                \
    do {                                                                       \
        if (gx_log_enabled((level), (sub)))                                    \
            gx_log_write((level), (sub), __VA_ARGS__);                         \
    } while (0)
#define GX_WARN(sub, ...) GX_LOG(GX_LOG_WARN, sub, __VA_ARGS__)
#define GX_INFO(sub, ...) GX_LOG(GX_LOG_INFO, sub, __VA_ARGS__)
#define GX_TRACE(sub, ...) GX_LOG(GX_LOG_TRACE, sub, __VA_ARGS__)

/**
 * Record an error: format the message, store it as this thread's last error,
 * log it at warn level, and return `status`.
 */
int gx_fail(int status, enum gx_subsys sub, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int gx_vfail(int status, enum gx_subsys sub, const char *fmt, va_list ap);

/** Store a message as the last error without logging it (already logged). */
void gx_set_last_error(const char *msg);

/** Clear this thread's last error (at the start of each public call). */
void gx_clear_last_error(void);

/** This thread's last error message ("" when none). */
const char *gx_last_error_text(void);

#endif
