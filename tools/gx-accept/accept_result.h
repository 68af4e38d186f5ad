/*
 * accept_result.h - what a gx-accept run found, as rank 0 holds it: the list
 * of checks (each pass/fail/skip with its evidence), the node-pair matrices
 * of the point-to-point test, and the busbw sweeps. The output modules
 * (accept_report.c, accept_html.c) read it; the checks fill it.
 *
 * Owns the result structs and adding checks; must not run anything.
 */
#ifndef GX_ACCEPT_RESULT_H
#define GX_ACCEPT_RESULT_H

#include <stdio.h>

#include "accept_spec.h"

enum accept_status { ACCEPT_PASS, ACCEPT_FAIL, ACCEPT_SKIP };

struct accept_check {
    char group[16];        /* "node", "fabric", "outlier" */
    char name[48];         /* "nic_count", "p2p_bandwidth", ... */
    char subject[96];      /* node name, "nodeA->nodeB", "all nodes" */
    enum accept_status status;
    char evidence[512];
};

#define ACCEPT_MAX_SIZES 32

struct accept_sweep {
    const char *coll;      /* "all_reduce", "all_gather" */
    int nsizes;
    double bytes[ACCEPT_MAX_SIZES];
    double time_us[ACCEPT_MAX_SIZES];
    double algbw[ACCEPT_MAX_SIZES];  /* GB/s */
    double busbw[ACCEPT_MAX_SIZES];  /* GB/s */
};

struct accept_results {
    const struct accept_spec *spec;
    char spec_path[256];
    char started[32];      /* UTC, ISO 8601 */
    double duration_s;
    int nranks, nnodes;
    char (*node_names)[ACCEPT_NAME_MAX];
    int ncheck, cap;
    struct accept_check *checks;
    int have_pairs;
    double *pair_gbs;      /* [from * nnodes + to], GB/s; < 0 = not measured */
    double *pair_lat_us;   /* [a * nnodes + b], one-way us, symmetric */
    struct accept_sweep sweeps[2];
    int nsweeps;
    double soak_seconds;
    long long soak_ops, soak_wrong;
};

/** Add a check; the evidence is printf-formatted. Returns the check. */
struct accept_check *accept_add(struct accept_results *r, const char *group, const char *name,
                                const char *subject, enum accept_status st, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

const char *accept_status_name(enum accept_status st);
int accept_failed_count(const struct accept_results *r);

/* Outputs (accept_report.c, accept_html.c). Each returns 0 or -1 (errno set). */
void accept_report_console(FILE *out, const struct accept_results *r);
int accept_report_json(FILE *out, const struct accept_results *r);
int accept_report_junit(FILE *out, const struct accept_results *r);
int accept_report_html(FILE *out, const struct accept_results *r);

/** Median of n values (a copy is sorted); 0 when n == 0. */
double accept_median(const double *v, int n);

/** Colour class of a link measured at `gbs` against the median: 0 best .. 3 outlier. */
int accept_link_class(double gbs, double median, double fraction);

#endif
