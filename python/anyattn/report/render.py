"""report.md, report.html, results.csv and the plots, made from results.json alone (so a partial
or resumed run renders the same way): the facts of the run, the ceilings, which peers ran, a table
per workload with every case as time, % of ceiling and each peer's time over anyattn's, the plots,
and the tuning campaign's outcome.
"""

import os

from . import plots, tables
from .document import Doc
from .environment import tree_missing
from .tables import ceilings_of, num, units

READING = ("How to read: µs are medians per call; K/V bandwidth counts the K and V bytes of every sequence's "
           "keys and compute 4 · q heads · head dim per visible (query, key) pair, each as a percent of the "
           "ceilings `anyattn bench` measured in the same workload's run. A peer column gives the peer's time "
           "over anyattn's (above 1: anyattn is faster) with the peer's µs. Every contender's output is checked "
           "against a float64 reference on sampled rows first (anyattn's by `anyattn bench` itself): a wrong "
           "output, a refusal or an error posts no time and is footnoted. Dense peers (torch SDPA) run one call "
           "per group of equal lengths on contiguous copies; paged peers read the same shuffled pages as anyattn.")


def ratio(x):
    """A ratio with three significant digits: 1.18, 12.3, 0.0412."""
    return "%.3g" % x if x < 100 else "%.0f" % x


def config_of(plan):
    words = (plan or "").split()
    return words[1] if len(words) > 1 and words[0] in ("cuda", "hip") else (plan or "").split(",")[0]


class Notes:
    """Footnotes of one table: each distinct message once, numbered."""

    def __init__(self):
        self.items = []

    def mark(self, who, msg):
        text = "%s: %s" % (who, msg)
        if text not in self.items:
            self.items.append(text)
        return "[%d]" % (self.items.index(text) + 1)

    def lines(self):
        return ["[%d] %s" % (i + 1, t) for i, t in enumerate(self.items)]


def peer_cell(store, name, r, base, notes):
    s = r["status"]
    if s == "ok":
        if base.get("status") == "ok":
            return "%sx (%s µs)" % (ratio(r["us"] / base["us"]), num(r["us"], 1))
        return "%s µs" % num(r["us"], 1)
    if s == "wrong":
        return "wrong output " + notes.mark(tables.label(store, name), "wrong output, worst error %.3g (tolerance "
                                            "scale 1)" % r.get("max_err", float("nan")))
    return ("refused " if s == "refused" else "error ") + notes.mark(tables.label(store, name), r.get("error", s))


def workload_table(store, workload, gpu):
    """(head, rows, footnotes) of one workload."""
    cases = store.workloads[workload].get("cases", [])
    ceil = ceilings_of(store, workload)
    bw_unit, bw_div, fl_unit, fl_div = units(gpu)
    kinds = {c["kind"] for c in cases}
    show_bw, show_fl = kinds != {"prefill"}, kinds != {"decode"}
    peers = [n for n in tables.contenders(store, workload) if n != "anyattn"]
    head = ["case", "anyattn µs"] + (["K/V " + bw_unit, "% bw"] if show_bw else []) + \
           ([fl_unit, "% peak"] if show_fl else []) + ["config"] + ["vs " + tables.label(store, n) for n in peers]
    notes, rows = Notes(), []
    for c in cases:
        a = c["results"].get("anyattn", {})
        row = [c["name"]]
        if a.get("status") == "ok":
            f = tables.figures(c, a["us"], ceil)
            row.append(num(a["us"], 1))
            row += [num(f["kv_gbs"] / bw_div), num(f["pct_bw"], 1)] if show_bw else []
            row += [num(f["gflops"] / fl_div), num(f["pct_peak"], 1)] if show_fl else []
            row.append(config_of(a.get("plan", "")))
        else:
            msg = notes.mark("anyattn", a.get("error", "not run"))
            row += [("skipped " if a.get("status") == "refused" else "failed ") + msg]
            row += [""] * ((2 if show_bw else 0) + (2 if show_fl else 0) + 1)
        row += [peer_cell(store, n, c["results"][n], a, notes) if n in c["results"] else "" for n in peers]
        rows.append(row)
    return head, rows, notes.lines()


def sums_line(store, workload):
    """Sum of medians over the cases every timed contender ran, when a workload has many cases."""
    cases = store.workloads[workload].get("cases", [])
    names = [n for n in tables.contenders(store, workload)
             if any(c["results"].get(n, {}).get("status") == "ok" for c in cases)]
    common = [c for c in cases if all(c["results"].get(n, {}).get("status") == "ok" for n in names)]
    if len(cases) <= 12 or not common or not names:
        return ""
    parts = ["%s %s ms" % (tables.label(store, n), num(sum(c["results"][n]["us"] for c in common) / 1e3, 2))
             for n in names]
    return "Sum of medians over the %d cases every timed contender ran: %s." % (len(common), ", ".join(parts))


def header(doc, store):
    env, data = store.data["env"], store.data
    if data.get("status", "").startswith(("interrupted", "failed")):
        doc.p("**Partial report** (%s): the tables hold what was measured before that; running the same "
              "command again into this folder continues (`--fresh` starts over)." % data.get("status"))
    if data.get("status") == "complete, with failures":
        doc.p("**Some steps failed, or anyattn posted no time for a case**: see the footnotes and log.txt.")
    missing = tree_missing(env) if env else ""
    if missing:
        doc.p("**%s**" % missing)
    pk = env.get("packages", {})
    facts = [("device", "%s (%s backend, device %s)" % (env.get("device"), env.get("backend"), env.get("device_index"))),
             ("config selection", env.get("selection", "")),
             ("driver", env.get("driver", "")), ("CUDA runtime (torch)", env.get("cuda_runtime", "")),
             ("anyattn", "CLI %s, binding %s (%s)" % (env.get("anyattn_cli"), env.get("anyattn_binding"),
                                                      env.get("library", ""))),
             ("commit", env.get("commit", "")), ("date", env.get("date", "")),
             ("command", "`%s`" % env.get("command", "")), ("Python", env.get("python", "")),
             ("packages", ", ".join("%s %s" % kv for kv in pk.items())),
             ("threads", env.get("omp_num_threads") or str(env.get("cpus", "")))]
    doc.table(["", ""], [(k, v) for k, v in facts if v not in ("", None)])


def ceilings_section(doc, store, gpu):
    bw_unit, bw_div, fl_unit, fl_div = units(gpu)
    rows = []
    for w in tables.ordered_workloads(store):
        b = store.workloads[w].get("bench", {})
        if b.get("bandwidth_gbs"):
            rows.append((w, num(b["bandwidth_gbs"] / bw_div), num(b["peak_gflops"] / fl_div), b.get("date", "")))
    if rows:
        what = ("device-to-device copy (read + write) and cuBLAS bf16 8192³ matmul" if gpu
                else "streaming read of 1 GiB and fp32 FMA chains")
        doc.h(2, "Ceilings")
        doc.p("Measured by `anyattn bench` at the start of each workload's run: %s." % what)
        doc.table(["workload run", "bandwidth " + bw_unit, "compute " + fl_unit, "date"], rows)
    theirs = store.data.get("torch_ceilings")
    if theirs:
        doc.p("The same through torch, timed like the peers: %s." % ", ".join(
            "%s %s" % (c["case"], "%.2f TB/s" % c["TB/s"] if "TB/s" in c else "%.0f TFLOP/s" % c["TFLOP/s"])
            for c in theirs))


def peers_section(doc, store):
    peers = store.data["peers"]
    if not peers:
        return
    doc.h(2, "Peers")
    rows = [(p["label"], "`%s`" % n, p.get("version") or "", "measured" if p["available"] else "skipped: " + p["why"])
            for n, p in peers.items()]
    doc.table(["peer", "id", "version", "in this run"], rows)
    summary = tables.peer_summary(store)
    if summary:
        doc.p("Per workload: cases each peer timed, and the geometric mean of its time over anyattn's "
              "(above 1: anyattn faster) over the cases both timed.")
        doc.table(["workload", "peer", "timed", "wrong", "refused", "error", "geo-mean peer / anyattn"],
                  [(s["workload"], s["label"], s["ok"], s["wrong"], s["refused"], s["error"],
                    "%.2fx" % s["geomean"] if s["geomean"] else "–") for s in summary])


def e2e_section(doc, store, gpu):
    b = store.workloads["e2e-llama8b"].get("bench", {})
    e = b.get("e2e")
    if not e:
        doc.p("No e2e figures (anyattn bench exited %s; see log.txt)." % b.get("rc"))
        return
    bw_unit, bw_div, _, _ = units(gpu)
    doc.p("Batch 1: a 500-token prompt prefilled per layer, then 12,800 decode steps, each one graph replay "
          "of the 32 layers' calls (anyattn only).")
    doc.table(["attention total", "prefill", "decode", "per call", "K/V " + bw_unit, "% of bandwidth", "config"],
              [("%.3f s" % e["total_s"], "%.3f ms" % e["prefill_ms"], "%.3f s" % e["decode_s"],
                "%.2f µs" % e["us_per_call"], num(e["kv_gbs"] / bw_div),
                num(100 * e["kv_gbs"] / b["bandwidth_gbs"], 1), config_of(e["plan"]))])


def workload_section(doc, store, workload, folder, gpu, with_plots):
    w = store.workloads[workload]
    doc.h(2, workload if workload != "user" else "your shapes (%s)" % w.get("bench", {}).get("shape", ""))
    b = w.get("bench", {})
    if w.get("status") != "done":
        doc.p("Status: %s." % w.get("status"))
    if workload == "user":
        doc.p("anyattn runs through its Python binding here (`anyattn bench` takes the standard shape only); "
              "the ceilings are those of %s." % ("`%s`" % b["command"] if b.get("command") else
                                                 "the latest `anyattn bench` run in this folder"))
    elif b.get("command"):
        doc.p("anyattn: `%s` (`%s`)." % (b["command"], b.get("file", "")))
    if workload == "e2e-llama8b":
        e2e_section(doc, store, gpu)
        return
    if not w.get("cases"):
        doc.p("No cases.")
        return
    head, rows, notes = workload_table(store, workload, gpu)
    doc.table(head, rows)
    doc.bullets(notes)
    line = sums_line(store, workload)
    if line:
        doc.p(line)
    if with_plots:
        workload_plots(doc, store, workload, folder, gpu)


def workload_plots(doc, store, workload, folder, gpu):
    doc.image(plots.workload_bars(store, workload, folder), "%s: time per call" % workload)
    if workload == "decode":
        doc.image(plots.decode_bandwidth(store, folder, gpu), "decode bandwidth against context length")
    if workload == "prefill":
        doc.image(plots.prefill_compute(store, folder, gpu), "prefill compute rate against length")
    if workload == "ibm":
        for p in plots.ibm_heatmaps(store, folder):
            doc.image(p, "IBM grid heat map")


def files_section(doc, store):
    doc.h(2, "Files")
    doc.bullets(["`report.md`, `report.html` (the same, self-contained): this report",
                 "`results.csv`: one row per case and contender (status, µs, figures, % of ceilings, ratio to anyattn)",
                 "`results.json`: everything measured, with the run's facts; the tables are made from it",
                 "`data/anyattn_<workload>.json`: `anyattn bench --json` as written; `log.txt`: every command and line",
                 "`plots/*.png`: the plots above"] + (["`tune/`: the sweep chunks, the merged sweep, the fitted tree "
                                                       "(`.json`, `.h`) and `state.json`"] if store.data.get("tune") else []))


def build(store, folder, with_plots=True):
    from .tune import tune_section
    env = store.data["env"]
    gpu = env.get("backend", "cpu") != "cpu"
    doc = Doc("anyattn report: %s" % (env.get("device") or "unknown device"))
    header(doc, store)
    doc.p(READING)
    ceilings_section(doc, store, gpu)
    peers_section(doc, store)
    for w in tables.ordered_workloads(store):
        workload_section(doc, store, w, folder, gpu, with_plots)
    if store.data.get("tune"):
        tune_section(doc, store, folder, with_plots)
    files_section(doc, store)
    return doc


def write_all(store, folder, with_plots=True):
    """report.md, report.html and results.csv from the store (plots made on the way)."""
    from .store import atomic_write
    doc = build(store, folder, with_plots)
    atomic_write(os.path.join(folder, "report.md"), doc.markdown())
    atomic_write(os.path.join(folder, "report.html"), doc.html(folder))
    tables.write_csv(store, os.path.join(folder, "results.csv"))
