/*
 * perf_ntjson.c - nccl-tests' JSON report for gx-perf -J (see perf_ntjson.h).
 *
 * Layout (nccl-tests' file version 3): {version, start_time, args[], env[],
 * nccl_version, config{nthreads, ngpus, minimum_bytes, maximum_bytes,
 * step_factor|step_bytes, warmup_iters, iterations, aggregated_iterations,
 * validation, graph, blocking_collectives, per_iter_timing, per_iter_skip,
 * parallel_init, devices[{rank, group, pid, hostname, device, device_hex,
 * device_info}]}, results[{size, count, type, redop, root, out_of_place
 * {time|cpu_time, alg_bw, bus_bw, nwrong}, in_place{...}, actual_iterations,
 * experiment_name}], out_of_bounds{count, okay}, average_bus_bandwidth
 * {bandwidth, okay}, end_time}. gx adds "tool": "gx-perf". Environment
 * variables whose names suggest a secret (GX_JOB_KEY, *TOKEN*, ...) are
 * written with their value hidden.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_ntjson.h"

extern char **environ;

static FILE *jf;
static int nrows;

static void jstr(const char *s)
{
    fputc('"', jf);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(jf, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(jf, "\\u%04x", ch);
        else
            fputc(ch, jf);
    }
    fputc('"', jf);
}

static void jnow(void)
{
    char when[64];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
    jstr(when);
}

static void jdouble(double v)
{
    if (v != v)
        fprintf(jf, "\"nan\"");
    else
        fprintf(jf, "%f", v);
}

static int secret_name(const char *entry)
{
    const char *eq = strchr(entry, '=');
    size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
    char name[128];
    snprintf(name, sizeof(name), "%.*s", (int)(n < sizeof(name) ? n : sizeof(name) - 1), entry);
    static const char *const words[] = { "KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD",
                                         "CREDENTIAL" };
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strstr(name, words[i]))
            return 1;
    return 0;
}

int perf_ntjson_open(FILE *f, const struct perf_opts *o, int argc, char **argv)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s", o->json_file);
    int fd = -1;
    for (int k = 0; fd < 0; k++) {
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0)
            break;
        if (errno != EEXIST || k > 1000) {
            fprintf(f, "# skipping json output; %s not accessible (%s)\n", path, strerror(errno));
            return -1;
        }
        snprintf(path, sizeof(path), "%s.%d", o->json_file, k);
    }
    jf = fdopen(fd, "w");
    if (!jf) {
        close(fd);
        fprintf(f, "# skipping json output; %s not accessible\n", path);
        return -1;
    }
    fprintf(f, "# Writing JSON output to %s\n", path);
    fprintf(jf, "{\"version\": 3, \"tool\": \"gx-perf\", \"start_time\": ");
    jnow();
    fprintf(jf, ", \"args\": [");
    for (int i = 0; i < argc; i++) {
        fprintf(jf, "%s", i ? ", " : "");
        jstr(argv[i]);
    }
    fprintf(jf, "], \"env\": [");
    int first = 1;
    for (char **e = environ; e && *e; e++) {
        fprintf(jf, "%s", first ? "" : ", ");
        first = 0;
        if (secret_name(*e)) {
            char hidden[160];
            const char *eq = strchr(*e, '=');
            snprintf(hidden, sizeof(hidden), "%.*s=(hidden)", eq ? (int)(eq - *e) : 100, *e);
            jstr(hidden);
        } else {
            jstr(*e);
        }
    }
    fprintf(jf, "], \"nccl_version\": 0");
    return 0;
}

void perf_ntjson_config(const struct perf_opts *o, int nranks, const struct perf_rank_info *ranks)
{
    if (!jf)
        return;
    fprintf(jf, ", \"config\": {\"nthreads\": 1, \"ngpus\": 1, \"minimum_bytes\": %zu, "
            "\"maximum_bytes\": %zu, ", o->min_bytes, o->max_bytes);
    if (o->step_factor > 1)
        fprintf(jf, "\"step_factor\": %zu, ", o->step_factor);
    else
        fprintf(jf, "\"step_bytes\": %zu, ", o->step_bytes);
    fprintf(jf, "\"warmup_iters\": %d, \"iterations\": %d, \"aggregated_iterations\": %d, "
            "\"validation\": %d, \"graph\": 0, \"blocking_collectives\": %s, "
            "\"per_iter_timing\": false, \"per_iter_skip\": 0, \"parallel_init\": false, "
            "\"devices\": [", o->warmup, o->iters, o->agg_iters, o->check,
            o->blocking ? "true" : "false");
    for (int r = 0; r < nranks; r++) {
        fprintf(jf, "%s{\"rank\": %d, \"group\": 0, \"pid\": %d, \"hostname\": ", r ? ", " : "",
                ranks[r].rank, ranks[r].pid);
        jstr(ranks[r].host);
        char info[64];
        snprintf(info, sizeof(info), "gx node %d over %s", ranks[r].node, ranks[r].providers);
        fprintf(jf, ", \"device\": -1, \"device_hex\": \"\", \"device_info\": ");
        jstr(info);
        fputc('}', jf);
    }
    fprintf(jf, "]}, \"results\": [");
    nrows = 0;
}

static void body(const struct perf_opts *o, const char *key, const struct perf_result *r)
{
    fprintf(jf, ", \"%s\": ", key);
    if (!r->ran) {
        fprintf(jf, "null");
        return;
    }
    fprintf(jf, "{\"%s\": ", o->report_cputime ? "cpu_time" : "time");
    jdouble(r->time_us);
    fprintf(jf, ", \"alg_bw\": ");
    jdouble(r->algbw);
    fprintf(jf, ", \"bus_bw\": ");
    jdouble(r->busbw);
    fprintf(jf, ", \"nwrong\": ");
    if (r->wrong >= 0)
        jdouble((double)r->wrong);
    else
        fprintf(jf, "null");
    fputc('}', jf);
}

void perf_ntjson_row(const struct perf_opts *o, const struct perf_row *row)
{
    if (!jf)
        return;
    char root[16];
    snprintf(root, sizeof(root), "%6i", row->root);
    fprintf(jf, "%s{\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": ",
            nrows++ ? ", " : "", row->bytes, row->count, perf_dtype_name(row->dtype));
    jstr(row->redop);
    fprintf(jf, ", \"root\": ");
    jstr(root);
    body(o, "out_of_place", &row->out_of_place);
    body(o, "in_place", &row->in_place);
    fprintf(jf, ", \"actual_iterations\": %d, \"experiment_name\": \"\"}", o->iters);
}

void perf_ntjson_end(const struct perf_opts *o, const struct perf_summary *s)
{
    if (!jf)
        return;
    fprintf(jf, "], \"out_of_bounds\": {\"count\": %lld, \"okay\": %s}, "
            "\"average_bus_bandwidth\": {\"bandwidth\": ", s->wrong, s->wrong ? "false" : "true");
    jdouble(s->avg_busbw);
    fprintf(jf, ", \"okay\": ");
    if (o->min_bw < 0)
        fprintf(jf, "\"unchecked\"");
    else
        fprintf(jf, "%s", s->bw_failed ? "false" : "true");
    fprintf(jf, "}, \"end_time\": ");
    jnow();
    fprintf(jf, "}\n");
    fclose(jf);
    jf = NULL;
}
