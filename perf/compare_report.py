#!/usr/bin/python3
"""compare_report.py - the table of perf/compare.sh: reads the CSV rows each
tool printed (files SCENARIO__TOOL__RUN.csv, gx-perf's --csv columns) and
prints markdown: per scenario and size the median busbw of every tool, the
median of the per-run ratios, times per op, and the speed goals of issues 4
and 33 with every run's figure beside the median.
"""
import argparse
import collections
import csv
import datetime
import glob
import os
import statistics

SCENARIOS = [
    # (name, title, primary tool, {peer column: tool}, extra gx column)
    ("2x1", "2 ranks, one node (Open MPI `--mca btl self,vader`)", "gx",
     {"Open MPI": "ompi", "Gloo": "gloo"}, None),
    ("4x1", "4 ranks, one node (Open MPI `--mca btl self,vader`)", "gx",
     {"Open MPI": "ompi", "Gloo": "gloo"}, None),
    ("netns", "2 nodes x 2 ranks, network namespaces joined by veth: gx `GX_PROVIDER=tcp` "
     "vs Open MPI `--mca btl self,tcp`", "gx-tcp",
     {"Open MPI": "ompi-tcp", "Gloo": "gloo"}, "gx"),
]


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def load(directory):
    """data[scenario][tool][run][(size, placement)] = (busbw, time_us)"""
    data = collections.defaultdict(lambda: collections.defaultdict(dict))
    for path in glob.glob(os.path.join(directory, "*__*__*.csv")):
        scen, tool, run = os.path.basename(path)[:-4].split("__")
        scen = scen.split("-")[0]  # 2x1-small and 2x1-large are one table
        rows = data[scen][tool].setdefault(int(run), {})
        with open(path) as f:
            for r in csv.DictReader(f):
                rows[(int(r["size"]), r["placement"])] = (float(r["busbw_gbs"]), float(r["time_us"]))
    return data


def med(values):
    return statistics.median(values) if values else None


def fmt(v, spec=".2f"):
    return "–" if v is None else format(v, spec)


def run_ratios(runs_a, runs_b, key, index, invert=False):
    """The per-run ratios a/b (b/a when invert), runs with both figures, in run order."""
    out = []
    for run, rows in sorted(runs_a.items()):
        other = runs_b.get(run, {})
        if key in rows and key in other:
            a, b = rows[key][index], other[key][index]
            if a > 0 and b > 0:
                out.append(b / a if invert else a / b)
    return out


def per_run_ratio(runs_a, runs_b, key, index, invert=False):
    """Median over runs that have both figures of a/b (b/a when invert)."""
    out = run_ratios(runs_a, runs_b, key, index, invert)
    return med(out), len(out)


def runs_text(values, spec=".2f"):
    return "runs " + " ".join(format(v, spec) for v in values) if values else "no runs"


def figure(runs, key, index):
    return med([rows[key][index] for rows in runs.values() if key in rows])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--runs", type=int)
    p.add_argument("--cpu", default="?")
    p.add_argument("--cores", default="?")
    p.add_argument("--iters")
    p.add_argument("--warmup")
    p.add_argument("--blocking")
    p.add_argument("--ompi", default="?")
    p.add_argument("--elapsed", default="?")
    p.add_argument("--gx-commit", default="?")
    p.add_argument("--load")
    o = p.parse_args()
    data = load(o.dir)
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = "?"

    print(f"# float32 sum all-reduce: gx vs Open MPI vs Gloo ({datetime.date.today()})\n")
    print(f"- CPU: {o.cpu}, {o.cores} cores (shared with other work; see load below)")
    print(f"- gx {o.gx_commit} (Release), {o.ompi}, torch {torch_version} (gloo, CPU tensors)")
    print(f"- {o.runs} runs; per run every tool in rotating order; {o.iters} timed iterations "
          f"after {o.warmup} warm-up per size (4 KiB..256 KiB: 200 after 20); "
          f"{'blocking calls' if o.blocking == '1' else 'non-blocking calls, 64 in flight'}; "
          f"time = mean over ranks; {o.elapsed} s in all")
    print("- busbw = algbw x 2(n-1)/n (nccl-tests); GB/s = 1e9 B/s; figures are medians over "
          "runs, ratios the median of per-run ratios (n = runs with both figures)")
    print("- gx and Open MPI columns are out-of-place (separate buffers); torch's all_reduce "
          "is in place only, so gx/Gloo compares gx in-place with Gloo\n")
    if o.load and os.path.exists(o.load):
        with open(o.load) as f:
            lines = [l.strip() for l in f if l.strip()]
        print("Load average (1, 5, 15 min): " + "; ".join(lines) + "\n")

    goals = []
    for name, title, primary, peers, extra in SCENARIOS:
        if name not in data:
            continue
        tools = data[name]
        gx = tools.get(primary, {})
        ompi = tools.get(peers["Open MPI"], {})
        gloo = tools.get(peers["Gloo"], {})
        sizes = sorted({k[0] for runs in tools.values() for rows in runs.values() for k in rows})
        print(f"## {title}\n")
        head = ["size", f"{primary} busbw", "Open MPI busbw", "Gloo busbw"]
        if extra:
            head.append(f"{extra} (shm+tcp) busbw")
        head += [f"{primary}/MPI", f"{primary}/MPI in-place", f"{primary}/Gloo",
                 f"{primary} µs", "MPI µs", "Gloo µs"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for size in sizes:
            oop, inp = (size, "out-of-place"), (size, "in-place")
            r_mpi, n_mpi = per_run_ratio(gx, ompi, oop, 0)
            r_mpi_in, n_mpi_in = per_run_ratio(gx, ompi, inp, 0)
            r_gloo, n_gloo = per_run_ratio(gx, gloo, inp, 0)
            cells = [human(size), fmt(figure(gx, oop, 0)), fmt(figure(ompi, oop, 0)),
                     fmt(figure(gloo, inp, 0))]
            if extra:
                cells.append(fmt(figure(tools.get(extra, {}), oop, 0)))
            cells += [f"{fmt(r_mpi)} (n={n_mpi})", f"{fmt(r_mpi_in)} (n={n_mpi_in})",
                      f"{fmt(r_gloo)} (n={n_gloo})", fmt(figure(gx, oop, 1), ".1f"),
                      fmt(figure(ompi, oop, 1), ".1f"), fmt(figure(gloo, inp, 1), ".1f")]
            print("| " + " | ".join(cells) + " |")
            # Speed goals of issue 4.
            if name == "2x1" and size in (1 << 20, 16 << 20, 64 << 20):
                goals.append((f"2 ranks, {human(size)}: gx busbw >= 1.5x Open MPI", r_mpi, 1.5, ">=",
                              run_ratios(gx, ompi, oop, 0)))
            if name == "2x1" and size in (4 << 10, 16 << 10):
                rr = run_ratios(gx, ompi, oop, 1)
                times = [rows[oop][1] for _, rows in sorted(gx.items()) if oop in rows]
                spread = max(times) / min(times) if times and min(times) > 0 else None
                goals.append((f"2 ranks, {human(size)}: gx time <= 2x Open MPI's", med(rr), 2.0,
                              "<=", rr))
                goals.append((f"2 ranks, {human(size)}: gx time spread (max/min over runs) < 2x "
                              f"(gx µs {runs_text(times, '.1f')})", spread, 2.0, "<", None))
            if name == "4x1" and size >= 1 << 20:
                goals.append((f"4 ranks, {human(size)}: gx busbw >= 1.2x Open MPI", r_mpi, 1.2, ">=",
                              run_ratios(gx, ompi, oop, 0)))
            if name == "netns" and size >= 1 << 20:
                goals.append((f"2x2 netns tcp, {human(size)}: gx busbw >= 1.0x Open MPI tcp",
                              r_mpi, 1.0, ">=", run_ratios(gx, ompi, oop, 0)))
        print()
        print("<details><summary>every run (busbw GB/s, out-of-place / in-place)</summary>\n")
        for tool, runs in sorted(tools.items()):
            for run, rows in sorted(runs.items()):
                figs = []
                for size in sizes:
                    a = rows.get((size, "out-of-place"))
                    b = rows.get((size, "in-place"))
                    figs.append(f"{human(size)} {fmt(a[0] if a else None)}/{fmt(b[0] if b else None)}")
                print(f"- {tool} run {run}: " + ", ".join(figs))
        print("\n</details>\n")

    if goals:
        print("## Speed goals (issues 4 and 33), out-of-place, median of per-run ratios\n")
        print("| goal | measured (median, then every run) | verdict |")
        print("|---|---|---|")
        for text, value, bound, rel, per_run in goals:
            ok = value is not None and (value >= bound if rel == ">=" else
                                        value <= bound if rel == "<=" else value < bound)
            shown = fmt(value) + "x" if value is not None else "no figure"
            if per_run:
                shown += f" ({runs_text(per_run)})"
            print(f"| {text} | {shown} | {'met' if ok else '**not met**'} |")
        print()


if __name__ == "__main__":
    main()
