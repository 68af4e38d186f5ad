/*
 * gx-bw - point-to-point bandwidth and latency over one fabric provider, in
 * the manner of perftest's ib_write_bw / ib_write_lat.
 *
 *   gx-bw [-p PORT]                                   server: waits for a client
 *   gx-bw [--provider shm|tcp|verbs|dpdk] [-s SIZE | -a] [-n N] [--lat] [--json] HOST
 *
 * The client sends the plan (provider, sizes, iterations, mode) over a plain
 * TCP control socket, both sides open the provider, exchange their cards
 * (bw_transport.h) on the same socket and connect. Bandwidth: the client
 * keeps a window of RDMA writes with immediate in flight to the server's
 * registered buffer; the server re-posts a receive per write and answers the
 * last one with a small send carrying the peak it measured from its own
 * completion times; the client's clock for the average stops on that answer.
 * Latency: write-with-immediate ping-pong, reported one-way (half the round
 * trip). MB/sec is 2^20 bytes per second, as in perftest.
 */
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    int32_t nsizes;
    int32_t iters[MAX_SIZES];
    uint64_t sizes[MAX_SIZES];
};

struct result {
    size_t bytes;
    int iters;
    double bw_peak, bw_avg, mpps;                           /* bandwidth */
    double t_min, t_max, t_typ, t_avg, t_std, p99, p999;    /* latency, us */
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
/* Peak bandwidth in MB/s: the fastest tenth of the run, from the receiver's
 * completion times (the sender's own completions can run ahead of delivery). */
static double peak_mbs(const uint64_t *ts, int n, size_t size)
{
    int chunk = n >= 10 ? n / 10 : 1;
    double best = 0;
    for (int j = 1; j + chunk <= n; j++) {
        double secs = (double)(ts[j + chunk - 1] - ts[j - 1] + 1) / 1e9;
        double bw = (double)chunk * (double)size / secs / 1048576.0;
        if (bw > best)
            best = bw;
    }
    return best;
}

static void bw_server(struct bw_transport *t, int oob, size_t size, int iters)
{
    uint64_t *ts = malloc((size_t)iters * sizeof(*ts));
    int posted = 0, got = 0;
    for (; posted < iters && posted < RX_WINDOW; posted++)
        if (gx_fab_post_recv(t->ep, NULL, 0, NULL, 0) != GX_OK)
            die("post_recv", GX_ENOMEM);
    oob_sync(oob);
    while (got < iters) {
        struct gx_fab_cqe e = poll1(t);
        if (e.op != GX_FAB_OP_RECV)
            continue;
        ts[got++] = gx_now_ns();
        if (posted < iters) {
            int rc = gx_fab_post_recv(t->ep, NULL, 0, NULL, 0);
            if (rc != GX_OK)
                die("post_recv", rc);
            posted++;
        }
    }
    double peak = peak_mbs(ts, iters, size);
    memcpy(t->sbuf, &peak, sizeof(peak));
    int rc = gx_fab_post_send(t->ep, t->sbuf, sizeof(peak), t->smr, 0, 0);
    if (rc != GX_OK)
        die("post_send", rc);
    while (poll1(t).op != GX_FAB_OP_SEND)
        ;
    free(ts);
}

static void bw_client(struct bw_transport *t, int oob, size_t size, int iters, struct result *r)
{
    int rc = gx_fab_post_recv(t->ep, t->rbuf, t->buf_len, t->rmr, 1);
    if (rc != GX_OK)
        die("post_recv", rc);
    oob_sync(oob);
    int posted = 0, done = 0;
    bool acked = false;
    uint64_t t0 = gx_now_ns();
    while (!acked) {
        while (posted < iters && posted - done < TX_WINDOW) {
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
        for (int i = 0; i < n; i++) {
            if (e[i].status != GX_OK)
                die(gx_fab_op_name(e[i].op), e[i].status);
            if (e[i].op == GX_FAB_OP_WRITE_IMM)
                done++;
            else if (e[i].op == GX_FAB_OP_RECV)
                acked = true;
        }
    }
    uint64_t t1 = gx_now_ns();
    double secs = (double)(t1 - t0) / 1e9, peak;
    memcpy(&peak, t->rbuf, sizeof(peak));
    r->bytes = size;
    r->iters = iters;
    r->bw_avg = (double)size * iters / secs / 1048576.0;
    r->bw_peak = peak > r->bw_avg ? peak : r->bw_avg;
    r->mpps = iters / secs / 1e6;
}

/* ---- latency --------------------------------------------------------------- */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void lat_run(struct bw_transport *t, int oob, int server, size_t size, int iters,
                    struct result *r)
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

/* ---- output ------------------------------------------------------------------ */
static void print_header(const struct plan *p, int json)
{
    if (json)
        return;
    printf("---------------------------------------------------------------------------------------\n");
    printf(" gx-bw %s test over provider %s\n", p->lat ? "write-with-imm latency" : "write-with-imm bandwidth",
           p->provider);
    printf("---------------------------------------------------------------------------------------\n");
    if (p->lat)
        printf(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
               "t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec]\n");
    else
        printf(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
}

static void print_result(const struct plan *p, const struct result *r, int json, int first)
{
    if (json) {
        if (p->lat)
            printf("%s{\"bytes\":%zu,\"iterations\":%d,\"t_min_us\":%.3f,\"t_max_us\":%.3f,"
                   "\"t_typical_us\":%.3f,\"t_avg_us\":%.3f,\"t_stdev_us\":%.3f,"
                   "\"p99_us\":%.3f,\"p999_us\":%.3f}",
                   first ? "" : ",\n  ", r->bytes, r->iters, r->t_min, r->t_max, r->t_typ,
                   r->t_avg, r->t_std, r->p99, r->p999);
        else
            printf("%s{\"bytes\":%zu,\"iterations\":%d,\"bw_peak_mbs\":%.2f,"
                   "\"bw_avg_mbs\":%.2f,\"msg_rate_mpps\":%.6f}",
                   first ? "" : ",\n  ", r->bytes, r->iters, r->bw_peak, r->bw_avg, r->mpps);
        return;
    }
    if (p->lat)
        printf(" %-7zu %-10d     %-10.2f     %-10.2f   %-10.2f         %-10.2f     %-10.2f      "
               "%-10.2f             %-10.2f\n",
               r->bytes, r->iters, r->t_min, r->t_max, r->t_typ, r->t_avg, r->t_std, r->p99,
               r->p999);
    else
        printf(" %-10zu %-10d     %-12.2f       %-12.2f         %-10.6f\n", r->bytes, r->iters,
               r->bw_peak, r->bw_avg, r->mpps);
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: gx-bw [-p PORT]                      (server)\n"
            "       gx-bw [--provider shm|tcp|verbs|dpdk] [-s SIZE | -a] [-n ITERS] [--lat] [--json]\n"
            "             [-p PORT] HOST                 (client)\n"
            "       gx-run -n 2 gx-bw [options]          (rank 0 serves, rank 1 measures)\n"
            "  --provider P   fabric provider (built: %s; default tcp)\n"
            "  -s, --size N   message size (K/M suffixes; default 65536, 2 with --lat)\n"
            "  -a, --all      all sizes from 2 B to 8 MiB\n"
            "  -n, --iters N  iterations per size (default 5000 bw / 1000 lat, fewer for big sizes)\n"
            "  --lat          one-way latency of write-with-imm ping-pong, in microseconds\n"
            "  --json         machine-readable output\n"
            "  -p, --port N   control port (default %d)\n"
            "The job key comes from GX_JOB_KEY (default \"gx-bw\"). dpdk: each side's port\n"
            "comes from GX_DPDK_VDEV (under gx-run a ';' list indexed by rank; docs/dpdk.md).\n",
            gx_fab_provider_names(), DEFAULT_PORT);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "provider", required_argument, NULL, 'P' }, { "size", required_argument, NULL, 's' },
        { "all", no_argument, NULL, 'a' },            { "iters", required_argument, NULL, 'n' },
        { "lat", no_argument, NULL, 'L' },            { "json", no_argument, NULL, 'J' },
        { "port", required_argument, NULL, 'p' },     { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *provider = "tcp";
    size_t size = 0;
    long long iters = 0, port = DEFAULT_PORT;
    int all = 0, lat = 0, json = 0, c, rc;
    while ((c = getopt_long(argc, argv, "s:an:p:h", opts, NULL)) != -1) {
        switch (c) {
        case 'P': provider = optarg; break;
        case 's':
            if (gx_parse_size(optarg, &size) != 0 || size == 0 || size > (1ull << 30)) {
                fprintf(stderr, "gx-bw: bad size '%s'\n", optarg);
                return 2;
            }
            break;
        case 'a': all = 1; break;
        case 'n':
            if (gx_parse_int(optarg, &iters) != 0 || iters < 1 || iters > 100000000) {
                fprintf(stderr, "gx-bw: bad iteration count '%s'\n", optarg);
                return 2;
            }
            break;
        case 'L': lat = 1; break;
        case 'J': json = 1; break;
        case 'p':
            if (gx_parse_int(optarg, &port) != 0 || port < 1 || port > 65535) {
                fprintf(stderr, "gx-bw: bad port '%s'\n", optarg);
                return 2;
            }
            break;
        case 'h': usage(); return 0;
        default: usage(); return 2;
        }
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
            fprintf(stderr, "gx-bw: waiting for a client on port %lld\n", port);
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
        if (plan.nsizes < 1 || plan.nsizes > MAX_SIZES)
            die("the client's plan", GX_EPROTO);
    } else {
        snprintf(plan.provider, sizeof(plan.provider), "%s", provider);
        plan.lat = lat;
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
        struct gx_sockaddr sa;
        if ((rc = gx_sock_resolve(server_host, (int)port, "server", &sa)) != GX_OK)
            die("resolving the server", rc);
        if ((rc = gx_sock_connect(&sa, gx_deadline_after_ms(30000), &oob)) != GX_OK)
            die("connecting to the server's control port", rc);
        if ((rc = gx_sock_send_all(oob, &plan, sizeof(plan), gx_deadline_after_ms(10000))) != GX_OK)
            die("sending the plan", rc);
    }

    size_t maxsz = 0;
    for (int i = 0; i < plan.nsizes; i++)
        if (plan.sizes[i] > maxsz)
            maxsz = plan.sizes[i];
    struct bw_transport t;
    if ((rc = bw_transport_open(&t, plan.provider, server ? 0 : 1, maxsz, server, key)) != GX_OK)
        die("opening the provider", rc);
    struct bw_card peer;
    if ((rc = oob_xchg(oob, &t.mine, &peer, sizeof(peer))) != GX_OK)
        die("exchanging cards", rc);
    if ((rc = bw_transport_connect(&t, &peer, server, 30000)) != GX_OK)
        die("connecting the fabric", rc);

    if (!server) {
        print_header(&plan, json);
        if (json)
            printf("{\"provider\":\"%s\",\"test\":\"%s\",\"results\":[\n  ", plan.provider,
                   plan.lat ? "latency" : "bandwidth");
    }
    for (int i = 0; i < plan.nsizes; i++) {
        size_t sz = plan.sizes[i];
        int n = plan.iters[i], warm = n / 10 < 50 ? (n < 50 ? n : 50) : n / 10;
        struct result r;
        memset(&r, 0, sizeof(r));
        if (plan.lat) {
            lat_run(&t, oob, server, sz, warm, &r);
            lat_run(&t, oob, server, sz, n, &r);
        } else if (server) {
            bw_server(&t, oob, sz, warm);
            bw_server(&t, oob, sz, n);
        } else {
            bw_client(&t, oob, sz, warm, &r);
            bw_client(&t, oob, sz, n, &r);
        }
        if (!server)
            print_result(&plan, &r, json, i == 0);
    }
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
