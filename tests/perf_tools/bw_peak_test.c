/*
 * bw_peak_test.c - gx-bw's "BW peak" means perftest's (test tools.gx-bw.peak):
 * the best run of messages from the post of the first to the completion of
 * the last, never a rate that no run of messages achieved.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bw_report.h"

static int fails;

static void expect(const char *what, double got, double want)
{
    if (fabs(got - want) > want * 1e-9) {
        printf("FAIL: %s: %.6g, expected %.6g\n", what, got, want);
        fails++;
    }
}

int main(void)
{
    enum { N = 1000 };
    static uint64_t tp[N], tc[N];
    /* Steady pipeline: one message posted every 100 ns, each completes 1 us
     * later. Best run: all of it, N messages in (N-1)*100 + 1000 ns. */
    for (int i = 0; i < N; i++) {
        tp[i] = (uint64_t)i * 100;
        tc[i] = tp[i] + 1000;
    }
    double steady = 1e9 * 4096 / ((double)((N - 1) * 100 + 1000) / N);
    expect("steady pipeline", bw_peak_perftest(tp, tc, N, 4096, 1), steady);
    /* The receiver-side bunching that read 114x before: completions that
     * arrive together say nothing about the rate unless the posts were too. */
    for (int i = 500; i < 600; i++)
        tc[i] = tc[599];
    double bunched = bw_peak_perftest(tp, tc, N, 4096, 1);
    if (bunched > steady * 1.2) {
        printf("FAIL: bunched completions give a peak of %.3g, %.1fx the steady rate\n", bunched,
               bunched / steady);
        fails++;
    }
    /* A burst that completes at copy speed (a socket buffer absorbing it):
     * with runs of at least 256 messages it cannot dominate. */
    for (int i = 0; i < N; i++) {
        tp[i] = (uint64_t)i * 1000;
        tc[i] = tp[i] + 2000;
    }
    for (int i = 0; i < 64; i++) {
        tp[i] = (uint64_t)i;
        tc[i] = (uint64_t)i + 10;
    }
    double free_run = bw_peak_perftest(tp, tc, N, 4096, 1);
    double bounded = bw_peak_perftest(tp, tc, N, 4096, 256);
    if (!(free_run > bounded * 5) || bounded > 4096e9 / 700.0) {
        printf("FAIL: burst: peak %.3g with any run, %.3g with runs >= 256\n", free_run, bounded);
        fails++;
    }
    expect("one message", bw_peak_perftest(tp, tc, 1, 4096, 256), 4096e9 / 10);
    expect("no messages", bw_peak_perftest(tp, tc, 0, 4096, 1), 0);
    if (fails)
        return 1;
    printf("BW peak is perftest's best run of messages\n");
    return 0;
}
