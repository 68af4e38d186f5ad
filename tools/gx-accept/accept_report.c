/*
 * accept_report.c - gx-accept's text outputs: the console summary, JSON and
 * JUnit XML (one testsuite per check group, one testcase per check and
 * subject, <failure>/<skipped> carrying the evidence, as CI systems show it).
 *
 * Reads the results; must not change them. The HTML report is accept_html.c.
 */
#include <string.h>

#include "accept_result.h"

static const char *const groups[] = { "node", "fabric", "outlier" };

static void print_matrix(FILE *out, const struct accept_results *r)
{
    int n = r->nnodes, w = 9;
    for (int i = 0; i < n; i++)
        if ((int)strlen(r->node_names[i]) + 2 > w)
            w = (int)strlen(r->node_names[i]) + 2;
    fprintf(out, "\np2p bandwidth, GB/s (row sends to column):\n%-*s", w, "");
    for (int b = 0; b < n; b++)
        fprintf(out, "%*s", w, r->node_names[b]);
    fputc('\n', out);
    for (int a = 0; a < n; a++) {
        fprintf(out, "%-*s", w, r->node_names[a]);
        for (int b = 0; b < n; b++) {
            double g = r->pair_gbs[a * n + b];
            if (a == b || g < 0)
                fprintf(out, "%*s", w, "-");
            else
                fprintf(out, "%*.3f", w, g);
        }
        fputc('\n', out);
    }
}

void accept_report_console(FILE *out, const struct accept_results *r)
{
    fprintf(out, "gx-accept: %s: %d node%s, %d rank%s, spec %s, %.1f s\n",
            r->spec->name[0] ? r->spec->name : "acceptance", r->nnodes,
            r->nnodes == 1 ? "" : "s", r->nranks, r->nranks == 1 ? "" : "s", r->spec_path,
            r->duration_s);
    if (r->have_pairs)
        print_matrix(out, r);
    for (int s = 0; s < r->nsweeps; s++) {
        const struct accept_sweep *sw = &r->sweeps[s];
        fprintf(out, "\n%s busbw:%12s %12s %12s\n", sw->coll, "bytes", "time us", "busbw GB/s");
        for (int k = 0; k < sw->nsizes; k++)
            fprintf(out, "%*s%12.0f %12.1f %12.3f\n", (int)strlen(sw->coll) + 7, "",
                    sw->bytes[k], sw->time_us[k], sw->busbw[k]);
    }
    fprintf(out, "\n%-8s %5s %5s %5s\n", "checks", "pass", "fail", "skip");
    for (int g = 0; g < 3; g++) {
        int cnt[3] = { 0, 0, 0 };
        for (int i = 0; i < r->ncheck; i++)
            if (strcmp(r->checks[i].group, groups[g]) == 0)
                cnt[r->checks[i].status]++;
        fprintf(out, "%-8s %5d %5d %5d\n", groups[g], cnt[ACCEPT_PASS], cnt[ACCEPT_FAIL],
                cnt[ACCEPT_SKIP]);
    }
    int failed = accept_failed_count(r);
    if (failed)
        fputc('\n', out);
    for (int i = 0; i < r->ncheck; i++) {
        const struct accept_check *c = &r->checks[i];
        if (c->status == ACCEPT_FAIL)
            fprintf(out, "FAIL %s/%s %s: %s\n", c->group, c->name, c->subject, c->evidence);
    }
    fprintf(out, "\nresult: %s (%d of %d checks failed)\n", failed ? "FAIL" : "PASS", failed,
            r->ncheck);
}

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void json_number(FILE *out, double v)
{
    if (v != v || v > 1e300 || v < -1e300)
        fputs("null", out);
    else
        fprintf(out, "%.6g", v);
}

int accept_report_json(FILE *out, const struct accept_results *r)
{
    int n = r->nnodes;
    fprintf(out, "{\n  \"tool\": \"gx-accept\",\n  \"name\": ");
    json_string(out, r->spec->name);
    fprintf(out, ",\n  \"spec\": ");
    json_string(out, r->spec_path);
    fprintf(out, ",\n  \"started\": \"%s\",\n  \"duration_s\": %.3f,\n  \"nodes\": [", r->started,
            r->duration_s);
    for (int i = 0; i < n; i++) {
        fputs(i ? ", " : "", out);
        json_string(out, r->node_names[i]);
    }
    fprintf(out, "],\n  \"ranks\": %d,\n  \"passed\": %s,\n  \"failed_checks\": %d,\n", r->nranks,
            accept_failed_count(r) ? "false" : "true", accept_failed_count(r));
    fprintf(out, "  \"checks\": [\n");
    for (int i = 0; i < r->ncheck; i++) {
        const struct accept_check *c = &r->checks[i];
        fprintf(out, "    {\"group\": \"%s\", \"name\": \"%s\", \"subject\": ", c->group, c->name);
        json_string(out, c->subject);
        fprintf(out, ", \"status\": \"%s\", \"evidence\": ",
                c->status == ACCEPT_PASS ? "pass" : c->status == ACCEPT_FAIL ? "fail" : "skip");
        json_string(out, c->evidence);
        fprintf(out, "}%s\n", i + 1 < r->ncheck ? "," : "");
    }
    fprintf(out, "  ],\n  \"p2p\": ");
    if (r->have_pairs) {
        fprintf(out, "{\"gbs\": [");
        for (int a = 0; a < n; a++) {
            fprintf(out, "%s[", a ? ", " : "");
            for (int b = 0; b < n; b++) {
                fputs(b ? ", " : "", out);
                if (a == b || r->pair_gbs[a * n + b] < 0)
                    fputs("null", out);
                else
                    json_number(out, r->pair_gbs[a * n + b]);
            }
            fputc(']', out);
        }
        fprintf(out, "], \"latency_us\": [");
        for (int a = 0; a < n; a++) {
            fprintf(out, "%s[", a ? ", " : "");
            for (int b = 0; b < n; b++) {
                fputs(b ? ", " : "", out);
                if (a == b)
                    fputs("null", out);
                else
                    json_number(out, r->pair_lat_us[a * n + b]);
            }
            fputc(']', out);
        }
        fputs("]}", out);
    } else {
        fputs("null", out);
    }
    fprintf(out, ",\n  \"sweeps\": [");
    for (int s = 0; s < r->nsweeps; s++) {
        const struct accept_sweep *sw = &r->sweeps[s];
        fprintf(out, "%s\n    {\"collective\": \"%s\", \"rows\": [", s ? "," : "", sw->coll);
        for (int k = 0; k < sw->nsizes; k++) {
            fprintf(out, "%s{\"bytes\": %.0f, \"time_us\": ", k ? ", " : "", sw->bytes[k]);
            json_number(out, sw->time_us[k]);
            fputs(", \"algbw_gbs\": ", out);
            json_number(out, sw->algbw[k]);
            fputs(", \"busbw_gbs\": ", out);
            json_number(out, sw->busbw[k]);
            fputc('}', out);
        }
        fputs("]}", out);
    }
    fprintf(out, "%s],\n  \"soak\": {\"seconds\": %.3f, \"collectives\": %lld, \"wrong\": %lld}\n}\n",
            r->nsweeps ? "\n  " : "", r->soak_seconds, r->soak_ops, r->soak_wrong);
    return ferror(out) ? -1 : 0;
}

static void xml_text(FILE *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&apos;", out); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
                fputc(*s, out);
        }
    }
}

int accept_report_junit(FILE *out, const struct accept_results *r)
{
    int skipped = 0;
    for (int i = 0; i < r->ncheck; i++)
        skipped += r->checks[i].status == ACCEPT_SKIP;
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"gx-accept\" "
            "tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"%d\" time=\"%.3f\" "
            "timestamp=\"%s\">\n", r->ncheck, accept_failed_count(r), skipped, r->duration_s,
            r->started);
    for (int g = 0; g < 3; g++) {
        int cnt[3] = { 0, 0, 0 }, total = 0;
        for (int i = 0; i < r->ncheck; i++)
            if (strcmp(r->checks[i].group, groups[g]) == 0)
                cnt[r->checks[i].status]++, total++;
        fprintf(out, "  <testsuite name=\"gx-accept.%s\" tests=\"%d\" failures=\"%d\" "
                "errors=\"0\" skipped=\"%d\" timestamp=\"%s\">\n", groups[g], total,
                cnt[ACCEPT_FAIL], cnt[ACCEPT_SKIP], r->started);
        for (int i = 0; i < r->ncheck; i++) {
            const struct accept_check *c = &r->checks[i];
            if (strcmp(c->group, groups[g]) != 0)
                continue;
            fprintf(out, "    <testcase classname=\"gx-accept.%s.%s\" name=\"", c->group, c->name);
            xml_text(out, c->subject);
            fputs("\" time=\"0\">", out);
            if (c->status == ACCEPT_FAIL) {
                fputs("\n      <failure message=\"", out);
                xml_text(out, c->evidence);
                fprintf(out, "\" type=\"%s\">", c->name);
                xml_text(out, c->evidence);
                fputs("</failure>\n    ", out);
            } else if (c->status == ACCEPT_SKIP) {
                fputs("\n      <skipped message=\"", out);
                xml_text(out, c->evidence);
                fputs("\"/>\n    ", out);
            } else {
                fputs("\n      <system-out>", out);
                xml_text(out, c->evidence);
                fputs("</system-out>\n    ", out);
            }
            fputs("</testcase>\n", out);
        }
        fputs("  </testsuite>\n", out);
    }
    fputs("</testsuites>\n", out);
    return ferror(out) ? -1 : 0;
}
