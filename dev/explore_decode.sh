#!/usr/bin/env bash
# explore_decode.sh: one device call that places the fixed costs of batch-1
# decode: the graph/launch/latency floor (dev/floor.cu),
# decode under forced split counts, and ncu kernel durations. Logs in $OUT.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/explore-out}
mkdir -p "$OUT"
LOG=$OUT/explore.txt
CLI=build/anyattn
exec > >(tee -a "$LOG") 2>&1
say() { echo "== $(date +%T) $*"; }
if [[ " ${SKIP:-} " != *" build "* ]]; then
  say build
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "-DANYATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" >/dev/null &&
    cmake --build build -j16 2>&1 | grep -E "error|warning: .*(spill|stack)" ; test -x $CLI || exit 1
fi
if [[ " ${SKIP:-} " != *" floor "* ]]; then
  say floor
  nvcc -O2 -std=c++17 -arch=sm_90a -o build/floor dev/floor.cu && build/floor
fi
CASES=${CASES:-1x16,1x500,1x2048,1x8192,1x32768}
for cfg in ${CONFIGS:-default}; do
  say "decode --graph config $cfg"
  if [ "$cfg" = default ]; then c=(); else c=(--config "$cfg"); fi
  $CLI bench --backend cuda --cases "$CASES" --graph "${c[@]}" 2>&1 | grep -E "^decode|FAIL|bench:"
done
for mc in ${MAXCTX:-}; do
  say "decode --graph --no-flush --max-context $mc"
  $CLI bench --backend cuda --cases "$CASES" --graph --no-flush --max-context "$mc" 2>&1 | grep -E "^decode|FAIL|bench:"
done
if [ -n "${E2E:-}" ]; then
  say e2e
  $CLI bench --backend cuda --workload e2e-llama8b 2>&1 | grep -E "e2e|FAIL"
fi
if [ -n "${NCU:-}" ]; then
  say "ncu durations"
  ncu --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    -k regex:attn $CLI bench --backend cuda --cases "$NCU" --iters 1 2>&1 | grep -E "attn|duration|dram__|^decode" | head -80
fi
if [ -n "${NCU_FULL:-}" ]; then
  say "ncu sections, $NCU_FULL"
  ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats -k regex:attn_tc --launch-skip 2 --launch-count 1 \
    $CLI bench --backend cuda --cases "$NCU_FULL" --iters 1 2>&1 | tail -120
fi
