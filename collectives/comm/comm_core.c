/*
 * comm_core.c - the communicator as a data object (comm_internal.h): its
 * allocation and node layout, the async error, operation deadlines and
 * sequence numbers, the known death of a peer, child ids, and the public
 * queries. Setting a communicator up (transport, arena, probe) and tearing
 * it down is api/comm_init.c's, above the rooms it builds.
 *
 * Room comm/: uses only the bootstrap inside collectives/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/bootstrap/boot_coll.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/comm/request.h"
#include "common/clock.h"
#include "common/cpus.h"
#include "common/crypto.h"
#include "common/log.h"
#include "common/proc.h"

/* ---- helpers for the other collectives files -------------------------- */

uint64_t gx_comm_next_seq(struct gx_comm *c)
{
    pthread_mutex_lock(&c->lock);
    uint64_t s = ++c->seq;
    pthread_mutex_unlock(&c->lock);
    return s;
}

uint64_t gx_comm_op_deadline(const struct gx_comm *c)
{
    uint64_t init = atomic_load(&((struct gx_comm *)c)->init_deadline);
    return init ? init : gx_deadline_after_ms(c->op_timeout_ms);
}

int gx_comm_set_async_error(struct gx_comm *c, int status, const char *msg)
{
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->async_status) == GX_OK) {
        snprintf(c->async_msg, sizeof(c->async_msg), "%s", msg);
        atomic_store(&c->async_status, status);
    }
    pthread_mutex_unlock(&c->lock);
    return status;
}

int gx_comm_note_failure(struct gx_comm *c, int status)
{
    /* Caller errors and mismatches are this call's problem; the others break
     * the communicator for good. */
    if (status != GX_OK && !GX_IS_CALLER_ERROR(status))
        gx_comm_set_async_error(c, status, gx_last_error());
    return status;
}

int gx_comm_check_usable(struct gx_comm *c, const char *op)
{
    if (atomic_load(&c->aborted))
        return gx_fail(GX_EABORTED, GX_SUB_COLL, "%s on communicator '%s': it was aborted", op,
                       c->name);
    if (c->finalized)
        return gx_fail(GX_ESTATE, GX_SUB_COLL, "%s on communicator '%s': it was finalized", op,
                       c->name);
    int status = atomic_load(&c->async_status);
    if (status != GX_OK)
        return gx_fail(status, GX_SUB_COLL, "%s on communicator '%s' after an earlier failure: "
                       "%s", op, c->name, c->async_msg);
    return GX_OK;
}

int gx_comm_op_timeout_ms(const struct gx_comm *c)
{
    return c->op_timeout_ms;
}

int gx_comm_boot_allgather(struct gx_comm *c, const void *mine, void *all, size_t each)
{
    struct boot_group g = gx_comm_group(c);
    int rc = boot_allgather(&g, gx_comm_next_seq(c), BOOT_OP_USER, mine, all, each,
                            gx_comm_op_deadline(c));
    return gx_comm_note_failure(c, rc);
}

int gx_comm_known_death(struct gx_comm *c, bool node_only, const char *during)
{
    char msg[512];
    gx_boot_progress(c->boot, 0);
    int st = gx_boot_failure(c->boot, msg, sizeof(msg));
    if (st != GX_OK)
        return gx_fail(st, GX_SUB_COLL, "%s", msg);
    const struct boot_rank_record *me = gx_boot_record(c->boot, c->world_ranks[c->rank]);
    for (int r = 0; r < c->size; r++) {
        const struct boot_rank_record *rec = gx_boot_record(c->boot, c->world_ranks[r]);
        if (r == c->rank || (node_only && c->rank_node[r] != c->node_index) ||
            strcmp(rec->host, me->host) != 0 || !gx_process_gone(rec->pid))
            continue;
        char who[160];
        snprintf(msg, sizeof(msg), "comm '%s': comm rank %d, %s is gone (its process exited) %s",
                 c->name, r, gx_boot_describe(c->boot, c->world_ranks[r], who, sizeof(who)),
                 during);
        gx_boot_fail(c->boot, GX_EPEER, c->world_ranks[r], msg);
        return gx_fail(GX_EPEER, GX_SUB_COLL, "%s", msg);
    }
    return GX_OK;
}

bool gx_comm_peer_exited(const struct gx_comm *c, int r)
{
    const struct boot_rank_record *me = gx_boot_record(c->boot, c->world_ranks[c->rank]);
    const struct boot_rank_record *rec = gx_boot_record(c->boot, c->world_ranks[r]);
    return r != c->rank && rec && me && rec->pid > 0 && strcmp(rec->host, me->host) == 0 &&
           gx_process_gone(rec->pid);
}

bool gx_comm_same_node(const struct gx_comm *c, int a, int b)
{
    return c->rank_node[a] == c->rank_node[b];
}

/* ---- construction ------------------------------------------------------ */

/* Node layout of a communicator from the members' node ids: every rank's
 * node and index inside it, every node's first rank and size (nodes are
 * numbered in order of their first rank). */
void gx_comm_layout(struct gx_comm *c)
{
    c->node_count = 0;
    for (int r = 0; r < c->size; r++) {
        const char *id = gx_boot_record(c->boot, c->world_ranks[r])->node_id;
        int node = -1;
        for (int n = 0; n < c->node_count && node < 0; n++) {
            const char *first = gx_boot_record(c->boot, c->world_ranks[c->node_first[n]])->node_id;
            if (strcmp(id, first) == 0)
                node = n;
        }
        if (node < 0) {
            node = c->node_count++;
            c->node_first[node] = r;
            c->node_size[node] = 0;
        }
        c->rank_node[r] = node;
        c->rank_local[r] = c->node_size[node]++;
    }
    c->node_index = c->rank_node[c->rank];
    c->local_rank = c->rank_local[c->rank];
    c->local_size = c->node_size[c->node_index];
    /* Ranks of this communicator on this machine: more than local_size when
     * "nodes" share a host (GX_NODE_ID, network namespaces). */
    const char *host = gx_boot_record(c->boot, c->world_ranks[c->rank])->host;
    c->host_size = 0;
    for (int r = 0; r < c->size; r++)
        c->host_size += strcmp(gx_boot_record(c->boot, c->world_ranks[r])->host, host) == 0;
    char why[128];
    long cpus = gx_host_cpus(why, sizeof(why)); /* a container's quota or cpuset counts */
    c->oversubscribed = c->host_size > cpus;
    c->wait_yield_after = gx_wait_yield_after(c->oversubscribed);
    if (c->local_rank == 0)
        GX_INFO(GX_SUB_INIT, "communicator '%s': %d rank(s) on this host, %ld CPU(s) (%s)%s",
                c->name, c->host_size, cpus, why,
                c->oversubscribed ? ": oversubscribed, waits yield the CPU after 4 polls" : "");
}

/* The same layout from node sizes alone (nodes in rank order), for plans
 * made without a bootstrap: the schedule simulator of the tests and gx-sim
 * build the runtime's schedules for communicators that do not exist. */
int gx_comm_layout_sizes(struct gx_comm *c, int nodes, const int *node_size)
{
    int first = 0;
    for (int m = 0; m < nodes; m++) {
        if (node_size[m] < 1 || node_size[m] > c->size - first)
            return GX_EINVAL;
        c->node_first[m] = first;
        c->node_size[m] = node_size[m];
        for (int i = 0; i < node_size[m]; i++) {
            c->rank_node[first + i] = m;
            c->rank_local[first + i] = i;
        }
        first += node_size[m];
    }
    if (first != c->size)
        return GX_EINVAL;
    c->node_count = nodes;
    c->node_index = c->rank_node[c->rank];
    c->local_rank = c->rank_local[c->rank];
    c->local_size = c->node_size[c->node_index];
    c->host_size = c->size;
    return GX_OK;
}

struct gx_comm *gx_comm_alloc(struct gx_boot *boot, int rank, int size)
{
    struct gx_comm *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    /* One block: world_ranks, then the node layout (gx_comm_layout). */
    c->world_ranks = malloc(5 * (size_t)size * sizeof(int));
    if (!c->world_ranks) {
        free(c);
        return NULL;
    }
    c->wait_yield_after = 200; /* gx_comm_layout sets it from GX_YIELD_WHEN_IDLE */
    pthread_mutex_init(&c->lock, NULL);
    atomic_init(&c->async_status, GX_OK);
    atomic_init(&c->aborted, false);
    atomic_init(&c->shrunk, false);
    c->op_timeout_src = "GX_TIMEOUT";
    c->rank_node = c->world_ranks + size;
    c->rank_local = c->rank_node + size;
    c->node_first = c->rank_local + size;
    c->node_size = c->node_first + size;
    c->boot = boot;
    c->rank = rank;
    c->size = size;
    return c;
}

void gx_comm_free(struct gx_comm *c)
{
    pthread_mutex_destroy(&c->lock);
    free(c->world_ranks);
    free(c);
}

uint64_t gx_comm_child_id(uint64_t parent, uint64_t seq, int color)
{
    uint8_t msg[20], digest[GX_SHA256_LEN];
    memcpy(msg, &parent, 8);
    memcpy(msg + 8, &seq, 8);
    memcpy(msg + 16, &color, 4);
    gx_sha256(msg, sizeof(msg), digest);
    uint64_t id;
    memcpy(&id, digest, sizeof(id));
    return id | 2; /* never WORLD_COMM_ID, never 0 */
}

/* ---- async error --------------------------------------------------------- */

GX_API int gx_comm_get_async_error(const struct gx_comm *comm, char *msg, size_t msg_len)
{
    if (!comm)
        return GX_EINVAL;
    struct gx_comm *c = (struct gx_comm *)comm;
    if (atomic_load(&c->async_status) == GX_OK && !atomic_load(&c->aborted)) {
        /* Pick up failures other ranks reported meanwhile. */
        gx_boot_progress(c->boot, 0);
        char bmsg[512];
        int bs = gx_boot_failure(c->boot, bmsg, sizeof(bmsg));
        if (bs != GX_OK)
            gx_comm_set_async_error(c, bs, bmsg);
    }
    int status = atomic_load(&c->async_status);
    if (msg && msg_len) {
        pthread_mutex_lock(&c->lock);
        snprintf(msg, msg_len, "%s", status == GX_OK ? "" : c->async_msg);
        pthread_mutex_unlock(&c->lock);
    }
    return status;
}

/* ---- queries ------------------------------------------------------------ */

GX_API int gx_comm_rank(const struct gx_comm *comm) { return comm ? comm->rank : -1; }
GX_API int gx_comm_size(const struct gx_comm *comm) { return comm ? comm->size : -1; }
GX_API int gx_comm_local_rank(const struct gx_comm *comm) { return comm ? comm->local_rank : -1; }
GX_API int gx_comm_local_size(const struct gx_comm *comm) { return comm ? comm->local_size : -1; }
GX_API int gx_comm_node_count(const struct gx_comm *comm) { return comm ? comm->node_count : -1; }
GX_API int gx_comm_node_index(const struct gx_comm *comm) { return comm ? comm->node_index : -1; }
