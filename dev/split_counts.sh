#!/usr/bin/env bash
# split_counts.sh: batch-1 decode under graph replay with forced (config, KV
# split count) pairs, including counts the tuner does not sweep (it tries 1, 4
# and 16 only). One table row per forced pair; the library's own choice first.
#   OUT=dir bash dev/split_counts.sh        (after run_h200.sh's build step)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/split-out}
mkdir -p "$OUT"
CASES=${CASES:-1x500,1x1000,1x2048,1x4096,1x8192,1x32768}
PAIRS=${PAIRS:-"m16n128w8s2-k1 m16n128w8s2-k2 m16n128w8s2-k3 m16n128w8s2-k4 m16n128w8s2-k8 m16n128w8s2-k16
  m16n64w4s2-k2 m16n64w4s2-k4 m16n64w4s2-k8 m16n64w4s2-k16 m16n64w4s3-k2 m16n64w4s3-k8 m16n32w2s2-k8 m16n32w2s2-k16 m16n32w2s2-k32"}
CLI=build/anyattn
run() { # $1: label, then bench args
  local label=$1
  shift
  $CLI bench --backend cuda --cases "$CASES" --graph "$@" >"$OUT/split_$label.txt" 2>&1 || echo "$label: failed"
  printf "%-18s" "$label"
  awk '/^decode /{printf " %s=%s", $2, $3}' "$OUT/split_$label.txt"
  echo
}
echo "== us per call, graph replay (median of 30)"
run tree
for p in $PAIRS; do run "$p" --config "$p"; done
run tree2
