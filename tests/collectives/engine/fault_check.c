/*
 * fault_check - a stream of checked all-reduces for the GX_FAULT tests
 * (fault_test.sh). Each rank writes its pid to $FAULT_DIR/pid.<rank>, runs
 * $FAULT_ITERS all-reduces of $FAULT_COUNT floats and checks every value.
 * Prints "OK rank R" when all passed, "FAILED rank R #k: STATUS: message"
 * when a call failed (exit 3), "WRONG rank R ..." on a wrong value (exit 4:
 * the one outcome no fault may ever cause).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "gx/gx.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
            gx_comm_destroy(comm);
            free(v);
            return 3;
        }
        float ranks_sum = (float)(size * (size + 1) / 2);
        for (size_t j = 0; j < count; j++) {
            float want = ranks_sum * (float)((j + (size_t)it) % 7);
            if (v[j] != want) {
                printf("WRONG rank %d #%d: element %zu is %g, expected %g\n", rank, it, j,
                       (double)v[j], (double)want);
                return 4;
            }
        }
    }
    printf("OK rank %d: %d all-reduces correct\n", rank, iters);
    gx_comm_destroy(comm);
    free(v);
    return 0;
}
