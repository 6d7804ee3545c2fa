#!/usr/bin/env bash
# tma_trial.sh: the padded tiles' TMA K/V boxes on one H200, in one call:
# build (run_h200.sh's build step), whether run encodes the tensor maps
# (ANYATTN_CUDA_TMA=log), `anyattn check`, `ctest -L gpu` (check_each_config in it),
# the decode tiles under compute-sanitizer, then A/B in the same build
# (ANYATTN_CUDA_TMA=0: cp.async) over batch-1 decode under graph replay and
# e2e-llama8b, alternating ROUNDS times. Logs in $OUT; a table last.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/tma-out}
mkdir -p "$OUT"
CASES=${AB_CASES:-1x500,1x2048,1x8192,1x32768,8x4096,128x2048}
ROUNDS=${AB_ROUNDS:-2}
STEPS=build OUT=$OUT bash bench/run_h200.sh >"$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
cat "$OUT/.summary"
CLI=build/anyattn
ANYATTN_CUDA_TMA=log $CLI bench --backend cuda --cases 1x500,1x32768 --graph 2>&1 | grep -E "TMA|^decode" | tee "$OUT/tma_log.txt"
timeout 300 $CLI check --backend cuda >"$OUT/check.txt" 2>&1
echo "check: rc=$? $(tail -1 "$OUT/check.txt")"; grep -E "^FAIL" "$OUT/check.txt" | head -20
(cd build && timeout 300 ctest -L gpu --output-on-failure) >"$OUT/ctest.txt" 2>&1
echo "ctest -L gpu: rc=$? $(grep -E 'tests passed|tests failed' "$OUT/ctest.txt" | tail -1)"
if [ "${SANITIZE:-1}" = 1 ]; then
  for c in ${SAN_CONFIGS:-m16n64w4s3 m16n128w8s2}; do
    TOOLS="${SAN_TOOLS:-memcheck racecheck synccheck}" OUT=$OUT timeout 400 bash dev/sanitize_tile.sh "$c" "${SAN_FILTER:-_d128_}"
  done
fi
for r in $(seq 1 "$ROUNDS"); do
  for t in 1 0; do
    f=$OUT/ab_tma${t}_$r.txt
    ANYATTN_CUDA_TMA=$t $CLI bench --backend cuda --cases "$CASES" --graph >"$f" 2>&1 || echo "tma=$t round $r failed"
    [ "${AB_E2E:-1}" = 1 ] && ANYATTN_CUDA_TMA=$t $CLI bench --backend cuda --workload e2e-llama8b >>"$f" 2>&1
    [ -n "${AB_WORKLOADS:-}" ] && for w in $AB_WORKLOADS; do ANYATTN_CUDA_TMA=$t $CLI bench --backend cuda --workload "$w" >>"$f" 2>&1; done
  done
done
echo "== tma1: TMA boxes (default); tma0: ANYATTN_CUDA_TMA=0 (cp.async); us per call, graph replay"
for f in "$OUT"/ab_tma*_*.txt; do
  printf "%-8s" "$(basename "$f" .txt | sed 's/^ab_//')"
  awk '/^(decode|prefill|mixed) /{printf " %s:%s=%s", substr($1, 1, 1), $2, $3} /^e2e-llama8b:/{for (i = 1; i <= NF; i++) if ($i == "decode") {printf " e2e=%ss", $(i+6)}}' "$f"
  echo
done
