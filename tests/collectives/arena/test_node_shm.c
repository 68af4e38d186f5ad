/* Unit test of the node's shared-memory segment (collectives/arena/), one
 * process: rounds handed out in issue order, the slots' layout (one per
 * rank and buffer, none overlapping), index -> comm rank, the liveness of a
 * rank that maps it (a child that exited is gone; this process is not),
 * and what the settings plan for hier's intra-node phases (GX_HIER_ARENA,
 * GX_COLL_SHM). Making and sharing the segment across processes is run by
 * the collectives' tests (arena.made, arena.off and the coll.*.shm.* ones). */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectives/arena/node_shm.h"
#include "tests/unit/check.h"

static void rounds_and_slots(void)
{
    enum { N = 3, SLOT = 4096 };
    struct node_shm_ctl *ctl = aligned_alloc(64, N * sizeof(*ctl));
    char *data = calloc(N * NODE_SHM_NBUF, SLOT);
    int ranks[N] = { 4, 7, 9 };
    CHECK(ctl && data, "memory");
    if (!ctl || !data)
        return;
    memset(ctl, 0, N * sizeof(*ctl));
    struct node_shm a = { .nranks = N, .rank = 1, .ranks = ranks, .slot_bytes = SLOT,
                          .ctl = ctl, .data = data };
    size_t rounds;
    CHECK(node_shm_take_rounds(&a, 10, 4, &rounds) == 0 && rounds == 3, "3 rounds of 4 from 10");
    CHECK(node_shm_take_rounds(&a, 8, 4, &rounds) == 3 && rounds == 2, "then rounds 3 and 4");
    CHECK(node_shm_take_rounds(&a, 0, 4, &rounds) == 5 && rounds == 0, "nothing: no round");
    CHECK(node_shm_comm_rank(&a, 2) == 9, "index -> comm rank");
    a.ranks = NULL;
    CHECK(node_shm_comm_rank(&a, 2) == 2, "no map: the index is the comm rank");
    for (int r = 0; r < N; r++)
        for (unsigned b = 0; b < NODE_SHM_NBUF; b++) {
            char *s = node_shm_slot(&a, r, b);
            CHECK(s >= data && s + SLOT <= data + N * NODE_SHM_NBUF * SLOT,
                  "slot %d/%u inside the data", r, b);
            for (int q = 0; q < N; q++)
                for (unsigned c = 0; c < NODE_SHM_NBUF; c++) {
                    char *t = node_shm_slot(&a, q, c);
                    CHECK((q == r && c == b) || t + SLOT <= s || s + SLOT <= t,
                          "slots %d/%u and %d/%u do not overlap", r, b, q, c);
                }
        }
    CHECK(((uintptr_t)&ctl[1] - (uintptr_t)&ctl[0]) % 64 == 0,
          "each rank's counters on their own cache lines");

    /* Liveness: this process lives; a child that exited is gone. */
    ctl[0].pid = (int32_t)getpid();
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    int st;
    waitpid(child, &st, 0);
    ctl[1].pid = (int32_t)child;
    CHECK(!node_shm_peer_gone(&a, 0), "this process is not gone");
    CHECK(node_shm_peer_gone(&a, 1), "a rank whose process exited is gone");
    free(ctl);
    free(data);
}

static void plan(void)
{
    unsetenv("GX_HIER_ARENA");
    unsetenv("GX_COLL_SHM");
    CHECK(node_shm_hier_planned() && strstr(node_shm_hier_plan(), "shared-memory arena"),
          "by default hier plans the node arena: %s", node_shm_hier_plan());
    setenv("GX_HIER_ARENA", "off", 1);
    CHECK(!node_shm_hier_planned() && strstr(node_shm_hier_plan(), "GX_HIER_ARENA=off"),
          "GX_HIER_ARENA=off: the ring: %s", node_shm_hier_plan());
    setenv("GX_HIER_ARENA", "auto", 1);
    setenv("GX_COLL_SHM", "off", 1);
    CHECK(!node_shm_hier_planned() && strstr(node_shm_hier_plan(), "GX_COLL_SHM=off"),
          "GX_COLL_SHM=off: the ring too: %s", node_shm_hier_plan());
    unsetenv("GX_COLL_SHM");
    unsetenv("GX_HIER_ARENA");
}

int main(void)
{
    rounds_and_slots();
    plan();
    CHECK_DONE("test_node_shm");
}
