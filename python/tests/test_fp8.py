"""fp8 KV caches through the binding on the CPU backend: uint8 views with
kv_cache_dtype, ml_dtypes arrays, torch float8 tensors; per-tensor and
per-(sequence, kv head) descales, vLLM's stride-0 expanded scalar among them;
against a float64 reference that dequantises the codes exactly. Plus the
arguments the binding refuses. Seeds are printed; ANYATTN_SEED reruns one."""

import enum
import math

import numpy as np
import pytest

from anyattn import AnyattnError, unified_attention
from test_cpu import make_case, reference, run_and_check

FNUZ = {"fp8": False, "fp8_e4m3": False, "fp8_e4m3fn": False, "fp8_e4m3fnuz": True}


def fp8_values(fnuz):
    """The value of each of the 256 codes, from the format's definition (NaN codes NaN)."""
    bias = 8 if fnuz else 7
    vals = np.empty(256)
    for c in range(256):
        e, m = (c >> 3) & 15, c & 7
        v = math.ldexp(m / 8, 1 - bias) if e == 0 else math.ldexp(1 + m / 8, e - bias)
        vals[c] = -v if c & 0x80 else v
    if fnuz:
        vals[0x80] = np.nan
    else:
        vals[0x7F] = vals[0xFF] = np.nan
    return vals


def random_codes(rng, shape, fnuz):
    """Codes of magnitude 2^-5 .. 4 (a quantised cache's typical range), some zeros."""
    bias = 8 if fnuz else 7
    e = rng.integers(bias - 5, bias + 2, size=shape)
    e[rng.random(shape) < 0.02] = 0
    m = rng.integers(0, 8, size=shape)
    sign = rng.integers(0, 2, size=shape)
    sign[(e == 0) & (m == 0)] = 0  # 0x80 is NaN in fnuz
    return ((sign << 7) | (e << 3) | m).astype(np.uint8)


def fp8_case(rng, kv_cache_dtype="fp8", dtype="float16", descale="seqhead", **kw):
    """make_case with fp8 codes in the caches (uint8) and descales; returns the
    call's arguments and the dequantised caches for the reference."""
    case = make_case(rng, dtype=dtype if dtype != "bfloat16" else "float32", **kw)
    fnuz = FNUZ[kv_cache_dtype]
    nb, bs, hkv, d = case["k"].shape
    if kw.get("layout") == "HND":  # codes stored [nb, hkv, bs, d], passed as a permuted view
        kc, vc = (random_codes(rng, (nb, hkv, bs, d), fnuz).transpose(0, 2, 1, 3) for _ in range(2))
    else:
        kc, vc = (random_codes(rng, (nb, bs, hkv, d), fnuz) for _ in range(2))
    num_seqs = len(case["seqused_k"])
    kd = vd = None
    if descale == "tensor":
        kd, vd = (rng.uniform(0.05, 0.6, 1).astype(np.float32) for _ in range(2))
    elif descale == "seqhead":
        kd = rng.uniform(0.05, 0.6, (num_seqs, hkv)).astype(np.float32)
        vd = rng.uniform(0.05, 2.0, (num_seqs, hkv)).astype(np.float32)
    vals = fp8_values(fnuz)
    kq, vq = vals[kc], vals[vc]
    # every page belongs to one sequence: scale its pages by that sequence's descales
    for s in range(num_seqs):
        pages = case["block_table"][s, :-(-int(case["seqused_k"][s]) // bs)]
        for arr, ds in ((kq, kd), (vq, vd)):
            if ds is not None:
                arr[pages] *= float(ds[0]) if ds.size == 1 else ds[s][None, :, None]
    case.update(k=kc, v=vc, k_descale=kd, v_descale=vd, kv_cache_dtype=kv_cache_dtype)
    return case, kq, vq


def check(case, kq, vq, dtype="float16", lse=True, **extra):
    case = dict(case, **extra)
    q, out = case["q"], case["out"]
    T, hq = q.shape[:2]
    lse_buf = np.full((T, hq), np.nan, dtype=np.float32) if lse else None
    unified_attention(**case, lse=lse_buf)
    ref_out, ref_lse = reference(np.asarray(q, np.float64), kq, vq, case["cu_seqlens_q"],
                                 case["seqused_k"], case["block_table"],
                                 np.float32(case["softmax_scale"]), case["causal"],
                                 case["window_size"], case["softcap"], case.get("alibi_slopes"),
                                 case.get("sinks"))
    tol = dict(atol=3e-3, rtol=3e-3) if dtype == "float16" else dict(atol=2e-2, rtol=2e-2)
    np.testing.assert_allclose(np.asarray(out, np.float64), ref_out, **tol)
    if lse:
        np.testing.assert_allclose(lse_buf, ref_lse, atol=2e-4, rtol=1e-5)


# ---- NumPy uint8 caches with kv_cache_dtype -------------------------------------------
@pytest.mark.parametrize("fmt", ["fp8", "fp8_e4m3", "fp8_e4m3fnuz"])
@pytest.mark.parametrize("descale", [None, "tensor", "seqhead"])
def test_uint8_caches(rng, fmt, descale):
    case, kq, vq = fp8_case(rng, fmt, descale=descale, hq=8, hkv=2, d=64, bs=16,
                            q_lens=(1, 9, 1, 0), kv_lens=(40, 30, 77, 5))
    check(case, kq, vq)


@pytest.mark.parametrize("causal", [True, False])
def test_features_together(rng, causal):
    case, kq, vq = fp8_case(rng, "fp8_e4m3fnuz", hq=6, hkv=2, d=37, bs=5, layout="HND",
                            q_lens=(6, 1, 13), kv_lens=(21, 9, 13))
    sinks = rng.standard_normal(6).astype(np.float32)
    slopes = rng.uniform(0, 0.5, 6).astype(np.float32)
    check(case, kq, vq, causal=causal, sinks=sinks, alibi_slopes=slopes, softcap=10.0,
          window_size=(7, 3))


@pytest.mark.parametrize("d", [1, 13, 128, 200])
def test_head_dims(rng, d):
    case, kq, vq = fp8_case(rng, "fp8", d=d, q_lens=(1, 20), kv_lens=(33, 20))
    check(case, kq, vq)


def test_nan_code_in_v_reaches_the_rows_that_see_it(rng):
    case, kq, vq = fp8_case(rng, "fp8", descale="tensor", hq=4, hkv=1, d=32, bs=4,
                            q_lens=(1,), kv_lens=(10,))
    page = case["block_table"][0, 0]
    case["v"][page, 2, 0, 5] = 0x7F  # key 2, dim 5
    unified_attention(**case)
    out = case["out"].astype(np.float64)
    assert np.isnan(out[0, :, 5]).all()
    assert np.isfinite(np.delete(out, 5, axis=2)).all()


# ---- dtypes that name the format --------------------------------------------------------
def test_ml_dtypes_caches(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for fmt, dt in (("fp8", ml_dtypes.float8_e4m3fn), ("fp8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz)):
        case, kq, vq = fp8_case(rng, fmt, q_lens=(1, 6), kv_lens=(30, 6))
        case = dict(case, k=case["k"].view(dt), v=case["v"].view(dt), kv_cache_dtype=None)
        check(case, kq, vq)
        with pytest.raises(ValueError, match="kv_cache_dtype '.*' contradicts the caches' dtype float8"):
            unified_attention(**dict(case, kv_cache_dtype="fp8_e4m3fnuz" if fmt == "fp8" else "fp8"))


@pytest.mark.parametrize("fmt", ["fp8", "fp8_e4m3fnuz"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_torch_cpu(rng, fmt, dtype):
    torch = pytest.importorskip("torch")
    tdt = getattr(torch, dtype)
    case, kq, vq = fp8_case(rng, fmt, hq=8, hkv=2, d=64, bs=16, descale=None,
                            q_lens=(1, 12, 1), kv_lens=(50, 12, 90))
    f8 = torch.float8_e4m3fnuz if FNUZ[fmt] else torch.float8_e4m3fn
    q = torch.from_numpy(case["q"].astype(np.float32)).to(tdt)
    # vLLM's per-tensor descale: a scalar expanded to [num_seqs, num_kv_heads], stride 0
    kd = torch.tensor([0.25]).expand(3, 2)
    vd = torch.rand(3, 2) + 0.5
    args = dict(case, q=q, out=torch.full_like(q, float("nan")), kv_cache_dtype=None,
                k=torch.from_numpy(case["k"]).view(f8), v=torch.from_numpy(case["v"]).view(f8),
                k_descale=None, v_descale=None,
                **{n: torch.from_numpy(case[n]) for n in ("cu_seqlens_q", "seqused_k", "block_table")})
    with pytest.raises(ValueError, match="k_descale is per tensor but v_descale is per"):
        unified_attention(**dict(args, k_descale=kd, v_descale=vd))
    vd = torch.tensor(0.5).expand(3, 2)
    unified_attention(**dict(args, k_descale=kd, v_descale=vd))
    ref, _ = reference(q.double().numpy(), 0.25 * kq, 0.5 * vq, case["cu_seqlens_q"],
                       case["seqused_k"], case["block_table"], np.float32(case["softmax_scale"]),
                       True, (-1, -1))
    tol = 2e-2 if dtype == "bfloat16" else 3e-3
    np.testing.assert_allclose(args["out"].double().numpy(), ref, atol=tol, rtol=tol)
    # the same codes as a uint8 view named by kv_cache_dtype
    out2 = torch.full_like(q, float("nan"))
    unified_attention(**dict(args, out=out2, k=args["k"].view(torch.uint8), v=args["v"].view(torch.uint8),
                             kv_cache_dtype=fmt, k_descale=kd, v_descale=vd))
    assert torch.equal(out2, args["out"])


# ---- what the binding refuses, and what it drops --------------------------------------
def test_refusals(rng):
    case, _, _ = fp8_case(rng, "fp8", q_lens=(1, 6), kv_lens=(30, 6))
    with pytest.raises(TypeError, match="uint8 caches need kv_cache_dtype"):
        unified_attention(**dict(case, kv_cache_dtype=None))
    with pytest.raises(NotImplementedError, match="kv_cache_dtype 'fp8_e5m2'"):
        unified_attention(**dict(case, kv_cache_dtype="fp8_e5m2"))
    with pytest.raises(TypeError, match="fp8 caches need q in float16 or bfloat16"):
        unified_attention(**dict(case, q=case["q"].astype(np.float32),
                                 out=case["out"].astype(np.float32)))
    with pytest.raises(NotImplementedError, match="q_descale"):
        unified_attention(**dict(case, q_descale=np.ones(1, np.float32)))
    with pytest.raises(NotImplementedError, match="output_scale"):
        unified_attention(**dict(case, output_scale=np.ones(1, np.float32)))
    with pytest.raises(NotImplementedError, match="k_scale_nvfp4"):
        unified_attention(**dict(case, k_scale_nvfp4=np.ones(1, np.float32)))
    with pytest.raises(ValueError, match="k_descale: shape"):
        unified_attention(**dict(case, k_descale=np.ones((2, 3), np.float32)))
    with pytest.raises(TypeError, match="v_descale: dtype must be float32"):
        unified_attention(**dict(case, v_descale=np.ones(1, np.float16)))
    with pytest.raises(TypeError, match="v: dtype uint8 differs"):
        unified_attention(**dict(case, k=case["k"].view(np.int8)))
    # vLLM's split thresholds and scratch buffers, and unknown keywords passed as None
    unified_attention(**dict(case, seq_threshold_3D=128, softmax_segm_output=np.empty(1),
                             kv_quant_mode=None))


class KVQuantMode(enum.IntEnum):
    """vLLM's KVQuantMode (vllm.v1.kv_cache_interface), the values its versions share."""
    NONE = 0
    FP8_PER_TENSOR = 1
    INT8_PER_TOKEN_HEAD = 2
    FP8_PER_TOKEN_HEAD = 3


def vllm_keywords(case, mode):
    """The keywords vLLM's Triton backend passes beside the problem (vLLM's
    split thresholds and scratch buffers, its ALiBi and multimodal switches,
    kv_quant_mode and the scale caches of its per-token-head modes)."""
    hq, d = case["q"].shape[1:]
    return dict(case, seq_threshold_3D=8, num_par_softmax_segments=16,
                softmax_segm_output=np.empty((8, hq, 16, d), np.float32),
                softmax_segm_max=np.empty((8, hq, 16), np.float32),
                softmax_segm_expsum=np.empty((8, hq, 16), np.float32), alibi_slopes=None,
                output_scale=None, qq_bias=None, sinks=None, mm_prefix_range=None,
                use_alibi_sqrt=False, kv_quant_mode=mode, k_scale_cache=None, v_scale_cache=None)


@pytest.mark.parametrize("as_int", [False, True])
def test_vllm_kv_quant_mode(rng, as_int):
    """vLLM's backend passes kv_quant_mode (NONE over caches of q's dtype,
    FP8_PER_TENSOR over fp8 caches) and its other switches on every call."""
    mode = int if as_int else (lambda m: m)
    case, kq, vq = fp8_case(rng, "fp8", q_lens=(1, 6), kv_lens=(30, 6))
    check(vllm_keywords(case, mode(KVQuantMode.FP8_PER_TENSOR)), kq, vq)
    case16 = make_case(rng, dtype="float16", q_lens=(1, 6), kv_lens=(30, 6))
    run_and_check(vllm_keywords(case16, mode(KVQuantMode.NONE)), "float16")
    with pytest.raises(ValueError, match="kv_quant_mode is NONE but k holds fp8 codes"):
        unified_attention(**vllm_keywords(case, mode(KVQuantMode.NONE)))
    with pytest.raises(ValueError, match="kv_quant_mode is FP8_PER_TENSOR but k holds float16"):
        unified_attention(**vllm_keywords(case16, mode(KVQuantMode.FP8_PER_TENSOR)))
    name = "3" if as_int else "FP8_PER_TOKEN_HEAD"
    with pytest.raises(NotImplementedError, match="kv_quant_mode %s is not supported" % name):
        unified_attention(**vllm_keywords(case, mode(KVQuantMode.FP8_PER_TOKEN_HEAD)))


def test_vllm_switches_refused(rng):
    case, _, _ = fp8_case(rng, "fp8", q_lens=(1, 6), kv_lens=(30, 6))
    args = vllm_keywords(case, KVQuantMode.FP8_PER_TENSOR)
    args["out"][:] = np.nan
    for name, val, needle in (
            ("use_alibi_sqrt", True, "use_alibi_sqrt: anyattn's ALiBi bias is linear"),
            ("mm_prefix_range", np.zeros((2, 1, 2), np.int32), "mm_prefix_range: bidirectional"),
            ("k_scale_cache", np.ones(1, np.float32), "k_scale_cache: per-token-head"),
            ("v_scale_cache", np.ones(1, np.float32), "v_scale_cache: per-token-head"),
            ("kv_quant_mode", 5, "kv_quant_mode 5 is not supported")):
        with pytest.raises(NotImplementedError, match=needle):
            unified_attention(**dict(args, **{name: val}))
        assert np.isnan(args["out"]).all(), name  # nothing written
    for bad in ("fp8", 1.0, True):
        with pytest.raises(TypeError, match="kv_quant_mode: expected vLLM's KVQuantMode"):
            unified_attention(**dict(args, kv_quant_mode=bad))


def test_descales_dropped_for_16bit_caches(rng):
    case = make_case(rng, dtype="float16", q_lens=(1, 5), kv_lens=(20, 5))
    unified_attention(**case)
    want = case["out"].copy()
    case["out"][:] = np.nan
    unified_attention(**case, k_descale=np.full(1, 3.0, np.float32), v_descale=np.full(1, 3.0, np.float32))
    np.testing.assert_array_equal(case["out"], want)
    with pytest.raises(ValueError, match="kv_cache_dtype is 'fp8' but k holds float16"):
        unified_attention(**case, kv_cache_dtype="fp8")


def test_library_checks_cache_bounds_in_bytes(rng):
    case, _, _ = fp8_case(rng, "fp8", q_lens=(1,), kv_lens=(9,), bs=4)
    case["block_table"][0, 1] = case["k"].shape[0]  # past the cache
    with pytest.raises(AnyattnError, match="block_table"):
        unified_attention(**case)


def test_stage_kv_tokens_on_the_cpu(rng):
    """stage_kv_tokens sizes a GPU plan's 16-bit copy of fp8 keys: the CPU
    converts in place, so it shares the plan of the call without it and
    computes the same; the value is still checked."""
    import anyattn
    case, kq, vq = fp8_case(rng, "fp8", q_lens=(70, 1), kv_lens=(90, 30), bs=16)
    check(case, kq, vq)
    want = case["out"].copy()
    misses = anyattn.plan_cache_info()["misses"]
    case["out"][:] = np.nan
    unified_attention(**case, stage_kv_tokens=4096)
    np.testing.assert_array_equal(case["out"], want)
    assert anyattn.plan_cache_info()["misses"] == misses
    with pytest.raises(ValueError, match=r"stage_kv_tokens is -1, must be in \[0, 536870912\]"):
        unified_attention(**case, stage_kv_tokens=-1)
    with pytest.raises(ValueError, match=r"stage_kv_tokens is 536870913"):
        unified_attention(**case, stage_kv_tokens=2**29 + 1)
    with pytest.raises(TypeError, match="stage_kv_tokens: expected an int, got float"):
        unified_attention(**case, stage_kv_tokens=1.5)
    # the library's message when a GPU plan's stage area overflows, in the call's terms
    from anyattn.attention import python_names
    msg = python_names("limits->stage_kv_tokens 536870912 (max_seqs 1024, max_context 1048576) x "
                       "block_size 16 x num_kv_heads 64 x head_dim 512: the stage area of the "
                       "workspace overflows", max_seqlen_k=1000000, max_seqlen_q=0, sum_seqlen_k=0)
    assert msg.startswith("stage_kv_tokens (536870912 once rounded up for the plan, with num_seqs "
                          "1024 and max_seqlen_k 1048576 so rounded) x block_size 16"), msg
    assert "->" not in msg and "limits" not in msg and "max_context" not in msg
