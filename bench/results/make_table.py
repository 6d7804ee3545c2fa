#!/usr/bin/env python3
"""make_table.py: bench/results/README.md from the data files beside it.

Each folder bench/results/<device>/ holds the latest file of each workload as
`anyattn bench --json` writes it (decode.json, decode_graph.json, prefill.json,
mixed.json, ibm.json, e2e-llama8b.json, e2e-llama8b-step.json; a GPU folder also the fp8 step of
bench/run_h200.sh: {decode_graph,prefill}_kv_{as-q,fp8}.json, prefill_kv_fp8_staged.json and
headdim_d<D>_kv_{as-q,fp8,fp8_staged}.json; a CPU
folder also prefill_f32.json),
the peers of bench/peers.py or, for a CPU, bench/cpu_peers.py (peers.json) and the sweep a committed tree was fitted on (*.csv, from
`anyattn tune`). Every file says when, at which commit, on which device and by
which command it was measured: in its own fields (bench --json, peers.py), its
`# ` header lines (tune's CSV), or a sidecar <name>.meta.json beside it. A
sidecar may only add what the file lacks; a field given twice with different
values, a sidecar without its file, or a file without the four facts is an
error.

    python3 bench/results/make_table.py            # rewrite README.md
    python3 bench/results/make_table.py --check    # generate into a temp file, compare (ctest results_table)

Python 3 standard library only; the output depends on the data alone.
"""
import argparse
import difflib
import json
import math
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FACTS = ("date", "commit", "device", "command")
ORDER = ["decode", "decode_graph", "prefill", "prefill_f32", "mixed", "e2e-llama8b", "e2e-llama8b-step",
         "e2e-llama8b-step-newkeys", "ibm", "decode_graph_kv_as-q", "decode_graph_kv_fp8", "prefill_kv_as-q",
         "prefill_kv_fp8", "prefill_kv_fp8_staged", "default"]
PEER_NAMES = {"flash": "FA2", "cudnn": "cuDNN"}
SAME_RUN_MINUTES = 60  # peers count as the same run: same commit and device, dates this close


class DataError(Exception):
    pass


def short_commits(text):
    return re.sub(r"\b([0-9a-f]{7})[0-9a-f]{33}\b", r"\1", text)


def minutes(date):
    """'YYYY-MM-DD HH:MM UTC' as minutes since the epoch, None if another format."""
    m = re.match(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2})", date or "")
    if not m:
        return None
    y, mo, d, h, mi = (int(x) for x in m.groups())
    # days from civil (proleptic Gregorian), enough to order and subtract dates
    y -= mo <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (mo + (-3 if mo > 2 else 9)) + 2) // 5 + d - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy
    return (days * 24 + h) * 60 + mi


def csv_header(path):
    facts = {}
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                break
            m = re.match(r"# (device|date): (.*)", line.rstrip("\n"))
            if m:
                facts[m.group(1)] = m.group(2)
    return facts


def load_sweep(path):
    """(cells, candidates, us[cell][cand]) as `anyattn fit` reads a sweep: columns by the header's names, a
    cell keyed by its id and shape (head_dim, group, kv_bytes), a row with ok != 1 infinitely slow."""
    us, cands, cells, col = {}, [], set(), None
    with open(path) as f:
        for line in f:
            if line.startswith("cell,"):
                col = {name: i for i, name in enumerate(line.rstrip("\n").split(","))}
                continue
            if line.startswith("#") or not line.strip():
                continue
            if col is None:
                raise DataError(f"{path}: a sweep row before the header")
            row = line.rstrip("\n").split(",")
            cell = (int(row[0]),) + tuple(row[col[k]] for k in ("head_dim", "group", "kv_bytes") if k in col)
            cand = (row[col["config"]], int(row[col["splits"]]))
            if cand not in cands:
                cands.append(cand)
            cells.add(cell)
            us[(cell, cand)] = float(row[col["us"]]) if row[col["ok"]].strip() == "1" else math.inf
    return sorted(cells), cands, us


def provenance(path, inline, sidecar_path):
    facts = {k: inline[k] for k in FACTS + ("note", "script") if inline.get(k) is not None}
    if os.path.exists(sidecar_path):
        with open(sidecar_path) as f:
            side = json.load(f)
        for k, v in side.items():
            if k in facts and facts[k] != v:
                raise DataError(f"{sidecar_path}: {k} {v!r} differs from {path}'s own {facts[k]!r}")
            facts[k] = v
    missing = [k for k in FACTS if not facts.get(k)]
    if missing:
        raise DataError(f"{path}: no {', '.join(missing)} (in the file or a sidecar {os.path.basename(sidecar_path)})")
    return facts


def load_gpu_dir(d):
    files = sorted(os.listdir(d))
    data = {}
    for name in files:
        path = os.path.join(d, name)
        if name == "report" and os.path.isdir(path):
            continue  # `anyattn report`'s folder: report_line() links it
        if name.endswith(".meta.json"):
            stem = name[: -len(".meta.json")]
            if not any(f in files for f in (stem + ".json", stem + ".csv")):
                raise DataError(f"{path}: a sidecar without {stem}.json or {stem}.csv")
            continue
        stem, ext = os.path.splitext(name)
        side = os.path.join(d, stem + ".meta.json")
        if ext == ".json":
            with open(path) as f:
                obj = json.load(f)
            data[stem] = {"kind": "peers" if "results" in obj else "bench", "obj": obj,
                          "facts": provenance(path, obj, side)}
        elif ext == ".csv":
            data[stem] = {"kind": "sweep", "path": path, "facts": provenance(path, csv_header(path), side)}
        else:
            raise DataError(f"{path}: neither .json nor .csv data")
    return data


def report_line(gpu_dir, gpu):
    """The GPU section's line for its `anyattn report` folder (report/: report.md, results.json), if any."""
    path = os.path.join(gpu_dir, "report", "results.json")
    if not os.path.isdir(os.path.join(gpu_dir, "report")):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
        env = obj["env"]
        facts = {k: env[k] for k in ("date", "commit", "device", "command")}
        status = obj["status"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DataError(f"{path}: not a report's results.json ({e})")
    if not all(isinstance(v, str) for v in facts.values()):
        raise DataError(f"{path}: env date, commit, device and command must be strings")
    if not os.path.isfile(os.path.join(gpu_dir, "report", "report.md")):
        raise DataError(f"{gpu_dir}/report: results.json without report.md")
    return [f"The report of record, anyattn beside every peer importable there with plots: "
            f"[{gpu}/report/report.md]({gpu}/report/report.md) ({status}; {cell(facts['date'])}, commit "
            f"{cell(facts['commit'])}, {cell(facts['device'])}; `{cell(facts['command'])}`).", ""]


def cell(text):
    """Text for a Markdown table cell."""
    return str(text).replace("|", "\\|")


def fmt(x, digits):
    return f"{x:.{digits}f}"


def facts_line(gpu, name, facts):
    line = (f"`{gpu}/{name}`: {facts['date']}, commit {short_commits(facts['commit'])}, "
            f"{facts['device']}; `{facts['command']}`")
    if facts.get("script"):
        line += f" (in `{facts['script']}`)"
    return line


def bench_section(gpu, stem, entry, peers):
    obj, facts = entry["obj"], entry["facts"]
    gpu_units = obj.get("backend") != "cpu"
    bw_unit, bw_div = ("TB/s", 1e3) if gpu_units else ("GB/s", 1.0)
    fl_unit, fl_div = ("TFLOP/s", 1e3) if gpu_units else ("GFLOP/s", 1.0)
    workload = obj.get("workload", stem)
    title = ("cases (" + stem + ")" if workload == "default" else workload) + (", graph replay" if obj.get("graph") else "")
    if obj.get("dtype", "bf16") != "bf16":
        title += ", " + obj["dtype"]
    if "--prior-writes new-keys" in facts.get("command", ""):
        title += ", prior_writes NEW_KEYS"
    hd = re.search(r"--head-dim (\d+)", facts.get("command", ""))
    if hd:
        title += ", head dim " + hd.group(1)
    if obj.get("kv_dtype"):
        title += ", " + obj["kv_dtype"] + " cache"
    st = re.search(r"--stage-kv (\d+)", facts.get("command", ""))
    if st:
        title += ", staged to 16-bit (limits.stage_kv_tokens " + st.group(1) + ")"
    out = [f"### {title}", "", facts_line(gpu, stem + ".json", facts) + "  "]
    cases = obj.get("cases", [])
    beside = any("ceilings" in c for c in cases)
    if beside:  # the CPU bench samples its ceilings before every timed call
        out.append(f"ceilings at the start of the run: bandwidth {fmt(obj['bandwidth_gbs'] / bw_div, 2)} {bw_unit}, "
                   f"paged read {fmt(obj['paged_bandwidth_gbs'] / bw_div, 2)} {bw_unit}, "
                   f"compute {fmt(obj['peak_gflops'] / fl_div, 0)} {fl_unit}; each case's percentages are medians "
                   "over its calls of the call's figure over the ceilings sampled just before it (their medians in "
                   "the ceiling columns)")
    else:
        out.append(f"ceilings in the same run: bandwidth {fmt(obj['bandwidth_gbs'] / bw_div, 2)} {bw_unit}, "
                   f"compute {fmt(obj['peak_gflops'] / fl_div, 0)} {fl_unit}")
    if facts.get("note"):
        out.append("")
        out.append(f"Note: {facts['note']}.")
    out.append("")
    if "e2e" in obj and "step_total_s" in obj["e2e"]:
        out += e2e_step_table(obj, bw_unit, bw_div)
    elif "e2e" in obj:
        e = obj["e2e"]
        out += ["| attention total | prefill | decode | per call | K/V " + bw_unit + " | % of bandwidth | config |",
                "| --- | --- | --- | --- | --- | --- | --- |",
                f"| {fmt(e['total_s'], 3)} s | {fmt(e['prefill_ms'], 3)} ms | {fmt(e['decode_s'], 3)} s | "
                f"{fmt(e['us_per_call'], 2)} µs | {fmt(e['kv_gbs'] / bw_div, 2)} | "
                f"{fmt(100 * e['kv_gbs'] / obj['bandwidth_gbs'], 1)} | {config_of(e.get('choice') or e['plan'])} |", ""]
    if not cases:
        return out
    kinds = {c["case"].split()[0] for c in cases}
    show_bw, show_fl = kinds != {"prefill"}, kinds != {"decode"}
    peer_names = []
    dtype = obj.get("dtype", "bf16")

    def peer_of(r):
        """A peer's measurement of this file's cases: same dtype (CPU peers name theirs; GPU peers are bf16),
        not a ceiling, and not anyattn itself timed beside the peer (cpu_peers.py records that too)."""
        return r["what"] not in ("ceiling", "anyattn") and r.get("dtype", "bf16") == dtype
    if peers and not obj.get("graph"):
        names = {c["case"] for c in cases}
        for r in peers["obj"]["results"]:
            if peer_of(r) and r["case"] in names and "us" in r and r["what"] not in peer_names:
                peer_names.append(r["what"])
    head = ["case", "µs"]
    if show_bw:
        head += [f"K/V {bw_unit}", "% of bandwidth"]
        if beside:
            head += ["% of paged read", f"read / paged read {bw_unit}"]
    if show_fl:
        head += [fl_unit, "% of compute"]
        if beside:
            head += [f"compute {fl_unit}"]
    head.append("config")
    head += [f"vs {PEER_NAMES.get(p, p)}" for p in peer_names]
    out += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for c in cases:
        row = [c["case"], fmt(c["us"], 1)]
        ceil = c.get("ceilings")
        if show_bw:
            row += [fmt(c["kv_gbs"] / bw_div, 2), fmt(c["pct_bw"], 1)]
            if beside:
                row += [fmt(c["pct_paged"], 1), f"{fmt(ceil['bandwidth_gbs'] / bw_div, 1)} / "
                        f"{fmt(ceil['paged_bandwidth_gbs'] / bw_div, 1)}"] if ceil else ["–", "–"]
        if show_fl:
            row += [fmt(c["gflops"] / fl_div, 1 if c["gflops"] / fl_div < 100 else 0), fmt(c["pct_peak"], 1)]
            if beside:
                row += [fmt(ceil["peak_gflops"] / fl_div, 0) if ceil else "–"]
        row.append(config_of(c.get("choice") or c["plan"]))
        for p in peer_names:
            r = next((r for r in peers["obj"]["results"] if r["what"] == p and r["case"] == c["case"] and peer_of(r)),
                     None)
            row.append(f"{r['us'] / c['us']:.2f}x ({fmt(r['us'], 1)} µs)" if r and "us" in r else "–")
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    if len(cases) > 12:
        out += [f"{len(cases)} cases, sum of medians {fmt(sum(c['us'] for c in cases) / 1e3, 2)} ms.", ""]
    return out


def e2e_step_table(obj, bw_unit, bw_div):
    """e2e-llama8b-step: the attention figure (the step total less the in-between kernels alone) and the two
    totals it comes from."""
    e = obj["e2e"]
    return ["| attention total | prefill | decode attention (step total − in-between alone) | step total | "
            "in-between alone | per call | K/V " + bw_unit + " | % of bandwidth | config |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            f"| {fmt(e['total_s'], 3)} s | {fmt(e['prefill_ms'], 3)} ms | {fmt(e['decode_s'], 3)} s | "
            f"{fmt(e['step_total_s'], 3)} s | {fmt(e['between_alone_s'], 3)} s | {fmt(e['us_per_call'], 2)} µs | "
            f"{fmt(e['kv_gbs'] / bw_div, 2)} | {fmt(100 * e['kv_gbs'] / obj['bandwidth_gbs'], 1)} | "
            f"{config_of(e.get('choice') or e['plan'])} |", ""]


def config_of(plan):
    """The tile config a plan description names (its second word on a GPU), else the description."""
    words = plan.split()
    return words[1] if len(words) > 1 and words[0] in ("cuda", "hip") else plan.split(",")[0]


def peers_section(gpu, stem, entry):
    facts, res = entry["facts"], entry["obj"]["results"]
    out = [f"### peers", "", facts_line(gpu, stem + ".json", facts) + "  "]
    extra = {k: v for k, v in entry["obj"].items() if k not in ("results",) + FACTS + ("script", "note")}
    if extra:
        out.append(", ".join(f"{k} {v}" for k, v in sorted(extra.items())))
    cpu = any("dtype" in r for r in res)  # cpu_peers.py: anyattn and torch per case and dtype, in one process
    out += ["", "| peer | case | µs | figure |" + (" dtype | torch / anyattn (same process) |" if cpu else ""),
            "| --- | --- | --- | --- |" + (" --- | --- |" if cpu else "")]
    for r in res:
        if "error" in r:
            fig, us = "error: " + r["error"], "–"
        else:
            units = [(k, d) for k, d in (("TB/s", 2), ("TFLOP/s", 0), ("GB/s", 1), ("GFLOP/s", 0)) if k in r]
            fig = f"{fmt(r[units[0][0]], units[0][1])} {units[0][0]}"
            us = fmt(r["us"] if "us" in r else 1e3 * r["ms"], 1)
        row = f"| {PEER_NAMES.get(r['what'], r['what'])} | {r['case']} | {us} | {fig} |"
        if cpu:
            mine = next((a for a in res if a["what"] == "anyattn" and a["case"] == r["case"]
                         and a.get("dtype") == r.get("dtype") and "us" in a), None)
            ratio = f"{r['us'] / mine['us']:.2f}x" if mine and "us" in r and r["what"] != "anyattn" else "–"
            row += f" {r.get('dtype', '–')} | {ratio} |"
        out.append(row)
    out.append("")
    return out


def sweep_section(gpu, stem, entry):
    cells, cands, us = load_sweep(entry["path"])
    logs = {}
    for c in cands:
        vals = [us.get((i, c), math.inf) for i in cells]
        logs[c] = sum(math.log(v) for v in vals) if all(v < math.inf for v in vals) else math.inf
    fixed = min(cands, key=lambda c: logs[c])
    best = {i: min(us.get((i, c), math.inf) for c in cands) for i in cells}
    oracle = math.exp(sum(math.log(us[(i, fixed)] / best[i]) for i in cells) / len(cells))
    out = [f"### sweep {stem}", "", facts_line(gpu, stem + ".csv", entry["facts"]) + "  "]
    out.append(f"{len(cells)} cells x {len(cands)} candidates (config, KV splits; splits 0: the backend decides). "
               f"Best single candidate {fixed[0]}/{fixed[1]}; a per-cell oracle over all candidates is "
               f"{oracle:.3f}x faster than it (geometric mean).")
    if entry["facts"].get("note"):
        out += ["", f"Note: {entry['facts']['note']}."]
    out += ["", "| candidate | cells where best (ties count for each) | cells within 5% of best | "
            "geometric mean over best |",
            "| --- | --- | --- | --- |"]
    for c in cands:
        ratios = [us.get((i, c), math.inf) / best[i] for i in cells]
        wins = sum(r == 1.0 for r in ratios)
        near = sum(r <= 1.05 for r in ratios)
        finite = [r for r in ratios if r < math.inf]
        gm = math.exp(sum(math.log(r) for r in finite) / len(finite)) if finite else math.inf
        timed = "" if len(finite) == len(cells) else f" ({len(finite)} cells timed)"
        out.append(f"| {c[0]}/{c[1]} | {wins} | {near} | {gm:.3f}x{timed} |")
    out.append("")
    return out


def same_run(a, b):
    fa, fb = a["facts"], b["facts"]
    ma, mb = minutes(fa["date"]), minutes(fb["date"])
    return (fa["commit"] == fb["commit"] and fa["device"] == fb["device"] and ma is not None and mb is not None
            and abs(ma - mb) <= SAME_RUN_MINUTES)


def render(root):
    gpus = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not d.startswith("."))
    out = ["# Results", "",
           "Generated by `python3 bench/results/make_table.py` from the data files in the folders beside it; "
           "edit the data, not this file (ctest `results_table` fails when the two disagree). How each figure "
           "is measured and what it means: [docs/performance.md](../../docs/performance.md).", "",
           "Figures: µs are medians per call; K/V bandwidth counts the K and V bytes of every sequence's keys, "
           "compute counts 4 · heads · head_dim per visible (query, key) pair; each percentage is of the "
           "ceiling measured in the same run (GPU: device copy, read + write, and cuBLAS bf16 matmul; "
           "CPU: streaming read and fp32 FMA). "
           "\"vs\" columns are peer time over anyattn time (above 1: anyattn faster), for peers measured in "
           "the same run with stream launches. Configs are what run launched for the case's batch (`anyattn_run_describe`; the plan's choice in files written before bench recorded it; `anyattn info` lists them).", ""]
    for gpu in gpus:
        data = load_gpu_dir(os.path.join(root, gpu))
        out += [f"## {gpu}", ""] + report_line(os.path.join(root, gpu), gpu)
        stems = sorted(data, key=lambda s: (ORDER.index(s) if s in ORDER else len(ORDER), s))
        if not stems:  # a folder with only a report
            continue
        out += ["| file | date | commit | device | command |", "| --- | --- | --- | --- | --- |"]
        for s in stems:
            f = data[s]["facts"]
            ext = ".csv" if data[s]["kind"] == "sweep" else ".json"
            out.append(f"| `{s}{ext}` | {cell(f['date'])} | {cell(short_commits(f['commit']))} | "
                       f"{cell(f['device'])} | `{cell(f['command'])}` |")
        out.append("")
        peers = next((data[s] for s in stems if data[s]["kind"] == "peers"), None)
        for s in stems:
            e = data[s]
            if e["kind"] == "bench":
                out += bench_section(gpu, s, e, peers if peers and same_run(e, peers) else None)
        for s in stems:
            if data[s]["kind"] == "peers":
                out += peers_section(gpu, s, data[s])
        for s in stems:
            if data[s]["kind"] == "sweep":
                out += sweep_section(gpu, s, data[s])
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=HERE, help="the results folder (default: this script's)")
    ap.add_argument("--out", help="write here instead of ROOT/README.md")
    ap.add_argument("--check", action="store_true", help="generate into a temp file and compare with README.md")
    args = ap.parse_args()
    try:
        text = render(args.root)
    except (DataError, OSError, ValueError, KeyError) as e:
        print(f"make_table: {e}", file=sys.stderr)
        return 1
    readme = os.path.join(args.root, "README.md")
    if args.check:
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False, encoding="utf-8") as t:
            t.write(text)
        try:
            with open(t.name, encoding="utf-8") as f:
                new = f.read()
            old = open(readme, encoding="utf-8").read() if os.path.exists(readme) else ""
        finally:
            os.unlink(t.name)
        if new != old:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       "README.md (committed)", "README.md (from the data)"))
            print("make_table: bench/results/README.md differs from its data; run "
                  "python3 bench/results/make_table.py", file=sys.stderr)
            return 1
        print(f"make_table: README.md matches the data ({len(new.splitlines())} lines)")
        return 0
    with open(args.out or readme, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
