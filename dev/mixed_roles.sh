#!/usr/bin/env bash
# mixed_roles.sh: mixed and prefill batches with the library's choice beside
# forced configs: the role pair (decode rows on the 16-row tile, the rest on
# the 128-row tile, one launch) and the single tiles it replaces. One row per
# (config, case): us per call (median, stream launches).
#   OUT=dir bash dev/mixed_roles.sh        (after run_h200.sh's build step)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/roles-out}
mkdir -p "$OUT"
CASES=${CASES:-p1x2048,p4x4096,p16x1024}
CONFIGS=${CONFIGS:-"m128n128w8s2+m16n128w8s2 m128n128w8s2 m64n64w4s2"}
CLI=build/anyattn
run() { # $1: label, $2: workload or "", then bench args
  local label=$1 w=$2
  shift 2
  if [ -n "$w" ]; then
    $CLI bench --backend cuda --workload "$w" "$@" >"$OUT/roles_${label//+/_}_$w.txt" 2>&1 || echo "$label $w: failed"
    awk -v l="$label" '/^mixed /{printf "%-28s %-26s %10s us\n", l, $2, $3}' "$OUT/roles_${label//+/_}_$w.txt"
  else
    $CLI bench --backend cuda --cases "$CASES" "$@" >"$OUT/roles_${label//+/_}_cases.txt" 2>&1 || echo "$label cases: failed"
    awk -v l="$label" '/^prefill /{printf "%-28s %-26s %10s us\n", l, $2, $3}' "$OUT/roles_${label//+/_}_cases.txt"
  fi
}
for w in mixed ""; do
  run library "$w"
  for c in $CONFIGS; do run "$c" "$w" --config "$c"; done
done
