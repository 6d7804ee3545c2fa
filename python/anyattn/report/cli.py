"""python -m anyattn.report: the command line, and the run from it. One run finds the device,
lists the peers, measures each workload (anyattn through `anyattn bench`, then the peers), the
--cases batches and the --tune campaign, and rewrites the report after each step; Ctrl-C (or a
SIGTERM, as `timeout` sends) stops it with the report written from what was measured.

Exit codes: 0 done, 1 a failure (a step failed, a wrong anyattn output), 2 bad command line,
77 no device for --backend, 130 interrupted.
"""

import argparse
import os
import signal
import sys
from types import SimpleNamespace

from . import environment, tool
from .cases import Shape, parse_cases
from .peers import AnyattnBinding, builtin_peers, load_peer_file
from .progress import Log
from .store import Store

WORKLOADS = {"cpu": ["decode", "prefill", "mixed", "ibm"], "gpu": ["decode", "prefill", "mixed", "ibm", "e2e-llama8b"]}
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_DEVICE, EXIT_INTERRUPTED = 0, 1, 2, 77, 130


def parser():
    ap = argparse.ArgumentParser(prog="python -m anyattn.report", description=(
        "anyattn beside every importable peer on this machine's CPU or GPU: ceilings, the standard workloads, "
        "your shapes, outputs checked against float64; writes report.md, report.html, plots, CSV and JSON."))
    ap.add_argument("--out", default="anyattn-report", help="the report folder (default ./anyattn-report); a "
                    "later run into it keeps the workloads already measured")
    ap.add_argument("--fresh", action="store_true", help="measure everything again (forget the folder's results)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help="default: the best found")
    ap.add_argument("--device", type=int, default=0, help="GPU index (default 0)")
    ap.add_argument("--workloads", help="comma-separated: decode, prefill, mixed, ibm, e2e-llama8b (GPU), or "
                    "none (default: all of them for the device)")
    ap.add_argument("--quick", action="store_true", help="a few small cases per workload, fewer timed calls")
    ap.add_argument("--iters", type=int, default=0, help="timed calls per case (default: bench's 30 GPU, 5 CPU)")
    ap.add_argument("--seed", type=int, default=1, help="data seed of the peers' inputs (default 1)")
    ap.add_argument("--cases", help="your batches, comma-separated; each joins with + parts pBxL (B prompts of L), "
                    "cBxQ@K (B chunks of Q new tokens over K keys), BxC (B decodes over C keys)")
    ap.add_argument("--heads", default="32:8", help="HQ:HKV of --cases (default 32:8)")
    ap.add_argument("--head-dim", type=int, default=128, help="of --cases (default 128)")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"], help="of --cases (default bf16)")
    ap.add_argument("--page-size", type=int, default=16, help="tokens per page of --cases (default 16)")
    ap.add_argument("--peers", help="only these peers (comma-separated ids, e.g. sdpa-flash,flashinfer)")
    ap.add_argument("--peers-from", action="append", default=[], metavar="FILE.py",
                    help="add the peers a Python file defines (PEERS, a list of anyattn.report.peer.Peer)")
    ap.add_argument("--tune", action="store_true", help="run the tuning campaign, fit and save the tree, measure "
                    "its gain on the IBM grid")
    ap.add_argument("--tune-grid", choices=["full", "ibm"], help="default full (--quick: ibm)")
    ap.add_argument("--tune-chunk", type=int, default=0, help="cells per `anyattn tune` call (default 25 GPU, 3 CPU)")
    ap.add_argument("--tune-cells", help="FROM:TO, only these cells of the grid")
    ap.add_argument("--tune-iters", type=int, default=0, help="timed calls per candidate (default tune's)")
    ap.add_argument("--tune-depth", type=int, default=6, help="tree depth (default 6)")
    ap.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    ap.add_argument("--render", action="store_true", help="measure nothing: write the report of --out's "
                    "results.json again (e.g. a folder copied from another machine)")
    ap.add_argument("--quiet", action="store_true", help="progress to log.txt only")
    return ap


def check_options(ap, o):
    """Derived options, with one-line usage errors (exit 2) for bad values."""
    try:
        hq, hkv = (int(x) for x in o.heads.split(":"))
        o.shape = Shape(hq, hkv, o.head_dim, o.dtype, o.page_size)
        if hq < 1 or hkv < 1 or hq % hkv or o.head_dim < 1 or o.page_size < 1:
            raise ValueError("heads HQ:HKV with HQ a multiple of HKV, positive sizes")
        if o.cases:
            parse_cases(o.cases, o.shape)
        if o.tune_cells:
            a, b = (int(x) for x in o.tune_cells.split(":"))
            if not 0 <= a < b:
                raise ValueError("--tune-cells FROM:TO with 0 <= FROM < TO")
            o.tune_cells = (a, b)
    except ValueError as e:
        ap.error(str(e))
    for f in o.peers_from:
        if not os.path.isfile(f):
            ap.error("--peers-from %s: no such file" % f)


def resolve_device(o, ctx):
    """o.backend and o.gpu from --backend and `anyattn info`; raises SystemExit(77) without one."""
    info = tool.info(ctx.cli, ctx.log)
    want = info["best"] if o.backend == "auto" else o.backend
    devs = [d for d in info["devices"] if d["backend"] == want and d["index"] == o.device]
    if not devs:
        ctx.log.say("report: no %s device %d (anyattn info: %s)" % (want, o.device, info["backends"].get(want, "?")))
        raise SystemExit(EXIT_NO_DEVICE)
    o.backend, o.gpu = want, want != "cpu"
    return info


def workload_list(o):
    if o.workloads is None:
        return WORKLOADS["gpu" if o.gpu else "cpu"]
    names = [w for w in o.workloads.split(",") if w and w != "none"]
    bad = [w for w in names if w not in WORKLOADS["gpu"]]
    if bad or (not o.gpu and "e2e-llama8b" in names):
        raise SystemExit("report: unknown or GPU-only workload %s" % ", ".join(bad or ["e2e-llama8b"]))
    return names


def setup_peers(o, ctx):
    """Probes every peer (built in, then --peers-from files); ctx.peers are the available ones. Each
    peer's line goes to the log and into results.json."""
    all_peers = builtin_peers()
    for f in o.peers_from:
        all_peers += load_peer_file(f)
    wanted = set(o.peers.split(",")) if o.peers else None
    ctx.peers, table = [], {}
    for p in all_peers:
        why = "not asked for (--peers)" if wanted is not None and p.name not in wanted else p.probe(o.gpu)
        table[p.name] = {"label": p.label, "available": not why, "why": why, "version": p.version}
        ctx.log.say("peer %-18s %s" % (p.name, "%s %s" % (p.label, p.version) if not why else "skipped: " + why))
        if not why:
            ctx.peers.append(p)
    binding = AnyattnBinding()
    ctx.binding_why = binding.probe(o.gpu)
    ctx.binding = [binding] if not ctx.binding_why else []
    ctx.store.data["peers"] = table
    ctx.store.save()


def measure_context(o):
    """How peers' inputs are made: torch tensors where torch is importable, else NumPy arrays."""
    try:
        import torch  # noqa: F401
        lib = "torch"
    except ImportError:
        lib = "numpy"
    iters = o.iters or (10 if o.quick and o.gpu else 2 if o.quick else 30 if o.gpu else 5)
    return {"lib": lib, "device": "cuda:%d" % o.device if o.gpu else "cpu", "gpu": o.gpu, "iters": iters,
            "seed": o.seed}


def steps(o, ctx):
    """The run's steps in order: (name, function returning a status)."""
    from .tune import run_tune
    from .workloads import run_user, run_workload
    out = [(w, lambda w=w: run_workload(o, ctx, w)) for w in workload_list(o)]
    if o.cases:
        out.append(("user", lambda: run_user(o, ctx)))
    if o.tune:
        out.append(("tune", lambda: run_tune(o, ctx)))
    return out


def run(o, ctx, argv):
    """Everything but the final rendering; returns the exit code."""
    from .render import write_all
    ctx.cli = tool.find_cli()
    info = resolve_device(o, ctx)
    env = environment.collect(info, tool.version(ctx.cli, ctx.log), o.backend, o.device, argv)
    old = ctx.store.data.get("env", {})
    if old.get("device") and (old.get("device"), old.get("backend")) != (env["device"], env["backend"]):
        ctx.log.say("report: %s holds results of %s (%s); use --fresh or another --out" % (
            ctx.out, old.get("device"), old.get("backend")))
        return EXIT_USAGE
    ctx.store.data["env"], ctx.store.data["options"] = env, {k: v for k, v in vars(o).items() if k != "shape"}
    ctx.store.data["history"].append({k: env[k] for k in ("date", "commit", "command")})
    o.plots = plots_available(o, ctx.log)
    ctx.log.say("report: %s, %s backend, into %s" % (env["device"], o.backend, ctx.out))
    missing = environment.tree_missing(env)
    if missing:
        ctx.log.say("report: " + missing)
    tune_defaults(o)
    setup_peers(o, ctx)
    ctx.measure = measure_context(o)
    if o.gpu and any(p.name.startswith("sdpa-") for p in ctx.peers):
        from .ceilings import torch_ceilings
        ctx.store.data["torch_ceilings"] = torch_ceilings(True)
    failed = 0
    for name, fn in steps(o, ctx):
        if name not in ("user", "tune") and ctx.store.workload_done(name) and not o.fresh:
            ctx.log.say("%s: kept from the run of %s (--fresh measures it again)"
                        % (name, ctx.store.workloads[name].get("bench", {}).get("date", "before")))
            continue
        if name == "tune" and ctx.store.data.get("tune", {}).get("status") == "done" and not o.fresh:
            ctx.log.say("tune: kept, done before (--fresh runs the campaign again)")
            continue
        ctx.current = name
        status = fn()
        if name in ctx.store.workloads:
            ctx.store.finish_workload(name, status)
        failed += status != "done"
        write_all(ctx.store, ctx.out, o.plots)
    return EXIT_FAILED if failed or anyattn_failed(ctx.store) else EXIT_OK


def plots_available(o, log):
    if o.no_plots:
        return False
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        log.say("report: matplotlib is not importable: tables only, no plots (python3 -m pip install matplotlib)")
        return False


def tune_defaults(o):
    o.tune_grid = o.tune_grid or ("ibm" if o.quick else "full")
    o.tune_chunk = o.tune_chunk or (25 if o.gpu else 3)
    if o.quick and not o.gpu and not o.tune_cells:
        o.tune_cells = (0, 6)


def anyattn_failed(store):
    """True when anyattn bench posted no time for a case it should run (a wrong or failed case)."""
    return any(c["results"].get("anyattn", {}).get("status") == "error"
               for w in store.workloads.values() for c in w.get("cases", []))


def interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = parser()
    o = ap.parse_args(argv)
    check_options(ap, o)
    if o.render:
        return render_only(o)
    os.makedirs(os.path.join(o.out, "data"), exist_ok=True)
    ctx = SimpleNamespace(out=o.out, log=Log(os.path.join(o.out, "log.txt"), o.quiet), current="start")
    ctx.store = Store.open(o.out, o.fresh)
    ctx.store.data["status"] = "running"
    signal.signal(signal.SIGTERM, interrupt)
    rc = EXIT_FAILED
    try:
        rc = run(o, ctx, argv)
        ctx.store.data["status"] = "complete" if rc == EXIT_OK else "complete, with failures" if rc == EXIT_FAILED \
            else ctx.store.data["status"]
    except KeyboardInterrupt:
        rc = EXIT_INTERRUPTED
        ctx.store.data["status"] = "interrupted during %s" % ctx.current
        ctx.log.say("report: interrupted during %s; writing the report of what was measured" % ctx.current)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else EXIT_USAGE
        if not isinstance(e.code, int):
            ctx.log.say(str(e.code))
    except (tool.ToolError, OSError, ValueError) as e:
        ctx.log.say("report: %s" % e)
        ctx.store.data["status"] = "failed: %s" % e
    finally:
        finish(o, ctx)
    return rc


def render_only(o):
    from .render import write_all
    store = Store.open(o.out, False)
    if not store.data.get("env"):
        print("report: %s has no results.json of a report" % o.out, file=sys.stderr)
        return EXIT_USAGE
    write_all(store, o.out, plots_available(o, Log(None, o.quiet)))
    print("report: %s" % os.path.join(o.out, "report.md"), file=sys.stderr)
    return EXIT_OK


def finish(o, ctx):
    """Writes results.json and the report with Ctrl-C held off, so an interrupt leaves whole files."""
    from .render import write_all
    old = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        ctx.store.save()
        if ctx.store.data.get("env"):
            write_all(ctx.store, ctx.out, getattr(o, "plots", False))
            ctx.log.say("report: %s (and report.html, results.csv, results.json, plots/)" %
                        os.path.join(ctx.out, "report.md"))
    finally:
        signal.signal(signal.SIGINT, old[0])
        signal.signal(signal.SIGTERM, old[1])
        ctx.log.close()
