"""gx_torch.rpc - remote calls in the shape of torch.distributed.rpc, over gx's
C remote calls (gx_rpc.h; docs/rpc.md).

    import gx_torch.rpc as rpc          # instead of torch.distributed.rpc
    rpc.init_rpc("worker%d" % rank, rank=rank, world_size=n)
    y = rpc.rpc_sync("worker1", torch.add, args=(x, 1))
    fut = rpc.rpc_async(1, torch.mul, args=(x, 2))   # a torch.futures.Future
    rref = rpc.remote("worker1", MyObject, args=(...,))
    rref.to_here(); rref.owner(); rref.rpc_sync().method(...)
    rpc.shutdown()

Provided: init_rpc (under gx-run, torchrun or any launcher gx_comm_init_env
reads; else MASTER_ADDR/MASTER_PORT with rank and world_size), rpc_sync,
rpc_async, remote, RRef (to_here, owner, owner_name, is_owner, local_value,
confirmed_by_owner, rpc_sync/rpc_async/remote proxies), get_worker_info,
WorkerInfo, shutdown(graceful), functions.async_execution. The callable and its arguments are pickled,
except plain CPU tensors, which travel as raw bytes after the pickle, copied
once on each side (_rpc_wire.py), and run by one of the target's gx handler threads; an exception raised there is
raised again by the caller's wait. Every call has a deadline (timeout in
seconds, as torch's; default 60 s); a dead target fails the call naming its
rank. Calls are accepted only over the job's connections, each of which
proved the job key (docs/security.md): unpickling runs code, so never share
the key with anyone you would not let run code in the job.

Not provided: distributed autograd (dist_autograd), the distributed
optimizer, RRef reference counting across ranks (an RRef's value lives on
its owner until shutdown), and TensorPipe's device maps.
"""

import ctypes
import functools
import itertools
import os
import threading
import time
import types

import torch

from . import _libgx as gx
from . import _rpc_wire as wire

_HANDLER_ID = 0x67787270  # "gxrp": the one C handler this module registers
_DEFAULT_TIMEOUT_S = 60.0
_NAME_LEN = 128

_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                            ctypes.c_void_p)
_ON_DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class _RpcOpts(ctypes.Structure):
    """struct gx_rpc_opts (gx_rpc.h)."""
    _fields_ = [("size", ctypes.c_size_t), ("timeout_ms", ctypes.c_int),
                ("on_done", _ON_DONE), ("user", ctypes.c_void_p)]


class WorkerInfo:
    """A worker's name and id (its rank), as torch.distributed.rpc.WorkerInfo."""

    def __init__(self, name, id):
        self.name, self.id = name, id

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, name={self.name})"

    def __eq__(self, other):
        return isinstance(other, WorkerInfo) and (self.name, self.id) == (other.name, other.id)

    def __hash__(self):
        return hash((self.name, self.id))


class _State:
    def __init__(self):
        self.lib = None
        self.comm = None
        self.rank = -1
        self.names = []
        self.lock = threading.Lock()
        self.pending = {}        # call number -> (future, args buffer)
        self.seq = itertools.count(1)
        self.owned = {}          # rref id -> value (this rank owns it)
        self.owned_cv = threading.Condition(self.lock)
        self.handler = _HANDLER(_serve)
        self.on_done = _ON_DONE(_done)


_st = None


def _declare(lib):
    P, I, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    sigs = {
        "gx_rpc_register": (I, [P, ctypes.c_uint32, _HANDLER, P]),
        "gx_rpc_reply": (I, [P, P, S]),
        "gx_rpc_reply_buffer": (I, [P, S, ctypes.POINTER(P)]),
        "gx_rpc_caller": (I, [P]),
        "gx_rpc_call_async": (I, [P, I, ctypes.c_uint32, P, S, ctypes.POINTER(_RpcOpts),
                                  ctypes.POINTER(P)]),
        "gx_rpc_result": (I, [P, ctypes.POINTER(P), ctypes.POINTER(S)]),
        "gx_rpc_free": (None, [P]),
        "gx_iallgather": (I, [P, P, P, S, I, ctypes.POINTER(P)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def _serve(ctx, args, length, user):
    """The C handler: runs one pickled request on a gx handler thread."""
    try:
        kind, payload = wire.unpack(args, length)  # tensors copied out of gx's buffer
        caller = _st.lib.gx_rpc_caller(ctx)
        value = _run(kind, payload, caller)
        wire.pack((True, value), _reply_buffer(ctx))  # written where gx sends it from
    except BaseException as e:  # the caller's wait raises it
        try:
            wire.pack((False, e), _reply_buffer(ctx))
        except Exception:
            wire.pack((False, RuntimeError(f"{type(e).__name__}: {e}")), _reply_buffer(ctx))
    return 0


def _reply_buffer(ctx):
    def alloc(n):
        buf = ctypes.c_void_p()
        gx.check(_st.lib, "gx_torch.rpc: gx_rpc_reply_buffer",
                 _st.lib.gx_rpc_reply_buffer(ctx, n, ctypes.byref(buf)))
        return buf.value
    return alloc


class _Failed:
    """An RRef whose creation raised: its users get the exception."""

    def __init__(self, exc):
        self.exc = exc


def _is_async(fn):
    """Marked by rpc.functions.async_execution (ours or torch's)."""
    return (getattr(fn, "_gx_async_execution", False) or
            getattr(fn, "_wrapped_async_rpc_function", None) is not None)


def _invoke(fn, args, kwargs):
    value = fn(*args, **kwargs)
    if _is_async(fn):  # its Future's value is the result; this thread waits for it
        value = value.wait()
    return value


def _owned(rid, timeout=_DEFAULT_TIMEOUT_S):
    """The value of an RRef this rank owns. A reference can arrive before
    the remote() that creates its value has run here (the creator passed it
    on at once, as torch allows): wait for it, up to the deadline."""
    end = time.monotonic() + timeout
    with _st.owned_cv:
        while rid not in _st.owned:
            left = end - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"gx_torch.rpc: the value of RRef {rid} was not created on "
                                   f"rank {_st.rank} within {timeout:.0f} s")
            _st.owned_cv.wait(left)
        value = _st.owned[rid]
    if isinstance(value, _Failed):
        raise value.exc
    return value


def _run(kind, payload, caller):
    if kind == "call":
        fn, args, kwargs = payload
        return _invoke(fn, args, kwargs)
    if kind == "rref_new":
        rid, fn, args, kwargs = payload
        try:
            value = _invoke(fn, args, kwargs)
        except BaseException as e:
            value = _Failed(e)
        with _st.owned_cv:
            _st.owned[rid] = value
            _st.owned_cv.notify_all()
        if isinstance(value, _Failed):
            raise value.exc
        return None
    if kind == "rref_get":
        return _owned(payload)
    if kind == "rref_method":
        rid, name, args, kwargs = payload
        return _invoke(getattr(_owned(rid), name), args, kwargs)
    raise ValueError(f"gx_torch.rpc: unknown request kind {kind!r} from rank {caller}")


def _async_execution(fn):
    """rpc.functions.async_execution: fn returns a torch Future and the
    call's result is that Future's value. The target's handler thread waits
    for it (gx's C handlers answer before they return), so each such call
    still pending holds one of the target's GX_RPC_THREADS (docs/rpc.md)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    wrapper._gx_async_execution = True
    return wrapper


functions = types.SimpleNamespace(async_execution=_async_execution)


def _done(req, user):
    """gx's completion callback (a gx thread): settle the call's future."""
    with _st.lock:
        fut, _ = _st.pending.pop(user)
    res, n = ctypes.c_void_p(), ctypes.c_size_t()
    rc = _st.lib.gx_rpc_result(req, ctypes.byref(res), ctypes.byref(n))
    err = None if rc == 0 else gx.last_error_text(_st.lib, rc)
    _st.lib.gx_request_free(req)
    try:
        if err is not None:
            if res:
                _st.lib.gx_rpc_free(res)
            raise RuntimeError(f"gx_torch.rpc: the call failed: {err}")
        if not res:
            raise RuntimeError("gx_torch.rpc: the call's result is empty")
        # its tensors are views of gx's result, freed with the last of them
        ok, value = wire.unpack_owned(res.value, n.value, _st.lib.gx_rpc_free)
        if not ok:
            raise value
        fut.set_result(value)
    except BaseException as e:
        fut.set_exception(e)


def _rank_of(to):
    if isinstance(to, WorkerInfo):
        return to.id
    if isinstance(to, int):
        if not 0 <= to < len(_st.names):  # RuntimeError, as torch's
            raise RuntimeError(f"gx_torch.rpc: rank {to} is out of range (world of "
                               f"{len(_st.names)})")
        return to
    try:
        return _st.names.index(to)
    except ValueError:
        raise RuntimeError(f"gx_torch.rpc: unknown worker name {to!r}") from None


def _need_init():
    if _st is None or _st.comm is None:
        raise RuntimeError("gx_torch.rpc: call init_rpc() first")


def _send(to, kind, payload, timeout):
    _need_init()
    rank = _rank_of(to)
    buf = wire.pack((kind, payload))  # gx sends from it: kept until the call is done
    fut = torch.futures.Future()
    t = _DEFAULT_TIMEOUT_S if timeout is None or timeout < 0 else timeout
    key = next(_st.seq)
    with _st.lock:
        _st.pending[key] = (fut, buf)
    opts = _RpcOpts(ctypes.sizeof(_RpcOpts), max(1, int(t * 1000)), _st.on_done, key)
    req = ctypes.c_void_p()
    rc = _st.lib.gx_rpc_call_async(_st.comm, rank, _HANDLER_ID, buf.address, buf.nbytes,
                                   ctypes.byref(opts), ctypes.byref(req))
    if rc != 0:
        with _st.lock:
            _st.pending.pop(key, None)
        gx.check(_st.lib, f"gx_torch.rpc: call to rank {rank}", rc)
    return fut


def rpc_async(to, func, args=None, kwargs=None, timeout=-1.0):
    """Run func(*args, **kwargs) on `to` (name, rank or WorkerInfo); a Future."""
    return _send(to, "call", (func, tuple(args or ()), dict(kwargs or {})), timeout)


def rpc_sync(to, func, args=None, kwargs=None, timeout=-1.0):
    """rpc_async(...).wait(): the result, or the exception raised on `to`."""
    return rpc_async(to, func, args, kwargs, timeout).wait()


class RRef:
    """A reference to a value that lives on its owner (made by remote())."""

    def __init__(self, owner, rid, created):
        self._owner, self._rid, self._created = owner, rid, created

    def owner(self):
        return WorkerInfo(_st.names[self._owner], self._owner)

    def owner_name(self):
        return _st.names[self._owner]

    def is_owner(self):
        return self._owner == _st.rank

    def confirmed_by_owner(self):
        return self._created.done()

    def local_value(self):
        if not self.is_owner():
            raise RuntimeError(f"gx_torch.rpc: local_value() on rank {_st.rank}, whose owner is "
                               f"rank {self._owner}")
        self._created.wait()
        return _owned(self._rid)

    def to_here(self, timeout=-1.0):
        self._created.wait()
        return _send(self._owner, "rref_get", self._rid, timeout).wait()

    def _proxy(self, how, timeout):
        rref = self

        class _Proxy:
            def __getattr__(self, name):
                def call(*args, **kwargs):
                    rref._created.wait()
                    payload = (rref._rid, name, args, kwargs)
                    if how == "remote":
                        return remote(rref._owner, _call_method, args=(rref, name, args, kwargs),
                                      timeout=timeout)
                    fut = _send(rref._owner, "rref_method", payload, timeout)
                    return fut.wait() if how == "sync" else fut
                return call
        return _Proxy()

    def rpc_sync(self, timeout=-1.0):
        return self._proxy("sync", timeout)

    def rpc_async(self, timeout=-1.0):
        return self._proxy("async", timeout)

    def remote(self, timeout=-1.0):
        return self._proxy("remote", timeout)

    def __reduce__(self):  # an RRef passed in a call stays a reference
        return (_rref_from, (self._owner, self._rid))

    def __repr__(self):
        return f"RRef(owner={self._owner}, id={self._rid})"


def _rref_from(owner, rid):
    done = torch.futures.Future()
    done.set_result(None)
    return RRef(owner, rid, done)


def _call_method(rref, name, args, kwargs):
    return getattr(rref.local_value(), name)(*args, **kwargs)


def remote(to, func, args=None, kwargs=None, timeout=-1.0):
    """Run func on `to` and keep the result there; an RRef to it."""
    _need_init()
    owner = _rank_of(to)
    rid = (_st.rank, next(_st.seq))
    created = _send(owner, "rref_new", (rid, func, tuple(args or ()), dict(kwargs or {})), timeout)
    return RRef(owner, rid, created)


def get_worker_info(worker_name=None):
    _need_init()
    if worker_name is None:
        return WorkerInfo(_st.names[_st.rank], _st.rank)
    return WorkerInfo(worker_name, _rank_of(worker_name))


def init_rpc(name, backend=None, rank=-1, world_size=None, rpc_backend_options=None):
    """Join the job: a gx communicator of its own, every worker's name, the
    handler registered. Under a launcher gx knows (gx-run, torchrun, Slurm,
    mpirun) rank and world_size may be left out; otherwise they and
    MASTER_ADDR / MASTER_PORT are needed (init_method tcp://addr:port)."""
    global _st
    if _st is not None and _st.comm is not None:
        raise RuntimeError("gx_torch.rpc: init_rpc() was already called")
    lib = gx.load_library()
    _declare(lib)
    st = _State()
    st.lib = lib
    handle = ctypes.c_void_p()
    env_rank, env_size = os.environ.get("GX_RANK"), os.environ.get("GX_SIZE")
    if rank is None or rank < 0 or world_size is None or (env_rank is not None and
                                                          env_size is not None):
        # a launcher's job (gx-run sets GX_RANK/GX_SIZE): its rendezvous, even
        # when rank and world_size are given as torch's init_rpc needs them
        if rank is not None and rank >= 0 and env_rank is not None and int(env_rank) != rank:
            raise ValueError(f"gx_torch.rpc: init_rpc(rank={rank}) but GX_RANK is {env_rank}")
        if world_size is not None and env_size is not None and int(env_size) != world_size:
            raise ValueError(f"gx_torch.rpc: init_rpc(world_size={world_size}) but GX_SIZE is "
                             f"{env_size}")
        gx.check(lib, "gx_torch.rpc: gx_comm_init_env", lib.gx_comm_init_env(ctypes.byref(handle)))
    else:
        cfg = gx.GxConfig.init()
        addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
        port = os.environ.get("MASTER_PORT")
        if not port:
            raise ValueError("gx_torch.rpc: init_rpc with rank and world_size needs MASTER_PORT")
        cfg.init_method = f"tcp://{addr}:{port}".encode()
        cfg.rank, cfg.world_size = rank, world_size
        gx.check(lib, "gx_torch.rpc: gx_comm_init",
                 lib.gx_comm_init(ctypes.byref(cfg), ctypes.byref(handle)))
    st.comm = handle
    st.rank = lib.gx_comm_rank(handle)
    n = lib.gx_comm_size(handle)
    mine = name.encode()
    if not mine or len(mine) >= _NAME_LEN:
        raise ValueError(f"gx_torch.rpc: worker name {name!r} must be 1..{_NAME_LEN - 1} bytes")
    send = ctypes.create_string_buffer(mine, _NAME_LEN)
    recv = ctypes.create_string_buffer(_NAME_LEN * n)
    req = ctypes.c_void_p()
    gx.check(lib, "gx_torch.rpc: exchanging names",
             lib.gx_iallgather(handle, send, recv, _NAME_LEN, gx.GX_UINT8, ctypes.byref(req)))
    rc = lib.gx_wait(req, -1)
    lib.gx_request_free(req)
    gx.check(lib, "gx_torch.rpc: exchanging names", rc)
    st.names = [recv.raw[i * _NAME_LEN:(i + 1) * _NAME_LEN].split(b"\0", 1)[0].decode()
                for i in range(n)]
    if len(set(st.names)) != n:
        raise ValueError(f"gx_torch.rpc: worker names are not unique: {st.names}")
    _st = st
    gx.check(lib, "gx_torch.rpc: gx_rpc_register",
             lib.gx_rpc_register(handle, _HANDLER_ID, st.handler, None))
    gx.check(lib, "gx_torch.rpc: barrier", lib.gx_barrier(handle))  # every handler is in


def shutdown(graceful=True, timeout=0):
    """graceful: wait for this worker's calls, then for every worker (a
    barrier: nobody leaves while another may still call it), then finalize.
    Otherwise abort the communicator at once."""
    global _st
    if _st is None or _st.comm is None:
        return
    st = _st
    lib = st.lib
    try:
        if graceful:
            with st.lock:
                futs = [f for f, _ in st.pending.values()]
            for f in futs:
                try:
                    f.wait()
                except Exception:
                    pass
            gx.check(lib, "gx_torch.rpc: shutdown barrier", lib.gx_barrier(st.comm))
            gx.check(lib, "gx_torch.rpc: finalize", lib.gx_comm_finalize(st.comm))
        else:
            lib.gx_comm_abort(st.comm)
    finally:
        lib.gx_comm_destroy(st.comm)
        st.comm = None
        st.owned.clear()
