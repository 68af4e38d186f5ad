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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

GX_PARAM_DEFINE(gx_param_bind, "GX_BIND", GX_PARAM_ENUM, "auto", "auto|none",
                "bind each rank's threads to the CPUs of its nearest NUMA node: auto binds "
                "unless the launcher already restricted the process (numactl, srun --cpu-bind); "
                "none never binds");

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
    if (mode == 1 || placement->cpuset[0] == '\0')
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
