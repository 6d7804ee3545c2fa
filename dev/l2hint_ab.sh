#!/usr/bin/env bash
# l2hint_ab.sh: the L2 policies of the producer's K/V boxes (ANYATTN_CUDA_L2HINT 0-3, host_nv.cuh)
# side by side: a quick build (KERNELS, default bf16_d128), each mode's quick conformance cases, then
# ROUNDS rounds of the mixed workload, the prefill CASES and the first mixed case's decodes alone on
# the producer's tile under graph replay, the modes in turn,
# and racecheck under mode 2 with the time left; a table of us per round last.
#   OUT=dir L=560 bash dev/l2hint_ab.sh
#   OUT=dir L=585 KERNELS= VERIFY=1 MODES="0 1 2" ROUNDS=2 bash dev/l2hint_ab.sh  # full build, then the suite
set -u
cd "$(dirname "$0")/.."
t0=$(date +%s)
OUT=${OUT:-$PWD/l2-out}
L=${L:-560}
MODES=${MODES:-"0 1 2 3"}
ROUNDS=${ROUNDS:-3}
CASES=${CASES:-p16x1024,p1x2048,p1x8192,p4x4096}
mkdir -p "$OUT"
left() { echo $((L - ($(date +%s) - t0))); }
. bench/deps_env.sh
if [ -z "${SKIP_BUILD:-}" ]; then
  KERNELS=${KERNELS-bf16_d128} STEPS=build OUT="$OUT/build" bash bench/run_h200.sh >"$OUT/build.txt" 2>&1 ||
    { tail -30 "$OUT/build/log.txt"; exit 1; }
  cat "$OUT/build/.summary"
fi
for m in $MODES; do
  for e in "" ANYATTN_CUDA_PERSIST=3; do
    f="$OUT/check_${m}_${e:-default}.txt"
    env ANYATTN_CUDA_L2HINT=$m $e timeout 60 build/anyattn check --backend cuda --quick --filter bf16_d128 >"$f" 2>&1
    echo "check mode $m [${e:-default}] rc=$? pass $(grep -c '^PASS' "$f") fail $(grep -c '^FAIL' "$f") ($(($(date +%s) - t0)) s)"
  done
done
for r in $(seq 1 "$ROUNDS"); do
  for m in $MODES; do
    [ "$(left)" -gt 60 ] || break 2
    f="$OUT/t_${m}_$r.txt"
    ANYATTN_CUDA_L2HINT=$m build/anyattn bench --backend cuda --workload mixed --graph >"$f" 2>&1 || echo "mode $m round $r: mixed failed"
    ANYATTN_CUDA_L2HINT=$m build/anyattn bench --backend cuda --cases "$CASES" --graph >>"$f" 2>&1 || echo "mode $m round $r: cases failed"
    # the first mixed case's decodes alone, on the producer's tile (the mixed batch's)
    ANYATTN_CUDA_L2HINT=$m build/anyattn bench --backend cuda --cases 63x2048 --config m128n128w8s2 --graph 2>&1 |
      sed 's/^decode /decode-on-tile /' >>"$f" || echo "mode $m round $r: forced decodes failed"
  done
  echo "round $r done ($(($(date +%s) - t0)) s)"
done
echo "== us per call (graph replay); columns: mode.round"
awk 'FNR == 1 { split(FILENAME, a, "/"); n = a[length(a)]; sub(/^t_/, "", n); sub(/\.txt$/, "", n); sub(/_/, ".", n); cols[++nc] = n }
     /^(mixed|prefill|decode-on-tile) / { k = $1 " " $2; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k } v[k, n] = $3 }
     END { printf "%-30s", "case"; for (c = 1; c <= nc; c++) printf " %8s", cols[c]; print "";
           for (i = 1; i <= nk; i++) { printf "%-30s", keys[i]; for (c = 1; c <= nc; c++) printf " %8s", v[keys[i], cols[c]]; print "" } }' \
  $(ls "$OUT"/t_*.txt | sort -t_ -k3,3n -k2,2n)
# VERIFY=1 (a full build: KERNELS= ): the full conformance suite and the GPU ctest label under mode 0
if [ -n "${VERIFY:-}" ]; then
  tl=$(left)
  [ "$tl" -gt 40 ] && { timeout $((tl - 20)) build/anyattn check --backend cuda >"$OUT/check_full.txt" 2>&1
    echo "check (full, mode 0): rc=$? $(tail -1 "$OUT/check_full.txt") ($(($(date +%s) - t0)) s)"
    grep -E '^FAIL' "$OUT/check_full.txt" | head; }
  tl=$(left)
  [ "$tl" -gt 40 ] && { (cd build && timeout $((tl - 20)) ctest -L gpu -j3 --output-on-failure) >"$OUT/ctest.txt" 2>&1
    echo "ctest -L gpu: rc=$? $(grep -E 'tests passed|tests failed' "$OUT/ctest.txt") ($(($(date +%s) - t0)) s)"
    grep -E 'Failed|\*\*\*' "$OUT/ctest.txt" | head; }
fi
tl=$(left)
if [ "$tl" -gt 40 ]; then
  ANYATTN_CUDA_L2HINT=2 timeout $((tl - 15)) compute-sanitizer --tool racecheck --error-exitcode 9 \
    build/anyattn check --backend cuda --quick --filter bf16_d128 >"$OUT/race.txt" 2>&1
  echo "racecheck mode 2: rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/race.txt" | tail -1), $(grep -c '^PASS' "$OUT/race.txt") PASS"
fi
