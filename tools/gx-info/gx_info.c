/*
 * gx-info - what this gx build contains and what it finds on this machine.
 *
 *   gx-info          version, features (and why each is off), providers and
 *                    the devices each one finds, the GPUs (or why none)
 *   gx-info --env    every GX_* variable with its type, default and help
 *   gx-info --json   the first view as JSON
 *   gx-info --tuning -n N [--nodes M]
 *                    the collective algorithm chosen per size for N ranks
 *                    and the cost model's predicted times (coll_tune.c)
 *   gx-info --trace DIR   merge GX_TRACE timelines (trace_merge.c)
 *   gx-info --stats FILE  counters from GX_METRICS_FILE files (stats_read.c)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/algorithms/coll_tune.h"

#include "common/param.h"
#include "tools/gx-info/flight_merge.h"
#include "tools/gx-info/stats_read.h"
#include "tools/gx-info/trace_merge.h"
#include "fabric/fabric.h"
#include "gpudirect/gpu_nccl.h"
#include "gpudirect/gpu_reduce.h"
#include "gpudirect/gpudirect.h"
#include "gx/gx.h"
#include "gx_build_config.h"
#if GX_HAVE_VERBS
#include "fabric/verbs/verbs.h"
#include "fabric/verbs/verbs_rdmacm.h"
#endif

struct feature {
    const char *name;
    int on;
    const char *reason;
};

static const struct feature features[] = {
    { "verbs", GX_HAVE_VERBS, GX_REASON_VERBS },
    { "dpdk", GX_HAVE_DPDK, GX_REASON_DPDK },
    { "cuda", GX_HAVE_CUDA, GX_REASON_CUDA },
    { "nccl", GX_HAVE_NCCL, GX_REASON_NCCL },
    { "hwloc", GX_HAVE_HWLOC, GX_REASON_HWLOC },
    { "simgrid", GX_HAVE_SIMGRID, GX_REASON_SIMGRID }, /* gx-sim */
};
#define NFEATURES (sizeof(features) / sizeof(features[0]))

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static int print_env(void)
{
    printf("%-24s %-7s %-10s %s\n", "variable", "type", "default", "help");
    for (size_t i = 0; gx_param_at(i); i++) {
        const struct gx_param *p = gx_param_at(i);
        const char *def = p->default_value[0] ? p->default_value : "(unset)";
        printf("%-24s %-7s %-10s %s", p->name, gx_param_type_name(p->type), def, p->help);
        if (p->type == GX_PARAM_ENUM)
            printf(" [%s]", p->choices);
        if (gx_param_is_set(p))
            printf(" (now: %s)", gx_param_text(p));
        printf("\n");
    }
    return 0;
}

static void print_providers(bool json)
{
    if (json)
        printf("  \"providers\": [");
    else
        printf("\nproviders:\n");
    for (size_t i = 0; gx_fab_provider_at(i); i++) {
        const struct gx_fab_provider *prov = gx_fab_provider_at(i);
        struct gx_fab_devinfo devs[16];
        int count = 0;
        int rc = gx_fab_probe(prov, devs, 16, &count);
        if (json) {
            printf("%s\n    {\"name\": ", i ? "," : "");
            json_string(prov->name);
            printf(", \"status\": ");
            json_string(rc == GX_OK ? "ok" : gx_strerror(rc));
            printf(", \"devices\": [");
            for (int d = 0; rc == GX_OK && d < count && d < 16; d++) {
                printf("%s{\"name\": ", d ? ", " : "");
                json_string(devs[d].name);
                printf(", \"detail\": ");
                json_string(devs[d].detail);
                printf(", \"link_gbps\": %.1f}", (double)devs[d].link_bps * 8 / 1e9);
            }
            printf("]}");
            continue;
        }
        printf("  %-6s %s\n", prov->name, prov->description);
        if (rc != GX_OK) {
            printf("         no devices: %s%s%s\n", gx_strerror(rc), gx_last_error()[0] ? ": " : "",
                   gx_last_error());
        } else if (count == 0) {
            printf("         no devices found\n");
        }
        for (int d = 0; rc == GX_OK && d < count && d < 16; d++) {
            printf("         %-12s %s", devs[d].name, devs[d].detail);
            if (devs[d].link_bps)
                printf(" (%.1f Gb/s)", (double)devs[d].link_bps * 8 / 1e9);
            printf("\n");
        }
    }
    if (json)
        printf("\n  ]\n");
}

/* The CUDA driver gx would use (GX_CUDA_LIB) and its GPUs, or why none. */
static void print_gpus(bool json)
{
    char why[320];
    bool ok = gx_gpu_driver_available(why, sizeof(why));
    int n = ok ? gx_gpu_device_count() : 0, v = gx_gpu_driver_version();
    if (json) {
        printf("  \"gpus\": {\"driver\": %s, \"reason\": ", ok ? "true" : "false");
        json_string(why);
        printf(", \"driver_version\": %d, \"devices\": [", v);
    } else if (!ok) {
        printf("\nGPUs: %s\n", why);
    } else {
        printf("\nGPUs (CUDA driver %d.%d, device buffers staged through pinned host "
               "memory):\n", v / 1000, v % 1000 / 10);
    }
    for (int i = 0; i < n; i++) {
        char name[128] = "?", bus[32] = "?";
        size_t mem = 0;
        int rc = gx_gpu_device_describe(i, name, sizeof(name), bus, sizeof(bus), &mem);
        if (json) {
            printf("%s{\"index\": %d, \"name\": ", i ? ", " : "", i);
            json_string(rc == GX_OK ? name : gx_last_error());
            printf(", \"pci\": ");
            json_string(bus);
            printf(", \"memory_bytes\": %zu}", mem);
        } else if (rc == GX_OK) {
            printf("  %d  %-28s %-14s %.1f GiB\n", i, name, bus, (double)mem / (1 << 30));
        } else {
            printf("  %d  %s\n", i, gx_last_error());
        }
    }
    char nwhy[320], nuse[420]; /* nccl branch: whether NCCL runs device collectives */
    int nv = gx_nccl_version(nwhy, sizeof(nwhy));
    bool nreq = false;
    bool nused = gx_nccl_usable(&nreq, nuse, sizeof(nuse));
    char kernels[400]; /* branch kernels: gx's CUDA reduction kernels */
    (void)gx_gpu_kernels_describe(kernels, sizeof(kernels));
    if (json) {
        printf("], \"nccl\": {\"version_code\": %d, \"reason\": ", nv);
        json_string(nwhy);
        printf(", \"used_for_intra_node\": %s, \"use_reason\": ", nused ? "true" : "false");
        json_string(nuse);
        printf("}, \"cuda_kernels\": ");
        json_string(kernels);
        printf("},\n");
        return;
    }
    if (nused)
        printf("%s: used for intra-node device collectives\n", nuse);
    else if (nv)
        printf("NCCL: %s: not used (%s): device buffers are staged through host memory\n",
               nwhy, nuse);
    else
        printf("NCCL: %s\n", nwhy);
    printf("CUDA reduction kernels: %s\n", kernels);
}

static int print_info(bool json)
{
    if (json) {
        printf("{\n  \"version\": ");
        json_string(gx_version());
        printf(",\n  \"features\": {");
        for (size_t i = 0; i < NFEATURES; i++) {
            printf("%s\n    ", i ? "," : "");
            json_string(features[i].name);
            printf(": {\"on\": %s, \"reason\": ", features[i].on ? "true" : "false");
            json_string(features[i].reason);
            printf("}");
        }
        printf("\n  },\n");
        print_gpus(true);
        print_providers(true);
        printf("}\n");
        return 0;
    }
    printf("gx %s\n\nfeatures built in:\n", gx_version());
    for (size_t i = 0; i < NFEATURES; i++)
        printf("  %-6s %-3s  %s\n", features[i].name, features[i].on ? "on" : "off",
               features[i].reason);
    print_providers(false);
    print_gpus(false);
#if GX_HAVE_VERBS
    char gdr[2048] = "";
    if (gx_verbs_gdr_report(gdr, sizeof(gdr)) == GX_OK && gdr[0])
        printf("\nGPUDirect RDMA:\n%s%s", gdr, gdr[strlen(gdr) - 1] == '\n' ? "" : "\n");
    else
        printf("\nGPUDirect RDMA: no RDMA port to use it with\n");
    char cm[512];
    gx_verbs_rdmacm_report(cm, sizeof(cm));
    printf("\nverbs connection manager (GX_IB_CM=rdmacm):\n%s\n", cm);
#endif
    printf("\nrun 'gx-info --env' for every GX_* setting\n");
    return 0;
}

int main(int argc, char **argv)
{
    bool json = false, env = false, tuning = false;
    int tune_ranks = 0, tune_nodes = 1;
    double link_alpha = 0, link_beta = 0; /* --link: 0 = the tcp defaults */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tuning") == 0) {
            tuning = true;
        } else if ((strcmp(argv[i], "-n") == 0 || strcmp(argv[i], "--nodes") == 0) &&
                   i + 1 < argc) {
            *(argv[i][1] == 'n' ? &tune_ranks : &tune_nodes) = atoi(argv[i + 1]);
            i++;
        } else if (strcmp(argv[i], "--link") == 0 && i + 1 < argc) {
            char *end = NULL, *end2 = NULL;
            double us = strtod(argv[i + 1], &end), gbps = 0;
            if (end && *end == ':')
                gbps = strtod(end + 1, &end2);
            if (!end2 || *end2 || !(us > 0) || !(gbps > 0)) {
                fprintf(stderr, "gx-info: --link '%s': expected ALPHA_US:GBPS, both > 0 "
                        "(e.g. 5:12 for 5 us per message and 12 GB/s)\n", argv[i + 1]);
                return 2;
            }
            link_alpha = us * 1e-6;
            link_beta = 1.0 / (gbps * 1e9);
            i++;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--flight") == 0 && i + 1 < argc) {
            return gx_flight_merge(argv[i + 1], stdout);
        } else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
            const char *out = i + 3 < argc && strcmp(argv[i + 2], "-o") == 0 ? argv[i + 3] : NULL;
            return gx_trace_merge(argv[i + 1], out, stdout);
        } else if (strcmp(argv[i], "--stats") == 0 && i + 1 < argc) {
            return gx_stats_read(argc - i - 1, argv + i + 1, stdout);
        } else if (strcmp(argv[i], "--env") == 0) {
            env = true;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: gx-info [--json] [--env] [--tuning -n N [--nodes M] [--link A:B]] "
                   "[--flight DIR] [--trace DIR [-o FILE]] [--stats FILE...]\n"
                   "  (no option)  version, features and why each is off, providers, devices\n"
                   "  --json       the same as JSON\n"
                   "  --env        every GX_* variable: type, default, help, current value\n"
                   "  --trace DIR  merge the ranks' timelines in DIR (GX_TRACE) into one trace-event\n"
                   "               file, DIR/gx-trace.json or -o FILE, for Perfetto or\n"
                   "               chrome://tracing (exit 1: ranks missing or cut short)\n"
                   "  --stats FILE counters of a running job from its GX_METRICS_FILE files, one\n"
                   "               table row per rank and communicator\n"
                   "  --flight DIR merge the flight-recorder dumps in DIR (GX_FLIGHT_DIR) and\n"
                   "               name the first collective where ranks diverged (exit 1)\n"
                   "  --tuning     collective algorithm per size for N ranks on M nodes, with\n"
                   "               the cost model's predicted times (honours GX_ALGO and\n"
                   "               GX_HIER_RAIL; across nodes also each hier rail algorithm's)\n"
                   "  --link A:B   with --tuning: a network link of A us per message and B GB/s\n"
                   "               instead of the tcp defaults (what GX_COLL_PROBE measures)\n");
            return 0;
        } else {
            fprintf(stderr, "gx-info: unknown option '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    if (tuning) {
        if (tune_ranks < 1) {
            fprintf(stderr, "gx-info: --tuning needs -n RANKS (>= 1)\n");
            return 2;
        }
        return gx_coll_tuning_print_net(stdout, tune_ranks, tune_nodes, link_alpha,
                                        link_beta) == GX_OK ? 0 : 2;
    }
    return env ? print_env() : print_info(json);
}
