"""gx_torch - PyTorch over gx: the torch.distributed backend "gx", and DDP comm hooks.

    import torch.distributed as dist
    import gx_torch                       # registers the backend "gx"
    dist.init_process_group("gx")         # under torchrun, gx-run, Slurm, mpirun

Every collective of torch.distributed then runs over gx (CPU tensors); see
gx_torch.backend and docs/pytorch.md. The older pieces stay: Communicator (a
gx communicator of its own, from gx_comm_init_env) and the DDP comm hooks
allreduce_hook / fp16_compress_hook with a HookState, for jobs that keep
another backend and send only the gradient buckets through gx.

libgx is found without settings after `cmake --install` or `pip install`
(see gx_torch._libgx); GX_LIBRARY (a path) overrides.
"""

import ctypes
import queue
import threading

from ._libgx import (GX_INT8, GX_UINT8, GX_INT32, GX_UINT32, GX_INT64, GX_UINT64,  # noqa: F401
                     GX_FLOAT16, GX_BFLOAT16, GX_FLOAT32, GX_FLOAT64,
                     GX_SUM, GX_PROD, GX_MIN, GX_MAX, GX_AVG, GxError, load_library,
                     library_path)

__all__ = ["GxError", "Communicator", "HookState", "allreduce_hook", "fp16_compress_hook",
           "load_library", "library_path", "ProcessGroupGx", "BACKEND_NAME",
           "launcher_rank_size"]

BACKEND_NAME = "gx"

try:
    import torch.distributed as _dist
    _HAVE_DIST = _dist.is_available()
except ImportError:
    _HAVE_DIST = False

if _HAVE_DIST:
    from .backend import ProcessGroupGx, launcher_rank_size, register as _register
    _register()
else:
    ProcessGroupGx = launcher_rank_size = None


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
