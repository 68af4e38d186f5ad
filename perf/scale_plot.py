#!/usr/bin/env python3
"""scale_plot.py CSV PREFIX - one PNG per figure of perf/scale_bench.sh
against the number of ranks (log2 x axis): PREFIX-init.png, -endpoints.png,
-fds.png, -rss.png, -bootmsgs.png. Needs python3-matplotlib."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FIGURES = [
    ("init", "init_ms_max", "init time, slowest rank (ms)"),
    ("endpoints", "endpoints_max", "fabric endpoints per rank (max)"),
    ("fds", "fds_max", "file descriptors per rank (max)"),
    ("rss", "rss_kb_mean", "RSS per rank (KiB, mean)"),
    ("bootmsgs", "boot_msgs_max", "bootstrap messages sent, busiest rank"),
]


def main():
    path, prefix = sys.argv[1], sys.argv[2]
    rows = [r for r in csv.DictReader(open(path)) if r["init_ms_max"]]
    series = {}
    for r in rows:
        series.setdefault((r["mode"], r["connect"]), []).append(r)
    for name, col, label in FIGURES:
        fig, ax = plt.subplots(figsize=(6, 4))
        for (mode, conn), rs in sorted(series.items()):
            xs = [int(r["ranks"]) for r in rs]
            ys = [float(r[col]) for r in rs]
            ax.plot(xs, ys, marker="o", label=f"{mode}, GX_CONNECT={conn}")
        if name == "endpoints":
            ns = sorted({int(r["ranks"]) for r in rows})
            import math
            ax.plot(ns, [2 * math.log2(n) + 2 for n in ns], "k--", label="2*log2(N)+2")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ranks (N)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(f"{prefix}-{name}.png", dpi=100)
        plt.close(fig)


if __name__ == "__main__":
    main()
