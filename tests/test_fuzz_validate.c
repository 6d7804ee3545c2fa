/* test_fuzz_validate.c: bounded random fuzz of anyattn_validate and
 * anyattn_plan_create with mostly-invalid fields. Neither may crash or return
 * an unknown status, and validate must say OK exactly when the simple checker
 * below (written from the header and docs/semantics.md) says the batch is valid.
 * Usage: test_fuzz_validate [iterations] (seed from $ANYATTN_SEED or the clock). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anyattn.h"
#include "tl_util.h"

#define MAX_SEQS 12
#define MAX_STRIDE 16

static int failures = 0;

static int known_status(anyattn_status s) {
  return strcmp(anyattn_status_name(s), "unknown status") != 0;
}

typedef struct {
  int max_seqs, max_tokens, max_context, block_size;
} plan_params;

/* The documented rules, one by one, without looking at api.c. */
static int checker_valid(const plan_params *pp, const anyattn_batch *b, int64_t num_blocks) {
  if (b->struct_size != sizeof *b) return 0;
  if (b->num_seqs < 0 || b->num_seqs > pp->max_seqs) return 0;
  if (b->num_tokens < 0 || b->num_tokens > pp->max_tokens) return 0;
  if (b->num_tokens > 0 && b->num_seqs == 0) return 0;
  if (b->num_tokens > 0 && num_blocks <= 0) return 0;
  if (b->num_seqs == 0) return 1;
  if (!b->cu_seqlens_q || !b->seq_lens_k || !b->block_table || b->block_table_stride <= 0) return 0;
  if (b->cu_seqlens_q[0] != 0) return 0;
  if (b->cu_seqlens_q[b->num_seqs] > b->num_tokens) return 0; /* trailing rows may be padding */
  for (int s = 0; s < b->num_seqs; s++) {
    const int64_t q_len = (int64_t)b->cu_seqlens_q[s + 1] - b->cu_seqlens_q[s];
    const int64_t kv_len = b->seq_lens_k[s];
    if (q_len < 0) return 0;
    if (kv_len < 0 || kv_len > pp->max_context) return 0;
    if (!b->q_pos && q_len > kv_len) return 0; /* with q_pos: any q_len, positions in [-2^29, 2^29] */
    if (b->q_pos && (b->q_pos[s] < -(1 << 29) || (int64_t)b->q_pos[s] + q_len > (1 << 29))) return 0;
    const int64_t pages = (kv_len + pp->block_size - 1) / pp->block_size;
    if (pages > b->block_table_stride) return 0;
    if (q_len == 0) continue;
    for (int64_t j = 0; j < pages; j++) {
      const int32_t id = b->block_table[s * (int64_t)b->block_table_stride + j];
      if (id < 0 || id >= num_blocks) return 0;
    }
  }
  return 1;
}

static int pick(uint64_t *r, const int *v, int n) { return v[tl_rng_int(r, 0, n - 1)]; }

static int fuzz_validate_once(anyattn_context *ctx, uint64_t *r, long it) {
  static const int sizes[] = {1, 3, 16, 64};
  plan_params pp = {tl_rng_int(r, 1, 8), tl_rng_int(r, 1, 64), tl_rng_int(r, 1, 200), pick(r, sizes, 4)};
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = 4, pr.num_kv_heads = 2, pr.head_dim = 64, pr.block_size = pp.block_size;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = pp.max_seqs, lim.max_tokens = pp.max_tokens, lim.max_context = pp.max_context;
  anyattn_plan *plan = NULL;
  if (anyattn_plan_create(ctx, &pr, &lim, &plan) != ANYATTN_STATUS_OK) {
    printf("FAIL iteration %ld: plan for validate: %s\n", it, anyattn_last_error());
    failures++;
    return 0;
  }

  /* A valid batch first... */
  int32_t cu[MAX_SEQS + 2], kv[MAX_SEQS + 1], table[(MAX_SEQS + 1) * MAX_STRIDE];
  int n = tl_rng_int(r, 0, pp.max_seqs);
  int stride = 1, tokens = 0;
  cu[0] = 0;
  for (int s = 0; s < MAX_SEQS + 1; s++) {
    int k = tl_rng_int(r, 0, 3) == 0 ? 0 : tl_rng_int(r, 0, pp.max_context);
    int room = pp.max_tokens - tokens;
    int q = tl_rng_int(r, 0, 2) == 0 ? 0 : tl_rng_int(r, 0, k < room ? k : room);
    if (s >= n) q = 0;
    kv[s] = k;
    tokens += q;
    cu[s + 1] = tokens;
    const int pages = (k + pp.block_size - 1) / pp.block_size;
    if (s < n && pages > stride) stride = pages;
  }
  if (stride > MAX_STRIDE) { /* keep the table small: shrink long sequences */
    stride = MAX_STRIDE;
    for (int s = 0; s < MAX_SEQS + 1; s++) {
      const int max_k = MAX_STRIDE * pp.block_size;
      if (kv[s] > max_k) kv[s] = max_k;
      if (cu[s + 1] - cu[s] > kv[s]) {
        const int cut = cu[s + 1] - cu[s] - kv[s];
        for (int t = s + 1; t < MAX_SEQS + 2; t++) cu[t] -= cut;
      }
    }
  }
  if (tl_rng_int(r, 0, 3) == 0 && stride < MAX_STRIDE) stride += tl_rng_int(r, 1, MAX_STRIDE - stride);
  /* query positions (batch->q_pos) for a third of the batches: around the keys, or near and past the bounds */
  const int with_qpos = tl_rng_int(r, 0, 2) == 0;
  int32_t qp[MAX_SEQS + 1];
  for (int s = 0; s < MAX_SEQS + 1; s++) {
    static const int32_t edge[] = {-(1 << 29) - 1, -(1 << 29), (1 << 29) - 1, (1 << 29), INT32_MIN, INT32_MAX};
    qp[s] = tl_rng_int(r, 0, 7) == 0 ? edge[tl_rng_int(r, 0, 5)] : tl_rng_int(r, -60, kv[s] + 60);
    if (with_qpos && tl_rng_int(r, 0, 3) == 0) { /* more queries than keys: valid with q_pos */
      const int extra = tl_rng_int(r, 1, 5);
      if (cu[MAX_SEQS + 1] + extra <= pp.max_tokens)
        for (int t = s + 1; t < MAX_SEQS + 2; t++) cu[t] += extra;
    }
  }
  int64_t num_blocks = tl_rng_int(r, 1, 40);
  for (int i = 0; i < (MAX_SEQS + 1) * MAX_STRIDE; i++) table[i] = tl_rng_int(r, 0, (int)num_blocks - 1);
  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = n;
  b.num_tokens = cu[n];
  b.block_table_stride = stride;

  /* ...then a few mutations, most of which break it. */
  const int mutations = tl_rng_int(r, 0, 3);
  int null_which = -1;
  for (int m = 0; m < mutations; m++) {
    switch (tl_rng_int(r, 0, 11)) {
      case 0: b.num_seqs = tl_rng_int(r, -2, pp.max_seqs + 2); break;
      case 1: b.num_tokens += tl_rng_int(r, -2, 2); break;
      case 2: cu[tl_rng_int(r, 0, MAX_SEQS)] += tl_rng_int(r, -3, 3); break;
      case 3: kv[tl_rng_int(r, 0, MAX_SEQS)] += tl_rng_int(r, -3, 3); break;
      case 4: kv[tl_rng_int(r, 0, MAX_SEQS)] = tl_rng_int(r, -1, pp.max_context + 2); break;
      case 5: table[tl_rng_int(r, 0, (MAX_SEQS + 1) * MAX_STRIDE - 1)] = tl_rng_int(r, -2, (int)num_blocks + 1); break;
      case 6: b.block_table_stride = tl_rng_int(r, -1, MAX_STRIDE); break;
      case 7: num_blocks = tl_rng_int(r, -1, (int)num_blocks + 1); break;
      case 8: b.struct_size = tl_rng_int(r, 0, 3) == 0 ? 0 : sizeof b + 8; break;
      case 9: null_which = tl_rng_int(r, 0, 2); break;
      case 10: cu[0] = tl_rng_int(r, -1, 1); break;
      default: b.num_tokens = tl_rng_int(r, -1, pp.max_tokens + 1); break;
    }
  }
  /* Exact-size copies, so an out-of-bounds read shows under ASan. */
  const int ns = b.num_seqs > 0 ? b.num_seqs : 0;
  const int st = b.block_table_stride > 0 ? b.block_table_stride : 0;
  int32_t *cu_h = (int32_t *)malloc(sizeof(int32_t) * (size_t)(ns + 1));
  int32_t *kv_h = (int32_t *)malloc(sizeof(int32_t) * (size_t)(ns + 1));
  int32_t *tb_h = (int32_t *)malloc(sizeof(int32_t) * (size_t)(ns * st + 1));
  int32_t *qp_h = (int32_t *)malloc(sizeof(int32_t) * (size_t)(ns + 1));
  if (!cu_h || !kv_h || !tb_h || !qp_h) {
    printf("FAIL: out of memory\n");
    exit(1);
  }
  memcpy(cu_h, cu, sizeof(int32_t) * (size_t)(ns + 1));
  memcpy(kv_h, kv, sizeof(int32_t) * (size_t)ns);
  memcpy(qp_h, qp, sizeof(int32_t) * (size_t)ns);
  if (with_qpos) b.q_pos = qp_h;
  for (int s = 0; s < ns; s++)
    for (int j = 0; j < st; j++) tb_h[s * st + j] = table[s * MAX_STRIDE + (j < MAX_STRIDE ? j : 0)];
  b.cu_seqlens_q = null_which == 0 ? NULL : cu_h;
  b.seq_lens_k = null_which == 1 ? NULL : kv_h;
  b.block_table = null_which == 2 ? NULL : tb_h;

  const int want = checker_valid(&pp, &b, num_blocks);
  const anyattn_status s = anyattn_validate(plan, &b, num_blocks);
  const int ok_status = s == ANYATTN_STATUS_OK || s == ANYATTN_STATUS_NULL_POINTER ||
                        s == ANYATTN_STATUS_INVALID_SIZE || s == ANYATTN_STATUS_LIMIT_EXCEEDED ||
                        s == ANYATTN_STATUS_BAD_METADATA || s == ANYATTN_STATUS_STRUCT_SIZE;
  if (!ok_status || (s == ANYATTN_STATUS_OK) != want || (s != ANYATTN_STATUS_OK && !anyattn_last_error()[0])) {
    if (failures < 10) {
      printf("FAIL iteration %ld: validate says %s (\"%s\"), checker says %s\n", it, anyattn_status_name(s),
             anyattn_last_error(), want ? "valid" : "invalid");
      printf("  limits seqs %d tokens %d context %d, block_size %d, num_blocks %lld; batch seqs %d tokens %d stride %d\n",
             pp.max_seqs, pp.max_tokens, pp.max_context, pp.block_size, (long long)num_blocks, b.num_seqs,
             b.num_tokens, b.block_table_stride);
    }
    failures++;
  }
  free(cu_h);
  free(qp_h);
  free(kv_h);
  free(tb_h);
  anyattn_plan_free(plan);
  return want;
}

static void fuzz_plan_once(anyattn_context *ctx, uint64_t *r, long it) {
  static const int dims[] = {-1, 0, 1, 40, 64, 128, 256, 512, 513, 1000};
  static const int sizes[] = {-1, 0, 1, 5, 16, 300, 4096};
  static const float reals[] = {0.0f, -0.0f, 1.0f, -1.0f, NAN, INFINITY, -INFINITY, 0.125f, 1e-30f, 30.0f};
  static const int lims[] = {-1, 0, 1, 7, 1000, 1 << 20};
  anyattn_problem p;
  anyattn_problem_init(&p);
  p.num_q_heads = tl_rng_int(r, -1, 40);
  p.num_kv_heads = tl_rng_int(r, -1, 10);
  p.head_dim = tl_rng_int(r, 0, 4) == 0 ? tl_rng_int(r, -5, 600) : pick(r, dims, 10);
  p.dtype = (anyattn_dtype)tl_rng_int(r, -1, 3);
  p.block_size = tl_rng_int(r, 0, 4) == 0 ? tl_rng_int(r, -2, 200) : pick(r, sizes, 7);
  p.causal = tl_rng_int(r, -1, 2);
  p.window_left = tl_rng_int(r, -3, 100);
  p.window_right = tl_rng_int(r, -3, 100);
  p.scale = tl_rng_int(r, 0, 1) ? 0.0f : reals[tl_rng_int(r, 0, 9)];
  p.softcap = tl_rng_int(r, 0, 1) ? 0.0f : reals[tl_rng_int(r, 0, 9)];
  if (tl_rng_int(r, 0, 20) == 0) p.struct_size = (size_t)tl_rng_int(r, 0, 200);
  anyattn_limits l;
  anyattn_limits_init(&l);
  l.max_seqs = pick(r, lims, 6), l.max_tokens = pick(r, lims, 6), l.max_context = pick(r, lims, 6);
  if (tl_rng_int(r, 0, 20) == 0) l.struct_size = (size_t)tl_rng_int(r, 0, 200);

  const int core_valid = p.struct_size == sizeof p && p.num_q_heads > 0 && p.num_kv_heads > 0 &&
                         p.num_q_heads % p.num_kv_heads == 0 && p.head_dim > 0 && anyattn_dtype_size(p.dtype) != 0 &&
                         p.block_size > 0 && (p.causal == 0 || p.causal == 1) && p.window_left >= -1 &&
                         p.window_right >= -1 && (p.scale == 0.0f || (isfinite(p.scale) && p.scale > 0.0f)) &&
                         isfinite(p.softcap) && p.softcap >= 0.0f && l.struct_size == sizeof l && l.max_seqs > 0 &&
                         l.max_tokens > 0 && l.max_context > 0;
  const int cpu_valid = core_valid && p.head_dim <= 512; /* anyattn.h: CPU head_dim 1..512, block_size >= 1 */
  anyattn_plan *plan = (anyattn_plan *)&l; /* must be overwritten */
  const anyattn_status s = anyattn_plan_create(ctx, &p, &l, &plan);
  const char *why = NULL;
  if (!known_status(s)) why = "unknown status";
  else if (s == ANYATTN_STATUS_OK && plan == NULL) why = "OK with a NULL plan";
  else if (s != ANYATTN_STATUS_OK && plan != NULL) why = "error but plan not set to NULL";
  else if (s != ANYATTN_STATUS_OK && !anyattn_last_error()[0]) why = "error without a message";
  else if (!core_valid && s == ANYATTN_STATUS_OK) why = "accepted an invalid problem";
  else if (cpu_valid && s != ANYATTN_STATUS_OK) why = "rejected a problem the header says the CPU supports";
  if (why) {
    if (failures < 10)
      printf("FAIL plan iteration %ld: %s: %s (\"%s\"); heads %d/%d dim %d dtype %d bs %d causal %d w %d/%d "
             "scale %g softcap %g limits %d/%d/%d\n",
             it, why, anyattn_status_name(s), anyattn_last_error(), p.num_q_heads, p.num_kv_heads, p.head_dim,
             (int)p.dtype, p.block_size, p.causal, p.window_left, p.window_right, (double)p.scale,
             (double)p.softcap, l.max_seqs, l.max_tokens, l.max_context);
    failures++;
  }
  if (s == ANYATTN_STATUS_OK) anyattn_plan_free(plan);
}

int main(int argc, char **argv) {
  const long iterations = argc > 1 ? atol(argv[1]) : 20000;
  const uint64_t seed = tl_seed_from_env_or_time();
  printf("test_fuzz_validate: seed 0x%llx, rerun with ANYATTN_SEED=0x%llx; %ld iterations\n",
         (unsigned long long)seed, (unsigned long long)seed, iterations);
  anyattn_context *ctx = NULL;
  if (anyattn_context_create(ANYATTN_BACKEND_CPU, 0, &ctx) != ANYATTN_STATUS_OK) {
    printf("FAIL: CPU context: %s\n", anyattn_last_error());
    return 1;
  }
  uint64_t r = seed;
  long valid = 0;
  for (long it = 0; it < iterations && failures < 50; it++) {
    valid += fuzz_validate_once(ctx, &r, it);
    fuzz_plan_once(ctx, &r, it);
  }
  anyattn_context_free(ctx);
  printf("test_fuzz_validate: %ld of the batches were valid, %d failures\n", valid, failures);
  return failures ? 1 : 0;
}
