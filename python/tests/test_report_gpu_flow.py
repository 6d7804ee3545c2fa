"""The report's GPU-only branches against a stand-in CLI (tests/fakes/anyattn_gpu_cli.py: a GPU with
no compiled-in tree): the missing tree said first, the GPU workloads with e2e-llama8b, TB/s and
TFLOP/s units, the peers each skipped with a line when torch has no CUDA (or no torch at all),
--tune in chunks, interrupted by SIGINT mid-chunk, then resumed at the first unfinished cell, and
the tree's gain measured with ANYATTN_TREE.
"""

import json
import os
import signal
import subprocess
import sys
import time


HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_CLI = os.path.join(HERE, "fakes", "anyattn_gpu_cli.py")


def env_for(tmp_path, no_torch=False, sleep="0"):
    env = dict(os.environ)
    paths = [os.path.dirname(HERE)]
    if no_torch:   # a torch that fails to import, as on a machine without it
        block = tmp_path / "no_torch"
        block.mkdir(exist_ok=True)
        (block / "torch.py").write_text("raise ImportError('no torch here (test)')\n")
        paths.insert(0, str(block))
    env.update(PYTHONPATH=os.pathsep.join(paths + [env.get("PYTHONPATH", "")]), FAKE_TUNE_SLEEP=sleep)
    launcher = tmp_path / "anyattn"
    launcher.write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, FAKE_CLI))
    launcher.chmod(0o755)
    env["ANYATTN_CLI"] = str(launcher)
    return env


def report(tmp_path, out, *args, **kw):
    cmd = [sys.executable, "-m", "anyattn.report", "--out", str(out), "--backend", "cuda"] + list(args)
    return subprocess.Popen(cmd, env=env_for(tmp_path, **kw), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def load(out, name):
    with open(os.path.join(out, name), encoding="utf-8") as f:
        return json.load(f) if name.endswith(".json") else f.read()


def test_gpu_report_without_a_tree(tmp_path):
    out = tmp_path / "r"
    p = report(tmp_path, out, "--tune", "--tune-chunk", "4")
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    lines = err.splitlines()
    first_peer = next(i for i, x in enumerate(lines) if x.startswith("peer "))
    tree_line = next(i for i, x in enumerate(lines) if "No tuned decision tree is compiled in for Fake GPU 9000" in x)
    assert tree_line < first_peer, "the missing tree is said before anything is measured"
    md = load(out, "report.md")
    assert md.index("No tuned decision tree") < md.index("## Ceilings")
    assert "| K/V TB/s |" in md and "TFLOP/s" in md and "## e2e-llama8b" in md and "13.60 µs" in md
    data = load(out, "results.json")
    assert set(data["workloads"]) == {"decode", "prefill", "mixed", "ibm", "e2e-llama8b"}
    assert all(not p["available"] for p in data["peers"].values())
    t = data["tune"]
    assert t["status"] == "done" and t["name"] == "fake_gpu_9000" and t["state"]["next"] == 10
    assert [c["from"] for c in t["state"]["chunks"]] == [0, 4, 8]
    assert all(abs(t["ibm_shipped"][c] / t["ibm_tuned"][c] - 1 / 0.9) < 1e-3 for c in t["ibm_tuned"])
    assert "no score (exit 1)" in t["eval"]["shipped"] and "loaded" in t["eval"]["tuned"]
    assert os.path.getsize(os.path.join(out, "plots", "tune_gain.png")) > 4000


def test_no_torch_each_peer_skipped_with_a_line(tmp_path):
    out = tmp_path / "r"
    p = report(tmp_path, out, "--workloads", "decode", "--no-plots", no_torch=True)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    peers = load(out, "results.json")["peers"]
    assert len(peers) == 10 and all("torch is not importable" in p["why"] for p in peers.values()
                                    if p["label"] != "torch SDPA (CPU)")
    for name in peers:
        assert sum(x.startswith("peer %s " % name) for x in err.splitlines()) == 1


def test_tune_interrupted_then_resumed(tmp_path):
    out = tmp_path / "r"
    p = report(tmp_path, out, "--workloads", "none", "--tune", "--tune-chunk", "6", "--no-plots", sleep="0.4")
    state = os.path.join(out, "tune", "chunk.part.csv")
    deadline = time.time() + 60
    while time.time() < deadline:   # wait for 2 finished cells of the first chunk
        if os.path.exists(state) and sum(x[:1].isdigit() for x in open(state).read().splitlines()) >= 4:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    data = load(out, "results.json")
    assert data["status"] == "interrupted during tune"
    assert "**Partial report** (interrupted during tune)" in load(out, "report.md")

    p = report(tmp_path, out, "--workloads", "none", "--tune", "--tune-chunk", "6", "--no-plots")
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "an interrupted chunk left" in err
    chunks = load(out, "tune/state.json")["chunks"]
    kept = chunks[0]["to"]
    assert 2 <= kept < 6 and chunks[0]["from"] == 0 and chunks[1]["from"] == kept and chunks[-1]["to"] == 10
    rows = [x for x in load(out, "tune/sweep_full.csv").splitlines() if x[:1].isdigit()]
    assert sorted({int(x.split(",")[0]) for x in rows}) == list(range(10)) and len(rows) == 20
    assert load(out, "results.json")["tune"]["status"] == "done"


def test_a_rerun_keeps_the_workloads_done(tmp_path):
    out = tmp_path / "r"
    for run in range(2):
        p = report(tmp_path, out, "--workloads", "decode,prefill", "--no-plots")
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert "decode: kept from the run of" in err and "prefill: kept" in err
    assert len(load(out, "results.json")["history"]) == 2
