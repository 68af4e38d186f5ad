#!/usr/bin/python3
"""A rank that raises, or whose peer is gone, leaves within seconds.

Run under gx-run --keep-going -n 2 (tests/torch/torch_tests.sh "exit").
The group's timeout is 300 s; gx_torch's teardown promises to wait on peers
at most TEARDOWN_GRACE_S (5 s). Modes:

  raise  rank 1 blocks in a 4 MiB send (a rendezvous: it needs rank 0's
         receive); rank 0 raises instead. Rank 0's exit (its atexit
         teardown: finalize with a grace, then abort) and rank 1's error
         (naming rank 0) must both come within the bound.
  gone   rank 1 is killed while rank 0 waits in a receive from it: rank 0
         raises an error naming rank 1 and exits (its group failed: abort,
         no finalize) within the bound.

Each rank prints "EXIT rank R after S s" last thing at exit (an atexit
handler registered before gx_torch's, so it runs after the teardown),
measured from the moment of the failure; the shell checks S.
"""
import atexit
import datetime
import os
import signal
import sys
import time

try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    print(f"SKIP: torch is not importable ({e})")
    sys.exit(77)

T0 = [None]  # when the failure happened on this rank


def say(line):
    os.write(1, (line + "\n").encode())


def report_exit():
    if T0[0] is not None:
        say(f"EXIT rank {dist.get_rank() if dist.is_initialized() else RANK} after "
            f"{time.monotonic() - T0[0]:.1f} s")


RANK = int(os.environ.get("RANK", os.environ.get("GX_RANK", "-1")))
atexit.register(report_exit)  # before gx_torch's handler: runs after it
import gx_torch  # noqa: E402,F401


def main(mode):
    dist.init_process_group("gx", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    big = torch.ones(1 << 20)  # 4 MiB: a rendezvous
    dist.barrier()
    if mode == "raise":
        if rank == 0:
            T0[0] = time.monotonic()
            raise RuntimeError("rank 0 raises on purpose while rank 1 sends to it")
        T0[0] = time.monotonic()
        try:
            dist.send(big, dst=0)
        except RuntimeError as e:
            say(f"rank 1 raised after {time.monotonic() - T0[0]:.1f} s: {e}")
            if "rank 0" not in str(e):
                say("FAIL: rank 1's error does not name rank 0")
                return 1
            return 0
        say("FAIL: rank 1's send to a rank that raised completed")
        return 1
    if mode == "gone":
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        T0[0] = time.monotonic()
        dist.recv(big, src=1)  # raises, naming rank 1; the exception ends the process
        say("FAIL: a receive from a killed rank completed")
        return 1
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
