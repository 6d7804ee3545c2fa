#!/usr/bin/env bash
# ab_build.sh: a change against its baseline in the same run. Build A is the
# normal build (build/, made first by run_h200.sh's build step); B is one of:
#   AB_SRC=dir   another source tree (e.g. an older commit: `git archive OLD |
#                tar -x -C dir`), built in dir/build-ab
#   AB_FLAGS=... this tree built in build-ab/ with extra CUDA flags
#   AB_ENV=...   build/ itself run with that environment (a run-time switch
#                such as ANYATTN_CUDA_TMA=0)
# The two alternate ROUNDS times over the same work, so drift hits both: the
# decode cases AB_CASES under graph replay (set empty: none), the bench workloads AB_WORKLOADS
# (stream launches; empty: none) and, unless AB_E2E=0, e2e-llama8b. Logs in
# $OUT/ab_*.txt; a table of medians per round last, then each case's B/A ratio
# (best of the rounds on each side).
#
#   OUT=dir AB_SRC=/tmp/old AB_WORKLOADS="prefill mixed" bash dev/ab_build.sh
#   OUT=dir AB_ENV=ANYATTN_CUDA_CLUSTERS=0 bash dev/ab_build.sh
# KERNELS="bf16_d128 bf16_fp8_d128" builds B with those kernel files only, as
# run_h200.sh's KERNELS builds A (docs/performance.md#quick-builds).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/ab-out}
KERNELS=${KERNELS:-}
mkdir -p "$OUT"
[ -n "${AB_SRC:-}${AB_FLAGS:-}${AB_ENV:-}" ] || {
  echo "ab_build: set AB_SRC (B's source tree), AB_FLAGS (CUDA flags of build B) or AB_ENV (B's environment)"
  exit 2
}
CASES=${AB_CASES-1x500,1x2048,1x8192,1x32768,8x4096,128x2048} # set and empty: none
ROUNDS=${AB_ROUNDS:-2}
GENCODE="-DANYATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a"
. bench/deps_env.sh # DEPS_DIR: cJSON for the B build on a machine without network
test -x build/anyattn || { echo "ab_build: build/anyattn missing (run the build step first)"; exit 1; }
B_CLI=build/anyattn
if [ -n "${AB_SRC:-}" ]; then
  cmake -S "$AB_SRC" -B "$AB_SRC/build-ab" -DCMAKE_BUILD_TYPE=Release -DANYATTN_TESTS=OFF -DANYATTN_HIP=OFF "$GENCODE" \
    "-DANYATTN_CUDA_KERNELS=${KERNELS// /;}" >"$OUT/ab_build_log.txt" 2>&1 && cmake --build "$AB_SRC/build-ab" -j16 --target anyattn_cli >>"$OUT/ab_build_log.txt" 2>&1
  test -x "$AB_SRC/build-ab/anyattn" || { echo "ab_build: the build of $AB_SRC failed"; tail -20 "$OUT/ab_build_log.txt"; exit 1; }
  B_CLI=$AB_SRC/build-ab/anyattn
elif [ -n "${AB_FLAGS:-}" ]; then
  cmake -S . -B build-ab -DCMAKE_BUILD_TYPE=Release -DANYATTN_TESTS=OFF -DANYATTN_HIP=OFF "$GENCODE" \
    "-DANYATTN_CUDA_KERNELS=${KERNELS// /;}" "-DCMAKE_CUDA_FLAGS=$AB_FLAGS" >"$OUT/ab_build_log.txt" 2>&1 &&
    cmake --build build-ab -j16 --target anyattn_cli >>"$OUT/ab_build_log.txt" 2>&1
  test -x build-ab/anyattn || { echo "ab_build: build-ab failed"; tail -20 "$OUT/ab_build_log.txt"; exit 1; }
  B_CLI=build-ab/anyattn
fi
for r in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    cli=build/anyattn
    [ $side = B ] && cli="env ${AB_ENV:-} $B_CLI"
    f="$OUT/ab_${side}_$r.txt"
    : >"$f"
    if [ -n "$CASES" ]; then
      $cli bench --backend cuda --cases "$CASES" --graph >>"$f" 2>&1 || echo "ab_build: $side cases round $r failed"
    fi
    for w in ${AB_WORKLOADS:-}; do
      $cli bench --backend cuda --workload "$w" >>"$f" 2>&1 || echo "ab_build: $side $w round $r failed"
    done
    if [ "${AB_E2E:-1}" = 1 ]; then
      $cli bench --backend cuda --workload e2e-llama8b >>"$f" 2>&1 || echo "ab_build: $side e2e failed"
    fi
  done
done
echo "== A: build/; B: ${AB_SRC:+$AB_SRC/build-ab}${AB_FLAGS:+build-ab ($AB_FLAGS)}${AB_ENV:+build/ with $AB_ENV}; us per call (decode cases under graph replay, workloads with stream launches)"
# one "name value" line per case: decode/prefill/mixed rows ("kind shape us ..."), e2e in seconds
rows() {
  awk '/^(decode|prefill|mixed) /{print $1 ":" $2, $3} /^e2e-llama8b:/{for (i = 1; i <= NF; i++) if ($i == "decode") print "e2e:s", $(i+6)}' "$1"
}
for f in "$OUT"/ab_[AB]_*.txt; do
  printf "%-6s" "$(basename "$f" .txt | sed 's/^ab_//')"
  rows "$f" | awk '{printf " %s=%s", $1, $2}'
  echo
done
echo "== B/A per case (best of $ROUNDS rounds each side; above 1: B slower)"
for s in A B; do for f in "$OUT"/ab_${s}_*.txt; do rows "$f" | sed "s/^/$s /"; done; done |
  awk '{k = $2; v = $3 + 0; if ($1 == "A") { if (!(k in a) || v < a[k]) a[k] = v } else { if (!(k in b) || v < b[k]) b[k] = v }
        if (!(k in seen)) { seen[k] = 1; order[n++] = k } }
       END { for (i = 0; i < n; i++) { k = order[i]; if ((k in a) && (k in b) && a[k] > 0) printf "%-28s A %10.2f  B %10.2f  B/A %.3f\n", k, a[k], b[k], b[k] / a[k] } }'
