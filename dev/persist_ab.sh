#!/usr/bin/env bash
# persist_ab.sh: the persistent producer kernel against another tree's in one
# call of the GPU machine. A is this tree (build/, persistent blocks by
# default); B is AB_SRC (default ab-src/), e.g. main's tree unpacked beside
# this one before the call (`mkdir ab-src && git archive main | tar -x -C
# ab-src`: the GPU machine has no git), built in $AB_SRC/build-ab. Prints A's
# quick conformance suite in its three modes (persistent,
# ANYATTN_CUDA_WS=single, =0), then for each head dim (PA_HEAD_DIMS) two
# rounds of the prefill cases under graph replay, alternating B and A's three
# modes, one "label case us" line each.
#
#   DEPS_DIR=$PWD/.deps OUT=dir bash dev/persist_ab.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/persist-out}
SRC=${AB_SRC:-ab-src}
mkdir -p "$OUT"
CASES=${PA_CASES:-p1x500,p1x2048,p1x8192,p4x4096,p16x1024}
GENCODE="-DANYATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a"
STEPS=build OUT="$OUT/build" bash bench/run_h200.sh >"$OUT/build.txt" 2>&1 || { tail -20 "$OUT/build.txt"; exit 1; }
. bench/deps_env.sh
cmake -S "$SRC" -B "$SRC/build-ab" -DCMAKE_BUILD_TYPE=Release -DANYATTN_TESTS=OFF -DANYATTN_HIP=OFF "$GENCODE" \
  >"$OUT/build_b.txt" 2>&1 && cmake --build "$SRC/build-ab" -j16 --target anyattn_cli >>"$OUT/build_b.txt" 2>&1 ||
  { tail -20 "$OUT/build_b.txt"; exit 1; }
for m in "" single 0; do
  echo "== check --quick, ANYATTN_CUDA_WS=${m:-(persistent)}"
  ANYATTN_CUDA_WS=$m timeout 300 build/anyattn check --backend cuda --quick 2>&1 | tail -1
done
run() { # label cli head-dim [env]
  env ${4:-} timeout 120 "$2" bench --backend cuda --cases "$CASES" --head-dim "$3" --graph 2>&1 |
    awk -v l="$1 d$3" '/^prefill /{print l, $2, $3}'
}
for hd in ${PA_HEAD_DIMS:-128 64 256}; do
  for r in 1 2; do
    run B "$SRC/build-ab/anyattn" "$hd"
    run A-persistent build/anyattn "$hd"
    run A-single build/anyattn "$hd" ANYATTN_CUDA_WS=single
    run A-ws0 build/anyattn "$hd" ANYATTN_CUDA_WS=0
  done
done
