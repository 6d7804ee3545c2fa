/* bench.h: the bench runner (bench.c) over the batches of bench_cases.h. */
#ifndef ANYATTN_TOOLS_BENCH_H
#define ANYATTN_TOOLS_BENCH_H

#include "anyattn.h"
#include "bench_cases.h"

typedef struct {
  anyattn_backend backend;
  int device;
  const char *workload;  /* default, decode, prefill, mixed, ibm, e2e-llama8b(-step), cp-prefill, cp-decode */
  const char *json_path; /* NULL: no JSON */
  const char *config;    /* NULL: the library chooses */
  int graph;             /* time CUDA-graph replays */
  int iters;             /* timed repetitions (0: backend default) */
  const char *cases;     /* NULL: the workload's list; else "BxC,pBxL,...": decode / prefill cases */
  const char *filter;    /* NULL, or only the cases whose name contains it */
  int list;              /* 1: print the cases (JSON lines with their lengths), time nothing */
  int no_flush;          /* 1: no L2 flush between timed calls (back-to-back, warm metadata) */
  int max_context;       /* > 0: plan with this limits.max_context (a serving plan made once) */
  int stage_kv;          /* limits.stage_kv_tokens of every case's plan (fp8 caches: prefill staged to 16-bit) */
  anyattn_dtype dtype;
  anyattn_kv_dtype kv_dtype; /* the caches' storage: AS_Q (0), or fp8 (1 byte per K/V element) */
  anyattn_prior_writes prior_writes; /* every call's batch->prior_writes */
  int hints;             /* the batch's host hints: BENCH_HINTS_* */
  double cutoff_us;      /* > 0: a warm-up call slower than this ends the timing (tune's pruning) */
  int ranks_per_node;    /* cp-* workloads: ranks of one node (0: the ranks sharing a host) */
  int head_dim;          /* 0: BENCH_DEFAULT_D; else the shape's head dim (not the cp-* workloads) */
  struct aa_cpu_ceilings *ceilings; /* CPU: sampled beside every timed call (ceilings.h); NULL: not */
} bench_options;

/* bench --hints: all (max_q_len, max_kv_len, sum_kv_len), max (the two
 * bounds vLLM's calling convention gives), none. */
enum { BENCH_HINTS_ALL = 0, BENCH_HINTS_MAX = 1, BENCH_HINTS_NONE = 2 };
typedef struct {
  double us;        /* median microseconds per call */
  double kv_bytes;  /* K and V bytes of the keys each sequence holds (1 per element for fp8) */
  double flops;     /* 4 * Hq * D per visible (query, key) pair */
  int verified;     /* sampled output rows vs a double-precision recomputation: 1 ok, 0 wrong */
  int pruned;       /* 1: the second warm-up call passed opt->cutoff_us; us is its time */
  char config[192]; /* the plan's line (anyattn_plan_describe) */
  char choice[128]; /* what run launches for this batch (anyattn_run_describe) */
  /* With opt->ceilings: the ceilings sampled before each timed call (their
   * medians) and the medians over the calls of each call's figure as a
   * percentage of the ceilings sampled before it. */
  int ceil_calls; /* calls with ceilings beside them; 0: none */
  double ceil_read_gbs, ceil_paged_gbs, ceil_gflops;
  double pct_bw, pct_paged, pct_peak;
} bench_result;

/* Times one case (plan from exact limits, random data, shuffled pages),
 * median of opt->iters calls, and checks sampled rows. `chunk` holds random
 * values the inputs are tiled with; `flush_buf` (GPU) is written between calls
 * to flush L2. With opt->ceilings (CPU) each timed call comes after one
 * sample of the ceilings and an untimed call that warms the caches again, as
 * the call before it left them. 0 on success. */
int bench_run_case(const bench_options *opt, anyattn_context *ctx, const bench_case *c, const void *chunk,
                   size_t chunk_bytes, void *flush_buf, size_t flush_bytes, bench_result *r);

/* Returns 0 on success, 1 on a runtime failure (message printed), 2 on a bad
 * workload name or a cp-* one (those run through cp_bench_main, cp_bench.h). */
int bench_main(const bench_options *opt);

#endif
