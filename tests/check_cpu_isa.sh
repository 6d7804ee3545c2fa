#!/bin/sh
# check_cpu_isa.sh CLI TEST_MM16 ISA: the quick conformance suite with the CPU
# tiled path's products forced to ISA (ANYATTN_CPU_ISA); skipped (77) where
# this build or CPU does not run it.
"$2" --supported "$3" || exit 77
ANYATTN_CPU_ISA="$3" exec "$1" check --backend cpu --quick
