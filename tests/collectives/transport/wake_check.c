/*
 * wake_check.c - a rank asleep in a wait that yields is woken when another
 * thread of its process takes its completion (2 ranks; ctest p2p.wake.*).
 *
 * Both ranks register a remote-call handler, which starts gx's poller
 * thread: it progresses the transport all the time. The main threads then
 * ping-pong ROUNDS 8-byte messages with GX_SPIN_US=0 (sleep at once). The
 * poller may take the message the main thread sleeps for (on tcp it reads
 * the socket the sleeper polls, and poll() goes back to sleep when it
 * finds the socket drained), so without the transport's in-process wake-up
 * the sleeper slept out its whole slice (20 ms): over tcp 0-4 rounds of
 * 100 in 5 runs under load, against none with it. Fails when more than 5 %
 * of the rounds took a slice or more: a sleeping rank must wake when its
 * work arrives, not at the slice. That bound catches a systematic miss
 * (every wait sleeping its slice); a rare race shows in the printed counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "gx/gx.h"

static int me = -1;
#include "../../lib/rank_check.h"

#define ROUNDS 200
#define SLICE_NS (20ull * 1000 * 1000) /* gx_wait's sleep slice (request.c) */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int nothing(struct gx_rpc_ctx *ctx, const void *args, size_t len, void *user)
{
    (void)ctx, (void)args, (void)len, (void)user;
    return GX_OK;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct gx_comm *comm;
    CHECK(gx_comm_init_env(&comm) == GX_OK, "init");
    me = gx_comm_rank(comm);
    CHECK(gx_comm_size(comm) == 2, "run with 2 ranks");
    const char *spin = getenv("GX_SPIN_US");
    CHECK(spin && strcmp(spin, "0") == 0, "run with GX_SPIN_US=0 (sleep at once)");
    CHECK(gx_rpc_register(comm, 1, nothing, NULL) == GX_OK, "gx_rpc_register");
    CHECK(gx_barrier(comm) == GX_OK, "barrier");
    int peer = 1 - me, slow = 0;
    double v = 0;
    uint64_t worst = 0;
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t t0 = now_ns();
        if (me == 0) {
            v = i;
            CHECK(gx_send(comm, &v, 1, GX_FLOAT64, peer, 7) == GX_OK, "send %d", i);
            CHECK(gx_recv(comm, &v, 1, GX_FLOAT64, peer, 7, NULL) == GX_OK, "recv %d", i);
            CHECK(v == i + 0.5, "round %d came back as %g", i, v);
        } else {
            CHECK(gx_recv(comm, &v, 1, GX_FLOAT64, peer, 7, NULL) == GX_OK, "recv %d", i);
            v += 0.5;
            CHECK(gx_send(comm, &v, 1, GX_FLOAT64, peer, 7) == GX_OK, "send %d", i);
        }
        uint64_t dt = now_ns() - t0;
        slow += dt >= SLICE_NS;
        worst = dt > worst ? dt : worst;
    }
    printf("rank %d: %d of %d rounds took a sleep slice (20 ms) or more; worst %.1f ms\n", me,
           slow, ROUNDS, (double)worst / 1e6);
    CHECK(slow <= ROUNDS / 20, "%d of %d rounds slept out a whole slice: a completion taken by "
          "another thread did not wake the sleeper", slow, ROUNDS);
    CHECK(gx_comm_finalize(comm) == GX_OK, "finalize");
    gx_comm_destroy(comm);
    printf("PASS rank %d\n", me);
    return 0;
}
