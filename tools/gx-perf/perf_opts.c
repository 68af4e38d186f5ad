/*
 * perf_opts.c - gx-perf's command line (see perf_opts.h).
 *
 * Flags and defaults are nccl-tests' (v2.19): -b 32M -e 32M -i 1M -f 1
 * -n 20 -m 1 -w 5 -N 1 -o sum -d float -r 0 -c 1 -z 0 -a 1, with the same long
 * names, so scripts written for all_reduce_perf work unchanged. Every other
 * nccl-tests flag is accepted with its meaning (-m -N -T -C -S -J -u, -z 0..3,
 * -r -1), accepted where it cannot change anything for host buffers (-p -y
 * -R, and -G/-D/-I/-K/-M at 0), or refused with "not supported in gx-perf"
 * (-G/-D/-I/-K/-M above 0, -x, -V). -t and -g must be 1 (gx runs one rank per
 * process: start more with gx-run -n N).
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
            "  -r, --root R             root of broadcast/reduce/gather/scatter (default 0);\n"
            "                           -1: a sweep for every root in turn\n"
            "  -c, --check N            check the result N times per size; 0 = no check\n"
            "                           (#wrong reads N/A) (default 1)\n"
            "  -z, --blocking 0-3       0: non-blocking calls, all issued, then waited for;\n"
            "                           1: each waited for, then a barrier; 2: each waited\n"
            "                           for, no barrier; 3: each waited for, a barrier after\n"
            "                           each iteration of -m operations, left out of the\n"
            "                           time (nccl-tests' meanings) (default 0)\n"
            "  -m, --agg_iters N        operations per timed iteration (default 1)\n"
            "  -N, --run_cycles N       run the sweep N times, printing each (default 1)\n"
            "  -a, --average 0-3        time reported: 0 rank 0's, 1 mean, 2 min, 3 max over\n"
            "                           ranks (default 1)\n"
            "  -T, --timeout S          a measurement that takes longer than S seconds\n"
            "                           stops gx-perf with exit 1 (default 0: none)\n"
            "  -C, --report_cputime 0|1 label the time column cputime (gx-perf always times\n"
            "                           with the host clock)\n"
            "  -S, --report_timestamps 0|1  end each row with the time it was measured\n"
            "  -J, --output_file FILE   also write nccl-tests' JSON to FILE (FILE.0, .1 ...\n"
            "                           when it exists)\n"
            "  -u, --unalign N          buffers start N elements past their alignment\n"
            "  -p, -y, -R               accepted; no effect on host buffers (one rank per\n"
            "                           process, no CUDA streams, gx registers itself)\n"
            "  -G, -D, -I, -K, -M       accepted at 0; above 0: not supported in gx-perf\n"
            "                           (CUDA graphs, device API, per-iteration and memory\n"
            "                           reports); -x and -V: not supported in gx-perf\n"
            "      --min-bw GB/S        exit 1 when the average bus bandwidth is lower\n"
            "  NCCL_TESTS_MIN_BW=GB/S   as nccl-tests: exit 1 when the average bus bandwidth\n"
            "                           is below 90%% of it\n"
            "      --json               print one JSON document instead of the table\n"
            "      --csv                print CSV rows instead of the table\n"
            "      --no-progress        no progress line on stderr for long sweeps\n"
            "      --device             buffers in CUDA device memory (GPU local rank modulo\n"
            "                           the GPUs; nccl-tests' -G is something else)\n"
            "      --compute_us US      before each timed operation, US microseconds of CPU\n"
            "                           work on each rank (its own CPU time, so the same\n"
            "                           work however the CPUs are shared), timed with it: a\n"
            "                           training step's compute, to show what waiting ranks\n"
            "                           take from ranks that compute (perf/wait_bench.sh)\n"
            "  -h, --help               this help\n\n"
            "Sizes are total bytes as in nccl-tests (all_gather: the gathered buffer);\n"
            "count is the count passed to the collective, per rank for all_gather,\n"
            "reduce_scatter, alltoall, gather and scatter, whose per-rank shares round\n"
            "down to 16 bytes as in nccl-tests.\n"
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

enum { OPT_MIN_BW = 256, OPT_JSON, OPT_CSV, OPT_NO_PROGRESS, OPT_DEVICE, OPT_COMPUTE_US };

/* nccl-tests flags that cannot mean anything for gx: accepted at 0 (their
 * default), refused above. */
static int only_zero(const struct parse_ctx *p, char flag, const char *text, const char *what)
{
    char name[4] = { '-', flag, 0 };
    int v = 0;
    int rc = parse_int(p, name, text, 0, 1 << 30, &v);
    if (rc == 0 && v != 0) {
        if (p->loud)
            fprintf(stderr, "gx-perf: -%c %d: %s is not supported in gx-perf (only -%c 0)\n",
                    flag, v, what, flag);
        rc = 2;
    }
    return rc;
}

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
        { "agg_iters", required_argument, NULL, 'm' },
        { "run_cycles", required_argument, NULL, 'N' },
        { "parallel_init", required_argument, NULL, 'p' },
        { "stream_null", required_argument, NULL, 'y' },
        { "timeout", required_argument, NULL, 'T' },
        { "cudagraph", required_argument, NULL, 'G' },
        { "report_cputime", required_argument, NULL, 'C' },
        { "report_timestamps", required_argument, NULL, 'S' },
        { "output_file", required_argument, NULL, 'J' },
        { "local_register", required_argument, NULL, 'R' },
        { "cta_policy", required_argument, NULL, 'x' },
        { "device_implementation", required_argument, NULL, 'D' },
        { "device_cta_count", required_argument, NULL, 'V' },
        { "memory", required_argument, NULL, 'M' },
        { "unalign", required_argument, NULL, 'u' },
        { "per_iter_timing", required_argument, NULL, 'I' },
        { "per_iter_skip", required_argument, NULL, 'K' },
        { "device", no_argument, NULL, OPT_DEVICE },
        { "compute_us", required_argument, NULL, OPT_COMPUTE_US },
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
        .agg_iters = 1, .run_cycles = 1,
    };
    int ignored = 0;
    int rc = 0, one = 0;
    opterr = 0; /* our own messages name the flag */
    int c;
    while (rc == 0 &&
           (c = getopt_long(argc, argv, ":b:e:i:f:n:w:o:d:r:c:z:a:t:g:m:N:p:y:T:G:C:S:J:R:x:D:V:M:u:I:K:h", longopts, NULL)) != -1) {
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
        case 'r': rc = parse_int(&p, "-r/--root", optarg, -1, 1 << 30, &o->root); break;
        case 'c': rc = parse_int(&p, "-c/--check", optarg, 0, 1000000, &o->check); break;
        case 'z': rc = parse_int(&p, "-z/--blocking", optarg, 0, 3, &o->blocking); break;
        case 'm': rc = parse_int(&p, "-m/--agg_iters", optarg, 1, 1000000, &o->agg_iters); break;
        case 'N':
            rc = parse_int(&p, "-N/--run_cycles", optarg, 0, 1000000, &o->run_cycles);
            if (rc == 0 && o->run_cycles == 0) {
                if (loud)
                    fprintf(stderr, "gx-perf: -N 0 (run forever) is not supported in gx-perf; "
                            "give a number of cycles\n");
                rc = 2;
            }
            break;
        case 'T': rc = parse_int(&p, "-T/--timeout", optarg, 0, 1000000, &o->timeout_s); break;
        case 'C': rc = parse_int(&p, "-C/--report_cputime", optarg, 0, 1, &o->report_cputime); break;
        case 'S':
            rc = parse_int(&p, "-S/--report_timestamps", optarg, 0, 1, &o->report_timestamps);
            break;
        case 'J': o->json_file = optarg; break;
        case 'u': rc = parse_int(&p, "-u/--unalign", optarg, 0, 4096, &o->unalign); break;
        case 'p': rc = parse_int(&p, "-p/--parallel_init", optarg, 0, 1, &ignored); break;
        case 'y': rc = parse_int(&p, "-y/--stream_null", optarg, 0, 1, &ignored); break;
        case 'R': rc = parse_int(&p, "-R/--local_register", optarg, 0, 2, &ignored); break;
        case 'G': rc = only_zero(&p, 'G', optarg, "CUDA graph launch"); break;
        case 'D': rc = only_zero(&p, 'D', optarg, "the NCCL device implementation"); break;
        case 'I': rc = only_zero(&p, 'I', optarg, "per-iteration timing"); break;
        case 'K': rc = only_zero(&p, 'K', optarg, "per-iteration skipping"); break;
        case 'M': rc = only_zero(&p, 'M', optarg, "the GPU memory report"); break;
        case 'x':
        case 'V':
            if (loud)
                fprintf(stderr, "gx-perf: -%c (%s) is not supported in gx-perf: gx runs no "
                        "CUDA kernels\n", c, c == 'x' ? "cta_policy" : "device_cta_count");
            rc = 2;
            break;
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
        case OPT_COMPUTE_US:
            rc = parse_int(&p, "--compute_us", optarg, 0, 10000000, &o->compute_us);
            break;
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
    /* nccl-tests' NCCL_TESTS_MIN_BW, with its 10% tolerance; --min-bw wins. */
    const char *env_bw = getenv("NCCL_TESTS_MIN_BW");
    if (o->min_bw >= 0) {
        o->min_bw_from = "--min-bw";
    } else if (env_bw && env_bw[0]) {
        char *end;
        double v = strtod(env_bw, &end);
        if (end == env_bw || *end || !(v >= 0)) {
            if (loud)
                fprintf(stderr, "gx-perf: NCCL_TESTS_MIN_BW='%s' is not a bandwidth in GB/s\n",
                        env_bw);
            return 2;
        }
        o->min_bw = v * 0.9;
        o->min_bw_from = "NCCL_TESTS_MIN_BW";
    }
    snprintf(o->prog_name_buf, sizeof(o->prog_name_buf), "%s_perf", o->coll->name);
    o->prog_name = o->prog_name_buf;
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
