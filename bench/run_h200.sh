#!/usr/bin/env bash
# run_h200.sh: everything the CUDA backend needs from one lent H200, in one call:
# build (sm_90a only), conformance (`anyattn check`), the GPU ctest label,
# compute-sanitizer on small cases, the bench workloads (JSON), torch peers and
# ceilings (bench/peers.py), and a short table printed last.
#
#   OUT=/some/dir bash bench/run_h200.sh            # all steps
#   STEPS="build check bench" bash bench/run_h200.sh  # a subset
#   KERNELS="bf16_d128" STEPS=build ...  # a quick build: those kernel files only
#       (-DANYATTN_CUDA_KERNELS; other shapes' cases fail, so for A/B timings only)
#   STEPS=sweep SWEEP="m16n32w2s2@decode m64n64w4s2" SWEEP_WORKLOADS="decode prefill" ...
#       builds build-tune (-DANYATTN_GPU_CONFIGS_TUNING: the ship and tune rows of
#       src/choose/configs.h) and benches each forced config (SWEEP empty: every config of that table)
# Steps: build check ctest sanitize bench graph e2e roles fp8 sweep peers ibm tune decsweep tunex
# (the long IBM grid and the tuning sweeps last, so a run cut short still has the rest). graph: the decode
# list again under CUDA-graph replay (launch overhead out: batch-1 targets);
# e2e: the paper's end-to-end attention (e2e-llama8b, ~410k graph-replayed
# calls), then e2e-llama8b-step (the same with a kernel writing Q and the
# newest K/V before each call).
#
# Data files, named as in bench/results/h200/ (docs/performance.md says how to
# refresh the table from them): {decode,decode_graph,prefill,mixed,ibm,
# e2e-llama8b,e2e-llama8b-step}.json from `anyattn bench --json` (the fp8 step:
# {decode_graph,prefill}_kv_{as-q,fp8}.json, prefill_kv_fp8_staged.json,
# headdim_d<D>_kv_{as-q,fp8,fp8_staged}.json), peers.json from peers.py,
# h200_tune_<grid>.csv from `anyattn tune` with h200_tune_<grid>.meta.json
# beside it. Each records its commit: ANYATTN_COMMIT if set (the device
# machine has no git: pass `ANYATTN_COMMIT=<sha>` in the command), else
# `git rev-parse HEAD` (with -dirty when the tree has changes). Logs:
# $OUT/log.txt (all output), $OUT/check.txt, $OUT/e2e.txt. Everything but
# log.txt is bundled into $OUT/results.tgz at the end (the device tool
# returns at most 8 files).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/bench-out}
KERNELS=${KERNELS:-} # the kernel files of a quick build (-DANYATTN_CUDA_KERNELS); empty: all
mkdir -p "$OUT"
LOG=$OUT/log.txt
STEPS=${STEPS:-"build check ctest sanitize bench graph e2e peers ibm tune"}
WORKLOADS=${WORKLOADS:-"decode prefill mixed"}
GENCODE="-gencode=arch=compute_90a,code=sm_90a"
CLI=build/anyattn
SUMMARY=$OUT/.summary
if [ -z "${ANYATTN_COMMIT:-}" ] && ANYATTN_COMMIT=$(git rev-parse HEAD 2>/dev/null); then
  git diff --quiet HEAD 2>/dev/null || ANYATTN_COMMIT="$ANYATTN_COMMIT-dirty"
fi
export ANYATTN_COMMIT=${ANYATTN_COMMIT:-}
: >"$SUMMARY"
has() { [[ " $STEPS " == *" $1 "* ]]; }
say() { echo "== $(date +%T) $*" | tee -a "$LOG"; }
note() { echo "$*" >>"$SUMMARY"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee -a "$LOG"

# cJSON on a machine without network (DEPS_DIR: its .deb files)
. "$(dirname "$0")/deps_env.sh"

if has build; then
  say "build (sm_90a, -j16)"
  t0=$(date +%s)
  if cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "-DANYATTN_CUDA_GENCODE=$GENCODE" \
    "-DANYATTN_CUDA_KERNELS=${KERNELS// /;}" >>"$LOG" 2>&1 &&
    cmake --build build -j16 >>"$LOG" 2>&1; then
    note "build: ok in $(($(date +%s) - t0)) s"
    # ptxas C7520: every wgmma of a kernel serialised (one issued under a run-time branch)
    n=$(grep -c "C7520" "$LOG")
    [ "$n" -gt 0 ] && note "build: $n ptxas C7520 warnings (wgmma serialised; see log.txt)"
  else
    note "build: FAILED (see log.txt)"
    tail -30 "$LOG"
    cat "$SUMMARY"
    exit 1
  fi
fi

if has check; then
  say "anyattn check --backend cuda"
  timeout 300 $CLI check --backend cuda >"$OUT/check.txt" 2>&1
  rc=$?
  grep -E "^(FAIL|SKIP)" "$OUT/check.txt" | head -40 | tee -a "$LOG"
  note "check (full): rc=$rc, $(tail -1 "$OUT/check.txt")"
fi

if has ctest; then
  say "ctest -L gpu"
  (cd build && timeout 300 ctest -L gpu --output-on-failure) >>"$LOG" 2>&1
  rc=$?
  note "ctest -L gpu: rc=$rc, $(grep -E 'tests passed|tests failed' "$LOG" | tail -1)"
fi

if has sanitize; then
  for tool in memcheck racecheck; do
    say "compute-sanitizer --tool $tool (quick, filter ${SAN_FILTER:-_d64_})"
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 \
      $CLI check --backend cuda --quick --filter "${SAN_FILTER:-_d64_}" >"$OUT/.san" 2>&1
    rc=$?
    tail -5 "$OUT/.san" | tee -a "$LOG"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race" "$OUT/.san" | head -10 >>"$LOG"
    note "sanitizer $tool: rc=$rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/.san" | tail -1)"
  done
  # Graph capture and replays at padded sizes, split-KV included.
  say "compute-sanitizer --tool memcheck test_graph_replay"
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_graph_replay >"$OUT/.san" 2>&1
  rc=$?
  tail -3 "$OUT/.san" | tee -a "$LOG"
  note "sanitizer memcheck test_graph_replay: rc=$rc, $(grep -E 'ERROR SUMMARY' "$OUT/.san" | tail -1)"
  # fp8 caches: the quick fp8 conformance cases (codes into fragments, split and cluster merges).
  for tool in memcheck racecheck; do
    say "compute-sanitizer --tool $tool (quick, filter fp8)"
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 \
      $CLI check --backend cuda --quick --filter fp8 >"$OUT/.san" 2>&1
    rc=$?
    tail -3 "$OUT/.san" | tee -a "$LOG"
    note "sanitizer $tool fp8: rc=$rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/.san" | tail -1), $(grep -cE '^PASS' "$OUT/.san") PASS"
  done
  # The split-KV merge by the last arrival (counters, fences, two streams) under every tool.
  for tool in memcheck racecheck synccheck; do
    say "compute-sanitizer --tool $tool test_split_merge"
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_split_merge >"$OUT/.san" 2>&1
    rc=$?
    tail -3 "$OUT/.san" | tee -a "$LOG"
    note "sanitizer $tool test_split_merge: rc=$rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/.san" | tail -1)"
  done
  # fp8 prefill staged to 16-bit: the stage kernel, then the 16-bit tiles with descales.
  for tool in memcheck racecheck synccheck; do
    say "compute-sanitizer --tool $tool test_gpu_fp8 staged"
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/test_gpu_fp8 staged >"$OUT/.san" 2>&1
    rc=$?
    tail -3 "$OUT/.san" | tee -a "$LOG"
    note "sanitizer $tool test_gpu_fp8 staged: rc=$rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/.san" | tail -1), $(grep -cE '^PASS ' "$OUT/.san") PASS"
  done
fi

if has bench; then
  for w in $WORKLOADS; do
    say "bench $w"
    timeout 180 $CLI bench --backend cuda --workload "$w" --json "$OUT/$w.json" >"$OUT/.bench" 2>&1
    rc=$?
    cat "$OUT/.bench" >>"$LOG"
    note "bench $w: rc=$rc"
    grep -E "^(decode|prefill|mixed)" "$OUT/.bench" | awk '{printf "  %-22s %10s us %8s GB/s %8s GFLOP/s  %s\n", $1" "$2, $3, $4, $6, $8}' >>"$SUMMARY"
  done
fi

if has graph; then
  say "bench decode --graph"
  timeout 180 $CLI bench --backend cuda --workload decode --graph --json "$OUT/decode_graph.json" >"$OUT/.bench" 2>&1
  rc=$?
  cat "$OUT/.bench" >>"$LOG"
  note "bench decode --graph: rc=$rc"
  grep -E "^decode" "$OUT/.bench" | awk '{printf "  %-22s %10s us %8s GB/s (graph)\n", $1" "$2, $3, $4}' >>"$SUMMARY"
fi

if has e2e; then
  say "bench e2e-llama8b"
  timeout 240 $CLI bench --backend cuda --workload e2e-llama8b --json "$OUT/e2e-llama8b.json" >"$OUT/e2e.txt" 2>&1
  rc=$?
  cat "$OUT/e2e.txt" >>"$LOG"
  note "bench e2e-llama8b: rc=$rc"
  grep -E "^e2e-llama8b:" "$OUT/e2e.txt" | sed 's/^/  /' >>"$SUMMARY"
  say "bench e2e-llama8b-step"
  timeout 240 $CLI bench --backend cuda --workload e2e-llama8b-step --json "$OUT/e2e-llama8b-step.json" >"$OUT/.bench" 2>&1
  rc=$?
  cat "$OUT/.bench" >>"$OUT/e2e.txt"
  cat "$OUT/.bench" >>"$LOG"
  note "bench e2e-llama8b-step: rc=$rc"
  grep -E "^e2e-llama8b-step:" "$OUT/.bench" | sed 's/^/  /' >>"$SUMMARY"
  say "bench e2e-llama8b-step --prior-writes new-keys"
  timeout 240 $CLI bench --backend cuda --workload e2e-llama8b-step --prior-writes new-keys \
    --json "$OUT/e2e-llama8b-step-newkeys.json" >"$OUT/.bench" 2>&1
  rc=$?
  cat "$OUT/.bench" >>"$OUT/e2e.txt"
  cat "$OUT/.bench" >>"$LOG"
  note "bench e2e-llama8b-step --prior-writes new-keys: rc=$rc"
  grep -E "^e2e-llama8b-step:" "$OUT/.bench" | sed 's/^/  /' >>"$SUMMARY"
fi

# roles: mixed and prefill batches with the library's choice beside the role
# pair and the single tiles forced (dev/mixed_roles.sh; docs/design/prefill.md#mixed-batches).
if has roles; then
  say "mixed batches: role pair against single tiles"
  OUT="$OUT/roles" timeout 300 bash dev/mixed_roles.sh >"$OUT/roles.txt" 2>&1
  note "roles: rc=$?"
  sed 's/^/  /' "$OUT/roles.txt" >>"$SUMMARY"
fi

# fp8: the fp8 caches against 16-bit ones in one run (docs/design/layout.md's
# table): decode under graph replay and prefill, each case with the bf16 cache
# then the fp8 cache; head dims 80 and 192 beside their padded 96 and 256.
# FP8_CASES / FP8_PCASES / FP8_HD_CASES override the lists; FP8_CONFIGS adds
# forced-config decode runs of the fp8 cache ("cfg[-kS] ...").
if has fp8; then
  dc=${FP8_CASES:-1x500,1x8192,1x32768,8x4096,32x2048,64x8192,128x2048}
  pc=${FP8_PCASES:-p1x500,p1x2048,p1x8192,p4x4096}
  for kv in as-q fp8; do
    say "bench decode --graph --kv-dtype $kv"
    timeout 180 $CLI bench --backend cuda --cases "$dc" --graph --kv-dtype $kv \
      --json "$OUT/decode_graph_kv_$kv.json" >"$OUT/.bench" 2>&1
    note "bench decode --graph --kv-dtype $kv: rc=$?"
    cat "$OUT/.bench" >>"$LOG"
    grep -E "^decode" "$OUT/.bench" | awk -v k=$kv '{printf "  %-5s %-22s %10s us %8s GB/s\n", k, $1" "$2, $3, $4}' >>"$SUMMARY"
    say "bench prefill --kv-dtype $kv"
    timeout 180 $CLI bench --backend cuda --cases "$pc" --kv-dtype $kv --json "$OUT/prefill_kv_$kv.json" \
      >"$OUT/.bench" 2>&1
    note "bench prefill --kv-dtype $kv: rc=$?"
    cat "$OUT/.bench" >>"$LOG"
    grep -E "^prefill" "$OUT/.bench" | awk -v k=$kv '{printf "  %-5s %-22s %10s us %8s GFLOP/s\n", k, $1" "$2, $3, $6}' >>"$SUMMARY"
  done
  # fp8 prefill staged to 16-bit in the workspace (limits.stage_kv_tokens)
  say "bench prefill --kv-dtype fp8 --stage-kv ${FP8_STAGE:-65536}"
  timeout 180 $CLI bench --backend cuda --cases "$pc" --kv-dtype fp8 --stage-kv ${FP8_STAGE:-65536} \
    --json "$OUT/prefill_kv_fp8_staged.json" >"$OUT/.bench" 2>&1
  note "bench prefill --kv-dtype fp8 --stage-kv: rc=$?"
  cat "$OUT/.bench" >>"$LOG"
  grep -E "^prefill" "$OUT/.bench" | awk '{printf "  %-5s %-22s %10s us %8s GFLOP/s\n", "fp8st", $1" "$2, $3, $6}' >>"$SUMMARY"
  for hd in ${FP8_HEAD_DIMS:-80 96 192 256}; do
    for kv in as-q fp8; do
      say "bench head dim $hd --kv-dtype $kv"
      timeout 180 $CLI bench --backend cuda --cases "${FP8_HD_CASES:-1x32768,8x4096,64x8192,p1x8192}" --graph \
        --head-dim $hd --kv-dtype $kv --json "$OUT/headdim_d${hd}_kv_$kv.json" >"$OUT/.bench" 2>&1
      note "bench head dim $hd --kv-dtype $kv: rc=$?"
      cat "$OUT/.bench" >>"$LOG"
      grep -E "^(decode|prefill)" "$OUT/.bench" |
        awk -v k="d$hd $kv" '{printf "  %-10s %-22s %10s us %8s GB/s %8s GFLOP/s\n", k, $1" "$2, $3, $4, $6}' >>"$SUMMARY"
    done
    say "bench head dim $hd --kv-dtype fp8 --stage-kv ${FP8_STAGE:-65536}"
    timeout 180 $CLI bench --backend cuda --cases p1x8192 --graph --head-dim $hd --kv-dtype fp8 \
      --stage-kv ${FP8_STAGE:-65536} --json "$OUT/headdim_d${hd}_kv_fp8_staged.json" >"$OUT/.bench" 2>&1
    note "bench head dim $hd --kv-dtype fp8 --stage-kv: rc=$?"
    cat "$OUT/.bench" >>"$LOG"
    grep -E "^prefill" "$OUT/.bench" |
      awk -v k="d$hd fp8st" '{printf "  %-10s %-22s %10s us %8s GB/s %8s GFLOP/s\n", k, $1" "$2, $3, $4, $6}' >>"$SUMMARY"
  done
  for cfg in ${FP8_CONFIGS:-}; do
    say "bench decode --graph --kv-dtype fp8 --config $cfg"
    timeout 120 $CLI bench --backend cuda --cases "$dc" --graph --kv-dtype fp8 --config "$cfg" >"$OUT/.bench" 2>&1
    cat "$OUT/.bench" >>"$LOG"
    grep -E "^decode" "$OUT/.bench" | awk -v c="$cfg" '{printf "  %-14s %-22s %10s us %8s GB/s\n", c, $1" "$2, $3, $4}' >>"$SUMMARY"
  done
fi

build_tune() { # the tune rows of src/choose/configs.h (-DANYATTN_GPU_CONFIGS_TUNING) live in a second build
  say "build-tune (sm_90a, tuning config table)"
  cmake -S . -B build-tune -DCMAKE_BUILD_TYPE=Release "-DANYATTN_CUDA_GENCODE=$GENCODE" \
    -DCMAKE_CUDA_FLAGS=-DANYATTN_GPU_CONFIGS_TUNING -DANYATTN_TESTS=OFF >>"$LOG" 2>&1 &&
    cmake --build build-tune -j16 --target anyattn_cli >>"$LOG" 2>&1
}

if has sweep; then
  SWEEP_CLI=$CLI
  if build_tune; then
    SWEEP_CLI=build-tune/anyattn
  else
    note "build-tune: FAILED, sweeping the main table"
  fi
  [ -n "${SWEEP:-}" ] || SWEEP=$($SWEEP_CLI info | awk '/^  config /{print $2}')
  for item in $SWEEP; do # "cfg" (SWEEP_WORKLOADS) or "cfg@workload"
    cfg=${item%@*}
    ws=${SWEEP_WORKLOADS:-decode prefill}
    [[ $item == *@* ]] && ws=${item#*@}
    for w in $ws; do
      say "sweep $w --config $cfg"
      timeout 120 $SWEEP_CLI bench --backend cuda --workload "$w" --config "$cfg" --iters ${SWEEP_ITERS:-10} \
        >"$OUT/.bench" 2>&1
      cat "$OUT/.bench" >>"$LOG"
      grep -E "^(decode|prefill|mixed)" "$OUT/.bench" |
        awk -v c="$cfg" '{printf "  %-12s %-22s %10s us %8s GB/s %8s GFLOP/s\n", c, $1" "$2, $3, $4, $6}' >>"$SUMMARY"
    done
  done
fi

if has peers; then
  say "peers.py"
  PYTHONUNBUFFERED=1 timeout 240 python3 bench/peers.py --out "$OUT" ${PEERS_ARGS:-} >"$OUT/.peers" 2>&1
  rc=$?
  cat "$OUT/.peers" >>"$LOG"
  note "peers: rc=$rc"
  sed -n '/^peer /,$p' "$OUT/.peers" >>"$SUMMARY"
fi
if has ibm; then
  say "bench ibm"
  timeout 240 $CLI bench --backend cuda --workload ibm --json "$OUT/ibm.json" >"$OUT/.bench" 2>&1
  rc=$?
  cat "$OUT/.bench" >>"$LOG"
  n=$(grep -c "^ibm" "$OUT/.bench")
  tot=$(awk '/^ibm/{s+=$5} END{printf "%.0f", s}' "$OUT/.bench")
  note "bench ibm: rc=$rc, $n cases, sum of medians $tot us"
fi
# The sweep CSV's header has its date and device; a sidecar adds commit and command.
meta_json() { # $1: file, $2: command
  {
    printf '{'
    [ -n "$ANYATTN_COMMIT" ] && printf '"commit": "%s", ' "$ANYATTN_COMMIT"
    printf '"command": "%s"}\n' "$2"
  } >"$1"
}
# tune: the main table (TUNE_GRIDS, default "ibm"; "full ibm" fits on the
# full grid and checks on the IBM one); tunex: the candidate table (build-tune).
if has tune; then
  for g in ${TUNE_GRIDS:-ibm}; do
    say "tune --grid $g (sweep every candidate, fit a tree)"
    cmd="anyattn tune --backend cuda --grid $g --out h200_tune_$g.csv --name h200 --iters ${TUNE_ITERS:-10}"
    timeout ${TUNE_TIMEOUT:-420} $CLI tune --backend cuda --grid $g --out "$OUT/h200_tune_$g.csv" --name h200 \
      --iters ${TUNE_ITERS:-10} >"$OUT/tune_$g.txt" 2>"$OUT/tune_progress_$g.txt"
    rc=$?
    meta_json "$OUT/h200_tune_$g.meta.json" "$cmd"
    cat "$OUT/tune_$g.txt" >>"$LOG"
    note "tune $g: rc=$rc"
    sed 's/^/  /' "$OUT/tune_$g.txt" >>"$SUMMARY"
  done
fi
# decsweep: the decode sweeps the committed tree is fitted on, again (DECSWEEP_SHAPES
# "HD:KV ...", default all seven; d128 over a 16-bit cache as --grid full-decode into
# h200_tune_full_decode.csv, the others as --grid decode into the names of
# bench/results/h200), then `anyattn fit --depth ${DECSWEEP_DEPTH:-11}` on the committed full sweep with
# them (a shape not swept here: its committed file) into $OUT/fit/tree_h200.{json,h},
# and the scores of that tree and of the committed one on every sweep of the list.
if has decsweep; then
  F=$OUT/fit
  mkdir -p "$F"
  cp bench/results/h200/h200_tune_*.csv "$F/"
  for sh in ${DECSWEEP_SHAPES:-128:as-q 64:as-q 80:as-q 96:as-q 96:fp8 128:fp8 192:fp8}; do
    hd=${sh%%:*} kv=${sh#*:}
    g=decode f=h200_tune_decode_d${hd}_kv_$kv.csv
    [ "$hd:$kv" = "128:as-q" ] && g=full-decode f=h200_tune_full_decode.csv
    say "tune --grid $g --head-dim $hd --kv-dtype $kv"
    cmd="anyattn tune --backend cuda --grid $g --head-dim $hd --kv-dtype $kv --out $f --name h200 --iters ${TUNE_ITERS:-10}"
    timeout ${TUNE_TIMEOUT:-420} $CLI tune --backend cuda --grid $g --head-dim "$hd" --kv-dtype "$kv" --out "$F/$f" \
      --name h200 --iters ${TUNE_ITERS:-10} >>"$LOG" 2>"$OUT/decsweep_progress.txt"
    note "tune $g d$hd $kv: rc=$?"
    meta_json "$F/${f%.csv}.meta.json" "$cmd"
    rm -f "$F/${f%.csv}.json" "$F/${f%.csv}.h" # the one-sweep trees tune fits beside
  done
  list=h200_tune_full.csv
  [ -f "$F/h200_tune_full_decode.csv" ] && list=$list,h200_tune_full_decode.csv
  for f in "$F"/h200_tune_decode_*.csv; do list=$list,$(basename "$f"); done
  cli=$PWD/$CLI
  (cd "$F" && $cli fit --in "$list" --name h200 --depth ${DECSWEEP_DEPTH:-11}) >>"$LOG" 2>&1
  note "fit --in $list --depth ${DECSWEEP_DEPTH:-11}: rc=$?"
  for f in ${list//,/ }; do
    note "  $f: committed tree $(cd "$F" && $cli fit --in "$f" --eval 2>&1 | grep -o '[0-9]* of [0-9]* cells.*best candidate'), refit $(cd "$F" && ANYATTN_TREE=$F/tree_h200.json $cli fit --in "$f" --eval 2>&1 | grep -o '[0-9]* of [0-9]* cells.*best candidate')"
  done
fi
if has tunex && build_tune; then
  say "tune --grid ${TUNEX_GRID:-ibm} on the candidate table"
  timeout ${TUNE_TIMEOUT:-420} build-tune/anyattn tune --backend cuda --grid ${TUNEX_GRID:-ibm} \
    --out "$OUT/h200_tunex.csv" --name h200x --iters ${TUNE_ITERS:-10} >"$OUT/tunex.txt" 2>"$OUT/tunex_progress.txt"
  rc=$?
  cat "$OUT/tunex.txt" >>"$LOG"
  note "tunex: rc=$rc"
  sed 's/^/  /' "$OUT/tunex.txt" >>"$SUMMARY"
fi
rm -f "$OUT/.san" "$OUT/.bench" "$OUT/.peers"
# The device tool returns at most 8 files: keep log.txt and bundle the rest.
(cd "$OUT" && ls | grep -v -e '^log.txt$' -e '^results.tgz$' -e '^\.summary$' >.files &&
  tar czf results.tgz -T .files && xargs rm -rf <.files; rm -f .files)

echo
echo "==== summary ===="
cat "$SUMMARY"
rm -f "$SUMMARY"
