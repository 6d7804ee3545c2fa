"""One workload of the report: its cases from `anyattn bench --list`, anyattn's times from
`anyattn bench --json` (which checks sampled rows itself and posts no time for a wrong output),
then every available peer on the same batches; and the --cases batches, where anyattn runs through
its binding beside the peers.
"""

import os

from . import cases as cases_mod
from . import tool
from .measure import measure_case
from .progress import Progress

# --quick: a few small cases per workload, and fewer timed calls.
QUICK = {
    "cpu": {"decode": ["--cases", "1x512,4x1024"], "prefill": ["--cases", "p1x128,p1x384"],
            "mixed": [], "ibm": ["--filter", "b1 L128 |b4 L128 |b16 L128 "]},
    "gpu": {"decode": ["--cases", "1x8192,32x2048,64x8192"], "prefill": ["--cases", "p1x2048,p4x4096"],
            "mixed": [], "ibm": ["--filter", " L2048 "]},
}
QUICK_ITERS = {"cpu": 2, "gpu": 10}


def bench_args(opts, workload):
    """The `anyattn bench` options of a workload in this run (before --json/--list)."""
    args = ["--backend", opts.backend, "--device", str(opts.device), "--workload", workload]
    if opts.quick:
        args += QUICK["gpu" if opts.gpu else "cpu"].get(workload, [])
        args += ["--iters", str(QUICK_ITERS["gpu" if opts.gpu else "cpu"])]
    elif opts.iters:
        args += ["--iters", str(opts.iters)]
    return args


def run_bench(opts, ctx, workload, args, total, env_extra=None, json_name=None):
    """`anyattn bench ARGS --json` with a progress bar over its case lines; returns (the JSON or
    None, exit code). The JSON lands in data/."""
    path = os.path.join(ctx.out, "data", json_name or "anyattn_%s.json" % workload)
    bar = Progress(ctx.log, "anyattn %-8s" % workload, total)
    done = [0]

    def on_line(line):
        words = line.split()
        if words and words[0] in ("decode", "prefill", "mixed", "ibm", "user", "e2e-llama8b:"):
            done[0] += 1
            bar.update(done[0], line.split("  ")[0][:60])
    rc, _ = tool.run(ctx.cli, ["bench"] + args + ["--json", path], ctx.log, on_line, env_extra)
    bar.finish("exit %d" % rc)
    data = tool.read_json(path) if os.path.exists(path) else None
    return data, rc


def anyattn_results(bench, cases):
    """Each case's anyattn result from bench's JSON: ok with us and plan, or failed (no time)."""
    by_name = {c["case"]: c for c in (bench or {}).get("cases", [])}
    for c in cases:
        if c.skip:
            c.results["anyattn"] = {"status": "refused", "error": c.skip}
        elif c.name in by_name:
            b = by_name[c.name]
            c.results["anyattn"] = {"status": "ok", "us": b["us"], "plan": b.get("choice") or b["plan"],
                                    "source": "anyattn bench"}
        else:
            c.results["anyattn"] = {"status": "error", "error": "anyattn bench: no time (see data/bench log)"}


def bench_summary(bench, rc, workload):
    keys = ("version", "backend", "device", "date", "commit", "command", "dtype", "bandwidth_gbs", "peak_gflops",
            "e2e")
    s = {k: bench[k] for k in keys if bench and k in bench}
    s.update({"file": "data/anyattn_%s.json" % workload, "rc": rc})
    return s


def run_workload(opts, ctx, workload):
    """Measures one workload into ctx.store; returns its status. A workload a stopped run left with
    anyattn's times keeps them and each peer's results, and measures what is missing."""
    log, store = ctx.log, ctx.store
    cases = kept_cases(store, workload)
    if cases is None:
        cases, ok = run_anyattn(opts, ctx, workload)
        if not ok:
            return "failed"
    else:
        log.say("%s: continuing; anyattn bench kept from the run of %s"
                % (workload, store.workloads[workload]["bench"].get("date", "before")))
    run_peers(opts, ctx, workload, [c for c in cases if not c.skip])
    return "done"


def run_anyattn(opts, ctx, workload):
    """The cases and anyattn's times (`anyattn bench --list`, then `--json`): (cases, ok)."""
    args = bench_args(opts, workload)
    rows = tool.bench_list(ctx.cli, ctx.log, args) if workload != "e2e-llama8b" else []
    cases = cases_mod.from_listing(workload, rows)
    ctx.store.start_workload(workload, {}, [])
    bench, rc = run_bench(opts, ctx, workload, args, max(len(rows), 1))
    anyattn_results(bench, cases)
    ctx.store.workloads[workload]["bench"] = bench_summary(bench, rc, workload)
    ctx.store.workloads[workload]["cases"] = [case_record(c) for c in cases]
    ctx.store.save()
    if rc not in (0, 1) or bench is None:
        ctx.log.say("anyattn bench %s exited %d; see log.txt" % (workload, rc))
        return cases, False
    return cases, True


def kept_cases(store, workload):
    """The cases of a workload a stopped run left after anyattn bench finished, else None."""
    w = store.workloads.get(workload, {})
    if w.get("status") == "done" or not w.get("cases") or w.get("bench", {}).get("rc") not in (0, 1):
        return None
    return [cases_mod.Case(workload, r["name"], r["q_lens"], r["kv_lens"], cases_mod.Shape(**r["shape"]),
                           r.get("skip", ""), dict(r["results"])) for r in w["cases"]]


def case_record(c):
    d = c.describe()
    d.update({"q_lens": c.q_lens, "kv_lens": c.kv_lens, "results": c.results})
    return d


def run_peers(opts, ctx, workload, cases, extra=()):
    """The available peers (and `extra` contenders) on each case, recorded after every case."""
    peers = list(extra) + ctx.peers
    todo = [(c, [p for p in peers if p.name not in c.results]) for c in cases]
    todo = [(c, ps) for c, ps in todo if ps]
    if not todo:
        return
    bar = Progress(ctx.log, "peers   %-8s" % workload, sum(len(ps) for _, ps in todo))
    records = {r["name"]: r for r in ctx.store.workloads[workload]["cases"]}
    done = [0]

    def on_peer(p, r):
        done[0] += 1
        bar.update(done[0], "%s %s" % (p.name, r["status"]))
    for c, ps in todo:
        measure_case(c, ps, ctx.measure, on_peer)
        records[c.name]["results"].update(c.results)
        ctx.store.save()
    bar.finish()


def ceilings_run(opts, ctx):
    """The ceilings for --cases when no workload of this folder measured them: a one-case bench."""
    args = ["--backend", opts.backend, "--device", str(opts.device), "--cases", "1x16", "--iters", "1"]
    bench, rc = run_bench(opts, ctx, "ceilings", args, 1)
    return bench_summary(bench, rc, "ceilings") if bench else {}


def run_user(opts, ctx):
    """--cases on --shape: anyattn through the binding, then the peers, on each batch."""
    shape = opts.shape
    cases = cases_mod.parse_cases(opts.cases, shape)
    bench = {} if ctx.store.ceilings() else ceilings_run(opts, ctx)
    bench["shape"] = shape.label()
    ctx.store.start_workload("user", bench, [case_record(c) for c in cases])
    binding = [p for p in ctx.binding if p]
    if not binding:
        ctx.log.say("user cases: the anyattn binding is not available here (%s); peers only" % ctx.binding_why)
    run_peers(opts, ctx, "user", cases, extra=binding)
    return "done"
