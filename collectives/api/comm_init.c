/*
 * comm_init.c - a communicator's life: init, split and derive (the
 * placement, then the transport, the arena and the link probe, in that
 * order), finalize, destroy (the engine, the arena, the transport, in that
 * order), abort, and the provider query. The communicator object itself is
 * comm/comm_core.c's (comm_internal.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/api/api.h"
#include "collectives/api/svc.h"
#include "collectives/api/coll_intra.h"
#include "collectives/arena/node_shm.h"
#include "collectives/bootstrap/boot_coll.h"
#include "collectives/comm/comm_env.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/engine/coll.h"
#include "collectives/transport/xport.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/reject_log.h"
#include "common/param.h"
#include "common/crypto.h"
#include "topology/topo.h"

/* How long a rank whose init failed because of a peer listens for the root cause. */
#define INIT_SETTLE_MS 100

/* ---- construction ------------------------------------------------------ */

/* The machine's topology, loaded once per process and kept: probing costs
 * milliseconds, and while it lives hwloc keeps its plugins loaded (freeing
 * the last topology unloads the PCI plugin, whose libpciaccess state then
 * shows up as a leak under LeakSanitizer). */
static pthread_mutex_t topo_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gx_topo *process_topo;

static int process_topology(struct gx_topo **out)
{
    pthread_mutex_lock(&topo_lock);
    int rc = process_topo ? GX_OK : gx_topo_open(&process_topo);
    *out = process_topo;
    pthread_mutex_unlock(&topo_lock);
    return rc;
}

/* The local ranks placed on the CPU set `cpuset`: *m of them, *k before
 * `local_rank`. Placing the ranks one by one (gx_topo_place_rank each, which
 * places all of them to return one) cost every rank O(local ranks) full
 * placements: at 96 ranks on one node 24 s of a 29 s init. One placement of
 * all gives the same entries when every rank's GPU is the one
 * gx_topo_place_rank assumes for the others (local rank mod #GPUs, or none
 * for all); only when CUDA_VISIBLE_DEVICES maps them otherwise is each rank
 * placed on its own, as before. */
static void count_cpu_sharers(const struct gx_topo *topo, int local_rank, int local_size,
                              const char *cpuset, int *k, int *m)
{
    int ngpu = gx_topo_device_count(topo, GX_TOPO_GPU);
    int *gpus = calloc((size_t)local_size, sizeof(int));
    struct gx_topo_placement *all = calloc((size_t)local_size, sizeof(*all));
    bool one_call = gpus && all;
    bool none = true, default_gpus = ngpu > 0;
    for (int q = 0; one_call && q < local_size; q++) {
        if (gx_topo_gpu_for_rank(topo, q, &gpus[q]) != GX_OK)
            one_call = false;
        none = none && gpus[q] < 0;
        default_gpus = default_gpus && gpus[q] == q % ngpu;
        all[q] = (struct gx_topo_placement)GX_TOPO_PLACEMENT_INIT;
    }
    one_call = one_call && (none || default_gpus) &&
               gx_topo_place(topo, local_size, gpus, NULL, all) == GX_OK;
    for (int q = 0; q < local_size; q++) {
        struct gx_topo_placement other = GX_TOPO_PLACEMENT_INIT;
        if (one_call)
            other = all[q];
        else if (gx_topo_place_rank(topo, q, local_size, GX_TOPO_GPU_AUTO, &other) != GX_OK)
            continue;
        if (strcmp(other.cpuset, cpuset) != 0)
            continue;
        *k += q < local_rank;
        (*m)++;
    }
    free(gpus);
    free(all);
}

/* Choose this rank's NIC and CPUs from the topology and bind the calling
 * thread (threads gx starts later inherit it). A topology the user asked
 * for that cannot be used (GX_TOPO_FILE, a GPU that does not exist) fails
 * init; nothing else about placement does. */
static int place_rank(struct gx_comm *c)
{
    struct gx_topo *topo;
    int rc = process_topology(&topo);
    if (rc != GX_OK)
        return rc;
    struct gx_topo_placement pl = GX_TOPO_PLACEMENT_INIT;
    rc = gx_topo_place_rank(topo, c->local_rank, c->local_size, GX_TOPO_GPU_AUTO, &pl);
    if (rc != GX_OK)
        return rc;
    c->gpu_nic_path = pl.gpu >= 0 && pl.nic_count > 0 ? pl.nic_path : GX_TOPO_PATH_UNKNOWN;
    if (pl.nic_count > 0) {
        snprintf(c->nic_name, sizeof(c->nic_name), "%s", pl.nic_names[0]);
        c->nic_port = pl.nic_ports[0];
    }
    /* Share the CPU set with the other local ranks placed on it (as Open MPI
     * binds 2 ranks to a core each): two ranks left to migrate onto one CPU
     * turn every handoff between them into a context switch. Not when other
     * "nodes" run on this host too: their ranks would get the same shares. */
    int share_k = 0, share_m = 0;
    if (c->host_size == c->local_size)
        count_cpu_sharers(topo, c->local_rank, c->local_size, pl.cpuset, &share_k, &share_m);
    (void)gx_topo_share_cpus(&pl, share_k, share_m);
    if (gx_topo_bind(&pl) != GX_OK)
        GX_WARN(GX_SUB_INIT, "could not bind rank %d to CPUs %s; running unbound", c->rank,
                pl.cpuset);
    GX_INFO(GX_SUB_INIT, "placement: local rank %d/%d, GPU %d, NIC %s, NUMA node %d, CPUs %s",
            c->local_rank, c->local_size, pl.gpu, c->nic_name[0] ? c->nic_name : "(none)",
            pl.numa_node, pl.cpuset[0] ? pl.cpuset : "(unbound)");
    return GX_OK;
}

static void comm_free(struct gx_comm *c)
{
    gx_svc_close(c);         /* windows' and calls' threads off before the transport goes */
    gx_observe_comm_down(c); /* counters and trace: its last figures */
    coll_intra_destroy(c);   /* nccl branch: the node's NCCL communicator */
    gx_coll_comm_destroy(c); /* collectives: progress thread off before the transport goes */
    node_shm_close(c);
    gx_xport_close(c->xport);
    gx_comm_free(c);
}

/* Init failed because of a peer: a rank that failed first may have told us
 * why (its ABORT names the rank that died), or we may be looking at a rank
 * that only gave up. Listen briefly, then report the root cause. A rank of
 * this machine whose process has exited is a root cause too: the first rank
 * that sees it reports it at once (gx_comm_known_death), so a rank on
 * another machine that only saw us give up hears why within its own wait. */
static int init_root_cause(struct gx_comm *c, int rc)
{
    if (!GX_IS_PEER_ERROR(rc) && rc != GX_EAUTH && rc != GX_ECONNECT)
        return rc;
    char mine[1024], msg[512];
    snprintf(mine, sizeof(mine), "%s", gx_last_error_text());
    uint64_t settle = gx_deadline_after_ms(INIT_SETTLE_MS);
    while (gx_ms_left(settle) > 0) {
        gx_boot_progress(c->boot, 10);
        if (rc != GX_EAUTH && gx_boot_failure(c->boot, NULL, 0) == GX_OK)
            (void)gx_comm_known_death(c, false, "during init");
    }
    int st = gx_boot_failure(c->boot, msg, sizeof(msg));
    if (st == GX_OK || strstr(mine, msg))
        return rc;
    return gx_fail(st, GX_SUB_INIT, "%s (this rank saw: %s)", msg, mine);
}

GX_API int gx_comm_init(const struct gx_config *config, struct gx_comm **comm_out)
{
    gx_clear_last_error();
    if (!config)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_init: config is NULL (use "
                       "GX_CONFIG_INIT or gx_comm_init_env)");
    if (!comm_out)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_init: comm_out is NULL");
    if (config->size != sizeof(struct gx_config))
        return gx_fail(GX_EINVAL, GX_SUB_INIT,
                       "gx_comm_init: config->size is %zu, this libgx %s expects %zu: start "
                       "from GX_CONFIG_INIT and build against the installed gx.h",
                       config->size, gx_version(), sizeof(struct gx_config));
    int rc = gx_param_check_environment();
    if (rc != GX_OK)
        return rc;
    struct comm_setup setup;
    rc = comm_setup_resolve(config, &setup);
    if (rc != GX_OK)
        return rc;
    if (setup.boot.listen_fd >= 0)
        unsetenv("GX_BOOT_LISTEN_FD"); /* inherited once; a second init binds anew */
    gx_log_set_rank(setup.boot.rank);
    GX_INFO(GX_SUB_INIT, "init: rank %d of %d via %s, node '%s'", setup.boot.rank,
            setup.boot.world_size, setup.init_method, setup.node_id);
    /* One deadline for all of init: rendezvous, transport set-up, arena, probe. */
    uint64_t init_deadline = gx_deadline_after_ms(setup.boot.init_timeout_ms);
    struct gx_boot *boot;
    rc = gx_boot_create(&setup.boot, &boot);
    if (rc != GX_OK)
        return rc;
    struct gx_comm *c = gx_comm_alloc(boot, setup.boot.rank, setup.boot.world_size);
    if (!c) {
        gx_boot_release(boot);
        return gx_fail(GX_ENOMEM, GX_SUB_INIT, "gx_comm_init: out of memory");
    }
    for (int r = 0; r < c->size; r++)
        c->world_ranks[r] = r;
    c->comm_id = WORLD_COMM_ID;
    c->op_timeout_ms = setup.op_timeout_ms;
    c->op_timeout_src = setup.op_timeout_src;
    c->rts_ahead = setup.rts_ahead;
    atomic_store(&c->init_deadline, init_deadline);
    snprintf(c->name, sizeof(c->name), "%s", setup.name);
    snprintf(c->job_key, sizeof(c->job_key), "%s", setup.job_key);
    gx_comm_layout(c);
    rc = place_rank(c);
    if (rc == GX_OK)
        rc = gx_xport_open(c, &c->xport);
    if (rc == GX_OK)
        rc = node_shm_open(c);
    if (rc == GX_OK)
        rc = gx_coll_probe(c);
    if (rc != GX_OK) {
        rc = init_root_cause(c, rc);
        /* Tell the others now rather than let them wait for their deadline. */
        char msg[512];
        snprintf(msg, sizeof(msg), "rank %d failed to initialise: %s", c->rank, gx_last_error());
        gx_boot_fail(boot, rc, c->rank, msg);
        comm_free(c);
        gx_boot_release(boot);
        return rc;
    }
    atomic_store(&c->init_deadline, 0);
    GX_INFO(GX_SUB_INIT, "init done: rank %d/%d, local %d/%d, node %d of %d", c->rank, c->size,
            c->local_rank, c->local_size, c->node_index, c->node_count);
    gx_observe_comm_up(c); /* GX_TRACE, GX_METRICS_FILE */
    *comm_out = c;
    return GX_OK;
}

GX_API int gx_comm_init_env(struct gx_comm **comm_out)
{
    struct gx_config cfg = GX_CONFIG_INIT;
    return gx_comm_init(&cfg, comm_out);
}

struct split_entry {
    int32_t color;
    int32_t key;
};

GX_API int gx_comm_split(struct gx_comm *comm, int color, int key, struct gx_comm **out)
{
    gx_clear_last_error();
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_split: comm is NULL");
    if (!out)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_split: out is NULL");
    int rc = gx_comm_check_usable(comm, "gx_comm_split");
    if (rc != GX_OK)
        return rc;
    struct split_entry mine = { color < 0 ? -1 : color, key };
    struct split_entry *all = malloc((size_t)comm->size * sizeof(*all));
    if (!all)
        return gx_fail(GX_ENOMEM, GX_SUB_INIT, "gx_comm_split: out of memory");
    uint64_t seq = gx_comm_next_seq(comm);
    struct boot_group g = gx_comm_group(comm);
    rc = boot_allgather(&g, seq, BOOT_OP_SPLIT, &mine, all, sizeof(mine),
                        gx_comm_op_deadline(comm));
    if (rc != GX_OK) {
        free(all);
        return gx_comm_note_failure(comm, rc);
    }
    if (mine.color < 0) {
        free(all);
        *out = NULL;
        return GX_OK;
    }
    /* Members ordered by (key, parent rank): insertion sort keeps it stable. */
    int n = 0;
    int *members = malloc((size_t)comm->size * sizeof(int));
    if (!members) {
        free(all);
        return gx_fail(GX_ENOMEM, GX_SUB_INIT, "gx_comm_split: out of memory");
    }
    for (int r = 0; r < comm->size; r++) {
        if (all[r].color != mine.color)
            continue;
        int pos = n++;
        while (pos > 0 && all[members[pos - 1]].key > all[r].key) {
            members[pos] = members[pos - 1];
            pos--;
        }
        members[pos] = r;
    }
    int new_rank = 0;
    for (int i = 0; i < n; i++)
        if (members[i] == comm->rank)
            new_rank = i;
    free(all);
    char suffix[16];
    snprintf(suffix, sizeof(suffix), "/%d", mine.color);
    rc = gx_comm_derive(comm, members, n, new_rank, gx_comm_child_id(comm->comm_id, seq, mine.color),
                        suffix, out);
    free(members);
    return rc == GX_OK ? GX_OK : gx_comm_note_failure(comm, rc);
}

int gx_comm_derive(struct gx_comm *comm, const int *members, int n, int new_rank,
                   uint64_t comm_id, const char *suffix, struct gx_comm **out)
{
    struct gx_comm *c = gx_comm_alloc(comm->boot, new_rank, n);
    if (!c)
        return gx_fail(GX_ENOMEM, GX_SUB_INIT, "communicator of %d ranks: out of memory", n);
    for (int i = 0; i < n; i++)
        c->world_ranks[i] = comm->world_ranks[members[i]];
    gx_boot_retain(comm->boot);
    c->comm_id = comm_id;
    c->op_timeout_ms = comm->op_timeout_ms;
    c->op_timeout_src = comm->op_timeout_src;
    c->rts_ahead = comm->rts_ahead;
    snprintf(c->name, sizeof(c->name), "%.20s%.10s", comm->name, suffix);
    snprintf(c->job_key, sizeof(c->job_key), "%s", comm->job_key);
    snprintf(c->nic_name, sizeof(c->nic_name), "%s", comm->nic_name);
    c->nic_port = comm->nic_port;
    c->gpu_nic_path = comm->gpu_nic_path;
    gx_comm_layout(c);
    int rc = gx_xport_open(c, &c->xport);
    if (rc == GX_OK)
        rc = node_shm_open(c);
    if (rc == GX_OK)
        rc = gx_coll_probe(c);
    if (rc != GX_OK) {
        comm_free(c);
        gx_boot_release(comm->boot);
        return rc;
    }
    gx_observe_comm_up(c); /* GX_METRICS_FILE */
    *out = c;
    return GX_OK;
}

/* ---- teardown ---------------------------------------------------------- */

GX_API int gx_comm_finalize(struct gx_comm *comm)
{
    gx_clear_last_error();
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_finalize: comm is NULL");
    int rc = gx_comm_check_usable(comm, "gx_comm_finalize");
    if (rc != GX_OK)
        return rc;
    /* A barrier of its own kind: a rank finalizing while another still runs
     * a barrier is reported as a mismatch, not silently paired. */
    gx_coll_comm_finalizing(comm);
    struct boot_group g = gx_comm_group(comm);
    rc = boot_barrier(&g, gx_comm_next_seq(comm), BOOT_OP_FINALIZE, gx_comm_op_deadline(comm));
    pthread_mutex_lock(&comm->lock);
    comm->finalized = true;
    pthread_mutex_unlock(&comm->lock);
    return gx_comm_note_failure(comm, rc);
}

GX_API void gx_comm_destroy(struct gx_comm *comm)
{
    if (!comm)
        return;
    struct gx_boot *boot = comm->boot;
    comm_free(comm);
    gx_boot_release(boot);
    gx_reject_flush(true); /* what the refused-connection summaries still hold */
}

GX_API void gx_comm_abort(struct gx_comm *comm)
{
    if (!comm || atomic_exchange(&comm->aborted, true))
        return;
    char msg[256];
    snprintf(msg, sizeof(msg), "rank %d aborted communicator '%s' (gx_comm_abort)",
             gx_boot_rank(comm->boot), comm->name);
    GX_WARN(GX_SUB_INIT, "%s", msg);
    gx_comm_set_async_error(comm, GX_EABORTED, msg);
    gx_boot_interrupt(comm->boot, true); /* a thread waiting in the bootstrap lets go */
    gx_boot_fail(comm->boot, GX_EABORTED, gx_boot_rank(comm->boot), msg);
    gx_boot_shutdown(comm->boot);
    if (comm->xport)
        gx_xport_abort(comm->xport);
}

GX_API const char *gx_comm_peer_provider(const struct gx_comm *comm, int peer)
{
    if (!comm || !comm->xport || peer < 0 || peer >= comm->size)
        return NULL;
    return gx_xport_provider_of(comm->xport, peer);
}
