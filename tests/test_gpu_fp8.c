/* test_gpu_fp8.c: the GPU backend with FP8 E4M3 K/V caches (problem->kv_dtype)
 * against the double reference run on the dequantised caches (each code's
 * exact value times its descale, as fp32): decode, prefill and mixed batches,
 * causal and not, GQA, page sizes 1 to 64, head dims 64 to 256 with 72, 80
 * and 192 among them, both E4M3 variants, per-tensor, per-(sequence, kv head)
 * and absent (NULL) descales, split-KV merged by the last arrival and (sm_90) in
 * clusters, forced tiles and role pairs, and q far outside f16's range (the fp8 products
 * run in f16: q is scaled into it), and prefill batches staged to 16-bit
 * (limits.stage_kv_tokens: the run must say it stages; a stage too small for
 * the batch behind a max_kv_len hint that is no bound must give the sequences
 * that do not fit NaN rows, the others exact ones). Codes are random bytes
 * without NaN codes; out and lse are poisoned before each run. An argument
 * runs only the cases whose name contains it. Exit: 0 pass, 1 fail (or no
 * case ran), 77 skip (no CUDA build or device). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmem.h"
#include "reference.h"
#include "tl_util.h"

#define FP32_EPS 5.9604644775390625e-08 /* 2^-24 */

enum { DECODE, PREFILL, MIXED };
enum { PER_TENSOR, PER_SEQ_HEAD, NO_DESCALE };

typedef struct {
  anyattn_dtype dtype;
  anyattn_kv_dtype kv;
  int head_dim, num_kv_heads, group, block_size, causal, kind, descale, hnd;
  int num_seqs, max_kv;
  const char *config; /* NULL: the backend chooses */
  int no_clusters;    /* ANYATTN_CUDA_CLUSTERS=0: split segments merge by the last arrival */
  int qexp;           /* q drawn times 2^qexp, k_descale times 2^-qexp: q outside f16's range, same scores */
  int stage;          /* STAGE_FIT: limits.stage_kv_tokens holds the batch; STAGE_SHORT: it holds the first
                       * sequence only, and the max_kv_len hint (the page size) is no bound */
} fp8_case;
enum { STAGE_NONE, STAGE_FIT, STAGE_SHORT };

static const fp8_case kCases[] = {
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 128, 8, 4, 16, 1, DECODE, PER_TENSOR, 0, 6, 900, NULL, 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 128, 2, 4, 16, 1, DECODE, PER_SEQ_HEAD, 0, 2, 3000, NULL, 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 128, 2, 4, 16, 1, DECODE, PER_SEQ_HEAD, 0, 2, 3000, NULL, 1, 0, STAGE_NONE},
    {ANYATTN_DTYPE_F16, ANYATTN_KV_FP8_E4M3, 128, 4, 2, 32, 1, PREFILL, PER_TENSOR, 0, 2, 300, NULL, 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 128, 2, 4, 16, 1, PREFILL, PER_SEQ_HEAD, 0, 2, 400, "m128n128w8s2", 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 64, 2, 8, 16, 1, PREFILL, PER_TENSOR, 1, 2, 300, "m64n64w4s2", 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_F16, ANYATTN_KV_FP8_E4M3FNUZ, 128, 2, 4, 16, 0, MIXED, PER_SEQ_HEAD, 0, 5, 500, NULL, 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3FNUZ, 64, 1, 8, 1, 1, DECODE, PER_TENSOR, 0, 4, 700, NULL, 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 80, 2, 4, 16, 1, DECODE, PER_SEQ_HEAD, 0, 3, 1500, NULL, 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_F16, ANYATTN_KV_FP8_E4M3, 80, 2, 4, 5, 1, PREFILL, PER_TENSOR, 1, 2, 250, NULL, 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 192, 1, 16, 64, 1, PREFILL, PER_SEQ_HEAD, 0, 2, 300, NULL, 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_F16, ANYATTN_KV_FP8_E4M3, 192, 2, 4, 16, 1, DECODE, NO_DESCALE, 0, 3, 2000, NULL, 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 72, 2, 3, 32, 0, MIXED, PER_TENSOR, 1, 4, 400, NULL, 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 256, 1, 8, 16, 1, MIXED, PER_SEQ_HEAD, 0, 3, 600, NULL, 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_F16, ANYATTN_KV_FP8_E4M3, 128, 2, 4, 16, 1, DECODE, PER_TENSOR, 0, 3, 2000, "m16n64w4s3-k4", 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 128, 2, 4, 16, 1, DECODE, PER_SEQ_HEAD, 0, 3, 1200, NULL, 0, 20, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 128, 2, 4, 16, 1, DECODE, PER_TENSOR, 0, 3, 1200, NULL, 0, -26, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3FNUZ, 256, 2, 4, 16, 1, DECODE, PER_TENSOR, 0, 2, 900, NULL, 0, -26, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 96, 2, 4, 16, 0, MIXED, PER_TENSOR, 0, 4, 500, "m16n64w4s2", 0, 24, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 512, 1, 4, 16, 1, DECODE, PER_SEQ_HEAD, 0, 2, 700, NULL, 0, 0, STAGE_NONE},
    /* the two-warpgroup prefill tile: codes 8 per copy (head dims 120, 56), q far outside f16's range */
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 120, 2, 4, 16, 1, PREFILL, PER_SEQ_HEAD, 0, 2, 500, "m128n128w8s2", 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_F16, ANYATTN_KV_FP8_E4M3FNUZ, 56, 2, 4, 16, 1, PREFILL, PER_TENSOR, 1, 2, 400, "m128n128w8s2", 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 128, 2, 4, 16, 0, PREFILL, PER_TENSOR, 0, 2, 600, "m128n128w8s2", 0, 20, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3FNUZ, 64, 2, 4, 32, 1, MIXED, PER_SEQ_HEAD, 0, 4, 700, "m128n128w8s2", 0, -26, STAGE_NONE},
    /* its codes as TMA boxes (d128): head-major pages of 64, and 8-row boxes */
    {ANYATTN_DTYPE_F16, ANYATTN_KV_FP8_E4M3, 128, 2, 4, 64, 1, PREFILL, PER_TENSOR, 1, 3, 700, "m128n128w8s2", 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3FNUZ, 128, 1, 8, 8, 0, PREFILL, PER_SEQ_HEAD, 0, 2, 500, "m128n128w8s2", 0, 0, STAGE_NONE},
    /* a role pair: decode sequences on the 16-row tile (split, -k3), the rest on the 128-row tile, one launch */
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 128, 2, 4, 16, 1, MIXED, PER_SEQ_HEAD, 0, 6, 900, "m128n128w8s2+m16n128w8s2-k3", 0, 0, STAGE_NONE},
    {ANYATTN_DTYPE_F16, ANYATTN_KV_FP8_E4M3FNUZ, 80, 2, 4, 16, 0, MIXED, PER_TENSOR, 0, 5, 600, "m128n128w8s2+m16n128w8s2", 0, 0, STAGE_NONE},
    /* prefill staged to 16-bit: head dims on the 128- and 64-key tiles, odd pages, head-major pages, both
     * formats, every descale layout, bf16 q far above f16's range (f16 q is not scaled there: its products
     * are the 16-bit kernels', docs/semantics.md, Precision); a stage that holds one sequence of two */
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 128, 2, 4, 16, 1, PREFILL, PER_SEQ_HEAD, 0, 3, 700, NULL, 0, 0, STAGE_FIT},
    {ANYATTN_DTYPE_F16, ANYATTN_KV_FP8_E4M3FNUZ, 128, 2, 4, 5, 0, PREFILL, PER_TENSOR, 1, 2, 500, NULL, 0, 0, STAGE_FIT},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 80, 2, 4, 32, 1, PREFILL, PER_TENSOR, 0, 2, 600, NULL, 0, 20, STAGE_FIT},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 192, 1, 8, 16, 1, PREFILL, PER_SEQ_HEAD, 1, 2, 500, NULL, 0, 0, STAGE_FIT},
    {ANYATTN_DTYPE_F16, ANYATTN_KV_FP8_E4M3, 256, 2, 4, 64, 1, PREFILL, PER_TENSOR, 0, 2, 400, NULL, 0, 0, STAGE_FIT},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 64, 2, 4, 16, 1, PREFILL, NO_DESCALE, 0, 2, 600, "m128n128w8s2", 0, 0, STAGE_FIT},
    /* head dims that are no multiple of 16: code rows of 56 and 72 bytes, run on the d64 and d128 kernels */
    {ANYATTN_DTYPE_F16, ANYATTN_KV_FP8_E4M3FNUZ, 56, 2, 4, 16, 1, PREFILL, PER_TENSOR, 1, 2, 400, "m128n128w8s2", 0, 0, STAGE_FIT},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 72, 2, 4, 32, 1, PREFILL, PER_SEQ_HEAD, 0, 3, 500, "m128n128w8s2", 0, 0, STAGE_FIT},
    {ANYATTN_DTYPE_BF16, ANYATTN_KV_FP8_E4M3, 128, 2, 4, 16, 1, PREFILL, PER_SEQ_HEAD, 0, 2, 600, NULL, 0, 0, STAGE_SHORT},
};

/* The exact value of a code (NaN codes are never drawn). */
static double fp8_value(unsigned c, anyattn_kv_dtype kv) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7, bias = kv == ANYATTN_KV_FP8_E4M3 ? 7 : 8;
  const double v = e == 0 ? ldexp(m / 8.0, 1 - bias) : ldexp(1.0 + m / 8.0, e - bias);
  return s ? -v : v;
}

/* A code of moderate size (exponent 0..10), one in 64 of any finite size. */
static unsigned char fp8_draw(uint64_t *r, anyattn_kv_dtype kv) {
  const int big = tl_rng_int(r, 0, 63) == 0;
  unsigned c = (unsigned)(tl_rng_int(r, 0, 1) << 7 | tl_rng_int(r, 0, big ? 15 : 10) << 3 | tl_rng_int(r, 0, 7));
  if (kv == ANYATTN_KV_FP8_E4M3 && (c & 0x7f) == 0x7f) c &= ~1u; /* 0x7f/0xff: NaN */
  if (kv == ANYATTN_KV_FP8_E4M3FNUZ && c == 0x80) c = 0;          /* 0x80: NaN */
  return (unsigned char)c;
}

static void draw_batch(const fp8_case *c, uint64_t *r, int *ql, int *kl) {
  for (int s = 0; s < c->num_seqs; s++) {
    kl[s] = tl_rng_int(r, c->stage ? c->max_kv / 2 : 1, c->max_kv); /* staged: q_len >= 64 on average */
    const int kind = c->kind == MIXED ? (s % 2 ? DECODE : PREFILL) : c->kind;
    ql[s] = kind == DECODE ? 1 : c->kind == MIXED ? tl_rng_int(r, 1, kl[s] < 48 ? kl[s] : 48) : kl[s];
  }
}

static int run_case(anyattn_context *ctx, const fp8_case *c, int idx, uint64_t seed, const char *filter) {
  const anyattn_backend be = ANYATTN_BACKEND_CUDA;
  uint64_t r = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(idx + 1));
  const int d = c->head_dim, hkv = c->num_kv_heads, hq = hkv * c->group, bs = c->block_size, N = c->num_seqs;
  int ql[16], kl[16], cu[17] = {0};
  draw_batch(c, &r, ql, kl);
  int pages = 0, max_kv = 0, max_q = 0, bt_stride = 0;
  for (int s = 0; s < N; s++) {
    cu[s + 1] = cu[s] + ql[s];
    const int p = (kl[s] + bs - 1) / bs;
    pages += p, bt_stride = p > bt_stride ? p : bt_stride;
    max_kv = kl[s] > max_kv ? kl[s] : max_kv, max_q = ql[s] > max_q ? ql[s] : max_q;
  }
  const int T = cu[N], nb = pages + 1;
  char name[160];
  snprintf(name, sizeof name, "%s/%s d%d h%dk%d bs%d %s %s %s%s%s%s", tl_dtype_name(c->dtype),
           c->kv == ANYATTN_KV_FP8_E4M3 ? "e4m3" : "e4m3fnuz", d, hq, hkv, bs, c->causal ? "causal" : "full",
           c->kind == DECODE ? "decode" : c->kind == PREFILL ? "prefill" : "mixed",
           c->descale == PER_TENSOR ? "per-tensor" : c->descale == PER_SEQ_HEAD ? "per-seq-head" : "no-descale",
           c->hnd ? " hnd" : "", c->config ? " config " : "", c->config ? c->config : "");
  if (c->no_clusters) strncat(name, " arrival-merge", sizeof name - strlen(name) - 1);
  if (c->qexp) snprintf(name + strlen(name), sizeof name - strlen(name), " q*2^%d", c->qexp);
  if (c->stage) strncat(name, c->stage == STAGE_FIT ? " staged" : " staged-short", sizeof name - strlen(name) - 1);
  if (filter && !strstr(name, filter)) return -1;

  /* pages in shuffled order, each owned by one sequence (its descale) */
  int32_t *bt = (int32_t *)calloc((size_t)N * bt_stride, sizeof(int32_t));
  int *perm = (int *)malloc(sizeof(int) * nb), *page_seq = (int *)malloc(sizeof(int) * nb);
  for (int i = 0; i < nb; i++) perm[i] = i, page_seq[i] = 0;
  for (int i = nb - 1; i > 0; i--) {
    const int j = tl_rng_int(&r, 0, i), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  for (int s = 0, n = 0; s < N; s++)
    for (int p = 0; p < (kl[s] + bs - 1) / bs; p++) bt[(size_t)s * bt_stride + p] = perm[n], page_seq[perm[n++]] = s;
  const int64_t st_tok = c->hnd ? d : (int64_t)hkv * d, st_head = c->hnd ? (int64_t)bs * d : d;
  const int64_t st_blk = (int64_t)bs * hkv * d;
  const size_t cache_elems = (size_t)nb * st_blk, q_elems = (size_t)T * hq * d, es = anyattn_dtype_size(c->dtype);

  float kd[64], vd[64]; /* per tensor: [0]; per (seq, kv head): [seq * hkv + h] */
  const int nd = c->descale == PER_SEQ_HEAD ? N * hkv : 1;
  for (int i = 0; i < nd; i++) kd[i] = (float)(0.02 + 0.3 * tl_rng_uniform(&r)), vd[i] = (float)(0.05 + tl_rng_uniform(&r));
  if (c->descale == NO_DESCALE) kd[0] = vd[0] = 1.0f;
  for (int i = 0; i < nd; i++) kd[i] = ldexpf(kd[i], -c->qexp);
  unsigned char *k8 = (unsigned char *)malloc(cache_elems), *v8 = (unsigned char *)malloc(cache_elems);
  float *kf = (float *)malloc(sizeof(float) * cache_elems), *vf = (float *)malloc(sizeof(float) * cache_elems);
  for (int b = 0; b < nb; b++)
    for (int t = 0; t < bs; t++)
      for (int h = 0; h < hkv; h++)
        for (int e = 0; e < d; e++) {
          const size_t i = (size_t)b * st_blk + (size_t)t * st_tok + (size_t)h * st_head + e;
          const int di = c->descale == PER_SEQ_HEAD ? page_seq[b] * hkv + h : 0;
          k8[i] = fp8_draw(&r, c->kv), v8[i] = fp8_draw(&r, c->kv);
          kf[i] = (float)(fp8_value(k8[i], c->kv) * kd[di]), vf[i] = (float)(fp8_value(v8[i], c->kv) * vd[di]);
        }
  void *q = malloc(q_elems * es);
  float *qf = (float *)malloc(sizeof(float) * q_elems);
  tl_fill_normal(c->dtype, q, q_elems, ldexpf(1.0f, c->qexp), &r);
  for (size_t i = 0; i < q_elems; i++) qf[i] = tl_load(c->dtype, q, i);

  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = hq, pr.num_kv_heads = hkv, pr.head_dim = d, pr.dtype = c->dtype, pr.block_size = bs;
  pr.causal = c->causal, pr.kv_dtype = c->kv, pr.config = c->config;
  anyattn_batch hb;
  anyattn_batch_init(&hb);
  hb.num_seqs = N, hb.num_tokens = T, hb.cu_seqlens_q = cu, hb.seq_lens_k = kl, hb.block_table = bt;
  hb.block_table_stride = bt_stride;
  anyattn_tensors ht;
  anyattn_tensors_init(&ht);
  ht.q = qf, ht.k_cache = kf, ht.v_cache = vf, ht.num_blocks = nb;
  ht.k_stride_block = ht.v_stride_block = st_blk, ht.k_stride_token = ht.v_stride_token = st_tok;
  ht.k_stride_head = ht.v_stride_head = st_head;
  anyattn_problem rp = pr;
  rp.dtype = ANYATTN_DTYPE_F32, rp.kv_dtype = ANYATTN_KV_AS_Q;
  const size_t rows = (size_t)T * hq;
  double *ref = (double *)malloc(sizeof(double) * q_elems), *ref_abs = (double *)malloc(sizeof(double) * q_elems);
  double *ref_lse = (double *)malloc(sizeof(double) * rows), *xmag = (double *)malloc(sizeof(double) * rows);
  int fail = tl_reference(&rp, &hb, &ht, ref, ref_lse, ref_abs, xmag) != 0;

  if (c->no_clusters) setenv("ANYATTN_CUDA_CLUSTERS", "0", 1);
  else unsetenv("ANYATTN_CUDA_CLUSTERS");
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = N, lim.max_tokens = T, lim.max_context = max_kv;
  /* the batch's keys, or the first sequence's only */
  if (c->stage) lim.stage_kv_tokens = c->stage == STAGE_FIT ? pages * bs : kl[0];
  anyattn_plan *plan = NULL;
  if (!fail && anyattn_plan_create(ctx, &pr, &lim, &plan) != ANYATTN_STATUS_OK) {
    printf("FAIL %s: plan_create: %s\n", name, anyattn_last_error());
    fail = 1;
  }
  void *dq = dm_alloc(be, q_elems * es), *dout = dm_alloc(be, q_elems * es), *dk = dm_alloc(be, cache_elems);
  void *dv = dm_alloc(be, cache_elems), *dcu = dm_alloc(be, sizeof cu), *dkl = dm_alloc(be, sizeof kl);
  void *dbt = dm_alloc(be, sizeof(int32_t) * (size_t)N * bt_stride), *dlse = dm_alloc(be, sizeof(float) * rows);
  void *dkd = dm_alloc(be, sizeof kd), *dvd = dm_alloc(be, sizeof vd);
  const size_t ws_bytes = plan ? anyattn_plan_workspace_size(plan) : 0;
  void *dws = ws_bytes ? dm_alloc_workspace(be, plan) : NULL;
  void *out = malloc(q_elems * es);
  float *lse = (float *)malloc(sizeof(float) * rows);
  if (!fail && (!dq || !dout || !dk || !dv || !dcu || !dkl || !dbt || !dlse || !dkd || !dvd || (ws_bytes && !dws) ||
                dm_to_device(be, dq, q, q_elems * es) || dm_to_device(be, dk, k8, cache_elems) ||
                dm_to_device(be, dv, v8, cache_elems) || dm_to_device(be, dcu, cu, sizeof(int) * (N + 1)) ||
                dm_to_device(be, dkl, kl, sizeof(int) * N) ||
                dm_to_device(be, dbt, bt, sizeof(int32_t) * (size_t)N * bt_stride) ||
                dm_to_device(be, dkd, kd, sizeof kd) || dm_to_device(be, dvd, vd, sizeof vd) ||
                dm_fill_bytes(be, dout, 0xff, q_elems * es) || dm_fill_bytes(be, dlse, 0xff, sizeof(float) * rows))) {
    printf("FAIL %s: device memory\n", name);
    fail = 1;
  }
  if (!fail) {
    anyattn_batch db = hb;
    db.cu_seqlens_q = (const int32_t *)dcu, db.seq_lens_k = (const int32_t *)dkl, db.block_table = (const int32_t *)dbt;
    db.max_q_len = max_q, db.max_kv_len = c->stage == STAGE_SHORT ? bs : max_kv;
    if (c->stage == STAGE_FIT) /* the stage holds the batch's pages: the bound by the sum fits, the one by the max may not */
      for (int s = 0; s < N; s++) db.sum_kv_len += kl[s];
    anyattn_tensors dt = ht;
    dt.q = dq, dt.k_cache = dk, dt.v_cache = dv, dt.out = dout, dt.lse = (float *)dlse;
    dt.k_descale = c->descale == NO_DESCALE ? NULL : (const float *)dkd;
    dt.v_descale = c->descale == NO_DESCALE ? NULL : (const float *)dvd;
    dt.descale_layout = c->descale == PER_SEQ_HEAD ? ANYATTN_DESCALE_PER_SEQ_HEAD : ANYATTN_DESCALE_PER_TENSOR;
    char how[256] = "";
    if (c->stage && (anyattn_run_describe(plan, &db, how, sizeof how) != ANYATTN_STATUS_OK || !strstr(how, "staged"))) {
      printf("FAIL %s: the run does not stage: %s\n", name, how[0] ? how : anyattn_last_error());
      fail = 1;
    } else if (anyattn_run(plan, &db, &dt, dws, ws_bytes, NULL) != ANYATTN_STATUS_OK) {
      printf("FAIL %s: run: %s\n", name, anyattn_last_error());
      fail = 1;
    } else if (dm_sync(be) || dm_to_host(be, out, dout, q_elems * es) || dm_to_host(be, lse, dlse, sizeof(float) * rows)) {
      printf("FAIL %s: device error after run\n", name);
      fail = 1;
    }
  }
  if (!fail) { /* the conformance bounds (testkit/conformance.c): P rounded to the dtype, fp32 logits */
    const double rtol = c->dtype == ANYATTN_DTYPE_F16 ? 2.5e-3 : 1.6e-2, atol = c->dtype == ANYATTN_DTYPE_F16 ? 2e-4 : 1e-3;
    long bad = 0;
    double worst = 0;
    long nan_rows = 0;
    for (size_t row = 0; row < rows; row++) {
      /* fp32 rounding of the logits: staged batches run the 16-bit kernels, whose products the conformance
       * suite bounds so (testkit/conformance.c: 8 ulps of the logits' magnitude) */
      const double xe = (c->stage ? 8.0 : 4.0) * FP32_EPS * xmag[row];
      if (c->stage == STAGE_SHORT && (int)(row / hq) >= cu[1]) { /* past the stage: every value NaN */
        int all = 1;
        for (int e = 0; e < d; e++) all &= isnan(tl_load(c->dtype, out, row * d + e)) != 0;
        nan_rows += all;
        if (!all && bad++ == 0) printf("  %s: token %zu is past the stage but not all NaN\n", name, row / hq);
        continue;
      }
      for (int e = 0; e < d; e++) {
        const size_t i = row * d + e;
        const double got = tl_load(c->dtype, out, i), err = fabs(got - ref[i]);
        const double bound = atol + (rtol + 2.0 * xe) * ref_abs[i];
        if (err / bound > worst || isnan(got)) worst = isnan(got) ? INFINITY : err / bound;
        if (!(err <= bound) && bad++ == 0)
          printf("  %s: out[token %zu, head %zu, %d] = %.7g, reference %.7g, bound %.3g\n", name, row / hq, row % hq,
                 e, got, ref[i], bound);
      }
      const double lb = 1e-3 + xe + 4.0 * FP32_EPS * fabs(ref_lse[row]);
      if (!(fabs(lse[row] - ref_lse[row]) <= lb) && !(isinf(ref_lse[row]) && lse[row] == ref_lse[row]) && bad++ == 0)
        printf("  %s: lse[token %zu, head %zu] = %.9g, reference %.9g, bound %.3g (logits' magnitude %.4g)\n", name,
               row / hq, row % hq, lse[row], ref_lse[row], lb, xmag[row]);
    }
    if (c->stage == STAGE_SHORT && nan_rows != (long)(rows - (size_t)cu[1] * hq) && bad++ == 0)
      printf("  %s: %ld NaN rows, expected %ld\n", name, nan_rows, (long)(rows - (size_t)cu[1] * hq));
    fail = bad != 0;
    printf("%s %s  worst=%.2f [%d seqs, %d tokens, kv<=%d] %s\n", fail ? "FAIL" : "PASS", name, worst, N, T, max_kv,
           plan ? anyattn_plan_describe(plan) : "");
  }
  anyattn_plan_free(plan);
  dm_free(be, dq), dm_free(be, dout), dm_free(be, dk), dm_free(be, dv), dm_free(be, dcu), dm_free(be, dkl);
  dm_free(be, dbt), dm_free(be, dlse), dm_free(be, dkd), dm_free(be, dvd), dm_free(be, dws);
  free(bt), free(perm), free(page_seq), free(k8), free(v8), free(kf), free(vf), free(q), free(qf), free(ref);
  free(ref_abs), free(ref_lse), free(xmag), free(out), free(lse);
  return fail;
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL; /* only the cases whose name contains it (sanitizer runs) */
  const uint64_t seed = tl_seed_from_env_or_time();
  printf("test_gpu_fp8: seed 0x%llx, rerun with ANYATTN_SEED=0x%llx\n", (unsigned long long)seed,
         (unsigned long long)seed);
  anyattn_context *ctx = NULL;
  const int open = dm_gpu_test_context(ANYATTN_BACKEND_CUDA, &ctx);
  if (open != 0) return open;
  int failures = 0, ran = 0;
  const int n = (int)(sizeof kCases / sizeof kCases[0]);
  for (int i = 0; i < n; i++) {
    const int r = run_case(ctx, &kCases[i], i, seed, filter);
    if (r >= 0) failures += r, ran++;
  }
  anyattn_context_free(ctx);
  printf("%s: %d of %d cases failed (seed 0x%llx)\n", failures || !ran ? "FAIL" : "PASS", failures, ran,
         (unsigned long long)seed);
  return failures || !ran ? 1 : 0;
}
