"""rpc_bench.py - rpc_sync round trips on 2 ranks, gx_torch.rpc or
torch.distributed.rpc (TensorPipe), the same calls: an empty call (a
function of no arguments returning None) and a 1 MiB float32 tensor sent
and returned. Rank 0 times ITERS round trips of each after WARMUP and prints
one line per kind: "RESULT <kind> <median us> <p10 us> <p90 us>".

usage: rpc_bench.py gx|torch [ITERS] [WARMUP]   (under gx-run -n 2; torch
needs MASTER_ADDR/MASTER_PORT)
"""
import os
import statistics
import sys
import time

import torch

BACKEND = sys.argv[1]
ITERS = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
WARMUP = int(sys.argv[3]) if len(sys.argv) > 3 else 200
if BACKEND == "torch":
    import torch.distributed.rpc as rpc
elif BACKEND == "gx":
    import gx_torch.rpc as rpc
else:
    sys.exit("rpc_bench.py: first argument must be gx or torch")


def noop():
    return None


def echo(t):
    return t


def timed(fn, iters):
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def main():
    rank = int(os.environ["GX_RANK"])
    world = int(os.environ["GX_SIZE"])
    if BACKEND == "torch":
        rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world)
    else:
        rpc.init_rpc(f"worker{rank}")  # gx-run's environment names the job
    if rank == 0:
        big = torch.ones(256 * 1024)  # 1 MiB of float32
        kinds = [("empty", lambda: rpc.rpc_sync("worker1", noop), ITERS),
                 ("tensor_1MiB", lambda: rpc.rpc_sync("worker1", echo, args=(big,)), max(ITERS // 10, 50))]
        for name, fn, iters in kinds:
            timed(fn, WARMUP if name == "empty" else max(WARMUP // 10, 10))
            t = sorted(timed(fn, iters))
            back = rpc.rpc_sync("worker1", echo, args=(big,))
            if name == "tensor_1MiB" and not torch.equal(back, big):
                sys.exit("rpc_bench.py: the tensor came back changed")
            print(f"RESULT {name} {statistics.median(t):.1f} {t[len(t) // 10]:.1f} "
                  f"{t[len(t) * 9 // 10]:.1f}", flush=True)
    rpc.shutdown()


main()
