#!/usr/bin/env bash
# sanitize_tile.sh: one GPU tile config under compute-sanitizer. A one-leaf
# tree file (ANYATTN_TREE) sends every case of the quick suite to config C,
# which the library's own tree would give only some shapes; memcheck and
# racecheck (TOOLS, e.g. "synccheck" too) then run `anyattn check --quick` on
# the cases matching FILTER.
# With OUT set, each tool's whole report goes to $OUT/sanitize_C FILTER TOOL.txt.
#   bash dev/sanitize_tile.sh m128n128w8s2 _d128_   (after the build step)
set -u
cd "$(dirname "$0")/.."
c=${1:?config name}
filter=${2:-_d128_}
tree=$(mktemp /tmp/aa_tree_XXXX.json)
printf '{"device": "any", "family": "any", "tuned": 0, "provenance": "sanitize_tile.sh", "legend": "one leaf",\n "nodes": [{"config": "%s", "splits": 0}]}\n' "$c" >"$tree"
ANYATTN_TREE=$tree build/anyattn info | sed -n "/^backend cuda/,/^backend hip/p" | grep -E "config selection" | head -1
for tool in ${TOOLS:-memcheck racecheck}; do
  out=$(ANYATTN_TREE=$tree timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 \
    build/anyattn check --backend cuda --quick --filter "$filter" 2>&1)
  rc=$?
  [ -n "${OUT:-}" ] && echo "$out" >"$OUT/sanitize_${c}${filter}${tool}.txt"
  echo "$c $filter $tool: rc=$rc, $(echo "$out" | grep -E 'passed' | tail -1), $(echo "$out" | grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' | tail -1)"
done
rm -f "$tree"
