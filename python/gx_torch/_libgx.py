"""_libgx - find and load libgx through ctypes, and declare the calls gx_torch uses.

Where libgx comes from, first match wins:
  1. the `path` argument of load_library(), else $GX_LIBRARY (a file path);
  2. next to an installed gx_torch: `cmake --install` writes _gx_install.py
     beside this file with the library directory relative to the package
     (e.g. ../../.. from lib/python3/dist-packages/gx_torch to lib);
  3. "libgx.so.0" on the dynamic loader's search path (ldconfig, LD_LIBRARY_PATH);
  4. lib/ and lib/<multiarch>/ under sys.prefix and /usr/local (where
     `pip install ./python` and `cmake --install` put things by default).
The error lists every place tried.
"""

import ctypes
import os
import sys

# enum gx_datatype / gx_redop / gx_status, as in gx.h
GX_INT8, GX_UINT8, GX_INT32, GX_UINT32, GX_INT64, GX_UINT64 = range(6)
GX_FLOAT16, GX_BFLOAT16, GX_FLOAT32, GX_FLOAT64 = range(6, 10)
GX_SUM, GX_PROD, GX_MIN, GX_MAX, GX_AVG = range(5)
GX_ETIMEOUT = -400
GX_ANY_SOURCE = -1  # peer of a receive from any rank


def is_timeout(status):
    """GX_IS_TIMEOUT: a deadline passed (-400 .. -499)."""
    return -500 < status <= -400

SONAME = "libgx.so.0"

_lib = None
_lib_path = None


class GxError(RuntimeError):
    """A gx call failed; .status is the GX_E* code (negative)."""

    def __init__(self, what, status, detail):
        super().__init__(f"{what}: {detail or 'status %d' % status}")
        self.status = status


class GxConfig(ctypes.Structure):
    """struct gx_config (gx.h); start from GxConfig.init()."""
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("init_method", ctypes.c_char_p),
        ("rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("job_key", ctypes.c_char_p),
        ("init_timeout_ms", ctypes.c_int),
        ("op_timeout_ms", ctypes.c_int),
        ("name", ctypes.c_char_p),
    ]

    @classmethod
    def init(cls):
        return cls(ctypes.sizeof(cls), None, -1, -1, None, 0, 0, None)


def _candidates(path):
    if path:
        return [("argument", path)]
    if os.environ.get("GX_LIBRARY"):
        return [("GX_LIBRARY", os.environ["GX_LIBRARY"])]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    try:
        from . import _gx_install  # written by cmake --install
        out.append(("installed beside gx_torch",
                    os.path.normpath(os.path.join(here, _gx_install.LIBDIR_FROM_PACKAGE, SONAME))))
    except ImportError:
        pass
    out.append(("loader search path", SONAME))
    arch = getattr(sys.implementation, "_multiarch", None)
    for prefix in dict.fromkeys([sys.prefix, "/usr/local"]):
        for sub in ["lib"] + ([os.path.join("lib", arch)] if arch else []):
            out.append(("prefix", os.path.join(prefix, sub, SONAME)))
    return out


def _declare(lib):
    P, I, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    PP = ctypes.POINTER(P)
    coll = [P, P, P, S, I]  # comm, sendbuf, recvbuf, count, dtype
    sigs = {
        "gx_comm_init": (I, [ctypes.POINTER(GxConfig), PP]),
        "gx_comm_init_env": (I, [PP]),
        "gx_comm_rank": (I, [P]),
        "gx_comm_size": (I, [P]),
        "gx_comm_finalize": (I, [P]),
        "gx_comm_destroy": (None, [P]),
        "gx_comm_abort": (None, [P]),
        "gx_comm_get_async_error": (I, [P, ctypes.c_char_p, S]),
        "gx_test": (I, [P, ctypes.POINTER(I)]),
        "gx_wait": (I, [P, I]),
        "gx_request_free": (None, [P]),
        "gx_request_count": (I, [P, ctypes.POINTER(S)]),
        "gx_request_source": (I, [P, ctypes.POINTER(I)]),
        "gx_allreduce": (I, coll + [I]),
        "gx_broadcast": (I, coll + [I]),
        "gx_barrier": (I, [P]),
        "gx_ibarrier": (I, [P, PP]),
        "gx_iallreduce": (I, coll + [I, PP]),
        "gx_ibroadcast": (I, coll + [I, PP]),
        "gx_ireduce": (I, coll + [I, I, PP]),
        "gx_iallgather": (I, coll + [PP]),
        "gx_ireduce_scatter": (I, coll + [I, PP]),
        "gx_igather": (I, coll + [I, PP]),
        "gx_iscatter": (I, coll + [I, PP]),
        "gx_ialltoall": (I, coll + [PP]),
        "gx_isend": (I, [P, P, S, I, I, I, PP]),
        "gx_irecv": (I, [P, P, S, I, I, I, PP]),
        # CUDA tensors: the stream forms (the stream is a cudaStream_t)
        "gx_allreduce_stream": (I, coll + [I, P]),
        "gx_broadcast_stream": (I, coll + [I, P]),
        "gx_reduce_stream": (I, coll + [I, I, P]),
        "gx_allgather_stream": (I, coll + [P]),
        "gx_reduce_scatter_stream": (I, coll + [I, P]),
        "gx_alltoall_stream": (I, coll + [P]),
        "gx_strerror": (ctypes.c_char_p, [I]),
        "gx_last_error": (ctypes.c_char_p, []),
        "gx_version": (ctypes.c_char_p, []),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def load_library(path=None):
    """Load libgx once (see the module's doc for where it is looked for)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    tried = []
    for how, cand in _candidates(path):
        if os.sep in cand and not os.path.exists(cand):
            tried.append(f"{cand} ({how}: no such file)")
            continue
        try:
            lib = ctypes.CDLL(cand)
        except OSError as e:
            tried.append(f"{cand} ({how}: {e})")
            continue
        _declare(lib)
        _lib, _lib_path = lib, cand
        return lib
    raise OSError("gx_torch cannot load libgx; tried: " + "; ".join(tried) +
                  ". Set GX_LIBRARY to the path of libgx.so, or install gx (cmake --install)")


def library_path():
    """Where the loaded libgx came from (None before load_library())."""
    return _lib_path


def last_error_text(lib, status):
    """'GX_EPEER (peer failure): detail' for a failed call on this thread."""
    detail = (lib.gx_last_error() or b"").decode(errors="replace")
    name = (lib.gx_strerror(status) or b"").decode()
    return f"{name}: {detail}" if detail else name


def check(lib, what, status):
    if status != 0:
        raise GxError(what, status, last_error_text(lib, status))
