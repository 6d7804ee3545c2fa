#!/usr/bin/env python3
"""ncu_regions.py: where one kernel's warps spend their time, from Nsight
Compute's per-instruction warp-state samples, by stall reason and by SASS
address range. No GPU needed: it reads the source page that
`dev/kernel_profile.sh` exports on the device
(`ncu -i R.ncu-rep --page source --csv --print-source sass`).

    python3 dev/ncu_regions.py prof/d80_sass.csv                      # reasons, landmarks, top instructions
    python3 dev/ncu_regions.py prof/d80_sass.csv --per 3438 \\
        --range 'issue=0x161f0-0x16920' --range 'wait=0x16920-0x16930'

Addresses are offsets from the kernel's first instruction (as in
`cuobjdump -sass` and `dev/sass_blocks.py`). --per C scales every share to C
cycles (e.g. the kernel's elapsed cycles over the tiles each SM runs: one warp's
time per tile); without it shares are percent of all samples. Landmarks are
the instructions that end one step of a pipelined loop and begin the next
(wgmma issue and waits, barriers, mbarrier waits, TMA issues, fences), listed
with their samples so that ranges can be chosen from them.
"""
import argparse
import collections
import csv
import sys

LANDMARKS = ("WARPGROUP", "BAR.", "SYNCS", "UTMALDG", "MEMBAR", "FENCE", "DEPBAR", "EXIT")


def num(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def load(path):
    """Rows of (offset, source, samples, executed, {reason: samples}) and the kernel's name."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    start = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if start is None:
        sys.exit(f"ncu_regions: {path} has no 'Address' header row (not an ncu source page export)")
    name = rows[0][1] if rows[0] and rows[0][0] == "Kernel Name" and len(rows[0]) > 1 else "?"
    head = rows[start]
    col = {k: i for i, k in enumerate(head)}
    for need in ("Source", "Warp Stall Sampling (All Samples)", "Instructions Executed"):
        if need not in col:
            sys.exit(f"ncu_regions: column {need!r} missing from {path}")
    reasons = [k for k in head if k.startswith("stall_") and "(Not Issued)" not in k]
    out, base = [], None
    for r in rows[start + 1:]:
        if len(r) < len(head) or not r[0].strip():
            continue
        try:
            addr = int(r[0], 16) if r[0].lower().startswith("0x") else int(r[0])
        except ValueError:
            continue
        base = addr if base is None else base
        out.append((addr - base, r[col["Source"]].strip(), num(r[col["Warp Stall Sampling (All Samples)"]]),
                    num(r[col["Instructions Executed"]]), {k[6:]: num(r[col[k]]) for k in reasons}))
    if not out:
        sys.exit(f"ncu_regions: no instructions in {path}")
    return name, out


def parse_range(text):
    try:
        label, span = text.split("=", 1)
        lo, hi = (int(x, 16) for x in span.split("-", 1))
    except ValueError:
        sys.exit(f"ncu_regions: --range {text!r}: want name=0xLO-0xHI")
    if hi <= lo:
        sys.exit(f"ncu_regions: --range {text!r}: empty")
    return label, lo, hi


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--per", type=float, default=0.0, help="scale shares to this many cycles")
    ap.add_argument("--range", action="append", default=[], help="name=0xLO-0xHI (offsets)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--no-landmarks", action="store_true")
    a = ap.parse_args()
    name, ins = load(a.csv)
    total = sum(x[2] for x in ins)
    if total <= 0:
        sys.exit("ncu_regions: no warp-state samples (profile with --section SourceCounters)")
    unit = "cyc" if a.per > 0 else "%"
    scale = (a.per if a.per > 0 else 100.0) / total

    def fmt(c, n=5):
        return " ".join(f"{k}={v * scale:.0f}" for k, v in c.most_common(n) if v > 0)

    reasons = collections.Counter()
    for x in ins:
        reasons.update(x[4])
    print(f"{name}\n{len(ins)} instructions, {total:.0f} samples; shares in {unit}")
    print("by reason: " + fmt(reasons, 12))
    if not a.no_landmarks:
        print("\nlandmarks (offset, share, executed, instruction):")
        for off, src, s, e, _ in ins:
            if any(m in src for m in LANDMARKS) and e > 0:
                print(f"  {off:#07x} {s * scale:7.1f} {e:12.0f}  {src[:80]}")
    for spec in a.range:
        label, lo, hi = parse_range(spec)
        c, s, e = collections.Counter(), 0.0, 0.0
        for off, _, smp, ex, st in ins:
            if lo <= off < hi:
                s += smp
                e += ex
                c.update(st)
        print(f"range {label} [{lo:#x}, {hi:#x}): {s * scale:.1f} {unit}, {e:.0f} executed; {fmt(c)}")
    print(f"\ntop {a.top} instructions (offset, share, executed, instruction, reasons):")
    for off, src, s, e, st in sorted(ins, key=lambda x: -x[2])[: a.top]:
        print(f"  {off:#07x} {s * scale:7.1f} {e:12.0f}  {src[:60]:60s} {fmt(collections.Counter(st), 3)}")


if __name__ == "__main__":
    main()
