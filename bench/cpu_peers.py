#!/usr/bin/env python3
"""cpu_peers.py: torch's CPU scaled_dot_product_attention beside anyattn's CPU
backend, in one process, on the CPU shapes of `anyattn bench` (32 q heads, 8 kv
heads, head dim 128): decode 16x4096 and 64x1024, prefill 1x1024 and 4x512 in
bf16, prefill 1x1024 in fp32. anyattn runs through its Python binding on a paged
cache (pages of 16, shuffled), torch on dense [batch, heads, len, dim] tensors
with enable_gqa; calls alternate anyattn, torch, anyattn, ... so drift on a
shared machine hits both, and each side's median is reported.

Usage: python3 bench/cpu_peers.py [--out DIR] [--rounds N]
Prints one JSON line per measurement and writes DIR/peers.json (DIR: $OUT or .)
with the device (as `anyattn bench` names it), date, commit (ANYATTN_COMMIT) and
command. Exits 77 when torch is not importable (a skip, as ctest counts it).
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

HQ, HKV, D, BS = 32, 8, 128, 16
CASES = [("decode", 16, 4096, "bf16"), ("decode", 64, 1024, "bf16"), ("prefill", 1, 1024, "bf16"),
         ("prefill", 4, 512, "bf16"), ("prefill", 1, 1024, "f32")]


def case_inputs(torch, kind, batch, n, dtype, gen):
    """Dense torch inputs and the same values as a paged cache for anyattn."""
    ql = n if kind == "prefill" else 1
    q = torch.randn(batch, HQ, ql, D, generator=gen).to(dtype)
    k = torch.randn(batch, HKV, n, D, generator=gen).to(dtype)
    v = torch.randn(batch, HKV, n, D, generator=gen).to(dtype)
    pages = (n + BS - 1) // BS
    perm = torch.randperm(batch * pages, generator=gen).to(torch.int32)
    block_table = perm.view(batch, pages).contiguous()
    k_cache = torch.zeros(batch * pages, BS, HKV, D, dtype=dtype)
    v_cache = torch.zeros_like(k_cache)
    for s in range(batch):
        kp = torch.nn.functional.pad(k[s].transpose(0, 1), (0, 0, 0, 0, 0, pages * BS - n))
        vp = torch.nn.functional.pad(v[s].transpose(0, 1), (0, 0, 0, 0, 0, pages * BS - n))
        k_cache[block_table[s].long()] = kp.reshape(pages, BS, HKV, D)
        v_cache[block_table[s].long()] = vp.reshape(pages, BS, HKV, D)
    q_flat = q.transpose(1, 2).reshape(batch * ql, HQ, D).contiguous()
    cu = torch.arange(0, batch * ql + 1, ql, dtype=torch.int32)
    seqused = torch.full((batch,), n, dtype=torch.int32)
    return q, k, v, q_flat, k_cache, v_cache, cu, seqused, block_table, ql


def figures(kind, batch, n, dtype_bytes, us):
    if kind == "decode":
        return {"GB/s": 2 * batch * HKV * n * D * dtype_bytes / us / 1e3}
    return {"GFLOP/s": 4.0 * HQ * D * batch * n * (n + 1) / 2 / us / 1e3}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("cpu_peers.py: torch is not importable; skipped", file=sys.stderr)
        return 77
    import anyattn

    gen = torch.Generator().manual_seed(0)
    recs = []

    def emit(rec):
        recs.append(rec)
        print(json.dumps(rec), flush=True)

    for kind, batch, n, dt in CASES:
        dtype = torch.bfloat16 if dt == "bf16" else torch.float32
        q, k, v, q_flat, k_cache, v_cache, cu, seqused, bt, ql = case_inputs(torch, kind, batch, n, dtype, gen)
        out = torch.empty_like(q_flat)
        causal = kind == "prefill"

        def run_anyattn():
            anyattn.unified_attention(q_flat, k_cache, v_cache, out, cu, ql, seqused, n, None, True, (-1, -1),
                                      bt, 0, validate=False)

        def run_torch():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)

        ref = run_torch()
        run_anyattn()
        err = (out.float() - ref.transpose(1, 2).reshape(out.shape).float()).abs().max().item()
        times = {"anyattn": [], "torch": []}
        for _ in range(args.rounds):
            for name, fn in (("anyattn", run_anyattn), ("torch", run_torch)):
                t0 = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - t0) * 1e6)
        case = f"{kind} {batch}x{n}"
        for name in ("anyattn", "torch"):
            us = statistics.median(times[name])
            rec = {"what": name, "case": case, "dtype": dt, "us": us}
            rec.update(figures(kind, batch, n, 2 if dt == "bf16" else 4, us))
            if name == "anyattn":
                rec["max_abs_diff_vs_torch"] = err
            emit(rec)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump({"device": anyattn.device_name("cpu"), "torch": torch.__version__,
                   "torch_threads": torch.get_num_threads(),
                   "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "commit": os.environ.get("ANYATTN_COMMIT") or None,
                   "command": "python3 bench/cpu_peers.py" + (f" --rounds {args.rounds}" if args.rounds != 9 else ""),
                   "results": recs}, f, indent=1)
    print(f"\n{'case':18} {'dtype':5} {'anyattn us':>11} {'torch us':>11} {'torch/anyattn':>14}")
    for i in range(0, len(recs), 2):
        a, t = recs[i], recs[i + 1]
        print(f"{a['case']:18} {a['dtype']:5} {a['us']:11.1f} {t['us']:11.1f} {t['us'] / a['us']:13.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
