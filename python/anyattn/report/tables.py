"""The numbers of the report, computed once from results.json: per case and contender the time,
K/V bandwidth and compute rate (tools/bench.c's formulas), each as a percent of the ceilings
measured in the same workload's run, and the ratio peer time / anyattn time; then the CSV rows and
the Markdown tables made from them.
"""

import csv
import math

WORKLOAD_ORDER = ["decode", "prefill", "mixed", "ibm", "e2e-llama8b", "user"]
CSV_FIELDS = ["workload", "case", "kind", "num_seqs", "num_tokens", "contender", "label", "status", "us",
              "kv_gbs", "gflops", "pct_bw", "pct_peak", "vs_anyattn", "max_err", "plan", "note", "error"]


def units(gpu):
    """(bandwidth unit, divisor from GB/s, compute unit, divisor from GFLOP/s)."""
    return ("TB/s", 1e3, "TFLOP/s", 1e3) if gpu else ("GB/s", 1.0, "GFLOP/s", 1.0)


def ceilings_of(store, workload):
    b = store.workloads.get(workload, {}).get("bench", {})
    if b.get("bandwidth_gbs"):
        return b["bandwidth_gbs"], b["peak_gflops"]
    return store.ceilings() or (0.0, 0.0)


def figures(case, us, ceil):
    """GB/s of K/V, GFLOP/s and both percentages for a time of `us` on `case` (a record)."""
    bw = case["kv_bytes"] / (us * 1e-6) / 1e9
    fl = case["flops"] / (us * 1e-6) / 1e9
    return {"kv_gbs": bw, "gflops": fl, "pct_bw": 100 * bw / ceil[0] if ceil[0] else 0.0,
            "pct_peak": 100 * fl / ceil[1] if ceil[1] else 0.0}


def contenders(store, workload):
    """anyattn first, then every peer with a result in this workload, in the order first seen."""
    names = []
    for c in store.workloads.get(workload, {}).get("cases", []):
        for n in c["results"]:
            if n not in names:
                names.append(n)
    return sorted(names, key=lambda n: n != "anyattn")


def label(store, name):
    if name == "anyattn":
        return "anyattn"
    return store.data["peers"].get(name, {}).get("label", name)


def case_rows(store, workload):
    """One dict per (case, contender) with every CSV field."""
    ceil = ceilings_of(store, workload)
    rows = []
    for c in store.workloads.get(workload, {}).get("cases", []):
        base = c["results"].get("anyattn", {})
        for name in contenders(store, workload):
            r = c["results"].get(name)
            if r is None:
                continue
            row = {"workload": workload, "case": c["name"], "kind": c["kind"], "num_seqs": c["num_seqs"],
                   "num_tokens": c["num_tokens"], "contender": name, "label": label(store, name),
                   "status": r["status"], "us": r.get("us"), "max_err": r.get("max_err"),
                   "plan": r.get("plan", ""), "note": r.get("note", ""), "error": r.get("error", "")}
            if r["status"] == "ok":
                row.update(figures(c, r["us"], ceil))
                if name != "anyattn" and base.get("status") == "ok":
                    row["vs_anyattn"] = r["us"] / base["us"]
            rows.append(row)
    return rows


def all_rows(store):
    rows = []
    for w in ordered_workloads(store):
        rows += case_rows(store, w)
    return rows


def ordered_workloads(store):
    ws = list(store.workloads)
    return sorted(ws, key=lambda w: WORKLOAD_ORDER.index(w) if w in WORKLOAD_ORDER else len(WORKLOAD_ORDER))


def write_csv(store, path):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for row in all_rows(store):
            w.writerow({k: _csv_value(row.get(k)) for k in CSV_FIELDS})


def _csv_value(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return "%.6g" % v
    return v


def num(x, digits=None):
    """A figure with about three significant digits (more below 1), as the tables print it."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if digits is None:
        digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2
    return "%.*f" % (digits, x)


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def peer_summary(store):
    """Per workload and peer: cases timed, wrong, refused or failed, and the geometric mean of
    peer time / anyattn time over the cases both timed."""
    out = []
    for w in ordered_workloads(store):
        rows = case_rows(store, w)
        for name in contenders(store, w):
            if name == "anyattn":
                continue
            mine = [r for r in rows if r["contender"] == name]
            count = {s: sum(r["status"] == s for r in mine) for s in ("ok", "wrong", "refused", "error")}
            gm = geomean([r.get("vs_anyattn") for r in mine])
            out.append({"workload": w, "contender": name, "label": label(store, name), "geomean": gm, **count})
    return out
