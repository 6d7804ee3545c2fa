/* tune.c: `anyattn tune`. Sweeps every config of the backend's table over a
 * grid of batches, times each (medians, L2 flushed) and checks sampled output
 * rows against a double recomputation, writes the raw table (CSV with device,
 * driver and date), then fits a depth-limited decision tree (tools/tree_fit.c)
 * and writes it as JSON (anyattn_tree_load reads it) and as a C header for
 * src/choose/trees/. Nothing here runs at plan or run time. */
#define _POSIX_C_SOURCE 200809L
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "devmem.h"
#include "tl_util.h"
#include "tree_fit.h"

/* Library internals (hidden in the shared library; the CLI links it statically). */
const aa_tree_node *aa_tree_eval(const aa_tree *t, const double *features);
const aa_tree *aa_tree_for(const char *device_name, const char *family);

/* A candidate whose second warm-up call takes over this many times the
 * cell's best so far is timed no further: the tree never picks it there,
 * and the slow decode tiles on million-token prefills cost seconds a run. */
static const double kPruneFactor = 4.0;

/* The wider grid: more batch sizes, lengths and decode shares than the IBM
 * grid, within a K/V budget per cell. Lengths cycle like the IBM grid's; then
 * equal-length decode batches and chunked-prefill mixes. */
static void add_full_grid(case_list *l, double max_kv_bytes) {
  static const int batches[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  static const int maxlens[] = {128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  static const double shares[] = {0.0, 0.25, 0.5, 0.75, 1.0};
  static const double cycle[] = {1.0, 0.1, 0.4, 0.5, 0.2};
  for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
    for (size_t m = 0; m < sizeof maxlens / sizeof maxlens[0]; m++)
      for (size_t s = 0; s < sizeof shares / sizeof shares[0]; s++) {
        const int n = batches[b], n_decode = (int)floor(shares[s] * n + 0.5);
        int *q = (int *)malloc((size_t)n * sizeof(int)), *kv = (int *)malloc((size_t)n * sizeof(int));
        double bytes = 0;
        for (int i = 0; i < n; i++) {
          kv[i] = (int)(maxlens[m] * cycle[i % 5]);
          if (kv[i] < 1) kv[i] = 1;
          q[i] = i < n_decode ? 1 : kv[i];
          bytes += 4.0 * BENCH_HKV * BENCH_D * kv[i];
        }
        if (bytes <= max_kv_bytes) {
          char name[64];
          snprintf(name, sizeof name, "full b%d L%d d%.2f", n, maxlens[m], shares[s]);
          bench_add_case(l, name, n, q, kv);
        }
        free(q);
        free(kv);
      }
  /* Shapes the cycled lengths above never make: equal-length decode batches up
   * to 32k keys (a refit without them chose badly for 1x32768, 8x4096 and
   * 32x8192: bench/results/h200.md), and chunked prefill among many decodes
   * (the bench's mixed cases and two more). */
  static const int dec_batches[] = {1, 2, 4, 8, 16, 32, 64, 128};
  static const int dec_lens[] = {512, 2048, 4096, 8192, 16384, 32768};
  /* {chunks, chunk tokens, chunk context, decodes, decode context} */
  static const int mixes[][5] = {{1, 2048, 2048, 15, 2048}, {1, 2048, 2048, 63, 2048}, {2, 512, 4096, 126, 4096},
                                 {1, 1024, 8192, 31, 8192}};
  const double row_bytes = 4.0 * BENCH_HKV * BENCH_D; /* K and V of one key */
  char name[64];
  for (size_t b = 0; b < sizeof dec_batches / sizeof dec_batches[0]; b++)
    for (size_t m = 0; m < sizeof dec_lens / sizeof dec_lens[0]; m++) {
      const int n = dec_batches[b], len = dec_lens[m];
      if (row_bytes * len * n > max_kv_bytes) continue;
      snprintf(name, sizeof name, "full dec b%d L%d", n, len);
      bench_add_mixed(l, name, 0, 0, 0, n, len);
    }
  for (size_t k = 0; k < sizeof mixes / sizeof mixes[0]; k++) {
    const int *m = mixes[k];
    if (row_bytes * ((double)m[0] * m[2] + (double)m[3] * m[4]) > max_kv_bytes) continue;
    snprintf(name, sizeof name, "full mix %dx%dc@%d+%dd@%d", m[0], m[1], m[2], m[3], m[4]);
    bench_add_mixed(l, name, m[0], m[1], m[2], m[3], m[4]);
  }
}

/* The features run() will see for this batch (src/choose/tree.h), with the
 * host hints given, as bench gives them. */
static void case_features(const bench_case *c, double *f) {
  int tokens = 0, max_q = 0, max_kv = 0;
  for (int s = 0; s < c->num_seqs; s++) {
    tokens += c->q_lens[s];
    if (c->q_lens[s] > max_q) max_q = c->q_lens[s];
    if (c->kv_lens[s] > max_kv) max_kv = c->kv_lens[s];
  }
  f[AA_F_NUM_SEQS] = c->num_seqs;
  f[AA_F_NUM_TOKENS] = tokens;
  f[AA_F_MEAN_Q] = (double)tokens / c->num_seqs;
  f[AA_F_MAX_Q] = max_q;
  f[AA_F_MAX_KV] = max_kv;
  f[AA_F_HEAD_DIM] = BENCH_D;
  f[AA_F_GROUP] = BENCH_HQ / BENCH_HKV;
}

int tune_main(const tune_options *opt) {
  anyattn_context *ctx = NULL;
  if (anyattn_context_create(opt->backend, opt->device, &ctx) != ANYATTN_STATUS_OK) {
    fprintf(stderr, "anyattn: %s\n", anyattn_last_error());
    return 1;
  }
  const anyattn_backend be = anyattn_context_backend(ctx);
  const int gpu = be != ANYATTN_BACKEND_CPU;
  if (dm_set_device(be, opt->device)) {
    anyattn_context_free(ctx);
    return 1;
  }
  /* Candidates: every row of the config table (the CPU has one tiling), and
   * for the 16-row (decode) rows also fixed KV split counts: config C with
   * splits S runs as "C-kS" (splits 0: the backend decides). A split count
   * only changes decode-like batches (mean q_len <= 8, cuda_backend.cu's
   * split_count), so on other cells those candidates take C's own time. */
  static const int kSplitCands[] = {1, 4, 16};
  const int num_rows = anyattn_config_count(be);
  int num_cands = 0;
  char (*cands)[32] = calloc((size_t)(num_rows > 0 ? num_rows * 4 : 1), sizeof *cands);
  int *cand_splits = calloc((size_t)(num_rows > 0 ? num_rows * 4 : 1), sizeof *cand_splits);
  int *cand_base = calloc((size_t)(num_rows > 0 ? num_rows * 4 : 1), sizeof *cand_base);
  for (int i = 0; i < num_rows; i++) {
    anyattn_config_info ci;
    memset(&ci, 0, sizeof ci);
    ci.struct_size = sizeof ci;
    anyattn_config_get(be, i, &ci);
    const int base = num_cands;
    snprintf(cands[num_cands], sizeof cands[0], "%s", ci.name);
    cand_base[num_cands++] = base;
    if (gpu && ci.block_m == 16)
      for (size_t k = 0; k < sizeof kSplitCands / sizeof kSplitCands[0]; k++) {
        snprintf(cands[num_cands], sizeof cands[0], "%s", ci.name);
        cand_splits[num_cands] = kSplitCands[k];
        cand_base[num_cands++] = base;
      }
  }
  if (num_cands == 0) {
    snprintf(cands[0], sizeof cands[0], "%s", anyattn_backend_name(be));
    num_cands = 1;
  }

  case_list cases = {0};
  if (!strcmp(opt->grid, "ibm")) bench_add_ibm(&cases);
  else add_full_grid(&cases, gpu ? 4e9 : 2e8);
  if (opt->cell_from >= cases.count) { /* --cells past the grid: nothing to sweep, no file */
    fprintf(stderr, "anyattn: --cells from %d: the %s grid has cells 0 to %d (see 'anyattn help')\n", opt->cell_from,
            opt->grid, cases.count - 1);
    free(cands);
    free(cand_splits);
    free(cand_base);
    bench_free_cases(&cases);
    anyattn_context_free(ctx);
    return 2;
  }

  char dev[128] = "", family[32] = "", driver[64] = "";
  anyattn_device_name(be, opt->device, dev, sizeof dev);
  dm_device_info(be, opt->device, family, sizeof family, driver, sizeof driver);
  time_t now = time(NULL);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));

  FILE *csv = fopen(opt->out, "w");
  if (!csv) {
    fprintf(stderr, "anyattn: cannot write --out file '%s'\n", opt->out);
    free(cands);
    free(cand_splits);
    free(cand_base);
    bench_free_cases(&cases);
    anyattn_context_free(ctx);
    return 1;
  }
  const int cell_from = opt->cell_from > 0 ? opt->cell_from : 0;
  const int cell_to = opt->cell_to > 0 && opt->cell_to < cases.count ? opt->cell_to : cases.count;
  fprintf(csv, "# anyattn %s tune: backend %s, grid %s, %d cells x %d candidates (config, KV splits)\n", anyattn_version_string(),
          anyattn_backend_name(be), opt->grid, cases.count, num_cands);
  if (cell_from > 0 || cell_to < cases.count)
    fprintf(csv, "# cells %d to %d of the grid (the rest in other files: concatenate them to fit)\n", cell_from,
            cell_to - 1);
  fprintf(csv, "# pruned: a candidate whose second warm-up call takes over %.0fx the cell's best so far is timed\n"
               "# no further; its us is that call's time\n", kPruneFactor);
  fprintf(csv, "# device: %s\n# family: %s\n# date: %s\n# driver: %s\n", dev, family, date, driver);
  fprintf(csv, "# shape: %d q heads, %d kv heads, head dim %d, %s, block size %d, causal\n", BENCH_HQ, BENCH_HKV,
          BENCH_D, tl_dtype_name(opt->dtype), BENCH_BS);
  fprintf(csv, "cell");
  for (int f = 0; f < AA_F_COUNT; f++) fprintf(csv, ",%s", anyattn_tree_feature_name(f));
  fprintf(csv, ",config,splits,us,ok\n");

  const size_t es = anyattn_dtype_size(opt->dtype);
  const size_t chunk_elems = ((size_t)8 << 20) + 37;
  void *chunk = malloc(chunk_elems * es);
  uint64_t rng = 0x5EEDu;
  tl_fill_normal(opt->dtype, chunk, chunk_elems, 1.0f, &rng);
  const size_t flush_bytes = gpu ? (size_t)256 << 20 : 0;
  void *flush_buf = gpu ? dm_alloc(be, flush_bytes) : NULL;

  bench_options bo;
  memset(&bo, 0, sizeof bo);
  bo.backend = be;
  bo.device = opt->device;
  bo.iters = opt->iters > 0 ? opt->iters : (gpu ? 10 : 3);
  bo.dtype = opt->dtype;
  int failures = 0, pruned = 0;
  const int total = (cell_to - cell_from) * num_cands;
  double *cell_us = calloc((size_t)num_cands, sizeof *cell_us);
  int *cell_ok = calloc((size_t)num_cands, sizeof *cell_ok);
  /* Per cell, before the candidates (GPU): one untimed run of the table's
   * last row (the big prefill tile), whose time seeds the pruning, so the
   * decode tiles on long prefills end after two calls. Then the candidates
   * in table order, as in earlier sweeps. */
  int settle = -1;
  for (int k = 0; k < num_cands; k++)
    if (cand_base[k] == k) settle = k;
  for (int i = cell_from; i < cell_to; i++) {
    const bench_case *c = &cases.items[i];
    double f[AA_F_COUNT];
    case_features(c, f);
    const int decode_like = (f[AA_F_NUM_TOKENS] + f[AA_F_NUM_SEQS] - 1) / f[AA_F_NUM_SEQS] <= 8;
    double best_us = 0.0;
    if (gpu && settle >= 0 && num_cands > 1) {
      bench_result r;
      memset(&r, 0, sizeof r);
      bo.config = cands[settle];
      bo.cutoff_us = 0.0;
      if (bench_run_case(&bo, ctx, c, chunk, chunk_elems * es, flush_buf, flush_bytes, &r) == 0 && r.verified)
        best_us = r.us;
    }
    for (int k = 0; k < num_cands; k++) {
      char name[48];
      if (cand_splits[k] > 0) snprintf(name, sizeof name, "%s-k%d", cands[k], cand_splits[k]);
      else snprintf(name, sizeof name, "%s", cands[k]);
      int ok, rc = 0;
      if (cand_splits[k] > 0 && !decode_like) { /* the split count is not used: C's own run */
        ok = cell_ok[cand_base[k]];
        cell_us[k] = cell_us[cand_base[k]];
      } else {
        bench_result r;
        memset(&r, 0, sizeof r);
        bo.config = num_cands == 1 && !gpu ? NULL : name;
        bo.cutoff_us = best_us > 0 ? kPruneFactor * best_us : 0.0;
        rc = bench_run_case(&bo, ctx, c, chunk, chunk_elems * es, flush_buf, flush_bytes, &r);
        ok = rc == 0 && r.verified;
        failures += !ok && rc == 0; /* wrong output: a kernel bug, not an unsupported config */
        pruned += ok && r.pruned;
        cell_us[k] = ok ? r.us : 0.0;
        if (ok && (best_us == 0.0 || r.us < best_us)) best_us = r.us;
        const int step = (i - cell_from) * num_cands + k + 1;
        if (ok)
          fprintf(stderr, "[%d/%d] %-24s %-18s %10.1f us%s\n", step, total, c->name, name, r.us,
                  r.pruned ? " (pruned)" : "");
        else
          fprintf(stderr, "[%d/%d] %-24s %-18s %s\n", step, total, c->name, name,
                  rc ? "not run (see above)" : "WRONG OUTPUT");
      }
      cell_ok[k] = ok;
      fprintf(csv, "%d", i);
      for (int x = 0; x < AA_F_COUNT; x++) fprintf(csv, ",%.17g", f[x]);
      fprintf(csv, ",%s,%d,%.3f,%d\n", cands[k], cand_splits[k], ok ? cell_us[k] : 0.0, ok);
      fflush(csv);
    }
  }
  fprintf(csv, "# pruned %d of %d runs\n", pruned, total);
  free(cell_us);
  free(cell_ok);
  fclose(csv);
  free(chunk);
  dm_free(be, flush_buf);
  bench_free_cases(&cases);
  anyattn_context_free(ctx);
  free(cands);
  free(cand_splits);
  free(cand_base);
  printf("wrote %s (%d cells x %d candidates, %d runs pruned)\n", opt->out, cell_to - cell_from, num_cands, pruned);
  if (failures) {
    fprintf(stderr, "anyattn: %d runs gave wrong output; no tree written\n", failures);
    return 1;
  }
  char provenance[256];
  snprintf(provenance, sizeof provenance, "anyattn tune --grid %s on %s, %s (%s)", opt->grid, dev, date,
           driver);
  return fit_main(opt->out, opt->depth, opt->name, provenance);
}

int fit_main(const char *csv_path, int depth, const char *name, const char *provenance) {
  tf_table t;
  if (tf_read_csv(csv_path, &t)) return 1;
  enum { MAX_NODES = 511 };
  tf_node nodes[MAX_NODES];
  int n = tf_fit(&t, depth > 0 ? depth : 4, 1, nodes, MAX_NODES);
  if (n < 0) {
    fprintf(stderr, "anyattn: tree too large\n");
    tf_free(&t);
    return 1;
  }
  char prov[512];
  if (provenance) snprintf(prov, sizeof prov, "%s", provenance);
  else snprintf(prov, sizeof prov, "fitted from %s (%s, %s)", csv_path, t.device, t.date);
  /* Outputs sit beside the sweep: X.csv -> X.json and X.h. */
  char base[512], jpath[520], cpath[520];
  snprintf(base, sizeof base, "%s", csv_path);
  char *dot = strrchr(base, '.');
  if (dot && !strcmp(dot, ".csv")) *dot = '\0';
  snprintf(jpath, sizeof jpath, "%s.json", base);
  snprintf(cpath, sizeof cpath, "%s.h", base);
  int rc = tf_write_json(&t, nodes, n, prov, 1, jpath) || tf_write_c(&t, nodes, n, prov, 1, name, cpath);
  printf("tree: %d nodes (depth <= %d) over %d cells x %d configs -> %s, %s\n", n, depth > 0 ? depth : 4,
         t.num_cells, t.num_cands, jpath, cpath);
  tf_report(&t, nodes, stdout);
  /* The cost plan/run pays for a choice: the library's own loader and walk
   * over this tree, timed over every cell of the sweep. */
  if (!rc && anyattn_tree_load(jpath) == ANYATTN_STATUS_OK) {
    const aa_tree *lt = aa_tree_for(NULL, NULL);
    struct timespec t0, t1;
    const int reps = 2000;
    volatile int sink = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < reps; r++)
      for (int i = 0; i < t.num_cells; i++) {
        const aa_tree_node *leaf = aa_tree_eval(lt, t.features + (size_t)i * AA_F_COUNT);
        sink += leaf ? leaf->splits + 1 : 0;
      }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
                      ((double)reps * t.num_cells);
    printf("selection: %.1f ns per tree walk (library code, %d cells x %d reps)\n", ns, t.num_cells, reps);
    anyattn_tree_load(NULL);
    (void)sink;
  }
  tf_free(&t);
  return rc ? 1 : 0;
}

/* Scores the tree the library would use for the sweep's device (the
 * compiled-in one, or the file anyattn_tree_load / ANYATTN_TREE loaded) on
 * that sweep: how a committed tree fares on cells it was not fitted on. */
int eval_main(const char *csv_path) {
  tf_table t;
  if (tf_read_csv(csv_path, &t)) return 1;
  const aa_tree *lt = aa_tree_for(t.device, t.family);
  if (!lt) {
    fprintf(stderr, "anyattn: no tree serves device '%s' (%s)\n", t.device, t.family);
    tf_free(&t);
    return 1;
  }
  int *pick = (int *)malloc(sizeof(int) * (size_t)(t.num_cells > 0 ? t.num_cells : 1));
  if (!pick) {
    tf_free(&t);
    return 1;
  }
  for (int i = 0; i < t.num_cells; i++) {
    const aa_tree_node *leaf = aa_tree_eval(lt, t.features + (size_t)i * AA_F_COUNT);
    pick[i] = leaf ? tf_find_cand(&t, leaf->config, leaf->splits) : -1;
  }
  printf("tree for %s (%s): %s\n", t.device, t.family, lt->provenance);
  printf("sweep: %s (%d cells x %d candidates, %s)\n", csv_path, t.num_cells, t.num_cands, t.date);
  tf_report_picks(&t, pick, stdout);
  free(pick);
  tf_free(&t);
  return 0;
}
