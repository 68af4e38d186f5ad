/* cpus.h - how many CPUs the processes of this host may run on: the online
 * CPUs, fewer where this process's control group caps them (a container's
 * CPU quota, `docker --cpus`, Kubernetes' CPU limit; a cpuset, `docker
 * --cpuset-cpus`, Slurm's cgroup of the job step). cgroup v1 and v2. A
 * rank's own affinity mask is not counted: a launcher that binds each rank
 * to a core of its own would make every rank look alone on one CPU.
 * Owns no state. */
#ifndef GX_COMMON_CPUS_H
#define GX_COMMON_CPUS_H

#include <stddef.h>

/** CPUs the ranks of this host can use (>= 1); `why` (may be NULL) gets what
 *  set it: "2 online", "cgroup CPU quota 150000/100000 us", "cgroup cpuset
 *  0-3". Reads /proc/self/cgroup and /sys/fs/cgroup. */
long gx_host_cpus(char *why, size_t why_len);

/** The same with another root for the cgroup file systems and another file
 *  for this process's groups (tests build a fake tree); `online` stands in
 *  for the online count. */
long gx_host_cpus_at(const char *cgroup_root, const char *self_cgroup, long online, char *why,
                     size_t why_len);

/** CPUs a quota of `quota` us per `period` us allows, rounded up; 0 when it
 *  sets no limit (quota < 0: v1's -1, v2's "max"), -1 when malformed. */
long gx_cpus_from_quota(long long quota, long long period);

/** How many CPUs a cpuset list such as "0-3,8,10-11" names; -1 when malformed
 *  or empty. */
long gx_cpulist_count(const char *list);

#endif
