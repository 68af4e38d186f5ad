"""backend - the torch.distributed backend "gx": a Python ProcessGroup over libgx.

`import gx_torch` registers it; then `dist.init_process_group("gx")` under
torchrun, gx-run, Slurm or mpirun (any init_method torch accepts). Works on
torch 1.13 (Debian's python3-torch) and 2.x through the documented
register_backend(name, creator(store, rank, size, timeout)) hook.

Bootstrap: through torch's store, not gx's environment. Group rank 0 listens
on an ephemeral port (all interfaces), and publishes "host port job-key" under
the group's store prefix; every rank then calls gx_comm_init() with
init_method tcp://host:port, its group rank and size, and that job key. So
MASTER_PORT stays torch's, nothing else needs a fixed port, and every group
(new_group included) gets its own gx communicator. The host published is
rank 0's own address towards GX_MASTER_ADDR / MASTER_ADDR, else its name.

Work: each call issues gx's non-blocking operation (in the caller's thread,
so every rank issues in program order) and returns a GxWork; one completion
thread per group completes operations as gx finishes them, in any order
(ctypes drops the GIL while gx waits), copies staged results out, and
completes the work's
torch.futures.Future, with the result tensors or a RuntimeError that names
the group, the operation and gx's message (e.g. which rank died). A
deadline that passed reads "Timed out after N s, the process group's
timeout" (torch's callers match "Timed out"; the deadline is the group's
timeout= , which gx_torch hands to gx as its op_timeout_ms).

Teardown (the group is destroyed, or the process exits): work still pending
gets TEARDOWN_GRACE_S to finish; a group that failed, or whose work did not
finish, is aborted (its peers learn of it at once); a healthy one is
finalized with its peers, but waits for them no longer than the same grace,
then aborts. So a rank that raises, or whose peers are gone, exits within
seconds, not after the group's timeout (torch's default: 30 minutes). At
exit every group is torn down at once, under one grace.

CUDA tensors: the calls with a gx stream form are queued on the caller's
current stream and need no completion thread; their work is complete for
the host at once, and wait() / synchronize() make the caller's current
stream wait for an event recorded after the call (a no-op when it is the
same stream), as ProcessGroupNCCL's work does. get_future() is CUDA-aware
(its readers' streams wait for it). A failure of a queued exchange becomes
the communicator's async error: wait() and every later call raise it.
"""

import atexit
import collections
import datetime
import ctypes
import functools
import os
import queue
import secrets
import socket
import threading
import time
import weakref

import torch
import torch.distributed as dist

from . import _cuda
from . import _libgx as gx
from ._monitored import MonitoredBarrier
from ._ops import CollectiveIssuer

BACKEND_NAME = "gx"
_BOOT_KEY = "gx_torch/boot"
INIT_FLOOR_MS = 30000


def _unwrap(fut):
    return fut.value()  # re-raises what set_exception() stored


class _Pending:
    """An issued operation, its futures and completion flag.

    torch.futures.Future.set_exception() stores the exception as the value
    and raises only for Python readers; C++ readers (DDP's reducer) would
    take it for a result. So the future handed out is src.then(_unwrap):
    when _unwrap raises, torch marks that future failed for every reader."""

    def __init__(self, op):
        self.op = op
        self.work = None  # the GxWork, held while in flight
        self.src = _cuda.hooks.future(op.device) if op.streamed else torch.futures.Future()
        self.out = self.src.then(_unwrap)
        self.event = threading.Event()
        self.error = None

    def complete(self, error):
        self.error = error  # before the futures: their callbacks may ask is_success()
        if error is None:
            self.src.set_result(self.op.result)
        else:
            self.src.set_exception(error)
        self.op.release()
        self.event.set()
        self.work = None


def _tensors(obj):
    """The tensors in a c10d call's arguments (lists of lists of tensors)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)


def _comm_metadata(pg, args):
    """What torch.profiler shows of a call: its group, this rank's place in
    it, the tensors' bytes and dtype (torch 1.13 has no Python form of the
    profiler's communication metadata, so it goes into the range's args)."""
    ts = list(_tensors(args))
    nbytes = sum(t.numel() * t.element_size() for t in ts)
    dtype = str(ts[0].dtype).replace("torch.", "") if ts else "-"
    return (f"group={pg._group} rank={pg.rank()} size={pg.size()} tensors={len(ts)} "
            f"bytes={nbytes} dtype={dtype}")


def _profiled(method):
    """While torch.profiler (or the autograd profiler) records, a c10d call
    shows as a "gx:<call>" range from its issue until its work completes
    (record_function with its end on the work's future, as torch's own
    process groups do), next to the backward ops that produced its tensors.
    Costs one check of the profiler's state when it is off."""
    name = "gx:" + method.__name__.lstrip("_")

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if not torch.autograd._profiler_enabled():
            return method(self, *args, **kwargs)
        rf = torch.autograd.profiler.record_function(name, _comm_metadata(self, args))
        rf.__enter__()
        try:
            work = method(self, *args, **kwargs)
        except BaseException:
            rf.__exit__(None, None, None)
            raise
        work._end_profile_with(rf)
        return work
    return wrapper


class GxWork(dist._Work):
    """What a gx_torch call returns: wait() raises the operation's error,
    get_future() gives its torch Future (the result tensors, or the error)."""

    def __init__(self, pending, timeout_s):
        super().__init__()
        self._pending = pending
        self._timeout_s = timeout_s

    def _stream_order(self):
        """A streamed CUDA call: order the current stream after it."""
        op = self._pending.op
        _cuda.hooks.wait_event(op.device, op.event)
        buf = ctypes.create_string_buffer(512)
        rc = op._lib.gx_comm_get_async_error(op.comm, buf, len(buf))
        if rc != 0:
            raise op.error(buf.value.decode(errors="replace"), rc)
        return True

    def wait(self, timeout=None):
        if self._pending.op.streamed:
            return self._stream_order()
        secs = self._timeout_s + 5  # gx's own deadline fires first
        source = "the process group's timeout + 5 s"
        if isinstance(timeout, datetime.timedelta) and timeout.total_seconds() > 0:
            secs, source = timeout.total_seconds(), "the timeout given to wait()"
        p = self._pending
        if not p.event.wait(secs):
            raise RuntimeError(f"gx {p.op.what}: Timed out after {secs:g} s ({source}) "
                               "waiting for it to complete")
        if p.error is not None:
            raise p.error
        return True

    def is_completed(self):
        op = self._pending.op
        if op.streamed:
            return bool(op.event.query())
        return self._pending.event.is_set() or self._pending.out.done()

    def is_success(self):
        return self.is_completed() and self._pending.error is None

    def get_future(self):
        return self._pending.out

    def _source_rank(self):
        """The sender's group rank of a completed recv (torch's
        recv(src=None) and irecv(src=None).wait() report it)."""
        self.wait()
        src = self._pending.op.source
        if src is None or src < 0:
            raise RuntimeError(f"gx {self._pending.op.what}: no source rank (not a receive)")
        return src

    def _end_profile_with(self, rf):
        """End the profiler range `rf` when this work completes (its future)."""
        p = self._pending
        p.out = rf._call_end_callbacks_on_future(p.out)

    def result(self):
        self.wait()
        return self._pending.op.result

    def synchronize(self):
        if self._pending.op.streamed:
            self._stream_order()
        # CPU tensors, and CUDA request forms (complete once wait() returns)


class _Completer:
    """One thread per group completes the issued operations as gx finishes
    them, in whatever order: a receive posted early must not hold back the
    completion of a collective issued after it (the program may need that
    collective's result before it sends what the receive waits for).
    It tests every pending request each round (gx_test also drives gx's
    engine) and, while none finishes, backs off: a few rounds that only yield,
    then naps growing to MAX_NAP_S. (Not gx_wait with a short timeout: each
    expiry is logged; not an unbounded gx_wait on the oldest: work issued
    after it could not complete meanwhile.)"""

    YIELD_ROUNDS = 32
    MAX_NAP_S = 0.0005

    def __init__(self, lib, name):
        self._lib = lib
        self._queue = queue.Queue()
        self._abandoned = False
        self._thread = threading.Thread(target=self._run, name=f"gx-torch-{name}", daemon=True)
        self._thread.start()

    def submit(self, work):
        self._queue.put(work)

    def stop(self, deadline):
        """Finish what is pending until `deadline` (time.monotonic()); True
        when nothing was left behind (work still pending then fails and is
        abandoned)."""
        self._stop_deadline = deadline
        self._queue.put(None)
        self._thread.join()
        return not self._abandoned

    def _run(self):
        pending = []
        stopping = None  # when the group started to shut down
        idle = 0
        while stopping is None or pending:
            if stopping is not None and time.monotonic() > self._stop_deadline:
                for w in pending:  # requests stay with the communicator, aborted next
                    w.op.reqs = []
                    w.complete(w.op.error("the process group was destroyed while it was "
                                          "still pending"))
                self._abandoned = True
                return
            try:  # block for new work only when there is nothing to poll
                while True:
                    item = self._queue.get(block=not pending and stopping is None)
                    if item is None:
                        stopping = time.monotonic()
                    else:
                        item.next_req = 0
                        pending.append(item)
                    if self._queue.empty():
                        break
            except queue.Empty:
                pass
            if not pending:
                continue
            finished = [w for w in pending if self._advance(w)]
            for w in finished:
                pending.remove(w)
            if finished or not pending:
                idle = 0
                continue
            idle += 1
            if idle <= self.YIELD_ROUNDS:
                time.sleep(0)  # let Python threads run
            else:
                time.sleep(min(self.MAX_NAP_S, 10e-6 * (idle - self.YIELD_ROUNDS)))

    def _advance(self, work):
        """Test work's requests in order; complete it when all are done."""
        lib, op = self._lib, work.op
        error = None
        done = ctypes.c_int()
        while work.next_req < len(op.reqs):
            req = op.reqs[work.next_req]
            rc = lib.gx_test(req, ctypes.byref(done))
            if not done.value and rc == 0:
                return False
            if rc != 0:
                error = op.error(gx.last_error_text(lib, rc), rc)
                break
            error = op.after_wait(work.next_req, req)
            if error is not None:
                break
            work.next_req += 1
        try:
            for req in op.reqs:
                lib.gx_request_free(req)  # after a failure: waits for the rest
            op.reqs = []
            if error is None:
                op.finish()
        except BaseException as e:  # a bad copy-out must still complete the work
            error = e if isinstance(e, RuntimeError) else RuntimeError(f"gx {op.what}: {e}")
        work.complete(error)
        return True


TEARDOWN_GRACE_S = 5.0  # the longest a teardown waits on work or peers
_ABORT_JOIN_S = 5.0     # gx_comm_abort lets a finalize go at once; a bound all the same


class _Comm:
    """What outlives the ProcessGroup object until teardown: handle and thread."""

    def __init__(self, lib, handle, completer, name):
        self.lib, self.handle, self.completer, self.name = lib, handle, completer, name
        self._lock = threading.Lock()
        _LIVE.add(self)

    def teardown(self, deadline=None):
        """Release the communicator, waiting on work and peers at most until
        `deadline` (time.monotonic(); TEARDOWN_GRACE_S from now)."""
        with self._lock:
            handle, self.handle = self.handle, None
        if not handle:
            return
        _LIVE.discard(self)
        if deadline is None:
            deadline = time.monotonic() + TEARDOWN_GRACE_S
        clean = self.completer.stop(deadline)
        healthy = self.lib.gx_comm_get_async_error(handle, None, 0) == 0
        if clean and healthy:
            if not self._finalize_by(handle, deadline):
                return  # a finalize still runs in C: leave the handle to it
        else:
            self.lib.gx_comm_abort(handle)  # peers learn of it; abandoned requests fail
        self.lib.gx_comm_destroy(handle)

    def _finalize_by(self, handle, deadline):
        """gx_comm_finalize (the peers leave together), aborted when they have
        not all come by `deadline`. False if the finalize never returned."""
        t = threading.Thread(target=self.lib.gx_comm_finalize, args=(handle,),
                             name=f"gx-finalize-{self.name}", daemon=True)
        t.start()
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            self.lib.gx_comm_abort(handle)  # lets the finalize go, tells the peers
            t.join(_ABORT_JOIN_S)
        return not t.is_alive()


_LIVE = weakref.WeakSet()  # communicators not yet torn down


def _teardown_all():
    """At exit: every group at once, under one grace."""
    deadline = time.monotonic() + TEARDOWN_GRACE_S
    threads = [threading.Thread(target=c.teardown, args=(deadline,), daemon=True)
               for c in list(_LIVE)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TEARDOWN_GRACE_S + _ABORT_JOIN_S + 1)


atexit.register(_teardown_all)


def _own_address():
    """The address other ranks reach this host by: the one this host uses
    towards GX_MASTER_ADDR / MASTER_ADDR (group rank 0 of a new_group may sit
    on another host than the job's master), else this host's name, else (a
    name that does not resolve) its address on the default route."""
    target = os.environ.get("GX_MASTER_ADDR") or os.environ.get("MASTER_ADDR")
    if target:
        try:
            fam, _, _, _, addr = socket.getaddrinfo(target, 9, type=socket.SOCK_DGRAM)[0]
            with socket.socket(fam, socket.SOCK_DGRAM) as s:
                s.connect(addr)  # no packet: only picks the route and source address
                return s.getsockname()[0]
        except OSError:
            return target
    name = socket.gethostname()
    try:
        socket.getaddrinfo(name, None)
        return name
    except OSError:
        pass
    # This host's name does not resolve (no /etc/hosts line for it, as in a
    # container or a chroot): its address on the default route, else
    # loopback (then every rank is on this host: init_method file:// or a
    # store on localhost).
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def _listen_ephemeral(host):
    """A listening socket on every interface, family of `host`; (sock, port)."""
    fam = socket.AF_INET
    try:
        fam = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][0]
    except OSError:
        pass
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", 0))
    s.listen(1024)
    return s, s.getsockname()[1]


_env_lock = threading.Lock()


def _gx_init(lib, store, rank, size, timeout_ms, name):
    """gx_comm_init() for this group, rendezvous advertised through `store`."""
    sock = None
    if rank == 0:
        host = _own_address()
        sock, port = _listen_ephemeral(host)
        store.set(_BOOT_KEY, f"{host} {port} {secrets.token_hex(16)}")
    text = store.get(_BOOT_KEY).decode()
    host, port, key = text.rsplit(" ", 2)
    url = f"tcp://[{host}]:{port}" if ":" in host and not host.startswith("[") else \
        f"tcp://{host}:{port}"
    cfg = gx.GxConfig.init()
    cfg.init_method = url.encode()
    cfg.rank, cfg.world_size = rank, size
    cfg.job_key = key.encode()
    # The rendezvous gets at least INIT_FLOOR_MS: a group timeout of a second
    # or two bounds operations, and must not fail connecting on a busy machine.
    cfg.init_timeout_ms = max(timeout_ms, INIT_FLOOR_MS)
    cfg.op_timeout_ms = timeout_ms
    cfg.name = name.encode()
    handle = ctypes.c_void_p()
    # GX_BOOT_LISTEN_FD hands rank 0 its listener (gx-run's own, if inherited,
    # is for gx_comm_init_env and must not be taken here).
    with _env_lock:
        saved = os.environ.pop("GX_BOOT_LISTEN_FD", None)
        if sock is not None:
            os.environ["GX_BOOT_LISTEN_FD"] = str(sock.detach())  # gx closes it
        try:
            rc = lib.gx_comm_init(ctypes.byref(cfg), ctypes.byref(handle))
        finally:
            os.environ.pop("GX_BOOT_LISTEN_FD", None)
            if saved is not None:
                os.environ["GX_BOOT_LISTEN_FD"] = saved
    if rc != 0:
        raise RuntimeError(f"gx backend: rank {rank} of {size} could not join group '{name}' "
                           f"at {url}: {gx.last_error_text(lib, rc)}")
    return handle


class ProcessGroupGx(dist.ProcessGroup):
    """torch.distributed process group whose collectives run over gx (CPU and CUDA tensors)."""

    RECENT_WORKS = 64

    def __init__(self, store, rank, size, timeout, group_name="default"):
        super().__init__(rank, size)
        self._lib = gx.load_library()
        ms = int(timeout.total_seconds() * 1000) if timeout else 0
        ms = max(1000, min(ms, 7 * 86400 * 1000)) if ms > 0 else 1800 * 1000
        self._timeout_s = ms / 1000.0
        self._recent = collections.deque(maxlen=self.RECENT_WORKS)
        self._group = f"torch:{group_name}"
        handle = _gx_init(self._lib, store, rank, size, ms, self._group)
        completer = _Completer(self._lib, group_name)
        self._comm = _Comm(self._lib, handle, completer, self._group)
        self._issue = CollectiveIssuer(self._lib, handle, rank, size, self._group,
                                       self._timeout_s)
        # destroyed with the group; at exit, _teardown_all takes every group at once
        weakref.finalize(self, self._comm.teardown).atexit = False

    # -- plumbing -------------------------------------------------------------
    def _launch(self, op):
        if op.streamed:
            return self._launch_streamed(op)
        pending = _Pending(op)
        work = GxWork(pending, self._timeout_s)
        # A Python Work lives as long as Python holds it, not as long as C++
        # does: C++ callers (_broadcast_coalesced, DDP) that call wait() or
        # get_future() on theirs would find only the C++ base class. So the
        # work is held until it completes, and the last RECENT_WORKS after
        # that (bounded: their results may be large tensors).
        pending.work = work
        self._recent.append(work)
        self._comm.completer.submit(pending)
        return work

    def _launch_streamed(self, op):
        """A call queued on a CUDA stream: done for the host now."""
        op.finish()  # copies into non-contiguous outputs, queued after it
        op.event = _cuda.hooks.record_event(op.stream)
        pending = _Pending(op)
        work = GxWork(pending, self._timeout_s)
        self._recent.append(work)  # keeps its tensors until RECENT_WORKS later calls
        pending.complete(None)
        return work

    def getBackendName(self):
        return BACKEND_NAME

    def name(self):
        return BACKEND_NAME

    def _get_backend_name(self):
        return BACKEND_NAME

    def shutdown(self):
        """Finalize and release the gx communicator now (collective)."""
        self._comm.teardown()

    # -- collectives (signatures as torch.distributed calls them) -------------
    @_profiled
    def allreduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        return self._launch(self._issue.allreduce(tensors, op))

    @_profiled
    def allreduce_coalesced(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        return self._launch(self._issue.allreduce(tensors, op, coalesced=True))

    @_profiled
    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        return self._launch(self._issue.broadcast(tensors, root))

    @_profiled
    def reduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        return self._launch(self._issue.reduce(tensors, op, opts.rootRank if opts else 0))

    @_profiled
    def allgather(self, output_lists, input_tensors, opts=None):
        return self._launch(self._issue.allgather(output_lists, input_tensors))

    @_profiled
    def _allgather_base(self, output, input, opts=None):
        return self._launch(self._issue.allgather_base(output, input))

    @_profiled
    def allgather_coalesced(self, output_lists, input_list, opts=None):
        return self._launch(self._issue.allgather_coalesced(output_lists, input_list))

    @_profiled
    def reduce_scatter(self, outputs, input_lists, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        return self._launch(self._issue.reduce_scatter(outputs, input_lists, op))

    @_profiled
    def _reduce_scatter_base(self, output, input, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        return self._launch(self._issue.reduce_scatter_base(output, input, op))

    @_profiled
    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        return self._launch(self._issue.alltoall_base(output, input, output_split_sizes,
                                                      input_split_sizes))

    @_profiled
    def alltoall(self, outputs, inputs, opts=None):
        return self._launch(self._issue.alltoall(outputs, inputs))

    @_profiled
    def gather(self, output_lists, input_tensors, opts=None):
        return self._launch(self._issue.gather(output_lists, input_tensors,
                                               opts.rootRank if opts else 0))

    @_profiled
    def scatter(self, outputs, input_lists, opts=None):
        return self._launch(self._issue.scatter(outputs, input_lists,
                                                opts.rootRank if opts else 0))

    @_profiled
    def barrier(self, opts=None):
        return self._launch(self._issue.barrier())

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """gloo's monitored barrier (gx_torch._monitored): names the ranks that
        did not arrive within `timeout` (default: the group's timeout)."""
        handle = self._comm.handle
        if not handle:
            raise RuntimeError(f"gx monitored_barrier: group '{self._group}' was destroyed")
        mb = MonitoredBarrier(self._lib, handle, self.rank(), self.size(),
                              lambda: self._lib.gx_comm_abort(handle))
        mb.run(timeout, wait_all_ranks, self._timeout_s)

    @_profiled
    def send(self, tensors, dst, tag=0):
        return self._launch(self._issue.send(tensors, dst, tag))

    @_profiled
    def recv(self, tensors, src, tag=0):
        return self._launch(self._issue.recv(tensors, src, tag))

    def recv_anysource(self, tensors, tag=0):
        """recv(src=None): the next message with `tag` from any rank of the
        group (gx's GX_ANY_SOURCE); the work's _source_rank() names it."""
        return self._launch(self._issue.recv(tensors, gx.GX_ANY_SOURCE, tag))


# Launchers, innermost first, as gx_comm_init_env() reads them (comm_env.c):
# under mpirun inside a Slurm allocation, Open MPI's rank wins.
_LAUNCHERS = [("gx-run", "GX_RANK", "GX_SIZE"), ("torchrun", "RANK", "WORLD_SIZE"),
              ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
              ("MPICH", "PMI_RANK", "PMI_SIZE"), ("Slurm", "SLURM_PROCID", "SLURM_NTASKS")]


def launcher_rank_size():
    """(rank, world_size, launcher) from the launcher that started this process,
    for init_process_group() under mpirun or srun, which set no RANK/WORLD_SIZE."""
    for name, rank_var, size_var in _LAUNCHERS:
        if os.environ.get(rank_var):
            if not os.environ.get(size_var):
                raise RuntimeError(f"{rank_var} is set but {size_var} is not")
            return int(os.environ[rank_var]), int(os.environ[size_var]), name
    raise RuntimeError("no launcher variables (GX_RANK, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, "
                       "SLURM_PROCID): start under gx-run, torchrun, mpirun or srun")


def _create(store, rank, size, timeout):
    return ProcessGroupGx(store, rank, size, timeout)


def register():
    """Register "gx" with torch.distributed (idempotent; done by import gx_torch)."""
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    dist.Backend.register_backend(BACKEND_NAME, _create)


__all__ = ["ProcessGroupGx", "GxWork", "register", "launcher_rank_size"]
