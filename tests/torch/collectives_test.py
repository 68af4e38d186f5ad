#!/usr/bin/python3
"""Every torch.distributed call of the "gx" backend against values computed here.

Run under any launcher (gx-run, torchrun) with /usr/bin/python3 (Debian's
python3-torch), PYTHONPATH=python and GX_LIBRARY=.../libgx.so:

    build/bin/gx-run -n 3 /usr/bin/python3 tests/torch/collectives_test.py

Rank r contributes values derived from r, so each expected result is a
formula of the ranks; every check prints what differs and the script exits 1
if any failed. Exit 77 when torch is missing.
"""
import datetime
import os
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    print(f"SKIP: torch is not importable ({e}); apt-get install python3-torch")
    sys.exit(77)

import gx_torch  # noqa: F401  registers "gx"


def say(line):
    """One write() per line: ranks share the output and must not interleave."""
    os.write(1, (line + "\n").encode())


failures = []


def check(name, got, want):
    ok = got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    if not ok:
        failures.append(name)
        say(f"rank {RANK}: FAIL {name}: got {got.flatten()[:8].tolist()} {got.dtype} "
            f"{tuple(got.shape)}, want {want.flatten()[:8].tolist()} {want.dtype} "
            f"{tuple(want.shape)}")


def val(r, n, dtype):
    """Rank r's contribution: n elements, distinct per rank, exact in dtype."""
    base = torch.arange(n, dtype=torch.float64) % 7 + r + 1
    if dtype.is_complex:
        return torch.complex(base, -base).to(dtype)
    if dtype == torch.bool:
        return (torch.arange(n) + r) % 2 == 0
    return base.to(dtype)


def expected_reduce(n, dtype, op):
    parts = [val(r, n, dtype) for r in range(WORLD)]
    if op == "sum":
        out = parts[0].clone()
        for p in parts[1:]:
            out += p
        return out
    if op == "avg":  # exact here: the sums are small integers
        return (sum(p.to(torch.float64) for p in parts) / WORLD).to(dtype)
    if op == "product":
        out = parts[0].clone()
        for p in parts[1:]:
            out *= p
        return out
    stack = torch.stack([p.to(torch.int64) if dtype == torch.bool else p for p in parts])
    res = stack.min(0).values if op == "min" else stack.max(0).values
    return res.to(dtype)


OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
REDUCE_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
                 torch.uint8, torch.int32, torch.int64]
MOVE_DTYPES = REDUCE_DTYPES + [torch.bool, torch.int16, torch.complex64, torch.complex128]


def test_reductions():
    for dtype in REDUCE_DTYPES:
        for name, op in OPS.items():
            if name == "avg" and not dtype.is_floating_point:
                continue  # gx divides integers (ncclAvg); torch has no integer avg to compare
            n = 37
            t = val(RANK, n, dtype)
            dist.all_reduce(t, op=op)
            check(f"all_reduce {name} {dtype}", t, expected_reduce(n, dtype, op=name))
            t = val(RANK, n, dtype)
            dist.reduce(t, dst=WORLD - 1, op=op)
            if RANK == WORLD - 1:
                check(f"reduce {name} {dtype}", t, expected_reduce(n, dtype, name))
    # complex sums, bool min/max, a strided tensor, an empty one
    for dtype in (torch.complex64, torch.complex128):
        t = val(RANK, 9, dtype)
        dist.all_reduce(t)
        check(f"all_reduce sum {dtype}", t, expected_reduce(9, dtype, "sum"))
    for name in ("min", "max"):
        t = val(RANK, 10, torch.bool)
        dist.all_reduce(t, op=OPS[name])
        check(f"all_reduce {name} bool", t, expected_reduce(10, torch.bool, name))
    big = val(RANK, 40, torch.float32).reshape(8, 5)
    strided = big.t()  # not contiguous: staged and copied back
    dist.all_reduce(strided)
    check("all_reduce strided", big, expected_reduce(40, torch.float32, "sum").reshape(8, 5))
    e = torch.empty(0)
    dist.all_reduce(e)
    check("all_reduce empty", e, torch.empty(0))
    # a large one, several chunks of gx's pipeline
    n = 1 << 20
    t = val(RANK, n, torch.float32)
    dist.all_reduce(t)
    check("all_reduce 4 MiB", t, expected_reduce(n, torch.float32, "sum"))


def test_movement():
    for dtype in MOVE_DTYPES:
        n = 11
        t = val(RANK, n, dtype)
        dist.broadcast(t, src=1 % WORLD)
        check(f"broadcast {dtype}", t, val(1 % WORLD, n, dtype))
        outs = [torch.zeros(n, dtype=dtype) for _ in range(WORLD)]
        dist.all_gather(outs, val(RANK, n, dtype))
        for r in range(WORLD):
            check(f"all_gather {dtype} [{r}]", outs[r], val(r, n, dtype))
        flat = torch.zeros(WORLD * n, dtype=dtype)
        dist.all_gather_into_tensor(flat, val(RANK, n, dtype)) if hasattr(
            dist, "all_gather_into_tensor") else dist._all_gather_base(flat, val(RANK, n, dtype))
        check(f"all_gather_into_tensor {dtype}", flat, torch.cat([val(r, n, dtype)
                                                                   for r in range(WORLD)]))
        root = WORLD - 1
        glist = [torch.zeros(n, dtype=dtype) for _ in range(WORLD)] if RANK == root else None
        dist.gather(val(RANK, n, dtype), gather_list=glist, dst=root)
        if RANK == root:
            for r in range(WORLD):
                check(f"gather {dtype} [{r}]", glist[r], val(r, n, dtype))
        out = torch.zeros(n, dtype=dtype)
        slist = [val(10 + r, n, dtype) for r in range(WORLD)] if RANK == 0 else None
        dist.scatter(out, scatter_list=slist, src=0)
        check(f"scatter {dtype}", out, val(10 + RANK, n, dtype))
        # all_to_all_single, even: block j of rank i goes to rank j's block i
        send = torch.cat([val(100 * RANK + j, n, dtype) for j in range(WORLD)])
        recv = torch.zeros(WORLD * n, dtype=dtype)
        dist.all_to_all_single(recv, send)
        check(f"all_to_all_single {dtype}", recv,
              torch.cat([val(100 * i + RANK, n, dtype) for i in range(WORLD)]))


def test_uneven_and_lists():
    # all_to_all_single with split sizes: rank i sends i+j+1 rows to rank j
    cols = 3
    send = torch.cat([torch.full((RANK + j + 1, cols), float(10 * RANK + j))
                      for j in range(WORLD)])
    recv = torch.zeros(sum(i + RANK + 1 for i in range(WORLD)), cols)
    dist.all_to_all_single(recv, send, output_split_sizes=[i + RANK + 1 for i in range(WORLD)],
                           input_split_sizes=[RANK + j + 1 for j in range(WORLD)])
    want = torch.cat([torch.full((i + RANK + 1, cols), float(10 * i + RANK))
                      for i in range(WORLD)])
    check("all_to_all_single uneven", recv, want)
    # all_to_all with lists of different sizes
    ins = [torch.full((RANK + j + 1,), RANK * 10 + j, dtype=torch.int64) for j in range(WORLD)]
    outs = [torch.zeros(i + RANK + 1, dtype=torch.int64) for i in range(WORLD)]
    dist.all_to_all(outs, ins)
    for i in range(WORLD):
        check(f"all_to_all [{i}]", outs[i], torch.full((i + RANK + 1,), i * 10 + RANK,
                                                        dtype=torch.int64))
    # reduce_scatter (list) and reduce_scatter_tensor
    n = 6
    lst = [val(RANK, n, torch.float32) * (j + 1) for j in range(WORLD)]
    out = torch.zeros(n)
    dist.reduce_scatter(out, lst)
    check("reduce_scatter", out, expected_reduce(n, torch.float32, "sum") * (RANK + 1))
    inp = torch.cat(lst)
    out = torch.zeros(n)
    rs = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    rs(out, inp)
    check("reduce_scatter_tensor", out, expected_reduce(n, torch.float32, "sum") * (RANK + 1))
    out = torch.zeros(n, dtype=torch.int32)
    rs(out, inp.to(torch.int32), op=dist.ReduceOp.MAX)
    check("reduce_scatter_tensor max int32", out,
          (val(WORLD - 1, n, torch.float32) * (RANK + 1)).to(torch.int32))


def test_p2p_async_objects():
    # send/recv around a ring, and isend/irecv with tags
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    got = torch.zeros(5, dtype=torch.float64)
    if RANK % 2 == 0:
        dist.send(val(RANK, 5, torch.float64), dst=nxt)
        dist.recv(got, src=prv)
    else:
        dist.recv(got, src=prv)
        dist.send(val(RANK, 5, torch.float64), dst=nxt)
    check("send/recv ring", got, val(prv, 5, torch.float64))
    a, b = torch.zeros(4), torch.zeros(4)
    reqs = [dist.irecv(b, src=prv, tag=7), dist.irecv(a, src=prv, tag=3),
            dist.isend(torch.full((4,), 3.0 + RANK), dst=nxt, tag=3),
            dist.isend(torch.full((4,), 7.0 + RANK), dst=nxt, tag=7)]
    for r in reqs:
        r.wait()
    check("irecv tag 3", a, torch.full((4,), 3.0 + prv))
    check("irecv tag 7", b, torch.full((4,), 7.0 + prv))
    # A receive posted before a collective must not hold back the collective's
    # completion: rank 0 sends what its receive waits for only after the
    # all_reduce returned (a completion queue served in issue order deadlocks).
    buf = torch.zeros(2)
    t = torch.ones(1)
    if RANK == 0:
        req = dist.irecv(buf, src=1, tag=11)
        dist.all_reduce(t)
        dist.send(torch.full((2,), 2.0), dst=1, tag=12)
        req.wait()
        check("irecv posted before all_reduce", buf, torch.full((2,), 10.0))
    elif RANK == 1:
        dist.all_reduce(t)
        dist.recv(buf, src=0, tag=12)
        dist.send(buf * 5, dst=0, tag=11)
    else:
        dist.all_reduce(t)
    check("all_reduce behind a pending irecv", t, torch.full((1,), float(WORLD)))
    # async collectives: several in flight, futures carry the result tensors
    ts = [val(RANK, 1000, torch.float32) * k for k in range(1, 5)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    futs = [w.get_future() for w in works]
    torch.futures.wait_all(futs)
    for k, (w, f) in enumerate(zip(works, futs), 1):
        if not w.is_completed():
            failures.append("is_completed")
        check(f"async all_reduce {k}", f.value()[0], expected_reduce(1000, torch.float32, "sum")
              * k)
    chained = dist.all_reduce(torch.ones(3), async_op=True).get_future().then(
        lambda f: f.value()[0] * 2)
    check("future.then", chained.wait(), torch.full((3,), 2.0 * WORLD))
    # coalesced forms and batch_isend_irecv
    import warnings
    cs = [val(RANK, 3, torch.float32), val(RANK, 5, torch.float32)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "will be deprecated"
        dist.all_reduce_coalesced(cs)
    check("all_reduce_coalesced [0]", cs[0], expected_reduce(3, torch.float32, "sum"))
    check("all_reduce_coalesced [1]", cs[1], expected_reduce(5, torch.float32, "sum"))
    # all_gather_coalesced: output_tensor_lists[r][i] is rank r's input i
    # (torch's docstring). Input i has its own size, so a transposed layout
    # fails on shape; with as many inputs as ranks and one size, a transposed
    # result would have the right shapes and wrong values. (torch requires
    # one dtype for all of them.)
    for n_in, dtype in ((1, torch.float32), (3, torch.int64), (WORLD, torch.float64)):
        sizes = [2 + i for i in range(n_in)] if n_in != WORLD else [4] * n_in
        ins = [val(10 * RANK + i, sizes[i], dtype) for i in range(n_in)]
        outs = [[torch.zeros(sizes[i], dtype=dtype) for i in range(n_in)]
                for _ in range(WORLD)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "will be deprecated"
            dist.all_gather_coalesced(outs, ins)
        for r in range(WORLD):
            for i in range(n_in):
                check(f"all_gather_coalesced {n_in} inputs [rank {r}][input {i}]", outs[r][i],
                      val(10 * r + i, sizes[i], dtype))
    got = torch.zeros(6, dtype=torch.int32)
    ops = [dist.P2POp(dist.isend, val(RANK, 6, torch.int32), nxt),
           dist.P2POp(dist.irecv, got, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    check("batch_isend_irecv", got, val(prv, 6, torch.int32))
    dist.barrier()
    # object collectives ride on all_gather / broadcast of byte tensors
    objs = [None] * WORLD
    dist.all_gather_object(objs, {"rank": RANK, "name": f"r{RANK}"})
    if objs != [{"rank": r, "name": f"r{r}"} for r in range(WORLD)]:
        failures.append("all_gather_object")
        say(f"rank {RANK}: FAIL all_gather_object: {objs}")
    lst = [f"from {RANK}", RANK] if RANK == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    if lst != ["from 0", 0]:
        failures.append("broadcast_object_list")
    # a subgroup of the even ranks gets its own gx communicator
    evens = list(range(0, WORLD, 2))
    g = dist.new_group(evens, backend="gx")
    if RANK in evens:
        t = torch.tensor([float(RANK)])
        dist.all_reduce(t, group=g)
        check("new_group all_reduce", t, torch.tensor([float(sum(evens))]))


def test_any_source_and_sparse():
    # recv(src=None) / irecv(src=None): rank 0 takes one message from every
    # other rank, in whatever order, and learns who sent each; recv reports a
    # global rank, also in a subgroup whose group ranks differ.
    if RANK == 0:
        seen = []
        for k in range(WORLD - 1):
            t = torch.zeros(3)
            if k % 2 == 0:
                src = dist.recv(t)
            else:
                w = dist.irecv(t)
                w.wait()
                src = w._source_rank()
            check(f"recv any source from {src}", t, torch.full((3,), float(src)))
            seen.append(src)
        if sorted(seen) != list(range(1, WORLD)):
            failures.append(f"recv any source: senders {seen}")
    else:
        dist.send(torch.full((3,), float(RANK)), dst=0)
    odds = list(range(1, WORLD, 2))
    g = dist.new_group(odds, backend="gx")
    if len(odds) > 1 and RANK in odds:
        t = torch.zeros(1)
        if RANK == odds[0]:
            src = dist.recv(t, group=g)
            if src != odds[1] or t.item() != odds[1]:
                failures.append(f"recv any source in a subgroup: {src}, {t.item()}")
        elif RANK == odds[1]:
            dist.send(torch.full((1,), float(RANK)), dst=odds[0], group=g)
    # sparse COO all_reduce (SUM), as gloo: rank r holds ones at 0..r
    n = WORLD + 2
    sp = torch.sparse_coo_tensor(torch.arange(RANK + 1).reshape(1, -1),
                                 torch.full((RANK + 1, 2), float(RANK + 1)), (n, 2))
    dist.all_reduce(sp)
    want = torch.zeros(n, 2)
    for r in range(WORLD):
        want[: r + 1] += r + 1
    check("sparse all_reduce", sp.to_dense(), want)
    for what, call, err in [
            ("sparse MAX", lambda: dist.all_reduce(sp, op=dist.ReduceOp.MAX), ValueError),
            ("sparse broadcast", lambda: dist.broadcast(sp, src=0), TypeError)]:
        try:
            call()
            failures.append(f"{what} accepted")
        except err as e:
            if "sparse" not in str(e) and "layout" not in str(e):
                failures.append(f"{what} message: {e}")
    dist.barrier()


def test_no_leak():
    # The group holds finished works (and their result tensors) only for a
    # bounded while: a tensor all-reduced and dropped is freed after
    # RECENT_WORKS more operations.
    import gc
    import weakref
    t = torch.ones(1000)
    ref = weakref.ref(t)
    dist.all_reduce(t)
    del t
    for _ in range(gx_torch.ProcessGroupGx.RECENT_WORKS + 1):
        dist.barrier()
    gc.collect()
    if ref() is not None:
        failures.append("a finished all_reduce's tensor is still held")


def test_errors():
    # gx's own argument checks surface as Python errors naming the problem
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int16))
        failures.append("int16 all_reduce accepted")
    except TypeError as e:
        if "torch.int16" not in str(e):
            failures.append(f"int16 message: {e}")
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BAND)
        failures.append("BAND accepted")
    except ValueError as e:
        if "not supported" not in str(e):
            failures.append(f"BAND message: {e}")


def main():
    global RANK, WORLD
    dist.init_process_group("gx", timeout=datetime.timedelta(seconds=120))
    RANK, WORLD = dist.get_rank(), dist.get_world_size()
    if dist.get_backend() != "gx":
        failures.append(f"backend is {dist.get_backend()}")
    test_reductions()
    test_movement()
    test_uneven_and_lists()
    test_p2p_async_objects()
    test_any_source_and_sparse()
    test_errors()
    test_no_leak()
    dist.barrier()
    dist.destroy_process_group()
    say(f"rank {RANK}: {len(failures)} failure(s) in every collective on {WORLD} ranks, "
      f"backend gx: {'PASS' if not failures else 'FAIL ' + ', '.join(failures[:5])}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
