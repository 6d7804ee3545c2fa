#!/usr/bin/env bash
# Makes the ROCm device-library folder a newer clang needs for MI300 (gfx942):
# Debian's ROCm 5.2 device libraries stop at gfx940, so this links every .bc
# into OUT and generates oclc_isa_version_942.bc from the gfx1030 one with the
# ISA number changed. Idempotent; run by cmake/hip.cmake at configure time.
#   usage: scripts/hip-devlibs.sh OUT_DIR [SRC_DIR]
set -euo pipefail
out=${1:?usage: hip-devlibs.sh OUT_DIR [SRC_DIR]}
src=${2:-/usr/lib/x86_64-linux-gnu/amdgcn/bitcode}
[ -f "$src/ocml.bc" ] || { echo "hip-devlibs: no ROCm device libraries in $src (apt-get install rocm-device-libs)" >&2; exit 1; }
mkdir -p "$out"
for f in "$src"/*.bc; do ln -sf "$f" "$out/$(basename "$f")"; done
# Only the version constant differs between oclc_isa_version_*.bc files.
gen() { # gen NAME NUMBER
  [ -s "$out/oclc_isa_version_$1.bc" ] && return 0
  local dis as
  for v in 15 16 17 18 19; do
    command -v llvm-dis-$v >/dev/null 2>&1 && command -v llvm-as-$v >/dev/null 2>&1 && { dis=llvm-dis-$v; as=llvm-as-$v; break; }
  done
  [ -n "${dis:-}" ] || { echo "hip-devlibs: llvm-dis/llvm-as not found (apt-get install llvm-15)" >&2; exit 1; }
  "$dis" "$src/oclc_isa_version_1030.bc" -o - | sed "s/i32 10300/i32 $2/" | "$as" -o "$out/oclc_isa_version_$1.bc.tmp"
  mv "$out/oclc_isa_version_$1.bc.tmp" "$out/oclc_isa_version_$1.bc"
}
gen 941 9401
gen 942 9402
