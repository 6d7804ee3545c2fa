/* test_cp.c: context-parallel attention over MPI on the CPU backend, run by
 * mpirun with 1 to 4 processes (ctest test_cp_mpi_npN). Every rank's output
 * is compared with the double-precision reference (testkit/reference.c) on
 * the whole batch: ring and two-level prefill (the two-level layouts emulate
 * nodes of 1, 2 or more ranks) for causal and non-causal problems, GQA,
 * odd and tiny lengths, sinks, softcap, sliding windows (left; left and
 * right when non-causal), ALiBi, three dtypes; decode over caches sharded in
 * ranges and in round-robin pages, with chunked prefill on the rank that
 * holds the new keys, and with windows and ALiBi over ranges placed by
 * batch->q_pos; then the misuse statuses. Fresh random
 * inputs; the seed is printed ($ANYATTN_SEED repeats a run). Exit 0 when
 * every case passes on every rank. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anyattn_cp.h"
#include "reference.h"
#include "tl_util.h"

static int rank, world;
static uint64_t seed;
static int failed_cases, passed_cases;

typedef struct {
  const char *name;
  anyattn_cp_mode mode;
  int rpn, prefetch;
  anyattn_dtype dtype;
  int hq, hkv, d, causal, sinks, lse;
  float softcap;
  int n;
  int lens[6]; /* whole-sequence lengths (prefill); keys per sequence (decode) */
  int q_len;   /* decode: new tokens per sequence */
  int rr;      /* decode: 1 = keys dealt in round-robin pages, 0 = contiguous ranges */
  int windowed, wl, wr; /* 1: problem windows wl (left) and wr (right), else none */
  int alibi;    /* ALiBi slopes (decode: with batch->q_pos, over ranges) */
} cp_case;

/* One verdict for all ranks: PASS only when every rank passed. */
static void verdict(const char *name, int bad, const char *why) {
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad) printf("  rank %d: %s: %s\n", rank, name, why);
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("%s %s (%d ranks)\n", any ? "FAIL" : "PASS", name, world);
  fflush(stdout);
  if (any) failed_cases++;
  else passed_cases++;
}

/* verdict() with the plan's layout in the name. */
static void verdict_plan(const char *name, const anyattn_cp_plan *plan, int bad, const char *why) {
  char full[256];
  anyattn_cp_plan_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (plan && anyattn_cp_plan_get_info(plan, &info) == ANYATTN_STATUS_OK && info.mode == ANYATTN_CP_TWO_LEVEL)
    snprintf(full, sizeof full, "%s [%d node%s x %d, prefetch %d%%]", name, info.nodes, info.nodes > 1 ? "s" : "",
             info.ranks_per_node, info.prefetch_percent);
  else
    snprintf(full, sizeof full, "%s", name);
  verdict(full, bad, why);
}

static void *xalloc(size_t bytes) {
  void *p = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  if (!p) {
    fprintf(stderr, "allocation of %zu bytes failed\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

static anyattn_problem problem_of(const cp_case *c) {
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = c->hq;
  pr.num_kv_heads = c->hkv;
  pr.head_dim = c->d;
  pr.dtype = c->dtype;
  pr.causal = c->causal;
  pr.softcap = c->softcap;
  pr.block_size = 16;
  if (c->windowed) pr.window_left = c->wl, pr.window_right = c->wr;
  return pr;
}

/* The reference of the whole batch: q rows [cu[s], cu[s+1]) are the last
 * q_lens of kv (dense, block size 1). out/lse/abs/xmag per q row and head. */
typedef struct {
  double *out, *lse, *abs, *xmag;
} ref_out;

static void reference(const cp_case *c, int n, const int32_t *cu, const int32_t *kv_lens, const int32_t *kv_off,
                      const void *q, const void *k, const void *v, const float *sinks, const float *slopes,
                      ref_out *r) {
  anyattn_problem pr = problem_of(c);
  pr.block_size = 1;
  int maxkv = 1, total_kv = 0;
  for (int s = 0; s < n; s++) maxkv = kv_lens[s] > maxkv ? kv_lens[s] : maxkv, total_kv += kv_lens[s];
  int32_t *bt = (int32_t *)calloc((size_t)n * maxkv, sizeof *bt);
  for (int s = 0; s < n; s++)
    for (int j = 0; j < kv_lens[s]; j++) bt[(size_t)s * maxkv + j] = kv_off[s] + j;
  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = n;
  b.num_tokens = cu[n];
  b.cu_seqlens_q = cu;
  b.seq_lens_k = kv_lens;
  b.block_table = bt;
  b.block_table_stride = maxkv;
  anyattn_tensors t;
  anyattn_tensors_init(&t);
  t.q = q;
  t.k_cache = k;
  t.v_cache = v;
  t.num_blocks = total_kv > 0 ? total_kv : 1;
  t.sinks = sinks;
  t.alibi_slopes = slopes;
  const size_t rows = (size_t)cu[n] * c->hq;
  r->out = (double *)malloc((rows * c->d + 1) * sizeof(double));
  r->abs = (double *)malloc((rows * c->d + 1) * sizeof(double));
  r->lse = (double *)malloc((rows + 1) * sizeof(double));
  r->xmag = (double *)malloc((rows + 1) * sizeof(double));
  if (tl_reference(&pr, &b, &t, r->out, r->lse, r->abs, r->xmag) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
  free(bt);
}

static void ref_free(ref_out *r) {
  free(r->out);
  free(r->lse);
  free(r->abs);
  free(r->xmag);
}

/* got row `lrow` (hq heads) against reference row `grow`, with the
 * conformance suite's bounds (testkit/conformance.c): out within
 * atol + (rtol + 8 eps |x|max) A, lse within lse_atol. Returns 1 on a miss. */
static int compare_row(const cp_case *c, const void *out, const float *lse, size_t lrow, const ref_out *r,
                       size_t grow, char *why, size_t why_size) {
  const double eps = 5.9604644775390625e-08;
  double atol = 1e-5, rtol = 1e-5, lse_atol = 1e-5;
  if (c->dtype == ANYATTN_DTYPE_F16) atol = 2e-4, rtol = 2.5e-3, lse_atol = 1e-3;
  if (c->dtype == ANYATTN_DTYPE_BF16) atol = 1e-3, rtol = 1.6e-2, lse_atol = 1e-3;
  for (int h = 0; h < c->hq; h++) {
    const size_t gr = grow * c->hq + h, lr = lrow * c->hq + h;
    const double xe = 8.0 * eps * r->xmag[gr];
    for (int e = 0; e < c->d; e++) {
      const double got = tl_load(c->dtype, out, lr * c->d + e), ref = r->out[gr * c->d + e];
      const double bound = atol + (rtol + 2.0 * xe) * r->abs[gr * c->d + e];
      if (!(fabs(got - ref) <= bound)) {
        snprintf(why, why_size, "out[row %zu, head %d, %d] = %.7g, reference %.7g, bound %.3g", lrow, h, e, got,
                 ref, bound);
        return 1;
      }
    }
    if (lse) {
      const double got = lse[lr], ref = r->lse[gr];
      const int ok = isinf(ref) ? (isinf(got) && got < 0) : fabs(got - ref) <= lse_atol + xe + 4 * eps * fabs(ref);
      if (!ok) {
        snprintf(why, why_size, "lse[row %zu, head %d] = %.9g, reference %.9g", lrow, h, got, ref);
        return 1;
      }
    }
  }
  return 0;
}

/* The ALiBi paper's slopes for hq heads (c->alibi), or NULL. */
static const float *slopes_of(const cp_case *c, float *buf) {
  for (int h = 0; h < c->hq; h++) buf[h] = (float)pow(2.0, -8.0 * (h + 1) / c->hq);
  return c->alibi ? buf : NULL;
}

/* Fills the whole batch's q, k, v (and sinks) from the seed: the same on every rank. */
static void fill_inputs(const cp_case *c, int case_id, size_t q_rows, size_t kv_rows, void **q, void **k, void **v,
                        float *sinks) {
  const size_t es = anyattn_dtype_size(c->dtype);
  uint64_t rng = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(case_id + 1));
  *q = xalloc(q_rows * c->hq * c->d * es);
  *k = xalloc(kv_rows * c->hkv * c->d * es);
  *v = xalloc(kv_rows * c->hkv * c->d * es);
  tl_fill_normal(c->dtype, *q, q_rows * c->hq * c->d, 1.0f, &rng);
  tl_fill_normal(c->dtype, *k, kv_rows * c->hkv * c->d, 1.0f, &rng);
  tl_fill_normal(c->dtype, *v, kv_rows * c->hkv * c->d, 1.0f, &rng);
  for (int h = 0; h < c->hq; h++) sinks[h] = (float)tl_rng_normal(&rng);
}


/* ---- prefill ---------------------------------------------------------------- */
/* Rows of this rank in the zigzag layout: for each sequence its chunk `rank`,
 * then for each its chunk 2 world - 1 - rank; map[i] = the row's global token. */
static int local_rows(const int *lens, int n, const int32_t *cu, int32_t *map) {
  int rows = 0, start, len;
  for (int half = 0; half < 2; half++)
    for (int s = 0; s < n; s++) {
      anyattn_cp_chunk(lens[s], world, half ? 2 * world - 1 - rank : rank, &start, &len);
      for (int i = 0; i < len; i++) map[rows++] = cu[s] + start + i;
    }
  return rows;
}

static void gather_rows(const void *src, void *dst, const int32_t *map, int rows, size_t row_bytes) {
  for (int i = 0; i < rows; i++)
    memcpy((char *)dst + (size_t)i * row_bytes, (const char *)src + (size_t)map[i] * row_bytes, row_bytes);
}

static void run_prefill(anyattn_context *ctx, const cp_case *c, int id) {
  char why[320] = "";
  int bad = 0, n = c->n, total = 0, maxlen = 1;
  int32_t cu[7], lens[6];
  cu[0] = 0;
  for (int s = 0; s < n; s++) {
    lens[s] = c->lens[s];
    cu[s + 1] = cu[s] + lens[s];
    maxlen = lens[s] > maxlen ? lens[s] : maxlen;
  }
  total = cu[n];
  const size_t es = anyattn_dtype_size(c->dtype), qrow = (size_t)c->hq * c->d * es, kvrow = (size_t)c->hkv * c->d * es;
  void *q, *k, *v;
  float sinks[64], sbuf[64];
  const float *slopes = slopes_of(c, sbuf);
  fill_inputs(c, id, (size_t)total, (size_t)total, &q, &k, &v, sinks);
  int32_t *map = (int32_t *)malloc(((size_t)total + 1) * sizeof *map);
  const int rows = local_rows(c->lens, n, cu, map);
  void *lq = xalloc(rows * qrow + 1), *lk = xalloc(rows * kvrow + 1), *lv = xalloc(rows * kvrow + 1);
  void *out = xalloc(rows * qrow + 1);
  float *lse = (float *)xalloc(rows * c->hq * sizeof(float) + 1);
  gather_rows(q, lq, map, rows, qrow);
  gather_rows(k, lk, map, rows, kvrow);
  gather_rows(v, lv, map, rows, kvrow);
  tl_fill_nan(c->dtype, out, (size_t)rows * c->hq * c->d);
  tl_fill_nan(ANYATTN_DTYPE_F32, lse, (size_t)rows * c->hq);

  anyattn_cp_comm *comm = NULL;
  anyattn_cp_plan *plan = NULL;
  void *ws = NULL;
  MPI_Comm mc = MPI_COMM_WORLD;
  anyattn_status st = anyattn_cp_comm_create_mpi(&mc, c->mode == ANYATTN_CP_TWO_LEVEL ? c->rpn : 0, &comm);
  anyattn_problem pr = problem_of(c);
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = n;
  lim.max_tokens = total > 0 ? total : 1;
  lim.max_context = maxlen;
  anyattn_cp_options opt;
  anyattn_cp_options_init(&opt);
  opt.mode = c->mode;
  opt.prefetch_percent = c->prefetch;
  if (st == ANYATTN_STATUS_OK) st = anyattn_cp_plan_create(ctx, comm, &pr, &lim, &opt, &plan);
  if (st == ANYATTN_STATUS_OK) {
    const size_t wsz = anyattn_cp_plan_workspace_size(plan);
    ws = xalloc(wsz + 1);
    anyattn_cp_tensors t;
    anyattn_cp_tensors_init(&t);
    t.q = lq, t.k = lk, t.v = lv, t.out = out;
    t.lse = c->lse ? lse : NULL;
    t.sinks = c->sinks ? sinks : NULL;
    t.alibi_slopes = slopes;
    st = anyattn_cp_prefill(plan, n, lens, &t, ws, wsz, NULL);
  }
  if (st != ANYATTN_STATUS_OK) {
    bad = 1;
    snprintf(why, sizeof why, "%s", anyattn_cp_last_error());
  } else {
    ref_out r;
    reference(c, n, cu, lens, cu, q, k, v, c->sinks ? sinks : NULL, slopes, &r);
    for (int i = 0; i < rows && !bad; i++) bad = compare_row(c, out, c->lse ? lse : NULL, i, &r, map[i], why, sizeof why);
    ref_free(&r);
  }
  verdict_plan(c->name, plan, bad, why);
  anyattn_cp_plan_free(plan);
  anyattn_cp_comm_free(comm);
  free(ws), free(q), free(k), free(v), free(lq), free(lk), free(lv), free(out), free(lse), free(map);
}

static void run_prefill_cases(anyattn_context *ctx) {
  const int pair = world % 2 == 0 ? 2 : 1; /* two ranks a node where the world divides */
  const cp_case cases[] = {
      {"ring causal bf16 GQA, one odd sequence", ANYATTN_CP_RING, 0, -1, ANYATTN_DTYPE_BF16, 4, 2, 32, 1, 0, 1, 0, 1,
       {157}, 0, 0, 0, -1, -1, 0},
      {"ring causal f32 MQA, tiny and empty sequences, sinks", ANYATTN_CP_RING, 0, -1, ANYATTN_DTYPE_F32, 2, 1, 16, 1,
       1, 1, 0, 5, {1, 3, 97, 0, 64}, 0, 0, 0, -1, -1, 0},
      {"ring non-causal f16 MHA, softcap", ANYATTN_CP_RING, 0, -1, ANYATTN_DTYPE_F16, 4, 4, 64, 0, 0, 1, 30.0f, 3,
       {50, 7, 1}, 0, 0, 0, -1, -1, 0},
      {"ring non-causal f32, sequences of 1-3 tokens", ANYATTN_CP_RING, 0, -1, ANYATTN_DTYPE_F32, 2, 1, 8, 0, 0, 1, 0,
       3, {1, 2, 3}, 0, 0, 0, -1, -1, 0},
      {"two-level causal bf16, default prefetch", ANYATTN_CP_TWO_LEVEL, pair, -1, ANYATTN_DTYPE_BF16, 8, 2, 64, 1, 0,
       1, 0, 2, {211, 33}, 0, 0, 0, -1, -1, 0},
      {"two-level causal f32, one rank a node", ANYATTN_CP_TWO_LEVEL, 1, -1, ANYATTN_DTYPE_F32, 4, 2, 16, 1, 1, 1, 0, 2,
       {90, 5}, 0, 0, 0, -1, -1, 0},
      {"two-level causal f16 GQA, prefetch 100%, sinks", ANYATTN_CP_TWO_LEVEL, pair, 100, ANYATTN_DTYPE_F16, 6, 2, 32,
       1, 1, 1, 0, 3, {130, 64, 2}, 0, 0, 0, -1, -1, 0},
      {"two-level non-causal f32, prefetch 0%", ANYATTN_CP_TWO_LEVEL, pair, 0, ANYATTN_DTYPE_F32, 2, 2, 16, 0, 0, 1, 0,
       2, {40, 41}, 0, 0, 0, -1, -1, 0},
      {"two-level causal bf16, prefetch 37%, long", ANYATTN_CP_TWO_LEVEL, pair, 37, ANYATTN_DTYPE_BF16, 4, 1, 32, 1, 0,
       0, 0, 1, {521}, 0, 0, 0, -1, -1, 0},
      {"two-level causal f32, all ranks one node", ANYATTN_CP_TWO_LEVEL, world, -1, ANYATTN_DTYPE_F32, 2, 1, 16, 1, 0,
       1, 0, 2, {77, 12}, 0, 0, 0, -1, -1, 0},
      {"ring causal bf16 GQA, window 37", ANYATTN_CP_RING, 0, -1, ANYATTN_DTYPE_BF16, 4, 2, 32, 1, 0, 1, 0, 2,
       {157, 40}, 0, 0, 1, 37, -1, 0},
      {"ring non-causal f32, windows 20 left 9 right", ANYATTN_CP_RING, 0, -1, ANYATTN_DTYPE_F32, 2, 1, 16, 0, 0, 1, 0,
       3, {97, 13, 1}, 0, 0, 1, 20, 9, 0},
      {"ring non-causal f32, window 0 right only", ANYATTN_CP_RING, 0, -1, ANYATTN_DTYPE_F32, 2, 2, 8, 0, 1, 1, 0, 2,
       {61, 3}, 0, 0, 1, -1, 0, 0},
      {"ring causal f16 ALiBi, sinks", ANYATTN_CP_RING, 0, -1, ANYATTN_DTYPE_F16, 4, 1, 32, 1, 1, 1, 0, 2, {130, 5},
       0, 0, 0, -1, -1, 1},
      {"ring non-causal bf16 ALiBi, windows 50 left 50 right, softcap", ANYATTN_CP_RING, 0, -1, ANYATTN_DTYPE_BF16, 2,
       2, 64, 0, 0, 1, 20.0f, 1, {177}, 0, 0, 1, 50, 50, 1},
      {"two-level causal f32 ALiBi, window 25", ANYATTN_CP_TWO_LEVEL, pair, -1, ANYATTN_DTYPE_F32, 4, 2, 16, 1, 1, 1, 0,
       2, {200, 31}, 0, 0, 1, 25, -1, 1},
      {"two-level non-causal f16, windows 10 left 3 right, prefetch 50%", ANYATTN_CP_TWO_LEVEL, pair, 50,
       ANYATTN_DTYPE_F16, 2, 1, 32, 0, 0, 1, 0, 2, {64, 65}, 0, 0, 1, 10, 3, 0},
      {"two-level causal bf16, window 0 (the diagonal)", ANYATTN_CP_TWO_LEVEL, 1, -1, ANYATTN_DTYPE_BF16, 2, 1, 16, 1, 0,
       1, 0, 1, {45}, 0, 0, 1, 0, -1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_prefill(ctx, &cases[i], (int)i);
}

/* ---- decode over a sharded cache ---------------------------------------------- */
/* The rank holding key j of a sequence's prefix of p keys: contiguous ranges,
 * or pages of 16 keys dealt round-robin. */
static int owner(const cp_case *c, int j, int p) { return c->rr ? (j / 16) % world : (int)((int64_t)j * world / p); }

typedef struct {
  int32_t *lens, *table;
  int stride, pages;
  void *k, *v;
} shard_cache;

/* This rank's cache: its prefix keys of each sequence in order, and on the
 * last rank the q_len new keys after them; pages of 16 in shuffled order. */
static void build_shard(const cp_case *c, const int32_t *kv_off, const void *k, const void *v, shard_cache *sc) {
  const int n = c->n, tail = rank == world - 1;
  const size_t row = (size_t)c->hkv * c->d * anyattn_dtype_size(c->dtype);
  sc->lens = (int32_t *)calloc((size_t)n, sizeof(int32_t));
  int maxp = 1;
  for (int s = 0; s < n; s++) {
    const int p = c->lens[s] - c->q_len;
    for (int j = 0; j < p; j++) sc->lens[s] += owner(c, j, p) == rank;
    if (tail) sc->lens[s] += c->q_len;
    const int pages = (sc->lens[s] + 15) / 16;
    maxp = pages > maxp ? pages : maxp;
    sc->pages += pages;
  }
  sc->stride = maxp;
  sc->table = (int32_t *)calloc((size_t)n * maxp, sizeof(int32_t));
  sc->k = xalloc((size_t)(sc->pages + 1) * 16 * row);
  sc->v = xalloc((size_t)(sc->pages + 1) * 16 * row);
  uint64_t rng = seed + 77 + (uint64_t)rank;
  int32_t *perm = (int32_t *)malloc((size_t)(sc->pages + 1) * sizeof *perm);
  for (int i = 0; i < sc->pages; i++) perm[i] = i;
  for (int i = sc->pages - 1; i > 0; i--) {
    const int j = tl_rng_int(&rng, 0, i), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int next = 0;
  for (int s = 0; s < n; s++) {
    const int p = c->lens[s] - c->q_len;
    int at = 0;
    for (int pg = 0; pg < (sc->lens[s] + 15) / 16; pg++) sc->table[(size_t)s * maxp + pg] = perm[next++];
    for (int j = 0; j < c->lens[s]; j++) {
      if (j < p ? owner(c, j, p) != rank : !tail) continue;
      const size_t dst = ((size_t)sc->table[(size_t)s * maxp + at / 16] * 16 + at % 16) * row;
      memcpy((char *)sc->k + dst, (const char *)k + (size_t)(kv_off[s] + j) * row, row);
      memcpy((char *)sc->v + dst, (const char *)v + (size_t)(kv_off[s] + j) * row, row);
      at++;
    }
  }
  free(perm);
}

static void run_decode(anyattn_context *ctx, const cp_case *c, int id) {
  char why[320] = "";
  int bad = 0;
  const int n = c->n, pad = 2; /* two padding rows past cu[n]: never written */
  int32_t cu[7], kv_off[7], lens[6];
  cu[0] = kv_off[0] = 0;
  for (int s = 0; s < n; s++) {
    lens[s] = c->lens[s];
    cu[s + 1] = cu[s] + c->q_len;
    kv_off[s + 1] = kv_off[s] + lens[s];
  }
  const int rows = cu[n] + pad;
  void *q, *k, *v;
  float sinks[64], sbuf[64];
  const float *slopes = slopes_of(c, sbuf);
  fill_inputs(c, 100 + id, (size_t)rows, (size_t)kv_off[n], &q, &k, &v, sinks);
  shard_cache sc;
  memset(&sc, 0, sizeof sc);
  build_shard(c, kv_off, k, v, &sc);
  /* Windows and ALiBi: this rank's range [lo, ...) of each sequence's keys
   * places the queries, at position lens - q_len, by batch->q_pos. */
  int32_t qpos[6];
  for (int s = 0; s < n; s++) {
    const int p = c->lens[s] - c->q_len;
    int lo = 0;
    while (lo < p && owner(c, lo, p) != rank) lo++;
    qpos[s] = p - (lo < p ? lo : p);
  }
  const int use_qpos = c->windowed || c->alibi;
  int maxlocal = 1;
  for (int s = 0; s < n; s++) maxlocal = sc.lens[s] > maxlocal ? sc.lens[s] : maxlocal;
  void *out = xalloc((size_t)rows * c->hq * c->d * anyattn_dtype_size(c->dtype));
  float *lse = (float *)xalloc((size_t)rows * c->hq * sizeof(float));
  tl_fill_nan(c->dtype, out, (size_t)rows * c->hq * c->d);
  tl_fill_nan(ANYATTN_DTYPE_F32, lse, (size_t)rows * c->hq);

  anyattn_cp_comm *comm = NULL;
  anyattn_cp_plan *plan = NULL;
  void *ws = NULL;
  MPI_Comm mc = MPI_COMM_WORLD;
  anyattn_status st = anyattn_cp_comm_create_mpi(&mc, 0, &comm);
  anyattn_problem pr = problem_of(c);
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = n;
  lim.max_tokens = rows;
  lim.max_context = 4096; /* the same on every rank; covers every shard */
  anyattn_cp_options opt;
  anyattn_cp_options_init(&opt);
  opt.mode = ANYATTN_CP_DECODE;
  if (st == ANYATTN_STATUS_OK) st = anyattn_cp_plan_create(ctx, comm, &pr, &lim, &opt, &plan);
  if (st == ANYATTN_STATUS_OK) {
    const size_t wsz = anyattn_cp_plan_workspace_size(plan);
    ws = xalloc(wsz + 1);
    anyattn_batch b;
    anyattn_batch_init(&b);
    b.num_seqs = n, b.num_tokens = rows, b.cu_seqlens_q = cu, b.seq_lens_k = sc.lens;
    b.block_table = sc.table, b.block_table_stride = sc.stride;
    if (use_qpos) b.q_pos = qpos;
    anyattn_tensors t;
    anyattn_tensors_init(&t);
    t.q = q, t.k_cache = sc.k, t.v_cache = sc.v, t.num_blocks = sc.pages, t.out = out;
    t.lse = c->lse ? lse : NULL;
    t.sinks = c->sinks ? sinks : NULL;
    t.alibi_slopes = slopes;
    st = anyattn_cp_decode(plan, &b, &t, rank == world - 1, ws, wsz, NULL);
  }
  if (st != ANYATTN_STATUS_OK) {
    bad = 1;
    snprintf(why, sizeof why, "%s", anyattn_cp_last_error());
  } else {
    ref_out r;
    reference(c, n, cu, lens, kv_off, q, k, v, c->sinks ? sinks : NULL, slopes, &r);
    for (int i = 0; i < cu[n] && !bad; i++) bad = compare_row(c, out, c->lse ? lse : NULL, i, &r, i, why, sizeof why);
    for (int i = cu[n] * c->hq * c->d; i < rows * c->hq * c->d && !bad; i++)
      if (!isnan(tl_load(c->dtype, out, i))) bad = 1, snprintf(why, sizeof why, "padding row %d written", i / c->hq / c->d);
    ref_free(&r);
  }
  verdict(c->name, bad, why);
  anyattn_cp_plan_free(plan);
  anyattn_cp_comm_free(comm);
  free(ws), free(q), free(k), free(v), free(out), free(lse);
  free(sc.lens), free(sc.table), free(sc.k), free(sc.v);
}

static void run_decode_cases(anyattn_context *ctx) {
  const cp_case cases[] = {
      {"decode causal bf16 GQA, ranges, sinks", ANYATTN_CP_DECODE, 0, -1, ANYATTN_DTYPE_BF16, 8, 2, 64, 1, 1, 1, 0, 3,
       {100, 37, 64}, 1, 0, 0, -1, -1, 0},
      {"decode non-causal f16, round-robin pages", ANYATTN_CP_DECODE, 0, -1, ANYATTN_DTYPE_F16, 4, 1, 32, 0, 0, 1, 0,
       2, {200, 130}, 1, 1, 0, -1, -1, 0},
      {"chunked prefill f32 (5 new tokens), ranges", ANYATTN_CP_DECODE, 0, -1, ANYATTN_DTYPE_F32, 4, 2, 16, 1, 0, 1, 0,
       2, {60, 45}, 5, 0, 0, -1, -1, 0},
      {"chunked prefill bf16 (3 new tokens), round-robin pages, sinks", ANYATTN_CP_DECODE, 0, -1, ANYATTN_DTYPE_BF16,
       4, 4, 32, 1, 1, 0, 0, 1, {300}, 3, 1, 0, -1, -1, 0},
      {"decode causal bf16 GQA, ranges by q_pos, window 40, ALiBi", ANYATTN_CP_DECODE, 0, -1, ANYATTN_DTYPE_BF16, 8, 2,
       64, 1, 0, 1, 0, 3, {100, 37, 64}, 1, 0, 1, 40, -1, 1},
      {"chunked prefill f32 (4 new tokens) non-causal, ranges by q_pos, windows 30 left 2 right", ANYATTN_CP_DECODE, 0,
       -1, ANYATTN_DTYPE_F32, 4, 2, 16, 0, 1, 1, 0, 2, {90, 50}, 4, 0, 1, 30, 2, 0},
      {"chunked prefill f16 (6 new tokens), ranges by q_pos, ALiBi, sinks", ANYATTN_CP_DECODE, 0, -1, ANYATTN_DTYPE_F16,
       4, 1, 32, 1, 1, 1, 0, 1, {200}, 6, 0, 0, -1, -1, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_decode(ctx, &cases[i], (int)i);
}

/* ---- misuse: every status, on every rank alike ---------------------------------- */
static int misuse_bad;
static char misuse_why[320];

static void expect_status(int line, anyattn_status got, anyattn_status want, const char *needle) {
  const char *msg = anyattn_cp_last_error();
  if (got == want && (!needle || strstr(msg, needle))) return;
  if (!misuse_bad)
    snprintf(misuse_why, sizeof misuse_why, "line %d: got %s (\"%s\"), want %s naming \"%s\"", line,
             anyattn_status_name(got), msg, anyattn_status_name(want), needle ? needle : "");
  misuse_bad = 1;
}
#define EXPECT(call, want, needle) expect_status(__LINE__, (call), (want), (needle))

static anyattn_status plan_with(anyattn_context *ctx, anyattn_cp_comm *comm, anyattn_problem pr, anyattn_limits lim,
                                anyattn_cp_options opt, anyattn_cp_plan **plan) {
  const anyattn_status s = anyattn_cp_plan_create(ctx, comm, &pr, &lim, &opt, plan);
  if (s != ANYATTN_STATUS_OK && *plan != NULL) misuse_bad = 1, snprintf(misuse_why, sizeof misuse_why, "plan set on error");
  return s;
}

static void misuse_plans(anyattn_context *ctx, anyattn_cp_comm *comm, anyattn_problem pr, anyattn_limits lim,
                         anyattn_cp_options opt) {
  anyattn_cp_plan *p = NULL;
  anyattn_problem q = pr;
  anyattn_limits l = lim;
  anyattn_cp_options o = opt;
  EXPECT(anyattn_cp_plan_create(ctx, comm, &pr, &lim, &opt, NULL), ANYATTN_STATUS_NULL_POINTER, "plan");
  EXPECT(anyattn_cp_plan_create(NULL, comm, &pr, &lim, &opt, &p), ANYATTN_STATUS_NULL_POINTER, "ctx");
  EXPECT(anyattn_cp_plan_create(ctx, NULL, &pr, &lim, &opt, &p), ANYATTN_STATUS_NULL_POINTER, "comm");
  EXPECT(anyattn_cp_plan_create(ctx, comm, NULL, &lim, &opt, &p), ANYATTN_STATUS_NULL_POINTER, "problem");
  EXPECT(anyattn_cp_plan_create(ctx, comm, &pr, NULL, &opt, &p), ANYATTN_STATUS_NULL_POINTER, "limits");
  EXPECT(anyattn_cp_plan_create(ctx, comm, &pr, &lim, NULL, &p), ANYATTN_STATUS_NULL_POINTER, "options");
  q.window_left = -2;
  EXPECT(plan_with(ctx, comm, q, lim, opt, &p), ANYATTN_STATUS_INVALID_OPTION, "window_left");
  q = pr, q.kv_dtype = ANYATTN_KV_FP8_E4M3;
  EXPECT(plan_with(ctx, comm, q, lim, opt, &p), ANYATTN_STATUS_UNSUPPORTED_OPTION, "kv_dtype");
  q = pr, q.causal = 0, q.window_left = 8, q.window_right = 3; /* windows: every mode */
  EXPECT(plan_with(ctx, comm, q, lim, opt, &p), ANYATTN_STATUS_OK, NULL);
  anyattn_cp_plan_free(p), p = NULL;
  o.mode = ANYATTN_CP_DECODE;
  EXPECT(plan_with(ctx, comm, q, lim, o, &p), ANYATTN_STATUS_OK, NULL);
  anyattn_cp_plan_free(p), p = NULL;
  l.max_context = (1 << 29) + 1;
  EXPECT(plan_with(ctx, comm, pr, l, opt, &p), ANYATTN_STATUS_INVALID_SIZE, "max_context");
  l = lim;
  q = pr, q.struct_size = 8;
  EXPECT(plan_with(ctx, comm, q, lim, opt, &p), ANYATTN_STATUS_STRUCT_SIZE, "problem->struct_size");
  l.struct_size = 4;
  EXPECT(plan_with(ctx, comm, pr, l, opt, &p), ANYATTN_STATUS_STRUCT_SIZE, "limits->struct_size");
  o = opt, o.struct_size = 1;
  EXPECT(plan_with(ctx, comm, pr, lim, o, &p), ANYATTN_STATUS_STRUCT_SIZE, "options->struct_size");
  o = opt, o.mode = (anyattn_cp_mode)7;
  EXPECT(plan_with(ctx, comm, pr, lim, o, &p), ANYATTN_STATUS_INVALID_OPTION, "options->mode");
  o = opt, o.prefetch_percent = 101;
  EXPECT(plan_with(ctx, comm, pr, lim, o, &p), ANYATTN_STATUS_INVALID_OPTION, "prefetch_percent");
  l = lim, l.max_seqs = 257;
  EXPECT(plan_with(ctx, comm, pr, l, opt, &p), ANYATTN_STATUS_INVALID_SIZE, "max_seqs");
  l = lim, l.max_context = 0;
  EXPECT(plan_with(ctx, comm, pr, l, opt, &p), ANYATTN_STATUS_INVALID_SIZE, "max_context");
  q = pr, q.num_q_heads = 3, q.num_kv_heads = 2;
  EXPECT(plan_with(ctx, comm, q, lim, opt, &p), ANYATTN_STATUS_HEAD_RATIO, "num_q_heads");
  if (world > 1) { /* ranks that disagree, or one rank that fails, fail everywhere */
    l = lim, l.max_tokens = rank == 0 ? lim.max_tokens : lim.max_tokens + 1;
    EXPECT(plan_with(ctx, comm, pr, l, opt, &p), ANYATTN_STATUS_INVALID_OPTION, "limits->max_tokens differs");
    q = pr, q.num_q_heads = rank == 0 ? 3 : pr.num_q_heads, q.num_kv_heads = rank == 0 ? 2 : pr.num_kv_heads;
    EXPECT(plan_with(ctx, comm, q, lim, opt, &p), rank == 0 ? ANYATTN_STATUS_HEAD_RATIO : ANYATTN_STATUS_INVALID_OPTION,
           rank == 0 ? "num_q_heads" : "another rank");
  }
}

static void misuse_prefill(anyattn_cp_plan *plan, anyattn_cp_plan *decode_plan) {
  enum { HQ = 2, D = 8 };
  const int32_t lens[2] = {20, 9}, toolong[1] = {41}, negative[1] = {-1}, many[2] = {40, 40};
  static float q[40 * HQ * D], k[40 * D], v[40 * D], out[40 * HQ * D];
  tl_fill_nan(ANYATTN_DTYPE_F32, out, sizeof out / sizeof out[0]);
  const size_t wsz = anyattn_cp_plan_workspace_size(plan);
  char *ws = (char *)xalloc(wsz + 512);
  anyattn_cp_tensors t;
  anyattn_cp_tensors_init(&t);
  t.q = q, t.k = k, t.v = v, t.out = out;
  EXPECT(anyattn_cp_prefill(NULL, 2, lens, &t, ws, wsz, NULL), ANYATTN_STATUS_NULL_POINTER, "plan");
  EXPECT(anyattn_cp_prefill(plan, 2, lens, NULL, ws, wsz, NULL), ANYATTN_STATUS_NULL_POINTER, "tensors");
  EXPECT(anyattn_cp_prefill(plan, 2, NULL, &t, ws, wsz, NULL), ANYATTN_STATUS_NULL_POINTER, "seq_lens");
  EXPECT(anyattn_cp_prefill(plan, 3, lens, &t, ws, wsz, NULL), ANYATTN_STATUS_LIMIT_EXCEEDED, "max_seqs");
  EXPECT(anyattn_cp_prefill(plan, -1, lens, &t, ws, wsz, NULL), ANYATTN_STATUS_INVALID_SIZE, "num_seqs");
  EXPECT(anyattn_cp_prefill(plan, 1, toolong, &t, ws, wsz, NULL), ANYATTN_STATUS_LIMIT_EXCEEDED, "max_context");
  EXPECT(anyattn_cp_prefill(plan, 1, negative, &t, ws, wsz, NULL), ANYATTN_STATUS_INVALID_SIZE, "seq_lens[0]");
  EXPECT(anyattn_cp_prefill(plan, 2, many, &t, ws, wsz, NULL), ANYATTN_STATUS_LIMIT_EXCEEDED, "max_tokens");
  EXPECT(anyattn_cp_prefill(plan, 2, lens, &t, ws, wsz - 1, NULL), ANYATTN_STATUS_WORKSPACE_TOO_SMALL, "workspace_size");
  EXPECT(anyattn_cp_prefill(plan, 2, lens, &t, NULL, wsz, NULL), ANYATTN_STATUS_NULL_POINTER, "workspace");
  EXPECT(anyattn_cp_prefill(plan, 2, lens, &t, ws + 8, wsz, NULL), ANYATTN_STATUS_BAD_STRIDE, "256-byte");
  EXPECT(anyattn_cp_prefill(decode_plan, 2, lens, &t, ws, wsz, NULL), ANYATTN_STATUS_INVALID_OPTION, "DECODE");
  t.struct_size = 3;
  EXPECT(anyattn_cp_prefill(plan, 2, lens, &t, ws, wsz, NULL), ANYATTN_STATUS_STRUCT_SIZE, "tensors->struct_size");
  anyattn_cp_tensors_init(&t);
  t.q = q, t.k = k, t.out = out;
  EXPECT(anyattn_cp_prefill(plan, 2, lens, &t, ws, wsz, NULL), ANYATTN_STATUS_NULL_POINTER, "tensors->v");
  t.v = v, t.lse = (float *)(void *)((char *)out + 2);
  EXPECT(anyattn_cp_prefill(plan, 2, lens, &t, ws, wsz, NULL), ANYATTN_STATUS_BAD_STRIDE, "lse");
  for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
    if (!isnan(out[i])) misuse_bad = 1, snprintf(misuse_why, sizeof misuse_why, "out written by a failed call");
  t.lse = NULL;
  EXPECT(anyattn_cp_prefill(plan, 0, lens, &t, ws, wsz, NULL), ANYATTN_STATUS_OK, NULL);
  free(ws);
}

/* plan: a decode plan; wplan: one with a window (needs batch->q_pos). */
static void misuse_decode(anyattn_cp_plan *plan, anyattn_cp_plan *wplan, anyattn_cp_plan *prefill_plan) {
  const int32_t cu[2] = {0, 1}, kv[1] = {4}, bt[1] = {0};
  static float q[16], cache[16 * 8], out[16], slopes[2];
  const size_t wsz = anyattn_cp_plan_workspace_size(plan);
  char *ws = (char *)xalloc(wsz + 512);
  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = 1, b.num_tokens = 1, b.cu_seqlens_q = cu, b.seq_lens_k = kv, b.block_table = bt, b.block_table_stride = 1;
  anyattn_tensors t;
  anyattn_tensors_init(&t);
  t.q = q, t.k_cache = cache, t.v_cache = cache, t.num_blocks = 1, t.out = out;
  EXPECT(anyattn_cp_decode(plan, NULL, &t, 0, ws, wsz, NULL), ANYATTN_STATUS_NULL_POINTER, "batch");
  EXPECT(anyattn_cp_decode(plan, &b, NULL, 0, ws, wsz, NULL), ANYATTN_STATUS_NULL_POINTER, "tensors");
  EXPECT(anyattn_cp_decode(prefill_plan, &b, &t, 0, ws, wsz, NULL), ANYATTN_STATUS_INVALID_OPTION, "prefill");
  EXPECT(anyattn_cp_decode(plan, &b, &t, 2, ws, wsz, NULL), ANYATTN_STATUS_INVALID_OPTION, "holds_new_keys");
  EXPECT(anyattn_cp_decode(plan, &b, &t, 0, ws, wsz - 1, NULL), ANYATTN_STATUS_WORKSPACE_TOO_SMALL, "workspace_size");
  t.alibi_slopes = slopes;
  EXPECT(anyattn_cp_decode(plan, &b, &t, 0, ws, wsz, NULL), ANYATTN_STATUS_UNSUPPORTED_OPTION, "alibi_slopes");
  static const int32_t qpos[1] = {3};
  b.q_pos = qpos; /* the queries placed among this rank's keys: ALiBi is defined */
  EXPECT(anyattn_cp_decode(plan, &b, &t, 0, ws, wsz, NULL), ANYATTN_STATUS_OK, NULL);
  b.q_pos = NULL;
  EXPECT(anyattn_cp_decode(wplan, &b, &t, 0, ws, wsz, NULL), ANYATTN_STATUS_UNSUPPORTED_OPTION, "q_pos");
  t.alibi_slopes = NULL;
  static uint16_t sinks16[2];
  t.sinks = sinks16, t.sinks_dtype = ANYATTN_DTYPE_BF16; /* the merge reads fp32 sinks */
  EXPECT(anyattn_cp_decode(plan, &b, &t, 0, ws, wsz, NULL), ANYATTN_STATUS_UNSUPPORTED_OPTION, "sinks_dtype");
  t.sinks = NULL, t.sinks_dtype = ANYATTN_DTYPE_F32, b.struct_size = 0;
  EXPECT(anyattn_cp_decode(plan, &b, &t, 0, ws, wsz, NULL), ANYATTN_STATUS_STRUCT_SIZE, "batch->struct_size");
  b.struct_size = sizeof b, b.num_tokens = 9;
  EXPECT(anyattn_cp_decode(plan, &b, &t, 0, ws, wsz, NULL), ANYATTN_STATUS_LIMIT_EXCEEDED, "num_tokens");
  b.num_tokens = 1, t.out = NULL; /* the local run's own check, before any collective */
  EXPECT(anyattn_cp_decode(plan, &b, &t, 0, ws, wsz, NULL), ANYATTN_STATUS_NULL_POINTER, "tensors->out");
  free(ws);
}

static void run_misuse_cases(anyattn_context *ctx) {
  misuse_bad = 0;
  misuse_why[0] = '\0';
  anyattn_cp_comm *comm = NULL;
  MPI_Comm mc = MPI_COMM_WORLD;
  int start, len, r, sz, rpn;
  EXPECT(anyattn_cp_comm_create_mpi(NULL, 0, &comm), ANYATTN_STATUS_NULL_POINTER, "mpi_comm");
  EXPECT(anyattn_cp_comm_create_mpi(&mc, 0, NULL), ANYATTN_STATUS_NULL_POINTER, "comm");
  EXPECT(anyattn_cp_comm_create_mpi(&mc, -1, &comm), ANYATTN_STATUS_INVALID_SIZE, "ranks_per_node");
  EXPECT(anyattn_cp_comm_create_mpi(&mc, world + 1, &comm), ANYATTN_STATUS_INVALID_SIZE, "ranks_per_node");
  EXPECT(anyattn_cp_comm_get(NULL, &r, &sz, &rpn), ANYATTN_STATUS_NULL_POINTER, "comm");
  EXPECT(anyattn_cp_chunk(10, 0, 0, &start, &len), ANYATTN_STATUS_INVALID_SIZE, "world_size");
  EXPECT(anyattn_cp_chunk(10, 2, 4, &start, &len), ANYATTN_STATUS_INVALID_SIZE, "chunk");
  EXPECT(anyattn_cp_chunk(-1, 2, 0, &start, &len), ANYATTN_STATUS_INVALID_SIZE, "seq_len");
  EXPECT(anyattn_cp_chunk(10, 2, 3, &start, NULL), ANYATTN_STATUS_NULL_POINTER, "len");
  EXPECT(anyattn_cp_chunk(10, 2, 3, &start, &len), ANYATTN_STATUS_OK, NULL);
  if (start != 8 || len != 2) misuse_bad = 1, snprintf(misuse_why, sizeof misuse_why, "chunk 3 of 10 over 2 ranks");
  EXPECT(anyattn_cp_comm_create_mpi(&mc, 1, &comm), ANYATTN_STATUS_OK, NULL);
  EXPECT(anyattn_cp_comm_get(comm, &r, &sz, &rpn), ANYATTN_STATUS_OK, NULL);
  if (r != rank || sz != world || rpn != 1) misuse_bad = 1, snprintf(misuse_why, sizeof misuse_why, "comm_get");
  EXPECT(anyattn_cp_comm_create_nccl(NULL, 0, NULL), ANYATTN_STATUS_NULL_POINTER, "comm");

  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = 2, pr.num_kv_heads = 1, pr.head_dim = 8, pr.dtype = ANYATTN_DTYPE_F32, pr.causal = 1;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = 2, lim.max_tokens = 40, lim.max_context = 40;
  anyattn_cp_options opt, dopt;
  anyattn_cp_options_init(&opt);
  anyattn_cp_options_init(&dopt);
  opt.mode = ANYATTN_CP_TWO_LEVEL;
  dopt.mode = ANYATTN_CP_DECODE;
  misuse_plans(ctx, comm, pr, lim, opt);
  anyattn_cp_plan *plan = NULL, *dplan = NULL, *wplan = NULL;
  EXPECT(plan_with(ctx, comm, pr, lim, opt, &plan), ANYATTN_STATUS_OK, NULL);
  lim.max_seqs = 1, lim.max_tokens = 1, lim.max_context = 16;
  EXPECT(plan_with(ctx, comm, pr, lim, dopt, &dplan), ANYATTN_STATUS_OK, NULL);
  anyattn_problem wpr = pr;
  wpr.window_left = 2;
  EXPECT(plan_with(ctx, comm, wpr, lim, dopt, &wplan), ANYATTN_STATUS_OK, NULL);
  anyattn_cp_plan_info info;
  info.struct_size = 1;
  EXPECT(anyattn_cp_plan_get_info(plan, &info), ANYATTN_STATUS_STRUCT_SIZE, "info->struct_size");
  EXPECT(anyattn_cp_plan_get_info(NULL, &info), ANYATTN_STATUS_NULL_POINTER, "plan");
  if (plan && dplan && wplan) {
    misuse_prefill(plan, dplan);
    misuse_decode(dplan, wplan, plan);
  }
  anyattn_cp_plan_free(plan);
  anyattn_cp_plan_free(dplan);
  anyattn_cp_plan_free(wplan);
  anyattn_cp_plan_free(NULL);
  anyattn_cp_comm_free(comm);
  anyattn_cp_comm_free(NULL);
  verdict("misuse: every status, nothing written on error", misuse_bad, misuse_why);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  unsigned long long s = tl_seed_from_env_or_time();
  MPI_Bcast(&s, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  seed = s;
  if (rank == 0) printf("test_cp: %d ranks, seed 0x%llx (ANYATTN_SEED=0x%llx repeats it)\n", world, s, s);
  anyattn_context *ctx = NULL;
  if (anyattn_context_create(ANYATTN_BACKEND_CPU, 0, &ctx) != ANYATTN_STATUS_OK) {
    fprintf(stderr, "%s\n", anyattn_last_error());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  run_prefill_cases(ctx);
  run_decode_cases(ctx);
  run_misuse_cases(ctx);
  anyattn_context_free(ctx);
  if (rank == 0) printf("test_cp: %d passed, %d failed\n", passed_cases, failed_cases);
  MPI_Finalize();
  return failed_cases ? 1 : 0;
}
