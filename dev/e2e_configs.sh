#!/usr/bin/env bash
# e2e_configs.sh: e2e-llama8b under the tree's choice and under forced
# (config, split count) pairs. The e2e graph is captured once with no
# max_kv_len hint, so run chooses from limits.max_context (13,300) and every
# step, from context 501 on, replays that one choice; this asks whether
# another single choice serves the whole range better.
#   OUT=dir bash dev/e2e_configs.sh        (after run_h200.sh's build step)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/e2e-out}
mkdir -p "$OUT"
PAIRS=${PAIRS:-"m16n128w8s2-k16 m16n128w8s2-k8 m16n128w8s2-k4 m16n64w4s2-k16 m16n64w4s2-k8 m16n64w4s3-k16 m16n32w2s2-k16"}
CLI=build/anyattn
run() { # $1: label, then bench args
  local label=$1
  shift
  timeout 60 $CLI bench --backend cuda --workload e2e-llama8b "$@" >"$OUT/e2e_$label.txt" 2>&1 || echo "$label: failed"
  printf "%-18s %s\n" "$label" "$(grep -o 'decode [0-9]* steps x [0-9]* layers [0-9.]* s ([0-9.]* us per call' "$OUT/e2e_$label.txt")"
}
run tree
for p in $PAIRS; do run "$p" --config "$p"; done
