#!/usr/bin/env python3
"""A stand-in for the `anyattn` CLI on a GPU with no compiled-in tree, for the report's GPU-only
branches on a machine without one: `info` (device "Fake GPU 9000", fallback heuristic), `bench`
(--list and --json in bench's format, e2e-llama8b included; ANYATTN_TREE makes every case 10%
faster), `tune` (--cells chunks of a 10-cell grid, FAKE_TUNE_SLEEP seconds per cell), `fit` and
`fit --eval`. Times are made up; only the formats are bench's and tune's.
"""

import json
import os
import sys
import time

DEVICE = "Fake GPU 9000"
GRID_CELLS, CANDIDATES = 10, 2
CASES = {"decode": [("decode 1x512", [1], [512]), ("decode 4x2048", [1] * 4, [2048] * 4)],
         "prefill": [("prefill 1x128", [128], [128])],
         "mixed": [("mixed 1x64p+3d@256", [64, 1, 1, 1], [64, 256, 256, 256])],
         "ibm": [("ibm b%d L%d d%.1f" % (b, L, d), [1] * round(b * d) + [L] * (b - round(b * d)), [L] * b)
                 for b in (1, 4) for L in (128, 512) for d in (0.0, 0.5, 1.0)]}


def opt(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def info():
    print("anyattn 0.1.0 (header 0.1.0)\nbackend cpu   compiled; 1 device\n  device 0: fake CPU, 2 threads\n"
          "    config selection: none (the CPU backend has one tiling, chosen in plan)\n"
          "backend cuda  compiled; 1 device\n  device 0: %s\n"
          "    config selection: none for '%s' (sm_99): the backend's fallback heuristic\n"
          "  config m16n64w4s2     block_m  16 block_n  64 warps 4 stages 2\n"
          "backend hip   not compiled in\nbest backend: cuda" % (DEVICE, DEVICE))


def bench(args):
    cases = CASES.get(opt(args, "--workload", "default"), [])
    flt = opt(args, "--filter")
    if flt:
        cases = [c for c in cases if any(f and f in c[0] for f in flt.split("|"))]
    if "--list" in args:
        for name, q, kv in cases:
            print(json.dumps({"case": name, "q_lens": q, "kv_lens": kv}))
        return 0
    speed = 0.9 if os.environ.get("ANYATTN_TREE") else 1.0
    out = {"version": "0.1.0", "workload": opt(args, "--workload"), "backend": "cuda", "device": DEVICE,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": None,
           "command": "anyattn bench " + " ".join(args), "graph": 0, "dtype": "bf16", "bandwidth_gbs": 4000.0,
           "peak_gflops": 800000.0, "cases": []}
    if opt(args, "--workload") == "e2e-llama8b":
        out["e2e"] = {"prefill_ms": 0.8, "decode_s": 5.6, "us_per_call": 13.6, "kv_gbs": 2070.0, "total_s": 5.6,
                      "plan": "cuda m16n128w8s2 (fake)"}
        print("e2e-llama8b: prefill 500 tokens x 32 layers 0.800 ms; decode ...")
    for name, q, kv in cases:
        us = speed * (5.0 + 1e-3 * sum(kv) + 1e-4 * sum(a * b for a, b in zip(q, kv)))
        out["cases"].append({"case": name, "us": round(us, 3), "kv_gbs": 1.0, "gflops": 1.0, "pct_bw": 0.0,
                             "pct_peak": 0.0, "plan": "cuda m16n64w4s2 splits 1 (fake)"})
        print("%-26s %12.1f" % (name, us), flush=True)
        time.sleep(0.02)
    with open(opt(args, "--json"), "w") as f:
        json.dump(out, f)
    return 0


def tune(args):
    a, b = (int(x) for x in opt(args, "--cells", "0:%d" % GRID_CELLS).split(":"))
    if a >= GRID_CELLS:
        print("anyattn: --cells from %d: the full grid has cells 0 to %d" % (a, GRID_CELLS - 1), file=sys.stderr)
        return 2
    b = min(b, GRID_CELLS)
    path = opt(args, "--out")
    with open(path, "w") as f:
        f.write("# anyattn 0.1.0 tune: backend cuda, grid %s, %d cells x %d candidates (config, KV splits)\n"
                "# device: %s\n# family: sm_99\n# date: 2026-01-01 00:00 UTC\n# driver: fake\n"
                "cell,num_seqs,num_tokens,mean_q,max_q,max_kv,head_dim,group,kv_bytes,config,splits,us,ok\n"
                % (opt(args, "--grid"), GRID_CELLS, CANDIDATES, DEVICE))
        for cell in range(a, b):
            for k in range(CANDIDATES):
                f.write("%d,%d,%d,1,1,%d,128,4,2,m16n64w4s2,%d,%.3f,1\n" % (cell, cell + 1, cell + 1, 512, k, 10.0 + k))
                f.flush()
                print("[%d/%d] full b%d cand %d 10.0 us" % ((cell - a) * CANDIDATES + k + 1, (b - a) * CANDIDATES,
                                                           cell, k), file=sys.stderr, flush=True)
            time.sleep(float(os.environ.get("FAKE_TUNE_SLEEP", "0")))
    for ext in (".json", ".h"):
        open(path[:-4] + ext, "w").write("{}" if ext == ".json" else "/* fake */\n")
    print("wrote %s" % path)
    return 0


def fit(args):
    path = opt(args, "--in")
    rows = [x for x in open(path).read().splitlines() if x[:1].isdigit()]
    if "--eval" in args:
        if not os.environ.get("ANYATTN_TREE"):
            print("anyattn: no tree serves device '%s' (sm_99)" % DEVICE, file=sys.stderr)
            return 1
        print("tree for %s (sm_99): loaded\ntree: %d of %d cells within 5%% of their best candidate"
              % (DEVICE, len(rows) // CANDIDATES, len(rows) // CANDIDATES))
        return 0
    for ext in (".json", ".h"):
        open(path[:-4] + ext, "w").write('{"fake": "%d rows"}' % len(rows) if ext == ".json" else "/* fake */\n")
    print("tree: 3 nodes (depth <= %s) over %d cells x %d configs" % (opt(args, "--depth"), len(rows) // CANDIDATES,
                                                                     CANDIDATES))
    return 0


def main(args):
    if args[:1] == ["--version"]:
        print("anyattn 0.1.0")
        return 0
    if args[:1] == ["info"]:
        info()
        return 0
    return {"bench": bench, "tune": tune, "fit": fit}[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
