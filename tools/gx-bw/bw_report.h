/*
 * bw_report.h - gx-bw's output in perftest's shape (ib_write_bw /
 * ib_write_lat of perftest 4.5): the banner between dashed lines, the column
 * header, tab-separated rows with perftest's widths, the closing dashed line;
 * and perftest's "BW peak".
 *
 * Owns formatting and the peak computation. Must not touch the fabric.
 */
#ifndef GX_TOOLS_BW_REPORT_H
#define GX_TOOLS_BW_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct bw_result {
    uint64_t bytes;
    int64_t iters;
    double bw_peak, bw_avg;                                 /* bytes/s */
    double mpps;
    double t_min, t_max, t_typ, t_avg, t_std, p99, p999;    /* latency, us */
};

struct bw_show {
    int lat, bidir, gbits, qps, tx_depth;
    const char *provider;   /* "tcp", "verbs", ... */
    const char *device;     /* "" = the provider's choice */
};

/**
 * perftest's peak: the fewest seconds per message over any run of messages
 * i..j, measured from the post of i to the completion of j, i.e. the best
 * (j - i + 1) * size / (tcompleted[j] - tposted[i]); in bytes/s. Runs are at
 * least `min_run` messages: on tcp and shm a write completes once it is in
 * the socket or ring, before it is delivered, so a short run that fits the
 * buffers would read as a memcpy rate (perftest's HCAs complete on the
 * peer's acknowledgement). Exact up to 20000 messages, then i is sampled
 * (perftest itself is quadratic).
 */
double bw_peak_perftest(const uint64_t *tposted, const uint64_t *tcompleted, int64_t n,
                        size_t size, int64_t min_run);

void bw_print_banner(FILE *f, const struct bw_show *s);
void bw_print_header(FILE *f, const struct bw_show *s);
void bw_print_row(FILE *f, const struct bw_show *s, const struct bw_result *r);
void bw_print_close(FILE *f);
void bw_print_json_row(FILE *f, const struct bw_show *s, const struct bw_result *r, int first);

#endif
