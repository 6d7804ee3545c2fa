/* test_fp8.c: fp8 caches beyond the conformance suite: every code of both
 * formats read back exactly (through V with one visible key, and through the
 * scores), descales applied as docs/semantics.md says, and NaN codes
 * propagating like NaN in a 16-bit cache, on the decode and the prefill
 * paths. Without arguments: the CPU backend under each product kind
 * (ANYATTN_CPU_ISA) this machine has. `test_fp8 cuda`: the same on the CUDA
 * backend (ctest's test_fp8_cuda, label gpu; exit 77 without a device). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anyattn.h"
#include "devmem.h"
#include "reference.h"
#include "tl_util.h"

static int failures = 0, checks = 0;
static uint64_t g_seed;

#define CHECK(cond, ...)           \
  do {                             \
    checks++;                      \
    if (!(cond)) {                 \
      failures++;                  \
      printf("FAIL: " __VA_ARGS__); \
      printf("\n");                \
    }                              \
  } while (0)

enum { HKV = 2, GROUP = 4, HQ = HKV * GROUP, BS = 16 };

typedef struct {
  anyattn_kv_dtype kv;
  anyattn_dtype dt;
  int d, q_len, kv_len;
  const char *isa;
} fp8_setup;

/* isa "cuda": the CUDA backend, on device copies of the same inputs. */
static int is_cuda(const char *isa) { return strcmp(isa, "cuda") == 0; }

/* The run on the CUDA backend: t's inputs copied to the device, out and lse
 * (poisoned there) copied back into t's host arrays. */
static void run_on_device(const anyattn_plan *plan, const anyattn_batch *b, const anyattn_tensors *t, int q_elems,
                          size_t cache_bytes, int pages) {
  const anyattn_backend be = ANYATTN_BACKEND_CUDA;
  const size_t qb = sizeof(uint16_t) * (size_t)q_elems, rows = (size_t)b->num_tokens * HQ;
  void *dq = dm_alloc(be, qb), *dout = dm_alloc(be, qb), *dk = dm_alloc(be, cache_bytes);
  void *dv = dm_alloc(be, cache_bytes), *dlse = dm_alloc(be, sizeof(float) * rows);
  void *dcu = dm_alloc(be, sizeof(int32_t) * 2), *dkl = dm_alloc(be, sizeof(int32_t));
  void *dbt = dm_alloc(be, sizeof(int32_t) * (size_t)pages), *dkd = dm_alloc(be, sizeof(float) * HKV);
  void *dvd = dm_alloc(be, sizeof(float) * HKV), *ws = dm_alloc_workspace(be, plan);
  const size_t nd = t->descale_layout == ANYATTN_DESCALE_PER_SEQ_HEAD ? HKV : 1;
  int ok = dq && dout && dk && dv && dlse && dcu && dkl && dbt && dkd && dvd && ws &&
           !dm_to_device(be, dq, t->q, qb) && !dm_to_device(be, dk, t->k_cache, cache_bytes) &&
           !dm_to_device(be, dv, t->v_cache, cache_bytes) && !dm_to_device(be, dcu, b->cu_seqlens_q, sizeof(int32_t) * 2) &&
           !dm_to_device(be, dkl, b->seq_lens_k, sizeof(int32_t)) &&
           !dm_to_device(be, dbt, b->block_table, sizeof(int32_t) * (size_t)pages) &&
           (!t->k_descale || !dm_to_device(be, dkd, t->k_descale, sizeof(float) * nd)) &&
           (!t->v_descale || !dm_to_device(be, dvd, t->v_descale, sizeof(float) * nd)) &&
           !dm_fill_bytes(be, dout, 0xff, qb) && !dm_fill_bytes(be, dlse, 0xff, sizeof(float) * rows);
  CHECK(ok, "device memory");
  if (ok) {
    anyattn_batch db = *b;
    db.cu_seqlens_q = dcu, db.seq_lens_k = dkl, db.block_table = dbt;
    db.max_q_len = b->num_tokens, db.max_kv_len = b->seq_lens_k[0];
    anyattn_tensors dt = *t;
    dt.q = dq, dt.k_cache = dk, dt.v_cache = dv, dt.out = dout, dt.lse = dlse;
    dt.k_descale = t->k_descale ? dkd : NULL, dt.v_descale = t->v_descale ? dvd : NULL;
    const anyattn_status s = anyattn_run(plan, &db, &dt, ws, anyattn_plan_workspace_size(plan), NULL);
    CHECK(s == ANYATTN_STATUS_OK, "run: %s", anyattn_last_error());
    CHECK(!dm_sync(be) && !dm_to_host(be, t->out, dout, qb) && !dm_to_host(be, t->lse, dlse, sizeof(float) * rows),
          "device error after run");
  }
  dm_free(be, dq), dm_free(be, dout), dm_free(be, dk), dm_free(be, dv), dm_free(be, dlse), dm_free(be, dcu);
  dm_free(be, dkl), dm_free(be, dbt), dm_free(be, dkd), dm_free(be, dvd), dm_free(be, ws);
}

/* One sequence of q_len queries over kv_len keys (pages in order), caches of
 * codes k and v, descales kd and vd (per (seq, head) when given two). Runs the
 * backend (the CPU under isa, or CUDA) and the reference; returns 0, or -1
 * when the plan is refused (it then prints why). */
static int run_one(const fp8_setup *S, const void *q, const uint8_t *k, const uint8_t *v, const float *kd,
                   const float *vd, anyattn_descale_layout layout, uint16_t *out, float *lse, double *ref,
                   double *ref_lse, double *ref_abs) {
  anyattn_context *ctx = NULL;
  const int cuda = is_cuda(S->isa);
  if (anyattn_context_create(cuda ? ANYATTN_BACKEND_CUDA : ANYATTN_BACKEND_CPU, 0, &ctx) != ANYATTN_STATUS_OK) {
    CHECK(0, "context: %s", anyattn_last_error());
    return -1;
  }
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = HQ, pr.num_kv_heads = HKV, pr.head_dim = S->d, pr.dtype = S->dt, pr.block_size = BS;
  pr.causal = 1, pr.kv_dtype = S->kv;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = 1, lim.max_tokens = S->q_len, lim.max_context = S->kv_len;
  anyattn_plan *plan = NULL;
  if (!cuda) setenv("ANYATTN_CPU_ISA", S->isa, 1);
  anyattn_status s = anyattn_plan_create(ctx, &pr, &lim, &plan);
  unsetenv("ANYATTN_CPU_ISA");
  if (s != ANYATTN_STATUS_OK) {
    printf("note: %s not run here: %s\n", S->isa, anyattn_last_error());
    CHECK(!cuda, "the CUDA backend refused head dim %d: %s", S->d, anyattn_last_error());
    anyattn_context_free(ctx);
    return -1;
  }
  const int pages = (S->kv_len + BS - 1) / BS;
  int32_t cu[2] = {0, S->q_len}, kl[1] = {S->kv_len}, table[64];
  for (int j = 0; j < pages; j++) table[j] = j;
  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = 1, b.num_tokens = S->q_len, b.cu_seqlens_q = cu, b.seq_lens_k = kl, b.block_table = table;
  b.block_table_stride = pages;
  anyattn_tensors t;
  anyattn_tensors_init(&t);
  t.q = q, t.k_cache = k, t.v_cache = v, t.num_blocks = pages, t.out = out, t.lse = lse;
  t.k_descale = kd, t.v_descale = vd, t.descale_layout = layout;
  tl_fill_nan(S->dt, out, (size_t)S->q_len * HQ * S->d);
  if (cuda) {
    run_on_device(plan, &b, &t, S->q_len * HQ * S->d, (size_t)pages * BS * HKV * S->d, pages);
  } else {
    const size_t ws_size = anyattn_plan_workspace_size(plan);
    void *ws = NULL;
    if (posix_memalign(&ws, 256, ws_size ? ws_size : 256) != 0) return -1;
    s = anyattn_run(plan, &b, &t, ws, ws_size, NULL);
    CHECK(s == ANYATTN_STATUS_OK, "run: %s", anyattn_last_error());
    free(ws);
  }
  CHECK(tl_reference(&pr, &b, &t, ref, ref_lse, ref_abs, NULL) == 0, "reference");
  anyattn_plan_free(plan);
  anyattn_context_free(ctx);
  return 0;
}

/* With one key (q_len = kv_len = 1) the output is v_descale times the V row:
 * V holds all 256 codes (d = 256), so every code is read back; NaN codes come
 * out NaN, every other exactly (x 2 is exact too). */
static void test_every_code(anyattn_kv_dtype kv, anyattn_dtype dt, const char *isa) {
  enum { D = 256 };
  static uint16_t q[HQ * D], out[HQ * D];
  static uint8_t k[BS * HKV * D], v[BS * HKV * D];
  static float lse[HQ];
  static double ref[HQ * D], ref_lse[HQ];
  uint64_t r = 12345;
  tl_fill_normal(dt, q, HQ * D, 1.0f, &r);
  tl_fill_fp8(kv, k, sizeof k, &r);
  for (int h = 0; h < HKV; h++)
    for (int c = 0; c < D; c++) v[h * D + c] = (uint8_t)(c * 97 + h); /* a permutation of the codes */
  const float vd[1] = {2.0f};
  const fp8_setup S = {kv, dt, D, 1, 1, isa};
  if (run_one(&S, q, k, v, NULL, vd, ANYATTN_DESCALE_PER_TENSOR, out, lse, ref, ref_lse, NULL) != 0) return;
  int bad = 0, nans = 0;
  for (int h = 0; h < HQ; h++)
    for (int c = 0; c < D; c++) {
      const uint8_t code = v[(h / GROUP) * D + c];
      const double want = 2.0 * tl_fp8_value(kv, code), got = tl_load(dt, out, (size_t)h * D + c);
      if (isnan(want)) nans++;
      if (isnan(want) ? !isnan(got) : got != want) {
        if (bad++ == 0)
          printf("  %s %s isa %s: code 0x%02x reads %.9g, want %.9g\n", tl_kv_name(kv), tl_dtype_name(dt), isa,
                 code, got, want);
      }
      if (!isnan(want) && ref[h * D + c] != want) bad++;
    }
  CHECK(bad == 0, "%s %s isa %s: %d codes read wrong", tl_kv_name(kv), tl_dtype_name(dt), isa, bad);
  CHECK(nans == HQ * (kv == ANYATTN_KV_FP8_E4M3 ? 2 : 1), "%s: %d NaN codes seen", tl_kv_name(kv), nans);
}

/* Every code through the scores: one key, so lse = x = scale * dot(q, k);
 * q one-hot (1 at one dim per q head) and scale 1/16 make it the code's
 * value / 16 exactly. Over 32 runs the 8 q heads pick 256 (kv head, dim)
 * pairs that hold the 256 codes, spread over every dim of the row (the fused
 * decode path reads dims in a permuted order). A NaN code gives a NaN lse
 * to every q head of its kv head (0 * NaN). */
static void test_every_code_k(anyattn_kv_dtype kv, anyattn_dtype dt, const char *isa) {
  enum { D = 256 };
  static uint16_t q[HQ * D], out[HQ * D];
  static uint8_t k[BS * HKV * D], v[BS * HKV * D];
  static float lse[HQ];
  static double ref[HQ * D], ref_lse[HQ];
  const uint16_t one = dt == ANYATTN_DTYPE_BF16 ? 0x3F80 : 0x3C00;
  int bad = 0, nans = 0;
  memset(v, 0, sizeof v);
  for (int s = 0; s < 32; s++) {
    memset(q, 0, sizeof q);
    memset(k, 0, sizeof k);
    for (int h = 0; h < HQ; h++) {
      const int g = h / GROUP, r = h % GROUP, c = (r * 32 + s) * 2 + g;
      k[g * D + c] = (uint8_t)(g * 128 + r * 32 + s);
      q[h * D + c] = one;
    }
    const fp8_setup S = {kv, dt, D, 1, 1, isa};
    if (run_one(&S, q, k, v, NULL, NULL, ANYATTN_DESCALE_PER_TENSOR, out, lse, ref, ref_lse, NULL) != 0) return;
    int row_nan[HKV] = {0}; /* 0 * NaN: a NaN code makes its whole kv head's scores NaN */
    for (int h = 0; h < HQ; h++)
      row_nan[h / GROUP] |= isnan(tl_fp8_value(kv, (uint8_t)(h / GROUP * 128 + h % GROUP * 32 + s)));
    for (int h = 0; h < HQ; h++) {
      const int g = h / GROUP, r = h % GROUP;
      const uint8_t code = (uint8_t)(g * 128 + r * 32 + s);
      nans += isnan(tl_fp8_value(kv, code));
      const double want = row_nan[g] ? NAN : tl_fp8_value(kv, code) / 16.0;
      /* the CPU's lse is exact here; the GPU's goes through the log2 domain: a few ulps */
      const double tol = is_cuda(isa) ? 1e-6 * fabs(want) : 0.0;
      if (isnan(want) ? !isnan(lse[h]) : !(fabs((double)lse[h] - want) <= tol)) {
        if (bad++ == 0)
          printf("  %s %s isa %s: K code 0x%02x scores %.9g, want %.9g\n", tl_kv_name(kv), tl_dtype_name(dt), isa, code,
                 lse[h], want);
      }
    }
  }
  CHECK(bad == 0, "%s %s isa %s: %d K codes score wrong", tl_kv_name(kv), tl_dtype_name(dt), isa, bad);
  CHECK(nans == (kv == ANYATTN_KV_FP8_E4M3 ? 2 : 1), "%s: %d NaN K codes seen", tl_kv_name(kv), nans);
}

/* Same NaN-ness as the reference everywhere and the 16-bit tolerance on the
 * finite elements, relative to sum_j p_j |v_j| (ref_abs: the scale of rounding
 * error in out, which does not cancel as out itself can): counts mismatches. */
static int compare(anyattn_dtype dt, const uint16_t *out, const float *lse, const double *ref, const double *ref_lse,
                   const double *ref_abs, int rows, int d, int cuda, int *nan_out) {
  const double tol = dt == ANYATTN_DTYPE_BF16 ? 2e-2 : 4e-3;
  /* Outputs this small are underflow, not rounding: fp16's smallest subnormal;
   * for bf16, weights whose exp underflows fp32 (the backends flush fp32
   * subnormals) leave absolute errors far below 2^-100. */
  const double floor_abs = dt == ANYATTN_DTYPE_F16 ? 0x1p-24 : 0x1p-100;
  /* The GPU is held to the conformance bound (docs/semantics.md: atol + rtol * A,
   * atol 1e-3 for bf16, 2e-4 for f16, as test_gpu_fp8): its bf16 prefill tiles
   * miss the floor above by up to ~15% of A on outputs near 1e-13 whose large weights
   * meet zero codes. */
  const double atol = !cuda ? floor_abs : dt == ANYATTN_DTYPE_BF16 ? 1e-3 : 2e-4;
  int bad = 0;
  *nan_out = 0;
  for (int i = 0; i < rows * d; i++) {
    const double got = tl_load(dt, out, (size_t)i);
    const int b = isnan(ref[i]) ? !isnan(got) : !(fabs(got - ref[i]) <= tol * ref_abs[i] + atol);
    *nan_out += isnan(ref[i]) && isnan(got);
    if (b && bad++ == 0)
      printf("  out[row %d, %d] = %.9g, reference %.9g, sum p|v| %.9g\n", i / d, i % d, got, ref[i], ref_abs[i]);
  }
  for (int i = 0; i < rows; i++) {
    const int b = isnan(ref_lse[i]) ? !isnan(lse[i]) : !(fabs(lse[i] - ref_lse[i]) <= 1e-3 * (1.0 + fabs(ref_lse[i])));
    if (b && bad++ == 0) printf("  lse[row %d] = %.9g, reference %.9g\n", i, lse[i], ref_lse[i]);
  }
  return bad;
}

/* A NaN code in K of key 0 (every causal row sees it): all out and lse of that
 * kv head's rows NaN, the other head's rows untouched by it. A NaN code in V
 * of key 3 at dim 5: that element NaN in the rows that see key 3, the rest as
 * the reference. Per (seq, head) descales. */
static void test_nan(anyattn_kv_dtype kv, anyattn_dtype dt, const char *isa, int q_len, int d) {
  const int kv_len = q_len + 37, rows = q_len * HQ;
  const int pages = (kv_len + BS - 1) / BS;
  const size_t ce = (size_t)pages * BS * HKV * d;
  uint16_t *q = malloc(sizeof(uint16_t) * rows * d), *out = malloc(sizeof(uint16_t) * rows * d);
  uint8_t *k = malloc(ce), *v = malloc(ce);
  float *lse = malloc(sizeof(float) * rows);
  double *ref = malloc(sizeof(double) * rows * d), *ref_lse = malloc(sizeof(double) * rows);
  double *ref_abs = malloc(sizeof(double) * rows * d);
  uint64_t r = g_seed ^ (uint64_t)(q_len * 131 + d);
  tl_fill_normal(dt, q, (size_t)rows * d, 1.0f, &r);
  tl_fill_fp8(kv, k, ce, &r);
  tl_fill_fp8(kv, v, ce, &r);
  const float kd[HKV] = {0.25f, 0.5f}, vd[HKV] = {1.5f, 0.125f};
  const uint8_t nan = tl_fp8_nan(kv);
  for (int which = 0; which < 2; which++) {
    uint8_t *c = which == 0 ? k : v;
    const size_t at = which == 0 ? (size_t)0 * HKV * d + 7 /* key 0, head 0, dim 7 */
                                 : (size_t)3 * HKV * d + (size_t)1 * d + 5; /* key 3, head 1, dim 5 */
    const uint8_t keep = c[at];
    c[at] = nan;
    const fp8_setup S = {kv, dt, d, q_len, kv_len, isa};
    if (run_one(&S, q, k, v, kd, vd, ANYATTN_DESCALE_PER_SEQ_HEAD, out, lse, ref, ref_lse, ref_abs) == 0) {
      int nan_out = 0;
      const int bad = compare(dt, out, lse, ref, ref_lse, ref_abs, rows, d, is_cuda(isa), &nan_out);
      /* K: every row of kv head 0 (GROUP q heads per token) is all NaN; V: dim 5 of kv head 1's rows. */
      const int want_nan = which == 0 ? q_len * GROUP * d : q_len * GROUP;
      CHECK(bad == 0 && nan_out == want_nan, "%s %s isa %s q_len %d d %d: NaN in %s: %d mismatches, %d NaN out (want %d)",
            tl_kv_name(kv), tl_dtype_name(dt), isa, q_len, d, which ? "V" : "K", bad, nan_out, want_nan);
    }
    c[at] = keep;
  }
  free(q), free(out), free(k), free(v), free(lse), free(ref), free(ref_lse), free(ref_abs);
}

int main(int argc, char **argv) {
  static const char *const cpu_isas[] = {"fp32", "avx512bf16", "amx"}, *const cuda_isas[] = {"cuda"};
  static const anyattn_kv_dtype kvs[] = {ANYATTN_KV_FP8_E4M3, ANYATTN_KV_FP8_E4M3FNUZ};
  static const anyattn_dtype dts[] = {ANYATTN_DTYPE_BF16, ANYATTN_DTYPE_F16};
  const int cuda = argc > 1 && is_cuda(argv[1]);
  if (argc > 1 && !cuda) {
    fprintf(stderr, "usage: test_fp8 [cuda]\n");
    return 2;
  }
  g_seed = tl_seed_from_env_or_time();
  printf("seed 0x%llx, rerun with ANYATTN_SEED=0x%llx\n", (unsigned long long)g_seed, (unsigned long long)g_seed);
  if (cuda) {
    anyattn_context *ctx = NULL;
    const int open = dm_gpu_test_context(ANYATTN_BACKEND_CUDA, &ctx);
    if (open != 0) return open;
    anyattn_context_free(ctx);
  }
  const char *const *isas = cuda ? cuda_isas : cpu_isas;
  for (int i = 0; i < (cuda ? 1 : 3); i++)
    for (int f = 0; f < 2; f++)
      for (int t = 0; t < 2; t++) {
        test_every_code(kvs[f], dts[t], isas[i]);
        test_every_code_k(kvs[f], dts[t], isas[i]);
        test_nan(kvs[f], dts[t], isas[i], 1, 128);  /* decode */
        test_nan(kvs[f], dts[t], isas[i], 1, 96);   /* decode: 64 dims and a 32-dim tail */
        test_nan(kvs[f], dts[t], isas[i], 1, 80);   /* decode: 64 dims and a 16-dim tail */
        test_nan(kvs[f], dts[t], isas[i], 40, 128); /* prefill */
        /* an odd head dim; the GPU takes multiples of 8: 72, padded to 80, rows not 16-byte aligned */
        test_nan(kvs[f], dts[t], isas[i], 3, cuda ? 72 : 45);
        test_nan(kvs[f], dts[t], isas[i], 2, 512); /* head dim 512 */
      }
  printf("test_fp8: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
