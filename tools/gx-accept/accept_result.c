/*
 * accept_result.c - the check list, medians, and the outlier judgement: a
 * link or a node below `fraction` of the median is named with its numbers,
 * whatever the absolute thresholds said.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"

struct accept_check *accept_add(struct accept_results *r, const char *group, const char *name,
                                const char *subject, enum accept_status st, const char *fmt, ...)
{
    static struct accept_check overflow; /* written when out of memory, never listed */
    if (r->ncheck == r->cap) {
        int cap = r->cap ? r->cap * 2 : 64;
        struct accept_check *n = realloc(r->checks, sizeof(*n) * (size_t)cap);
        if (!n)
            return &overflow;
        r->checks = n;
        r->cap = cap;
    }
    struct accept_check *c = &r->checks[r->ncheck++];
    memset(c, 0, sizeof(*c));
    snprintf(c->group, sizeof(c->group), "%s", group);
    snprintf(c->name, sizeof(c->name), "%s", name);
    snprintf(c->subject, sizeof(c->subject), "%s", subject);
    c->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->evidence, sizeof(c->evidence), fmt, ap);
    va_end(ap);
    return c;
}

const char *accept_status_name(enum accept_status st)
{
    return st == ACCEPT_PASS ? "pass" : st == ACCEPT_FAIL ? "FAIL" : "skip";
}

int accept_failed_count(const struct accept_results *r)
{
    int n = 0;
    for (int i = 0; i < r->ncheck; i++)
        n += r->checks[i].status == ACCEPT_FAIL;
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double accept_median(const double *v, int n)
{
    if (n <= 0)
        return 0;
    double *c = malloc(sizeof(double) * (size_t)n);
    if (!c)
        return v[0];
    memcpy(c, v, sizeof(double) * (size_t)n);
    qsort(c, (size_t)n, sizeof(double), cmp_double);
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

int accept_link_class(double gbs, double median, double fraction)
{
    if (gbs < 0 || median <= 0)
        return -1;
    double ratio = gbs / median;
    return ratio >= 0.95 ? 0 : ratio >= fraction ? 1 : ratio >= fraction / 2 ? 2 : 3;
}

/* Median of a node's outgoing (dir 0) or incoming (dir 1) links, leaving out
 * the links of nodes already named (`named`). */
static double node_median(const struct accept_results *r, int node, int dir, const int *named,
                          double *vals)
{
    int n = r->nnodes, k = 0;
    for (int o = 0; o < n; o++) {
        double g = dir ? r->pair_gbs[o * n + node] : r->pair_gbs[node * n + o];
        if (o != node && !named[o] && g >= 0)
            vals[k++] = g;
    }
    return accept_median(vals, k);
}

void accept_outliers(struct accept_results *r, double fraction)
{
    int n = r->nnodes, k = 0, named = 0;
    if (!r->have_pairs || n < 2) {
        accept_add(r, "outlier", "links", "all nodes", ACCEPT_SKIP,
                   "needs the p2p matrix of at least 2 nodes");
        return;
    }
    double *vals = malloc(sizeof(double) * (size_t)(n * n + 2 * n));
    if (!vals)
        return;
    for (int i = 0; i < n * n; i++)
        if (i / n != i % n && r->pair_gbs[i] >= 0)
            vals[k++] = r->pair_gbs[i];
    double med = accept_median(vals, k);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            double g = r->pair_gbs[a * n + b];
            if (a == b || g < 0 || g >= fraction * med)
                continue;
            char who[96];
            snprintf(who, sizeof(who), "%s->%s", r->node_names[a], r->node_names[b]);
            accept_add(r, "outlier", "link", who, ACCEPT_FAIL,
                       "%.3f GB/s is %.1f%% of the median link %.3f GB/s (limit %.0f%%)", g,
                       100 * g / med, med, 100 * fraction);
            named++;
        }
    if (!named)
        accept_add(r, "outlier", "links", "all nodes", ACCEPT_PASS,
                   "no link below %.0f%% of the median %.3f GB/s (%d links)", 100 * fraction,
                   med, k);
    if (n < 3) {
        accept_add(r, "outlier", "nodes", "all nodes", ACCEPT_SKIP,
                   "telling the slow node of a slow link needs at least 3 nodes");
        free(vals);
        return;
    }
    /* A node's score: the slower of the medians of its sending and receiving
     * links. One slow node drags down a link of every other node, so nodes are
     * named one at a time, slowest first, and the links of a named node no
     * longer count against the others (a slow sender does not make its
     * receivers slow). */
    double *score = vals + n * n;
    double *sendm = malloc(sizeof(double) * 2 * (size_t)n);
    int *named_node = calloc((size_t)n, sizeof(int));
    if (!sendm || !named_node) {
        free(sendm), free(named_node), free(vals);
        return;
    }
    int slow = 0;
    double node_med = 0;
    while (n - slow >= 3) {
        int worst = -1, m = 0;
        double live[n];
        for (int a = 0; a < n; a++) {
            if (named_node[a])
                continue;
            sendm[a] = node_median(r, a, 0, named_node, vals);
            sendm[n + a] = node_median(r, a, 1, named_node, vals);
            score[a] = sendm[a] < sendm[n + a] ? sendm[a] : sendm[n + a];
            live[m++] = score[a];
            if (worst < 0 || score[a] < score[worst])
                worst = a;
        }
        node_med = accept_median(live, m);
        if (score[worst] >= fraction * node_med)
            break;
        accept_add(r, "outlier", "node", r->node_names[worst], ACCEPT_FAIL,
                   "sends at %.3f GB/s and receives at %.3f GB/s (medians of its links): "
                   "%.1f%% of the median node %.3f GB/s (limit %.0f%%)", sendm[worst],
                   sendm[n + worst], 100 * score[worst] / node_med, node_med, 100 * fraction);
        named_node[worst] = 1;
        slow++;
    }
    if (!slow)
        accept_add(r, "outlier", "nodes", "all nodes", ACCEPT_PASS,
                   "no node below %.0f%% of the median node %.3f GB/s", 100 * fraction,
                   node_med);
    free(named_node);
    free(sendm);
    free(vals);
}
