#!/usr/bin/python3
"""dist_suite - PyTorch's own torch.distributed test suite, gx against gloo.

Runs torch/testing/_internal/distributed/distributed_test.py (class
DistributedTest._DistTestBase, what PyTorch runs per backend through
test/distributed/test_distributed_spawn.py) for each world size and
backend, gloo first, in one run, and compares:

  - conformance: every test that passes for gloo must pass for gx (same
    world size, same run); anything else fails the run;
  - beyond gloo: the tests the suite reserves by name for gloo or MPI
    (found by importing the suite under the names gx, gloo and mpi and
    comparing which tests its decorators skip) run again for gx with the
    suite's name checks seeing "gloo" (or "mpi") while every process group
    is a gx group; counted separately; one that fails fails the run, unless
    torch itself refuses a plugin backend there (listed as such).

Usage (PYTHONPATH holds python/ and GX_LIBRARY libgx, as ctest sets them):

  dist_suite.py [--world-sizes 2,4] [--backends gloo,gx] [--subset quick|all]
                [--tests a,b] [--match REGEX] [--time-box S] [--results DIR]
                [--start forkserver|spawn] [--no-beyond]

Each (world size, backend) runs in its own python (dist_suite_child.py),
with RUN_NO_REPLICATED_TENSOR=1 for every backend: torch 1.13 turns DDP's
ReplicatedTensor path on in the suite's rank processes, and it fails on
Python 3.11 whatever the backend. --start spawn starts the rank processes
exactly as test_distributed_spawn.py does; the default forkserver forks
them from a process that imported the suite once (same tests, same
per-test timeout, a fraction of the time on few cores), except in a run
that uses CUDA devices, which spawns. With CUDA present but fewer devices
than ranks the suite's own _run skips every test whatever the backend, so
such a world size runs with the devices hidden (said in the summary). --time-box stops
starting tests after S seconds (the rest are reported "not run"), for a
bounded step such as tests/gpu/run.sh. Exit status: 0 conformant, 1 not,
77 when torch is missing.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable

# The default ctest run: a representative part, a couple of minutes.
QUICK = [
    "test_all_reduce_sum", "test_all_reduce_coalesced_max", "test_broadcast",
    "test_reduce_sum", "test_all_gather", "test_all_gather_coalesced_simple",
    "test_all_gather_coalesced_complex", "test_all_gather_into_tensor_ops",
    "test_reduce_scatter_tensor", "test_gather", "test_scatter",
    "test_send_recv", "test_send_recv_any_source", "test_isend", "test_irecv",
    "test_barrier", "test_barrier_group", "test_destroy_group",
    "test_all_gather_object_default_pg", "test_DistributedDataParallelCPU",
    "test_sparse_all_reduce_sum", "test_batch_isend_irecv_gloo",
    "test_all_to_all_single_equal_split", "test_all_to_all",
    "test_barrier_timeout_full_group", "test_get_future",
]

# Where torch itself refuses any backend but gloo: (pattern of the error, why).
TORCH_REFUSALS = [
    (r"monitored_barrier is only implemented for GLOO",
     "torch's monitored_barrier() accepts only a gloo group (distributed_c10d checks the "
     "backend name), so no plugin can serve it"),
]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-sizes", default="2,4")
    ap.add_argument("--backends", default="gloo,gx")
    ap.add_argument("--subset", choices=["all", "quick"], default="all")
    ap.add_argument("--tests", default="", help="comma-separated test names")
    ap.add_argument("--match", default="", help="only tests whose name matches this regex")
    ap.add_argument("--time-box", type=float, default=0, help="seconds; 0 = none")
    ap.add_argument("--results", default="", help="directory for the per-test results")
    ap.add_argument("--start", choices=["forkserver", "spawn"], default="",
                    help="how rank processes start (default: forkserver, or spawn when the "
                    "run uses CUDA devices: the server's import may have touched CUDA)")
    ap.add_argument("--no-beyond", action="store_true",
                    help="skip the tests the suite reserves for gloo or MPI by name")
    return ap.parse_args(argv)


class Run:
    def __init__(self, args, workdir, children):
        self.args, self.workdir = args, workdir
        self.end = time.time() + args.time_box if args.time_box > 0 else 0
        self.children_left = children  # runs still to come, for the time box's shares
        self.started = time.time()

    def share(self):
        """The next run's budget in seconds, from its first test: an equal
        share of what is left (at least 1 s, so it starts one test)."""
        if not self.end:
            return 0
        left = max(0.0, self.end - time.time())
        return max(1.0, left / max(1, self.children_left))

    def child(self, backend, ws, tests, view="", listing=False, cuda=True):
        """One dist_suite_child run; returns its JSON. cuda: the run may use
        CUDA devices (else they are hidden)."""
        start = self.args.start or ("spawn" if cuda and self.ngpu else "forkserver")
        self.meta.setdefault("start", set()).add(start)
        tag = f"ws{ws}-{backend}{'-as-' + view if view else ''}{'-list' if listing else ''}"
        budget = 0 if listing else self.share()
        if not listing:
            self.children_left -= 1
        out = os.path.join(self.workdir, f"{tag}.json")
        tmp = tempfile.mkdtemp(prefix=f"suite-{tag}-", dir=self.workdir)
        env = dict(os.environ, BACKEND=backend, WORLD_SIZE=str(ws), TEMP_DIR=tmp,
                   INIT_METHOD=f"file://{tmp}/shared_init_file", DIST_SUITE_OUT=out,
                   DIST_SUITE_VIEW=view, DIST_SUITE_TESTS=",".join(tests),
                   DIST_SUITE_START=start, RUN_NO_REPLICATED_TENSOR="1",
                   DIST_SUITE_BUDGET=str(budget), DIST_SUITE_LIST="1" if listing else "",
                   PYTHONPATH=os.pathsep.join([HERE] + [os.path.abspath(p) for p in os.environ.get(
                       "PYTHONPATH", "").split(os.pathsep) if p]))
        if not cuda:
            env["CUDA_VISIBLE_DEVICES"] = ""
        os.makedirs(os.path.join(tmp, "barrier"), exist_ok=True)
        os.makedirs(os.path.join(tmp, "test_dir"), exist_ok=True)
        log = os.path.join(self.workdir, f"{tag}.log")
        with open(log, "w") as f:
            rc = subprocess.call([PY, "-c", "import sys, dist_suite_child as m; "
                                  "sys.exit(m.main())"], env=env, stdout=f,
                                 stderr=subprocess.STDOUT, cwd=tmp)
        if not listing:
            say(f"{tag}: {summary_line(load(out))} (log {log})")
        if rc != 0 or not os.path.exists(out):
            tail = open(log, errors="replace").read()[-3000:]
            raise SystemExit(f"dist_suite: the {tag} run exited {rc}:\n{tail}")
        return load(out)

    def names(self, listing):
        """The tests to run, from the listing of the suite under gloo."""
        every = sorted(listing["skips"]["gloo"])
        if self.args.tests:
            chosen = [t for t in self.args.tests.split(",") if t]
        elif self.args.subset == "quick":
            chosen = [t for t in QUICK if t in every]
        else:
            chosen = every
        if self.args.match:
            chosen = [t for t in chosen if re.search(self.args.match, t)]
        return chosen


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"tests": {}}


def say(line):
    os.write(1, (line + "\n").encode())


def counts(tests):
    c = {}
    for r in tests.values():
        c[r["status"]] = c.get(r["status"], 0) + 1
    return c


def summary_line(res):
    c = counts(res.get("tests", {}))
    return ", ".join(f"{c[k]} {k}" for k in sorted(c)) or "nothing ran"


def reserved(listing, real="gx"):
    """Tests the suite's decorators skip for `real` but not for gloo (or,
    failing that, not for mpi): {test: (view, why skipped for real)}."""
    sk = listing["skips"]
    out = {}
    for t, why in sk[real].items():
        if why is None:
            continue
        if sk["gloo"].get(t) is None:
            out[t] = ("gloo", why)
        elif sk["mpi"].get(t) is None:
            out[t] = ("mpi", why)
    return out


def refusal(reason):
    for pat, why in TORCH_REFUSALS:
        if re.search(pat, reason or ""):
            return why
    return None


def compare(per_ws, beyond, reserved_by_ws):
    """The verdict: [(ws, test, gloo result, gx result)] that break
    conformance, and [(ws, test, view, result)] beyond-gloo failures. A test
    the suite reserves for gloo by name is judged by its beyond-gloo run."""
    broken, beyond_failed = [], []
    for ws, res in per_ws.items():
        gloo, gx = res.get("gloo", {}), res.get("gx", {})
        for t, g in sorted(gloo.items()):
            x = gx.get(t)
            if t in reserved_by_ws.get(ws, {}) and ws in beyond:
                x = beyond[ws].get(t, (None, x))[1]
            if g["status"] == "passed" and (x is None or x["status"] != "passed"):
                if x is not None and (x["status"] == "not_run" or refusal(x["reason"])):
                    continue  # time box; torch refuses every plugin (listed apart)
                broken.append((ws, t, g, x))
    for ws, res in beyond.items():
        for t, (view, r) in sorted(res.items()):
            if r["status"] in ("failed", "errored") and not refusal(r["reason"]):
                beyond_failed.append((ws, t, view, r))
    return broken, beyond_failed


def beyond_reason(beyond, test):
    """The error text of `test` where it failed in a beyond-gloo run."""
    for res in beyond.values():
        r = res.get(test, (None, {}))[1]
        if r.get("status") in ("failed", "errored"):
            return r["reason"]
    return ""


def report(run, per_ws, beyond, reserved_by_ws, broken, beyond_failed):
    """Markdown summary (also the table docs/pytorch.md quotes)."""
    lines = [f"# torch.distributed suite: gx against gloo",
             f"torch {run.meta.get('torch')}, Python {run.meta.get('python')}, "
             f"rank processes by {'/'.join(sorted(run.meta.get('start', [])))}, "
             f"RUN_NO_REPLICATED_TENSOR=1, "
             f"{time.time() - run.started:.0f} s"
             + (f", CPU only for world sizes {run.meta['cpu_only']} (fewer GPUs than ranks)"
                if run.meta.get("cpu_only") else ""), ""]
    lines += ["| world size | backend | passed | failed | errored | skipped | not run |",
              "|---|---|---|---|---|---|---|"]
    for ws, res in sorted(per_ws.items()):
        for b, tests in res.items():
            c = counts(tests)
            lines.append(f"| {ws} | {b} | {c.get('passed', 0)} | {c.get('failed', 0)} | "
                         f"{c.get('errored', 0)} | {c.get('skipped', 0)} | "
                         f"{c.get('not_run', 0)} |")
    lines += ["", "## Passed for gloo, not for gx", ""]
    lines += [f"- ws {ws} `{t}`: gx {x['status'] if x else 'absent'}: "
              f"{(x or {}).get('reason', '')[:400]}" for ws, t, g, x in broken] or ["none"]
    refused = sorted({t for ws, res in beyond.items() for t, (v, r) in res.items()
                      if r["status"] in ("failed", "errored") and refusal(r["reason"])})
    lines += ["", "## Passed for gloo; torch itself refuses every other backend", ""]
    lines += [f"- `{t}`: {refusal(beyond_reason(beyond, t))}" for t in refused] or ["none"]
    lines += ["", "## Beyond gloo: tests the suite reserves for gloo or MPI by name, run "
              "for gx", "", "| world size | test | reserved for | gx |", "|---|---|---|---|"]
    for ws, res in sorted(beyond.items()):
        for t, (view, r) in sorted(res.items()):
            why = refusal(r["reason"]) if r["status"] in ("failed", "errored") else None
            st = f"refused by torch: {why}" if why else r["status"]
            if r["status"] == "skipped":
                st += f" ({r['reason'][:120]})"
            elif r["status"] in ("failed", "errored") and not why:
                st += f": {r['reason'][:300]}"
            lines.append(f"| {ws} | `{t}` | {view} | {st} |")
    lines += ["", "## Skipped for both (why; distinct tests over the world sizes)", ""]
    reasons = {}
    for ws, res in per_ws.items():
        for t, r in res.get("gx", {}).items():
            g = res.get("gloo", {}).get(t)
            if r["status"] == "skipped" and g and g["status"] == "skipped" and \
                    t not in reserved_by_ws.get(ws, {}):
                why = re.sub(r"\{[^}]*\}", lambda m: "{" + ", ".join(sorted(
                    m.group(0)[1:-1].split(", "))) + "}", r["reason"][:140])  # set order
                reasons.setdefault(why, set()).add(t)
    for why, ts in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"- {len(ts)}: {why}")
    lines += ["", "verdict: " + ("CONFORMANT" if not broken and not beyond_failed
                                  else "NOT CONFORMANT")]
    return "\n".join(lines) + "\n"


def gpus():
    """CUDA devices torch sees (0 without CUDA)."""
    try:
        out = subprocess.run([PY, "-c", "import torch; print(torch.cuda.device_count())"],
                             capture_output=True, text=True, timeout=120)
        return int(out.stdout.strip() or 0)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0


def main(argv):
    args = parse_args(argv)
    try:
        subprocess.check_call([PY, "-c", "import torch.distributed as d; assert d.is_available()"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except subprocess.CalledProcessError:
        say(f"SKIP: torch.distributed is not importable by {PY} (apt-get install python3-torch)")
        return 77
    results = args.results or tempfile.mkdtemp(prefix="gx-dist-suite-")
    os.makedirs(results, exist_ok=True)
    backends = [b for b in args.backends.split(",") if b]
    sizes = [int(w) for w in args.world_sizes.split(",") if w]
    beyond_on = "gx" in backends and not args.no_beyond
    run = Run(args, results, len(sizes) * (len(backends) + (2 if beyond_on else 0)))
    per_ws, beyond, reserved_by_ws = {}, {}, {}
    run.meta = {}
    run.ngpu = ngpu = gpus()
    for ws in sizes:
        # The suite's _run skips every test, whatever the backend, when CUDA is
        # there with fewer devices than ranks: then run it on the CPU alone.
        cuda = ngpu >= ws or ngpu == 0
        if not cuda:
            say(f"ws{ws}: {ngpu} CUDA device(s) for {ws} ranks: the suite would skip every "
                "test, so this world size runs with CUDA_VISIBLE_DEVICES=''")
        if not cuda:
            run.meta.setdefault("cpu_only", []).append(ws)
        listing = run.child("gx", ws, [], listing=True, cuda=cuda)
        names = run.names(listing)
        per_ws[ws] = {}
        for b in backends:
            if not names:
                run.children_left -= 1
                continue
            res = run.child(b, ws, names, cuda=cuda)
            run.meta.update({k: res.get(k) for k in ("torch", "python")})
            per_ws[ws][b] = res["tests"]
            # the next backend runs what this one got to (a time box may stop it)
            names = [t for t in names if res["tests"].get(t, {}).get("status") != "not_run"]
        if beyond_on:
            res_by_test = {}
            reserved_by_ws[ws] = {t: v for t, v in reserved(listing).items()
                                  if t in names}
            for view in ("gloo", "mpi"):
                chosen = [t for t, (v, _) in reserved_by_ws[ws].items() if v == view]
                if not chosen:
                    run.children_left -= 1
                else:
                    res = run.child("gx", ws, sorted(chosen), view=view, cuda=cuda)
                    res_by_test.update({t: (view, r) for t, r in res["tests"].items()})
            beyond[ws] = res_by_test
    broken, beyond_failed = compare(per_ws, beyond, reserved_by_ws)
    text = report(run, per_ws, beyond, reserved_by_ws, broken, beyond_failed)
    with open(os.path.join(results, "summary.md"), "w") as f:
        f.write(text)
    with open(os.path.join(results, "summary.json"), "w") as f:
        json.dump({"results": {str(k): v for k, v in per_ws.items()},
                   "beyond": {str(k): {t: {"view": v, **r} for t, (v, r) in b.items()}
                              for k, b in beyond.items()},
                   "seconds": round(time.time() - run.started)}, f, indent=1, sort_keys=True)
    say(text)
    say(f"results in {results}")
    compared = sum(1 for res in per_ws.values() for r in res.get("gx", {}).values()
                   if r["status"] != "not_run")
    if not compared:
        say("dist_suite: no test ran for gx (a time box too short?): nothing was compared")
        return 1
    return 0 if not broken and not beyond_failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
