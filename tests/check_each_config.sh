#!/bin/sh
# check_each_config.sh: the quick conformance suite once per GPU tile config.
# The library's tree picks configs by batch shape, so the suite alone never
# runs some of them (the 128-row prefill tile, say) on its small cases; a
# one-leaf tree file (ANYATTN_TREE) sends every case of a run to one config,
# its split-KV segments included. Usage: check_each_config.sh path/to/anyattn cuda|hip
# Exit 0: every config passed; 77: no device (skipped); else the failures.
cli="$1"
backend="${2:-cuda}"
if [ ! -x "$cli" ]; then
  echo "check_each_config: '$cli' is not an executable" >&2
  exit 1
fi
configs=$("$cli" info | awk -v b="$backend" '/^backend /{on = ($2 == b)} on && /^  config /{print $2}')
if [ -z "$configs" ]; then
  echo "check_each_config: backend $backend lists no configs" >&2
  exit 1
fi
tmp="${TMPDIR:-/tmp}/anyattn_each_config.$$"
fails=0
for c in $configs; do
  cat >"$tmp.json" <<EOF
{
  "device": "any",
  "family": "any",
  "tuned": 0,
  "provenance": "tests/check_each_config.sh: every batch to $c",
  "legend": "one leaf",
  "nodes": [
    {"config": "$c", "splits": 0}
  ]
}
EOF
  # A tree file that fails to load leaves the compiled trees in charge: make
  # sure this one is in use (info names it only where a device is present).
  sel=$(ANYATTN_TREE="$tmp.json" "$cli" info | awk -v b="$backend" '/^backend /{on = ($2 == b)} on && /config selection/')
  case "$sel" in
  *"loaded"*) ;;
  "")
    echo "check_each_config: no $backend device, skipped"
    rm -f "$tmp.json"
    exit 77
    ;;
  *)
    echo "check_each_config: the one-leaf tree for $c was not loaded: $sel" >&2
    rm -f "$tmp.json"
    exit 1
    ;;
  esac
  ANYATTN_TREE="$tmp.json" "$cli" check --backend "$backend" --quick >"$tmp.out" 2>&1
  rc=$?
  echo "config $c: rc=$rc, $(tail -1 "$tmp.out")"
  if [ "$rc" -ne 0 ]; then
    grep -E "^FAIL" "$tmp.out" | head -20
    fails=$((fails + 1))
  fi
done
rm -f "$tmp.json" "$tmp.out"
[ "$fails" -eq 0 ]
