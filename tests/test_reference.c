/* test_reference.c: checks the double-precision reference itself against
 * numbers derived by hand: the worked example of docs/semantics.md, the
 * empty-row rule, softcap, ALiBi, windows, GQA and the default scale. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "reference.h"
#include "tl_util.h"

static int failures = 0;

static void expect_near(const char *what, double got, double want, double tol) {
  const int ok = (isinf(want) && got == want) || fabs(got - want) <= tol;
  if (!ok) {
    printf("FAIL %s: got %.12g, want %.12g\n", what, got, want);
    failures++;
  }
}

/* A tiny problem: host arrays in float, converted to `dtype` for the reference. */
typedef struct {
  anyattn_problem pr;
  int num_seqs, num_tokens, stride;
  int32_t cu[8], kl[8], table[32];
  int64_t num_blocks;
  float q[256], k[512], v[512];
  int64_t k_elems, strides[3];
  const float *alibi, *sinks;
} tiny;

static void tiny_init(tiny *t, int hq, int hkv, int d, int bs, int causal) {
  memset(t, 0, sizeof *t);
  anyattn_problem_init(&t->pr);
  t->pr.num_q_heads = hq, t->pr.num_kv_heads = hkv, t->pr.head_dim = d;
  t->pr.block_size = bs, t->pr.causal = causal, t->pr.dtype = ANYATTN_DTYPE_F32;
}

static int tiny_run(const tiny *t, anyattn_dtype dtype, double *out, double *lse) {
  static uint16_t q16[256], k16[512], v16[512];
  anyattn_problem pr = t->pr;
  pr.dtype = dtype;
  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = t->num_seqs, b.num_tokens = t->num_tokens;
  b.cu_seqlens_q = t->cu, b.seq_lens_k = t->kl, b.block_table = t->table, b.block_table_stride = t->stride;
  anyattn_tensors ts;
  anyattn_tensors_init(&ts);
  ts.num_blocks = t->num_blocks;
  ts.k_stride_block = ts.v_stride_block = t->strides[0];
  ts.k_stride_token = ts.v_stride_token = t->strides[1];
  ts.k_stride_head = ts.v_stride_head = t->strides[2];
  ts.alibi_slopes = t->alibi, ts.sinks = t->sinks;
  if (dtype == ANYATTN_DTYPE_F32) {
    ts.q = t->q, ts.k_cache = t->k, ts.v_cache = t->v;
  } else {
    for (int i = 0; i < 256; i++) tl_store(dtype, q16, (size_t)i, t->q[i]);
    for (int i = 0; i < 512; i++) tl_store(dtype, k16, (size_t)i, t->k[i]), tl_store(dtype, v16, (size_t)i, t->v[i]);
    ts.q = q16, ts.k_cache = k16, ts.v_cache = v16;
  }
  return tl_reference(&pr, &b, &ts, out, lse, NULL, NULL);
}

/* Stores key j of a one-sequence problem (block table in t->table) at kv head h. */
static void tiny_kv(tiny *t, int j, int h, const float *kv_k, const float *kv_v) {
  int64_t st[3];
  tl_resolve_strides(&t->pr, t->strides[0], t->strides[1], t->strides[2], st);
  const int bs = t->pr.block_size;
  const int64_t off = t->table[j / bs] * st[0] + (j % bs) * st[1] + h * st[2];
  for (int c = 0; c < t->pr.head_dim; c++) t->k[off + c] = kv_k[c], t->v[off + c] = kv_v[c];
}

/* docs/semantics.md, "Worked example": 1 sequence, 2 queries, 3 keys, head_dim 2,
 * block_size 2 with pages swapped, causal, scale 1, sink logit 0. */
static void worked_example(int layout, anyattn_dtype dtype, int with_sink) {
  tiny t;
  tiny_init(&t, 1, 1, 2, 2, 1);
  t.pr.scale = 1.0f;
  t.num_seqs = 1, t.num_tokens = 2, t.stride = 3; /* one spare column */
  t.cu[0] = 0, t.cu[1] = 2, t.kl[0] = 3;
  t.table[0] = 1, t.table[1] = 0, t.table[2] = -5; /* key 2 is on physical page 0 */
  t.num_blocks = 2;
  if (layout == 1) t.strides[0] = 2 * 2, t.strides[1] = 2, t.strides[2] = 4;           /* HND */
  if (layout == 2) t.strides[2] = 3, t.strides[1] = 5, t.strides[0] = 13;             /* padded */
  static const float keys[3][2] = {{0, 0}, {1, 0}, {0, 1}}, vals[3][2] = {{1, 0}, {0, 1}, {1, 1}};
  for (int j = 0; j < 3; j++) tiny_kv(&t, j, 0, keys[j], vals[j]);
  t.q[0] = 1, t.q[1] = 0; /* query 0, position p = 1 */
  t.q[2] = 0, t.q[3] = 2; /* query 1, position p = 2 */
  static const float sink = 0.0f;
  if (with_sink) t.sinks = &sink;
  double out[4], lse[2];
  char what[96];
  if (tiny_run(&t, dtype, out, lse) != 0) {
    printf("FAIL worked example: reference returned an error\n");
    failures++;
    return;
  }
  const double e = exp(1.0), e2 = e * e, s = with_sink ? 1.0 : 0.0;
  /* Query 0 sees keys 0 and 1 (logits 0, 1): out = (1, e) / (1 + e + sink). */
  const double want[4] = {1.0 / (1.0 + e + s), e / (1.0 + e + s),
                          /* Query 1 sees keys 0, 1, 2 (logits 0, 0, 2). */
                          (1.0 + e2) / (2.0 + e2 + s), (1.0 + e2) / (2.0 + e2 + s)};
  const double want_lse[2] = {log(1.0 + e + s), log(2.0 + e2 + s)};
  for (int i = 0; i < 4; i++) {
    snprintf(what, sizeof what, "worked example (layout %d, %s, sink %d) out[%d]", layout, tl_dtype_name(dtype),
             with_sink, i);
    expect_near(what, out[i], want[i], 1e-12);
  }
  for (int i = 0; i < 2; i++) {
    snprintf(what, sizeof what, "worked example (layout %d, %s, sink %d) lse[%d]", layout, tl_dtype_name(dtype),
             with_sink, i);
    expect_near(what, lse[i], want_lse[i], 1e-12);
  }
  if (layout == 0 && dtype == ANYATTN_DTYPE_F32)
    printf("worked example (sink %d): out = [%.9f %.9f; %.9f %.9f], lse = [%.9f %.9f]\n", with_sink, out[0], out[1],
           out[2], out[3], lse[0], lse[1]);
}

/* q_len 2 > kv_len 1 (which run never accepts) puts query 0 at p = -1: it sees no key. */
static void empty_row(void) {
  for (int sinks = 0; sinks <= 1; sinks++) {
    tiny t;
    tiny_init(&t, 1, 1, 2, 4, 1);
    t.pr.scale = 1.0f;
    t.num_seqs = 1, t.num_tokens = 2, t.stride = 1, t.num_blocks = 1;
    t.cu[1] = 2, t.kl[0] = 1;
    const float k0[2] = {1, 2}, v0[2] = {3, -4};
    tiny_kv(&t, 0, 0, k0, v0);
    t.q[0] = 5, t.q[1] = 5, t.q[2] = 1, t.q[3] = 1;
    static const float sink = 7.0f;
    if (sinks) t.sinks = &sink;
    double out[4], lse[2];
    tiny_run(&t, ANYATTN_DTYPE_F32, out, lse);
    expect_near("empty row out[0]", out[0], 0.0, 0.0);
    expect_near("empty row out[1]", out[1], 0.0, 0.0);
    expect_near("empty row lse", lse[0], -INFINITY, 0.0);
    /* Query 1 (p = 0) sees key 0 only: logit 3. */
    const double w = sinks ? 1.0 / (1.0 + exp(7.0 - 3.0)) : 1.0;
    expect_near("one-key row out[0]", out[2], 3.0 * w, 1e-12);
    expect_near("one-key row out[1]", out[3], -4.0 * w, 1e-12);
    expect_near("one-key row lse", lse[1], sinks ? log(exp(3.0) + exp(7.0)) : 3.0, 1e-12);
  }
}

/* head_dim 1, non-causal, one query against keys with given logits and values. */
static void one_query(tiny *t, int kv_len, const float *kq, const float *vals) {
  tiny_init(t, 1, 1, 1, 3, 0);
  t->pr.scale = 1.0f;
  t->num_seqs = 1, t->num_tokens = 1, t->stride = 4, t->num_blocks = 4;
  t->cu[1] = 1, t->kl[0] = kv_len;
  for (int j = 0; j < 4; j++) t->table[j] = 3 - j;
  for (int j = 0; j < kv_len; j++) tiny_kv(t, j, 0, &kq[j], &vals[j]);
  t->q[0] = 1.0f;
}

static void softcap_alibi(void) {
  static const float ks[4] = {2, 6, -1, 0.5f}, vs[4] = {1, 10, 100, 1000};
  tiny t;
  double out, lse;
  /* softcap 4: x = 4 tanh(x / 4). */
  one_query(&t, 4, ks, vs);
  t.pr.softcap = 4.0f;
  tiny_run(&t, ANYATTN_DTYPE_F32, &out, &lse);
  double num = 0, den = 0;
  for (int j = 0; j < 4; j++) {
    const double x = 4.0 * tanh(ks[j] / 4.0);
    num += exp(x) * vs[j], den += exp(x);
  }
  expect_near("softcap out", out, num / den, 1e-9);
  expect_near("softcap lse", lse, log(den), 1e-12);

  /* ALiBi, non-causal, p = 3: x_j = k_j + 0.5 (j - 3), so later keys get a bias up to 0. */
  one_query(&t, 4, ks, vs);
  static const float slope = 0.5f;
  t.alibi = &slope;
  tiny_run(&t, ANYATTN_DTYPE_F32, &out, &lse);
  num = den = 0;
  for (int j = 0; j < 4; j++) {
    const double x = ks[j] + 0.5 * (j - 3);
    num += exp(x) * vs[j], den += exp(x);
  }
  expect_near("alibi out", out, num / den, 1e-9);
  expect_near("alibi lse", lse, log(den), 1e-12);

  /* Softcap first, ALiBi after: the bias is not capped. */
  one_query(&t, 4, ks, vs);
  t.alibi = &slope;
  t.pr.softcap = 1.0f;
  tiny_run(&t, ANYATTN_DTYPE_F32, &out, &lse);
  num = den = 0;
  for (int j = 0; j < 4; j++) {
    const double x = tanh((double)ks[j]) + 0.5 * (j - 3);
    num += exp(x) * vs[j], den += exp(x);
  }
  expect_near("softcap then alibi out", out, num / den, 1e-9);

  /* Non-causal ALiBi with the query in the middle (kv_len 4, q_len 2): query 0 is at p = 2
   * and key 3 (ahead of it) gets +0.5. */
  tiny_init(&t, 1, 1, 1, 4, 0);
  t.pr.scale = 1.0f;
  t.num_seqs = 1, t.num_tokens = 2, t.stride = 1, t.num_blocks = 1, t.cu[1] = 2, t.kl[0] = 4;
  for (int j = 0; j < 4; j++) tiny_kv(&t, j, 0, &ks[j], &vs[j]);
  t.q[0] = 0.0f, t.q[1] = 0.0f;
  t.alibi = &slope;
  double o2[2], l2[2];
  tiny_run(&t, ANYATTN_DTYPE_F32, o2, l2);
  num = den = 0;
  for (int j = 0; j < 4; j++) num += exp(0.5 * (j - 2)) * vs[j], den += exp(0.5 * (j - 2));
  expect_near("alibi ahead-of-query out", o2[0], num / den, 1e-9);
}

/* q = 0 makes every visible key weigh the same: out is the mean of visible values. */
static double window_mean(int causal, int q_len, int kv_len, int i, int wl, int wr) {
  tiny t;
  tiny_init(&t, 1, 1, 1, 4, causal);
  t.pr.window_left = wl, t.pr.window_right = wr;
  t.num_seqs = 1, t.num_tokens = q_len, t.stride = 8, t.num_blocks = 8;
  t.cu[1] = q_len, t.kl[0] = kv_len;
  for (int j = 0; j < 8; j++) t.table[j] = (j * 3) % 8;
  for (int j = 0; j < kv_len; j++) {
    const float kz = 0.0f, vj = (float)(1 << j);
    tiny_kv(&t, j, 0, &kz, &vj);
  }
  double out[32], lse[32];
  tiny_run(&t, ANYATTN_DTYPE_F32, out, lse);
  return out[i];
}

static double mean_pow2(int lo, int hi) { /* mean of 2^j for j in [lo, hi] */
  double s = 0;
  for (int j = lo; j <= hi; j++) s += (double)(1 << j);
  return s / (hi - lo + 1);
}

static void windows(void) {
  expect_near("causal decode, window_left 2", window_mean(1, 1, 10, 0, 2, -1), mean_pow2(7, 9), 1e-9);
  expect_near("causal, window_left 0 (diagonal)", window_mean(1, 10, 10, 4, 0, -1), mean_pow2(4, 4), 1e-9);
  expect_near("causal prefill, no window", window_mean(1, 10, 10, 3, -1, -1), mean_pow2(0, 3), 1e-9);
  expect_near("causal ignores window_right", window_mean(1, 10, 10, 3, -1, 1), mean_pow2(0, 3), 1e-9);
  expect_near("non-causal, wl 1 wr 2", window_mean(0, 10, 10, 3, 1, 2), mean_pow2(2, 5), 1e-9);
  expect_near("non-causal, wr 2 clipped at kv_len", window_mean(0, 10, 10, 8, -1, 2), mean_pow2(0, 9), 1e-9);
  expect_near("non-causal, no window", window_mean(0, 3, 10, 0, -1, -1), mean_pow2(0, 9), 1e-9);
  /* Chunked: q_len 3 of kv_len 10, query 0 at p = 7. */
  expect_near("chunked causal p", window_mean(1, 3, 10, 0, -1, -1), mean_pow2(0, 7), 1e-9);
  expect_near("chunked causal wl 3", window_mean(1, 3, 10, 1, 3, -1), mean_pow2(5, 8), 1e-9);
  expect_near("window wider than context", window_mean(1, 2, 10, 1, 5000, -1), mean_pow2(0, 9), 1e-9);
}

/* GQA: query head h reads kv head h / group; default scale is 1/sqrt(head_dim). */
static void gqa_and_scale(void) {
  tiny t;
  tiny_init(&t, 4, 2, 4, 2, 1);
  t.num_seqs = 1, t.num_tokens = 1, t.stride = 1, t.num_blocks = 1, t.cu[1] = 1, t.kl[0] = 2;
  const float k0[4] = {1, 1, 1, 1}, k1[4] = {0, 0, 0, 0};
  const float va[4] = {1, 1, 1, 1}, vb[4] = {0, 0, 0, 0}, vc[4] = {2, 2, 2, 2}, vd[4] = {-2, -2, -2, -2};
  tiny_kv(&t, 0, 0, k0, va), tiny_kv(&t, 1, 0, k1, vb); /* kv head 0 */
  tiny_kv(&t, 0, 1, k1, vc), tiny_kv(&t, 1, 1, k1, vd); /* kv head 1: equal logits */
  for (int h = 0; h < 4; h++)
    for (int c = 0; c < 4; c++) t.q[h * 4 + c] = 1.0f;
  double out[16], lse[4];
  tiny_run(&t, ANYATTN_DTYPE_F32, out, lse);
  /* Heads 0, 1 -> kv head 0: logits 4 * 1/2 = 2 and 0. */
  const double e2 = exp(2.0);
  for (int h = 0; h < 2; h++) {
    expect_near("gqa head 0/1 out", out[h * 4], e2 / (e2 + 1.0), 1e-12);
    expect_near("gqa head 0/1 lse", lse[h], log(e2 + 1.0), 1e-12);
  }
  for (int h = 2; h < 4; h++) {
    expect_near("gqa head 2/3 out", out[h * 4 + 3], 0.0, 1e-12);
    expect_near("gqa head 2/3 lse", lse[h], log(2.0), 1e-12);
  }
}

static void metadata_errors(void) {
  tiny t;
  tiny_init(&t, 1, 1, 2, 2, 1);
  t.num_seqs = 1, t.num_tokens = 1, t.stride = 2, t.num_blocks = 2, t.cu[1] = 1, t.kl[0] = 3;
  t.table[0] = 0, t.table[1] = 2; /* page 2 of 2 */
  double out[2], lse[1];
  if (tiny_run(&t, ANYATTN_DTYPE_F32, out, lse) == 0) {
    printf("FAIL reference accepted a page id out of range\n");
    failures++;
  }
}

int main(void) {
  for (int layout = 0; layout < 3; layout++) {
    worked_example(layout, ANYATTN_DTYPE_F32, 1);
    worked_example(layout, ANYATTN_DTYPE_F16, 1);
    worked_example(layout, ANYATTN_DTYPE_BF16, 1);
    worked_example(layout, ANYATTN_DTYPE_F32, 0);
  }
  empty_row();
  softcap_alibi();
  windows();
  gqa_and_scale();
  metadata_errors();
  if (failures) {
    printf("test_reference: %d failures\n", failures);
    return 1;
  }
  printf("test_reference: all checks passed\n");
  return 0;
}
