# deps_env.sh (sourced by bench/run_h200.sh, bench/report_h200.sh and dev/ab_build.sh): a machine
# that cannot install cJSON from its package manager (the lent GPU machine has
# no network) passes DEPS_DIR, a folder with the libcjson1 and libcjson-dev
# .deb files; they are unpacked there and found through pkg-config (the
# build's rpath then points at them).
if [ -n "${DEPS_DIR:-}" ] && ! pkg-config --exists libcjson 2>/dev/null; then
  for f in "$DEPS_DIR"/*.deb; do dpkg-deb -x "$f" "$DEPS_DIR/root"; done
  export PKG_CONFIG_SYSROOT_DIR=$DEPS_DIR/root
  export PKG_CONFIG_LIBDIR=$DEPS_DIR/root/usr/lib/x86_64-linux-gnu/pkgconfig:$DEPS_DIR/root/usr/share/pkgconfig
fi
