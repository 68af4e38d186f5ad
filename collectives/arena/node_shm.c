/*
 * node_shm.c - creating and sharing a node's shared-memory segment, the
 * arena (node_shm.h).
 *
 * Rank 0 makes a memfd, the ranks all-gather (pid, fd, slot size) over the
 * bootstrap, the others take the descriptor with pidfd_getfd (the same
 * ptrace permission the shm provider's process_vm_readv already needs) or,
 * failing that, by opening /proc/<pid>/fd/<fd>, map it and check its
 * header; a second all-gather agrees whether every rank got there, so
 * either all ranks use the arena or none does.
 *
 * Across nodes (node_open) the same happens per node: each node's local
 * rank 0 makes the segment and its node peers take it; the records travel
 * in one all-gather of the whole communicator, and a node uses its arena
 * only if every rank of that node mapped it (other nodes may differ: the
 * arena changes nothing on the wire). No file is opened by name: the memfd
 * is anonymous and passes by descriptor, so no name can collide between
 * jobs or nodes and no symlink or foreign owner can stand in for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "collectives/arena/node_shm.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/transport/xport.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_coll_shm, "GX_COLL_SHM", GX_PARAM_ENUM, "auto", "auto|off",
                "Collectives of a communicator whose ranks all share a node work in one "
                "shared-memory arena (auto), or pass messages like any other (off).");
GX_PARAM_DEFINE(gx_param_coll_shm_slot, "GX_COLL_SHM_SLOT", GX_PARAM_SIZE, "256K", NULL,
                "Bytes of a rank's input staged per round in the shared-memory arena (two "
                "such slots per rank). Rank 0's value is used.");

GX_PARAM_DEFINE(gx_param_hier_arena, "GX_HIER_ARENA", GX_PARAM_ENUM, "auto", "auto|off",
                "The hierarchical all-reduce (GX_ALGO=hier) reduces and gathers inside each "
                "node of 2+ ranks in a shared-memory arena per node (auto; not with "
                "GX_COLL_SHM=off or where a node's ranks do not all reach each other over "
                "shm), or with a ring of messages over the shm provider (off).");
GX_PARAM_DEFINE(gx_param_hier_arena_slot, "GX_HIER_ARENA_SLOT", GX_PARAM_SIZE, "1M", NULL,
                "Bytes of a rank's slot in a node arena of a communicator across nodes (two "
                "per rank; a reduce-scatter round carries slot / ranks-on-the-node bytes of "
                "each block). Larger than GX_COLL_SHM_SLOT: the hierarchical all-reduce "
                "pipelines by segment, and every round is a synchronisation of the node's "
                "ranks. The node's local rank 0's value is used.");

#define ARENA_MAGIC 0x4e524158u /* "XARN" */

struct arena_header {
    uint32_t magic;
    uint32_t nranks;
    uint64_t slot_bytes;
    uint64_t map_bytes;
};

struct arena_record {
    int32_t want;
    int32_t pid;
    int32_t fd;
    int32_t reserved;
    uint64_t slot_bytes;
};

static size_t ctl_offset(void)
{
    return (sizeof(struct arena_header) + 63) & ~(size_t)63;
}

static size_t data_offset(int n)
{
    size_t end = ctl_offset() + (size_t)n * sizeof(struct node_shm_ctl);
    return (end + 4095) & ~(size_t)4095;
}

static size_t arena_bytes(int n, size_t slot)
{
    return data_offset(n) + (size_t)n * NODE_SHM_NBUF * slot;
}

static bool wanted(struct gx_comm *c)
{
    int mode = 0;
    if (gx_param_enum(&gx_param_coll_shm, &mode) != GX_OK || mode != 0)
        return false;
    for (int p = 0; p < c->size; p++)
        if (p != c->rank && strcmp(gx_xport_provider_of(c->xport, p), "shm") != 0)
            return false;
    return true;
}

static size_t slot_setting_of(const struct gx_param *p, size_t slot)
{
    (void)gx_param_size(p, &slot);
    if (slot < 4096)
        slot = 4096;
    if (slot > ((size_t)1 << 30))
        slot = (size_t)1 << 30;
    return (slot + 63) & ~(size_t)63;
}

static size_t slot_setting(void)
{
    return slot_setting_of(&gx_param_coll_shm_slot, 256 << 10);
}

/* A node arena's slot (GX_HIER_ARENA_SLOT). */
static size_t node_slot_setting(void)
{
    return slot_setting_of(&gx_param_hier_arena_slot, 1 << 20);
}

static int make_segment(int n, size_t slot, void **map_out)
{
    size_t bytes = arena_bytes(n, slot);
    int fd = memfd_create("gx-coll-arena", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)bytes) == 0)
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
        GX_INFO(GX_SUB_COLL, "shared-memory arena of %zu bytes not made: %s", bytes,
                strerror(errno));
        close(fd);
        return -1;
    }
    struct arena_header *h = p;
    h->nranks = (uint32_t)n;
    h->slot_bytes = slot;
    h->map_bytes = bytes;
    __atomic_store_n(&h->magic, ARENA_MAGIC, __ATOMIC_RELEASE);
    *map_out = p;
    return fd;
}

/* Take rank 0's descriptor into this process. */
static int fetch_fd(pid_t pid, int fd)
{
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_getfd)
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0) {
        int got = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        close(pidfd);
        if (got >= 0) {
            (void)fcntl(got, F_SETFD, FD_CLOEXEC);
            return got;
        }
    }
#endif
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
    return open(path, O_RDWR | O_CLOEXEC);
}

static void *map_peer_segment(const struct arena_record *r0, int n, const char **why)
{
    int fd = fetch_fd(r0->pid, r0->fd);
    if (fd < 0) {
        *why = "could not take rank 0's segment (pidfd_getfd and /proc both refused)";
        return NULL;
    }
    size_t bytes = arena_bytes(n, r0->slot_bytes);
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size == bytes)
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        *why = "rank 0's segment has the wrong size or could not be mapped";
        return NULL;
    }
    const struct arena_header *h = p;
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != ARENA_MAGIC ||
        h->nranks != (uint32_t)n || h->slot_bytes != r0->slot_bytes) {
        munmap(p, bytes);
        *why = "rank 0's segment has an unexpected header";
        return NULL;
    }
    return p;
}

static struct node_shm *arena_new(void *map, int n, int rank, size_t slot)
{
    struct node_shm *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->base = map;
    a->map_bytes = arena_bytes(n, slot);
    a->nranks = n;
    a->rank = rank;
    a->slot_bytes = slot;
    a->ctl = (struct node_shm_ctl *)((char *)map + ctl_offset());
    a->data = (char *)map + data_offset(n);
    __atomic_store_n(&a->ctl[rank].pid, (int32_t)getpid(), __ATOMIC_RELEASE);
    return a;
}

bool node_shm_hier_planned(void)
{
    int hier = 0, shm = 0;
    return gx_param_enum(&gx_param_hier_arena, &hier) == GX_OK && hier == 0 &&
           gx_param_enum(&gx_param_coll_shm, &shm) == GX_OK && shm == 0;
}

static bool node_wanted(struct gx_comm *c)
{
    if (c->local_size < 2 || !node_shm_hier_planned() ||
        node_slot_setting() < (size_t)c->local_size * 16)
        return false;
    for (int p = 0; p < c->size; p++)
        if (p != c->rank && c->rank_node[p] == c->node_index &&
            strcmp(gx_xport_provider_of(c->xport, p), "shm") != 0)
            return false;
    return true;
}

const char *node_shm_hier_plan(void)
{
    int mode = 0;
    if (gx_param_enum(&gx_param_hier_arena, &mode) != GX_OK || mode != 0)
        return "ring of messages over the shm provider (GX_HIER_ARENA=off)";
    if (gx_param_enum(&gx_param_coll_shm, &mode) != GX_OK || mode != 0)
        return "ring of messages over the shm provider (GX_COLL_SHM=off)";
    return "the node's shared-memory arena (GX_HIER_ARENA=auto); the ring of messages over "
           "the shm provider where the arena cannot be made";
}

/* One arena per node of a communicator across nodes (see the top). */
static int node_open(struct gx_comm *c)
{
    int n = c->local_size, me = c->local_rank, leader = -1;
    struct arena_record mine = { .want = node_wanted(c), .pid = getpid(), .fd = -1 };
    void *map = NULL;
    if (me == 0 && mine.want) {
        mine.slot_bytes = node_slot_setting();
        mine.fd = make_segment(n, mine.slot_bytes, &map);
        if (mine.fd < 0)
            mine.want = 0;
    }
    struct arena_record *all = calloc((size_t)c->size, sizeof(*all));
    int32_t *oks = calloc((size_t)c->size, sizeof(*oks));
    int *ranks = malloc((size_t)n * sizeof(int));
    int rc = all && oks && ranks ? gx_comm_boot_allgather(c, &mine, all, sizeof(mine))
                                 : GX_ENOMEM;
    int32_t ok = rc == GX_OK && n > 1;
    for (int r = 0; ok && r < c->size; r++)
        if (c->rank_node[r] == c->node_index) {
            ranks[c->rank_local[r]] = r;
            if (c->rank_local[r] == 0)
                leader = r;
            ok = all[r].want != 0;
        }
    const char *why = "a rank of this node reaches another without shm, or GX_HIER_ARENA=off "
                      "or GX_COLL_SHM=off on one";
    size_t slot = ok && leader >= 0 ? all[leader].slot_bytes : 0;
    if (ok && me != 0) {
        map = leader >= 0 ? map_peer_segment(&all[leader], n, &why) : NULL;
        ok = map != NULL;
    }
    if (rc == GX_OK) {
        rc = gx_comm_boot_allgather(c, &ok, oks, sizeof(ok));
        for (int r = 0; rc == GX_OK && r < c->size; r++)
            if (c->rank_node[r] == c->node_index && !oks[r]) {
                if (ok)
                    why = "another rank of this node could not map the segment";
                ok = 0;
            }
    }
    if (me == 0 && mine.fd >= 0)
        close(mine.fd);
    free(all);
    free(oks);
    struct node_shm *a = rc == GX_OK && ok ? arena_new(map, n, me, slot) : NULL;
    if (!a) {
        if (map)
            munmap(map, arena_bytes(n, slot ? slot : mine.slot_bytes));
        free(ranks);
        if (rc == GX_OK && ok)
            return gx_fail(GX_ENOMEM, GX_SUB_COLL, "communicator '%s': out of memory", c->name);
        if (rc == GX_OK && n > 1)
            GX_INFO(GX_SUB_COLL, "communicator '%s': no node arena (hier uses the ring inside "
                    "the node): %s", c->name, why);
        return rc;
    }
    a->ranks = ranks;
    c->node_shm = a;
    GX_INFO(GX_SUB_COLL, "communicator '%s': node arena on node %d, %d ranks x %d slots of %zu "
            "bytes", c->name, c->node_index, n, NODE_SHM_NBUF, slot);
    return GX_OK;
}

int node_shm_open(struct gx_comm *c)
{
    c->shm = NULL;
    c->node_shm = NULL;
    if (c->size >= 2 && c->node_count > 1 && c->node_count < c->size)
        return node_open(c); /* some node has 2+ ranks: the same on every rank */
    if (c->size < 2 || c->node_count != 1)
        return GX_OK; /* the same on every rank: no exchange needed */
    int n = c->size;
    struct arena_record mine = { .want = wanted(c), .pid = getpid(), .fd = -1 };
    void *map = NULL;
    if (c->rank == 0 && mine.want) {
        mine.slot_bytes = slot_setting();
        mine.fd = make_segment(n, mine.slot_bytes, &map);
        if (mine.fd < 0)
            mine.want = 0;
    }
    struct arena_record *all = calloc((size_t)n, sizeof(*all));
    if (!all)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "communicator '%s': out of memory", c->name);
    int rc = gx_comm_boot_allgather(c, &mine, all, sizeof(mine));
    int32_t ok = rc == GX_OK;
    for (int r = 0; ok && r < n; r++)
        ok = all[r].want != 0;
    const char *why = "a rank reaches another without shm, or GX_COLL_SHM=off on some rank";
    if (ok && c->rank != 0) {
        map = map_peer_segment(&all[0], n, &why);
        ok = map != NULL;
    }
    size_t slot = ok ? all[0].slot_bytes : 0;
    if (rc == GX_OK) {
        int32_t *oks = calloc((size_t)n, sizeof(*oks));
        rc = oks ? gx_comm_boot_allgather(c, &ok, oks, sizeof(ok)) : GX_ENOMEM;
        for (int r = 0; rc == GX_OK && r < n; r++)
            if (!oks[r]) {
                if (ok)
                    why = "another rank could not map the segment";
                ok = 0;
            }
        free(oks);
    }
    if (c->rank == 0 && mine.fd >= 0)
        close(mine.fd); /* the others hold their own descriptor or mapping now */
    free(all);
    if (rc != GX_OK || !ok) {
        if (map)
            munmap(map, arena_bytes(n, slot ? slot : mine.slot_bytes));
        if (rc == GX_OK && mine.want)
            GX_INFO(GX_SUB_COLL, "communicator '%s': no shared-memory arena: %s", c->name, why);
        return rc;
    }
    struct node_shm *a = arena_new(map, n, c->rank, slot);
    if (!a) {
        munmap(map, arena_bytes(n, slot));
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "communicator '%s': out of memory", c->name);
    }
    c->shm = a;
    GX_INFO(GX_SUB_COLL, "communicator '%s': shared-memory arena, %d ranks x %d slots of %zu "
            "bytes", c->name, n, NODE_SHM_NBUF, slot);
    return GX_OK;
}

static void arena_free(struct node_shm *a)
{
    if (!a)
        return;
    munmap(a->base, a->map_bytes);
    free(a->ranks);
    free(a);
}

void node_shm_close(struct gx_comm *c)
{
    arena_free(c->shm);
    arena_free(c->node_shm);
    c->shm = NULL;
    c->node_shm = NULL;
}

uint64_t node_shm_take_rounds(struct node_shm *a, size_t count, size_t per_round,
                              size_t *rounds_out)
{
    size_t rounds = per_round ? (count + per_round - 1) / per_round : 0;
    *rounds_out = rounds;
    return __atomic_fetch_add(&a->next_round, rounds, __ATOMIC_RELAXED);
}

bool node_shm_peer_gone(const struct node_shm *a, int rank)
{
    pid_t pid = __atomic_load_n(&a->ctl[rank].pid, __ATOMIC_ACQUIRE);
    return gx_process_gone(pid);
}
