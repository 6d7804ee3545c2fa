"""unified_attention from several threads at once on the CPU backend (NumPy):
every output must equal, bit for bit, what one thread computed alone. The
threads share the cached plan; each must get its own workspace (the library's
run releases the GIL and writes into the workspace), and a plan made by one
thread's cache miss must be the only one made."""

import threading

import numpy as np
import pytest

import anyattn
from anyattn import unified_attention
from test_cpu import make_case

THREADS, CALLS = 6, 25


def _cases(rng):
    """Three batches of one problem whose limits round alike (one plan: 4
    sequences, 9 to 16 tokens): decode-heavy, prefill and mixed."""
    common = dict(hq=8, hkv=2, d=64, bs=16, dtype="float32")
    return [make_case(rng, q_lens=(1, 1, 1, 10), kv_lens=(400, 300, 500, 120), **common),
            make_case(rng, q_lens=(16, 0, 0, 0), kv_lens=(200, 5, 0, 1), **common),
            make_case(rng, q_lens=(3, 9, 0, 1), kv_lens=(250, 9, 40, 500), **common)]


def _bits(a):
    return a.view(np.uint32)  # NaN == NaN, -0 != +0: an exact comparison


def _run(case, out):
    out.fill(np.nan)
    unified_attention(**dict(case, out=out, max_seqlen_k=512, max_seqlen_q=16))


def _in_threads(n, fn):
    """Runs fn(i) in n threads that start together; re-raises the first error."""
    barrier = threading.Barrier(n)
    errors = []

    def body(i):
        try:
            barrier.wait()
            fn(i)
        except BaseException as e:  # noqa: B036 -- handed to the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_threads_match_one_thread_bit_for_bit(rng):
    anyattn.clear_plan_cache()
    cases = _cases(rng)
    want = []
    for c in cases:
        _run(c, c["out"])
        assert np.isfinite(c["out"]).all()
        want.append(c["out"].copy())
    assert len(anyattn.plan_cache_info()["plans"]) == 1  # one plan serves all three

    wrong = [[] for _ in range(THREADS)]

    def work(i):
        outs = [np.empty_like(c["q"]) for c in cases]
        for n in range(CALLS):
            k = (i + n) % len(cases)
            _run(cases[k], outs[k])
            if not np.array_equal(_bits(outs[k]), _bits(want[k])):
                wrong[i].append((n, k))

    _in_threads(THREADS, work)
    bad = sum(len(w) for w in wrong)
    assert bad == 0, "%d of %d outputs differ from the single-threaded run (thread: [(call, batch)]): %s" % (
        bad, THREADS * CALLS, {i: w[:5] for i, w in enumerate(wrong) if w})
    plan, = anyattn.plan_cache_info()["plans"]
    assert plan[3] >= THREADS * CALLS / 2  # the calls went through the one cached plan


def test_concurrent_first_calls_make_one_plan(rng):
    anyattn.clear_plan_cache()
    case = _cases(rng)[2]
    want = case["out"].copy()
    _run(case, want)
    anyattn.clear_plan_cache()
    outs = [np.empty_like(case["q"]) for _ in range(THREADS)]
    _in_threads(THREADS, lambda i: _run(case, outs[i]))
    info = anyattn.plan_cache_info()
    assert info["misses"] == 1 and len(info["plans"]) == 1, info
    for o in outs:
        assert np.array_equal(_bits(o), _bits(want))


def test_each_thread_has_its_own_workspace(rng):
    from anyattn import attention
    anyattn.clear_plan_cache()
    case = _cases(rng)[0]
    _run(case, np.empty_like(case["q"]))
    plan, = attention._plans.values()
    if plan.workspace_size == 0:
        pytest.skip("this plan needs no workspace")
    seen = [None] * THREADS
    seen_main = plan.workspace()
    alive = threading.Barrier(THREADS)  # no thread ends (freeing its workspace) before all have looked

    def work(i):
        _run(case, np.empty_like(case["q"]))
        seen[i] = plan.workspace()
        alive.wait()

    _in_threads(THREADS, work)
    assert len(set(seen + [seen_main])) == THREADS + 1
