"""Fake flash_attn_interface (FlashAttention-3): flash_attn_with_kvcache over queries packed by
cu_seqlens_q, keys read through page_table; returns (out, lse) as FA3 does when asked, else out;
see tests/fakes/README.md."""

import torch

from _paged import attend, pages_of


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, page_table=None,
                            cu_seqlens_q=None, cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), attention_chunk=0, softcap=0.0, rotary_interleaved=True,
                            scheduler_metadata=None, num_splits=0, pack_gqa=None, sm_margin=0,
                            return_softmax_lse=False):
    assert q.dim() == 3 and cu_seqlens_q is not None and page_table is not None and causal
    cu, lens, bs = cu_seqlens_q.tolist(), cache_seqlens.tolist(), k_cache.shape[1]
    assert max(cu[s + 1] - cu[s] for s in range(len(lens))) <= max_seqlen_q
    out = torch.empty_like(q)
    for s in range(len(lens)):
        pages = page_table[s, :-(-lens[s] // bs)].tolist()
        out[cu[s]:cu[s + 1]] = attend(q[cu[s]:cu[s + 1]], pages_of(k_cache, pages, lens[s]),
                                      pages_of(v_cache, pages, lens[s]), softmax_scale)
    return (out, None) if return_softmax_lse else out
