/*
 * flight_check - the flight recorder under gx-run (GX_FLIGHT_DIR set by
 * flight_test.sh, which then merges the dumps with gx-info --flight):
 *
 *   flight_check mismatch    five all-reduces, then rank 2 calls a broadcast
 *                            where the others call an all-reduce: every rank
 *                            must fail (GX_EMISMATCH) and dump
 *   flight_check signal      rank 0 waits in all-reduce #4 for ranks that
 *                            sleep; a SIGUSR1 then must write its dump while
 *                            it waits, with #4 in flight; then all finish
 *   flight_check late        two all-reduces, then the last rank writes its
 *                            pid to $LATE_PID_FILE and sleeps $LATE_SLEEP s
 *                            before all-reduce #3 (the stall report's case)
 *
 * Prints "PASS rank R: ..." on success; exits non-zero with the reason.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gx/gx.h"

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL line %d: ", __LINE__);                       \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, " [last error: %s]\n", gx_last_error());           \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static void allreduces(struct gx_comm *comm, int n)
{
    float v[64];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < 64; j++)
            v[j] = (float)j;
        int rc = gx_allreduce(comm, v, v, 64, GX_FLOAT32, GX_SUM);
        CHECK(rc == GX_OK, "all-reduce %d: %s", i, gx_strerror(rc));
    }
}

static int check_mismatch(struct gx_comm *comm, int rank)
{
    allreduces(comm, 5);
    float v[16] = { 0 };
    int rc = rank == 2 ? gx_broadcast(comm, v, v, 16, GX_FLOAT32, 0)
                       : gx_allreduce(comm, v, v, 16, GX_FLOAT32, GX_SUM);
    CHECK(rc != GX_OK, "the mismatched call #6 succeeded");
    printf("PASS rank %d: call #6 failed as it must: %s\n", rank, gx_strerror(rc));
    return 0;
}

static void *raise_later(void *arg)
{
    (void)arg;
    usleep(500 * 1000);
    kill(getpid(), SIGUSR1);
    return NULL;
}

static int check_signal(struct gx_comm *comm, int rank)
{
    allreduces(comm, 3);
    pthread_t t;
    if (rank == 0)
        CHECK(pthread_create(&t, NULL, raise_later, NULL) == 0, "pthread_create");
    else
        sleep(3); /* rank 0 waits in #4 meanwhile */
    allreduces(comm, 1);
    if (rank == 0)
        pthread_join(t, NULL);
    printf("PASS rank %d: all-reduce #4 completed after the SIGUSR1\n", rank);
    return 0;
}

static int check_late(struct gx_comm *comm, int rank, int size)
{
    allreduces(comm, 2);
    if (rank == size - 1) {
        const char *pidfile = getenv("LATE_PID_FILE"), *secs = getenv("LATE_SLEEP");
        CHECK(pidfile && secs, "LATE_PID_FILE and LATE_SLEEP must be set");
        FILE *f = fopen(pidfile, "w");
        CHECK(f != NULL, "cannot write %s", pidfile);
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        sleep((unsigned)atoi(secs));
    }
    allreduces(comm, 1);
    printf("PASS rank %d: all-reduce #3 completed after the late rank came\n", rank);
    return 0;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: flight_check mismatch|signal|late");
    struct gx_comm *comm = NULL;
    int rc = gx_comm_init_env(&comm);
    CHECK(rc == GX_OK, "gx_comm_init_env: %s", gx_strerror(rc));
    int rank = gx_comm_rank(comm);
    if (strcmp(argv[1], "mismatch") == 0)
        rc = check_mismatch(comm, rank);
    else if (strcmp(argv[1], "signal") == 0)
        rc = check_signal(comm, rank);
    else if (strcmp(argv[1], "late") == 0)
        rc = check_late(comm, rank, gx_comm_size(comm));
    else
        CHECK(0, "unknown scenario '%s'", argv[1]);
    gx_comm_destroy(comm);
    return rc;
}
