"""Timing of a contender's call, the way `anyattn bench` times anyattn: the median of repeated
calls; on a GPU with CUDA events and the L2 flushed between calls (triton.testing.do_bench when
Triton is importable, else events around each call after a 256 MB write), on the CPU by the wall
clock after two warm-up calls.
"""

import statistics
import time

FLUSH_BYTES = 256 << 20


def time_us(fn, gpu, iters):
    """Median microseconds per call of fn() (which runs one call on the current stream)."""
    if not gpu:
        return _time_cpu(fn, iters)
    try:
        from triton.testing import do_bench
    except ImportError:
        return _time_events(fn, max(iters, 30))
    return 1e3 * _do_bench(do_bench, fn)


def _do_bench(do_bench, fn):
    """Milliseconds, median, with Triton's own warm-up and L2 flush."""
    return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))


def _time_cpu(fn, iters):
    fn()
    fn()
    times = []
    for _ in range(max(iters, 1)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def _time_events(fn, iters):
    import torch
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return 1e3 * statistics.median(times)


def timer_name(gpu):
    if not gpu:
        return "wall clock, median of the timed calls after 2 warm-ups"
    try:
        import triton.testing  # noqa: F401
        return "triton.testing.do_bench (CUDA events, L2 flushed), median"
    except ImportError:
        return "CUDA events, 256 MB L2 flush between calls, median"


def synchronize(gpu):
    if gpu:
        import torch
        torch.cuda.synchronize()
