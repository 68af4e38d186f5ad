/*
 * gx-accept - cluster acceptance test: node checks against a spec, the
 * point-to-point matrix between every pair of nodes, busbw sweeps, a
 * checksummed soak, outliers named with their numbers; a console summary,
 * JSON, JUnit XML and a one-file HTML report. Started like every gx job:
 *
 *   gx-run -n 1 --nnodes 4 --node-rank K --master HOST:PORT gx-accept --spec rack.json
 *   gx-accept --check-spec rack.json        (only validate the spec, no job)
 *
 * Exit status: 0 every check passed or was skipped, 1 a check failed (or
 * the job broke), 2 bad command line or spec. Rank 0 reads the spec and
 * sends it to the others, so only rank 0's node needs the file.
 *
 * Owns the command line, the run's order of phases, progress and the output
 * files; the checks live in accept_node.c / accept_fabric.c, the judgement
 * of outliers in accept_result.c, the formats in accept_report.c / _html.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "accept.h"

struct opts {
    const char *spec, *json, *junit, *html, *out_dir;
    int check_only, quiet;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gx-accept --spec FILE [--json FILE] [--junit FILE] [--html FILE] [--out DIR]\n"
            "       gx-accept --check-spec FILE\n"
            "Cluster acceptance test; run one or more ranks per node under gx-run, torchrun,\n"
            "Slurm or mpirun. The spec (JSON, see docs/accept.md) holds the expectations.\n\n"
            "  -s, --spec FILE       the spec (read on rank 0 only)\n"
            "      --check-spec FILE validate the spec and exit (0 valid, 2 not), no job\n"
            "      --json FILE       write the results as JSON\n"
            "      --junit FILE      write JUnit XML (one testcase per check and subject)\n"
            "      --html FILE       write the self-contained HTML report\n"
            "  -o, --out DIR         write accept.json, accept.junit.xml and accept.html there\n"
            "  -q, --quiet           no progress lines\n"
            "  -h, --help            this text\n\n"
            "Node names are GX_NODE_ID (gx-run --node-id) or the host name. Exit status: 0 all\n"
            "checks passed or skipped, 1 a check failed or the job broke, 2 bad usage or spec.\n");
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {
        { "spec", required_argument, NULL, 's' },   { "check-spec", required_argument, NULL, 'c' },
        { "json", required_argument, NULL, 'j' },   { "junit", required_argument, NULL, 'u' },
        { "html", required_argument, NULL, 'H' },   { "out", required_argument, NULL, 'o' },
        { "quiet", no_argument, NULL, 'q' },        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    memset(o, 0, sizeof(*o));
    while ((c = getopt_long(argc, argv, "s:o:qh", lo, NULL)) != -1) {
        switch (c) {
        case 's': o->spec = optarg; break;
        case 'c': o->spec = optarg, o->check_only = 1; break;
        case 'j': o->json = optarg; break;
        case 'u': o->junit = optarg; break;
        case 'H': o->html = optarg; break;
        case 'o': o->out_dir = optarg; break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gx-accept: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!o->spec) {
        fprintf(stderr, "gx-accept: --spec FILE is required (see gx-accept --help)\n");
        return 2;
    }
    return 0;
}

double accept_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void accept_die(const struct accept_ctx *x, const char *what, int rc)
{
    const char *detail = gx_last_error();
    fprintf(stderr, "gx-accept: rank %d (node %s): %s failed: %s%s%s\n", x->rank, x->node_name,
            what, gx_strerror(rc), detail[0] ? ": " : "", detail);
    exit(1);
}

void accept_progress(struct accept_ctx *x, const char *fmt, ...)
{
    if (x->rank != 0 || x->progress_tty < 0)
        return;
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* A new phase always prints; progress within a phase at most every 2 s
     * (a TTY bar redraws every 0.2 s). */
    double now = accept_now_s();
    if (x->step == x->last_step && now - x->last_progress_s < (x->progress_tty ? 0.2 : 2.0))
        return;
    x->last_step = x->step;
    x->last_progress_s = now;
    int done = x->steps ? x->step * 30 / x->steps : 0;
    if (x->progress_tty) {
        fprintf(stderr, "\r\033[K[%.*s%.*s] %d/%d %s", done,
                "##############################", 30 - done, "..............................",
                x->step, x->steps, msg);
    } else {
        fprintf(stderr, "gx-accept: [%d/%d] %s\n", x->step, x->steps, msg);
    }
    fflush(stderr);
}

void accept_progress_clear(struct accept_ctx *x)
{
    if (x->rank == 0 && x->progress_tty > 0)
        fprintf(stderr, "\r\033[K");
}

int accept_gather(struct accept_ctx *x, const void *mine, void *all, size_t len)
{
    if (x->rank != 0)
        return gx_send(x->comm, mine, len, GX_UINT8, 0, ACCEPT_TAG_GATHER);
    memcpy(all, mine, len);
    for (int r = 1; r < x->nranks; r++) {
        int rc = gx_recv(x->comm, (char *)all + (size_t)r * len, len, GX_UINT8, r,
                         ACCEPT_TAG_GATHER, NULL);
        if (rc)
            return rc;
    }
    return 0;
}

/* Rank 0 reads the spec and sends {status, spec} to every rank. */
static int share_spec(struct accept_ctx *x, const char *path)
{
    struct {
        int status;
        char err[480];
        struct accept_spec spec;
    } msg;
    memset(&msg, 0, sizeof(msg));
    int rc;
    if (x->rank == 0) {
        msg.status = accept_spec_load(path, &msg.spec, msg.err, sizeof(msg.err));
        for (int r = 1; r < x->nranks; r++)
            if ((rc = gx_send(x->comm, &msg, sizeof(msg), GX_UINT8, r, ACCEPT_TAG_GATHER)))
                accept_die(x, "sending the spec", rc);
        if (msg.status)
            fprintf(stderr, "gx-accept: %s\n", msg.err);
    } else if ((rc = gx_recv(x->comm, &msg, sizeof(msg), GX_UINT8, 0, ACCEPT_TAG_GATHER, NULL))) {
        accept_die(x, "receiving the spec from rank 0", rc);
    }
    x->spec = msg.spec;
    return msg.status;
}

static void node_identity(struct accept_ctx *x)
{
    const char *id = getenv("GX_NODE_ID");
    char host[ACCEPT_NAME_MAX] = "";
    if (!id || !id[0]) {
        if (gethostname(host, sizeof(host) - 1) != 0)
            snprintf(host, sizeof(host), "node%d", gx_comm_node_index(x->comm));
        id = host;
    }
    snprintf(x->node_name, sizeof(x->node_name), "%s", id);
    x->node = gx_comm_node_index(x->comm);
    x->nnodes = gx_comm_node_count(x->comm);
    x->local_rank = gx_comm_local_rank(x->comm);
    x->local_size = gx_comm_local_size(x->comm);
}

/* Every rank learns every rank's node; rank 0 also each node's name. */
static int map_nodes(struct accept_ctx *x)
{
    x->node_of_rank = calloc((size_t)x->nranks, sizeof(int));
    x->leader_of_node = calloc((size_t)x->nnodes, sizeof(int));
    if (!x->node_of_rank || !x->leader_of_node)
        return GX_ENOMEM;
    int rc = gx_allgather(x->comm, &x->node, x->node_of_rank, 1, GX_INT32);
    if (rc)
        return rc;
    for (int k = 0; k < x->nnodes; k++)
        x->leader_of_node[k] = -1;
    for (int r = x->nranks - 1; r >= 0; r--)
        if (x->node_of_rank[r] >= 0 && x->node_of_rank[r] < x->nnodes)
            x->leader_of_node[x->node_of_rank[r]] = r;
    char(*names)[ACCEPT_NAME_MAX] = x->rank == 0 ? calloc((size_t)x->nranks, ACCEPT_NAME_MAX)
                                                 : NULL;
    if (x->rank == 0 && !names)
        return GX_ENOMEM;
    rc = accept_gather(x, x->node_name, names, ACCEPT_NAME_MAX);
    if (!rc && x->rank == 0) {
        x->res->node_names = calloc((size_t)x->nnodes, ACCEPT_NAME_MAX);
        if (!x->res->node_names)
            rc = GX_ENOMEM;
        for (int k = 0; !rc && k < x->nnodes; k++)
            memcpy(x->res->node_names[k], names[x->leader_of_node[k]], ACCEPT_NAME_MAX);
    }
    free(names);
    return rc;
}

/* Output files refuse a planted symbolic link and a file owned by someone
 * else (checked before truncating), and are created 0644. */
static int write_output(const char *path, int (*fn)(FILE *, const struct accept_results *),
                        const struct accept_results *r)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
        fprintf(stderr, "gx-accept: refusing to write %s: not a regular file of yours\n", path);
        close(fd);
        return -1;
    }
    FILE *f = fd >= 0 && ftruncate(fd, 0) == 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "gx-accept: cannot write %s: %s%s\n", path, strerror(errno),
                errno == ELOOP ? " (a symbolic link is refused)" : "");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int rc = fn(f, r);
    if (fclose(f) != 0 || rc) {
        fprintf(stderr, "gx-accept: writing %s failed\n", path);
        return -1;
    }
    return 0;
}

static int write_outputs(const struct opts *o, const struct accept_results *r)
{
    int bad = 0;
    char path[4096];
    if (o->json)
        bad |= write_output(o->json, accept_report_json, r);
    if (o->junit)
        bad |= write_output(o->junit, accept_report_junit, r);
    if (o->html)
        bad |= write_output(o->html, accept_report_html, r);
    if (o->out_dir) {
        if (mkdir(o->out_dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "gx-accept: cannot create --out %s: %s\n", o->out_dir,
                    strerror(errno));
            return -1;
        }
        snprintf(path, sizeof(path), "%s/accept.json", o->out_dir);
        bad |= write_output(path, accept_report_json, r);
        snprintf(path, sizeof(path), "%s/accept.junit.xml", o->out_dir);
        bad |= write_output(path, accept_report_junit, r);
        snprintf(path, sizeof(path), "%s/accept.html", o->out_dir);
        bad |= write_output(path, accept_report_html, r);
    }
    return bad;
}

static void run_phase(struct accept_ctx *x, const char *what, int (*fn)(struct accept_ctx *))
{
    x->step++;
    accept_progress(x, "%s", what);
    int rc = fn(x);
    if (rc)
        accept_die(x, what, rc);
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (o.check_only) {
        struct accept_spec spec;
        char err[512];
        if (accept_spec_load(o.spec, &spec, err, sizeof(err))) {
            fprintf(stderr, "gx-accept: %s\n", err);
            return 2;
        }
        printf("gx-accept: %s: spec is valid\n", o.spec);
        return 0;
    }
    struct accept_ctx x = { .rank = -1 };
    snprintf(x.node_name, sizeof(x.node_name), "?");
    rc = gx_comm_init_env(&x.comm);
    if (rc)
        accept_die(&x, "gx_comm_init_env (run gx-accept under gx-run, torchrun or mpirun)", rc);
    x.rank = gx_comm_rank(x.comm);
    x.nranks = gx_comm_size(x.comm);
    node_identity(&x);
    if (share_spec(&x, o.spec)) {
        /* Every rank got the verdict; finalize so rank 0's message is out
         * before anyone closes a connection (a rank left waiting would fail
         * with exit 1 and hide the spec error's 2). */
        gx_comm_finalize(x.comm);
        gx_comm_destroy(x.comm);
        return 2;
    }
    struct accept_results res = { .spec = &x.spec, .nranks = x.nranks, .nnodes = x.nnodes };
    double t0 = accept_now_s();
    if (x.rank == 0) {
        x.res = &res;
        x.progress_tty = o.quiet ? -1 : isatty(STDERR_FILENO);
        snprintf(res.spec_path, sizeof(res.spec_path), "%s", o.spec);
        time_t now = time(NULL);
        strftime(res.started, sizeof(res.started), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        size_t nn = (size_t)x.nnodes * (size_t)x.nnodes;
        res.pair_gbs = malloc(sizeof(double) * nn);
        res.pair_lat_us = calloc(nn, sizeof(double));
        if (!res.pair_gbs || !res.pair_lat_us)
            accept_die(&x, "allocating the results", GX_ENOMEM);
        for (size_t i = 0; i < nn; i++)
            res.pair_gbs[i] = -1;
    }
    x.steps = 6;
    if ((rc = map_nodes(&x)))
        accept_die(&x, "mapping ranks to nodes", rc);
    run_phase(&x, "node checks", accept_node_checks);
    run_phase(&x, "clock skew", accept_clock_check);
    if (x.spec.p2p_enabled) {
        run_phase(&x, "p2p matrix", accept_p2p_matrix);
    } else {
        x.step++;
        if (x.rank == 0)
            accept_add(&res, "fabric", "p2p", "all nodes", ACCEPT_SKIP,
                       "no 'p2p' section in the spec");
    }
    run_phase(&x, "busbw sweeps", accept_sweeps);
    run_phase(&x, "soak", accept_soak);
    x.step++;
    int status = 0;
    if (x.rank == 0) {
        accept_progress_clear(&x);
        if (x.spec.p2p_enabled)
            accept_outliers(&res, x.spec.outlier_fraction);
        res.duration_s = accept_now_s() - t0;
        accept_report_console(stdout, &res);
        fflush(stdout);
        status = accept_failed_count(&res) ? 1 : 0;
        if (write_outputs(&o, &res))
            status = 1;
    }
    rc = gx_comm_finalize(x.comm);
    if (rc)
        accept_die(&x, "gx_comm_finalize", rc);
    gx_comm_destroy(x.comm);
    free(res.checks);
    free(res.node_names);
    free(res.pair_gbs);
    free(res.pair_lat_us);
    free(x.node_of_rank);
    free(x.leader_of_node);
    return status;
}
