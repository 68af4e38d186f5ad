"""perf_stats.py - medians with every run's figure beside them, for the perf
scripts' reports (import it with sys.path.insert(0, <perf dir>)).

cell(values)        "3.21 (runs 3.10 3.30 3.21)": the median, then each run
ratio_cell(a, b)    the same for the per-run ratios a[i] / b[i]
spread(values)      max / min (1.0 for one run; inf when the minimum is 0)
"""
import statistics


def _fmt(v, digits):
    return f"{v:.{digits}f}"


def cell(values, digits=2):
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    med = statistics.median(vals)
    return f"{_fmt(med, digits)} (runs {' '.join(_fmt(v, digits) for v in vals)})"


def ratios(a, b):
    return [x / y for x, y in zip(a, b) if y]


def ratio_cell(a, b, digits=2):
    return cell(ratios(a, b), digits)


def median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else float("nan")


def spread(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return float("nan")
    lo = min(vals)
    return max(vals) / lo if lo > 0 else float("inf")
