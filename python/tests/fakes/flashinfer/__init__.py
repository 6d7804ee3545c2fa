"""Fake flashinfer: BatchPrefillWithPagedKVCacheWrapper and BatchDecodeWithPagedKVCacheWrapper
with plan() and run(q, (k_cache, v_cache), out=) in the NHD layout; see ../README.md."""

import torch

from _paged import attend, pages_of

__version__ = "0.0-fake"


class _Wrapper:
    def __init__(self, float_workspace_buffer, kv_layout="NHD", **kw):
        assert kv_layout == "NHD" and float_workspace_buffer.dtype == torch.uint8
        self.planned = None

    def _pages(self, indptr, indices, last_page_len, page_size):
        indptr, indices, last = indptr.cpu().tolist(), indices.cpu().tolist(), last_page_len.cpu().tolist()
        assert len(indptr) == len(last) + 1 and indptr[-1] == len(indices)
        assert all(1 <= x <= page_size for x in last)
        return [(indices[indptr[s]:indptr[s + 1]], (indptr[s + 1] - indptr[s] - 1) * page_size + last[s])
                for s in range(len(last))]

    def _run(self, q_rows, paged_kv_cache, out):
        k_cache, v_cache = paged_kv_cache
        assert k_cache.dtype == self.planned["kv_dtype"] and q_rows[0][1].dtype == self.planned["q_dtype"]
        for (lo, rows), (pages, kv_len) in zip(q_rows, self.planned["pages"]):
            out[lo:lo + rows.shape[0]] = attend(rows, pages_of(k_cache, pages, kv_len),
                                                pages_of(v_cache, pages, kv_len), self.planned["scale"])
        return out


class BatchPrefillWithPagedKVCacheWrapper(_Wrapper):
    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
             num_kv_heads, head_dim_qk, page_size, head_dim_vo=None, custom_mask=None, packed_custom_mask=None,
             causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False, sm_scale=None, window_left=-1,
             logits_soft_cap=None, rope_scale=None, rope_theta=None, q_data_type="float16", kv_data_type=None,
             **kw):
        assert causal, "the report asks for causal attention"
        self.planned = {"qo": qo_indptr.cpu().tolist(), "heads": (num_qo_heads, num_kv_heads, head_dim_qk),
                        "pages": self._pages(paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, page_size),
                        "scale": sm_scale if sm_scale is not None else head_dim_qk ** -0.5,
                        "q_dtype": q_data_type, "kv_dtype": kv_data_type or q_data_type}

    def run(self, q, paged_kv_cache, *args, out=None, **kw):
        qo = self.planned["qo"]
        assert tuple(q.shape[1:]) == (self.planned["heads"][0], self.planned["heads"][2])
        out = torch.empty_like(q) if out is None else out
        return self._run([(qo[s], q[qo[s]:qo[s + 1]]) for s in range(len(qo) - 1)], paged_kv_cache, out)


class BatchDecodeWithPagedKVCacheWrapper(_Wrapper):
    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, use_tensor_cores=False, **kw):
        super().__init__(float_workspace_buffer, kv_layout)

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
             pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type="float16",
             kv_data_type=None, data_type=None, sm_scale=None, **kw):
        self.planned = {"heads": (num_qo_heads, num_kv_heads, head_dim),
                        "pages": self._pages(indptr, indices, last_page_len, page_size),
                        "scale": sm_scale if sm_scale is not None else head_dim ** -0.5,
                        "q_dtype": q_data_type, "kv_dtype": kv_data_type or q_data_type}

    def run(self, q, paged_kv_cache, *args, out=None, **kw):
        assert q.shape[0] == len(self.planned["pages"]), "decode: one query row per request"
        out = torch.empty_like(q) if out is None else out
        return self._run([(s, q[s:s + 1]) for s in range(q.shape[0])], paged_kv_cache, out)
