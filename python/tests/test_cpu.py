"""The Python binding on the CPU backend with NumPy arrays, against a float64
reference written from docs/semantics.md; plus argument checks, library
errors and plan-cache reuse. Seeds are printed; ANYATTN_SEED reruns one."""

import ctypes
import math

import numpy as np
import pytest

import anyattn
from anyattn import AnyattnError, Status, unified_attention


# ---- reference (docs/semantics.md, float64, written for clarity) -------------
def reference(q, k, v, cu, seqused, table, scale, causal, window, softcap=0.0, alibi=None,
              sinks=None):
    """q [T, Hq, D]; k, v logical [NB, BS, Hkv, D] (any strides); returns
    (out [T, Hq, D], lse [T, Hq]) in float64."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    T, Hq, D = q.shape
    BS, Hkv = k.shape[1], k.shape[2]
    group = Hq // Hkv
    wl, wr = window
    out = np.zeros((T, Hq, D))
    lse = np.full((T, Hq), -np.inf)
    for s in range(len(cu) - 1):
        q_len, kv_len = int(cu[s + 1] - cu[s]), int(seqused[s])
        if q_len == 0:
            continue
        j = np.arange(kv_len)
        pages = table[s, j // BS]
        ks, vs = k[pages, j % BS], v[pages, j % BS]  # [kv_len, Hkv, D]
        for i in range(q_len):
            t = int(cu[s]) + i
            p = kv_len - q_len + i
            visible = np.ones(kv_len, dtype=bool)
            if causal:
                visible &= j <= p
            if wl >= 0:
                visible &= j >= p - wl
            if not causal and wr >= 0:
                visible &= j <= p + wr
            for h in range(Hq):
                x = scale * (ks[:, h // group] @ q[t, h])
                if softcap > 0:
                    x = softcap * np.tanh(x / softcap)
                if alibi is not None:
                    x = x + float(alibi[h]) * (j - p)
                xv = x[visible]
                if xv.size == 0:
                    continue  # out 0, lse -inf, sinks or not
                m = xv.max()
                if sinks is not None:
                    m = max(m, float(sinks[h]))
                w = np.exp(xv - m)
                denom = w.sum() + (math.exp(float(sinks[h]) - m) if sinks is not None else 0.0)
                out[t, h] = (w @ vs[visible, h // group]) / denom
                lse[t, h] = m + math.log(denom)
    return out, lse


# ---- inputs ------------------------------------------------------------------
TOL = {"float32": dict(atol=2e-5, rtol=1e-4), "float16": dict(atol=2e-3, rtol=2e-3)}


def make_case(rng, dtype="float32", q_lens=(1, 7, 4, 0), kv_lens=(9, 7, 20, 5), hq=4, hkv=2,
              d=32, bs=4, layout="NHD", extra_blocks=3, pad=0):
    """A ragged batch with a shuffled block table. layout HND: the caches are
    [NB, Hkv, BS, D] in memory, passed as a permuted view."""
    q_lens, kv_lens = np.array(q_lens), np.array(kv_lens)
    assert (q_lens <= kv_lens).all()
    pages = -(-kv_lens // bs)
    max_pages = int(pages.max()) if len(pages) else 1
    nb = int(pages.sum()) + extra_blocks
    perm = rng.permutation(nb).astype(np.int32)
    table = np.full((len(q_lens), max(max_pages, 1)), pad, dtype=np.int32)
    at = 0
    for s, n in enumerate(pages):
        table[s, :n] = perm[at:at + n]
        at += n
    T = int(q_lens.sum())
    q = rng.standard_normal((T, hq, d)).astype(dtype)
    if layout == "NHD":
        k = rng.standard_normal((nb, bs, hkv, d)).astype(dtype)
        v = rng.standard_normal((nb, bs, hkv, d)).astype(dtype)
    else:
        k = rng.standard_normal((nb, hkv, bs, d)).astype(dtype).transpose(0, 2, 1, 3)
        v = rng.standard_normal((nb, hkv, bs, d)).astype(dtype).transpose(0, 2, 1, 3)
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    return dict(q=q, k=k, v=v, out=np.full_like(q, np.nan), cu_seqlens_q=cu,
                max_seqlen_q=int(q_lens.max()) if len(q_lens) else 0,
                seqused_k=kv_lens.astype(np.int32),
                max_seqlen_k=int(kv_lens.max()) if len(kv_lens) else 0,
                softmax_scale=1.0 / math.sqrt(d), causal=True, window_size=(-1, -1),
                block_table=table, softcap=0.0)


def run_and_check(case, dtype="float32", with_lse=True, **extra):
    case = dict(case)
    case.update(extra)
    T, hq = case["q"].shape[:2]
    lse = np.full((T, hq), np.nan, dtype=np.float32) if with_lse else None
    snapshot = {n: case[n].copy() for n in ("q", "k", "v", "cu_seqlens_q", "seqused_k",
                                             "block_table")}
    ret = unified_attention(**case, lse=lse)
    assert ret is case["out"]
    ref_out, ref_lse = reference(case["q"], case["k"], case["v"], case["cu_seqlens_q"],
                                 case["seqused_k"], case["block_table"],
                                 np.float32(case["softmax_scale"]), case["causal"],
                                 case["window_size"], case["softcap"],
                                 case.get("alibi_slopes"), case.get("sinks"))
    np.testing.assert_allclose(case["out"].astype(np.float64), ref_out, **TOL[dtype])
    if with_lse:
        np.testing.assert_allclose(lse, ref_lse, atol=1e-4, rtol=1e-5)
    for n, before in snapshot.items():  # inputs are never written
        np.testing.assert_array_equal(case[n], before, err_msg=n)


# ---- structs and library ----------------------------------------------------------
@pytest.mark.parametrize("cls,init", [
    (anyattn.Problem, "anyattn_problem_init"), (anyattn.Limits, "anyattn_limits_init"),
    (anyattn.Batch, "anyattn_batch_init"), (anyattn.Tensors, "anyattn_tensors_init")])
def test_struct_size_matches_c(cls, init):
    buf = ctypes.create_string_buffer(1024)  # larger than any of the structs
    getattr(anyattn.lib(), init)(buf)
    c_size = ctypes.c_size_t.from_buffer(buf).value
    assert c_size == ctypes.sizeof(cls)


def test_problem_defaults_land_on_the_right_fields():
    p = anyattn.Problem()
    anyattn.lib().anyattn_problem_init(ctypes.byref(p))
    assert (p.dtype, p.block_size, p.window_left, p.window_right) == (anyattn.DType.BF16, 16, -1, -1)
    assert (p.num_q_heads, p.causal, p.scale, p.softcap, p.config) == (0, 0, 0.0, 0.0, None)
    assert p.kv_dtype == anyattn.KVDType.AS_Q
    t = anyattn.Tensors()
    anyattn.lib().anyattn_tensors_init(ctypes.byref(t))
    assert (t.k_descale, t.v_descale, t.descale_layout) == (None, None, anyattn.DescaleLayout.PER_TENSOR)


def test_library_basics():
    assert anyattn.version() == anyattn.__version__
    assert anyattn.backend_compiled("cpu")
    assert anyattn.device_count("cpu") == 1
    with pytest.raises(AnyattnError) as e:
        anyattn.device_name("cpu", 3)
    assert e.value.status == Status.NO_DEVICE and "device 3" in e.value.message


# ---- numerics ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_mixed_batch(rng, dtype, causal, layout):
    case = make_case(rng, dtype=dtype, layout=layout)
    run_and_check(case, dtype, causal=causal)


@pytest.mark.parametrize("hq,hkv", [(4, 4), (8, 2), (6, 1)])
@pytest.mark.parametrize("bs", [1, 5, 16])
def test_gqa_and_block_sizes(rng, hq, hkv, bs):
    case = make_case(rng, hq=hq, hkv=hkv, bs=bs, q_lens=(3, 1, 12), kv_lens=(40, 17, 12))
    run_and_check(case)


@pytest.mark.parametrize("d", [1, 8, 64, 80, 128])
def test_head_dims(rng, d):
    run_and_check(make_case(rng, d=d, layout="HND"))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("window", [(0, 0), (3, -1), (-1, 2), (4, 4), (16, 0)])
def test_windows(rng, causal, window):
    case = make_case(rng, q_lens=(5, 1, 20), kv_lens=(30, 25, 20))
    run_and_check(case, causal=causal, window_size=window)


@pytest.mark.parametrize("softcap", [1.0, 30.0])
def test_softcap(rng, softcap):
    case = make_case(rng)
    case["q"] *= 4  # large scores, so the cap matters
    run_and_check(case, softcap=softcap)


def test_alibi(rng):
    case = make_case(rng, hq=4, hkv=2)
    slopes = (2.0 ** -np.arange(1, 5)).astype(np.float32)
    run_and_check(case, alibi_slopes=slopes)


@pytest.mark.parametrize("causal", [True, False])
def test_sinks_alibi_softcap_window_together(rng, causal):
    case = make_case(rng, dtype="float16", hq=4, hkv=1, q_lens=(6, 1), kv_lens=(13, 9))
    sinks = rng.standard_normal(4).astype(np.float32) * 2
    slopes = rng.uniform(0, 0.5, 4).astype(np.float32)
    run_and_check(case, "float16", causal=causal, sinks=sinks, alibi_slopes=slopes, softcap=20.0,
                  window_size=(5, 3))


def test_sinks(rng):
    case = make_case(rng)
    sinks = np.array([-1.0, 0.0, 3.0, 10.0], dtype=np.float32)  # 10: the sink dominates
    run_and_check(case, sinks=sinks)


def test_sinks_and_slopes_in_16_bits(rng):
    """bf16 and fp16 sinks and slopes (vLLM passes gpt-oss's bf16 sinks
    parameter as it is) compute what their fp32 values do."""
    case = make_case(rng, dtype="float16", hq=4, hkv=2, q_lens=(5, 1), kv_lens=(11, 20))
    sinks = np.array([-1.5, 0.25, 3.0, 6.5], dtype=np.float16)  # exact in fp16 and bf16
    slopes = np.array([0.5, 0.125, 0.0625, 0.25], dtype=np.float16)
    run_and_check(case, "float16", sinks=sinks, alibi_slopes=slopes)
    want = case["out"].copy()
    case["out"][:] = np.nan
    unified_attention(**dict(case, sinks=sinks.astype(np.float32),
                             alibi_slopes=slopes.astype(np.float32)))
    np.testing.assert_array_equal(case["out"], want)
    with pytest.raises(TypeError, match="sinks: dtype must be float32, bfloat16 or float16, got "
                                        "float64"):
        unified_attention(**dict(case, sinks=sinks.astype(np.float64)))
    with pytest.raises(ValueError, match=r"sinks: shape must be \(4,\)"):
        unified_attention(**dict(case, sinks=sinks[:3]))
    try:  # NumPy bf16 through ml_dtypes, where it is installed
        import ml_dtypes
    except ImportError:
        ml_dtypes = None
    if ml_dtypes is not None:
        case["out"][:] = np.nan
        unified_attention(**dict(case, sinks=sinks.astype(ml_dtypes.bfloat16),
                                 alibi_slopes=slopes.astype(ml_dtypes.bfloat16)))
        np.testing.assert_array_equal(case["out"], want)
    torch = pytest.importorskip("torch")  # torch bf16, as vLLM passes gpt-oss's sinks
    targs = {n: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for n, v in case.items()}
    targs["out"] = torch.full_like(targs["q"], float("nan"))
    unified_attention(**dict(targs, sinks=torch.from_numpy(sinks.astype(np.float32)).bfloat16(),
                             alibi_slopes=torch.from_numpy(slopes).bfloat16()))
    np.testing.assert_array_equal(targs["out"].numpy(), want)


def test_decode_only_without_lse(rng):
    case = make_case(rng, q_lens=(1,) * 6, kv_lens=(1, 2, 9, 33, 64, 5), bs=16)
    run_and_check(case, with_lse=False)


def test_scale_default_and_custom(rng):
    case = make_case(rng)
    run_and_check(case, softmax_scale=0.3)
    out_default = case["out"].copy()
    case2 = dict(case, out=np.full_like(case["q"], np.nan))
    unified_attention(**dict(case2, softmax_scale=None))
    ref, _ = reference(case["q"], case["k"], case["v"], case["cu_seqlens_q"], case["seqused_k"],
                       case["block_table"], np.float32(1 / math.sqrt(32)), True, (-1, -1))
    np.testing.assert_allclose(case2["out"], ref, **TOL["float32"])
    assert not np.allclose(out_default, case2["out"])


def test_block_table_column_slice_and_extra_rows(rng):
    case = make_case(rng, q_lens=(2, 3), kv_lens=(9, 3))
    wide = np.full((5, case["block_table"].shape[1] + 7), 0, dtype=np.int32)
    wide[:2, :case["block_table"].shape[1]] = case["block_table"]
    run_and_check(case, block_table=wide[:, :case["block_table"].shape[1]])


def test_unused_table_entries_are_not_read(rng):
    # Entries past each sequence's pages are out of range; validation and the
    # kernel must both ignore them.
    case = make_case(rng, q_lens=(1, 4), kv_lens=(3, 30), pad=1 << 30)
    run_and_check(case)


def test_zero_tokens_writes_nothing(rng):
    case = make_case(rng, q_lens=(0, 0), kv_lens=(3, 0))
    assert case["q"].shape[0] == 0
    unified_attention(**case)


def test_fp16_zero_strided_single_block_dim(rng):
    # num_kv_heads == 1 in HND: that dim's stride is irrelevant and must be accepted.
    run_and_check(make_case(rng, dtype="float16", hq=3, hkv=1, layout="HND"), "float16")


# ---- plan cache -------------------------------------------------------------------
def test_plan_cache_reused_across_similar_calls(rng):
    anyattn.clear_plan_cache()
    run_and_check(make_case(rng, q_lens=(2, 3), kv_lens=(10, 12)))          # 5 tokens, ctx 12
    info = anyattn.plan_cache_info()
    assert (info["misses"], info["hits"], len(info["plans"])) == (1, 0, 1)
    key = info["plans"][0][0]
    assert key[3] == (2, 8, 16, 0)  # limits rounded to powers of two; no stage (CPU)
    run_and_check(make_case(rng, q_lens=(4, 3), kv_lens=(14, 9)))           # 7 tokens, ctx 14
    info = anyattn.plan_cache_info()
    assert (info["misses"], info["hits"], len(info["plans"])) == (1, 1, 1)
    assert info["plans"][0][3] == 2  # calls made with the one plan
    run_and_check(make_case(rng, q_lens=(4, 5), kv_lens=(14, 9)))           # 9 tokens: new plan
    run_and_check(make_case(rng, q_lens=(2, 3), kv_lens=(10, 12)), softcap=5.0)  # new problem
    info = anyattn.plan_cache_info()
    assert (info["misses"], info["hits"], len(info["plans"])) == (3, 1, 3)
    for _, describe, ws, _ in info["plans"]:
        assert isinstance(describe, str) and ws >= 0


def test_workspace_is_aligned(rng):
    from anyattn import attention
    anyattn.clear_plan_cache()
    run_and_check(make_case(rng))
    plans = [p for p in attention._plans.values() if p.workspace_size]
    assert plans
    for plan in plans:
        (buf, ptr), = plan.workspaces()  # this thread's
        assert ptr % 256 == 0
        assert buf.ctypes.data <= ptr and ptr + plan.workspace_size <= buf.ctypes.data + buf.nbytes


# ---- errors ---------------------------------------------------------------------------
def _call(case, **changes):
    c = dict(case)
    c.update(changes)
    return unified_attention(**c)


@pytest.fixture
def case(rng):
    return make_case(rng)


@pytest.mark.parametrize("name,value,exc,needle", [
    ("k", "float16", TypeError, "k: dtype float16 differs"),
    ("out", "float16", TypeError, "out: dtype float16"),
    ("q", "float64", TypeError, "q: dtype float64"),
    ("cu_seqlens_q", "int64", TypeError, "cu_seqlens_q: dtype must be int32"),
    ("seqused_k", "int64", TypeError, "seqused_k: dtype must be int32"),
    ("block_table", "uint32", TypeError, "block_table: dtype must be int32"),
])
def test_wrong_dtype(case, name, value, exc, needle):
    with pytest.raises(exc, match=needle):
        _call(case, **{name: case[name].astype(value)})


def test_mismatched_shapes(case):
    q, k = case["q"], case["k"]
    with pytest.raises(ValueError, match="out: shape"):
        _call(case, out=np.zeros(q.shape[:2] + (q.shape[2] + 1,), np.float32))
    with pytest.raises(ValueError, match="v: shape"):
        _call(case, v=case["v"][:-1])
    with pytest.raises(ValueError, match="k: head_dim"):
        _call(case, k=np.zeros(k.shape[:3] + (16,), np.float32),
              v=np.zeros(k.shape[:3] + (16,), np.float32))
    with pytest.raises(ValueError, match="num_q_heads 4 is not a multiple"):
        _call(case, k=np.zeros(k.shape[:2] + (3, 32), np.float32),
              v=np.zeros(k.shape[:2] + (3, 32), np.float32))
    with pytest.raises(ValueError, match="seqused_k: shape"):
        _call(case, seqused_k=case["seqused_k"][:-1])
    with pytest.raises(ValueError, match="block_table: expected"):
        _call(case, block_table=case["block_table"][:1])
    with pytest.raises(ValueError, match="q: expected"):
        _call(case, q=q.reshape(q.shape[0], -1))
    with pytest.raises(ValueError, match="lse: shape"):
        _call(case, lse=np.zeros((q.shape[0], 3), np.float32))
    with pytest.raises(TypeError, match="lse: dtype"):
        _call(case, lse=np.zeros(q.shape[:2], np.float16))
    with pytest.raises(ValueError, match="sinks: shape"):
        _call(case, sinks=np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="alibi_slopes: dtype"):
        _call(case, alibi_slopes=np.zeros(4, np.float64))


def test_layout_errors(case):
    q = case["q"]
    with pytest.raises(ValueError, match="q must be contiguous"):
        _call(case, q=np.ascontiguousarray(q.transpose(1, 0, 2)).transpose(1, 0, 2))
    with pytest.raises(ValueError, match="out must be contiguous"):
        _call(case, out=np.zeros(q.shape[::-1], np.float32).transpose(2, 1, 0))
    with pytest.raises(ValueError, match="k: head_dim must be contiguous"):
        k = np.ascontiguousarray(case["k"].transpose(3, 0, 1, 2)).transpose(1, 2, 3, 0)
        _call(case, k=k)
    ro = np.zeros_like(q)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        _call(case, out=ro)


def test_bad_scalars(case):
    with pytest.raises(ValueError, match="window_size left is -2"):
        _call(case, window_size=(-2, 0))
    with pytest.raises(ValueError, match="window_size must be a"):
        _call(case, window_size=(1,))
    with pytest.raises(ValueError, match="softcap"):
        _call(case, softcap=-1.0)
    with pytest.raises(ValueError, match="softmax_scale"):
        _call(case, softmax_scale=float("nan"))
    with pytest.raises(ValueError, match="softmax_scale"):
        _call(case, softmax_scale=0.0)
    with pytest.raises(TypeError, match="causal"):
        _call(case, causal=2)
    with pytest.raises(TypeError, match="max_seqlen_k"):
        _call(case, max_seqlen_k=3.5)
    with pytest.raises(TypeError, match="q: expected a torch.Tensor or numpy.ndarray"):
        _call(case, q=case["q"].tolist())


def test_q_descale_not_implemented(case):
    with pytest.raises(NotImplementedError, match="q_descale: fp8 queries"):
        _call(case, q_descale=np.ones(1, np.float32))


def test_block_id_out_of_range_reported_by_library(case):
    table = case["block_table"].copy()
    nb = case["k"].shape[0]
    table[2, 1] = nb  # sequence 2 has 5 pages; page 1 now points past the caches
    with pytest.raises(AnyattnError) as e:
        _call(case, block_table=table)
    assert e.value.status == Status.BAD_METADATA
    assert "block_table[2][1]" in e.value.message and str(nb) in e.value.message
    assert "ANYATTN_STATUS_BAD_METADATA" in str(e.value)
    assert np.isnan(case["out"]).all()  # nothing written on error


def test_sum_seqlen_k_steers_nothing_on_the_cpu(case):
    # A hint: exact or a bound, the output is the one without it.
    want = _call(case, out=np.full_like(case["q"], np.nan))
    total = int(case["seqused_k"].sum())
    for hint in (total, total + 5):
        got = _call(case, out=np.full_like(case["q"], np.nan), sum_seqlen_k=hint)
        assert np.array_equal(got, want)


def test_other_metadata_errors_from_library(case):
    cu = case["cu_seqlens_q"].copy()
    cu[-1] -= 1  # no longer equal to num_tokens
    with pytest.raises(AnyattnError, match="cu_seqlens_q"):
        _call(case, cu_seqlens_q=cu)
    sk = case["seqused_k"].copy()
    sk[1] = 3  # q_len 7 > kv_len 3
    with pytest.raises(AnyattnError, match="q_len 7"):
        _call(case, seqused_k=sk)
    with pytest.raises(AnyattnError, match=r"seqused_k\[2\] is 20 > max_seqlen_k 19"):
        _call(case, max_seqlen_k=19)
    with pytest.raises(AnyattnError, match=r"seqused_k\[2\] is 20, over max_seqlen_k 10$"):
        _call(case, max_seqlen_k=10)  # the plan's limit is 16 (10 rounded up): not named
    with pytest.raises(ValueError, match="max_seqlen_k is 0"):
        _call(case, max_seqlen_k=0)
    total = int(case["seqused_k"].sum())
    with pytest.raises(AnyattnError, match=r"seqused_k sums to %d > sum_seqlen_k %d" % (total, total - 1)):
        _call(case, sum_seqlen_k=total - 1)
    with pytest.raises(ValueError, match=r"sum_seqlen_k is -1"):
        _call(case, sum_seqlen_k=-1)
    with pytest.raises(AnyattnError, match=r"sum_seqlen_k is %d, must be in \[0, num_seqs" % (100 * total)):
        _call(case, sum_seqlen_k=100 * total, validate=False)  # past num_seqs * max_seqlen_k
    with pytest.raises(TypeError, match="sum_seqlen_k"):
        _call(case, sum_seqlen_k=1.5)
    with pytest.raises(AnyattnError, match="q_len 7 > max_seqlen_q 3"):
        _call(case, max_seqlen_q=3)
    assert np.isnan(case["out"]).all()


def test_validate_false_still_runs(case):
    _call(case, validate=False)
    assert np.isfinite(case["out"]).all()


def test_mixing_numpy_and_other_kinds_is_rejected(case):
    with pytest.raises(TypeError):
        _call(case, seqused_k=[9, 7, 20, 5])


def test_library_search_order(tmp_path):
    # An explicit $ANYATTN_LIBRARY is used or fails loudly, never replaced.
    import os
    import subprocess
    import sys
    pkg_root = os.path.join(os.path.dirname(__file__), "..")
    code = "import anyattn\ntry:\n anyattn.lib()\nexcept OSError as e:\n print(e)\n"
    env = dict(os.environ, ANYATTN_LIBRARY=str(tmp_path / "nope.so"), PYTHONPATH=pkg_root)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "ANYATTN_LIBRARY is set but could not be loaded" in r.stdout and "nope.so" in r.stdout
    env["ANYATTN_LIBRARY"] = anyattn.library_path()
    code = "import anyattn; print(anyattn.library_path(), anyattn.version())"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.stdout.split() == [anyattn.library_path(), anyattn.version()], r.stderr


def _misaligned(a):
    """A copy of `a` whose data starts 2 bytes past an element boundary."""
    raw = np.zeros(a.nbytes + a.itemsize, np.uint8)
    b = np.frombuffer(raw.data, dtype=a.dtype, count=a.size, offset=2).reshape(a.shape)
    b[...] = a
    return b


# Each: the call's changes, and what the message must say in the caller's terms.
PY_NAMED_ERRORS = [
    ("rounded limit", lambda c: dict(max_seqlen_k=10), r"seqused_k[2] is 20, over max_seqlen_k 10"),
    ("kv bound", lambda c: dict(max_seqlen_k=19), "seqused_k[2] is 20 > max_seqlen_k 19"),
    ("q bound", lambda c: dict(max_seqlen_q=3), "q_len 7 > max_seqlen_q 3"),
    ("q_len > kv_len", lambda c: dict(seqused_k=np.array([9, 3, 20, 5], np.int32)),
     "sequence 1 has q_len 7 > seqused_k[1] 3"),
    ("negative kv_len", lambda c: dict(seqused_k=np.array([9, 7, -1, 5], np.int32)),
     "seqused_k[2] is -1, must be >= 0"),
    ("tokens, no sequences", lambda c: dict(cu_seqlens_q=np.zeros(1, np.int32),
                                           seqused_k=np.zeros(0, np.int32)),
     "num_tokens (q.shape[0]) is 12 with num_seqs (len(cu_seqlens_q) - 1) 0"),
    ("head_dim", lambda c: dict(q=np.zeros((12, 4, 600), np.float32),
                                out=np.zeros((12, 4, 600), np.float32),
                                k=np.zeros(c["k"].shape[:3] + (600,), np.float32),
                                v=np.zeros(c["k"].shape[:3] + (600,), np.float32)),
     "head_dim (q.shape[2]) is 600; the CPU backend supports"),
    ("config", lambda c: dict(config="nosuch"), "config 'nosuch' is not a CPU config"),
    ("alignment", lambda c: dict(q=_misaligned(c["q"])), "q and out must be aligned"),
]


@pytest.mark.parametrize("what,changes,needle", PY_NAMED_ERRORS, ids=[e[0] for e in PY_NAMED_ERRORS])
def test_library_errors_name_python_arguments(case, what, changes, needle):
    with pytest.raises(AnyattnError) as e:
        _call(case, **changes(case))
    msg = str(e.value)
    assert needle in msg, msg
    for c_name in ("->", "limits", "max_context", "seq_lens_k", "max_kv_len", "max_q_len",
                   "k_cache"):
        assert c_name not in msg, msg
    assert e.value.library_message  # the library's own text stays available


def test_package_carries_the_library(tmp_path):
    # A libanyattn.so copied into the package directory (what the wheel ships)
    # is found before any other, with no environment variable set.
    import os
    import shutil
    import subprocess
    import sys
    pkg = os.path.join(os.path.dirname(__file__), "..", "anyattn")
    shutil.copytree(pkg, tmp_path / "anyattn", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(anyattn.library_path(), tmp_path / "anyattn" / "libanyattn.so")
    env = {k: v for k, v in os.environ.items() if k != "ANYATTN_LIBRARY"}
    env["PYTHONPATH"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-c", "import anyattn; print(anyattn.library_path())"],
                       env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert r.stdout.strip() == str(tmp_path / "anyattn" / "libanyattn.so"), r.stderr
