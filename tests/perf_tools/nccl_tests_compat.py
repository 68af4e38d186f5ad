#!/usr/bin/env python3
"""gx-perf read as nccl-tests' output is read (test tools.gx-perf.nccl-tests).

nccl_tests_compat.py GX_RUN GX_PERF

A parser written from nccl-tests' output format (README, doc/PERFORMANCE.md,
src/common.cu as of v2.19) reads gx-perf's output for all eight collectives
on 3 ranks and checks what such scripts rely on: the "# Collective test
starting/concluded: <coll>_perf" lines, 13 columns per row, the size column
max(send, recv) bytes of a rank with per-rank shares rounded down to 16 bytes,
the count column the count passed to the collective (per rank for all_gather,
reduce_scatter, alltoall, gather, scatter), algbw = size/time, busbw =
algbw * factor, the footer; then NCCL_TESTS_MIN_BW with nccl-tests' 10%
tolerance, -J JSON with nccl-tests' keys, and every nccl-tests flag accepted
or refused with "not supported in gx-perf".
"""
import json
import os
import re
import subprocess
import sys
import tempfile

RUN, PERF = sys.argv[1], sys.argv[2]
NRANKS = 3
ESIZE = {"float": 4, "half": 2, "int8": 1, "double": 8}
PER_RANK = {"all_gather", "reduce_scatter", "alltoall", "gather", "scatter"}
FACTOR = {"all_reduce": 2.0 * (NRANKS - 1) / NRANKS, "broadcast": 1.0, "reduce": 1.0}
fails = []


def fail(msg):
    fails.append(msg)
    print("FAIL:", msg)


def gx_perf(args, env=None, expect=0):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([RUN, "-n", str(NRANKS), PERF] + args, env=e, capture_output=True,
                       text=True, timeout=120)
    if expect is not None and p.returncode != expect:
        fail("gx-perf %s: exit %d, expected %d\n%s%s" % (" ".join(args), p.returncode, expect,
                                                         p.stdout[-2000:], p.stderr[-2000:]))
    return p


def parse(text):
    """nccl-tests' table: '#' lines are comments, rows have 13 fields."""
    rows, starting, concluded, avg = [], None, None, None
    for line in text.splitlines():
        m = re.match(r"# Collective test (starting|concluded): (\S+)$", line)
        if m:
            if m.group(1) == "starting":
                starting = m.group(2)
            else:
                concluded = m.group(2)
            continue
        m = re.match(r"# Avg bus bandwidth\s+: (\S+)", line)
        if m:
            avg = float(m.group(1))
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        if len(f) not in (13, 15):  # -S 1 adds "YYYY-mm-dd HH:MM:SS"
            fail("row does not have nccl-tests' 13 columns: %r" % line)
            continue
        rows.append(dict(size=int(f[0]), count=int(f[1]), type=f[2], redop=f[3], root=int(f[4]),
                         time=float(f[5]), algbw=float(f[6]), busbw=float(f[7]), wrong=f[8],
                         ip_time=f[9], ip_wrong=f[12]))
    return rows, starting, concluded, avg


def expected_sizes(lo, hi, factor):
    s = lo
    while s <= hi:
        yield s
        s *= factor


def check_collective(coll, dtype):
    p = gx_perf([coll, "-b", "1000", "-e", "256000", "-f", "16", "-d", dtype, "-n", "3", "-w", "1"])
    rows, starting, concluded, avg = parse(p.stdout)
    if starting != coll + "_perf" or concluded != coll + "_perf":
        fail("%s: starting/concluded lines name %r/%r" % (coll, starting, concluded))
    if avg is None:
        fail("%s: no '# Avg bus bandwidth' footer" % coll)
    want = list(expected_sizes(1000, 256000, 16))
    if len(rows) != len(want):
        fail("%s: %d rows for %d sizes" % (coll, len(rows), len(want)))
        return
    es = ESIZE[dtype]
    align = 16 // es
    global checked_rows
    checked_rows += len(rows)
    for r, requested in zip(rows, want):
        count = requested // es
        if coll in PER_RANK:
            per = (count // NRANKS) & ~(align - 1)
            want_count, want_size = per, per * NRANKS * es
        else:
            want_count, want_size = count, count * es
        if r["count"] != want_count or r["size"] != want_size:
            fail("%s %s -b %d: size %d count %d, nccl-tests prints size %d count %d"
                 % (coll, dtype, requested, r["size"], r["count"], want_size, want_count))
        if r["type"] != dtype or r["wrong"] != "0":
            fail("%s: type %s #wrong %s" % (coll, r["type"], r["wrong"]))
        has_root = coll in ("broadcast", "reduce", "gather", "scatter")
        if r["root"] != (0 if has_root else -1):
            fail("%s: root column %d" % (coll, r["root"]))
        if r["time"] > 0:
            algbw = r["size"] / r["time"] / 1e3
            if abs(algbw - r["algbw"]) > 0.011 + 0.02 * algbw:
                fail("%s: algbw %.2f, size/time gives %.3f" % (coll, r["algbw"], algbw))
            factor = FACTOR.get(coll, (NRANKS - 1) / NRANKS)
            if abs(r["busbw"] - r["algbw"] * factor) > 0.011 + 0.02 * r["busbw"]:
                fail("%s: busbw %.2f is not algbw %.2f x %.3f" % (coll, r["busbw"], r["algbw"],
                                                               factor))


checked_rows = 0
for coll, dtype in [("all_reduce", "float"), ("broadcast", "float"), ("reduce", "double"),
                    ("all_gather", "half"), ("reduce_scatter", "float"), ("alltoall", "int8"),
                    ("gather", "float"), ("scatter", "half")]:
    check_collective(coll, dtype)
if checked_rows != 8 * 3:
    fail("read %d rows of the eight collectives, expected 24" % checked_rows)

# NCCL_TESTS_MIN_BW: 90% of it must be met, as in nccl-tests.
base = ["all_reduce", "-b", "64K", "-e", "64K", "-n", "3", "-w", "1"]
p = gx_perf(base)
avg = parse(p.stdout)[3] or 0.0
p = gx_perf(base, env={"NCCL_TESTS_MIN_BW": "1000000"}, expect=1)
if not re.search(r"# Avg bus bandwidth\s+: \S+ FAILED", p.stdout) or "NCCL_TESTS_MIN_BW" not in p.stdout:
    fail("NCCL_TESTS_MIN_BW=1000000 did not print FAILED naming the variable:\n" + p.stdout)
p = gx_perf(base, env={"NCCL_TESTS_MIN_BW": "0"})
if not re.search(r"# Avg bus bandwidth\s+: \S+ OK", p.stdout):
    fail("NCCL_TESTS_MIN_BW=0 did not print OK")

# -J: nccl-tests' JSON keys.
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "out.json")
    p = gx_perf(["all_gather", "-b", "1K", "-e", "4K", "-f", "2", "-n", "2", "-w", "1", "-J", path])
    if "# Writing JSON output to " + path not in p.stdout:
        fail("-J did not say where it writes")
    try:
        doc = json.load(open(path))
        for k in ("version", "start_time", "args", "env", "nccl_version", "config", "results",
                  "out_of_bounds", "average_bus_bandwidth", "end_time"):
            if k not in doc:
                fail("-J JSON lacks nccl-tests' key %r" % k)
        cfg = doc["config"]
        for k in ("nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "step_factor",
                  "warmup_iters", "iterations", "aggregated_iterations", "validation", "graph",
                  "blocking_collectives", "devices"):
            if k not in cfg:
                fail("-J config lacks %r" % k)
        if len(cfg["devices"]) != NRANKS or "hostname" not in cfg["devices"][0]:
            fail("-J devices: %r" % cfg["devices"])
        res = doc["results"]
        if len(res) != 3:
            fail("-J: %d results for 3 sizes" % len(res))
        for r in res:
            for k in ("size", "count", "type", "redop", "root", "out_of_place", "in_place"):
                if k not in r:
                    fail("-J result lacks %r" % k)
            for k in ("time", "alg_bw", "bus_bw", "nwrong"):
                if k not in r["out_of_place"]:
                    fail("-J out_of_place lacks %r" % k)
        if doc["average_bus_bandwidth"]["okay"] != "unchecked" or doc["out_of_bounds"]["okay"] is not True:
            fail("-J summary: %r %r" % (doc["average_bus_bandwidth"], doc["out_of_bounds"]))
        if any("GX_JOB_KEY=" in e and not e.endswith("(hidden)") for e in doc["env"]):
            fail("-J writes the job key into the report")
    except (OSError, ValueError, KeyError, TypeError) as err:
        fail("-J output is not nccl-tests' JSON: %s" % err)
    # a second run does not overwrite: FILE.0
    p = gx_perf(["all_gather", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "-J", path])
    if not os.path.exists(path + ".0"):
        fail("-J onto an existing file did not write FILE.0")

# Every nccl-tests flag: accepted, or refused by name.
small = ["broadcast", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1"]
accepted = [["-m", "2"], ["-N", "2"], ["-p", "1"], ["-T", "30"], ["-G", "0"], ["-C", "1"],
            ["-S", "1"], ["-I", "0"], ["-u", "1"], ["-y", "1"], ["-R", "1"], ["-D", "0"],
            ["-M", "0"], ["-z", "1"], ["-z", "2"], ["-z", "3"], ["-r", "-1"], ["-a", "3"],
            ["-t", "1"], ["-g", "1"], ["-K", "0"]]
for flags in accepted:
    p = gx_perf(small + flags)
    rows = parse(p.stdout)[0]
    want = 2 if flags == ["-N", "2"] else (NRANKS if flags == ["-r", "-1"] else 1)
    if p.returncode == 0 and len(rows) != want:
        fail("%s: %d rows, expected %d" % (" ".join(flags), len(rows), want))
    if flags == ["-r", "-1"] and sorted(r["root"] for r in rows) != list(range(NRANKS)):
        fail("-r -1 did not run every root: %r" % [r["root"] for r in rows])
for flags in (["-G", "1"], ["-D", "1"], ["-I", "1"], ["-M", "1"], ["-x", "1"], ["-V", "16"],
              ["-N", "0"]):
    p = gx_perf(small + flags, expect=2)
    if "not supported in gx-perf" not in p.stderr:
        fail("%s: refused without saying 'not supported in gx-perf': %r" % (" ".join(flags),
                                                                          p.stderr))

if fails:
    print("%d failure(s)" % len(fails))
    sys.exit(1)
print("gx-perf reads as nccl-tests' output for 8 collectives; flags, -J, NCCL_TESTS_MIN_BW ok")
