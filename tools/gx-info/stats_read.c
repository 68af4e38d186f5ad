/*
 * stats_read.c - gx-info --stats: the counters a running job writes to
 * GX_METRICS_FILE (collectives/api/metrics.c, Prometheus text format), as
 * one table. Reads only the samples gx writes: name{rank="..",comm="..",
 * ...} value; comment lines and other metrics are skipped.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/gx-info/stats_read.h"

#define MAX_ROWS 4096

enum col { C_SENT, C_RECV, C_COLL, C_FAILED, C_P2P, C_CONN, C_CSUM, C_RETX, C_STALL, C_WAIT,
           C_COUNT };
static const char *const metric_of[C_COUNT] = {
    "gx_bytes_sent_total", "gx_bytes_received_total", "gx_collectives_total",
    "gx_collectives_failed_total", "gx_p2p_total", "gx_connections",
    "gx_checksum_failures_total", "gx_retransmits_total", "gx_stalls_total",
    "gx_wait_seconds_total",
};
static const char *const head_of[C_COUNT] = {
    "sent MiB", "recv MiB", "colls", "failed", "p2p", "conns", "csum", "retx", "stalls", "wait s",
};

struct row {
    int rank;
    char comm[80];
    double v[C_COUNT];
};

static struct row rows[MAX_ROWS];
static int nrows;

/* The value of label `key` in `labels` ("a=\"x\",b=\"y\""), unescaped. */
static bool label(const char *labels, const char *key, char *out, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "%s=\"", key);
    const char *p = labels;
    while ((p = strstr(p, pat)) && p != labels && p[-1] != ',' && p[-1] != '{')
        p++;
    if (!p)
        return false;
    p += strlen(pat);
    size_t o = 0;
    for (; *p && *p != '"' && o + 1 < len; p++)
        out[o++] = *p == '\\' && p[1] ? *++p : *p;
    out[o] = 0;
    return true;
}

static struct row *row_for(int rank, const char *comm)
{
    for (int i = 0; i < nrows; i++)
        if (rows[i].rank == rank && strcmp(rows[i].comm, comm) == 0)
            return &rows[i];
    if (nrows == MAX_ROWS)
        return NULL;
    struct row *r = &rows[nrows++];
    r->rank = rank;
    snprintf(r->comm, sizeof(r->comm), "%s", comm);
    return r;
}

static int read_file(const char *path, FILE *out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(out, "gx-info --stats: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[2048];
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *brace = strchr(line, '{'), *close = brace ? strchr(brace, '}') : NULL;
        if (!close)
            continue;
        *brace = 0;
        int col = -1;
        for (int c = 0; c < C_COUNT; c++)
            if (strcmp(line, metric_of[c]) == 0)
                col = c;
        char rank[16], comm[80];
        *close = 0;
        if (col < 0 || !label(brace + 1, "rank", rank, sizeof(rank)) ||
            !label(brace + 1, "comm", comm, sizeof(comm)))
            continue;
        struct row *r = row_for(atoi(rank), comm);
        if (r)
            r->v[col] += strtod(close + 1, NULL);
    }
    fclose(f);
    return 0;
}

static int by_rank(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    return x->rank != y->rank ? x->rank - y->rank : strcmp(x->comm, y->comm);
}

int gx_stats_read(int nargs, char **args, FILE *out)
{
    int read = 0;
    nrows = 0;
    for (int i = 0; i < nargs; i++) {
        struct stat st;
        if (stat(args[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(args[i]);
            struct dirent *e;
            while (d && (e = readdir(d))) {
                size_t n = strlen(e->d_name);
                if (n > 5 && strcmp(e->d_name + n - 5, ".prom") == 0) {
                    char path[4400];
                    snprintf(path, sizeof(path), "%s/%s", args[i], e->d_name);
                    read += read_file(path, out) == 0;
                }
            }
            if (d)
                closedir(d);
        } else {
            read += read_file(args[i], out) == 0;
        }
    }
    if (!read) {
        fprintf(out, "gx-info --stats: no GX_METRICS_FILE file read\n");
        return 2;
    }
    qsort(rows, (size_t)nrows, sizeof(rows[0]), by_rank);
    fprintf(out, "%5s %-16s", "rank", "communicator");
    for (int c = 0; c < C_COUNT; c++)
        fprintf(out, " %9s", head_of[c]);
    fprintf(out, "\n");
    for (int i = 0; i < nrows; i++) {
        fprintf(out, "%5d %-16.16s", rows[i].rank, rows[i].comm);
        for (int c = 0; c < C_COUNT; c++) {
            double v = rows[i].v[c];
            if (c <= C_RECV)
                fprintf(out, " %9.1f", v / (1024.0 * 1024.0));
            else if (c == C_WAIT)
                fprintf(out, " %9.3f", v);
            else
                fprintf(out, " %9.0f", v);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "(%d file(s); sent/recv: payload MiB over every peer class; "
            "docs/observability.md names each counter)\n", read);
    return 0;
}
