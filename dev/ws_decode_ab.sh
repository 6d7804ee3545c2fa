#!/usr/bin/env bash
# ws_decode_ab.sh: the producer's kernel with its decode items on their own loop
# (ws_decode_item, mainloop_ws.cuh) against the tile's loop (ANYATTN_CUDA_WSDEC=0), in one
# call: conformance with every batch sent to m128n128w8s2 (a one-leaf tree; plain, persistent
# with three blocks, and with the rows out as stores), then graph-replay timings of the mixed
# workload, decode batches forced onto the tile and prefill batches, the modes alternating.
# MODES: the ANYATTN_CUDA_WSDEC values timed (default "1 0"); ENVS: the conformance runs'
# settings (";"-separated; "-": the defaults). A check line gives the summary and the failures
# other than the kernels a quick build leaves out (UNSUPPORTED_CONFIG: counted apart).
# Expects a build in build/ (quick: KERNELS="bf16_d128 bf16_d64" STEPS=build bash
# bench/run_h200.sh). FILTERS: the conformance cases to run (substrings, one run each).
#   ROUNDS=2 bash dev/ws_decode_ab.sh
set -u
cd "$(dirname "$0")/.."
CLI="timeout ${TO:-300} build/anyattn" # TO: seconds a command may take (a hang stops there)
ROUNDS=${ROUNDS:-2}
FILTERS=${FILTERS:-"bf16_d128 bf16_d64"}
MODES=${MODES:-"1 0"}
ENVS=${ENVS:-"-;ANYATTN_CUDA_PERSIST=3;ANYATTN_CUDA_PERSIST=3 ANYATTN_CUDA_O_TMA=0"}
tree=$(mktemp /tmp/aa_tree_XXXX.json)
printf '{"device": "any", "family": "any", "tuned": 0, "provenance": "ws_decode_ab.sh", "legend": "one leaf",\n "nodes": [{"config": "m128n128w8s2", "splits": 0}]}\n' >"$tree"
IFS=';' read -ra envs <<<"$ENVS"
for env in "${envs[@]}"; do
  [ "$env" = - ] && env=
  for f in $FILTERS; do
    out=$(env $env ANYATTN_TREE=$tree $CLI check --backend cuda --filter "$f" 2>&1)
    echo "check m128n128w8s2 ${env:-default} $f: $(grep -c "^FAIL.*UNSUPPORTED_CONFIG" <<<"$out") not built;" \
      "$(grep -E "^FAIL|passed" <<<"$out" | grep -v UNSUPPORTED_CONFIG | cut -c1-300 | tail -4 | tr '\n' ' ')"
  done
done
rm -f "$tree"
bench() { # label, env, args
  env $2 $CLI bench --backend cuda --graph ${@:3} 2>&1 | grep -E "^(mixed|decode|prefill)" | sed "s/^/$1 /"
}
for r in $(seq "$ROUNDS"); do
  for m in $MODES; do
    bench "wsdec=$m" "ANYATTN_CUDA_WSDEC=$m" --workload mixed
    bench "wsdec=$m tile" "ANYATTN_CUDA_WSDEC=$m" --config m128n128w8s2-k1 --cases 4x8192,8x8192,63x2048
    bench "wsdec=$m" "ANYATTN_CUDA_WSDEC=$m" --cases p1x2048,p16x1024,p1x8192
  done
done
