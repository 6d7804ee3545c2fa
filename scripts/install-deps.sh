#!/usr/bin/env bash
# Installs what the build and the tests need on a fresh Debian 12 machine,
# and does nothing when it is all there. Run by `make run` and `make test`.
#   cmake, gcc/g++, make   build (C11 library, CLI, tests)
#   libgomp (with gcc)     OpenMP for the CPU backend
#   python3 numpy, pytest  the Python binding's tests (tests run without them: skipped)
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
