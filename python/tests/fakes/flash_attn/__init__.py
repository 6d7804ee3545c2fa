"""Fake flash_attn (FlashAttention-2): flash_attn_with_kvcache with q [batch, seqlen_q, heads, d],
a contiguous cache [batch, seqlen_k, kv heads, d] or a paged one whose page size is a multiple of
256 (FA2's rule), cache_seqlens, causal aligned to the last key; see ../README.md."""

import torch

from _paged import attend, pages_of

__version__ = "0.0-fake"


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    assert q.dim() == 4 and k is None and v is None
    if block_table is not None:
        assert k_cache.shape[1] % 256 == 0, "Paged KV cache block size must be divisible by 256"
    lens = cache_seqlens.tolist()
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    assert causal
    out = torch.empty_like(q)
    for b in range(q.shape[0]):
        if block_table is not None:
            pages = block_table[b, :-(-lens[b] // k_cache.shape[1])].tolist()
            kb, vb = pages_of(k_cache, pages, lens[b]), pages_of(v_cache, pages, lens[b])
        else:
            kb, vb = k_cache[b, :lens[b]], v_cache[b, :lens[b]]
        out[b] = attend(q[b], kb, vb, scale)
    return out
