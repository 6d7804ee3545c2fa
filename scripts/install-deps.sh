#!/usr/bin/env bash
# Installs what the build and the tests need on a fresh Debian 12 machine,
# and does nothing when it is all there. Run by `make run` and `make test`.
#   cmake, gcc/g++, make   build (C11 library, CLI, tests)
#   libgomp (with gcc)     OpenMP for the CPU backend
#   python3 numpy, pytest  the Python binding's tests (tests run without them: skipped)
#   hipcc, libamdhip64-dev, rocm-device-libs, clang-19, lld-19, llvm-15
#                          the HIP (AMD) build, compile-only (cmake/hip.cmake)
set -euo pipefail

need_apt=()
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
command -v make >/dev/null 2>&1 || need_apt+=(make)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: apt-get install ${need_apt[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
  else
    echo "install-deps: missing ${need_apt[*]}; install them (Debian: apt-get install ${need_apt[*]})" >&2
    exit 1
  fi
fi

if command -v python3 >/dev/null 2>&1; then
  if ! python3 -c 'import numpy, pytest' >/dev/null 2>&1; then
    echo "install-deps: pip install numpy pytest"
    python3 -m pip install -q numpy pytest || echo "install-deps: pip failed; Python tests will be skipped" >&2
  fi
fi

# HIP (AMD) build, compile-only (cmake/hip.cmake): Debian's ROCm 5.2 headers,
# runtime and device libraries, plus clang-19/lld-19 for MI300 (gfx942) and
# llvm-15's llvm-dis/llvm-as for scripts/hip-devlibs.sh. ANYATTN_SKIP_HIP=1 skips.
if [ "${ANYATTN_SKIP_HIP:-0}" != 1 ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  hip_apt=()
  [ -f /usr/include/hip/hip_runtime.h ] || hip_apt+=(libamdhip64-dev)
  command -v hipcc >/dev/null 2>&1 || hip_apt+=(hipcc)
  [ -f /usr/lib/x86_64-linux-gnu/amdgcn/bitcode/ocml.bc ] || hip_apt+=(rocm-device-libs)
  command -v clang++-19 >/dev/null 2>&1 || hip_apt+=(clang-19)
  command -v ld.lld-19 >/dev/null 2>&1 || hip_apt+=(lld-19)
  command -v llvm-dis-15 >/dev/null 2>&1 || hip_apt+=(llvm-15)
  if [ ${#hip_apt[@]} -gt 0 ]; then
    echo "install-deps: apt-get install ${hip_apt[*]} (HIP build)"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${hip_apt[@]}"; }; then
      echo "install-deps: HIP toolchain not installed; the HIP build is skipped" >&2
    fi
  fi
fi
