"""The paged peers: FlashInfer's batch prefill and decode wrappers, vLLM's Triton unified attention
and FlashAttention's flash_attn_with_kvcache (FA2's flash_attn, FA3's flash_attn_interface). Each
reads the case's own paged cache where its API takes pages of that size; the calls follow each
library's documented signature, and what a library refuses is reported as its error.
"""

import inspect
import math

import numpy as np

from .inputs import rows_of
from .peer import Peer, Runner, Unsupported, dense_kv, dense_q, group_reader, module_version, probe_module

WORKSPACE_BYTES = 512 << 20       # FlashInfer's float workspace (it recommends at least 128 MB)
VLLM_MODULES = ("vllm.v1.attention.ops.triton_unified_attention", "vllm.attention.ops.triton_unified_attention")
# vLLM's TritonAttentionBackend: the 3D (split-KV) decode kernel below 128 // kv heads sequences,
# with 16 softmax segments.
VLLM_MIN_GRID_2D, VLLM_SEGMENTS = 128, 16


def page_metadata(inp):
    """FlashInfer's page lists from the block table, int32 on the device: indptr [n + 1],
    indices [total pages], last_page_len [n]."""
    import torch
    bs = inp.shape.block_size
    pages = [math.ceil(k / bs) for k in inp.case.kv_lens]
    indptr = np.zeros(len(pages) + 1, dtype=np.int32)
    indptr[1:] = np.cumsum(pages)
    indices = np.concatenate([inp.host_table[s, :p] for s, p in enumerate(pages)]).astype(np.int32)
    last = np.array([k - (p - 1) * bs for k, p in zip(inp.case.kv_lens, pages)], dtype=np.int32)
    return tuple(torch.from_numpy(a).to(inp.q.device) for a in (indptr, indices, last))


class _Module(Peer):
    """A peer that is one importable module (the first of `modules` that imports)."""
    modules = ()

    def probe(self, gpu):
        mod, why = probe_module(self.modules, gpu)
        if why:
            return why
        self.mod = mod
        self.version = module_version(mod)
        return self.check(mod)

    def check(self, mod):
        return ""


class _FlashInfer(_Module):
    modules = ("flashinfer",)
    wrapper = ""

    def check(self, mod):
        return "" if hasattr(mod, self.wrapper) else "flashinfer %s has no %s" % (self.version, self.wrapper)

    def run_wrapper(self, inp, w, ws, note):
        import torch
        out = torch.empty_like(inp.q)
        kv = (inp.k_cache, inp.v_cache)

        def run():
            w.run(inp.q, kv, out=out)
        return Runner(run, lambda samples: rows_of(inp, out, samples), note, out=out, keep=(w, ws))


class FlashInferPaged(_FlashInfer):
    """BatchPrefillWithPagedKVCacheWrapper over every case (decode rows are queries of length 1)."""
    name, label, wrapper = "flashinfer", "FlashInfer batch prefill (paged)", "BatchPrefillWithPagedKVCacheWrapper"

    def runner(self, inp):
        import torch
        sh = inp.shape
        ws = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=inp.q.device)
        w = self.mod.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")
        indptr, indices, last = page_metadata(inp)
        w.plan(inp.cu, indptr, indices, last, sh.hq, sh.hkv, sh.d, sh.block_size, causal=True,
               sm_scale=inp.scale, q_data_type=inp.q.dtype, kv_data_type=inp.k_cache.dtype)
        return self.run_wrapper(inp, w, ws, "plan once, then run; NHD pages")


class FlashInferDecode(_FlashInfer):
    """BatchDecodeWithPagedKVCacheWrapper on decode batches; tensor cores from a GQA group of 4
    (FlashInfer's advice for grouped heads)."""
    name, label, wrapper = "flashinfer-decode", "FlashInfer batch decode (paged)", "BatchDecodeWithPagedKVCacheWrapper"

    def runner(self, inp):
        if inp.case.kind != "decode":
            raise Unsupported("decode batches only")
        import torch
        sh = inp.shape
        tensor_cores = sh.hq // sh.hkv >= 4
        ws = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=inp.q.device)
        w = self.mod.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tensor_cores)
        indptr, indices, last = page_metadata(inp)
        w.plan(indptr, indices, last, sh.hq, sh.hkv, sh.d, sh.block_size, sm_scale=inp.scale,
               q_data_type=inp.q.dtype, kv_data_type=inp.k_cache.dtype)
        note = "plan once, then run; %s" % ("tensor cores" if tensor_cores else "CUDA cores")
        return self.run_wrapper(inp, w, ws, note)


class VllmTriton(_Module):
    """vLLM's Triton unified_attention (the same calling convention as anyattn's binding), with the
    split-KV buffers vLLM's Triton backend passes where the function takes them."""
    name, label, modules = "vllm-triton", "vLLM Triton unified_attention", VLLM_MODULES

    def check(self, mod):
        return "" if hasattr(mod, "unified_attention") else "%s has no unified_attention" % mod.__name__

    def runner(self, inp):
        import torch
        ua = self.mod.unified_attention
        out = torch.empty_like(inp.q)
        descale = torch.ones((inp.case.num_seqs, inp.shape.hkv), dtype=torch.float32, device=inp.q.device)
        kw = self._segments(inp, ua)
        args = (inp.q, inp.k_cache, inp.v_cache, out, inp.cu, inp.max_q, inp.seqused, inp.max_kv,
                inp.scale, True, (-1, -1), inp.table, 0.0, None, descale, descale)

        def run():
            ua(*args, **kw)
        note = "3D decode below %d sequences" % kw["seq_threshold_3D"] if kw else "2D kernel only"
        return Runner(run, lambda samples: rows_of(inp, out, samples), note, out=out, keep=(kw, descale))

    @staticmethod
    def _segments(inp, ua):
        import torch
        if "seq_threshold_3D" not in inspect.signature(ua).parameters:
            return {}
        sh = inp.shape
        n = VLLM_MIN_GRID_2D // sh.hkv
        pad = 1 << (sh.d - 1).bit_length()
        f32 = dict(dtype=torch.float32, device=inp.q.device)
        return {"seq_threshold_3D": n, "num_par_softmax_segments": VLLM_SEGMENTS,
                "softmax_segm_output": torch.empty((n, sh.hq, VLLM_SEGMENTS, pad), **f32),
                "softmax_segm_max": torch.empty((n, sh.hq, VLLM_SEGMENTS), **f32),
                "softmax_segm_expsum": torch.empty((n, sh.hq, VLLM_SEGMENTS), **f32)}


class FlashAttn2(_Module):
    """flash_attn.flash_attn_with_kvcache: one call per group of equal q_len (its q is
    [batch, q_len, heads, d]); the paged cache where the page size is a multiple of 256 (FA2's
    rule), else each group's keys copied to a contiguous cache with cache_seqlens."""
    name, label, modules = "fa2-kvcache", "FlashAttention-2 flash_attn_with_kvcache", ("flash_attn",)

    def check(self, mod):
        return "" if hasattr(mod, "flash_attn_with_kvcache") else "flash_attn has no flash_attn_with_kvcache"

    def runner(self, inp):
        by_q = {}
        for s, q in enumerate(inp.case.q_lens):
            by_q.setdefault(q, []).append(s)
        paged = inp.shape.block_size % 256 == 0
        groups, calls = [], []
        for q_len, seqs in by_q.items():
            groups.append((q_len, max(inp.case.kv_lens[s] for s in seqs), seqs))
            calls.append(self._group_call(inp, q_len, groups[-1][1], seqs, paged))
        outs = [None] * len(calls)

        def run():
            for g, fn in enumerate(calls):
                outs[g] = fn()
        note = "%d call%s, %s cache" % (len(calls), "s" if len(calls) > 1 else "", "paged" if paged else "contiguous")
        return Runner(run, group_reader(inp, groups, outs, "bqhd"), note, keep=(calls,))

    def _group_call(self, inp, q_len, kv_len, seqs, paged):
        import torch
        f = self.mod.flash_attn_with_kvcache
        q = dense_q(inp, seqs, q_len).transpose(1, 2).contiguous()         # [B, q_len, hq, d]
        lens = torch.as_tensor([inp.case.kv_lens[s] for s in seqs], dtype=torch.int32, device=q.device)
        if paged:
            table = torch.as_tensor(inp.host_table[seqs], dtype=torch.int32, device=q.device)
            k, v = inp.k_cache, inp.v_cache
        else:
            table = None
            k = dense_kv(inp, inp.k_cache, seqs, kv_len, heads_first=False)   # [B, kv_len, hkv, d]
            v = dense_kv(inp, inp.v_cache, seqs, kv_len, heads_first=False)
        return lambda: f(q, k, v, cache_seqlens=lens, block_table=table, softmax_scale=inp.scale, causal=True)


class FlashAttn3(_Module):
    """flash_attn_interface.flash_attn_with_kvcache (FlashAttention-3, Hopper): one call over the
    whole batch, queries packed by cu_seqlens_q, keys read through page_table."""
    name, label, modules = "fa3-kvcache", "FlashAttention-3 flash_attn_with_kvcache", ("flash_attn_interface",)

    def check(self, mod):
        f = getattr(mod, "flash_attn_with_kvcache", None)
        if f is None:
            return "flash_attn_interface has no flash_attn_with_kvcache"
        return "" if "page_table" in inspect.signature(f).parameters else "its flash_attn_with_kvcache takes no page_table"

    def runner(self, inp):
        f = self.mod.flash_attn_with_kvcache
        held = [None]

        def run():
            o = f(inp.q, inp.k_cache, inp.v_cache, cache_seqlens=inp.seqused, page_table=inp.table,
                  cu_seqlens_q=inp.cu, max_seqlen_q=inp.max_q, softmax_scale=inp.scale, causal=True)
            held[0] = o[0] if isinstance(o, (tuple, list)) else o
        return Runner(run, lambda samples: rows_of(inp, held[0], samples), "one call, packed queries, paged")
