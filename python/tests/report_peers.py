"""Peers for the report's tests, loaded with --peers-from: a float64 NumPy attention (a correct peer
that needs neither torch nor a GPU) and the same one without the 1/sqrt(d) scale (a wrong peer,
which must post no time). They show how a team adds its own kernel to the report.
"""

import numpy as np

from anyattn.report.peer import Peer, Runner, Unsupported


def attention(inp, scale):
    """Causal paged attention of every sequence in float64: [num_tokens, hq, d]."""
    sh, case = inp.shape, inp.case
    q = inp.to_numpy(inp.q)
    out = np.empty_like(q)
    group = sh.hq // sh.hkv
    for s, (q_len, kv_len) in enumerate(zip(case.q_lens, case.kv_lens)):
        pages = inp.host_table[s, :-(-kv_len // sh.block_size)].astype(np.int64)
        k = inp.to_numpy(inp.k_cache[pages]).reshape(-1, sh.hkv, sh.d)[:kv_len]
        v = inp.to_numpy(inp.v_cache[pages]).reshape(-1, sh.hkv, sh.d)[:kv_len]
        rows = q[inp.host_cu[s]:inp.host_cu[s] + q_len].reshape(q_len, sh.hkv, group, sh.d).transpose(1, 2, 0, 3)
        z = rows @ k.transpose(1, 2, 0)[:, None] * scale                        # [hkv, group, q_len, kv_len]
        visible = np.arange(kv_len)[None, :] <= np.arange(q_len)[:, None] + (kv_len - q_len)
        z = np.where(visible, z, -np.inf)
        p = np.exp(z - z.max(axis=-1, keepdims=True))
        o = (p / p.sum(axis=-1, keepdims=True)) @ v.transpose(1, 0, 2)[:, None]  # [hkv, group, q_len, d]
        o = o.transpose(2, 0, 1, 3)
        out[inp.host_cu[s]:inp.host_cu[s] + q_len] = o.reshape(q_len, sh.hq, sh.d)
    return out


class NumpyAttention(Peer):
    name, label, gpu_only = "numpy-f64", "NumPy float64 (test peer)", False
    unscaled = False

    def probe(self, gpu):
        return "" if not gpu else "CPU only"

    def runner(self, inp):
        if inp.case.num_tokens > 300:   # kept small: Python loops over sequences, one call per test case
            raise Unsupported("over 300 query rows")
        held = [None]

        def run():
            held[0] = attention(inp, 1.0 if self.unscaled else inp.scale)
        return Runner(run, lambda samples: np.stack([held[0][t, h] for t, h in samples]), "einsum per sequence")


class Unscaled(NumpyAttention):
    name, label, unscaled = "numpy-wrong", "NumPy without the softmax scale (a wrong test peer)", True


PEERS = [NumpyAttention(), Unscaled()]
