/* tune.h: `anyattn tune` (offline sweep + tree fit) and `anyattn fit`. */
#ifndef ANYATTN_TOOLS_TUNE_H
#define ANYATTN_TOOLS_TUNE_H

#include "anyattn.h"

typedef struct {
  anyattn_backend backend;
  int device;
  const char *grid; /* "ibm", "full", "decode" (the full grid's all-decode cells, numbered
                     * 0 up) or "full-decode" (the same cells under their full-grid numbers) */
  const char *out;  /* the raw CSV; the tree goes beside it as .json and .h */
  const char *name; /* C identifier for the tree, e.g. "h200" */
  int iters;        /* timed calls per (cell, config); 0: default */
  int depth;        /* tree depth limit; 0: 4 */
  int cell_from, cell_to; /* sweep grid cells [cell_from, cell_to) only; cell_to 0: to the end */
  anyattn_dtype dtype;
  anyattn_kv_dtype kv_dtype; /* the caches' storage */
  int head_dim;              /* 0: BENCH_DEFAULT_D */
} tune_options;

int tune_main(const tune_options *opt);
/* Fits the tree of a sweep CSV; provenance NULL: derived from the file. */
int fit_main(const char *csv_path, int depth, const char *name, const char *provenance);
/* `anyattn fit --in FILE.csv --eval`: the library's tree for the sweep's device, scored on the sweep. */
int eval_main(const char *csv_path);

#endif
