/* bench.h: the named workloads every backend shares, and the bench runner. */
#ifndef ANYATTN_TOOLS_BENCH_H
#define ANYATTN_TOOLS_BENCH_H

#include "anyattn.h"

typedef struct {
  anyattn_backend backend;
  int device;
  const char *workload;  /* default, decode, prefill, mixed, ibm */
  const char *json_path; /* NULL: no JSON */
  const char *config;    /* NULL: the library chooses */
  int graph;             /* time CUDA-graph replays */
  int iters;             /* timed repetitions (0: backend default) */
  anyattn_dtype dtype;
} bench_options;

/* Returns 0 on success, 1 on a runtime failure (message printed), 2 on a bad
 * workload name. */
int bench_main(const bench_options *opt);
/* 1 when `name` is a known workload. */
int bench_workload_known(const char *name);
const char *bench_workload_names(void);

#endif
