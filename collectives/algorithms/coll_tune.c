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
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <strings.h>

#include "collectives/algorithms/algo.h"
#include "collectives/algorithms/coll_tune.h"
#include "collectives/comm/comm_internal.h"
#include "common/log.h"
#include "common/param.h"
#include "common/sock.h"

GX_PARAM_DEFINE(gx_param_algo, "GX_ALGO", GX_PARAM_STRING, "auto", NULL,
                "Force collective algorithms: one of ring|tree|dbtree|rhd|rd|linear|shm|hier|auto "
                "for every collective it applies to, or per collective, e.g. "
                "\"allreduce:ring,broadcast:tree\". Must be the same on every rank. "
                "gx-info --tuning -n N shows the automatic choice.");

/* The rails' algorithm of the hierarchical all-reduce (coll_hier_rail.c). */
GX_PARAM_DEFINE(gx_param_hier_rail, "GX_HIER_RAIL", GX_PARAM_ENUM, "auto",
                "auto|ring|rhd|tree|dbtree",
                "The rails' all-reduce inside the hierarchical all-reduce (GX_ALGO=hier): "
                "ring|rhd|tree|dbtree|auto (auto: the cost model's pick for a 1/L shard over "
                "the network among the four). "
                "Must be the same on every rank (a mismatch fails with GX_EMISMATCH).");

GX_PARAM_DEFINE(gx_param_coll_node_link, "GX_COLL_NODE_LINK", GX_PARAM_STRING, "", NULL,
                "The cost model's link between ranks of one node, US:GBPS (us per message, "
                "GB/s), e.g. 1:450 for NVLink; unset: host shared memory (4 us, 3 GB/s). "
                "Prices one-node algorithms and hier's intra-node phases. Must be the same "
                "on every rank.");
GX_PARAM_DEFINE(gx_param_coll_reduce_gbps, "GX_COLL_REDUCE_GBPS", GX_PARAM_STRING, "", NULL,
                "The cost model's reduction rate, GB/s of reduced bytes (unset: 4, a host "
                "core). Must be the same on every rank.");

/* Measured with gx-bw / the collectives tests on the development machine. */
const struct link_cost coll_link_shm = { "shm", 4e-6, 1.0 / 3.0e9 };
const struct link_cost coll_link_tcp = { "tcp", 40e-6, 1.0 / 1.2e9 };
const double coll_gamma_reduce = 1.0 / 4.0e9; /* seconds per byte reduced */

/* ---- the node's inside (coll_tune.h) ------------------------------------- */

static struct link_cost node_link; /* coll_link_shm until given */
static double node_gamma;           /* coll_gamma_reduce until given */
static bool node_given;
static pthread_once_t node_once = PTHREAD_ONCE_INIT;

/* A positive number ending the text (or at ':'): 0, or -1. */
static int positive(const char *s, const char **end, double *out)
{
    char *e;
    double v = strtod(s, &e);
    if (e == s || !(v > 0) || v > 1e9)
        return -1;
    *end = e;
    *out = v;
    return 0;
}

static void read_node_params(void)
{
    node_link = coll_link_shm;
    node_gamma = coll_gamma_reduce;
    const char *t = gx_param_text(&gx_param_coll_node_link), *e;
    double us, gbps;
    if (*t) {
        if (positive(t, &e, &us) == 0 && *e == ':' && positive(e + 1, &e, &gbps) == 0 && !*e)
            node_link = (struct link_cost){ "node (GX_COLL_NODE_LINK)", us * 1e-6,
                                            1.0 / (gbps * 1e9) },
            node_given = true;
        else
            GX_WARN(GX_SUB_COLL, "GX_COLL_NODE_LINK: ignoring '%s' (expected US:GBPS, two "
                    "positive numbers, e.g. 1:450); the model keeps host shared memory", t);
    }
    t = gx_param_text(&gx_param_coll_reduce_gbps);
    if (*t) {
        if (positive(t, &e, &gbps) == 0 && !*e)
            node_gamma = 1.0 / (gbps * 1e9);
        else
            GX_WARN(GX_SUB_COLL, "GX_COLL_REDUCE_GBPS: ignoring '%s' (expected a positive "
                    "number of GB/s); the model keeps 4 GB/s", t);
    }
}

const struct link_cost *coll_tune_node_link(void)
{
    pthread_once(&node_once, read_node_params);
    return &node_link;
}

bool coll_tune_node_given(void)
{
    pthread_once(&node_once, read_node_params);
    return node_given;
}

double coll_tune_gamma(void)
{
    pthread_once(&node_once, read_node_params);
    return node_gamma;
}

void coll_tune_set_node(double alpha, double beta, double gamma)
{
    pthread_once(&node_once, read_node_params);
    if (alpha > 0)
        node_link.alpha = alpha, node_link.name = "node (set)", node_given = true;
    if (beta > 0)
        node_link.beta = beta, node_link.name = "node (set)", node_given = true;
    if (gamma > 0)
        node_gamma = gamma;
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
                if (algo == COLL_ALGO_AUTO || coll_algo_serves((enum coll_kind)k, (enum coll_algo)algo))
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
double coll_pipelined(const struct link_cost *l, double hops, size_t bytes, double red)
{
    double k = coll_chunks(bytes);
    double chunk = (double)bytes / k;
    return (hops + k - 1) * (l->alpha + chunk * (l->beta + red * coll_tune_gamma()));
}

/* The facts every cost function reads (coll_tune.h). */
static struct coll_model model(enum coll_kind kind, size_t bytes, int n, int nodes,
                               const struct node_shape *sh, const struct link_cost *net)
{
    const struct link_cost *l = nodes > 1 ? net : coll_tune_node_link();
    int p = coll_pof2(n);
    return (struct coll_model){
        .kind = kind, .bytes = bytes, .n = n, .nodes = nodes, .sh = sh, .net = net, .l = l,
        .S = (double)bytes, .a = l->alpha, .b = l->beta, .g = coll_tune_gamma(), .p = p,
        .L = log2i(p), .fold = p != n ? 1 : 0, .lg = log2i(n),
    };
}

/* `net`: the link between nodes (probed, or the tcp defaults). */
double coll_tune_predict(enum coll_kind kind, enum coll_algo algo, size_t bytes, int n, int nodes,
                         const struct link_cost *net)
{
    if (!coll_algo_serves(kind, algo))
        return -1;
    if (n <= 1)
        return 0;
    const struct coll_algo_desc *d = coll_algo_desc(algo);
    if (d->two_level) /* needs the node layout: coll_tune_predict_hier */
        return -1;
    struct coll_model m = model(kind, bytes, n, nodes, NULL, net);
    return d->cost(&m);
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
 * not apply, falls back to auto (the descriptors' usable()). */
enum coll_algo coll_tune_choose(enum coll_kind kind, size_t bytes, int n,
                                const struct node_shape *sh, bool arena,
                                const struct link_cost *net, bool *forced_out)
{
    pthread_once(&forced_once, parse_forced);
    int nodes = sh->nodes;
    const struct coll_algo_desc *f = coll_algo_desc(forced[kind]);
    *forced_out = f && (!f->usable || f->usable(sh, arena));
    if (*forced_out)
        return forced[kind];
    enum coll_algo cand[COLL_ALGO_COUNT];
    int ncand = coll_algo_candidates(kind, cand);
    enum coll_algo best = cand[0];
    double best_t = coll_tune_predict(kind, best, bytes, n, nodes, net);
    for (int i = 1; i < ncand; i++) {
        const struct coll_algo_desc *d = coll_algo_desc(cand[i]);
        if (d->usable && !d->usable(sh, arena))
            continue;
        double t;
        if (d->two_level) {
            struct coll_model m = model(kind, bytes, n, nodes, sh, net);
            t = d->cost(&m);
        } else {
            t = coll_tune_predict(kind, cand[i], bytes, n, nodes, net);
        }
        if (t >= 0 && t < best_t) {
            best_t = t;
            best = cand[i];
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
