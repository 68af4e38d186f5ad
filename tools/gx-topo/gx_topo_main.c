/*
 * gx-topo - print the machine's GPU/NIC topology as gx sees it and the NIC
 * and CPUs gx would choose for each local rank.
 *
 *   gx-topo [-n RANKS] [--xml FILE] [--hca SPEC] [-m | --json | --dot]
 */
#include "gx/gx.h"
#include "topo_print.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gx-topo [-n RANKS] [--xml FILE] [--hca SPEC] [-m | --json | --dot]\n"
            "  -n, --ranks N   show the placement of N local ranks (default: one per GPU, or 1)\n"
            "  -x, --xml FILE  read an hwloc XML topology instead of probing (as GX_TOPO_FILE)\n"
            "      --hca SPEC  RDMA device filter as GX_IB_HCA (\"mlx5_0:1,mlx5_1\", \"^mlx5_2\", \"=mlx5_0\")\n"
            "  -m, --matrix    only the path matrix and its legend, as nvidia-smi topo -m\n"
            "      --json      machine-readable output\n"
            "      --dot       Graphviz graph (gx-topo --dot | dot -Tsvg > topo.svg)\n"
            "  Environment: GX_TOPO_FILE, GX_TOPO_DUMP, GX_IB_HCA, GX_DEBUG=info.\n");
}

int main(int argc, char **argv)
{
    enum { OPT_JSON = 256, OPT_DOT, OPT_HCA };
    static const struct option opts[] = {
        { "ranks", required_argument, NULL, 'n' }, { "xml", required_argument, NULL, 'x' },
        { "json", no_argument, NULL, OPT_JSON },    { "dot", no_argument, NULL, OPT_DOT },
        { "hca", required_argument, NULL, OPT_HCA }, { "help", no_argument, NULL, 'h' },
        { "matrix", no_argument, NULL, 'm' },
        { NULL, 0, NULL, 0 },
    };
    int nranks = 0, format = 0, c;
    const char *xml = NULL, *hca = NULL;
    while ((c = getopt_long(argc, argv, "n:x:mh", opts, NULL)) != -1) {
        switch (c) {
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end != '\0' || v < 1 || v > 4096) {
                fprintf(stderr, "gx-topo: -n wants a rank count from 1 to 4096, not '%s'\n", optarg);
                return 2;
            }
            nranks = (int)v;
            break;
        }
        case 'x': xml = optarg; break;
        case OPT_JSON: format = 1; break;
        case OPT_DOT: format = 2; break;
        case 'm': format = 3; break;
        case OPT_HCA: hca = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gx-topo: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    /* The error is printed below once; keep the library's log quiet unless asked. */
    setenv("GX_DEBUG", "none", 0);

    struct gx_topo *topo;
    int rc = gx_topo_load(xml, &topo);
    if (rc != GX_OK) {
        fprintf(stderr, "gx-topo: %s\n", gx_last_error()[0] ? gx_last_error() : gx_strerror(rc));
        return 1;
    }
    if (nranks == 0) {
        nranks = gx_topo_device_count(topo, GX_TOPO_GPU);
        if (nranks == 0)
            nranks = 1;
    }
    struct gx_topo_placement *pl = calloc((size_t)nranks, sizeof(*pl));
    if (pl == NULL) {
        fprintf(stderr, "gx-topo: out of memory\n");
        gx_topo_free(topo);
        return 1;
    }
    for (int r = 0; r < nranks; r++)
        pl[r].size = sizeof(pl[r]);
    rc = gx_topo_place(topo, nranks, NULL, hca, pl);
    if (rc != GX_OK) {
        fprintf(stderr, "gx-topo: %s\n", gx_last_error());
        free(pl);
        gx_topo_free(topo);
        return 1;
    }
    if (format == 1)
        topo_print_json(stdout, topo, nranks, pl);
    else if (format == 2)
        topo_print_dot(stdout, topo);
    else if (format == 3)
        topo_print_matrix(stdout, topo);
    else
        topo_print_text(stdout, topo, nranks, pl);
    free(pl);
    gx_topo_free(topo);
    return fflush(stdout) == 0 ? 0 : 1;
}
