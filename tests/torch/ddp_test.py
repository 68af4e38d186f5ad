#!/usr/bin/python3
"""DDP training with backend "gx" equals training with "gloo"; or a rank dies.

    build/bin/gx-run -n 4 /usr/bin/python3 tests/torch/ddp_test.py [--steps 20]
    build/bin/gx-run --keep-going -n 3 /usr/bin/python3 tests/torch/ddp_test.py --kill 1

Default mode: the default group is "gx"; a Gloo group is made beside it only
as the reference. The same small CNN (conv, BatchNorm whose buffers DDP
broadcasts, linear) trains twice from the same weights on the same data
shards, with small buckets so each step has several all-reduces: once under
DDP over the gx group, once over the Gloo group. After the steps every
parameter and buffer must agree within --tol (max over tensors of
max|gx - gloo| / max|gloo|), and the gx replicas' parameters must be
identical across ranks. Prints the measured difference.

--kill R: rank R kills itself (SIGKILL) in the middle of step 5; every other
rank must get a RuntimeError from DDP that names rank R, within the group
timeout, and a later blocking all_reduce must raise too; prints "PASS rank N".
"""
import argparse
import datetime
import os
import signal
import sys
import time

try:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
except ImportError as e:
    print(f"SKIP: torch is not importable ({e}); apt-get install python3-torch")
    sys.exit(77)

import gx_torch  # noqa: F401  registers "gx"


def say(line):
    """One write() per line: ranks share the output and must not interleave."""
    os.write(1, (line + "\n").encode())


BATCH = 8  # per rank


def make_model():
    torch.manual_seed(1234)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 32),
        torch.nn.ReLU(), torch.nn.Linear(32, 10))


def batch(step, rank, world):
    gen = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(BATCH * world, 3, 16, 16, generator=gen)
    y = torch.randint(0, 10, (BATCH * world,), generator=gen)
    return x[rank * BATCH:(rank + 1) * BATCH], y[rank * BATCH:(rank + 1) * BATCH]


def train(group, steps, rank, world, kill=None):
    dist._DEFAULT_FIRST_BUCKET_BYTES = 4096
    model = DDP(make_model(), process_group=group, bucket_cap_mb=0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss = None
    for step in range(steps):
        x, y = batch(step, rank, world)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if kill is not None and step == 5 and rank == kill:
            os.kill(os.getpid(), signal.SIGKILL)
        loss.backward()
        opt.step()
    state = [t.detach().clone() for t in model.module.state_dict().values()
             if t.is_floating_point()]
    params = [p.detach().clone() for p in model.module.parameters()]
    return state, params, loss.item()


def rel_diff(a, b):
    worst = 0.0
    for x, y in zip(a, b):
        scale = max(y.abs().max().item(), 1e-12)
        worst = max(worst, (x - y).abs().max().item() / scale)
    return worst


def equivalence(args, rank, world):
    gloo = dist.new_group(backend="gloo")  # the reference only
    t0 = time.monotonic()
    ref, _, ref_loss = train(gloo, args.steps, rank, world)
    t1 = time.monotonic()
    got, params, got_loss = train(None, args.steps, rank, world)
    t2 = time.monotonic()
    diff = rel_diff(got, ref)
    # Parameters only: BatchNorm's running statistics are each rank's own
    # until the next forward broadcasts rank 0's.
    flat = torch.cat([t.flatten() for t in params])
    root = flat.clone()
    dist.broadcast(root, 0)
    spread = (flat - root).abs().max().item()
    ok = diff <= args.tol and spread == 0.0
    say(f"rank {rank}: DDP {args.steps} steps on {world} ranks: final loss gloo {ref_loss:.5f} "
        f"gx {got_loss:.5f}; state max relative difference gx vs gloo {diff:.3g} (bound "
        f"{args.tol:g}); across gx replicas {spread:.3g}; time gloo {t1 - t0:.2f} s, gx "
        f"{t2 - t1:.2f} s: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def killed_peer(args, rank, world):
    t0 = time.monotonic()
    try:
        train(None, args.steps, rank, world, kill=args.kill)
    except RuntimeError as e:
        took = time.monotonic() - t0
        msg = str(e)
        named = f"rank {args.kill}" in msg
        # A blocking call on the broken group raises too (wait() re-raises).
        try:
            dist.all_reduce(torch.ones(4))
            sync = "a later all_reduce returned"
        except RuntimeError as e2:
            sync = "" if "GX_E" in str(e2) else f"a later all_reduce raised: {e2}"
        ok = named and not sync
        say(f"{'PASS' if ok else 'FAIL'} rank {rank}: training raised after {took:.1f} s: "
            f"{msg.splitlines()[0][:300]} {sync}")
        os._exit(0 if ok else 1)  # the group is broken: skip its teardown
    say(f"FAIL rank {rank}: training finished although rank {args.kill} died")
    return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--kill", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gx", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.kill is not None:
        return killed_peer(args, rank, world)
    rc = equivalence(args, rank, world)
    dist.destroy_process_group()
    return rc


if __name__ == "__main__":
    sys.exit(main())
