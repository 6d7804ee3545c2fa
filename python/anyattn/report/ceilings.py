"""The ceilings as torch sees them, beside the ones `anyattn bench` measures itself: a device copy
(bytes read + written) and a square bf16 matmul on random data, timed like the peers. On a GPU they
show the peers' view of the same hardware; bench/peers.py writes them into peers.json.
"""

from . import timing


def _copy_ms(gpu, nbytes):
    import torch
    src = torch.randn(nbytes // 2, dtype=torch.bfloat16, device="cuda" if gpu else "cpu")
    dst = torch.empty_like(src)
    return 1e-3 * timing.time_us(lambda: dst.copy_(src), gpu, 5)


def _matmul_ms(gpu, n):
    import torch
    a, b = (torch.randn(n, n, dtype=torch.bfloat16, device="cuda" if gpu else "cpu") for _ in range(2))
    return 1e-3 * timing.time_us(lambda: a @ b, gpu, 5)


def torch_ceilings(gpu, copy_bytes=2 << 30, n=8192):
    """[{"what": "ceiling", "case", "ms", "TB/s" or "TFLOP/s"}]: a copy of copy_bytes, an n^3 bf16 matmul."""
    size = "%d GiB" % (copy_bytes >> 30) if copy_bytes >= 1 << 30 else "%d MiB" % (copy_bytes >> 20)
    ms = _copy_ms(gpu, copy_bytes)
    out = [{"what": "ceiling", "case": ("d2d copy " if gpu else "copy ") + size, "ms": ms,
            "TB/s": 2 * copy_bytes / ms / 1e9}]
    ms = _matmul_ms(gpu, n)
    out.append({"what": "ceiling", "case": "bf16 matmul %d^3" % n, "ms": ms, "TFLOP/s": 2 * n**3 / ms / 1e9})
    return out
