#!/usr/bin/env bash
# decode_depth.sh: batch-1 decode against pipeline depth and split count, with
# the TMA boxes (sm_90). Builds build-tune (-DANYATTN_GPU_CONFIGS_TUNING: the
# ship and tune rows of src/choose/configs.h, among them 3-stage 128-key and
# 4-stage 64-key decode rows) and times each forced
# config-kS under graph replay; ANYATTN_CUDA_TMA=0 rows for the 16-byte path.
# Every bench case also checks sampled rows against the double reference.
set -u
cd "$(dirname "$0")/.."
cmake -S . -B build-tune -DCMAKE_BUILD_TYPE=Release "-DANYATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a" \
  -DCMAKE_CUDA_FLAGS=-DANYATTN_GPU_CONFIGS_TUNING -DANYATTN_TESTS=OFF >/dev/null &&
  cmake --build build-tune -j16 --target anyattn_cli 2>&1 | grep -E "error"
T=build-tune/anyattn
test -x $T || exit 1
for tma in default 0; do
  for cfg in ${DEPTH_CONFIGS:-m16n128w8s2 m16n128w8s3 m16n64w4s3 m16n64w4s4}; do
    for k in ${DEPTH_SPLITS:-8 16 32}; do
      ANYATTN_CUDA_TMA=$tma $T bench --backend cuda --cases ${DEPTH_CASES:-1x8192,1x32768} --graph --config $cfg-k$k 2>&1 |
        awk -v c="$cfg-k$k" -v t="$tma" '/^decode /{printf "tma=%-7s %-16s %-8s %8s us %8s GB/s\n", t, c, $2, $3, $4} /FAIL|error/{print}'
    done
  done
  [ "${DEPTH_BOTH:-0}" = 1 ] || break
done
