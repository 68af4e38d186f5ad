#!/usr/bin/python3
"""PyTorch DDP with the gx comm hook against Gloo's default all-reduce.

Run under gx-run with 2 (or more) ranks, with /usr/bin/python3 (Debian's
python3-torch) and PYTHONPATH/GX_LIBRARY pointing at python/ and libgx:

    GX_LIBRARY=build/lib/libgx.so PYTHONPATH=python \
        build/bin/gx-run -n 2 /usr/bin/python3 tests/collectives/ddp/torch_hook_test.py

Each rank trains the same small model twice for a few steps from the same
initial weights on its own shard of fixed synthetic data, with small buckets
so DDP makes several: once with DDP's default all-reduce over Gloo, once with
gx_torch.allreduce_hook. The parameters must agree between the two runs (both
divide by the world size, then sum; for 2 ranks a + b is exact in either
order, and the tolerance covers larger groups) and between ranks. Exit 77
when torch is missing.
"""
import os
import socket
import sys

try:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
except ImportError as e:
    print(f"SKIP: torch is not importable ({e}); apt-get install python3-torch")
    sys.exit(77)

import gx_torch

STEPS = 6
TOL = 1e-6


def make_model():
    torch.manual_seed(1234)  # same initial weights on every rank and run
    return torch.nn.Sequential(
        torch.nn.Linear(20, 64), torch.nn.Tanh(),
        torch.nn.Linear(64, 32), torch.nn.Tanh(),
        torch.nn.Linear(32, 4))


def train(rank, world, use_gx, comm):
    # Small buckets (the first one too), so each step has several.
    dist._DEFAULT_FIRST_BUCKET_BYTES = 2048
    model = DDP(make_model(), bucket_cap_mb=0.004)
    state = None
    if use_gx:
        state = gx_torch.HookState(comm)
        model.register_comm_hook(state, gx_torch.allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(99)
    losses = []
    for step in range(STEPS):
        x = torch.randn(16 * world, 20, generator=gen)
        y = torch.randint(0, 4, (16 * world,), generator=gen)
        xs, ys = x[rank * 16:(rank + 1) * 16], y[rank * 16:(rank + 1) * 16]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xs), ys)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if state is not None:
        state.close()
        print(f"rank {rank}: gx hook reduced {state.buckets} buckets "
              f"({state.bytes / 1e3:.1f} kB) in {STEPS} steps", flush=True)
    return [p.detach().clone() for p in model.module.parameters()], losses


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    comm = gx_torch.Communicator()
    rank, world = comm.rank, comm.size
    # Gloo on an explicit port chosen by rank 0 and sent over gx (gx-run's
    # MASTER_PORT would do too: it is torch's, not gx's GX_MASTER_PORT).
    port = torch.tensor([free_port() if rank == 0 else 0], dtype=torch.int32)
    comm.broadcast_(port, 0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{int(port.item())}",
                            rank=rank, world_size=world)

    ref, ref_losses = train(rank, world, False, comm)
    got, got_losses = train(rank, world, True, comm)
    worst = max((a - b).abs().max().item() for a, b in zip(ref, got))
    ok = worst <= TOL
    # The replicas must also agree with each other (rank 0's copy over gx).
    flat = torch.cat([p.flatten() for p in got])
    root = flat.clone()
    comm.broadcast_(root, 0)
    spread = (flat - root).abs().max().item()
    ok = ok and spread == 0.0
    print(f"rank {rank}: loss {ref_losses[0]:.4f} -> {ref_losses[-1]:.4f} (gloo), "
          f"{got_losses[0]:.4f} -> {got_losses[-1]:.4f} (gx); largest parameter difference "
          f"gx vs gloo {worst:.3g} (tolerance {TOL:g}), across ranks {spread:.3g}: "
          f"{'PASS' if ok else 'FAIL'}", flush=True)
    dist.destroy_process_group()
    comm.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
