#!/usr/bin/env bash
# validate_gpu.sh: the GPU checks of one lent machine within a time budget, most
# important first: the sm_90a build, `ctest -L gpu`, the full conformance run
# (`anyattn check --backend cuda`), then compute-sanitizer on the 128-row d192
# tile (dev/sanitize_tile.sh) for the quick suite's d192 and d160 cases. Each step
# runs only if the budget (BUDGET seconds from the start, default 560) leaves it
# time, and is cut at the budget.
#   BUDGET=560 OUT=dir bash dev/validate_gpu.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/validate-out}
mkdir -p "$OUT"
BUDGET=${BUDGET:-560}
left() { echo $((BUDGET - SECONDS)); }
# run_h200.sh prints its summary last (and removes the file it kept it in) and
# bundles what else lies in $OUT into results.tgz: its output goes elsewhere
STEPS=build OUT=$OUT bash bench/run_h200.sh >/tmp/validate_build.txt 2>&1
sed -n '/==== summary ====/,$p' /tmp/validate_build.txt
grep -q "build: ok" /tmp/validate_build.txt || exit 1
echo "== ctest -L gpu (at ${SECONDS} s)"
(cd build && timeout "$(left)" ctest -L gpu --output-on-failure) >"$OUT/ctest.txt" 2>&1
echo "rc=$?"
grep -E "Test +#|tests passed|tests failed" "$OUT/ctest.txt"
if [ "$(left)" -gt 60 ]; then
  echo "== anyattn check --backend cuda (at ${SECONDS} s)"
  timeout "$(left)" build/anyattn check --backend cuda >"$OUT/check.txt" 2>&1
  echo "rc=$?"
  grep -E "^(FAIL|SKIP)" "$OUT/check.txt" | head -20
  tail -1 "$OUT/check.txt"
fi
for f in _d192_ _d160_; do
  for tool in memcheck racecheck synccheck; do
    [ "$(left)" -gt 40 ] || break 2
    echo "== sanitize m128n96w8s2 $f $tool (at ${SECONDS} s)"
    TOOLS=$tool timeout "$(left)" bash dev/sanitize_tile.sh m128n96w8s2 "$f"
  done
done
echo "== done at ${SECONDS} s"
