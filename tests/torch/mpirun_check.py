#!/usr/bin/python3
"""Under Open MPI's mpirun inside a (simulated) Slurm allocation:

    mpirun -np 2 -x MASTER_ADDR -x MASTER_PORT -x SLURM_PROCID=0 -x SLURM_NTASKS=1 \\
        /usr/bin/python3 mpirun_check.py

SLURM_PROCID=0 in every rank (the allocation's) must lose to Open MPI's
OMPI_COMM_WORLD_RANK: gx_torch.launcher_rank_size() for init_process_group("gx"),
and gx_comm_init_env() for a gx_torch.Communicator. Prints "PASS rank N".
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
    rank, world, launcher = gx_torch.launcher_rank_size()
    want = int(os.environ["OMPI_COMM_WORLD_RANK"])
    dist.init_process_group("gx", rank=rank, world_size=world)
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    comm = gx_torch.Communicator()
    u = torch.tensor([1.0])
    comm.allreduce_(u)
    ok = (rank == want and launcher == "Open MPI" and comm.rank == want
          and t.item() == sum(range(world)) and u.item() == world)
    comm.close()
    dist.destroy_process_group()
    say(f"{'PASS' if ok else 'FAIL'} rank {rank} of {world} (from {launcher}; "
        f"OMPI_COMM_WORLD_RANK={want}, SLURM_PROCID={os.environ.get('SLURM_PROCID')}; "
        f"gx Communicator rank {comm.rank})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
