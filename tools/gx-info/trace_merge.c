/*
 * trace_merge.c - gx-info --trace DIR: one trace-event file from the
 * ranks' timelines (common/trace.c writes them, one event a line, each
 * line a complete JSON object; the events already carry their rank as
 * "pid", so the ranks become tracks side by side).
 *
 * A rank killed while writing leaves a last line cut short: such a line is
 * left out and reported, never copied into the merged file. The merged
 * file is written through the safe-open helper.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/safe_file.h"
#include "tools/gx-info/trace_merge.h"

#define MAX_RANKS 65536

struct rank_file {
    int rank;
    char name[300];
};

static int by_rank(const void *a, const void *b)
{
    return ((const struct rank_file *)a)->rank - ((const struct rank_file *)b)->rank;
}

/* The number after `key` in the tail line, or -1. */
static long long tail_number(const char *tail, const char *key)
{
    const char *p = tail ? strstr(tail, key) : NULL;
    return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

static void tail_text(const char *tail, const char *key, char *out, size_t len)
{
    const char *p = tail ? strstr(tail, key) : NULL;
    snprintf(out, len, "?");
    if (!p)
        return;
    p += strlen(key);
    const char *end = strchr(p, '"');
    if (end)
        snprintf(out, len, "%.*s", (int)(end - p), p);
}

/* Copy one rank's events to `out`; returns the events copied or -1. */
static long copy_rank(const char *path, FILE *out, bool *first, int rank, FILE *report,
                      int *world_size, bool *cut)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(report, "rank %d: cannot read %s: %s\n", rank, path, strerror(errno));
        return -1;
    }
    char *line = NULL, *tail = NULL;
    size_t cap = 0;
    ssize_t n;
    long events = 0, bad = 0;
    bool header = false;
    while ((n = getline(&line, &cap, in)) > 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        if (!header) {
            header = strcmp(line, "{\"traceEvents\":[") == 0;
            if (!header)
                break;
            continue;
        }
        if (line[0] == ']') {
            free(tail);
            tail = strdup(line);
            break;
        }
        if (n > 0 && line[n - 1] == ',')
            line[--n] = 0;
        if (line[0] != '{' || n < 2 || line[n - 1] != '}') {
            bad++;
            continue;
        }
        fprintf(out, "%s%s", *first ? "" : ",\n", line);
        *first = false;
        events++;
    }
    free(line);
    fclose(in);
    if (!header) {
        fprintf(report, "rank %d: %s is not a gx trace (no traceEvents header)\n", rank, path);
        free(tail);
        return -1;
    }
    char why[64];
    tail_text(tail, "\"last_write\":\"", why, sizeof(why));
    long long dropped = tail_number(tail, "\"dropped\":");
    long long ws = tail_number(tail, "\"world_size\":");
    if (ws > 0 && ws <= MAX_RANKS)
        *world_size = (int)ws;
    *cut = !tail || bad;
    fprintf(report, "rank %d: %ld events, last written at %s, %lld dropped (ring full)%s\n",
            rank, events, tail ? why : "? (the file ends early: the rank died while writing)",
            dropped < 0 ? 0 : dropped, bad ? ", a line cut short left out" : "");
    free(tail);
    return events;
}

int gx_trace_merge(const char *dir, const char *out_path, FILE *report)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(report, "gx-info --trace: cannot open %s: %s\n", dir, strerror(errno));
        return 2;
    }
    struct rank_file *files = NULL;
    size_t nfiles = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int rank = -1, used = 0;
        if (sscanf(e->d_name, "gx-trace-r%d.json%n", &rank, &used) != 1 ||
            e->d_name[used] != 0 || rank < 0 || rank >= MAX_RANKS)
            continue;
        if (nfiles == cap) {
            cap = cap ? 2 * cap : 64;
            struct rank_file *f = realloc(files, cap * sizeof(*f));
            if (!f)
                break;
            files = f;
        }
        files[nfiles].rank = rank;
        snprintf(files[nfiles].name, sizeof(files[nfiles].name), "%s", e->d_name);
        nfiles++;
    }
    closedir(d);
    if (!nfiles) {
        fprintf(report, "gx-info --trace: no gx-trace-r<N>.json in %s (was GX_TRACE=%s set?)\n",
                dir, dir);
        free(files);
        return 2;
    }
    qsort(files, nfiles, sizeof(*files), by_rank);
    char outp[4096], err[768];
    if (out_path)
        snprintf(outp, sizeof(outp), "%s", out_path);
    else
        snprintf(outp, sizeof(outp), "%s/gx-trace.json", dir);
    int fd = gx_safe_open(outp, O_WRONLY | O_CREAT | O_TRUNC, err, sizeof(err));
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out) {
        fprintf(report, "gx-info --trace: %s\n", fd >= 0 ? strerror(errno) : err);
        if (fd >= 0)
            close(fd);
        free(files);
        return 2;
    }
    fprintf(out, "{\"traceEvents\":[\n");
    bool first = true, incomplete = false;
    int world = 0, merged = 0;
    long total = 0;
    for (size_t i = 0; i < nfiles; i++) {
        char path[4400];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
        bool cut = false;
        long n = copy_rank(path, out, &first, files[i].rank, report, &world, &cut);
        if (n < 0 || cut)
            incomplete = true;
        if (n >= 0) {
            merged++;
            total += n;
        }
    }
    fprintf(out, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"gx_merged_ranks\":%d,"
            "\"world_size\":%d}}\n", merged, world);
    int missing = 0;
    for (int r = 0; r < world; r++) {
        bool have = false;
        for (size_t i = 0; i < nfiles && !have; i++)
            have = files[i].rank == r;
        if (!have) {
            fprintf(report, "%s%d", missing++ ? " " : "no trace from rank(s): ", r);
        }
    }
    if (missing)
        fprintf(report, "\n");
    free(files);
    if (fclose(out) != 0) {
        fprintf(report, "gx-info --trace: writing %s failed: %s\n", outp, strerror(errno));
        return 2;
    }
    fprintf(report, "merged %d rank(s), %ld events, into %s (open it in ui.perfetto.dev or "
            "chrome://tracing)\n", merged, total, outp);
    return merged == 0 ? 2 : (missing || incomplete) ? 1 : 0;
}
