"""The ceilings as torch sees them, beside the ones `anyattn bench` measures itself: a device copy
(bytes read + written) and a square bf16 matmul on random data, timed like the peers. On a GPU they
show the peers' view of the same hardware; bench/peers.py writes them into peers.json.
"""

from . import timing


def torch_ceilings(gpu, copy_bytes=2 << 30, n=8192):
    """[{"case", "ms", "TB/s" or "TFLOP/s"}] for a copy of copy_bytes and an n^3 bf16 matmul."""
    import torch
    dev = "cuda" if gpu else "cpu"
    src = torch.randn(copy_bytes // 2, dtype=torch.bfloat16, device=dev)
    dst = torch.empty_like(src)
    ms = 1e-3 * timing.time_us(lambda: dst.copy_(src), gpu, 5)
    size = "%d GiB" % (copy_bytes >> 30) if copy_bytes >= 1 << 30 else "%d MiB" % (copy_bytes >> 20)
    out = [{"what": "ceiling", "case": ("d2d copy " if gpu else "copy ") + size, "ms": ms,
            "TB/s": 2 * copy_bytes / ms / 1e9}]
    del src, dst
    a = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=dev)
    ms = 1e-3 * timing.time_us(lambda: a @ b, gpu, 5)
    out.append({"what": "ceiling", "case": "bf16 matmul %d^3" % n, "ms": ms, "TFLOP/s": 2 * n**3 / ms / 1e9})
    return out
