"""--tune: the tuning campaign for this device. `anyattn tune` sweeps the grid in chunks of cells
(--cells FROM:TO) into tune/, with tune/state.json recording what is done, so a run cut short
continues at the first cell it did not finish; then `anyattn fit` fits the tree on the merged sweep
and saves it as tune/tree_<name>.json (for ANYATTN_TREE or anyattn_tree_load) and .h (to compile it
in), and the tree's gain over the shipped selection is measured on the IBM grid (`anyattn bench`
without and with ANYATTN_TREE) and scored on the sweep (`anyattn fit --eval` of both trees).
"""

import json
import os
import re
import shutil
import time

from . import tool
from .progress import Progress, duration
from .store import atomic_write

QUICK = {"grid": "ibm", "cpu_cells": (0, 6)}
DEFAULT_CHUNK = {"gpu": 25, "cpu": 3}


def tree_name(device, gpu):
    """The tree's C name from the device name: "NVIDIA H200" -> "h200"."""
    if not gpu:
        return "cpu"
    name = re.sub(r"[^a-z0-9]+", "_", device.lower()).strip("_")
    return re.sub(r"^(nvidia|amd)_", "", name) or "tuned"


class Campaign:
    """The sweep's state: grid, cells (once known), candidates, chunks done; saved after every chunk."""

    def __init__(self, folder, grid, device, fresh):
        self.folder = folder
        self.path = os.path.join(folder, "state.json")
        self.s = {"grid": grid, "device": device, "total": None, "candidates": None, "next": 0, "chunks": [],
                  "seconds": 0.0}
        if fresh:   # the chunks of an earlier campaign go; a new one starts at cell 0
            for name in os.listdir(folder):
                if name.startswith(("sweep_", "chunk.part", "state.json")):
                    os.remove(os.path.join(folder, name))
        elif os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                old = json.load(f)
            if old.get("grid") == grid and old.get("device") == device:
                self.s = old

    def save(self):
        atomic_write(self.path, json.dumps(self.s, indent=1))

    def add_chunk(self, first, end, name, seconds):
        self.s["chunks"].append({"from": first, "to": end, "file": name, "seconds": seconds})
        self.s["next"] = end
        self.s["seconds"] += seconds
        self.save()


def csv_header_counts(lines):
    """(cells in the grid, candidates) from tune's first comment line."""
    for line in lines:
        m = re.search(r"grid \w+, (\d+) cells x (\d+) candidates", line)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None, None


def salvage(camp, part):
    """Keeps the finished cells of an interrupted chunk (a cell is finished once every candidate
    has its row) as a chunk of their own; returns the number of cells kept."""
    with open(part, encoding="utf-8") as f:
        lines = f.read().splitlines()
    os.remove(part)
    _, cands = csv_header_counts(lines)
    rows = [x for x in lines if x and x[0].isdigit()]
    cells = {}
    for x in rows:
        cells.setdefault(int(x.split(",", 1)[0]), []).append(x)
    end = camp.s["next"]
    while cands and len(cells.get(end, [])) >= cands:
        end += 1
    if end == camp.s["next"]:
        return 0
    head = [x for x in lines if not x or not x[0].isdigit()]
    kept = end - camp.s["next"]
    name = "sweep_%d_%d.csv" % (camp.s["next"], end)
    keep = [x for x in rows if int(x.split(",", 1)[0]) < end]
    atomic_write(os.path.join(camp.folder, name), "\n".join(head + keep) + "\n")
    camp.add_chunk(camp.s["next"], end, name, 0.0)
    return kept


def run_chunk(opts, ctx, camp, first, end, bar):
    """`anyattn tune --cells first:end` into a .part file; returns tune's exit code."""
    part = os.path.join(camp.folder, "chunk.part.csv")
    args = ["tune", "--backend", opts.backend, "--device", str(opts.device), "--grid", camp.s["grid"],
            "--out", part, "--name", "chunk", "--cells", "%d:%d" % (first, end)]
    if opts.tune_iters:
        args += ["--iters", str(opts.tune_iters)]
    per_cell = camp.s["candidates"] or 1

    def on_line(line):
        m = re.match(r"\[(\d+)/(\d+)\]", line)
        if m:
            done = int(m.group(1))
            bar.update(first + done / per_cell if camp.s["candidates"] else first, line[m.end():].strip()[:50])
    t0 = time.monotonic()
    rc, _ = tool.run(ctx.cli, args, ctx.log, on_line)
    for ext in (".json", ".h"):   # the chunk's own tree: only the merged sweep's counts
        p = part[:-len(".csv")] + ext
        if os.path.exists(p):
            os.remove(p)
    return rc, time.monotonic() - t0, part


def sweep(opts, ctx, camp):
    """Runs the chunks still to do. Returns "" when the grid is done, else why it stopped."""
    part = os.path.join(camp.folder, "chunk.part.csv")
    if os.path.exists(part):
        kept = salvage(camp, part)
        ctx.log.say("tune: an interrupted chunk left %d finished cell%s; continuing at cell %d"
                    % (kept, "" if kept == 1 else "s", camp.s["next"]))
    limit = opts.tune_cells[1] if opts.tune_cells else None
    bar = Progress(ctx.log, "tune cells", camp.s["total"] or opts.tune_chunk)
    while True:
        total = min(x for x in (camp.s["total"], limit) if x is not None) if (camp.s["total"] or limit) else None
        if total is not None and camp.s["next"] >= total:
            bar.finish("done")
            return ""
        first = camp.s["next"]
        end = first + opts.tune_chunk if total is None else min(first + opts.tune_chunk, total)
        bar.total = total or end
        rc, secs, part = run_chunk(opts, ctx, camp, first, end, bar)
        if not os.path.exists(part):
            return "anyattn tune --cells %d:%d exited %d without a sweep (log.txt)" % (first, end, rc)
        with open(part, encoding="utf-8") as f:
            cells, cands = csv_header_counts(f.readlines()[:3])
        camp.s["total"], camp.s["candidates"] = cells, cands
        if rc != 0:
            return "anyattn tune --cells %d:%d exited %d (a wrong output or a failed run: log.txt)" % (first, end, rc)
        end = min(end, cells or end)
        name = "sweep_%d_%d.csv" % (first, end)
        os.replace(part, os.path.join(camp.folder, name))
        camp.add_chunk(first, end, name, secs)
        bar.update(end, "chunk %d:%d in %s" % (first, end, duration(secs)))


def merge(camp):
    """The chunks concatenated in cell order (fit reads concatenated sweeps)."""
    path = os.path.join(camp.folder, "sweep_%s.csv" % camp.s["grid"])
    with open(path, "w", encoding="utf-8") as out:
        for c in sorted(camp.s["chunks"], key=lambda c: c["from"]):
            with open(os.path.join(camp.folder, c["file"]), encoding="utf-8") as f:
                out.write(f.read())
    return path


def fit(opts, ctx, sweep_csv, name):
    """`anyattn fit`, then the tree copied to tune/tree_<name>.json and .h; returns (json path, text)."""
    rc, lines = tool.run(ctx.cli, ["fit", "--in", sweep_csv, "--name", name, "--depth", str(opts.tune_depth)], ctx.log)
    base = sweep_csv[:-len(".csv")]
    if rc != 0 or not os.path.exists(base + ".json"):
        raise tool.ToolError("anyattn fit exited %d: %s" % (rc, lines[-1] if lines else ""))
    folder = os.path.dirname(sweep_csv)
    tree = os.path.join(folder, "tree_%s.json" % name)
    shutil.copyfile(base + ".json", tree)
    shutil.copyfile(base + ".h", os.path.join(folder, "tree_%s.h" % name))
    return os.path.abspath(tree), "\n".join(lines)


def evaluate(ctx, sweep_csv, tree):
    """`anyattn fit --eval` with the shipped selection and with the new tree: {which: text}."""
    out = {}
    for which, env in (("shipped", {}), ("tuned", {"ANYATTN_TREE": tree})):
        rc, lines = tool.run(ctx.cli, ["fit", "--in", sweep_csv, "--eval"], ctx.log, env_extra=env)
        out[which] = "\n".join(lines) if rc == 0 else "no score (exit %d): %s" % (rc, lines[-1] if lines else "")
    return out


def ibm_gain(opts, ctx, tree):
    """`anyattn bench --workload ibm` with the shipped selection, then with ANYATTN_TREE=tree, one
    after the other: {"ibm_shipped": {case: us}, "ibm_tuned": ..., plans}."""
    from .workloads import bench_args, run_bench
    args = bench_args(opts, "ibm")
    rows = tool.bench_list(ctx.cli, ctx.log, args)
    out = {}
    for which, env in (("shipped", None), ("tuned", {"ANYATTN_TREE": tree})):
        data, rc = run_bench(opts, ctx, "ibm " + which, args, len(rows), env, "tune_ibm_%s.json" % which)
        cases = (data or {}).get("cases", [])
        out["ibm_" + which] = {c["case"]: c["us"] for c in cases}
        out["plans_" + which] = {c["case"]: c["plan"] for c in cases}
        out["rc_" + which] = rc
    return out


def run_tune(opts, ctx):
    """The whole campaign into ctx.store.data["tune"]; returns its status."""
    folder = os.path.join(ctx.out, "tune")
    os.makedirs(folder, exist_ok=True)
    env = ctx.store.data["env"]
    camp = Campaign(folder, opts.tune_grid, env.get("device", ""), opts.fresh)
    t = ctx.store.data["tune"] = {"grid": opts.tune_grid, "status": "sweeping", "state": camp.s,
                                  "name": tree_name(env.get("device", ""), opts.gpu)}
    if not opts.gpu:
        ctx.log.say("tune: the CPU backend has one config and no tree; the campaign runs, its gain is 1 by construction")
    ctx.store.save()
    why = sweep(opts, ctx, camp)
    t["state"] = camp.s
    if why:
        t["status"] = "stopped: " + why
        ctx.store.save()
        return "failed"
    sweep_csv = merge(camp)
    t["tree"], t["fit"] = fit(opts, ctx, sweep_csv, t["name"])
    t["eval"] = evaluate(ctx, sweep_csv, t["tree"])
    t["status"] = "measuring the gain"
    ctx.store.save()
    t.update(ibm_gain(opts, ctx, t["tree"]))
    t["status"] = "done"
    ctx.store.save()
    ctx.log.say("tune: tree saved as %s (use it with ANYATTN_TREE=%s, or anyattn_tree_load)" % (t["tree"], t["tree"]))
    return "done"


def gain_rows(t):
    """(per-cell rows, geometric mean of shipped / tuned, cells faster, cells slower) over 5%."""
    from .tables import geomean
    shipped, tuned = t.get("ibm_shipped", {}), t.get("ibm_tuned", {})
    rows, ratios = [], []
    for name in shipped:
        if name not in tuned:
            continue
        r = shipped[name] / tuned[name]
        ratios.append(r)
        rows.append((name, "%.1f" % shipped[name], t["plans_shipped"].get(name, "").split(",")[0],
                     "%.1f" % tuned[name], t["plans_tuned"].get(name, "").split(",")[0], "%.3f" % r))
    return rows, geomean(ratios), sum(r > 1.05 for r in ratios), sum(r < 1 / 1.05 for r in ratios)


def tune_section(doc, store, folder, with_plots):
    from .plots import tune_heatmap
    t = store.data["tune"]
    s = t.get("state", {})
    doc.h(2, "Tuning campaign")
    doc.p("Grid `%s`: %s of %s cells swept over %s candidates in %d chunk%s, %s of sweeping. Status: %s." % (
        t["grid"], s.get("next", 0), s.get("total") or "?", s.get("candidates") or "?", len(s.get("chunks", [])),
        "" if len(s.get("chunks", [])) == 1 else "s", duration(s.get("seconds", 0)), t["status"]))
    if t.get("tree"):
        doc.p("The tree: `%s` (load it with `ANYATTN_TREE=%s` or `anyattn_tree_load(\"%s\")`; `anyattn info` then "
              "names it). To compile it in, copy `%s` to `src/choose/trees/` and list it in "
              "`src/choose/trees/trees.c`." % (t["tree"], t["tree"], t["tree"], t["tree"][:-5] + ".h"))
        doc.code(t.get("fit", ""))
    for which, text in t.get("eval", {}).items():
        doc.p("`anyattn fit --eval` of the %s selection on this sweep:" % which)
        doc.code(text)
    rows, gm, faster, slower = gain_rows(t)
    if rows:
        doc.p("Measured on the IBM grid, shipped selection then the tuned tree (`anyattn bench --workload ibm`, "
              "without and with ANYATTN_TREE): shipped / tuned time %.3fx (geometric mean over %d cells); the tree "
              "is over 5%% faster on %d cells and over 5%% slower on %d." % (gm or 0, len(rows), faster, slower))
        doc.table(["cell", "shipped µs", "shipped config", "tuned µs", "tuned config", "shipped / tuned"], rows)
        if with_plots:
            doc.image(tune_heatmap(store, folder), "IBM grid: shipped / tuned")
