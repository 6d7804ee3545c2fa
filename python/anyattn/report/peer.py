"""The peer interface (Peer, Runner, Unsupported), the probes of an optional module, and the dense
copies of a paged batch that the peers share: peers.py (torch SDPA, the binding) and peers_paged.py
(FlashInfer, vLLM, FlashAttention) build on it.
"""

import contextlib
import importlib
import math


class Unsupported(Exception):
    """A case the peer does not take by design; the message is shown in place of a time."""


class Runner:
    """fn(): one call on the current stream. read(samples): float64 rows [len(samples), d] of the
    last call's output. note: how the peer was called (shown with its results). out: the output
    the calls write into, if they are given one (filled with NaN before the checked call).
    context: a context manager factory entered around the checked and the timed calls (so its
    cost stays out of the times). keep: objects the calls need alive (workspaces, dense copies)."""

    def __init__(self, fn, read, note="", out=None, context=None, keep=()):
        self.fn, self.read, self.note, self.out, self.keep = fn, read, note, out, keep
        self.context = context or contextlib.nullcontext


class Peer:
    name = ""        # short id, a column of results.csv: "sdpa-flash"
    label = ""       # as the report names it: "torch SDPA (flash)"
    gpu_only = True
    version = ""

    def probe(self, gpu):
        """"" when the peer can run in this process on this device, else why not (one line)."""
        raise NotImplementedError

    def runner(self, inp):
        """A Runner for inputs.Inputs `inp`; raises Unsupported for a case it does not take."""
        raise NotImplementedError


def probe_torch(gpu):
    try:
        import torch
    except ImportError as e:
        return "torch is not importable (%s)" % e
    if gpu and not torch.cuda.is_available():
        return "torch %s sees no CUDA device" % torch.__version__
    return ""


def probe_module(names, gpu):
    """The first importable module of `names`, or (None, why) naming the import error."""
    why = probe_torch(gpu) if gpu else "needs a GPU (this run is on the CPU)"
    if why:
        return None, why
    errors = []
    for name in names:
        try:
            return importlib.import_module(name), ""
        except Exception as e:  # an installed package that fails to import is absent too
            errors.append("%s: %s" % (name, str(e).splitlines()[0] if str(e) else type(e).__name__))
    return None, "not importable (%s)" % "; ".join(errors)


def module_version(mod):
    top = importlib.import_module(mod.__name__.split(".")[0])
    return str(getattr(top, "__version__", "") or "")


# ---- dense grouping: SDPA-style peers take equal-length batches --------------------------------
def dense_groups(case):
    """Sequences grouped by (q_len, kv_len), first-seen order: [(q_len, kv_len, [seq ids])]."""
    groups = {}
    for s, key in enumerate(zip(case.q_lens, case.kv_lens)):
        groups.setdefault(key, []).append(s)
    return [(q, k, seqs) for (q, k), seqs in groups.items()]


def dense_q(inp, seqs, q_len):
    """[B, hq, q_len, d] copy of the group's query rows."""
    import torch
    idx = torch.cat([torch.arange(int(inp.host_cu[s]), int(inp.host_cu[s]) + q_len) for s in seqs])
    sh = inp.shape
    x = inp.q[idx.to(inp.q.device)].view(len(seqs), q_len, sh.hq, sh.d)
    return x.transpose(1, 2).contiguous()


def dense_kv(inp, cache, seqs, kv_len, heads_first=True):
    """[B, hkv, kv_len, d] (or [B, kv_len, hkv, d]) copy of the group's keys or values."""
    import torch
    sh = inp.shape
    pages = math.ceil(kv_len / sh.block_size)
    idx = torch.as_tensor(inp.host_table[seqs, :pages], dtype=torch.long, device=cache.device)
    x = cache[idx].view(len(seqs), pages * sh.block_size, sh.hkv, sh.d)[:, :kv_len]
    return (x.transpose(1, 2) if heads_first else x).contiguous()


def group_reader(inp, groups, outs, layout):
    """read(samples) over per-group outputs outs[g] in `layout` "bhqd" ([B, hq, q, d]) or "bqhd"."""
    where = {}
    for g, (_, _, seqs) in enumerate(groups):
        for b, s in enumerate(seqs):
            where[s] = (g, b)

    def read(samples):
        import numpy as np
        rows = []
        for t, h in samples:
            s = int(np.searchsorted(inp.host_cu, t, side="right")) - 1
            g, b = where[s]
            i = t - int(inp.host_cu[s])
            o = outs[g]
            rows.append(inp.to_numpy(o[b, h, i] if layout == "bhqd" else o[b, i, h]))
        return np.stack(rows)
    return read
