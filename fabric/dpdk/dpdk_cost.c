/*
 * dpdk_cost.c - GX_DPDK_COST: the CPU time the data path takes, for
 * comparing settings on a shared machine (perf/memif_cost.sh). The thread's
 * CPU clock, not wall time, is read around the polls that received frames
 * and the endpoint turns that sent some, so time the thread spent
 * descheduled or polling an empty port does not count. Off by default: two
 * clock reads (system calls) per busy poll.
 */
#include <stdbool.h>
#include <time.h>

#include "common/param.h"
#include "fabric/dpdk/dpdk.h"

GX_PARAM_DEFINE(gx_param_dpdk_cost, "GX_DPDK_COST", GX_PARAM_INT, "0", NULL,
                "1: the dpdk provider measures its data path's CPU time (two clock reads per "
                "busy poll) and logs it at close with GX_DEBUG=info (perf/memif_cost.sh).");

static struct {
    bool on;
    uint64_t ns, calls;
} C;

void dpdk_cost_init(void)
{
    long long v = 0;
    C.on = gx_param_int(&gx_param_dpdk_cost, &v) == GX_OK && v;
}

uint64_t dpdk_port_cpu_ns(void)
{
    struct timespec ts;
    if (!C.on || clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + 1;
}

void dpdk_port_work(uint64_t t0)
{
    if (!t0)
        return;
    __atomic_add_fetch(&C.ns, dpdk_port_cpu_ns() - t0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&C.calls, 1, __ATOMIC_RELAXED);
}

void dpdk_cost_read(uint64_t *ns, uint64_t *calls)
{
    *ns = __atomic_load_n(&C.ns, __ATOMIC_RELAXED);
    *calls = __atomic_load_n(&C.calls, __ATOMIC_RELAXED);
}
