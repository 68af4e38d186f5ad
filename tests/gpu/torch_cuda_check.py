"""torch_cuda_check - the torch.distributed backend "gx" on CUDA tensors, on a
real GPU (tests/gpu/run.sh runs it; never run by CI: no CUDA torch there).

    python3 tests/gpu/torch_cuda_check.py [--nproc 2] [--deadline 150]

Spawns NPROC processes sharing GPU 0 (or GPU rank % count). Each joins the
default group with backend "gx" and a second group with backend "nccl" (each
rank gets its own NCCL_HOSTID, so NCCL uses its network transport between
processes on one GPU). For all_reduce (sum/max/avg; float32, float16,
bfloat16, int64), broadcast, all_gather (list and into_tensor) and
reduce_scatter (list and _tensor), over sizes 0, 1, 1000 and 1M+3 elements:
the inputs are written by kernels on the current stream right before the
call (the call must wait for them), the gx result must equal the value
computed from the ranks and NCCL's result on the same inputs. One more case
issues on a side stream with async_op=True and reads on the default stream
after work.wait() (the ordering ProcessGroupNCCL gives). The NCCL group is
used for comparison only after one all-reduce and a synchronize on it have
worked (torch 2.x connects NCCL lazily, at the first collective); without it
gx is checked against the computed values alone. Everything ends by
--deadline seconds: processes alive then are killed and the check fails.
Exit 0 all passed, 1 a check failed, 77 no CUDA torch.
"""

import argparse
import os
import socket
import sys
import traceback


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(rank, size, port, errors):
    import torch
    import torch.distributed as dist
    import gx_torch  # noqa: F401  (registers "gx")

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      NCCL_HOSTID=f"gx-torch-check-{rank}")
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dev = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("gx", rank=rank, world_size=size)
    try:
        nccl = dist.new_group(backend="nccl")
        probe = torch.ones(1, device=dev)
        dist.all_reduce(probe, group=nccl)  # NCCL connects here on torch 2.x
        torch.cuda.synchronize()
        if probe.item() != size:
            raise RuntimeError(f"NCCL's probe all-reduce gave {probe.item()}, expected {size}")
    except Exception as e:  # still check gx against the computed values
        print(f"rank {rank}: no NCCL group ({e}); checking against computed values only")
        nccl = None
    fails = []

    def same(what, got, want, ref=None):
        ok = got.shape == want.shape and torch.equal(got.cpu(), want.cpu())
        if ok and ref is not None:
            ok = torch.equal(got.cpu(), ref.cpu())
            what += " (vs nccl)"
        if not ok:
            fails.append(what)
            print(f"rank {rank}: FAIL {what}: got {got.flatten()[:4].tolist()} want "
                  f"{want.flatten()[:4].tolist()}", flush=True)

    def made(n, dtype, r=rank):
        """n values from rank r, written by a kernel on the current stream."""
        x = torch.arange(n, device=dev, dtype=torch.int64) % 13 + r + 1
        return x.to(dtype).mul_(1)  # queued after arange: the call must wait for it

    sizes = [0, 1, 1000, (1 << 20) + 3]
    for dtype in [torch.float32, torch.float16, torch.bfloat16, torch.int64]:
        for n in sizes:
            ops = [(dist.ReduceOp.SUM, lambda xs: sum(xs)),
                   (dist.ReduceOp.MAX, lambda xs: torch.stack(xs).amax(0))]
            if dtype == torch.float32:
                ops.append((dist.ReduceOp.AVG, lambda xs: sum(xs) / size))
            for op, fn in ops:
                xs = [made(n, torch.float64, r) for r in range(size)]
                want = fn(xs).to(dtype)
                x = made(n, dtype)
                dist.all_reduce(x, op)
                ref = None
                if nccl is not None:
                    ref = made(n, dtype)
                    dist.all_reduce(ref, op, group=nccl)
                same(f"all_reduce {op} {dtype} n={n}", x, want, ref)
    for n in sizes:
        x = made(n, torch.float32)
        dist.broadcast(x, 1 % size)
        same(f"broadcast n={n}", x, made(n, torch.float32, 1 % size))
        outs = [torch.empty(n, device=dev) for _ in range(size)]
        dist.all_gather(outs, made(n, torch.float32))
        for r in range(size):
            same(f"all_gather n={n} from {r}", outs[r], made(n, torch.float32, r))
        flat = torch.empty(n * size, device=dev)
        dist.all_gather_into_tensor(flat, made(n, torch.float32))
        same(f"all_gather_into_tensor n={n}", flat,
             torch.cat([made(n, torch.float32, r) for r in range(size)]))
        ins = [made(n, torch.float32) * (j + 1) for j in range(size)]
        out = torch.empty(n, device=dev)
        dist.reduce_scatter(out, ins)
        want = sum(made(n, torch.float32, r) for r in range(size)) * (rank + 1)
        ref = None
        if nccl is not None:
            ref = torch.empty(n, device=dev)
            dist.reduce_scatter(ref, [made(n, torch.float32) * (j + 1) for j in range(size)],
                                group=nccl)
        same(f"reduce_scatter n={n}", out, want, ref)
        out = torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(out, torch.cat(ins))
        same(f"reduce_scatter_tensor n={n}", out, want, ref)
    # side stream + async_op, read on the default stream after wait()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = made(1 << 22, torch.float32)
        work = dist.all_reduce(y, async_op=True)
    work.wait()  # the default stream now waits for the side stream's call
    z = y * 1
    same("async_op on a side stream, wait() on the default stream", z,
         sum(made(1 << 22, torch.float32, r) for r in range(size)))
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    if fails:
        errors.put((rank, fails))
    else:
        print(f"rank {rank}: PASS all checks (nccl comparison: {nccl is not None})", flush=True)


def child(rank, size, port, errors):
    try:
        run(rank, size, port, errors)
    except Exception:
        traceback.print_exc()
        errors.put((rank, ["exception"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--deadline", type=float, default=150.0,
                    help="seconds for the whole check; processes alive then are killed")
    a = ap.parse_args()
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        print("SKIP: no torch for", sys.executable)
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch has no CUDA here")
        return 77
    ctx = mp.get_context("spawn")
    errors = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=child, args=(r, a.nproc, port, errors)) for r in range(a.nproc)]
    for p in procs:
        p.start()
    import time
    end = time.monotonic() + a.deadline
    late = []
    for p in procs:
        p.join(max(0.1, end - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(5)
            late.append(p.pid)
    if late:
        print(f"FAIL: processes {late} were still running at the {a.deadline:.0f} s deadline "
              "and were killed")
        return 1
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    failed = []
    while not errors.empty():
        failed.append(errors.get())
    if bad or failed:
        print(f"FAIL: exit codes {bad}, failures {failed}")
        return 1
    print(f"PASS: backend gx, CUDA tensors, {a.nproc} processes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
