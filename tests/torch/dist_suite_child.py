#!/usr/bin/python3
"""dist_suite_child - PyTorch's distributed test suite for one backend and world size.

What test/distributed/test_distributed_spawn.py does in PyTorch's tree, for
any backend, including the plugin "gx": the class
torch.testing._internal.distributed.distributed_test.DistributedTest._DistTestBase
combined with TestDistBackend, whose setUp spawns WORLD_SIZE rank processes
for each test (the suite's own per-test timeout, get_timeout(), stands).
tests/torch/dist_suite.py starts one of these per (world size, backend) and
compares; run it directly only to debug one configuration.

Configuration comes from the environment (DIST_SUITE_*, not GX_*: gx warns
about GX_ variables it does not know), because the rank processes are
started with multiprocessing's spawn and import this file again as their
__main__ (so everything that must hold in them happens at import, below):

  BACKEND, WORLD_SIZE          as for test_distributed_spawn.py
  DIST_SUITE_VIEW=gloo|mpi       import the suite with its backend-name checks
                               seeing this name, while every process group is
                               created with BACKEND (the runner's "beyond
                               gloo" pass: tests the suite reserves for gloo
                               or MPI by name); the default group is checked
                               to really be BACKEND
  DIST_SUITE_TESTS=a,b,...       run only these tests (default: all)
  DIST_SUITE_OUT=FILE            JSON results, rewritten after every test
  DIST_SUITE_BUDGET=SECONDS      start no test later than this after the first
                               (time box)
  DIST_SUITE_LIST=1              only write which tests the suite's decorators
                               skip for BACKEND, gloo and mpi (no processes)
  DIST_SUITE_START=forkserver    rank processes forked from a server that
                               imported this file (and so torch and the suite)
                               once, instead of spawned: the same test code,
                               a few times faster on few cores; they run
                               their atexit handlers before leaving, as
                               spawned processes do
  RUN_NO_REPLICATED_TENSOR=1   torch 1.13's _run switches DDP to its
                               ReplicatedTensor path, which fails on Python
                               3.11 for every backend: keep it off

Registration as torch_ucc does it: a plugin backend is added to every
DistTestCases.backend_feature set that holds "gloo" (so it is offered the
same tests as gloo) and to backend_feature["plugin"].
"""
import atexit
import importlib
import json
import multiprocessing.context
import os
import sys
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REAL_BACKEND = os.environ.get("BACKEND", "")
VIEW = os.environ.get("DIST_SUITE_VIEW", "")
STATIC_NAMES = ("gx", "gloo", "mpi")  # the list mode's imports
START = os.environ.get("DIST_SUITE_START", "spawn")


def _prepare_imports():
    """Argument parsing of common_utils must not see ours; expecttest may be
    missing (Debian packages none): the shim goes last on the path."""
    sys.argv = sys.argv[:1]
    sys.path.append(os.path.join(HERE, "shim"))


def _register_plugin(name):
    from torch.testing._internal.common_distributed import DistTestCases
    for feature in DistTestCases.backend_feature.values():
        if isinstance(feature, set) and "gloo" in feature:
            feature.add(name)
    DistTestCases.backend_feature.setdefault("plugin", set()).add(name)


def _no_replicated_tensor():
    try:
        utils = importlib.import_module("torch.nn.parallel._replicated_tensor_ddp_utils")
    except ImportError:
        return  # torch 2.x has no such path
    real = utils._set_ddp_with_replicated_tensor
    utils._set_ddp_with_replicated_tensor = lambda value: real(False)


def _map_view_to_real():
    """In a view run, a process group requested under the view's name is a
    REAL_BACKEND group, and the default group is checked to be one."""
    import torch.distributed as dist
    init, new_group = dist.init_process_group, dist.new_group

    def init_process_group(*args, **kwargs):
        if kwargs.get("backend") == VIEW:
            kwargs["backend"] = REAL_BACKEND
        elif args and args[0] == VIEW:
            args = (REAL_BACKEND,) + args[1:]
        init(*args, **kwargs)
        got = dist.get_backend()
        if got != REAL_BACKEND:
            raise RuntimeError(f"view run: the default group is {got}, not {REAL_BACKEND}")

    def new_group_real(*args, **kwargs):
        if kwargs.get("backend") == VIEW:
            kwargs["backend"] = REAL_BACKEND
        return new_group(*args, **kwargs)

    dist.init_process_group = init_process_group
    dist.new_group = new_group_real


def _import_suite():
    _prepare_imports()
    import torch
    import torch.distributed as dist
    if REAL_BACKEND not in ("gloo", "nccl", "mpi", "ucc"):
        importlib.import_module(f"{REAL_BACKEND}_torch")  # registers it ("gx" -> gx_torch)
        _register_plugin(REAL_BACKEND)
    if os.environ.get("RUN_NO_REPLICATED_TENSOR") == "1":
        _no_replicated_tensor()
    if VIEW:
        os.environ["BACKEND"] = VIEW  # what the suite reads at import
    try:
        from torch.testing._internal.distributed import distributed_test as suite
    finally:
        os.environ["BACKEND"] = REAL_BACKEND  # what its helpers read at run time
    if VIEW:
        _map_view_to_real()
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch, dist, suite


class _ForkServerEnvProcess(multiprocessing.context.ForkServerProcess):
    """A forkserver child with the environment its parent has now (the
    suite sets TEMP_DIR and INIT_METHOD per test), as a spawned one gets."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._environ = dict(os.environ)

    def run(self):
        os.environ.clear()
        os.environ.update(self._environ)
        # what the suite read from the environment at import (a spawned rank
        # imports it again): the init file of this test
        suite.INIT_METHOD = os.getenv("INIT_METHOD", "env://")
        super().run()


if REAL_BACKEND and os.environ.get("DIST_SUITE_LIST") != "1":
    torch, dist, suite = _import_suite()

    class TestDistBackendWithSpawn(suite.TestDistBackend, suite.DistributedTest._DistTestBase):
        """As test_distributed_spawn.py defines it."""

        def setUp(self):
            super().setUp()
            if START == "spawn":
                self._spawn_processes()
            else:
                torch.multiprocessing.set_forkserver_preload([__name__])
                self._start_processes(_ForkServerEnvProcess)
            torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()

        @classmethod
        def _run(cls, *args, **kwargs):
            """A forkserver child leaves with os._exit, skipping what a spawned
            one runs at exit (gx_torch's teardown among them): run it here."""
            try:
                super()._run(*args, **kwargs)
                code = 0
            except SystemExit as e:
                code = e.code
            if START != "spawn":
                atexit._run_exitfuncs()
            sys.exit(code)


# ---- the runner process (not the rank processes) ------------------------------

class Recorder(unittest.TestResult):
    """Per-test outcome: passed, failed, errored, skipped (with the reason)."""

    def __init__(self, out, meta):
        super().__init__()
        self.out, self.meta, self.tests = out, meta, {}
        self._t0 = 0.0

    def startTest(self, test):
        super().startTest(test)
        self._t0 = time.monotonic()
        os.write(2, f"[{self.meta['label']}] {_name(test)} ...\n".encode())

    def _set(self, test, status, reason=""):
        name = _name(test)
        secs = round(time.monotonic() - self._t0, 1)
        self.tests[name] = {"status": status, "reason": reason, "seconds": secs}
        os.write(2, f"[{self.meta['label']}] {name}: {status} ({secs} s)"
                    f"{': ' + reason[:300] if reason else ''}\n".encode())
        self.save()

    def addSuccess(self, test):
        self._set(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set(test, "failed", _summary(err))

    def addError(self, test, err):
        super().addError(test, err)
        self._set(test, "errored", _summary(err))

    def addSkip(self, test, reason):
        self._set(test, "skipped", str(reason))

    def addExpectedFailure(self, test, err):
        self._set(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        self._set(test, "failed", "unexpected success")

    def save(self):
        if not self.out:
            return
        tmp = self.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dict(self.meta, tests=self.tests), f, indent=1, sort_keys=True)
        os.replace(tmp, self.out)


def _name(test):
    return test.id().split(".")[-1]


def _summary(err):
    """The lines that say why: the subprocess's exception, not the runner's frames."""
    text = "".join(traceback.format_exception(*err))
    keep = [ln.strip() for ln in text.splitlines()
            if ln.strip() and not ln.startswith((" ", "Traceback"))]
    # the suite folds each failed rank's traceback into one RuntimeError
    interesting = [ln for ln in keep if "Error" in ln or "Exception" in ln or "Process" in ln]
    return " | ".join((interesting or keep)[-6:])[:2000]


def _static_skips(world_size):
    """{backend name: {test: skip reason or None}} from the decorators alone."""
    _prepare_imports()
    importlib.import_module("torch")
    if REAL_BACKEND not in ("gloo", "nccl", "mpi", "ucc"):
        importlib.import_module(f"{REAL_BACKEND}_torch")
        _register_plugin(REAL_BACKEND)
    out, mod = {}, None
    for name in STATIC_NAMES:
        os.environ["BACKEND"] = name
        if mod is None:
            mod = importlib.import_module("torch.testing._internal.distributed.distributed_test")
        else:
            mod = importlib.reload(mod)  # the decorators read BACKEND again
        base = mod.DistributedTest._DistTestBase
        out[name] = {t: (getattr(getattr(base, t), "__unittest_skip_why__", "skipped")
                         if getattr(getattr(base, t), "__unittest_skip__", False) else None)
                     for t in dir(base) if t.startswith("test_")}
    os.environ["BACKEND"] = REAL_BACKEND
    return out


def main():
    out = os.environ.get("DIST_SUITE_OUT", "")
    ws = int(os.environ["WORLD_SIZE"])
    if os.environ.get("DIST_SUITE_LIST") == "1":
        data = {"world_size": ws, "skips": _static_skips(ws)}
        with open(out, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        return 0
    label = f"{REAL_BACKEND}{'/as-' + VIEW if VIEW else ''} ws{ws}"
    meta = {"backend": REAL_BACKEND, "view": VIEW, "world_size": ws, "label": label,
            "torch": torch.__version__, "python": sys.version.split()[0],
            "no_replicated_tensor": os.environ.get("RUN_NO_REPLICATED_TENSOR") == "1"}
    rec = Recorder(out, meta)
    wanted = [t for t in os.environ.get("DIST_SUITE_TESTS", "").split(",") if t]
    names = wanted or sorted(t for t in dir(TestDistBackendWithSpawn) if t.startswith("test_"))
    budget = float(os.environ.get("DIST_SUITE_BUDGET", "0") or 0)
    deadline = time.time() + budget if budget > 0 else 0
    for name in names:
        if not hasattr(TestDistBackendWithSpawn, name):
            rec.tests[name] = {"status": "missing", "reason": "not in this torch's suite",
                               "seconds": 0}
            continue
        if deadline and time.time() > deadline:
            rec.tests[name] = {"status": "not_run", "reason": "time box", "seconds": 0}
            continue
        TestDistBackendWithSpawn(name).run(rec)
    rec.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
