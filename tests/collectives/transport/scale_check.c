/*
 * scale_check - what a rank holds at scale, and that connections on demand
 * still give the right answers. Run under gx-run:
 *
 *   scale_check [--sizes LIST] [--bound]
 *
 * Every rank initialises, runs a checked all-reduce (sum of rank+1 over
 * every element, exact in int64) at each size of LIST (bytes, default
 * 8,4096,262144,4194304), then prints one line
 *   STATS rank R size N local L init_ms T endpoints E node_endpoints EN
 *         fds F rss_kb K boot_sockets S boot_msgs M boot_bytes B
 * and finalizes. --bound fails a rank whose endpoints exceed
 * 2*ceil(log2 N) + 2 + (its node's ranks - 1) (what the default algorithms
 * need: ring neighbours, tree parents and children, halving-doubling
 * partners, the node's ranks), and a rank with GX_CONNECT=all whose
 * endpoints are not exactly N-1.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gx/gx.h"

static int me = -1;

#include "../../lib/rank_check.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static void checked_allreduce(struct gx_comm *comm, size_t bytes)
{
    size_t n = bytes / sizeof(int64_t);
    if (n == 0)
        n = 1;
    int size = gx_comm_size(comm);
    int64_t *buf = malloc(n * sizeof(*buf));
    CHECK(buf, "out of memory");
    for (size_t i = 0; i < n; i++)
        buf[i] = (int64_t)(me + 1) * (int64_t)(i % 1000 + 1);
    CHECK(gx_allreduce(comm, buf, buf, n, GX_INT64, GX_SUM) == GX_OK, "allreduce of %zu bytes",
          bytes);
    int64_t ranks = (int64_t)size * (size + 1) / 2;
    for (size_t i = 0; i < n; i++)
        CHECK(buf[i] == ranks * (int64_t)(i % 1000 + 1), "element %zu of %zu: %lld, expected %lld",
              i, n, (long long)buf[i], (long long)(ranks * (int64_t)(i % 1000 + 1)));
    free(buf);
}

int main(int argc, char **argv)
{
    const char *sizes = "8,4096,262144,4194304";
    int bound = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
            sizes = argv[++i];
        else if (strcmp(argv[i], "--bound") == 0)
            bound = 1;
        else {
            fprintf(stderr, "usage: scale_check [--sizes B1,B2,...] [--bound]\n");
            return 2;
        }
    }
    double t0 = now_ms();
    struct gx_comm *comm;
    CHECK(gx_comm_init_env(&comm) == GX_OK, "init");
    double init_ms = now_ms() - t0;
    me = gx_comm_rank(comm);
    int size = gx_comm_size(comm);
    char *list = strdup(sizes);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
        checked_allreduce(comm, strtoull(tok, NULL, 10));
    free(list);
    struct gx_comm_stats st = GX_COMM_STATS_INIT;
    CHECK(gx_comm_stats(comm, &st) == GX_OK, "stats");
    int fds = count_fds();
    long rss = rss_kb();
    printf("STATS rank %d size %d local %d init_ms %.1f endpoints %d node_endpoints %d fds %d "
           "rss_kb %ld boot_sockets %d boot_msgs %llu boot_bytes %llu\n", me, size,
           gx_comm_local_size(comm), init_ms, st.endpoints, st.endpoints_node, fds, rss,
           st.boot_sockets, (unsigned long long)st.boot_msgs_sent,
           (unsigned long long)st.boot_bytes_sent);
    fflush(stdout);
    if (bound) {
        const char *mode = getenv("GX_CONNECT");
        if (mode && strcmp(mode, "all") == 0) {
            CHECK(st.endpoints == size - 1, "GX_CONNECT=all: %d endpoints, expected %d",
                  st.endpoints, size - 1);
        } else {
            int lg = 0;
            while ((1 << lg) < size)
                lg++;
            int limit = 2 * lg + 2 + gx_comm_local_size(comm) - 1;
            if (limit > size - 1)
                limit = size - 1;
            CHECK(st.endpoints <= limit, "%d endpoints at %d ranks (%d on this node): more than "
                  "2*log2(N) + 2 + node ranks = %d", st.endpoints, size,
                  gx_comm_local_size(comm), limit);
            CHECK(st.endpoints_node <= gx_comm_local_size(comm) - 1, "%d node endpoints",
                  st.endpoints_node);
        }
    }
    CHECK(gx_comm_finalize(comm) == GX_OK, "finalize");
    gx_comm_destroy(comm);
    printf("PASS rank %d\n", me);
    return 0;
}
