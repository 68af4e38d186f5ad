#!/usr/bin/python3
"""torch_bench.py - DDP iteration of torchvision's resnet18 on CPU, backend
"gx" against "gloo" in the same run. Started by perf/torch_bench.sh under
gx-run (2 ranks by default); see perf/README.md.

The default group is "gx"; a Gloo group beside it is the reference. Each
repetition times, for both backends in alternating order (which goes first
alternates too, so drifting load hits both alike):
  iter     one DDP training step (forward, backward with the bucket
           all-reduces, SGD step), 25 MiB buckets as DDP's default;
  compute  the same step under model.no_sync() (no communication);
  comm     the all-reduce of every gradient bucket alone (the 46.8 MB of
           resnet18's gradients in DDP's bucket sizes), blocking, back to back.
Ranks agree on each figure by taking the max over ranks (the slowest rank
sets the step). Prints medians and per-repetition values; rank 0 prints.
"""
import argparse
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import gx_torch  # noqa: F401  registers "gx"

try:
    import torchvision
except ImportError as e:
    print(f"SKIP: torchvision is not importable ({e}); apt-get install python3-torchvision")
    sys.exit(77)


def slowest(seconds, group):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.item()


def make(group):
    torch.manual_seed(0)
    model = DDP(torchvision.models.resnet18(num_classes=10), process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, opt


def step(model, opt, x, y, sync=True):
    opt.zero_grad()
    if sync:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
    else:
        with model.no_sync():
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
    opt.step()


def bucket_tensors(model):
    """Tensors shaped like DDP's gradient buckets (25 MiB cap, 1 MiB first)."""
    sizes, cur, cap = [], 0, 1 << 20
    for p in reversed(list(model.parameters())):
        cur += p.numel() * 4
        if cur >= cap:
            sizes.append(cur // 4)
            cur, cap = 0, 25 << 20
    if cur:
        sizes.append(cur // 4)
    return [torch.ones(n) for n in sizes]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8, help="images per rank")
    ap.add_argument("--image", type=int, default=64, help="image side in pixels")
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gx", timeout=datetime.timedelta(seconds=600))
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = {"gx": None, "gloo": dist.new_group(backend="gloo")}
    models = {name: make(g) for name, g in groups.items()}
    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, 3, args.image, args.image, generator=gen)
    y = torch.randint(0, 10, (args.batch,), generator=gen)
    buckets = bucket_tensors(models["gx"][0].module)
    nbytes = sum(b.numel() * 4 for b in buckets)
    for name in groups:  # warm-up: DDP's bucket rebuild, allocator, connections
        for _ in range(2):
            step(*models[name], x, y)
        for b in buckets:
            dist.all_reduce(b, group=groups[name])
    res = {n: {"iter": [], "compute": [], "comm": []} for n in groups}
    for rep in range(args.reps):
        order = ["gx", "gloo"] if rep % 2 == 0 else ["gloo", "gx"]
        for name in order:
            g = groups[name]
            dist.barrier(group=g)
            t0 = time.perf_counter()
            step(*models[name], x, y)
            res[name]["iter"].append(slowest(time.perf_counter() - t0, g))
            dist.barrier(group=g)
            t0 = time.perf_counter()
            step(*models[name], x, y, sync=False)
            res[name]["compute"].append(slowest(time.perf_counter() - t0, g))
            dist.barrier(group=g)
            t0 = time.perf_counter()
            for b in buckets:
                dist.all_reduce(b, group=g)
            res[name]["comm"].append(slowest(time.perf_counter() - t0, g))
    if rank == 0:
        med = {n: {k: statistics.median(v) for k, v in r.items()} for n, r in res.items()}
        load = os.getloadavg()
        print(f"resnet18 DDP on CPU, {world} ranks, batch {args.batch}/rank of "
              f"{args.image}x{args.image}, {len(buckets)} buckets ({nbytes / 1e6:.1f} MB), "
              f"{args.reps} repetitions, torch {torch.__version__}, 1 thread/rank")
        print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
              f"({os.cpu_count()} CPUs)")
        print(f"{'figure (median, ms)':24s} {'gx':>10s} {'gloo':>10s} {'gloo/gx':>8s}")
        for k, label in (("iter", "DDP iteration"), ("compute", "no_sync step (compute)"),
                         ("comm", "bucket all-reduces")):
            a, b = med["gx"][k] * 1e3, med["gloo"][k] * 1e3
            print(f"{label:24s} {a:10.1f} {b:10.1f} {b / a:8.2f}")
        ov = {n: med[n]["iter"] - med[n]["compute"] for n in med}
        print(f"{'iteration - compute':24s} {ov['gx'] * 1e3:10.1f} {ov['gloo'] * 1e3:10.1f} "
              f"{(ov['gloo'] / ov['gx'] if ov['gx'] > 0 else float('nan')):8.2f}")
        for n in res:
            for k in res[n]:
                print(f"# {n} {k} ms: " + " ".join(f"{v * 1e3:.1f}" for v in res[n][k]))
        sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
