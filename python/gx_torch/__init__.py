"""gx_torch - PyTorch DDP gradient buckets through gx, on CPU tensors.

A thin ctypes layer over libgx (no compiled extension). Typical use, in a
program started by gx-run (or torchrun: gx reads RANK / WORLD_SIZE /
MASTER_ADDR / MASTER_PORT too; then give gx its own port with GX_MASTER_PORT,
as torch's store already listens on MASTER_PORT)::

    import torch.distributed as dist
    import gx_torch

    comm = gx_torch.Communicator()               # collective: every rank
    dist.init_process_group("gloo", ...)         # DDP still needs a group
    model = torch.nn.parallel.DistributedDataParallel(net)
    model.register_comm_hook(gx_torch.HookState(comm), gx_torch.allreduce_hook)
    ...                                          # train as usual
    comm.close()

The hook averages each bucket like PyTorch's default allreduce hook (divide
by the world size, then sum), but the sum runs over gx. A single worker
thread per HookState runs the all-reduces in the order DDP hands the buckets
over, which is the same on every rank, and completes each bucket's
torch.futures.Future; ctypes releases the GIL during the call, so backward
keeps computing meanwhile.

libgx is found through GX_LIBRARY (a path), else "libgx.so.0" on the
loader's search path.
"""

import ctypes
import os
import queue
import threading

__all__ = ["GxError", "Communicator", "HookState", "allreduce_hook", "fp16_compress_hook",
           "load_library"]

# enum gx_datatype / gx_redop, as in gx.h
GX_INT8, GX_UINT8, GX_INT32, GX_UINT32, GX_INT64, GX_UINT64 = range(6)
GX_FLOAT16, GX_BFLOAT16, GX_FLOAT32, GX_FLOAT64 = range(6, 10)
GX_SUM, GX_PROD, GX_MIN, GX_MAX, GX_AVG = range(5)

_lib = None


class GxError(RuntimeError):
    """A gx call failed; .status is the GX_E* code (negative)."""

    def __init__(self, what, status, detail):
        super().__init__(f"{what}: {detail or 'status %d' % status}")
        self.status = status


def load_library(path=None):
    """Load libgx once (path, else $GX_LIBRARY, else libgx.so.0)."""
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(path or os.environ.get("GX_LIBRARY") or "libgx.so.0")
    P = ctypes.c_void_p
    sigs = {
        "gx_comm_init_env": (ctypes.c_int, [ctypes.POINTER(P)]),
        "gx_comm_rank": (ctypes.c_int, [P]),
        "gx_comm_size": (ctypes.c_int, [P]),
        "gx_comm_finalize": (ctypes.c_int, [P]),
        "gx_comm_destroy": (None, [P]),
        "gx_comm_abort": (None, [P]),
        "gx_allreduce": (ctypes.c_int, [P, P, P, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]),
        "gx_broadcast": (ctypes.c_int, [P, P, P, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]),
        "gx_barrier": (ctypes.c_int, [P]),
        "gx_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "gx_last_error": (ctypes.c_char_p, []),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    _lib = lib
    return lib


def _torch_dtype_map():
    import torch
    return {
        torch.float32: GX_FLOAT32, torch.float64: GX_FLOAT64, torch.float16: GX_FLOAT16,
        torch.bfloat16: GX_BFLOAT16, torch.int32: GX_INT32, torch.int64: GX_INT64,
        torch.int8: GX_INT8, torch.uint8: GX_UINT8,
    }


class Communicator:
    """A gx communicator over every rank of the job (gx_comm_init_env)."""

    def __init__(self, library=None):
        self._lib = load_library(library)
        self._comm = ctypes.c_void_p()
        self._check("gx_comm_init_env", self._lib.gx_comm_init_env(ctypes.byref(self._comm)))
        self.rank = self._lib.gx_comm_rank(self._comm)
        self.size = self._lib.gx_comm_size(self._comm)
        self._dtypes = None

    def _check(self, what, rc):
        if rc != 0:
            detail = (self._lib.gx_last_error() or b"").decode(errors="replace")
            name = (self._lib.gx_strerror(rc) or b"").decode()
            raise GxError(what, rc, f"{name}: {detail}" if detail else name)

    def _gx_dtype(self, tensor):
        if self._dtypes is None:
            self._dtypes = _torch_dtype_map()
        try:
            return self._dtypes[tensor.dtype]
        except KeyError:
            raise TypeError(f"gx has no datatype for {tensor.dtype}") from None

    @staticmethod
    def _host_contiguous(tensor, what):
        if tensor.device.type != "cpu":
            raise ValueError(f"{what}: gx_torch handles CPU tensors only, got {tensor.device}")
        if not tensor.is_contiguous():
            raise ValueError(f"{what}: the tensor must be contiguous")

    def allreduce_(self, tensor, op=GX_SUM):
        """In-place all-reduce of a contiguous CPU tensor; returns it."""
        self._host_contiguous(tensor, "allreduce_")
        ptr = ctypes.c_void_p(tensor.data_ptr())
        self._check("gx_allreduce", self._lib.gx_allreduce(
            self._comm, ptr, ptr, tensor.numel(), self._gx_dtype(tensor), op))
        return tensor

    def broadcast_(self, tensor, root=0):
        """In-place broadcast of a contiguous CPU tensor from `root`."""
        self._host_contiguous(tensor, "broadcast_")
        ptr = ctypes.c_void_p(tensor.data_ptr())
        self._check("gx_broadcast", self._lib.gx_broadcast(
            self._comm, ptr, ptr, tensor.numel(), self._gx_dtype(tensor), root))
        return tensor

    def barrier(self):
        self._check("gx_barrier", self._lib.gx_barrier(self._comm))

    def close(self):
        """Finalize (collective) and destroy the communicator."""
        if self._comm:
            rc = self._lib.gx_comm_finalize(self._comm)
            self._lib.gx_comm_destroy(self._comm)
            self._comm = ctypes.c_void_p()
            self._check("gx_comm_finalize", rc)

    def abort(self):
        if self._comm:
            self._lib.gx_comm_abort(self._comm)
            self._lib.gx_comm_destroy(self._comm)
            self._comm = ctypes.c_void_p()


class HookState:
    """State of the gx comm hooks: the communicator and one worker thread that
    runs the buckets' all-reduces in the order DDP issues them."""

    def __init__(self, comm):
        self.comm = comm
        self.buckets = 0
        self.bytes = 0
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="gx-ddp-hook", daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            job = self._queue.get()
            if job is None:
                return
            fn, fut = job
            try:
                fut.set_result(fn())
            except BaseException as e:  # hand any failure to the waiting DDP
                fut.set_exception(e)

    def submit(self, fn):
        import torch
        fut = torch.futures.Future()
        self._queue.put((fn, fut))
        return fut

    def close(self):
        self._queue.put(None)
        self._thread.join()


def allreduce_hook(state, bucket):
    """DDP comm hook: average the bucket over gx (divide, then sum, as
    PyTorch's default allreduce hook does)."""
    tensor = bucket.buffer()
    state.buckets += 1
    state.bytes += tensor.numel() * tensor.element_size()

    def run():
        tensor.div_(state.comm.size)
        return state.comm.allreduce_(tensor, GX_SUM)
    return state.submit(run)


def fp16_compress_hook(state, bucket):
    """DDP comm hook: like torch's fp16_compress_hook, over gx (half the bytes)."""
    import torch
    tensor = bucket.buffer()
    state.buckets += 1
    state.bytes += tensor.numel() * 2

    def run():
        half = tensor.div(state.comm.size).to(torch.float16)
        state.comm.allreduce_(half, GX_SUM)
        tensor.copy_(half)
        return tensor
    return state.submit(run)
