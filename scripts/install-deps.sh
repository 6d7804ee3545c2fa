#!/usr/bin/env bash
# Installs every package the build and the tests use on a fresh Debian 12
# machine, from the one list below, and does nothing when all are there.
# Run by `make run` and `make test`. A package counts as present only when
# dpkg says it is installed: what happens to be on PATH is not asked.
#   ANYATTN_SKIP_HIP=1  leave out the HIP (AMD) toolchain; the HIP build is then off
set -euo pipefail

# ---- the list: package, group, what it is for ----------------------------------
# group core: the build stops without it; mpi: context parallelism over MPI
# (libanyattn_cp on the CPU backend and its tests; the build goes on without
# it); hip: the HIP build (compile-only).
PACKAGES=(
  "cmake               core  configures the build (CMake >= 3.22)"
  "make                core  drives the build"
  "gcc                 core  C11 library, CPU backend, CLI, tests"
  "g++                 core  links the C++/CUDA objects of the library"
  "libgomp1            core  OpenMP runtime of the CPU backend"
  "libcjson-dev        core  cJSON, the JSON reader of decision-tree files (src/choose/tree_load.c)"
  "pkg-config          core  finds cJSON (libcjson) for CMake; the install test builds against anyattn.pc"
  "python3             core  the Python binding and its tests"
  "binutils            core  objcopy, used by the HIP disassembly test"
  "libopenmpi-dev      mpi   Open MPI headers and library: context parallelism on the CPU backend (src/cp/mpi.c)"
  "openmpi-bin         mpi   mpirun, which starts the context-parallel tests (test_cp_mpi_npN) and bench"
  "libamdhip64-dev     hip   HIP runtime headers and library (Debian's ROCm 5.2)"
  "hipcc               hip   HIP compiler driver; the gfx90a fallback without clang-19"
  "rocm-device-libs    hip   AMD device bitcode (ocml, ockl) linked into device code"
  "clang-19            hip   compiles the HIP sources for gfx90a and gfx942 (MI300)"
  "clang-tools-19      hip   clang-offload-bundler, which clang++-19's HIP link calls"
  "lld-19              hip   the AMD GPU linker clang++-19 uses"
  "llvm-19             hip   llvm-objdump/llvm-readelf that read gfx942 code objects (hip_disasm test)"
  "llvm-15             hip   llvm-dis/llvm-as that make the gfx942 device-library bitcode (scripts/hip-devlibs.sh)"
)

# PyPI, into the python3 on PATH (the one CMake finds for the Python tests).
PIP_PACKAGES=(
  "numpy               the Python binding's array path and its tests"
  "pytest              runs python/tests"
  "matplotlib          the plots of python -m anyattn.report (its test, report_cpu, skips without it)"
  "ml_dtypes           NumPy fp8 dtypes for fp8 KV caches (python/tests/test_fp8.py's ml_dtypes cases)"
)

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

missing_core=() missing_mpi=() missing_hip=()
for row in "${PACKAGES[@]}"; do
  read -r pkg group _ <<<"$row"
  installed "$pkg" && continue
  case "$group" in
    core) missing_core+=("$pkg") ;;
    mpi) missing_mpi+=("$pkg") ;;
    hip) [ "${ANYATTN_SKIP_HIP:-0}" = 1 ] || missing_hip+=("$pkg") ;;
  esac
done

can_apt=0
[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && can_apt=1
apt_install() {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

if [ ${#missing_core[@]} -gt 0 ]; then
  if [ "$can_apt" = 1 ]; then
    echo "install-deps: apt-get install ${missing_core[*]}"
    apt_install "${missing_core[@]}"
  else
    echo "install-deps: missing ${missing_core[*]}; install them (Debian: apt-get install ${missing_core[*]})" >&2
    exit 1
  fi
fi

if [ ${#missing_mpi[@]} -gt 0 ]; then
  if [ "$can_apt" = 1 ]; then
    echo "install-deps: apt-get install ${missing_mpi[*]} (context parallelism over MPI)"
    apt_install "${missing_mpi[@]}" ||
      echo "install-deps: Open MPI did not install; the build leaves context parallelism over MPI out" >&2
  else
    echo "install-deps: context parallelism over MPI needs ${missing_mpi[*]} (the build leaves it out meanwhile)" >&2
  fi
fi

if [ ${#missing_hip[@]} -gt 0 ]; then
  if [ "$can_apt" = 1 ]; then
    echo "install-deps: apt-get install ${missing_hip[*]} (HIP build)"
    apt_install "${missing_hip[@]}" ||
      echo "install-deps: the HIP toolchain did not install; configure with -DANYATTN_HIP=OFF or install: ${missing_hip[*]}" >&2
  else
    echo "install-deps: the HIP build needs ${missing_hip[*]} (or configure with -DANYATTN_HIP=OFF)" >&2
  fi
fi

missing_pip=()
for row in "${PIP_PACKAGES[@]}"; do
  read -r pkg _ <<<"$row"
  python3 -c "import $pkg" >/dev/null 2>&1 || missing_pip+=("$pkg")
done
if [ ${#missing_pip[@]} -gt 0 ]; then
  echo "install-deps: python3 -m pip install ${missing_pip[*]}"
  python3 -m pip install -q "${missing_pip[@]}" ||
    echo "install-deps: pip failed; the Python tests will report SKIP until ${missing_pip[*]} are installed" >&2
fi
