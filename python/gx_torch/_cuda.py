"""_cuda - the few CUDA facts gx_torch needs from torch, in one place.

CUDA tensors take gx's stream forms (gx_allreduce_stream, ...) on the
caller's current stream, as ProcessGroupNCCL orders its work: the exchange
reads the tensors after the work already queued on that stream, and the
result is there for the work queued after it. Everything here goes through
`hooks`, so a unit test can stand in for torch.cuda on a machine without CUDA
(tests/torch/cuda_dispatch_test.py) and check which libgx entry points get
which pointers and streams.
"""

import torch


class TorchCuda:
    """torch.cuda, as gx_torch uses it."""

    def current_stream(self, device):
        """The caller's current stream on `device` (has .cuda_stream, the
        cudaStream_t as an int, and wait_event / synchronize)."""
        return torch.cuda.current_stream(device)

    def record_event(self, stream):
        """An event recorded on `stream` now (has query / synchronize)."""
        ev = torch.cuda.Event()
        ev.record(stream)
        return ev

    def wait_event(self, device, event):
        """Make the current stream on `device` wait for `event` (no host block)."""
        torch.cuda.current_stream(device).wait_event(event)

    def sync_stream(self, stream):
        """Block until `stream` has run what is queued on it."""
        stream.synchronize()

    def synchronize(self, device):
        """Block until the current stream on `device` has run what is queued."""
        torch.cuda.current_stream(device).synchronize()

    def future(self, device):
        """A torch Future that is CUDA-aware for `device`: set_result records
        events on the current streams, and readers' streams wait for them."""
        return torch.futures.Future(devices=[device])


hooks = TorchCuda()


def is_cuda(t):
    return t.device.type == "cuda"
