/* cpus.c - see cpus.h. The files read are the kernel's (procfs, cgroupfs),
 * each opened without following a link in its last component. */
#include "common/cpus.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PATH_LEN 1024

long gx_cpus_from_quota(long long quota, long long period)
{
    if (period <= 0)
        return -1;
    if (quota < 0)
        return 0;
    if (quota == 0)
        return -1;
    return (long)((quota + period - 1) / period);
}

long gx_cpulist_count(const char *list)
{
    long count = 0;
    const char *p = list;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '\0' || *p == '\n')
        return -1;
    for (;;) {
        char *end;
        errno = 0;
        long lo = strtol(p, &end, 10);
        if (end == p || errno || lo < 0)
            return -1;
        long hi = lo;
        p = end;
        if (*p == '-') {
            const char *q = p + 1;
            hi = strtol(q, &end, 10);
            if (end == q || errno || hi < lo)
                return -1;
            p = end;
        }
        count += hi - lo + 1;
        if (*p == ',') {
            p++;
            continue;
        }
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        return *p == '\0' ? count : -1;
    }
}

/* The first line of a small kernel file, newline cut; -1 when unreadable. */
static int read_line(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

struct limit {
    long cpus; /* the smallest so far */
    char *why;
    size_t why_len;
};

static void offer(struct limit *l, long cpus, const char *what, const char *value)
{
    if (cpus <= 0 || cpus >= l->cpus)
        return;
    l->cpus = cpus;
    if (l->why && l->why_len)
        snprintf(l->why, l->why_len, "%s %s", what, value);
}

/* One directory of a control group: its quota and its cpuset, v1 or v2. */
static void look_at(struct limit *l, const char *dir, int v2)
{
    char path[PATH_LEN], line[256];
    long long quota, period;
    if (v2) {
        if (snprintf(path, sizeof(path), "%s/cpu.max", dir) < (int)sizeof(path) &&
            read_line(path, line, sizeof(line)) == 0) {
            char q[32];
            if (sscanf(line, "%31s %lld", q, &period) == 2 && strcmp(q, "max") != 0) {
                quota = strtoll(q, NULL, 10);
                char v[64];
                snprintf(v, sizeof(v), "%lld/%lld us", quota, period);
                offer(l, gx_cpus_from_quota(quota, period), "cgroup CPU quota", v);
            }
        }
        if (snprintf(path, sizeof(path), "%s/cpuset.cpus.effective", dir) < (int)sizeof(path) &&
            read_line(path, line, sizeof(line)) == 0)
            offer(l, gx_cpulist_count(line), "cgroup cpuset", line);
        return;
    }
    char qpath[PATH_LEN], qline[64], pline[64];
    if (snprintf(qpath, sizeof(qpath), "%s/cpu.cfs_quota_us", dir) < (int)sizeof(qpath) &&
        snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir) < (int)sizeof(path) &&
        read_line(qpath, qline, sizeof(qline)) == 0 && read_line(path, pline, sizeof(pline)) == 0 &&
        sscanf(qline, "%lld", &quota) == 1 && sscanf(pline, "%lld", &period) == 1) {
        char v[64];
        snprintf(v, sizeof(v), "%lld/%lld us", quota, period);
        offer(l, gx_cpus_from_quota(quota, period), "cgroup CPU quota", v);
    }
    const char *names[] = { "cpuset.effective_cpus", "cpuset.cpus" };
    for (int i = 0; i < 2; i++) {
        if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) < (int)sizeof(path) &&
            read_line(path, line, sizeof(line)) == 0) {
            offer(l, gx_cpulist_count(line), "cgroup cpuset", line);
            break;
        }
    }
}

/* The group and each of its ancestors: a parent's limit holds for it too.
 * Where the group's own path is not there (a container sees its group
 * mounted at the root), the walk ends at the root, the container's. */
static void walk_up(struct limit *l, const char *base, const char *group, int v2)
{
    char rel[PATH_LEN], dir[PATH_LEN];
    snprintf(rel, sizeof(rel), "%s", group);
    for (;;) {
        size_t n = strlen(rel);
        while (n > 0 && rel[n - 1] == '/')
            rel[--n] = '\0';
        if (snprintf(dir, sizeof(dir), "%s%s", base, rel) < (int)sizeof(dir) &&
            access(dir, F_OK) == 0)
            look_at(l, dir, v2);
        char *slash = strrchr(rel, '/');
        if (!slash)
            break;
        *slash = '\0';
    }
}

static int has_token(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

long gx_host_cpus_at(const char *cgroup_root, const char *self_cgroup, long online, char *why,
                     size_t why_len)
{
    struct limit l = { online > 0 ? online : 1, why, why_len };
    if (why && why_len)
        snprintf(why, why_len, "%ld online", l.cpus);
    FILE *f = fopen(self_cgroup, "re");
    if (!f)
        return l.cpus;
    char line[PATH_LEN], base[PATH_LEN], probe[PATH_LEN];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        const char *controllers = c1 + 1, *group = c2 + 1;
        if (strcmp(line, "0") == 0 && controllers[0] == '\0') {
            /* v2: mounted at the root, or beside v1 at unified/ */
            snprintf(probe, sizeof(probe), "%s/cgroup.controllers", cgroup_root);
            if (access(probe, F_OK) == 0)
                snprintf(base, sizeof(base), "%s", cgroup_root);
            else
                snprintf(base, sizeof(base), "%s/unified", cgroup_root);
            walk_up(&l, base, group, 1);
            continue;
        }
        const char *wanted[] = { "cpu", "cpuset" };
        for (int i = 0; i < 2; i++) {
            if (!has_token(controllers, wanted[i]))
                continue;
            /* mounted as the controller list ("cpu,cpuacct") or its name */
            snprintf(base, sizeof(base), "%s/%s", cgroup_root, controllers);
            if (access(base, F_OK) != 0)
                snprintf(base, sizeof(base), "%s/%s", cgroup_root, wanted[i]);
            walk_up(&l, base, group, 0);
        }
    }
    fclose(f);
    return l.cpus;
}

long gx_host_cpus(char *why, size_t why_len)
{
    return gx_host_cpus_at("/sys/fs/cgroup", "/proc/self/cgroup", sysconf(_SC_NPROCESSORS_ONLN),
                           why, why_len);
}
