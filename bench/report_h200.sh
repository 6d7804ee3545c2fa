#!/usr/bin/env bash
# report_h200.sh: `anyattn report` on a lent GPU machine, whose calls last at most 10 minutes: one
# call builds when build/anyattn is missing or a quick build (run_h200.sh's build step), continues
# the report folder build/report-h200 (unpacking REPORT_TGZ there first when the machine came back
# without it), stops the report with SIGINT before LIMIT seconds so it writes what it has, and
# bundles the folder into $OUT/report-h200.tgz. The same call again continues: finished workloads
# are kept, --tune resumes at its first unfinished cell; the report is complete when this exits 0.
#
#   ANYATTN_COMMIT=<sha> OUT=/out bash bench/report_h200.sh            # the workloads and peers
#   ANYATTN_COMMIT=<sha> OUT=/out bash bench/report_h200.sh --tune     # then the tuning campaign
#
# LIMIT (default 560) bounds the whole call in seconds; REPORT_TGZ (default build/report-h200.tgz)
# is a bundle from an earlier call; DEPS_DIR (bench/deps_env.sh) serves the build and the run.
set -u
cd "$(dirname "$0")/.."
t0=$(date +%s)
OUT=${OUT:-$PWD/bench-out}
LIMIT=${LIMIT:-560}
REPORT_TGZ=${REPORT_TGZ:-build/report-h200.tgz}
DIR=build/report-h200
mkdir -p "$OUT"
# cJSON from DEPS_DIR's .deb files, unpacked again where a call's copy of the tree replaced the
# folder that the build's rpath points into
. bench/deps_env.sh
# a quick build (some kernel files only: run_h200.sh's KERNELS) is rebuilt whole first
if [ ! -x build/anyattn ] || grep -qs '^ANYATTN_CUDA_KERNELS:STRING=.' build/CMakeCache.txt; then
  STEPS=build OUT="$OUT/build" bash bench/run_h200.sh >/dev/null 2>&1 ||
    { echo "report_h200: the build failed ($OUT/build/log.txt)"; exit 1; }
fi
if [ ! -d "$DIR" ] && [ -f "$REPORT_TGZ" ]; then
  tar xzf "$REPORT_TGZ" -C build && echo "report_h200: continuing the report of $REPORT_TGZ"
fi
left=$((LIMIT - ($(date +%s) - t0)))
[ "$left" -gt 30 ] || { echo "report_h200: no time left after the build; call again"; exit 1; }
timeout -s INT "$left" build/anyattn report --out "$DIR" "$@"
rc=$?
tar czf "$OUT/report-h200.tgz" -C build report-h200
case $rc in
0) echo "report_h200: complete ($OUT/report-h200.tgz)" ;;
130) echo "report_h200: stopped at the time limit; call again to continue ($OUT/report-h200.tgz)" ;;
*) echo "report_h200: the report exited $rc (log.txt in $OUT/report-h200.tgz)" ;;
esac
exit $rc
