"""Loading libanyattn through ctypes, and ctypes mirrors of include/anyattn.h.

The structs below must match the C header field for field; the tests compare
their sizes and default values with what the library's *_init functions write.
Every C call that returns a status goes through `check()`, which raises
AnyattnError carrying anyattn_last_error().
"""

import ctypes
import enum
import os
import sys
import threading

__all__ = [
    "AnyattnError", "Status", "Backend", "DType", "Problem", "Limits", "Batch", "Tensors",
    "ConfigInfo", "lib", "library_path", "check",
]


class Status(enum.IntEnum):
    OK = 0
    NULL_POINTER = 1
    INVALID_SIZE = 2
    HEAD_RATIO = 3
    UNSUPPORTED_DTYPE = 4
    UNSUPPORTED_HEAD_DIM = 5
    UNSUPPORTED_BLOCK_SIZE = 6
    BAD_STRIDE = 7
    INVALID_OPTION = 8
    WORKSPACE_TOO_SMALL = 9
    LIMIT_EXCEEDED = 10
    BAD_METADATA = 11
    BACKEND_UNAVAILABLE = 12
    NO_DEVICE = 13
    DEVICE_ERROR = 14
    OUT_OF_MEMORY = 15
    STRUCT_SIZE = 16
    WRONG_CONTEXT = 17
    UNSUPPORTED_CONFIG = 18
    COMM_ERROR = 19
    UNSUPPORTED_OPTION = 20


class Backend(enum.IntEnum):
    AUTO = 0
    CPU = 1
    CUDA = 2
    HIP = 3


class DType(enum.IntEnum):
    F32 = 0
    F16 = 1
    BF16 = 2


class KVDType(enum.IntEnum):
    AS_Q = 0
    FP8_E4M3 = 1
    FP8_E4M3FNUZ = 2


class DescaleLayout(enum.IntEnum):
    PER_TENSOR = 0
    PER_SEQ_HEAD = 1


class AnyattnError(RuntimeError):
    """A non-OK status from libanyattn. `.status` is a Status (or the raw int
    for a code this binding does not know), `.message` the library's text."""

    def __init__(self, status, message, function=""):
        try:
            status = Status(status)
            name = "ANYATTN_STATUS_" + status.name
        except ValueError:
            name = "status %d" % status
        self.status = status
        self.message = message
        self.function = function
        where = (function + ": ") if function else ""
        text = message or "(no message)"
        if not text.startswith(name):  # the library's messages open with the name
            text = "%s: %s" % (name, text)
        super().__init__(where + text)


# ---- struct mirrors (include/anyattn.h) -----------------------------------
# Enums are C ints on every ABI this library targets.
class Problem(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("num_q_heads", ctypes.c_int),
        ("num_kv_heads", ctypes.c_int),
        ("head_dim", ctypes.c_int),
        ("dtype", ctypes.c_int),
        ("block_size", ctypes.c_int),
        ("causal", ctypes.c_int),
        ("window_left", ctypes.c_int),
        ("window_right", ctypes.c_int),
        ("scale", ctypes.c_float),
        ("softcap", ctypes.c_float),
        ("config", ctypes.c_char_p),
        ("kv_dtype", ctypes.c_int),
    ]


class Limits(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("max_seqs", ctypes.c_int),
        ("max_tokens", ctypes.c_int),
        ("max_context", ctypes.c_int),
        ("stage_kv_tokens", ctypes.c_int),
    ]


class Batch(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("num_seqs", ctypes.c_int),
        ("num_tokens", ctypes.c_int),
        ("cu_seqlens_q", ctypes.c_void_p),
        ("seq_lens_k", ctypes.c_void_p),
        ("block_table", ctypes.c_void_p),
        ("block_table_stride", ctypes.c_int),
        ("max_q_len", ctypes.c_int),
        ("max_kv_len", ctypes.c_int),
        ("q_pos", ctypes.c_void_p),  # NULL: queries are the last q_len keys
        ("prior_writes", ctypes.c_int),  # anyattn_prior_writes; 0: the work before may write anything
        ("sum_kv_len", ctypes.c_int64),  # bound of sum(seq_lens_k); 0: unknown
    ]


class Tensors(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("q", ctypes.c_void_p),
        ("k_cache", ctypes.c_void_p),
        ("v_cache", ctypes.c_void_p),
        ("num_blocks", ctypes.c_int64),
        ("k_stride_block", ctypes.c_int64),
        ("k_stride_token", ctypes.c_int64),
        ("k_stride_head", ctypes.c_int64),
        ("v_stride_block", ctypes.c_int64),
        ("v_stride_token", ctypes.c_int64),
        ("v_stride_head", ctypes.c_int64),
        ("alibi_slopes", ctypes.c_void_p),
        ("sinks", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("k_descale", ctypes.c_void_p),
        ("v_descale", ctypes.c_void_p),
        ("descale_layout", ctypes.c_int),
        ("alibi_slopes_dtype", ctypes.c_int),
        ("sinks_dtype", ctypes.c_int),
    ]


class ConfigInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("name", ctypes.c_char * 32),
        ("block_m", ctypes.c_int),
        ("block_n", ctypes.c_int),
        ("warps", ctypes.c_int),
        ("stages", ctypes.c_int),
    ]


def new_struct(cls, **fields):
    """A zeroed struct with struct_size set, as the C *_init functions do."""
    s = cls()
    s.struct_size = ctypes.sizeof(cls)
    for k, v in fields.items():
        setattr(s, k, v)
    return s


# ---- loading ---------------------------------------------------------------
_LIB_NAMES = ("libanyattn.so", "libanyattn.dylib", "anyattn.dll")


def _prefix_libdirs(here):
    """lib folders of the prefix this package is installed in: a package at
    P/lib/pythonX.Y/site-packages/anyattn (pip into a virtual environment, or
    `pip install --prefix P`) looks in P/lib and P/lib64, where `cmake
    --install build --prefix P` puts libanyattn. None outside site-packages."""
    site = os.path.dirname(here)
    if os.path.basename(site) not in ("site-packages", "dist-packages"):
        return []
    libdir = os.path.dirname(os.path.dirname(site))  # P/lib from P/lib/pythonX.Y/site-packages
    return [libdir, os.path.join(os.path.dirname(libdir), "lib64")]


def _candidates():
    """Search order: $ANYATTN_LIBRARY; a library shipped inside the package;
    the lib folder of the prefix the package is installed in; the repository
    build (../../build relative to this package); the lib folder of the
    running Python's prefix (sys.prefix); then the system loader path."""
    env = os.environ.get("ANYATTN_LIBRARY")
    if env:
        # An explicit choice is never silently replaced by another library.
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    repo_build = os.path.normpath(os.path.join(here, "..", "..", "build"))
    dirs = [here] + _prefix_libdirs(here) + [repo_build, os.path.join(sys.prefix, "lib"),
                                             os.path.join(sys.prefix, "lib64")]
    paths = []
    for d in dirs:
        for n in _LIB_NAMES:
            p = os.path.join(d, n)
            if p not in paths and os.path.exists(p):
                paths.append(p)
    return paths + list(_LIB_NAMES), False


def _declare(lib):
    c_int, c_uint, c_size_t, c_char_p, c_void_p = (ctypes.c_int, ctypes.c_uint, ctypes.c_size_t,
                                                   ctypes.c_char_p, ctypes.c_void_p)
    P = ctypes.POINTER
    sigs = {
        "anyattn_version_number": (c_uint, []),
        "anyattn_version_string": (c_char_p, []),
        "anyattn_status_name": (c_char_p, [c_int]),
        "anyattn_last_error": (c_char_p, []),
        "anyattn_backend_name": (c_char_p, [c_int]),
        "anyattn_backend_from_name": (c_int, [c_char_p, P(c_int)]),
        "anyattn_backend_compiled": (c_int, [c_int]),
        "anyattn_device_count": (c_int, [c_int, P(c_int)]),
        "anyattn_device_name": (c_int, [c_int, c_int, c_char_p, c_size_t]),
        "anyattn_context_create": (c_int, [c_int, c_int, P(c_void_p)]),
        "anyattn_context_free": (None, [c_void_p]),
        "anyattn_context_backend": (c_int, [c_void_p]),
        "anyattn_dtype_size": (c_size_t, [c_int]),
        "anyattn_problem_init": (None, [c_void_p]),
        "anyattn_limits_init": (None, [c_void_p]),
        "anyattn_batch_init": (None, [c_void_p]),
        "anyattn_tensors_init": (None, [c_void_p]),
        "anyattn_plan_create": (c_int, [c_void_p, P(Problem), P(Limits), P(c_void_p)]),
        "anyattn_plan_free": (None, [c_void_p]),
        "anyattn_plan_workspace_size": (c_size_t, [c_void_p]),
        "anyattn_workspace_prepare": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p]),
        "anyattn_plan_describe": (c_char_p, [c_void_p]),
        "anyattn_run": (c_int, [c_void_p, P(Batch), P(Tensors), c_void_p, c_size_t, c_void_p]),
        "anyattn_validate": (c_int, [c_void_p, P(Batch), ctypes.c_int64]),
        "anyattn_config_count": (c_int, [c_int]),
        "anyattn_config_get": (c_int, [c_int, c_int, P(ConfigInfo)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


_lock = threading.Lock()
_lib = None
_lib_path = None


def lib():
    """The loaded library (loaded on first use, so importing anyattn never fails)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        paths, explicit = _candidates()
        errors = []
        for p in paths:
            try:
                handle = ctypes.CDLL(p)
            except OSError as e:
                errors.append("%s: %s" % (p, e))
                continue
            _declare(handle)
            _lib, _lib_path = handle, p
            return _lib
        hint = ("$ANYATTN_LIBRARY is set but could not be loaded" if explicit else
                "set ANYATTN_LIBRARY to the path of libanyattn.so, copy it into the anyattn "
                "package directory, install it into this environment's prefix (cmake --install "
                "build --prefix %s), or build the repository into build/" % sys.prefix)
        raise OSError("anyattn: cannot load libanyattn (%s). Tried:\n  %s"
                      % (hint, "\n  ".join(errors)))


def library_path():
    """Path (or loader name) of the library in use."""
    lib()
    return _lib_path


def last_error():
    msg = lib().anyattn_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def check(status, function=""):
    """Raises AnyattnError for a non-OK status, with the thread's last error."""
    if status != Status.OK:
        raise AnyattnError(status, last_error(), function)
