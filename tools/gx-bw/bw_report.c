/* bw_report.c - see bw_report.h. */
#include "bw_report.h"

#include <inttypes.h>

#define DASHES "---------------------------------------------------------------------------------------\n"

double bw_peak_perftest(const uint64_t *tposted, const uint64_t *tcompleted, int64_t n,
                        size_t size, int64_t min_run)
{
    if (n <= 0)
        return 0;
    if (min_run > n)
        min_run = n;
    if (min_run < 1)
        min_run = 1;
    int64_t stride = n > 20000 ? n / 20000 : 1;
    double best = 0; /* fewest ns per message */
    for (int64_t i = 0; i + min_run <= n; i += stride) {
        for (int64_t j = i + min_run - 1; j < n; j++) {
            double per = (double)(tcompleted[j] - tposted[i]) / (double)(j - i + 1);
            if (per > 0 && (best == 0 || per < best))
                best = per;
        }
    }
    return best > 0 ? (double)size * 1e9 / best : 0;
}

static double unit(const struct bw_show *s, double bytes_per_s)
{
    /* perftest: MB = 2^20 bytes; --report_gbits: 10^9 bits */
    return s->gbits ? bytes_per_s * 8 / 1e9 : bytes_per_s / 1048576.0;
}

void bw_print_banner(FILE *f, const struct bw_show *s)
{
    fprintf(f, DASHES);
    fprintf(f, "                    RDMA_Write %s%s Test\n", s->bidir ? "Bidirectional " : "",
            s->lat ? "Latency" : "BW");
    fprintf(f, " Dual-port       : OFF\t\tDevice         : %s\n",
            s->device && *s->device ? s->device : "(provider's choice)");
    fprintf(f, " Number of qps   : %d\t\tTransport type : gx %s\n", s->qps, s->provider);
    fprintf(f, " Connection type : RC\t\tUsing SRQ      : OFF\n");
    if (!s->lat)
        fprintf(f, " TX depth        : %d\n", s->tx_depth);
    fprintf(f, " CQ Moderation   : 1\n");
    fprintf(f, " Data ex. method : Ethernet\n");
    fprintf(f, DASHES);
    fflush(f);
}

void bw_print_header(FILE *f, const struct bw_show *s)
{
    if (s->lat)
        fprintf(f, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                "t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec] \n");
    else if (s->gbits)
        fprintf(f, " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   "
                "MsgRate[Mpps]\n");
    else
        fprintf(f, " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   "
                "MsgRate[Mpps]\n");
    fflush(f);
}

void bw_print_row(FILE *f, const struct bw_show *s, const struct bw_result *r)
{
    if (s->lat)
        fprintf(f, " %-7" PRIu64 " %" PRId64 "          %-7.2f        %-7.2f      %-7.2f  \t"
                "       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n",
                r->bytes, r->iters, r->t_min, r->t_max, r->t_typ, r->t_avg, r->t_std, r->p99,
                r->p999);
    else
        fprintf(f, " %-7" PRIu64 "    %-10" PRId64 "       %-7.2f            %-7.2f\t\t   %-7.6f\n",
                r->bytes, r->iters, unit(s, r->bw_peak), unit(s, r->bw_avg), r->mpps);
    fflush(f);
}

void bw_print_close(FILE *f)
{
    fprintf(f, DASHES);
    fflush(f);
}

void bw_print_json_row(FILE *f, const struct bw_show *s, const struct bw_result *r, int first)
{
    if (s->lat)
        fprintf(f, "%s{\"bytes\":%" PRIu64 ",\"iterations\":%" PRId64 ",\"t_min_us\":%.3f,"
                "\"t_max_us\":%.3f,\"t_typical_us\":%.3f,\"t_avg_us\":%.3f,\"t_stdev_us\":%.3f,"
                "\"p99_us\":%.3f,\"p999_us\":%.3f}",
                first ? "" : ",\n  ", r->bytes, r->iters, r->t_min, r->t_max, r->t_typ, r->t_avg,
                r->t_std, r->p99, r->p999);
    else
        fprintf(f, "%s{\"bytes\":%" PRIu64 ",\"iterations\":%" PRId64 ",\"bw_peak_mbs\":%.2f,"
                "\"bw_avg_mbs\":%.2f,\"msg_rate_mpps\":%.6f}",
                first ? "" : ",\n  ", r->bytes, r->iters, r->bw_peak / 1048576.0,
                r->bw_avg / 1048576.0, r->mpps);
}
