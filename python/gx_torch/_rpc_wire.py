"""_rpc_wire - gx_torch.rpc's message format: a pickle in which every plain
CPU tensor is only a reference, then the tensors' raw bytes.

    "GXR1" | u64 pickle length | u32 tensor count | pickle |
    per tensor: u64 byte count | its bytes (C order)

A tensor travels raw when it is a plain torch.Tensor on the CPU with a
strided layout and no autograd history to keep (requires_grad False); a
non-contiguous one is made contiguous first. Any other object, tensor
subclasses and tensors that require grad included, is pickled as usual.
Each tensor arrives as a tensor of its own (views of one storage do not
share it at the target, as with torch.distributed.rpc).

One copy of a tensor's bytes per side: pack() writes the message straight
into one buffer that gx sends from (its address and size), and unpack()
reads a message where gx left it (a handler's arguments, a call's result)
and copies each tensor out once, into a tensor of its own.
"""

import ctypes
import io
import pickle
import struct

import torch

_MAGIC = b"GXR1"
_HEAD = struct.Struct("<4sQI")
_LEN = struct.Struct("<Q")


def _raw(o):
    return (type(o) is torch.Tensor and o.device.type == "cpu" and o.layout == torch.strided
            and not o.requires_grad)


class Message:
    """A packed message: `buf` (a bytearray) holds it; `address` and
    `nbytes` are what gx is given. Keep it alive until gx is done with it."""

    __slots__ = ("buf", "address", "nbytes", "_c")

    def __init__(self, buf):
        self.buf = buf
        self.nbytes = len(buf)
        self._c = (ctypes.c_char * self.nbytes).from_buffer(buf)
        self.address = ctypes.addressof(self._c)

    def __len__(self):
        return self.nbytes

    def tobytes(self):
        return bytes(self.buf)


class _Pickler(pickle.Pickler):
    """Pickles a plain CPU tensor as a reference; collects the tensors."""

    def __init__(self, f):
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self.tensors = []

    def persistent_id(self, o):
        if not _raw(o):
            return None
        t = o.contiguous()
        self.tensors.append(t)
        return ("gx_tensor", len(self.tensors) - 1, str(t.dtype).rsplit(".", 1)[1],
                tuple(t.shape))


class _Unpickler(pickle.Unpickler):
    """Turns the references back into tensors, each copied out once."""

    def __init__(self, f, chunks, copy_out):
        super().__init__(f)
        self.chunks, self.copy_out = chunks, copy_out

    def persistent_load(self, pid):
        kind, i, dtype, shape = pid
        if kind != "gx_tensor" or not 0 <= i < len(self.chunks):
            raise pickle.UnpicklingError(f"gx_torch.rpc: bad tensor reference {pid!r}")
        dt = getattr(torch, dtype)
        if len(self.chunks[i]) == 0:
            return torch.empty(shape, dtype=dt)
        return self.copy_out(self.chunks[i]).view(dt).reshape(shape)


def pack(obj):
    """obj as one Message: pickle and tensors written into its buffer."""
    head = io.BytesIO()
    p = _Pickler(head)
    p.dump(obj)
    tensors = p.tensors
    head = head.getbuffer()
    sizes = [t.numel() * t.element_size() for t in tensors]
    total = _HEAD.size + len(head) + sum(_LEN.size + n for n in sizes)
    buf = bytearray(total)
    _HEAD.pack_into(buf, 0, _MAGIC, len(head), len(tensors))
    at = _HEAD.size
    buf[at:at + len(head)] = head
    at += len(head)
    whole = torch.frombuffer(buf, dtype=torch.uint8) if tensors else None
    for t, n in zip(tensors, sizes):
        _LEN.pack_into(buf, at, n)
        at += _LEN.size
        if n:  # the one copy on this side
            whole[at:at + n].copy_(t.reshape(-1).view(torch.uint8))
        at += n
    return Message(buf)


def dumps(obj):
    """pack(obj) as bytes (for tests and tools; the calls use pack)."""
    return pack(obj).tobytes()


def unpack(address, nbytes):
    """The object of the message at `address` (nbytes long, memory gx owns
    and may reuse once this returns): every tensor copied out once."""
    if nbytes < _HEAD.size:
        raise ValueError(f"gx_torch.rpc: a message of {nbytes} bytes is too short")
    view = memoryview((ctypes.c_char * nbytes).from_address(address)).cast("B")
    return _unpack_view(view, lambda v: torch.frombuffer(v, dtype=torch.uint8).clone())


def loads(data):
    """The object of a message in bytes-like `data`."""
    view = memoryview(data).cast("B")
    return _unpack_view(view, lambda v: torch.frombuffer(bytearray(v), dtype=torch.uint8))


def _unpack_view(view, copy_out):
    magic, hlen, count = _HEAD.unpack_from(view, 0)
    if magic != _MAGIC:
        raise ValueError(f"gx_torch.rpc: not a gx_torch.rpc message (starts {bytes(view[:4])!r})")
    at = _HEAD.size
    head = view[at:at + hlen]
    at += hlen
    chunks = []
    for _ in range(count):
        (n,) = _LEN.unpack_from(view, at)
        at += _LEN.size
        if at + n > len(view):
            raise ValueError(f"gx_torch.rpc: a tensor of {n} bytes overruns the message")
        chunks.append(view[at:at + n])
        at += n
    return _Unpickler(io.BytesIO(head), chunks, copy_out).load()
