#!/usr/bin/env bash
# headdim_configs.sh: cases at several head dims, the library's choice beside
# forced configs, one row per (head dim, config, case): us per call (median,
# stream launches) and TFLOP/s. Configs that do not fit a head dim report the
# plan's error instead.
#   OUT=dir HDS="192 256" CONFIGS="m64n64w4s2 m128n64w8s2" CASES=p1x8192,p4x4096 \
#     bash dev/headdim_configs.sh        (after run_h200.sh's build step)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/headdim-out}
mkdir -p "$OUT"
CASES=${CASES:-p1x2048,p1x8192,p4x4096}
HDS=${HDS:-"128 192 256"}
CONFIGS=${CONFIGS:-"m64n64w4s2 m128n64w8s2 m128n128w8s2"}
EXTRA=${EXTRA:-}
CLI=build/anyattn
for hd in $HDS; do
  for c in library $CONFIGS; do
    f="$OUT/hd${hd}_$c.txt"
    if [ "$c" = library ]; then args=(); else args=(--config "$c"); fi
    # shellcheck disable=SC2086
    $CLI bench --backend cuda --cases "$CASES" --head-dim "$hd" "${args[@]}" $EXTRA >"$f" 2>&1 ||
      { echo "d$hd $c: failed: $(grep -m1 -iE 'error|unsupported|fail' "$f")"; continue; }
    awk -v l="d$hd $c" '/^(prefill|decode) /{printf "%-24s %-16s %10s us %8s TFLOP/s  %s\n", l, $2, $3, $6/1000, $8}' "$f"
  done
done
