/*
 * fault_check - a stream of checked all-reduces for the GX_FAULT tests
 * (fault_test.sh). Each rank writes its pid to $FAULT_DIR/pid.<rank>, runs
 * $FAULT_ITERS all-reduces of $FAULT_COUNT floats and checks every value.
 * Prints "OK rank R" when all passed, "FAILED rank R #k: STATUS: message"
 * when a call failed (exit 3), "WRONG rank R ..." on a wrong value (exit 4:
 * the one outcome no fault may ever cause).
 *
 * With FAULT_SHRINK=N, a rank whose call failed shrinks the communicator
 * (gx_comm_shrink) and runs N more checked all-reduces on the survivors:
 * "SHRUNK rank R: n ranks, lost L" then "OK rank R: N after shrink", or
 * FAILED/WRONG as above. FAULT_REVOKE=1: rank 0 revokes the communicator
 * from a second thread while its main thread waits in an all-reduce that
 * rank 1 joins 2 s late; both then shrink (nobody is gone).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gx/gx.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* N checked all-reduces on `comm`; rank r contributes (old_rank[r] + 1) x pattern. */
static int checked_stream(struct gx_comm *comm, int old_rank, int iters, size_t count,
                          const char *phase)
{
    int size = gx_comm_size(comm);
    int *olds = calloc((size_t)size, sizeof(int));
    float *v = malloc(count * sizeof(*v));
    if (!olds || !v)
        return 2;
    int rc = gx_allgather(comm, &old_rank, olds, 1, GX_INT32);
    float ranks_sum = 0;
    for (int r = 0; r < size; r++)
        ranks_sum += (float)(olds[r] + 1);
    for (int it = 1; rc == GX_OK && it <= iters; it++) {
        for (size_t j = 0; j < count; j++)
            v[j] = (float)(old_rank + 1) * (float)((j + (size_t)it) % 7);
        double t0 = now_s();
        rc = gx_allreduce(comm, v, v, count, GX_FLOAT32, GX_SUM);
        if (rc != GX_OK) {
            printf("FAILED rank %d #%d %s after %.2f s: %s: %s\n", old_rank, it, phase,
                   now_s() - t0, gx_strerror(rc), gx_last_error());
            break;
        }
        for (size_t j = 0; j < count; j++) {
            float want = ranks_sum * (float)((j + (size_t)it) % 7);
            if (v[j] != want) {
                printf("WRONG rank %d #%d %s: element %zu is %g, expected %g\n", old_rank, it,
                       phase, j, (double)v[j], (double)want);
                fflush(stdout); /* a sanitizer's exit would not flush it */
                free(olds);
                free(v);
                return 4;
            }
        }
    }
    free(olds);
    free(v);
    if (rc == GX_OK)
        printf("OK rank %d: %d all-reduces correct %s\n", old_rank, iters, phase);
    return rc == GX_OK ? 0 : 3;
}

/* Shrink after a failure and go on with the survivors. */
static int shrink_and_continue(struct gx_comm *comm, int old_rank, int iters, size_t count)
{
    struct gx_comm *small = NULL;
    double t0 = now_s();
    int rc = gx_comm_shrink(comm, 0, &small);
    if (rc != GX_OK) {
        printf("FAILED rank %d shrink after %.2f s: %s: %s\n", old_rank, now_s() - t0,
               gx_strerror(rc), gx_last_error());
        gx_comm_destroy(comm);
        return 3;
    }
    /* Which old ranks are gone: every survivor names the same ones. */
    int size = gx_comm_size(comm), n = gx_comm_size(small);
    int *olds = calloc((size_t)n, sizeof(int));
    char lost[128] = "";
    rc = olds ? gx_allgather(small, &old_rank, olds, 1, GX_INT32) : GX_ENOMEM;
    for (int r = 0, i = 0; rc == GX_OK && r < size; r++) {
        if (i < n && olds[i] == r) {
            i++;
            continue;
        }
        snprintf(lost + strlen(lost), sizeof(lost) - strlen(lost), "%s%d", lost[0] ? "," : "", r);
    }
    printf("SHRUNK rank %d: now rank %d of %d, lost %s, in %.2f s\n", old_rank,
           gx_comm_rank(small), n, lost, now_s() - t0);
    fflush(stdout);
    free(olds);
    gx_comm_destroy(comm);
    rc = checked_stream(small, old_rank, iters, count, "after shrink");
    if (rc == 0 && gx_comm_finalize(small) != GX_OK) {
        printf("FAILED rank %d finalize after shrink: %s\n", old_rank, gx_last_error());
        rc = 3;
    }
    gx_comm_destroy(small);
    return rc;
}

static void *revoke_later(void *arg)
{
    struct timespec ts = { 0, 500 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    gx_comm_revoke(arg);
    return NULL;
}

/* FAULT_REVOKE: see the header. */
static int revoke_check(struct gx_comm *comm, int rank, int iters, size_t count)
{
    float v[64] = { 0 };
    pthread_t t;
    if (rank == 0)
        pthread_create(&t, NULL, revoke_later, comm);
    if (rank == 1)
        sleep(2);
    double t0 = now_s();
    int rc = gx_allreduce(comm, v, v, 64, GX_FLOAT32, GX_SUM);
    printf("REVOKED rank %d after %.2f s: %s: %s\n", rank, now_s() - t0, gx_strerror(rc),
           gx_last_error());
    fflush(stdout);
    if (rank == 0)
        pthread_join(t, NULL);
    if (rc != GX_EABORTED)
        return 3;
    return shrink_and_continue(comm, rank, iters, count);
}

int main(void)
{
    const char *dir = getenv("FAULT_DIR");
    int iters = getenv("FAULT_ITERS") ? atoi(getenv("FAULT_ITERS")) : 20;
    size_t count = getenv("FAULT_COUNT") ? (size_t)atol(getenv("FAULT_COUNT")) : 1024;
    struct gx_comm *comm = NULL;
    int rc = gx_comm_init_env(&comm);
    if (rc != GX_OK) {
        printf("FAILED init: %s: %s\n", gx_strerror(rc), gx_last_error());
        return 3;
    }
    int rank = gx_comm_rank(comm), size = gx_comm_size(comm);
    if (dir) {
        char path[512];
        snprintf(path, sizeof(path), "%s/pid.%d", dir, rank);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
    }
    int shrink_iters = getenv("FAULT_SHRINK") ? atoi(getenv("FAULT_SHRINK")) : 0;
    if (getenv("FAULT_REVOKE"))
        return revoke_check(comm, rank, shrink_iters, count);
    float *v = malloc(count * sizeof(*v));
    if (!v)
        return 2;
    for (int it = 1; it <= iters; it++) {
        for (size_t j = 0; j < count; j++)
            v[j] = (float)(rank + 1) * (float)((j + (size_t)it) % 7);
        double t0 = now_s();
        rc = gx_allreduce(comm, v, v, count, GX_FLOAT32, GX_SUM);
        if (rc != GX_OK) {
            printf("FAILED rank %d #%d after %.2f s: %s: %s\n", rank, it, now_s() - t0,
                   gx_strerror(rc), gx_last_error());
            fflush(stdout);
            free(v);
            if (shrink_iters > 0)
                return shrink_and_continue(comm, rank, shrink_iters, count);
            gx_comm_destroy(comm);
            return 3;
        }
        float ranks_sum = (float)(size * (size + 1) / 2);
        for (size_t j = 0; j < count; j++) {
            float want = ranks_sum * (float)((j + (size_t)it) % 7);
            if (v[j] != want) {
                printf("WRONG rank %d #%d: element %zu is %g, expected %g\n", rank, it, j,
                       (double)v[j], (double)want);
                fflush(stdout); /* a sanitizer's exit would not flush it */
                free(v);
                gx_comm_destroy(comm);
                return 4;
            }
        }
    }
    /* Finalize, not just destroy: a peer may still be completing its last send to us. */
    rc = gx_comm_finalize(comm);
    if (rc != GX_OK) {
        printf("FAILED rank %d finalize: %s: %s\n", rank, gx_strerror(rc), gx_last_error());
        gx_comm_destroy(comm);
        free(v);
        return 3;
    }
    printf("OK rank %d: %d all-reduces correct\n", rank, iters);
    gx_comm_destroy(comm);
    free(v);
    return 0;
}
