/* tiled.c: the CPU backend's general path. A work item widens its q rows and
 * each tile of K/V rows (16-bit, fp32 or fp8 codes) to fp32 scratch, then runs the online softmax
 * (FlashAttention-style) over the tiles with every q head of the GQA group in
 * one row block, so each K/V row is read and widened once per group. */
#include <math.h>
#include <string.h>

#include "cpu.h"

/* Lines of one tile's K and V rows, at most: (12288 / dp keys, aa_cpu_block_n32)
 * x 2 rows x dp / 16 lines at fp32, 1536; fewer for 16-bit and fp8 rows. */
#define AA_PF_LINES 2048

/* ---- fp32 building blocks ------------------------------------------------------- */
/* Widens one row of d elements to dp floats, zeroing the padding so padded
 * lanes contribute nothing to dot products. The row holds dt, or the fp8
 * codes of kv when kv is not AS_Q (exact in fp32 as in bf16 and fp16). */
AA_INLINE void aa_widen_row(anyattn_dtype dt, anyattn_kv_dtype kv, const void *src, float *restrict dst, int d,
                            int dp) {
  int c = 0;
  if (kv != ANYATTN_KV_AS_Q) {
    const uint8_t *s = (const uint8_t *)src;
    const int fnuz = kv == ANYATTN_KV_FP8_E4M3FNUZ;
    if (fnuz)
      for (; c + AA_VL <= d; c += AA_VL) aa_st(dst + c, aa_load_fp8(s + c, 1));
    else
      for (; c + AA_VL <= d; c += AA_VL) aa_st(dst + c, aa_load_fp8(s + c, 0));
    for (; c < d; c++) dst[c] = aa_fp8_to_f32(s[c], fnuz);
    for (; c < dp; c++) dst[c] = 0.0f;
    return;
  }
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
 * folded into one vector at the end. With 16 registers, two passes of 4 rows
 * x 2 keys (8 chains), the K vectors loaded once per pass and q read as the
 * FMAs' memory operand. */
AA_INLINE void aa_qk_4x4(const float *restrict q, const float *restrict k, int dp, float *restrict s, int lds) {
  aa_vr acc[16];
  for (int i = 0; i < 16; i++) acc[i] = aa_rsplat(0.0f);
  const int KJ = AA_VREGS >= 32 ? 4 : 2; /* keys per pass */
  for (int j0 = 0; j0 < 4; j0 += KJ)
    for (int c = 0; c < dp; c += AA_VR) {
      aa_vr kv[4];
      for (int j = 0; j < KJ; j++) kv[j] = aa_rld(k + (size_t)(j0 + j) * dp + c);
      for (int r = 0; r < 4; r++) {
        const aa_vr qv = aa_rld(q + (size_t)r * dp + c);
        for (int j = 0; j < KJ; j++) acc[r * 4 + j0 + j] += qv * kv[j];
      }
    }
  const aa_vf sum = aa_rreduce16(acc);
  for (int r = 0; r < 4; r++)
    for (int j = 0; j < 4; j++) s[r * lds + j] = sum[r * 4 + j];
}

/* Scores of 1 query row x 16 keys (MHA and small groups). */
AA_INLINE void aa_qk_1x16(const float *restrict q, const float *restrict k, int dp, float *restrict s) {
  aa_vr acc[16];
  for (int i = 0; i < 16; i++) acc[i] = aa_rsplat(0.0f);
  const int KJ = AA_VREGS >= 32 ? 16 : 8; /* keys per pass: 16 chains spill with 16 registers */
  for (int j0 = 0; j0 < 16; j0 += KJ)
    for (int c = 0; c < dp; c += AA_VR) {
      const aa_vr qv = aa_rld(q + c);
      for (int j = j0; j < j0 + KJ; j++) acc[j] += qv * aa_rld(k + (size_t)j * dp + c);
    }
  aa_st(s, aa_rreduce16(acc));
}

/* Prefill items keep q transposed (Qt[c][r] = dim c of row r, ldq floats a
 * dim, once per item) and the scores transposed (St[j][r] = score of key j
 * for row r, the same ldq): the softmax then works on vectors of 16 rows
 * (maxima and sums lane-wise, no folds), and K needs no staged copy: a score
 * block broadcasts K elements from the rows where they are (fp32 caches) or
 * from rows widened once per tile, instead of transposing every tile of K. */

/* St[j][AA_VR NV rows] for NJ keys whose rows are k[0..NJ): per dim, NV
 * loads of Qt and NJ broadcasts of K for NJ NV FMAs. Under AVX-512, 6 keys x
 * 4 zmm (24 accumulators, 10 loads per 24 FMAs) against 8 x 2 (16, 10 per
 * 16): fp32 prefill 1x1024 1.05x faster on a loaded machine, 1.01x on a
 * quiet one (`dev/cpu_ab.c`, one thread, thread CPU time). With 16
 * registers, 6 keys x 2 (12 accumulators, 8 loads per 12 FMAs). */
AA_INLINE void aa_qk_t_(const int NJ, const int NV, const float *const *restrict k, const float *restrict qt, int ldq,
                        int d, float *restrict st) {
  const float *kr[8];
  for (int j = 0; j < NJ; j++) kr[j] = k[j];
  aa_vr acc[8][4];
  for (int j = 0; j < NJ; j++)
    for (int x = 0; x < NV; x++) acc[j][x] = aa_rsplat(0.0f);
  for (int c = 0; c < d; c++) {
    aa_vr qv[4];
    for (int x = 0; x < NV; x++) qv[x] = aa_rld(qt + (size_t)c * ldq + x * AA_VR);
    for (int j = 0; j < NJ; j++) {
      const aa_vr kb = aa_rsplat(kr[j][c]);
      for (int x = 0; x < NV; x++) acc[j][x] += kb * qv[x];
    }
  }
  for (int j = 0; j < NJ; j++)
    for (int x = 0; x < NV; x++) aa_rst(st + (size_t)j * ldq + x * AA_VR, acc[j][x]);
}

#define AA_QK_T(NJ, NV)                                                                                          \
  static __attribute__((noinline)) void aa_qk_t##NJ##x##NV(const float *const *restrict k, const float *restrict qt, \
                                                           int ldq, int d, float *restrict st) {                  \
    aa_qk_t_(NJ, NV, k, qt, ldq, d, st);                                                                         \
  }
#if AA_VREGS >= 32
AA_QK_T(6, 4)
AA_QK_T(6, 2)
AA_QK_T(6, 1)
AA_QK_T(4, 4)
AA_QK_T(4, 2)
AA_QK_T(4, 1)
#else
AA_QK_T(6, 2)
AA_QK_T(4, 2)
#endif
#undef AA_QK_T

/* The same for P.V with P transposed (Pt[j][r], ldp floats a key): acc[NR
 * rows][NC register vectors] = acc * alpha + P[rows, 0:nk] . V[0:nk, cols].
 * Under AVX-512, 6 rows x 64 dims (24 accumulators) 1.03x faster than 4 x 64
 * on fp32 prefill 1x1024; with 16 registers, 6 rows x 16 dims (12). */
#define AA_PV_NC (AA_VREGS >= 32 ? 4 : 2) /* register vectors of columns per call */
AA_INLINE void aa_pv_t(const int NR, const int NC, float *restrict acc, int dp, const float *restrict alpha,
                       const float *restrict pt, int ldp, const float *restrict v, int nk, const char *const *pl,
                       int npl) {
  aa_vr a[6][4];
  for (int i = 0; i < NR; i++) {
    const aa_vr al = aa_rsplat(alpha[i]);
    for (int k = 0; k < NC; k++) a[i][k] = aa_rld(acc + (size_t)i * dp + k * AA_VR) * al;
  }
  for (int j = 0; j < nk; j++) {
    if (j < npl) __builtin_prefetch(pl[j], 0, AA_PF_HINT);
    const float *vj = v + (size_t)j * dp, *pj = pt + (size_t)j * ldp;
    aa_vr vv[4];
    for (int k = 0; k < NC; k++) vv[k] = aa_rld(vj + k * AA_VR);
    for (int i = 0; i < NR; i++) {
      const aa_vr pb = aa_rsplat(pj[i]);
      for (int k = 0; k < NC; k++) a[i][k] += pb * vv[k];
    }
  }
  for (int i = 0; i < NR; i++)
    for (int k = 0; k < NC; k++) aa_rst(acc + (size_t)i * dp + k * AA_VR, a[i][k]);
}
/* The kernels, and the calls over a row group's column blocks (AA_PV_NC
 * register vectors each), which share out npl prefetch lines (pl) between
 * them. */
#define AA_PV_T(NR)                                                                                                 \
  static __attribute__((noinline)) void aa_pv_t##NR##xN(float *restrict acc, int dp, const float *restrict alpha,  \
                                                       const float *restrict pt, int ldp, const float *restrict v, \
                                                       int nk, const char *const *pl, int npl) {                   \
    aa_pv_t(NR, AA_PV_NC, acc, dp, alpha, pt, ldp, v, nk, pl, npl);                                                \
  }                                                                                                                \
  static __attribute__((noinline)) void aa_pv_t_rows##NR(float *restrict acc, int dp, const float *restrict alpha, \
                                                        const float *restrict pt, int ldp, const float *restrict v, \
                                                        int nk, const char *const *pl, int npl) {                  \
    const int calls = dp / (AA_PV_NC * AA_VR), q = calls ? (npl + calls - 1) / calls : 0;                          \
    int c = 0;                                                                                                     \
    for (; c + AA_PV_NC * AA_VR <= dp; c += AA_PV_NC * AA_VR) {                                                    \
      const int n = q < npl ? q : npl;                                                                             \
      aa_pv_t##NR##xN(acc + c, dp, alpha, pt, ldp, v + c, nk, pl, n);                                              \
      for (int i = nk < n ? nk : n; i < n; i++) __builtin_prefetch(pl[i], 0, AA_PF_HINT); /* past nk keys */       \
      pl += n;                                                                                                     \
      npl -= n;                                                                                                    \
    }                                                                                                              \
    for (; c < dp; c += AA_VR) aa_pv_t(NR, 1, acc + c, dp, alpha, pt, ldp, v + c, nk, pl, 0);                      \
  }
AA_PV_T(6)
AA_PV_T(4)
#undef AA_PV_T

/* acc[NR rows][NC vectors] = acc * alpha + P[rows, 0:nk] . V[0:nk, cols]:
 * the accumulators stay in registers across the whole tile. */
AA_INLINE void aa_pv(const int NR, const int NC, float *restrict acc, int dp, const float *restrict alpha,
                     const float *restrict p, int bn, const float *restrict v, int nk) {
  aa_vr a[4][4];
  for (int i = 0; i < NR; i++) {
    const aa_vr al = aa_rsplat(alpha[i]);
    for (int k = 0; k < NC; k++) a[i][k] = aa_rld(acc + (size_t)i * dp + k * AA_VR) * al;
  }
  for (int j = 0; j < nk; j++) {
    const float *vj = v + (size_t)j * dp;
    aa_vr vv[4];
    for (int k = 0; k < NC; k++) vv[k] = aa_rld(vj + k * AA_VR);
    for (int i = 0; i < NR; i++) {
      const aa_vr pb = aa_rsplat(p[(size_t)i * bn + j]);
      for (int k = 0; k < NC; k++) a[i][k] += pb * vv[k];
    }
  }
  for (int i = 0; i < NR; i++)
    for (int k = 0; k < NC; k++) aa_rst(acc + (size_t)i * dp + k * AA_VR, a[i][k]);
}

/* Out of line, so its registers are its own: inlined into aa_cpu_tile, GCC 12
 * parks the tile's pointers in vector registers and moves V through the stack,
 * and the FMAs reading it back stall on store forwarding (fp32 prefill 1x1024,
 * `dev/cpu_ab.c`, 2 threads, Xeon: 20% slower). */
/* The 64-column kernel is a function of its own too: inside the loop over
 * column blocks, GCC 12 ran out of general registers, parked pointers in
 * vector registers and spilled the V vectors to the stack (every FMA then
 * read V back from memory). */
#define AA_PV_ROWS(NR)                                                                                         \
  static __attribute__((noinline)) void aa_pv_##NR##xN(float *restrict acc, int dp, const float *restrict alpha, \
                                                       const float *restrict p, int bn, const float *restrict v,  \
                                                       int nk) {                                                 \
    aa_pv(NR, AA_PV_NC, acc, dp, alpha, p, bn, v, nk);                                                           \
  }                                                                                                              \
  static __attribute__((noinline)) void aa_pv_rows##NR(float *restrict acc, int dp, const float *restrict alpha, \
                                                       const float *restrict p, int bn, const float *restrict v,  \
                                                       int nk) {                                                 \
    int c = 0;                                                                                                   \
    for (; c + AA_PV_NC * AA_VR <= dp; c += AA_PV_NC * AA_VR)                                                   \
      aa_pv_##NR##xN(acc + c, dp, alpha, p, bn, v + c, nk);                                                      \
    for (; c < dp; c += AA_VR) aa_pv(NR, 1, acc + c, dp, alpha, p, bn, v + c, nk);                              \
  }
AA_PV_ROWS(4)
AA_PV_ROWS(1)
#undef AA_PV_ROWS

/* ---- one tile: scores, online softmax, P.V --------------------------------- */
/* The tile sees one kv head's rows as scalars: R real rows padded to R4, row
 * r seeing keys [lo[r], hi[r]). Given an aa_cpu_rows pointer instead, GCC 12
 * starts the P.V loop 8 bytes off a 16-byte boundary, and prefill 1x1024
 * (`anyattn bench --backend cpu --cases p1x1024`, 2 threads, Xeon) runs 3%
 * slower; as scalars every hot loop of aa_cpu_tile starts on one. */

/* S[r][0:nkp] = Q[r] . K[0:nkp]: 4x4 blocks when there are 4 rows or more (K
 * padded to 4 keys), else 1x16 (padded to 16). */
AA_INLINE void aa_tile_scores(int R, int R4, int dp, int bn, const float *restrict Q, const float *restrict Kf,
                              float *restrict S, int nkp) {
  if (R >= 4) {
    for (int r = 0; r < R4; r += 4)
      for (int j = 0; j < nkp; j += 4)
        aa_qk_4x4(Q + (size_t)r * dp, Kf + (size_t)j * dp, dp, S + (size_t)r * bn + j, bn);
  } else {
    for (int r = 0; r < R; r++)
      for (int j = 0; j < nkp; j += 16) aa_qk_1x16(Q + (size_t)r * dp, Kf + (size_t)j * dp, dp, S + (size_t)r * bn + j);
  }
}

/* Collects row r's per-lane maxima (max set) or sums in red[r % 16]; after
 * every 16th row (or the last of R4) folds them into *f (lane i: row r0 + i)
 * and returns how many rows it holds, else 0: 45 ops for 16 rows instead of
 * 16 reductions of 8 ops each. */
AA_INLINE int aa_tile_fold(aa_vf red[AA_VL], aa_vf v, int r, int R4, const int max, aa_vf *f) {
  red[r % AA_VL] = v;
  if (r % AA_VL != AA_VL - 1 && r != R4 - 1) return 0;
  for (int i = r % AA_VL + 1; i < AA_VL; i++) red[i] = aa_splat(max ? -INFINITY : 0.0f);
  *f = max ? aa_reduce16_max(red) : aa_reduce16(red);
  return r % AA_VL + 1;
}

/* Online softmax of the scores of keys [j0, j0 + nk): softcap and ALiBi on
 * the visible keys, the running max m and sum l updated, alpha[r] the factor
 * that rescales row r's accumulator; probabilities overwrite the scores in S.
 * Three passes: each row's maximum over its visible keys (mx; -inf for a row
 * that sees none), the new maxima and rescale factors of 16 rows per vector
 * (one vector exp instead of a scalar expf call per row, whose call also
 * cost the spills of the live vector registers around it), then each row's
 * probabilities and sum. */
AA_INLINE void aa_tile_softmax(const aa_cpu_job *job, int R, int R4, int bn, float *restrict S, float *restrict m,
                               float *restrict l, float *restrict alpha, float *restrict mx, const int32_t *lo,
                               const int32_t *hi, int j0, int nk, int g, int qpos0) {
  const anyattn_args *a = job->a;
  const int group = job->group;
  const float softcap = job->plan->problem.softcap, inv_softcap = softcap > 0.0f ? 1.0f / softcap : 0.0f;
  const int nk16 = (int)aa_round_up((size_t)nk, AA_VL);
  aa_vf red[AA_VL]; /* 16 rows' per-lane maxima (sums), folded together into one vector */
  for (int r = 0; r < R4; r++) {
    float *restrict sr = S + (size_t)r * bn;
    int jlo, jhi;
    aa_key_range(lo, hi, R, r, j0, nk, &jlo, &jhi);
    aa_vf vmax = aa_splat(-INFINITY);
    if (jlo < jhi) {
      if (softcap > 0.0f)
        for (int j = jlo; j < jhi; j++) sr[j] = softcap * tanhf(sr[j] * inv_softcap);
      if (a->alibi_slopes) {
        const float slope = ((const float *)a->alibi_slopes)[g * group + r % group];
        const int rel = j0 - (qpos0 + r / group); /* key j0 minus the query position */
        for (int j = jlo; j < jhi; j++) sr[j] += slope * (float)(rel + j);
      }
      /* a row that sees the whole tile (every tile off the causal diagonal)
       * needs no key masks: 6 ops per vector less in each pass */
      if (jlo == 0 && jhi == nk16)
        for (int j = 0; j < nk16; j += AA_VL) vmax = aa_max(vmax, aa_ld(sr + j));
      else
        for (int j = 0; j < nk16; j += AA_VL) {
          const aa_vi idx = aa_iota() + aa_splati(j);
          vmax = aa_max(vmax, aa_sel(aa_in_range(idx, aa_splati(jlo), aa_splati(jhi)), aa_ld(sr + j), aa_splat(-INFINITY)));
        }
    }
    aa_vf f;
    const int n = aa_tile_fold(red, vmax, r, R4, 1, &f);
    if (n) memcpy(mx + r + 1 - n, &f, (size_t)n * sizeof(float));
  }
  /* mx: the new maxima; alpha 1 where a row sees no key here (its max
   * stays), 0 while m is still -inf (padding rows too: m -inf, acc 0) */
  int r = 0;
  for (; r + AA_VL <= R4; r += AA_VL) {
    const aa_vf mo = aa_load_f32(m + r), mn = aa_max(aa_load_f32(mx + r), mo);
    const aa_vf e = aa_sel(aa_eq(mo, aa_splat(-INFINITY)), aa_splat(0.0f), aa_exp(mo - mn));
    const aa_vf al = aa_sel(aa_eq(mn, mo), aa_splat(1.0f), e);
    memcpy(alpha + r, &al, sizeof al);
    memcpy(mx + r, &mn, sizeof mn);
  }
  for (; r < R4; r++) {
    const float mn = mx[r] > m[r] ? mx[r] : m[r];
    alpha[r] = mn == m[r] ? 1.0f : expf(m[r] - mn); /* 0 while m is still -inf */
    mx[r] = mn;
  }
  for (r = 0; r < R4; r++) {
    float *restrict sr = S + (size_t)r * bn;
    int jlo, jhi;
    aa_key_range(lo, hi, R, r, j0, nk, &jlo, &jhi);
    aa_vf vsum = aa_splat(0.0f);
    const aa_vf vm = aa_splat(mx[r]);
    if (jlo >= jhi)
      memset(sr, 0, (size_t)nk * sizeof(float));
    else if (jlo == 0 && jhi == nk16)
      for (int j = 0; j < nk16; j += AA_VL) {
        const aa_vf e = aa_exp(aa_ld(sr + j) - vm);
        aa_st(sr + j, e);
        vsum += e;
      }
    else
      for (int j = 0; j < nk16; j += AA_VL) {
        const aa_vi idx = aa_iota() + aa_splati(j);
        const aa_vf e = aa_sel(aa_in_range(idx, aa_splati(jlo), aa_splati(jhi)), aa_exp(aa_ld(sr + j) - vm), aa_splat(0.0f));
        aa_st(sr + j, e);
        vsum += e;
      }
    aa_vf f;
    const int n = aa_tile_fold(red, vsum, r, R4, 0, &f);
    for (int i = 0; i < n; i++) { /* rows that see no key here: alpha 1, sum 0 */
      const int ri = r + 1 - n + i;
      l[ri] = l[ri] * alpha[ri] + f[i];
      m[ri] = mx[ri];
    }
  }
}

/* acc[r] = acc[r] * alpha[r] + P[r][0:nk] . V[0:nk] for every real row. */
AA_INLINE void aa_tile_pv(int R, int R4, int dp, int bn, float *restrict acc, const float *restrict alpha,
                          const float *restrict S, const float *restrict Vf, int nk) {
  if (R >= 4) {
    for (int r = 0; r < R4; r += 4)
      aa_pv_rows4(acc + (size_t)r * dp, dp, alpha + r, S + (size_t)r * bn, bn, Vf, nk);
  } else {
    for (int r = 0; r < R; r++) aa_pv_rows1(acc + (size_t)r * dp, dp, alpha + r, S + (size_t)r * bn, bn, Vf, nk);
  }
}

/* Scores, online softmax and P.V of kv head g's row block over one staged
 * tile of nk keys starting at key j0; qpos0 is the position of the block's
 * first query token (for ALiBi). */
static void aa_cpu_tile(const aa_cpu_job *job, int R, int R4, const float *restrict Q, float *restrict acc,
                        float *restrict S, float *restrict m, float *restrict l, float *restrict alpha, float *restrict mx,
                        const int32_t *lo, const int32_t *hi, const float *restrict Kf, const float *restrict Vf,
                        int j0, int nk, int g, int qpos0, int bn) {
  const int dp = job->L.dp;
  aa_tile_scores(R, R4, dp, bn, Q, Kf, S, (int)aa_round_up((size_t)nk, R >= 4 ? 4 : 16));
  aa_tile_softmax(job, R, R4, bn, S, m, l, alpha, mx, lo, hi, j0, nk, g, qpos0);
  aa_tile_pv(R, R4, dp, bn, acc, alpha, S, Vf, nk);
}

/* ---- one work item ------------------------------------------------------------ */
/* The item's q rows widened to fp32 and scaled (folding the scale, times the
 * k_descale of fp8 caches, into q saves a multiply per score), m and l
 * started from the sinks, padding rows zeroed, accumulators cleared. Rows of
 * the hb-th kv head start at hb * R4. */
AA_INLINE void aa_item_load_q(const aa_cpu_job *job, const aa_cpu_rows *rw, int s, int g0, int nh, float *restrict Q,
                              float *restrict acc, float *restrict m, float *restrict l) {
  const anyattn_args *a = job->a;
  const int d = job->d, dp = job->L.dp, group = job->group, R = rw->R, R4 = rw->R4;
  const anyattn_dtype dt = job->plan->problem.dtype;
  for (int hb = 0; hb < nh; hb++) {
    const int g = g0 + hb;
    const float scale = job->plan->scale * aa_descale_of(a, a->k_descale, s, g, job->kvh);
    float *Qh = Q + (size_t)hb * R4 * dp;
    for (int r = 0; r < R; r++) {
      const int t = rw->tok0 + r / group, h = g * group + r % group;
      float *qr = Qh + (size_t)r * dp;
      aa_widen_row(dt, ANYATTN_KV_AS_Q, (const char *)a->q + ((size_t)t * job->nqh + h) * d * job->es, qr, d, dp);
      for (int c = 0; c < dp; c += AA_VL) aa_st(qr + c, aa_ld(qr + c) * aa_splat(scale));
      m[hb * R4 + r] = a->sinks ? ((const float *)a->sinks)[h] : -INFINITY;
      l[hb * R4 + r] = a->sinks ? 1.0f : 0.0f;
    }
    for (int r = R; r < R4; r++) {
      memset(Qh + (size_t)r * dp, 0, (size_t)dp * sizeof(float));
      m[hb * R4 + r] = -INFINITY;
      l[hb * R4 + r] = 0.0f;
    }
  }
  memset(acc, 0, (size_t)nh * R4 * dp * sizeof(float));
}

/* Widens the next nk keys' K and V rows of nh kv heads into the tiles Kf and
 * Vf (head hb's rows at hb * bn), key by key with all heads of a key together
 * (address order for NHD caches), and prefetches as many keys from pf while
 * keys remain before ihi. */
AA_INLINE void aa_item_stage(const aa_cpu_job *job, int nh, int nk, int bn, aa_kv_walks *rd, aa_kv_walks *pf,
                             int *prefetched, int ihi, float *restrict Kf, float *restrict Vf) {
  const anyattn_args *a = job->a;
  const int d = job->d, dp = job->L.dp;
  const anyattn_dtype dt = job->plan->problem.dtype;
  const anyattn_kv_dtype kv = job->kv;
  const size_t es = job->kes, row_bytes = (size_t)d * es;
  const int64_t kh = a->k_stride_head * (int64_t)es, vh = a->v_stride_head * (int64_t)es; /* bytes */
  for (int j = 0; j < nk; j++) {
    const char *kr = aa_walk_next(&rd->k), *vr = aa_walk_next(&rd->v);
    for (int hb = 0; hb < nh; hb++) {
      aa_widen_row(dt, kv, kr + hb * kh, Kf + ((size_t)hb * bn + j) * dp, d, dp);
      aa_widen_row(dt, kv, vr + hb * vh, Vf + ((size_t)hb * bn + j) * dp, d, dp);
    }
    if (*prefetched < ihi) {
      const char *kp = aa_walk_next(&pf->k), *vp = aa_walk_next(&pf->v);
      for (int hb = 0; hb < nh; hb++)
        for (size_t o = 0; o < row_bytes; o += 64) {
          __builtin_prefetch(kp + hb * kh + o, 0, AA_PF_HINT);
          __builtin_prefetch(vp + hb * vh + o, 0, AA_PF_HINT);
        }
      ++*prefetched;
    }
  }
}

/* Normalises the accumulators, times the v_descale of fp8 caches, and rounds
 * them once to the output dtype; writes the LSE (without v_descale) when asked
 * (-inf, and a zero row, where no key is visible). */
AA_INLINE void aa_item_store(const aa_cpu_job *job, const aa_cpu_rows *rw, int s, int g0, int nh,
                             const float *restrict acc, const float *restrict m, const float *restrict l) {
  const anyattn_args *a = job->a;
  const int d = job->d, dp = job->L.dp, group = job->group;
  for (int hb = 0; hb < nh; hb++) {
    const float vd = aa_descale_of(a, a->v_descale, s, g0 + hb, job->kvh);
    for (int r = 0; r < rw->R; r++) {
      const int t = rw->tok0 + r / group, h = (g0 + hb) * group + r % group;
      const size_t o = (size_t)t * job->nqh + h;
      const size_t rr = (size_t)hb * rw->R4 + r;
      const int empty = rw->lo[r] >= rw->hi[r];
      const float inv = empty ? 0.0f : vd / l[rr];
      const float *ar = acc + rr * dp;
      switch (job->plan->problem.dtype) {
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

/* One work item (cpu.h): its q rows into scratch, then the visible keys a
 * tile at a time, staged for all nh kv heads and run head by head, then the
 * output. Inlined into the two entry points below. */
AA_INLINE void aa_cpu_item(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int t0, int nq) {
  const aa_cpu_layout *L = &job->L;
  /* L->bn is the 16-bit path's where its products are on (backend.c): the
   * tiles of several heads then, which the scratch holds for one */
  const int dp = L->dp, bn = nh > 1 || job->mm16 ? L->bnh : L->bn;
  float *restrict Q = ws + L->q, *restrict acc = ws + L->acc, *restrict Kf = ws + L->k, *restrict Vf = ws + L->v;
  float *restrict S = ws + L->s, *restrict m = ws + L->m, *restrict l = ws + L->l, *restrict alpha = ws + L->alpha;
  float *restrict mx = ws + L->mx;
  const aa_cpu_rows rw = aa_rows_of(job, s, t0, nq, (int32_t *)(ws + L->lo), (int32_t *)(ws + L->hi));
  const int R4 = rw.R4, ilo = rw.ilo, ihi = rw.ihi;
  aa_item_load_q(job, &rw, s, g0, nh, Q, acc, m, l);

  /* Prefetch a fixed number of bytes ahead, not a fixed number of keys: a
   * tile of all kv heads (128 KiB at bf16, 8 heads) would not fit in L1, and
   * lines prefetched that far ahead are evicted before they are used. */
  int pf_keys = (int)(AA_CPU_PREFETCH_BYTES / ((size_t)nh * job->d * job->kes * 2));
  pf_keys = pf_keys < 1 ? 1 : pf_keys > bn ? bn : pf_keys;
  int prefetched = ilo + pf_keys < ihi ? ilo + pf_keys : ihi; /* next key to prefetch */
  aa_kv_walks rd = {0}, pf = {0};
  if (ilo < ihi) {
    aa_walks_init(&rd, job, s, g0, ilo);
    aa_walks_init(&pf, job, s, g0, prefetched);
  }
  for (int j0 = ilo; j0 < ihi; j0 += bn) {
    const int nk = ihi - j0 < bn ? ihi - j0 : bn;
    const int nkp = (int)aa_round_up((size_t)nk, rw.R >= 4 ? 4 : 16);
    aa_item_stage(job, nh, nk, bn, &rd, &pf, &prefetched, ihi, Kf, Vf);
    for (int hb = 0; hb < nh; hb++) {
      for (int j = nk; j < nkp; j++) memset(Kf + ((size_t)hb * bn + j) * dp, 0, (size_t)dp * sizeof(float));
      const size_t r0 = (size_t)hb * R4;
      aa_cpu_tile(job, rw.R, R4, Q + r0 * dp, acc + r0 * dp, S + r0 * bn, m + r0, l + r0, alpha + r0, mx + r0, rw.lo, rw.hi,
                  Kf + (size_t)hb * bn * dp, Vf + (size_t)hb * bn * dp, j0, nk, g0 + hb, rw.qpos0, bn);
    }
  }
  aa_item_store(job, &rw, s, g0, nh, acc, m, l);
}

/* ---- prefill items: q and the scores transposed ------------------------------ */
/* 16 elements of a q row (dt) as fp32. */
AA_INLINE aa_vf aa_load_q16(const anyattn_dtype dt, const char *p) {
  return dt == ANYATTN_DTYPE_F32    ? aa_load_f32((const float *)p)
         : dt == ANYATTN_DTYPE_BF16 ? aa_load_bf16((const uint16_t *)p)
                                    : aa_load_f16((const uint16_t *)p);
}
/* The n (1..15) elements that end a q row (dt, es bytes each) as fp32,
 * zeros past them: nothing past the row is read. */
AA_INLINE aa_vf aa_load_q16_tail(const anyattn_dtype dt, size_t es, const char *p, int n) {
  float buf[AA_VL] = {0}; /* as many bytes as 16 elements of any dt */
  memcpy(buf, p, (size_t)n * es);
  return aa_load_q16(dt, (const char *)buf);
}

/* Row blocks (AA_VR rows) ahead of the one being read that aa_item_load_qt
 * prefetches. */
#define AA_QT_PF_BLOCKS 2

/* The item's q rows widened and scaled (the scale times the k_descale of fp8
 * caches) straight into Qt [dp][ls], AA_VR rows x 16 dims a register
 * transpose at a time (rows R..R16 zero, rows R16..ls unused; dims d..dp
 * zero, from a row's last 16 elements read as a tail); m and l from the
 * sinks; the accumulators cleared. A row is 512 bytes at fp32 and the rows
 * of a block are a token stride apart, which the hardware prefetchers do not
 * follow from row to row: each step prefetches the same line of the rows
 * AA_QT_PF_BLOCKS blocks ahead (docs/design/cpu.md, Tiled path). */
AA_INLINE void aa_item_load_qt(const aa_cpu_job *job, const aa_cpu_rows *rw, int s, int g, int R16, int ls,
                               float *restrict Qt, float *restrict acc, float *restrict m, float *restrict l) {
  const anyattn_args *a = job->a;
  const int d = job->d, group = job->group, R = rw->R;
  const anyattn_dtype dt = job->plan->problem.dtype;
  const size_t es = job->es;
  const aa_vf sc = aa_splat(job->plan->scale * aa_descale_of(a, a->k_descale, s, g, job->kvh));
  for (int r = 0; r < R16; r++) {
    const int h = g * group + r % group;
    m[r] = r < R && a->sinks ? ((const float *)a->sinks)[h] : -INFINITY;
    l[r] = r < R && a->sinks ? 1.0f : 0.0f;
  }
  /* row r's address, NULL past R */
#define AA_QT_ROW(r)                                                                                               \
  ((r) < R ? (const char *)a->q + ((size_t)(rw->tok0 + (r) / group) * job->nqh + g * group + (r) % group) * d * es \
           : NULL)
  for (int r0 = 0; r0 < AA_QT_PF_BLOCKS * AA_VR && r0 < R; r0++) /* the first blocks: no step before them */
    for (size_t o = 0; o < (size_t)d * es; o += 64) __builtin_prefetch(AA_QT_ROW(r0) + o, 0, 3);
  for (int r0 = 0; r0 < R16; r0 += AA_VR) {
    const char *src[AA_VR], *ahead[AA_VR];
    for (int i = 0; i < AA_VR; i++) {
      src[i] = AA_QT_ROW(r0 + i);
      ahead[i] = AA_QT_ROW(r0 + AA_QT_PF_BLOCKS * AA_VR + i);
    }
    for (int c = 0; c < d; c += AA_VL) {
      if (!((c * es) & 63))
        for (int i = 0; i < AA_VR; i++)
          if (ahead[i]) __builtin_prefetch(ahead[i] + c * es, 0, 3);
      aa_vr t[AA_VL / AA_VR][AA_VR];
      for (int i = 0; i < AA_VR; i++) {
        const aa_vf x = !src[i]          ? aa_splat(0.0f)
                        : c + AA_VL <= d ? aa_load_q16(dt, src[i] + c * es) * sc
                                         : aa_load_q16_tail(dt, es, src[i] + c * es, d - c) * sc;
        for (int p = 0; p < AA_VL / AA_VR; p++) memcpy(&t[p][i], (const char *)&x + p * sizeof(aa_vr), sizeof(aa_vr));
      }
      for (int p = 0; p < AA_VL / AA_VR; p++) {
        aa_rtranspose(t[p]);
        for (int i = 0; i < AA_VR; i++) aa_rst(Qt + (size_t)(c + p * AA_VR + i) * ls + r0, t[p][i]);
      }
    }
  }
#undef AA_QT_ROW
  memset(acc, 0, (size_t)R16 * job->L.dp * sizeof(float));
}

/* The cache lines of the K and V rows of the next n keys of walk pf, into
 * pl (at most max); returns their count. */
AA_INLINE int aa_prefetch_lines(const aa_cpu_job *job, aa_kv_walks *pf, int n, const char **pl, int max) {
  const size_t row_bytes = (size_t)job->d * job->kes;
  int at = 0;
  for (int j = 0; j < n; j++) {
    const char *kq = aa_walk_next(&pf->k), *vq = aa_walk_next(&pf->v);
    for (size_t o = 0; o < row_bytes && at + 2 <= max; o += 64) {
      pl[at++] = kq + o;
      pl[at++] = vq + o;
    }
  }
  return at;
}

/* The cache lines of the item's output rows, into pl (at most max);
 * returns their count. */
AA_INLINE int aa_out_lines(const aa_cpu_job *job, const aa_cpu_rows *rw, int g, const char **pl, int max) {
  const size_t row_bytes = (size_t)job->d * job->es;
  const int group = job->group;
  int at = 0;
  for (int r = 0; r < rw->R; r++) {
    const int t = rw->tok0 + r / group, h = g * group + r % group;
    const char *out = (const char *)job->a->out + ((size_t)t * job->nqh + h) * row_bytes;
    for (size_t o = 0; o < row_bytes && at < max; o += 64) pl[at++] = out + o;
  }
  return at;
}

/* One kv head's next nk keys: the addresses of their K rows in kp (in place
 * for fp32 caches, else widened into Kf) and their V rows widened into Vf.
 * Keys nk..nkp point at zero rows: Kf's first row for fp32 caches (zeroed
 * by the caller), else Kf's rows nk..nkp. */
AA_INLINE void aa_item_stage_t(const aa_cpu_job *job, int nk, int nkp, aa_kv_walks *rd, const float **kp,
                               float *restrict Kf, float *restrict Vf) {
  const int d = job->d, dp = job->L.dp;
  const anyattn_dtype dt = job->plan->problem.dtype;
  const anyattn_kv_dtype kv = job->kv;
  const int in_place = dt == ANYATTN_DTYPE_F32 && kv == ANYATTN_KV_AS_Q;
  for (int j = 0; j < nk; j++) {
    const char *kr = aa_walk_next(&rd->k);
    if (in_place) {
      kp[j] = (const float *)kr;
    } else {
      aa_widen_row(dt, kv, kr, Kf + (size_t)j * dp, d, dp);
      kp[j] = Kf + (size_t)j * dp;
    }
    aa_widen_row(dt, kv, aa_walk_next(&rd->v), Vf + (size_t)j * dp, d, dp);
  }
  for (int j = nk; j < nkp; j++) {
    if (!in_place) memset(Kf + (size_t)j * dp, 0, (size_t)dp * sizeof(float));
    kp[j] = in_place ? Kf : Kf + (size_t)j * dp;
  }
}

/* Keys of the tile [j0, j0 + nk) that rows [r, r + n) need, relative to j0:
 * up to the last key any of them sees (0 when none sees one). Under a causal
 * mask the rows of the diagonal tile see fewer keys than the tile holds. */
AA_INLINE int aa_rows_keys(const int32_t *lo, const int32_t *hi, int R, int r, int n, int j0, int nk) {
  int kmax = 0;
  for (int i = r; i < r + n && i < R; i++) {
    int jl, jh;
    aa_key_range(lo, hi, R, i, j0, nk, &jl, &jh);
    if (jh > jl && jh > kmax) kmax = jh;
  }
  return kmax;
}

/* St[0:nkp][0:R16] = K[0:nkp] . Qt, both ls floats a row (AA_LS_PAD): blocks
 * of 6 keys, then of 4 (nkp a multiple of 4), x 64 rows (then 32, 16), the
 * rows outer so that a block's 32 KiB of Qt stays in L1 while the K rows pass.
 * A row block stops at the keys its rows see (aa_rows_keys, rounded up to 4);
 * the scores past them stay unwritten, and the softmax masks them. */
AA_INLINE void aa_tile_scores_t(int R16, int ls, int d, const float *const *kp, const float *restrict Qt,
                                float *restrict St, int nkp, const int32_t *lo, const int32_t *hi, int R, int j0,
                                int nk) {
  int r = 0;
#define AA_QK_ROWS(NV)                                                                      \
  for (; r + NV * AA_VR <= R16; r += NV * AA_VR) {                                          \
    int nb = (int)aa_round_up((size_t)aa_rows_keys(lo, hi, R, r, NV * AA_VR, j0, nk), 4);   \
    if (nb > nkp) nb = nkp;                                                                 \
    const int n6 = nb / 6 / 2 * 2 * 6; /* an even count of 6-key blocks leaves a multiple of 4 */ \
    int j = 0;                                                                              \
    for (; j < n6; j += 6) aa_qk_t6x##NV(kp + j, Qt + r, ls, d, St + (size_t)j * ls + r);   \
    for (; j < nb; j += 4) aa_qk_t4x##NV(kp + j, Qt + r, ls, d, St + (size_t)j * ls + r);   \
  }
#if AA_VREGS >= 32
  AA_QK_ROWS(4)
  AA_QK_ROWS(2)
  AA_QK_ROWS(1)
#else
  AA_QK_ROWS(2) /* R16 rows: a multiple of 2 AA_VR */
#endif
#undef AA_QK_ROWS
}

/* Online softmax of St (keys [j0, j0 + nk)), rows by register vectors: softcap
 * and ALiBi, each row's maximum, its rescale factor alpha, probabilities in
 * place of the scores, and the running m and l. Key masks only in row
 * vectors some row of which does not see the whole tile. */
AA_INLINE void aa_tile_softmax_t(const aa_cpu_job *job, int R, int R16, int ls, float *restrict St, float *restrict m,
                                 float *restrict l, float *restrict alpha, const int32_t *lo, const int32_t *hi, int j0,
                                 int nk, int g, int qpos0) {
  const anyattn_args *a = job->a;
  const int group = job->group;
  const float softcap = job->plan->problem.softcap;
  if (softcap > 0.0f) {
    const float inv_softcap = 1.0f / softcap;
    for (int j = 0; j < nk; j++)
      for (int r = 0; r < R; r++) St[(size_t)j * ls + r] = softcap * tanhf(St[(size_t)j * ls + r] * inv_softcap);
  }
  if (a->alibi_slopes)
    for (int r = 0; r < R; r++) {
      const float slope = ((const float *)a->alibi_slopes)[g * group + r % group];
      const int rel = j0 - (qpos0 + r / group); /* key j0 minus the query position */
      for (int j = 0; j < nk; j++) St[(size_t)j * ls + r] += slope * (float)(rel + j);
    }
  /* one register vector of rows at a time (aa_vr: 8 rows under AVX2, 16
   * under AVX-512), so that the running maxima and sums stay in registers */
  const aa_vr l2e = aa_rsplat(1.44269504088896341f), ninf = aa_rsplat(-INFINITY), zero = aa_rsplat(0.0f);
  for (int r0 = 0; r0 < R16; r0 += AA_VR) {
    /* row r sees keys [lo[r], hi[r]); padding rows none */
    aa_vri vlo = aa_rspli(0), vhi = aa_rspli(0);
    int full = 1;
    for (int i = 0; i < AA_VR; i++) {
      const int r = r0 + i;
      vlo[i] = r < R ? lo[r] : 0;
      vhi[i] = r < R ? hi[r] : 0;
      full &= vlo[i] <= j0 && vhi[i] >= j0 + nk;
    }
    float *restrict sr = St + r0;
    aa_vr vmax = ninf;
    if (full) {
      /* four chains: one is bound by the latency of the maximum */
      aa_vr mx4[4] = {vmax, vmax, vmax, vmax};
      int j = 0;
      for (; j + 4 <= nk; j += 4)
        for (int u = 0; u < 4; u++) mx4[u] = aa_rmax(mx4[u], aa_rld(sr + (size_t)(j + u) * ls));
      for (; j < nk; j++) mx4[0] = aa_rmax(mx4[0], aa_rld(sr + (size_t)j * ls));
      vmax = aa_rmax(aa_rmax(mx4[0], mx4[1]), aa_rmax(mx4[2], mx4[3]));
    } else
      for (int j = 0; j < nk; j++)
        vmax = aa_rmax(vmax, aa_rsel(aa_rin_range(aa_rspli(j0 + j), vlo, vhi), aa_rld(sr + (size_t)j * ls), ninf));
    /* alpha 1 where a row sees no key here (its max stays), 0 while m is
     * still -inf (padding rows too: m -inf, acc 0) */
    const aa_vr mo = aa_rld(m + r0), mn = aa_rmax(vmax, mo), mn2 = mn * l2e;
    const aa_vr e = aa_rsel(mo == ninf, zero, aa_rexp2(mo * l2e - mn2));
    const aa_vr al = aa_rsel(mn == mo, aa_rsplat(1.0f), e);
    /* p = e^(s - mn) = 2^(s log2(e) - mn log2(e)): one FMA and aa_rexp2, 11
     * ops against 20 (fp32 prefill 1x1024 1.04x faster); two sums */
    aa_vr s0 = zero, s1 = zero;
    if (full) {
      int j = 0;
      for (; j + 2 <= nk; j += 2) {
        const aa_vr p0 = aa_rexp2(aa_rld(sr + (size_t)j * ls) * l2e - mn2);
        const aa_vr p1 = aa_rexp2(aa_rld(sr + (size_t)(j + 1) * ls) * l2e - mn2);
        aa_rst(sr + (size_t)j * ls, p0);
        aa_rst(sr + (size_t)(j + 1) * ls, p1);
        s0 += p0;
        s1 += p1;
      }
      for (; j < nk; j++) {
        const aa_vr p = aa_rexp2(aa_rld(sr + (size_t)j * ls) * l2e - mn2);
        aa_rst(sr + (size_t)j * ls, p);
        s0 += p;
      }
    } else
      for (int j = 0; j < nk; j++) {
        const aa_vr p = aa_rsel(aa_rin_range(aa_rspli(j0 + j), vlo, vhi),
                                aa_rexp2(aa_rld(sr + (size_t)j * ls) * l2e - mn2), zero);
        aa_rst(sr + (size_t)j * ls, p);
        s0 += p;
      }
    aa_rst(alpha + r0, al);
    aa_rst(l + r0, aa_rld(l + r0) * al + (s0 + s1));
    aa_rst(m + r0, mn);
  }
}

/* One prefill item (cpu.h), query tokens [t0, t0 + nq) of sequence s
 * against kv head g, any head_dim: q transposed into scratch
 * once, then per tile of keys the K row addresses and the widened V rows,
 * the transposed scores, their softmax and P.V (6, then 4, rows x 64 dims
 * of accumulators per call), then the output. */
static void aa_cpu_item_t(const aa_cpu_job *job, float *restrict ws, int s, int g, int t0, int nq) {
  const aa_cpu_layout *L = &job->L;
  const int dp = L->dp, bn = L->bn;
  float *restrict Qt = ws + L->q, *restrict acc = ws + L->acc, *restrict Kf = ws + L->k, *restrict Vf = ws + L->v;
  float *restrict St = ws + L->s, *restrict m = ws + L->m, *restrict l = ws + L->l, *restrict alpha = ws + L->alpha;
  const aa_cpu_rows rw = aa_rows_of(job, s, t0, nq, (int32_t *)(ws + L->lo), (int32_t *)(ws + L->hi));
  const int R16 = (int)aa_round_up((size_t)rw.R, AA_VL), ls = R16 + AA_LS_PAD, ilo = rw.ilo, ihi = rw.ihi;
  aa_item_load_qt(job, &rw, s, g, R16, ls, Qt, acc, m, l);
  memset(Kf, 0, (size_t)dp * sizeof(float)); /* the zero row of fp32 caches (aa_item_stage_t) */
  const float *kp[AA_CPU_MAX_BN];

  /* The first tile's rows are prefetched here, each next tile's a line per
   * key step of the P.V loops of the one before, and during the last tile
   * the output rows, so that aa_item_store does not wait on their reads for
   * ownership (1.015-1.03x). Prefetches in a burst stall on the line fill
   * buffers (whole tiles before each tile's math: 1.02x slower than none; a
   * few keys' rows after each P.V call: the same as none). */
  aa_kv_walks rd = {0}, pf = {0};
  const char *pl[AA_PF_LINES];
  if (ilo < ihi) {
    aa_walks_init(&rd, job, s, g, ilo);
    aa_walks_init(&pf, job, s, g, ilo);
    const int n = aa_prefetch_lines(job, &pf, ihi - ilo < bn ? ihi - ilo : bn, pl, AA_PF_LINES);
    for (int i = 0; i < n; i++) __builtin_prefetch(pl[i], 0, AA_PF_HINT);
  }
  /* 6-row P.V calls, then 4-row ones: R4 - n6 a multiple of 4 */
  const int n6 = rw.R4 / 6 / 2 * 2 * 6, calls = n6 / 6 + (rw.R4 - n6) / 4;
  for (int j0 = ilo; j0 < ihi; j0 += bn) {
    const int nk = ihi - j0 < bn ? ihi - j0 : bn, nkp = (int)aa_round_up((size_t)nk, 4);
    aa_item_stage_t(job, nk, nkp, &rd, kp, Kf, Vf);
    aa_tile_scores_t(R16, ls, job->d, kp, Qt, St, nkp, rw.lo, rw.hi, rw.R, j0, nk);
    aa_tile_softmax_t(job, rw.R, R16, ls, St, m, l, alpha, rw.lo, rw.hi, j0, nk, g, rw.qpos0);
    const int next = ihi - (j0 + bn) < bn ? ihi - (j0 + bn) : bn; /* keys of the next tile */
    int npl = next > 0 ? aa_prefetch_lines(job, &pf, next, pl, AA_PF_LINES)
                       : aa_out_lines(job, &rw, g, pl, AA_PF_LINES); /* the last tile: the output rows */
    const int per = (npl + calls - 1) / calls;
    const char **at = pl;
    for (int r = 0; r < rw.R4; r += r < n6 ? 6 : 4) {
      const int n = per < npl ? per : npl;
      /* keys past those the group sees have P = 0: not multiplied */
      const int kg = aa_rows_keys(rw.lo, rw.hi, rw.R, r, r < n6 ? 6 : 4, j0, nk);
      if (r < n6) aa_pv_t_rows6(acc + (size_t)r * dp, dp, alpha + r, St + r, ls, Vf, kg, at, n);
      else aa_pv_t_rows4(acc + (size_t)r * dp, dp, alpha + r, St + r, ls, Vf, kg, at, n);
      at += n;
      npl -= n;
    }
  }
  aa_item_store(job, &rw, s, g, 1, acc, m, l);
}

/* The entry points: a block of a sequence's tokens against one kv head
 * (prefill: the transposed item at every head dim; at dims that are not a
 * multiple of 16 it ran prefill 1x1024 and 4x512 1.3-2.0x faster than
 * aa_cpu_item, d13 to d200, fp32 and fp16, Zen 5 VM), and all of a short
 * sequence's tokens against nh kv heads (decode in fp32, or a head_dim the
 * fused path does not take). */
void aa_cpu_item_block(const aa_cpu_job *job, float *restrict ws, int s, int g, int t0, int nq) {
  aa_cpu_item_t(job, ws, s, g, t0, nq);
}
void aa_cpu_item_heads(const aa_cpu_job *job, float *restrict ws, int s, int g0, int nh, int nq) {
  aa_cpu_item(job, ws, s, g0, nh, 0, nq);
}
