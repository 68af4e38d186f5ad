#!/usr/bin/env python3
"""Run rdma-core's own Python tests (shipped by Debian's python3-pyverbs) over
softverbs and count the outcomes.

Each test module runs in its own process, the way an HCA vendor runs them
(what run_tests.py does, for one module), with libsoftverbs preloaded. The
script prints one line per module (ok / fail / error / skip counts, or the
signal that killed it) and a total line, then the names of failing and erroring
tests with the first line of their reason.

Exit status: 0 when every module finished (no crash, no timeout) and the
failures and errors are within --max-fail / --max-error, 1 otherwise, 77 when
pyverbs or its tests are not installed.
"""
import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile

PY = "/usr/bin/python3"  # pyverbs is a Debian package: the system interpreter
TESTS_DIR = "/usr/share/doc/rdma-core/tests"
# What run_tests.py does (parse the suite's own options, then unittest), for
# one module: python3 -c DRIVER tests.<module> -v
DRIVER = """
import sys, unittest
from args_parser import parser
parser.parse_args()
unittest.main(module=None, argv=[sys.argv[0]] + sys.argv[1:])
"""


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(77)


def stage_tests(src, dst):
    """Copy the shipped tests (partly gzip-compressed) into dst/tests."""
    out = os.path.join(dst, "tests")
    os.makedirs(out)
    for fn in os.listdir(src):
        path = os.path.join(src, fn)
        if fn.endswith(".py.gz"):
            with gzip.open(path, "rb") as f, open(os.path.join(out, fn[:-3]), "wb") as g:
                shutil.copyfileobj(f, g)
        elif fn.endswith(".py"):
            shutil.copy(path, out)
    return out


def run_module(workdir, mod, env, timeout):
    try:
        p = subprocess.run([PY, "-c", DRIVER, "tests." + mod, "-v"], cwd=workdir,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
        out, rc = p.stdout.decode(errors="replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace"), "timeout"
    # unittest's summary: "Ran N tests" then "OK (skipped=S)" or
    # "FAILED (failures=F, errors=E, skipped=S, ...)". Per-test lines are not
    # parsed: emulator log lines may sit between a test's name and its result.
    counts = {"ok": 0, "fail": 0, "error": 0, "skip": 0}
    bad = []
    ran = re.search(r"^Ran (\d+) tests? in", out, re.M)
    summ = re.search(r"^(OK|FAILED)(?: \((.*)\))?\s*$", out, re.M)
    if ran and summ:
        kv = dict((k.strip(), int(v)) for k, v in
                  (x.split("=") for x in (summ.group(2) or "").split(",") if "=" in x))
        counts["fail"] = kv.get("failures", 0) + kv.get("unexpected successes", 0)
        counts["error"] = kv.get("errors", 0)
        counts["skip"] = kv.get("skipped", 0)
        counts["ok"] = int(ran.group(1)) - counts["fail"] - counts["error"] - counts["skip"]
    # Each FAIL / ERROR report starts after a line of '=' and ends at the next
    # '=' line or at the '-' line before "Ran N tests".
    for block in re.split(r"^={50,}$", out, flags=re.M)[1:]:
        block = re.split(r"^-{50,}\nRan ", block, flags=re.M)[0]
        head = re.match(r"\s*(ERROR|FAIL): (\w+) \(([\w.]+)\)", block)
        if not head:
            continue
        lines = [l for l in block.strip().splitlines()
                 if l.strip() and not l.startswith("softverbs[") and not l.startswith("-----")]
        bad.append("%s %s.%s: %s" % (head.group(1), head.group(3).split(".")[-2]
                                     if "." in head.group(3) else head.group(3),
                                     head.group(2), lines[-1] if lines else "?"))
    crashed = rc == "timeout" or (isinstance(rc, int) and rc < 0) or not (ran and summ)
    return counts, crashed, rc, bad, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="libsoftverbs.so.0 to preload")
    ap.add_argument("--preload-before", default=os.environ.get("SV_SANITIZER_PRELOAD", ""),
                    help="libraries preloaded before softverbs (sanitizer runtimes)")
    ap.add_argument("--tests", default=TESTS_DIR)
    ap.add_argument("--timeout", type=int, default=120, help="seconds per module")
    ap.add_argument("--max-fail", type=int, default=-1, help="-1: do not check")
    ap.add_argument("--max-error", type=int, default=-1, help="-1: do not check")
    ap.add_argument("--min-ok", type=int, default=1,
                    help="fewer passing tests fail the run (a test that turned into a skip)")
    ap.add_argument("--link", default="ib", help="SOFTVERBS_LINK for the run")
    ap.add_argument("--verbose", action="store_true", help="print each module's output")
    ap.add_argument("modules", nargs="*", help="test modules (default: all test_*)")
    a = ap.parse_args()

    if not os.path.exists(PY):
        skip(PY + " not found")
    if subprocess.run([PY, "-c", "import pyverbs.device"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        skip("pyverbs not installed (apt-get install python3-pyverbs)")
    if not os.path.isdir(a.tests):
        skip(a.tests + " missing (python3-pyverbs ships rdma-core's tests there)")
    if not os.path.exists(a.lib):
        print("FAIL: %s not found" % a.lib)
        return 1

    work = tempfile.mkdtemp(prefix="sv-pyverbs-")
    try:
        tdir = stage_tests(a.tests, work)
        mods = a.modules or sorted(f[:-3] for f in os.listdir(tdir)
                                   if f.startswith("test_") and f.endswith(".py"))
        env = dict(os.environ)
        env["LD_PRELOAD"] = (a.preload_before + " " + os.path.abspath(a.lib)).strip()
        env["SOFTVERBS_LINK"] = a.link
        env.setdefault("SOFTVERBS_DEBUG", "1")
        if a.preload_before:
            env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPATH"] = tdir  # the tests import args_parser, utils top-level
        total = {"ok": 0, "fail": 0, "error": 0, "skip": 0}
        crashes, bad_all, skips = [], [], {}
        for mod in mods:
            counts, crashed, rc, bad, out = run_module(work, mod, env, a.timeout)
            for k in total:
                total[k] += counts[k]
            state = ("CRASH rc=%s" % rc) if crashed else "done"
            print("%-28s ok %3d  fail %2d  error %2d  skip %3d  %s" %
                  (mod, counts["ok"], counts["fail"], counts["error"], counts["skip"], state))
            if crashed:
                crashes.append(mod)
                tail = out.strip().splitlines()[-5:]
                bad_all.append("CRASH %s (rc %s): %s" % (mod, rc, " | ".join(tail)))
            bad_all += bad
            for r in re.findall(r"skipped '([^'\n]*)'", out):
                skips[r] = skips.get(r, 0) + 1
            if a.verbose:
                print(out)
        print("TOTAL (%s) modules %d: ok %d, fail %d, error %d, skip %d, crashed %d" %
              (a.link, len(mods), total["ok"], total["fail"], total["error"], total["skip"],
               len(crashes)))
        for b in bad_all:
            print("  " + b)
        print("skip reasons:")
        for r, n in sorted(skips.items(), key=lambda x: -x[1]):
            print("  %3d  %s" % (n, r))
        ok = not crashes
        if a.max_fail >= 0 and total["fail"] > a.max_fail:
            print("FAIL: %d failures, at most %d expected" % (total["fail"], a.max_fail))
            ok = False
        if a.max_error >= 0 and total["error"] > a.max_error:
            print("FAIL: %d errors, at most %d expected" % (total["error"], a.max_error))
            ok = False
        if crashes:
            print("FAIL: crashed or timed out: " + ", ".join(crashes))
        if total["ok"] < a.min_ok:
            print("FAIL: %d tests passed, at least %d expected" % (total["ok"], a.min_ok))
            ok = False
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
