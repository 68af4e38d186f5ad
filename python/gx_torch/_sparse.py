"""_sparse - all_reduce of sparse COO tensors (SUM), as ProcessGroupGloo serves it.

The result is the sum of every rank's tensor, coalesced, written into the
caller's tensor (copy_, so its nnz may change). Two exchanges: every rank's
nnz (an all-gather of one int64, waited for in the caller's thread, so all
ranks keep issuing gx operations in program order), then one all-gather of
indices and one of values, each padded to the largest nnz; the completion
thread sums what arrived. The tensors travel through host memory (a CUDA
tensor is copied to the host and the sum back to its device). Other reduce
ops raise ValueError, other layouts TypeError, both naming what was given.
"""
import ctypes

import torch

from . import _libgx as gx


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr())


def _nbytes(t):
    return t.numel() * t.element_size()


def allreduce(issuer, op, tensor, reduce_op):
    """Issue the sparse all-reduce of `tensor` on `op` (an _ops.Op)."""
    op.what = "all_reduce (sparse)"
    code, name = issuer._redop(op, reduce_op)
    if code != gx.GX_SUM:
        raise ValueError(f"gx {op.what}: sparse tensors are reduced with SUM only (as gloo), "
                         f"got {name}")
    if tensor.device.type not in ("cpu", "cuda"):
        raise ValueError(f"gx {op.what}: the tensor is on {tensor.device}; the gx backend takes "
                         "CPU and CUDA tensors")
    local = tensor.detach().coalesce().cpu()
    size = issuer.size
    idx, val = local.indices(), local.values()
    nnz = local._nnz()
    counts = torch.empty(size, dtype=torch.int64)
    mine = torch.tensor([nnz], dtype=torch.int64)
    issuer._blocking(op, "gx_iallgather", _ptr(mine), _ptr(counts), 8, gx.GX_UINT8)
    width = int(counts.max())
    send_idx = torch.zeros((idx.shape[0], width), dtype=idx.dtype)
    send_idx[:, :nnz] = idx
    send_val = torch.zeros((width,) + tuple(val.shape[1:]), dtype=val.dtype)
    send_val[:nnz] = val
    all_idx = torch.empty((size,) + tuple(send_idx.shape), dtype=idx.dtype)
    all_val = torch.empty((size,) + tuple(send_val.shape), dtype=val.dtype)
    op.keep += [send_idx, send_val, all_idx, all_val]
    if width:
        issuer._call(op, "gx_iallgather", _ptr(send_idx), _ptr(all_idx), _nbytes(send_idx),
                     gx.GX_UINT8)
        issuer._call(op, "gx_iallgather", _ptr(send_val), _ptr(all_val), _nbytes(send_val),
                     gx.GX_UINT8)

    def sum_into_tensor():
        n = counts.tolist()
        indices = torch.cat([all_idx[r][:, :n[r]] for r in range(size)], dim=1)
        values = torch.cat([all_val[r][:n[r]] for r in range(size)], dim=0)
        total = torch.sparse_coo_tensor(indices, values, local.shape).coalesce()
        with torch.no_grad():
            tensor.copy_(total.to(tensor.device))

    op.finishers.append(sum_into_tensor)
    op.result = [tensor]
    return op
