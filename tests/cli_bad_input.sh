#!/bin/sh
# cli_bad_input.sh: the CLI's command-line contract. Bad input: exit code 2 and
# exactly one line on stderr; help and version: exit 0 on stdout; no argument:
# the usage on stderr and exit 2; a backend without a device: exit 77.
# Usage: cli_bad_input.sh path/to/anyattn [hip-built]
#   hip-built: libanyattn_hip was built beside the CLI (`info` must say so)
cli="$1"
hip_built="$2"
if [ ! -x "$cli" ]; then
  echo "cli_bad_input: '$cli' is not an executable" >&2
  exit 1
fi
tmp="${TMPDIR:-/tmp}/anyattn_cli_bad_input.$$"
fails=0

fail() {
  echo "FAIL anyattn $*"
  sed 's/^/  | /' "$tmp.err"
  fails=$((fails + 1))
}

# expect_error TEXT ARGS...: exit 2, one line on stderr containing TEXT ("" any).
expect_error() {
  want="$1"
  shift
  "$cli" "$@" >"$tmp.out" 2>"$tmp.err"
  rc=$?
  lines=$(wc -l <"$tmp.err" | tr -d ' ')
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ]; then
    fail "$*: exit $rc (want 2), $lines stderr lines (want 1):"
  elif ! grep -qF -- "$want" "$tmp.err"; then
    fail "$*: the message does not name '$want':"
  else
    echo "PASS anyattn $*: $(cat "$tmp.err")"
  fi
}
expect_usage_error() { expect_error "" "$@"; }

# expect_exit CODE ARGS...: exit CODE with one line on stderr.
expect_exit() {
  want="$1"
  shift
  "$cli" "$@" >"$tmp.out" 2>"$tmp.err"
  rc=$?
  lines=$(wc -l <"$tmp.err" | tr -d ' ')
  if [ "$rc" -ne "$want" ] || [ "$lines" -ne 1 ]; then
    fail "$*: exit $rc (want $want), $lines stderr lines (want 1):"
  else
    echo "PASS anyattn $*: exit $rc: $(cat "$tmp.err")"
  fi
}

# expect_stdout FIRST-LINE ARGS...: exit 0, nothing on stderr, stdout opening with FIRST-LINE.
expect_stdout() {
  want="$1"
  shift
  "$cli" "$@" >"$tmp.out" 2>"$tmp.err"
  rc=$?
  first=$(head -n 1 "$tmp.out")
  case "$first" in
    "$want"*) ok=1 ;;
    *) ok=0 ;;
  esac
  if [ "$rc" -ne 0 ] || [ -s "$tmp.err" ] || [ "$ok" -ne 1 ]; then
    fail "$*: exit $rc (want 0), stdout opens with '$first' (want '$want'), stderr:"
  else
    echo "PASS anyattn $*: $first"
  fi
}

# Unknown commands, options and values.
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
expect_usage_error bench --stage-kv -1
expect_usage_error bench --stage-kv 536870913
expect_error "unknown --kv-dtype 'fp4'" bench --kv-dtype fp4
expect_error "unknown --prior-writes 'some'" bench --prior-writes some
expect_error "--kv-dtype fp8_e4m3 needs --dtype bf16 or f16" bench --backend cpu --kv-dtype fp8 --dtype f32
expect_error "--kv-dtype: the cp-prefill workload" bench --backend cpu --workload cp-prefill --kv-dtype fp8_e4m3fnuz
expect_error "workload e2e-llama8b needs a GPU backend" bench --backend cpu --workload e2e-llama8b
expect_error "workload e2e-llama8b-step needs a GPU backend" bench --backend cpu --workload e2e-llama8b-step
expect_usage_error fit --eval
expect_usage_error tune --out x.csv --cells 9:5
expect_usage_error tune --out x.csv --cells 5
expect_usage_error tune --out x.csv --cells a:b
expect_usage_error tune --out x.csv --cells -1:3
expect_usage_error tune --backend cpu --grid ibm --out "${TMPDIR:-/tmp}/anyattn_cli_cells.$$.csv" --cells 60:61
expect_usage_error fit --in
expect_error "unknown --grid 'dec' (ibm, full, decode, full-decode)" tune --grid dec --out x.csv
expect_error "--cells 0:2 holds no cell of the full grid whose every sequence has q_len 1" tune --backend cpu \
  --grid full-decode --cells 0:2 --out "${TMPDIR:-/tmp}/anyattn_cli_cells.$$.csv"
expect_error "--kv-dtype fp8_e4m3 needs --dtype bf16 or f16" tune --backend cpu --dtype f32 --kv-dtype fp8 --out x.csv
expect_error "--head-dim '0' (1 to 512)" tune --head-dim 0 --out x.csv
expect_usage_error fit --in x.csv --eval yes
expect_error "'--graph'" check --graph
expect_error "needs a value, got option '--iters'" tune --out --iters 5
expect_error "no command 'nosuch'" help nosuch
expect_error "takes no arguments" version extra
# An argument with a newline or other control characters: still one line, escaped.
expect_error "'--x\\x0ay'" check "$(printf -- '--x\ny')"
expect_error "unknown command 'a\\x1b[31mb'" "$(printf 'a\033[31mb')"

# A config the backend does not have: one line before any work, exit 2.
expect_error "--config 'nosuch'" bench --backend cpu --config nosuch
expect_error "--config 'nosuch'" bench --config nosuch

# Context parallelism: the ranks per node and cp-model's links.
expect_error "--ranks-per-node '0' (1 to 4096)" bench --workload cp-prefill --ranks-per-node 0
expect_error "--ranks-per-node '4097'" bench --workload cp-prefill --ranks-per-node 4097
expect_error "--intra-gbs '0.01'" cp-model --intra-gbs 0.01
expect_error "--inter-gbs '1e3'" cp-model --inter-gbs 1e3
expect_error "--inter-gbs '4..5'" cp-model --inter-gbs 4..5
expect_error "--gpus-per-node '0'" cp-model --gpus-per-node 0
expect_error "'cp-model' takes no option '--iters'" cp-model --iters 3

# Numbers are decimal: 010 is ten, 08 is eight, 0x10 is no number (each case
# ends in an error, so that a wrong reading does no work either).
expect_error "--iters '0200000' (1 to 100000)" bench --iters 0200000 --config nosuch
expect_error "--config 'nosuch'" bench --iters 08 --config nosuch
expect_error "--iters '0x10'" bench --iters 0x10 --config nosuch
expect_error "--depth '017' (1 to 16)" fit --depth 017
expect_error "needs --in" fit --depth 08
expect_error "--device ' 1' (0 to 1023)" check --device " 1" --nosuch

# Seeds: 1 to 2^64-1, decimal or 0x hex; out of range is refused, not wrapped
# (the filter matches nothing: a seed taken by mistake costs no suite).
expect_error "--seed '0' (1 to 18446744073709551615" check --seed 0 --filter no-such-case
expect_error "--seed '-1' (1 to 18446744073709551615" check --seed -1 --filter no-such-case
expect_error "--seed '18446744073709551616' (1 to 18446744073709551615" check --seed 18446744073709551616 --filter no-such-case
expect_error "--seed '0x10000000000000000'" check --seed 0x10000000000000000 --filter no-such-case
expect_error "--seed '010x'" check --seed 010x --filter no-such-case
expect_error "'--nosuch'" check --seed 18446744073709551615 --nosuch
expect_error "'--nosuch'" check --seed 0x38d2c4a2 --nosuch

# A backend without a device (HIP is never linked into this CLI): exit 77, one line.
expect_exit 77 bench --backend hip
expect_exit 77 tune --backend hip --out "${TMPDIR:-/tmp}/anyattn_cli_hip.$$.csv"

# Help and version on stdout, exit 0.
expect_stdout "anyattn " --version
expect_stdout "anyattn " version
expect_stdout "usage: anyattn <command>" help
expect_stdout "usage: anyattn <command>" --help
for cmd in info check bench tune fit cp-model version help; do
  expect_stdout "usage: anyattn $cmd" help "$cmd"
done
for cmd in info check bench tune fit cp-model version; do
  expect_stdout "usage: anyattn $cmd" "$cmd" --help
  expect_stdout "usage: anyattn $cmd" "$cmd" -h
done
expect_stdout "usage: anyattn bench" bench --iters 5 --help
expect_stdout "usage: anyattn check" check --filter x -h
if "$cli" help | grep -q "77 no device" && "$cli" help | grep -q "2 bad command line"; then
  echo "PASS anyattn help: lists the exit codes"
else
  echo "FAIL anyattn help: does not list the exit codes (2 bad command line, 77 no device)"
  fails=$((fails + 1))
fi

# No argument: the usage on stderr, exit 2.
"$cli" >"$tmp.out" 2>"$tmp.err"
rc=$?
if [ "$rc" -ne 2 ] || [ -s "$tmp.out" ] || ! grep -q "^usage: anyattn" "$tmp.err"; then
  fail ": exit $rc (want 2), usage on stderr (want) and stdout $(wc -c <"$tmp.out") bytes (want 0):"
else
  echo "PASS anyattn: exit 2, usage on stderr"
fi

# `info` names HIP as built (in its own library) when it is.
"$cli" info >"$tmp.out" 2>"$tmp.err"
hip_line=$(grep "^backend hip" "$tmp.out")
if [ -n "$hip_built" ]; then want_hip="built as libanyattn_hip"; else want_hip="not compiled in"; fi
case "$hip_line" in
  *"$want_hip"*) echo "PASS anyattn info: $hip_line" ;;
  *) fail "info: '$hip_line' (want '$want_hip')" ;;
esac

rm -f "$tmp.out" "$tmp.err"
[ "$fails" -eq 0 ]
