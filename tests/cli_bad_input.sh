#!/bin/sh
# cli_bad_input.sh: the CLI must reject bad input with exit code 2 and exactly
# one line on stderr. Usage: cli_bad_input.sh path/to/anyattn
cli="$1"
if [ ! -x "$cli" ]; then
  echo "cli_bad_input: '$cli' is not an executable" >&2
  exit 1
fi
tmp="${TMPDIR:-/tmp}/anyattn_cli_bad_input.$$"
fails=0

expect_usage_error() {
  "$cli" "$@" >"$tmp.out" 2>"$tmp.err"
  rc=$?
  lines=$(wc -l <"$tmp.err" | tr -d ' ')
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ]; then
    echo "FAIL anyattn $*: exit $rc (want 2), $lines stderr lines (want 1):"
    sed 's/^/  | /' "$tmp.err"
    fails=$((fails + 1))
  else
    echo "PASS anyattn $*: $(cat "$tmp.err")"
  fi
}

expect_usage_error nosuchcommand
expect_usage_error check --nosuchflag
expect_usage_error check --backend nosuch
expect_usage_error check --backend
expect_usage_error check --seed
expect_usage_error check --filter
expect_usage_error bench --workload nosuch
expect_usage_error bench --workload
expect_usage_error info --nosuchflag
expect_usage_error bench --cases 1x
expect_usage_error bench --cases 0x512
expect_usage_error bench --cases 1x512,,p2x64
expect_usage_error bench --max-context 0
expect_usage_error fit --eval
expect_usage_error tune --out x.csv --cells 9:5
expect_usage_error tune --out x.csv --cells 5
expect_usage_error tune --out x.csv --cells a:b
expect_usage_error tune --out x.csv --cells -1:3
expect_usage_error tune --backend cpu --grid ibm --out "${TMPDIR:-/tmp}/anyattn_cli_cells.$$.csv" --cells 60:61
expect_usage_error fit --in
expect_usage_error fit --in x.csv --eval yes
rm -f "$tmp.out" "$tmp.err"
[ "$fails" -eq 0 ]
