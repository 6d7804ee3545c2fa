/* test_split_merge.c: split-KV decode merged inside the attention kernel by
 * the last segment to arrive (src/gpu/kernel/merge.cuh), whose arrival
 * counters live in the caller's workspace and must be zero again after every
 * call. Three plans of different problems, each with its own workspace and its
 * own stream, run many calls side by side with fresh lengths each call
 * (padding sequences with q_len 0 and kv_len 0 among them): two decode
 * batches, and mixed batches on a role pair (the decode rows split into
 * segments on the decode tile, the longer sequences on the prefill tile,
 * attn_roles_kernel); every call's output, poisoned before the call, is
 * checked against the double reference.
 * Then one batch runs five times: the outputs must match bitwise, whichever
 * segment merged. Every other call promises batch->prior_writes NEW_KEYS,
 * so the kernel reads metadata and its first K/V tiles before its
 * dependency wait (the work before it writes none of them here). Exit: 0 pass, 1 fail, 77 skip (no CUDA build or device). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(ANYATTN_WITH_CUDA)
#include <cuda_runtime.h>
#endif

#include "devmem.h"
#include "reference.h"
#include "tl_util.h"

#define FP32_EPS 5.9604644775390625e-08 /* 2^-24 */
enum { SEQS = 5, CALLS = 24, DETERMINISM_RUNS = 5, LANES = 3 };

typedef struct {
  const char *name;
  anyattn_dtype dtype;
  int head_dim, num_kv_heads, group, block_size, causal, window_left, sinks;
  int max_context;
  const char *config; /* a forced split count wider than a cluster merges: the last arrival merges */
  int max_q;          /* > 1: mixed batches, q_len up to this (one decode Q block of the pair's tile: up to 4) */
} spec;

static const spec kSpecs[LANES] = {
    {"bf16_d128_g4_sinks_k16", ANYATTN_DTYPE_BF16, 128, 8, 4, 16, 1, -1, 1, 3000, "m16n128w8s2-k16", 1},
    {"f16_d64_g2_window_auto", ANYATTN_DTYPE_F16, 64, 2, 2, 32, 1, 700, 0, 2500, NULL, 1},
    {"bf16_d128_g4_sinks_roles", ANYATTN_DTYPE_BF16, 128, 4, 4, 16, 1, -1, 1, 3000, "m128n128w8s2+m16n128w8s2", 40},
};

/* One problem's plan, stream, workspace and buffers; host copies for the reference. */
typedef struct {
  const spec *sp;
  anyattn_plan *plan;
  void *stream;
  int hq, pages, rows, tokens; /* tokens: the batch's num_tokens (SEQS x max_q), real ones cu[SEQS] */
  size_t es, q_elems, cache_elems, ws_bytes;
  void *q, *k, *v;                 /* host, problem dtype */
  float *qf, *kf, *vf, *sinks;     /* host fp32 copies (exact) */
  void *dq, *dk, *dv, *dout, *dws; /* device */
  float *dlse, *dsinks;
  int32_t *dcu, *dkl, *dbt;
  int32_t cu[SEQS + 1], kl[SEQS], bt[SEQS * 256];
  void *out;
  float *lse;
  int calls; /* odd calls promise batch->prior_writes NEW_KEYS (the early reads) */
} lane;

static int stream_new(void **s) {
#if defined(ANYATTN_WITH_CUDA)
  cudaStream_t st;
  if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) return -1;
  *s = (void *)st;
  return 0;
#else
  (void)s;
  return -1;
#endif
}

static int stream_done(void *s) {
#if defined(ANYATTN_WITH_CUDA)
  return cudaStreamSynchronize((cudaStream_t)s) == cudaSuccess ? 0 : -1;
#else
  (void)s;
  return -1;
#endif
}

static int stream_copy(void *dst, const void *src, size_t n, int to_device, void *s) {
#if defined(ANYATTN_WITH_CUDA)
  return cudaMemcpyAsync(dst, src, n, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                         (cudaStream_t)s) == cudaSuccess
             ? 0
             : -1;
#else
  (void)dst, (void)src, (void)n, (void)to_device, (void)s;
  return -1;
#endif
}

static int stream_poison(void *dst, size_t n, void *s) {
#if defined(ANYATTN_WITH_CUDA)
  return cudaMemsetAsync(dst, 0xff, n, (cudaStream_t)s) == cudaSuccess ? 0 : -1;
#else
  (void)dst, (void)n, (void)s;
  return -1;
#endif
}

static int lane_init(anyattn_context *ctx, lane *L, const spec *sp, uint64_t *r) {
  const anyattn_backend be = ANYATTN_BACKEND_CUDA;
  memset(L, 0, sizeof *L);
  L->sp = sp;
  L->hq = sp->num_kv_heads * sp->group;
  L->es = anyattn_dtype_size(sp->dtype);
  L->pages = SEQS * ((sp->max_context + sp->block_size - 1) / sp->block_size);
  L->tokens = SEQS * sp->max_q;
  L->rows = L->tokens * L->hq;
  L->q_elems = (size_t)L->tokens * L->hq * sp->head_dim;
  L->cache_elems = (size_t)L->pages * sp->block_size * sp->num_kv_heads * sp->head_dim;
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = L->hq, pr.num_kv_heads = sp->num_kv_heads, pr.head_dim = sp->head_dim, pr.dtype = sp->dtype;
  pr.block_size = sp->block_size, pr.causal = sp->causal, pr.window_left = sp->window_left, pr.config = sp->config;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = SEQS, lim.max_tokens = L->tokens, lim.max_context = sp->max_context;
  const anyattn_status ps = anyattn_plan_create(ctx, &pr, &lim, &L->plan);
  if (ps == ANYATTN_STATUS_UNSUPPORTED_CONFIG && sp->max_q > 1) { /* a device without the pair's shared memory */
    printf("SKIP %s: %s\n", sp->name, anyattn_last_error());
    return -1;
  }
  if (ps != ANYATTN_STATUS_OK) {
    printf("FAIL %s: plan_create: %s\n", sp->name, anyattn_last_error());
    return 1;
  }
  printf("%s: %s, workspace %zu bytes\n", sp->name, anyattn_plan_describe(L->plan),
         anyattn_plan_workspace_size(L->plan));
  L->q = malloc(L->q_elems * L->es), L->k = malloc(L->cache_elems * L->es), L->v = malloc(L->cache_elems * L->es);
  L->qf = (float *)malloc(sizeof(float) * L->q_elems), L->kf = (float *)malloc(sizeof(float) * L->cache_elems);
  L->vf = (float *)malloc(sizeof(float) * L->cache_elems), L->sinks = (float *)malloc(sizeof(float) * L->hq);
  L->out = malloc(L->q_elems * L->es), L->lse = (float *)malloc(sizeof(float) * L->rows);
  if (!L->q || !L->k || !L->v || !L->qf || !L->kf || !L->vf || !L->sinks || !L->out || !L->lse) return 1;
  tl_fill_normal(sp->dtype, L->q, L->q_elems, 1.0f, r);
  tl_fill_normal(sp->dtype, L->k, L->cache_elems, 1.0f, r);
  tl_fill_normal(sp->dtype, L->v, L->cache_elems, 1.0f, r);
  for (size_t i = 0; i < L->q_elems; i++) L->qf[i] = tl_load(sp->dtype, L->q, i);
  for (size_t i = 0; i < L->cache_elems; i++) L->kf[i] = tl_load(sp->dtype, L->k, i), L->vf[i] = tl_load(sp->dtype, L->v, i);
  for (int h = 0; h < L->hq; h++) L->sinks[h] = (float)(1.5 * tl_rng_normal(r));
  L->dq = dm_alloc(be, L->q_elems * L->es), L->dout = dm_alloc(be, L->q_elems * L->es);
  L->dk = dm_alloc(be, L->cache_elems * L->es), L->dv = dm_alloc(be, L->cache_elems * L->es);
  L->dlse = (float *)dm_alloc(be, sizeof(float) * L->rows), L->dsinks = (float *)dm_alloc(be, sizeof(float) * L->hq);
  L->dcu = (int32_t *)dm_alloc(be, sizeof L->cu), L->dkl = (int32_t *)dm_alloc(be, sizeof L->kl);
  L->dbt = (int32_t *)dm_alloc(be, sizeof L->bt);
  L->ws_bytes = anyattn_plan_workspace_size(L->plan);
  L->dws = dm_alloc_workspace(be, L->plan);
  if (!L->dq || !L->dout || !L->dk || !L->dv || !L->dlse || !L->dsinks || !L->dcu || !L->dkl || !L->dbt || !L->dws ||
      stream_new(&L->stream) || dm_to_device(be, L->dq, L->q, L->q_elems * L->es) ||
      dm_to_device(be, L->dk, L->k, L->cache_elems * L->es) || dm_to_device(be, L->dv, L->v, L->cache_elems * L->es) ||
      dm_to_device(be, L->dsinks, L->sinks, sizeof(float) * L->hq)) {
    printf("FAIL %s: device memory\n", sp->name);
    return 1;
  }
  return 0;
}

static void lane_free(lane *L) {
  const anyattn_backend be = ANYATTN_BACKEND_CUDA;
  anyattn_plan_free(L->plan);
  dm_free(be, L->dq), dm_free(be, L->dout), dm_free(be, L->dk), dm_free(be, L->dv), dm_free(be, L->dlse);
  dm_free(be, L->dsinks), dm_free(be, L->dcu), dm_free(be, L->dkl), dm_free(be, L->dbt), dm_free(be, L->dws);
#if defined(ANYATTN_WITH_CUDA)
  if (L->stream) cudaStreamDestroy((cudaStream_t)L->stream);
#endif
  free(L->q), free(L->k), free(L->v), free(L->qf), free(L->kf), free(L->vf), free(L->sinks), free(L->out), free(L->lse);
}

/* Fresh lengths: decode rows (q_len 1; mixed: 1 to 4 or up to max_q,
 * at most kv_len) with contexts from 1 to max_context, and one or two
 * padding sequences (q_len 0, kv_len 0 or not); pages drawn without repeats
 * from the whole cache. */
static void draw(lane *L, uint64_t *r) {
  const spec *sp = L->sp;
  const int per = (sp->max_context + sp->block_size - 1) / sp->block_size;
  L->cu[0] = 0;
  for (int s = 0; s < SEQS; s++) {
    const int pad = tl_rng_int(r, 0, 3) == 0;
    L->kl[s] = pad && tl_rng_int(r, 0, 1) ? 0 : tl_rng_int(r, 1, sp->max_context);
    int q = pad ? 0 : 1;
    if (!pad && sp->max_q > 1) q = tl_rng_int(r, 1, tl_rng_int(r, 0, 1) ? 4 : sp->max_q);
    if (q > L->kl[s]) q = L->kl[s];
    L->cu[s + 1] = L->cu[s] + q;
    for (int p = 0; p < per; p++) L->bt[s * per + p] = s * per + (p * 7 + s) % per; /* scattered within the slice */
  }
}

static int enqueue(lane *L, uint64_t *r) {
  draw(L, r);
  const spec *sp = L->sp;
  const int per = (sp->max_context + sp->block_size - 1) / sp->block_size;
  if (stream_copy(L->dcu, L->cu, sizeof L->cu, 1, L->stream) || stream_copy(L->dkl, L->kl, sizeof L->kl, 1, L->stream) ||
      stream_copy(L->dbt, L->bt, sizeof(int32_t) * SEQS * per, 1, L->stream) ||
      stream_poison(L->dout, L->q_elems * L->es, L->stream) || stream_poison(L->dlse, sizeof(float) * L->rows, L->stream))
    return -1;
  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = SEQS, b.num_tokens = L->tokens, b.cu_seqlens_q = L->dcu, b.seq_lens_k = L->dkl, b.block_table = L->dbt;
  b.block_table_stride = per;
  b.prior_writes = L->calls++ & 1 ? ANYATTN_PRIOR_WRITES_NEW_KEYS : ANYATTN_PRIOR_WRITES_ANY;
  anyattn_tensors t;
  anyattn_tensors_init(&t);
  t.q = L->dq, t.k_cache = L->dk, t.v_cache = L->dv, t.num_blocks = L->pages, t.out = L->dout, t.lse = L->dlse;
  t.sinks = sp->sinks ? L->dsinks : NULL;
  if (anyattn_run(L->plan, &b, &t, L->dws, L->ws_bytes, L->stream) != ANYATTN_STATUS_OK) {
    printf("  %s: run: %s\n", sp->name, anyattn_last_error());
    return -1;
  }
  return stream_copy(L->out, L->dout, L->q_elems * L->es, 0, L->stream) ||
                 stream_copy(L->lse, L->dlse, sizeof(float) * L->rows, 0, L->stream)
             ? -1
             : 0;
}

/* The finished call against the double reference (the conformance bounds); the
 * rows past cu[SEQS] must keep their poison. */
static int check(const lane *L, int call) {
  const spec *sp = L->sp;
  const int d = sp->head_dim, T = L->cu[SEQS], per = (sp->max_context + sp->block_size - 1) / sp->block_size;
  anyattn_problem rp;
  anyattn_problem_init(&rp);
  rp.num_q_heads = L->hq, rp.num_kv_heads = sp->num_kv_heads, rp.head_dim = d, rp.dtype = ANYATTN_DTYPE_F32;
  rp.block_size = sp->block_size, rp.causal = sp->causal, rp.window_left = sp->window_left;
  anyattn_batch hb;
  anyattn_batch_init(&hb);
  hb.num_seqs = SEQS, hb.num_tokens = L->tokens, hb.cu_seqlens_q = L->cu, hb.seq_lens_k = L->kl, hb.block_table = L->bt;
  hb.block_table_stride = per;
  anyattn_tensors ht;
  anyattn_tensors_init(&ht);
  ht.q = L->qf, ht.k_cache = L->kf, ht.v_cache = L->vf, ht.num_blocks = L->pages, ht.sinks = sp->sinks ? L->sinks : NULL;
  const size_t n = (size_t)L->tokens * L->hq * d;
  double *ref = (double *)malloc(sizeof(double) * n), *ref_abs = (double *)malloc(sizeof(double) * n);
  double *ref_lse = (double *)malloc(sizeof(double) * L->rows), *xmag = (double *)malloc(sizeof(double) * L->rows);
  long bad = !ref || !ref_abs || !ref_lse || !xmag || tl_reference(&rp, &hb, &ht, ref, ref_lse, ref_abs, xmag) != 0;
  const double rtol = sp->dtype == ANYATTN_DTYPE_F16 ? 2.5e-3 : 1.6e-2, atol = sp->dtype == ANYATTN_DTYPE_F16 ? 2e-4 : 1e-3;
  for (int row = 0; !bad && row < L->rows; row++) {
    const int real = row < T * L->hq;
    for (int e = 0; e < d; e++) {
      const size_t i = (size_t)row * d + e;
      const double got = tl_load(sp->dtype, L->out, i);
      if (!real) {
        if (!isnan(got) && bad++ == 0) printf("  %s call %d: padding row %d written\n", sp->name, call, row);
        continue;
      }
      const double bound = atol + (rtol + 8.0 * FP32_EPS * xmag[row]) * ref_abs[i];
      if (!(fabs(got - ref[i]) <= bound) && bad++ == 0)
        printf("  %s call %d: out[token %d, head %d, %d] = %.7g, reference %.7g\n", sp->name, call, row / L->hq,
               row % L->hq, e, got, ref[i]);
    }
    if (!real) continue;
    const double lb = 1e-3 + 4.0 * FP32_EPS * (xmag[row] + fabs(ref_lse[row]));
    if (!(fabs(L->lse[row] - ref_lse[row]) <= lb) && !(isinf(ref_lse[row]) && L->lse[row] == ref_lse[row]) && bad++ == 0)
      printf("  %s call %d: lse[token %d, head %d] = %.9g, reference %.9g\n", sp->name, call, row / L->hq, row % L->hq,
             L->lse[row], ref_lse[row]);
  }
  free(ref), free(ref_abs), free(ref_lse), free(xmag);
  return bad != 0;
}

/* One batch, DETERMINISM_RUNS times on one workspace: the same bits each time. */
static int determinism(lane *L, uint64_t *r) {
  const size_t bytes = L->q_elems * L->es;
  void *first = malloc(bytes);
  int bad = !first;
  uint64_t r0 = *r;
  for (int i = 0; !bad && i < DETERMINISM_RUNS; i++) {
    uint64_t rr = r0; /* the same lengths every run */
    bad = enqueue(L, &rr) || stream_done(L->stream);
    if (!bad && i == 0) memcpy(first, L->out, bytes);
    else if (!bad && memcmp(first, L->out, bytes) != 0) {
      printf("  %s: run %d differs bitwise from run 1\n", L->sp->name, i + 1);
      bad = 1;
    }
  }
  free(first);
  printf("%s %s: %d runs of one batch bitwise equal\n", bad ? "FAIL" : "PASS", L->sp->name, DETERMINISM_RUNS);
  return bad;
}

int main(void) {
  const uint64_t seed = tl_seed_from_env_or_time();
  printf("test_split_merge: seed 0x%llx, rerun with ANYATTN_SEED=0x%llx\n", (unsigned long long)seed,
         (unsigned long long)seed);
  anyattn_context *ctx = NULL;
  const int open = dm_gpu_test_context(ANYATTN_BACKEND_CUDA, &ctx);
  if (open != 0) return open;
  uint64_t r = seed;
  lane lanes[LANES];
  memset(lanes, 0, sizeof lanes);
  int live[LANES], failures = 0;
  for (int l = 0; l < LANES; l++) {
    const int rc = lane_init(ctx, &lanes[l], &kSpecs[l], &r);
    live[l] = rc == 0;
    failures += rc > 0;
  }
  int calls_bad[LANES] = {0};
  for (int call = 0; !failures && call < CALLS; call++) {
    /* every lane's call in flight together, each on its stream and workspace */
    for (int l = 0; l < LANES; l++)
      if (live[l] && enqueue(&lanes[l], &r)) failures++;
    for (int l = 0; l < LANES; l++)
      if (live[l] && stream_done(lanes[l].stream)) failures++;
    for (int l = 0; !failures && l < LANES; l++)
      if (live[l]) calls_bad[l] += check(&lanes[l], call);
  }
  for (int l = 0; l < LANES; l++) {
    if (!live[l]) continue;
    printf("%s %s: %d calls with fresh lengths on %d streams, %d wrong\n", calls_bad[l] ? "FAIL" : "PASS",
           kSpecs[l].name, CALLS, LANES, calls_bad[l]);
    failures += calls_bad[l] != 0;
  }
  for (int l = 0; !failures && l < LANES; l++)
    if (live[l]) failures += determinism(&lanes[l], &r);
  for (int l = 0; l < LANES; l++) lane_free(&lanes[l]);
  anyattn_context_free(ctx);
  printf("%s (seed 0x%llx)\n", failures ? "FAIL" : "PASS", (unsigned long long)seed);
  return failures ? 1 : 0;
}
