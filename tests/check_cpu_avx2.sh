#!/bin/sh
# check_cpu_avx2.sh: the CPU backend built for AVX2 (x86-64-v3: 16 ymm
# registers, the 8-lane register blocks and the fused decode's 8-element row
# tails of docs/design/cpu.md) in a build of its own, CPU backend only, then
# the quick conformance suite on it twice: the default products, and fp32 FMA
# forced (so that nothing runs AVX-512 code where this CPU has it). Skipped
# (77) off x86-64, where the compiler lacks -march=x86-64-v3 or the CPU lacks
# AVX2, FMA or F16C.
#   usage: check_cpu_avx2.sh SOURCE_DIR BUILD_DIR [CMAKE] [CC]
set -u
src=$1 out=$2 cmake=${3:-cmake} cc=${4:-cc}
case "$(uname -m)" in x86_64 | amd64) ;; *) echo "SKIP: not x86-64"; exit 77 ;; esac
for f in avx2 fma f16c; do
  grep -qw "$f" /proc/cpuinfo 2>/dev/null || { echo "SKIP: this CPU lacks $f"; exit 77; }
done
echo 'int main(void) { return 0; }' > "${TMPDIR:-/tmp}/anyattn-v3-$$.c"
if ! "$cc" -march=x86-64-v3 -o /dev/null "${TMPDIR:-/tmp}/anyattn-v3-$$.c" 2>/dev/null; then
  rm -f "${TMPDIR:-/tmp}/anyattn-v3-$$.c"
  echo "SKIP: $cc has no -march=x86-64-v3"
  exit 77
fi
rm -f "${TMPDIR:-/tmp}/anyattn-v3-$$.c"
"$cmake" -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" -DANYATTN_NATIVE=OFF \
  -DCMAKE_C_FLAGS=-march=x86-64-v3 -DANYATTN_CUDA=OFF -DANYATTN_HIP=OFF -DANYATTN_MPI=OFF -DANYATTN_NCCL=OFF \
  -DANYATTN_TESTS=OFF >"$out.log" 2>&1 &&
  "$cmake" --build "$out" -j"$(nproc 2>/dev/null || echo 2)" --target anyattn_cli >>"$out.log" 2>&1 ||
  { cat "$out.log"; echo "FAIL: the AVX2 build"; exit 1; }
# run NAME [VAR=VALUE]: the quick suite, its last line, all of it on a failure
run() {
  env ${2:-ANYATTN_CPU_ISA=auto} "$out/anyattn" check --backend cpu --quick >"$out.check.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then cat "$out.check.log"; echo "FAIL: $1 (exit $rc)"; exit 1; fi
  echo "$1: $(tail -n 1 "$out.check.log")"
}
run "default products"
run "fp32 FMA" ANYATTN_CPU_ISA=fp32
