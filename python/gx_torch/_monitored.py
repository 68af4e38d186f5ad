"""_monitored - ProcessGroup.monitored_barrier for the gx backend, as gloo has it.

Rank 0 receives a token from every other rank, each within what is left of
the timeout, then answers each; a rank that does not arrive in time is
named ("Rank 1 failed to pass monitoredBarrier in 2000 ms", or every late
one with wait_all_ranks=True), and the other ranks, waiting for rank 0's
answer, say they reached the barrier but lost rank 0. The messages are
gloo's, so code and tests that match them work unchanged.

torch's dist.monitored_barrier() itself refuses every backend but gloo (it
checks the name), so only a call on the group object reaches this
(group.monitored_barrier(timeout, wait_all_ranks)).

A receive that timed out stays posted in gx (which has no cancel) and would
take a late rank's token: so a failed monitored barrier aborts the group,
as a desync it reports is fatal to it anyway; the peers' later calls fail
naming this rank.
"""
import ctypes
import datetime
import time

from . import _libgx as gx

TAG = 2**31 - 2  # below _ops.INTERNAL_TAG; user tags stay under both


def _ms(timeout, default_s):
    if isinstance(timeout, datetime.timedelta):
        return max(0, int(timeout.total_seconds() * 1000))
    if timeout is None:
        return int(default_s * 1000)
    return max(0, int(float(timeout) * 1000))


class MonitoredBarrier:
    def __init__(self, lib, comm, rank, size, abort):
        self._lib, self._comm, self.rank, self.size = lib, comm, rank, size
        self._abort = abort  # aborts the group (the stale receive)

    def _post(self, fn, buf, peer):
        req = ctypes.c_void_p()
        rc = getattr(self._lib, fn)(self._comm, ctypes.byref(buf), 1, gx.GX_UINT8, peer, TAG,
                                    ctypes.byref(req))
        if rc != 0:
            raise RuntimeError(f"gx monitored_barrier: {fn} to/from rank {peer}: "
                               f"{gx.last_error_text(self._lib, rc)}")
        return req

    def _wait(self, req, ms):
        """GX_OK, or the failure; the request is freed either way (after an
        abort when it is still posted)."""
        rc = self._lib.gx_wait(req, ms)
        if rc == gx.GX_ETIMEOUT:
            self._abort()
        self._lib.gx_request_free(req)
        return rc

    def run(self, timeout, wait_all_ranks, default_s):
        ms = _ms(timeout, default_s)
        token = ctypes.c_uint8(1)
        if self.rank != 0:
            send = self._post("gx_isend", token, 0)
            ack = ctypes.c_uint8(0)
            recv = self._post("gx_irecv", ack, 0)
            rc_recv = self._wait(recv, ms)
            rc_send = self._wait(send, 0 if rc_recv else ms)
            if rc_recv or rc_send:
                self._abort()
                raise RuntimeError(
                    f"Rank {self.rank} successfully reached monitoredBarrier, but received "
                    f"errors while waiting for send/recv from rank 0. Please check rank 0 logs "
                    f"for faulty rank. ({gx.last_error_text(self._lib, rc_recv or rc_send)})")
            return
        deadline = time.monotonic() + ms / 1000.0
        late = []
        for peer in range(1, self.size):
            left = int((deadline - time.monotonic()) * 1000)
            if left <= 0 and not wait_all_ranks:
                raise RuntimeError(f"Rank 0 timed out in monitoredBarrier after {ms} ms.")
            got = ctypes.c_uint8(0)
            if self._wait(self._post("gx_irecv", got, peer), max(left, 0)) != 0:
                late.append(peer)
                if not wait_all_ranks:
                    self._abort()
                    raise RuntimeError(f"Rank {peer} failed to pass monitoredBarrier in {ms} ms")
        if late:
            self._abort()
            raise RuntimeError(f"Ranks {', '.join(str(r) for r in late)} failed to pass "
                               f"monitoredBarrier in {ms} ms")
        for peer in range(1, self.size):
            rc = self._wait(self._post("gx_isend", token, peer), ms)
            if rc != 0:
                raise RuntimeError(f"gx monitored_barrier: answering rank {peer}: "
                                   f"{gx.last_error_text(self._lib, rc)}")
