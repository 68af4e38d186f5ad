/*
 * coll_tune.c - choosing an algorithm: GX_ALGO, the cost model, the chunk
 * size. The table `gx-info --tuning` prints from this model is in
 * coll_tune_print.c; what the two share is in coll_tune.h.
 *
 * Cost model (Hockney): a message of m bytes costs alpha + m * beta; reducing
 * m bytes costs m * gamma. alpha and beta come from the link class the
 * algorithm's messages cross: shm when all ranks share a node, else the
 * network provider (tcp) - the slowest link bounds a ring or a tree. The
 * defaults below were measured on the development machine (2 cores, shm
 * rings and loopback tcp); a pipelined algorithm with k chunks over h hops
 * costs (h + k - 1) chunk times. Every rank evaluates the same model from
 * the same facts (rank count, node count, size, GX_ALGO), so all ranks pick
 * the same algorithm; the choice travels in the mismatch descriptor, so a
 * rank with a different GX_ALGO fails with GX_EMISMATCH instead of hanging.
 */
#include <math.h>
#include <pthread.h>
#include <unistd.h>
#include <string.h>
#include <strings.h>

#include "collectives/algorithms/coll_tune.h"
#include "collectives/algorithms/coll_dbtree.h"
#include "collectives/arena/node_shm.h"
#include "collectives/comm/comm_internal.h"
#include "common/log.h"
#include "common/param.h"
#include "common/sock.h"

GX_PARAM_DEFINE(gx_param_algo, "GX_ALGO", GX_PARAM_STRING, "auto", NULL,
                "Force collective algorithms: one of ring|tree|dbtree|rhd|rd|linear|shm|hier|auto "
                "for every collective it applies to, or per collective, e.g. "
                "\"allreduce:ring,broadcast:tree\". Must be the same on every rank. "
                "gx-info --tuning -n N shows the automatic choice.");

GX_PARAM_DEFINE(gx_param_hier_rail, "GX_HIER_RAIL", GX_PARAM_ENUM, "auto",
                "auto|ring|rhd|tree|dbtree",
                "The rails' all-reduce inside the hierarchical all-reduce (GX_ALGO=hier): "
                "ring|rhd|tree|dbtree|auto (auto: the cost model's pick for a 1/L shard over "
                "the network among the four). "
                "Must be the same on every rank (a mismatch fails with GX_EMISMATCH).");

/* Measured with gx-bw / the collectives tests on the development machine. */
const struct link_cost coll_link_shm = { "shm", 4e-6, 1.0 / 3.0e9 };
const struct link_cost coll_link_tcp = { "tcp", 40e-6, 1.0 / 1.2e9 };
const double coll_gamma_reduce = 1.0 / 4.0e9; /* seconds per byte reduced */
/* The shared-memory arena (arena_allreduce.c): a flag handoff between ranks (when
 * there are more ranks than CPUs, a handoff waits for the scheduler), and
 * memcpy into and out of the arena (cache-resident slots). Measured with
 * gx-perf on the development machine, 2 and 4 ranks on 2 CPUs. */
static const double shm_handoff = 1.5e-6;
/* With more ranks than CPUs: a small round waits for every rank to be
 * scheduled in turn; in large rounds the waits overlap others' copying. */
static const double shm_handoff_oversubscribed_small = 30e-6;
static const double shm_handoff_oversubscribed_large = 8e-6;
static const double shm_copy_beta = 1.0 / 8.0e9;
#define SHM_ROUND_BYTES (256u << 10) /* GX_COLL_SHM_SLOT's default */
#define SHM_SMALL_ROUND (16u << 10)  /* arena_allreduce.c's ARENA_SMALL_BYTES */

/* Read once (sysconf reads /sys); communicators in several threads may race
 * to fill it in, with the same value. */
static long online_cpus(void)
{
    static long cached_cpus;
    long cpus = __atomic_load_n(&cached_cpus, __ATOMIC_RELAXED);
    if (!cpus) {
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
        __atomic_store_n(&cached_cpus, cpus, __ATOMIC_RELAXED);
    }
    return cpus;
}

/* Broadcast, all-gather, reduce-scatter in the arena (arena_moves.c)
 * for S bytes per block: one handoff per round of `per_slot` blocks, `copies`
 * block copies and `reductions` block reductions per rank. */
static double shm_moves_time(double S, int n, int per_slot, double copies, double reductions)
{
    long cpus = online_cpus();
    double per_round = (double)SHM_ROUND_BYTES / per_slot;
    double rounds = S > per_round ? ceil(S / per_round) : 1;
    double handoff = n > cpus ? (S / rounds <= SHM_SMALL_ROUND ? shm_handoff_oversubscribed_small
                                                              : shm_handoff_oversubscribed_large)
                              : shm_handoff;
    return rounds * handoff + copies * S * shm_copy_beta + reductions * S * coll_gamma_reduce;
}

static double shm_allreduce_time(double S, int n)
{
    long cpus = online_cpus();
    double rounds = S > SHM_ROUND_BYTES ? ceil(S / SHM_ROUND_BYTES) : 1, piece = S / rounds;
    bool over = n > cpus;
    if (piece <= SHM_SMALL_ROUND) /* stage all; every rank reduces everything */
        return rounds * (over ? shm_handoff_oversubscribed_small : shm_handoff) +
               S * shm_copy_beta + S * (n - 1) * coll_gamma_reduce;
    double handoff = over ? shm_handoff_oversubscribed_large : shm_handoff;
    /* stage (n-1)/n, copy back 1/n, copy out (n-1)/n; reduce one block */
    return rounds * 2 * handoff + S * shm_copy_beta * (2.0 * n - 1) / n +
           S * (n - 1) / n * coll_gamma_reduce;
}

#define MAX_APPLICABLE 8
static const enum coll_algo applicable[COLL_KIND_COUNT][MAX_APPLICABLE] = {
    [COLL_ALLREDUCE] = { COLL_ALGO_RING, COLL_ALGO_RD, COLL_ALGO_RHD, COLL_ALGO_TREE,
                         COLL_ALGO_DBTREE, COLL_ALGO_SHM, COLL_ALGO_HIER, 0 },
    [COLL_BROADCAST] = { COLL_ALGO_TREE, COLL_ALGO_RING, COLL_ALGO_SHM, 0 },
    [COLL_REDUCE] = { COLL_ALGO_TREE, COLL_ALGO_RING, 0 },
    [COLL_ALLGATHER] = { COLL_ALGO_RING, COLL_ALGO_SHM, 0 },
    [COLL_REDUCE_SCATTER] = { COLL_ALGO_RING, COLL_ALGO_SHM, 0 },
    [COLL_GATHER] = { COLL_ALGO_LINEAR, 0 },
    [COLL_SCATTER] = { COLL_ALGO_LINEAR, 0 },
    [COLL_ALLTOALL] = { COLL_ALGO_LINEAR, 0 },
};

static bool applies(enum coll_kind k, enum coll_algo a)
{
    for (int i = 0; i < MAX_APPLICABLE && applicable[k][i]; i++)
        if (applicable[k][i] == a)
            return true;
    return false;
}

/* ---- GX_ALGO ---------------------------------------------------------------- */

static enum coll_algo forced[COLL_KIND_COUNT];
static pthread_once_t forced_once = PTHREAD_ONCE_INIT;

static int algo_by_name(const char *s, size_t len)
{
    for (int a = 0; a < COLL_ALGO_COUNT; a++)
        if (strlen(coll_algo_name((enum coll_algo)a)) == len &&
            strncasecmp(s, coll_algo_name((enum coll_algo)a), len) == 0)
            return a;
    return -1;
}

static int kind_by_name(const char *s, size_t len)
{
    for (int k = 0; k < COLL_KIND_COUNT; k++)
        if (strlen(coll_kind_name((enum coll_kind)k)) == len &&
            strncasecmp(s, coll_kind_name((enum coll_kind)k), len) == 0)
            return k;
    return -1;
}

static void parse_forced(void)
{
    const char *text = gx_param_text(&gx_param_algo);
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        int kind = -1, algo;
        if (colon) {
            kind = kind_by_name(p, (size_t)(colon - p));
            algo = algo_by_name(colon + 1, len - (size_t)(colon - p) - 1);
        } else {
            algo = algo_by_name(p, len);
        }
        if (algo < 0 || (colon && kind < 0)) {
            GX_WARN(GX_SUB_COLL, "GX_ALGO: ignoring '%.*s' (expected ALGO or COLLECTIVE:ALGO "
                    "with ALGO one of auto|ring|tree|dbtree|rhd|rd|linear|shm|hier)", (int)len, p);
        } else {
            for (int k = 0; k < COLL_KIND_COUNT; k++) {
                if (kind >= 0 && k != kind)
                    continue;
                if (algo == COLL_ALGO_AUTO || applies((enum coll_kind)k, (enum coll_algo)algo))
                    forced[k] = (enum coll_algo)algo;
                else if (kind >= 0)
                    GX_WARN(GX_SUB_COLL, "GX_ALGO: %s has no %s algorithm; using auto",
                            coll_kind_name((enum coll_kind)k),
                            coll_algo_name((enum coll_algo)algo));
            }
        }
        p += len;
        if (*p == ',')
            p++;
    }
}

/* ---- model ------------------------------------------------------------------ */

static double log2i(int n)
{
    int l = 0;
    while ((1 << l) < n)
        l++;
    return l;
}

/* Pipelined: `hops` sequential transfers of `bytes` cut into chunks, each
 * chunk also reduced `red` times per hop. */
static double pipelined(const struct link_cost *l, double hops, size_t bytes, double red)
{
    double k = coll_chunks(bytes);
    double chunk = (double)bytes / k;
    return (hops + k - 1) * (l->alpha + chunk * (l->beta + red * coll_gamma_reduce));
}

/* `net`: the link between nodes (probed, or the tcp defaults). */
double coll_tune_predict(enum coll_kind kind, enum coll_algo algo, size_t bytes, int n, int nodes,
                         const struct link_cost *net)
{
    if (!applies(kind, algo))
        return -1;
    if (n <= 1)
        return 0;
    const struct link_cost *l = nodes > 1 ? net : &coll_link_shm;
    double S = (double)bytes, a = l->alpha, b = l->beta, g = coll_gamma_reduce;
    int p = coll_pof2(n);
    double L = log2i(p), fold = p != n ? 1 : 0, lg = log2i(n);
    switch (kind) {
    case COLL_ALLREDUCE:
        switch (algo) {
        case COLL_ALGO_RING: {
            /* 2(n-1) rounds of one block each; chunking overlaps each
             * round's reduction with the next chunk's transfer, so only
             * about one round's worth of reduction stays exposed. */
            double blk = S / n, k = coll_chunks((size_t)blk);
            return 2 * (n - 1) * (k * a + blk * b) + blk * g * (1 + (n - 2) / k);
        }
        case COLL_ALGO_RD:
            return (L + 2 * fold) * (a + S * b) + (L + fold) * S * g;
        case COLL_ALGO_RHD:
            return 2 * L * a + 2 * (p - 1) / (double)p * S * b + (p - 1) / (double)p * S * g +
                   fold * (2 * (a + S * b) + S * g);
        case COLL_ALGO_TREE:
            /* reduce then broadcast; a node sends/receives once per child */
            return 2 * pipelined(l, lg, bytes, 0.5) + (lg - 1) * S * (b + g);
        case COLL_ALGO_DBTREE: {
            /* Two trees of depth D, half the vector each in k chunks of c
             * bytes. Per chunk a rank sends 4 messages (where it has
             * children: 1 up, 2 down; where it is a leaf: 1), so a stage
             * (a hop of one tree) costs 2 (a + c b). The first chunk crosses
             * 2D stages (D up, D down), the others follow one per 2 stages.
             * As for the ring, reductions overlap the next chunk's transfer
             * but those of the first chunk (2 per level up). */
            double D = dbtree_depth(n), k = coll_chunks(bytes / 2), c = S / 2 / k;
            return (2 * D + 2 * (k - 1)) * 2 * (a + c * b) + 2 * D * c * g;
        }
        case COLL_ALGO_SHM: /* only inside one node */
            return nodes > 1 ? -1 : shm_allreduce_time(S, n);
        case COLL_ALGO_HIER: /* needs the node layout: predict_hier */
        default:
            return -1;
        }
    case COLL_BROADCAST:
        if (algo == COLL_ALGO_SHM)
            return nodes > 1 ? -1 : shm_moves_time(S, n, 1, 2, 0);
        if (algo == COLL_ALGO_RING)
            return pipelined(l, n - 1, bytes, 0);
        return pipelined(l, lg, bytes, 0) + (lg - 1) * S * b;
    case COLL_REDUCE:
        if (algo == COLL_ALGO_RING)
            return pipelined(l, n - 1, bytes, 1);
        return pipelined(l, lg, bytes, 1) + (lg - 1) * S * (b + g);
    case COLL_ALLGATHER:
        if (algo == COLL_ALGO_SHM)
            return nodes > 1 ? -1 : shm_moves_time(S, n, 1, n, 0);
        return (n - 1) * (a + S * b);
    case COLL_REDUCE_SCATTER:
        if (algo == COLL_ALGO_SHM)
            return nodes > 1 ? -1 : shm_moves_time(S, n, n, n - 1, n - 1);
        return (n - 1) * (a + S * (b + g));
    case COLL_GATHER:
    case COLL_SCATTER:
    case COLL_ALLTOALL:
        return a + (n - 1) * S * b;
    default:
        return -1;
    }
}

/* ---- hierarchical all-reduce (coll_hier.c) ---------------------------------- */

bool coll_tune_hier_applies(const struct node_shape *sh)
{
    return sh->nodes > 1 && sh->L > 1;
}

/* The rails' candidates, in the order ties go. */
const enum coll_algo coll_rail_algos[COLL_RAIL_ALGOS] = { COLL_ALGO_RING, COLL_ALGO_RHD,
                                                          COLL_ALGO_TREE, COLL_ALGO_DBTREE };

/* GX_HIER_RAIL: COLL_ALGO_AUTO, or the forced rail algorithm. */
enum coll_algo coll_tune_forced_rail(void)
{
    int i = 0; /* malformed: gx_param_check_environment failed init already */
    (void)gx_param_enum(&gx_param_hier_rail, &i);
    return i >= 1 && i <= COLL_RAIL_ALGOS ? coll_rail_algos[i - 1] : COLL_ALGO_AUTO;
}

/* One rail: an all-reduce of `shard` bytes among `nodes` ranks (one per
 * node) over `link`, by the fastest of ring, rhd, tree and dbtree (the flat
 * model, predict), or by `want` (not AUTO). Returns its time; *out (may be
 * NULL) gets the algorithm, times[] (may be NULL) each candidate's. */
double coll_tune_rail_pick(size_t shard, int nodes, const struct link_cost *link,
                           enum coll_algo want, enum coll_algo *out, double times[COLL_RAIL_ALGOS])
{
    enum coll_algo best = COLL_ALGO_RING;
    double best_t = -1;
    for (int i = 0; i < COLL_RAIL_ALGOS; i++) {
        double t = coll_tune_predict(COLL_ALLREDUCE, coll_rail_algos[i], shard, nodes, nodes,
                                     link);
        if (times)
            times[i] = t;
        bool pick = want != COLL_ALGO_AUTO ? coll_rail_algos[i] == want
                                             : t >= 0 && (best_t < 0 || t < best_t);
        if (pick) {
            best = coll_rail_algos[i];
            best_t = t;
        }
    }
    if (out)
        *out = best;
    return best_t;
}

/* A rail's link: the network link with its bandwidth shared by the node's L
 * rails over min(L, GX_SOCKET_IFNAME entries) links. */
struct link_cost coll_tune_rail_link(const struct node_shape *sh, const struct link_cost *net)
{
    int links = sh->rails < 1 ? 1 : sh->rails > sh->L ? sh->L : sh->rails;
    return (struct link_cost){ "rail", net->alpha, net->beta * sh->L / links };
}

/* Three phases per segment: a reduce-scatter of the segment inside the node
 * (in the node arena, priced like the one-node arena's moves of 1/L blocks;
 * with GX_HIER_ARENA=off a ring over shm links), one all-reduce of a 1/L
 * shard along each rail (the network; the L rails of a node share its
 * links - one, or as many as GX_SOCKET_IFNAME lists - so a rail sees
 * links/L of a link's bandwidth), an all-gather inside the node (arena or
 * ring). Segments overlap the phases: the slowest plus 1/K of the others. */
double coll_tune_predict_hier(size_t bytes, const struct node_shape *sh,
                              const struct link_cost *net, enum coll_algo *rail_out)
{
    if (!coll_tune_hier_applies(sh))
        return -1;
    double S = (double)bytes, L = sh->L, shard = S / L;
    const struct link_cost *l = &coll_link_shm;
    double t_rs = (L - 1) * (l->alpha + shard * (l->beta + coll_gamma_reduce));
    double t_ag = (L - 1) * (l->alpha + shard * l->beta);
    if (node_shm_hier_planned()) { /* arena_node.c */
        t_rs = shm_moves_time(shard, sh->L, sh->L, L - 1, L - 1);
        t_ag = shm_moves_time(shard, sh->L, 1, L - 1, 0);
    }
    struct link_cost rail = coll_tune_rail_link(sh, net);
    double t_rail = coll_tune_rail_pick((size_t)shard, sh->nodes, &rail, coll_tune_forced_rail(),
                                        rail_out, NULL);
    int K = coll_hier_segments(bytes);
    double sum = t_rs + t_rail + t_ag, mx = t_rs;
    mx = t_rail > mx ? t_rail : mx;
    mx = t_ag > mx ? t_ag : mx;
    return mx + (sum - mx) / K;
}

static struct node_shape comm_shape(const struct gx_comm *comm)
{
    struct node_shape sh = { comm->node_count, 0, false, gx_sock_rail_count() };
    for (int m = 0; m < comm->node_count; m++) {
        if (m && comm->node_size[m] != comm->node_size[0])
            sh.uneven = true;
        if (comm->node_size[m] > sh.L)
            sh.L = comm->node_size[m];
    }
    return sh;
}

/* `arena`: the communicator has a shared-memory arena (gx_comm.shm); the
 * same on every rank. Forcing shm where there is none, or hier where it does
 * not apply, falls back to auto. */
double coll_predict(enum coll_kind kind, enum coll_algo algo, size_t bytes, int n, int nodes)
{
    return coll_tune_predict(kind, algo, bytes, n, nodes, &coll_link_tcp);
}

enum coll_algo coll_tune_choose(enum coll_kind kind, size_t bytes, int n,
                                const struct node_shape *sh, bool arena,
                                const struct link_cost *net, bool *forced_out)
{
    pthread_once(&forced_once, parse_forced);
    int nodes = sh->nodes;
    *forced_out = forced[kind] != COLL_ALGO_AUTO && (forced[kind] != COLL_ALGO_SHM || arena) &&
                  (forced[kind] != COLL_ALGO_HIER || coll_tune_hier_applies(sh));
    if (*forced_out)
        return forced[kind];
    enum coll_algo best = applicable[kind][0];
    double best_t = coll_tune_predict(kind, best, bytes, n, nodes, net);
    for (int i = 1; i < MAX_APPLICABLE && applicable[kind][i]; i++) {
        enum coll_algo a = applicable[kind][i];
        if (a == COLL_ALGO_SHM && !arena)
            continue;
        double t = a == COLL_ALGO_HIER ? coll_tune_predict_hier(bytes, sh, net, NULL)
                                       : coll_tune_predict(kind, a, bytes, n, nodes, net);
        if (t >= 0 && t < best_t) {
            best_t = t;
            best = a;
        }
    }
    return best;
}

static const struct link_cost *comm_net(const struct gx_comm *comm, struct link_cost *probed)
{
    *probed = (struct link_cost){ "probed", comm->net_alpha, comm->net_beta };
    return comm->net_alpha > 0 ? probed : &coll_link_tcp;
}

enum coll_algo coll_choose(const struct gx_comm *comm, enum coll_kind kind, size_t bytes)
{
    bool f;
    struct link_cost probed;
    struct node_shape sh = comm_shape(comm);
    return coll_tune_choose(kind, bytes, comm->size, &sh, comm->shm != NULL,
                            comm_net(comm, &probed), &f);
}

enum coll_algo coll_hier_rail_algo(const struct gx_comm *comm, size_t bytes)
{
    struct link_cost probed;
    struct node_shape sh = comm_shape(comm);
    enum coll_algo rail = coll_tune_forced_rail();
    if (rail != COLL_ALGO_AUTO)
        return rail;
    (void)coll_tune_predict_hier(bytes, &sh, comm_net(comm, &probed), &rail);
    return rail;
}
