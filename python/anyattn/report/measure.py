"""Runs the peers on one case: the case's inputs made once, the float64 reference of sampled rows,
then for each peer its setup, one checked call (output poisoned with NaN first) and, only when the
check passes, the timing. A peer that refuses the case, fails or answers wrong posts no time.
"""

import time
import zlib

from . import timing
from .inputs import compare, make_inputs, poison, reference_rows, sample_rows
from .peer import Unsupported


def case_seed(base, name):
    """The same data for a case in every run with the same --seed."""
    return (base * 1000003 + zlib.crc32(name.encode())) % (1 << 31)


def first_line(e):
    text = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, text[0][:200]) if text else type(e).__name__


def measure_peer(peer, inp, samples, ref, gpu, iters):
    """One peer on one case: a result dict with status ok (us), wrong (max_err), refused or error."""
    try:
        runner = peer.runner(inp)
    except Unsupported as e:
        return {"status": "refused", "error": str(e)}
    except Exception as e:
        return {"status": "error", "error": first_line(e)}
    try:
        if runner.out is not None:
            poison(inp, runner.out)
        with runner.context():
            runner.fn()
            timing.synchronize(gpu)
            ok, err = compare(runner.read(samples), ref, inp.shape.dtype)
            if not ok:
                return {"status": "wrong", "max_err": err, "note": runner.note}
            us = timing.time_us(runner.fn, gpu, iters)
        r = {"status": "ok", "us": us, "max_err": err, "note": runner.note}
        if peer.name == "anyattn":   # the binding's note is its plan, as bench reports it
            r["plan"] = runner.note
        return r
    except Exception as e:
        return {"status": "error", "error": first_line(e), "note": runner.note}
    finally:
        del runner
        _release(gpu)


def _release(gpu):
    if gpu:
        import torch
        torch.cuda.empty_cache()


def measure_case(case, peers, ctx, on_peer=None):
    """Every peer of `peers` on `case`; results land in case.results[peer.name]. ctx: lib, device,
    gpu, iters, seed. on_peer(peer, result) is called after each."""
    try:
        inp = make_inputs(case, ctx["lib"], ctx["device"], case_seed(ctx["seed"], case.name))
        samples = sample_rows(case, case_seed(ctx["seed"], case.name))
        ref = reference_rows(inp, samples)
    except Exception as e:
        for p in peers:
            case.results[p.name] = {"status": "error", "error": "inputs: " + first_line(e)}
        _release(ctx["gpu"])
        return
    for p in peers:
        t0 = time.monotonic()
        r = measure_peer(p, inp, samples, ref, ctx["gpu"], ctx["iters"])
        r["wall_s"] = round(time.monotonic() - t0, 3)     # setup, check and timing of this peer
        case.results[p.name] = r
        if on_peer:
            on_peer(p, r)
    del inp
    _release(ctx["gpu"])
