"""One case's tensors in vLLM's paged layout (as torch tensors on the run's device, or NumPy arrays
on the CPU), the float64 reference for sampled output rows, and the check every contender's output
passes before any time of it is posted.

Layout: q and out [num_tokens, hq, d]; k_cache and v_cache [num_blocks, block_size, hkv, d] with
every page of every sequence shuffled across the cache (as `anyattn bench` does); cu_seqlens_q
int32 [num_seqs + 1]; seqused_k int32 [num_seqs]; block_table int32 [num_seqs, max_pages].
"""

import math

import numpy as np

from .cases import TORCH_DTYPES

# |got - ref| <= TOL * (1 + |ref|) per element, as tools/bench.c's check.
TOLERANCE = {"bf16": 3e-2, "f16": 5e-3, "f32": 1e-4}
SAMPLES = 8


class Inputs:
    """Tensors of one case. lib is "torch" or "numpy"; host_* are NumPy copies of the metadata.
    emulated: NumPy has no bfloat16, so bf16 values are held in float32 arrays (exact)."""

    def __init__(self, case, lib, device):
        self.case, self.lib, self.device = case, lib, device
        self.shape = case.shape
        self.scale = self.shape.d ** -0.5
        self.max_q, self.max_kv = max(case.q_lens), max(case.kv_lens)
        self.emulated = False
        self.q = self.k_cache = self.v_cache = None
        self.cu = self.seqused = self.table = None

    @property
    def num_blocks(self):
        return int(self.host_table.max()) + 1 if self.host_table.size else 1

    def to_numpy(self, x):
        """Any tensor or array as a float64 NumPy array (a host copy)."""
        if self.lib == "torch":
            return x.detach().float().cpu().numpy().astype(np.float64)
        return np.asarray(x, dtype=np.float64)


def _metadata(case, bs, rng):
    """Host cu_seqlens_q, seqused_k and a block table whose pages are shuffled over the cache."""
    pages = [math.ceil(k / bs) for k in case.kv_lens]
    perm = rng.permutation(sum(pages)).astype(np.int32)
    table = np.zeros((case.num_seqs, max(pages)), dtype=np.int32)
    start = 0
    for s, n in enumerate(pages):
        table[s, :n] = perm[start:start + n]
        start += n
    cu = np.zeros(case.num_seqs + 1, dtype=np.int32)
    cu[1:] = np.cumsum(case.q_lens)
    return cu, np.asarray(case.kv_lens, dtype=np.int32), table, sum(pages)


def make_inputs(case, lib, device, seed):
    """Random inputs (normal, never zeros) for `case` in `lib` on `device` ("cpu", "cuda:0")."""
    sh = case.shape
    rng = np.random.default_rng(seed)
    inp = Inputs(case, lib, device)
    inp.host_cu, inp.host_kv, inp.host_table, blocks = _metadata(case, sh.block_size, rng)
    q_shape = (case.num_tokens, sh.hq, sh.d)
    kv_shape = (blocks, sh.block_size, sh.hkv, sh.d)
    if lib == "torch":
        import torch
        dt = getattr(torch, TORCH_DTYPES[sh.dtype])
        gen = torch.Generator(device=device).manual_seed(seed)
        inp.q, inp.k_cache, inp.v_cache = (torch.randn(s, generator=gen, device=device, dtype=torch.float32).to(dt)
                                           for s in (q_shape, kv_shape, kv_shape))
        inp.cu, inp.seqused, inp.table = (torch.from_numpy(a).to(device)
                                          for a in (inp.host_cu, inp.host_kv, inp.host_table))
    else:
        inp.q, inp.k_cache, inp.v_cache = (_numpy_random(rng, s, sh.dtype, inp)
                                           for s in (q_shape, kv_shape, kv_shape))
        inp.cu, inp.seqused, inp.table = inp.host_cu, inp.host_kv, inp.host_table
    return inp


def _numpy_random(rng, shape, dtype, inp):
    x = rng.standard_normal(shape, dtype=np.float32)
    if dtype == "f16":
        return x.astype(np.float16)
    if dtype == "bf16":  # round to bf16 (nearest even) and keep it in float32
        inp.emulated = True
        u = x.view(np.uint32)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
        return u.view(np.float32)
    return x


def sample_rows(case, seed, n=SAMPLES):
    """(token, q head) pairs to check: the last token first (the end of the batch), then random."""
    rng = np.random.default_rng(seed + 1)
    t_last = case.num_tokens - 1
    picks = [(t_last, int(rng.integers(case.shape.hq)))]
    while len(picks) < n:
        picks.append((int(rng.integers(case.num_tokens)), int(rng.integers(case.shape.hq))))
    return picks


def _keys(inp, cache, s, kvh, count):
    """The first `count` rows of sequence s's keys (or values) for kv head kvh, float64 [count, d]."""
    bs = inp.shape.block_size
    pages = inp.host_table[s, :math.ceil(count / bs)]
    if inp.lib == "torch":
        import torch
        rows = cache[torch.as_tensor(pages, device=cache.device, dtype=torch.long), :, kvh, :]
    else:
        rows = cache[pages, :, kvh, :]
    return inp.to_numpy(rows).reshape(-1, inp.shape.d)[:count]


def reference_rows(inp, samples):
    """Each sampled output row in float64 from the inputs themselves: [len(samples), d]."""
    case, sh = inp.case, inp.shape
    out = np.empty((len(samples), sh.d))
    for i, (t, h) in enumerate(samples):
        s = int(np.searchsorted(inp.host_cu, t, side="right")) - 1
        pos = case.kv_lens[s] - case.q_lens[s] + (t - int(inp.host_cu[s]))
        kvh = h // (sh.hq // sh.hkv)
        k = _keys(inp, inp.k_cache, s, kvh, pos + 1)
        v = _keys(inp, inp.v_cache, s, kvh, pos + 1)
        q = inp.to_numpy(inp.q[t, h])
        z = k @ q * inp.scale
        p = np.exp(z - z.max())
        out[i] = p @ v / p.sum()
    return out


def compare(got, ref, dtype):
    """(ok, worst error over the tolerance's scale). NaN anywhere (an unwritten output) fails."""
    got = np.asarray(got, dtype=np.float64)
    err = np.abs(got - ref) / (1.0 + np.abs(ref))
    worst = float(np.nanmax(err)) if np.isfinite(got).all() else math.inf
    return worst <= TOLERANCE[dtype], worst


def rows_of(inp, out, samples):
    """The sampled rows of an output in vLLM's [num_tokens, hq, d] layout."""
    return np.stack([inp.to_numpy(out[t, h]) for t, h in samples])


def poison(inp, out):
    """Fill an output with NaN before the checked call, so an element no call writes fails."""
    if inp.lib == "torch":
        out.fill_(float("nan"))
    else:
        out[...] = np.nan
