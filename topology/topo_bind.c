/*
 * topo_bind.c - binding the calling thread to a placement's CPUs (GX_BIND).
 * Uses sched_setaffinity on the CPU list, so it works the same for a probed
 * topology, a GX_TOPO_FILE and the no-hwloc fallback.
 */
#include "topology/topo.h"

#include "common/log.h"
#include "common/param.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

GX_PARAM_DEFINE(gx_param_bind, "GX_BIND", GX_PARAM_ENUM, "auto", "auto|numa|none",
                "bind each rank's threads to CPUs near its GPU/NIC: auto gives each of the local "
                "ranks placed on one NUMA node its own share of that node's CPUs (one CPU each "
                "when there are as many ranks as CPUs); numa binds to the whole NUMA node; "
                "both leave a process the launcher already restricted (numactl, srun "
                "--cpu-bind) alone; none never binds");

/* "0-7,16-23" -> set; -1 when malformed. */
static int parse_cpulist(const char *list, cpu_set_t *set)
{
    CPU_ZERO(set);
    const char *p = list;
    while (*p != '\0') {
        char *end;
        long lo = strtol(p, &end, 10), hi;
        if (end == p || lo < 0)
            return -1;
        hi = lo;
        if (*end == '-') {
            p = end + 1;
            hi = strtol(p, &end, 10);
            if (end == p || hi < lo)
                return -1;
        }
        for (long c = lo; c <= hi && c < CPU_SETSIZE; c++)
            CPU_SET((int)c, set);
        if (*end == ',')
            end++;
        else if (*end != '\0')
            return -1;
        p = end;
    }
    return 0;
}

int gx_topo_bind(const struct gx_topo_placement *placement)
{
    int mode = 0, rc;
    if ((rc = gx_param_enum(&gx_param_bind, &mode)) != GX_OK)
        return rc;
    if (placement == NULL)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "gx_topo_bind: placement is NULL");
    if (mode == 2 || placement->cpuset[0] == '\0')
        return GX_OK;

    cpu_set_t want, have;
    if (parse_cpulist(placement->cpuset, &want) != 0)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "malformed CPU list '%s' in placement", placement->cpuset);
    if (sched_getaffinity(0, sizeof(have), &have) != 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_TOPO, "sched_getaffinity failed: %m");
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online > 0 && CPU_COUNT(&have) < online) {
        GX_INFO(GX_SUB_TOPO, "not binding local rank %d: the process is already restricted to %d of %ld CPUs "
                "(set by the launcher); GX_BIND=none silences this", placement->local_rank, CPU_COUNT(&have), online);
        return GX_OK;
    }
    if (sched_setaffinity(0, sizeof(want), &want) != 0) {
        GX_WARN(GX_SUB_TOPO, "cannot bind local rank %d to CPUs %s: %s (does the topology describe this "
                "machine? check GX_TOPO_FILE); continuing unbound", placement->local_rank,
                placement->cpuset, strerror(errno));
        return GX_OK;
    }
    GX_INFO(GX_SUB_TOPO, "local rank %d bound to CPUs %s (NUMA node %d)", placement->local_rank,
            placement->cpuset, placement->numa_node);
    return GX_OK;
}

int gx_topo_share_cpus(struct gx_topo_placement *placement, int k, int m)
{
    int mode = 0, rc;
    if ((rc = gx_param_enum(&gx_param_bind, &mode)) != GX_OK)
        return rc;
    if (mode != 0 || m <= 1 || k < 0 || k >= m || placement->cpuset[0] == '\0')
        return GX_OK;
    cpu_set_t set;
    if (parse_cpulist(placement->cpuset, &set) != 0)
        return gx_fail(GX_EINVAL, GX_SUB_TOPO, "malformed CPU list '%s' in placement",
                       placement->cpuset);
    if (CPU_COUNT(&set) < m)
        return GX_OK;
    char out[GX_TOPO_CPUSET_MAX];
    size_t len = 0;
    out[0] = '\0';
    for (int cpu = 0, pos = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        if (pos++ % m != k)
            continue;
        int w = snprintf(out + len, sizeof(out) - len, "%s%d", len ? "," : "", cpu);
        if (w < 0 || (size_t)w >= sizeof(out) - len)
            return GX_OK; /* too long to write down: keep the whole set */
        len += (size_t)w;
    }
    snprintf(placement->cpuset, sizeof(placement->cpuset), "%s", out);
    return GX_OK;
}
