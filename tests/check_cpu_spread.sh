#!/bin/sh
# check_cpu_spread.sh CLI: the quick conformance suite with the fused decode's
# prefetch reading 2 and then 4 blocks' pages at once (ANYATTN_CPU_DECODE_SPREAD;
# by default only Intel CPUs take 4, and only for runs larger than their L2
# caches, which no quick case is), and an unknown value refused at plan
# creation with a message that names the variable.
set -e
for s in 2 4; do
  echo "ANYATTN_CPU_DECODE_SPREAD=$s"
  ANYATTN_CPU_DECODE_SPREAD=$s "$1" check --backend cpu --quick
done
out=$(ANYATTN_CPU_DECODE_SPREAD=3 "$1" check --backend cpu --quick 2>&1) && {
  echo "check_cpu_spread: ANYATTN_CPU_DECODE_SPREAD=3 passed the suite instead of failing its plans"
  exit 1
}
echo "$out" | grep -q "UNSUPPORTED_CONFIG: ANYATTN_CPU_DECODE_SPREAD='3' is not one of auto, 1, 2, 4" || {
  printf 'check_cpu_spread: ANYATTN_CPU_DECODE_SPREAD=3 failed without naming the variable:\n%s\n' "$out"
  exit 1
}
echo "ANYATTN_CPU_DECODE_SPREAD=3 refused at plan creation"
