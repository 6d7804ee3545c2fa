"""The contenders beside `anyattn bench`: torch SDPA on dense copies of each batch (this file), the
paged kernels of FlashInfer, vLLM and FlashAttention (peers_paged.py), and anyattn through its
Python binding (for --cases shapes, which `anyattn bench` does not take). Each is a Peer: probe()
says why it cannot run here (one line in the report), runner() turns a case's inputs into a call.

A file given with --peers-from adds peers of one's own: it defines PEERS, a list of Peer objects
(import Peer, Runner and Unsupported from anyattn.report.peer).
"""

import contextlib
import importlib.util

from .inputs import rows_of
from .peer import Peer, Runner, Unsupported, dense_groups, dense_kv, dense_q, group_reader, probe_torch


# ---- torch SDPA -----------------------------------------------------------------------------------
SDPA_BACKENDS = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION",
                 "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}
# The math backend holds the whole score matrix: groups over this many scores are not run.
MATH_SCORES_GPU, MATH_SCORES_CPU = 1 << 31, 1 << 27


class TorchSdpa(Peer):
    """F.scaled_dot_product_attention on dense copies of each group of equal (q_len, kv_len)
    sequences, one call per group; GQA natively (enable_gqa) or with K/V repeated to the q heads;
    causal masks aligned to the last key (bottom right), as paged attention means them."""

    def __init__(self, backend):
        self.backend = backend
        self.name = "sdpa-" + backend
        self.gpu_only = backend != "cpu"
        self.label = "torch SDPA (%s)" % ("CPU" if backend == "cpu" else backend)

    def probe(self, gpu):
        if self.backend == "cpu" and gpu:
            return "the CPU SDPA is measured on CPU runs"
        if self.backend != "cpu" and not gpu:
            return "needs a GPU (this run is on the CPU)"
        why = probe_torch(gpu)
        if why:
            return why
        import torch
        self.version = torch.__version__
        if self.backend != "cpu":
            try:
                from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401
            except ImportError:
                return "torch %s has no torch.nn.attention.sdpa_kernel" % torch.__version__
            if not hasattr(SDPBackend, SDPA_BACKENDS[self.backend]):
                return "torch %s has no SDPBackend.%s" % (torch.__version__, SDPA_BACKENDS[self.backend])
        return ""

    def runner(self, inp):
        groups = dense_groups(inp.case)
        self._check_math(inp, groups)
        calls, notes = [], set()
        for q_len, kv_len, seqs in groups:
            fn, note = self._group_call(inp, q_len, kv_len, seqs)
            calls.append(fn)
            notes.add(note)
        outs = [None] * len(calls)

        def run():
            for g, fn in enumerate(calls):
                outs[g] = fn()
        note = "%d dense call%s, GQA by %s" % (len(calls), "s" if len(calls) > 1 else "", "/".join(sorted(notes)))
        return Runner(run, group_reader(inp, groups, outs, "bhqd"), note, context=self.kernel_context, keep=(calls,))

    def kernel_context(self):
        """torch.nn.attention.sdpa_kernel(this backend); nothing on the CPU (torch's own dispatch)."""
        if self.backend == "cpu":
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[self.backend]))

    def _check_math(self, inp, groups):
        if self.backend not in ("math", "cpu"):
            return
        limit = MATH_SCORES_CPU if self.backend == "cpu" else MATH_SCORES_GPU
        worst = max(len(s) * inp.shape.hq * q * k for q, k, s in groups)
        if worst > limit:
            raise Unsupported("a %.1f G-entry score matrix" % (worst / 1e9))

    def _group_call(self, inp, q_len, kv_len, seqs):
        """A closure running one group, tried once: (fn, "enable_gqa" or "repeat_interleave")."""
        q = dense_q(inp, seqs, q_len)
        k = dense_kv(inp, inp.k_cache, seqs, kv_len)
        v = dense_kv(inp, inp.v_cache, seqs, kv_len)
        mask = sdpa_mask(q_len, kv_len, q.device)
        try:
            fn = self._closure(q, k, v, mask, q_len, inp.scale, True)
            with self.kernel_context():
                fn()
            return fn, "enable_gqa"
        except Exception:
            pass
        rep = inp.shape.hq // inp.shape.hkv
        fn = self._closure(q, k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1), mask, q_len,
                           inp.scale, False)
        with self.kernel_context():
            fn()
        return fn, "repeat_interleave"

    @staticmethod
    def _closure(q, k, v, mask, q_len, scale, gqa):
        import torch.nn.functional as F
        kw = {"scale": scale}
        if mask is not None:
            kw["attn_mask"] = mask
        else:
            kw["is_causal"] = q_len > 1     # q_len == kv_len here: top left is bottom right
        if gqa:
            kw["enable_gqa"] = True
        return lambda: F.scaled_dot_product_attention(q, k, v, **kw)


def sdpa_mask(q_len, kv_len, device):
    """None where is_causal says it (q_len 1 or q_len == kv_len); else the bottom-right causal mask:
    torch's causal_lower_right bias where it exists, a boolean [q_len, kv_len] mask otherwise."""
    if q_len == 1 or q_len == kv_len:
        return None
    try:
        from torch.nn.attention.bias import causal_lower_right
        return causal_lower_right(q_len, kv_len)
    except ImportError:
        import torch
        rows = torch.arange(q_len, device=device)[:, None] + (kv_len - q_len)
        return torch.arange(kv_len, device=device)[None, :] <= rows


# ---- anyattn through its binding ------------------------------------------------------------------
class AnyattnBinding(Peer):
    """anyattn.unified_attention on the case's paged inputs: the contender for --cases shapes
    (the standard workloads time anyattn with `anyattn bench`)."""
    name, label, gpu_only = "anyattn", "anyattn (Python binding)", False

    def probe(self, gpu):
        if gpu:
            why = probe_torch(True)
            if why:
                return "the binding takes torch CUDA tensors: " + why
        try:
            import anyattn
            self.version = anyattn.version()
        except Exception as e:
            return "the binding does not load (%s)" % str(e).splitlines()[0]
        return ""

    def runner(self, inp):
        if inp.emulated:
            raise Unsupported("bf16 needs torch here (NumPy has no bfloat16)")
        from anyattn import plan_cache_info, unified_attention
        out = inp.q.new_empty(inp.q.shape) if inp.lib == "torch" else inp.q.copy()
        args = (inp.q, inp.k_cache, inp.v_cache, out, inp.cu, inp.max_q, inp.seqused, inp.max_kv,
                inp.scale, True, (-1, -1), inp.table, 0)
        before = {k: calls for k, _, _, calls in plan_cache_info()["plans"]}
        unified_attention(*args, validate=True)    # the metadata checked once, as a caller does
        plan = next((d for k, d, _, calls in plan_cache_info()["plans"] if calls > before.get(k, 0)), "")

        def run():
            unified_attention(*args, validate=False)
        return Runner(run, lambda samples: rows_of(inp, out, samples), plan, out=out)


def builtin_peers():
    from .peers_paged import FlashAttn2, FlashAttn3, FlashInferDecode, FlashInferPaged, VllmTriton
    return ([TorchSdpa(b) for b in ("cudnn", "flash", "efficient", "math", "cpu")]
            + [FlashInferPaged(), FlashInferDecode(), VllmTriton(), FlashAttn2(), FlashAttn3()])


def load_peer_file(path):
    """The PEERS list a --peers-from file defines."""
    spec = importlib.util.spec_from_file_location("anyattn_report_peers_from", path)
    if spec is None:
        raise ValueError("%s is not a Python file" % path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    peers = list(getattr(mod, "PEERS", []))
    if not peers or not all(isinstance(p, Peer) for p in peers):
        raise ValueError("%s defines no PEERS list of anyattn.report.peer.Peer objects" % path)
    return peers
