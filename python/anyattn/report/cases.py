"""The batches the report measures: the problem shape, each case's per-sequence query and key
counts (from `anyattn bench --list`, or parsed from --cases), and the bytes and FLOPs every
figure is counted from, with the same formulas as tools/bench.c.
"""

import re
from dataclasses import dataclass, field

ELEMENT_BYTES = {"bf16": 2, "f16": 2, "f32": 4}
TORCH_DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}


@dataclass(frozen=True)
class Shape:
    """One attention layer: q and kv heads, head size, element type, tokens per page."""
    hq: int = 32
    hkv: int = 8
    d: int = 128
    dtype: str = "bf16"
    block_size: int = 16

    def label(self):
        return "%d q heads, %d kv heads, head dim %d, %s, pages of %d tokens" % (
            self.hq, self.hkv, self.d, self.dtype, self.block_size)

    @property
    def element_bytes(self):
        return ELEMENT_BYTES[self.dtype]


BENCH_SHAPE = Shape()  # tools/bench.h: Llama-3.1-8B attention, bf16, pages of 16


@dataclass
class Case:
    """One batch: q_lens[s] new tokens over kv_lens[s] keys for each sequence s, causal."""
    workload: str
    name: str
    q_lens: list
    kv_lens: list
    shape: Shape = BENCH_SHAPE
    skip: str = ""                 # why anyattn bench does not run it (e.g. too large for the CPU)
    results: dict = field(default_factory=dict)   # contender -> result dict

    @property
    def num_seqs(self):
        return len(self.q_lens)

    @property
    def num_tokens(self):
        return sum(self.q_lens)

    @property
    def kind(self):
        """decode (every q_len 1), prefill (every q_len = kv_len) or mixed."""
        if all(q == 1 for q in self.q_lens):
            return "decode"
        if all(q == k for q, k in zip(self.q_lens, self.kv_lens)):
            return "prefill"
        return "mixed"

    def kv_bytes(self):
        """K and V bytes of every sequence's keys (the decode figure)."""
        return 2.0 * sum(self.kv_lens) * self.shape.hkv * self.shape.d * self.shape.element_bytes

    def flops(self):
        """4 * hq * d per visible (query, key) pair under the causal mask (the prefill figure)."""
        pairs = sum(q * (k - q) + q * (q + 1) / 2 for q, k in zip(self.q_lens, self.kv_lens))
        return 4.0 * self.shape.hq * self.shape.d * pairs

    def describe(self):
        return {"name": self.name, "workload": self.workload, "kind": self.kind,
                "num_seqs": self.num_seqs, "num_tokens": self.num_tokens,
                "max_q": max(self.q_lens), "max_kv": max(self.kv_lens),
                "kv_bytes": self.kv_bytes(), "flops": self.flops(), "skip": self.skip,
                "shape": self.shape.__dict__.copy()}


def from_listing(workload, rows, shape=BENCH_SHAPE):
    """Cases from the JSON lines `anyattn bench --list` prints."""
    return [Case(workload, r["case"], list(r["q_lens"]), list(r["kv_lens"]), shape,
                 r.get("skip", "")) for r in rows]


_PART = re.compile(r"^(?:p(\d+)x(\d+)|c(\d+)x(\d+)@(\d+)|(\d+)x(\d+))$")


def parse_batch(text):
    """One user batch: parts joined by '+', each pBxL (B prompts of L tokens), cBxQ@K (B chunks of Q
    new tokens over K keys) or BxC (B sequences decoding one token over C keys). Returns (q_lens,
    kv_lens); ValueError names the part at fault."""
    q_lens, kv_lens = [], []
    for part in text.split("+"):
        m = _PART.match(part.strip())
        if not m:
            raise ValueError("'%s' is not pBxL, cBxQ@K or BxC" % part)
        g = [int(x) if x else 0 for x in m.groups()]
        if m.group(1):
            b, q, k = g[0], g[1], g[1]
        elif m.group(3):
            b, q, k = g[2], g[3], g[4]
        else:
            b, q, k = g[5], 1, g[6]
        if b < 1 or q < 1 or k < q:
            raise ValueError("'%s': counts must be >= 1 and a chunk no longer than its keys" % part)
        q_lens += [q] * b
        kv_lens += [k] * b
    return q_lens, kv_lens


def parse_cases(text, shape):
    """--cases: comma-separated batches (parse_batch), each named by its own text."""
    cases = []
    for item in text.split(","):
        q, k = parse_batch(item)
        cases.append(Case("user", "user " + item.strip(), q, k, shape))
    return cases


_IBM = re.compile(r"^ibm b(\d+) L(\d+) d([0-9.]+)$")


def ibm_cell(name):
    """(batch, max length, decode share) of an IBM grid case name, or None."""
    m = _IBM.match(name)
    return (int(m.group(1)), int(m.group(2)), float(m.group(3))) if m else None


def short_name(name):
    """A case name without its workload, for plot labels: 'b4 L512 d0.5', '1x8192'."""
    return name.split(" ", 1)[-1]
