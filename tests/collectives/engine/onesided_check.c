/* onesided_check - one rank's mistake is named at once (issue 21 item 4).
 *   onesided_check CASE    with GX_TIMEOUT=600 under gx-run
 * CASE null-sendbuf: rank 1 calls gx_allreduce with sendbuf NULL;
 *      bad-root:     rank 1 calls gx_broadcast with root 7;
 *      barrier:      rank 1 calls gx_barrier where the others all-reduce;
 *      finalize:     rank 1 skips the all-reduce and calls gx_comm_finalize.
 * The others call the valid collective. Every rank does one good
 * all-reduce first, then prints
 *   RESULT rank R status NAME ms T: message
 * (T: the time the failing call took). Exits 0 when it printed a result. */
#include <stdbool.h>
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

static const char *status_name(int rc)
{
    static char name[64];
    snprintf(name, sizeof(name), "%s", gx_strerror(rc));
    name[strcspn(name, " ")] = '\0';
    return name;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "null-sendbuf";
    struct gx_comm *comm;
    if (gx_comm_init_env(&comm) != GX_OK) {
        fprintf(stderr, "init: %s\n", gx_last_error());
        return 1;
    }
    int rank = gx_comm_rank(comm);
    float buf[64];
    for (int i = 0; i < 64; i++)
        buf[i] = (float)i;
    int rc = gx_allreduce(comm, buf, buf, 64, GX_FLOAT32, GX_SUM);
    if (rc != GX_OK) {
        fprintf(stderr, "first all-reduce: %s\n", gx_last_error());
        return 1;
    }
    bool bad = rank == 1;
    double t0 = now_ms();
    if (strcmp(what, "null-sendbuf") == 0)
        rc = gx_allreduce(comm, bad ? NULL : buf, buf, 64, GX_FLOAT32, GX_SUM);
    else if (strcmp(what, "bad-root") == 0)
        rc = gx_broadcast(comm, buf, buf, 64, GX_FLOAT32, bad ? 7 : 0);
    else if (strcmp(what, "barrier") == 0)
        rc = bad ? gx_barrier(comm) : gx_allreduce(comm, buf, buf, 64, GX_FLOAT32, GX_SUM);
    else if (strcmp(what, "finalize") == 0)
        rc = bad ? gx_comm_finalize(comm) : gx_allreduce(comm, buf, buf, 64, GX_FLOAT32, GX_SUM);
    else
        return 2;
    printf("RESULT rank %d status %s ms %.0f: %s\n", rank, status_name(rc), now_ms() - t0,
           rc == GX_OK ? "ok" : gx_last_error());
    fflush(stdout);
    gx_comm_destroy(comm);
    return 0;
}
