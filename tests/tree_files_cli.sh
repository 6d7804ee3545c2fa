#!/bin/sh
# tree_files_cli.sh: what a user of the CLI sees when a file is bad. `fit --in`
# on each bad sweep of tests/corpus/sweep: exit 1 and one line on stderr naming
# the line and field; `tune --out /dev/full`: exit 1 and one line, before any
# timing; a bad $ANYATTN_TREE (each bad tree of tests/corpus/tree, a directory,
# a FIFO): one warning line, and `info` says why. Nothing may hang.
#   usage: tree_files_cli.sh path/to/anyattn CORPUS_DIR
cli="$1"
corpus="$2"
if [ ! -x "$cli" ] || [ ! -d "$corpus" ]; then
  echo "usage: tree_files_cli.sh path/to/anyattn CORPUS_DIR" >&2
  exit 2
fi
tmp="${TMPDIR:-/tmp}/anyattn_tree_files_cli.$$"
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
to=""
command -v timeout >/dev/null 2>&1 && to="timeout 60"
fails=0
fail() {
  echo "FAIL $*"
  sed 's/^/  | /' "$tmp/err"
  fails=$((fails + 1))
}

# expect_one_line RC WANT_RC TEXT WHAT: exit code, one stderr line holding TEXT.
expect_one_line() {
  lines=$(wc -l <"$tmp/err" | tr -d ' ')
  if [ "$1" -ne "$2" ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$3" "$tmp/err"; then
    fail "$4: exit $1 (want $2), $lines stderr lines (want 1 holding '$3')"
  else
    echo "PASS $4: $(cat "$tmp/err")"
  fi
}

# ---- sweeps: `anyattn fit --in` ----------------------------------------------------
tab=$(printf '\t')
grep -v '^#' "$corpus/sweep/expect.txt" | while IFS="$tab" read -r file want; do
  [ -n "$file" ] || continue
  cp "$corpus/sweep/$file" "$tmp/$file"
  $to "$cli" fit --in "$tmp/$file" >"$tmp/out" 2>"$tmp/err"
  expect_one_line $? 1 "$want" "fit --in $file"
  [ ! -e "$tmp/${file%.csv}.json" ] || fail "fit --in $file wrote a tree"
done >"$tmp/sweeps.log"
cat "$tmp/sweeps.log"
fails=$((fails + $(grep -c '^FAIL' "$tmp/sweeps.log")))

mkdir "$tmp/dir.csv"
$to "$cli" fit --in "$tmp/dir.csv" >"$tmp/out" 2>"$tmp/err"
expect_one_line $? 1 "is a directory, not a regular file" "fit --in DIRECTORY"
if mkfifo "$tmp/fifo.csv" 2>/dev/null; then
  $to "$cli" fit --in "$tmp/fifo.csv" >"$tmp/out" 2>"$tmp/err"
  expect_one_line $? 1 "is a FIFO, not a regular file" "fit --in FIFO"
fi

# A good sweep fits, and the tree written beside it is what --eval then uses.
cp "$corpus/sweep/ok_ibm_h200.csv" "$tmp/ok.csv"
if ! $to "$cli" fit --in "$tmp/ok.csv" --name ok >"$tmp/out" 2>"$tmp/err" || [ ! -s "$tmp/ok.json" ] ||
  [ ! -s "$tmp/ok.h" ] || [ -s "$tmp/err" ]; then
  fail "fit --in ok.csv: no tree, or messages on stderr"
elif ! ANYATTN_TREE="$tmp/ok.json" $to "$cli" fit --in "$tmp/ok.csv" --eval >"$tmp/out" 2>"$tmp/err" ||
  ! grep -q "within 5%" "$tmp/out" || [ -s "$tmp/err" ]; then
  fail "fit --eval with the fitted tree as \$ANYATTN_TREE"
else
  echo "PASS fit --in ok.csv, then --eval with its tree: $(grep 'within 5%' "$tmp/out")"
fi

# A list of sweeps of two shapes (tune --grid decode at another head dim and an fp8
# cache on the CPU, two cells): the fit reads them as one (each cell also as without the
# mean context), the tree beside the first.
if $to "$cli" tune --backend cpu --grid decode --cells 0:2 --iters 1 --out "$tmp/d128.csv" >"$tmp/out" 2>"$tmp/err" &&
  $to "$cli" tune --backend cpu --grid decode --cells 0:2 --iters 1 --head-dim 80 --kv-dtype fp8 \
    --out "$tmp/d80.csv" >"$tmp/out" 2>"$tmp/err" &&
  grep -q "^cell,.*,group,kv_bytes,mean_kv,config," "$tmp/d80.csv" && grep -q "^0,.*,80,4,1,[0-9.e+]*,cpu," "$tmp/d80.csv" &&
  $to "$cli" fit --in "$tmp/d128.csv,$tmp/d80.csv" --name two >"$tmp/out" 2>"$tmp/err" &&
  grep -q "over 8 cells (4 swept" "$tmp/out" && [ -s "$tmp/tree_two.json" ] && grep -q "fitted from 2 sweeps" "$tmp/tree_two.h"; then
  echo "PASS tune --grid decode at two shapes, fit --in A.csv,B.csv: $(grep 'over 8 cells' "$tmp/out")"
else
  fail "tune --grid decode at two shapes, then fit --in a list"
fi

# tune --grid full-decode sweeps the full grid's all-decode cells (max_q 1) under their
# full-grid numbers, so listed after a full sweep of the same shape its rows take the
# place of those cells' rows: the list fits over the full sweep's cells, none twice.
decode_ids() { grep -v '^#' "$1" | awk -F, 'NR > 1 && $5 == 1 { print $1 }' | sort -un | tr '\n' ' '; }
if $to "$cli" tune --backend cpu --grid full --cells 0:5 --iters 1 --out "$tmp/f.csv" >"$tmp/out" 2>"$tmp/err" &&
  $to "$cli" tune --backend cpu --grid full-decode --cells 0:5 --iters 1 --out "$tmp/fd.csv" >"$tmp/out" 2>"$tmp/err" &&
  grep -q "(3 cells x" "$tmp/out" && [ "$(decode_ids "$tmp/f.csv")" = "2 3 4 " ] &&
  [ "$(decode_ids "$tmp/fd.csv")" = "2 3 4 " ] &&
  [ "$(grep -v '^#' "$tmp/fd.csv" | awk -F, 'NR > 1 && $5 != 1' | wc -l)" -eq 0 ] &&
  $to "$cli" fit --in "$tmp/f.csv,$tmp/fd.csv" --name fd >"$tmp/out" 2>"$tmp/err" && grep -q "over 10 cells (5 swept" "$tmp/out"; then
  echo "PASS tune --grid full-decode: cells $(decode_ids "$tmp/fd.csv")of the full grid, fit --in full,full-decode over 5 cells (10 with their copies without the mean context)"
else
  fail "tune --grid full-decode, then fit --in with the full sweep"
fi

# ---- tune: a full output device fails at once, in one line -----------------------------
if [ -c /dev/full ]; then
  $to "$cli" tune --backend cpu --grid ibm --cells 0:1 --out /dev/full >"$tmp/out" 2>"$tmp/err"
  expect_one_line $? 1 "cannot write --out file '/dev/full'" "tune --out /dev/full"
fi

# ---- $ANYATTN_TREE: one warning line, and info says why -------------------------------
check_env_tree() { # PATH TEXT WHAT
  ANYATTN_TREE="$1" $to "$cli" info >"$tmp/out" 2>"$tmp/err"
  rc=$?
  expect_one_line $rc 0 "anyattn: ignoring \$ANYATTN_TREE: tree file '$1': $2" "ANYATTN_TREE=$3 anyattn info"
  grep -qF "\$ANYATTN_TREE not used: tree file '$1'" "$tmp/out" || fail "ANYATTN_TREE=$3: info does not say why"
}
grep -v '^#' "$corpus/tree/expect.txt" | while IFS="$tab" read -r file status want; do
  [ -n "$file" ] || continue
  check_env_tree "$corpus/tree/$file" "$want" "$file"
done >"$tmp/trees.log"
cat "$tmp/trees.log"
fails=$((fails + $(grep -c '^FAIL' "$tmp/trees.log")))
check_env_tree "$tmp/dir.csv" "is a directory, not a regular file" DIRECTORY
if [ -p "$tmp/fifo.csv" ]; then check_env_tree "$tmp/fifo.csv" "is a FIFO, not a regular file" FIFO; fi
ANYATTN_TREE="$corpus/tree/ok_one_leaf.json" $to "$cli" info >"$tmp/out" 2>"$tmp/err"
if [ $? -ne 0 ] || [ -s "$tmp/err" ] || grep -q "not used" "$tmp/out"; then
  fail "ANYATTN_TREE=ok_one_leaf.json: a good tree gives no warning"
fi

[ "$fails" -eq 0 ] && echo "tree_files_cli: PASS" || echo "tree_files_cli: FAIL ($fails)"
[ "$fails" -eq 0 ]
