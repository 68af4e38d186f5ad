/*
 * accept_html.c - gx-accept's one-file HTML report: no script, no external
 * file, no font: a summary table, the failures, the node-pair bandwidth
 * heatmap and the busbw-vs-size plot as inline SVG, and every check.
 *
 * Heatmap colours are classes against the median link (accept_link_class):
 * >= 95% dark green, >= the outlier fraction light green, below it orange,
 * below half of it red; grey is the diagonal / not measured. Reads the
 * results; must not change them.
 */
#include <math.h>
#include <string.h>

#include "accept_result.h"

static const char *const class_fill[] = { "#1a9850", "#91cf60", "#fc8d59", "#d73027" };
#define FILL_NONE "#dddddd"

static void esc(FILE *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*s, out);
        }
    }
}

static void size_label(char *out, size_t len, double bytes)
{
    static const char *const units[] = { "B", "K", "M", "G" };
    int u = 0;
    while (bytes >= 1024 && u < 3)
        bytes /= 1024, u++;
    snprintf(out, len, "%g%s", bytes, units[u]);
}

static void heatmap(FILE *out, const struct accept_results *r)
{
    int n = r->nnodes, cell = n > 16 ? 24 : 56, left = 120, top = 80;
    double vals[4096];
    int k = 0;
    for (int i = 0; i < n * n && k < 4096; i++)
        if (i / n != i % n && r->pair_gbs[i] >= 0)
            vals[k++] = r->pair_gbs[i];
    double med = accept_median(vals, k);
    int w = left + (n * cell > 4 * 90 ? n * cell : 4 * 90) + 20, h = top + n * cell + 50;
    fprintf(out, "<h2>Point-to-point bandwidth</h2>\n<p>Row sends to column, GB/s. Median link "
            "%.3f GB/s; colours against the median (outlier below %.0f%%).</p>\n", med,
            100 * r->spec->outlier_fraction);
    fprintf(out, "<svg id=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
            w, h, w, h);
    for (int b = 0; b < n; b++) {
        fprintf(out, "<text x=\"%d\" y=\"%d\" transform=\"rotate(-45 %d %d)\">", left + b * cell +
                cell / 2, top - 6, left + b * cell + cell / 2, top - 6);
        esc(out, r->node_names[b]);
        fputs("</text>\n", out);
    }
    for (int a = 0; a < n; a++) {
        fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", left - 6,
                top + a * cell + cell / 2 + 4);
        esc(out, r->node_names[a]);
        fputs("</text>\n", out);
        for (int b = 0; b < n; b++) {
            double g = r->pair_gbs[a * n + b];
            int cls = a == b ? -1 : accept_link_class(g, med, r->spec->outlier_fraction);
            fprintf(out, "<rect class=\"cell\" data-from=\"%d\" data-to=\"%d\" x=\"%d\" y=\"%d\" "
                    "width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#ffffff\"><title>", a, b,
                    left + b * cell, top + a * cell, cell, cell,
                    cls < 0 ? FILL_NONE : class_fill[cls]);
            esc(out, r->node_names[a]);
            fputs(" -&gt; ", out);
            esc(out, r->node_names[b]);
            if (cls >= 0)
                fprintf(out, ": %.3f GB/s, latency %.1f us</title></rect>\n", g,
                        r->pair_lat_us[a * n + b]);
            else
                fputs("</title></rect>\n", out);
            if (cls >= 0 && cell >= 40)
                fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">"
                        "%.2f</text>\n", left + b * cell + cell / 2, top + a * cell + cell / 2 + 4,
                        g);
        }
    }
    static const char *const legend[] = { "&#8805; 95%", "&#8805; limit", "outlier", "&lt; half limit" };
    for (int c = 0; c < 4; c++) {
        int lx = left + c * 90, ly = top + n * cell + 18;
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"%s\"/>"
                "<text x=\"%d\" y=\"%d\">%s</text>\n", lx, ly, class_fill[c], lx + 18, ly + 11,
                legend[c]);
    }
    fputs("</svg>\n", out);
}

static void plot(FILE *out, const struct accept_results *r)
{
    static const char *const colours[] = { "#1f77b4", "#ff7f0e" };
    int w = 620, h = 320, left = 60, right = 140, top = 20, bottom = 40;
    double xmin = 1e300, xmax = 0, ymax = 0;
    const struct accept_sweep_spec *sp[2] = { &r->spec->allreduce, &r->spec->allgather };
    for (int s = 0; s < r->nsweeps; s++)
        for (int k = 0; k < r->sweeps[s].nsizes; k++) {
            const struct accept_sweep *sw = &r->sweeps[s];
            xmin = fmin(xmin, log2(sw->bytes[k] > 1 ? sw->bytes[k] : 1));
            xmax = fmax(xmax, log2(sw->bytes[k] > 1 ? sw->bytes[k] : 1));
            ymax = fmax(ymax, sw->busbw[k]);
        }
    for (int s = 0; s < 2; s++)
        ymax = fmax(ymax, sp[s]->enabled ? sp[s]->min_busbw_gbs : 0);
    if (xmax <= xmin)
        xmax = xmin + 1;
    ymax = ymax > 0 ? ymax * 1.1 : 1;
    int pw = w - left - right, ph = h - top - bottom;
#define PX(v) (left + ((v) - xmin) / (xmax - xmin) * pw)
#define PY(v) (top + ph - (v) / ymax * ph)
    fprintf(out, "<h2>Bus bandwidth vs size</h2>\n<svg id=\"busbw\" xmlns=\"http://www.w3.org/"
            "2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" stroke=\"#888\"/>\n",
            w, h, left, top, pw, ph);
    for (int i = 0; i <= 4; i++) {
        double v = ymax * i / 4;
        fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n", left - 4,
                PY(v) + 4, v);
    }
    fprintf(out, "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" text-anchor=\"middle\">"
            "busbw GB/s</text>\n", top + ph / 2, top + ph / 2);
    for (double e = ceil(xmin); e <= xmax; e += e + 2 <= xmax ? 2 : 1) {
        char lab[16];
        size_label(lab, sizeof(lab), pow(2, e));
        fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", PX(e),
                top + ph + 16, lab);
    }
    fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">message size (bytes)</text>\n",
            left + pw / 2, h - 6);
    for (int s = 0; s < r->nsweeps; s++) {
        const struct accept_sweep *sw = &r->sweeps[s];
        const char *col = colours[s % 2];
        fprintf(out, "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                "points=\"", col);
        for (int k = 0; k < sw->nsizes; k++)
            fprintf(out, "%.1f,%.1f ", PX(log2(sw->bytes[k] > 1 ? sw->bytes[k] : 1)),
                    PY(sw->busbw[k]));
        fputs("\"/>\n", out);
        for (int k = 0; k < sw->nsizes; k++)
            fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s %.0f B: "
                    "%.3f GB/s</title></circle>\n", PX(log2(sw->bytes[k] > 1 ? sw->bytes[k] : 1)),
                    PY(sw->busbw[k]), col, sw->coll, sw->bytes[k], sw->busbw[k]);
        const struct accept_sweep_spec *spec = strcmp(sw->coll, "all_reduce") == 0 ? sp[0] : sp[1];
        if (spec->min_busbw_gbs >= 0)
            fprintf(out, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                    "stroke-dasharray=\"5,4\"/>\n", left, left + pw, PY(spec->min_busbw_gbs),
                    PY(spec->min_busbw_gbs), col);
        fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"3\" fill=\"%s\"/><text x=\"%d\""
                " y=\"%d\">%s</text>\n", left + pw + 10, top + 10 + s * 18, col, left + pw + 26,
                top + 14 + s * 18, sw->coll);
    }
    fprintf(out, "<text x=\"%d\" y=\"%d\" fill=\"#555\">dashed: threshold</text>\n", left + pw + 10,
            top + 50);
    fputs("</svg>\n", out);
#undef PX
#undef PY
}

static void check_rows(FILE *out, const struct accept_results *r, const char *group, int only_fail)
{
    for (int i = 0; i < r->ncheck; i++) {
        const struct accept_check *c = &r->checks[i];
        if ((group && strcmp(c->group, group) != 0) || (only_fail && c->status != ACCEPT_FAIL))
            continue;
        fprintf(out, "<tr class=\"%s\"><td>%s</td><td>%s/%s</td><td>", accept_status_name(c->status),
                accept_status_name(c->status), c->group, c->name);
        esc(out, c->subject);
        fputs("</td><td>", out);
        esc(out, c->evidence);
        fputs("</td></tr>\n", out);
    }
}

int accept_report_html(FILE *out, const struct accept_results *r)
{
    int failed = accept_failed_count(r);
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>gx-accept: ",
          out);
    esc(out, r->spec->name[0] ? r->spec->name : "acceptance");
    fputs("</title>\n<style>\nbody{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}\n"
          "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;"
          "text-align:left;vertical-align:top;font-size:13px}td:nth-child(3){white-space:nowrap}\n"
          "tr.FAIL td:first-child{background:#f4cccc;font-weight:bold}tr.pass td:first-child"
          "{background:#d9ead3}tr.skip td:first-child{background:#eeeeee}\n"
          ".verdict{font-size:20px;font-weight:bold;padding:6px 12px;display:inline-block}\n"
          ".PASS{background:#d9ead3}.FAILED{background:#f4cccc}\n</style></head><body>\n", out);
    fputs("<h1>gx-accept: ", out);
    esc(out, r->spec->name[0] ? r->spec->name : "acceptance");
    fprintf(out, "</h1>\n<p class=\"verdict %s\">%s: %d of %d checks failed</p>\n",
            failed ? "FAILED" : "PASS", failed ? "FAIL" : "PASS", failed, r->ncheck);
    fprintf(out, "<p>%d nodes, %d ranks, started %s, %.1f s, spec ", r->nnodes, r->nranks,
            r->started, r->duration_s);
    esc(out, r->spec_path);
    fputs("</p>\n<h2>Summary</h2>\n<table id=\"summary\"><tr><th>group</th><th>pass</th>"
          "<th>fail</th><th>skip</th></tr>\n", out);
    static const char *const groups[] = { "node", "fabric", "outlier" };
    for (int g = 0; g < 3; g++) {
        int cnt[3] = { 0, 0, 0 };
        for (int i = 0; i < r->ncheck; i++)
            if (strcmp(r->checks[i].group, groups[g]) == 0)
                cnt[r->checks[i].status]++;
        fprintf(out, "<tr><td>%s</td><td>%d</td><td>%d</td><td>%d</td></tr>\n", groups[g],
                cnt[ACCEPT_PASS], cnt[ACCEPT_FAIL], cnt[ACCEPT_SKIP]);
    }
    fputs("</table>\n", out);
    if (failed) {
        fputs("<h2>Failures</h2>\n<table id=\"failures\">\n", out);
        check_rows(out, r, NULL, 1);
        fputs("</table>\n", out);
    }
    if (r->have_pairs)
        heatmap(out, r);
    if (r->nsweeps)
        plot(out, r);
    static const char *const titles[] = { "Node checks", "Fabric checks", "Outliers" };
    for (int g = 0; g < 3; g++) {
        fprintf(out, "<h2>%s</h2>\n<table id=\"%s\"><tr><th>status</th><th>check</th>"
                "<th>subject</th><th>evidence</th></tr>\n", titles[g], groups[g]);
        check_rows(out, r, groups[g], 0);
        fputs("</table>\n", out);
    }
    fputs("</body></html>\n", out);
    return ferror(out) ? -1 : 0;
}
