/*
 * comm_internal.h - struct gx_comm and the helpers every room above uses
 * (transport, arena, algorithms, engine, api). Not installed.
 *
 * Room comm/ (comm_core.c, comm_env.c, request.c, stage.c): owns the
 * communicator as a data object (its node layout, async error, deadlines,
 * sequence numbers), its settings (comm_env.c), the request objects both
 * collectives and point-to-point calls return, and device-buffer staging.
 * Inside collectives/ it uses only the bootstrap: the transport, the arena
 * and the engine are built, run and closed from above (api/comm_init.c),
 * and only their handles live here.
 */
#ifndef GX_COMM_INTERNAL_H
#define GX_COMM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "collectives/bootstrap/boot.h"
#include "collectives/bootstrap/boot_coll.h"
#include "collectives/comm/comm_view.h"
#include "gx/gx.h"

/* The world communicator's id (a child's never is: gx_comm_child_id). */
#define WORLD_COMM_ID 1

struct gx_comm {
    struct gx_boot *boot;       /* shared by every communicator of the job */
    uint64_t comm_id;
    int rank;
    int size;
    int *world_ranks;           /* comm rank -> world (bootstrap) rank */
    /* Node layout (comm.c compute_nodes; arrays share world_ranks' block):
     * nodes are numbered in order of their lowest rank. */
    int *rank_node;             /* comm rank -> its node */
    int *rank_local;            /* comm rank -> its index among its node's ranks */
    int *node_first;            /* node -> its lowest comm rank (the node's leader) */
    int *node_size;             /* node -> its rank count */
    int local_rank;             /* rank_local[rank] */
    int local_size;             /* node_size[node_index] */
    int node_count;
    int node_index;             /* rank_node[rank] */
    int host_size;              /* ranks on this machine (>= local_size: fake nodes) */
    bool oversubscribed;        /* more ranks on this machine than CPUs */
    unsigned wait_yield_after;  /* polls before a waiting rank yields its CPU, UINT_MAX:
                                   never (GX_YIELD_WHEN_IDLE; request.c) */
    double net_alpha, net_beta; /* probed network link (coll_probe.c); 0: not probed */
    int op_timeout_ms;
    const char *op_timeout_src; /* "GX_TIMEOUT" or the caller's config (static text) */
    int rts_ahead;              /* GX_RTS_AHEAD: steps a collective announces its sends ahead */
    _Atomic uint64_t init_deadline; /* while init runs: every wait ends by GX_INIT_TIMEOUT */
    char name[32];
    char job_key[256];          /* authenticates the fabric connections too */
    struct gx_xport *xport;     /* endpoints to every peer (xport.h) */
    char nic_name[64];          /* topology's NIC for this rank ("" = none) */
    int nic_port;
    enum gx_topo_path gpu_nic_path; /* this rank's GPU to that NIC (GPUDirect verdict) */
    struct coll_comm *coll;     /* the engine, made on first use (engine/coll_engine.c) */
    struct node_shm *shm;       /* all ranks on one node: their shared segment (arena/node_shm.h) */
    struct node_shm *node_shm;  /* across nodes: this node's segment (hier), or NULL */
    struct coll_intra *intra;   /* nccl branch: the node's NCCL communicator (api/coll_intra.h) */
    struct gx_svc *svc;         /* windows' and remote calls' threads and handlers (api/svc.h) */

    pthread_mutex_t lock;       /* guards seq and the state flags below */
    uint64_t seq;               /* bootstrap operations issued on this comm */
    bool finalized;
    atomic_bool aborted;
    atomic_bool shrunk;         /* gx_comm_shrink left it behind: its failures are old news */
    uint32_t shrinks;           /* gx_comm_shrink calls on it (the same on every survivor) */
    atomic_int async_status;    /* first failure; GX_OK while healthy */
    /* gx_comm_stats' counters kept above the transport (relaxed atomic adds:
     * callers' threads and the progress thread count). */
    struct {
        uint64_t collectives_failed, p2p, stalls, wait_ns;
    } tally;
    char async_msg[512];        /* written once, before async_status is set */
};

/** A communicator of `size` ranks over `boot` (this one is `rank`), its
 *  arrays allocated and nothing else set up; NULL: out of memory. The
 *  caller fills world_ranks and calls gx_comm_layout. */
struct gx_comm *gx_comm_alloc(struct gx_boot *boot, int rank, int size);
/** The node layout from the members' bootstrap records: every rank's node
 *  and index inside it, every node's first rank and size (nodes numbered in
 *  order of their first rank), the ranks on this host. */
void gx_comm_layout(struct gx_comm *c);
/** The node layout from node sizes alone (`nodes` nodes of node_size[m]
 *  ranks, in rank order; they must add up to the size), as gx_comm_layout
 *  sets it, for plans made without a bootstrap (the schedule simulator,
 *  gx-sim): GX_OK, or GX_EINVAL when the sizes do not fit. */
int gx_comm_layout_sizes(struct gx_comm *c, int nodes, const int *node_size);
/** Free what gx_comm_alloc made (the rooms' handles are closed by then). */
void gx_comm_free(struct gx_comm *c);

/** The group view of a communicator for boot_coll.h operations. */
static inline struct boot_group gx_comm_group(const struct gx_comm *c)
{
    struct boot_group g = { c->boot, c->world_ranks, c->size, c->rank, c->comm_id };
    return g;
}

/** Take the next operation sequence number. */
uint64_t gx_comm_next_seq(struct gx_comm *c);
/** Deadline of a blocking operation started now. */
uint64_t gx_comm_op_deadline(const struct gx_comm *c);
/** Comm rank `r` runs on this host and its process has exited. */
bool gx_comm_peer_exited(const struct gx_comm *c, int r);
/** Record a failure as the comm's async error (first one wins) and return it. */
int gx_comm_set_async_error(struct gx_comm *c, int status, const char *msg);
/** After a failed operation: remember the error (with gx_last_error()). */
int gx_comm_note_failure(struct gx_comm *c, int status);

/** Why a peer will never answer, when it is known for sure: a failure the
 *  bootstrap heard of (another rank's ABORT), or a rank of this communicator
 *  on this host (`node_only`: of this node) whose process is gone; the dead
 *  rank is then told to the others. Reported with gx_fail, the message
 *  ending with `during` ("while ..."); GX_OK when neither is known. */
int gx_comm_known_death(struct gx_comm *c, bool node_only, const char *during);

/** True when comm ranks `a` and `b` run on the same node. */
bool gx_comm_same_node(const struct gx_comm *c, int a, int b);

/** A child communicator's id: the same on every member, distinct per call. */
uint64_t gx_comm_child_id(uint64_t parent, uint64_t seq, int color);

/** All-gather over the bootstrap (for other layers' address exchange). */
int gx_comm_boot_allgather(struct gx_comm *c, const void *mine, void *all, size_t each);

#endif
