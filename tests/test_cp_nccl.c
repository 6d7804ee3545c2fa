/* test_cp_nccl.c: context parallelism on the CUDA backend over NCCL with one
 * rank (NCCL refuses two ranks on one GPU; several GPUs are another test's).
 * One rank still runs the CUDA side whole: the K/V packing, the metadata and
 * block-table kernels, the sub-plans over the buffers, the fp32 merge and the
 * final rounding, events across the communication streams, NCCL's split
 * communicators and the decode all-gather; once captured in a CUDA graph.
 * Outputs are checked on sampled rows against the double-precision reference
 * and on every row against the library's own single-device run; with sliding
 * windows and ALiBi too. Exit 77 when there is no CUDA device. Seed printed. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anyattn_cp.h"
#include "devmem.h"
#include "reference.h"
#include "tl_util.h"

static const anyattn_backend GPU = ANYATTN_BACKEND_CUDA;
static int failures;
static uint64_t seed;

typedef struct {
  const char *name;
  anyattn_cp_mode mode;
  anyattn_dtype dtype;
  int hq, hkv, d, causal, sinks, graph;
  int n, lens[3];
  int q_len; /* decode: new tokens per sequence (0: prefill) */
  int windowed, wl, wr; /* 1: problem windows wl (left) and wr (right), else none */
  int alibi;            /* ALiBi slopes (decode: with batch->q_pos) */
} gcase;

static void *up(const void *host, size_t bytes) {
  void *d = dm_alloc(GPU, bytes);
  if (!d || dm_to_device(GPU, d, host, bytes)) exit(2);
  return d;
}

static void *down(const void *dev, size_t bytes) {
  void *h = malloc(bytes + 1);
  if (!h || dm_to_host(GPU, h, dev, bytes)) exit(2);
  return h;
}

static anyattn_problem problem_of(const gcase *c) {
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = c->hq, pr.num_kv_heads = c->hkv, pr.head_dim = c->d, pr.dtype = c->dtype;
  pr.causal = c->causal, pr.block_size = 16;
  if (c->windowed) pr.window_left = c->wl, pr.window_right = c->wr;
  return pr;
}

/* The whole batch as one device computes it: dense keys (block size 16,
 * sequence s from page kv_off[s] / 16), q rows the last q_len of each. */
static int single_device(anyattn_context *ctx, const gcase *c, const int32_t *cu, const int32_t *kv, const int32_t *pg0,
                         int pages, const void *dq, const void *dk, const void *dv, const float *dsinks,
                         const float *dslopes, void *dout, float *dlse) {
  anyattn_problem pr = problem_of(c);
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  int maxkv = 1, maxp = 1;
  for (int s = 0; s < c->n; s++) maxkv = kv[s] > maxkv ? kv[s] : maxkv;
  maxp = (maxkv + 15) / 16;
  lim.max_seqs = c->n, lim.max_tokens = cu[c->n] > 0 ? cu[c->n] : 1, lim.max_context = maxkv;
  int32_t *bt = (int32_t *)calloc((size_t)c->n * maxp, sizeof *bt);
  for (int s = 0; s < c->n; s++)
    for (int p = 0; p < maxp; p++) bt[s * maxp + p] = pg0[s] + p < pages ? pg0[s] + p : 0;
  anyattn_plan *plan = NULL;
  int rc = anyattn_plan_create(ctx, &pr, &lim, &plan) != ANYATTN_STATUS_OK;
  void *dcu = up(cu, (c->n + 1) * 4), *dkv = up(kv, c->n * 4), *dbt = up(bt, (size_t)c->n * maxp * 4), *ws = NULL;
  if (!rc) {
    ws = dm_alloc_workspace(GPU, plan);
    anyattn_batch b;
    anyattn_batch_init(&b);
    b.num_seqs = c->n, b.num_tokens = cu[c->n], b.cu_seqlens_q = (const int32_t *)dcu, b.seq_lens_k = (const int32_t *)dkv;
    b.block_table = (const int32_t *)dbt, b.block_table_stride = maxp;
    anyattn_tensors t;
    anyattn_tensors_init(&t);
    t.q = dq, t.k_cache = dk, t.v_cache = dv, t.num_blocks = pages, t.sinks = dsinks, t.out = dout, t.lse = dlse;
    t.alibi_slopes = dslopes;
    rc = anyattn_run(plan, &b, &t, ws, anyattn_plan_workspace_size(plan), NULL) != ANYATTN_STATUS_OK || dm_sync(GPU);
  }
  if (rc) printf("  single-device run: %s\n", anyattn_last_error());
  anyattn_plan_free(plan);
  dm_free(GPU, dcu), dm_free(GPU, dkv), dm_free(GPU, dbt), dm_free(GPU, ws);
  free(bt);
  return rc;
}

/* Sampled rows against the double-precision reference, every row against the
 * single-device run (relative L2 within the conformance suite's bound). */
static int compare(const gcase *c, const int32_t *cu, const int32_t *kv, const int32_t *pg0, int pages, const void *q,
                   const void *k, const void *v, const float *sinks, const float *slopes, const void *got,
                   const float *got_lse, const void *one, char *why, size_t why_size) {
  const int rows = cu[c->n], hq = c->hq, d = c->d;
  const double atol = c->dtype == ANYATTN_DTYPE_F32 ? 1e-5 : c->dtype == ANYATTN_DTYPE_F16 ? 2e-4 : 1e-3;
  const double rtol = c->dtype == ANYATTN_DTYPE_F32 ? 1e-5 : c->dtype == ANYATTN_DTYPE_F16 ? 2.5e-3 : 1.6e-2;
  const double l2 = c->dtype == ANYATTN_DTYPE_F32 ? 1e-5 : c->dtype == ANYATTN_DTYPE_F16 ? 2e-3 : 1.2e-2;
  double num = 0, den = 0;
  for (size_t i = 0; i < (size_t)rows * hq * d; i++) {
    const double a = tl_load(c->dtype, got, i), b = tl_load(c->dtype, one, i);
    if (isnan(a)) return snprintf(why, why_size, "out element %zu is NaN", i), 1;
    num += (a - b) * (a - b), den += b * b;
  }
  if (sqrt(num / (den > 0 ? den : 1)) > l2)
    return snprintf(why, why_size, "relative L2 %.3g from the single-device run", sqrt(num / den)), 1;
  uint64_t rng = seed ^ 0x5A5A;
  anyattn_problem pr = problem_of(c);
  for (int sample = 0; sample < 24 && rows > 0; sample++) {
    const int row = sample == 0 ? rows - 1 : tl_rng_int(&rng, 0, rows - 1);
    int s = 0;
    while (cu[s + 1] <= row) s++;
    const int p = kv[s] - (cu[s + 1] - cu[s]) + (row - cu[s]); /* the row's position */
    const int32_t one_cu[2] = {0, 1}, one_kv[1] = {kv[s]}, one_pos[1] = {p};
    int32_t *bt = (int32_t *)malloc(sizeof(int32_t) * ((kv[s] + 15) / 16 + 1));
    for (int j = 0; j <= kv[s] / 16; j++) bt[j] = pg0[s] + j < pages ? pg0[s] + j : 0;
    anyattn_batch b;
    anyattn_batch_init(&b);
    b.num_seqs = 1, b.num_tokens = 1, b.cu_seqlens_q = one_cu, b.seq_lens_k = one_kv, b.block_table = bt;
    b.block_table_stride = kv[s] / 16 + 1;
    b.q_pos = one_pos; /* the row at its position among all the sequence's keys */
    anyattn_tensors t;
    anyattn_tensors_init(&t);
    const size_t es = anyattn_dtype_size(c->dtype);
    t.q = (const char *)q + (size_t)row * hq * d * es, t.k_cache = k, t.v_cache = v, t.num_blocks = pages;
    t.sinks = sinks;
    t.alibi_slopes = slopes;
    double ro[64 * 256], rl[64], ra[64 * 256], rx[64];
    tl_reference(&pr, &b, &t, ro, rl, ra, rx);
    free(bt);
    for (int h = 0; h < hq; h++) {
      for (int e = 0; e < d; e++) {
        const double g = tl_load(c->dtype, got, ((size_t)row * hq + h) * d + e), ref = ro[h * d + e];
        const double bound = atol + (rtol + 16 * 5.96e-8 * rx[h]) * ra[h * d + e];
        if (!(fabs(g - ref) <= bound))
          return snprintf(why, why_size, "out[%d, %d, %d] = %.6g, reference %.6g", row, h, e, g, ref), 1;
      }
      if (got_lse && !(fabs(got_lse[(size_t)row * hq + h] - rl[h]) <= 1e-3 + 1e-6 * fabs(rl[h])))
        return snprintf(why, why_size, "lse[%d, %d] = %.6g, reference %.6g", row, h, got_lse[(size_t)row * hq + h],
                        rl[h]), 1;
    }
  }
  return 0;
}


/* The batch's host arrays: prefill q rows are whole sequences, decode ones the
 * last q_len of each; keys dense in pages of 16 from page pg0[s]. */
typedef struct {
  int32_t cu[4], kv[4], pg0[4];
  int rows, pages, pad;
  void *q, *k, *v;
  float sinks[64], slopes[64];
} gbatch;

static void make_batch(const gcase *c, int id, gbatch *g) {
  const size_t es = anyattn_dtype_size(c->dtype);
  memset(g, 0, sizeof *g);
  g->pad = c->q_len ? 1 : 0; /* decode: one padding row, never written */
  for (int s = 0; s < c->n; s++) {
    g->kv[s] = c->lens[s];
    g->cu[s + 1] = g->cu[s] + (c->q_len ? c->q_len : c->lens[s]);
    g->pg0[s] = g->pages;
    g->pages += (c->lens[s] + 15) / 16;
  }
  g->rows = g->cu[c->n];
  uint64_t rng = seed + 31 * (uint64_t)id;
  const size_t qn = (size_t)(g->rows + g->pad) * c->hq * c->d, kn = (size_t)(g->pages + 1) * 16 * c->hkv * c->d;
  g->q = malloc(qn * es), g->k = malloc(kn * es), g->v = malloc(kn * es);
  tl_fill_normal(c->dtype, g->q, qn, 1.0f, &rng);
  tl_fill_normal(c->dtype, g->k, kn, 1.0f, &rng);
  tl_fill_normal(c->dtype, g->v, kn, 1.0f, &rng);
  for (int h = 0; h < c->hq; h++) g->sinks[h] = (float)tl_rng_normal(&rng);
  for (int h = 0; h < c->hq; h++) g->slopes[h] = (float)pow(2.0, -8.0 * (h + 1) / c->hq); /* ALiBi's */
}

/* Prefill through the plan: the zigzag rows of one rank (front chunks, then
 * back chunks), gathered here and scattered back into sequence order. */
static anyattn_status cp_prefill_run(const gcase *c, const anyattn_cp_plan *plan, const gbatch *g, const float *dsinks,
                                     const float *dslopes, void *out_natural, float *lse_natural) {
  const size_t es = anyattn_dtype_size(c->dtype), qrow = (size_t)c->hq * c->d * es, kvrow = (size_t)c->hkv * c->d * es;
  int32_t *map = (int32_t *)malloc(((size_t)g->rows + 1) * sizeof *map);
  int rows = 0, start, len;
  for (int half = 0; half < 2; half++)
    for (int s = 0; s < c->n; s++) {
      anyattn_cp_chunk(c->lens[s], 1, half, &start, &len);
      for (int i = 0; i < len; i++) map[rows++] = s * 1000000 + start + i; /* sequence and position */
    }
  char *hq = (char *)malloc(rows * qrow + 1), *hk = (char *)malloc(rows * kvrow + 1), *hv = (char *)malloc(rows * kvrow + 1);
  for (int i = 0; i < rows; i++) {
    const int s = map[i] / 1000000, p = map[i] % 1000000;
    memcpy(hq + i * qrow, (const char *)g->q + (size_t)(g->cu[s] + p) * qrow, qrow);
    memcpy(hk + i * kvrow, (const char *)g->k + (size_t)(g->pg0[s] * 16 + p) * kvrow, kvrow);
    memcpy(hv + i * kvrow, (const char *)g->v + (size_t)(g->pg0[s] * 16 + p) * kvrow, kvrow);
  }
  void *dq = up(hq, rows * qrow + 1), *dk = up(hk, rows * kvrow + 1), *dv = up(hv, rows * kvrow + 1);
  void *dout = dm_alloc(GPU, rows * qrow + 1), *dlse = dm_alloc(GPU, (size_t)rows * c->hq * 4 + 4);
  const size_t wsz = anyattn_cp_plan_workspace_size(plan);
  void *ws = dm_alloc(GPU, wsz);
  if (ws && (dm_fill_bytes(GPU, ws, 0xff, wsz) || anyattn_cp_workspace_prepare(plan, ws, wsz, NULL) != ANYATTN_STATUS_OK)) {
    dm_free(GPU, ws);
    ws = NULL;
  }
  dm_fill_bytes(GPU, dout, 0xff, rows * qrow + 1); /* NaN in every dtype */
  anyattn_cp_tensors t;
  anyattn_cp_tensors_init(&t);
  t.q = dq, t.k = dk, t.v = dv, t.out = dout, t.lse = (float *)dlse, t.sinks = dsinks, t.alibi_slopes = dslopes;
  const int32_t *lens = (const int32_t *)c->lens;
  anyattn_status st;
  if (c->graph) {
    void *stream = NULL;
    dm_graph *gr = dm_graph_begin(GPU, &stream);
    st = gr ? anyattn_cp_prefill(plan, c->n, lens, &t, ws, wsz, stream) : ANYATTN_STATUS_DEVICE_ERROR;
    if (gr && (dm_graph_end(gr) || dm_graph_launch(gr))) st = ANYATTN_STATUS_DEVICE_ERROR;
    if (dm_sync(GPU)) st = ANYATTN_STATUS_DEVICE_ERROR;
    dm_graph_free(gr);
  } else {
    st = anyattn_cp_prefill(plan, c->n, lens, &t, ws, wsz, NULL);
    if (dm_sync(GPU)) st = ANYATTN_STATUS_DEVICE_ERROR;
  }
  char *hout = (char *)down(dout, rows * qrow);
  float *hlse = (float *)down(dlse, (size_t)rows * c->hq * 4);
  for (int i = 0; i < rows; i++) {
    const int s = map[i] / 1000000, p = map[i] % 1000000, row = g->cu[s] + p;
    memcpy((char *)out_natural + (size_t)row * qrow, hout + i * qrow, qrow);
    memcpy(lse_natural + (size_t)row * c->hq, hlse + (size_t)i * c->hq, (size_t)c->hq * 4);
  }
  dm_free(GPU, dq), dm_free(GPU, dk), dm_free(GPU, dv), dm_free(GPU, dout), dm_free(GPU, dlse), dm_free(GPU, ws);
  free(map), free(hq), free(hk), free(hv), free(hout), free(hlse);
  return st;
}

/* Decode through the plan: this one rank holds every key, the new ones last
 * (placed by batch->q_pos when the case has windows or ALiBi). */
static anyattn_status cp_decode_run(const gcase *c, const anyattn_cp_plan *plan, const gbatch *g, const void *dq,
                                    const void *dk, const void *dv, const float *dsinks, const float *dslopes, void *hout,
                                    float *hlse) {
  const size_t es = anyattn_dtype_size(c->dtype), qrow = (size_t)c->hq * c->d * es;
  int longest = 1;
  for (int s = 0; s < c->n; s++) longest = c->lens[s] > longest ? c->lens[s] : longest;
  const int rows = g->rows + g->pad, maxp = (longest + 15) / 16;
  int32_t *bt = (int32_t *)calloc((size_t)c->n * maxp, sizeof *bt);
  for (int s = 0; s < c->n; s++)
    for (int p = 0; p < (c->lens[s] + 15) / 16; p++) bt[s * maxp + p] = g->pg0[s] + p;
  int32_t qpos[4] = {0, 0, 0, 0};
  for (int s = 0; s < c->n; s++) qpos[s] = c->lens[s] - c->q_len;
  void *dcu = up(g->cu, 16), *dkv = up(g->kv, 16), *dbt = up(bt, (size_t)c->n * maxp * 4), *dqp = up(qpos, 16);
  void *dout = dm_alloc(GPU, rows * qrow), *dlse = dm_alloc(GPU, (size_t)rows * c->hq * 4);
  dm_fill_bytes(GPU, dout, 0xff, rows * qrow);
  const size_t wsz = anyattn_cp_plan_workspace_size(plan);
  void *ws = dm_alloc(GPU, wsz);
  if (ws && (dm_fill_bytes(GPU, ws, 0xff, wsz) || anyattn_cp_workspace_prepare(plan, ws, wsz, NULL) != ANYATTN_STATUS_OK)) {
    dm_free(GPU, ws);
    ws = NULL;
  }
  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = c->n, b.num_tokens = rows, b.cu_seqlens_q = (const int32_t *)dcu, b.seq_lens_k = (const int32_t *)dkv;
  b.block_table = (const int32_t *)dbt, b.block_table_stride = maxp, b.max_q_len = c->q_len;
  if (c->windowed || c->alibi) b.q_pos = (const int32_t *)dqp;
  anyattn_tensors t;
  anyattn_tensors_init(&t);
  t.q = dq, t.k_cache = dk, t.v_cache = dv, t.num_blocks = g->pages, t.sinks = dsinks, t.out = dout;
  t.lse = (float *)dlse;
  t.alibi_slopes = dslopes;
  anyattn_status st = anyattn_cp_decode(plan, &b, &t, 1, ws, wsz, NULL);
  if (dm_sync(GPU)) st = ANYATTN_STATUS_DEVICE_ERROR;
  char *o = (char *)down(dout, rows * qrow);
  float *l = (float *)down(dlse, (size_t)rows * c->hq * 4);
  memcpy(hout, o, g->rows * qrow);
  memcpy(hlse, l, (size_t)g->rows * c->hq * 4);
  for (size_t i = (size_t)g->rows * c->hq * c->d; i < (size_t)rows * c->hq * c->d && st == ANYATTN_STATUS_OK; i++)
    if (!isnan(tl_load(c->dtype, o, i))) st = ANYATTN_STATUS_DEVICE_ERROR, printf("  padding row written\n");
  dm_free(GPU, dcu), dm_free(GPU, dkv), dm_free(GPU, dbt), dm_free(GPU, dqp), dm_free(GPU, dout), dm_free(GPU, dlse);
  dm_free(GPU, ws);
  free(bt), free(o), free(l);
  return st;
}

static void run_case(anyattn_context *ctx, anyattn_cp_comm *comm, const gcase *c, int id) {
  gbatch g;
  make_batch(c, id, &g);
  const size_t es = anyattn_dtype_size(c->dtype), qbytes = ((size_t)g.rows + g.pad) * c->hq * c->d * es;
  const size_t kbytes = (size_t)(g.pages + 1) * 16 * c->hkv * c->d * es;
  void *dq = up(g.q, qbytes), *dk = up(g.k, kbytes), *dv = up(g.v, kbytes);
  float *dsinks = c->sinks ? (float *)up(g.sinks, sizeof g.sinks) : NULL;
  float *dslopes = c->alibi ? (float *)up(g.slopes, sizeof g.slopes) : NULL;
  void *one = dm_alloc(GPU, qbytes), *got = malloc(qbytes);
  float *lse = (float *)malloc(((size_t)g.rows + 1) * c->hq * 4);
  char why[256] = "";
  int bad = single_device(ctx, c, g.cu, g.kv, g.pg0, g.pages, dq, dk, dv, dsinks, dslopes, one, NULL);
  anyattn_problem pr = problem_of(c);
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = c->n, lim.max_tokens = c->q_len ? g.rows + g.pad : g.rows, lim.max_context = 8192;
  anyattn_cp_options opt;
  anyattn_cp_options_init(&opt);
  opt.mode = c->mode;
  anyattn_cp_plan *plan = NULL;
  anyattn_status st = bad ? ANYATTN_STATUS_DEVICE_ERROR : anyattn_cp_plan_create(ctx, comm, &pr, &lim, &opt, &plan);
  if (st == ANYATTN_STATUS_OK)
    st = c->q_len ? cp_decode_run(c, plan, &g, dq, dk, dv, dsinks, dslopes, got, lse)
                  : cp_prefill_run(c, plan, &g, dsinks, dslopes, got, lse);
  if (!bad && st != ANYATTN_STATUS_OK) bad = 1, snprintf(why, sizeof why, "%s", anyattn_cp_last_error());
  if (!bad) {
    void *hone = down(one, (size_t)g.rows * c->hq * c->d * es);
    bad = compare(c, g.cu, g.kv, g.pg0, g.pages, g.q, g.k, g.v, c->sinks ? g.sinks : NULL, c->alibi ? g.slopes : NULL,
                  got, lse, hone, why, sizeof why);
    free(hone);
  }
  printf("%s %s%s%s\n", bad ? "FAIL" : "PASS", c->name, why[0] ? ": " : "", why);
  if (plan) printf("     %s\n", anyattn_cp_plan_describe(plan));
  fflush(stdout);
  failures += bad;
  anyattn_cp_plan_free(plan);
  dm_free(GPU, dq), dm_free(GPU, dk), dm_free(GPU, dv), dm_free(GPU, dsinks), dm_free(GPU, dslopes), dm_free(GPU, one);
  free(got), free(lse), free(g.q), free(g.k), free(g.v);
}

int main(void) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("SKIP test_cp_nccl: no CUDA device\n");
    return 77;
  }
  anyattn_context *ctx = NULL;
  if (anyattn_context_create(GPU, 0, &ctx) != ANYATTN_STATUS_OK) {
    printf("SKIP test_cp_nccl: %s\n", anyattn_last_error());
    return 77;
  }
  seed = tl_seed_from_env_or_time();
  printf("test_cp_nccl: one rank on CUDA device 0, seed 0x%llx\n", (unsigned long long)seed);
  ncclUniqueId id;
  ncclComm_t nc = NULL;
  anyattn_cp_comm *comm = NULL;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&nc, 1, id, 0) != ncclSuccess) {
    printf("FAIL test_cp_nccl: NCCL initialisation\n");
    return 1;
  }
  if (anyattn_cp_comm_create_nccl(nc, 0, &comm) != ANYATTN_STATUS_OK) {
    printf("FAIL anyattn_cp_comm_create_nccl: %s\n", anyattn_cp_last_error());
    return 1;
  }
  static const gcase cases[] = {
      {"ring causal bf16, Llama-3-8B heads, 3000 + 17 + 1 tokens", ANYATTN_CP_RING, ANYATTN_DTYPE_BF16, 32, 8, 128, 1,
       0, 0, 3, {3000, 17, 1}, 0, 0, -1, -1, 0},
      {"two-level causal f16 GQA, head dim 64, sinks", ANYATTN_CP_TWO_LEVEL, ANYATTN_DTYPE_F16, 8, 2, 64, 1, 1, 0, 2,
       {999, 64}, 0, 0, -1, -1, 0},
      {"ring non-causal f32, head dim 64", ANYATTN_CP_RING, ANYATTN_DTYPE_F32, 4, 4, 64, 0, 0, 0, 2, {300, 5}, 0, 0, -1,
       -1, 0},
      {"ring causal bf16, captured in a CUDA graph", ANYATTN_CP_RING, ANYATTN_DTYPE_BF16, 16, 4, 128, 1, 1, 1, 1,
       {1024}, 0, 0, -1, -1, 0},
      {"decode bf16, Llama-3-8B heads, 3 sequences, sinks", ANYATTN_CP_DECODE, ANYATTN_DTYPE_BF16, 32, 8, 128, 1, 1, 0,
       3, {4096, 100, 33}, 1, 0, -1, -1, 0},
      {"chunked prefill bf16, 4 new tokens on the rank that holds them", ANYATTN_CP_DECODE, ANYATTN_DTYPE_BF16, 32, 8,
       128, 1, 0, 0, 2, {500, 77}, 4, 0, -1, -1, 0},
      {"ring causal bf16 GQA, window 100, ALiBi", ANYATTN_CP_RING, ANYATTN_DTYPE_BF16, 8, 2, 128, 1, 0, 0, 2,
       {1000, 77}, 0, 1, 100, -1, 1},
      {"two-level non-causal f16, windows 64 left 16 right, sinks", ANYATTN_CP_TWO_LEVEL, ANYATTN_DTYPE_F16, 4, 4, 64, 0,
       1, 0, 1, {513}, 0, 1, 64, 16, 0},
      {"decode bf16 GQA, window 200, ALiBi, placed by q_pos", ANYATTN_CP_DECODE, ANYATTN_DTYPE_BF16, 32, 8, 128, 1, 0,
       0, 2, {3000, 150}, 1, 1, 200, -1, 1},
      {"chunked prefill f16, 5 new tokens, ALiBi, placed by q_pos", ANYATTN_CP_DECODE, ANYATTN_DTYPE_F16, 8, 2, 64, 1,
       1, 0, 1, {700}, 5, 0, -1, -1, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(ctx, comm, &cases[i], (int)i);
  anyattn_cp_comm_free(comm);
  ncclCommDestroy(nc);
  anyattn_context_free(ctx);
  printf("test_cp_nccl: %s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
