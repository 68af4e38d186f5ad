/*
 * gx-bw - point-to-point bandwidth and latency over one fabric provider, in
 * the manner of perftest's ib_write_bw / ib_write_lat: the same banner,
 * columns, tab-separated rows and closing line (bw_report.c), the same common
 * flags (-a -b -D -d -F -n -p -q -s -x --report_gbits) and the same "BW peak".
 *
 *   gx-bw [-p PORT]                                   server: waits for a client
 *   gx-bw [--provider P] [-s SIZE | -a] [-n N | -D S] [-b] [--lat] [--json] HOST
 *
 * The client sends the plan (provider, sizes, iterations, mode) over a plain
 * TCP control socket, both sides open the provider, exchange their cards
 * (bw_transport.h) on the same socket and connect. Bandwidth: the client
 * keeps a window of RDMA writes with immediate in flight to the server's
 * registered buffer; the server re-posts a receive per write and answers the
 * last one with a small send; the client's clock for the average stops on
 * that answer. The peak is perftest's: the best run of messages from the post
 * of the first to the completion of the last (bw_peak_perftest()). With -b
 * both sides write at once and the figures are the sum of both directions.
 * Latency: write-with-immediate ping-pong, reported one-way (half the round
 * trip). MB/sec is 2^20 bytes per second, Gb/sec 10^9 bits, as in perftest.
 */
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bw_report.h"
#include "bw_transport.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"
#include "common/sock.h"

#define DEFAULT_PORT 18515
#define TX_WINDOW 128
#define RX_WINDOW 512
#define MAX_SIZES 32

struct plan {
    char provider[16];
    int32_t lat;
    int32_t bidir;          /* -b */
    int32_t qps;            /* -q: connections per endpoint, both sides; 0 default */
    int32_t json;           /* the client prints JSON: the server prints nothing */
    int32_t duration_s;     /* -D: iterations chosen from the warm-up */
    int32_t nsizes;
    int32_t iters[MAX_SIZES];
    uint64_t sizes[MAX_SIZES];
};

static void die(const char *what, int rc)
{
    fprintf(stderr, "gx-bw: %s failed: %s%s%s\n", what, gx_strerror(rc),
            gx_last_error()[0] ? ": " : "", gx_last_error());
    exit(1);
}

static int oob_xchg(int fd, const void *mine, void *theirs, size_t len)
{
    int rc = gx_sock_send_all(fd, mine, len, gx_deadline_after_ms(60000));
    if (rc == GX_OK)
        rc = gx_sock_recv_all(fd, theirs, len, gx_deadline_after_ms(60000));
    return rc;
}

static void oob_sync(int fd)
{
    char a = 1, b;
    int rc = oob_xchg(fd, &a, &b, 1);
    if (rc != GX_OK)
        die("control-socket sync", rc);
}

static struct gx_fab_cqe poll1(struct bw_transport *t)
{
    struct gx_fab_cqe e;
    uint64_t deadline = gx_deadline_after_ms(60000);
    unsigned long spins = 0;
    int n;
    while ((n = gx_fab_cq_poll(t->cq, &e, 1)) == 0)
        if ((++spins & 0xffff) == 0 && gx_now_ns() > deadline)
            die("waiting for a completion", GX_ETIMEOUT);
    if (n < 0)
        die("polling", n);
    if (e.status != GX_OK)
        die(gx_fab_op_name(e.op), e.status);
    return e;
}

/* ---- bandwidth ------------------------------------------------------------ */
static void bw_server(struct bw_transport *t, int oob, size_t size, int iters)
{
    int posted = 0, got = 0;
    for (; posted < iters && posted < RX_WINDOW; posted++)
        if (gx_fab_post_recv(t->ep, NULL, 0, NULL, 0) != GX_OK)
            die("post_recv", GX_ENOMEM);
    oob_sync(oob);
    while (got < iters) {
        struct gx_fab_cqe e = poll1(t);
        if (e.op != GX_FAB_OP_RECV)
            continue;
        got++;
        if (posted < iters) {
            int rc = gx_fab_post_recv(t->ep, NULL, 0, NULL, 0);
            if (rc != GX_OK)
                die("post_recv", rc);
            posted++;
        }
    }
    int rc = gx_fab_post_send(t->ep, t->sbuf, 8, t->smr, 0, 0); /* "all arrived" */
    if (rc != GX_OK)
        die("post_send", rc);
    while (poll1(t).op != GX_FAB_OP_SEND)
        ;
}

/* Write `iters` messages (and with `duplex`, take the peer's `iters` at the
 * same time); the clock stops when the peer says all arrived (one way) or
 * both directions are done (duplex). */
static void bw_writer(struct bw_transport *t, int oob, size_t size, int iters, int duplex,
                      struct bw_result *r)
{
    uint64_t *tp = malloc((size_t)iters * sizeof(*tp));
    uint64_t *tc = malloc((size_t)iters * sizeof(*tc));
    if (!tp || !tc)
        die("allocating the timestamps", GX_ENOMEM);
    int rposted = 0, got = 0, rc;
    if (!duplex) {
        rc = gx_fab_post_recv(t->ep, t->rbuf, t->buf_len, t->rmr, 1);
        if (rc != GX_OK)
            die("post_recv", rc);
    } else {
        for (; rposted < iters && rposted < RX_WINDOW; rposted++)
            if ((rc = gx_fab_post_recv(t->ep, NULL, 0, NULL, 0)) != GX_OK)
                die("post_recv", rc);
    }
    oob_sync(oob);
    int posted = 0, done = 0;
    bool acked = false;
    uint64_t ack_ns = 0;
    uint64_t t0 = gx_now_ns(), deadline = gx_deadline_after_ms(600000);
    /* Also reap every own write completion, so none spills into the next run. */
    while (done < iters || (duplex ? got < iters : !acked)) {
        while (posted < iters && posted - done < TX_WINDOW) {
            tp[posted] = gx_now_ns();
            rc = gx_fab_post_write_imm(t->ep, t->sbuf, size, t->smr, t->peer.base,
                                       &t->peer.rkey, (uint32_t)posted, 0);
            if (rc == GX_ENOMEM)
                break;
            if (rc != GX_OK)
                die("post_write_imm", rc);
            posted++;
        }
        struct gx_fab_cqe e[32];
        int n = gx_fab_cq_poll(t->cq, e, 32);
        if (n < 0)
            die("polling", n);
        uint64_t now = n ? gx_now_ns() : 0;
        for (int i = 0; i < n; i++) {
            if (e[i].status != GX_OK)
                die(gx_fab_op_name(e[i].op), e[i].status);
            if (e[i].op == GX_FAB_OP_WRITE_IMM) {
                if (done >= posted)
                    die("a write completion nobody posted", GX_EPROTO);
                tc[done++] = now; /* one endpoint: completions come in post order */
            } else if (e[i].op == GX_FAB_OP_RECV && !duplex) {
                acked = true;
                ack_ns = now; /* the average's clock stops on the answer */
            } else if (e[i].op == GX_FAB_OP_RECV) {
                got++;
                if (rposted < iters) {
                    if ((rc = gx_fab_post_recv(t->ep, NULL, 0, NULL, 0)) != GX_OK)
                        die("post_recv", rc);
                    rposted++;
                }
            }
        }
        if (n == 0 && gx_now_ns() > deadline)
            die("waiting for the transfer", GX_ETIMEOUT);
    }
    uint64_t t1 = ack_ns ? ack_ns : gx_now_ns();
    double secs = (double)(t1 - t0) / 1e9;
    r->bytes = size;
    r->iters = iters;
    r->bw_avg = (double)size * iters / secs;
    r->bw_peak = bw_peak_perftest(tp, tc, done, size, 2 * TX_WINDOW);
    if (r->bw_peak < r->bw_avg)
        r->bw_peak = r->bw_avg; /* the ack or the peer's traffic ended the clock later */
    r->mpps = iters / secs / 1e6;
    free(tp);
    free(tc);
}

/* ---- latency --------------------------------------------------------------- */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void lat_run(struct bw_transport *t, int oob, int server, size_t size, int iters,
                    struct bw_result *r)
{
    double *us = server ? NULL : malloc((size_t)iters * sizeof(double));
    int rc = gx_fab_post_recv(t->ep, NULL, 0, NULL, 0);
    if (rc != GX_OK)
        die("post_recv", rc);
    oob_sync(oob);
    for (int i = 0; i < iters; i++) {
        uint64_t start = gx_now_ns();
        if (!server) {
            rc = gx_fab_post_write_imm(t->ep, t->sbuf, size, t->smr, t->peer.base, &t->peer.rkey,
                                       (uint32_t)i, 0);
            if (rc != GX_OK)
                die("post_write_imm", rc);
        }
        /* Wait for the peer's write; re-arm before answering. */
        while (poll1(t).op != GX_FAB_OP_RECV)
            ;
        uint64_t end = gx_now_ns();
        rc = gx_fab_post_recv(t->ep, NULL, 0, NULL, 0);
        if (rc != GX_OK)
            die("post_recv", rc);
        if (server) {
            rc = gx_fab_post_write_imm(t->ep, t->sbuf, size, t->smr, t->peer.base, &t->peer.rkey,
                                       (uint32_t)i, 0);
            if (rc != GX_OK)
                die("post_write_imm", rc);
        } else {
            us[i] = (double)(end - start) / 2e3;
        }
    }
    /* Drain the local write completions (none outstanding afterwards). */
    struct gx_fab_cqe e[64];
    uint64_t until = gx_deadline_after_ms(200);
    while (gx_now_ns() < until)
        if (gx_fab_cq_poll(t->cq, e, 64) < 0)
            break;
    if (server)
        return;
    qsort(us, (size_t)iters, sizeof(double), cmp_double);
    double sum = 0, sq = 0;
    for (int i = 0; i < iters; i++)
        sum += us[i];
    double avg = sum / iters;
    for (int i = 0; i < iters; i++)
        sq += (us[i] - avg) * (us[i] - avg);
    r->bytes = size;
    r->iters = iters;
    r->t_min = us[0];
    r->t_max = us[iters - 1];
    r->t_typ = us[iters / 2];
    r->t_avg = avg;
    r->t_std = sqrt(sq / iters);
    r->p99 = us[(size_t)((iters - 1) * 0.99)];
    r->p999 = us[(size_t)((iters - 1) * 0.999)];
    free(us);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gx-bw [-p PORT] [-d DEV] [-F]            (server)\n"
            "       gx-bw [options] HOST                     (client)\n"
            "       gx-run -n 2 gx-bw [options]              (rank 0 serves, rank 1 measures)\n"
            "perftest's ib_write_bw / ib_write_lat over a gx fabric provider: the same\n"
            "banner, columns and rows, and the same common flags.\n"
            "  --provider P        fabric provider (built: %s; default: verbs when\n"
            "                      an RDMA device is active, else tcp)\n"
            "  -d, --ib-dev DEV    device: an RDMA device (verbs) or an interface (tcp)\n"
            "  -x, --gid-index N   RoCE GID index (verbs; GX_IB_GID_INDEX)\n"
            "  -q, --qp N          connections per endpoint: verbs QPs, tcp streams (1..16)\n"
            "  -s, --size N        message size (K/M suffixes; default 65536, 2 with --lat)\n"
            "  -a, --all           all sizes from 2 B to 8 MiB\n"
            "  -n, --iters N       iterations per size (default 5000 bw / 1000 lat, fewer for\n"
            "                      big sizes)\n"
            "  -D, --duration S    run each size for about S seconds instead of -n\n"
            "  -b, --bidirectional both sides write at once; figures are the sum of both\n"
            "      --report_gbits  bandwidth in Gb/sec (10^9 bits) instead of MB/sec (2^20 B)\n"
            "  -F, --CPU-freq      accepted (perftest's cpufreq warning; gx-bw times with the\n"
            "                      monotonic clock)\n"
            "  --lat               one-way latency of write-with-imm ping-pong, in usec\n"
            "  --json              machine-readable output\n"
            "  -p, --port N        control port (default %d)\n"
            "BW peak is perftest's: the best run of messages i..j, (j-i+1) x size over the\n"
            "time from the post of i to the completion of j. A client whose server is not\n"
            "there fails at once naming HOST:PORT. The job key comes from GX_JOB_KEY\n"
            "(default \"gx-bw\"). dpdk: each side's port comes from GX_DPDK_VDEV (under\n"
            "gx-run a ';' list indexed by rank; docs/dpdk.md).\n",
            gx_fab_provider_names(), DEFAULT_PORT);
}

enum { OPT_PROVIDER = 256, OPT_LAT, OPT_JSON, OPT_GBITS };

/* One pass of `count` iterations of the plan's test, this side's part. */
static void run_pass(struct bw_transport *t, int oob, int server, const struct plan *plan,
                     size_t sz, int count, struct bw_result *r)
{
    memset(r, 0, sizeof(*r));
    if (plan->lat)
        lat_run(t, oob, server, sz, count, r);
    else if (plan->bidir)
        bw_writer(t, oob, sz, count, 1, r);
    else if (server)
        bw_server(t, oob, sz, count);
    else
        bw_writer(t, oob, sz, count, 0, r);
}

/* The client's seconds for `count` iterations at the pace of pass `r`. */
static double pass_seconds(const struct plan *plan, const struct bw_result *r, int count)
{
    double per = plan->lat ? r->t_avg * 2e-6 : (r->mpps > 0 ? 1e-6 / r->mpps : 1e-3);
    return per * count;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "provider", required_argument, NULL, OPT_PROVIDER },
        { "size", required_argument, NULL, 's' },
        { "all", no_argument, NULL, 'a' },
        { "iters", required_argument, NULL, 'n' },
        { "duration", required_argument, NULL, 'D' },
        { "bidirectional", no_argument, NULL, 'b' },
        { "ib-dev", required_argument, NULL, 'd' },
        { "gid-index", required_argument, NULL, 'x' },
        { "qp", required_argument, NULL, 'q' },
        { "CPU-freq", no_argument, NULL, 'F' },
        { "report_gbits", no_argument, NULL, OPT_GBITS },
        { "lat", no_argument, NULL, OPT_LAT },
        { "json", no_argument, NULL, OPT_JSON },
        { "port", required_argument, NULL, 'p' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *provider = NULL, *device = "";
    size_t size = 0;
    long long iters = 0, port = DEFAULT_PORT, duration = 0, qps = 0, gid = -1;
    int all = 0, lat = 0, json = 0, bidir = 0, gbits = 0, c, rc;
    while ((c = getopt_long(argc, argv, "s:an:D:bd:x:q:Fp:h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_PROVIDER: provider = optarg; break;
        case 's':
            if (gx_parse_size(optarg, &size) != 0 || size == 0 || size > (1ull << 30)) {
                fprintf(stderr, "gx-bw: -s/--size: bad size '%s' (1 B .. 1 GiB)\n", optarg);
                return 2;
            }
            break;
        case 'a': all = 1; break;
        case 'n':
            if (gx_parse_int(optarg, &iters) != 0 || iters < 1 || iters > 100000000) {
                fprintf(stderr, "gx-bw: -n/--iters: bad iteration count '%s'\n", optarg);
                return 2;
            }
            break;
        case 'D':
            if (gx_parse_int(optarg, &duration) != 0 || duration < 1 || duration > 86400) {
                fprintf(stderr, "gx-bw: -D/--duration: bad number of seconds '%s'\n", optarg);
                return 2;
            }
            break;
        case 'b': bidir = 1; break;
        case 'd': device = optarg; break;
        case 'x':
            if (gx_parse_int(optarg, &gid) != 0 || gid < 0 || gid > 1024) {
                fprintf(stderr, "gx-bw: -x/--gid-index: bad GID index '%s'\n", optarg);
                return 2;
            }
            break;
        case 'q':
            if (gx_parse_int(optarg, &qps) != 0 || qps < 1 || qps > 16) {
                fprintf(stderr, "gx-bw: -q/--qp: bad count '%s' (1..16)\n", optarg);
                return 2;
            }
            break;
        case 'F': break;
        case OPT_GBITS: gbits = 1; break;
        case OPT_LAT: lat = 1; break;
        case OPT_JSON: json = 1; break;
        case 'p':
            if (gx_parse_int(optarg, &port) != 0 || port < 1 || port > 65535) {
                fprintf(stderr, "gx-bw: -p/--port: bad port '%s'\n", optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (duration && iters) {
        fprintf(stderr, "gx-bw: -D/--duration and -n/--iters exclude each other\n");
        return 2;
    }
    if (lat && bidir) {
        fprintf(stderr, "gx-bw: -b/--bidirectional is for bandwidth, not --lat\n");
        return 2;
    }
    /* Local device choices reach the providers through their variables. */
    if (gid >= 0) {
        char v[16];
        snprintf(v, sizeof(v), "%lld", gid);
        setenv("GX_IB_GID_INDEX", v, 1);
    }
    int server = optind >= argc;
    const char *key = getenv("GX_JOB_KEY"); /* declared by the bootstrap layer */
    if (!key || !*key)
        key = "gx-bw";
    /* Under gx-run (or any launcher gx understands) with no HOST argument:
     * rank 0 serves, rank 1 is the client, and the control port travels over
     * the communicator. */
    struct gx_comm *comm = NULL;
    const char *server_host = server ? NULL : argv[optind];
    char master_host[256];
    if (server && getenv("GX_RANK") && getenv("GX_SIZE")) {
        if ((rc = gx_comm_init_env(&comm)) != GX_OK)
            die("joining the gx-run job", rc);
        if (gx_comm_size(comm) != 2) {
            fprintf(stderr, "gx-bw: under gx-run it needs exactly 2 ranks (gx-run -n 2 gx-bw), "
                    "got %d\n", gx_comm_size(comm));
            return 2;
        }
        server = gx_comm_rank(comm) == 0;
        port = 0;
        const char *m = getenv("GX_MASTER_ADDR");
        snprintf(master_host, sizeof(master_host), "%s", m && *m ? m : "127.0.0.1");
        server_host = master_host;
    }

    int oob = -1;
    struct plan plan;
    memset(&plan, 0, sizeof(plan));
    if (server) {
        struct gx_sockaddr sa;
        int lfd;
        if ((rc = gx_sock_resolve("0.0.0.0", (int)port, "listen address", &sa)) != GX_OK ||
            gx_sock_listen(&sa, 1, &lfd) != GX_OK)
            die("listening on the control port", rc ? rc : GX_ESYSTEM);
        if (comm) { /* tell rank 1 which port the kernel picked */
            int32_t picked = gx_sock_port(&sa);
            if ((rc = gx_send(comm, &picked, 1, GX_INT32, 1, 0)) != GX_OK)
                die("sending the control port to rank 1", rc);
        } else {
            printf("\n************************************\n"
                   "* Waiting for client to connect... *\n"
                   "************************************\n");
            fflush(stdout);
        }
        struct pollfd pfd = { .fd = lfd, .events = POLLIN };
        while ((rc = gx_sock_accept(lfd, &oob, NULL)) == GX_ETIMEOUT)
            poll(&pfd, 1, 1000);
        close(lfd);
        if (rc != GX_OK)
            die("accept", rc);
        gx_sock_set_nonblocking(oob);
        if ((rc = gx_sock_recv_all(oob, &plan, sizeof(plan), gx_deadline_after_ms(60000))) != GX_OK)
            die("receiving the plan", rc);
        plan.provider[sizeof(plan.provider) - 1] = '\0';
        if (plan.nsizes < 1 || plan.nsizes > MAX_SIZES || plan.qps < 0 || plan.qps > 16)
            die("the client's plan", GX_EPROTO);
    } else {
        snprintf(plan.provider, sizeof(plan.provider), "%s", provider ? provider : bw_default_provider());
        plan.lat = lat;
        plan.bidir = bidir;
        plan.qps = (int32_t)qps;
        plan.json = json;
        plan.duration_s = (int32_t)duration;
        if (all) {
            for (size_t s = 2; s <= 8u << 20; s *= 2)
                plan.sizes[plan.nsizes++] = s;
        } else {
            plan.sizes[plan.nsizes++] = size ? size : lat ? 2 : 65536;
        }
        for (int i = 0; i < plan.nsizes; i++) {
            long long n = iters ? iters : lat ? 1000 : 5000;
            /* Without -n, cap the volume per size at 2 GiB so -a stays short. */
            if (!iters && !lat && (unsigned long long)n * plan.sizes[i] > (2ull << 30))
                n = (long long)((2ull << 30) / plan.sizes[i]);
            plan.iters[i] = (int32_t)(n < 10 ? 10 : n);
        }
        if (comm) {
            int32_t picked = 0;
            if ((rc = gx_recv(comm, &picked, 1, GX_INT32, 0, 0, NULL)) != GX_OK)
                die("receiving the control port from rank 0", rc);
            port = picked;
        }
        if (bw_connect_once(server_host, port, &oob) != 0)
            return 1;
        if ((rc = gx_sock_send_all(oob, &plan, sizeof(plan), gx_deadline_after_ms(10000))) != GX_OK)
            die("sending the plan", rc);
    }
    /* -q on the client sets it for both sides, as perftest's must match;
     * without it each provider keeps its default (GX_TCP_NSTREAMS=2, ...). */
    const char *qvar = strcmp(plan.provider, "verbs") == 0 ? "GX_IB_QPS_PER_CONN"
                       : strcmp(plan.provider, "tcp") == 0 ? "GX_TCP_NSTREAMS" : NULL;
    char qv[16];
    snprintf(qv, sizeof(qv), "%d", plan.qps);
    if (plan.qps && qvar)
        setenv(qvar, qv, 1);
    int shown_qps = plan.qps;
    if (!shown_qps) {
        const char *v = qvar ? getenv(qvar) : NULL;
        shown_qps = v && atoi(v) > 0 ? atoi(v) : qvar && strcmp(qvar, "GX_TCP_NSTREAMS") == 0 ? 2 : 1;
    }
    if (*device && strcmp(plan.provider, "tcp") == 0)
        setenv("GX_SOCKET_IFNAME", device, 1);

    size_t maxsz = 0;
    for (int i = 0; i < plan.nsizes; i++)
        if (plan.sizes[i] > maxsz)
            maxsz = plan.sizes[i];
    struct bw_transport t;
    if ((rc = bw_transport_open(&t, plan.provider, strcmp(plan.provider, "tcp") ? device : "",
                                server ? 0 : 1, maxsz, server, key)) != GX_OK)
        die("opening the provider", rc);
    struct bw_card peer;
    if ((rc = oob_xchg(oob, &t.mine, &peer, sizeof(peer))) != GX_OK)
        die("exchanging cards", rc);
    if ((rc = bw_transport_connect(&t, &peer, server, 30000)) != GX_OK)
        die("connecting the fabric", rc);

    struct bw_show show = { .lat = plan.lat, .bidir = plan.bidir, .gbits = gbits,
                            .qps = shown_qps, .tx_depth = TX_WINDOW, .provider = plan.provider,
                            .device = device };
    /* under gx-run only the client prints; with --json only the client's JSON */
    int printing = !plan.json && (!server || !comm);
    if (printing) {
        bw_print_banner(stdout, &show);
        bw_print_header(stdout, &show);
    }
    if (!server && json)
        printf("{\"provider\":\"%s\",\"test\":\"%s\",\"results\":[\n  ", plan.provider,
               plan.lat ? "latency" : plan.bidir ? "bidirectional bandwidth" : "bandwidth");
    for (int i = 0; i < plan.nsizes; i++) {
        size_t sz = plan.sizes[i];
        int n = plan.iters[i], warm = n / 10 < 50 ? (n < 50 ? n : 50) : n / 10;
        struct bw_result r, peer_r;
        run_pass(&t, oob, server, &plan, sz, warm, &r);
        if (plan.duration_s) { /* -D: as many as fit, from the warm-up's pace */
            /* A short warm-up's pace is its start-up's (first touches, a busy
             * CPU): it once made a 1 s run end at 0.16 s. The client makes
             * the warm-up 8x longer until it lasts 0.1 s. */
            for (int32_t again = 1, round = 0; again; round++) {
                int32_t theirs = 0;
                again = !server && round < 6 && warm < 10000000 &&
                        pass_seconds(&plan, &r, warm) < 0.1;
                if ((rc = oob_xchg(oob, &again, &theirs, sizeof(again))) != GX_OK)
                    die("agreeing on the warm-up for -D", rc);
                again = server ? theirs : again;
                if (again) {
                    warm *= 8;
                    run_pass(&t, oob, server, &plan, sz, warm, &r);
                }
            }
            int32_t want = 0;
            if (!server) {
                double k = plan.duration_s / (pass_seconds(&plan, &r, 1) + 1e-9);
                want = k > 1e8 ? 100000000 : k < 10 ? 10 : (int32_t)k;
            }
            int32_t theirs = 0;
            if ((rc = oob_xchg(oob, &want, &theirs, sizeof(want))) != GX_OK)
                die("agreeing on the iterations for -D", rc);
            n = server ? theirs : want;
        }
        run_pass(&t, oob, server, &plan, sz, n, &r);
        /* Both sides print the client's figures (perftest does); -b: the sum. */
        if ((rc = oob_xchg(oob, &r, &peer_r, sizeof(r))) != GX_OK)
            die("exchanging results", rc);
        if (server && !plan.bidir)
            r = peer_r;
        if (plan.bidir) {
            r.bw_avg += peer_r.bw_avg;
            r.bw_peak += peer_r.bw_peak;
            r.mpps += peer_r.mpps;
        }
        if (printing)
            bw_print_row(stdout, &show, &r);
        else if (!server && json)
            bw_print_json_row(stdout, &show, &r, i == 0);
    }
    if (printing)
        bw_print_close(stdout);
    if (!server && json)
        printf("\n]}\n");
    oob_sync(oob);
    bw_transport_close(&t);
    close(oob);
    if (comm) {
        gx_comm_finalize(comm);
        gx_comm_destroy(comm);
    }
    return 0;
}
