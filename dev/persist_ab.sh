#!/usr/bin/env bash
# persist_ab.sh: the persistent producer kernel against another tree's in one
# call of the GPU machine. Build A is this tree (build/, persistent blocks by
# default); B is AB_SRC (default ab-src/), e.g. main's tree unpacked beside
# this one before the call (`mkdir ab-src && git archive main | tar -x -C
# ab-src`: the GPU machine has no git). Prints the quick conformance suite of
# A in its three modes (persistent, ANYATTN_CUDA_WS=single, =0), then the
# prefill cases under graph replay, A against B, alternating (dev/ab_build.sh),
# and A's modes against each other.
#
#   DEPS_DIR=$PWD/.deps OUT=dir bash dev/persist_ab.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/persist-out}
mkdir -p "$OUT"
CASES=${PA_CASES:-p1x500,p1x2048,p1x8192,p4x4096,p16x1024}
STEPS=build OUT="$OUT/build" bash bench/run_h200.sh >"$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
for m in "" single 0; do
  echo "== check --quick, ANYATTN_CUDA_WS=${m:-(persistent)}"
  ANYATTN_CUDA_WS=$m timeout 300 build/anyattn check --backend cuda --quick 2>&1 | tail -1
done
OUT="$OUT/ab" AB_SRC=${AB_SRC:-ab-src} AB_CASES=$CASES AB_WORKLOADS= AB_E2E=0 bash dev/ab_build.sh 2>&1 | tail -12
for r in 1 2; do
  for m in "" single 0; do
    echo "== A, ANYATTN_CUDA_WS=${m:-(persistent)}, round $r"
    ANYATTN_CUDA_WS=$m timeout 120 build/anyattn bench --backend cuda --cases "$CASES" --graph 2>&1 |
      awk '/^prefill /{print $1, $2, $3}'
  done
done
