"""anyattn: Python binding (ctypes) of libanyattn, a paged-attention library.

    from anyattn import unified_attention
    unified_attention(q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k,
                      max_seqlen_k, softmax_scale, causal, window_size,
                      block_table, softcap)

The library is found at $ANYATTN_LIBRARY, else inside this package, else in
the lib folder of the prefix the package is installed in, else in the
repository's build/ directory, else in sys.prefix's lib folder, else on the
system loader path. Calls are safe from several threads (see unified_attention).
"""

import ctypes

from ._lib import (AnyattnError, Backend, Batch, ConfigInfo, DescaleLayout, DType, KVDType, Limits,
                   Problem, Status, Tensors, check, last_error, lib, library_path)
from .attention import clear_plan_cache, plan_cache_info, round_limit, unified_attention

__all__ = [
    "unified_attention", "clear_plan_cache", "plan_cache_info", "round_limit", "AnyattnError",
    "Status", "Backend", "DType", "KVDType", "DescaleLayout", "Problem", "Limits", "Batch",
    "Tensors", "ConfigInfo", "lib", "library_path", "last_error", "check", "version",
    "backend_compiled", "device_count", "device_name", "configs",
]

__version__ = "0.1.0"


def version():
    """Version string of the loaded library, e.g. "0.1.0"."""
    return lib().anyattn_version_string().decode()


def backend_compiled(backend):
    """True when `backend` (a Backend or "cpu"/"cuda"/"hip") is built into the library."""
    return bool(lib().anyattn_backend_compiled(int(_backend(backend))))


def device_count(backend):
    n = ctypes.c_int(0)
    check(lib().anyattn_device_count(int(_backend(backend)), ctypes.byref(n)), "anyattn_device_count")
    return n.value


def device_name(backend, device=0):
    buf = ctypes.create_string_buffer(256)
    check(lib().anyattn_device_name(int(_backend(backend)), device, buf, len(buf)),
          "anyattn_device_name")
    return buf.value.decode("utf-8", "replace")


def configs(backend):
    """The backend's kernel configs as a list of dicts (empty for the CPU)."""
    b = int(_backend(backend))
    out = []
    for i in range(lib().anyattn_config_count(b)):
        ci = ConfigInfo()
        ci.struct_size = ctypes.sizeof(ConfigInfo)
        check(lib().anyattn_config_get(b, i, ctypes.byref(ci)), "anyattn_config_get")
        out.append({"name": ci.name.decode(), "block_m": ci.block_m, "block_n": ci.block_n,
                    "warps": ci.warps, "stages": ci.stages})
    return out


def _backend(b):
    if isinstance(b, str):
        try:
            return Backend[b.upper()]
        except KeyError:
            raise ValueError("backend %r is not one of auto, cpu, cuda, hip" % b) from None
    return Backend(b)
