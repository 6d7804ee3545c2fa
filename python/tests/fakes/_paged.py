"""Shared by the fake peer libraries: causal attention (aligned to the last key) of per-sequence
query rows over per-sequence keys, in float32, with GQA."""

import torch


def attend(q, k, v, scale):
    """q [sq, hq, d], k and v [sk, hkv, d] -> [sq, hq, d] in q's dtype."""
    sq, hq, d = q.shape
    sk, hkv = k.shape[0], k.shape[1]
    assert hq % hkv == 0, (hq, hkv)
    kf = k.float().repeat_interleave(hq // hkv, dim=1)
    vf = v.float().repeat_interleave(hq // hkv, dim=1)
    z = torch.einsum("qhd,khd->hqk", q.float(), kf) * scale
    visible = torch.arange(sk)[None, :] <= torch.arange(sq)[:, None] + (sk - sq)
    z = z.masked_fill(~visible, float("-inf"))
    return torch.einsum("hqk,khd->qhd", z.softmax(-1), vf).to(q.dtype)


def pages_of(cache, pages, length):
    """[length, hkv, d] rows of a paged cache [blocks, page, hkv, d] through a list of pages."""
    idx = torch.as_tensor(pages, dtype=torch.long)
    return cache[idx].reshape(-1, cache.shape[2], cache.shape[3])[:length]
