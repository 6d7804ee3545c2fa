#!/usr/bin/env bash
# ab_build.sh: changes against their baseline in the same run. Build A is the
# normal build (build/, made first by run_h200.sh's build step); B is one of:
#   AB_SRC=dir   another source tree (e.g. an older commit: `git archive OLD |
#                tar -x -C dir`), built in dir/build-ab; several trees
#                ("dir1 dir2 ...") are sides B1, B2, ..., built side by side
#   AB_FLAGS=... this tree built in build-ab/ with extra CUDA flags
#   AB_ENV=...   build/ itself run with that environment (a run-time switch
#                such as ANYATTN_CUDA_TMA=0)
# The sides alternate ROUNDS times over the same work, so drift hits all: the
# cases AB_CASES under graph replay (decode BxC or prefill pBxL; set empty:
# none), the bench workloads AB_WORKLOADS (stream launches, or graph replay
# with AB_GRAPH=1; empty: none) and, unless AB_E2E=0, e2e-llama8b. Logs in
# $OUT/ab_*.txt; a table of medians per round last, then each case's ratio to
# A (best of the rounds on each side).
#
#   OUT=dir AB_SRC=/tmp/old AB_WORKLOADS="prefill mixed" bash dev/ab_build.sh
#   OUT=dir AB_SRC="/tmp/b /tmp/c" AB_CASES=p16x1024,p1x8192 AB_WORKLOADS=mixed AB_GRAPH=1 AB_E2E=0 bash dev/ab_build.sh
#   OUT=dir AB_ENV=ANYATTN_CUDA_CLUSTERS=0 bash dev/ab_build.sh
# KERNELS="bf16_d128 bf16_fp8_d128" builds B with those kernel files only, as
# run_h200.sh's KERNELS builds A (docs/performance.md#quick-builds).
# AB_CHECK=bf16_d128 first runs each B side's quick conformance cases of that name, by default and
# under each of AB_CHECK_ENVS (default ANYATTN_CUDA_PERSIST=3); a check past AB_CHECK_S seconds
# (default 60: a kernel that hangs) stops the run before the timings.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/ab-out}
KERNELS=${KERNELS:-}
mkdir -p "$OUT"
[ -n "${AB_SRC:-}${AB_FLAGS:-}${AB_ENV:-}" ] || {
  echo "ab_build: set AB_SRC (B's source trees), AB_FLAGS (CUDA flags of build B) or AB_ENV (B's environment)"
  exit 2
}
CASES=${AB_CASES-1x500,1x2048,1x8192,1x32768,8x4096,128x2048} # set and empty: none
ROUNDS=${AB_ROUNDS:-2}
GRAPH=""
[ "${AB_GRAPH:-0}" = 1 ] && GRAPH=--graph
GENCODE="-DANYATTN_CUDA_GENCODE=-gencode=arch=compute_90a,code=sm_90a"
. bench/deps_env.sh # DEPS_DIR: cJSON for the B build on a machine without network
test -x build/anyattn || { echo "ab_build: build/anyattn missing (run the build step first)"; exit 1; }
# SIDES: the B side names; CLI_<name>: each one's command
SIDES=""
if [ -n "${AB_SRC:-}" ]; then
  set -- $AB_SRC
  n=$#
  jobs=$((16 / n > 1 ? 16 / n : 1))
  i=0
  pids=""
  for src in "$@"; do
    i=$((i + 1))
    (cmake -S "$src" -B "$src/build-ab" -DCMAKE_BUILD_TYPE=Release -DANYATTN_TESTS=OFF -DANYATTN_HIP=OFF "$GENCODE" \
      "-DANYATTN_CUDA_KERNELS=${KERNELS// /;}" >"$OUT/ab_build_log_$i.txt" 2>&1 &&
      cmake --build "$src/build-ab" -j$jobs --target anyattn_cli >>"$OUT/ab_build_log_$i.txt" 2>&1) &
    pids="$pids $!"
  done
  wait $pids # the builds only (a bare wait would also wait for a caller's process substitutions)
  i=0
  for src in "$@"; do
    i=$((i + 1))
    s=B
    [ $n -gt 1 ] && s=B$i
    test -x "$src/build-ab/anyattn" || { echo "ab_build: the build of $src failed"; tail -20 "$OUT/ab_build_log_$i.txt"; exit 1; }
    SIDES="$SIDES $s"
    eval "CLI_$s=\$src/build-ab/anyattn"
    echo "ab_build: $s = $src"
  done
elif [ -n "${AB_FLAGS:-}" ]; then
  cmake -S . -B build-ab -DCMAKE_BUILD_TYPE=Release -DANYATTN_TESTS=OFF -DANYATTN_HIP=OFF "$GENCODE" \
    "-DANYATTN_CUDA_KERNELS=${KERNELS// /;}" "-DCMAKE_CUDA_FLAGS=$AB_FLAGS" >"$OUT/ab_build_log.txt" 2>&1 &&
    cmake --build build-ab -j16 --target anyattn_cli >>"$OUT/ab_build_log.txt" 2>&1
  test -x build-ab/anyattn || { echo "ab_build: build-ab failed"; tail -20 "$OUT/ab_build_log.txt"; exit 1; }
  SIDES=" B"
  CLI_B=build-ab/anyattn
else
  SIDES=" B"
  CLI_B="env $AB_ENV build/anyattn"
fi
CLI_A=build/anyattn
# AB_CHECK: each B side's quick conformance cases whose names hold that string, by default and
# under each of AB_CHECK_ENVS, before any timing; a check past AB_CHECK_S seconds (a kernel that
# hangs) ends the run there
if [ -n "${AB_CHECK:-}" ]; then
  for side in $SIDES; do
    eval "cli=\$CLI_$side"
    for e in "" ${AB_CHECK_ENVS-ANYATTN_CUDA_PERSIST=3}; do
      f="$OUT/ab_check_${side}_${e:-default}.txt"
      env $e timeout "${AB_CHECK_S:-60}" $cli check --backend cuda --quick --filter "$AB_CHECK" >"$f" 2>&1
      rc=$?
      echo "ab_build: check $side [${e:-default}] rc=$rc, $(grep -c '^PASS' "$f") passed, $(grep -c '^FAIL' "$f") failed$(grep '^FAIL' "$f" | head -3 | cut -d' ' -f2 | sed 's/^/; /' | tr -d '\n')"
      [ $rc = 124 ] && { echo "ab_build: the check of $side timed out; no timings"; exit 1; }
    done
  done
fi
for r in $(seq 1 "$ROUNDS"); do
  for side in A $SIDES; do
    eval "cli=\$CLI_$side"
    f="$OUT/ab_${side}_$r.txt"
    : >"$f"
    if [ -n "$CASES" ]; then
      $cli bench --backend cuda --cases "$CASES" --graph >>"$f" 2>&1 || echo "ab_build: $side cases round $r failed"
    fi
    for w in ${AB_WORKLOADS:-}; do
      $cli bench --backend cuda --workload "$w" $GRAPH >>"$f" 2>&1 || echo "ab_build: $side $w round $r failed"
    done
    if [ "${AB_E2E:-1}" = 1 ]; then
      $cli bench --backend cuda --workload e2e-llama8b >>"$f" 2>&1 || echo "ab_build: $side e2e failed"
    fi
  done
done
descr="A: build/anyattn"
for s in $SIDES; do eval "descr=\"\$descr; $s: \$CLI_$s\""; done
how="with stream launches"
[ -n "$GRAPH" ] && how="under graph replay"
echo "== $descr; us per call (cases under graph replay, workloads $how)"
# one "name value" line per case: decode/prefill/mixed rows ("kind shape us ..."), e2e in seconds
rows() {
  awk '/^(decode|prefill|mixed) /{print $1 ":" $2, $3} /^e2e-llama8b:/{for (i = 1; i <= NF; i++) if ($i == "decode") print "e2e:s", $(i+6)}' "$1"
}
for side in A $SIDES; do
  for f in "$OUT"/ab_${side}_*.txt; do
    printf "%-6s" "$(basename "$f" .txt | sed 's/^ab_//')"
    rows "$f" | awk '{printf " %s=%s", $1, $2}'
    echo
  done
done
echo "== each side over A per case (best of $ROUNDS rounds each side; above 1: slower than A)"
for s in A $SIDES; do for f in "$OUT"/ab_${s}_[0-9]*.txt; do rows "$f" | sed "s/^/$s /"; done; done |
  awk -v sides="$SIDES" '
       { s = $1; k = $2; v = $3 + 0; key = s SUBSEP k
         if (!(key in best) || v < best[key]) best[key] = v
         if (!(k in seen)) { seen[k] = 1; order[n++] = k } }
       END { ns = split(sides, sd, " ")
             for (i = 0; i < n; i++) { k = order[i]; if (!(("A" SUBSEP k) in best) || best["A" SUBSEP k] <= 0) continue
               line = sprintf("%-28s A %10.2f", k, best["A" SUBSEP k])
               for (j = 1; j <= ns; j++) if ((sd[j] SUBSEP k) in best)
                 line = line sprintf("  %s %10.2f (%.3f)", sd[j], best[sd[j] SUBSEP k], best[sd[j] SUBSEP k] / best["A" SUBSEP k])
               print line } }'
