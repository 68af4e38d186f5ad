/*
 * perf_opts.c - gx-perf's command line (see perf_opts.h).
 *
 * Flags and defaults are nccl-tests' (v2.13): -b 32M -e 32M -i 1M -f 1
 * -n 20 -w 5 -o sum -d float -r 0 -c 1 -z 0 -a 1, with the same long names,
 * so scripts written for all_reduce_perf work unchanged. -t and -g must be 1
 * (gx runs one rank per process: start more with gx-run -n N).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "perf_opts.h"

static const char *const dtype_names[GX_DATATYPE_COUNT] = {
    [GX_INT8] = "int8",       [GX_UINT8] = "uint8",   [GX_INT32] = "int32",
    [GX_UINT32] = "uint32",   [GX_INT64] = "int64",   [GX_UINT64] = "uint64",
    [GX_FLOAT16] = "half",    [GX_BFLOAT16] = "bfloat16",
    [GX_FLOAT32] = "float",   [GX_FLOAT64] = "double",
};

/* Other spellings accepted for -d (gx's own names and short forms). */
static const struct { const char *name; enum gx_datatype t; } dtype_aliases[] = {
    { "char", GX_INT8 },        { "i8", GX_INT8 },          { "u8", GX_UINT8 },
    { "int", GX_INT32 },        { "i32", GX_INT32 },        { "u32", GX_UINT32 },
    { "i64", GX_INT64 },        { "u64", GX_UINT64 },       { "float16", GX_FLOAT16 },
    { "f16", GX_FLOAT16 },      { "fp16", GX_FLOAT16 },     { "bf16", GX_BFLOAT16 },
    { "float32", GX_FLOAT32 },  { "f32", GX_FLOAT32 },      { "fp32", GX_FLOAT32 },
    { "float64", GX_FLOAT64 },  { "f64", GX_FLOAT64 },      { "fp64", GX_FLOAT64 },
};

static const char *const op_names[GX_REDOP_COUNT] = {
    [GX_SUM] = "sum", [GX_PROD] = "prod", [GX_MIN] = "min", [GX_MAX] = "max", [GX_AVG] = "avg",
};

const char *perf_dtype_name(enum gx_datatype t)
{
    return (unsigned)t < GX_DATATYPE_COUNT ? dtype_names[t] : "?";
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gx-run -n N gx-perf COLLECTIVE [options]\n"
            "Measure a gx collective the way nccl-tests' <collective>_perf does, with the\n"
            "same columns, bus-bandwidth factors and footer. Only rank 0 prints.\n\n"
            "COLLECTIVE: %s\n"
            "  (nccl-tests' program names work too: all_reduce_perf, or run gx-perf through\n"
            "  a symlink named all_reduce_perf)\n\n"
            "  -b, --minbytes SIZE      smallest size in bytes (default 32M); K, M, G = 2^10..\n"
            "  -e, --maxbytes SIZE      largest size (default 32M)\n"
            "  -i, --stepbytes SIZE     add this between sizes (default 1M)\n"
            "  -f, --stepfactor N       multiply by N between sizes instead (N > 1; after a\n"
            "                           size of 0 comes 1)\n"
            "  -n, --iters N            timed iterations per size (default 20)\n"
            "  -w, --warmup_iters N     untimed iterations before each timing (default 5)\n"
            "  -o, --op OP              sum prod min max avg, or all (default sum)\n"
            "  -d, --datatype TYPE      int8 uint8 int32 uint32 int64 uint64 half bfloat16\n"
            "                           float double, or all (default float)\n"
            "  -r, --root R             root of broadcast/reduce/gather/scatter (default 0)\n"
            "  -c, --check N            check the result N times per size; 0 = no check\n"
            "                           (#wrong reads N/A) (default 1)\n"
            "  -z, --blocking 0|1       1: blocking calls, each waited for; 0: non-blocking\n"
            "                           calls, all issued, then waited for (default 0)\n"
            "  -a, --average 0-3        time reported: 0 rank 0's, 1 mean, 2 min, 3 max over\n"
            "                           ranks (default 1)\n"
            "      --min-bw GB/S        exit 1 when the average bus bandwidth is lower\n"
            "      --json               print one JSON document instead of the table\n"
            "      --csv                print CSV rows instead of the table\n"
            "      --no-progress        no progress line on stderr for long sweeps\n"
            "      --device             buffers in CUDA device memory (GPU local rank modulo\n"
            "                           the GPUs; nccl-tests' -G is something else)\n"
            "  -h, --help               this help\n\n"
            "Sizes are total bytes as in nccl-tests (all_gather: the gathered buffer).\n"
            "algbw = size / time, busbw = algbw * factor: all_reduce 2(n-1)/n; all_gather,\n"
            "reduce_scatter, alltoall, gather, scatter (n-1)/n; broadcast, reduce 1.\n"
            "GB/s is 10^9 bytes per second. Warm-up runs before every timed size.\n"
            "Exit status: 0 ok; 1 wrong results, average busbw below --min-bw, or a gx\n"
            "error; 2 bad command line.\n",
            perf_coll_names());
}

struct parse_ctx {
    int loud;
};

static int bad(const struct parse_ctx *p, const char *fmt, const char *flag, const char *value)
{
    if (p->loud) {
        fprintf(stderr, "gx-perf: ");
        fprintf(stderr, fmt, flag, value);
        fprintf(stderr, "\n(try gx-perf --help)\n");
    }
    return 2;
}

/* nccl-tests' parsesize: a number with an optional K, M or G (powers of 2). */
static int parse_size(const struct parse_ctx *p, const char *flag, const char *text, size_t *out)
{
    char *end;
    errno = 0;
    if (text[0] == '-')
        return bad(p, "%s: '%s' is not a size (a number with an optional K, M or G suffix)",
                   flag, text);
    unsigned long long v = strtoull(text, &end, 10);
    unsigned long long mult = 1;
    if (end != text && *end) {
        switch (*end) {
        case 'k': case 'K': mult = 1ull << 10; break;
        case 'm': case 'M': mult = 1ull << 20; break;
        case 'g': case 'G': mult = 1ull << 30; break;
        default: mult = 0; break;
        }
        if (mult && end[1] && strcasecmp(end + 1, "b") != 0 && strcasecmp(end + 1, "ib") != 0)
            mult = 0;
    }
    if (end == text || errno || mult == 0 || v > (unsigned long long)SIZE_MAX / mult)
        return bad(p, "%s: '%s' is not a size (a number with an optional K, M or G suffix)",
                   flag, text);
    *out = (size_t)(v * mult);
    return 0;
}

static int parse_int(const struct parse_ctx *p, const char *flag, const char *text, long lo,
                     long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < lo || v > hi) {
        if (p->loud)
            fprintf(stderr, "gx-perf: %s: '%s' is not a whole number from %ld to %ld\n"
                    "(try gx-perf --help)\n", flag, text, lo, hi);
        return 2;
    }
    *out = (int)v;
    return 0;
}

static int parse_dtypes(const struct parse_ctx *p, const char *text, struct perf_opts *o)
{
    if (strcasecmp(text, "all") == 0) {
        for (int t = 0; t < GX_DATATYPE_COUNT; t++)
            o->dtypes[t] = (enum gx_datatype)t;
        o->ndtypes = GX_DATATYPE_COUNT;
        return 0;
    }
    for (int t = 0; t < GX_DATATYPE_COUNT; t++) {
        if (strcasecmp(text, dtype_names[t]) == 0) {
            o->dtypes[0] = (enum gx_datatype)t;
            o->ndtypes = 1;
            return 0;
        }
    }
    for (size_t i = 0; i < sizeof(dtype_aliases) / sizeof(dtype_aliases[0]); i++) {
        if (strcasecmp(text, dtype_aliases[i].name) == 0) {
            o->dtypes[0] = dtype_aliases[i].t;
            o->ndtypes = 1;
            return 0;
        }
    }
    return bad(p, "%s: unknown datatype '%s' (int8 uint8 int32 uint32 int64 uint64 half "
               "bfloat16 float double, or all)", "-d/--datatype", text);
}

static int parse_ops(const struct parse_ctx *p, const char *text, struct perf_opts *o)
{
    if (strcasecmp(text, "all") == 0) {
        for (int op = 0; op < GX_REDOP_COUNT; op++)
            o->ops[op] = (enum gx_redop)op;
        o->nops = GX_REDOP_COUNT;
        return 0;
    }
    for (int op = 0; op < GX_REDOP_COUNT; op++) {
        if (strcasecmp(text, op_names[op]) == 0) {
            o->ops[0] = (enum gx_redop)op;
            o->nops = 1;
            return 0;
        }
    }
    return bad(p, "%s: unknown op '%s' (sum prod min max avg, or all)", "-o/--op", text);
}

enum { OPT_MIN_BW = 256, OPT_JSON, OPT_CSV, OPT_NO_PROGRESS, OPT_DEVICE };

int perf_opts_parse(int argc, char **argv, const struct perf_coll *prog_coll, int loud,
                    struct perf_opts *o)
{
    static const struct option longopts[] = {
        { "minbytes", required_argument, NULL, 'b' },
        { "maxbytes", required_argument, NULL, 'e' },
        { "stepbytes", required_argument, NULL, 'i' },
        { "stepfactor", required_argument, NULL, 'f' },
        { "iters", required_argument, NULL, 'n' },
        { "warmup_iters", required_argument, NULL, 'w' },
        { "op", required_argument, NULL, 'o' },
        { "datatype", required_argument, NULL, 'd' },
        { "root", required_argument, NULL, 'r' },
        { "check", required_argument, NULL, 'c' },
        { "blocking", required_argument, NULL, 'z' },
        { "average", required_argument, NULL, 'a' },
        { "nthreads", required_argument, NULL, 't' },
        { "ngpus", required_argument, NULL, 'g' },
        { "min-bw", required_argument, NULL, OPT_MIN_BW },
        { "json", no_argument, NULL, OPT_JSON },
        { "csv", no_argument, NULL, OPT_CSV },
        { "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
        { "device", no_argument, NULL, OPT_DEVICE },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct parse_ctx p = { loud };
    *o = (struct perf_opts){
        .coll = prog_coll,
        .min_bytes = 32u << 20, .max_bytes = 32u << 20, .step_bytes = 1u << 20,
        .step_factor = 1, .iters = 20, .warmup = 5,
        .ops = { GX_SUM }, .nops = 1, .dtypes = { GX_FLOAT32 }, .ndtypes = 1,
        .root = 0, .check = 1, .blocking = 0, .average = PERF_AVG_MEAN,
        .min_bw = -1, .format = PERF_FORMAT_TABLE, .progress = 1,
    };
    int rc = 0, one = 0;
    opterr = 0; /* our own messages name the flag */
    int c;
    while (rc == 0 &&
           (c = getopt_long(argc, argv, ":b:e:i:f:n:w:o:d:r:c:z:a:t:g:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b': rc = parse_size(&p, "-b/--minbytes", optarg, &o->min_bytes); break;
        case 'e': rc = parse_size(&p, "-e/--maxbytes", optarg, &o->max_bytes); break;
        case 'i': rc = parse_size(&p, "-i/--stepbytes", optarg, &o->step_bytes); break;
        case 'f': {
            int v = 1;
            rc = parse_int(&p, "-f/--stepfactor", optarg, 1, 1 << 20, &v);
            o->step_factor = (size_t)v;
            break;
        }
        case 'n': rc = parse_int(&p, "-n/--iters", optarg, 1, 100000000, &o->iters); break;
        case 'w': rc = parse_int(&p, "-w/--warmup_iters", optarg, 0, 100000000, &o->warmup); break;
        case 'o': rc = parse_ops(&p, optarg, o); break;
        case 'd': rc = parse_dtypes(&p, optarg, o); break;
        case 'r': rc = parse_int(&p, "-r/--root", optarg, 0, 1 << 30, &o->root); break;
        case 'c': rc = parse_int(&p, "-c/--check", optarg, 0, 1000000, &o->check); break;
        case 'z': rc = parse_int(&p, "-z/--blocking", optarg, 0, 1, &o->blocking); break;
        case 'a': {
            int v = 0;
            rc = parse_int(&p, "-a/--average", optarg, 0, 3, &v);
            o->average = (enum perf_average)v;
            break;
        }
        case 't':
        case 'g':
            rc = parse_int(&p, c == 't' ? "-t/--nthreads" : "-g/--ngpus", optarg, 1, 1, &one);
            if (rc && loud)
                fprintf(stderr, "gx-perf runs one rank per process; start N ranks with "
                        "gx-run -n N gx-perf ...\n");
            break;
        case OPT_MIN_BW: {
            char *end;
            errno = 0;
            o->min_bw = strtod(optarg, &end);
            if (end == optarg || *end || errno || !(o->min_bw >= 0))
                rc = bad(&p, "%s: '%s' is not a bandwidth in GB/s (a number >= 0)", "--min-bw",
                         optarg);
            break;
        }
        case OPT_JSON: o->format = PERF_FORMAT_JSON; break;
        case OPT_CSV: o->format = PERF_FORMAT_CSV; break;
        case OPT_NO_PROGRESS: o->progress = 0; break;
        case OPT_DEVICE: o->device = 1; break;
        case 'h':
            if (loud)
                usage(stdout);
            return 1;
        case ':': {
            const char *flag = argv[optind - 1];
            if (loud)
                fprintf(stderr, "gx-perf: %s needs a value\n(try gx-perf --help)\n", flag);
            rc = 2;
            break;
        }
        default: {
            char shortflag[3] = { '-', (char)optopt, 0 };
            const char *flag = optopt ? shortflag : argv[optind - 1];
            if (loud)
                fprintf(stderr, "gx-perf: unknown option '%s'\n(try gx-perf --help)\n", flag);
            rc = 2;
            break;
        }
        }
    }
    if (rc)
        return rc;
    /* The collective: a word among the arguments (before or after flags). */
    for (int i = optind; i < argc; i++) {
        const struct perf_coll *named = perf_coll_find(argv[i]);
        if (!named) {
            if (loud)
                fprintf(stderr, "gx-perf: unknown collective '%s' (one of: %s)\n", argv[i],
                        perf_coll_names());
            return 2;
        }
        if (o->coll && o->coll != named) {
            if (loud)
                fprintf(stderr, "gx-perf: two collectives given ('%s' and '%s'); run one at a "
                        "time\n", o->coll->name, named->name);
            return 2;
        }
        o->coll = named;
    }
    if (!o->coll) {
        if (loud)
            fprintf(stderr, "gx-perf: no collective given (one of: %s)\n(try gx-perf --help)\n",
                    perf_coll_names());
        return 2;
    }
    if (o->min_bytes > o->max_bytes) {
        if (loud)
            fprintf(stderr, "gx-perf: -b/--minbytes %zu is larger than -e/--maxbytes %zu\n",
                    o->min_bytes, o->max_bytes);
        return 2;
    }
    if (o->step_factor <= 1 && o->step_bytes == 0 && o->min_bytes != o->max_bytes) {
        if (loud)
            fprintf(stderr, "gx-perf: -i/--stepbytes 0 never reaches -e/--maxbytes; give "
                    "-i > 0 or -f > 1\n");
        return 2;
    }
    return 0;
}
