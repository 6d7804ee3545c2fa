#!/usr/bin/env python3
"""trace_summary.py: summarise the stage timestamps an -DAA_TRACE build prints
(lines "TR bx by t0 d1..d6 dend" from the attention kernel, "RD ..." from the
reduce; d* in ns after the program's own entry t0). Calls are told apart by
gaps of > 20 us between entries. Per call: times after the call's first
program entry; printed as the median over calls (the first 3 skipped). The
stamps are in the kernel source up to commit abecc1c (trace_decode.sh)."""
import statistics as st
import sys

STAGES = ["wait", "work", "issue", "q", "tile0", "loop", "end"]


def main(path):
    rows = []
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) == 11 and f[0] in ("TR", "RD"):
            rows.append((int(f[3]), f[0], [int(x) for x in f[4:]]))
    rows.sort(key=lambda r: r[0])
    # Calls start at gaps of > 20 us between attention-program entries; a
    # reduce row belongs to the last call that started before it (its
    # programs enter as the attention programs end, which at long contexts
    # is more than 20 us after the call's start).
    calls, cur = [], []
    for r in rows:
        if r[1] == "RD" and (cur or calls):
            (cur if cur else calls[-1]).append(r)
            continue
        if cur and r[0] - max(x[0] for x in cur if x[1] == "TR") > 20000:
            calls.append(cur)
            cur = []
        cur.append(r)
    if cur:
        calls.append(cur)
    calls = calls[3:] if len(calls) > 6 else calls
    if not calls:
        print("no trace lines")
        return
    agg = {}
    for c in calls:
        t0 = min(r[0] for r in c if r[1] == "TR") if any(r[1] == "TR" for r in c) else c[0][0]
        tr = [r for r in c if r[1] == "TR"]
        rd = [r for r in c if r[1] == "RD"]
        vals = {"programs": len(tr), "entry spread": max(r[0] for r in tr) - t0 if tr else 0}
        for i, name in enumerate(STAGES):
            if name in ("end",):
                vals["TR end (max, from call start)"] = max(r[0] + r[2][6] - t0 for r in tr) if tr else 0
            vals["TR %s (median of own)" % name] = st.median(r[2][i] for r in tr) if tr else 0
        if rd:
            vals["RD entry (min, from call start)"] = min(r[0] for r in rd) - t0
            vals["RD after wait (min)"] = min(r[0] + r[2][0] for r in rd) - t0
            vals["RD end (max)"] = max(r[0] + r[2][6] for r in rd) - t0
        for k, v in vals.items():
            agg.setdefault(k, []).append(v)
    print("%d calls (median over calls, ns)" % len(calls))
    for k, v in agg.items():
        print("  %-36s %10.0f" % (k, st.median(v)))


if __name__ == "__main__":
    main(sys.argv[1])
