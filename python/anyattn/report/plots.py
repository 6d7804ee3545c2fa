"""The report's plots (PNG, matplotlib, no display needed): per-workload bars of every contender's
time, decode K/V bandwidth against context length, prefill compute rate against prompt length,
and the IBM grid as heat maps of peer time / anyattn time (and, after --tune, shipped / tuned).
Each function returns the PNG's path relative to the report folder, or None when it has no data.
"""

import os

from .cases import ibm_cell, short_name
from .tables import ceilings_of, contenders, figures, label, units

DPI = 90


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _color(i):
    return "#1f1f1f" if i == 0 else _plt().get_cmap("tab10")((i - 1) % 10)


def _save(fig, folder, name):
    os.makedirs(os.path.join(folder, "plots"), exist_ok=True)
    rel = os.path.join("plots", name)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, rel), dpi=DPI)
    _plt().close(fig)
    return rel


def _timed(store, workload):
    """(case records, contenders with at least one time) of a workload."""
    cases = store.workloads.get(workload, {}).get("cases", [])
    names = [n for n in contenders(store, workload)
             if any(c["results"].get(n, {}).get("status") == "ok" for c in cases)]
    return cases, names


def workload_bars(store, workload, folder):
    """Grouped bars: µs per case (log scale), one bar per contender; no bar where none was posted."""
    cases, names = _timed(store, workload)
    if not cases or not names:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(cases) * len(names) + 2), 4))
    width = 0.8 / len(names)
    for i, n in enumerate(names):
        xs, ys = [], []
        for j, c in enumerate(cases):
            r = c["results"].get(n, {})
            if r.get("status") == "ok":
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(r["us"])
        ax.bar(xs, ys, width, label=label(store, n), color=_color(i))
    ax.set_yscale("log")
    ax.set_ylabel("µs per call (median, lower is better)")
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([short_name(c["name"]) for c in cases], rotation=60 if len(cases) > 8 else 0,
                       ha="right" if len(cases) > 8 else "center", fontsize=8)
    ax.set_title("%s: time per call" % workload)
    ax.legend(fontsize=7)
    return _save(fig, folder, "bars_%s.png" % workload)


def _scatter(store, workloads, kind, xkey, ykey, div, gpu):
    """{contender: [(x, y, case record)]} for the cases of `kind` in `workloads`."""
    out = {}
    for w in workloads:
        ceil = ceilings_of(store, w)
        for c in store.workloads.get(w, {}).get("cases", []):
            if c["kind"] != kind:
                continue
            for n, r in c["results"].items():
                if r.get("status") == "ok":
                    y = figures(c, r["us"], ceil)[ykey] / div
                    out.setdefault(n, []).append((c[xkey], y, c))
    return out


def _series_plot(store, series, ceiling, title, xlabel, ylabel, folder, name, annotate):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    names = sorted(series, key=lambda n: n != "anyattn")
    for i, n in enumerate(names):
        pts = sorted(series[n], key=lambda p: (p[2]["num_seqs"], p[0]))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o" if n != "anyattn" else "s", label=label(store, n),
                color=_color(i), markersize=5 if n != "anyattn" else 6, alpha=0.9)
        if n == "anyattn" and annotate:
            for x, y, c in pts:
                ax.annotate("b%d" % c["num_seqs"], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    if ceiling:
        ax.axhline(ceiling, color="gray", linestyle="--", linewidth=1)
        ax.text(0.99, ceiling, "ceiling %.3g" % ceiling, transform=ax.get_yaxis_transform(), ha="right",
                va="bottom", fontsize=7, color="gray")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, folder, name)


def decode_bandwidth(store, folder, gpu):
    bw_unit, bw_div, _, _ = units(gpu)
    series = _scatter(store, ["decode", "user"], "decode", "max_kv", "kv_gbs", bw_div, gpu)
    if not series:
        return None
    ceil = ceilings_of(store, "decode")[0] / bw_div
    return _series_plot(store, series, ceil, "decode: K/V bandwidth against context length (labels: batch)",
                        "context length (keys per sequence)", "K/V %s" % bw_unit, folder, "decode_bandwidth.png", True)


def prefill_compute(store, folder, gpu):
    _, _, fl_unit, fl_div = units(gpu)
    series = _scatter(store, ["prefill", "user"], "prefill", "max_q", "gflops", fl_div, gpu)
    if not series:
        return None
    ceil = ceilings_of(store, "prefill")[1] / fl_div
    return _series_plot(store, series, ceil, "prefill: compute rate against prompt length (labels: batch)",
                        "prompt length (tokens)", fl_unit, folder, "prefill_compute.png", True)


def grid_matrix(cases, value):
    """(batches, columns [(L, share)], matrix of value(case) or NaN) over the IBM cells present."""
    cells = {ibm_cell(c["name"]): c for c in cases if ibm_cell(c["name"])}
    batches = sorted({b for b, _, _ in cells})
    cols = sorted({(L, d) for _, L, d in cells})
    m = [[value(cells[(b, L, d)]) if (b, L, d) in cells else float("nan") for (L, d) in cols] for b in batches]
    return batches, cols, m


def heatmap(title, batches, cols, m, folder, name, note):
    """Ratios over 1 (blue) mean anyattn (or the tuned tree) is faster; the color scale is logarithmic."""
    plt = _plt()
    from matplotlib.colors import LogNorm
    finite = [v for row in m for v in row if v == v and v > 0]
    if not finite:
        return None
    span = max(2.0, max(max(finite), 1 / min(finite)))
    fig, ax = plt.subplots(figsize=(max(6, 0.75 * len(cols) + 2), 0.5 * len(batches) + 2))
    im = ax.imshow(m, cmap="RdBu", norm=LogNorm(vmin=1 / span, vmax=span), aspect="auto")
    for i, row in enumerate(m):
        for j, v in enumerate(row):
            ax.text(j, i, "%.3g" % v if v == v else "–", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(["L%d d%g" % c for c in cols], rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(len(batches)))
    ax.set_yticklabels(["b%d" % b for b in batches], fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label=note)
    return _save(fig, folder, name)


def ibm_heatmaps(store, folder):
    """One heat map per peer with times on the IBM grid: peer µs / anyattn µs per cell."""
    cases, names = _timed(store, "ibm")
    paths = []
    for n in names:
        if n == "anyattn":
            continue

        def ratio(c, n=n):
            a, p = c["results"].get("anyattn", {}), c["results"].get(n, {})
            ok = a.get("status") == "ok" and p.get("status") == "ok"
            return p["us"] / a["us"] if ok else float("nan")
        b, cols, m = grid_matrix(cases, ratio)
        safe = "".join(ch if ch.isalnum() else "_" for ch in n)
        paths.append(heatmap("IBM grid: %s time / anyattn time (over 1: anyattn faster)" % label(store, n),
                             b, cols, m, folder, "ibm_%s.png" % safe, "%s / anyattn" % n))
    return [p for p in paths if p]


def tune_heatmap(store, folder):
    """shipped selection µs / tuned tree µs per IBM cell, from the two runs of --tune."""
    t = store.data.get("tune", {})
    shipped, tuned = t.get("ibm_shipped", {}), t.get("ibm_tuned", {})
    names = [n for n in shipped if n in tuned]
    if not names:
        return None
    recs = [{"name": n, "ratio": shipped[n] / tuned[n]} for n in names]
    b, cols, m = grid_matrix(recs, lambda c: c["ratio"])
    return heatmap("IBM grid: shipped selection time / tuned tree time (over 1: the tuned tree is faster)",
                   b, cols, m, folder, "tune_gain.png", "shipped / tuned")
