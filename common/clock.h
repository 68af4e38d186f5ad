/* clock.h - monotonic time and deadlines. */
#ifndef GX_COMMON_CLOCK_H
#define GX_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t gx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/** A deadline `timeout_ms` from now; a negative timeout means never. */
static inline uint64_t gx_deadline_after_ms(long long timeout_ms)
{
    if (timeout_ms < 0)
        return UINT64_MAX;
    return gx_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

/** Milliseconds left until `deadline` (0 when passed), capped for poll(). */
static inline int gx_ms_left(uint64_t deadline)
{
    if (deadline == UINT64_MAX)
        return 1 << 30;
    uint64_t now = gx_now_ns();
    if (now >= deadline)
        return 0;
    uint64_t ms = (deadline - now + 999999ull) / 1000000ull;
    return ms > (1u << 30) ? (1 << 30) : (int)ms;
}

#endif
