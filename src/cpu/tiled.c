/* tiled.c: the CPU backend's general path. A work item widens its q rows and
 * each tile of K/V rows to fp32 scratch, then runs the online softmax
 * (FlashAttention-style) over the tiles with every q head of the GQA group in
 * one row block, so each K/V row is read and widened once per group. */
#include <math.h>
#include <string.h>

#include "cpu.h"

/* Software prefetch distance of the K/V walk, in bytes (see aa_cpu_item). */
#ifndef AA_CPU_PREFETCH_BYTES
#define AA_CPU_PREFETCH_BYTES 16384
#endif

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

/* One work item: query tokens [t0, t0 + nq) of sequence s against kv heads
 * g0 .. g0 + nh - 1. Rows of kv head hi start at hi * R4; within a head,
 * row r is token r / group, q head g * group + r % group. */
void aa_cpu_item(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int t0, int nq) {
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
