/* cp_bench.h: the context-parallel workloads of `anyattn bench` (cp_bench.c). */
#ifndef ANYATTN_TOOLS_CP_BENCH_H
#define ANYATTN_TOOLS_CP_BENCH_H

#include "bench.h"

/* cp-prefill or cp-decode across the job's processes; 0, 1 (a failure), 2 (bad cases) or 77 (no device). */
int cp_bench_main(const bench_options *o);

#endif
