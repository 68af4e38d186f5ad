#!/usr/bin/python3
"""gloo_allreduce_bench.py - torch.distributed all_reduce over the gloo
backend on CPU tensors, timed the way gx-perf times gx_allreduce, for
perf/compare.sh.

Same flags as gx-perf / mpi_allreduce_bench (-b -e -f -i -n -w -d -z -c -a,
--csv), same per-size warm-up, barrier, timing loop, rank averaging and
busbw = algbw * 2(n-1)/n. torch's all_reduce works in place only, so the
figures fill the in-place columns; out-of-place reads N/A.

It starts its own ranks (like torchrun) unless RANK is already set:
    /usr/bin/python3 perf/gloo_allreduce_bench.py --nproc 2 -b 4K -e 64M -f 4
Several nodes: one launcher per node with --nnodes, --node-rank and
--master-addr/--master-port (and GLOO_SOCKET_IFNAME for the interface).
-z 0 issues async_op=True calls with at most 64 in flight, -z 1 waits each.
Use Debian's /usr/bin/python3 (python3-torch); another python3 may lack torch.
"""
import argparse
import os
import socket
import subprocess
import sys
import time

WINDOW = 64


def parse_size(text):
    mult = 1
    t = text.strip()
    if t and t[-1] in "kKmMgG":
        mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[t[-1].lower()]
        t = t[:-1]
    try:
        v = int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (number with K, M or G)")
    if v < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is negative")
    return v * mult


def options(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-b", "--minbytes", type=parse_size, default=32 << 20)
    p.add_argument("-e", "--maxbytes", type=parse_size, default=32 << 20)
    p.add_argument("-i", "--stepbytes", type=parse_size, default=1 << 20)
    p.add_argument("-f", "--stepfactor", type=int, default=1)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", type=int, default=5)
    p.add_argument("-d", "--datatype", default="float",
                   choices=["float", "double", "half", "bfloat16", "int32", "int64", "int8", "uint8"])
    p.add_argument("-o", "--op", default="sum", choices=["sum", "prod", "min", "max"])
    p.add_argument("-z", "--blocking", type=int, default=0, choices=[0, 1])
    p.add_argument("-c", "--check", type=int, default=1)
    p.add_argument("-a", "--average", type=int, default=1, choices=[0, 1, 2, 3])
    p.add_argument("--csv", action="store_true")
    p.add_argument("--cuda", action="store_true",
                   help="CUDA tensors on GPU LOCAL_RANK %% device count (tests/gpu/run.sh)")
    p.add_argument("--nproc", type=int, default=1, help="ranks to start on this node")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=0, help="0: pick a free one (one node)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before the ranks are stopped")
    return p.parse_args(argv)


def free_port(addr):
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def launch(o, argv):
    """Start o.nproc ranks of this script with torchrun's variables."""
    port = o.master_port or free_port(o.master_addr)
    if o.nnodes > 1 and not o.master_port:
        sys.exit("gloo_allreduce_bench: --nnodes > 1 needs --master-port")
    world = o.nproc * o.nnodes
    procs = []
    for local in range(o.nproc):
        env = dict(os.environ, RANK=str(o.node_rank * o.nproc + local), WORLD_SIZE=str(world),
                   LOCAL_RANK=str(local), MASTER_ADDR=o.master_addr, MASTER_PORT=str(port),
                   OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv, env=env))
    deadline = time.monotonic() + o.timeout
    status = 0
    while procs:
        for p in list(procs):
            rc = p.poll()
            if rc is None:
                continue
            procs.remove(p)
            if rc != 0 and status == 0:
                status = rc if rc > 0 else 128 - rc
                for q in procs:
                    q.terminate()
        if time.monotonic() > deadline:
            print("gloo_allreduce_bench: timed out, stopping the ranks", file=sys.stderr)
            for q in procs:
                q.kill()
            return 124
        time.sleep(0.05)
    return status


def rank_main(o):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    dtype = {"float": torch.float32, "double": torch.float64, "half": torch.float16,
             "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64,
             "int8": torch.int8, "uint8": torch.uint8}[o.datatype]
    op = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
          "max": dist.ReduceOp.MAX}[o.op]
    esize = torch.tensor([], dtype=dtype).element_size()
    dev = "cpu"
    if o.cuda:
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    buf = torch.zeros(max(o.maxbytes // esize, 1), dtype=dtype, device=dev)

    def pattern(r, count):
        g = torch.arange(count, dtype=torch.int64)
        v = (5 * r + 3 * g + g // 512) % 9
        return (v if dtype == torch.uint8 else v - 4).to(dtype).to(dev)

    def expected(count):
        acc = None
        for r in range(n):
            v = pattern(r, count).to("cpu").to(torch.float64)
            if acc is None:
                acc = v
            elif o.op == "sum":
                acc = acc + v
            elif o.op == "prod":
                acc = acc * v
            elif o.op == "min":
                acc = torch.minimum(acc, v)
            else:
                acc = torch.maximum(acc, v)
        return acc.to(dtype).to(dev)

    def run(t, k):
        if o.blocking:
            for _ in range(k):
                dist.all_reduce(t, op=op)
            if o.cuda:
                torch.cuda.synchronize()
            return
        works = []
        for _ in range(k):
            if len(works) >= WINDOW:
                works.pop(0).wait()
            works.append(dist.all_reduce(t, op=op, async_op=True))
        for w in works:
            w.wait()
        if o.cuda:
            torch.cuda.synchronize()

    if rank == 0 and not o.csv:
        print(f"# gloo_allreduce_bench: nRanks {n} minBytes {o.minbytes} maxBytes {o.maxbytes} "
              f"warmup iters: {o.warmup_iters} iters: {o.iters} blocking: {o.blocking}\n"
              f"# torch {torch.__version__}, backend gloo, {'CUDA' if o.cuda else 'CPU'} tensors, "
              f"in place only\n#")
        print("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
              % ("", "", "", "", ""))
        print("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s"
              % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                 "time", "algbw", "busbw", "#wrong"))
        print("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
              % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                 "(GB/s)", "(GB/s)", ""))
    elif rank == 0:
        print("collective,ranks,nodes,size,count,type,redop,root,placement,time_us,algbw_gbs,busbw_gbs,wrong")
    bws, wrong_total = [], 0
    size = o.minbytes
    while True:
        count = size // esize
        t = buf[:count]
        t.copy_(pattern(rank, count))
        run(t, o.warmup_iters)
        dist.barrier()
        t0 = time.perf_counter()
        run(t, o.iters)
        sec = (time.perf_counter() - t0) / o.iters
        wrong = 0
        for _ in range(o.check):
            t.copy_(pattern(rank, count))
            run(t, 1)
            wrong += int((t != expected(count)).sum())
        figs = torch.tensor([sec, float(wrong)], dtype=torch.float64, device=dev)
        if o.average == 0:
            dist.broadcast(figs, 0)
        else:
            tt = figs[:1].clone()
            dist.all_reduce(tt, op=[None, dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX][o.average])
            figs[0] = tt[0] / (n if o.average == 1 else 1)
        w = torch.tensor([wrong], dtype=torch.int64, device=dev)
        dist.all_reduce(w)
        sec, wrong = float(figs[0]), int(w[0])
        wrong_total += wrong
        algbw = count * esize / 1e9 / sec
        busbw = algbw * 2 * (n - 1) / n
        bws.append(busbw)
        if rank == 0:
            us = sec * 1e6
            ts = "%7.0f" % us if us >= 10000 else "%7.1f" % us if us >= 100 else "%7.2f" % us
            if o.csv:
                print(f"gloo_allreduce,{n},,{count * esize},{count},{o.datatype},{o.op},-1,in-place,"
                      f"{us:.6g},{algbw:.6g},{busbw:.6g},{wrong if o.check else ''}")
            else:
                wr = "%5g" % wrong if o.check else "%5s" % "N/A"
                print("%12d  %12d  %8s  %6s  %6d  %7s  %6s  %6s  %5s  %7s  %6.2f  %6.2f  %s"
                      % (count * esize, count, o.datatype, o.op, -1, "N/A", "N/A", "N/A", "N/A",
                         ts, algbw, busbw, wr))
            sys.stdout.flush()
        nxt = (size * o.stepfactor if size else 1) if o.stepfactor > 1 else size + o.stepbytes
        if nxt <= size or nxt > o.maxbytes:
            break
        size = nxt
    if rank == 0 and not o.csv:
        print("# Out of bounds values : %d %s\n# Avg bus bandwidth    : %g \n#"
              % (wrong_total, "FAILED" if wrong_total else "OK", sum(bws) / len(bws)))
    dist.destroy_process_group()
    return 1 if wrong_total else 0


def main():
    argv = sys.argv[1:]
    o = options(argv)
    if "RANK" not in os.environ:
        return launch(o, argv)
    return rank_main(o)


if __name__ == "__main__":
    sys.exit(main())
