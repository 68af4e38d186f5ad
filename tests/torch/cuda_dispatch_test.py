"""cuda_dispatch_test - gx_torch's dispatch of CUDA tensors, without CUDA.

Debian's torch here has no CUDA, so CUDA tensors are stood in for by CPU
tensors whose .device says cuda:0 (a Tensor subclass), torch.cuda by
recording hooks (gx_torch._cuda.hooks), and libgx by a recorder that
performs the data movement of a 1-rank job for the calls it sees. Checked:
  - calls with a stream form take gx_<name>_stream with the tensors' own
    data pointers, the right counts/dtypes/ops/roots and the current
    stream's handle; no request form, no host synchronization;
  - CPU tensors keep the request forms (gx_i<name>) and never ask for a
    stream;
  - calls without a stream form synchronize the current stream once, then
    pass the device pointers to the request forms;
  - non-contiguous outputs: gx gets the contiguous copy, the result is
    copied back (on the stream, right after the call);
  - mixing CPU and CUDA tensors, or two devices, in one call is refused;
  - the backend's work for a streamed call: wait() / synchronize() make the
    current stream wait for the event recorded on the call's stream after
    it, is_completed() asks that event, the future is the CUDA-aware one,
    and an async error of the communicator is raised by wait().
Exits 0 on success, 1 naming the first failed check, 77 without torch.
"""

import ctypes
import sys
import types

try:
    import torch
    import torch.distributed as dist
except ImportError:
    print("SKIP: torch is not installed for", sys.executable)
    sys.exit(77)
if not dist.is_available():
    print("SKIP: torch.distributed is not available")
    sys.exit(77)

from gx_torch import _cuda, _libgx as gx, _ops, backend  # noqa: E402

STREAM = 0xC0DE5000  # the stand-in cudaStream_t
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class FakeCuda(torch.Tensor):
    @property
    def device(self):
        return torch.device("cuda", 0)


def dev(t):
    return t.as_subclass(FakeCuda)


class FakeStream:
    def __init__(self, device):
        self.device = device
        self.cuda_stream = STREAM + device.index


class FakeEvent:
    def __init__(self, stream):
        self.stream = stream
        self.done = False

    def query(self):
        return self.done


class Hooks:
    def __init__(self):
        self.log = []

    def current_stream(self, device):
        self.log.append(("current_stream", device))
        return FakeStream(device)

    def record_event(self, stream):
        self.log.append(("record_event", stream.cuda_stream))
        return FakeEvent(stream)

    def wait_event(self, device, event):
        self.log.append(("wait_event", device, event))

    def synchronize(self, device):
        self.log.append(("synchronize", device))

    def sync_stream(self, stream):
        self.log.append(("sync_stream", stream.cuda_stream))

    def future(self, device):
        self.log.append(("future", device))
        return torch.futures.Future()

    def names(self):
        return [e[0] for e in self.log]


class FakeLib:
    """Records every libgx call; moves the bytes as a 1-rank job would."""

    def __init__(self):
        self.calls = []
        self.async_error = None

    def __getattr__(self, name):
        if not name.startswith("gx_"):
            raise AttributeError(name)

        def fn(*args):
            vals = [a.value if isinstance(a, ctypes.c_void_p) else a for a in args]
            self.calls.append((name, vals))
            if name == "gx_comm_get_async_error":
                if self.async_error:
                    args[1].value = self.async_error.encode()
                    return 5
                return 0
            if name.startswith("gx_i") and name != "gx_ibarrier":
                args[-1]._obj.value = 0x1000 + len(self.calls)  # the request
            return 0
        return fn

    def named(self, prefix):
        return [c for c in self.calls if c[0].startswith(prefix)]


def issuer(size=2, rank=0):
    lib = FakeLib()
    return lib, _ops.CollectiveIssuer(lib, 0xC0FFEE, rank, size, "torch:test")


def fresh_hooks():
    h = Hooks()
    _cuda.hooks = h
    return h


def ptr(t):
    return t.data_ptr()


# -- stream forms ---------------------------------------------------------------
h = fresh_hooks()
lib, iss = issuer()
t = dev(torch.arange(8, dtype=torch.float32))
op = iss.allreduce([t], dist.ReduceOp.SUM)
check([c[0] for c in lib.calls] == ["gx_allreduce_stream"], f"all_reduce calls {lib.calls}")
check(lib.calls[0][1] == [0xC0FFEE, ptr(t), ptr(t), 8, gx.GX_FLOAT32, gx.GX_SUM, STREAM],
      f"all_reduce args {lib.calls[0][1]}")
check(op.streamed and op.device == torch.device("cuda", 0), "all_reduce is streamed on cuda:0")
check("synchronize" not in h.names(), "a streamed call must not block the host")

lib, iss = issuer()
t = dev(torch.zeros(5, dtype=torch.float64))
iss.broadcast([t], 1)
check(lib.calls == [("gx_broadcast_stream", [0xC0FFEE, ptr(t), ptr(t), 40, gx.GX_UINT8, 1,
                                              STREAM])], f"broadcast {lib.calls}")

lib, iss = issuer()
t = dev(torch.zeros(3, dtype=torch.int32))
iss.reduce([t], dist.ReduceOp.MAX, 1)
check(lib.calls == [("gx_reduce_stream", [0xC0FFEE, ptr(t), ptr(t), 3, gx.GX_INT32, gx.GX_MAX,
                                           1, STREAM])], f"reduce {lib.calls}")

lib, iss = issuer()
inp = dev(torch.arange(4, dtype=torch.float32))
outs = [dev(torch.zeros(4)), dev(torch.zeros(4))]
op = iss.allgather([outs], [inp])
stage = op.keep[-1]
check(lib.calls == [("gx_allgather_stream", [0xC0FFEE, ptr(inp), ptr(stage), 16, gx.GX_UINT8,
                                              STREAM])], f"all_gather {lib.calls}")
check(stage.device.type == "cuda" and stage.numel() == 8, "all_gather stages on the device")

lib, iss = issuer()
out = dev(torch.zeros(6, dtype=torch.float32))
inp = dev(torch.arange(12, dtype=torch.float32))
iss.allgather_base(dev(torch.zeros(24)), dev(torch.zeros(12)))
iss2_lib, iss2 = issuer()
iss2.reduce_scatter_base(out, inp, dist.ReduceOp.SUM)
check(iss2_lib.calls == [("gx_reduce_scatter_stream", [0xC0FFEE, ptr(inp), ptr(out), 6,
                                                        gx.GX_FLOAT32, gx.GX_SUM, STREAM])],
      f"reduce_scatter_tensor {iss2_lib.calls}")
check(lib.named("gx_allgather_stream") and not lib.named("gx_iallgather"),
      "all_gather_into_tensor streamed")

lib, iss = issuer()
ins = [dev(torch.ones(3)), dev(torch.ones(3))]
iss.reduce_scatter([dev(torch.zeros(3))], [ins], dist.ReduceOp.SUM)
check([c[0] for c in lib.calls] == ["gx_reduce_scatter_stream"] and lib.calls[0][1][3] == 3,
      f"reduce_scatter {lib.calls}")

lib, iss = issuer()
src, dst = dev(torch.arange(8, dtype=torch.int64)), dev(torch.zeros(8, dtype=torch.int64))
iss.alltoall_base(dst, src, [], [])
check(lib.calls == [("gx_alltoall_stream", [0xC0FFEE, ptr(src), ptr(dst), 32, gx.GX_UINT8,
                                             STREAM])], f"all_to_all_single {lib.calls}")

# -- CPU tensors keep the request forms ---------------------------------------------
h = fresh_hooks()
lib, iss = issuer()
t = torch.arange(8, dtype=torch.float32)
op = iss.allreduce([t], dist.ReduceOp.SUM)
check([c[0] for c in lib.calls] == ["gx_iallreduce"] and lib.calls[0][1][1] == ptr(t),
      f"CPU all_reduce {lib.calls}")
check(not op.streamed and op.device is None and h.log == [], "CPU: no stream asked for")

# -- no stream form: synchronize once, then device pointers to request forms --------
h = fresh_hooks()
lib, iss = issuer()
t = dev(torch.arange(4, dtype=torch.float32))
iss.send([t], 1, 3)
check(h.names() == ["synchronize"] and lib.calls[0][0] == "gx_isend" and
      lib.calls[0][1][1] == ptr(t), f"send: {h.log} {lib.calls}")
h = fresh_hooks()
lib, iss = issuer()
gl = [dev(torch.zeros(4)), dev(torch.zeros(4))]
iss.gather([gl], [t], 0)
check(h.names() == ["synchronize"] and lib.calls[0][0] == "gx_igather" and
      lib.calls[0][1][1] == ptr(t), f"gather: {h.log} {lib.calls}")
h = fresh_hooks()
lib, iss = issuer()
iss.alltoall_base(dev(torch.zeros(4)), dev(torch.zeros(4)), [1, 3], [3, 1])
check(h.names() == ["synchronize"] and [c[0] for c in lib.calls] ==
      ["gx_irecv", "gx_irecv", "gx_isend", "gx_isend"], f"uneven all_to_all: {h.log}")

# -- a request form after stream forms waits for their streams first -----------------
h = fresh_hooks()
lib, iss = issuer()
iss.allreduce([dev(torch.ones(4))], dist.ReduceOp.SUM)
iss.broadcast([dev(torch.ones(4))], 0)
n = len(h.log)
iss.barrier()
check(h.log[n:] == [("sync_stream", STREAM)], f"barrier after stream calls: {h.log[n:]}")
n = len(h.log)
iss.allreduce([torch.ones(2)], dist.ReduceOp.SUM)  # CPU: nothing left to wait for
check(h.log[n:] == [], f"second request form: {h.log[n:]}")
iss.allreduce([dev(torch.ones(4))], dist.ReduceOp.SUM)
n = len(h.log)
iss.allreduce([torch.ones(2)], dist.ReduceOp.SUM)
check(h.log[n:] == [("sync_stream", STREAM)], f"CPU call after a stream call: {h.log[n:]}")

# -- non-contiguous output: gx gets the copy, copied back after the call -------------
h = fresh_hooks()
lib, iss = issuer(size=1)
base = dev(torch.zeros(3, 2))
view = base.t()  # not contiguous
op = iss.allreduce([view], dist.ReduceOp.SUM)
gx_ptr = lib.calls[0][1][1]
check(gx_ptr != ptr(view) and len(op.copies) == 1, "non-contiguous: a contiguous copy to gx")
ctypes.memset(gx_ptr, 0, 24)
ctypes.cast(gx_ptr, ctypes.POINTER(ctypes.c_float))[5] = 7.0  # "the exchange's result"
op.finish()
check(float(view.reshape(-1)[5]) == 7.0, "non-contiguous result copied back")
check("synchronize" not in h.names(), "streamed copy-back needs no host synchronization")

# -- one device per call --------------------------------------------------------------
for what, fn in [("cpu after cuda", lambda i: i.allgather([[torch.zeros(2), torch.zeros(2)]],
                                                          [dev(torch.zeros(2))])),
                 ("cuda after cpu", lambda i: i.allgather_base(dev(torch.zeros(4)),
                                                               torch.zeros(2)))]:
    lib, iss = issuer()
    try:
        fn(iss)
        check(False, f"{what}: mixed devices accepted")
    except ValueError as e:
        check("one device" in str(e), f"{what}: {e}")
    check(lib.calls == [], f"{what}: nothing issued")

# -- the backend's work for a streamed call ----------------------------------------------
h = fresh_hooks()
lib, iss = issuer()
t = dev(torch.ones(4))
op = iss.allreduce([t], dist.ReduceOp.SUM)
pg = types.SimpleNamespace(_recent=[], _timeout_s=10.0)
work = backend.ProcessGroupGx._launch_streamed(pg, op)
rec = [e for e in h.log if e[0] == "record_event"]
check(rec == [("record_event", STREAM)] and op.event is not None, f"event recorded: {h.log}")
check(("future", torch.device("cuda", 0)) in h.log, "CUDA-aware future for a streamed call")
check(work.get_future().done() and work.get_future().value()[0] is t, "future holds the tensor")
check(not work.is_completed(), "is_completed asks the event (not done yet)")
op.event.done = True
check(work.is_completed(), "is_completed after the event")
n = len(h.log)
check(work.wait() is True and h.log[n:] == [("wait_event", torch.device("cuda", 0), op.event)],
      f"wait orders the current stream after the event: {h.log[n:]}")
n = len(h.log)
work.synchronize()
check(h.log[n:] == [("wait_event", torch.device("cuda", 0), op.event)], "synchronize too")
check(op.keep, "a streamed call keeps its tensors for the stream")
lib.async_error = "rank 1 (host x) died"
try:
    work.wait()
    check(False, "wait must raise the communicator's async error")
except RuntimeError as e:
    check("rank 1" in str(e), f"async error text: {e}")

if failures:
    print(f"FAIL: {len(failures)} check(s) failed")
    sys.exit(1)
print("PASS: CUDA dispatch (stream forms, request forms, copies, work ordering)")
