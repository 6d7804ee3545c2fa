/* decode.c: the CPU backend's fused decode path for bf16, fp16 and fp8 caches.
 * Items with a few query rows per kv head read K and V in place, a block of
 * keys at a time, instead of widening them into fp32 tiles as tiled.c does. */
#include <math.h>
#include <string.h>

#include "cpu.h"

/* A decode item has a handful of query rows per kv head (the GQA group), so
 * staging K and V as fp32 tiles costs more than the math it feeds: the tiled
 * path (tiled.c) reached 9.3 GB/s on one Zen 5 core (decode 16x4096, bf16), and
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
 * 3 extra mantissa bits. Needs head_dim % 32 == 0 (32 dims per step).
 * fp8 caches (kv below) convert exactly where they are read, the row in place
 * as for 16-bit caches (rows are d bytes, half the lines):
 *   AVX512-VBMI: 64 codes at a time to bf16 by two byte lookups
 *   (aa_load_fp8x64_vbmi, five ops), so bf16 q keeps the vdpbf16ps scores
 *   of bf16 caches (q's words permuted once per item to the lookups' order,
 *   aa_dec_wpos) and V splits into fp32 pairs like a bf16 row; a 32-dim
 *   tail through aa_load_fp8x32_bf16. AVX-512BW without VBMI: K to bf16 by
 *   shifts and a subnormal table (aa_load_fp8x32_bf16), V (and K under fp16
 *   q) to fp32 through the fp16 bit pattern (aa_load_fp8x32_f16; the power
 *   of two it leaves folds into the q scale and v_descale). Elsewhere the
 *   exact fp32 widening aa_load_fp8. NaN codes: e4m3fn's lookup table holds
 *   the NaN; otherwise the touch pass flags key blocks with a NaN code and
 *   only those run the conversions with their NaN fix.
 * decode 16x4096, one thread on the shared 2-core Xeon (AMX, VBMI), thread
 * CPU time: bf16 caches 55 ms, e4m3fn 49-51 ms with this (66-77 ms widening
 * 16 codes at a time to fp32); the touch pass alone (no math) 27 ms bf16,
 * 15 ms fp8, but the math does not overlap the reads, and with the cache in
 * L2 (decode 4x256) fp8's math costs 1.28x bf16's (the conversions): fp8
 * gains the halved bytes less the conversions, about 1.1x. Measured and dropped: P.V by vdpbf16ps on key pairs (P
 * rounded to bf16; 3-5% slower: vdpbf16ps issues on one port, the FMAs on
 * two) and fp32 q with FMA scores instead of vdpbf16ps (the same speed). */
#define AA_DEC_KB 16 /* keys per block: one score vector per row */
typedef uint8_t aa_vB __attribute__((vector_size(64)));
/* Bytewise unsigned max (GCC 12 scalarises the generic form's compare). */
AA_INLINE aa_vB aa_dec_bmax(aa_vB a, aa_vB b) {
#if defined(__AVX512BW__)
  const __m512i r = _mm512_max_epu8((__m512i)a, (__m512i)b);
  return (aa_vB)r;
#else
  const aa_vB gt = (aa_vB)(a > b); /* lanes all ones or zero */
  return (a & gt) | (b & ~gt);
#endif
}
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
/* kv: 0 for 16-bit caches, else the fp8 format (AA_DEC_FMT: 1 e4m3fn, 2
 * e4m3fnuz) plus AA_DEC_NAN in key blocks that hold a NaN code. */
#define AA_DEC_NAN 4
#define AA_DEC_FMT(kv) ((kv) & 3)
/* fp8 K rows converted to bf16 for vdpbf16ps (aa_load_fp8x32_bf16). */
#define AA_DEC_FP8BF16 (AA_DEC_QBF16 && AA_FP8_F16)
/* q rows stay raw bf16 (unscaled) for vdpbf16ps over bf16 caches and fp8
 * caches converted to bf16; otherwise fp32, scaled. */
#define AA_DEC_QRAW(dt, kv) (AA_DEC_QBF16 && (dt) == ANYATTN_DTYPE_BF16 && ((kv) == 0 || AA_DEC_FP8BF16))
/* What q's scale and v_descale multiply by to undo the factor fp8 codes
 * read with in fp32 (aa_load_fp8x32_f16: 2^-8 e4m3fn, 2^-7 fnuz); 1 where
 * the codes go through exact bf16 or aa_load_fp8. */
#define AA_DEC_UNIT(kv) (!(kv) || AA_FP8_VBMI || !AA_FP8_F16 ? 1.0f : AA_DEC_FMT(kv) == 2 ? 128.0f : 256.0f)
/* fp8 rows read 64 codes at a time through aa_load_fp8x64_vbmi, in its word
 * order (aa_dec_slot), with a 32-code tail in bf16 pair order. */
#define AA_DEC_W(kv) ((kv) && AA_FP8_VBMI)

/* ---- building blocks ------------------------------------------------------------ */
/* 32 consecutive cache elements as two fp32 vectors, in the order every fp32
 * row of the decode path (q, accumulators) is kept in: bf16 as the even/odd
 * halves of aa_load_bf16_pairs (a shift and a mask, no widening
 * instruction), fp16 in natural order (vcvtph2ps under F16C/AVX-512, the
 * scalar widening elsewhere). dt is a constant at every call, so each dtype
 * compiles to its own straight-line loop. */
AA_INLINE void aa_dec_load32_(const anyattn_dtype dt, const uint16_t *p, aa_vf *lo, aa_vf *hi) {
  if (dt == ANYATTN_DTYPE_BF16) {
    aa_load_bf16_pairs(p, lo, hi);
  } else {
    *lo = aa_load_f16(p);
    *hi = aa_load_f16(p + AA_VL);
  }
}
/* Elements c .. c + 31 of a cache row (at byte address p) in that order:
 * fp8 codes in natural order, times 1 / AA_DEC_UNIT(kv). */
AA_INLINE void aa_dec_load32(const anyattn_dtype dt, const int kv, const char *p, int c, aa_vf *lo, aa_vf *hi) {
  if (kv) {
#if AA_FP8_VBMI /* exact bf16 words, then as bf16 pairs */
    const __m512i w = aa_load_fp8x32_bf16((const uint8_t *)p + c, AA_DEC_FMT(kv) == 2, (kv & AA_DEC_NAN) != 0);
    aa_load_bf16_pairs((const uint16_t *)&w, lo, hi);
#elif AA_FP8_F16
    aa_load_fp8x32_f16((const uint8_t *)p + c, AA_DEC_FMT(kv) == 2, (kv & AA_DEC_NAN) != 0, lo, hi);
#else
    *lo = aa_load_fp8((const uint8_t *)p + c, AA_DEC_FMT(kv) == 2);
    *hi = aa_load_fp8((const uint8_t *)p + c + AA_VL, AA_DEC_FMT(kv) == 2);
#endif
  } else {
    aa_dec_load32_(dt, (const uint16_t *)p + c, lo, hi);
  }
}
/* Elements c .. c + 31 of a q row, in the order its cache rows load in. */
AA_INLINE void aa_dec_loadq32(const anyattn_dtype dt, const int kv, const uint16_t *p, aa_vf *lo, aa_vf *hi) {
  if (kv && dt == ANYATTN_DTYPE_BF16) {
    *lo = aa_load_bf16(p);
    *hi = aa_load_bf16(p + AA_VL);
  } else {
    aa_dec_load32_(dt, p, lo, hi);
  }
}
#if AA_FP8_VBMI
/* Elements c .. c + 63 of an fp8 cache row as four fp32 vectors: the even
 * and the odd words of aa_load_fp8x64_vbmi's *w0, then of *w1. */
AA_INLINE void aa_dec_load64w(const int kv, const char *p, int c, aa_vf v[4]) {
  __m512i w[2];
  aa_load_fp8x64_vbmi((const uint8_t *)p + c, AA_DEC_FMT(kv) == 2, (kv & AA_DEC_NAN) != 0, &w[0], &w[1]);
  aa_load_bf16_pairs((const uint16_t *)&w[0], &v[0], &v[1]);
  aa_load_bf16_pairs((const uint16_t *)&w[1], &v[2], &v[3]);
}
#endif
/* Where element c of a 16-bit word row (raw bf16 q) sits: for fp8 caches
 * read 64 codes at a time, aa_load_fp8x64_vbmi's word order. */
AA_INLINE int aa_dec_wpos(const int kv, const int d, int c) {
#if AA_FP8_VBMI
  if (kv && (c & ~63) + 64 <= d) return (c & ~63) + aa_fp8_vbmi_pos(c & 63);
#endif
  (void)kv, (void)d;
  return c;
}
/* Where element c of an fp32 row (of d) sits in the order its cache rows
 * load in: bf16 pairs (16 even elements, then 16 odd, per 32) for bf16
 * caches and fp8 tails, the even and odd words of aa_dec_wpos's order for
 * fp8 read 64 at a time, else natural. */
AA_INLINE int aa_dec_slot(const anyattn_dtype dt, const int kv, const int d, int c) {
  if (AA_DEC_W(kv) || (dt == ANYATTN_DTYPE_BF16 && !kv)) {
    const int w = aa_dec_wpos(kv, d, c), b = w & ~31;
    return b + (w & 1) * 16 + ((w & 31) >> 1);
  }
  return c;
}

/* Scores of q rows 0..3 (row stride d) against 4 key rows: lane 4r + j. */
AA_INLINE aa_vf aa_dec_qk4x4(const anyattn_dtype dt, const int kv, const void *restrict q, const char *const *k,
                             const int d) {
  aa_vf acc[16];
#if AA_DEC_QBF16
  if (AA_DEC_QRAW(dt, kv)) {
    __m512 t[16];
    for (int i = 0; i < 16; i++) t[i] = _mm512_setzero_ps();
    const uint16_t *qb = (const uint16_t *)q;
    int c = 0;
#if AA_FP8_VBMI
    if (kv) /* 64 codes per load; q words in the same order */
      for (; c + 64 <= d; c += 64) {
        __m512bh qv[4][2];
        for (int r = 0; r < 4; r++)
          for (int h = 0; h < 2; h++) qv[r][h] = (__m512bh)_mm512_loadu_si512(qb + (size_t)r * d + c + 32 * h);
        for (int j = 0; j < 4; j++) {
          __m512i w[2];
          aa_load_fp8x64_vbmi((const uint8_t *)k[j] + c, AA_DEC_FMT(kv) == 2, (kv & AA_DEC_NAN) != 0, &w[0], &w[1]);
          for (int r = 0; r < 4; r++) {
            t[r * 4 + j] = _mm512_dpbf16_ps(t[r * 4 + j], qv[r][0], (__m512bh)w[0]);
            t[r * 4 + j] = _mm512_dpbf16_ps(t[r * 4 + j], qv[r][1], (__m512bh)w[1]);
          }
        }
      }
#endif
    for (; c < d; c += 32) {
      __m512bh qv[4];
      for (int r = 0; r < 4; r++) qv[r] = (__m512bh)_mm512_loadu_si512(qb + (size_t)r * d + c);
      for (int j = 0; j < 4; j++) {
#if AA_DEC_FP8BF16
        const __m512bh kb = kv ? (__m512bh)aa_load_fp8x32_bf16((const uint8_t *)k[j] + c, AA_DEC_FMT(kv) == 2,
                                                               (kv & AA_DEC_NAN) != 0)
                               : (__m512bh)_mm512_loadu_si512((const uint16_t *)k[j] + c);
#else
        const __m512bh kb = (__m512bh)_mm512_loadu_si512((const uint16_t *)k[j] + c);
#endif
        for (int r = 0; r < 4; r++) t[r * 4 + j] = _mm512_dpbf16_ps(t[r * 4 + j], qv[r], kb);
      }
    }
    for (int i = 0; i < 16; i++) acc[i] = (aa_vf)t[i];
    return aa_reduce16(acc);
  }
#endif
  const float *qf = (const float *)q;
  for (int i = 0; i < 16; i++) acc[i] = aa_splat(0.0f);
  int c = 0;
#if AA_FP8_VBMI
  if (kv)
    for (; c + 64 <= d; c += 64)
      for (int j = 0; j < 4; j++) {
        aa_vf kk[4];
        aa_dec_load64w(kv, k[j], c, kk);
        for (int r = 0; r < 4; r++)
          for (int i = 0; i < 4; i++) acc[r * 4 + j] += aa_ld(qf + (size_t)r * d + c + i * AA_VL) * kk[i];
      }
#endif
  for (; c < d; c += 32) {
    aa_vf qe[4], qo[4];
    for (int r = 0; r < 4; r++) {
      qe[r] = aa_ld(qf + (size_t)r * d + c);
      qo[r] = aa_ld(qf + (size_t)r * d + c + 16);
    }
    for (int j = 0; j < 4; j++) {
      aa_vf ke, ko;
      aa_dec_load32(dt, kv, k[j], c, &ke, &ko);
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
AA_INLINE void aa_dec_pv(const anyattn_dtype dt, const int kv, const int NC, float *restrict acc, const int d, int c0,
                         const float *restrict alpha, const float *restrict P, const char *const *v, int nk) {
  aa_vf a[4][4];
  for (int r = 0; r < 4; r++) {
    const aa_vf al = aa_splat(alpha[r]);
    for (int k = 0; k < 2 * NC; k++) a[r][k] = aa_ld(acc + (size_t)r * d + c0 + k * AA_VL) * al;
  }
  for (int j = 0; j < nk; j++) {
    aa_vf vv[4];
#if AA_FP8_VBMI
    if (kv && NC == 2) aa_dec_load64w(kv, v[j], c0, vv);
    else
#endif
      for (int n = 0; n < NC; n++) aa_dec_load32(dt, kv, v[j], c0 + 32 * n, &vv[2 * n], &vv[2 * n + 1]);
    for (int r = 0; r < 4; r++) {
      const aa_vf pb = aa_splat(P[r * AA_DEC_KB + j]);
      for (int k = 0; k < 2 * NC; k++) a[r][k] += pb * vv[k];
    }
  }
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 2 * NC; k++) aa_st(acc + (size_t)r * d + c0 + k * AA_VL, a[r][k]);
}

/* Online softmax of rows [rc, rc + 4) of kv head g over the key block
 * [j0, j0 + nk): sc[r] holds row rc + r's scores (lane j: key j0 + j), P[r]
 * receives its probabilities, alpha[r] the factor that rescales its
 * accumulator; m and l (the rows' running max and sum) are updated. */
AA_INLINE void aa_dec_softmax4(const aa_cpu_job *job, const anyattn_dtype dt, const int kv, const aa_cpu_rows *rw,
                               const aa_vf sc[4], const float qs, float *restrict m, float *restrict l,
                               float *restrict P, float alpha[4], int rc, int g, int j0, int nk) {
  const anyattn_problem *pr = &job->plan->problem;
  const anyattn_args *a = job->a;
  const int group = job->group;
  for (int r = 0; r < 4; r++) {
    const int rr = rc + r;
    float *restrict pr_ = P + r * AA_DEC_KB;
    int jlo, jhi;
    aa_key_range(rw->lo, rw->hi, rw->R, rr, j0, nk, &jlo, &jhi);
    if (jlo >= jhi) { /* no visible key in this block (or a padding row) */
      alpha[r] = 1.0f;
      aa_st(pr_, aa_splat(0.0f));
      continue;
    }
    aa_vf x = sc[r];
    if (AA_DEC_QRAW(dt, kv)) x *= aa_splat(qs); /* q was kept unscaled in bf16 */
    if (pr->softcap > 0.0f) {
      const float cap = pr->softcap, inv = 1.0f / cap;
      for (int j = jlo; j < jhi; j++) x[j] = cap * tanhf(x[j] * inv);
    }
    if (a->alibi_slopes) {
      const float slope = a->alibi_slopes[g * group + rr % group];
      const int rel = j0 - (rw->qpos0 + rr / group); /* key j0 minus the query position */
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
}

/* One key block for rows [rc, rc + 4) of kv head g: scores, online softmax
 * (P lands in P[4][AA_DEC_KB]), P.V. k and v hold AA_DEC_KB row pointers (k
 * padded past nk with valid rows whose scores are masked); qs multiplies the
 * scores of raw bf16 q (AA_DEC_QRAW). */
AA_INLINE void aa_dec_rows4(const aa_cpu_job *job, const anyattn_dtype dt, const int kv, const int d,
                            const aa_cpu_rows *rw, const float qs, const void *restrict q, float *restrict acc,
                            float *restrict m, float *restrict l, float *restrict P, int rc, int g, int j0, int nk,
                            const char *const *k, const char *const *v) {
  aa_vf blk[4], sc[4];
  for (int b = 0; b < 4; b++) blk[b] = aa_dec_qk4x4(dt, kv, q, k + 4 * b, d);
  aa_transpose4x4q(blk, sc); /* sc[r] lane j: row r, key j0 + j */
  float alpha[4];
  aa_dec_softmax4(job, dt, kv, rw, sc, qs, m, l, P, alpha, rc, g, j0, nk);
  int c = 0;
  for (; c + 64 <= d; c += 64) aa_dec_pv(dt, kv, 2, acc, d, c, alpha, P, v, nk);
  for (; c < d; c += 32) aa_dec_pv(dt, kv, 1, acc, d, c, alpha, P, v, nk);
}

/* ---- one decode item ------------------------------------------------------------ */
/* The item's q rows (hb-th kv head's at hb * R4, d elements each): raw bf16
 * for vdpbf16ps (AA_DEC_QRAW), else fp32 in aa_dec_load32 order with the
 * scale (times the k_descale of fp8 caches) folded in (a multiply per score
 * saved); padding rows zero; m and l started from the sinks; accumulators
 * cleared. */
AA_INLINE void aa_dec_load_q(const aa_cpu_job *job, const anyattn_dtype dt, const int kv, const aa_cpu_rows *rw,
                             int s, int g0, int nh, const int d, void *Q, float *restrict acc, float *restrict m,
                             float *restrict l) {
  const anyattn_args *a = job->a;
  const int group = job->group, R = rw->R, R4 = rw->R4;
  const uint16_t *qsrc = (const uint16_t *)a->q;
  for (int hb = 0; hb < nh; hb++) {
    const float scale = job->plan->scale * aa_descale_of(a, a->k_descale, s, g0 + hb, job->kvh) * AA_DEC_UNIT(kv);
    for (int r = 0; r < R4; r++) {
      const size_t row = (size_t)hb * R4 + r;
      const int h = (g0 + hb) * group + r % group;
      const uint16_t *src = qsrc + ((size_t)(rw->tok0 + r / group) * job->nqh + h) * d;
      if (AA_DEC_QRAW(dt, kv)) {
        uint16_t *dst = (uint16_t *)Q + row * d;
        if (r >= R) memset(dst, 0, (size_t)d * sizeof(uint16_t));
        else if (AA_DEC_W(kv))
          for (int c = 0; c < d; c++) dst[aa_dec_wpos(kv, d, c)] = src[c];
        else memcpy(dst, src, (size_t)d * sizeof(uint16_t));
      } else if (AA_DEC_W(kv)) { /* once per item: scalar */
        float *dst = (float *)Q + row * d;
        for (int c = 0; c < d; c++)
          dst[aa_dec_slot(dt, kv, d, c)] =
              r >= R ? 0.0f : (dt == ANYATTN_DTYPE_BF16 ? aa_bf16_to_f32(src[c]) : aa_f16_to_f32(src[c])) * scale;
      } else {
        float *dst = (float *)Q + row * d;
        const aa_vf sc = aa_splat(scale);
        for (int c = 0; c < d; c += 32) {
          aa_vf e = aa_splat(0.0f), o = aa_splat(0.0f);
          if (r < R) aa_dec_loadq32(dt, kv, src + c, &e, &o);
          aa_st(dst + c, e * sc);
          aa_st(dst + c + 16, o * sc);
        }
      }
      m[row] = r < R && a->sinks ? a->sinks[h] : -INFINITY;
      l[row] = r < R && a->sinks ? 1.0f : 0.0f;
    }
  }
  memset(acc, 0, (size_t)nh * R4 * d * sizeof(float));
}

/* The touch pass over the next nk keys: their K and V row addresses land
 * in kr and vr, and every line of those rows (nh heads) is loaded key by
 * key, all heads of a key together and K and V interleaved (strictly
 * ascending addresses in two streams, which the hardware prefetchers
 * follow), while the keys AA_DEC_PF_BLOCKS blocks ahead are prefetched in
 * the same order; the math then reads the rows head by head from L1/L2.
 * Reading the cache head by head directly (2 KiB strides) capped a
 * shuffled 256 MiB read at 17-20 GB/s on one Zen 5 core, software prefetch
 * or not, against 31-35 GB/s in address order (39 GB/s streaming).
 * decode 16x4096, 1 thread: 9.4 GB/s head by head, 13.7 copying the block
 * into scratch in address order, 16.5 with this touch pass. Returns the OR
 * of the loaded data, which the caller keeps so the loads are not dropped.
 * fp8 rows are d bytes, half the lines of bf16 ones; a row of 32 x odd
 * bytes ends in half a line, which the pass loads as such (a whole line
 * would read past the cache's last row). With scan set, *nan says whether
 * any of the codes is a NaN (a bytewise max of the codes mapped so that only
 * NaN codes give 0xFF: two ops a line), so that the conversions with a NaN
 * fix run only in such blocks. */
AA_INLINE aa_vu aa_dec_touch(const aa_cpu_job *job, const int kv, const int scan, int nh, const int d, int nk,
                             aa_kv_walks *rd, aa_kv_walks *pf, int *pf_next, int ihi, const char **kr,
                             const char **vr, int *nan) {
  const anyattn_args *a = job->a;
  const size_t es = job->kes, row_bytes = (size_t)d * es;
  const int64_t kh = a->k_stride_head * (int64_t)es, vh = a->v_stride_head * (int64_t)es; /* bytes */
  aa_vu touched = {0};
  aa_vB top = {0};
  for (int j = 0; j < nk; j++) {
    kr[j] = aa_walk_next(&rd->k);
    vr[j] = aa_walk_next(&rd->v);
    const char *kp = NULL, *vp = NULL;
    if (*pf_next < ihi) {
      kp = aa_walk_next(&pf->k);
      vp = aa_walk_next(&pf->v);
      ++*pf_next;
    }
    for (int hb = 0; hb < nh; hb++)
      for (size_t o = 0; o < row_bytes; o += 64) {
        if (kp) {
          __builtin_prefetch(kp + hb * kh + o, 0, AA_PF_HINT);
          __builtin_prefetch(vp + hb * vh + o, 0, AA_PF_HINT);
        }
        aa_vu tk = {0}, tv = {0};
        if (kv && o + 64 > row_bytes) { /* two constant-size copies: a variable one is a call */
          memcpy(&tk, kr[j] + hb * kh + o, 32);
          memcpy(&tv, vr[j] + hb * vh + o, 32);
        } else {
          memcpy(&tk, kr[j] + hb * kh + o, 64);
          memcpy(&tv, vr[j] + hb * vh + o, 64);
        }
        touched |= tk | tv;
        if (kv && scan) {
          const aa_vB x = AA_DEC_FMT(kv) == 2 ? (aa_vB)tk ^ 0x7F : (aa_vB)tk | 0x80; /* fnuz 0x80, e4m3fn x7F */
          const aa_vB y = AA_DEC_FMT(kv) == 2 ? (aa_vB)tv ^ 0x7F : (aa_vB)tv | 0x80;
          top = aa_dec_bmax(aa_dec_bmax(top, x), y);
        }
      }
  }
  *nan = 0;
  if (kv && scan)
    for (int i = 0; i < 64; i++) *nan |= top[i] == 0xFF;
  return touched;
}

/* Normalises the accumulators (times the v_descale of fp8 caches), undoes
 * aa_dec_load32's order and rounds once to the output dtype; writes the LSE
 * (without v_descale) when asked. */
AA_INLINE void aa_dec_store(const aa_cpu_job *job, const anyattn_dtype dt, const int kv, const aa_cpu_rows *rw,
                            int s, int g0, int nh, const int d, const float *restrict acc, const float *restrict m,
                            const float *restrict l) {
  const anyattn_args *a = job->a;
  const int group = job->group;
  for (int hb = 0; hb < nh; hb++) {
    const float vd = aa_descale_of(a, a->v_descale, s, g0 + hb, job->kvh) * AA_DEC_UNIT(kv);
    for (int r = 0; r < rw->R; r++) {
      const int t = rw->tok0 + r / group, h = (g0 + hb) * group + r % group;
      const size_t o = (size_t)t * job->nqh + h, rr = (size_t)hb * rw->R4 + r;
      const int empty = rw->lo[r] >= rw->hi[r];
      const float inv = empty ? 0.0f : vd / l[rr];
      const float *ar = acc + rr * d;
      uint16_t *out = (uint16_t *)a->out + o * d;
      if (dt == ANYATTN_DTYPE_BF16)
        for (int c = 0; c < d; c++) out[c] = aa_f32_to_bf16(ar[aa_dec_slot(dt, kv, d, c)] * inv);
      else
        for (int c = 0; c < d; c++) out[c] = aa_f32_to_f16(ar[aa_dec_slot(dt, kv, d, c)] * inv);
      if (a->lse) a->lse[o] = empty ? -INFINITY : m[rr] + logf(l[rr]);
    }
  }
}

/* A decode item in bf16 or fp16 (dt) over caches of dt (kv 0) or fp8 codes
 * (kv 1 e4m3fn, 2 e4m3fnuz): every token of sequence s (q_len <= dec_q)
 * against kv heads g0 .. g0 + nh - 1, the rows as in cpu.h. Always inlined
 * into one wrapper per (dtype, cache format), so no type test is left in the
 * hot loops. */
AA_INLINE void aa_cpu_decode16(const aa_cpu_job *job, const anyattn_dtype dt, const int kv, float *restrict ws, int s,
                               int g0, int nh, const int d) {
  const anyattn_args *a = job->a;
  const aa_cpu_layout *L = &job->L;
  const int nq = a->cu_seqlens_q[s + 1] - a->cu_seqlens_q[s];
  void *Q = ws + L->q; /* raw bf16 rows or fp32 rows, d elements each (aa_dec_load_q) */
  float *restrict acc = ws + L->acc, *restrict P = ws + L->s, *restrict m = ws + L->m, *restrict l = ws + L->l;
  const aa_cpu_rows rw = aa_rows_of(job, s, 0, nq, (int32_t *)(ws + L->lo), (int32_t *)(ws + L->hi));
  const int R4 = rw.R4, ilo = rw.ilo, ihi = rw.ihi;
  aa_dec_load_q(job, dt, kv, &rw, s, g0, nh, d, Q, acc, m, l);

  const int64_t kh = a->k_stride_head * (int64_t)job->kes, vh = a->v_stride_head * (int64_t)job->kes; /* bytes */
  const int pf0 = ilo + AA_DEC_PF_BLOCKS * AA_DEC_KB < ihi ? ilo + AA_DEC_PF_BLOCKS * AA_DEC_KB : ihi;
  aa_kv_walks rd = {0}, pf = {0};
  if (ilo < ihi) {
    aa_walks_init(&rd, job, s, g0, ilo);
    aa_walks_init(&pf, job, s, g0, pf0);
  }
  int pf_next = pf0;   /* first key not yet prefetched */
  /* NaN codes need their fix in the conversions, except e4m3fn read 64 at a
   * time, whose lookup table holds the NaN */
  const int scan = kv && !(AA_FP8_VBMI && AA_DEC_FMT(kv) == 1 && d % 64 == 0);
  aa_vu touched = {0}; /* the touch loads feed this, so they are not dropped */
  const char *kr[AA_DEC_KB], *vr[AA_DEC_KB];
  for (int j0 = ilo; j0 < ihi; j0 += AA_DEC_KB) {
    const int nk = ihi - j0 < AA_DEC_KB ? ihi - j0 : AA_DEC_KB;
    int nan;
    touched |= aa_dec_touch(job, kv, scan, nh, d, nk, &rd, &pf, &pf_next, ihi, kr, vr, &nan);
    for (int hb = 0; hb < nh; hb++) {
      const float qs = job->plan->scale * (kv ? aa_descale_of(a, a->k_descale, s, g0 + hb, job->kvh) : 1.0f);
      const char *k[AA_DEC_KB], *v[AA_DEC_KB];
      for (int j = 0; j < AA_DEC_KB; j++) { /* rows past nk repeat row 0: their scores are masked */
        k[j] = kr[j < nk ? j : 0] + hb * kh;
        v[j] = vr[j < nk ? j : 0] + hb * vh;
      }
      for (int rc = 0; rc < R4; rc += 4) {
        const size_t row = (size_t)hb * R4 + rc;
        const void *qrow = AA_DEC_QRAW(dt, kv) ? (const void *)((const uint16_t *)Q + row * d)
                                               : (const void *)((const float *)Q + row * d);
        if (kv && nan) /* the conversions with their NaN fix, only where a NaN code is */
          aa_dec_rows4(job, dt, kv | AA_DEC_NAN, d, &rw, qs, qrow, acc + row * d, m + row, l + row, P, rc, g0 + hb, j0,
                       nk, k, v);
        else
          aa_dec_rows4(job, dt, kv, d, &rw, qs, qrow, acc + row * d, m + row, l + row, P, rc, g0 + hb, j0, nk, k, v);
      }
    }
  }
  memcpy(ws + L->alpha, &touched, sizeof(uint32_t)); /* scratch the decode path does not use */
  aa_dec_store(job, dt, kv, &rw, s, g0, nh, d, acc, m, l);
}

void aa_cpu_decode_bf16(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d) {
  aa_cpu_decode16(job, ANYATTN_DTYPE_BF16, 0, ws, s, g0, nh, d);
}
void aa_cpu_decode_f16(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d) {
  aa_cpu_decode16(job, ANYATTN_DTYPE_F16, 0, ws, s, g0, nh, d);
}
void aa_cpu_decode_fp8(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int d) {
  const int fnuz = job->kv == ANYATTN_KV_FP8_E4M3FNUZ;
  if (job->plan->problem.dtype == ANYATTN_DTYPE_BF16) {
    if (fnuz) aa_cpu_decode16(job, ANYATTN_DTYPE_BF16, 2, ws, s, g0, nh, d);
    else aa_cpu_decode16(job, ANYATTN_DTYPE_BF16, 1, ws, s, g0, nh, d);
  } else {
    if (fnuz) aa_cpu_decode16(job, ANYATTN_DTYPE_F16, 2, ws, s, g0, nh, d);
    else aa_cpu_decode16(job, ANYATTN_DTYPE_F16, 1, ws, s, g0, nh, d);
  }
}
