"""param_server.py - the PyTorch RPC tutorial's batch-updating parameter
server ("Implementing Batch RPC Processing Using Asynchronous Executions")
on gx_torch.rpc. The program is written against torch.distributed.rpc's
API; porting it is the one import below, and --backend tensorpipe runs the
very same code on torch.distributed.rpc (TensorPipe) instead.

    gx-run -n 4 python3 examples/param_server.py [--servers S] [--steps K]
        [--async] [--backend gx|tensorpipe] [--hidden H] [--quiet]

(tensorpipe also needs MASTER_ADDR / MASTER_PORT.) Ranks 0..S-1 are servers
ps0..ps{S-1} (default S = 2, or 1 in a job of 2), the others trainers. Rank
0 drives, as in the tutorial: it creates a ParameterServer on every server
with rpc.remote (each holds a shard of the model: its parameters in order,
split into S contiguous groups), starts every trainer with rpc_async and
waits. Each trainer gets its shards' weights (rref.rpc_sync().get_weights()),
then per step computes the gradient of its batch locally and sends each
server its shard's gradients with
rpc_async(ps_rref.owner(), ParameterServer.update_and_fetch, (rref, grads)),
an @rpc.functions.async_execution function whose Future completes with the
shard's new weights.

The model: a 2-layer MLP (32 inputs, H hidden units with tanh, 8 classes;
H = 64 by default), cross-entropy loss, SGD with momentum 0.9 and lr 0.05,
on a synthetic data set made from fixed seeds (4,096 normal samples, each
labelled by the largest output of a fixed random linear teacher); trainer t's batch at step k is the 64
samples starting at (k * T + t) * 64 mod 4,096.

Synchronous (default): a server steps once all T trainers sent their
gradients (their mean; the same sgd_step as below), so every trainer
computes step k from the weights after step k - 1 exactly; rank 0 repeats
the same training in one process and the final loss over the whole data set
must be within 1e-5 (relative) of it: the server adds the T gradients in
arrival order, which for T = 2 is exact (a + b = b + a), so the losses agree
to float32 rounding. --async: a server steps on every gradient it gets (a
trainer's gradient divided by T), so a trainer's weights miss the other
trainers' latest steps (stale gradients); its check is that the loss is at
most 1.25 times the single process's plus 0.05. Both require the loss to
fall below half its start (a run that applied nothing fails). Rank 0 prints
"LOSS <distributed> <single> <start>", "RESULT steps_per_s <x>" (the steps
after the first 5 over the slowest trainer's time) and exits 1 when the
check fails.
"""
import argparse
import os
import sys
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

P = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
P.add_argument("--backend", choices=("gx", "tensorpipe"), default="gx")
P.add_argument("--servers", type=int, default=0, help="servers (default 2, 1 in a job of 2)")
P.add_argument("--steps", type=int, default=60)
P.add_argument("--hidden", type=int, default=64)
P.add_argument("--async", dest="asynchronous", action="store_true")
P.add_argument("--quiet", action="store_true")
ARGS = P.parse_args()

if ARGS.backend == "tensorpipe":
    import torch.distributed.rpc as rpc
else:
    import gx_torch.rpc as rpc  # the port: this import instead of the one above

N_IN, N_OUT, N_SAMPLES, BATCH = 32, 8, 4096, 64
LR, MOMENTUM, WARMUP = 0.05, 0.9, 5
SYNC_TOL, ASYNC_SLACK = 1e-5, 1.25


def make_model():
    torch.manual_seed(1)  # every rank builds the same initial weights
    return nn.Sequential(nn.Linear(N_IN, ARGS.hidden), nn.Tanh(), nn.Linear(ARGS.hidden, N_OUT))


def make_data():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(N_SAMPLES, N_IN, generator=g)
    teacher = torch.randn(N_IN, N_OUT, generator=g)
    y = (x @ teacher).argmax(1)
    return x, y


def batch(data, step, trainer, trainers):
    start = ((step * trainers + trainer) * BATCH) % N_SAMPLES
    return data[0][start:start + BATCH], data[1][start:start + BATCH]


def shard_of(n_params, servers):
    """Parameter i belongs to server shard_of[i]: S contiguous groups."""
    return [i * servers // n_params for i in range(n_params)]


def sgd_step(params, grads, bufs):
    """SGD with momentum, in place; the servers and the single process run
    exactly this on each parameter."""
    for p, g, b in zip(params, grads, bufs):
        b.mul_(MOMENTUM).add_(g)
        p.add_(b, alpha=-LR)


class ParameterServer:
    """One server's shard of the model: plain tensors, their summed
    gradients and momentum buffers."""

    def __init__(self, weights, trainers, synchronous):
        self.weights = [w.clone() for w in weights]
        self.grads = [torch.zeros_like(w) for w in weights]
        self.bufs = [torch.zeros_like(w) for w in weights]
        self.trainers, self.synchronous = trainers, synchronous
        self.arrived = 0
        self.lock = threading.Lock()
        self.future = torch.futures.Future()

    def get_weights(self):
        with self.lock:
            return [w.clone() for w in self.weights]

    @staticmethod
    @rpc.functions.async_execution
    def update_and_fetch(ps_rref, grads):
        self = ps_rref.local_value()
        with self.lock:
            fut = self.future
            if self.synchronous:
                for acc, g in zip(self.grads, grads):
                    acc.add_(g)
                self.arrived += 1
                if self.arrived < self.trainers:
                    return fut  # completes when the last trainer's gradient arrives
                mean = [acc.div_(self.trainers) for acc in self.grads]
            else:
                mean = [g / self.trainers for g in grads]
            sgd_step(self.weights, mean, self.bufs)
            for acc in self.grads:
                acc.zero_()
            self.arrived = 0
            self.future = torch.futures.Future()
            fut.set_result([w.clone() for w in self.weights])
        return fut


def run_trainer(trainer, trainers, ps_rrefs, steps):
    """A trainer's loop (runs on the trainer, started by rank 0)."""
    torch.set_num_threads(1)
    model = make_model()
    params = list(model.parameters())
    owner = shard_of(len(params), len(ps_rrefs))
    data = make_data()
    weights = [w for rref in ps_rrefs for w in rref.rpc_sync().get_weights()]
    t0 = None
    for step in range(steps):
        if step == WARMUP:
            t0 = time.perf_counter()
        backward_at(model, params, weights, *batch(data, step, trainer, trainers))
        futs = [rpc.rpc_async(rref.owner(), ParameterServer.update_and_fetch,
                              args=(rref, [p.grad for p, o in zip(params, owner) if o == k]))
                for k, rref in enumerate(ps_rrefs)]
        weights = [w for f in futs for w in f.wait()]
    return time.perf_counter() - t0 if t0 is not None else 0.0


def backward_at(model, params, weights, x, y):
    """The model's gradients (p.grad) on batch x, y at the given weights."""
    with torch.no_grad():
        for p, w in zip(params, weights):
            p.copy_(w)
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()


def full_loss(weights, data):
    model = make_model()
    with torch.no_grad():
        for p, w in zip(model.parameters(), weights):
            p.copy_(w)
        return F.cross_entropy(model(data[0]), data[1]).item()


def single_process(trainers, steps):
    """The same training in one process: every trainer's gradient from the
    same weights, their mean, sgd_step; --async has no single-process twin
    and is checked against this synchronous run."""
    model = make_model()
    params = list(model.parameters())
    data = make_data()
    weights = [p.detach().clone() for p in params]
    bufs = [torch.zeros_like(w) for w in weights]
    for step in range(steps):
        total = [torch.zeros_like(w) for w in weights]
        for t in range(trainers):
            backward_at(model, params, weights, *batch(data, step, t, trainers))
            for acc, p in zip(total, params):
                acc.add_(p.grad)
        sgd_step(weights, [acc.div_(trainers) for acc in total], bufs)
    return full_loss(weights, data)


def drive(servers, trainers):
    """Rank 0: servers, trainers, the check."""
    init = [p.detach() for p in make_model().parameters()]
    owner = shard_of(len(init), servers)
    ps_rrefs = [rpc.remote(f"ps{k}", ParameterServer,
                           args=([w for w, o in zip(init, owner) if o == k], trainers,
                                 not ARGS.asynchronous))
                for k in range(servers)]
    futs = [rpc.rpc_async(f"trainer{t}", run_trainer, args=(t, trainers, ps_rrefs, ARGS.steps))
            for t in range(trainers)]
    times = [f.wait() for f in futs]
    final = [w for rref in ps_rrefs for w in rref.rpc_sync().get_weights()]
    data = make_data()
    loss, start = full_loss(final, data), full_loss(init, data)
    single = single_process(trainers, ARGS.steps)
    print(f"LOSS {loss:.6f} {single:.6f} {start:.6f}", flush=True)
    timed = ARGS.steps - WARMUP
    if timed > 0 and max(times) > 0:
        print(f"RESULT steps_per_s {timed / max(times):.2f}", flush=True)
    mode = "async" if ARGS.asynchronous else "sync"
    why = []
    if not loss < 0.5 * start:
        why.append(f"the loss {loss:.6f} did not fall below half its start {start:.6f}")
    if ARGS.asynchronous and loss > ASYNC_SLACK * single + 0.05:
        why.append(f"async loss {loss:.6f} above {ASYNC_SLACK} x single {single:.6f} + 0.05")
    if not ARGS.asynchronous and abs(loss - single) > SYNC_TOL * single:
        why.append(f"loss {loss:.6f} differs from the single process's {single:.6f} by more "
                   f"than {SYNC_TOL:g} (relative)")
    if why:
        print(f"FAIL param_server.py ({ARGS.backend}, {mode}): " + "; ".join(why), flush=True)
        return False
    if not ARGS.quiet:
        print(f"PASS param_server.py ({ARGS.backend}, {mode}, {servers} servers + {trainers} "
              f"trainers, {ARGS.steps} steps): loss {loss:.6f}, single process {single:.6f}, "
              f"start {start:.6f}", flush=True)
    return True


def main():
    rank = int(os.environ.get("RANK", os.environ.get("GX_RANK", "-1")))
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("GX_SIZE", "-1")))
    if rank < 0 or world < 2:
        sys.exit("param_server.py: run it under a launcher (gx-run -n 4 ...; RANK/WORLD_SIZE "
                 "or GX_RANK/GX_SIZE), 2 ranks at least")
    servers = ARGS.servers or (1 if world == 2 else 2)
    if not 1 <= servers < world:
        sys.exit(f"param_server.py: --servers {servers} must leave a trainer in a job of {world}")
    if ARGS.steps < 1:
        sys.exit(f"param_server.py: --steps {ARGS.steps} must be at least 1")
    if servers > 4:
        sys.exit(f"param_server.py: --servers {servers}: the model has 4 parameters to shard")
    torch.set_num_threads(1)
    name = f"ps{rank}" if rank < servers else f"trainer{rank - servers}"
    rpc.init_rpc(name, rank=rank, world_size=world)
    ok = True
    if rank == 0:
        ok = drive(servers, world - servers)
    rpc.shutdown()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
