/*
 * comm_internal.h - struct gx_comm and the helpers the collectives, the
 * point-to-point layer and the DDP scheduler use. Not installed.
 *
 * Room comm/ (comm.c, comm_env.c, request.c): owns the communicator (its
 * node layout, placement, lifecycle, async error) and the request objects
 * both collectives and point-to-point calls return. It builds the transport
 * and the arena at init/split; it must not reach into the engine, the
 * algorithms or DDP (their hooks are declared here and implemented there).
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
    double net_alpha, net_beta; /* probed network link (coll_probe.c); 0: not probed */
    int op_timeout_ms;
    const char *op_timeout_src; /* "GX_TIMEOUT" or the caller's config (static text) */
    _Atomic uint64_t init_deadline; /* while init runs: every wait ends by GX_INIT_TIMEOUT */
    char name[32];
    char job_key[256];          /* authenticates the fabric connections too */
    struct gx_xport *xport;     /* endpoints to every peer (xport.h) */
    char nic_name[64];          /* topology's NIC for this rank ("" = none) */
    int nic_port;
    enum gx_topo_path gpu_nic_path; /* this rank's GPU to that NIC (GPUDirect verdict) */
    struct coll_comm *coll;     /* collectives engine, created on first use (coll_engine.c) */
    struct coll_shm_arena *shm; /* all ranks on one node: the shared arena (coll_shm.h) */
    struct coll_shm_arena *node_shm; /* across nodes: this node's arena (hier), or NULL */
    const struct coll_node_engine *node_engine; /* hier's intra-node engine (NULL: ring) */
    struct coll_intra *intra;   /* nccl branch: the node's NCCL communicator (engine/coll_intra.h) */

    pthread_mutex_t lock;       /* guards seq and the state flags below */
    uint64_t seq;               /* bootstrap operations issued on this comm */
    bool finalized;
    atomic_bool aborted;
    atomic_bool shrunk;         /* gx_comm_shrink left it behind: its failures are old news */
    uint32_t shrinks;           /* gx_comm_shrink calls on it (the same on every survivor) */
    atomic_int async_status;    /* first failure; GX_OK while healthy */
    char async_msg[512];        /* written once, before async_status is set */
};

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

/** Collectives engine hook (coll_engine.c): stop the progress thread and
 *  detach in-flight collectives; called by comm.c before the transport closes. */
void gx_coll_comm_destroy(struct gx_comm *c);
/** Collectives engine hook (coll_skip.c): tell the peers this rank finalizes
 *  after its last collective, so a peer still in a later one fails at once. */
void gx_coll_comm_finalizing(struct gx_comm *c);
/** Collectives engine hook (coll_skip.c): gx_barrier takes the next number in
 *  the sequence of collectives and tells the peers, so a peer in another
 *  collective with that number fails at once with GX_EMISMATCH. */
uint64_t gx_coll_barrier_enter(struct gx_comm *c, int *status);

/** Probe the network link between nodes for the cost model (coll_probe.c);
 *  collective: every rank of the communicator calls it at set-up. */
int gx_coll_probe(struct gx_comm *c);

/** A communicator of `n` of `comm`'s ranks (`members`, ascending by new
 *  rank; this rank is members[new_rank]) with its own transport and arena;
 *  collective over the members (split, shrink). Does not note failures. */
int gx_comm_derive(struct gx_comm *comm, const int *members, int n, int new_rank,
                   uint64_t comm_id, const char *suffix, struct gx_comm **out);
/** A child communicator's id: the same on every member, distinct per call. */
uint64_t gx_comm_child_id(uint64_t parent, uint64_t seq, int color);

/** All-gather over the bootstrap (for other layers' address exchange). */
int gx_comm_boot_allgather(struct gx_comm *c, const void *mine, void *all, size_t each);

#endif
