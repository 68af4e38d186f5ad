#!/usr/bin/python3
"""Under torchrun, with nothing but torchrun's own variables:

    python3 -m torch.distributed.run --nproc_per_node=2 --master_port=P torchrun_check.py

1. dist.init_process_group("gx") (torch's env:// store on MASTER_PORT, gx's
   rendezvous advertised through it) and an all_reduce, a DDP step;
2. a gx_torch.Communicator of its own (gx_comm_init_env: RANK, WORLD_SIZE,
   MASTER_ADDR; gx listens on MASTER_PORT + 1, not on torch's port) and an
   all-reduce over it. Prints "PASS rank N" per rank.
"""
import os
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    print(f"SKIP: torch is not importable ({e})")
    sys.exit(77)

import gx_torch


def say(line):
    """One write() per line: ranks share the output and must not interleave."""
    os.write(1, (line + "\n").encode())


def main():
    for var in ("GX_RANK", "GX_MASTER_PORT"):
        if var in os.environ:
            say(f"FAIL: {var} is set; this test is about torchrun's variables alone")
            return 1
    dist.init_process_group("gx")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    ok = torch.equal(t, torch.full((5,), float(world * (world + 1) // 2)))
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    model(torch.randn(3, 4)).sum().backward()
    comm = gx_torch.Communicator()
    u = torch.full((3,), float(rank))
    comm.allreduce_(u)
    ok = ok and comm.rank == rank and torch.equal(u, torch.full((3,), float(sum(range(world)))))
    comm.close()
    dist.destroy_process_group()
    say(f"{'PASS' if ok else 'FAIL'} rank {rank} of {world}: backend gx and a gx Communicator "
        f"under torchrun (MASTER_PORT={os.environ['MASTER_PORT']})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
