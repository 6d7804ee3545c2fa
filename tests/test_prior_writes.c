/* test_prior_writes.c: batch->prior_writes NEW_KEYS under the write pattern
 * it promises. Each decode step, a kernel (tools/bench_step.cu, launched with
 * programmatic dependent launch on sm_90) writes this step's Q and the
 * newest key's K and V rows on the device; then anyattn_run, on the same
 * stream, with NEW_KEYS, reads its metadata and older K/V before that kernel
 * has finished. Every step's output (poisoned before the step) is checked
 * against the double reference computed from the Q and caches read back
 * after the step: an early read of Q or of the newest row would see the
 * previous step's values. Split-KV plans (the 128-key tile merged by the
 * last arrival, and a 3-segment cluster merge) and an unsplit one. Exit: 0
 * pass, 1 fail, 77 skip (no CUDA build or device). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_step.h"
#include "devmem.h"
#include "reference.h"
#include "tl_util.h"

#define FP32_EPS 5.9604644775390625e-08 /* 2^-24 */
enum { HQ = 32, HKV = 8, D = 128, BS = 16, MAX_CTX = 4096, STEPS = 12, SRC_WORDS = 1 << 14 };

static const char *const kConfigs[] = {NULL, "m16n64w4s3-k3", "m16n64w4s3-k1"};

/* One step checked against the reference on the device's own Q and caches. */
static int check_step(const char *name, int step, int kvlen, const int32_t *bt, const void *hq, const void *hk,
                      const void *hv, const void *out, const float *lse) {
  const size_t cache_elems = (size_t)MAX_CTX * HKV * D, q_elems = (size_t)HQ * D;
  float *qf = (float *)malloc(sizeof(float) * q_elems), *kf = (float *)malloc(sizeof(float) * cache_elems);
  float *vf = (float *)malloc(sizeof(float) * cache_elems);
  double *ref = (double *)malloc(sizeof(double) * q_elems), *ref_abs = (double *)malloc(sizeof(double) * q_elems);
  double ref_lse[HQ], xmag[HQ];
  int bad = !qf || !kf || !vf || !ref || !ref_abs;
  for (size_t i = 0; !bad && i < q_elems; i++) qf[i] = tl_load(ANYATTN_DTYPE_BF16, hq, i);
  for (size_t i = 0; !bad && i < cache_elems; i++)
    kf[i] = tl_load(ANYATTN_DTYPE_BF16, hk, i), vf[i] = tl_load(ANYATTN_DTYPE_BF16, hv, i);
  anyattn_problem rp;
  anyattn_problem_init(&rp);
  rp.num_q_heads = HQ, rp.num_kv_heads = HKV, rp.head_dim = D, rp.dtype = ANYATTN_DTYPE_F32, rp.block_size = BS;
  rp.causal = 1;
  const int32_t cu[2] = {0, 1}, kl[1] = {kvlen};
  anyattn_batch hb;
  anyattn_batch_init(&hb);
  hb.num_seqs = 1, hb.num_tokens = 1, hb.cu_seqlens_q = cu, hb.seq_lens_k = kl, hb.block_table = bt;
  hb.block_table_stride = MAX_CTX / BS;
  anyattn_tensors ht;
  anyattn_tensors_init(&ht);
  ht.q = qf, ht.k_cache = kf, ht.v_cache = vf, ht.num_blocks = MAX_CTX / BS;
  bad = bad || tl_reference(&rp, &hb, &ht, ref, ref_lse, ref_abs, xmag) != 0;
  long wrong = 0;
  for (int row = 0; !bad && row < HQ; row++) {
    for (int e = 0; e < D; e++) {
      const size_t i = (size_t)row * D + e;
      const double got = tl_load(ANYATTN_DTYPE_BF16, out, i);
      const double bound = 1e-3 + (1.6e-2 + 8.0 * FP32_EPS * xmag[row]) * ref_abs[i];
      if (!(fabs(got - ref[i]) <= bound) && wrong++ == 0)
        printf("  %s step %d (kv %d): out[head %d, %d] = %.7g, reference %.7g\n", name, step, kvlen, row, e, got,
               ref[i]);
    }
    if (!(fabs(lse[row] - ref_lse[row]) <= 1e-3 + 4.0 * FP32_EPS * (xmag[row] + fabs(ref_lse[row]))) && wrong++ == 0)
      printf("  %s step %d: lse[head %d] = %.9g, reference %.9g\n", name, step, row, lse[row], ref_lse[row]);
  }
  free(qf), free(kf), free(vf), free(ref), free(ref_abs);
  return bad || wrong != 0;
}

static int run_config(anyattn_context *ctx, const char *config, uint64_t *r) {
  const anyattn_backend be = ANYATTN_BACKEND_CUDA;
  const char *name = config ? config : "library's choice";
  const size_t cache_bytes = (size_t)MAX_CTX * HKV * D * 2, q_bytes = (size_t)HQ * D * 2;
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = HQ, pr.num_kv_heads = HKV, pr.head_dim = D, pr.dtype = ANYATTN_DTYPE_BF16, pr.block_size = BS;
  pr.causal = 1, pr.config = config;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = 1, lim.max_tokens = 1, lim.max_context = MAX_CTX;
  anyattn_plan *plan = NULL;
  if (anyattn_plan_create(ctx, &pr, &lim, &plan) != ANYATTN_STATUS_OK) {
    printf("FAIL %s: plan_create: %s\n", name, anyattn_last_error());
    return 1;
  }
  int32_t bt[MAX_CTX / BS];
  for (int j = 0; j < MAX_CTX / BS; j++) bt[j] = (j * 37) % (MAX_CTX / BS); /* 37 is prime to 256: a permutation */
  void *hk = malloc(cache_bytes), *hv = malloc(cache_bytes), *hq = malloc(q_bytes), *out = malloc(q_bytes);
  void *qsrc = malloc((size_t)SRC_WORDS * 4), *kvsrc = malloc((size_t)SRC_WORDS * 4);
  float lse[HQ];
  tl_fill_normal(ANYATTN_DTYPE_BF16, hk, cache_bytes / 2, 1.0f, r);
  tl_fill_normal(ANYATTN_DTYPE_BF16, hv, cache_bytes / 2, 1.0f, r);
  tl_fill_normal(ANYATTN_DTYPE_BF16, hq, q_bytes / 2, 1.0f, r);
  tl_fill_normal(ANYATTN_DTYPE_BF16, qsrc, (size_t)SRC_WORDS * 2, 1.0f, r);
  tl_fill_normal(ANYATTN_DTYPE_BF16, kvsrc, (size_t)SRC_WORDS * 2, 1.0f, r);
  void *dk = dm_alloc(be, cache_bytes), *dv = dm_alloc(be, cache_bytes), *dq = dm_alloc(be, q_bytes);
  void *dout = dm_alloc(be, q_bytes), *dlse = dm_alloc(be, sizeof lse), *dws = dm_alloc_workspace(be, plan);
  void *dqs = dm_alloc(be, (size_t)SRC_WORDS * 4), *dkvs = dm_alloc(be, (size_t)SRC_WORDS * 4);
  int32_t *dcu = (int32_t *)dm_alloc(be, 8), *dkl = (int32_t *)dm_alloc(be, 4), *dbt = (int32_t *)dm_alloc(be, sizeof bt);
  const int32_t cu[2] = {0, 1};
  int fail = !hk || !hv || !hq || !out || !qsrc || !kvsrc || !dk || !dv || !dq || !dout || !dlse ||
             (anyattn_plan_workspace_size(plan) && !dws) || !dqs || !dkvs || !dcu || !dkl || !dbt ||
             dm_to_device(be, dk, hk, cache_bytes) || dm_to_device(be, dv, hv, cache_bytes) ||
             dm_to_device(be, dq, hq, q_bytes) || dm_to_device(be, dqs, qsrc, (size_t)SRC_WORDS * 4) ||
             dm_to_device(be, dkvs, kvsrc, (size_t)SRC_WORDS * 4) || dm_to_device(be, dcu, cu, sizeof cu) ||
             dm_to_device(be, dbt, bt, sizeof bt);
  if (fail) printf("FAIL %s: device memory\n", name);
  int wrong = 0;
  for (int step = 0; !fail && step < STEPS; step++) {
    const int kvlen = 1000 + step * 251; /* 1000 .. 3761: 8 to 30 tiles of 128 keys */
    anyattn_batch b;
    anyattn_batch_init(&b);
    b.num_seqs = 1, b.num_tokens = 1, b.cu_seqlens_q = dcu, b.seq_lens_k = dkl, b.block_table = dbt;
    b.block_table_stride = MAX_CTX / BS;
    b.prior_writes = ANYATTN_PRIOR_WRITES_NEW_KEYS;
    anyattn_tensors t;
    anyattn_tensors_init(&t);
    t.q = dq, t.k_cache = dk, t.v_cache = dv, t.num_blocks = MAX_CTX / BS, t.out = dout, t.lse = (float *)dlse;
    bench_step_args sa;
    memset(&sa, 0, sizeof sa);
    sa.q = dq, sa.k_cache = dk, sa.v_cache = dv, sa.seq_lens_k = dkl, sa.block_table = dbt, sa.block_size = BS;
    sa.layer = step, sa.q_bytes = q_bytes, sa.kv_row_bytes = (size_t)HKV * D * 2;
    sa.q_src = dqs, sa.kv_src = dkvs, sa.src_bytes = (size_t)SRC_WORDS * 4;
    fail = dm_to_device(be, dkl, &kvlen, 4) || dm_fill_bytes(be, dout, 0xff, q_bytes) ||
           dm_fill_bytes(be, dlse, 0xff, sizeof lse) || dm_sync(be) || bench_step_kernel_launch(&sa, NULL) != 0;
    if (!fail && anyattn_run(plan, &b, &t, dws, anyattn_plan_workspace_size(plan), NULL) != ANYATTN_STATUS_OK) {
      printf("FAIL %s: run: %s\n", name, anyattn_last_error());
      fail = 1;
    }
    fail = fail || dm_sync(be) || dm_to_host(be, out, dout, q_bytes) || dm_to_host(be, lse, dlse, sizeof lse) ||
           dm_to_host(be, hq, dq, q_bytes) || dm_to_host(be, hk, dk, cache_bytes) || dm_to_host(be, hv, dv, cache_bytes);
    if (!fail) wrong += check_step(name, step, kvlen, bt, hq, hk, hv, out, lse);
  }
  printf("%s %s: %d steps with a kernel writing Q and the newest K/V before each call, %d wrong [%s]\n",
         fail || wrong ? "FAIL" : "PASS", name, STEPS, wrong, anyattn_plan_describe(plan));
  anyattn_plan_free(plan);
  dm_free(be, dk), dm_free(be, dv), dm_free(be, dq), dm_free(be, dout), dm_free(be, dlse), dm_free(be, dws);
  dm_free(be, dqs), dm_free(be, dkvs), dm_free(be, dcu), dm_free(be, dkl), dm_free(be, dbt);
  free(hk), free(hv), free(hq), free(out), free(qsrc), free(kvsrc);
  return fail || wrong != 0;
}

int main(void) {
  const uint64_t seed = tl_seed_from_env_or_time();
  printf("test_prior_writes: seed 0x%llx, rerun with ANYATTN_SEED=0x%llx\n", (unsigned long long)seed,
         (unsigned long long)seed);
  anyattn_context *ctx = NULL;
  const int open = dm_gpu_test_context(ANYATTN_BACKEND_CUDA, &ctx);
  if (open != 0) return open;
  uint64_t r = seed;
  int failures = 0;
  for (size_t i = 0; i < sizeof kConfigs / sizeof kConfigs[0]; i++) failures += run_config(ctx, kConfigs[i], &r);
  anyattn_context_free(ctx);
  printf("%s (seed 0x%llx)\n", failures ? "FAIL" : "PASS", (unsigned long long)seed);
  return failures ? 1 : 0;
}
