/* huge_check - a wrong, huge count (2^40 floats) fails at once with a clear
 * error, and planning it does not grow the process (issue 21 item 6):
 *   in place on a 64-float buffer: GX_ENOMEM "is the count right?" from
 *     every rank at once (before half of GX_TIMEOUT: a rank that waited for
 *     a peer would take all of it), peak RSS under 600 MB;
 *   two distinct small buffers: GX_EINVAL saying the count does not fit
 *     between them (not "overlap").
 * Run under gx-run with GX_TIMEOUT=10. Exits 0 when both hold. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gx/gx.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long peak_rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb / 1024;
}

int main(void)
{
    struct gx_comm *comm;
    if (gx_comm_init_env(&comm) != GX_OK) {
        fprintf(stderr, "init: %s\n", gx_last_error());
        return 1;
    }
    int rank = gx_comm_rank(comm), bad = 0;
    static float a[64], b[64];
    size_t huge = (size_t)1 << 40;
    const char *to = getenv("GX_TIMEOUT");
    double limit_ms = (to ? atof(to) : 600.0) * 1000.0 / 2; /* half the deadline gx promises */
    double t0 = now_ms();
    int rc = gx_allreduce(comm, a, a, huge, GX_FLOAT32, GX_SUM);
    double ms = now_ms() - t0;
    long rss = peak_rss_mb();
    printf("rank %d: in place, 2^40 floats: %s after %.0f ms (limit %.0f), peak RSS %ld MB: %s\n",
           rank, gx_strerror(rc), ms, limit_ms, rss, gx_last_error());
    if (rc == GX_OK || !strstr(gx_last_error(), "is the count right?") || ms >= limit_ms || rss > 600)
        bad = 1;
    rc = gx_allreduce(comm, a, b, huge, GX_FLOAT32, GX_SUM);
    printf("rank %d: two buffers, 2^40 floats: %s: %s\n", rank, gx_strerror(rc), gx_last_error());
    if (rc != GX_EINVAL || !strstr(gx_last_error(), "does not fit between"))
        bad = 1;
    printf("%s rank %d huge counts\n", bad ? "FAIL" : "PASS", rank);
    gx_comm_destroy(comm);
    return bad;
}
