#!/usr/bin/env python3
"""sass_blocks.py: the basic blocks of one kernel's SASS, with their size and
most frequent opcodes, and the instructions between each WARPGROUP.ARRIVE and
the wait that follows it (what issuing a set of wgmma costs). No GPU needed:
it reads `cuobjdump -sass` of an object, cubin or library (the CUDA toolkit's
cuobjdump, or the one in PyPI's `nvidia-cuda-cuobjdump` wheel).

    nvcc ... -cubin -c src/gpu/inst/inst_bf16_d80.cu -o /tmp/d80.cubin
    python3 dev/sass_blocks.py /tmp/d80.cubin 'attn_tc_kernel.*Li80ELi128ELi128ELi8ELi2ELi0E'
    python3 dev/sass_blocks.py /tmp/d80.cubin KERNEL --range 0x16150 0x23cb0   # one loop's blocks

CUOBJDUMP=path overrides the cuobjdump found on PATH.
"""
import collections
import os
import re
import shutil
import subprocess
import sys


def disassemble(path, pattern):
    tool = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not tool:
        sys.exit("sass_blocks: no cuobjdump (set CUOBJDUMP=path)")
    text = subprocess.run([tool, "-sass", path], check=True, capture_output=True, text=True).stdout
    funcs = re.split(r"\n\s+Function : ", text)[1:]
    hits = [f for f in funcs if re.search(pattern, f.split("\n", 1)[0])]
    if len(hits) != 1:
        names = [f.split("\n", 1)[0] for f in hits]
        sys.exit(f"sass_blocks: {len(hits)} kernels match {pattern!r}: {names[:8]}")
    name, body = hits[0].split("\n", 1)
    code = []
    for line in body.split("\n"):
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            code.append((int(m.group(1), 16), m.group(2)))
    return name, code


def opcode(ins):
    return re.sub(r"^@!?U?P\w+\s+", "", ins).split()[0].split(".")[0]


def summary(ins, n=7):
    c = collections.Counter(opcode(i) for i in ins)
    return ", ".join(f"{k} {v}" for k, v in c.most_common(n))


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    lo, hi = 0, 1 << 40
    if "--range" in args:
        k = args.index("--range")
        lo, hi = int(args[k + 1], 16), int(args[k + 2], 16)
        del args[k : k + 3]
    name, code = disassemble(args[0], args[1])
    print(f"{name}: {len(code)} instructions")
    loops = []
    for a, i in code:
        t = re.findall(r"0x([0-9a-f]+)", i)
        if "BRA" in i and t and int(t[-1], 16) < a:
            loops.append((int(t[-1], 16), a))
    for s, e in sorted(loops, key=lambda x: x[0] - x[1])[:6]:
        print(f"loop {s:#x}-{e:#x}: {(e - s) // 16 + 1} instructions")
    # wgmma issue segments
    for k, (a, i) in enumerate(code):
        if i.startswith("WARPGROUP.ARRIVE") and lo <= a <= hi:
            j = k
            while j < len(code) and "WARPGROUP.DEPBAR" not in code[j][1]:
                j += 1
            seg = [x[1] for x in code[k : j + 1]]
            print(f"wgmma issue at {a:#x}: {len(seg)} instructions, {sum('HGMMA' in x for x in seg)} HGMMA; {summary(seg)}")
    # basic blocks
    body = [(a, i) for a, i in code if lo <= a <= hi]
    leaders = {body[0][0]} if body else set()
    for a, i in body:
        if re.search(r"\b(BRA|EXIT|BSYNC|WARPSYNC|RET)\b", i):
            leaders.add(a + 16)
            t = re.findall(r"0x([0-9a-f]+)", i)
            if "BRA" in i and t:
                leaders.add(int(t[-1], 16))
    starts = sorted(x for x in leaders if body and body[0][0] <= x <= body[-1][0])
    starts.append(body[-1][0] + 16 if body else 0)
    for s, e in zip(starts, starts[1:]):
        ins = [i for a, i in body if s <= a < e]
        if ins:
            print(f"{s:#08x} {len(ins):5d}  {summary(ins):72s} | {ins[-1][:56]}")


if __name__ == "__main__":
    main()
