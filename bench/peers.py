#!/usr/bin/env python3
"""peers.py: the peer kernels and ceilings that anyattn's GPU numbers are compared with,
measured in the same run: torch SDPA's FlashAttention-2 and cuDNN backends on dense GQA
(bf16, 32 q heads / 8 kv heads, head dim 128) for the shapes of `anyattn bench`, plus a
device-to-device copy (bytes read + written) and a bf16 8192^3 matmul.

Usage: python3 bench/peers.py [--out DIR] [--quick]
Prints one JSON line per measurement, then a table; writes DIR/peers.json (DIR: $OUT or .)
with the device, date, commit (ANYATTN_COMMIT, as bench/run_h200.sh sets it) and command.
Timing: median of triton.testing.do_bench (CUDA events), random inputs, warm-up first.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

HQ, HKV, D = 32, 8, 128
DECODE = [(1, 512), (1, 8192), (1, 32768), (8, 4096), (32, 2048), (32, 8192), (64, 8192), (128, 2048)]
PREFILL = [(1, 500), (1, 2048), (1, 8192), (4, 4096), (16, 1024)]


def bench_ms(fn):
    try:
        from triton.testing import do_bench
        return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))
    except ImportError:  # CUDA events, median of 50
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(50):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        times.sort()
        return times[len(times) // 2]


def sdpa_backend(name):
    from torch.nn.attention import SDPBackend
    return {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[name]


def attention_fn(backend, q, k, v, causal):
    """A closure running SDPA on one backend; GQA natively when the backend takes
    enable_gqa, else with K/V repeated to the q heads (noted in the record)."""
    from torch.nn.attention import sdpa_kernel
    be = sdpa_backend(backend)

    def native():
        with sdpa_kernel(be):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)

    try:
        native()
        torch.cuda.synchronize()
        return native, "enable_gqa"
    except Exception:
        pass
    kr = k.repeat_interleave(HQ // HKV, dim=1)
    vr = v.repeat_interleave(HQ // HKV, dim=1)

    def repeated():
        with sdpa_kernel(be):
            return F.scaled_dot_product_attention(q, kr, vr, is_causal=causal)

    repeated()
    torch.cuda.synchronize()
    return repeated, "repeat_interleave"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true", help="only the shapes named in TARGETS.md's table")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("peers.py: no CUDA device", file=sys.stderr)
        return 77
    torch.manual_seed(0)
    dev = torch.device("cuda")
    recs = []

    def emit(rec):
        recs.append(rec)
        print(json.dumps(rec), flush=True)

    # Ceilings.
    n = 1 << 30  # 2 GiB of bf16
    src = torch.randn(n, dtype=torch.bfloat16, device=dev)
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src))
    emit({"what": "ceiling", "case": "d2d copy 2 GiB", "ms": ms, "TB/s": 2 * src.numel() * 2 / ms / 1e9})
    del src, dst
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
    ms = bench_ms(lambda: a @ b)
    emit({"what": "ceiling", "case": "bf16 matmul 8192^3", "ms": ms, "TFLOP/s": 2 * 8192**3 / ms / 1e9})
    del a, b

    decode = DECODE if not args.quick else [(1, 8192), (32, 2048), (64, 8192), (128, 2048)]
    prefill = PREFILL if not args.quick else [(1, 2048), (1, 8192), (4, 4096), (16, 1024)]
    for backend in ("flash", "cudnn"):
        for batch, ctx in decode:
            q = torch.randn(batch, HQ, 1, D, dtype=torch.bfloat16, device=dev)
            k = torch.randn(batch, HKV, ctx, D, dtype=torch.bfloat16, device=dev)
            v = torch.randn_like(k)
            try:
                fn, how = attention_fn(backend, q, k, v, False)
                ms = bench_ms(fn)
                kv_bytes = 2 * batch * HKV * ctx * D * 2
                emit({"what": backend, "case": f"decode {batch}x{ctx}", "us": ms * 1e3,
                      "TB/s": kv_bytes / ms / 1e9, "gqa": how})
            except Exception as e:  # a backend refusing a shape is a result, not a crash
                emit({"what": backend, "case": f"decode {batch}x{ctx}", "error": str(e).splitlines()[0][:160]})
            del q, k, v
        for batch, length in prefill:
            q = torch.randn(batch, HQ, length, D, dtype=torch.bfloat16, device=dev)
            k = torch.randn(batch, HKV, length, D, dtype=torch.bfloat16, device=dev)
            v = torch.randn_like(k)
            try:
                fn, how = attention_fn(backend, q, k, v, True)
                ms = bench_ms(fn)
                flops = 4.0 * HQ * D * batch * length * (length + 1) / 2
                emit({"what": backend, "case": f"prefill {batch}x{length}", "us": ms * 1e3,
                      "TFLOP/s": flops / ms / 1e9, "gqa": how})
            except Exception as e:
                emit({"what": backend, "case": f"prefill {batch}x{length}", "error": str(e).splitlines()[0][:160]})
            del q, k, v
        torch.cuda.empty_cache()

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "commit": os.environ.get("ANYATTN_COMMIT") or None,
                   "command": "python3 bench/peers.py" + (" --quick" if args.quick else ""),
                   "results": recs}, f, indent=1)

    print(f"\n{'peer':8} {'case':22} {'us':>10} {'figure':>14}")
    for r in recs:
        fig = (f"{r['TB/s']:.2f} TB/s" if "TB/s" in r else f"{r['TFLOP/s']:.0f} TFLOP/s" if "TFLOP/s" in r
               else "error")
        us = r.get("us", r.get("ms", 0) * 1e3)
        print(f"{r['what']:8} {r['case']:22} {us:10.1f} {fig:>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
