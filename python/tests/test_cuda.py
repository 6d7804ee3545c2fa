"""The Python binding with torch tensors: CUDA tensors on the CUDA backend
(bf16, fp16) against a float64 torch reference, CUDA graph capture and replay
with new inputs, and torch CPU tensors on the CPU backend. Skips cleanly
without torch, without a CUDA device, or with a library built without CUDA."""

import itertools
import math

import pytest

torch = pytest.importorskip("torch")

import anyattn  # noqa: E402
from anyattn import AnyattnError, Status, unified_attention  # noqa: E402


def _cuda_reason():
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    if getattr(torch.version, "hip", None):
        backend = "hip"
    else:
        backend = "cuda"
    try:
        if not anyattn.backend_compiled(backend):
            return "libanyattn (%s) was built without the %s backend" % (anyattn.library_path(),
                                                                        backend)
    except OSError as e:
        return str(e)
    return None


CUDA_SKIP = _cuda_reason()
needs_cuda = pytest.mark.skipif(CUDA_SKIP is not None, reason=CUDA_SKIP or "")


# ---- reference (docs/semantics.md), float64 on the tensors' device ---------------
def reference(q, k, v, cu, seqused, table, scale, causal, window, softcap=0.0, alibi=None,
              sinks=None):
    """q [T, Hq, D]; k, v logical [NB, BS, Hkv, D]; returns (out, lse) float64."""
    q, k, v = q.double(), k.double(), v.double()
    T, Hq, D = q.shape
    BS, Hkv = k.shape[1], k.shape[2]
    group = Hq // Hkv
    wl, wr = window
    cu, seqused, table = cu.tolist(), seqused.tolist(), table.cpu()
    out = torch.zeros(T, Hq, D, dtype=torch.float64, device=q.device)
    lse = torch.full((T, Hq), -math.inf, dtype=torch.float64, device=q.device)
    for s in range(len(cu) - 1):
        q_len, kv_len = cu[s + 1] - cu[s], seqused[s]
        if q_len == 0:
            continue
        j = torch.arange(kv_len)
        pages = table[s, j // BS].long()
        ks = k[pages.to(k.device), (j % BS).to(k.device)].repeat_interleave(group, dim=1)
        vs = v[pages.to(v.device), (j % BS).to(v.device)].repeat_interleave(group, dim=1)
        qs = q[cu[s]:cu[s + 1]]                                   # [q_len, Hq, D]
        x = scale * torch.einsum("ihd,jhd->hij", qs, ks)          # [Hq, q_len, kv_len]
        if softcap > 0:
            x = softcap * torch.tanh(x / softcap)
        p = (kv_len - q_len + torch.arange(q_len)).to(q.device)
        jj = j.to(q.device)
        if alibi is not None:
            x = x + alibi.double()[:, None, None] * (jj[None, None, :] - p[None, :, None])
        visible = torch.ones(q_len, kv_len, dtype=torch.bool, device=q.device)
        if causal:
            visible &= jj[None, :] <= p[:, None]
        if wl >= 0:
            visible &= jj[None, :] >= p[:, None] - wl
        if not causal and wr >= 0:
            visible &= jj[None, :] <= p[:, None] + wr
        x = x.masked_fill(~visible[None], -math.inf)
        m = x.max(dim=-1).values                                  # [Hq, q_len]
        if sinks is not None:
            m = torch.maximum(m, sinks.double()[:, None])
        any_visible = visible.any(dim=-1)[None].expand_as(m)
        m_safe = torch.where(any_visible, m, torch.zeros_like(m))
        w = torch.exp(x - m_safe[..., None])
        denom = w.sum(-1)
        if sinks is not None:
            denom = denom + torch.exp(sinks.double()[:, None] - m_safe)
        o = torch.einsum("hij,jhd->ihd", w, vs) / denom.T[..., None]
        l_ = (m_safe + torch.log(denom)).T
        o = torch.where(any_visible.T[..., None], o, torch.zeros_like(o))
        l_ = torch.where(any_visible.T, l_, torch.full_like(l_, -math.inf))
        out[cu[s]:cu[s + 1]] = o
        lse[cu[s]:cu[s + 1]] = l_
    return out, lse


TOL = {torch.bfloat16: dict(atol=1.5e-2, rtol=1.6e-2), torch.float16: dict(atol=3e-3, rtol=3e-3),
       torch.float32: dict(atol=1e-4, rtol=1e-4)}
LSE_TOL = dict(atol=5e-3, rtol=1e-4)


def make_case(gen, device, dtype=torch.bfloat16, q_lens=(1, 37, 5, 0, 1), kv_lens=(300, 37, 90, 4, 17),
              hq=8, hkv=2, d=128, bs=16, layout="NHD", extra_blocks=5, max_pages=None):
    """A ragged batch (decode, prefill, chunked prefill, empty) with a shuffled
    block table; layout HND stores the caches as [NB, Hkv, BS, D]."""
    assert all(a <= b for a, b in zip(q_lens, kv_lens))
    pages = [-(-n // bs) for n in kv_lens]
    width = max_pages or max(pages)
    nb = sum(pages) + extra_blocks
    perm = torch.randperm(nb, generator=gen)
    table = torch.zeros(len(q_lens), width, dtype=torch.int32)
    at = 0
    for s, n in enumerate(pages):
        table[s, :n] = perm[at:at + n]
        at += n
    T = sum(q_lens)

    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(dtype=dtype, device=device)

    q = randn(T, hq, d)
    if layout == "NHD":
        k, v = randn(nb, bs, hkv, d), randn(nb, bs, hkv, d)
    else:
        k = randn(nb, hkv, bs, d).permute(0, 2, 1, 3)
        v = randn(nb, hkv, bs, d).permute(0, 2, 1, 3)
    cu = torch.tensor([0] + list(itertools.accumulate(q_lens)), dtype=torch.int32)
    return dict(q=q, k=k, v=v, out=torch.full_like(q, float("nan")), cu_seqlens_q=cu.to(device),
                max_seqlen_q=max(q_lens), seqused_k=torch.tensor(kv_lens, dtype=torch.int32,
                                                                  device=device),
                max_seqlen_k=max(kv_lens), softmax_scale=1.0 / math.sqrt(d), causal=True,
                window_size=(-1, -1), block_table=table.to(device), softcap=0.0)


def check_against_reference(case, lse=None):
    ref_out, ref_lse = reference(case["q"], case["k"], case["v"], case["cu_seqlens_q"].cpu(),
                                 case["seqused_k"].cpu(), case["block_table"],
                                 float(torch.tensor(case["softmax_scale"], dtype=torch.float32)),
                                 case["causal"], case["window_size"], case["softcap"],
                                 case.get("alibi_slopes"), case.get("sinks"))
    torch.testing.assert_close(case["out"].double(), ref_out, **TOL[case["q"].dtype])
    if lse is not None:
        torch.testing.assert_close(lse.double(), ref_lse, **LSE_TOL)


def run_case(case, with_lse=True, **extra):
    case.update(extra)
    T, hq = case["q"].shape[:2]
    lse = torch.full((T, hq), float("nan"), dtype=torch.float32, device=case["q"].device) \
        if with_lse else None
    before = {n: case[n].clone() for n in ("q", "k", "v", "block_table", "seqused_k")}
    assert unified_attention(**case, lse=lse) is case["out"]
    if case["q"].is_cuda:
        torch.cuda.synchronize()
    check_against_reference(case, lse)
    for n, t in before.items():  # inputs are never written
        assert torch.equal(case[n], t), n


@pytest.fixture
def gen(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


# ---- CUDA numerics ----------------------------------------------------------------
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("d", [64, 128])
def test_cuda_mixed_batch(gen, dtype, causal, layout, d):
    run_case(make_case(gen, "cuda", dtype=dtype, layout=layout, d=d), causal=causal)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [True, False])
def test_cuda_window_softcap_alibi_sinks(gen, dtype, causal):
    case = make_case(gen, "cuda", dtype=dtype, hq=8, hkv=1, q_lens=(1, 20, 3), kv_lens=(200, 20, 64))
    sinks = (torch.randn(8, generator=gen) * 2).cuda()
    slopes = (2.0 ** -torch.arange(1, 9, dtype=torch.float32)).cuda()
    run_case(case, causal=causal, window_size=(32, 8), softcap=30.0, alibi_slopes=slopes,
             sinks=sinks)
    # sinks as the model's bf16 parameter, as vLLM passes gpt-oss's: what their fp32 values give
    sinks16 = sinks.bfloat16()
    unified_attention(**dict(case, sinks=sinks16.float()))
    want = case["out"].clone()
    case["out"].fill_(float("nan"))
    unified_attention(**dict(case, sinks=sinks16))
    assert torch.equal(case["out"], want)


@needs_cuda
@pytest.mark.parametrize("window", [(0, 0), (17, -1), (-1, 5)])
def test_cuda_windows(gen, window):
    for causal in (True, False):
        run_case(make_case(gen, "cuda"), causal=causal, window_size=window)


@needs_cuda
def test_cuda_decode_batch_gqa(gen):
    case = make_case(gen, "cuda", q_lens=(1,) * 16, kv_lens=tuple(range(1, 1600, 100)), hq=32,
                     hkv=8)
    run_case(case, with_lse=True)


@needs_cuda
def test_cuda_current_stream_is_used(gen):
    case = make_case(gen, "cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        unified_attention(**case)
    s.synchronize()
    check_against_reference(case)


@needs_cuda
def test_cuda_validate_opt_in_reports_bad_block(gen):
    case = make_case(gen, "cuda")
    unified_attention(**case)  # fine without validation
    bad = case["block_table"].clone()
    bad[0, 3] = case["k"].shape[0] + 7
    case["out"].fill_(float("nan"))
    with pytest.raises(AnyattnError) as e:
        unified_attention(**dict(case, block_table=bad), validate=True)
    assert e.value.status == Status.BAD_METADATA and "block_table[0][3]" in e.value.message
    assert torch.isnan(case["out"]).all()  # nothing launched


@needs_cuda
def test_cuda_argument_errors(gen):
    case = make_case(gen, "cuda")
    with pytest.raises(ValueError, match="k is on cpu"):
        unified_attention(**dict(case, k=case["k"].cpu()))
    with pytest.raises(TypeError, match="v: dtype"):
        unified_attention(**dict(case, v=case["v"].half()))
    with pytest.raises(TypeError, match="seqused_k: dtype must be int32"):
        unified_attention(**dict(case, seqused_k=case["seqused_k"].long()))
    with pytest.raises(ValueError, match="q must be contiguous"):
        qt = case["q"].transpose(0, 1).contiguous().transpose(0, 1)
        unified_attention(**dict(case, q=qt))
    with pytest.raises(NotImplementedError, match="q_descale"):
        unified_attention(**dict(case, q_descale=torch.ones(1, device="cuda")))


# ---- CUDA graphs ----------------------------------------------------------------------
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cuda_graph_capture_and_replay_with_new_inputs(gen, dtype):
    q_lens, kv_lens = (1, 24, 7, 1), (500, 24, 100, 33)
    case = make_case(gen, "cuda", dtype=dtype, q_lens=q_lens, kv_lens=kv_lens, max_pages=40)
    lse = torch.full(case["q"].shape[:2], float("nan"), dtype=torch.float32, device="cuda")
    static_max_k = 640  # the plan covers any context up to this in the replays
    call = dict(case, max_seqlen_k=static_max_k, max_seqlen_q=32)

    unified_attention(**call, lse=lse)  # warm-up: creates the plan and workspace
    torch.cuda.synchronize()
    check_against_reference(case, lse)
    misses = anyattn.plan_cache_info()["misses"]

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        unified_attention(**call, lse=lse)
    assert anyattn.plan_cache_info()["misses"] == misses  # capture made no plan

    nb, width = case["k"].shape[0], case["block_table"].shape[1]
    replays = [((2, 23, 7, 1), (600, 23, 640, 9)),   # token count stays 33, contexts <= 640
               ((1, 1, 30, 1), (1, 40, 30, 2)),
               ((9, 8, 8, 8), (9, 200, 300, 8))]
    for new_q_lens, new_kv_lens in replays:
        # Same shapes, new contents: data, another split of the tokens over the
        # sequences, new context lengths and a new (random) block table.
        cu = [0] + list(itertools.accumulate(new_q_lens))
        case["q"].copy_(torch.randn(case["q"].shape, generator=gen).to(dtype))
        case["k"].copy_(torch.randn(case["k"].shape, generator=gen).to(dtype))
        case["v"].copy_(torch.randn(case["v"].shape, generator=gen).to(dtype))
        case["cu_seqlens_q"].copy_(torch.tensor(cu, dtype=torch.int32))
        case["seqused_k"].copy_(torch.tensor(new_kv_lens, dtype=torch.int32))
        case["block_table"].copy_(torch.randint(0, nb, (len(new_q_lens), width), generator=gen,
                                                dtype=torch.int32))
        case["out"].fill_(float("nan"))
        lse.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        check_against_reference(case, lse)


# ---- fp8 caches ------------------------------------------------------------------------
def _fp8_dtype():
    """The fp8 format of this GPU's caches: e4m3fnuz on ROCm (MI300), e4m3fn on CUDA."""
    return torch.float8_e4m3fnuz if getattr(torch.version, "hip", None) else torch.float8_e4m3fn


def _fp8_case(gen, dtype, per_seq_head, **kw):
    """make_case with the caches quantised by torch (codes exact), descales
    per tensor (vLLM's stride-0 expand) or per (sequence, kv head); returns
    the case and the dequantised caches for the reference."""
    case = make_case(gen, "cuda", dtype=dtype, **kw)
    f8 = _fp8_dtype()
    kc, vc = (case[n].float().mul(2.0).to(f8) for n in ("k", "v"))
    num_seqs, hkv = len(case["seqused_k"]), case["k"].shape[2]
    if per_seq_head:
        kd = (torch.rand(num_seqs, hkv, generator=gen) * 0.5 + 0.05).cuda()
        vd = (torch.rand(num_seqs, hkv, generator=gen) * 2.0 + 0.05).cuda()
    else:
        kd = torch.tensor([0.3], device="cuda").expand(num_seqs, hkv)
        vd = torch.tensor([1.7], device="cuda").expand(num_seqs, hkv)
    kq, vq = kc.double(), vc.double()
    table, bs = case["block_table"].cpu(), case["k"].shape[1]
    for s, kv_len in enumerate(case["seqused_k"].tolist()):
        pages = table[s, :-(-kv_len // bs)].long().cuda()
        kq[pages] *= kd[s].double()[None, :, None]
        vq[pages] *= vd[s].double()[None, :, None]
    case.update(k=kc, v=vc, k_descale=kd, v_descale=vd)
    return case, kq, vq


def _fp8_run_or_skip(case):
    try:
        unified_attention(**case)
    except AnyattnError as e:
        if e.status == Status.UNSUPPORTED_OPTION:
            pytest.skip("this build's GPU backend refuses fp8 caches: %s" % e)
        raise
    torch.cuda.synchronize()


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("per_seq_head", [False, True])
def test_cuda_fp8_caches(gen, dtype, per_seq_head):
    case, kq, vq = _fp8_case(gen, dtype, per_seq_head, hq=8, hkv=2)
    _fp8_run_or_skip(case)
    check_against_reference(dict(case, k=kq, v=vq))


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cuda_fp8_staged_prefill(gen, dtype):
    """stage_kv_tokens: a plan whose workspace holds a 16-bit copy of the
    keys; a prefill batch that fits is converted into it and read by the
    16-bit prefill kernel, with the numbers of a 16-bit cache of the codes."""
    anyattn.clear_plan_cache()
    case, kq, vq = _fp8_case(gen, dtype, True, q_lens=(200, 90, 70), kv_lens=(300, 90, 140), hq=8,
                             hkv=2, d=128, bs=16)
    _fp8_run_or_skip(dict(case))
    plain = anyattn.plan_cache_info()["plans"]
    assert len(plain) == 1 and "staged" not in plain[0][1]
    case["out"].fill_(float("nan"))
    unified_attention(**case, stage_kv_tokens=1000)
    torch.cuda.synchronize()
    check_against_reference(dict(case, k=kq, v=vq))
    plans = anyattn.plan_cache_info()["plans"]
    assert len(plans) == 2
    staged = [p for p in plans if p[0][3][3] == 1024]  # rounded up to a power of two
    assert len(staged) == 1 and "staged to" in staged[0][1], plans
    assert staged[0][2] >= plain[0][2] + 2 * 1024 * 2 * 128 * 2  # K and V, 16-bit, 2 kv heads
    # a graph of the staged plan replays with new inputs
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        unified_attention(**case, stage_kv_tokens=1000)
    case["k"].view(torch.uint8).zero_()  # every key 0: each row averages its visible values
    case["out"].fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    check_against_reference(dict(case, k=torch.zeros_like(kq), v=vq))
    with pytest.raises(ValueError, match=r"stage_kv_tokens is -1"):
        unified_attention(**case, stage_kv_tokens=-1)


@needs_cuda
def test_cuda_fp8_graph_replays_read_new_descales(gen):
    case, kq, vq = _fp8_case(gen, torch.bfloat16, True, q_lens=(1, 9, 1), kv_lens=(200, 9, 40))
    _fp8_run_or_skip(case)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        unified_attention(**case)
    kd, vd = case["k_descale"], case["v_descale"]
    for scale_k, scale_v in ((2.0, 0.5), (0.25, 3.0)):
        kd.mul_(scale_k)  # in place: the graph reads the same memory
        vd.mul_(scale_v)
        kq, vq = kq * scale_k, vq * scale_v
        case["out"].fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        check_against_reference(dict(case, k=kq, v=vq))


@needs_cuda
def test_first_call_inside_capture_is_refused(gen, monkeypatch):
    # Simulated capture, so a failing check cannot leave a real capture open.
    anyattn.clear_plan_cache()
    case = make_case(gen, "cuda")
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(RuntimeError, match="before capture"):
        unified_attention(**case)


# ---- several streams and threads ------------------------------------------------------
def _split_kv_case(gen):
    """Decode over long contexts: the plan splits the keys into segments whose
    partials go through the workspace, the part streams must not share."""
    return make_case(gen, "cuda", q_lens=(1, 1, 1, 1), kv_lens=(3000, 2500, 1800, 3100), hq=32,
                     hkv=8, d=128)


def _bits(t):
    return t.view(torch.int16)  # bf16: NaN == NaN, an exact comparison


def _calls_on(stream, case, outs):
    """unified_attention into each of `outs` on `stream`, without waiting."""
    stream.wait_stream(torch.cuda.default_stream())  # the inputs were made there
    with torch.cuda.stream(stream):
        for o in outs:
            o.fill_(float("nan"))
            unified_attention(**dict(case, out=o))


@needs_cuda
def test_cuda_streams_and_threads_match_one_stream(gen):
    import threading
    from anyattn import attention
    anyattn.clear_plan_cache()
    case = _split_kv_case(gen)
    unified_attention(**case)
    torch.cuda.synchronize()
    check_against_reference(case)
    want = case["out"].clone()
    plan, = attention._plans.values()
    assert plan.workspace_size > 0, plan.describe  # split-KV: the workspace is written

    # Several streams from one thread, then one stream per thread, 20 calls each,
    # nothing waited for in between: every output as the one-stream call's.
    streams = [torch.cuda.Stream() for _ in range(4)]
    outs = [[torch.empty_like(want) for _ in range(20)] for _ in streams]
    for s, o in zip(streams, outs):
        _calls_on(s, case, o)
    torch.cuda.synchronize()
    bad = sum(not torch.equal(_bits(x), _bits(want)) for o in outs for x in o)
    assert bad == 0, "%d of %d outputs on 4 streams of one thread differ" % (bad, 80)

    errors = []
    threads_streams = [torch.cuda.Stream() for _ in range(4)]
    outs = [[torch.empty_like(want) for _ in range(20)] for _ in threads_streams]

    def work(i):
        try:
            _calls_on(threads_streams[i], case, outs[i])
        except BaseException as e:  # noqa: B036 -- handed to the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    assert not errors, errors[0]
    bad = sum(not torch.equal(_bits(x), _bits(want)) for o in outs for x in o)
    assert bad == 0, "%d of %d outputs from 4 threads on their own streams differ" % (bad, 80)
    # one workspace per stream: the default one and the eight above
    assert len(plan.workspaces()) == 9


@needs_cuda
def test_cuda_threads_on_one_stream_share_its_workspace(gen):
    import threading
    from anyattn import attention
    anyattn.clear_plan_cache()
    case = _split_kv_case(gen)
    unified_attention(**case)
    torch.cuda.synchronize()
    want = case["out"].clone()
    stream = torch.cuda.Stream()
    outs = [[torch.empty_like(want) for _ in range(10)] for _ in range(4)]
    threads = [threading.Thread(target=_calls_on, args=(stream, case, outs[i])) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    assert all(torch.equal(_bits(x), _bits(want)) for o in outs for x in o)
    plan, = attention._plans.values()
    assert len(plan.workspaces()) == 2  # the default stream's and `stream`'s


# ---- torch CPU tensors -> the CPU backend ---------------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_torch_cpu_tensors(gen, dtype):
    case = make_case(gen, "cpu", dtype=dtype, d=64, layout="HND")
    run_case(case, alibi_slopes=torch.linspace(0.01, 0.2, 8), sinks=torch.randn(8, generator=gen))
