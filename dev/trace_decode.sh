#!/usr/bin/env bash
# trace_decode.sh: where a batch-1 decode call spends its time, stage by
# stage, from %globaltimer stamps a -DAA_TRACE build prints (attention.cuh's
# AA_MARK points: entry, after griddepcontrol.wait, after the work search,
# after the first tiles' copies are issued, Q ready, first tile ready, loop
# end, end; the reduce: entry, after its wait, end). Builds build-trace (not
# the normal build). Logs in $OUT/trace_*.txt.
# The stamps are in the kernel source up to commit abecc1c, not in the
# library: run this in a checkout of that commit (dev/README.md, Status).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/trace-out}
mkdir -p "$OUT"
cmake -S . -B build-trace -DCMAKE_BUILD_TYPE=Release -DANYATTN_TESTS=OFF \
  "-DANYATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" -DCMAKE_CUDA_FLAGS=-DAA_TRACE >/dev/null &&
  cmake --build build-trace -j16 --target anyattn_cli 2>&1 | grep -E "error" ; test -x build-trace/anyattn || exit 1
for c in ${TRACE_CASES:-1x16 1x500 1x8192 1x32768}; do
  for g in "" --graph; do
    f=$OUT/trace_${c}${g:+_graph}.txt
    build-trace/anyattn bench --backend cuda --cases "$c" --iters 12 $g ${TRACE_ARGS:-} >"$f" 2>&1
    echo "== $c ${g:-stream} $(grep -E '^decode' "$f" | head -1)"
    python3 dev/trace_summary.py "$f"
  done
done
