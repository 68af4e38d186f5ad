/*
 * yield_check.c - GX_YIELD_WHEN_IDLE: whether a waiting rank gives up its
 * CPU while it polls (2 ranks; ctest p2p.yield.*).
 *
 * Rank 1 sleeps WAIT_MS outside gx, then sends 8 bytes; rank 0 waits for
 * them in gx_recv with GX_SPIN_US=-1 (the wait never sleeps on events, so
 * only the poll loop decides). Rank 0 counts its thread's voluntary context
 * switches over the wait (/proc/thread-self/status): a busy poll
 * (GX_YIELD_WHEN_IDLE=0) makes none but the odd one, a yielding poll naps
 * every 20-200 us, hundreds in WAIT_MS. Arguments: "busy" (fewer than
 * BUSY_MAX) or "yields" (at least YIELD_MIN). Fails when the wait did the
 * other, or when the message is wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gx/gx.h"

static int me = -1;
#include "../../lib/rank_check.h"

#define WAIT_MS 300
#define BUSY_MAX 20  /* a busy wait: page faults, a signal; not one per nap */
#define YIELD_MIN 200 /* 300 ms of 200 us naps is 1500 (timer slack makes fewer) */

static long voluntary_switches(void)
{
    FILE *f = fopen("/proc/thread-self/status", "r");
    CHECK(f, "open /proc/thread-self/status");
    char line[256];
    long v = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
            break;
    fclose(f);
    CHECK(v >= 0, "no voluntary_ctxt_switches in /proc/thread-self/status");
    return v;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(argc == 2 && (strcmp(argv[1], "busy") == 0 || strcmp(argv[1], "yields") == 0),
          "usage: yield_check busy|yields");
    const int want_busy = strcmp(argv[1], "busy") == 0;
    const char *spin = getenv("GX_SPIN_US");
    CHECK(spin && strcmp(spin, "-1") == 0, "run with GX_SPIN_US=-1 (never sleep on events)");
    struct gx_comm *comm;
    CHECK(gx_comm_init_env(&comm) == GX_OK, "init");
    me = gx_comm_rank(comm);
    CHECK(gx_comm_size(comm) == 2, "run with 2 ranks");
    double v = 0;
    /* A first message connects the pair, so the timed wait is only a wait. */
    if (me == 1)
        CHECK(gx_send(comm, &v, 1, GX_FLOAT64, 0, 1) == GX_OK, "connecting send");
    else
        CHECK(gx_recv(comm, &v, 1, GX_FLOAT64, 1, 1, NULL) == GX_OK, "connecting recv");
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    if (me == 1) {
        struct timespec ts = { WAIT_MS / 1000, (WAIT_MS % 1000) * 1000000L };
        nanosleep(&ts, NULL);
        v = 42.5;
        CHECK(gx_send(comm, &v, 1, GX_FLOAT64, 0, 2) == GX_OK, "send");
    } else {
        long before = voluntary_switches();
        CHECK(gx_recv(comm, &v, 1, GX_FLOAT64, 1, 2, NULL) == GX_OK, "recv");
        long switches = voluntary_switches() - before;
        CHECK(v == 42.5, "received %g, sent 42.5", v);
        printf("rank 0: %ld voluntary context switches in a %d ms wait (GX_YIELD_WHEN_IDLE=%s)\n",
               switches, WAIT_MS, getenv("GX_YIELD_WHEN_IDLE") ? getenv("GX_YIELD_WHEN_IDLE")
                                                                : "unset");
        if (want_busy)
            CHECK(switches < BUSY_MAX, "a busy poll gave up its CPU %ld times (at most %d "
                  "expected)", switches, BUSY_MAX - 1);
        else
            CHECK(switches >= YIELD_MIN, "a yielding poll gave up its CPU only %ld times (at "
                  "least %d expected)", switches, YIELD_MIN);
    }
    CHECK(gx_comm_finalize(comm) == GX_OK, "finalize");
    gx_comm_destroy(comm);
    printf("PASS rank %d\n", me);
    return 0;
}
