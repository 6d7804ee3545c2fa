#!/usr/bin/env bash
# kernel_profile.sh: one launch of the attention kernel under Nsight Compute,
# with warp-state sampling per SASS instruction, for dev/ncu_regions.py. For
# each (tag, bench arguments) in PROFILES it profiles the third launch of the
# kernels matching KERNEL (default attn_tc) in `anyattn bench ... --iters 3`
# and exports the report's details, its stall-reason ratios and its source
# page (SASS with samples and stall reasons per instruction) into $OUT, then
# bundles them into $OUT/profile.tgz (the device tool returns few files).
# Clocks are not locked (--clock-control none), as the benches run.
#
#   OUT=dir PROFILES="d80:--cases p1x8192 --head-dim 80;d128:--cases p1x8192" bash dev/kernel_profile.sh
#   then, here: tar xzf profile.tgz && python3 dev/ncu_regions.py d80_sass.csv --per CYCLES_PER_TILE
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-$PWD/profile-out}
CLI=${CLI:-build/anyattn}
KERNEL=${KERNEL:-attn_tc}
PROFILES=${PROFILES:-"d128:--cases p1x8192"}
mkdir -p "$OUT"
command -v ncu >/dev/null || { echo "kernel_profile: no ncu on PATH"; exit 1; }
test -x "$CLI" || { echo "kernel_profile: $CLI missing (build first, or set CLI)"; exit 1; }
files=()
IFS=';' read -ra items <<<"$PROFILES"
for item in "${items[@]}"; do
  tag=${item%%:*}
  args=${item#*:}
  case $tag in *[!A-Za-z0-9_-]*|'') echo "kernel_profile: bad tag '$tag'"; exit 2 ;; esac
  # shellcheck disable=SC2086 # the bench arguments are words
  ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SourceCounters \
    -k "regex:$KERNEL" --launch-skip 2 --launch-count 1 -f -o "$OUT/$tag" \
    "$CLI" bench --backend cuda $args --iters 3 >"$OUT/${tag}_bench.txt" 2>&1 ||
    { echo "kernel_profile: ncu failed for $tag"; tail -5 "$OUT/${tag}_bench.txt"; continue; }
  ncu -i "$OUT/$tag.ncu-rep" --page details >"$OUT/${tag}_details.txt" 2>&1
  ncu -i "$OUT/$tag.ncu-rep" --page raw --csv 2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
for h, v in zip(rows[0], rows[2] if len(rows) > 2 else []):
    if "issue_stalled" in h or "warp_latency" in h or h.startswith("sm__cycles_elapsed.avg") or "issue_active" in h:
        print(h, v)' >"$OUT/${tag}_stalls.txt"
  ncu -i "$OUT/$tag.ncu-rep" --page source --csv --print-source sass >"$OUT/${tag}_sass.csv" 2>/dev/null
  rm -f "$OUT/$tag.ncu-rep"
  echo "$tag: $(grep -m1 -E '^ *Duration' "$OUT/${tag}_details.txt" | tr -s ' '), $(grep -m1 'Elapsed Cycles' "$OUT/${tag}_details.txt" | tr -s ' ')"
  files+=("${tag}_details.txt" "${tag}_stalls.txt" "${tag}_sass.csv" "${tag}_bench.txt")
done
[ ${#files[@]} -gt 0 ] && (cd "$OUT" && tar czf profile.tgz "${files[@]}" && rm -f "${files[@]}")
