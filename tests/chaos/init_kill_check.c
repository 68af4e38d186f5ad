/* init_kill_check - one rank of an init-time kill trial (init_kill.sh).
 *
 * Runs gx_comm_init_env, then two barriers, and prints one line:
 *   RESULT rank R status NAME ms T: message
 * The victim (INIT_KILL_RANK) sends itself SIGKILL INIT_KILL_US microseconds
 * after it starts, from a thread, wherever init has got to. Exits 0 whenever
 * it returns a status (a survivor's verdict is init_kill.sh's to judge). */
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gx/gx.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *killer(void *arg)
{
    long us = (long)(intptr_t)arg;
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
    kill(getpid(), SIGKILL);
    return NULL;
}

/* "GX_EPEER" out of gx_strerror's "GX_EPEER (peer failure)". */
static const char *status_name(int rc)
{
    static char name[64];
    snprintf(name, sizeof(name), "%s", gx_strerror(rc));
    name[strcspn(name, " ")] = '\0';
    return name;
}

int main(void)
{
    double t0 = now_ms();
    const char *r = getenv("GX_RANK"), *victim = getenv("INIT_KILL_RANK");
    const char *us = getenv("INIT_KILL_US");
    int rank = r ? atoi(r) : -1;
    if (victim && us && rank == atoi(victim)) {
        pthread_t t;
        pthread_create(&t, NULL, killer, (void *)(intptr_t)atol(us));
    }
    struct gx_comm *comm = NULL;
    int rc = gx_comm_init_env(&comm);
    for (int i = 0; rc == GX_OK && i < 2; i++)
        rc = gx_barrier(comm);
    printf("RESULT rank %d status %s ms %.0f: %s\n", rank, status_name(rc), now_ms() - t0,
           rc == GX_OK ? "ok" : gx_last_error());
    fflush(stdout);
    if (comm)
        gx_comm_destroy(comm);
    return 0;
}
