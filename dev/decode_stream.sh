#!/usr/bin/env bash
# decode_stream.sh: how fast one SM streams a decode item's keys, on the producer's 128-row tile
# and on decode tiles, under graph replay. Unsplit decode batches of B sequences (B x 8 kv heads
# programs, one an SM) at contexts 2048 and 8192: the difference over the 48 extra 128-key tiles
# (or 96 64-key ones) is a tile's time on an SM while B x 8 SMs stream. Then, for the bench's
# page size BENCH_BS (tools/bench_cases.h) of 16 and each of PAGES (a K/V box covers one page's
# rows), the same on the 128-row tile at B = 4, 8, 16 and 63, the library's choice, a prompt and
# the mixed workload. Expects a quick build in build/ with the d128 and d64 bf16 kernels
# (KERNELS="bf16_d128 bf16_d64" STEPS=build bash bench/run_h200.sh).
set -u
cd "$(dirname "$0")/.."
PAGES=${PAGES-"64 128"} # empty: pages of 16 only
CLI=build/anyattn
slope() { # config, head dim, batch sizes
  for b in $3; do
    $CLI bench --backend cuda --graph --config "$1-k1" --head-dim "$2" --cases "${b}x2048,${b}x8192" 2>&1 |
      awk -v c="$1" -v d="$2" -v b="$b" '/^decode/ {t[++n] = $3}
        END {if (n == 2) printf "stream %-13s d%-3s %2d seqs: %7.1f %7.1f us\n", c, d, b, t[1], t[2]
             else printf "stream %-13s d%-3s %2d seqs: failed (not built?)\n", c, d, b}'
  done
}
slope m128n128w8s2 128 "4 8"
slope m128n128w8s2 64 "4 8"
slope m16n128w8s2 128 "4 8"
slope m16n64w4s2 128 "4"
slope m16n64w4s3 128 "4"
run() {
  echo "== page $1"
  $CLI bench --backend cuda --graph --config m128n128w8s2-k1 --cases 4x2048,4x8192,8x2048,8x8192,16x2048,16x8192,63x2048 2>&1 |
    grep -E "^decode" | sed 's/^/tile /'
  $CLI bench --backend cuda --graph --cases 8x2048,8x8192,63x2048,p1x2048 2>&1 | grep -E "^(decode|prefill)" | sed 's/^/library /'
  $CLI bench --backend cuda --graph --workload mixed 2>&1 | grep -E "^mixed"
}
run 16
cp tools/bench_cases.h /tmp/bench_cases.h.orig
trap 'cp /tmp/bench_cases.h.orig tools/bench_cases.h' EXIT
for bs in $PAGES; do
  sed -i "s/BENCH_BS = [0-9]*/BENCH_BS = $bs/" tools/bench_cases.h
  cmake --build build -j16 --target anyattn_cli >/dev/null 2>&1 || { echo "rebuild at page $bs failed"; break; }
  run "$bs"
done
cp /tmp/bench_cases.h.orig tools/bench_cases.h
cmake --build build -j16 --target anyattn_cli >/dev/null 2>&1
