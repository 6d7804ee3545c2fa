"""unified_attention(): vLLM's paged-attention call on top of libanyattn.

Every argument is checked on the host before anything is launched. Plans are
cached, keyed by backend, device, the problem and limits rounded up to powers
of two, so calls of similar size share one plan. A plan is shared by every
thread; its workspace is not (include/anyattn.h, "Threads"): each thread has
its own on the CPU, each stream its own on a GPU, made at that thread's or
stream's first call. After that a call allocates nothing, never synchronises,
reads no device memory and takes no lock, which is what CUDA graph capture
and serving from several threads need.
"""

import ctypes
import math
import operator
import re
import threading

from . import _lib
from ._arrays import FLOAT_DTYPES, info
from ._lib import (AnyattnError, Backend, Batch, DescaleLayout, DType, KVDType, Limits, Problem,
                   Status, Tensors, check, new_struct)

__all__ = ["unified_attention", "clear_plan_cache", "plan_cache_info", "round_limit"]

_DTYPES = {"float32": DType.F32, "float16": DType.F16, "bfloat16": DType.BF16}
# fp8 caches: torch / ml_dtypes dtypes, and the kv_cache_dtype names (vLLM's
# spelling) that say what a uint8 cache holds. "fp8" is OCP e4m3fn, as on
# NVIDIA; MI300 caches are e4m3fnuz ("fp8_e4m3fnuz", or the torch dtype).
_FP8_DTYPES = {"float8_e4m3fn": KVDType.FP8_E4M3, "float8_e4m3fnuz": KVDType.FP8_E4M3FNUZ}
_KV_CACHE_DTYPES = {"auto": None, "fp8": KVDType.FP8_E4M3, "fp8_e4m3": KVDType.FP8_E4M3,
                    "fp8_e4m3fn": KVDType.FP8_E4M3, "fp8_e4m3fnuz": KVDType.FP8_E4M3FNUZ}
# Keywords of vLLM's Triton unified_attention that configure its own split
# (thresholds and scratch buffers): anyattn chooses its own, so they are ignored.
_VLLM_SCRATCH = ("seq_threshold_3D", "num_par_softmax_segments", "softmax_segm_output",
                 "softmax_segm_max", "softmax_segm_expsum")
# vLLM's KVQuantMode (an IntEnum in vllm.v1.kv_cache_interface): the values
# every version of it agrees on. NONE: the caches hold q's dtype; FP8_PER_TENSOR:
# fp8 codes times k_descale / v_descale. Its other modes (per-token-head int8
# and fp8 scale caches, int4, NVFP4) have numbers that differ between versions
# and are refused by number, named by the enum's own name.
_KV_QUANT_NONE, _KV_QUANT_FP8_PER_TENSOR = 0, 1
_INT_MAX = 2**31 - 1
_MAX_STAGE_KV_TOKENS = 2**29  # the library's bound on limits.stage_kv_tokens (AA_MAX_CONTEXT)


# ---- contexts and plans ------------------------------------------------------
class _Plan:
    """A plan handle, shared by every thread, and the workspaces of its users:
    one per thread on the CPU (threading.local), one per stream on a GPU (runs
    on one stream are ordered, so they may share one). Each is 256-byte
    aligned; the lock is only taken to make one."""

    def __init__(self, handle, workspace_size, describe, backend, device):
        self.handle = handle
        self.workspace_size = workspace_size
        self.describe = describe
        self.backend = backend
        self.device = device
        self.calls = 0                      # counted without a lock: exact from one thread
        self._local = threading.local()     # CPU: .ws = (buffer, aligned address)
        self._by_stream = {}                # GPU: stream handle -> (buffer, aligned address)
        self._lock = threading.Lock()

    def workspace(self, stream=None):
        """The aligned address of the calling thread's (CPU) or `stream`'s (GPU)
        workspace, made on first use; None when the plan needs none."""
        if self.workspace_size == 0:
            return None
        if self.backend == Backend.CPU:
            ws = getattr(self._local, "ws", None)
            if ws is None:
                ws = self._local.ws = self._new_workspace(None)
            return ws[1]
        ws = self._by_stream.get(stream)
        if ws is None:
            with self._lock:
                ws = self._by_stream.get(stream)
                if ws is None:
                    # Allocated while `stream` is current, so torch's caching
                    # allocator orders its reuse after this stream's work; inside
                    # graph capture it comes from the graph's memory pool.
                    ws = self._new_workspace(stream)
                    self._by_stream[stream] = ws
        return ws[1]

    def _new_workspace(self, stream):
        """A workspace made ready for this plan's runs on `stream`
        (anyattn_workspace_prepare: zeroes the split-KV counters and the
        persistent launches' scheduler words, enqueued on the stream, so it
        may be captured)."""
        ws = _alloc_workspace(self.workspace_size, self.backend, self.device)
        check(_lib.lib().anyattn_workspace_prepare(self.handle, ws[1], self.workspace_size, stream),
              "anyattn_workspace_prepare")
        return ws

    def workspaces(self):
        """(buffer, aligned address) of the calling thread (CPU) or of every stream (GPU)."""
        if self.backend == Backend.CPU:
            ws = getattr(self._local, "ws", None)
            return [ws] if ws is not None else []
        with self._lock:
            return list(self._by_stream.values())


_cache_lock = threading.Lock()  # taken on a cache miss only
_contexts = {}     # (backend, device) -> context handle (int)
_plans = {}        # key -> _Plan
_stats = {"hits": 0, "misses": 0}


def round_limit(n):
    """Next power of two >= max(n, 1): the granularity at which plans are shared."""
    n = max(int(n), 1)
    return min(1 << (n - 1).bit_length(), _INT_MAX)


def _context(backend, device):
    key = (int(backend), device)
    ctx = _contexts.get(key)
    if ctx is None:
        handle = ctypes.c_void_p()
        check(_lib.lib().anyattn_context_create(int(backend), device, ctypes.byref(handle)),
              "anyattn_context_create(%s, %d)" % (backend.name.lower(), device))
        ctx = _contexts[key] = handle.value
    return ctx


def _alloc_workspace(size, backend, device):
    """One workspace from the framework that owns the device memory:
    (buffer keeping the memory alive, its first 256-byte aligned address)."""
    if backend == Backend.CPU:
        import numpy as np
        buf = np.empty(size + 256, dtype=np.uint8)
        base = buf.ctypes.data
    else:
        import torch
        buf = torch.empty(size + 256, dtype=torch.uint8, device=torch.device("cuda", device))
        base = buf.data_ptr()
    return buf, base + (-base) % 256


def _get_plan(backend, device, problem_fields, limits_fields, config, names):
    key = (int(backend), device, problem_fields, limits_fields, config)
    plan = _plans.get(key)  # a dict read is atomic: no lock on a hit
    if plan is not None:
        _stats["hits"] += 1  # no lock: exact from one thread, a lower bound from several
        return plan
    with _cache_lock:
        plan = _plans.get(key)
        if plan is not None:  # another thread made it meanwhile
            _stats["hits"] += 1
            return plan
        if backend != Backend.CPU:
            import torch
            if torch.cuda.is_current_stream_capturing():
                raise RuntimeError(
                    "anyattn.unified_attention: the current stream is capturing a CUDA graph and "
                    "no plan exists yet for num_q_heads %d, num_kv_heads %d, head_dim %d, "
                    "block_size %d with up to %d sequences, %d tokens and max_seqlen_k %d (this "
                    "call's sizes rounded up to powers of two); make one call of this shape before "
                    "capture, so the plan exists"
                    % (problem_fields[:3] + (problem_fields[4],) + limits_fields[:3]))
        L = _lib.lib()
        (hq, hkv, d, dtype, bs, causal, wl, wr, scale, softcap, kv_dtype) = problem_fields
        problem = new_struct(Problem, num_q_heads=hq, num_kv_heads=hkv, head_dim=d, dtype=dtype,
                             block_size=bs, causal=causal, window_left=wl, window_right=wr,
                             scale=scale, softcap=softcap,
                             config=config.encode() if config is not None else None,
                             kv_dtype=kv_dtype)
        limits = new_struct(Limits, max_seqs=limits_fields[0], max_tokens=limits_fields[1],
                            max_context=limits_fields[2], stage_kv_tokens=limits_fields[3])
        ctx = _context(backend, device)
        handle = ctypes.c_void_p()
        _check(L.anyattn_plan_create(ctx, ctypes.byref(problem), ctypes.byref(limits),
                                     ctypes.byref(handle)), names)
        size = L.anyattn_plan_workspace_size(handle)
        describe = (L.anyattn_plan_describe(handle) or b"").decode("utf-8", "replace")
        plan = _plans[key] = _Plan(handle.value, size, describe, backend, device)
        _stats["misses"] += 1
        return plan


def clear_plan_cache():
    """Frees every cached plan and the workspaces of every thread and stream.
    Call it while no other thread is in unified_attention; graphs captured
    with these plans must not be replayed afterwards (their workspace is gone)."""
    with _cache_lock:
        L = _lib.lib() if _plans or _contexts else None
        for plan in _plans.values():
            L.anyattn_plan_free(plan.handle)
        _plans.clear()
        for ctx in _contexts.values():
            L.anyattn_context_free(ctx)
        _contexts.clear()
        _stats["hits"] = _stats["misses"] = 0


def plan_cache_info():
    """{"hits", "misses", "plans": [(key, describe, workspace_size, calls), ...]}."""
    with _cache_lock:
        return {"hits": _stats["hits"], "misses": _stats["misses"],
                "plans": [(k, p.describe, p.workspace_size, p.calls) for k, p in _plans.items()]}


# ---- library errors in the caller's terms -----------------------------------------
# The library names its C fields (batch->max_kv_len) and the plan's limits,
# which this binding rounds up to powers of two from the arguments; the user
# set neither. Messages are rewritten to name the arguments of
# unified_attention. Rules apply in order; {max_seqlen_k} and friends are the
# values of the call.
_PY_NAMES = [
    # a bound the plan rounded up: kv_len over it is over max_seqlen_k too
    (r"over the plan's limits\.max_context \d+", "over max_seqlen_k {max_seqlen_k}"),
    (r"(?:the plan's )?limits(?:\.|->)max_context[ =]?(\d+)",
     r"max_seqlen_k (\1 once rounded up for the plan)"),
    (r"(?:the plan's )?limits(?:\.|->)max_tokens[ =]?(\d+)",
     r"num_tokens (\1 once rounded up for the plan)"),
    (r"(?:the plan's )?limits(?:\.|->)max_seqs[ =]?(\d+)",
     r"num_seqs (\1 once rounded up for the plan)"),
    (r"limits(?:\.|->)stage_kv_tokens(?: is)?[ =]?(\d+) \(max_seqs (\d+), max_context (\d+)\)",
     r"stage_kv_tokens (\1 once rounded up for the plan, with num_seqs \2 and max_seqlen_k \3 so rounded)"),
    (r"limits(?:\.|->)stage_kv_tokens(?: is)?[ =]?(\d+)",
     r"stage_kv_tokens (\1 once rounded up for the plan)"),
    (r"batch->num_seqs", "num_seqs (len(cu_seqlens_q) - 1)"),
    (r"batch->num_tokens", "num_tokens (q.shape[0])"),
    (r"batch->max_q_len", "max_seqlen_q"),
    (r"batch->max_kv_len", "max_seqlen_k"),
    (r"batch->sum_kv_len", "sum_seqlen_k"),
    (r"(?:batch->)?block_table_stride", "the row stride of block_table"),
    (r"batch->", ""),
    (r"seq_lens_k", "seqused_k"),
    (r"tensors->q, k_cache, v_cache and out", "q, k, v and out"),
    (r"tensors->k_cache and v_cache", "k and v"),
    (r"tensors->([kv])_stride_\{block,token,head\} are", r"\1's strides (block, token, head) are"),
    (r"tensors->([kv])_stride_(block|token|head)", r"\1's \2 stride"),
    (r"tensors->([kv]) strides", r"\1's strides"),
    (r"tensors->([kv])_cache", r"\1"),
    (r"tensors->num_blocks", "num_blocks (k.shape[0])"),
    (r"tensors->", ""),
    (r"problem->num_q_heads", "num_q_heads (q.shape[1])"),
    (r"problem->num_kv_heads", "num_kv_heads (k.shape[2])"),
    (r"problem->head_dim", "head_dim (q.shape[2])"),
    (r"problem->block_size", "block_size (k.shape[1])"),
    (r"problem->dtype", "the dtype"),
    (r"problem->window_left", "window_size left"),
    (r"problem->window_right", "window_size right"),
    (r"problem->scale", "softmax_scale"),
    (r"problem->kv_dtype", "the caches' fp8 format (kv_cache_dtype)"),
    (r"problem->", ""),
]
_PY_NAMES = [(re.compile(a), b) for a, b in _PY_NAMES]


def python_names(message, **values):
    """`message` from the library with its C fields and plan limits named as
    unified_attention's arguments."""
    for pattern, repl in _PY_NAMES:
        if "{" in repl:
            repl = repl.format(**values)
        message = pattern.sub(repl, message)
    return message


def _check(status, values):
    """check() for calls made on the caller's behalf: AnyattnError in the
    caller's terms, the library's own text kept as .library_message."""
    if status != Status.OK:
        raw = _lib.last_error()
        e = AnyattnError(status, python_names(raw, **values), "unified_attention")
        e.library_message = raw
        raise e


# ---- argument checks ------------------------------------------------------------
def _as_int(name, x, lo=0, hi=_INT_MAX):
    try:
        v = operator.index(x)
    except TypeError:
        raise TypeError("%s: expected an int, got %s" % (name, type(x).__name__)) from None
    if v < lo or v > hi:
        raise ValueError("%s is %d, must be in [%d, %d]" % (name, v, lo, hi))
    return v


def _as_float(name, x, allow_none_as):
    if x is None:
        return allow_none_as
    try:
        return float(x)
    except (TypeError, ValueError):
        raise TypeError("%s: expected a float, got %s" % (name, type(x).__name__)) from None


def _window(window_size):
    if window_size is None:
        return -1, -1
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise ValueError("window_size must be a (left, right) pair, got %r" % (window_size,)) from None
    out = []
    for which, w in (("left", left), ("right", right)):
        try:
            w = operator.index(w)
        except TypeError:
            raise TypeError("window_size %s: expected an int, got %s"
                            % (which, type(w).__name__)) from None
        if w < -1 or w > _INT_MAX:
            raise ValueError("window_size %s is %d, must be -1 (unbounded) or >= 0" % (which, w))
        out.append(w)
    return tuple(out)


def _need(cond, exc, msg, *args):
    if not cond:
        raise exc(msg % args)


def _vector(name, obj, length, dtype, device):
    a = info(name, obj)
    _need(a.dtype == dtype, TypeError, "%s: dtype must be %s, got %s", name, dtype, a.dtype)
    _need(a.shape == (length,), ValueError, "%s: shape must be (%d,), got %s", name, length,
          list(a.shape))
    _need(a.device == device, ValueError, "%s is on %s:%d, q is on %s:%d", name, *a.device, *device)
    _need(a.is_contiguous(), ValueError, "%s must be contiguous, strides %s", name, a.strides)
    return a


def _float_vector(name, obj, length, device):
    """A [length] vector of float32, bfloat16 or float16 (alibi_slopes, sinks),
    passed as it is with its dtype (anyattn_tensors' alibi_slopes_dtype,
    sinks_dtype): vLLM hands gpt-oss's sinks over as the model's bf16
    parameter."""
    a = info(name, obj)
    _need(a.dtype in _DTYPES, TypeError, "%s: dtype must be float32, bfloat16 or float16, got %s",
          name, a.dtype)
    return _vector(name, obj, length, a.dtype, device)


def _kv_dtype(ka, va, qa, kv_cache_dtype):
    """The caches' storage (KVDType) from their dtype and kv_cache_dtype."""
    if kv_cache_dtype is None:
        kv_cache_dtype = "auto"
    _need(isinstance(kv_cache_dtype, str), TypeError, "kv_cache_dtype must be a str, got %s",
          type(kv_cache_dtype).__name__)
    if kv_cache_dtype not in _KV_CACHE_DTYPES:
        raise NotImplementedError(
            "kv_cache_dtype %r is not supported by anyattn (use one of %s)"
            % (kv_cache_dtype, ", ".join(repr(n) for n in _KV_CACHE_DTYPES)))
    named = _KV_CACHE_DTYPES[kv_cache_dtype]
    if ka.dtype in _DTYPES:  # 16-bit or fp32 caches: the dtype of q
        _need(ka.dtype == qa.dtype, TypeError, "k: dtype %s differs from q's %s", ka.dtype,
              qa.dtype)
    _need(va.dtype == ka.dtype, TypeError, "v: dtype %s differs from k's %s", va.dtype, ka.dtype)
    if ka.dtype in _FP8_DTYPES:
        kv = _FP8_DTYPES[ka.dtype]
        _need(named is None or named == kv, ValueError,
              "kv_cache_dtype %r contradicts the caches' dtype %s", kv_cache_dtype, ka.dtype)
    elif ka.dtype == "uint8":
        _need(named is not None, TypeError,
              "k: uint8 caches need kv_cache_dtype='fp8' (e4m3fn) or 'fp8_e4m3fnuz' to say what "
              "their bytes hold")
        kv = named
    elif ka.dtype.startswith("float8") or ka.dtype.startswith("float4"):
        raise NotImplementedError("k: %s caches are not supported by anyattn (fp8 caches: "
                                  "float8_e4m3fn or float8_e4m3fnuz)" % ka.dtype)
    else:
        _need(ka.dtype in _DTYPES, TypeError, "k: dtype %s is not a cache dtype (q's dtype, "
              "float8_e4m3fn, float8_e4m3fnuz, or uint8 with kv_cache_dtype)", ka.dtype)
        _need(named is None, ValueError, "kv_cache_dtype is %r but k holds %s, not fp8 codes",
              kv_cache_dtype, ka.dtype)
        return KVDType.AS_Q
    _need(qa.dtype in ("float16", "bfloat16"), TypeError,
          "q: dtype %s with fp8 caches; fp8 caches need q in float16 or bfloat16", qa.dtype)
    return kv


def _kv_quant_mode(mode):
    """vLLM's kv_quant_mode (its KVQuantMode enum, or the enum's int) -> 0
    (NONE) or 1 (FP8_PER_TENSOR); None (not passed) stays None. Other modes
    raise NotImplementedError naming the mode."""
    if mode is None:
        return None
    if isinstance(mode, bool) or not hasattr(mode, "__index__"):
        raise TypeError("kv_quant_mode: expected vLLM's KVQuantMode (an int enum), got %s"
                        % type(mode).__name__)
    m = operator.index(mode)
    if m in (_KV_QUANT_NONE, _KV_QUANT_FP8_PER_TENSOR):
        return m
    name = getattr(mode, "name", None) or str(m)
    raise NotImplementedError("kv_quant_mode %s is not supported by anyattn: it reads caches of "
                              "q's dtype (NONE) and fp8 caches with per-tensor or per-(sequence, "
                              "kv head) descales (FP8_PER_TENSOR)" % name)


def _descale(name, obj, qa, num_seqs, num_kv_heads):
    """(address, DescaleLayout) of a k or v descale: one element (any shape,
    e.g. vLLM's scalar expanded to [num_seqs, num_kv_heads] with stride 0) is
    per tensor; a contiguous [num_seqs, num_kv_heads] is per (sequence, head).
    Read from device memory by the library during the call: no host sync."""
    a = info(name, obj)
    _need(a.kind == qa.kind, TypeError, "%s is a %s array but q is a %s array", name, a.kind,
          qa.kind)
    _need(a.device == qa.device, ValueError, "%s is on %s:%d, q is on %s:%d", name, *a.device,
          *qa.device)
    _need(a.dtype == "float32", TypeError, "%s: dtype must be float32, got %s", name, a.dtype)
    _need(0 not in a.shape, ValueError, "%s is empty (shape %s)", name, list(a.shape))
    if all(n == 1 or st == 0 for n, st in zip(a.shape, a.strides)):
        return a.ptr, DescaleLayout.PER_TENSOR
    _need(a.shape == (num_seqs, num_kv_heads) and a.is_contiguous(), ValueError,
          "%s: shape %s, strides %s: expected one element (per tensor) or a contiguous "
          "[num_seqs=%d, num_kv_heads=%d] (per sequence and kv head)", name, list(a.shape),
          list(a.strides), num_seqs, num_kv_heads)
    return a.ptr, DescaleLayout.PER_SEQ_HEAD


def _cache_strides(a, head_dim):
    # A dim of size 1 may carry any stride (torch gives 0-size views odd ones);
    # head_dim keeps such a stride positive and row-aligned for the library.
    return tuple(s if n != 1 else head_dim for n, s in zip(a.shape[:3], a.strides[:3]))


def _host_validate(plan, batch_fields, num_blocks, cu, seqused, table, table_width, block_size,
                   names):
    """anyattn_validate on host copies (it also checks max_seqlen_q/k as bounds),
    after the one check only Python can make: the table's real width."""
    import numpy as np
    num_seqs = batch_fields[0]
    if num_seqs > 0:
        pages = (seqused.astype(np.int64) + block_size - 1) // block_size
        q_len = np.diff(cu.astype(np.int64))
        worst = int(np.argmax(np.where(q_len > 0, pages, 0)))
        _need(q_len[worst] <= 0 or pages[worst] <= table_width, ValueError,
              "block_table: sequence %d needs %d pages, block_table has %d columns", worst,
              int(pages[worst]), table_width)
    b = new_struct(Batch, num_seqs=batch_fields[0], num_tokens=batch_fields[1],
                   cu_seqlens_q=cu.ctypes.data, seq_lens_k=seqused.ctypes.data,
                   block_table=table.ctypes.data, block_table_stride=batch_fields[2],
                   max_q_len=batch_fields[3], max_kv_len=batch_fields[4],
                   sum_kv_len=batch_fields[5])
    _check(_lib.lib().anyattn_validate(plan.handle, ctypes.byref(b), num_blocks), names)


# ---- the call ---------------------------------------------------------------------
def unified_attention(q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k, max_seqlen_k,
                      softmax_scale, causal, window_size, block_table, softcap,
                      q_descale=None, k_descale=None, v_descale=None, alibi_slopes=None,
                      output_scale=None, qq_bias=None, sinks=None, lse=None, *,
                      validate=None, config=None, kv_cache_dtype=None, sum_seqlen_k=None,
                      stage_kv_tokens=None, kv_quant_mode=None, use_alibi_sqrt=False,
                      mm_prefix_range=None, k_scale_cache=None, v_scale_cache=None, **kwargs):
    """Paged attention over a ragged batch, vLLM's argument names and shapes.

    q            [num_tokens, num_q_heads, head_dim], contiguous
    k, v         caches, logical [num_blocks, block_size, num_kv_heads, head_dim];
                 any non-overlapping strides (e.g. an HND cache permuted to this
                 shape), head_dim contiguous
    out          like q, written
    cu_seqlens_q int32 [num_seqs + 1];  seqused_k int32 [num_seqs] (kv_len)
    block_table  int32 [>= num_seqs, max_blocks], rows contiguous
    max_seqlen_q >= every q_len (0: unknown), max_seqlen_k >= every seqused_k:
                 bounds that steer the kernel choice (checked by validation);
                 max_seqlen_k also sizes the plan, rounded up to a power of two
    softmax_scale  None: 1/sqrt(head_dim);  softcap 0: none
    window_size  (left, right), -1 = unbounded; right only applies when not causal
    alibi_slopes, sinks  [num_q_heads] of fp32, bf16 or fp16, or None (read as
                 they are, no copy: vLLM passes gpt-oss's bf16 sinks parameter)
    lse          fp32 [num_tokens, num_q_heads] or None, written (natural log)
    validate     check the metadata contents with anyattn_validate first.
                 None: yes on the CPU, no on GPUs (there it copies the metadata
                 to the host and synchronises; never use it inside graph capture)
    config       force a kernel config by name (see the CLI's config list)
    sum_seqlen_k None or 0 (unknown), else >= sum(seqused_k): a host-side bound
                 that tells equal-length batches from mixed ones and steers the
                 kernel choice on GPUs (checked by validation); vLLM does not
                 pass it, engines that keep lengths on the host can
    stage_kv_tokens  None or 0 (off), else 1..2^29: with fp8 caches on a GPU,
                 the plan's limits.stage_kv_tokens (docs/semantics.md, "Staged
                 prefill"): the workspace also holds a 16-bit copy of that
                 many keys of K and V (rounded up to a power of two, plus a
                 page per sequence), and prefill batches that fit are
                 converted into it once and run on the 16-bit prefill kernel
                 (on the H200 0.92-0.97x of a bf16 cache's prefill speed at
                 8k tokens, against 0.43-0.80x converting in the kernel).
                 Memory: 2 x bytes of the q dtype x num_kv_heads x head_dim
                 per key. Size it to the prompt tokens of one step (for a
                 sequence, its whole kv_len); a batch that does not fit
                 converts in the kernel. Ignored with 16-bit caches and on
                 the CPU, which converts in place

    torch CUDA tensors run on torch.cuda.current_stream(); NumPy arrays and
    torch CPU tensors run on the CPU backend and return when done. dtypes:
    float16, bfloat16, float32 (all of q, k, v, out alike), or fp8 caches
    under float16/bfloat16 q and out. Returns out.

    fp8 caches: k, v as torch float8_e4m3fn / float8_e4m3fnuz (NumPy: the
    ml_dtypes dtypes of those names), or uint8 views with kv_cache_dtype=
    "fp8" / "fp8_e4m3" (e4m3fn) or "fp8_e4m3fnuz". k_descale, v_descale:
    float32, one element (per tensor; vLLM's stride-0 expand to [num_seqs,
    num_kv_heads] counts as one) or contiguous [num_seqs, num_kv_heads];
    read by the library during the call (no host sync); None is 1.0. With
    16-bit caches the descales are dropped, as vLLM's kernel ignores them
    there. kv_quant_mode (vLLM's KVQuantMode): None (not passed) takes the
    cache kind from the dtypes; NONE needs caches of q's dtype and
    FP8_PER_TENSOR fp8 caches (else ValueError); its other modes raise
    NotImplementedError. q_descale (fp8 q), output_scale (fp8 out), qq_bias,
    use_alibi_sqrt=True, mm_prefix_range, k_scale_cache / v_scale_cache and any
    other keyword of vLLM's kernels anyattn does not compute raise
    NotImplementedError naming it; vLLM's split thresholds and scratch
    buffers (seq_threshold_3D, softmax_segm_*, ...) are ignored, and an
    unknown keyword passed as None is ignored too.

    Threads and streams: calls from several threads at once are safe. They
    share plans; each thread (CPU) or stream (GPU) gets its own workspace at
    its first call of a shape, so no lock is taken after that.

    CUDA graphs: the first call with a new shape creates a plan, so it must
    happen before capture; the capture stream's workspace may be made during
    capture (from the graph's memory pool). Later calls of the same shape
    (same rounded limits) on the same stream allocate nothing and do not
    synchronise.
    """
    for name, val in kwargs.items():
        if name in _VLLM_SCRATCH or val is None:
            continue
        raise NotImplementedError("%s: anyattn does not support this argument of vLLM's "
                                  "unified_attention (got %s); pass None or leave it out"
                                  % (name, type(val).__name__))
    if q_descale is not None:
        raise NotImplementedError("q_descale: fp8 queries are not supported by anyattn (q stays "
                                  "16-bit; fp8 caches take k_descale and v_descale); pass None")
    if output_scale is not None:
        raise NotImplementedError("output_scale: fp8 outputs are not supported by anyattn; "
                                  "pass None")
    if qq_bias is not None:
        raise NotImplementedError("qq_bias is not supported by anyattn; pass None")
    if use_alibi_sqrt:
        raise NotImplementedError("use_alibi_sqrt: anyattn's ALiBi bias is linear in the distance "
                                  "(slope x distance), not its square root; pass False")
    if mm_prefix_range is not None:
        raise NotImplementedError("mm_prefix_range: bidirectional attention over multimodal "
                                  "prefix ranges is not supported by anyattn; pass None")
    for name, val in (("k_scale_cache", k_scale_cache), ("v_scale_cache", v_scale_cache)):
        if val is not None:
            raise NotImplementedError("%s: per-token-head scale caches are not supported by "
                                      "anyattn (fp8 caches take k_descale and v_descale); pass "
                                      "None" % name)
    quant = _kv_quant_mode(kv_quant_mode)

    # -- tensors: kinds, dtypes, devices, shapes
    qa = info("q", q)
    _need(qa.ndim == 3, ValueError, "q: expected [num_tokens, num_q_heads, head_dim], got shape %s",
          list(qa.shape))
    _need(qa.dtype in _DTYPES, TypeError, "q: dtype %s is not supported (use one of %s)",
          qa.dtype, ", ".join(d for d in FLOAT_DTYPES))
    device = qa.device
    arrays = {"q": qa}
    for name, obj in (("k", k), ("v", v), ("out", out), ("cu_seqlens_q", cu_seqlens_q),
                      ("seqused_k", seqused_k), ("block_table", block_table)):
        arrays[name] = a = info(name, obj)
        _need(a.kind == qa.kind, TypeError, "%s is a %s array but q is a %s array", name, a.kind,
              qa.kind)
        _need(a.device == device, ValueError, "%s is on %s:%d, q is on %s:%d", name, *a.device,
              *device)
    ka, va, oa = arrays["k"], arrays["v"], arrays["out"]
    cua, ska, bta = arrays["cu_seqlens_q"], arrays["seqused_k"], arrays["block_table"]
    _need(oa.dtype == qa.dtype, TypeError, "out: dtype %s differs from q's %s", oa.dtype, qa.dtype)
    kv = _kv_dtype(ka, va, qa, kv_cache_dtype)
    if quant == _KV_QUANT_NONE and kv != KVDType.AS_Q:
        raise ValueError("kv_quant_mode is NONE but k holds fp8 codes (vLLM's kernel would read "
                         "them without k_descale and v_descale); pass FP8_PER_TENSOR")
    if quant == _KV_QUANT_FP8_PER_TENSOR and kv == KVDType.AS_Q:
        raise ValueError("kv_quant_mode is FP8_PER_TENSOR but k holds %s, not fp8 codes (vLLM's "
                         "kernel would scale them by k_descale and v_descale)" % ka.dtype)
    for a in (cua, ska, bta):
        _need(a.dtype == "int32", TypeError, "%s: dtype must be int32, got %s", a.name, a.dtype)

    num_tokens, num_q_heads, head_dim = qa.shape
    _need(qa.is_contiguous(), ValueError, "q must be contiguous, strides %s", qa.strides)
    _need(oa.shape == qa.shape, ValueError, "out: shape %s differs from q's %s", list(oa.shape),
          list(qa.shape))
    _need(oa.is_contiguous(), ValueError, "out must be contiguous, strides %s", oa.strides)
    _need(oa.writable, ValueError, "out is read-only")

    _need(ka.ndim == 4, ValueError,
          "k: expected [num_blocks, block_size, num_kv_heads, head_dim], got shape %s",
          list(ka.shape))
    _need(va.shape == ka.shape, ValueError, "v: shape %s differs from k's %s", list(va.shape),
          list(ka.shape))
    num_blocks, block_size, num_kv_heads, k_head_dim = ka.shape
    _need(k_head_dim == head_dim, ValueError, "k: head_dim %d differs from q's %d", k_head_dim,
          head_dim)
    _need(num_kv_heads > 0 and num_q_heads % num_kv_heads == 0, ValueError,
          "q: num_q_heads %d is not a multiple of k's num_kv_heads %d", num_q_heads, num_kv_heads)
    for a in (ka, va):
        _need(a.strides[3] == 1 or head_dim == 1, ValueError,
              "%s: head_dim must be contiguous (stride 1), strides %s", a.name, a.strides)
        _need(all(s >= 0 for s in a.strides), ValueError, "%s: negative strides %s", a.name,
              a.strides)

    _need(cua.ndim == 1 and cua.shape[0] >= 1, ValueError,
          "cu_seqlens_q: expected [num_seqs + 1], got shape %s", list(cua.shape))
    num_seqs = cua.shape[0] - 1
    _need(cua.is_contiguous(), ValueError, "cu_seqlens_q must be contiguous")
    _need(ska.shape == (num_seqs,), ValueError,
          "seqused_k: shape %s, expected [num_seqs=%d] (len(cu_seqlens_q) - 1)", list(ska.shape),
          num_seqs)
    _need(ska.is_contiguous(), ValueError, "seqused_k must be contiguous")
    _need(bta.ndim == 2 and bta.shape[0] >= num_seqs, ValueError,
          "block_table: expected [num_seqs=%d, max_blocks], got shape %s", num_seqs,
          list(bta.shape))
    _need(num_seqs == 0 or bta.shape[1] > 0, ValueError, "block_table has 0 columns")
    _need(bta.strides[1] == 1 or bta.shape[1] <= 1, ValueError,
          "block_table: rows must be contiguous, strides %s", bta.strides)
    table_stride = bta.strides[0] if bta.shape[0] > 1 else bta.shape[1]
    _need(table_stride >= bta.shape[1] or num_seqs <= 1, ValueError,
          "block_table: row stride %d is smaller than its width %d", table_stride, bta.shape[1])
    table_stride = max(table_stride, bta.shape[1], 1)

    lsea = None
    if lse is not None:
        lsea = info("lse", lse)
        _need(lsea.kind == qa.kind, TypeError, "lse is a %s array but q is a %s array",
              lsea.kind, qa.kind)
        _need(lsea.dtype == "float32", TypeError, "lse: dtype must be float32, got %s", lsea.dtype)
        _need(lsea.shape == (num_tokens, num_q_heads), ValueError,
              "lse: shape must be [num_tokens=%d, num_q_heads=%d], got %s", num_tokens,
              num_q_heads, list(lsea.shape))
        _need(lsea.device == device, ValueError, "lse is on %s:%d, q is on %s:%d", *lsea.device,
              *device)
        _need(lsea.is_contiguous(), ValueError, "lse must be contiguous")
        _need(lsea.writable, ValueError, "lse is read-only")
    slopes = _float_vector("alibi_slopes", alibi_slopes, num_q_heads, device) \
        if alibi_slopes is not None else None
    sinka = _float_vector("sinks", sinks, num_q_heads, device) if sinks is not None else None
    for a in (slopes, sinka):
        if a is not None:
            _need(a.kind == qa.kind, TypeError, "%s is a %s array but q is a %s array", a.name,
                  a.kind, qa.kind)
    kds = vds = None  # (address, layout); dropped for 16-bit caches, as vLLM's kernel does
    if kv != KVDType.AS_Q:
        kds = _descale("k_descale", k_descale, qa, num_seqs, num_kv_heads) \
            if k_descale is not None else None
        vds = _descale("v_descale", v_descale, qa, num_seqs, num_kv_heads) \
            if v_descale is not None else None
        if kds is not None and vds is not None and kds[1] != vds[1]:
            what = {DescaleLayout.PER_TENSOR: "per tensor",
                    DescaleLayout.PER_SEQ_HEAD: "per (sequence, kv head)"}
            raise ValueError("k_descale is %s but v_descale is %s: give both per tensor or both "
                             "per [num_seqs, num_kv_heads]" % (what[kds[1]], what[vds[1]]))
    layout = (kds or vds or (None, DescaleLayout.PER_TENSOR))[1]

    # -- scalars
    max_seqlen_q = _as_int("max_seqlen_q", max_seqlen_q)
    max_seqlen_k = _as_int("max_seqlen_k", max_seqlen_k)
    sum_seqlen_k = 0 if sum_seqlen_k is None else _as_int("sum_seqlen_k", sum_seqlen_k, 0, 2**63 - 1)
    stage_kv_tokens = 0 if stage_kv_tokens is None else _as_int("stage_kv_tokens", stage_kv_tokens, 0,
                                                                _MAX_STAGE_KV_TOKENS)
    scale = _as_float("softmax_scale", softmax_scale, 0.0)
    _need(softmax_scale is None or (math.isfinite(scale) and scale > 0), ValueError,
          "softmax_scale is %r, must be finite and > 0 (or None for 1/sqrt(head_dim))",
          softmax_scale)
    cap = _as_float("softcap", softcap, 0.0)
    _need(math.isfinite(cap) and cap >= 0, ValueError, "softcap is %r, must be 0 (off) or > 0",
          softcap)
    _need(isinstance(causal, (bool, int)) and int(causal) in (0, 1), TypeError,
          "causal must be a bool, got %r", causal)
    wl, wr = _window(window_size)
    for n, name in ((num_tokens, "q: num_tokens"), (num_seqs, "num_seqs"),
                    (num_blocks, "k: num_blocks")):
        _need(n <= _INT_MAX, ValueError, "%s is %d, over the int32 range", name, n)

    if num_tokens == 0:
        return out  # nothing to compute or write; the library would do the same
    _need(max_seqlen_k > 0, ValueError,
          "max_seqlen_k is 0 with %d query tokens; it must bound seqused_k (>= 1)", num_tokens)

    # -- plan
    if device[0] == "cpu":
        backend = Backend.CPU
    else:
        import torch
        backend = Backend.HIP if getattr(torch.version, "hip", None) else Backend.CUDA
    # scale/softcap as float32, as the library will see them, so equal
    # problems share a key.
    f32 = lambda x: ctypes.c_float(x).value  # noqa: E731
    problem_fields = (num_q_heads, num_kv_heads, head_dim, int(_DTYPES[qa.dtype]), block_size,
                      int(causal), wl, wr, f32(scale), f32(cap), int(kv))
    # the stage only serves fp8 caches on GPUs: elsewhere 0, so that the plan is shared
    stage = round_limit(stage_kv_tokens) if stage_kv_tokens > 0 and kv != KVDType.AS_Q and \
        backend != Backend.CPU else 0
    limits_fields = (round_limit(num_seqs), round_limit(num_tokens), round_limit(max_seqlen_k), stage)
    names = {"max_seqlen_k": max_seqlen_k, "max_seqlen_q": max_seqlen_q,
             "sum_seqlen_k": sum_seqlen_k}
    plan = _get_plan(backend, device[1], problem_fields, limits_fields, config, names)

    ks, vs = _cache_strides(ka, head_dim), _cache_strides(va, head_dim)
    batch = Batch(ctypes.sizeof(Batch), num_seqs, num_tokens, cua.ptr, ska.ptr, bta.ptr,
                  table_stride, max_seqlen_q, max_seqlen_k, None, 0, sum_seqlen_k)
    tensors = Tensors(ctypes.sizeof(Tensors), qa.ptr, ka.ptr, va.ptr, num_blocks, ks[0], ks[1],
                      ks[2], vs[0], vs[1], vs[2], slopes.ptr if slopes else None,
                      sinka.ptr if sinka else None, oa.ptr, lsea.ptr if lsea else None,
                      kds[0] if kds else None, vds[0] if vds else None, int(layout),
                      int(_DTYPES[slopes.dtype]) if slopes else int(DType.F32),
                      int(_DTYPES[sinka.dtype]) if sinka else int(DType.F32))

    if validate is None:
        validate = backend == Backend.CPU
    if validate:
        batch_fields = (num_seqs, num_tokens, table_stride, max_seqlen_q, max_seqlen_k,
                        sum_seqlen_k)
        if backend == Backend.CPU:
            import numpy as np
            host = [np.asarray(a.obj) if a.kind == "numpy" else a.obj.numpy()
                    for a in (cua, ska, bta)]
        else:
            import torch
            _need(not torch.cuda.is_current_stream_capturing(), RuntimeError,
                  "validate=True copies metadata to the host and cannot run during graph capture")
            host = [a.obj.cpu().numpy() for a in (cua, ska, bta)]
        _host_validate(plan, batch_fields, num_blocks, host[0], host[1], host[2], bta.shape[1],
                       block_size, names)

    L = _lib.lib()
    if backend == Backend.CPU:
        status = L.anyattn_run(plan.handle, ctypes.byref(batch), ctypes.byref(tensors),
                               plan.workspace(), plan.workspace_size, None)
    else:
        import torch
        dev = device[1]
        # The stream's own workspace: calls on other streams (from this thread
        # or others) never share it; calls on this one are ordered by it.
        stream = torch.cuda.current_stream(dev).cuda_stream
        ws = plan.workspace(stream)
        if torch.cuda.current_device() != dev:
            with torch.cuda.device(dev):
                status = L.anyattn_run(plan.handle, ctypes.byref(batch), ctypes.byref(tensors),
                                       ws, plan.workspace_size, stream)
        else:
            status = L.anyattn_run(plan.handle, ctypes.byref(batch), ctypes.byref(tensors),
                                   ws, plan.workspace_size, stream)
    _check(status, names)
    plan.calls += 1
    return out
