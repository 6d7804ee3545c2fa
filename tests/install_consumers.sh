#!/bin/sh
# install_consumers.sh: installs the build into a temporary prefix, as a user
# would (cmake --install BUILD --prefix P), then builds examples/basic.c
# against it twice, with pkg-config and with a small CMake project that calls
# find_package(anyattn), and runs both; the static library too where the
# CMake package offers it. The Python binding must find P's library when it
# sits in P's site-packages. Prints PASS/FAIL per step; exit 0 or 1.
#   usage: install_consumers.sh BUILD_DIR SOURCE_DIR [CMAKE] [CC]
set -u
build=$1 src=$(cd "$2" && pwd) cmake=${3:-cmake} cc=${4:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/anyattn-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fails=0

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
# step NAME COMMAND...: runs the command with its output in $tmp/log, shown on failure.
step() {
  name=$1
  shift
  if "$@" >"$tmp/log" 2>&1; then pass "$name"; else fail "$name"; sed 's/^/  | /' "$tmp/log"; fi
}

step "cmake --install into a temporary prefix" "$cmake" --install "$build" --prefix "$prefix"
pc=$(find "$prefix" -name anyattn.pc | head -n 1)
libdir=${pc%/pkgconfig/anyattn.pc}
libdir=${libdir#"$prefix"/} # lib, lib64 or lib/<multiarch>, as GNUInstallDirs chose
for f in include/anyattn.h "$libdir/libanyattn.so" "$libdir/libanyattn.a" bin/anyattn \
  "$libdir/pkgconfig/anyattn.pc" "$libdir/cmake/anyattn/anyattnConfig.cmake"; do
  if [ -e "$prefix/$f" ]; then pass "installed $f"; else fail "installed $f (missing)"; fi
done
step "the installed CLI runs (anyattn info)" "$prefix/bin/anyattn" info

# pkg-config, as in the README's Install section
if command -v pkg-config >/dev/null 2>&1; then
  export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
  if flags=$(pkg-config --cflags --libs anyattn) && pcdir=$(pkg-config --variable=libdir anyattn); then
    # shellcheck disable=SC2086 # the flags are words
    step "cc examples/basic.c \$(pkg-config --cflags --libs anyattn)" \
      "$cc" -std=c11 "$src/examples/basic.c" $flags -lm -Wl,-rpath,"$pcdir" -o "$tmp/basic_pc"
    step "the pkg-config build runs" "$tmp/basic_pc"
  else
    fail "pkg-config --cflags --libs anyattn"
  fi
else
  fail "pkg-config not found (scripts/install-deps.sh installs it)"
fi

# CMake: find_package(anyattn) and the imported targets
mkdir -p "$tmp/proj"
cat >"$tmp/proj/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.22)
project(uses_anyattn C)
find_package(anyattn 0.1 REQUIRED)
add_executable(basic_cmake "$src/examples/basic.c")
target_link_libraries(basic_cmake PRIVATE anyattn::anyattn m)
if(TARGET anyattn::anyattn_static)
  add_executable(basic_static "$src/examples/basic.c")
  target_link_libraries(basic_static PRIVATE anyattn::anyattn_static m)
endif()
EOF
step "find_package(anyattn) configures" "$cmake" -S "$tmp/proj" -B "$tmp/proj/build" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc"
step "a CMake project builds against anyattn::anyattn" "$cmake" --build "$tmp/proj/build"
step "the CMake build runs" "$tmp/proj/build/basic_cmake"
if [ -x "$tmp/proj/build/basic_static" ]; then
  step "the anyattn::anyattn_static build runs" "$tmp/proj/build/basic_static"
else
  echo "SKIP anyattn::anyattn_static (its dependencies were not found by the CMake project)"
fi

# Python: a package installed under the prefix finds the prefix's library.
if command -v python3 >/dev/null 2>&1; then
  site=$prefix/$libdir/python3/site-packages
  mkdir -p "$site" && cp -R "$src/python/anyattn" "$site/"
  got=$(cd "$tmp" && env -u ANYATTN_LIBRARY PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 \
    python3 -c 'import anyattn; print(anyattn.library_path()); print(anyattn.version())' 2>&1)
  case "$got" in
    "$prefix/$libdir/"*) pass "python finds the prefix's library ($(echo "$got" | tr '\n' ' '))" ;;
    *) fail "python finds the prefix's library: got '$got'" ;;
  esac
fi

[ "$fails" -eq 0 ] && echo PASS || echo "FAIL ($fails)"
[ "$fails" -eq 0 ]
