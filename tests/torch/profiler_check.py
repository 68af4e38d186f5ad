#!/usr/bin/python3
"""torch.profiler sees gx: a DDP step over backend "gx" profiled with
torch.profiler shows each bucket's all-reduce as a "gx:allreduce" range,
starting while
the backward ops still run, and ending when its work completes.

    build/bin/gx-run -n 2 /usr/bin/python3 tests/torch/profiler_check.py OUTDIR

Each rank exports its trace to OUTDIR/torch-r<rank>.json (chrome format) and
checks it; prints "PASS rank N" with what it found.
"""
import json
import os
import sys

try:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
except ImportError as e:
    print(f"SKIP: torch is not importable ({e}); apt-get install python3-torch")
    sys.exit(77)

import gx_torch  # noqa: F401  registers "gx"


def fail(rank, msg):
    print(f"FAIL rank {rank}: {msg}", flush=True)
    sys.exit(1)


def main():
    outdir = sys.argv[1]
    dist.init_process_group("gx")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(6)])
    ddp = DDP(model, bucket_cap_mb=0.3)  # several buckets: several all-reduces per step
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(64, 256)
    for _ in range(2):  # warm up (DDP rebuilds its buckets after the first step)
        opt.zero_grad()
        ddp(x).sum().backward()
        opt.step()
    path = os.path.join(outdir, f"torch-r{rank}.json")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(2):
            opt.zero_grad()
            ddp(x).sum().backward()
            opt.step()
    prof.export_chrome_trace(path)
    with open(path) as f:
        data = json.load(f)  # torch 1.13 writes a bare array, later ones an object
    events = [e for e in (data["traceEvents"] if isinstance(data, dict) else data)
              if e.get("ph") == "X"]
    gx = [e for e in events if e["name"] == "gx:allreduce"]
    backward = [e for e in events if e["name"].startswith("autograd::engine::evaluate_function")]
    if len(gx) < 4:
        fail(rank, f"{len(gx)} gx:allreduce ranges in 2 DDP steps (expected 2+ buckets a step)")
    if not backward:
        fail(rank, "no backward ops in the profile")
    # The range's args string (group, rank, bytes, dtype) is recorded, but
    # torch 1.13's export leaves it out; later versions may show it.
    meta = str(gx[0].get("args", {}))
    bw_end = max(e["ts"] + e["dur"] for e in backward)
    during = [e for e in gx if e["ts"] < bw_end]
    if not during:
        fail(rank, "no gx:allreduce began before the backward ops ended")
    if any(e["dur"] <= 0 for e in gx):
        fail(rank, "a gx:allreduce range has no duration")
    dist.destroy_process_group()
    print(f"PASS rank {rank}: {len(gx)} gx:allreduce ranges beside {len(backward)} backward "
          f"ops, {len(during)} started while backward ran; args {meta}", flush=True)


if __name__ == "__main__":
    main()
