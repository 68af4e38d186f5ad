/* cpus_test.c - common/cpus.c: quotas, cpuset lists, and the walk over fake
 * cgroup v1 and v2 trees (a container's group mounted at the root, a
 * parent's limit, a hybrid mount, no limit at all). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cpus.h"
#include "check.h"

static char root[256];

static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    /* make the directories on the way */
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            CHECK(0, "mkdir %s: %s", path, strerror(errno));
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    CHECK(f, "create %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static long host(const char *self, char *why, size_t len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/self.cgroup", root);
    FILE *f = fopen(path, "w");
    CHECK(f, "create %s", path);
    if (!f)
        return -1;
    fputs(self, f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/self.cgroup", root);
    char base[300];
    snprintf(base, sizeof(base), "%s/fs", root);
    return gx_host_cpus_at(base, path, 16, why, len);
}

static void test_parsers(void)
{
    CHECK(gx_cpus_from_quota(150000, 100000) == 2, "1.5 CPUs round up to 2");
    CHECK(gx_cpus_from_quota(100000, 100000) == 1, "one CPU");
    CHECK(gx_cpus_from_quota(-1, 100000) == 0, "v1's -1 is no limit");
    CHECK(gx_cpus_from_quota(5000, 0) == -1, "a zero period is malformed");
    CHECK(gx_cpulist_count("0-3,8,10-11\n") == 7, "0-3,8,10-11 is 7 CPUs");
    CHECK(gx_cpulist_count("5") == 1, "one CPU");
    CHECK(gx_cpulist_count("") == -1, "empty");
    CHECK(gx_cpulist_count("3-1") == -1, "a backwards range");
    CHECK(gx_cpulist_count("0-3,x") == -1, "junk after a comma");
    CHECK(gx_cpulist_count("0-3 7") == -1, "junk after the list");
}

/* This process's groups `self` give `want` CPUs, `why` naming `because`. */
static void expect(const char *self, long want, const char *because, const char *what)
{
    char why[128];
    long n = host(self, why, sizeof(why));
    CHECK(n == want && strstr(why, because), "%s: %ld CPUs (%s), expected %ld (%s)", what, n,
          why, want, because);
}

static void test_trees(void)
{
    put("fs/cpu/cpu.cfs_quota_us", "-1\n");
    put("fs/cpu/cpu.cfs_period_us", "100000\n");
    expect("1:cpu:/\n", 16, "16 online", "no limit anywhere");

    /* v1: a job's group two levels down, its parent capped at 2.5 CPUs */
    put("fs/cpu,cpuacct/jobs/cpu.cfs_quota_us", "250000\n");
    put("fs/cpu,cpuacct/jobs/cpu.cfs_period_us", "100000\n");
    put("fs/cpu,cpuacct/jobs/step/cpu.cfs_quota_us", "-1\n");
    put("fs/cpu,cpuacct/jobs/step/cpu.cfs_period_us", "100000\n");
    expect("4:cpu,cpuacct:/jobs/step\n", 3, "quota 250000/100000", "v1 parent quota");
    put("fs/cpuset/jobs/step/cpuset.cpus", "0-1\n");
    expect("4:cpu,cpuacct:/jobs/step\n3:cpuset:/jobs/step\n", 2, "cpuset 0-1", "v1 cpuset");

    /* a container: its group path is not there, the root is its own group */
    put("fs/cpu/cpu.cfs_quota_us", "400000\n");
    expect("1:cpu:/docker/0123abcd\n", 4, "quota 400000/100000", "container root quota");

    /* v2 beside v1 (hybrid: unified/) */
    put("fs/unified/app/cpu.max", "120000 100000\n");
    expect("0::/app\n", 2, "120000/100000", "hybrid v2 quota");
    put("fs/unified/app/cpu.max", "max 100000\n");
    expect("0::/app\n", 16, "online", "v2 max is no limit");
    put("fs/unified/app/cpuset.cpus.effective", "2-4\n");
    expect("0::/app\n", 3, "cpuset 2-4", "v2 cpuset");

    /* a malformed file is no limit, not a crash or zero CPUs */
    put("fs/unified/app/cpu.max", "0 100000\n");
    put("fs/unified/app/cpuset.cpus.effective", "junk\n");
    expect("0::/app\n", 16, "online", "malformed files");

    char why[128];
    long n = gx_host_cpus_at(root, "/nonexistent/cgroup", 0, why, sizeof(why));
    CHECK(n == 1, "no online count and no file: at least 1, got %ld", n);
}

int main(void)
{
    snprintf(root, sizeof(root), "/tmp/gx-cpus-test.XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    test_parsers();
    test_trees();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    long here = gx_host_cpus(NULL, 0);
    CHECK(here >= 1, "this machine: %ld CPUs", here);
    CHECK_DONE("cpus_test");
}
