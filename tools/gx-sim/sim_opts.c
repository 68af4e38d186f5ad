/*
 * sim_opts.c - gx-sim's options and --help (sim_opts.h).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/gx-sim/sim_opts.h"

#define MIN_GPUS 2
#define MAX_GPUS 4096
#define MAX_SIZE (1ull << 31) /* steps keep 32-bit sizes */

static const char usage[] =
    "usage: gx-sim [options]\n"
    "Simulate gx's collectives on a machine of N GPUs (SimGrid): every rank's schedule\n"
    "is built by gx's own algorithm builders and executed step by step on a platform\n"
    "of nodes x GPUs, NVLink inside a node, one NIC per GPU, a two-level fat tree.\n"
    "Prints per collective, algorithm and size the predicted time and busbw in\n"
    "gx-perf's columns.\n\n"
    "  --gpus N[,N...]        GPUs (ranks), %d..%d (default 64)\n"
    "  --gpus-per-node G      GPUs per node (default 8); the last node may be smaller\n"
    "  --layout A+B+...       node sizes in rank order instead (e.g. 3+1+2; at most 64\n"
    "                         nodes); sets --gpus to their sum\n"
    "  --nics-per-node K      NICs per node, GPU i of a node on NIC i mod K (default:\n"
    "                         one per GPU; 1: the node's ranks share one link)\n"
    "  --msg-us X             software cost of a message on its sender, us of CPU\n"
    "                         time in series with its reductions (default 0)\n"
    "  --nic-gbps X           NIC bandwidth per GPU, Gb/s each way (default 400)\n"
    "  --nvlink-gbps X        NVLink bandwidth per GPU, Gb/s each way (default 3600)\n"
    "  --oversub X            leaf oversubscription, down/up capacity (default 1)\n"
    "  --nodes-per-leaf K     nodes under one leaf switch per rail (default 32)\n"
    "  --nic-lat-us X         one-way latency between GPUs under one leaf (default 2)\n"
    "  --spine-lat-us X       latency added through the spines (default 1)\n"
    "  --nvlink-lat-us X      one-way latency inside a node (default 1)\n"
    "  --mem-GBps X           memory traffic rate of reductions and copies (default 2000)\n"
    "  --coll C[,C...]        allreduce, broadcast, reduce, allgather, reducescatter,\n"
    "                         alltoall (default allreduce)\n"
    "  --algo A[,A...]        ring, tree, rhd, rd, linear, dbtree, hier, hier/RAIL\n"
    "                         (RAIL: ring, rhd, tree, dbtree; hier alone: the cost\n"
    "                         model's rail); default: every one that serves\n"
    "  --sizes LIST|MIN:MAX   bytes with K, M, G suffixes (default 1K:1G)\n"
    "  --factor F             MIN:MAX steps by this factor (default 4)\n"
    "  --regret               per size, the cost model's choice (gx-info --tuning)\n"
    "                         against the fastest simulated all-reduce algorithm\n"
    "                         (with --algo: the fastest of those)\n"
    "  --model-node sim|host  --regret: the cost model's node link and reduction rate\n"
    "                         are the simulated machine's (sim, default: NVLink,\n"
    "                         --mem-GBps / 3) or its host shared-memory defaults\n"
    "  --max-steps N          skip a simulation of more steps over all ranks\n"
    "                         (default 20000000; memory is 28 bytes a step)\n"
    "  --help                 this text\n";

static int bad(const char *opt, const char *arg, const char *why)
{
    fprintf(stderr, "gx-sim: %s '%s': %s (gx-sim --help)\n", opt, arg, why);
    return -1;
}

static int parse_double(const char *opt, const char *arg, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end)
        return bad(opt, arg, "not a number");
    if (!(v >= min && v <= max)) {
        char why[96];
        snprintf(why, sizeof(why), "out of range %g..%g", min, max);
        return bad(opt, arg, why);
    }
    *out = v;
    return 0;
}

static int parse_int(const char *opt, const char *arg, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end)
        return bad(opt, arg, "not an integer");
    if (v < min || v > max) {
        char why[96];
        snprintf(why, sizeof(why), "out of range %ld..%ld", min, max);
        return bad(opt, arg, why);
    }
    *out = v;
    return 0;
}

static int parse_size(const char *opt, const char *arg, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (errno || end == arg || arg[0] == '-')
        return bad(opt, arg, "not a size");
    unsigned long long mult = 1;
    if (*end == 'K' || *end == 'k')
        mult = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm')
        mult = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g')
        mult = 1ull << 30, end++;
    if (*end)
        return bad(opt, arg, "not a size (bytes, or with K, M, G)");
    if (v > MAX_SIZE / mult)
        return bad(opt, arg, "larger than 2 GiB");
    *out = (size_t)(v * mult);
    return 0;
}

static int parse_gpus(struct sim_opts *o, const char *arg)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    o->ngpus = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long v;
        if (o->ngpus == SIM_MAX_LIST)
            return bad("--gpus", arg, "too many values");
        if (parse_int("--gpus", t, MIN_GPUS, MAX_GPUS, &v) != 0)
            return -1;
        o->gpus[o->ngpus++] = (int)v;
    }
    return o->ngpus ? 0 : bad("--gpus", arg, "empty");
}

/* --layout A+B+...: node sizes; the GPUs are their sum, gpus_per_node the
 * largest. */
static int parse_layout(struct sim_opts *o, const char *arg)
{
    char buf[512];
    struct sim_machine *m = &o->machine;
    int total = 0, largest = 0;
    snprintf(buf, sizeof(buf), "%s", arg);
    m->layout_nodes = 0;
    for (char *save, *t = strtok_r(buf, "+", &save); t; t = strtok_r(NULL, "+", &save)) {
        long v;
        if (m->layout_nodes == SIM_MAX_LAYOUT)
            return bad("--layout", arg, "more than 64 nodes");
        if (parse_int("--layout", t, 1, 64, &v) != 0)
            return -1;
        m->layout[m->layout_nodes++] = (int)v;
        total += (int)v;
        largest = (int)v > largest ? (int)v : largest;
    }
    if (total < MIN_GPUS)
        return bad("--layout", arg, "fewer than 2 GPUs in all");
    m->gpus_per_node = largest;
    o->gpus[0] = total, o->ngpus = 1;
    return 0;
}

static int parse_colls(struct sim_opts *o, const char *arg)
{
    static const struct {
        const char *name;
        enum coll_kind kind;
    } names[] = { { "allreduce", COLL_ALLREDUCE },   { "broadcast", COLL_BROADCAST },
                  { "reduce", COLL_REDUCE },         { "allgather", COLL_ALLGATHER },
                  { "reducescatter", COLL_REDUCE_SCATTER }, { "alltoall", COLL_ALLTOALL } };
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    o->ncolls = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t k = 0;
        while (k < sizeof(names) / sizeof(names[0]) && strcmp(names[k].name, t) != 0)
            k++;
        if (k == sizeof(names) / sizeof(names[0]))
            return bad("--coll", t, "unknown collective (allreduce, broadcast, reduce, "
                       "allgather, reducescatter, alltoall)");
        if (o->ncolls == COLL_KIND_COUNT)
            return bad("--coll", arg, "too many values");
        o->colls[o->ncolls++] = names[k].kind;
    }
    return o->ncolls ? 0 : bad("--coll", arg, "empty");
}

static enum coll_algo algo_by_name(const char *s)
{
    for (int a = 1; a < COLL_ALGO_COUNT; a++)
        if (strcmp(coll_algo_name((enum coll_algo)a), s) == 0)
            return (enum coll_algo)a;
    return COLL_ALGO_AUTO;
}

static int parse_algos(struct sim_opts *o, const char *arg)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    o->nalgos = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *slash = strchr(t, '/');
        if (slash)
            *slash = '\0';
        struct sim_algo a = { algo_by_name(t), COLL_ALGO_AUTO };
        if (a.algo == COLL_ALGO_AUTO || a.algo == COLL_ALGO_SHM)
            return bad("--algo", t, "unknown algorithm (ring, tree, rhd, rd, linear, dbtree, "
                       "hier, hier/RAIL)");
        if (slash) {
            a.rail = algo_by_name(slash + 1);
            const struct coll_algo_desc *d = coll_algo_desc(a.rail);
            if (a.algo != COLL_ALGO_HIER || !d || !d->group)
                return bad("--algo", arg, "only hier takes a rail algorithm (ring, rhd, tree, "
                           "dbtree)");
        }
        if (o->nalgos == SIM_MAX_LIST)
            return bad("--algo", arg, "too many values");
        o->algos[o->nalgos++] = a;
    }
    return o->nalgos ? 0 : bad("--algo", arg, "empty");
}

static int parse_sizes(struct sim_opts *o, const char *arg, size_t factor)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    o->nsizes = 0;
    char *colon = strchr(buf, ':');
    if (colon) {
        size_t lo, hi;
        *colon = '\0';
        if (parse_size("--sizes", buf, &lo) != 0 || parse_size("--sizes", colon + 1, &hi) != 0)
            return -1;
        if (lo < 4 || hi < lo)
            return bad("--sizes", arg, "MIN:MAX needs 4 <= MIN <= MAX");
        for (size_t s = lo; s <= hi && o->nsizes < 64; s *= factor)
            o->sizes[o->nsizes++] = s;
        return 0;
    }
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == 64)
            return bad("--sizes", arg, "more than 64 sizes");
        if (parse_size("--sizes", t, &o->sizes[o->nsizes]) != 0)
            return -1;
        if (o->sizes[o->nsizes] < 4)
            return bad("--sizes", t, "smaller than one 4-byte element");
        o->nsizes++;
    }
    return o->nsizes ? 0 : bad("--sizes", arg, "empty");
}

void sim_algo_name(const struct sim_algo *a, char *buf, size_t len)
{
    if (a->algo == COLL_ALGO_HIER && a->rail != COLL_ALGO_AUTO)
        snprintf(buf, len, "hier/%s", coll_algo_name(a->rail));
    else
        snprintf(buf, len, "%s", coll_algo_name(a->algo));
}

int sim_opts_parse(struct sim_opts *o, int argc, char **argv)
{
    enum { O_GPUS = 256, O_GPN, O_NIC, O_NVL, O_OVER, O_NPL, O_NICLAT, O_SPINELAT, O_NVLLAT,
           O_MEM, O_COLL, O_ALGO, O_SIZES, O_FACTOR, O_REGRET, O_MAXSTEPS, O_HELP, O_LAYOUT,
           O_NICS, O_MSG, O_MODELNODE };
    static const struct option longs[] = {
        { "gpus", 1, NULL, O_GPUS },           { "gpus-per-node", 1, NULL, O_GPN },
        { "nic-gbps", 1, NULL, O_NIC },        { "nvlink-gbps", 1, NULL, O_NVL },
        { "oversub", 1, NULL, O_OVER },        { "nodes-per-leaf", 1, NULL, O_NPL },
        { "nic-lat-us", 1, NULL, O_NICLAT },   { "spine-lat-us", 1, NULL, O_SPINELAT },
        { "nvlink-lat-us", 1, NULL, O_NVLLAT }, { "mem-GBps", 1, NULL, O_MEM },
        { "coll", 1, NULL, O_COLL },           { "algo", 1, NULL, O_ALGO },
        { "sizes", 1, NULL, O_SIZES },         { "factor", 1, NULL, O_FACTOR },
        { "regret", 0, NULL, O_REGRET },       { "max-steps", 1, NULL, O_MAXSTEPS },
        { "help", 0, NULL, O_HELP },           { "layout", 1, NULL, O_LAYOUT },
        { "nics-per-node", 1, NULL, O_NICS },  { "msg-us", 1, NULL, O_MSG },
        { "model-node", 1, NULL, O_MODELNODE },
        { NULL, 0, NULL, 0 }
    };
    struct sim_machine m = SIM_MACHINE_DEFAULT;
    *o = (struct sim_opts){ .ngpus = 1, .gpus = { 64 }, .ncolls = 1,
                            .colls = { COLL_ALLREDUCE }, .max_steps = 20000000, .machine = m };
    const char *sizes = "1K:1G";
    long v, factor = 4;
    bool gpus_given = false;
    int c, rc = 0;
    opterr = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        struct sim_machine *M = &o->machine;
        switch (c) {
        case O_GPUS: rc = parse_gpus(o, optarg), gpus_given = true; break;
        case O_GPN:
            rc = parse_int("--gpus-per-node", optarg, 1, 64, &v);
            M->gpus_per_node = (int)v;
            break;
        case O_NIC: rc = parse_double("--nic-gbps", optarg, 0.001, 1e6, &M->nic_gbps); break;
        case O_NVL: rc = parse_double("--nvlink-gbps", optarg, 0.001, 1e6, &M->nvlink_gbps); break;
        case O_OVER: rc = parse_double("--oversub", optarg, 1, 64, &M->oversub); break;
        case O_NPL:
            rc = parse_int("--nodes-per-leaf", optarg, 1, 4096, &v);
            M->nodes_per_leaf = (int)v;
            break;
        case O_NICLAT: rc = parse_double("--nic-lat-us", optarg, 0, 1e6, &M->nic_lat_us); break;
        case O_SPINELAT:
            rc = parse_double("--spine-lat-us", optarg, 0, 1e6, &M->spine_lat_us);
            break;
        case O_NVLLAT:
            rc = parse_double("--nvlink-lat-us", optarg, 0, 1e6, &M->nvlink_lat_us);
            break;
        case O_MEM: rc = parse_double("--mem-GBps", optarg, 0.001, 1e6, &M->mem_gbytes); break;
        case O_COLL: rc = parse_colls(o, optarg); break;
        case O_ALGO: rc = parse_algos(o, optarg); break;
        case O_SIZES: sizes = optarg; break;
        case O_FACTOR: rc = parse_int("--factor", optarg, 2, 1024, &factor); break;
        case O_REGRET: o->regret = true; break;
        case O_MAXSTEPS: {
            long steps;
            rc = parse_int("--max-steps", optarg, 1, 2000000000L, &steps);
            o->max_steps = (size_t)steps;
            break;
        }
        case O_LAYOUT: rc = parse_layout(o, optarg); break;
        case O_NICS:
            rc = parse_int("--nics-per-node", optarg, 1, 64, &v);
            M->nics_per_node = (int)v;
            break;
        case O_MSG: rc = parse_double("--msg-us", optarg, 0, 1e6, &M->msg_us); break;
        case O_MODELNODE:
            if (strcmp(optarg, "sim") == 0 || strcmp(optarg, "host") == 0)
                o->model_host = strcmp(optarg, "host") == 0;
            else
                rc = bad("--model-node", optarg, "sim or host");
            break;
        case O_HELP: printf(usage, MIN_GPUS, MAX_GPUS); return 1;
        default:
            fprintf(stderr, "gx-sim: %s: %s (gx-sim --help)\n", argv[optind - 1],
                    optopt ? "needs a value" : "unknown option");
            return -1;
        }
    }
    if (rc == 0 && o->machine.layout_nodes && gpus_given)
        rc = bad("--gpus", "", "not with --layout (the layout's sizes sum to the GPUs)");
    if (rc == 0 && o->machine.nics_per_node > o->machine.gpus_per_node)
        o->machine.nics_per_node = o->machine.gpus_per_node; /* no more NICs than GPUs */
    if (rc == 0 && optind < argc)
        rc = bad("argument", argv[optind], "gx-sim takes options only");
    if (rc == 0)
        rc = parse_sizes(o, sizes, (size_t)factor);
    return rc;
}
