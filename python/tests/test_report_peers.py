"""The report's peer calls without a GPU: FlashInfer, vLLM and FlashAttention through CPU stand-ins
of their APIs (tests/fakes/, torch on the CPU), torch SDPA's GPU backends' code path on CPU tensors,
on decode, prefill and mixed batches with pages of 16 and 256 tokens; every output is checked
against the float64 reference exactly as in a report run. Also: a call that writes nothing fails
the check (its output is poisoned), and the GPU timer's do_bench path. Skips without torch.
"""

import json
import os
import subprocess
import sys

import pytest

try:
    import torch
except ImportError as e:   # absent, or present and broken: the stand-ins need a working torch
    pytest.skip("torch is not importable (%s)" % e, allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "fakes"))

from anyattn.report import peers_paged, timing  # noqa: E402
from anyattn.report.cases import Case, Shape  # noqa: E402
from anyattn.report.inputs import make_inputs, reference_rows, sample_rows  # noqa: E402
from anyattn.report.measure import measure_peer  # noqa: E402
from anyattn.report.peers import Peer, Runner, TorchSdpa  # noqa: E402

BATCHES = {"decode": ([1, 1, 1], [40, 300, 17]), "prefill": ([33, 70], [33, 70]),
           "mixed": ([20, 1, 1], [90, 64, 5])}


def checked(peer, kind, block_size=16, dtype="bf16"):
    q, kv = BATCHES[kind]
    case = Case("test", kind, q, kv, Shape(8, 2, 64, dtype, block_size))
    inp = make_inputs(case, "torch", "cpu", 7)
    samples = sample_rows(case, 7)
    return measure_peer(peer, inp, samples, reference_rows(inp, samples), gpu=False, iters=1)


def loaded(cls):
    """The peer with its module imported as probe() imports it (probe() itself wants a GPU)."""
    import importlib
    peer = cls()
    for name in peer.modules:
        try:
            peer.mod = importlib.import_module(name)
            break
        except ImportError:
            continue
    assert peer.check(peer.mod) == "", cls
    return peer


@pytest.mark.parametrize("kind", sorted(BATCHES))
@pytest.mark.parametrize("cls", [peers_paged.FlashInferPaged, peers_paged.VllmTriton, peers_paged.FlashAttn2,
                                 peers_paged.FlashAttn3])
def test_paged_peers(cls, kind):
    r = checked(loaded(cls), kind)
    assert r["status"] == "ok", r


def test_flashinfer_decode_takes_decode_batches_only():
    peer = loaded(peers_paged.FlashInferDecode)
    assert checked(peer, "decode")["status"] == "ok"
    r = checked(peer, "prefill")
    assert r["status"] == "refused" and "decode" in r["error"]


def test_flash_attn2_pages_of_256():
    peer = loaded(peers_paged.FlashAttn2)
    r = checked(peer, "mixed", block_size=256)
    assert r["status"] == "ok" and "paged" in r["note"], r
    assert "contiguous" in checked(peer, "mixed")["note"]


def test_vllm_split_kv_buffers_follow_its_signature():
    peer = loaded(peers_paged.VllmTriton)
    r = checked(peer, "decode")
    assert r["status"] == "ok" and "3D decode below 64 sequences" in r["note"], r


@pytest.mark.parametrize("backend", ["math", "flash"])
@pytest.mark.parametrize("kind", sorted(BATCHES))
def test_sdpa_gpu_backends_code_path(backend, kind):
    """The sdpa_kernel path the GPU backends take, on CPU tensors (torch has math and flash there)."""
    r = checked(TorchSdpa(backend), kind)
    assert r["status"] == "ok", r


def test_sdpa_cpu_f32():
    assert checked(TorchSdpa("cpu"), "mixed", dtype="f32")["status"] == "ok"


class Silent(Peer):
    """Writes nothing into its output: the NaN poison must fail the check."""
    name, label, gpu_only = "silent", "silent", False

    def runner(self, inp):
        out = torch.zeros_like(inp.q)
        return Runner(lambda: None, lambda samples: torch.stack([out[t, h] for t, h in samples]).float().numpy(),
                      out=out)


def test_unwritten_output_is_wrong():
    r = checked(Silent(), "decode")
    assert r["status"] == "wrong" and "us" not in r


def test_gpu_timer_uses_do_bench():
    calls = []

    def fake_do_bench(fn, warmup, rep, return_mode):
        fn()
        calls.append((warmup, rep, return_mode))
        return 0.25
    assert timing._do_bench(fake_do_bench, lambda: None) == 0.25
    assert calls == [(25, 100, "median")]


def test_bench_peers_script_on_the_cpu(tmp_path):
    """bench/peers.py (the results table's peers.json) runs on the report's peer code."""
    script = os.path.join(HERE, "..", "..", "bench", "peers.py")
    p = subprocess.run([sys.executable, script, "--cpu", "--out", str(tmp_path)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.load(open(tmp_path / "peers.json"))["results"]
    assert [r["case"] for r in res if r["what"] == "cpu"] == ["decode 1x512", "decode 4x1024", "prefill 1x128"]
    assert all(("us" in r or r["what"] == "ceiling") and ("TB/s" in r or "TFLOP/s" in r) for r in res)
