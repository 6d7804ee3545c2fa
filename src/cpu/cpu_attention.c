/* cpu_attention.c: the CPU backend. OpenMP threads take work items (sequence,
 * kv head, block of query tokens) dynamically; each item runs an online-softmax
 * (FlashAttention-style) loop over KV tiles with every q head of the GQA group
 * in one row block, so each K/V row is read and widened to fp32 once per group.
 * bf16 and fp16 decode items take a path of their own (aa_cpu_decode16) that
 * reads K and V in place instead of widening them into tiles. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simd.h"
#include "backend.h"

#define AA_CPU_MAX_HEAD_DIM 512
/* Query rows (tokens x group) per work item the planner aims for: 64 rows of
 * fp32 q and accumulators at head_dim 128 are 64 KiB, which stays in L2 while
 * each widened K/V tile is reused across all of them. */
#define AA_CPU_TARGET_ROWS 64
/* Decode items per thread the run keeps before it packs more kv heads into
 * one item. Xeon (16 threads, bf16 decode 64x1024): 1 -> 76.5 GB/s,
 * 2 -> 69 GB/s, 4 -> 68 GB/s, heads one at a time -> 53 GB/s; 16x4096: all
 * within 54-59 GB/s. 2 keeps some slack for ragged batches. */
#ifndef AA_CPU_ITEMS_PER_THREAD
#define AA_CPU_ITEMS_PER_THREAD 2
#endif
/* Prefetch into all cache levels: prefetchnta (hint 0) cut decode from 55 to
 * 21 GB/s on the same Xeon. */
#ifndef AA_CPU_PREFETCH_BYTES
#define AA_CPU_PREFETCH_BYTES 16384
#endif
#ifndef AA_PF_HINT
#define AA_PF_HINT 3
#endif

static size_t aa_round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* The CPU backend's plan state (plan->state). */
typedef struct {
  int threads;         /* threads run() uses */
  int block_q;         /* query tokens per work item */
  int block_n;         /* keys per KV tile */
  size_t thread_bytes; /* scratch bytes per thread in the workspace */
} aa_cpu_state;

static const aa_cpu_state *aa_cpu_state_of(const anyattn_plan *plan) { return (const aa_cpu_state *)plan->state; }

/* ---- device ------------------------------------------------------------- */
static int aa_cpu_threads(void) { return omp_get_max_threads(); }

static void aa_cpu_device_name(char *buf, size_t size) {
#if defined(__x86_64__)
  const char *arch = "x86_64";
#elif defined(__aarch64__)
  const char *arch = "aarch64";
#else
  const char *arch = "unknown-arch";
#endif
  char model[96] = "";
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[256];
    while (fgets(line, sizeof line, f)) {
      /* x86 says "model name", some ARM kernels "Model" or nothing at all */
      if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0) {
        const char *v = strchr(line, ':');
        if (!v) continue;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        snprintf(model, sizeof model, "%s", v);
        model[strcspn(model, "\n")] = '\0';
        break;
      }
    }
    fclose(f);
  }
  if (model[0])
    snprintf(buf, size, "%s CPU (%s), %d threads", arch, model, aa_cpu_threads());
  else
    snprintf(buf, size, "%s CPU, %d threads", arch, aa_cpu_threads());
}

/* ---- scratch layout ------------------------------------------------------ */
/* Per-thread scratch, in floats; every segment starts on a 64-byte boundary
 * and every row is dp (head_dim padded to AA_VL) or bn floats long. */
typedef struct {
  int dp, bn;
  int rows;    /* rows of q/acc/scores: the larger of the two item shapes below */
  int dec_q;   /* sequences with q_len <= dec_q run as decode items (several heads at once) */
  int max_hpi; /* kv heads per decode item, at most */
  size_t q, acc, k, v, s, m, l, alpha, lo, hi, total;
} aa_cpu_layout;

/* Bytes of widened K and V one decode item may stage per tile: with all kv
 * heads of a key staged together an NHD cache is read in address order, which
 * the hardware prefetchers follow; per-head rows (256 B every 2 KiB) they do not. */
#ifndef AA_CPU_DECODE_STAGE_BYTES
#define AA_CPU_DECODE_STAGE_BYTES (256 * 1024)
#endif

static aa_cpu_layout aa_cpu_layout_of(const anyattn_plan *plan) {
  aa_cpu_layout L;
  const int group = plan->group, bq = aa_cpu_state_of(plan)->block_q;
  L.dp = (int)aa_round_up((size_t)plan->problem.head_dim, AA_VL);
  L.bn = aa_cpu_state_of(plan)->block_n;
  L.dec_q = 16 / group < 1 ? 1 : 16 / group;
  if (L.dec_q > bq) L.dec_q = bq;
  const size_t stage_row = (size_t)L.bn * L.dp * sizeof(float) * 2;
  L.max_hpi = (int)(AA_CPU_DECODE_STAGE_BYTES / stage_row);
  if (L.max_hpi < 1) L.max_hpi = 1;
  if (L.max_hpi > plan->problem.num_kv_heads) L.max_hpi = plan->problem.num_kv_heads;
  const size_t prefill_rows = aa_round_up((size_t)bq * group, 4);
  const size_t decode_rows = (size_t)L.max_hpi * aa_round_up((size_t)L.dec_q * group, 4);
  L.rows = (int)(prefill_rows > decode_rows ? prefill_rows : decode_rows);
  size_t at = 0;
#define AA_SEG(name, n) \
  L.name = at;          \
  at += aa_round_up((size_t)(n), AA_VL)
  AA_SEG(q, (size_t)L.rows * L.dp);
  AA_SEG(acc, (size_t)L.rows * L.dp);
  AA_SEG(k, (size_t)L.max_hpi * L.bn * L.dp);
  AA_SEG(v, (size_t)L.max_hpi * L.bn * L.dp);
  AA_SEG(s, (size_t)L.rows * L.bn);
  AA_SEG(m, L.rows);
  AA_SEG(l, L.rows);
  AA_SEG(alpha, L.rows);
  AA_SEG(lo, L.rows); /* int32 */
  AA_SEG(hi, L.rows); /* int32 */
#undef AA_SEG
  L.total = at;
  return L;
}

/* The shared head of the workspace: prefix sums of work items per sequence. */
static size_t aa_cpu_shared_bytes(const anyattn_plan *plan) {
  return aa_round_up(((size_t)plan->limits.max_seqs + 1) * sizeof(int64_t), 256);
}

/* ---- plan ---------------------------------------------------------------- */
static anyattn_status aa_cpu_plan(anyattn_plan *plan) {
  const anyattn_problem *pr = &plan->problem;
  AA_CHECK(pr->config == NULL || strcmp(pr->config, "cpu") == 0, ANYATTN_STATUS_UNSUPPORTED_CONFIG,
           "problem->config '%s' is not a CPU config (the CPU backend has one: \"cpu\")", pr->config);
  AA_CHECK(pr->head_dim >= 1 && pr->head_dim <= AA_CPU_MAX_HEAD_DIM, ANYATTN_STATUS_UNSUPPORTED_HEAD_DIM,
           "problem->head_dim is %d; the CPU backend supports 1..%d", pr->head_dim, AA_CPU_MAX_HEAD_DIM);
  AA_CHECK(pr->dtype == ANYATTN_DTYPE_F32 || pr->dtype == ANYATTN_DTYPE_F16 || pr->dtype == ANYATTN_DTYPE_BF16,
           ANYATTN_STATUS_UNSUPPORTED_DTYPE, "problem->dtype %d is not supported by the CPU backend",
           (int)pr->dtype);
  AA_CHECK(pr->block_size >= 1, ANYATTN_STATUS_UNSUPPORTED_BLOCK_SIZE, "problem->block_size is %d, must be >= 1",
           pr->block_size);

  const int dp = (int)aa_round_up((size_t)pr->head_dim, AA_VL);
  /* Keys per tile: the widened K and V tiles together fill 32 KiB, half of
   * L1d on current x86 cores, so the tile stays in L1 across the score, the
   * softmax and the P.V passes (block_n 32 at head_dim 128). */
  int bn = 4096 / dp / AA_VL * AA_VL;
  bn = bn < 16 ? 16 : bn > 128 ? 128 : bn;
  int bq = AA_CPU_TARGET_ROWS / plan->group;
  if (bq < 1) bq = 1;
  if (bq > plan->limits.max_tokens) bq = plan->limits.max_tokens;
  aa_cpu_state *st = (aa_cpu_state *)calloc(1, sizeof *st);
  AA_CHECK(st != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "plan: CPU state allocation failed");
  plan->state = st;
  st->block_q = bq;
  st->block_n = bn;
  st->threads = omp_get_max_threads();
  if (st->threads < 1) st->threads = 1;
  const aa_cpu_layout L = aa_cpu_layout_of(plan);
  st->thread_bytes = aa_round_up(L.total * sizeof(float), 256);
  plan->workspace_size = aa_cpu_shared_bytes(plan) + (size_t)st->threads * st->thread_bytes;
  snprintf(plan->describe, sizeof plan->describe, "cpu: block_q %d, block_n %d, %d threads, %.1f MiB workspace",
           bq, bn, st->threads, (double)plan->workspace_size / (1024.0 * 1024.0));
  return ANYATTN_STATUS_OK;
}

/* ---- kernels ---------------------------------------------------------------- */
/* Widens one row of d elements to dp floats, zeroing the padding so padded
 * lanes contribute nothing to dot products. */
AA_INLINE void aa_widen_row(anyattn_dtype dt, const void *src, float *restrict dst, int d, int dp) {
  int c = 0;
  switch (dt) {
    case ANYATTN_DTYPE_BF16: {
      const uint16_t *s = (const uint16_t *)src;
      for (; c + AA_VL <= d; c += AA_VL) aa_st(dst + c, aa_load_bf16(s + c));
      for (; c < d; c++) dst[c] = aa_bf16_to_f32(s[c]);
      break;
    }
    case ANYATTN_DTYPE_F16: {
      const uint16_t *s = (const uint16_t *)src;
      for (; c + AA_VL <= d; c += AA_VL) aa_st(dst + c, aa_load_f16(s + c));
      for (; c < d; c++) dst[c] = aa_f16_to_f32(s[c]);
      break;
    }
    case ANYATTN_DTYPE_F32: {
      const float *s = (const float *)src;
      for (; c + AA_VL <= d; c += AA_VL) aa_st(dst + c, aa_load_f32(s + c));
      for (; c < d; c++) dst[c] = s[c];
      break;
    }
  }
  for (; c < dp; c++) dst[c] = 0.0f;
}

/* Scores of 4 query rows x 4 keys: 16 independent FMA chains over head_dim,
 * folded into one vector at the end. */
AA_INLINE void aa_qk_4x4(const float *restrict q, const float *restrict k, int dp, float *restrict s, int lds) {
  aa_vf acc[16];
  for (int i = 0; i < 16; i++) acc[i] = aa_splat(0.0f);
  for (int c = 0; c < dp; c += AA_VL) {
    aa_vf kv[4], qv[4];
    for (int i = 0; i < 4; i++) {
      kv[i] = aa_ld(k + (size_t)i * dp + c);
      qv[i] = aa_ld(q + (size_t)i * dp + c);
    }
    for (int r = 0; r < 4; r++)
      for (int j = 0; j < 4; j++) acc[r * 4 + j] += qv[r] * kv[j];
  }
  const aa_vf sum = aa_reduce16(acc);
  for (int r = 0; r < 4; r++)
    for (int j = 0; j < 4; j++) s[r * lds + j] = sum[r * 4 + j];
}

/* Scores of 1 query row x 16 keys (MHA and small groups). */
AA_INLINE void aa_qk_1x16(const float *restrict q, const float *restrict k, int dp, float *restrict s) {
  aa_vf acc[16];
  for (int i = 0; i < 16; i++) acc[i] = aa_splat(0.0f);
  for (int c = 0; c < dp; c += AA_VL) {
    const aa_vf qv = aa_ld(q + c);
    for (int j = 0; j < 16; j++) acc[j] += qv * aa_ld(k + (size_t)j * dp + c);
  }
  aa_st(s, aa_reduce16(acc));
}

/* acc[NR rows][NC vectors] = acc * alpha + P[rows, 0:nk] . V[0:nk, cols]:
 * the accumulators stay in registers across the whole tile. */
AA_INLINE void aa_pv(const int NR, const int NC, float *restrict acc, int dp, const float *restrict alpha,
                     const float *restrict p, int bn, const float *restrict v, int nk) {
  aa_vf a[4][4];
  for (int i = 0; i < NR; i++) {
    const aa_vf al = aa_splat(alpha[i]);
    for (int k = 0; k < NC; k++) a[i][k] = aa_ld(acc + (size_t)i * dp + k * AA_VL) * al;
  }
  for (int j = 0; j < nk; j++) {
    aa_vf vv[4];
    for (int k = 0; k < NC; k++) vv[k] = aa_ld(v + (size_t)j * dp + k * AA_VL);
    for (int i = 0; i < NR; i++) {
      const aa_vf pb = aa_splat(p[(size_t)i * bn + j]);
      for (int k = 0; k < NC; k++) a[i][k] += pb * vv[k];
    }
  }
  for (int i = 0; i < NR; i++)
    for (int k = 0; k < NC; k++) aa_st(acc + (size_t)i * dp + k * AA_VL, a[i][k]);
}

AA_INLINE void aa_pv_rows(const int NR, float *restrict acc, int dp, const float *restrict alpha,
                          const float *restrict p, int bn, const float *restrict v, int nk) {
  int c = 0;
  for (; c + 4 * AA_VL <= dp; c += 4 * AA_VL) aa_pv(NR, 4, acc + c, dp, alpha, p, bn, v + c, nk);
  for (; c < dp; c += AA_VL) aa_pv(NR, 1, acc + c, dp, alpha, p, bn, v + c, nk);
}

/* ---- one work item ----------------------------------------------------------- */
typedef struct {
  const anyattn_plan *plan;
  const anyattn_args *a;
  aa_cpu_layout L;
  size_t es;              /* bytes per element */
  int d, group, nqh, kvh, bq;
  int hpi;                /* kv heads per decode item in this run */
} aa_cpu_job;

/* Address of key j's row for the item's first kv head, walking the block table. */
typedef struct {
  const char *base;
  const int32_t *bt;
  int64_t sb, st; /* bytes */
  int bs, page, row;
} aa_kv_walk;

AA_INLINE void aa_walk_init(aa_kv_walk *w, const void *cache, const int32_t *bt, int64_t sb, int64_t st,
                            int64_t sh, int g, size_t es, int bs, int j) {
  w->base = (const char *)cache + (int64_t)g * sh * (int64_t)es;
  w->bt = bt;
  w->sb = sb * (int64_t)es;
  w->st = st * (int64_t)es;
  w->bs = bs;
  w->page = j / bs;
  w->row = j % bs;
}
AA_INLINE const char *aa_walk_next(aa_kv_walk *w) {
  const char *p = w->base + (int64_t)w->bt[w->page] * w->sb + (int64_t)w->row * w->st;
  if (++w->row == w->bs) {
    w->row = 0;
    w->page++;
  }
  return p;
}

/* Scores, online softmax and P.V of one kv head's row block over one staged
 * tile of nk keys starting at key j0. Rows r < R are real, R..R4 padding. */
static void aa_cpu_tile(const aa_cpu_job *job, int R, int R4, const float *restrict Q, float *restrict acc,
                        float *restrict S, float *restrict m, float *restrict l, float *restrict alpha,
                        const int32_t *lo, const int32_t *hi, const float *restrict Kf,
                        const float *restrict Vf, int j0, int nk, int g, int qpos0) {
  const anyattn_problem *pr = &job->plan->problem;
  const anyattn_args *a = job->a;
  const int dp = job->L.dp, bn = job->L.bn, group = job->group;
  const int nkp = (int)aa_round_up((size_t)nk, R >= 4 ? 4 : 16);

  if (R >= 4) {
    for (int r = 0; r < R4; r += 4)
      for (int j = 0; j < nkp; j += 4)
        aa_qk_4x4(Q + (size_t)r * dp, Kf + (size_t)j * dp, dp, S + (size_t)r * bn + j, bn);
  } else {
    for (int r = 0; r < R; r++)
      for (int j = 0; j < nkp; j += 16) aa_qk_1x16(Q + (size_t)r * dp, Kf + (size_t)j * dp, dp, S + (size_t)r * bn + j);
  }

  /* online softmax: probabilities overwrite the scores in S */
  const float softcap = pr->softcap, inv_softcap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
  const int nk16 = (int)aa_round_up((size_t)nk, AA_VL);
  for (int r = 0; r < R4; r++) {
    float *restrict sr = S + (size_t)r * bn;
    const int jlo = r < R && lo[r] > j0 ? lo[r] - j0 : 0;
    const int jhi = r >= R ? 0 : hi[r] - j0 < nk ? hi[r] - j0 : nk;
    if (jlo >= jhi) {
      alpha[r] = 1.0f;
      memset(sr, 0, (size_t)nk * sizeof(float));
      continue;
    }
    if (softcap > 0.0f)
      for (int j = jlo; j < jhi; j++) sr[j] = softcap * tanhf(sr[j] * inv_softcap);
    if (a->alibi_slopes) {
      const float slope = a->alibi_slopes[g * group + r % group];
      const int rel = j0 - (qpos0 + r / group); /* key j0 minus the query position */
      for (int j = jlo; j < jhi; j++) sr[j] += slope * (float)(rel + j);
    }
    const aa_vi vlo = aa_splati(jlo), vhi = aa_splati(jhi);
    aa_vf vmax = aa_splat(-INFINITY);
    for (int j = 0; j < nk16; j += AA_VL) {
      const aa_vi idx = aa_iota() + aa_splati(j);
      vmax = aa_max(vmax, aa_sel((idx >= vlo) & (idx < vhi), aa_ld(sr + j), aa_splat(-INFINITY)));
    }
    const float mx = aa_hmax(vmax);
    const float mnew = mx > m[r] ? mx : m[r];
    alpha[r] = expf(m[r] - mnew); /* 0 while m is still -inf */
    aa_vf vsum = aa_splat(0.0f);
    const aa_vf vm = aa_splat(mnew);
    for (int j = 0; j < nk16; j += AA_VL) {
      const aa_vi idx = aa_iota() + aa_splati(j);
      const aa_vf e = aa_sel((idx >= vlo) & (idx < vhi), aa_exp(aa_ld(sr + j) - vm), aa_splat(0.0f));
      aa_st(sr + j, e);
      vsum += e;
    }
    l[r] = l[r] * alpha[r] + aa_hsum(vsum);
    m[r] = mnew;
  }

  if (R >= 4) {
    for (int r = 0; r < R4; r += 4)
      aa_pv_rows(4, acc + (size_t)r * dp, dp, alpha + r, S + (size_t)r * bn, bn, Vf, nk);
  } else {
    for (int r = 0; r < R; r++) aa_pv_rows(1, acc + (size_t)r * dp, dp, alpha + r, S + (size_t)r * bn, bn, Vf, nk);
  }
}

/* Visible key range [lo, hi) of every row of an item (row r: token r / group,
 * the same for every head) and their union [*ilo, *ihi): the item walks the
 * union only, so keys outside every row's range are never read. */
static void aa_row_ranges(const anyattn_problem *pr, int kv_len, int qpos0, int nq, int group, int32_t *lo,
                          int32_t *hi, int *ilo, int *ihi) {
  *ilo = kv_len;
  *ihi = 0;
  for (int ti = 0; ti < nq; ti++) {
    const int p = qpos0 + ti;
    int rlo = pr->window_left >= 0 ? p - pr->window_left : 0;
    int rhi = pr->causal ? p + 1 : pr->window_right >= 0 ? p + pr->window_right + 1 : kv_len;
    if (rlo < 0) rlo = 0;
    if (rhi > kv_len) rhi = kv_len;
    if (rlo < rhi) {
      if (rlo < *ilo) *ilo = rlo;
      if (rhi > *ihi) *ihi = rhi;
    }
    for (int hh = 0; hh < group; hh++) {
      lo[ti * group + hh] = rlo;
      hi[ti * group + hh] = rhi;
    }
  }
}

/* One work item: query tokens [t0, t0 + nq) of sequence s against kv heads
 * g0 .. g0 + nh - 1. Rows of kv head hi start at hi * R4; within a head,
 * row r is token r / group, q head g * group + r % group. */
static void aa_cpu_item(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int t0, int nq) {
  const anyattn_args *a = job->a;
  const anyattn_problem *pr = &job->plan->problem;
  const aa_cpu_layout *L = &job->L;
  const int d = job->d, dp = L->dp, bn = L->bn, group = job->group;
  const anyattn_dtype dt = pr->dtype;
  const size_t es = job->es;

  const int q0 = a->cu_seqlens_q[s];
  const int q_len = a->cu_seqlens_q[s + 1] - q0;
  const int kv_len = a->seq_lens_k[s];
  const int qpos0 = kv_len - q_len + t0; /* position of the item's first query */
  const int R = nq * group;
  const int R4 = (int)aa_round_up((size_t)R, 4);

  float *restrict Q = ws + L->q, *restrict acc = ws + L->acc, *restrict Kf = ws + L->k, *restrict Vf = ws + L->v;
  float *restrict S = ws + L->s, *restrict m = ws + L->m, *restrict l = ws + L->l, *restrict alpha = ws + L->alpha;
  int32_t *lo = (int32_t *)(ws + L->lo), *hi = (int32_t *)(ws + L->hi);

  int ilo, ihi;
  aa_row_ranges(pr, kv_len, qpos0, nq, group, lo, hi, &ilo, &ihi);

  const float scale = job->plan->scale;
  for (int hb = 0; hb < nh; hb++) {
    const int g = g0 + hb;
    float *Qh = Q + (size_t)hb * R4 * dp;
    for (int r = 0; r < R; r++) {
      const int t = q0 + t0 + r / group, h = g * group + r % group;
      float *qr = Qh + (size_t)r * dp;
      aa_widen_row(dt, (const char *)a->q + ((size_t)t * job->nqh + h) * d * es, qr, d, dp);
      /* folding the scale into q saves a multiply per score */
      for (int c = 0; c < dp; c += AA_VL) aa_st(qr + c, aa_ld(qr + c) * aa_splat(scale));
      m[hb * R4 + r] = a->sinks ? a->sinks[h] : -INFINITY;
      l[hb * R4 + r] = a->sinks ? 1.0f : 0.0f;
    }
    for (int r = R; r < R4; r++) {
      memset(Qh + (size_t)r * dp, 0, (size_t)dp * sizeof(float));
      alpha[hb * R4 + r] = 1.0f;
    }
  }
  memset(acc, 0, (size_t)nh * R4 * dp * sizeof(float));

  const int32_t *bt = a->block_table + (int64_t)s * a->block_table_stride;
  const int bs = pr->block_size;
  const size_t row_bytes = (size_t)d * es;
  const int64_t kh = a->k_stride_head * (int64_t)es, vh = a->v_stride_head * (int64_t)es; /* bytes */
  aa_kv_walk wk = {0}, wv = {0}, pk = {0}, pv = {0};
  /* Prefetch a fixed number of bytes ahead, not a fixed number of keys: a
   * tile of all kv heads (128 KiB at bf16, 8 heads) would not fit in L1, and
   * lines prefetched that far ahead are evicted before they are used. */
  int pf_keys = (int)(AA_CPU_PREFETCH_BYTES / ((size_t)nh * d * es * 2));
  pf_keys = pf_keys < 1 ? 1 : pf_keys > bn ? bn : pf_keys;
  int prefetched = ilo + pf_keys < ihi ? ilo + pf_keys : ihi; /* next key to prefetch */
  if (ilo < ihi) {
    aa_walk_init(&wk, a->k_cache, bt, a->k_stride_block, a->k_stride_token, a->k_stride_head, g0, es, bs, ilo);
    aa_walk_init(&wv, a->v_cache, bt, a->v_stride_block, a->v_stride_token, a->v_stride_head, g0, es, bs, ilo);
    aa_walk_init(&pk, a->k_cache, bt, a->k_stride_block, a->k_stride_token, a->k_stride_head, g0, es, bs,
                 prefetched);
    aa_walk_init(&pv, a->v_cache, bt, a->v_stride_block, a->v_stride_token, a->v_stride_head, g0, es, bs,
                 prefetched);
  }

  for (int j0 = ilo; j0 < ihi; j0 += bn) {
    const int nk = ihi - j0 < bn ? ihi - j0 : bn;
    const int nkp = (int)aa_round_up((size_t)nk, R >= 4 ? 4 : 16);
    /* Widen the tile key by key, all heads of a key together (address order
     * for NHD caches), prefetching pf_keys keys ahead. */
    for (int j = 0; j < nk; j++) {
      const char *kr = aa_walk_next(&wk), *vr = aa_walk_next(&wv);
      for (int hb = 0; hb < nh; hb++) {
        aa_widen_row(dt, kr + hb * kh, Kf + ((size_t)hb * bn + j) * dp, d, dp);
        aa_widen_row(dt, vr + hb * vh, Vf + ((size_t)hb * bn + j) * dp, d, dp);
      }
      if (prefetched < ihi) {
        const char *kp = aa_walk_next(&pk), *vp = aa_walk_next(&pv);
        for (int hb = 0; hb < nh; hb++)
          for (size_t o = 0; o < row_bytes; o += 64) {
            __builtin_prefetch(kp + hb * kh + o, 0, AA_PF_HINT);
            __builtin_prefetch(vp + hb * vh + o, 0, AA_PF_HINT);
          }
        prefetched++;
      }
    }
    for (int hb = 0; hb < nh; hb++) {
      for (int j = nk; j < nkp; j++) memset(Kf + ((size_t)hb * bn + j) * dp, 0, (size_t)dp * sizeof(float));
      const size_t r0 = (size_t)hb * R4;
      aa_cpu_tile(job, R, R4, Q + r0 * dp, acc + r0 * dp, S + r0 * bn, m + r0, l + r0, alpha + r0, lo, hi,
                  Kf + (size_t)hb * bn * dp, Vf + (size_t)hb * bn * dp, j0, nk, g0 + hb, qpos0);
    }
  }

  /* normalise and round once to the output dtype */
  for (int hb = 0; hb < nh; hb++) {
    for (int r = 0; r < R; r++) {
      const int t = q0 + t0 + r / group, h = (g0 + hb) * group + r % group;
      const size_t o = (size_t)t * job->nqh + h;
      const size_t rr = (size_t)hb * R4 + r;
      const int empty = lo[r] >= hi[r];
      const float inv = empty ? 0.0f : 1.0f / l[rr];
      const float *ar = acc + rr * dp;
      switch (dt) {
        case ANYATTN_DTYPE_F32: {
          float *out = (float *)a->out + o * d;
          for (int c = 0; c < d; c++) out[c] = ar[c] * inv;
          break;
        }
        case ANYATTN_DTYPE_F16: {
          uint16_t *out = (uint16_t *)a->out + o * d;
          for (int c = 0; c < d; c++) out[c] = aa_f32_to_f16(ar[c] * inv);
          break;
        }
        case ANYATTN_DTYPE_BF16: {
          uint16_t *out = (uint16_t *)a->out + o * d;
          for (int c = 0; c < d; c++) out[c] = aa_f32_to_bf16(ar[c] * inv);
          break;
        }
      }
      if (a->lse) a->lse[o] = empty ? -INFINITY : m[rr] + logf(l[rr]);
    }
  }
}

/* ---- bf16/fp16 decode: K and V read straight from the cache ---------------- */
/* A decode item has a handful of query rows per kv head (the GQA group), so
 * staging K and V as fp32 tiles costs more than the math it feeds: the tiled
 * path above reached 9.3 GB/s on one Zen 5 core (decode 16x4096, bf16), and
 * only 16-17 GB/s with the whole cache in L2; fp16 decode 16x4096 on both
 * cores: 18 GB/s tiled, 25-26 GB/s here. This path reads 16-bit K and V
 * rows in place, a block of AA_DEC_KB keys at a time:
 *   scores of 4 query rows x 4 keys per step (bf16 with AVX512-BF16: q stays
 *   in bf16 and vdpbf16ps takes 32 dims per instruction; otherwise q is fp32
 *   and K is widened 32 dims at a time by aa_dec_load32), folded into one
 *   vector per row whose lanes are the block's keys; an online softmax on
 *   those 16 lanes; then P.V from the V rows into fp32 accumulators kept in
 *   aa_dec_load32's element order until the output is written.
 * fp16 never takes vdpbf16ps: rounding q and K to bf16 would cost fp16 its
 * 3 extra mantissa bits. Needs head_dim % 32 == 0 (32 dims per step). */
#define AA_DEC_KB 16 /* keys per block: one score vector per row */
/* Software prefetch distance in key blocks: 1 and 2 measured the same
 * within noise (decode 16x4096 bf16, 1 and 2 threads, Zen 5). */
#ifndef AA_DEC_PF_BLOCKS
#define AA_DEC_PF_BLOCKS 1
#endif
#if defined(__AVX512BF16__)
#define AA_DEC_QBF16 1
#else
#define AA_DEC_QBF16 0
#endif
/* q rows stay raw bf16 (unscaled) for vdpbf16ps; otherwise fp32, scaled. */
#define AA_DEC_QRAW(dt) (AA_DEC_QBF16 && (dt) == ANYATTN_DTYPE_BF16)

/* 32 consecutive cache elements as two fp32 vectors, in the order every fp32
 * row of the decode path (q, accumulators) is kept in: bf16 as the even/odd
 * halves of aa_load_bf16_pairs (a shift and a mask, no widening
 * instruction), fp16 in natural order (vcvtph2ps under F16C/AVX-512, the
 * scalar widening elsewhere). dt is a constant at every call, so each dtype
 * compiles to its own straight-line loop. */
AA_INLINE void aa_dec_load32(const anyattn_dtype dt, const uint16_t *p, aa_vf *lo, aa_vf *hi) {
  if (dt == ANYATTN_DTYPE_BF16) {
    aa_load_bf16_pairs(p, lo, hi);
  } else {
    *lo = aa_load_f16(p);
    *hi = aa_load_f16(p + AA_VL);
  }
}
/* Where element c of a row sits in aa_dec_load32's order. */
AA_INLINE int aa_dec_slot(const anyattn_dtype dt, int c) {
  return dt == ANYATTN_DTYPE_BF16 ? (c & ~31) + (c & 1) * 16 + ((c & 31) >> 1) : c;
}

/* Scores of q rows 0..3 (row stride d) against 4 key rows: lane 4r + j. */
AA_INLINE aa_vf aa_dec_qk4x4(const anyattn_dtype dt, const void *restrict q, const uint16_t *const *k,
                             const int d) {
  aa_vf acc[16];
#if AA_DEC_QBF16
  if (AA_DEC_QRAW(dt)) {
    __m512 t[16];
    for (int i = 0; i < 16; i++) t[i] = _mm512_setzero_ps();
    const uint16_t *qb = (const uint16_t *)q;
    for (int c = 0; c < d; c += 32) {
      __m512bh qv[4];
      for (int r = 0; r < 4; r++) qv[r] = (__m512bh)_mm512_loadu_si512(qb + (size_t)r * d + c);
      for (int j = 0; j < 4; j++) {
        const __m512bh kv = (__m512bh)_mm512_loadu_si512(k[j] + c);
        for (int r = 0; r < 4; r++) t[r * 4 + j] = _mm512_dpbf16_ps(t[r * 4 + j], qv[r], kv);
      }
    }
    for (int i = 0; i < 16; i++) acc[i] = (aa_vf)t[i];
    return aa_reduce16(acc);
  }
#endif
  const float *qf = (const float *)q;
  for (int i = 0; i < 16; i++) acc[i] = aa_splat(0.0f);
  for (int c = 0; c < d; c += 32) {
    aa_vf qe[4], qo[4];
    for (int r = 0; r < 4; r++) {
      qe[r] = aa_ld(qf + (size_t)r * d + c);
      qo[r] = aa_ld(qf + (size_t)r * d + c + 16);
    }
    for (int j = 0; j < 4; j++) {
      aa_vf ke, ko;
      aa_dec_load32(dt, k[j] + c, &ke, &ko);
      /* two statements, so each half contracts into an FMA on the
       * accumulator: written as one sum GCC 12 emits mul + fma + add, and
       * fp16 decode 16x4096 ran at 24.0 GB/s against 25.5 (2 threads) */
      for (int r = 0; r < 4; r++) {
        acc[r * 4 + j] += qe[r] * ke;
        acc[r * 4 + j] += qo[r] * ko;
      }
    }
  }
  return aa_reduce16(acc);
}

/* acc (4 rows of d floats, aa_dec_load32 order), columns [c0, c0 + 32 NC):
 * acc * alpha + P[0:4, 0:nk] . V[0:nk], with the accumulators in registers. */
AA_INLINE void aa_dec_pv(const anyattn_dtype dt, const int NC, float *restrict acc, const int d, int c0,
                         const float *restrict alpha, const float *restrict P, const uint16_t *const *v, int nk) {
  aa_vf a[4][4];
  for (int r = 0; r < 4; r++) {
    const aa_vf al = aa_splat(alpha[r]);
    for (int k = 0; k < 2 * NC; k++) a[r][k] = aa_ld(acc + (size_t)r * d + c0 + k * AA_VL) * al;
  }
  for (int j = 0; j < nk; j++) {
    aa_vf vv[4];
    for (int n = 0; n < NC; n++) aa_dec_load32(dt, v[j] + c0 + 32 * n, &vv[2 * n], &vv[2 * n + 1]);
    for (int r = 0; r < 4; r++) {
      const aa_vf pb = aa_splat(P[r * AA_DEC_KB + j]);
      for (int k = 0; k < 2 * NC; k++) a[r][k] += pb * vv[k];
    }
  }
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 2 * NC; k++) aa_st(acc + (size_t)r * d + c0 + k * AA_VL, a[r][k]);
}

/* One key block for rows [rc, rc + 4) of one kv head: scores, online
 * softmax (P lands in P[4][AA_DEC_KB]), P.V. k and v hold AA_DEC_KB row
 * pointers (k padded past nk with valid rows whose scores are masked). */
AA_INLINE void aa_dec_rows4(const aa_cpu_job *job, const anyattn_dtype dt, const int d, const void *restrict q,
                            float *restrict acc, float *restrict m, float *restrict l, float *restrict P,
                            const int32_t *lo, const int32_t *hi, int R, int rc, int g, int j0, int nk, int qpos0,
                            const uint16_t *const *k, const uint16_t *const *v) {
  const anyattn_problem *pr = &job->plan->problem;
  const anyattn_args *a = job->a;
  const int group = job->group;
  aa_vf blk[4], sc[4];
  for (int b = 0; b < 4; b++) blk[b] = aa_dec_qk4x4(dt, q, k + 4 * b, d);
  aa_transpose4x4q(blk, sc); /* sc[r] lane j: row r, key j0 + j */

  float alpha[4];
  for (int r = 0; r < 4; r++) {
    const int rr = rc + r;
    float *restrict pr_ = P + r * AA_DEC_KB;
    const int jlo = rr < R && lo[rr] > j0 ? lo[rr] - j0 : 0;
    const int jhi = rr >= R ? 0 : hi[rr] - j0 < nk ? hi[rr] - j0 : nk;
    if (jlo >= jhi) { /* no visible key in this block (or a padding row) */
      alpha[r] = 1.0f;
      aa_st(pr_, aa_splat(0.0f));
      continue;
    }
    aa_vf x = sc[r];
    if (AA_DEC_QRAW(dt)) x *= aa_splat(job->plan->scale); /* q was kept unscaled in bf16 */
    if (pr->softcap > 0.0f) {
      const float cap = pr->softcap, inv = 1.0f / cap;
      for (int j = jlo; j < jhi; j++) x[j] = cap * tanhf(x[j] * inv);
    }
    if (a->alibi_slopes) {
      const float slope = a->alibi_slopes[g * group + rr % group];
      const int rel = j0 - (qpos0 + rr / group); /* key j0 minus the query position */
      for (int j = jlo; j < jhi; j++) x[j] += slope * (float)(rel + j);
    }
    const aa_vi idx = aa_iota();
    const aa_vi vis = (idx >= aa_splati(jlo)) & (idx < aa_splati(jhi));
    const float mx = aa_allmax(aa_sel(vis, x, aa_splat(-INFINITY)))[0];
    const float mnew = mx > m[r] ? mx : m[r];
    alpha[r] = expf(m[r] - mnew); /* 0 while m is still -inf */
    const aa_vf p = aa_sel(vis, aa_exp(x - aa_splat(mnew)), aa_splat(0.0f));
    aa_st(pr_, p);
    l[r] = l[r] * alpha[r] + aa_allsum(p)[0];
    m[r] = mnew;
  }

  int c = 0;
  for (; c + 64 <= d; c += 64) aa_dec_pv(dt, 2, acc, d, c, alpha, P, v, nk);
  for (; c < d; c += 32) aa_dec_pv(dt, 1, acc, d, c, alpha, P, v, nk);
}

/* A decode item in bf16 or fp16 (dt): every token of sequence s (q_len <=
 * dec_q) against kv heads g0 .. g0 + nh - 1; row layout as in aa_cpu_item.
 * Always inlined into one wrapper per dtype, so no dtype test is left in
 * the hot loops. */
AA_INLINE void aa_cpu_decode16(const aa_cpu_job *job, const anyattn_dtype dt, float *restrict ws, int s, int g0,
                               int nh, const int d) {
  const anyattn_args *a = job->a;
  const anyattn_problem *pr = &job->plan->problem;
  const aa_cpu_layout *L = &job->L;
  const int group = job->group;
  const int q0 = a->cu_seqlens_q[s];
  const int nq = a->cu_seqlens_q[s + 1] - q0;
  const int kv_len = a->seq_lens_k[s];
  const int qpos0 = kv_len - nq;
  const int R = nq * group;
  const int R4 = (int)aa_round_up((size_t)R, 4);

  void *Q = ws + L->q; /* raw bf16 rows (AA_DEC_QRAW) or fp32 rows in aa_dec_load32 order, d elements each */
  float *restrict acc = ws + L->acc, *restrict P = ws + L->s, *restrict m = ws + L->m, *restrict l = ws + L->l;
  int32_t *lo = (int32_t *)(ws + L->lo), *hi = (int32_t *)(ws + L->hi);
  int ilo, ihi;
  aa_row_ranges(pr, kv_len, qpos0, nq, group, lo, hi, &ilo, &ihi);

  const uint16_t *qsrc = (const uint16_t *)a->q;
  for (int hb = 0; hb < nh; hb++) {
    for (int r = 0; r < R4; r++) {
      const size_t row = (size_t)hb * R4 + r;
      const int h = (g0 + hb) * group + r % group;
      const uint16_t *src = qsrc + ((size_t)(q0 + r / group) * job->nqh + h) * d;
      if (AA_DEC_QRAW(dt)) {
        uint16_t *dst = (uint16_t *)Q + row * d;
        if (r < R) memcpy(dst, src, (size_t)d * sizeof(uint16_t));
        else memset(dst, 0, (size_t)d * sizeof(uint16_t));
      } else {
        float *dst = (float *)Q + row * d;
        const aa_vf sc = aa_splat(job->plan->scale); /* folded into q: a multiply per score saved */
        for (int c = 0; c < d; c += 32) {
          aa_vf e = aa_splat(0.0f), o = aa_splat(0.0f);
          if (r < R) aa_dec_load32(dt, src + c, &e, &o);
          aa_st(dst + c, e * sc);
          aa_st(dst + c + 16, o * sc);
        }
      }
      m[row] = r < R && a->sinks ? a->sinks[h] : -INFINITY;
      l[row] = r < R && a->sinks ? 1.0f : 0.0f;
    }
  }
  memset(acc, 0, (size_t)nh * R4 * d * sizeof(float));

  const int32_t *bt = a->block_table + (int64_t)s * a->block_table_stride;
  const int bs = pr->block_size;
  const size_t es = sizeof(uint16_t), row_bytes = (size_t)d * es;
  const int64_t kh = a->k_stride_head * (int64_t)es, vh = a->v_stride_head * (int64_t)es; /* bytes */
  aa_kv_walk wk = {0}, wv = {0}, pk = {0}, pv = {0};
  /* Before the math on a key block, one pass loads every line of its K and V
   * rows key by key, every head of a key together and K and V interleaved
   * (strictly ascending addresses in two streams, which the hardware
   * prefetchers follow), and prefetches the block AA_DEC_PF_BLOCKS ahead in
   * the same order; the math then reads the rows head by head from L1/L2.
   * Reading the cache head by head directly (2 KiB strides) capped a
   * shuffled 256 MiB read at 17-20 GB/s on one Zen 5 core, software prefetch
   * or not, against 31-35 GB/s in address order (39 GB/s streaming).
   * decode 16x4096, 1 thread: 9.4 GB/s head by head, 13.7 copying the block
   * into scratch in address order, 16.5 with this touch pass. */
  const int pf0 = ilo + AA_DEC_PF_BLOCKS * AA_DEC_KB < ihi ? ilo + AA_DEC_PF_BLOCKS * AA_DEC_KB : ihi;
  if (ilo < ihi) {
    aa_walk_init(&wk, a->k_cache, bt, a->k_stride_block, a->k_stride_token, a->k_stride_head, g0, es, bs, ilo);
    aa_walk_init(&wv, a->v_cache, bt, a->v_stride_block, a->v_stride_token, a->v_stride_head, g0, es, bs, ilo);
    aa_walk_init(&pk, a->k_cache, bt, a->k_stride_block, a->k_stride_token, a->k_stride_head, g0, es, bs, pf0);
    aa_walk_init(&pv, a->v_cache, bt, a->v_stride_block, a->v_stride_token, a->v_stride_head, g0, es, bs, pf0);
  }
  int pf_next = pf0;   /* first key not yet prefetched */
  aa_vu touched = {0}; /* the touch loads feed this, so they are not dropped */
  const char *kr[AA_DEC_KB], *vr[AA_DEC_KB];
  for (int j0 = ilo; j0 < ihi; j0 += AA_DEC_KB) {
    const int nk = ihi - j0 < AA_DEC_KB ? ihi - j0 : AA_DEC_KB;
    for (int j = 0; j < nk; j++) {
      kr[j] = aa_walk_next(&wk);
      vr[j] = aa_walk_next(&wv);
      const char *kp = NULL, *vp = NULL;
      if (pf_next < ihi) {
        kp = aa_walk_next(&pk);
        vp = aa_walk_next(&pv);
        pf_next++;
      }
      for (int hb = 0; hb < nh; hb++)
        for (size_t o = 0; o < row_bytes; o += 64) {
          if (kp) {
            __builtin_prefetch(kp + hb * kh + o, 0, AA_PF_HINT);
            __builtin_prefetch(vp + hb * vh + o, 0, AA_PF_HINT);
          }
          aa_vu tk, tv;
          memcpy(&tk, kr[j] + hb * kh + o, sizeof tk);
          memcpy(&tv, vr[j] + hb * vh + o, sizeof tv);
          touched |= tk | tv;
        }
    }
    for (int hb = 0; hb < nh; hb++) {
      const uint16_t *k[AA_DEC_KB], *v[AA_DEC_KB];
      for (int j = 0; j < AA_DEC_KB; j++) { /* rows past nk repeat row 0: their scores are masked */
        k[j] = (const uint16_t *)(kr[j < nk ? j : 0] + hb * kh);
        v[j] = (const uint16_t *)(vr[j < nk ? j : 0] + hb * vh);
      }
      for (int rc = 0; rc < R4; rc += 4) {
        const size_t row = (size_t)hb * R4 + rc;
        const void *qrow = AA_DEC_QRAW(dt) ? (const void *)((const uint16_t *)Q + row * d)
                                           : (const void *)((const float *)Q + row * d);
        aa_dec_rows4(job, dt, d, qrow, acc + row * d, m + row, l + row, P, lo, hi, R, rc, g0 + hb, j0, nk, qpos0, k, v);
      }
    }
  }
  memcpy(ws + L->alpha, &touched, sizeof(uint32_t)); /* scratch the decode path does not use */

  /* normalise, undo aa_dec_load32's order, round once to the output dtype */
  for (int hb = 0; hb < nh; hb++) {
    for (int r = 0; r < R; r++) {
      const int t = q0 + r / group, h = (g0 + hb) * group + r % group;
      const size_t o = (size_t)t * job->nqh + h, rr = (size_t)hb * R4 + r;
      const int empty = lo[r] >= hi[r];
      const float inv = empty ? 0.0f : 1.0f / l[rr];
      const float *ar = acc + rr * d;
      uint16_t *out = (uint16_t *)a->out + o * d;
      if (dt == ANYATTN_DTYPE_BF16)
        for (int c = 0; c < d; c++) out[c] = aa_f32_to_bf16(ar[aa_dec_slot(dt, c)] * inv);
      else
        for (int c = 0; c < d; c++) out[c] = aa_f32_to_f16(ar[aa_dec_slot(dt, c)] * inv);
      if (a->lse) a->lse[o] = empty ? -INFINITY : m[rr] + logf(l[rr]);
    }
  }
}

static void aa_cpu_decode_bf16(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d) {
  aa_cpu_decode16(job, ANYATTN_DTYPE_BF16, ws, s, g0, nh, d);
}
static void aa_cpu_decode_f16(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d) {
  aa_cpu_decode16(job, ANYATTN_DTYPE_F16, ws, s, g0, nh, d);
}

/* ---- run ---------------------------------------------------------------------- */
/* Work items of sequence s: decode-like sequences (q_len <= dec_q) take
 * hpi kv heads per item, the others one kv head and block_q tokens. */
AA_INLINE int64_t aa_cpu_items_of(const aa_cpu_job *job, int q_len) {
  if (q_len == 0) return 0;
  if (q_len <= job->L.dec_q) return job->kvh / job->hpi;
  return (int64_t)((q_len + job->bq - 1) / job->bq) * job->kvh;
}

static anyattn_status aa_cpu_run(const anyattn_plan *plan, const anyattn_args *a) {
  if (a->num_tokens == 0 || a->num_seqs == 0) return ANYATTN_STATUS_OK;
  aa_cpu_job job;
  job.plan = plan;
  job.a = a;
  job.L = aa_cpu_layout_of(plan);
  job.es = anyattn_dtype_size(plan->problem.dtype);
  job.d = plan->problem.head_dim;
  job.group = plan->group;
  job.nqh = plan->problem.num_q_heads;
  job.kvh = plan->problem.num_kv_heads;
  job.bq = aa_cpu_state_of(plan)->block_q;

  int nt = omp_get_max_threads();
  if (nt > aa_cpu_state_of(plan)->threads) nt = aa_cpu_state_of(plan)->threads; /* the workspace holds that many scratches */

  /* kv heads per decode item: as many as the scratch holds, but keep at
   * least 4 items per thread for load balance; a divisor of num_kv_heads. */
  int n_dec = 0;
  for (int s = 0; s < a->num_seqs; s++) {
    const int q_len = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s];
    n_dec += q_len > 0 && q_len <= job.L.dec_q;
  }
  job.hpi = job.L.max_hpi;
  while (job.hpi > 1 && (job.kvh % job.hpi != 0 || (int64_t)n_dec * (job.kvh / job.hpi) < AA_CPU_ITEMS_PER_THREAD * nt))
    job.hpi--;

  /* Work items per sequence, as prefix sums, so that one flat dynamic loop
   * covers a ragged batch without empty iterations. */
  int64_t *prefix = (int64_t *)a->workspace;
  prefix[0] = 0;
  for (int s = 0; s < a->num_seqs; s++)
    prefix[s + 1] = prefix[s] + aa_cpu_items_of(&job, a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s]);
  const int64_t total = prefix[a->num_seqs];
  char *thread_base = (char *)a->workspace + aa_cpu_shared_bytes(plan);
  if (nt > total) nt = (int)total;
  if (nt < 1) nt = 1;

  const anyattn_dtype dt = plan->problem.dtype;
  const int dec16 = (dt == ANYATTN_DTYPE_BF16 || dt == ANYATTN_DTYPE_F16) && job.d % 32 == 0;

#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    float *ws = (float *)(thread_base + (size_t)omp_get_thread_num() * aa_cpu_state_of(plan)->thread_bytes);
    /* dynamic: items differ in cost (causal diagonal, ragged lengths) */
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < total; it++) {
      int lo = 0, hi = a->num_seqs; /* largest s with prefix[s] <= it */
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (prefix[mid] <= it) lo = mid;
        else hi = mid;
      }
      const int s = lo;
      const int64_t local = it - prefix[s];
      const int q_len = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s];
      if (q_len <= job.L.dec_q) {
        if (dec16 && dt == ANYATTN_DTYPE_BF16) aa_cpu_decode_bf16(&job, ws, s, (int)local * job.hpi, job.hpi, job.d);
        else if (dec16) aa_cpu_decode_f16(&job, ws, s, (int)local * job.hpi, job.hpi, job.d);
        else aa_cpu_item(&job, ws, s, (int)local * job.hpi, job.hpi, 0, q_len);
      } else {
        /* the last query blocks see the most keys under a causal mask: start them first */
        const int nb = (q_len + job.bq - 1) / job.bq;
        const int qb = nb - 1 - (int)(local / job.kvh);
        const int t0 = qb * job.bq;
        aa_cpu_item(&job, ws, s, (int)(local % job.kvh), 1, t0, q_len - t0 < job.bq ? q_len - t0 : job.bq);
      }
    }
  }
  return ANYATTN_STATUS_OK;
}

/* ---- the backend table ------------------------------------------------------------ */
static anyattn_status aa_cpu_device_count(int *count) {
  *count = 1;
  return ANYATTN_STATUS_OK;
}

static anyattn_status aa_cpu_context_init(anyattn_context *ctx) {
  AA_CHECK(ctx->device == 0, ANYATTN_STATUS_NO_DEVICE, "device %d: the CPU backend has device 0 only", ctx->device);
  aa_cpu_device_name(ctx->device_name, sizeof ctx->device_name);
  ctx->num_sms = aa_cpu_threads();
  return ANYATTN_STATUS_OK;
}

static void aa_cpu_plan_free(anyattn_plan *plan) {
  free(plan->state);
  plan->state = NULL;
}

static int aa_cpu_config_count(void) { return 0; }

static anyattn_status aa_cpu_config_get(int index, anyattn_config_info *info) {
  (void)info;
  return aa_error(ANYATTN_STATUS_INVALID_SIZE, "index %d: the CPU backend has no config table", index);
}

const aa_backend_ops aa_cpu_backend = {ANYATTN_BACKEND_CPU, aa_cpu_device_count, aa_cpu_context_init, aa_cpu_plan,
                                       aa_cpu_plan_free,    aa_cpu_run,          aa_cpu_config_count, aa_cpu_config_get};
