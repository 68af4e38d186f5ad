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
"""

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


def dumps(obj):
    tensors = []

    class _Pickler(pickle.Pickler):
        def persistent_id(self, o):
            if not _raw(o):
                return None
            t = o.contiguous()
            tensors.append(t)
            return ("gx_tensor", len(tensors) - 1, str(t.dtype).rsplit(".", 1)[1], tuple(t.shape))

    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    head = buf.getvalue()
    parts = [_HEAD.pack(_MAGIC, len(head), len(tensors)), head]
    for t in tensors:
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        parts += [_LEN.pack(len(raw)), raw]
    return b"".join(parts)


def loads(data):
    view = memoryview(data)
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
        chunks.append(view[at:at + n])
        at += n

    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            kind, i, dtype, shape = pid
            if kind != "gx_tensor" or not 0 <= i < len(chunks):
                raise pickle.UnpicklingError(f"gx_torch.rpc: bad tensor reference {pid!r}")
            dt = getattr(torch, dtype)
            if len(chunks[i]) == 0:
                return torch.empty(shape, dtype=dt)
            flat = torch.frombuffer(bytearray(chunks[i]), dtype=torch.uint8)
            return flat.view(dt).reshape(shape)

    return _Unpickler(io.BytesIO(head)).load()
