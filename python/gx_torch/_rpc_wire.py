"""_rpc_wire - gx_torch.rpc's message format: a pickle in which every plain
CPU tensor is only a reference, then the tensors' raw bytes.

    "GXR2" | u64 pickle length | u32 tensor count | pickle |
    per tensor: u64 byte count | zeros to the next multiple of 64 bytes
                from the message's start | its bytes (C order)

A tensor travels raw when it is a plain torch.Tensor on the CPU with a
strided layout and no autograd history to keep (requires_grad False); a
non-contiguous one is made contiguous first. Any other object, tensor
subclasses and tensors that require grad included, is pickled as usual.
Each tensor arrives as a tensor of its own (views of one storage do not
share it at the target, as with torch.distributed.rpc).

One copy of a tensor's bytes per side: pack() writes the message straight
into one buffer that gx sends from (its address and size; a handler's
answer into gx's own reply buffer, gx_rpc_reply_buffer), and unpack()
reads a message where gx left it and copies each tensor out once, into a
tensor of its own (a handler's arguments, which gx reuses when it
returns), or none at all: unpack_owned() takes a call's result, memory gx
gave the caller, and its tensors are views of it, which is freed when the
last of them is gone.
"""

import ctypes
import io
import pickle
import struct
import weakref

import torch

_MAGIC = b"GXR2"
_ALIGN = 64
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


def pack(obj, alloc=None):
    """obj as one Message: pickle and tensors written into its buffer. With
    alloc(nbytes) -> address, into that memory instead (gx's reply buffer);
    returns None then. Nothing is allocated before the pickle succeeded."""
    head = io.BytesIO()
    p = _Pickler(head)
    p.dump(obj)
    tensors = p.tensors
    head = head.getbuffer()
    sizes = [t.numel() * t.element_size() for t in tensors]
    at = _HEAD.size + len(head)
    starts = []
    for n in sizes:
        at = _aligned(at + _LEN.size)
        starts.append(at)
        at += n
    if alloc is None:
        buf = bytearray(at)
        out = Message(buf)
    else:
        buf = memoryview((ctypes.c_char * at).from_address(alloc(at))).cast("B")
        out = None
    _HEAD.pack_into(buf, 0, _MAGIC, len(head), len(tensors))
    buf[_HEAD.size:_HEAD.size + len(head)] = head
    whole = torch.frombuffer(buf, dtype=torch.uint8) if tensors else None
    for t, n, start in zip(tensors, sizes, starts):
        _LEN.pack_into(buf, start - _LEN.size, n)
        if n:  # the one copy on this side
            whole[start:start + n].copy_(t.reshape(-1).view(torch.uint8))
    return out


def _aligned(at):
    return (at + _ALIGN - 1) // _ALIGN * _ALIGN


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


def unpack_owned(address, nbytes, free):
    """The object of a message in memory now the caller's (a call's result):
    its tensors are views of that memory, not copies; free(address) runs
    once none of them (and nothing else here) refers to it."""
    if nbytes < _HEAD.size:
        free(address)
        raise ValueError(f"gx_torch.rpc: a message of {nbytes} bytes is too short")
    block = (ctypes.c_char * nbytes).from_address(address)
    weakref.finalize(block, free, address)
    return _unpack_view(memoryview(block).cast("B"),
                        lambda v: torch.frombuffer(v, dtype=torch.uint8))


def _unpack_view(view, copy_out):
    magic, hlen, count = _HEAD.unpack_from(view, 0)
    if magic != _MAGIC:
        raise ValueError(f"gx_torch.rpc: not a gx_torch.rpc message (starts {bytes(view[:4])!r})")
    at = _HEAD.size
    head = view[at:at + hlen]
    at += hlen
    chunks = []
    for _ in range(count):
        at = _aligned(at + _LEN.size)
        if at > len(view):
            raise ValueError("gx_torch.rpc: a tensor's length lies past the message")
        (n,) = _LEN.unpack_from(view, at - _LEN.size)
        if at + n > len(view):
            raise ValueError(f"gx_torch.rpc: a tensor of {n} bytes overruns the message")
        chunks.append(view[at:at + n])
        at += n
    return _Unpickler(io.BytesIO(head), chunks, copy_out).load()
