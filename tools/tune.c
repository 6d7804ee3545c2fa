/* tune.c: `anyattn tune`. Sweeps every config of the backend's table over a
 * grid of batches, times each (medians, L2 flushed) and checks sampled output
 * rows against a double recomputation, writes the raw table (CSV with device,
 * driver and date), then fits a depth-limited decision tree (tools/tree_fit.c)
 * and writes it as JSON (anyattn_tree_load reads it) and as a C header for
 * src/choose/trees/; `fit` and `fit --eval` score trees through the public
 * tree API. Nothing here runs at plan or run time. */
#define _POSIX_C_SOURCE 200809L
#include "tune.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "devmem.h"
#include "tl_util.h"
#include "tree_fit.h"

#define NF ANYATTN_TREE_FEATURE_COUNT

/* A candidate whose second warm-up call takes over this many times the
 * cell's best so far is timed no further: the tree never picks it there,
 * and the slow decode tiles on million-token prefills cost seconds a run. */
static const double kPruneFactor = 4.0;

/* The wider grid: more batch sizes, lengths and decode shares than the IBM
 * grid, within a K/V budget per cell. Lengths cycle like the IBM grid's; then
 * equal-length decode batches and chunked-prefill mixes. The budget counts
 * bf16 K/V at head dim 128 whatever the swept shape, so every shape's grid
 * has the same cells (the fitter pairs them: tree_fit.c). decode_only keeps
 * the cells whose every sequence has q_len 1 (--grid decode). */
static int all_decode(const int *q, int n) {
  for (int i = 0; i < n; i++)
    if (q[i] != 1) return 0;
  return 1;
}

static void add_full_grid(case_list *l, double max_kv_bytes, int decode_only) {
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
          bytes += 4.0 * BENCH_HKV * BENCH_DEFAULT_D * kv[i];
        }
        if (bytes <= max_kv_bytes && (!decode_only || all_decode(q, n))) {
          char name[64];
          snprintf(name, sizeof name, "full b%d L%d d%.2f", n, maxlens[m], shares[s]);
          bench_add_case(l, name, n, q, kv);
        }
        free(q);
        free(kv);
      }
  /* Shapes the cycled lengths above never make: equal-length decode batches up
   * to 32k keys (a refit without them chose badly for 1x32768, 8x4096 and
   * 32x8192: docs/design/tuning.md#sweep), and chunked prefill among many decodes
   * (the bench's mixed cases and two more). */
  static const int dec_batches[] = {1, 2, 4, 8, 16, 32, 64, 128};
  static const int dec_lens[] = {512, 2048, 4096, 8192, 16384, 32768};
  /* {chunks, chunk tokens, chunk context, decodes, decode context} */
  static const int mixes[][5] = {{1, 2048, 2048, 15, 2048}, {1, 2048, 2048, 63, 2048}, {2, 512, 4096, 126, 4096},
                                 {1, 1024, 8192, 31, 8192}};
  const double row_bytes = 4.0 * BENCH_HKV * BENCH_DEFAULT_D; /* K and V of one key */
  char name[64];
  for (size_t b = 0; b < sizeof dec_batches / sizeof dec_batches[0]; b++)
    for (size_t m = 0; m < sizeof dec_lens / sizeof dec_lens[0]; m++) {
      const int n = dec_batches[b], len = dec_lens[m];
      if (row_bytes * len * n > max_kv_bytes) continue;
      snprintf(name, sizeof name, "full dec b%d L%d", n, len);
      bench_add_mixed(l, name, 0, 0, 0, n, len);
    }
  for (size_t k = 0; k < sizeof mixes / sizeof mixes[0] && !decode_only; k++) {
    const int *m = mixes[k];
    if (row_bytes * ((double)m[0] * m[2] + (double)m[3] * m[4]) > max_kv_bytes) continue;
    snprintf(name, sizeof name, "full mix %dx%dc@%d+%dd@%d", m[0], m[1], m[2], m[3], m[4]);
    bench_add_mixed(l, name, m[0], m[1], m[2], m[3], m[4]);
  }
}

/* The features run() will see for this batch (anyattn_tree_feature), with the
 * host hints given, as bench gives them. */
static void case_features(const bench_case *c, double kv_bytes, double *f) {
  int tokens = 0, max_q = 0, max_kv = 0;
  double sum_kv = 0;
  for (int s = 0; s < c->num_seqs; s++) {
    tokens += c->q_lens[s];
    sum_kv += c->kv_lens[s];
    if (c->q_lens[s] > max_q) max_q = c->q_lens[s];
    if (c->kv_lens[s] > max_kv) max_kv = c->kv_lens[s];
  }
  f[ANYATTN_TREE_FEATURE_NUM_SEQS] = c->num_seqs;
  f[ANYATTN_TREE_FEATURE_NUM_TOKENS] = tokens;
  f[ANYATTN_TREE_FEATURE_MEAN_Q] = (double)tokens / c->num_seqs;
  f[ANYATTN_TREE_FEATURE_MAX_Q] = max_q;
  f[ANYATTN_TREE_FEATURE_MAX_KV] = max_kv;
  f[ANYATTN_TREE_FEATURE_HEAD_DIM] = BENCH_D;
  f[ANYATTN_TREE_FEATURE_GROUP] = BENCH_HQ / BENCH_HKV;
  f[ANYATTN_TREE_FEATURE_KV_BYTES] = kv_bytes;
  f[ANYATTN_TREE_FEATURE_MEAN_KV] = sum_kv / c->num_seqs;
}

/* Candidates: every row of the config table (the CPU has one tiling), and
 * for the 16-row (decode) rows also fixed KV split counts 1, 4 and 16, for
 * the 64-row rows 2 and 8 (equal-length decode batches of 4 to 16 sequences:
 * docs/design/decode.md#merging-segments): config C with splits S runs as "C-kS"
 * (splits 0: the backend decides). A split count
 * only changes decode-like batches (mean q_len <= 8, src/gpu/policy.c's
 * aa_split_count), so on other cells those candidates take C's own time. */
typedef struct {
  int count;
  char (*config)[32];
  int *splits;
  int *base; /* the candidate of the same config with splits 0 */
} cand_list;

static void cands_free(cand_list *c) {
  free(c->config);
  free(c->splits);
  free(c->base);
  memset(c, 0, sizeof *c);
}

static int cands_build(anyattn_backend be, int gpu, cand_list *c) {
  static const int kSplitCands[] = {1, 4, 16}, kSplitCands64[] = {2, 8};
  const int num_rows = anyattn_config_count(be);
  const size_t cap = (size_t)(num_rows > 0 ? num_rows * 4 : 1);
  memset(c, 0, sizeof *c);
  c->config = calloc(cap, sizeof *c->config);
  c->splits = calloc(cap, sizeof *c->splits);
  c->base = calloc(cap, sizeof *c->base);
  if (!c->config || !c->splits || !c->base) {
    cands_free(c);
    fprintf(stderr, "anyattn: out of memory\n");
    return -1;
  }
  for (int i = 0; i < num_rows; i++) {
    anyattn_config_info ci;
    memset(&ci, 0, sizeof ci);
    ci.struct_size = sizeof ci;
    if (anyattn_config_get(be, i, &ci) != ANYATTN_STATUS_OK) continue;
    const int base = c->count;
    snprintf(c->config[c->count], sizeof c->config[0], "%s", ci.name);
    c->base[c->count++] = base;
    const int *sc = ci.block_m == 16 ? kSplitCands : ci.block_m == 64 ? kSplitCands64 : NULL;
    const size_t nsc = ci.block_m == 16 ? sizeof kSplitCands / sizeof kSplitCands[0]
                                        : sizeof kSplitCands64 / sizeof kSplitCands64[0];
    for (size_t k = 0; gpu && sc && k < nsc; k++) {
      snprintf(c->config[c->count], sizeof c->config[0], "%s", ci.name);
      c->splits[c->count] = sc[k];
      c->base[c->count++] = base;
    }
  }
  if (c->count == 0) {
    snprintf(c->config[0], sizeof c->config[0], "%s", anyattn_backend_name(be));
    c->count = 1;
  }
  return 0;
}

/* A failed write of the sweep: one line; the caller exits non-zero. */
static int csv_failed(const char *path) {
  fprintf(stderr, "anyattn: cannot write --out file '%s' (%s)\n", path, errno ? strerror(errno) : "write error");
  return -1;
}

/* Flushes and asks the stream whether every write so far landed. */
static int csv_check(FILE *csv, const char *path) {
  errno = 0;
  return fflush(csv) != 0 || ferror(csv) ? csv_failed(path) : 0;
}

typedef struct {
  const tune_options *opt;
  anyattn_backend be;
  int gpu;
  anyattn_context *ctx;
  cand_list cands;
  case_list cases;
  int cell_from, cell_to;
  int decode_ids; /* --grid full-decode: the full grid, its all-decode cells only */
  char dev[128], family[32], driver[64], date[32];
  FILE *csv;
} tune_state;

/* Whether cell i is swept: every cell, or under --grid full-decode the cells
 * whose every sequence has q_len 1 (their full-grid numbers kept). */
static int cell_swept(const tune_state *ts, int i) {
  const bench_case *c = &ts->cases.items[i];
  return !ts->decode_ids || all_decode(c->q_lens, c->num_seqs);
}
/* The swept cells among [from, to). */
static int cells_swept(const tune_state *ts, int from, int to) {
  int n = 0;
  for (int i = from; i < to; i++) n += cell_swept(ts, i);
  return n;
}

/* The metadata lines and the header row, flushed: an output that cannot be
 * written fails here, before any timing. */
static int write_csv_header(const tune_state *ts) {
  FILE *csv = ts->csv;
  const tune_options *opt = ts->opt;
  fprintf(csv, "# anyattn %s tune: backend %s, grid %s, %d cells x %d candidates (config, KV splits)\n",
          anyattn_version_string(), anyattn_backend_name(ts->be), opt->grid, cells_swept(ts, 0, ts->cases.count),
          ts->cands.count);
  if (ts->decode_ids)
    fprintf(csv, "# the full grid's cells whose every sequence has q_len 1, numbered as in the full grid\n");
  if (ts->cell_from > 0 || ts->cell_to < ts->cases.count)
    fprintf(csv, "# cells %d to %d of the grid (the rest in other files: concatenate them to fit)\n", ts->cell_from,
            ts->cell_to - 1);
  fprintf(csv, "# pruned: a candidate whose second warm-up call takes over %.0fx the cell's best so far is timed\n"
               "# no further; its us is that call's time\n", kPruneFactor);
  fprintf(csv, "# device: %s\n# family: %s\n# date: %s\n# driver: %s\n", ts->dev, ts->family, ts->date, ts->driver);
  fprintf(csv, "# shape: %d q heads, %d kv heads, head dim %d, %s, %s cache, block size %d, causal\n", BENCH_HQ,
          BENCH_HKV, BENCH_D, tl_dtype_name(opt->dtype),
          opt->kv_dtype == ANYATTN_KV_AS_Q ? tl_dtype_name(opt->dtype) : anyattn_kv_dtype_name(opt->kv_dtype), BENCH_BS);
  fprintf(csv, "cell");
  for (int f = 0; f < NF; f++) fprintf(csv, ",%s", anyattn_tree_feature_name(f));
  fprintf(csv, ",config,splits,us,ok\n");
  return csv_check(csv, opt->out);
}

/* Times every candidate on every cell, one CSV row each (flushed and checked
 * per row). Returns 0, or -1 on a write error; counts wrong outputs and
 * pruned runs. */
static int sweep(tune_state *ts, int *failures, int *pruned) {
  const tune_options *opt = ts->opt;
  const cand_list *cd = &ts->cands;
  const size_t es = anyattn_dtype_size(opt->dtype);
  const size_t chunk_elems = ((size_t)8 << 20) + 37;
  void *chunk = malloc(chunk_elems * es);
  double *cell_us = calloc((size_t)cd->count, sizeof *cell_us);
  int *cell_ok = calloc((size_t)cd->count, sizeof *cell_ok);
  if (!chunk || !cell_us || !cell_ok) {
    free(chunk);
    free(cell_us);
    free(cell_ok);
    fprintf(stderr, "anyattn: out of memory\n");
    return -1;
  }
  uint64_t rng = 0x5EEDu;
  tl_fill_normal(opt->dtype, chunk, chunk_elems, 1.0f, &rng);
  const size_t flush_bytes = ts->gpu ? (size_t)256 << 20 : 0;
  void *flush_buf = ts->gpu ? dm_alloc(ts->be, flush_bytes) : NULL;
  bench_options bo;
  memset(&bo, 0, sizeof bo);
  bo.backend = ts->be;
  bo.device = opt->device;
  bo.iters = opt->iters > 0 ? opt->iters : (ts->gpu ? 10 : 3);
  bo.dtype = opt->dtype;
  bo.kv_dtype = opt->kv_dtype;
  bo.head_dim = BENCH_D;
  const double kv_bytes = (double)anyattn_kv_dtype_size(opt->kv_dtype, opt->dtype);
  const int total = cells_swept(ts, ts->cell_from, ts->cell_to) * cd->count;
  /* Per cell, before the candidates (GPU): one untimed run of the table's
   * last row (the big prefill tile), whose time seeds the pruning, so the
   * decode tiles on long prefills end after two calls. Then the candidates
   * in table order, as in earlier sweeps. */
  int settle = -1, rc = 0;
  for (int k = 0; k < cd->count; k++)
    if (cd->base[k] == k) settle = k;
  for (int i = ts->cell_from, done = 0; i < ts->cell_to && rc == 0; i++) {
    if (!cell_swept(ts, i)) continue;
    const bench_case *c = &ts->cases.items[i];
    double f[NF];
    case_features(c, kv_bytes, f);
    const int decode_like =
        (f[ANYATTN_TREE_FEATURE_NUM_TOKENS] + f[ANYATTN_TREE_FEATURE_NUM_SEQS] - 1) / f[ANYATTN_TREE_FEATURE_NUM_SEQS] <= 8;
    double best_us = 0.0;
    if (ts->gpu && settle >= 0 && cd->count > 1) {
      bench_result r;
      memset(&r, 0, sizeof r);
      bo.config = cd->config[settle];
      bo.cutoff_us = 0.0;
      if (bench_run_case(&bo, ts->ctx, c, chunk, chunk_elems * es, flush_buf, flush_bytes, &r) == 0 && r.verified)
        best_us = r.us;
    }
    for (int k = 0; k < cd->count && rc == 0; k++) {
      char name[48];
      if (cd->splits[k] > 0) snprintf(name, sizeof name, "%s-k%d", cd->config[k], cd->splits[k]);
      else snprintf(name, sizeof name, "%s", cd->config[k]);
      int ok, run_rc = 0;
      if (cd->splits[k] > 0 && !decode_like) { /* the split count is not used: C's own run */
        ok = cell_ok[cd->base[k]];
        cell_us[k] = cell_us[cd->base[k]];
      } else {
        bench_result r;
        memset(&r, 0, sizeof r);
        bo.config = cd->count == 1 && !ts->gpu ? NULL : name;
        bo.cutoff_us = best_us > 0 ? kPruneFactor * best_us : 0.0;
        run_rc = bench_run_case(&bo, ts->ctx, c, chunk, chunk_elems * es, flush_buf, flush_bytes, &r);
        ok = run_rc == 0 && r.verified;
        *failures += !ok && run_rc == 0; /* wrong output: a kernel bug, not an unsupported config */
        *pruned += ok && r.pruned;
        cell_us[k] = ok ? r.us : 0.0;
        if (ok && (best_us == 0.0 || r.us < best_us)) best_us = r.us;
        const int step = done * cd->count + k + 1;
        if (ok)
          fprintf(stderr, "[%d/%d] %-24s %-18s %10.1f us%s\n", step, total, c->name, name, r.us,
                  r.pruned ? " (pruned)" : "");
        else
          fprintf(stderr, "[%d/%d] %-24s %-18s %s\n", step, total, c->name, name,
                  run_rc ? "not run (see above)" : "WRONG OUTPUT");
      }
      cell_ok[k] = ok;
      fprintf(ts->csv, "%d", i);
      for (int x = 0; x < NF; x++) fprintf(ts->csv, ",%.17g", f[x]);
      fprintf(ts->csv, ",%s,%d,%.3f,%d\n", cd->config[k], cd->splits[k], ok ? cell_us[k] : 0.0, ok);
      rc = csv_check(ts->csv, opt->out);
    }
    done++;
  }
  if (rc == 0) {
    fprintf(ts->csv, "# pruned %d of %d runs\n", *pruned, total);
    rc = csv_check(ts->csv, opt->out);
  }
  free(cell_us);
  free(cell_ok);
  free(chunk);
  dm_free(ts->be, flush_buf);
  return rc;
}

static void tune_free(tune_state *ts) {
  cands_free(&ts->cands);
  bench_free_cases(&ts->cases);
  anyattn_context_free(ts->ctx);
  ts->ctx = NULL;
}

int tune_main(const tune_options *opt) {
  tune_state ts;
  memset(&ts, 0, sizeof ts);
  ts.opt = opt;
  if (anyattn_context_create(opt->backend, opt->device, &ts.ctx) != ANYATTN_STATUS_OK) {
    fprintf(stderr, "anyattn: %s\n", anyattn_last_error());
    return 1;
  }
  ts.be = anyattn_context_backend(ts.ctx);
  ts.gpu = ts.be != ANYATTN_BACKEND_CPU;
  if (dm_set_device(ts.be, opt->device) || cands_build(ts.be, ts.gpu, &ts.cands)) {
    tune_free(&ts);
    return 1;
  }
  bench_head_dim = opt->head_dim > 0 ? opt->head_dim : BENCH_DEFAULT_D;
  if (!strcmp(opt->grid, "ibm")) bench_add_ibm(&ts.cases);
  else add_full_grid(&ts.cases, ts.gpu ? 4e9 : 2e8, !strcmp(opt->grid, "decode"));
  ts.decode_ids = !strcmp(opt->grid, "full-decode");
  if (opt->cell_from >= ts.cases.count) { /* --cells past the grid: nothing to sweep, no file */
    fprintf(stderr, "anyattn: --cells from %d: the %s grid has cells 0 to %d (see 'anyattn help')\n", opt->cell_from,
            opt->grid, ts.cases.count - 1);
    tune_free(&ts);
    return 2;
  }
  anyattn_device_name(ts.be, opt->device, ts.dev, sizeof ts.dev);
  dm_device_info(ts.be, opt->device, ts.family, sizeof ts.family, ts.driver, sizeof ts.driver);
  time_t now = time(NULL);
  strftime(ts.date, sizeof ts.date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  ts.cell_from = opt->cell_from > 0 ? opt->cell_from : 0;
  ts.cell_to = opt->cell_to > 0 && opt->cell_to < ts.cases.count ? opt->cell_to : ts.cases.count;
  if (cells_swept(&ts, ts.cell_from, ts.cell_to) == 0) { /* full-decode: a range of no decode cell */
    fprintf(stderr, "anyattn: --cells %d:%d holds no cell of the full grid whose every sequence has q_len 1\n",
            ts.cell_from, ts.cell_to);
    tune_free(&ts);
    return 2;
  }

  ts.csv = fopen(opt->out, "w");
  if (!ts.csv) {
    fprintf(stderr, "anyattn: cannot write --out file '%s' (%s)\n", opt->out, strerror(errno));
    tune_free(&ts);
    return 1;
  }
  int failures = 0, pruned = 0;
  int rc = write_csv_header(&ts);
  if (rc == 0) rc = sweep(&ts, &failures, &pruned);
  errno = 0;
  if (fclose(ts.csv) != 0 && rc == 0) rc = csv_failed(opt->out);
  const int cells = cells_swept(&ts, ts.cell_from, ts.cell_to), num_cands = ts.cands.count;
  tune_free(&ts);
  if (rc) return 1;
  printf("wrote %s (%d cells x %d candidates, %d runs pruned)\n", opt->out, cells, num_cands, pruned);
  if (failures) {
    fprintf(stderr, "anyattn: %d runs gave wrong output; no tree written\n", failures);
    return 1;
  }
  char provenance[256];
  snprintf(provenance, sizeof provenance, "anyattn tune --grid %s on %.64s, %s (%.64s)", opt->grid, ts.dev, ts.date,
           ts.driver);
  return fit_main(opt->out, opt->depth, opt->name, provenance);
}

/* The library's choice for every cell of a sweep, through the public API
 * (pick[i] = -1: the cell was skipped or the tree names an untimed candidate).
 * Returns 0, or -1 with the message printed. */
static int library_picks(const tf_table *t, const char *device, const char *family, int *pick) {
  for (int i = 0; i < t->num_cells; i++) {
    const double *f = t->features + (size_t)i * NF;
    pick[i] = -1;
    if (isnan(f[0])) continue;
    anyattn_tree_choice ch;
    memset(&ch, 0, sizeof ch);
    ch.struct_size = sizeof ch;
    if (anyattn_tree_choose(device, family, f, NF, &ch) != ANYATTN_STATUS_OK) {
      fprintf(stderr, "anyattn: %s\n", anyattn_last_error());
      return -1;
    }
    pick[i] = ch.config[0] ? tf_find_cand(t, ch.config, ch.splits) : -1;
  }
  return 0;
}

/* The cost plan/run pays for a choice, measured through the library's own
 * lookup and walk (anyattn_tree_choose) over every cell of the sweep. */
static void time_choices(const tf_table *t) {
  struct timespec t0, t1;
  const int reps = 2000;
  int cells = 0;
  volatile int sink = 0;
  anyattn_tree_choice ch;
  memset(&ch, 0, sizeof ch);
  ch.struct_size = sizeof ch;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int r = 0; r < reps; r++)
    for (int i = 0; i < t->num_cells; i++) {
      const double *f = t->features + (size_t)i * NF;
      if (isnan(f[0])) continue;
      cells += r == 0;
      if (anyattn_tree_choose(NULL, NULL, f, NF, &ch) == ANYATTN_STATUS_OK) sink += ch.splits + 1;
    }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
                    ((double)reps * (cells ? cells : 1));
  printf("selection: %.1f ns per choice (library lookup and tree walk, %d cells x %d reps)\n", ns, cells, reps);
  (void)sink;
}

/* Loads the JSON just written through the library and checks that it picks
 * what the fitted tree picks on every cell: the file says what was fitted. */
static int check_written(const tf_table *t, const tf_node *nodes, const char *jpath) {
  if (anyattn_tree_load(jpath) != ANYATTN_STATUS_OK) {
    fprintf(stderr, "anyattn: %s\n", anyattn_last_error());
    return -1;
  }
  int *pick = malloc(sizeof(int) * (size_t)t->num_cells);
  int bad = pick ? library_picks(t, NULL, NULL, pick) : -1, differ = 0;
  for (int i = 0; bad == 0 && i < t->num_cells; i++) {
    const double *f = t->features + (size_t)i * NF;
    differ += !isnan(f[0]) && pick[i] != tf_pick(nodes, f);
  }
  free(pick);
  if (bad == 0 && differ == 0) time_choices(t);
  anyattn_tree_load(NULL);
  if (bad == 0 && differ) fprintf(stderr, "anyattn: '%s' as loaded picks otherwise on %d cells\n", jpath, differ);
  return bad || differ ? -1 : 0;
}

int fit_main(const char *csv_path, int depth, const char *name, const char *provenance) {
  tf_table t;
  char err[640];
  if (tf_read_csv(csv_path, &t, err, sizeof err)) {
    fprintf(stderr, "anyattn: %s\n", err);
    return 1;
  }
  enum { MAX_NODES = 511 }; /* the loader takes 512 */
  tf_node nodes[MAX_NODES];
  int unsplit = 0;
  const int n = tf_fit_ex(&t, depth > 0 ? depth : 4, 1, nodes, MAX_NODES, &unsplit);
  if (n < 0) {
    fprintf(stderr, "anyattn: %s\n", n == -1 ? "the sweep has no cell to fit" : "out of memory fitting the tree");
    tf_free(&t);
    return 1;
  }
  /* The loader takes provenance of at most 255 characters. */
  char prov[256];
  if (provenance) {
    snprintf(prov, sizeof prov, "%s", provenance);
  } else { /* a list too long for the line keeps its first whole names, then "..." */
    char list[160];
    snprintf(list, sizeof list, "%s", csv_path);
    if (strlen(csv_path) >= sizeof list) {
      char *cut = list + sizeof list - 5;
      while (cut > list && *cut != ',') cut--;
      snprintf(cut, (size_t)(list + sizeof list - cut), "%s", cut > list ? ",..." : "...");
    }
    int files = 1;
    for (const char *c = csv_path; *c; c++) files += *c == ',';
    if (files > 1) snprintf(prov, sizeof prov, "fitted from %d sweeps: %s (%.20s, %.25s)", files, list, t.device, t.date);
    else snprintf(prov, sizeof prov, "fitted from %s (%.20s, %.25s)", list, t.device, t.date);
  }
  /* Outputs sit beside the sweep: X.csv -> X.json and X.h; beside the first
   * of a list of sweeps, as tree_NAME.json and tree_NAME.h. */
  char base[512], jpath[520], cpath[520];
  const char *comma = strchr(csv_path, ',');
  const size_t first_len = comma ? (size_t)(comma - csv_path) : strlen(csv_path);
  if (first_len >= sizeof base - 64) {
    fprintf(stderr, "anyattn: sweep path '%.64s...' is over %zu characters\n", csv_path, sizeof base - 65);
    tf_free(&t);
    return 1;
  }
  snprintf(base, sizeof base, "%.*s", (int)first_len, csv_path);
  if (comma) {
    char *slash = strrchr(base, '/');
    snprintf(slash ? slash + 1 : base, sizeof base - (size_t)(slash ? slash + 1 - base : 0), "tree_%s", name);
  } else {
    char *dot = strrchr(base, '.');
    if (dot && !strcmp(dot, ".csv")) *dot = '\0';
  }
  snprintf(jpath, sizeof jpath, "%s.json", base);
  snprintf(cpath, sizeof cpath, "%s.h", base);
  if (tf_write_json(&t, nodes, n, prov, 1, jpath, err, sizeof err) ||
      tf_write_c(&t, nodes, n, prov, 1, name, cpath, err, sizeof err)) {
    fprintf(stderr, "anyattn: %s\n", err);
    tf_free(&t);
    return 1;
  }
  printf("tree: %d nodes (depth <= %d) over %d cells (%d swept, then as without the mean context) x %d configs -> "
         "%s, %s\n",
         n, depth > 0 ? depth : 4, t.num_cells, t.num_swept, t.num_cands, jpath, cpath);
  if (unsplit)
    printf("tree: the %d-node limit left %d leaves unsplit that a split would improve (the least-saving splits)\n",
           MAX_NODES, unsplit);
  tf_report(&t, nodes, stdout);
  const int rc = check_written(&t, nodes, jpath);
  tf_free(&t);
  return rc ? 1 : 0;
}

/* Scores the tree the library would use for the sweep's device (the
 * compiled-in one, or the file anyattn_tree_load / ANYATTN_TREE loaded) on
 * that sweep: how a committed tree fares on cells it was not fitted on. */
int eval_main(const char *csv_path) {
  tf_table t;
  char err[640];
  if (tf_read_csv(csv_path, &t, err, sizeof err)) {
    fprintf(stderr, "anyattn: %s\n", err);
    return 1;
  }
  anyattn_tree_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (anyattn_tree_get(t.device, t.family, &info) != ANYATTN_STATUS_OK || info.source == ANYATTN_TREE_SOURCE_NONE) {
    fprintf(stderr, "anyattn: no tree serves device '%s' (%s)\n", t.device, t.family);
    tf_free(&t);
    return 1;
  }
  int *pick = malloc(sizeof(int) * (size_t)t.num_cells);
  if (!pick || library_picks(&t, t.device, t.family, pick)) {
    if (!pick) fprintf(stderr, "anyattn: out of memory\n");
    free(pick);
    tf_free(&t);
    return 1;
  }
  printf("tree for %s (%s): %s\n", t.device, t.family, info.provenance);
  printf("sweep: %s (%d cells, %d swept, x %d candidates, %s)\n", csv_path, t.num_cells, t.num_swept, t.num_cands,
         t.date);
  tf_report_picks(&t, pick, stdout);
  free(pick);
  tf_free(&t);
  return 0;
}
