#!/usr/bin/env python3
"""nccl_plugin_check - NCCL itself moving torch.distributed's bytes through
gx's net plugin (libnccl-net-gx.so), on a real GPU (tests/gpu/run.sh runs
it; CI never does: it has no CUDA torch and no NCCL-capable GPU).

    python3 tests/gpu/nccl_plugin_check.py --plugin BUILD/lib/libnccl-net-gx.so
                                           [--nproc 2] [--iters 20] [--max-mib 64]
                                           [--deadline 150]

Spawns NPROC processes on the one GPU (GPU rank % count), each with its own
NCCL_HOSTID so NCCL treats them as different hosts and uses its network
transport between them. Pass 1 runs with NCCL_NET_PLUGIN=<plugin>
NCCL_NET=gx: all_reduce (sum, max) over float32, float16, bfloat16, int64
and sizes 1, 1000, 1M+3 elements must equal the value computed from the
ranks' inputs, and NCCL's INFO log must name the gx plugin. Then a busbw
sweep (1 MiB .. --max-mib float32 sum, median of --iters) runs in the same
process pair once with the plugin and once with NCCL's own Socket transport
(NCCL_NET=Socket, no plugin), so the two figures come from the same run.
Prints CSV lines "BUSBW,<net>,<bytes>,<GB/s>" and a ratio table.
Everything ends by --deadline seconds (workers still running then are killed
and the check fails saying so), so a hung NCCL never outlives its step.
Exit 0 all passed, 1 a check failed, 77 no CUDA torch / NCCL / plugin.
"""

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, size, port, net, plugin, iters, max_mib, logdir, out):
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "NCCL_HOSTID": f"gx-plugin-check-{rank}", "NCCL_DEBUG": "INFO",
           "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_SHM_DISABLE": "1", "NCCL_P2P_DISABLE": "1",
           "NCCL_DEBUG_FILE": os.path.join(logdir, f"{net}.%h.%p.log"), "NCCL_NET": net}
    if net == "gx":
        env["NCCL_NET_PLUGIN"] = plugin
    else:
        env["NCCL_NET_PLUGIN"] = "none"
    os.environ.update(env)
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dev = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("nccl", rank=rank, world_size=size)
    fails = []
    if net == "gx":
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64):
            for n in (1, 1000, (1 << 20) + 3):
                for op, name in ((dist.ReduceOp.SUM, "sum"), (dist.ReduceOp.MAX, "max")):
                    base = torch.arange(n, device=dev, dtype=torch.int64) % 13
                    t = (base + rank).to(dtype)
                    dist.all_reduce(t, op=op)
                    if name == "sum":
                        want = (base * size + size * (size - 1) // 2).to(dtype)
                    else:
                        want = (base + size - 1).to(dtype)
                    if not torch.equal(t, want):
                        bad = (t != want).nonzero()[0].item()
                        fails.append(f"all_reduce {name} {dtype} n={n}: element {bad} is "
                                     f"{t[bad].item()}, expected {want[bad].item()}")
    rows = []
    for mib in [m for m in (1, 4, 16, 64, 256) if m <= max_mib]:
        n = mib * (1 << 20) // 4
        t = torch.ones(n, device=dev, dtype=torch.float32)
        for _ in range(3):
            dist.all_reduce(t)
        times = []
        for _ in range(iters):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        sec = statistics.median(times)
        rows.append((mib << 20, (mib << 20) / sec * 2 * (size - 1) / size / 1e9))
    dist.barrier()
    dist.destroy_process_group()
    out.put((rank, net, fails, rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--deadline", type=float, default=150.0,
                    help="seconds for the whole check; workers alive then are killed")
    a = ap.parse_args()
    end = time.monotonic() + a.deadline
    try:
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp
    except ImportError as e:
        print(f"SKIP: no torch ({e})")
        return 77
    if not torch.cuda.is_available() or not dist.is_nccl_available():
        print("SKIP: torch has no CUDA device or no NCCL")
        return 77
    if not os.path.exists(a.plugin):
        print(f"SKIP: no plugin at {a.plugin}")
        return 77
    ctx = mp.get_context("spawn")
    results = {}
    failed = False
    with tempfile.TemporaryDirectory(prefix="gx-nccl-plugin-") as logdir:
        for net in ("gx", "Socket"):
            q = ctx.Queue()
            port = free_port()
            procs = [ctx.Process(target=worker, args=(r, a.nproc, port, net, a.plugin, a.iters,
                                                      a.max_mib, logdir, q))
                     for r in range(a.nproc)]
            for p in procs:
                p.start()
            got = []
            for _ in procs:
                try:
                    got.append(q.get(timeout=max(0.1, end - time.monotonic())))
                except Exception:
                    break
            late = False
            for p in procs:
                p.join(timeout=max(0.1, min(10.0, end - time.monotonic())))
                if p.is_alive():
                    p.kill()
                    p.join(5)
                    late = True
            if late:
                print(f"FAIL: the {net} pass was still running at the {a.deadline:.0f} s deadline: "
                      "its workers were killed")
                failed = True
                break
            if len(got) != a.nproc or any(p.exitcode for p in procs):
                print(f"FAIL: the {net} pass did not finish on every rank "
                      f"(exit codes {[p.exitcode for p in procs]})")
                failed = True
                continue
            for rank, n, fails, rows in got:
                for f in fails:
                    print(f"FAIL rank {rank} ({n}): {f}")
                    failed = True
                results.setdefault(n, {})[rank] = rows
        logs = ""
        for name in os.listdir(logdir):
            if name.startswith("gx."):
                with open(os.path.join(logdir, name), errors="replace") as f:
                    logs += f.read()
        used = [ln for ln in logs.splitlines() if "gx" in ln and ("NET/" in ln or "plugin" in ln.lower())]
        if not used:
            print("FAIL: NCCL's INFO log does not show the gx net plugin in use")
            failed = True
        else:
            print("NCCL INFO lines naming the gx plugin:")
            for ln in used[:6]:
                print("    " + ln.strip())
    if "gx" in results and "Socket" in results:
        print("| size | busbw gx plugin (GB/s) | busbw NCCL Socket (GB/s) | ratio |")
        print("|---|---|---|---|")
        for (b, g), (_, s) in zip(results["gx"][0], results["Socket"][0]):
            print(f"BUSBW,gx,{b},{g:.3f}")
            print(f"BUSBW,Socket,{b},{s:.3f}")
            print(f"| {b >> 20} MiB | {g:.3f} | {s:.3f} | {g / s:.2f}x |")
    print("FAIL" if failed else "PASS: NCCL all-reduce through the gx plugin is correct")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
