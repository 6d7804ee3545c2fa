"""python -m anyattn.report end to end on the CPU backend (--quick, the CLI and library under test:
$ANYATTN_CLI, $ANYATTN_LIBRARY): every file is written, the tables say what the data says (bench's
JSON, results.json, results.csv and report.md agree), plots exist with a plausible size, a wrong
peer posts no time, torch's CPU SDPA runs as a peer where torch is importable, and --tune runs its
campaign in chunks, fits and saves a tree.
"""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
PEERS_FILE = os.path.join(HERE, "report_peers.py")
MIN_PNG_BYTES = 4000


def report_env(extra_path=()):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(list(extra_path) + [PYTHON_DIR, env.get("PYTHONPATH", "")])
    env.setdefault("OMP_NUM_THREADS", "2")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")   # the NumPy test peer beside torch's and anyattn's threads
    return env


def run_report(out, *args, extra_path=(), timeout=240):
    cmd = [sys.executable, "-m", "anyattn.report", "--out", str(out), "--quiet"] + list(args)
    p = subprocess.run(cmd, env=report_env(extra_path), capture_output=True, text=True, timeout=timeout)
    print("$ %s\nexit %d\n%s" % (" ".join(cmd), p.returncode, p.stderr[-3000:]))
    return p


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    if not os.environ.get("ANYATTN_CLI"):
        pytest.skip("ANYATTN_CLI is not set (ctest sets it to the CLI under test)")
    out = tmp_path_factory.mktemp("report")
    p = run_report(out, "--quick", "--peers-from", PEERS_FILE, "--cases", "p1x64+3x256,2x300", "--dtype", "f16")
    assert p.returncode == 0, open(os.path.join(out, "log.txt")).read()[-4000:]
    return out


def load(out, name):
    with open(os.path.join(out, name), encoding="utf-8") as f:
        return json.load(f) if name.endswith(".json") else f.read()


def md_tables(md):
    """{section title: [row dicts]} of the first table under each ## heading."""
    out, section = {}, None
    lines = md.splitlines() + [""]
    for i, line in enumerate(lines):
        if line.startswith("## "):
            section = line[3:]
        elif section and section not in out and line.startswith("| ") and lines[i + 1].startswith("| ---"):
            head, rows = cells(line), []
            for x in lines[i + 2:]:
                if not x.startswith("| "):
                    break
                rows.append(dict(zip(head, cells(x))))
            out[section] = rows
    return out


def cells(line):
    return [c.strip() for c in line.strip()[2:-2].split(" | ")]


def test_every_file(quick):
    for name in ("report.md", "report.html", "results.csv", "results.json", "log.txt"):
        assert os.path.getsize(os.path.join(quick, name)) > 200, name
    data = load(quick, "results.json")
    assert data["status"] == "complete"
    for w in ("decode", "prefill", "mixed", "ibm"):
        assert data["workloads"][w]["status"] == "done"
        assert os.path.exists(os.path.join(quick, "data", "anyattn_%s.json" % w))
    md = load(quick, "report.md")
    pngs = re.findall(r"!\[[^\]]*\]\((plots/[^)]+\.png)\)", md)
    for want in ("bars_decode", "bars_prefill", "bars_mixed", "bars_ibm", "bars_user", "decode_bandwidth",
                 "prefill_compute", "ibm_numpy_f64"):
        assert "plots/%s.png" % want in pngs, want
    for p in pngs:
        assert os.path.getsize(os.path.join(quick, p)) > MIN_PNG_BYTES, p
    html = load(quick, "report.html")
    assert html.count("data:image/png;base64,") == len(pngs)
    assert "plots/" not in re.sub(r"<code>[^<]*</code>", "", html).split("<h2>Files</h2>")[0]


def test_anyattn_times_are_bench_times(quick):
    data = load(quick, "results.json")
    for w in ("decode", "prefill", "mixed", "ibm"):
        bench = {c["case"]: c for c in load(quick, "data/anyattn_%s.json" % w)["cases"]}
        cases = data["workloads"][w]["cases"]
        assert {c["name"] for c in cases} == set(bench)
        for c in cases:
            a = c["results"]["anyattn"]
            assert a["status"] == "ok" and a["us"] == bench[c["name"]]["us"]


def test_markdown_tables_match_results(quick):
    from anyattn.report.render import ratio
    from anyattn.report.tables import figures, num
    data, md = load(quick, "results.json"), load(quick, "report.md")
    tables = md_tables(md)
    for w in ("decode", "prefill", "mixed", "ibm"):
        bench = load(quick, "data/anyattn_%s.json" % w)
        ceil = (bench["bandwidth_gbs"], bench["peak_gflops"])
        rows = {r["case"]: r for r in tables[w]}
        for c in data["workloads"][w]["cases"]:
            row, a = rows[c["name"]], c["results"]["anyattn"]
            assert row["anyattn µs"] == num(a["us"], 1)
            b = next(x for x in bench["cases"] if x["case"] == c["name"])
            f = figures(c, a["us"], ceil)   # the report's figures are bench's, from the same time and bytes
            assert f["kv_gbs"] == pytest.approx(b["kv_gbs"], rel=1e-3, abs=2e-3)
            assert f["gflops"] == pytest.approx(b["gflops"], rel=1e-3, abs=2e-3)
            if "K/V GB/s" in row:
                assert row["K/V GB/s"] == num(f["kv_gbs"]) and row["% bw"] == num(f["pct_bw"], 1)
            for name, r in c["results"].items():
                if name == "anyattn":
                    continue
                cell = row["vs " + data["peers"][name]["label"]]
                if r["status"] == "ok":
                    # ratio: 3 significant digits, whole numbers from 100 (1489x, not 1.49e+03x)
                    assert cell.startswith("%sx (%s µs)" % (ratio(r["us"] / a["us"]), num(r["us"], 1))), cell
                else:
                    assert not re.search(r"\d µs", cell) and cell.split()[0] in ("wrong", "refused", "error"), cell


def test_csv_matches_results(quick):
    data = load(quick, "results.json")
    with open(os.path.join(quick, "results.csv"), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    seen = 0
    for w, wl in data["workloads"].items():
        for c in wl["cases"]:
            for name, r in c["results"].items():
                row = next(x for x in rows if x["workload"] == w and x["case"] == c["name"] and x["contender"] == name)
                assert row["status"] == r["status"]
                if r["status"] == "ok":
                    assert float(row["us"]) == pytest.approx(r["us"], rel=1e-5)
                else:
                    assert row["us"] == ""
                seen += 1
    assert seen == len(rows)


def test_wrong_peer_posts_no_time(quick):
    data = load(quick, "results.json")
    results = [c["results"] for w in data["workloads"].values() for c in w["cases"]]
    wrong = [r["numpy-wrong"] for r in results]
    assert all(r["status"] in ("wrong", "refused") and "us" not in r for r in wrong)
    assert sum(r["status"] == "wrong" for r in wrong) >= 8
    assert sum(r["numpy-f64"]["status"] == "ok" for r in results) >= 8
    md = load(quick, "report.md")
    assert "wrong output [" in md and "refused [" in md


def test_torch_cpu_sdpa_peer(quick):
    peer = load(quick, "results.json")["peers"]["sdpa-cpu"]
    try:
        import torch  # noqa: F401
    except ImportError:
        assert not peer["available"] and "torch is not importable" in peer["why"]
        return
    assert peer["available"], peer
    ok = [c for c in load(quick, "results.json")["workloads"]["decode"]["cases"]
          if c["results"]["sdpa-cpu"]["status"] == "ok"]
    assert ok, "torch SDPA posted no decode time"


def test_user_cases_through_the_binding(quick):
    cases = load(quick, "results.json")["workloads"]["user"]["cases"]
    assert [c["name"] for c in cases] == ["user p1x64+3x256", "user 2x300"]
    assert cases[0]["q_lens"] == [64, 1, 1, 1] and cases[0]["kv_lens"] == [64, 256, 256, 256]
    for c in cases:
        a = c["results"]["anyattn"]
        assert a["status"] == "ok" and a["plan"].startswith("cpu"), a


def test_tune_campaign_on_the_cpu(tmp_path):
    if not os.environ.get("ANYATTN_CLI"):
        pytest.skip("ANYATTN_CLI is not set")
    p = run_report(tmp_path, "--quick", "--workloads", "none", "--tune", "--peers", "none")
    assert p.returncode == 0
    state = load(tmp_path, "tune/state.json")
    assert state["next"] == 6 and [c["from"] for c in state["chunks"]] == [0, 3]
    t = load(tmp_path, "results.json")["tune"]
    assert t["status"] == "done" and os.path.exists(t["tree"]) and t["tree"].endswith("tune/tree_cpu.json")
    sweep = load(tmp_path, "tune/sweep_ibm.csv")
    assert len([x for x in sweep.splitlines() if x[:1].isdigit()]) == 6
    assert set(t["ibm_shipped"]) == set(t["ibm_tuned"]) and len(t["ibm_tuned"]) == 9
    assert "## Tuning campaign" in load(tmp_path, "report.md")
    assert os.path.getsize(os.path.join(tmp_path, "plots", "tune_gain.png")) > MIN_PNG_BYTES


SLOW_PEER = '''
import time
from report_peers import NumpyAttention

class Slow(NumpyAttention):
    name, label = "numpy-slow", "NumPy, three seconds to set up"

    def runner(self, inp):
        time.sleep(3.0)
        return NumpyAttention.runner(self, inp)

PEERS = [Slow()]
'''


def test_interrupted_workload_continues(tmp_path):
    """Ctrl-C during the peers of a workload: the rerun keeps anyattn's times and the peer results
    already there, and measures only what is missing."""
    if not os.environ.get("ANYATTN_CLI"):
        pytest.skip("ANYATTN_CLI is not set")
    peers = tmp_path / "slow_peers.py"
    peers.write_text(SLOW_PEER)
    out = tmp_path / "r"
    args = [sys.executable, "-m", "anyattn.report", "--out", str(out), "--quiet", "--quick", "--workloads", "decode",
            "--peers", "numpy-slow", "--peers-from", str(peers)]
    p = subprocess.Popen(args, env=report_env([HERE]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Until the first case has its peer's result; the next case's peer then sleeps 3 s, time
    # enough for the signal to land mid-workload even on a loaded 2-core machine.
    seen = False
    for _ in range(3000):
        time.sleep(0.1)
        try:
            seen = "numpy-slow" in load(out, "results.json")["workloads"]["decode"]["cases"][0]["results"]
        except (OSError, ValueError, KeyError, IndexError):
            pass
        if seen or p.poll() is not None:
            break
    assert seen, "the report posted no peer result for the first decode case within 300 s"
    p.send_signal(signal.SIGINT)
    assert p.communicate(timeout=60) and p.returncode == 130
    first = load(out, "results.json")["workloads"]["decode"]
    assert first["status"] == "running"
    p = subprocess.run(args, env=report_env([HERE]), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "decode: continuing; anyattn bench kept" in load(out, "log.txt")
    second = load(out, "results.json")["workloads"]["decode"]
    assert second["status"] == "done"
    for a, b in zip(first["cases"], second["cases"]):
        assert a["results"]["anyattn"] == b["results"]["anyattn"]
        if "numpy-slow" in a["results"]:
            assert a["results"]["numpy-slow"] == b["results"]["numpy-slow"]
    assert all(c["results"]["numpy-slow"]["status"] == "ok" for c in second["cases"])
