/* tiled16.c: the tiled path with 16-bit products (docs/design/cpu.md, "16-bit
 * products"). A work item stages q, K and V as bf16 in the layouts of isa.h,
 * lets the chosen kernels (AMX or vdpbf16ps) form S = Q.K^T and O += P.V with
 * fp32 accumulation, and runs the online softmax on S with AVX-512 between
 * them. fp16 is carried as two bf16 terms per element (hi + lo, exact) and
 * three products (hi.hi + hi.lo + lo.hi). fp8 cache codes are staged as bf16,
 * which holds every one exactly (fp16 problems: hi = the code's value, lo =
 * 0). Compiled with AVX-512 and
 * AVX512-BF16 flags; backend.c calls it only where isa.c found both. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu.h"

/* ---- conversions ------------------------------------------------------------------ */
/* 16 fp32 to bf16, rounded to nearest even (NaN stays NaN). */
AA_INLINE __m256i aa16_to_bf16(__m512 x) { return (__m256i)_mm512_cvtneps_pbh(x); }
AA_INLINE __m512 aa16_from_bf16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Elements c .. c + 15 of a row of d 16-bit words, zeros past d (a masked
 * load: nothing past the row is read). */
AA_INLINE __m256i aa16_load16(const uint16_t *src, int c, int d) {
  if (c + 16 <= d) return _mm256_loadu_si256((const __m256i *)(src + c));
  if (c >= d) return _mm256_setzero_si256();
  return _mm256_maskz_loadu_epi16((__mmask16)((1u << (d - c)) - 1), src + c);
}

/* A row of d fp16 as bf16 terms of dq words each (d rounded up to 32, zeros
 * past d): hi = bf16(x), lo = bf16(x - hi). fp16 has 11 significant bits and
 * bf16 8, so hi + lo == x exactly (the rest has at most 4 bits; bf16's
 * exponent range holds fp16's subnormals). The A side of a product (q, P) is
 * laid out (hi, hi, lo), the B side (K, V) (hi, lo, hi), so the three terms
 * multiply to hi.hi + hi.lo + lo.hi; the lo.lo term left out is below 2^-16
 * of |a||b|. */
AA_INLINE void aa16_split_f16(const uint16_t *src, int d, int dq, uint16_t *dst, int a_side) {
  for (int c = 0; c < dq; c += 16) {
    const __m512 x = _mm512_cvtph_ps(aa16_load16(src, c, d));
    const __m256i h = aa16_to_bf16(x);
    const __m256i l = aa16_to_bf16(_mm512_sub_ps(x, aa16_from_bf16(h)));
    _mm256_storeu_si256((__m256i *)(dst + c), h);
    _mm256_storeu_si256((__m256i *)(dst + dq + c), a_side ? h : l);
    _mm256_storeu_si256((__m256i *)(dst + 2 * dq + c), a_side ? l : h);
  }
}

/* A row of d bf16 as one term of dq words: the row, then zeros. */
AA_INLINE void aa16_pad_bf16(const uint16_t *src, int d, int dq, uint16_t *dst) {
  for (int c = 0; c < dq; c += 16) _mm256_storeu_si256((__m256i *)(dst + c), aa16_load16(src, c, d));
}

/* A row of d fp8 codes (kv an fp8 format) as the bf16 terms aa16_split_f16
 * writes on the B side, dq words each (zeros past d): (v) for bf16 (terms 1),
 * (v, 0, v) for fp16 (terms 3). Exact: the fp32 widening of a code has no
 * bits in its low half. */
/* 16 widened codes x as bf16 terms at column c of dst (rows of dq words). */
AA_INLINE void aa16_put_fp8(aa_vf x, uint16_t *dst, int c, int dq, int terms) {
  const __m256i h = _mm512_cvtepi32_epi16(_mm512_srli_epi32((__m512i)x, 16));
  _mm256_storeu_si256((__m256i *)(dst + c), h);
  if (terms == 3) {
    _mm256_storeu_si256((__m256i *)(dst + dq + c), _mm256_setzero_si256());
    _mm256_storeu_si256((__m256i *)(dst + 2 * dq + c), h);
  }
}
AA_INLINE void aa16_split_fp8(const uint8_t *src, int d, int dq, uint16_t *dst, int terms, anyattn_kv_dtype kv) {
  const int fnuz = kv == ANYATTN_KV_FP8_E4M3FNUZ;
  int c = 0;
  for (; c + 16 <= d; c += 16)
    aa16_put_fp8(fnuz ? aa_load_fp8(src + c, 1) : aa_load_fp8(src + c, 0), dst, c, dq, terms);
  for (; c < dq; c += 16) { /* where the row ends (masked: code 0 is +0), then zeros */
    uint8_t b[16];
    const __mmask16 mk = c < d ? (__mmask16)((1u << (d - c)) - 1) : 0;
    _mm_storeu_si128((__m128i *)b, _mm_maskz_loadu_epi8(mk, src + c));
    aa16_put_fp8(fnuz ? aa_load_fp8(b, 1) : aa_load_fp8(b, 0), dst, c, dq, terms);
  }
}

/* Lanes of the 16 keys from j that lie in [jlo, jhi). */
AA_INLINE __mmask16 aa16_keys(int j, int jlo, int jhi) {
  const int a = jlo - j, b = jhi - j;
  const uint32_t below_hi = b <= 0 ? 0u : b >= 16 ? 0xFFFFu : (1u << b) - 1u;
  const uint32_t below_lo = a <= 0 ? 0u : a >= 16 ? 0xFFFFu : (1u << a) - 1u;
  return (__mmask16)(below_hi & ~below_lo);
}

/* ---- staging -------------------------------------------------------------------------- */
/* Transposes 16 rows of 16 words: r[i] lane j becomes r[j] lane i. Words of
 * 2x2, then 4x4 in each 128-bit lane, then the 4x4 of 128-bit lanes (64
 * shuffles). */
AA_INLINE void aa16_transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) { /* u[i + k] lane L = word 4L + k of rows i..i+3 */
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int k = 0; k < 4; k++) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x44), v1 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xEE);
    r[k] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[4 + k] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    r[8 + k] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[12 + k] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

/* Kt[i][j0 + j] = pair i of key row k[j], for 16 keys of kd bf16 each. */
AA_INLINE void aa16_stage_k(const uint16_t *const k[16], int kd, uint32_t *restrict Kt, int ldk, int j0) {
  for (int c = 0; c < kd; c += 32) {
    __m512i r[16];
    for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_si512(k[j] + c);
    aa16_transpose16(r);
    for (int i = 0; i < 16; i++) _mm512_storeu_si512(Kt + (size_t)(c / 2 + i) * ldk + j0, r[i]);
  }
}

/* Vp[i][c] = dim c of rows a, b as one pair, for d dims (one 512-bit
 * two-source word permute per 16 pairs). */
AA_INLINE void aa16_stage_v(const uint16_t *a, const uint16_t *b, int d, uint32_t *restrict vp) {
  const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                      5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
  for (int c = 0; c < d; c += 32) {
    const __m512i x = _mm512_loadu_si512(a + c), y = _mm512_loadu_si512(b + c);
    _mm512_storeu_si512(vp + c, _mm512_permutex2var_epi16(x, lo, y));
    _mm512_storeu_si512(vp + c + 16, _mm512_permutex2var_epi16(x, hi, y));
  }
}

/* Scratch of one 16-bit item, carved from the thread's scratch (cpu.h). Rows
 * of head_dim d are dq words long (d rounded up to 32), zeros past d, so that
 * the products take whole 32-dim blocks. */
typedef struct {
  uint16_t *Q;   /* [R32][kd] */
  uint32_t *Kt;  /* [kd/2][bn] */
  uint32_t *Vp;  /* [terms bn/2][dq] */
  float *S;      /* [R32][bn] */
  uint16_t *P;   /* [R32][terms bn] */
  float *O;      /* [R32][dq] */
  uint16_t
      *X; /* fp16, fp8, or d < dq: the K rows [16][kd], V rows [16][kd] of a key group as terms; then a zero row [kd] */
  float *m, *l;
  int d, dq, terms, kd, bn; /* kd = terms dq */
  anyattn_kv_dtype kv; /* the caches' storage: AS_Q (16-bit rows read in place) or fp8 (converted into X) */
  size_t kes;          /* bytes per cache element */
  float scale;         /* the softmax scale times the item's k_descale */
  float v_descale;     /* the item's v_descale */
} aa16_tile;

/* The next nk keys' K and V rows (plus zero rows up to nkp) into Kt and Vp, 16
 * keys at a time, prefetching as many keys ahead from pf while keys remain
 * before ihi (as tiled.c does: a fixed number of bytes ahead). */
static void aa16_stage(const aa16_tile *T, int nk, int nkp, aa_kv_walks *rd, aa_kv_walks *pf,
                       int *prefetched, int ihi) {
  const int d = T->d, dq = T->dq, kd = T->kd, bn = T->bn, f16 = T->terms == 3, fp8 = T->kv != ANYATTN_KV_AS_Q;
  const uint16_t *zero = T->X + (size_t)32 * kd;
  const size_t row_bytes = (size_t)d * T->kes;
  for (int j0 = 0; j0 < nkp; j0 += 16) {
    const uint16_t *k[16], *v[16];
    for (int j = 0; j < 16; j++) {
      if (j0 + j >= nk) {
        k[j] = v[j] = zero;
        continue;
      }
      const uint16_t *kr = (const uint16_t *)aa_walk_next(&rd->k), *vr = (const uint16_t *)aa_walk_next(&rd->v);
      if (fp8 || f16 || dq != d) { /* the rows as terms in X; bf16 rows of dq read in place */
        uint16_t *xk = T->X + (size_t)j * kd, *xv = T->X + (size_t)(16 + j) * kd;
        if (fp8) {
          aa16_split_fp8((const uint8_t *)kr, d, dq, xk, T->terms, T->kv);
          aa16_split_fp8((const uint8_t *)vr, d, dq, xv, T->terms, T->kv);
        } else if (f16) {
          aa16_split_f16(kr, d, dq, xk, 0);
          aa16_split_f16(vr, d, dq, xv, 0);
        } else {
          aa16_pad_bf16(kr, d, dq, xk);
          aa16_pad_bf16(vr, d, dq, xv);
        }
        kr = xk;
        vr = xv;
      }
      k[j] = kr;
      v[j] = vr;
      if (*prefetched < ihi) {
        const char *kp = aa_walk_next(&pf->k), *vq = aa_walk_next(&pf->v);
        for (size_t o = 0; o < row_bytes; o += 64) {
          __builtin_prefetch(kp + o, 0, AA_PF_HINT);
          __builtin_prefetch(vq + o, 0, AA_PF_HINT);
        }
        ++*prefetched;
      }
    }
    aa16_stage_k(k, kd, T->Kt, bn, j0);
    for (int t = 0; t < T->terms; t++)
      for (int j = 0; j < 16; j += 2)
        aa16_stage_v(v[j] + (size_t)t * dq, v[j + 1] + (size_t)t * dq, dq,
                     T->Vp + ((size_t)t * bn / 2 + (j0 + j) / 2) * dq);
  }
}

/* ---- softmax ------------------------------------------------------------------------ */
/* Softcap and ALiBi on row r's visible scores, which leaves them scaled (as
 * tiled.c orders them: scale, softcap, then the ALiBi bias). */
static void aa16_transform(const aa_cpu_job *job, float scale, float *restrict sr, int jlo, int jhi, int r, int j0,
                           int g, int qpos0) {
  const float softcap = job->plan->problem.softcap;
  const int group = job->group;
  for (int j = jlo; j < jhi; j++) sr[j] *= scale;
  if (softcap > 0.0f)
    for (int j = jlo; j < jhi; j++) sr[j] = softcap * tanhf(sr[j] * (1.0f / softcap));
  if (job->a->alibi_slopes) {
    const float slope = ((const float *)job->a->alibi_slopes)[g * group + r % group];
    const int rel = j0 - (qpos0 + r / group); /* key j0 minus the query position */
    for (int j = jlo; j < jhi; j++) sr[j] += slope * (float)(rel + j);
  }
}

/* Online softmax of the tile's scores (keys [j0, j0 + nk), S padded to nkp):
 * P gets the probabilities as bf16 (fp16: the (hi, hi, lo) terms), zero
 * outside each row's keys; m and l are updated and O's rows rescaled when their
 * maximum moved. P rounded to bf16 costs at most 2^-9 of sum P|v|, inside the
 * bf16 tolerance that already allows for the GPU's rounding of P; the fp16
 * terms keep 16 bits of P. */
static void aa16_softmax(const aa_cpu_job *job, const aa16_tile *T, int R, int R32, const int32_t *lo,
                         const int32_t *hi, int j0, int nk, int nkp, int g, int qpos0) {
  const int bn = T->bn, dq = T->dq, ldp = T->terms * bn, f16 = T->terms == 3;
  const int transform = job->plan->problem.softcap > 0.0f || job->a->alibi_slopes != NULL;
  for (int r = 0; r < R32; r++) {
    float *restrict sr = T->S + (size_t)r * bn;
    uint16_t *restrict pr = T->P + (size_t)r * ldp;
    int jlo, jhi;
    aa_key_range(lo, hi, R, r, j0, nk, &jlo, &jhi);
    if (jlo >= jhi) {
      for (int t = 0; t < T->terms; t++) memset(pr + (size_t)t * bn, 0, (size_t)nkp * 2);
      continue;
    }
    float sc = T->scale;
    if (transform) {
      aa16_transform(job, T->scale, sr, jlo, jhi, r, j0, g, qpos0);
      sc = 1.0f;
    }
    const __m512 vsc = _mm512_set1_ps(sc);
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int j = jlo & ~15; j < jhi; j += 16)
      vmax = _mm512_mask_max_ps(vmax, aa16_keys(j, jlo, jhi), vmax, _mm512_mul_ps(_mm512_loadu_ps(sr + j), vsc));
    const float mx = _mm512_reduce_max_ps(vmax), mold = T->m[r];
    const float mnew = mx > mold ? mx : mold;
    const float alpha = mnew == mold ? 1.0f : expf(mold - mnew); /* 0 while m is still -inf */
    const __m512 k2 = _mm512_set1_ps(sc * 1.44269504088896341f), m2 = _mm512_set1_ps(mnew * 1.44269504088896341f);
    __m512 vsum = _mm512_setzero_ps();
    for (int j = 0; j < nkp; j += 16) {
      const __mmask16 keys = aa16_keys(j, jlo, jhi);
      __m512 p = _mm512_setzero_ps();
      if (keys) p = _mm512_maskz_mov_ps(keys, aa_exp2_512(_mm512_fmsub_ps(_mm512_loadu_ps(sr + j), k2, m2)));
      vsum = _mm512_add_ps(vsum, p);
      const __m256i ph = aa16_to_bf16(p);
      _mm256_storeu_si256((__m256i *)(pr + j), ph);
      if (f16) {
        _mm256_storeu_si256((__m256i *)(pr + bn + j), ph);
        _mm256_storeu_si256((__m256i *)(pr + 2 * bn + j), aa16_to_bf16(_mm512_sub_ps(p, aa16_from_bf16(ph))));
      }
    }
    T->l[r] = T->l[r] * alpha + _mm512_reduce_add_ps(vsum);
    T->m[r] = mnew;
    if (alpha != 1.0f) {
      float *restrict o = T->O + (size_t)r * dq;
      const __m512 va = _mm512_set1_ps(alpha);
      for (int c = 0; c < dq; c += 16) _mm512_storeu_ps(o + c, _mm512_mul_ps(_mm512_loadu_ps(o + c), va));
    }
  }
}

/* ---- one work item ---------------------------------------------------------------------- */
/* q rows as bf16 terms of dq words (raw: the scale is applied to the
 * scores), padding rows zero, m and l from the sinks, O cleared. */
static void aa16_load_q(const aa_cpu_job *job, const aa_cpu_rows *rw, int g, int R32, const aa16_tile *T) {
  const int d = T->d, dq = T->dq, kd = T->kd, group = job->group;
  const anyattn_args *a = job->a;
  for (int r = 0; r < R32; r++) {
    uint16_t *qr = T->Q + (size_t)r * kd;
    if (r >= rw->R) {
      memset(qr, 0, (size_t)kd * 2);
      continue;
    }
    const int t = rw->tok0 + r / group, h = g * group + r % group;
    const uint16_t *src = (const uint16_t *)a->q + ((size_t)t * job->nqh + h) * d;
    if (T->terms == 3)
      aa16_split_f16(src, d, dq, qr, 1);
    else
      aa16_pad_bf16(src, d, dq, qr);
    T->m[r] = a->sinks ? ((const float *)a->sinks)[h] : -INFINITY;
    T->l[r] = a->sinks ? 1.0f : 0.0f;
  }
  memset(T->O, 0, (size_t)R32 * dq * sizeof(float));
}

/* O / l, times the v_descale of fp8 caches, rounded once to the output dtype,
 * and the LSE (without it) when asked (-inf, and a zero row, where no key is
 * visible). */
static void aa16_store(const aa_cpu_job *job, const aa_cpu_rows *rw, int g, const aa16_tile *T) {
  const anyattn_args *a = job->a;
  const int d = T->d, group = job->group;
  for (int r = 0; r < rw->R; r++) {
    const int t = rw->tok0 + r / group, h = g * group + r % group;
    const size_t o = (size_t)t * job->nqh + h;
    const int empty = rw->lo[r] >= rw->hi[r];
    const float inv = empty ? 0.0f : T->v_descale / T->l[r];
    const float *orow = T->O + (size_t)r * T->dq;
    uint16_t *out = (uint16_t *)a->out + o * d;
    if (T->terms == 3)
      for (int c = 0; c < d; c++) out[c] = aa_f32_to_f16(orow[c] * inv);
    else
      for (int c = 0; c < d; c++) out[c] = aa_f32_to_bf16(orow[c] * inv);
    if (a->lse) a->lse[o] = empty ? -INFINITY : T->m[r] + logf(T->l[r]);
  }
}

/* One prefill work item (cpu.h): query tokens [t0, t0 + nq) of sequence s
 * against kv head g, a tile of bn keys at a time over the keys some row sees. */
void aa_cpu_item16(const aa_cpu_job *job, float *restrict ws, int s, int g, int t0, int nq) {
  const aa_cpu_layout *L = &job->L;
  aa16_tile T;
  T.d = job->d;
  T.dq = (int)aa_round_up((size_t)T.d, 32);
  T.terms = L->terms;
  T.kd = T.terms * T.dq;
  T.bn = L->bn;
  T.Q = (uint16_t *)(ws + L->q);
  T.Kt = (uint32_t *)(ws + L->k);
  T.Vp = (uint32_t *)(ws + L->v);
  T.S = ws + L->s;
  T.P = (uint16_t *)(ws + L->p);
  T.O = ws + L->acc;
  T.X = (uint16_t *)(ws + L->x);
  T.m = ws + L->m;
  T.l = ws + L->l;
  T.kv = job->kv;
  T.kes = job->kes;
  T.scale = job->plan->scale * aa_descale_of(job->a, job->a->k_descale, s, g, job->kvh);
  T.v_descale = aa_descale_of(job->a, job->a->v_descale, s, g, job->kvh);
  const aa_cpu_rows rw = aa_rows_of(job, s, t0, nq, (int32_t *)(ws + L->lo), (int32_t *)(ws + L->hi));
  const int R32 = (int)aa_round_up((size_t)rw.R, 32), ilo = rw.ilo, ihi = rw.ihi;
  memset(T.X + (size_t)32 * T.kd, 0, (size_t)T.kd * 2);
  aa16_load_q(job, &rw, g, R32, &T);

  int pf_keys = (int)(AA_CPU_PREFETCH_BYTES / ((size_t)job->d * job->kes * 2));
  pf_keys = pf_keys < 1 ? 1 : pf_keys > T.bn ? T.bn : pf_keys;
  int prefetched = ilo + pf_keys < ihi ? ilo + pf_keys : ihi;
  aa_kv_walks rd = {0}, pf = {0};
  if (ilo < ihi) {
    aa_walks_init(&rd, job, s, g, ilo);
    aa_walks_init(&pf, job, s, g, prefetched);
  }
  const aa_mm16_ops *mm = job->mm16;
  if (mm->begin) mm->begin();
  for (int j0 = ilo; j0 < ihi; j0 += T.bn) {
    const int nk = ihi - j0 < T.bn ? ihi - j0 : T.bn;
    const int nkp = (int)aa_round_up((size_t)nk, 32);
    aa16_stage(&T, nk, nkp, &rd, &pf, &prefetched, ihi);
    mm->qk(T.Q, T.kd, T.Kt, T.bn, T.S, T.bn, R32, nkp);
    aa16_softmax(job, &T, rw.R, R32, rw.lo, rw.hi, j0, nk, nkp, g, rw.qpos0);
    mm->pv(T.P, T.terms * T.bn, T.Vp, T.dq, T.O, R32, T.terms, T.bn, nkp);
  }
  if (mm->end) mm->end();
  aa16_store(job, &rw, g, &T);
}
