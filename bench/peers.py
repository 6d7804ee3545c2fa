#!/usr/bin/env python3
"""peers.py: torch SDPA's FlashAttention-2 and cuDNN backends and the device ceilings through torch,
on the shapes of `anyattn bench`'s GPU decode and prefill workloads, written as peers.json for
bench/results/<gpu>/ (make_table.py's "vs" columns). The peer code is anyattn.report's
(python/anyattn/report/): the same inputs, the float64 check of sampled rows (a wrong output posts
an error, no time) and the same timer as `python -m anyattn.report`, which measures these and every
other importable peer on every workload; this script keeps the results table's file format.

Usage: python3 bench/peers.py [--out DIR] [--quick] [--cpu]
Prints one JSON line per measurement, then a table; writes DIR/peers.json (DIR: $OUT or .) with the
device, date, commit (ANYATTN_COMMIT, as bench/run_h200.sh sets it) and command. --cpu measures
torch's CPU SDPA on small shapes instead (a check of this script without a GPU).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from anyattn.report.cases import Case  # noqa: E402
from anyattn.report.ceilings import torch_ceilings  # noqa: E402
from anyattn.report.measure import measure_case  # noqa: E402
from anyattn.report.peers import TorchSdpa  # noqa: E402

DECODE = [(1, 512), (1, 8192), (1, 32768), (8, 4096), (32, 2048), (32, 8192), (64, 8192), (128, 2048)]
PREFILL = [(1, 500), (1, 2048), (1, 8192), (4, 4096), (16, 1024)]
QUICK = ([(1, 8192), (32, 2048), (64, 8192), (128, 2048)], [(1, 2048), (1, 8192), (4, 4096), (16, 1024)])
CPU = ([(1, 512), (4, 1024)], [(1, 128)])


def cases(decode, prefill):
    return ([Case("decode", "decode %dx%d" % (b, c), [1] * b, [c] * b) for b, c in decode]
            + [Case("prefill", "prefill %dx%d" % (b, n), [n] * b, [n] * b) for b, n in prefill])


def record(what, case, r):
    """One entry of peers.json's results, as make_table.py reads it."""
    rec = {"what": what, "case": case.name}
    if r["status"] != "ok":
        rec["error"] = (r.get("error") or "wrong output (worst error %.3g)" % r.get("max_err", float("nan")))[:160]
        return rec
    rec["us"] = r["us"]
    if case.kind == "decode":
        rec["TB/s"] = case.kv_bytes() / r["us"] / 1e6
    else:
        rec["TFLOP/s"] = case.flops() / r["us"] / 1e6
    rec["gqa"] = r.get("note", "").split("GQA by ")[-1]
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true", help="fewer shapes")
    ap.add_argument("--cpu", action="store_true", help="torch's CPU SDPA on small shapes (no GPU needed)")
    args = ap.parse_args()
    import torch
    gpu = not args.cpu
    if gpu and not torch.cuda.is_available():
        print("peers.py: no CUDA device", file=sys.stderr)
        return 77
    recs = []

    def emit(rec):
        recs.append(rec)
        print(json.dumps(rec), flush=True)

    for rec in (torch_ceilings(True) if gpu else torch_ceilings(False, 64 << 20, 512)):
        emit(rec)
    lists = CPU if args.cpu else QUICK if args.quick else (DECODE, PREFILL)
    ctx = {"lib": "torch", "device": "cuda:0" if gpu else "cpu", "gpu": gpu, "iters": 30 if gpu else 3, "seed": 1}
    for backend in (("flash", "cudnn") if gpu else ("cpu",)):
        peer = TorchSdpa(backend)
        for case in cases(*lists):
            measure_case(case, [peer], ctx)
            emit(record(backend, case, case.results[peer.name]))
    write(args, recs, torch.cuda.get_device_name() if gpu else "CPU", torch.__version__)
    return 0


def write(args, recs, device, torch_version):
    os.makedirs(args.out, exist_ok=True)
    flags = "".join(" --" + f for f in ("quick", "cpu") if getattr(args, f))
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump({"device": device, "torch": torch_version,
                   "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "commit": os.environ.get("ANYATTN_COMMIT") or None,
                   "command": "python3 bench/peers.py" + flags, "results": recs}, f, indent=1)
    print(f"\n{'peer':8} {'case':22} {'us':>10} {'figure':>14}")
    for r in recs:
        fig = (f"{r['TB/s']:.2f} TB/s" if "TB/s" in r else f"{r['TFLOP/s']:.0f} TFLOP/s" if "TFLOP/s" in r
               else "error")
        us = r.get("us", r.get("ms", 0) * 1e3)
        print(f"{r['what']:8} {r['case']:22} {us:10.1f} {fig:>14}")


if __name__ == "__main__":
    sys.exit(main())
