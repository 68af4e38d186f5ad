/*
 * coll_tune.c - choosing an algorithm: GX_ALGO, the cost model, the chunk
 * size, and the table `gx-info --tuning` prints.
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

#include "collectives/engine/coll.h"
#include "collectives/algorithms/coll_dbtree.h"
#include "collectives/arena/coll_shm.h"
#include "collectives/comm/comm_internal.h"
#include "common/log.h"
#include "common/param.h"
#include "common/sock.h"

GX_PARAM_DEFINE(gx_param_algo, "GX_ALGO", GX_PARAM_STRING, "auto", NULL,
                "Force collective algorithms: one of ring|tree|dbtree|rhd|rd|linear|shm|hier|auto "
                "for every collective it applies to, or per collective, e.g. "
                "\"allreduce:ring,broadcast:tree\". Must be the same on every rank. "
                "gx-info --tuning -n N shows the automatic choice.");
GX_PARAM_DEFINE(gx_param_coll_chunk, "GX_COLL_CHUNK", GX_PARAM_SIZE, "256K", NULL,
                "Pipelining chunk of the ring, chain and tree collectives (at most 64 chunks "
                "per block).");

GX_PARAM_DEFINE(gx_param_hier_rail, "GX_HIER_RAIL", GX_PARAM_ENUM, "auto",
                "auto|ring|rhd|tree|dbtree",
                "The rails' all-reduce inside the hierarchical all-reduce (GX_ALGO=hier): "
                "ring|rhd|tree|dbtree|auto (auto: the cost model's pick for a 1/L shard over "
                "the network among the four). "
                "Must be the same on every rank (a mismatch fails with GX_EMISMATCH).");

struct link_cost {
    const char *name;
    double alpha;  /* seconds per message */
    double beta;   /* seconds per byte */
};

/* Measured with gx-bw / the collectives tests on the development machine. */
static const struct link_cost link_shm = { "shm", 4e-6, 1.0 / 3.0e9 };
static const struct link_cost link_tcp = { "tcp", 40e-6, 1.0 / 1.2e9 };
static const double gamma_reduce = 1.0 / 4.0e9; /* seconds per byte reduced */
/* The shared-memory arena (coll_shm.c): a flag handoff between ranks (when
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
#define SHM_SMALL_ROUND (16u << 10)  /* coll_shm.c's SHM_SMALL_BYTES */

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

/* Broadcast, all-gather, reduce-scatter in the arena (coll_shm_collectives.c)
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
    return rounds * handoff + copies * S * shm_copy_beta + reductions * S * gamma_reduce;
}

static double shm_allreduce_time(double S, int n)
{
    long cpus = online_cpus();
    double rounds = S > SHM_ROUND_BYTES ? ceil(S / SHM_ROUND_BYTES) : 1, piece = S / rounds;
    bool over = n > cpus;
    if (piece <= SHM_SMALL_ROUND) /* stage all; every rank reduces everything */
        return rounds * (over ? shm_handoff_oversubscribed_small : shm_handoff) +
               S * shm_copy_beta + S * (n - 1) * gamma_reduce;
    double handoff = over ? shm_handoff_oversubscribed_large : shm_handoff;
    /* stage (n-1)/n, copy back 1/n, copy out (n-1)/n; reduce one block */
    return rounds * 2 * handoff + S * shm_copy_beta * (2.0 * n - 1) / n +
           S * (n - 1) / n * gamma_reduce;
}

#define MAX_CHUNKS 64

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

static size_t chunk_bytes = 256 << 10;

static void read_chunk_param(void)
{
    (void)gx_param_size(&gx_param_coll_chunk, &chunk_bytes);
    if (chunk_bytes < 4096)
        chunk_bytes = 4096;
}

int coll_chunks(size_t bytes)
{
    /* Read once: the environment lookup showed up in small collectives. */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_chunk_param);
    size_t chunk = chunk_bytes;
    size_t k = (bytes + chunk - 1) / chunk;
    return k < 1 ? 1 : k > MAX_CHUNKS ? MAX_CHUNKS : (int)k;
}

int coll_hier_segments(size_t bytes)
{
    /* A segment costs its phases' latencies again; below ~8 chunks the
     * overlap does not pay that back (measured on 2 netns nodes x 2 ranks). */
    int k = coll_chunks(bytes) / 8;
    return k < 1 ? 1 : k > 4 ? 4 : k;
}

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
    return (hops + k - 1) * (l->alpha + chunk * (l->beta + red * gamma_reduce));
}

/* `net`: the link between nodes (probed, or the tcp defaults). */
static double predict(enum coll_kind kind, enum coll_algo algo, size_t bytes, int n, int nodes,
                      const struct link_cost *net)
{
    if (!applies(kind, algo))
        return -1;
    if (n <= 1)
        return 0;
    const struct link_cost *l = nodes > 1 ? net : &link_shm;
    double S = (double)bytes, a = l->alpha, b = l->beta, g = gamma_reduce;
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

/* The node layout the model needs: node count, the largest node's rank
 * count L, whether nodes differ. hier applies with >= 2 nodes and L >= 2. */
struct node_shape {
    int nodes, L;
    bool uneven;
    int rails;   /* network links per node the rails spread over (GX_SOCKET_IFNAME's list) */
};

static bool hier_applies(const struct node_shape *sh)
{
    return sh->nodes > 1 && sh->L > 1;
}

/* The rails' candidates, in the order ties go. */
#define RAIL_ALGOS 4
static const enum coll_algo rail_algos[RAIL_ALGOS] = { COLL_ALGO_RING, COLL_ALGO_RHD,
                                                       COLL_ALGO_TREE, COLL_ALGO_DBTREE };

/* GX_HIER_RAIL: COLL_ALGO_AUTO, or the forced rail algorithm. */
static enum coll_algo forced_rail(void)
{
    int i = 0; /* malformed: gx_param_check_environment failed init already */
    (void)gx_param_enum(&gx_param_hier_rail, &i);
    return i >= 1 && i <= RAIL_ALGOS ? rail_algos[i - 1] : COLL_ALGO_AUTO;
}

/* One rail: an all-reduce of `shard` bytes among `nodes` ranks (one per
 * node) over `link`, by the fastest of ring, rhd, tree and dbtree (the flat
 * model, predict), or by `want` (not AUTO). Returns its time; *out (may be
 * NULL) gets the algorithm, times[] (may be NULL) each candidate's. */
static double rail_pick(size_t shard, int nodes, const struct link_cost *link,
                        enum coll_algo want, enum coll_algo *out, double times[RAIL_ALGOS])
{
    enum coll_algo best = COLL_ALGO_RING;
    double best_t = -1;
    for (int i = 0; i < RAIL_ALGOS; i++) {
        double t = predict(COLL_ALLREDUCE, rail_algos[i], shard, nodes, nodes, link);
        if (times)
            times[i] = t;
        bool pick = want != COLL_ALGO_AUTO ? rail_algos[i] == want
                                             : t >= 0 && (best_t < 0 || t < best_t);
        if (pick) {
            best = rail_algos[i];
            best_t = t;
        }
    }
    if (out)
        *out = best;
    return best_t;
}

/* A rail's link: the network link with its bandwidth shared by the node's L
 * rails over min(L, GX_SOCKET_IFNAME entries) links. */
static struct link_cost rail_link(const struct node_shape *sh, const struct link_cost *net)
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
static double predict_hier(size_t bytes, const struct node_shape *sh,
                           const struct link_cost *net, enum coll_algo *rail_out)
{
    if (!hier_applies(sh))
        return -1;
    double S = (double)bytes, L = sh->L, shard = S / L;
    const struct link_cost *l = &link_shm;
    double t_rs = (L - 1) * (l->alpha + shard * (l->beta + gamma_reduce));
    double t_ag = (L - 1) * (l->alpha + shard * l->beta);
    if (shm_node_engine_planned()) { /* arena/coll_shm_node.c */
        t_rs = shm_moves_time(shard, sh->L, sh->L, L - 1, L - 1);
        t_ag = shm_moves_time(shard, sh->L, 1, L - 1, 0);
    }
    struct link_cost rail = rail_link(sh, net);
    double t_rail = rail_pick((size_t)shard, sh->nodes, &rail, forced_rail(), rail_out, NULL);
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

/* `arena`: the communicator has a shared-memory arena (coll_shm.h); the
 * same on every rank. Forcing shm where there is none, or hier where it does
 * not apply, falls back to auto. */
double coll_predict(enum coll_kind kind, enum coll_algo algo, size_t bytes, int n, int nodes)
{
    return predict(kind, algo, bytes, n, nodes, &link_tcp);
}

static enum coll_algo choose(enum coll_kind kind, size_t bytes, int n, const struct node_shape *sh,
                             bool arena, const struct link_cost *net, bool *forced_out)
{
    pthread_once(&forced_once, parse_forced);
    int nodes = sh->nodes;
    *forced_out = forced[kind] != COLL_ALGO_AUTO && (forced[kind] != COLL_ALGO_SHM || arena) &&
                  (forced[kind] != COLL_ALGO_HIER || hier_applies(sh));
    if (*forced_out)
        return forced[kind];
    enum coll_algo best = applicable[kind][0];
    double best_t = predict(kind, best, bytes, n, nodes, net);
    for (int i = 1; i < MAX_APPLICABLE && applicable[kind][i]; i++) {
        enum coll_algo a = applicable[kind][i];
        if (a == COLL_ALGO_SHM && !arena)
            continue;
        double t = a == COLL_ALGO_HIER ? predict_hier(bytes, sh, net, NULL)
                                       : predict(kind, a, bytes, n, nodes, net);
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
    return comm->net_alpha > 0 ? probed : &link_tcp;
}

enum coll_algo coll_choose(const struct gx_comm *comm, enum coll_kind kind, size_t bytes)
{
    bool f;
    struct link_cost probed;
    struct node_shape sh = comm_shape(comm);
    return choose(kind, bytes, comm->size, &sh, comm->shm != NULL, comm_net(comm, &probed), &f);
}

enum coll_algo coll_hier_rail_algo(const struct gx_comm *comm, size_t bytes)
{
    struct link_cost probed;
    struct node_shape sh = comm_shape(comm);
    enum coll_algo rail = forced_rail();
    if (rail != COLL_ALGO_AUTO)
        return rail;
    (void)predict_hier(bytes, &sh, comm_net(comm, &probed), &rail);
    return rail;
}

/* ---- gx-info --tuning ------------------------------------------------------ */

static void fmt_time(char *buf, size_t len, double s)
{
    if (s < 0)
        snprintf(buf, len, "-");
    else if (s < 1e-3)
        snprintf(buf, len, "%.1fus", s * 1e6);
    else if (s < 1)
        snprintf(buf, len, "%.2fms", s * 1e3);
    else
        snprintf(buf, len, "%.2fs", s);
}

static void fmt_size(char *buf, size_t len, size_t b)
{
    if (b >= (1u << 30))
        snprintf(buf, len, "%zuG", b >> 30);
    else if (b >= (1u << 20))
        snprintf(buf, len, "%zuM", b >> 20);
    else if (b >= 1024)
        snprintf(buf, len, "%zuK", b >> 10);
    else
        snprintf(buf, len, "%zu", b);
}

/* The rails' algorithm per all-reduce size: each candidate's predicted time
 * for the 1/L shard and the pick (the `rail` column above). */
static void print_rails(FILE *f, const struct node_shape *sh, const struct link_cost *net)
{
    struct link_cost rl = rail_link(sh, net);
    enum coll_algo want = forced_rail();
    fprintf(f, "\nhier rails: one all-reduce of the 1/%d shard among %d nodes per rail "
            "(GX_HIER_RAIL=%s; * = the rail's algorithm)\n", sh->L, sh->nodes,
            gx_param_text(&gx_param_hier_rail));
    fprintf(f, "%10s %10s", "bytes", "shard");
    for (int i = 0; i < RAIL_ALGOS; i++)
        fprintf(f, " %11s", coll_algo_name(rail_algos[i]));
    fprintf(f, "   rail\n");
    for (size_t b = 4; b <= ((size_t)1 << 30); b *= 4) {
        size_t shard = b / (size_t)sh->L;
        double t[RAIL_ALGOS];
        enum coll_algo pick;
        (void)rail_pick(shard, sh->nodes, &rl, want, &pick, t);
        char sz[16], shs[16];
        fmt_size(sz, sizeof(sz), b);
        fmt_size(shs, sizeof(shs), shard);
        fprintf(f, "%10s %10s", sz, shs);
        for (int i = 0; i < RAIL_ALGOS; i++) {
            char tm[24], cell[32];
            fmt_time(tm, sizeof(tm), t[i]);
            snprintf(cell, sizeof(cell), "%s%s", tm, pick == rail_algos[i] ? "*" : "");
            fprintf(f, " %11s", cell);
        }
        fprintf(f, "   %s%s\n", coll_algo_name(pick), want != COLL_ALGO_AUTO ? " (GX_HIER_RAIL)" : "");
    }
}

int gx_coll_tuning_print(FILE *f, int nranks, int nnodes)
{
    return gx_coll_tuning_print_net(f, nranks, nnodes, 0, 0);
}

int gx_coll_tuning_print_net(FILE *f, int nranks, int nnodes, double net_alpha, double net_beta)
{
    struct link_cost given = { "given (--link)", net_alpha, net_beta };
    const struct link_cost *net = net_alpha > 0 && net_beta > 0 ? &given : &link_tcp;
    if (nranks < 1 || nnodes < 1 || nnodes > nranks)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "tuning: need 1 <= nodes (%d) <= ranks (%d)",
                       nnodes, nranks);
    const struct link_cost *l = nnodes > 1 ? net : &link_shm;
    fprintf(f, "collective algorithms for %d rank(s) on %d node(s)\n", nranks, nnodes);
    fprintf(f, "cost model: link %s alpha %.1f us, %.2f GB/s; reduction %.2f GB/s; "
            "pipelining chunk GX_COLL_CHUNK=%s\n", l->name, l->alpha * 1e6, 1e-9 / l->beta,
            1e-9 / gamma_reduce, gx_param_text(&gx_param_coll_chunk));
    if (nnodes > 1 && net == &link_tcp)
        fprintf(f, "(a communicator across nodes replaces the tcp figures with its own link's, "
                "probed at set-up: GX_COLL_PROBE; GX_DEBUG=info shows them)\n");
    fprintf(f, "GX_ALGO=%s\n\n", gx_param_text(&gx_param_algo));
    /* Nodes as even as the counts allow: the first nranks % nnodes get one more. */
    struct node_shape sh = { nnodes, (nranks + nnodes - 1) / nnodes, nranks % nnodes != 0,
                             gx_sock_rail_count() };
    if (nnodes > 1 && !hier_applies(&sh))
        fprintf(f, "hier: not applicable (one rank per node: the rails are the whole "
                "communicator)\n");
    else if (nnodes > 1 && sh.uneven)
        fprintf(f, "hier: nodes of %d and %d ranks: uneven, generalised (every segment cut "
                "into %d shards, the largest node's rank count; a smaller node's ranks own "
                "several shards and join several rails), not a flat fallback\n",
                sh.L, sh.L - 1, sh.L);
    else if (nnodes > 1)
        fprintf(f, "hier: %d nodes x %d ranks: reduce-scatter inside the node, %d rails "
                "between nodes (one per local rank, over %d network link(s) per node: "
                "GX_SOCKET_IFNAME's list), all-gather inside the node\n", nnodes, sh.L, sh.L,
                sh.rails < sh.L ? sh.rails : sh.L);
    if (nnodes > 1 && hier_applies(&sh))
        fprintf(f, "hier intra-node engine: %s%s\n", shm_node_engine_plan(),
                sh.uneven || nranks < 2 * nnodes ? "; a node of one rank has no intra-node phase"
                                                 : "");
    fprintf(f, "all_reduce (predicted time per algorithm; * = chosen; flat = best of the "
            "one-level ones)\n");
    /* One node: assume the shared-memory arena (GX_COLL_SHM=auto, shm links). */
    bool arena = nnodes == 1 && nranks > 1;
    fprintf(f, "%10s %11s %11s %11s %11s %11s %11s %11s   %-6s %s\n", "bytes", "ring", "rd",
            "rhd", "tree", "dbtree", "shm", "hier", "rail", "choice");
    static const enum coll_algo ar[7] = { COLL_ALGO_RING, COLL_ALGO_RD, COLL_ALGO_RHD,
                                          COLL_ALGO_TREE, COLL_ALGO_DBTREE, COLL_ALGO_SHM,
                                          COLL_ALGO_HIER };
    for (size_t b = 4; b <= ((size_t)1 << 30); b *= 4) {
        bool forced_flag;
        enum coll_algo c = choose(COLL_ALLREDUCE, b, nranks, &sh, arena, net,
                                  &forced_flag);
        enum coll_algo rail = COLL_ALGO_RING;
        double th = predict_hier(b, &sh, net, &rail), flat = -1;
        char sz[16];
        fmt_size(sz, sizeof(sz), b);
        fprintf(f, "%10s", sz);
        for (int i = 0; i < 7; i++) {
            char t[24], cell[32];
            double p = ar[i] == COLL_ALGO_HIER ? th
                                               : predict(COLL_ALLREDUCE, ar[i], b, nranks, nnodes,
                                                         net);
            if (ar[i] != COLL_ALGO_HIER && p >= 0 && (ar[i] != COLL_ALGO_SHM || arena) &&
                (flat < 0 || p < flat))
                flat = p;
            fmt_time(t, sizeof(t), p);
            snprintf(cell, sizeof(cell), "%s%s", t, c == ar[i] ? "*" : "");
            fprintf(f, " %11s", cell);
        }
        char ratio[32] = "";
        if (th > 0 && flat > 0)
            snprintf(ratio, sizeof(ratio), " (hier/flat %.2f)", th / flat);
        fprintf(f, "   %-6s %s%s%s\n", th >= 0 ? coll_algo_name(rail) : "-", coll_algo_name(c),
                forced_flag ? " (GX_ALGO)" : "", ratio);
    }
    if (hier_applies(&sh))
        print_rails(f, &sh, net);
    fprintf(f, "\nother collectives (chosen algorithm and predicted time; bytes per rank's "
            "block for allgather, reduce_scatter, gather, scatter, alltoall)\n");
    fprintf(f, "%10s", "bytes");
    for (int k = 1; k < COLL_KIND_COUNT; k++)
        fprintf(f, " %18s", coll_kind_name((enum coll_kind)k));
    fprintf(f, "\n");
    for (size_t b = 4; b <= ((size_t)1 << 30); b *= 16) {
        char sz[16];
        fmt_size(sz, sizeof(sz), b);
        fprintf(f, "%10s", sz);
        for (int k = 1; k < COLL_KIND_COUNT; k++) {
            bool forced_flag;
            enum coll_algo c = choose((enum coll_kind)k, b, nranks, &sh, arena, net,
                                      &forced_flag);
            char t[24], cell[40];
            fmt_time(t, sizeof(t), predict((enum coll_kind)k, c, b, nranks, nnodes, net));
            snprintf(cell, sizeof(cell), "%s %s", coll_algo_name(c), t);
            fprintf(f, " %18s", cell);
        }
        fprintf(f, "\n");
    }
    return GX_OK;
}
