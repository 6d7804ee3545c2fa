/* test_graph_replay.c: one anyattn_run captured in a CUDA graph at padded
 * sizes (num_seqs = limits.max_seqs, num_tokens = limits.max_tokens), then
 * replayed for decode-only, prefill-only and mixed batches with fewer real
 * sequences and other query and context lengths. Between replays only device
 * buffers change (q and the metadata), as a serving engine does; every replay
 * is checked against the double reference with the conformance tolerances,
 * and the padding rows of out/lse must keep their NaN poison. Plans with and
 * without split-KV. Exit: 0 pass, 1 fail, 77 skip (no CUDA build or device). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmem.h"
#include "reference.h"
#include "tl_util.h"

typedef struct {
  const char *name;
  anyattn_dtype dtype;
  int head_dim, num_kv_heads, group, block_size, causal, window_left;
  float softcap;
  int sinks, alibi, lse;
  int max_seqs, max_tokens, max_context; /* the limits; the graph is captured at these sizes */
  const char *config; /* problem->config, or NULL: the backend chooses */
} spec;

/* The first and the fourth split (decode-like capture: mean q_len <= 8 and a
 * long max_context) into more segments than a cluster holds, so the last segment
 * to arrive merges them; the second is captured prefill-like and does not split.
 * The fifth and sixth force 8 and 3 segments: 8 merge by the last arrival, 3
 * inside a thread-block cluster on sm_90 (src/gpu/policy.h,
 * AA_GPU_CLUSTER_MERGE). The last runs every batch, decodes included, on the
 * 128-row prefill tile (the two-warpgroup pipeline on sm_90a). */
static const spec kSpecs[] = {
    {"bf16_d128_g4_sinks_split", ANYATTN_DTYPE_BF16, 128, 2, 4, 16, 1, -1, 0.0f, 1, 0, 1, 4, 16, 1500, NULL},
    {"f16_d64_g1_window_nosplit", ANYATTN_DTYPE_F16, 64, 4, 1, 32, 0, 40, 0.0f, 0, 0, 1, 3, 96, 200, NULL},
    {"f32_d128_g2_alibi", ANYATTN_DTYPE_F32, 128, 2, 2, 16, 1, -1, 0.0f, 0, 1, 1, 3, 24, 300, NULL},
    {"bf16_d256_g8_bs5_softcap_alibi_split", ANYATTN_DTYPE_BF16, 256, 1, 8, 5, 1, -1, 20.0f, 0, 1, 0, 2, 4, 700, NULL},
    {"bf16_d128_g4_sinks_k8", ANYATTN_DTYPE_BF16, 128, 8, 4, 16, 1, -1, 0.0f, 1, 0, 1, 3, 6, 2100, "m16n128w8s2-k8"},
    {"f16_d64_g2_window_k3", ANYATTN_DTYPE_F16, 64, 2, 2, 16, 1, 300, 0.0f, 0, 0, 1, 2, 8, 900, "m16n64w4s3-k3"},
    {"bf16_d128_g4_sinks_m128", ANYATTN_DTYPE_BF16, 128, 2, 4, 16, 1, -1, 0.0f, 1, 0, 1, 5, 700, 900, "m128n128w8s2"},
};

enum { KIND_DECODE, KIND_PREFILL, KIND_MIXED };
static const char *const kKindNames[] = {"decode", "prefill", "mixed"};
#define REPLAYS_PER_KIND 6 /* split runs: the counters must come back to zero after each */
#define FP32_EPS 5.9604644775390625e-08 /* 2^-24 */

/* The conformance suite's tolerances (testkit/conformance.c, tol_for). */
static void tolerances(anyattn_dtype dt, double *rel_l2, double *atol, double *rtol, double *lse_atol) {
  switch (dt) {
    case ANYATTN_DTYPE_F32: *rel_l2 = 1e-5, *atol = 1e-5, *rtol = 1e-5, *lse_atol = 1e-5; break;
    case ANYATTN_DTYPE_F16: *rel_l2 = 2e-3, *atol = 2e-4, *rtol = 2.5e-3, *lse_atol = 1e-3; break;
    default: *rel_l2 = 1.2e-2, *atol = 1e-3, *rtol = 1.6e-2, *lse_atol = 1e-3; break;
  }
}

static int imin(int a, int b) { return a < b ? a : b; }

/* Lengths of one replay's real sequences; the rest are padding (q 0, kv 0). */
static int draw_batch(const spec *sp, int kind, uint64_t *r, int *ql, int *kl) {
  const int N = sp->max_seqs, T = sp->max_tokens, C = sp->max_context;
  int n = 0;
  switch (kind) {
    case KIND_DECODE:
      n = tl_rng_int(r, 1, imin(N, T));
      for (int s = 0; s < n; s++) {
        const int pick = tl_rng_int(r, 0, 4);
        ql[s] = 1;
        kl[s] = pick == 0 ? C : pick == 1 ? tl_rng_int(r, 1, 8) : tl_rng_int(r, 1, C);
      }
      break;
    case KIND_PREFILL:
      n = tl_rng_int(r, 1, imin(N, T));
      for (int s = 0; s < n; s++) ql[s] = kl[s] = tl_rng_int(r, 1, imin(C, T / n));
      break;
    default: /* a chunk at a long context, decodes, and a sequence with keys but no query */
      n = imin(N, T) >= 2 ? tl_rng_int(r, 2, imin(N, T)) : 1;
      ql[0] = tl_rng_int(r, 1, T - (n - 1));
      kl[0] = tl_rng_int(r, ql[0], C);
      for (int s = 1; s < n; s++) ql[s] = 1, kl[s] = tl_rng_int(r, 1, C);
      if (n >= 3) ql[1] = 0;
      break;
  }
  for (int s = n; s < N; s++) ql[s] = 0, kl[s] = 0;
  return n;
}

typedef struct {
  void *q, *k, *v, *out, *ws, *cu, *kl, *bt, *alibi, *sinks;
  float *lse;
} dev_bufs;

static void dev_free(dev_bufs *d) {
  void *all[] = {d->q, d->k, d->v, d->out, d->ws, d->cu, d->kl, d->bt, d->alibi, d->sinks, d->lse};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) dm_free(ANYATTN_BACKEND_CUDA, all[i]);
}

/* Runs one spec; returns the number of failed replays (or 1 on setup failure). */
static int run_spec(anyattn_context *ctx, const spec *sp, uint64_t seed) {
  const anyattn_backend be = ANYATTN_BACKEND_CUDA;
  const int N = sp->max_seqs, T = sp->max_tokens, C = sp->max_context, D = sp->head_dim;
  const int hq = sp->num_kv_heads * sp->group, bs = sp->block_size;
  const size_t es = anyattn_dtype_size(sp->dtype);
  const int pages = (C + bs - 1) / bs;
  const int64_t num_blocks = (int64_t)N * pages + 3;
  const size_t rows = (size_t)T * hq, q_elems = rows * D;
  const size_t cache_elems = (size_t)num_blocks * bs * sp->num_kv_heads * D;
  uint64_t r = seed ^ 0x9E3779B97F4A7C15ull;
  for (const char *c = sp->name; *c; c++) r = (r ^ (uint8_t)*c) * 0x100000001b3ull;
  int failures = 0;

  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = hq, pr.num_kv_heads = sp->num_kv_heads, pr.head_dim = D, pr.dtype = sp->dtype;
  pr.block_size = bs, pr.causal = sp->causal, pr.window_left = sp->window_left, pr.softcap = sp->softcap;
  pr.config = sp->config;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = N, lim.max_tokens = T, lim.max_context = C;
  anyattn_plan *plan = NULL;
  dm_graph *graph = NULL;
  dev_bufs d;
  memset(&d, 0, sizeof d);

  int32_t *bt = (int32_t *)malloc(sizeof(int32_t) * (size_t)N * pages);
  int32_t *perm = (int32_t *)malloc(sizeof(int32_t) * (size_t)num_blocks);
  int32_t *cu = (int32_t *)malloc(sizeof(int32_t) * (size_t)(N + 1));
  int *ql = (int *)malloc(sizeof(int) * (size_t)N), *kl = (int *)malloc(sizeof(int) * (size_t)N);
  void *k = malloc(cache_elems * es), *v = malloc(cache_elems * es), *q = malloc(q_elems * es);
  void *poison = malloc(q_elems * es), *out = malloc(q_elems * es);
  float *lse_poison = (float *)malloc(sizeof(float) * rows), *lse = (float *)malloc(sizeof(float) * rows);
  float *alibi = (float *)malloc(sizeof(float) * hq), *sinks = (float *)malloc(sizeof(float) * hq);
  double *ref = (double *)malloc(sizeof(double) * q_elems), *ref_abs = (double *)malloc(sizeof(double) * q_elems);
  double *ref_lse = (double *)malloc(sizeof(double) * rows), *ref_xmag = (double *)malloc(sizeof(double) * rows);
  int32_t *kl32 = (int32_t *)malloc(sizeof(int32_t) * (size_t)N);
  if (!bt || !perm || !cu || !ql || !kl || !k || !v || !q || !poison || !out || !lse_poison || !lse || !alibi ||
      !sinks || !ref || !ref_abs || !ref_lse || !ref_xmag || !kl32) {
    printf("FAIL %s (host allocation failed)\n", sp->name);
    failures = 1;
    goto done;
  }
  if (anyattn_plan_create(ctx, &pr, &lim, &plan) != ANYATTN_STATUS_OK) {
    printf("FAIL %s (plan: %s)\n", sp->name, anyattn_last_error());
    failures = 1;
    goto done;
  }
  printf("plan %s: limits %d seqs, %d tokens, context %d; %s; workspace %zu bytes\n", sp->name, N, T, C,
         anyattn_plan_describe(plan), anyattn_plan_workspace_size(plan));

  /* Pages: each sequence owns `pages` shuffled physical pages. */
  for (int64_t i = 0; i < num_blocks; i++) perm[i] = (int32_t)i;
  for (int64_t i = num_blocks - 1; i > 0; i--) {
    const int64_t j = (int64_t)(tl_rng_next(&r) % (uint64_t)(i + 1));
    const int32_t t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  for (size_t i = 0; i < (size_t)N * pages; i++) bt[i] = perm[i];
  tl_fill_normal(sp->dtype, k, cache_elems, 1.0f, &r);
  tl_fill_normal(sp->dtype, v, cache_elems, 1.0f, &r);
  for (int h = 0; h < hq; h++) {
    alibi[h] = (float)pow(2.0, -8.0 * (h + 1) / hq);
    sinks[h] = (float)(1.5 * tl_rng_normal(&r));
  }
  tl_fill_nan(sp->dtype, poison, q_elems);
  for (size_t i = 0; i < rows; i++) lse_poison[i] = NAN;

  const size_t ws_bytes = anyattn_plan_workspace_size(plan);
  d.q = dm_alloc(be, q_elems * es), d.out = dm_alloc(be, q_elems * es);
  d.k = dm_alloc(be, cache_elems * es), d.v = dm_alloc(be, cache_elems * es);
  d.ws = ws_bytes ? dm_alloc_workspace(be, plan) : NULL;
  d.cu = dm_alloc(be, sizeof(int32_t) * (size_t)(N + 1)), d.kl = dm_alloc(be, sizeof(int32_t) * (size_t)N);
  d.bt = dm_alloc(be, sizeof(int32_t) * (size_t)N * pages);
  d.alibi = dm_alloc(be, sizeof(float) * hq), d.sinks = dm_alloc(be, sizeof(float) * hq);
  d.lse = (float *)dm_alloc(be, sizeof(float) * rows);
  if (!d.q || !d.out || !d.k || !d.v || (ws_bytes && !d.ws) || !d.cu || !d.kl || !d.bt || !d.alibi || !d.sinks ||
      !d.lse || dm_to_device(be, d.k, k, cache_elems * es) || dm_to_device(be, d.v, v, cache_elems * es) ||
      dm_to_device(be, d.bt, bt, sizeof(int32_t) * (size_t)N * pages) ||
      dm_to_device(be, d.alibi, alibi, sizeof(float) * hq) || dm_to_device(be, d.sinks, sinks, sizeof(float) * hq)) {
    printf("FAIL %s (device allocation or copy failed)\n", sp->name);
    failures = 1;
    goto done;
  }

  /* Capture once, at the padded sizes, with no length hints. */
  anyattn_batch db;
  anyattn_batch_init(&db);
  db.num_seqs = N, db.num_tokens = T, db.block_table_stride = pages;
  db.cu_seqlens_q = (const int32_t *)d.cu, db.seq_lens_k = (const int32_t *)d.kl;
  db.block_table = (const int32_t *)d.bt;
  anyattn_tensors dt;
  anyattn_tensors_init(&dt);
  dt.q = d.q, dt.k_cache = d.k, dt.v_cache = d.v, dt.num_blocks = num_blocks, dt.out = d.out;
  dt.lse = sp->lse ? d.lse : NULL;
  dt.alibi_slopes = sp->alibi ? (const float *)d.alibi : NULL;
  dt.sinks = sp->sinks ? (const float *)d.sinks : NULL;
  void *stream = NULL;
  graph = dm_graph_begin(be, &stream);
  if (!graph) {
    printf("FAIL %s (graph capture could not start)\n", sp->name);
    failures = 1;
    goto done;
  }
  const anyattn_status st = anyattn_run(plan, &db, &dt, d.ws, ws_bytes, stream);
  if (dm_graph_end(graph) != 0 || st != ANYATTN_STATUS_OK) {
    printf("FAIL %s (capture: run returned %s: %s)\n", sp->name, anyattn_status_name(st), anyattn_last_error());
    failures = 1;
    goto done;
  }

  anyattn_batch hb = db; /* host copies, for validate and the reference */
  hb.cu_seqlens_q = cu, hb.seq_lens_k = kl32, hb.block_table = bt;
  anyattn_tensors ht;
  anyattn_tensors_init(&ht);
  ht.q = q, ht.k_cache = k, ht.v_cache = v, ht.num_blocks = num_blocks;
  ht.alibi_slopes = sp->alibi ? alibi : NULL;
  ht.sinks = sp->sinks ? sinks : NULL;
  double tol_rel, atol, rtol, lse_atol;
  tolerances(sp->dtype, &tol_rel, &atol, &rtol, &lse_atol);

  for (int rep = 0; rep < 3 * REPLAYS_PER_KIND; rep++) {
    const int kind = rep % 3;
    const int n = draw_batch(sp, kind, &r, ql, kl);
    cu[0] = 0;
    int max_kv = 0;
    for (int s = 0; s < N; s++) {
      cu[s + 1] = cu[s] + ql[s];
      kl32[s] = kl[s];
      if (kl[s] > max_kv) max_kv = kl[s];
    }
    const int tokens = cu[N];
    const size_t real_rows = (size_t)tokens * hq;
    tl_fill_normal(sp->dtype, q, q_elems, sp->softcap > 0.0f ? 3.0f : 1.0f, &r);
    char what[160];
    snprintf(what, sizeof what, "%s replay %d (%s: %d of %d seqs real, %d of %d tokens, kv <= %d)", sp->name, rep,
             kKindNames[kind], n, N, tokens, T, max_kv);
    if (anyattn_validate(plan, &hb, num_blocks) != ANYATTN_STATUS_OK) {
      printf("FAIL %s (validate: %s)\n", what, anyattn_last_error());
      failures++;
      continue;
    }
    if (dm_to_device(be, d.q, q, q_elems * es) || dm_to_device(be, d.cu, cu, sizeof(int32_t) * (size_t)(N + 1)) ||
        dm_to_device(be, d.kl, kl32, sizeof(int32_t) * (size_t)N) || dm_to_device(be, d.out, poison, q_elems * es) ||
        dm_to_device(be, d.lse, lse_poison, sizeof(float) * rows) || dm_graph_launch(graph) || dm_sync(be) ||
        dm_to_host(be, out, d.out, q_elems * es) || dm_to_host(be, lse, d.lse, sizeof(float) * rows)) {
      printf("FAIL %s (device error, see stderr)\n", what);
      failures++;
      goto done; /* a device fault is sticky */
    }
    if (tl_reference(&pr, &hb, &ht, ref, ref_lse, ref_abs, ref_xmag) != 0) {
      printf("FAIL %s (reference rejected the batch)\n", what);
      failures++;
      continue;
    }
    char why[256] = "";
    double num = 0, den = 0, xmag_max = 0, max_err = 0, max_lse = 0;
    for (size_t row = 0; row < real_rows; row++) {
      const double xe = 8.0 * FP32_EPS * ref_xmag[row];
      if (ref_xmag[row] > xmag_max) xmag_max = ref_xmag[row];
      const int empty = isinf(ref_lse[row]);
      for (int e = 0; e < D; e++) {
        const size_t i = row * D + e;
        const double got = tl_load(sp->dtype, out, i), want = ref[i];
        const double err = fabs(got - want), bound = atol + (rtol + 2.0 * xe) * ref_abs[i];
        if (isnan(got) || err > bound || (empty && got != 0.0)) {
          if (!why[0])
            snprintf(why, sizeof why, "out[token %zu, head %zu, %d] = %.7g, reference %.7g, bound %.3g", row / hq,
                     row % hq, e, got, want, bound);
          continue;
        }
        num += err * err, den += want * want;
        if (err > max_err) max_err = err;
      }
      if (!sp->lse) continue;
      const double got = lse[row], want = ref_lse[row];
      const int ok = empty ? (isinf(got) && got < 0)
                           : (!isnan(got) && fabs(got - want) <= lse_atol + xe + 4.0 * FP32_EPS * fabs(want));
      if (!ok && !why[0])
        snprintf(why, sizeof why, "lse[token %zu, head %zu] = %.9g, reference %.9g", row / hq, row % hq, got, want);
      if (!empty && fabs(got - want) > max_lse) max_lse = fabs(got - want);
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    if (!why[0] && rel > tol_rel + 4.0 * FP32_EPS * xmag_max)
      snprintf(why, sizeof why, "relative L2 error %.3g", rel);
    if (!why[0] && (memcmp((char *)out + real_rows * D * es, (char *)poison + real_rows * D * es,
                           (rows - real_rows) * D * es) != 0 ||
                    memcmp(lse + real_rows, lse_poison + real_rows, sizeof(float) * (rows - real_rows)) != 0))
      snprintf(why, sizeof why, "a padding row (past cu_seqlens_q[num_seqs] = %d) was written", tokens);
    if (why[0]) {
      printf("FAIL %s (%s)\n", what, why);
      failures++;
    } else {
      printf("PASS %s  maxabs=%.2e rel=%.2e lse=%.2e\n", what, max_err, rel, max_lse);
    }
  }

done:
  fflush(stdout);
  dm_graph_free(graph);
  dev_free(&d);
  anyattn_plan_free(plan);
  free(bt), free(perm), free(cu), free(ql), free(kl), free(k), free(v), free(q), free(poison), free(out);
  free(lse_poison), free(lse), free(alibi), free(sinks), free(ref), free(ref_abs), free(ref_lse), free(ref_xmag);
  free(kl32);
  return failures;
}

int main(void) {
  const uint64_t seed = tl_seed_from_env_or_time();
  printf("test_graph_replay: seed 0x%llx, rerun with ANYATTN_SEED=0x%llx\n", (unsigned long long)seed,
         (unsigned long long)seed);
  anyattn_context *ctx = NULL;
  const int open = dm_gpu_test_context(ANYATTN_BACKEND_CUDA, &ctx);
  if (open != 0) return open;
  int failures = 0;
  for (size_t i = 0; i < sizeof kSpecs / sizeof kSpecs[0]; i++) failures += run_spec(ctx, &kSpecs[i], seed);
  anyattn_context_free(ctx);
  printf("%s: %d failed replays (seed 0x%llx)\n", failures ? "FAIL" : "PASS", failures, (unsigned long long)seed);
  return failures ? 1 : 0;
}
