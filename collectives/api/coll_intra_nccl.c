/*
 * coll_intra_nccl.c - the device intra-node engine (coll_intra.h): one NCCL
 * communicator per node of a gx communicator, made on the first blocking
 * collective on device buffers. Local rank 0 of each node makes the unique
 * id; every rank's contribution goes through one bootstrap all-gather (so
 * every rank of the communicator takes part, as in any collective) and
 * each rank takes its node leader's id.
 *
 * Every rank of a node must make the same choice for a call (device buffers
 * on every rank, or host on every rank): a rank that stages while its node
 * peers run NCCL leaves both sides waiting until GX_TIMEOUT, which then
 * names the node's NCCL communicator. docs/gpu.md says so.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/comm_internal.h"
#include "collectives/api/coll_intra.h"
#include "common/clock.h"
#include "common/log.h"
#include "gpudirect/gpu_nccl.h"
#include "gpudirect/gpudirect.h"

struct coll_intra {
    struct gx_nccl *nccl;
    int device;          /* the GPU its communicator is on */
    int failed;          /* creation failed with GX_NCCL=on: every later device call fails */
    bool disabled;       /* creation failed (GX_NCCL=auto): staging from then on */
    struct gx_comm *rail; /* multi-node: the ranks of my local index on every node */
    char why[400];
    char name[160];
};

static bool kind_has_nccl(enum coll_kind k)
{
    return k == COLL_ALLREDUCE || k == COLL_BROADCAST || k == COLL_REDUCE ||
           k == COLL_ALLGATHER || k == COLL_REDUCE_SCATTER;
}

/* Is [p, p+bytes) device memory (on *dev)? False for host memory, NULL, or
 * anything the query cannot answer (the host path then reports it). */
static bool on_device(const void *p, size_t bytes, int *dev)
{
    if (!p || !bytes)
        return false;
    struct gx_gpu_ptr g;
    if (gx_gpu_ptr_query(p, &g) != GX_OK) {
        gx_clear_last_error();
        return false;
    }
    if (g.type != GX_GPU_MEM_CUDA || (uintptr_t)p + bytes > g.base + g.size)
        return false;
    if (*dev >= 0 && g.device != *dev)
        return false;
    *dev = g.device;
    return true;
}

static bool overlaps(const void *a, size_t al, const void *b, size_t bl)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return al && bl && x < y + bl && y < x + al;
}

/* The buffers this rank uses, as NCCL takes them; false when the call is
 * not one the device engine runs (let the host path check and report). */
static bool shape(const struct gx_comm *c, const struct coll_args *a, size_t es,
                  struct gx_nccl_call *k, size_t *sb, size_t *rb, int *dev)
{
    int n = c->size, me = c->rank;
    size_t bytes = a->count * es;
    bool root = a->root == me;
    *k = (struct gx_nccl_call){ .send = a->sendbuf, .recv = a->recvbuf, .count = a->count,
                                .dtype = a->dtype, .op = a->op, .root = a->root };
    const char *s = a->sendbuf, *r = a->recvbuf;
    bool inplace = false;
    switch (a->kind) {
    case COLL_ALLREDUCE:
        k->kind = GX_NCCL_ALLREDUCE;
        *sb = *rb = bytes;
        inplace = s == r;
        break;
    case COLL_BROADCAST:
        k->kind = GX_NCCL_BROADCAST;
        *sb = root ? bytes : 0;
        *rb = bytes;
        inplace = s == r;
        break;
    case COLL_REDUCE:
        k->kind = GX_NCCL_REDUCE;
        *sb = bytes;
        *rb = root ? bytes : 0;
        inplace = s == r;
        break;
    case COLL_ALLGATHER:
        k->kind = GX_NCCL_ALLGATHER;
        *sb = bytes;
        *rb = bytes * (size_t)n;
        inplace = r && s == r + (size_t)me * bytes;
        break;
    case COLL_REDUCE_SCATTER:
        k->kind = GX_NCCL_REDUCE_SCATTER;
        *sb = bytes * (size_t)n;
        *rb = bytes;
        inplace = s && r == s + (size_t)me * bytes;
        break;
    default:
        return false;
    }
    if (*sb && !on_device(s, *sb, dev))
        return false;
    if (*rb && !on_device(r, *rb, dev))
        return false;
    if (!*sb && !*rb)
        return false;
    if (!*sb)
        k->send = r; /* broadcast off the root: NCCL reads no send buffer */
    if (!*rb && a->kind == COLL_REDUCE)
        k->recv = NULL;
    return inplace || !overlaps(s, *sb, r, *rb);
}

static int make(struct gx_comm *c, struct coll_intra *in, const void *dev_hint)
{
    unsigned char mine[GX_NCCL_ID_BYTES] = { 0 };
    int rc = GX_OK;
    if (c->local_rank == 0)
        rc = gx_nccl_unique_id(mine);
    /* A leader whose id failed sends zeros: its node's ranks fail too. */
    unsigned char *all = calloc((size_t)c->size, GX_NCCL_ID_BYTES);
    if (!all)
        return gx_fail(GX_ENOMEM, GX_SUB_GPU, "%s: out of memory", in->name);
    int arc = gx_comm_boot_allgather(c, mine, all, GX_NCCL_ID_BYTES);
    if (rc == GX_OK && arc != GX_OK)
        rc = arc;
    static const unsigned char zero[GX_NCCL_ID_BYTES];
    const unsigned char *id = all + (size_t)c->node_first[c->node_index] * GX_NCCL_ID_BYTES;
    if (rc == GX_OK && memcmp(id, zero, sizeof(zero)) == 0)
        rc = gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s: the node's local rank 0 (comm rank %d) could "
                     "not make an NCCL unique id (its log says why)", in->name,
                     c->node_first[c->node_index]);
    if (rc == GX_OK)
        rc = gx_nccl_open(id, c->local_size, c->local_rank, dev_hint, in->name,
                          gx_comm_op_deadline(c), &in->nccl);
    free(all);
    /* Agree: the node's communicator is used only when every rank of the
     * communicator made its own (one bootstrap all-gather of the outcomes),
     * so no rank runs NCCL while a peer stages. */
    int ok = rc == GX_OK, *oks = calloc((size_t)c->size, sizeof(int));
    if (!oks)
        return rc == GX_OK ? gx_fail(GX_ENOMEM, GX_SUB_GPU, "%s: out of memory", in->name) : rc;
    int grc = gx_comm_boot_allgather(c, &ok, oks, sizeof(int));
    int bad = -1;
    for (int r = 0; grc == GX_OK && r < c->size && bad < 0; r++)
        if (!oks[r])
            bad = r;
    free(oks);
    if (grc != GX_OK)
        return rc == GX_OK ? grc : rc;
    if (rc == GX_OK && bad >= 0)
        rc = gx_fail(GX_ESYSTEM, GX_SUB_GPU, "%s: comm rank %d could not make its NCCL "
                     "communicator (its log says why)", in->name, bad);
    return rc;
}

/* Why a node peer will never join a pending NCCL call, when it is known
 * for sure (gx_comm_known_death: a failure reported over the bootstrap, or
 * a node peer whose process is gone, then told to the others); GX_OK when
 * neither is known yet. `grace_ms` waits that long for one. */
static int node_root_cause(struct gx_comm *c, int grace_ms)
{
    uint64_t until = gx_deadline_after_ms(grace_ms);
    for (;;) {
        int rc = gx_comm_known_death(c, true, "while an NCCL call of its node was pending");
        if (rc != GX_OK || gx_ms_left(until) == 0)
            return rc;
        gx_boot_progress(c->boot, 5);
    }
}

/* While an NCCL call is pending: a node peer known gone will never join it;
 * fail naming it rather than wait for GX_TIMEOUT. Failing that, every node
 * peer whose bootstrap connection closed is named: one of them may be a
 * survivor that failed first, so this comes last. */
static int node_peer_gone(void *arg)
{
    struct gx_comm *c = arg;
    int rc = node_root_cause(c, 0);
    if (rc != GX_OK)
        return rc;
    char list[400] = "";
    size_t len = 0;
    int gone = 0;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank || c->rank_node[r] != c->node_index ||
            !gx_boot_peer_gone(c->boot, c->world_ranks[r]))
            continue;
        char who[160];
        gx_boot_describe(c->boot, c->world_ranks[r], who, sizeof(who));
        if (len < sizeof(list))
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%scomm rank %d, %s",
                                    gone ? "; " : "", r, who);
        gone++;
    }
    return gone ? gx_fail(GX_EPEER, GX_SUB_COLL, "comm '%s': %s %s gone", c->name, list,
                          gone > 1 ? "are" : "is")
                : GX_OK;
}

/* NCCL failed on its own (its asynchronous error once a peer aborted, say):
 * when a node peer died, that is the cause to report, so the ranks name the
 * dead rank rather than NCCL's symptom. */
static int explain_nccl_failure(struct gx_comm *c, int rc)
{
    if (rc == GX_OK || rc == GX_EPEER || rc == GX_ETIMEOUT || GX_IS_CALLER_ERROR(rc))
        return rc;
    char nccl_msg[400];
    snprintf(nccl_msg, sizeof(nccl_msg), "%s", gx_last_error());
    int cause = node_root_cause(c, 200);
    if (cause == GX_OK) {
        gx_set_last_error(nccl_msg);
        return rc;
    }
    return gx_fail(cause, GX_SUB_COLL, "%s (NCCL then said: %s)", gx_last_error(), nccl_msg);
}

/* Multi-node: only the all-reduce, hierarchically, on nodes of one size
 * with 2+ ranks each (uneven nodes stage: coll_hier.c generalises them). */
static bool hier_applies(const struct gx_comm *c, const struct coll_args *a)
{
    if (a->kind != COLL_ALLREDUCE || c->local_size < 2)
        return false;
    for (int m = 0; m < c->node_count; m++)
        if (c->node_size[m] != c->local_size)
            return false;
    return true;
}

/* The hierarchical all-reduce with NCCL inside the node: (a) NCCL
 * reduce-scatter of the first chunk*L elements (local rank i keeps block i)
 * and NCCL all-reduce of the tail; (b) my block (and on local rank 0 the
 * tail) staged to pinned host memory and all-reduced along the rail (the
 * ranks of my local index on every node: a gx communicator split off once)
 * by gx's host path; (c) NCCL all-gather of the blocks and broadcast of the
 * tail from local rank 0. AVG divides inside the node (NCCL) and along the
 * rail (gx). */
static int hier_allreduce(struct gx_comm *c, struct coll_intra *in, const struct coll_args *a,
                          size_t es)
{
    int L = c->local_size, lr = c->local_rank;
    size_t chunk = a->count / (size_t)L, tail = a->count - chunk * (size_t)L;
    const char *S = a->sendbuf;
    char *R = a->recvbuf, *mine = R + (size_t)lr * chunk * es, *rtail = R + chunk * L * es;
    struct gx_nccl_call k[2];
    struct gx_nccl_watch w = { node_peer_gone, c };
    int n = 0;
    if (chunk)
        k[n++] = (struct gx_nccl_call){ GX_NCCL_REDUCE_SCATTER, S, mine, chunk, a->dtype, a->op,
                                        -1 };
    if (tail)
        k[n++] = (struct gx_nccl_call){ GX_NCCL_ALLREDUCE, S + chunk * L * es, rtail, tail,
                                        a->dtype, a->op, -1 };
    int rc = gx_nccl_run(in->nccl, k, n, gx_comm_op_deadline(c), c->op_timeout_ms, &w);
    if (rc == GX_OK && !in->rail) {
        rc = gx_comm_split(c, lr, c->node_index, &in->rail);
        if (rc != GX_OK)
            rc = gx_fail(rc, GX_SUB_COLL, "comm '%s': cannot split off the rail of local rank "
                         "%d for the NCCL hierarchical all-reduce: %s", c->name, lr,
                         gx_last_error());
    }
    size_t hb = chunk + (lr == 0 ? tail : 0), cap = 0;
    if (rc == GX_OK && hb) {
        char *h = gx_gpu_pinned_get(hb * es, R, &cap);
        if (!h)
            return gx_fail(GX_ENOMEM, GX_SUB_GPU, "no pinned memory for %zu bytes: %s",
                           hb * es, gx_last_error());
        rc = gx_gpu_copy_dtoh(h, mine, chunk * es);
        if (rc == GX_OK && hb > chunk)
            rc = gx_gpu_copy_dtoh(h + chunk * es, rtail, tail * es);
        if (rc == GX_OK)
            rc = gx_allreduce(in->rail, h, h, hb, a->dtype, a->op);
        if (rc == GX_OK)
            rc = gx_gpu_copy_htod(mine, h, chunk * es);
        if (rc == GX_OK && hb > chunk)
            rc = gx_gpu_copy_htod(rtail, h + chunk * es, tail * es);
        gx_gpu_pinned_put(h, cap);
    }
    if (rc != GX_OK)
        return rc;
    n = 0;
    if (chunk)
        k[n++] = (struct gx_nccl_call){ GX_NCCL_ALLGATHER, mine, R, chunk, a->dtype,
                                        GX_REDOP_COUNT, -1 };
    if (tail)
        k[n++] = (struct gx_nccl_call){ GX_NCCL_BROADCAST, rtail, rtail, tail, a->dtype,
                                        GX_REDOP_COUNT, 0 };
    return gx_nccl_run(in->nccl, k, n, gx_comm_op_deadline(c), c->op_timeout_ms, &w);
}

int coll_intra_try(struct gx_comm *c, const struct coll_args *a, const char *fn, bool *ran)
{
    *ran = false;
    if (!c->intra && !gx_gpu_driver_available(NULL, 0))
        return GX_OK; /* no driver: nothing can be device memory */
    if (!kind_has_nccl(a->kind) || a->count == 0 || (unsigned)a->dtype >= GX_DATATYPE_COUNT)
        return GX_OK;
    if (c->node_count > 1 && !hier_applies(c, a))
        return GX_OK;
    if (c->size < 2 && !c->intra) { /* one rank: NCCL only when GX_NCCL=on asks */
        bool on = false;
        char w[400];
        (void)gx_nccl_usable(&on, w, sizeof(w));
        if (!on)
            return GX_OK;
    }
    bool reduces = a->kind == COLL_ALLREDUCE || a->kind == COLL_REDUCE ||
                   a->kind == COLL_REDUCE_SCATTER;
    if (reduces && (unsigned)a->op >= GX_REDOP_COUNT)
        return GX_OK;
    if ((a->kind == COLL_BROADCAST || a->kind == COLL_REDUCE) &&
        (a->root < 0 || a->root >= c->size))
        return GX_OK;
    size_t es = gx_datatype_size(a->dtype);
    if (a->count > SIZE_MAX / es / (size_t)c->size)
        return GX_OK;
    if (!gx_nccl_supports(a->dtype, reduces ? a->op : GX_REDOP_COUNT))
        return GX_OK;
    struct coll_intra *in = c->intra;
    if (in && in->disabled)
        return GX_OK;
    struct gx_nccl_call k;
    size_t sb = 0, rb = 0;
    int dev = in && in->nccl ? in->device : -1;
    if (!shape(c, a, es, &k, &sb, &rb, &dev))
        return GX_OK;
    if (!reduces)
        k.op = GX_REDOP_COUNT;
    bool required = false;
    if (!in) {
        char why[400];
        if (!gx_nccl_usable(&required, why, sizeof(why))) {
            if (!required)
                return GX_OK;
            *ran = true;
            return gx_fail(GX_EUNSUPPORTED, GX_SUB_GPU, "%s: GX_NCCL=on but NCCL cannot be "
                           "used: %s", fn, why);
        }
        in = calloc(1, sizeof(*in));
        if (!in)
            return GX_OK;
        in->device = dev;
        snprintf(in->name, sizeof(in->name), "node %d's NCCL communicator of comm '%s' "
                 "(local rank %d of %d, GPU %d)", c->node_index, c->name, c->local_rank,
                 c->local_size, dev);
        c->intra = in;
        *ran = true;
        int rc = make(c, in, sb ? a->sendbuf : a->recvbuf);
        if (rc != GX_OK) {
            /* Every rank knows (make() agrees): stage from now on, unless
             * GX_NCCL=on asked for NCCL. */
            snprintf(in->why, sizeof(in->why), "%s", gx_last_error());
            gx_nccl_close(in->nccl);
            in->nccl = NULL;
            if (!required) {
                GX_WARN(GX_SUB_GPU, "%s: not usable, device collectives are staged through "
                        "host memory: %s", in->name, in->why);
                in->disabled = true;
                *ran = false;
                return GX_OK;
            }
            in->failed = rc;
            return rc;
        }
        GX_INFO(GX_SUB_GPU, "%s: device collectives of this node run on NCCL", in->name);
    }
    *ran = true;
    if (in->failed || !in->nccl)
        return gx_fail(in->failed ? in->failed : GX_EABORTED, GX_SUB_GPU, "%s: %s could not "
                       "be made (an earlier error says why)", fn, in->name);
    int rc = c->node_count > 1 ? hier_allreduce(c, in, a, es)
                               : gx_nccl_run(in->nccl, &k, 1, gx_comm_op_deadline(c),
                                             c->op_timeout_ms, &(struct gx_nccl_watch){
                                                 node_peer_gone, c });
    rc = explain_nccl_failure(c, rc);
    if (rc != GX_OK)
        return gx_fail(rc, GX_SUB_COLL, "%s (%zu x %s) on comm '%s': %s", fn, a->count,
                       gx_datatype_name(a->dtype), c->name, gx_last_error());
    return GX_OK;
}

void coll_intra_destroy(struct gx_comm *c)
{
    struct coll_intra *in = c->intra;
    if (!in)
        return;
    gx_nccl_close(in->nccl);
    if (in->rail)
        gx_comm_destroy(in->rail);
    free(in);
    c->intra = NULL;
}
