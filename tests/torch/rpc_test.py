"""gx_torch.rpc against computed values (run under gx-run, 2+ ranks); with
the argument "torch" the same calls and checks run on torch.distributed.rpc
(TensorPipe, MASTER_ADDR/MASTER_PORT), so both APIs are held to one behaviour.
With "kill" (gx_torch.rpc only): rank 1 SIGKILLs itself inside a call while
rank 0 has calls pending there, a remote() still being made there and an
RRef it owns; each raises naming rank 1 (the RRef's to_here and proxy calls
too), none hangs.

rpc_sync/rpc_async by name, rank and WorkerInfo (self included), tensors
and keyword arguments, 200 concurrent rpc_async, a remote exception raised
again at the caller, a call past its timeout, remote() and RRef (to_here,
owner, local_value, rpc_sync/rpc_async/remote proxies, an RRef passed as an
argument), get_worker_info, bad targets, shutdown.
"""
import os
import signal
import sys
import threading
import time

import torch

TORCH = len(sys.argv) > 1 and sys.argv[1] == "torch"
KILL = len(sys.argv) > 1 and sys.argv[1] == "kill"
if TORCH:
    import torch.distributed.rpc as rpc
else:
    import gx_torch.rpc as rpc


class Counter:
    def __init__(self, start):
        self.n = start

    def add(self, k):
        self.n += k
        return self.n

    def get(self):
        return self.n


def boom(msg):
    raise ValueError(msg)


def whoami():
    return rpc.get_worker_info().name


def sleepy(s):
    time.sleep(s)
    return s


finished = threading.Event()


def finish():
    finished.set()
    return rank


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def read_rref(rref):
    return rref.to_here()


def check(cond, what):
    if not cond:
        print(f"FAIL rank {rank}: {what}", flush=True)
        sys.exit(1)


rank = int(os.environ["GX_RANK"])
n = int(os.environ["GX_SIZE"])
if TORCH:
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=n)
else:
    rpc.init_rpc(f"worker{rank}")
if KILL:
    if rank == 0:
        held = rpc.remote(1, Counter, args=(5,))  # an RRef rank 1 owns
        check(held.rpc_sync().get() == 5, "the RRef's value before the kill")
        # 2 + 1 + die: within the 4 handler threads (GX_RPC_THREADS) of rank 1
        slow = [rpc.rpc_async(1, sleepy, args=(20,), timeout=60) for _ in range(2)]
        making = rpc.remote(1, sleepy, args=(20,), timeout=60)  # mid-RRef: still running
        rpc.rpc_async(1, die)
        t0 = time.monotonic()
        err = ""
        for f in slow:
            try:
                f.wait()
                check(False, "a call pending at the killed rank 1 returned")
            except RuntimeError as e:
                err = str(e)
                check("rank 1" in err, f"the error does not name rank 1: {err}")
        for what, use in (("to_here of the RRef being made", lambda: making.to_here(timeout=60)),
                          ("to_here of the RRef held", lambda: held.to_here(timeout=60)),
                          ("a proxy call on the RRef held", lambda: held.rpc_sync().add(1))):
            try:
                use()
                check(False, f"{what} at the killed rank 1 returned")
            except RuntimeError as e:
                check("rank 1" in str(e), f"{what}: the error does not name rank 1: {e}")
        check(time.monotonic() - t0 < 15, f"the calls failed after {time.monotonic() - t0:.1f} s")
        for r in range(2, n):  # the survivors still answer, then may leave
            check(rpc.rpc_sync(r, finish) == r, f"a call to the surviving rank {r}")
        print(f"PASS rank 0: pending calls to the killed rank 1 failed: {err}", flush=True)
    elif rank == 1:
        time.sleep(60)  # killed inside die()
    else:
        check(finished.wait(60), "rank 0 never said it was done")
        time.sleep(2)  # finish()'s answer leaves before the abort closes the links
    rpc.shutdown(graceful=False)
    sys.exit(0)
me = rpc.get_worker_info()
check(me.id == rank and me.name == f"worker{rank}", f"get_worker_info: {me}")
peer = (rank + 1) % n

# rpc_sync by name, rank and WorkerInfo; tensors and kwargs.
x = torch.arange(6, dtype=torch.float32) + rank
y = rpc.rpc_sync(f"worker{peer}", torch.add, args=(x, 1))
check(torch.equal(y, x + 1), "rpc_sync torch.add")
check(rpc.rpc_sync(peer, whoami) == f"worker{peer}", "the handler runs on the target")
check(rpc.rpc_sync(rpc.get_worker_info(f"worker{peer}"), whoami) == f"worker{peer}",
      "WorkerInfo target")
check(rpc.rpc_sync(rank, whoami) == f"worker{rank}", "a call to self")
check(rpc.rpc_sync(peer, torch.ones, args=((2, 3),), kwargs={"dtype": torch.float64}).dtype ==
      torch.float64, "kwargs")
big = torch.randn(1 << 18)
check(torch.equal(rpc.rpc_sync(peer, torch.neg, args=(big,)), -big), "a 1 MiB tensor")

# Tensors of every kind come back equal: bfloat16, bool, empty, a
# transposed view, one that requires grad (pickled, keeps the flag).
for t in (torch.ones(3, dtype=torch.bfloat16), torch.tensor([True, False]),
          torch.zeros(0, 4, dtype=torch.int64), torch.randn(4, 5).t(),
          torch.randn(3, requires_grad=True)):
    back = rpc.rpc_sync(peer, torch.clone, args=(t,))
    check(back.dtype == t.dtype and back.shape == t.shape and
          torch.equal(back.detach(), t.detach()), f"round trip of {t.dtype} {tuple(t.shape)}")
if not TORCH:  # gx's wire: a plain tensor is its raw bytes, not pickled
    from gx_torch import _rpc_wire
    check(len(_rpc_wire.dumps(big)) < big.numel() * 4 + 256, "a 1 MiB tensor went pickled")

# 200 concurrent rpc_async to every rank.
futs = [rpc.rpc_async(i % n, torch.mul, args=(torch.tensor([i]), 3)) for i in range(200)]
check(all(f.wait().item() == 3 * i for i, f in enumerate(futs)), "200 concurrent rpc_async")

# A remote exception comes back as itself.
try:
    rpc.rpc_sync(peer, boom, args=("nope",))
    check(False, "no exception from boom")
except ValueError as e:
    check("nope" in str(e), f"exception text: {e}")

# A call past its timeout fails with the deadline, well before the handler ends.
t0 = time.monotonic()
try:
    rpc.rpc_sync(peer, sleepy, args=(1.5,), timeout=0.3)
    check(False, "no timeout")
except RuntimeError as e:
    check("time" in str(e).lower(), f"timeout's error: {e}")
check(time.monotonic() - t0 < 1.2, f"the timeout took {time.monotonic() - t0:.1f} s")

# remote() and RRef.
rref = rpc.remote(f"worker{peer}", Counter, args=(10 * rank,))
check(rref.owner() == rpc.get_worker_info(f"worker{peer}"), "owner")
check(rref.owner_name() == f"worker{peer}" and not (n > 1 and rref.is_owner()), "owner_name")
check(rref.rpc_sync().add(5) == 10 * rank + 5, "rref.rpc_sync().add")
check(rref.rpc_async().add(1).wait() == 10 * rank + 6, "rref.rpc_async().add")
check(rref.remote().get().to_here() == 10 * rank + 6, "rref.remote().get()")
check(rref.to_here().n == 10 * rank + 6, "to_here")
check(rpc.rpc_sync(peer, read_rref, args=(rref,)).n == 10 * rank + 6, "an RRef as argument")
mine = rpc.remote(rank, Counter, args=(7,))
check(mine.is_owner() and mine.local_value().get() == 7, "local_value")

# Bad targets.
for bad in (n, "nobody"):
    try:
        rpc.rpc_sync(bad, whoami)
        check(False, f"a call to {bad!r} worked")
    except RuntimeError as e:  # torch's type for an unknown destination
        check(str(bad) in str(e), f"bad target's error: {e}")

rpc.shutdown()
print(f"PASS rank {rank}: {rpc.__name__}", flush=True)
