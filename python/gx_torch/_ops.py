"""_ops - turn each torch.distributed call into gx non-blocking operations.

An Op holds the gx requests of one call, the tensors that must stay alive
until they complete (staging copies for non-contiguous tensors), and the
copy-out steps to run once they did. Data that gx only moves (broadcast,
gather, all-to-all, send/recv) travels as bytes, so every torch dtype works;
reductions map the dtype to gx's (complex as pairs of reals for sum/avg, bool
as uint8 for min/max) and fail with a TypeError naming what gx lacks.
Sparse COO tensors: all_reduce with SUM, as gloo (_sparse.py); any other call
given a non-strided tensor is a TypeError naming the layout.

List-of-lists arguments keep torch's layouts (ProcessGroup's C++ API):
allgather/gather outputs[0][r] and scatter/reduce_scatter inputs[0][r] are
rank r's tensor; allgather_coalesced's output_lists[r][i] is rank r's
input i.

CUDA tensors (all tensors of one call on one device): all_reduce, broadcast,
reduce, all_gather(+_into_tensor), reduce_scatter(+_tensor) and the even
all_to_all_single take gx's stream forms on the caller's current stream
(gx_allreduce_stream, ...; nothing blocks, the stream orders everything, as
ProcessGroupNCCL); the other calls (gather, scatter, uneven all-to-all,
send/recv) synchronize the current stream once and pass the device pointers
to gx's request forms, which stage them through pinned host memory.
"""

import ctypes

import torch
import torch.distributed as dist

from . import _cuda
from . import _libgx as gx
from . import _sparse

# Tags gx_torch's own point-to-point messages use: INTERNAL_TAG (uneven
# all-to-all) and the one below (monitored_barrier); user send/recv tags
# must be below both.
INTERNAL_TAG = 2**31 - 1
USER_TAG_LIMIT = 2**31 - 2


def _reduce_ops():
    R = dist.ReduceOp
    pairs = [(R.SUM, gx.GX_SUM, "sum"), (R.PRODUCT, gx.GX_PROD, "product"),
             (R.MIN, gx.GX_MIN, "min"), (R.MAX, gx.GX_MAX, "max")]
    if hasattr(R, "AVG"):
        pairs.append((R.AVG, gx.GX_AVG, "avg"))
    return pairs


def _reduce_dtypes():
    t = torch
    m = {t.float32: gx.GX_FLOAT32, t.float64: gx.GX_FLOAT64, t.float16: gx.GX_FLOAT16,
         t.bfloat16: gx.GX_BFLOAT16, t.int32: gx.GX_INT32, t.int64: gx.GX_INT64,
         t.int8: gx.GX_INT8, t.uint8: gx.GX_UINT8, t.bool: gx.GX_UINT8}
    for name, code in (("uint32", gx.GX_UINT32), ("uint64", gx.GX_UINT64)):
        if hasattr(t, name):
            m[getattr(t, name)] = code
    return m


def _nbytes(t):
    return t.numel() * t.element_size()


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None else None


class Op:
    """One torch.distributed call in flight over gx."""

    def __init__(self, what, group, rank, size, timeout_s=0.0):
        self.what = what
        self._where = f"group '{group}' (rank {rank} of {size})"
        self.timeout_s = timeout_s  # the group's, gx's op_timeout_ms
        self.source = None    # recv: the sender's group rank, once it arrived
        self.finishers = []   # run after the copies (sparse all_reduce's sum)
        self.reqs = []
        self.keep = []
        self.copies = []      # (dst, src) copied after completion
        self.checks = {}      # request index -> (expected elements, description)
        self.result = []
        self._lib = None
        self.comm = None
        self.device = None    # the CUDA device of this call's tensors, None: CPU
        self.stream = None    # the stream its stream-form calls were queued on
        self.streamed = False  # issued on self.stream (no gx requests)
        self.synced = False   # the current stream was synchronized for a request form
        self.cpu_seen = False
        self.event = None     # recorded on self.stream after the call (backend)

    def error(self, text, status=None):
        """The RuntimeError for a failure; a timeout says so as torch's callers
        match it ("Timed out") and names the deadline's source."""
        if status is not None and gx.is_timeout(status):
            text = (f"Timed out after {self.timeout_s:g} s, the process group's timeout "
                    f"(timeout= of init_process_group / new_group): {text}")
        return RuntimeError(f"gx {self.what} on {self._where} failed: {text}")

    def after_wait(self, index, req):
        if index not in self.checks:
            return None
        if self.source == gx.GX_ANY_SOURCE:
            src = ctypes.c_int(-1)
            if self._lib.gx_request_source(req, ctypes.byref(src)) != 0:
                return self.error(f"gx_request_source: {gx.last_error_text(self._lib, -1)}")
            self.source = src.value
        expect, desc = self.checks[index]
        desc = desc.replace("any rank", f"rank {self.source}")
        got = ctypes.c_size_t()
        if self._lib.gx_request_count(req, ctypes.byref(got)) == 0 and got.value != expect:
            return self.error(f"{desc}: received {got.value} bytes, expected {expect}")
        return None

    def finish(self):
        for dst, src in self.copies:
            dst.copy_(src)  # a streamed call: queued on the same stream, after it
        for fn in self.finishers:
            fn()
        if self.device is not None and self.copies and not self.streamed:
            _cuda.hooks.synchronize(self.device)  # the copies ran on this thread's stream

    def release(self):
        if not self.streamed:  # a streamed call's stream may still read them
            self.keep = []
        self.copies = []


class CollectiveIssuer:
    """Issues gx operations for a group's communicator; one method per c10d call."""

    def __init__(self, lib, comm, rank, size, group, timeout_s=0.0):
        self._lib, self._comm = lib, comm
        self.rank, self.size, self._group = rank, size, group
        self.timeout_s = timeout_s
        self._ops = _reduce_ops()
        self._dtypes = _reduce_dtypes()
        # Streams with stream-form calls queued since the last request form:
        # gx runs a stream-form call when its stream reaches it, so a request
        # form issued before that could overtake it on this rank (and meet
        # the peers' stream-form call): wait for those streams first.
        self._streams = {}

    # -- helpers ----------------------------------------------------------------
    def _op(self, what):
        op = Op(what, self._group, self.rank, self.size, self.timeout_s)
        op._lib = self._lib
        op.comm = self._comm
        return op

    def _coll(self, op, name, *args):
        """gx_<name>_stream on the current stream for CUDA tensors, else
        gx_i<name> (a request the completion thread finishes)."""
        if op.device is None:
            return self._call(op, "gx_i" + name, *args)
        if op.stream is None:
            op.stream = _cuda.hooks.current_stream(op.device)
        fn = f"gx_{name}_stream"
        rc = getattr(self._lib, fn)(self._comm, *args, ctypes.c_void_p(op.stream.cuda_stream))
        if rc != 0:
            raise op.error(f"{fn}: {gx.last_error_text(self._lib, rc)}", rc)
        op.streamed = True
        self._streams[op.stream.cuda_stream] = op.stream

    def _drain_streams(self):
        for stream in self._streams.values():
            _cuda.hooks.sync_stream(stream)
        self._streams = {}

    def _call(self, op, fn, *args):
        if self._streams:
            self._drain_streams()
        if op.device is not None and not op.synced:
            # gx's request forms copy device memory when they start: the
            # work queued on the current stream must have produced it
            _cuda.hooks.synchronize(op.device)
            op.synced = True
        req = ctypes.c_void_p()
        rc = getattr(self._lib, fn)(self._comm, *args, ctypes.byref(req))
        if rc != 0:
            # Requests already issued by this call still complete in the
            # completion thread; this one never started.
            for r in op.reqs:
                self._lib.gx_wait(r, -1)
                self._lib.gx_request_free(r)
            op.reqs = []
            raise op.error(gx.last_error_text(self._lib, rc), rc)
        op.reqs.append(req)

    def _blocking(self, op, fn, *args):
        """A request form waited for here, in the caller's thread (gx's
        deadline, the group's timeout, bounds it)."""
        self._call(op, fn, *args)
        req = op.reqs.pop()
        rc = self._lib.gx_wait(req, -1)
        text = gx.last_error_text(self._lib, rc) if rc != 0 else ""
        self._lib.gx_request_free(req)
        if rc != 0:
            raise op.error(text, rc)

    def _check(self, op, t, arg):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"gx {op.what}: {arg} must be a tensor, got {type(t).__name__}")
        if t.layout != torch.strided:
            raise TypeError(f"gx {op.what}: {arg} has layout {t.layout}; gx takes dense "
                            "(torch.strided) tensors, and sparse COO ones in all_reduce with "
                            "SUM")
        dev = t.device
        if dev.type not in ("cpu", "cuda"):
            raise ValueError(f"gx {op.what}: {arg} is on {dev}; the gx backend takes CPU and "
                             "CUDA tensors")
        if dev.type == "cuda":
            if op.device is None and not op.cpu_seen:
                op.device = dev
            elif op.device != dev:
                where = op.device if op.device is not None else "cpu"
                raise ValueError(f"gx {op.what}: {arg} is on {dev}, an earlier tensor of the "
                                 f"call on {where}; all tensors of one call must be on one "
                                 "device")
        else:
            if op.device is not None:
                raise ValueError(f"gx {op.what}: {arg} is on the CPU, an earlier tensor of the "
                                 f"call on {op.device}; all tensors of one call must be on one "
                                 "device")
            op.cpu_seen = True
        return t

    def _input(self, op, t, arg):
        """A contiguous tensor with t's values (t itself when it is contiguous)."""
        self._check(op, t, arg)
        c = t if t.is_contiguous() else t.contiguous()
        op.keep.append(c)
        return c

    def _output(self, op, t, arg):
        """A contiguous tensor gx may write; copied back into t if it is a copy."""
        self._check(op, t, arg)
        if t.is_contiguous():
            op.keep.append(t)
            return t
        c = t.contiguous()
        op.keep.append(c)
        op.copies.append((t, c))
        return c

    def _one(self, op, tensors, arg="tensors"):
        if len(tensors) != 1:
            raise ValueError(f"gx {op.what}: {arg} must hold exactly one tensor per process "
                             f"(got {len(tensors)})")
        return tensors[0]

    def _redop(self, op, reduce_op):
        for torch_op, code, name in self._ops:
            if reduce_op == torch_op:
                return code, name
        raise ValueError(f"gx {op.what}: reduce op {reduce_op} is not supported by gx "
                         "(sum, product, min, max, avg are)")

    def _reduce_view(self, op, c, reduce_op):
        """(view of contiguous c that gx reduces, gx dtype, gx op)."""
        code, name = self._redop(op, reduce_op)
        if c.is_complex():
            if code not in (gx.GX_SUM, gx.GX_AVG):
                raise TypeError(f"gx {op.what}: {name} of {c.dtype} is not defined (sum and avg "
                                "are)")
            c = torch.view_as_real(c)
        if c.dtype == torch.bool and code not in (gx.GX_MIN, gx.GX_MAX):
            raise TypeError(f"gx {op.what}: {name} of torch.bool is not supported (min and "
                            "max are: logical and / or)")
        if c.dtype not in self._dtypes:
            raise TypeError(f"gx {op.what}: gx has no datatype for {c.dtype} (reductions take "
                            + ", ".join(str(d) for d in self._dtypes) + ")")
        return c, self._dtypes[c.dtype], code

    def _same_numel(self, op, tensors, n, arg):
        for i, t in enumerate(tensors):
            if t.numel() != n or t.dtype != tensors[0].dtype:
                raise ValueError(f"gx {op.what}: {arg}[{i}] has {t.numel()} elements of "
                                 f"{t.dtype}; every tensor must have {n} of {tensors[0].dtype}")

    # -- collectives --------------------------------------------------------------
    def allreduce(self, tensors, reduce_op, coalesced=False):
        op = self._op("all_reduce_coalesced" if coalesced else "all_reduce")
        if not coalesced:
            t = self._one(op, tensors)
            if isinstance(t, torch.Tensor) and t.layout == torch.sparse_coo:
                return _sparse.allreduce(self, op, t, reduce_op)
        for i, t in enumerate(tensors):
            c, dtype, code = self._reduce_view(op, self._output(op, t, f"tensors[{i}]"),
                                               reduce_op)
            self._coll(op, "allreduce", _ptr(c), _ptr(c), c.numel(), dtype, code)
        op.result = list(tensors)
        return op

    def broadcast(self, tensors, root):
        op = self._op("broadcast")
        t = self._one(op, tensors)
        c = self._output(op, t, "tensor")
        self._coll(op, "broadcast", _ptr(c), _ptr(c), _nbytes(c), gx.GX_UINT8, root)
        op.result = [t]
        return op

    def reduce(self, tensors, reduce_op, root):
        op = self._op("reduce")
        t = self._one(op, tensors)
        c, dtype, code = self._reduce_view(op, self._output(op, t, "tensor"), reduce_op)
        self._coll(op, "reduce", _ptr(c), _ptr(c), c.numel(), dtype, code, root)
        op.result = [t]
        return op

    def allgather(self, output_lists, input_tensors):
        """output_lists[0][r] = rank r's input_tensors[0]."""
        op = self._op("all_gather")
        t = self._input(op, self._one(op, input_tensors, "input_tensors"), "input")
        outs = self._one(op, output_lists, "output_tensor_lists")
        self._allgather_into(op, t, outs, lambda r: f"output_tensor_list[{r}]")
        op.result = list(outs)
        return op

    def _allgather_into(self, op, t, outs, name):
        """All-gather contiguous t; rank r's copy lands in outs[r], which
        name(r) names in errors."""
        if len(outs) != self.size:
            raise ValueError(f"gx {op.what}: {name('r').replace('[r]', '')} has {len(outs)} "
                             f"tensors for {self.size} ranks")
        for r, o in enumerate(outs):
            self._check(op, o, name(r))
            if o.numel() != t.numel() or o.dtype != t.dtype:
                raise ValueError(f"gx {op.what}: {name(r)} has {o.numel()} elements of "
                                 f"{o.dtype}; it receives rank {r}'s {t.numel()} of {t.dtype}")
        stage = t.new_empty((self.size,) + tuple(t.shape))  # on t's device
        op.keep.append(stage)
        self._coll(op, "allgather", _ptr(t), _ptr(stage), _nbytes(t), gx.GX_UINT8)
        op.copies += [(o, stage[r].reshape(o.shape)) for r, o in enumerate(outs)]

    def allgather_coalesced(self, output_lists, input_list):
        """output_lists[r][i] = rank r's input_list[i] (torch's layout: one
        list per rank, each as long as input_list); one all-gather per input."""
        op = self._op("all_gather_coalesced")
        if len(output_lists) != self.size:
            raise ValueError(f"gx {op.what}: output_tensor_lists has {len(output_lists)} lists "
                             f"for {self.size} ranks (output_tensor_lists[r][i] receives rank "
                             "r's input_tensor_list[i])")
        for r, lst in enumerate(output_lists):
            if len(lst) != len(input_list):
                raise ValueError(f"gx {op.what}: output_tensor_lists[{r}] has {len(lst)} tensors "
                                 f"for {len(input_list)} inputs")
        for i, t in enumerate(input_list):
            c = self._input(op, t, f"input_tensor_list[{i}]")
            self._allgather_into(op, c, [lst[i] for lst in output_lists],
                                 lambda r, i=i: f"output_tensor_lists[{r}][{i}]")
        op.result = [o for lst in output_lists for o in lst]
        return op

    def allgather_base(self, output, input):
        op = self._op("all_gather_into_tensor")
        t = self._input(op, input, "input")
        if output.numel() != self.size * t.numel() or output.dtype != t.dtype:
            raise ValueError(f"gx {op.what}: output has {output.numel()} elements of "
                             f"{output.dtype}; it must hold {self.size} x {t.numel()} of {t.dtype}")
        out = self._output(op, output, "output")
        self._coll(op, "allgather", _ptr(t), _ptr(out), _nbytes(t), gx.GX_UINT8)
        op.result = [output]
        return op

    def reduce_scatter(self, outputs, input_lists, reduce_op):
        op = self._op("reduce_scatter")
        out = self._one(op, outputs, "output")
        ins = self._one(op, input_lists, "input_lists")
        if len(ins) != self.size:
            raise ValueError(f"gx {op.what}: the input list has {len(ins)} tensors for "
                             f"{self.size} ranks")
        self._same_numel(op, [out] + list(ins), out.numel(), "inputs")
        for i, x in enumerate(ins):
            self._check(op, x, f"input_list[{i}]")
        send = torch.cat([x.reshape(-1) for x in ins])
        return self._reduce_scatter(op, out, send, reduce_op)

    def reduce_scatter_base(self, output, input, reduce_op):
        op = self._op("reduce_scatter_tensor")
        self._check(op, input, "input")
        if input.numel() != self.size * output.numel() or output.dtype != input.dtype:
            raise ValueError(f"gx {op.what}: input has {input.numel()} elements of "
                             f"{input.dtype}; it must hold {self.size} x {output.numel()} of "
                             f"{output.dtype}")
        return self._reduce_scatter(op, output, input.contiguous(), reduce_op)

    def _reduce_scatter(self, op, out, send, reduce_op):
        op.keep.append(send)
        rs, dtype, code = self._reduce_view(op, send, reduce_op)
        rc, _, _ = self._reduce_view(op, self._output(op, out, "output"), reduce_op)
        self._coll(op, "reduce_scatter", _ptr(rs), _ptr(rc), rc.numel(), dtype, code)
        op.result = [out]
        return op

    def gather(self, output_lists, input_tensors, root):
        op = self._op("gather")
        t = self._input(op, self._one(op, input_tensors, "input_tensors"), "input")
        stage = None
        if self.rank == root:
            outs = self._one(op, output_lists, "output_tensor_lists")
            if len(outs) != self.size:
                raise ValueError(f"gx gather: the root's gather_list has {len(outs)} tensors "
                                 f"for {self.size} ranks")
            for i, o in enumerate(outs):
                self._check(op, o, f"gather_list[{i}]")
            self._same_numel(op, [t] + list(outs), t.numel(), "gather_list")
            stage = torch.empty((self.size,) + tuple(t.shape), dtype=t.dtype)
            op.keep.append(stage)
            op.copies += [(o, stage[i].reshape(o.shape)) for i, o in enumerate(outs)]
            op.result = list(outs)
        self._call(op, "gx_igather", _ptr(t), _ptr(stage), _nbytes(t), gx.GX_UINT8, root)
        return op

    def scatter(self, outputs, input_lists, root):
        op = self._op("scatter")
        out = self._output(op, self._one(op, outputs, "output"), "output")
        send = None
        if self.rank == root:
            ins = self._one(op, input_lists, "scatter_list")
            if len(ins) != self.size:
                raise ValueError(f"gx scatter: the root's scatter_list has {len(ins)} tensors "
                                 f"for {self.size} ranks")
            self._same_numel(op, [out] + list(ins), out.numel(), "scatter_list")
            send = torch.cat([self._check(op, x, "scatter_list").reshape(-1) for x in ins])
            op.keep.append(send)
        self._call(op, "gx_iscatter", _ptr(send), _ptr(out), _nbytes(out), gx.GX_UINT8, root)
        op.result = [outputs[0]]
        return op

    def alltoall_base(self, output, input, out_splits, in_splits):
        op = self._op("all_to_all_single")
        src = self._input(op, input, "input")
        dst = self._output(op, output, "output")
        op.result = [output]
        if not out_splits and not in_splits:
            if src.numel() % self.size or dst.numel() != src.numel():
                raise ValueError(f"gx {op.what}: input has {src.numel()} elements, output "
                                 f"{dst.numel()}; both must be equal and divisible by "
                                 f"{self.size} without split sizes")
            self._coll(op, "alltoall", _ptr(src), _ptr(dst), _nbytes(src) // self.size,
                       gx.GX_UINT8)
            return op
        # Uneven splits along dim 0: one message per peer on gx_torch's tag.
        src_rows = self._splits(op, src, in_splits, "input_split_sizes")
        dst_rows = self._splits(op, dst, out_splits, "output_split_sizes")
        self._exchange(op, [src[a:b] for a, b in src_rows], [dst[a:b] for a, b in dst_rows])
        return op

    def alltoall(self, outputs, inputs):
        op = self._op("all_to_all")
        if len(outputs) != self.size or len(inputs) != self.size:
            raise ValueError(f"gx {op.what}: {len(inputs)} input and {len(outputs)} output "
                             f"tensors for {self.size} ranks")
        ins = [self._input(op, t, f"input_tensor_list[{i}]") for i, t in enumerate(inputs)]
        outs = [self._output(op, t, f"output_tensor_list[{i}]") for i, t in enumerate(outputs)]
        self._exchange(op, ins, outs)
        op.result = list(outputs)
        return op

    def _splits(self, op, t, splits, arg):
        rows = t.shape[0] if t.dim() else 1
        if not splits:
            if rows % self.size:
                raise ValueError(f"gx {op.what}: {rows} rows do not split evenly over "
                                 f"{self.size} ranks; give {arg}")
            splits = [rows // self.size] * self.size
        if len(splits) != self.size or sum(splits) != rows:
            raise ValueError(f"gx {op.what}: {arg}={list(splits)} must have {self.size} entries "
                             f"summing to {rows}")
        out, at = [], 0
        for s in splits:
            out.append((at, at + s))
            at += s
        return out

    def _exchange(self, op, sends, recvs):
        for p, r in enumerate(recvs):
            op.checks[len(op.reqs)] = (_nbytes(r), f"message from rank {p}")
            self._call(op, "gx_irecv", _ptr(r), _nbytes(r), gx.GX_UINT8, p, INTERNAL_TAG)
        for p, s in enumerate(sends):
            self._call(op, "gx_isend", _ptr(s), _nbytes(s), gx.GX_UINT8, p, INTERNAL_TAG)

    def barrier(self):
        op = self._op("barrier")
        if self._streams:
            self._drain_streams()
        req = ctypes.c_void_p()
        rc = self._lib.gx_ibarrier(self._comm, ctypes.byref(req))
        if rc != 0:
            raise op.error(gx.last_error_text(self._lib, rc), rc)
        op.reqs.append(req)
        return op

    def _tag(self, op, tag):
        if not 0 <= tag < USER_TAG_LIMIT:
            raise ValueError(f"gx {op.what}: tag {tag} is out of range 0..{USER_TAG_LIMIT - 1}")
        return tag

    def send(self, tensors, dst, tag):
        op = self._op("send")
        t = self._input(op, self._one(op, tensors), "tensor")
        self._call(op, "gx_isend", _ptr(t), _nbytes(t), gx.GX_UINT8, dst, self._tag(op, tag))
        op.result = list(tensors)
        return op

    def recv(self, tensors, src, tag):
        """src is a group rank, or GX_ANY_SOURCE (recv_anysource): op.source
        names the sender once the message arrived."""
        op = self._op("recv")
        t = self._output(op, self._one(op, tensors), "tensor")
        op.source = src
        op.checks[0] = (_nbytes(t), "message from " + ("any rank" if src == gx.GX_ANY_SOURCE
                                                        else f"rank {src}"))
        self._call(op, "gx_irecv", _ptr(t), _nbytes(t), gx.GX_UINT8, src, self._tag(op, tag))
        op.result = list(tensors)
        return op
