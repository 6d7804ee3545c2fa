/* bench.c: `anyattn bench`. The named workloads (bench_cases.c), data
 * set-up with shuffled pages, timing (medians; events and an L2 flush on
 * GPUs, optional graph replay), and figures as ratios to ceilings measured in
 * the same run. Shapes: Llama-3.1-8B attention (32 q heads, 8 kv heads, head
 * dim 128), block size 16. */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_step.h"
#include "ceilings.h"
#include "devmem.h"
#include "gpu_ceilings.h"
#include "tl_util.h"

/* The benchmarked layer: Llama-3.1-8B heads, causal, the CLI's dtype and config. */
static void bench_problem(anyattn_problem *pr, const bench_options *o) {
  anyattn_problem_init(pr);
  pr->num_q_heads = BENCH_HQ;
  pr->num_kv_heads = BENCH_HKV;
  pr->head_dim = BENCH_D;
  pr->dtype = o->dtype;
  pr->kv_dtype = o->kv_dtype;
  pr->block_size = BENCH_BS;
  pr->causal = 1;
  pr->config = o->config;
}

/* ---- one case ---------------------------------------------------------------- */

/* Fills a device buffer from a host chunk of random values (not zeros: zeros
 * run faster than real data and hide unwritten outputs): dst byte i is chunk
 * byte i % chunk_bytes. One chunk goes up from the host, then the filled
 * prefix (a whole number of chunks, so the pattern holds) is doubled in
 * place, so gigabyte caches fill at device-copy speed: a tuning sweep sets
 * up every (cell, config) run afresh, and host copies dominated its big cells. */
static int fill_random(anyattn_backend be, void *dst, size_t bytes, const void *chunk, size_t chunk_bytes) {
  size_t done = bytes < chunk_bytes ? bytes : chunk_bytes;
  if (dm_to_device(be, dst, chunk, done)) return -1;
  while (done < bytes) {
    const size_t n = bytes - done < done ? bytes - done : done;
    if (dm_copy_within(be, (char *)dst + done, dst, n)) return -1;
    done += n;
  }
  return 0;
}

/* What K and V are tiled with (element i of a cache is element i % *elems):
 * the 16-bit chunk itself, or for fp8 caches a chunk of random non-NaN codes
 * (random 16-bit bytes would hold NaN codes), made once per format. */
enum { BENCH_FP8_CHUNK = (1 << 20) + 37 };
static const void *kv_chunk(const bench_options *o, const void *chunk, size_t chunk_bytes, size_t *elems) {
  static uint8_t *codes[3];
  if (o->kv_dtype == ANYATTN_KV_AS_Q) {
    *elems = chunk_bytes / anyattn_dtype_size(o->dtype);
    return chunk;
  }
  const int f = (int)o->kv_dtype;
  if (!codes[f] && (codes[f] = (uint8_t *)malloc(BENCH_FP8_CHUNK))) {
    uint64_t rng = 0xF8F8u + (uint64_t)f;
    tl_fill_fp8(o->kv_dtype, codes[f], BENCH_FP8_CHUNK, &rng);
  }
  *elems = BENCH_FP8_CHUNK;
  return codes[f];
}

/* The per-tensor descales bench passes with fp8 caches (1 for 16-bit ones). */
static const float bench_k_descale = 0.5f, bench_v_descale = 2.0f;

/* Element i of K or V as the library reads it (dequantised for fp8). */
static double kv_value(const bench_options *o, const void *kvc, size_t i, int is_v) {
  if (o->kv_dtype == ANYATTN_KV_AS_Q) return tl_load(o->dtype, kvc, i);
  return (is_v ? bench_v_descale : bench_k_descale) * tl_fp8_value(o->kv_dtype, ((const uint8_t *)kvc)[i]);
}

/* Recomputes a few output rows in double from the tiled inputs (element i
 * of every input buffer is chunk element i % chunk_elems) and compares: a
 * benchmark of a wrong kernel is worthless, whatever config it forced.
 * Returns 1 when every sampled row is within a loose bound, else 0. */
static int verify_sample(const bench_options *opt, const bench_case *c, const int32_t *cu, const int32_t *bt,
                         int max_pages, const void *d_out, const void *chunk, size_t chunk_elems) {
  const anyattn_dtype dt = opt->dtype;
  const size_t es = anyattn_dtype_size(dt);
  const int num_tokens = cu[c->num_seqs];
  size_t kv_elems;
  const void *kvc = kv_chunk(opt, chunk, chunk_elems * es, &kv_elems);
  const double tol = dt == ANYATTN_DTYPE_F32 ? 1e-4 : dt == ANYATTN_DTYPE_F16 ? 5e-3 : 3e-2;
  const double scale = 1.0 / sqrt((double)BENCH_D);
  uint64_t rng = 0xC0FFEEu + (uint64_t)num_tokens;
  unsigned char row[BENCH_MAX_D * 4];
  double *p = NULL;
  int ok = 1;
  for (int sample = 0; sample < 8 && ok; sample++) {
    const int t = sample == 0 ? num_tokens - 1 : (int)(tl_rng_next(&rng) % (uint64_t)num_tokens);
    const int h = (int)(tl_rng_next(&rng) % BENCH_HQ), kvh = h / (BENCH_HQ / BENCH_HKV);
    int s = 0;
    while (cu[s + 1] <= t) s++;
    const int kv = c->kv_lens[s], pos = kv - c->q_lens[s] + (t - cu[s]);
    p = (double *)realloc(p, (size_t)(pos + 1) * sizeof *p);
    double m = -INFINITY, l = 0, o[BENCH_MAX_D] = {0};
    for (int j = 0; j <= pos; j++) { /* causal: keys 0..pos */
      const size_t krow = (((size_t)bt[(size_t)s * max_pages + j / BENCH_BS] * BENCH_BS + j % BENCH_BS) * BENCH_HKV + kvh) * BENCH_D;
      const size_t qrow = ((size_t)t * BENCH_HQ + h) * BENCH_D;
      double dot = 0;
      for (int d = 0; d < BENCH_D; d++)
        dot += (double)tl_load(dt, chunk, (qrow + d) % chunk_elems) * kv_value(opt, kvc, (krow + d) % kv_elems, 0);
      p[j] = scale * dot;
      m = fmax(m, p[j]);
    }
    for (int j = 0; j <= pos; j++) {
      const size_t vrow = (((size_t)bt[(size_t)s * max_pages + j / BENCH_BS] * BENCH_BS + j % BENCH_BS) * BENCH_HKV + kvh) * BENCH_D;
      const double w = exp(p[j] - m);
      l += w;
      for (int d = 0; d < BENCH_D; d++) o[d] += w * kv_value(opt, kvc, (vrow + d) % kv_elems, 1);
    }
    if (dm_to_host(opt->backend, row, (const char *)d_out + ((size_t)t * BENCH_HQ + h) * BENCH_D * es, BENCH_D * es)) {
      ok = 0;
      break;
    }
    for (int d = 0; d < BENCH_D; d++) {
      const double ref = o[d] / l, got = tl_load(dt, row, (size_t)d);
      if (!(fabs(got - ref) <= tol * (1.0 + fabs(ref)))) {
        fprintf(stderr, "bench: %s: out[%d, %d, %d] = %g, recomputed %g\n", c->name, t, h, d, got, ref);
        ok = 0;
        break;
      }
    }
  }
  free(p);
  return ok;
}

/* r's ceilings (the samples' medians) and percentages (the medians over the
 * calls of each call's figure over the samples taken just before it), from
 * the n calls' times (ms) in call order; r->kv_bytes and r->flops set. */
static void bench_ceiling_figures(bench_result *r, const double *ms, const aa_cpu_ceiling_sample *ceil, int n) {
  double *v = (double *)malloc((size_t)6 * n * sizeof *v);
  if (!v) return; /* the figures then fall back to the run's ceilings */
  for (int i = 0; i < n; i++) {
    const double gbs = r->kv_bytes / (ms[i] * 1e-3) / 1e9, gflops = r->flops / (ms[i] * 1e-3) / 1e9;
    v[i] = ceil[i].read_gbs;
    v[n + i] = ceil[i].paged_gbs;
    v[2 * n + i] = ceil[i].fma_gflops;
    v[3 * n + i] = ceil[i].read_gbs > 0 ? 100.0 * gbs / ceil[i].read_gbs : 0.0;
    v[4 * n + i] = ceil[i].paged_gbs > 0 ? 100.0 * gbs / ceil[i].paged_gbs : 0.0;
    v[5 * n + i] = ceil[i].fma_gflops > 0 ? 100.0 * gflops / ceil[i].fma_gflops : 0.0;
  }
  r->ceil_calls = n;
  r->ceil_read_gbs = tl_median(v, n);
  r->ceil_paged_gbs = tl_median(v + n, n);
  r->ceil_gflops = tl_median(v + 2 * n, n);
  r->pct_bw = tl_median(v + 3 * n, n);
  r->pct_paged = tl_median(v + 4 * n, n);
  r->pct_peak = tl_median(v + 5 * n, n);
  free(v);
}

int bench_run_case(const bench_options *opt, anyattn_context *ctx, const bench_case *c, const void *chunk,
                    size_t chunk_bytes, void *flush_buf, size_t flush_bytes, bench_result *r) {
  const anyattn_backend be = opt->backend;
  const int gpu = be != ANYATTN_BACKEND_CPU;
  const size_t es = anyattn_dtype_size(opt->dtype), kes = anyattn_kv_dtype_size(opt->kv_dtype, opt->dtype);
  int num_tokens = 0, max_kv = 1, max_pages = 1;
  int64_t total_pages = 0;
  r->kv_bytes = 0;
  r->flops = 0;
  r->pruned = 0;
  for (int s = 0; s < c->num_seqs; s++) {
    int pages = (c->kv_lens[s] + BENCH_BS - 1) / BENCH_BS;
    num_tokens += c->q_lens[s];
    if (c->kv_lens[s] > max_kv) max_kv = c->kv_lens[s];
    if (pages > max_pages) max_pages = pages;
    total_pages += pages;
    r->kv_bytes += 2.0 * c->kv_lens[s] * BENCH_HKV * BENCH_D * (double)kes;
    for (int i = 0; i < c->q_lens[s]; i++) {
      int p = c->kv_lens[s] - c->q_lens[s] + i;
      r->flops += 4.0 * BENCH_HQ * BENCH_D * (double)(p + 1); /* causal */
    }
  }
  /* Metadata with every page shuffled across the cache. */
  const size_t ns = (size_t)(unsigned)c->num_seqs, np = (size_t)(uint64_t)total_pages;
  int32_t *cu = (int32_t *)malloc((ns + 1) * sizeof(int32_t));
  int32_t *kvl = (int32_t *)malloc(ns * sizeof(int32_t));
  int32_t *bt = (int32_t *)calloc(ns * (size_t)(unsigned)max_pages, sizeof(int32_t));
  int32_t *perm = (int32_t *)malloc(np * sizeof(int32_t));
  uint64_t rng = 0xA77E4u;
  for (int64_t i = 0; i < total_pages; i++) perm[i] = (int32_t)i;
  for (int64_t i = total_pages - 1; i > 0; i--) {
    int64_t j = (int64_t)(tl_rng_next(&rng) % (uint64_t)(i + 1));
    int32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  cu[0] = 0;
  int64_t next = 0;
  for (int s = 0; s < c->num_seqs; s++) {
    cu[s + 1] = cu[s] + c->q_lens[s];
    kvl[s] = c->kv_lens[s];
    int pages = (c->kv_lens[s] + BENCH_BS - 1) / BENCH_BS;
    for (int j = 0; j < pages; j++) bt[(size_t)s * max_pages + j] = perm[next++];
  }

  anyattn_problem pr;
  bench_problem(&pr, opt);
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = c->num_seqs;
  lim.max_tokens = num_tokens;
  lim.max_context = max_kv > opt->max_context ? max_kv : opt->max_context;
  lim.stage_kv_tokens = opt->stage_kv;

  int rc = 1;
  anyattn_plan *plan = NULL;
  void *d_cu = NULL, *d_kvl = NULL, *d_bt = NULL, *q = NULL, *k = NULL, *v = NULL, *out = NULL, *ws = NULL;
  void *d_ds = NULL;
  dm_timer *timer = NULL;
  dm_graph *graph = NULL;
  double *times = NULL;
  aa_cpu_ceiling_sample *ceil = NULL; /* CPU: the ceilings sampled before each timed call */
  const size_t cache_bytes = (size_t)total_pages * BENCH_BS * BENCH_HKV * BENCH_D * kes;
  size_t kv_elems;
  const void *kvc = kv_chunk(opt, chunk, chunk_bytes, &kv_elems);
  const size_t q_bytes = (size_t)num_tokens * BENCH_HQ * BENCH_D * es;

  anyattn_status st = anyattn_plan_create(ctx, &pr, &lim, &plan);
  if (st != ANYATTN_STATUS_OK) {
    fprintf(stderr, "bench: %s: plan failed: %s\n", c->name, anyattn_last_error());
    goto done;
  }
  snprintf(r->config, sizeof r->config, "%s", anyattn_plan_describe(plan));
  size_t ws_bytes = anyattn_plan_workspace_size(plan);
  d_cu = dm_alloc(be, ((size_t)c->num_seqs + 1) * 4);
  d_kvl = dm_alloc(be, (size_t)c->num_seqs * 4);
  d_bt = dm_alloc(be, (size_t)c->num_seqs * max_pages * 4);
  q = dm_alloc(be, q_bytes);
  out = dm_alloc(be, q_bytes);
  k = dm_alloc(be, cache_bytes);
  v = dm_alloc(be, cache_bytes);
  ws = ws_bytes ? dm_alloc(be, ws_bytes) : NULL;
  d_ds = dm_alloc(be, 2 * sizeof(float));
  if (!d_cu || !d_kvl || !d_bt || !q || !out || !k || !v || (ws_bytes && !ws) || !d_ds || !kvc) {
    fprintf(stderr, "bench: %s: allocation failed\n", c->name);
    goto done;
  }
  if (anyattn_workspace_prepare(plan, ws, ws_bytes, NULL) != ANYATTN_STATUS_OK) {
    fprintf(stderr, "bench: %s: workspace_prepare: %s\n", c->name, anyattn_last_error());
    goto done;
  }
  if (dm_to_device(be, d_cu, cu, ((size_t)c->num_seqs + 1) * 4) ||
      dm_to_device(be, d_kvl, kvl, (size_t)c->num_seqs * 4) ||
      dm_to_device(be, d_bt, bt, (size_t)c->num_seqs * max_pages * 4) ||
      fill_random(be, q, q_bytes, chunk, chunk_bytes) || fill_random(be, k, cache_bytes, kvc, kv_elems * kes) ||
      fill_random(be, v, cache_bytes, kvc, kv_elems * kes) || dm_fill_bytes(be, out, 0xff, q_bytes))
    goto done;
  {
    const float ds[2] = {bench_k_descale, bench_v_descale};
    if (dm_to_device(be, d_ds, ds, sizeof ds)) goto done;
  }

  {
    /* The metadata is checked once on the host, as a caller should. */
    anyattn_batch hb;
    anyattn_batch_init(&hb);
    hb.num_seqs = c->num_seqs;
    hb.num_tokens = num_tokens;
    hb.cu_seqlens_q = cu;
    hb.seq_lens_k = kvl;
    hb.block_table = bt;
    hb.block_table_stride = max_pages;
    if (anyattn_validate(plan, &hb, total_pages) != ANYATTN_STATUS_OK) {
      fprintf(stderr, "bench: %s: %s\n", c->name, anyattn_last_error());
      goto done;
    }
  }
  anyattn_batch b;
  anyattn_batch_init(&b);
  b.prior_writes = opt->prior_writes;
  b.num_seqs = c->num_seqs;
  b.num_tokens = num_tokens;
  b.cu_seqlens_q = (const int32_t *)d_cu;
  b.seq_lens_k = (const int32_t *)d_kvl;
  b.block_table = (const int32_t *)d_bt;
  b.block_table_stride = max_pages;
  if (opt->hints != BENCH_HINTS_NONE) { /* the host hints a serving engine has */
    b.max_kv_len = max_kv;
    for (int s = 0; s < c->num_seqs; s++)
      if (c->q_lens[s] > b.max_q_len) b.max_q_len = c->q_lens[s];
  }
  if (opt->hints == BENCH_HINTS_ALL)
    for (int s = 0; s < c->num_seqs; s++) b.sum_kv_len += c->kv_lens[s];
  if (anyattn_run_describe(plan, &b, r->choice, sizeof r->choice) != ANYATTN_STATUS_OK) {
    fprintf(stderr, "bench: %s: run_describe: %s\n", c->name, anyattn_last_error());
    goto done;
  }
  anyattn_tensors t;
  anyattn_tensors_init(&t);
  t.q = q;
  t.k_cache = k;
  t.v_cache = v;
  t.num_blocks = total_pages;
  t.out = out;
  if (opt->kv_dtype != ANYATTN_KV_AS_Q) { /* per-tensor descales, as serving engines pass them */
    t.k_descale = (const float *)d_ds;
    t.v_descale = (const float *)d_ds + 1;
  }

  int iters = opt->iters > 0 ? opt->iters : (gpu ? 30 : 5);
  times = (double *)malloc((size_t)iters * sizeof(double));
  if (opt->ceilings && !gpu && !(ceil = (aa_cpu_ceiling_sample *)malloc((size_t)iters * sizeof *ceil))) goto done;
  timer = dm_timer_create(be);
  if (!timer || !times) goto done;
  void *stream = NULL;
  if (opt->graph) {
    graph = dm_graph_begin(be, &stream);
    if (!graph) goto done;
    st = anyattn_run(plan, &b, &t, ws, ws_bytes, stream);
    if (dm_graph_end(graph) || st != ANYATTN_STATUS_OK) {
      fprintf(stderr, "bench: %s: graph capture failed: %s\n", c->name, anyattn_last_error());
      goto done;
    }
  }
  for (int i = -2; i < iters; i++) { /* two warm-up calls */
    if (flush_buf && !opt->no_flush && dm_fill_bytes(be, flush_buf, i & 0xff, flush_bytes)) goto done;
    if (ceil && i >= 0) {
      /* the ceilings' passes evict the caches: one untimed call warms them again */
      aa_cpu_ceilings_sample(opt->ceilings, &ceil[i]);
      if ((st = anyattn_run(plan, &b, &t, ws, ws_bytes, NULL)) != ANYATTN_STATUS_OK) {
        fprintf(stderr, "bench: %s: run failed: %s\n", c->name, anyattn_last_error());
        goto done;
      }
    }
    if (dm_timer_start(timer)) goto done;
    if (graph) {
      if (dm_graph_launch(graph)) goto done;
    } else if ((st = anyattn_run(plan, &b, &t, ws, ws_bytes, NULL)) != ANYATTN_STATUS_OK) {
      fprintf(stderr, "bench: %s: run failed: %s\n", c->name, anyattn_last_error());
      goto done;
    }
    double ms = dm_timer_stop(timer);
    if (ms < 0) {
      fprintf(stderr, "bench: %s: timing failed\n", c->name);
      goto done;
    }
    if (i >= 0) times[i] = ms;
    /* Hopeless: the second warm-up call says so (the first may load the module). */
    if (i == -1 && opt->cutoff_us > 0 && 1e3 * ms > opt->cutoff_us) {
      r->pruned = 1;
      times[0] = ms;
      iters = 1;
      break;
    }
  }
  if (dm_sync(be)) goto done;
  r->verified = verify_sample(opt, c, cu, bt, max_pages, out, chunk, chunk_bytes / es);
  if (!r->verified) {
    fprintf(stderr, "bench: %s: sampled output rows differ from the recomputation\n", c->name);
    goto done;
  }
  if (ceil && !r->pruned) bench_ceiling_figures(r, times, ceil, iters);
  r->us = 1e3 * tl_median(times, iters);
  rc = 0;
done:
  free(ceil);
  dm_graph_free(graph);
  dm_timer_free(timer);
  free(times);
  dm_free(be, d_cu);
  dm_free(be, d_kvl);
  dm_free(be, d_bt);
  dm_free(be, q);
  dm_free(be, out);
  dm_free(be, k);
  dm_free(be, v);
  dm_free(be, ws);
  dm_free(be, d_ds);
  anyattn_plan_free(plan);
  free(cu);
  free(kvl);
  free(bt);
  free(perm);
  return rc;
}


/* ---- e2e-llama8b --------------------------------------------------------------
 * The attention part of the paper's end-to-end run: batch 1, a 500-token
 * prompt, 12,800 output tokens, 32 layers. Each layer has its own cache (so
 * layers do not hit in L2 for each other). The prompt is prefilled once per
 * layer; then every step replays one graph holding the 32 layers' decode
 * calls, with the context grown on the device in between (the graph was
 * captured once, so the kernels must read lengths on the device only).
 * Reported: total attention seconds and µs per call.
 *
 * e2e-llama8b-step: the same steps with a small kernel before each layer's
 * call (tools/bench_step.cu) that writes the layer's Q and the newest K/V
 * row, as a step's QKV projection and cache write do; all layers share the Q
 * buffer, so it waits for the attention call before it (programmatic
 * dependent launch on sm_90). Each attention call then starts after a kernel
 * that wrote its inputs, not right after the call before it, as in a model.
 * A second graph holds the 32 in-between kernels alone, replayed over the
 * same steps; the attention figure is the step total less that. */
enum { E2E_LAYERS = 32, E2E_PROMPT = 500, E2E_STEPS = 12800 };

typedef struct {
  double prefill_ms, decode_s, us_per_call, kv_gbs, total_s;
  int step;                       /* e2e-llama8b-step: the two totals below are set */
  double step_total_s, between_s; /* its whole steps, and its in-between kernels alone */
  char plan[192];
} e2e_result;

static int is_e2e(const char *workload) {
  return !strcmp(workload, "e2e-llama8b") || !strcmp(workload, "e2e-llama8b-step");
}

/* What both e2e workloads set up: the plan, each layer's caches and output,
 * one Q buffer all layers share, the metadata on the device, the call's
 * batch and tensors. */
typedef struct {
  anyattn_backend be;
  size_t es, kes, layer_elems, q_bytes, ws_bytes;
  int pages;
  anyattn_plan *plan;
  void *k, *v, *q, *out, *ws, *d_cu, *d_kv, *d_bt;
  int32_t *bt;
  dm_timer *timer;
  anyattn_batch b;
  anyattn_tensors t;
} e2e_state;

static void e2e_free(e2e_state *s) {
  dm_timer_free(s->timer);
  dm_free(s->be, s->k);
  dm_free(s->be, s->v);
  dm_free(s->be, s->q);
  dm_free(s->be, s->out);
  dm_free(s->be, s->ws);
  dm_free(s->be, s->d_cu);
  dm_free(s->be, s->d_kv);
  dm_free(s->be, s->d_bt);
  anyattn_plan_free(s->plan);
  free(s->bt);
}

/* The plan, random caches and Q, pages in reverse order; 0, else -1 (what
 * failed has printed). *s is freeable by e2e_free either way. */
static int e2e_setup(e2e_state *s, const bench_options *o, anyattn_context *ctx, const void *chunk,
                     size_t chunk_bytes) {
  memset(s, 0, sizeof *s);
  s->be = o->backend;
  s->es = anyattn_dtype_size(o->dtype);
  s->kes = anyattn_kv_dtype_size(o->kv_dtype, o->dtype);
  const int max_ctx = E2E_PROMPT + E2E_STEPS;
  const int pages = s->pages = (max_ctx + BENCH_BS - 1) / BENCH_BS;
  s->layer_elems = (size_t)pages * BENCH_BS * BENCH_HKV * BENCH_D;
  s->q_bytes = (size_t)E2E_PROMPT * BENCH_HQ * BENCH_D * s->es;
  s->bt = (int32_t *)malloc((size_t)pages * sizeof(int32_t));
  if (!s->bt) return -1;
  for (int j = 0; j < pages; j++) s->bt[j] = pages - 1 - j; /* reversed: no two pages adjacent in order */

  anyattn_problem pr;
  bench_problem(&pr, o);
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = 1;
  lim.max_tokens = E2E_PROMPT;
  lim.max_context = max_ctx;
  if (anyattn_plan_create(ctx, &pr, &lim, &s->plan) != ANYATTN_STATUS_OK) {
    fprintf(stderr, "bench: e2e: plan failed: %s\n", anyattn_last_error());
    return -1;
  }
  s->ws_bytes = anyattn_plan_workspace_size(s->plan);
  size_t kv_elems;
  const void *kvc = kv_chunk(o, chunk, chunk_bytes, &kv_elems);
  const size_t cache_bytes = s->layer_elems * s->kes * E2E_LAYERS;
  s->k = dm_alloc(s->be, cache_bytes);
  s->v = dm_alloc(s->be, cache_bytes);
  s->q = dm_alloc(s->be, s->q_bytes);
  s->out = dm_alloc(s->be, s->q_bytes * E2E_LAYERS);
  s->ws = s->ws_bytes ? dm_alloc(s->be, s->ws_bytes) : NULL;
  s->d_cu = dm_alloc(s->be, 2 * sizeof(int32_t));
  s->d_kv = dm_alloc(s->be, sizeof(int32_t));
  s->d_bt = dm_alloc(s->be, (size_t)pages * sizeof(int32_t));
  s->timer = dm_timer_create(s->be);
  if (!s->k || !s->v || !s->q || !s->out || (s->ws_bytes && !s->ws) || !s->d_cu || !s->d_kv || !s->d_bt || !s->timer ||
      !kvc)
    return -1;
  if (anyattn_workspace_prepare(s->plan, s->ws, s->ws_bytes, NULL) != ANYATTN_STATUS_OK) {
    fprintf(stderr, "bench: e2e: workspace_prepare: %s\n", anyattn_last_error());
    return -1;
  }
  if (fill_random(s->be, s->k, cache_bytes, kvc, kv_elems * s->kes) ||
      fill_random(s->be, s->v, cache_bytes, kvc, kv_elems * s->kes) ||
      fill_random(s->be, s->q, s->q_bytes, chunk, chunk_bytes) ||
      dm_to_device(s->be, s->d_bt, s->bt, (size_t)pages * sizeof(int32_t)))
    return -1;

  anyattn_batch_init(&s->b);
  s->b.prior_writes = o->prior_writes;
  s->b.num_seqs = 1;
  s->b.cu_seqlens_q = (const int32_t *)s->d_cu;
  s->b.seq_lens_k = (const int32_t *)s->d_kv;
  s->b.block_table = (const int32_t *)s->d_bt;
  s->b.block_table_stride = pages;
  anyattn_tensors_init(&s->t);
  s->t.q = s->q;
  s->t.num_blocks = pages;
  return 0;
}

/* Layer l's caches (the K cache, or the V cache when is_v) and output. */
static char *e2e_cache(const e2e_state *s, int l, int is_v) {
  return (char *)(is_v ? s->v : s->k) + (size_t)l * s->layer_elems * s->kes;
}
static void e2e_layer(e2e_state *s, int l) {
  s->t.k_cache = e2e_cache(s, l, 0);
  s->t.v_cache = e2e_cache(s, l, 1);
  s->t.out = (char *)s->out + (size_t)l * s->q_bytes;
}

/* The 500-token prompt, once per layer (stream launches, timed); then the
 * metadata of the decode steps: one query token. 0, else -1. */
static int e2e_prefill(e2e_state *s, double *prefill_ms) {
  int32_t cu[2] = {0, E2E_PROMPT}, kvlen = E2E_PROMPT;
  if (dm_to_device(s->be, s->d_cu, cu, sizeof cu) || dm_to_device(s->be, s->d_kv, &kvlen, sizeof kvlen)) return -1;
  s->b.num_tokens = E2E_PROMPT;
  *prefill_ms = 0;
  for (int l = 0; l < E2E_LAYERS; l++) {
    e2e_layer(s, l);
    if (dm_timer_start(s->timer)) return -1;
    if (anyattn_run(s->plan, &s->b, &s->t, s->ws, s->ws_bytes, NULL) != ANYATTN_STATUS_OK) {
      fprintf(stderr, "bench: e2e: prefill: %s\n", anyattn_last_error());
      return -1;
    }
    double ms = dm_timer_stop(s->timer);
    if (ms < 0) return -1;
    *prefill_ms += ms;
  }
  cu[1] = 1;
  if (dm_to_device(s->be, s->d_cu, cu, sizeof cu)) return -1;
  s->b.num_tokens = 1;
  return 0;
}

/* e2e-llama8b-step's kernel, where this build has it (CUDA). */
#if defined(ANYATTN_BENCH_STEP_KERNEL)
static const int bench_step_built = 1;
#else
static const int bench_step_built = 0;
#endif
static int e2e_step_launch(const bench_step_args *a, void *stream) {
#if defined(ANYATTN_BENCH_STEP_KERNEL)
  return bench_step_kernel_launch(a, stream);
#else
  (void)a;
  (void)stream;
  fprintf(stderr, "bench: e2e-llama8b-step: this build has no step kernel (it is CUDA)\n");
  return -1;
#endif
}

/* One decode step as a graph, captured once: per layer the in-between kernel
 * (step non-NULL: its arguments but for the layer's) and the attention call
 * (attention 1). NULL after a message on failure. */
static dm_graph *e2e_capture(e2e_state *s, const bench_step_args *step, int attention) {
  void *stream = NULL;
  dm_graph *graph = dm_graph_begin(s->be, &stream);
  if (!graph) return NULL;
  anyattn_status st = ANYATTN_STATUS_OK;
  int step_bad = 0;
  for (int l = 0; l < E2E_LAYERS && st == ANYATTN_STATUS_OK && !step_bad; l++) {
    e2e_layer(s, l);
    if (step) {
      bench_step_args a = *step;
      a.layer = l;
      a.k_cache = e2e_cache(s, l, 0);
      a.v_cache = e2e_cache(s, l, 1);
      step_bad = e2e_step_launch(&a, stream) != 0;
    }
    if (attention && !step_bad) st = anyattn_run(s->plan, &s->b, &s->t, s->ws, s->ws_bytes, stream);
  }
  if (dm_graph_end(graph) || st != ANYATTN_STATUS_OK || step_bad) {
    fprintf(stderr, "bench: e2e: capture failed: %s\n",
            step_bad ? "the step kernel's launch (above)" : anyattn_last_error());
    dm_graph_free(graph);
    return NULL;
  }
  return graph;
}

/* Replays `graph` once per decode step, the context grown by one token before
 * each (a host copy, outside the timing). Sums the replays' milliseconds and
 * the K/V bytes the steps' attention calls read. 0, else -1. */
static int e2e_replay(e2e_state *s, dm_graph *graph, double *total_ms, double *kv_bytes) {
  *total_ms = 0, *kv_bytes = 0;
  for (int step = 0; step < E2E_STEPS; step++) {
    const int32_t kvlen = E2E_PROMPT + step + 1;
    if (dm_to_device(s->be, s->d_kv, &kvlen, sizeof kvlen)) return -1;
    if (dm_timer_start(s->timer) || dm_graph_launch(graph)) return -1;
    double ms = dm_timer_stop(s->timer);
    if (ms < 0) return -1;
    *total_ms += ms;
    *kv_bytes += 2.0 * kvlen * BENCH_HKV * BENCH_D * (double)s->kes * E2E_LAYERS;
  }
  return 0;
}

/* 1 when the first values of layer l's output are finite. */
static int e2e_out_finite(const e2e_state *s, const bench_options *o, int l) {
  uint16_t h[64];
  int bad = dm_to_host(s->be, h, (const char *)s->out + (size_t)l * s->q_bytes, sizeof h) != 0;
  for (int i = 0; !bad && i < (int)(sizeof h / s->es); i++) bad = !isfinite(tl_load(o->dtype, h, (size_t)i));
  return !bad;
}

static void e2e_fill_result(e2e_result *res, const e2e_state *s, double prefill_ms, double decode_ms, double kv_bytes) {
  const double calls = (double)E2E_STEPS * E2E_LAYERS;
  res->prefill_ms = prefill_ms;
  res->decode_s = decode_ms * 1e-3;
  res->us_per_call = 1e3 * decode_ms / calls;
  res->kv_gbs = kv_bytes / (decode_ms * 1e-3) / 1e9;
  res->total_s = (prefill_ms + decode_ms) * 1e-3;
  snprintf(res->plan, sizeof res->plan, "%s", anyattn_plan_describe(s->plan));
}

static int run_e2e(const bench_options *o, anyattn_context *ctx, const void *chunk, size_t chunk_bytes,
                   e2e_result *res) {
  e2e_state s;
  dm_graph *graph = NULL;
  double prefill_ms = 0, decode_ms = 0, kv_bytes = 0;
  int rc = 1;
  if (e2e_setup(&s, o, ctx, chunk, chunk_bytes) || e2e_prefill(&s, &prefill_ms)) goto done;
  /* Decode: one graph with the 32 layers' calls, captured once. */
  graph = e2e_capture(&s, NULL, 1);
  if (!graph || e2e_replay(&s, graph, &decode_ms, &kv_bytes)) goto done;
  if (!e2e_out_finite(&s, o, 0)) {
    fprintf(stderr, "bench: e2e: output not finite\n");
    goto done;
  }
  e2e_fill_result(res, &s, prefill_ms, decode_ms, kv_bytes);
  printf("e2e-llama8b: prefill %d tokens x %d layers %.3f ms; decode %d steps x %d layers %.3f s "
         "(%.2f us per call, %.1f GB/s of K/V); attention total %.3f s  [%s]\n",
         E2E_PROMPT, E2E_LAYERS, prefill_ms, E2E_STEPS, E2E_LAYERS, res->decode_s, res->us_per_call, res->kv_gbs,
         res->total_s, anyattn_plan_describe(s.plan));
  rc = 0;
done:
  dm_graph_free(graph);
  e2e_free(&s);
  return rc;
}

/* The in-between kernels' sources: this many bytes of the inputs' random
 * values (an odd number of words, so the offsets of successive steps do not
 * line up with rows). */
enum { E2E_STEP_SRC_BYTES = (1 << 17) + 4 * 37 };

/* After the last step: Q holds the last layer's words and each layer's
 * newest K and V rows their own, taken from the sources at the offsets the
 * kernel uses (bench_step.h); checks Q, layer 0's K row and the last layer's
 * V row. 0 when they match, else -1 after one line. */
static int e2e_step_check(const e2e_state *s, const bench_step_args *a, const void *q_src, const void *kv_src) {
  const int pos = E2E_PROMPT + E2E_STEPS - 1, last = E2E_LAYERS - 1;
  const size_t row = (size_t)s->bt[pos / BENCH_BS] * BENCH_BS + pos % BENCH_BS, src_words = a->src_bytes / 4;
  const struct {
    const char *name;
    const void *dev, *src;
    size_t bytes;
    int layer, tensor;
  } t[3] = {{"Q", s->q, q_src, a->q_bytes, last, 0},
            {"K", e2e_cache(s, 0, 0) + row * a->kv_row_bytes, kv_src, a->kv_row_bytes, 0, 1},
            {"V", e2e_cache(s, last, 1) + row * a->kv_row_bytes, kv_src, a->kv_row_bytes, last, 2}};
  uint32_t *h = (uint32_t *)malloc(a->q_bytes > a->kv_row_bytes ? a->q_bytes : a->kv_row_bytes);
  int rc = h ? 0 : -1;
  for (int i = 0; i < 3 && !rc; i++) {
    if (dm_to_host(s->be, h, t[i].dev, t[i].bytes)) {
      rc = -1;
      break;
    }
    const size_t off = bench_step_src_offset(pos, t[i].layer, t[i].tensor, src_words);
    for (size_t w = 0; w < t[i].bytes / 4; w++) {
      uint32_t want;
      memcpy(&want, (const char *)t[i].src + 4 * ((off + w) % src_words), 4);
      if (h[w] != want) {
        fprintf(stderr, "bench: e2e-step: layer %d's %s, word %zu: 0x%08x, the step kernel writes 0x%08x\n", t[i].layer,
                t[i].name, w, (unsigned)h[w], (unsigned)want);
        rc = -1;
        break;
      }
    }
  }
  free(h);
  return rc;
}

/* The two graphs of e2e-llama8b-step, captured once, and their replays over
 * the same steps: the whole steps (*step_ms, with the K/V bytes the attention
 * calls read) and the in-between kernels alone (*between_ms). 0, else -1. */
static int e2e_step_time(e2e_state *s, const bench_step_args *a, double *step_ms, double *between_ms,
                         double *kv_bytes) {
  dm_graph *steps = e2e_capture(s, a, 1);
  dm_graph *between = steps ? e2e_capture(s, a, 0) : NULL;
  double unused;
  const int rc =
      between && !e2e_replay(s, steps, step_ms, kv_bytes) && !e2e_replay(s, between, between_ms, &unused) ? 0 : -1;
  dm_graph_free(steps);
  dm_graph_free(between);
  return rc;
}

static int run_e2e_step(const bench_options *o, anyattn_context *ctx, const void *chunk, size_t chunk_bytes,
                        e2e_result *res) {
  e2e_state s;
  void *q_src = NULL, *kv_src = NULL;
  double prefill_ms = 0, step_ms = 0, between_ms = 0, kv_bytes = 0;
  int rc = 1;
  size_t kv_elems;
  const void *kvc = kv_chunk(o, chunk, chunk_bytes, &kv_elems);
  if (e2e_setup(&s, o, ctx, chunk, chunk_bytes) || e2e_prefill(&s, &prefill_ms)) goto done;
  if (chunk_bytes < E2E_STEP_SRC_BYTES || kv_elems * s.kes < E2E_STEP_SRC_BYTES) {
    fprintf(stderr, "bench: e2e-step: the random chunks are smaller than the step kernel's sources\n");
    goto done;
  }
  q_src = dm_alloc(s.be, E2E_STEP_SRC_BYTES);
  kv_src = dm_alloc(s.be, E2E_STEP_SRC_BYTES);
  if (!q_src || !kv_src || dm_to_device(s.be, q_src, chunk, E2E_STEP_SRC_BYTES) ||
      dm_to_device(s.be, kv_src, kvc, E2E_STEP_SRC_BYTES))
    goto done;
  bench_step_args a;
  memset(&a, 0, sizeof a);
  a.q = s.q; /* the first token's rows: the decode calls' query */
  a.seq_lens_k = (const int32_t *)s.d_kv;
  a.block_table = (const int32_t *)s.d_bt;
  a.block_size = BENCH_BS;
  a.q_bytes = (size_t)BENCH_HQ * BENCH_D * s.es;
  a.kv_row_bytes = (size_t)BENCH_HKV * BENCH_D * s.kes;
  a.q_src = q_src;
  a.kv_src = kv_src;
  a.src_bytes = E2E_STEP_SRC_BYTES;
  if (e2e_step_time(&s, &a, &step_ms, &between_ms, &kv_bytes)) goto done;
  if (!e2e_out_finite(&s, o, 0) || !e2e_out_finite(&s, o, E2E_LAYERS - 1)) {
    fprintf(stderr, "bench: e2e-step: output not finite\n");
    goto done;
  }
  if (e2e_step_check(&s, &a, chunk, kvc)) goto done;
  const double attn_ms = step_ms - between_ms;
  if (attn_ms <= 0) {
    fprintf(stderr, "bench: e2e-step: the in-between kernels alone (%.3f s) took the steps' whole time (%.3f s)\n",
            between_ms * 1e-3, step_ms * 1e-3);
    goto done;
  }
  e2e_fill_result(res, &s, prefill_ms, attn_ms, kv_bytes);
  res->step = 1;
  res->step_total_s = step_ms * 1e-3;
  res->between_s = between_ms * 1e-3;
  printf("e2e-llama8b-step: prefill %d tokens x %d layers %.3f ms; decode %d steps x %d layers, a kernel writing "
         "Q and the newest K/V before each call: step total %.3f s, in-between alone %.3f s, attention %.3f s "
         "(%.2f us per call, %.1f GB/s of K/V); attention total %.3f s  [%s]\n",
         E2E_PROMPT, E2E_LAYERS, prefill_ms, E2E_STEPS, E2E_LAYERS, res->step_total_s, res->between_s,
         res->decode_s, res->us_per_call, res->kv_gbs, res->total_s, anyattn_plan_describe(s.plan));
  rc = 0;
done:
  dm_free(s.be, q_src);
  dm_free(s.be, kv_src);
  e2e_free(&s);
  return rc;
}

/* ---- --json output -------------------------------------------------------------
 * One object per run: what ran (library version, workload, backend, device,
 * date, commit, command line), the ceilings measured in the run, the e2e
 * figures (e2e-llama8b, e2e-llama8b-step) and one entry per case; bench/results/make_table.py
 * reads it. Every write is checked; the first failure is reported once, when
 * the file is closed, and makes bench exit 1. */
typedef struct {
  FILE *f;
  const char *path;
  int err; /* errno of the first failed write; 0 while every write went through */
} json_out;

static void json_printf(json_out *j, const char *fmt, ...) {
  if (!j->f || j->err) return;
  va_list ap;
  va_start(ap, fmt);
  errno = 0;
  if (vfprintf(j->f, fmt, ap) < 0) j->err = errno ? errno : EIO;
  va_end(ap);
}

/* s as a JSON string: quotes, backslashes and control characters escaped. */
static void json_string(json_out *j, const char *s) {
  json_printf(j, "\"");
  for (; *s; s++) {
    const unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      json_printf(j, "\\%c", c);
    else if (c < 0x20)
      json_printf(j, "\\u%04x", c);
    else
      json_printf(j, "%c", c);
  }
  json_printf(j, "\"");
}

/* Closes the file; 0 when every write and the close succeeded, else 1 with
 * one line on stderr. */
static int json_close(json_out *j) {
  if (!j->f) return 0;
  errno = 0;
  if (fclose(j->f) != 0 && !j->err) j->err = errno ? errno : EIO;
  j->f = NULL;
  if (!j->err) return 0;
  fprintf(stderr, "anyattn: cannot write --json file '%s': %s\n", j->path, strerror(j->err));
  return 1;
}

static void str_append(char *buf, size_t n, const char *fmt, ...) {
  const size_t len = strlen(buf);
  if (len + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, n - len, fmt, ap);
  va_end(ap);
}

/* The command line of this run, rebuilt from the parsed options (the --json
 * path as its file name), after the environment settings that change what
 * the library runs. */
static void bench_command(const bench_options *o, char *buf, size_t n) {
  static const char *const env[] = {"ANYATTN_TREE", "ANYATTN_CUDA_CLUSTERS", "ANYATTN_CUDA_TMA", "OMP_NUM_THREADS"};
  buf[0] = 0;
  for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
    const char *v = getenv(env[i]);
    if (v && *v) str_append(buf, n, "%s=%s ", env[i], v); /* empty: unset, as the library reads it */
  }
  str_append(buf, n, "anyattn bench");
  if (o->backend != ANYATTN_BACKEND_AUTO) str_append(buf, n, " --backend %s", anyattn_backend_name(o->backend));
  if (o->device) str_append(buf, n, " --device %d", o->device);
  if (o->cases)
    str_append(buf, n, " --cases %s", o->cases);
  else
    str_append(buf, n, " --workload %s", o->workload);
  if (o->filter) str_append(buf, n, " --filter '%s'", o->filter);
  if (o->graph) str_append(buf, n, " --graph");
  if (o->config) str_append(buf, n, " --config %s", o->config);
  if (o->iters > 0) str_append(buf, n, " --iters %d", o->iters);
  if (o->dtype != ANYATTN_DTYPE_BF16) str_append(buf, n, " --dtype %s", tl_dtype_name(o->dtype));
  if (o->kv_dtype != ANYATTN_KV_AS_Q) str_append(buf, n, " --kv-dtype %s", anyattn_kv_dtype_name(o->kv_dtype));
  if (o->prior_writes == ANYATTN_PRIOR_WRITES_NEW_KEYS) str_append(buf, n, " --prior-writes new-keys");
  if (o->hints != BENCH_HINTS_ALL) str_append(buf, n, " --hints %s", o->hints == BENCH_HINTS_MAX ? "max" : "none");
  if (o->head_dim > 0) str_append(buf, n, " --head-dim %d", o->head_dim);
  if (o->no_flush) str_append(buf, n, " --no-flush");
  if (o->max_context > 0) str_append(buf, n, " --max-context %d", o->max_context);
  if (o->stage_kv > 0) str_append(buf, n, " --stage-kv %d", o->stage_kv);
  if (o->json_path) {
    const char *base = strrchr(o->json_path, '/');
    str_append(buf, n, " --json %s", base ? base + 1 : o->json_path);
  }
}

/* The object's fields up to its e2e figures and cases. The commit comes from
 * ANYATTN_COMMIT (bench/run_h200.sh sets it from git); null when unset. */
static void json_header(json_out *j, const bench_options *req, const bench_options *o, const char *dev,
                        const char *date, double bw_gbs, double paged_gbs, double peak_gflops) {
  char cmd[1024];
  bench_command(req, cmd, sizeof cmd);
  const char *commit = getenv("ANYATTN_COMMIT");
  json_printf(j, "{\"version\": ");
  json_string(j, anyattn_version_string());
  json_printf(j, ", \"workload\": ");
  json_string(j, o->workload);
  json_printf(j, ", \"backend\": ");
  json_string(j, anyattn_backend_name(o->backend));
  json_printf(j, ", \"device\": ");
  json_string(j, dev);
  json_printf(j, ", \"date\": ");
  json_string(j, date);
  json_printf(j, ", \"commit\": ");
  if (commit && commit[0])
    json_string(j, commit);
  else
    json_printf(j, "null");
  json_printf(j, ", \"command\": ");
  json_string(j, cmd);
  json_printf(j, ", \"graph\": %d, \"dtype\": ", o->graph);
  json_string(j, tl_dtype_name(o->dtype));
  json_printf(j, ", \"kv_dtype\": ");
  json_string(j, o->kv_dtype == ANYATTN_KV_AS_Q ? tl_dtype_name(o->dtype) : anyattn_kv_dtype_name(o->kv_dtype));
  json_printf(j, ", \"bandwidth_gbs\": %.3f, ", bw_gbs);
  if (paged_gbs > 0) json_printf(j, "\"paged_bandwidth_gbs\": %.3f, ", paged_gbs);
  json_printf(j, "\"peak_gflops\": %.3f, ", peak_gflops);
}

static void json_e2e(json_out *j, const e2e_result *e) {
  json_printf(j,
              "\"e2e\": {\"prefill_ms\": %.3f, \"decode_s\": %.4f, \"us_per_call\": %.3f, \"kv_gbs\": %.3f, "
              "\"total_s\": %.4f, \"plan\": ",
              e->prefill_ms, e->decode_s, e->us_per_call, e->kv_gbs, e->total_s);
  json_string(j, e->plan);
  if (e->step) /* e2e-llama8b-step: decode_s is the step total less the in-between kernels alone */
    json_printf(j, ", \"step_total_s\": %.4f, \"between_alone_s\": %.4f", e->step_total_s, e->between_s);
  json_printf(j, "}, ");
}

static void json_case(json_out *j, int first, const char *name, const bench_result *r, double gbs, double gflops) {
  json_printf(j, "%s  {\"case\": ", first ? "" : ",\n");
  json_string(j, name);
  json_printf(j, ", \"us\": %.3f, \"kv_gbs\": %.3f, \"gflops\": %.3f, \"pct_bw\": %.2f, ", r->us, gbs, gflops,
              r->pct_bw);
  if (r->ceil_calls)
    json_printf(j,
                "\"pct_paged\": %.2f, \"ceilings\": {\"calls\": %d, \"bandwidth_gbs\": %.3f, "
                "\"paged_bandwidth_gbs\": %.3f, \"peak_gflops\": %.3f}, ",
                r->pct_paged, r->ceil_calls, r->ceil_read_gbs, r->ceil_paged_gbs, r->ceil_gflops);
  json_printf(j, "\"pct_peak\": %.2f, \"plan\": ", r->pct_peak);
  json_string(j, r->config);
  json_printf(j, ", \"choice\": ");
  json_string(j, r->choice);
  json_printf(j, "}");
}

/* Cells too large to finish in seconds on a few CPU cores are reported, not run. */
static int too_big_for_cpu(const bench_case *c) {
  double flops = 0, bytes = 0;
  for (int s = 0; s < c->num_seqs; s++) {
    flops += 4.0 * BENCH_HQ * BENCH_D * (double)c->q_lens[s] * c->kv_lens[s] * 0.5;
    bytes += 4.0 * BENCH_HKV * BENCH_D * (double)c->kv_lens[s];
  }
  return flops > 2e10 || bytes > 2e9;
}

/* 1 when `name` contains one of the '|'-separated texts of `filter`. */
static int name_matches(const char *name, const char *filter) {
  for (const char *p = filter;;) {
    const size_t len = strcspn(p, "|");
    for (const char *n = name; len && *n; n++)
      if (!strncmp(n, p, len)) return 1;
    if (!p[len]) return 0;
    p += len + 1;
  }
}

/* The cases this run times: --cases, else the workload's list, less those
 * whose name matches no text of --filter. 0, or 2 (bad --cases, an e2e
 * workload on a CPU, e2e-llama8b-step without CUDA) or 1 (the filter leaves
 * nothing) after one line on stderr. */
static int select_cases(const bench_options *o, int gpu, case_list *cases) {
  if (is_e2e(o->workload) && !gpu) {
    fprintf(stderr, "anyattn: workload %s needs a GPU backend (409,600 calls)\n", o->workload);
    return 2;
  }
  if (!strcmp(o->workload, "e2e-llama8b-step") && (o->backend != ANYATTN_BACKEND_CUDA || !bench_step_built)) {
    fprintf(stderr, "anyattn: workload e2e-llama8b-step needs the CUDA backend (its in-between kernel is CUDA)\n");
    return 2;
  }
  if (o->cases && bench_parse_cases(cases, o->cases)) {
    fprintf(stderr, "anyattn: bad --cases '%s' (BxC decode, pBxL prefill, comma separated)\n", o->cases);
    return 2;
  }
  if (!o->cases) bench_build_workload(cases, o->workload, gpu);
  if (!o->filter) return 0;
  int kept = 0;
  for (int i = 0; i < cases->count; i++) {
    bench_case *c = &cases->items[i];
    if (name_matches(c->name, o->filter)) cases->items[kept++] = *c;
    else free(c->q_lens), free(c->kv_lens);
  }
  cases->count = kept;
  if (kept) return 0;
  fprintf(stderr, "anyattn: no case of %s matches --filter '%s'\n", o->cases ? o->cases : o->workload, o->filter);
  return 1;
}

/* --list: each case as one JSON line, its name and every sequence's query and
 * key counts, "skip" where the CPU would not run it; nothing is timed. */
static void list_cases(const case_list *l, int gpu) {
  for (int i = 0; i < l->count; i++) {
    const bench_case *c = &l->items[i];
    printf("{\"case\": \"%s\", \"q_lens\": [", c->name);
    for (int s = 0; s < c->num_seqs; s++) printf("%s%d", s ? ", " : "", c->q_lens[s]);
    printf("], \"kv_lens\": [");
    for (int s = 0; s < c->num_seqs; s++) printf("%s%d", s ? ", " : "", c->kv_lens[s]);
    printf("]%s}\n", !gpu && too_big_for_cpu(c) ? ", \"skip\": \"too large for the CPU\"" : "");
  }
}

int bench_main(const bench_options *opt) {
  if (!bench_workload_known(opt->workload)) {
    fprintf(stderr, "anyattn: unknown workload '%s' (known: %s)\n", opt->workload, bench_workload_names());
    return 2;
  }
  if (!strncmp(opt->workload, "cp-", 3)) {
    fprintf(stderr, "anyattn: workload %s runs through cp_bench_main (cp_bench.c)\n", opt->workload);
    return 2;
  }
  bench_head_dim = opt->head_dim > 0 ? opt->head_dim : BENCH_DEFAULT_D;
  anyattn_context *ctx = NULL;
  if (anyattn_context_create(opt->backend, opt->device, &ctx) != ANYATTN_STATUS_OK) {
    fprintf(stderr, "anyattn: %s\n", anyattn_last_error());
    return 1;
  }
  bench_options o = *opt;
  o.backend = anyattn_context_backend(ctx);
  const int gpu = o.backend != ANYATTN_BACKEND_CPU;
  if (o.graph && !gpu) {
    fprintf(stderr, "anyattn: --graph needs a GPU backend\n");
    anyattn_context_free(ctx);
    return 2;
  }
  if (dm_set_device(o.backend, o.device)) {
    anyattn_context_free(ctx);
    return 1;
  }
  char dev[128] = "";
  anyattn_device_name(o.backend, o.device, dev, sizeof dev);

  case_list cases = {0};
  const int bad_cases = select_cases(&o, gpu, &cases);
  if (bad_cases || o.list) {
    if (!bad_cases) list_cases(&cases, gpu);
    bench_free_cases(&cases);
    anyattn_context_free(ctx);
    return bad_cases;
  }

  /* Ceilings first, in this run. */
  double bw_gbs, peak_gflops, paged_gbs = 0.0;
  const char *bw_what, *peak_what;
  /* a block's K (or V) rows: the page the CPU's paged read ceiling reads */
  const size_t page_bytes = (size_t)BENCH_BS * BENCH_HKV * BENCH_D * anyattn_kv_dtype_size(o.kv_dtype, o.dtype);
  if (gpu) {
    bw_gbs = aa_gpu_copy_bandwidth_gbs(o.device);
    peak_gflops = 1e3 * aa_gpu_bf16_matmul_tflops(o.device);
    bw_what = "device-to-device copy, read+write";
    peak_what = "cuBLAS bf16 matmul 8192^3";
  } else {
    /* held for the run: each case samples them again beside its calls */
    o.ceilings = aa_cpu_ceilings_create(page_bytes);
    aa_cpu_ceiling_sample cs = {0.0, 0.0, 0.0};
    if (o.ceilings)
      aa_cpu_ceilings_measure(o.ceilings, &cs);
    else /* the cases still run; their percentages read 0 */
      fprintf(stderr, "anyattn: bench: no memory for the CPU ceilings' 1 GiB buffer; no ceilings this run\n");
    bw_gbs = cs.read_gbs;
    paged_gbs = cs.paged_gbs;
    peak_gflops = cs.fma_gflops;
    bw_what = "streaming read";
    peak_what = "fp32 FMA";
  }

  time_t now = time(NULL);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  printf("anyattn %s bench: workload %s, backend %s, device %s, %s, %s%s\n", anyattn_version_string(),
         o.cases ? o.cases : o.workload, anyattn_backend_name(o.backend), dev, date,
         o.graph ? "graph replay" : "stream launches", o.no_flush ? ", no L2 flush" : "");
  printf("shape: %d q heads, %d kv heads, head dim %d, %s%s%s, block size %d, shuffled pages, causal\n", BENCH_HQ,
         BENCH_HKV, BENCH_D, tl_dtype_name(o.dtype), o.kv_dtype != ANYATTN_KV_AS_Q ? ", K/V caches " : "",
         o.kv_dtype != ANYATTN_KV_AS_Q ? anyattn_kv_dtype_name(o.kv_dtype) : "", BENCH_BS);
  printf("ceilings (this run): bandwidth %.1f GB/s (%s), compute %.1f GFLOP/s (%s)\n", bw_gbs, bw_what,
         peak_gflops, peak_what);
  if (!gpu)
    printf(
        "paged read (this run): %.1f GB/s (%zu KiB pages in a shuffled order, no math); each case's %%bw, %%pg\n"
        "(of the paged read) and %%peak are medians over its calls of the call's figure over the ceilings\n"
        "sampled just before it\n",
        paged_gbs, page_bytes >> 10);
  printf("%-26s %12s %10s %6s %10s %6s %s %s\n", "case", "us", "KV GB/s", "%bw", "GFLOP/s", "%peak",
         gpu ? "" : "   %pg", "plan");

  /* A 16 MiB chunk of random values to tile the inputs with. */
  const size_t es = anyattn_dtype_size(o.dtype);
  const size_t chunk_elems = ((size_t)8 << 20) + 37; /* odd size: rows don't repeat in lockstep */
  void *chunk = malloc(chunk_elems * es);
  uint64_t rng = 0x5EEDu;
  tl_fill_normal(o.dtype, chunk, chunk_elems, 1.0f, &rng);
  /* GPU: flush the 60 MB L2 between timed calls, as triton's do_bench does. */
  size_t flush_bytes = gpu ? (size_t)256 << 20 : 0;
  void *flush_buf = gpu ? dm_alloc(o.backend, flush_bytes) : NULL;

  json_out json = {NULL, o.json_path, 0};
  if (o.json_path) {
    json.f = fopen(o.json_path, "w");
    if (!json.f) {
      fprintf(stderr, "anyattn: cannot write --json file '%s': %s\n", o.json_path, strerror(errno));
      free(chunk);
      dm_free(o.backend, flush_buf);
      aa_cpu_ceilings_free(o.ceilings);
      bench_free_cases(&cases);
      anyattn_context_free(ctx);
      return 1;
    }
    json_header(&json, opt, &o, dev, date, bw_gbs, paged_gbs, peak_gflops);
  }
  int failures = 0, first = 1;
  if (is_e2e(o.workload)) {
    e2e_result e2e;
    memset(&e2e, 0, sizeof e2e);
    const int bad = strcmp(o.workload, "e2e-llama8b-step") ? run_e2e(&o, ctx, chunk, chunk_elems * es, &e2e)
                                                          : run_e2e_step(&o, ctx, chunk, chunk_elems * es, &e2e);
    failures += bad;
    if (!bad) json_e2e(&json, &e2e);
  }
  json_printf(&json, "\"cases\": [\n");
  for (int i = 0; i < cases.count; i++) {
    const bench_case *c = &cases.items[i];
    if (!gpu && too_big_for_cpu(c)) {
      printf("%-26s %12s\n", c->name, "skipped (too large for the CPU)");
      continue;
    }
    bench_result r;
    memset(&r, 0, sizeof r);
    if (bench_run_case(&o, ctx, c, chunk, chunk_elems * es, flush_buf, flush_bytes, &r)) {
      printf("%-26s %12s\n", c->name, "FAILED");
      failures++;
      continue;
    }
    double gbs = r.kv_bytes / (r.us * 1e-6) / 1e9;
    double gflops = r.flops / (r.us * 1e-6) / 1e9;
    const int same = !strcmp(r.config, r.choice); /* the CPU: one tiling, the plan's */
    /* GPU: percentages of the run's ceilings (the CPU's are of the samples beside its calls) */
    if (!r.ceil_calls) {
      r.pct_bw = bw_gbs > 0 ? 100.0 * gbs / bw_gbs : 0.0;
      r.pct_peak = peak_gflops > 0 ? 100.0 * gflops / peak_gflops : 0.0;
    }
    char pg[16] = "";
    if (r.ceil_calls) snprintf(pg, sizeof pg, "%6.1f", r.pct_paged);
    else if (!gpu)
      snprintf(pg, sizeof pg, "%6s", "-");
    printf("%-26s %12.1f %10.1f %6.1f %10.1f %6.1f %s %s%s%s\n", c->name, r.us, gbs, r.pct_bw, gflops, r.pct_peak, pg,
           r.config, same ? "" : " | run: ", same ? "" : r.choice);
    fflush(stdout);
    json_case(&json, first, c->name, &r, gbs, gflops);
    first = 0;
  }
  json_printf(&json, "\n]}\n");
  if (json_close(&json)) failures++;
  free(chunk);
  dm_free(o.backend, flush_buf);
  aa_cpu_ceilings_free(o.ceilings);
  bench_free_cases(&cases);
  anyattn_context_free(ctx);
  return failures ? 1 : 0;
}
