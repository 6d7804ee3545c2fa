#!/usr/bin/env bash
# wgmma_bisect.sh: narrows a wrong result of the wgmma tiles on an H200.
# wgmma_probe (each product alone, on one tile), then the quick suite per
# config (tests/check_each_config.sh) and the prefill bench's sampled-row
# check, for builds with AA_WGMMA = 3 (both products, build/ from
# run_h200.sh's build step), 1 (Q K^T only) and 2 (P V only). SASS of the
# 64-row d64 kernel for reading offline. Logs in $OUT. AA_WGMMA is a switch of
# the kernel source up to commit abecc1c, not of the library: run this in a
# checkout of that commit (dev/README.md, Status).
#   OUT=dir bash dev/wgmma_bisect.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bisect-out}
mkdir -p "$OUT"
GENCODE="-gencode=arch=compute_90a,code=sm_90a"
nvcc -std=c++17 -O2 --expt-relaxed-constexpr $GENCODE -Isrc/gpu/kernel -Isrc/gpu/vendor dev/wgmma_probe.cu \
  -o "$OUT/wgmma_probe.bin" && "$OUT/wgmma_probe.bin" >"$OUT/probe.txt" 2>&1
rm -f "$OUT/wgmma_probe.bin"
cuobjdump -sass build/CMakeFiles/anyattn_obj.dir/src/gpu/inst/inst_bf16_d64.cu.o 2>/dev/null |
  awk '/Function : .*Li64ELi64ELi64ELi4ELi2/{on=1} /Function : /&&!/Li64ELi64ELi64ELi4ELi2/{on=0} on' >"$OUT/sass_m64n64_d64.txt"
for v in 3 1 2; do
  cli=build/anyattn
  if [ $v != 3 ]; then
    cmake -S . -B build-v$v -DCMAKE_BUILD_TYPE=Release -DANYATTN_TESTS=OFF "-DANYATTN_CUDA_GENCODE=$GENCODE" \
      "-DCMAKE_CUDA_FLAGS=-DAA_WGMMA=$v" >/dev/null && cmake --build build-v$v -j16 --target anyattn_cli 2>&1 | grep error
    cli=build-v$v/anyattn
  fi
  timeout 120 sh tests/check_each_config.sh $cli cuda >"$OUT/each_v$v.txt" 2>&1
  timeout 120 $cli bench --backend cuda --workload prefill >"$OUT/prefill_v$v.txt" 2>&1
done
[ -x build-v1/anyattn ] || echo "bisect: build-v1 failed"
echo "== probe"; cat "$OUT/probe.txt"
for v in 3 1 2; do
  echo "== AA_WGMMA=$v"
  grep -E "^config|^FAIL" "$OUT/each_v$v.txt" | cut -c1-220
  grep -E "^prefill" "$OUT/prefill_v$v.txt" | awk '{print "  "$1, $2, $3}'
done
