/*
 * perf_report.c - table, JSON and CSV output of gx-perf.
 *
 * The table reproduces nccl-tests' format strings (src/common.cu) column for
 * column, so tools that parse all_reduce_perf output parse gx-perf's:
 *   "%12li  %12li  %8s  %6s  %6i" then per placement "  %7s  %6.2f  %6.2f  %5g"
 * and the "# Avg bus bandwidth    : %g" footer.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "perf_report.h"

static int json_rows;    /* rows printed so far, for the commas */
static int report_nodes; /* for the CSV rows */

static void format_time(char *buf, size_t len, double us)
{
    if (us >= 10000.0)
        snprintf(buf, len, "%7.0f", us);
    else if (us >= 100.0)
        snprintf(buf, len, "%7.1f", us);
    else
        snprintf(buf, len, "%7.2f", us);
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static const char *avg_name(enum perf_average a)
{
    static const char *const names[] = { "rank0", "mean", "min", "max" };
    return names[a];
}

void perf_report_begin(FILE *f, const struct perf_opts *o, int nranks, int nnodes,
                       const struct perf_rank_info *ranks)
{
    report_nodes = nnodes;
    if (o->format == PERF_FORMAT_CSV) {
        fprintf(f, "collective,ranks,nodes,size,count,type,redop,root,placement,time_us,"
                "algbw_gbs,busbw_gbs,wrong\n");
        return;
    }
    if (o->format == PERF_FORMAT_JSON) {
        fprintf(f, "{\n  \"tool\": \"gx-perf\",\n  \"gx_version\": ");
        json_string(f, gx_version());
        fprintf(f, ",\n  \"collective\": \"%s\",\n  \"ranks\": %d,\n  \"nodes\": %d,\n"
                "  \"min_bytes\": %zu,\n  \"max_bytes\": %zu,\n  \"step_factor\": %zu,\n"
                "  \"step_bytes\": %zu,\n  \"iters\": %d,\n  \"warmup_iters\": %d,\n"
                "  \"check\": %d,\n  \"blocking\": %d,\n  \"average\": \"%s\",\n"
                "  \"buffers\": \"%s\",\n  \"rank_info\": [",
                o->coll->name, nranks, nnodes, o->min_bytes, o->max_bytes, o->step_factor,
                o->step_bytes, o->iters, o->warmup, o->check, o->blocking,
                avg_name(o->average), o->device ? "device" : "host");
        for (int r = 0; r < nranks; r++) {
            fprintf(f, "%s{\"rank\": %d, \"pid\": %d, \"node\": %d, \"host\": ", r ? ", " : "",
                    ranks[r].rank, ranks[r].pid, ranks[r].node);
            json_string(f, ranks[r].host);
            fprintf(f, ", \"providers\": ");
            json_string(f, ranks[r].providers);
            fputc('}', f);
        }
        fprintf(f, "],\n  \"results\": [");
        json_rows = 0;
        return;
    }
    fprintf(f, "# Collective test starting: %s\n", o->prog_name);
    fprintf(f, "# gx-perf %s: nRanks %d nNodes %d minBytes %zu maxBytes %zu step: %zu(%s) "
            "warmup iters: %d iters: %d agg iters: 1 validation: %d blocking: %d\n",
            o->coll->name, nranks, nnodes, o->min_bytes, o->max_bytes,
            o->step_factor > 1 ? o->step_factor : o->step_bytes,
            o->step_factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check ? 1 : 0,
            o->blocking);
    if (o->device)
        fprintf(f, "# buffers: CUDA device memory (GPU local rank modulo the GPUs)\n");
    fprintf(f, "#\n# Using ranks (gx %s)\n", gx_version());
    for (int r = 0; r < nranks; r++)
        fprintf(f, "#  Rank %2d Pid %6d on %10s node %2d peers over %s\n", ranks[r].rank,
                ranks[r].pid, ranks[r].host, ranks[r].node, ranks[r].providers);
    if (o->blocking)
        fprintf(f, "# Blocking Enabled: -z %d\n", o->blocking);
    fprintf(f, "#\n");
    const char *tcol = o->report_cputime ? "cputime" : "time";
    const char *ts = o->report_timestamps ? "  timestamp" : "";
    fprintf(f, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
            "in-place          \n", "", "", "", "", "");
    fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s%s\n", "size",
            "count", "type", "redop", "root", tcol, "algbw", "busbw", "#wrong", tcol,
            "algbw", "busbw", "#wrong", ts);
    fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s%s\n", "(B)",
            "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
            "(GB/s)", "", o->report_timestamps ? "  (Y-m-d H:M:S)" : "");
    fflush(f);
}

static void table_result(FILE *f, const struct perf_result *r)
{
    if (!r->ran) {
        fprintf(f, "  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
        return;
    }
    char t[32];
    format_time(t, sizeof(t), r->time_us);
    if (r->wrong >= 0)
        fprintf(f, "  %7s  %6.2f  %6.2f  %5g", t, r->algbw, r->busbw, (double)r->wrong);
    else
        fprintf(f, "  %7s  %6.2f  %6.2f  %5s", t, r->algbw, r->busbw, "N/A");
}

static void json_result(FILE *f, const char *name, const struct perf_result *r)
{
    if (!r->ran) {
        fprintf(f, "\"%s\": null", name);
        return;
    }
    fprintf(f, "\"%s\": {\"time_us\": %.6g, \"algbw_gbs\": %.6g, \"busbw_gbs\": %.6g, "
            "\"wrong\": ", name, r->time_us, r->algbw, r->busbw);
    if (r->wrong >= 0)
        fprintf(f, "%lld}", r->wrong);
    else
        fprintf(f, "null}");
}

static void csv_result(FILE *f, const struct perf_opts *o, int nranks, const struct perf_row *row,
                       const char *placement, const struct perf_result *r)
{
    if (!r->ran)
        return;
    fprintf(f, "%s,%d,%d,%zu,%zu,%s,%s,%d,%s,%.6g,%.6g,%.6g,", o->coll->name, nranks,
            report_nodes, row->bytes,
            row->count, perf_dtype_name(row->dtype), row->redop, row->root, placement,
            r->time_us, r->algbw, r->busbw);
    if (r->wrong >= 0)
        fprintf(f, "%lld", r->wrong);
    fputc('\n', f);
}

void perf_report_row(FILE *f, const struct perf_opts *o, int nranks, const struct perf_row *row)
{
    switch (o->format) {
    case PERF_FORMAT_CSV:
        csv_result(f, o, nranks, row, "out-of-place", &row->out_of_place);
        csv_result(f, o, nranks, row, "in-place", &row->in_place);
        break;
    case PERF_FORMAT_JSON:
        fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
                "\"root\": %d, ", json_rows++ ? "," : "", row->bytes, row->count,
                perf_dtype_name(row->dtype), row->redop, row->root);
        json_result(f, "out_of_place", &row->out_of_place);
        fprintf(f, ", ");
        json_result(f, "in_place", &row->in_place);
        fputc('}', f);
        break;
    default:
        fprintf(f, "%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count,
                perf_dtype_name(row->dtype), row->redop, row->root);
        table_result(f, &row->out_of_place);
        table_result(f, &row->in_place);
        if (o->report_timestamps) {
            char when[32];
            time_t now = time(NULL);
            struct tm tm;
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
            fprintf(f, "  %s", when);
        }
        fputc('\n', f);
        break;
    }
    fflush(f);
}

void perf_report_end(FILE *f, const struct perf_opts *o, const struct perf_summary *s)
{
    if (o->format == PERF_FORMAT_CSV) {
        fflush(f);
        return;
    }
    if (o->format == PERF_FORMAT_JSON) {
        fprintf(f, "\n  ],\n  \"wrong\": ");
        if (s->checked)
            fprintf(f, "%lld", s->wrong);
        else
            fprintf(f, "null");
        fprintf(f, ",\n  \"avg_busbw_gbs\": %.6g,\n  \"min_bw_gbs\": ", s->avg_busbw);
        if (o->min_bw >= 0)
            fprintf(f, "%.6g", o->min_bw);
        else
            fprintf(f, "null");
        fprintf(f, ",\n  \"pass\": %s\n}\n", s->wrong || s->bw_failed ? "false" : "true");
        fflush(f);
        return;
    }
    fprintf(f, "# Out of bounds values : %lld %s\n", s->wrong, s->wrong ? "FAILED" : "OK");
    fprintf(f, "# Avg bus bandwidth    : %g %s\n", s->avg_busbw,
            o->min_bw < 0 ? "" : (s->bw_failed ? "FAILED" : "OK"));
    if (s->bw_failed)
        fprintf(f, "# (below %s %g GB/s%s)\n", o->min_bw_from,
                strcmp(o->min_bw_from, "--min-bw") ? o->min_bw / 0.9 : o->min_bw,
                strcmp(o->min_bw_from, "--min-bw") ? " less nccl-tests' 10% tolerance" : "");
    fprintf(f, "#\n");
    fprintf(f, "# Collective test concluded: %s\n", o->prog_name);
    fflush(f);
}
