#!/usr/bin/env bash
# ab_build.sh: a kernel change against its baseline in the same run. Build A is
# the normal build (build/, made first by run_h200.sh's build step); build B is
# build-ab/ with extra CUDA flags (AB_FLAGS, e.g. -DAA_LATE_MERGE_WN=99 to turn
# a compile-time knob back). The two alternate ROUNDS times over the same
# decode cases under graph replay, then over e2e-llama8b, so drift hits both.
# AB_WORKLOADS="prefill mixed" times those bench workloads (stream launches)
# instead. Logs in $OUT/ab_*.txt; a table of medians per round last.
#
# AB_ENV instead of AB_FLAGS makes B the same build/ run with that
# environment (a run-time switch such as ANYATTN_CUDA_TMA=0).
#
#   OUT=dir AB_FLAGS=-DAA_LATE_MERGE_WN=99 bash dev/ab_build.sh
#   OUT=dir AB_FLAGS=-DAA_WGMMA=0 AB_WORKLOADS="prefill mixed" AB_E2E=0 bash dev/ab_build.sh
#   OUT=dir AB_ENV=ANYATTN_CUDA_CLUSTERS=0 bash dev/ab_build.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/ab-out}
mkdir -p "$OUT"
[ -n "${AB_FLAGS:-}${AB_ENV:-}" ] || { echo "ab_build: set AB_FLAGS (CUDA flags of build B) or AB_ENV (B's environment)"; exit 2; }
CASES=${AB_CASES:-1x500,1x2048,1x8192,1x32768,8x4096,128x2048}
ROUNDS=${AB_ROUNDS:-2}
test -x build/anyattn || { echo "ab_build: build/anyattn missing (run the build step first)"; exit 1; }
B_CLI=build/anyattn
if [ -n "${AB_FLAGS:-}" ]; then
  cmake -S . -B build-ab -DCMAKE_BUILD_TYPE=Release -DANYATTN_TESTS=OFF \
    "-DANYATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" "-DCMAKE_CUDA_FLAGS=$AB_FLAGS" >/dev/null &&
    cmake --build build-ab -j16 --target anyattn_cli 2>&1 | grep -E "error"
  test -x build-ab/anyattn || { echo "ab_build: build-ab failed"; exit 1; }
  B_CLI=build-ab/anyattn
fi
for r in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    cli=build/anyattn
    [ $side = B ] && cli="env ${AB_ENV:-} $B_CLI"
    if [ -n "${AB_WORKLOADS:-}" ]; then
      : >"$OUT/ab_${side}_$r.txt"
      for w in $AB_WORKLOADS; do
        $cli bench --backend cuda --workload "$w" >>"$OUT/ab_${side}_$r.txt" 2>&1 || echo "ab_build: $side $w round $r failed"
      done
    else
      $cli bench --backend cuda --cases "$CASES" --graph >"$OUT/ab_${side}_$r.txt" 2>&1 || echo "ab_build: $side round $r failed"
    fi
    if [ "${AB_E2E:-1}" = 1 ]; then
      $cli bench --backend cuda --workload e2e-llama8b >>"$OUT/ab_${side}_$r.txt" 2>&1 || echo "ab_build: $side e2e failed"
    fi
  done
done
echo "== A: build/ (as committed); B: $B_CLI (${AB_FLAGS:-}${AB_ENV:+ with $AB_ENV}); us per call (graph replay unless AB_WORKLOADS)"
for f in "$OUT"/ab_[AB]_*.txt; do
  printf "%-10s" "$(basename "$f" .txt | sed 's/^ab_//')"
  awk '/^(decode|prefill|mixed) /{printf " %s:%s=%s", substr($1, 1, 1), $2, $3} /^e2e-llama8b:/{for (i = 1; i <= NF; i++) if ($i == "decode") {printf " e2e=%ss", $(i+6)}}' "$f"
  echo
done
