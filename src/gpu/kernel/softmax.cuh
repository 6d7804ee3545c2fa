/* softmax.cuh: the online softmax of a program's rows (FlashAttention style):
 * scores in the log2 domain, masked only on tiles that cross a row's visible
 * range, running maxima and sums per row, and the output rescaled to each new
 * maximum. The accumulators and state live in registers in the FragC layout of
 * the tile layer; the epilogue (epilogue.cuh) merges and normalises them. */
#ifndef ANYATTN_GPU_KERNEL_SOFTMAX_CUH
#define ANYATTN_GPU_KERNEL_SOFTMAX_CUH

#include "scheduler.cuh"

namespace aa {

/* Scores of one S tile in the log2 domain, masked where needed. The two
 * uniform choices (plain scaling or softcap/ALiBi; masked or not) are
 * template arguments so each loop is straight-line code; the kernel branches
 * once per tile between them. jlo/jhi: each row slot's visible key range. */
template <bool PLAIN, bool MASK, int LIVE, int NK>
__device__ __forceinline__ void score_tile(const AttnParams &p, FragC (&s)[NK], int nw0, const int *jlo,
                                           const int *jhi, const float *slope, const int *pos, float *mx) {
#pragma unroll
  for (int n = 0; n < NK; n++) {
#pragma unroll
    for (int e = 0; e < kFragCElems; e++) {
      const int sl = frag_c_slot(e);
      if (sl >= LIVE) continue; /* no valid row in this slot (OnlineSoftmax::live) */
      const int j = nw0 + n * 16 + frag_c_col(e);
      float x; /* PLAIN: left unscaled, the scale is folded into the exponent */
      if constexpr (PLAIN) x = s[n].x[e];
      else x = score_log2(p, s[n].x[e], slope[sl], j, pos[sl]);
      if constexpr (MASK) x = (j >= jlo[sl] && j < jhi[sl]) ? x : -INFINITY;
      s[n].x[e] = x;
      mx[sl] = fmax_nan(mx[sl], x);
    }
  }
}

/* Program row r's position, visible keys [jlo, jhi) and ALiBi slope (log2 domain); a row past
 * the block's tokens or heads takes the last valid token's and head's. */
template <class S>
__device__ __forceinline__ void row_keys(const AttnParams &p, const Program<S> &g, int r, int &pos, int &jlo, int &jhi,
                                         float &slope) {
  const int rt = g.row_tok(r);
  const int t = min(rt, g.w.n_tok - 1);
  const int h = g.head0 + min(r - rt * p.gh, g.heads_here - 1);
  pos = g.pos_base + t;
  kv_range(p, pos, pos, g.w.kv_len, jlo, jhi);
  slope = p.alibi ? vec_at(p.alibi, p.alibi_type, h) * kLog2e : 0.0f;
}

/* The softmax state of this lane's kFragCSlots rows. */
template <class S>
struct OnlineSoftmax {
  int pos[kFragCSlots], jlo[kFragCSlots], jhi[kFragCSlots]; /* position and visible keys of each row */
  float slope[kFragCSlots];                                 /* ALiBi slope, log2 domain */
  bool plain;                                               /* no softcap, no ALiBi: scale folded in */
  float kd;                                                 /* k_descale of the program's keys (S::DESCALE) */
  float m_run[kFragCSlots], l_run[kFragCSlots];             /* running max (log2 domain) and sum */
  /* Row slots of this warp that hold a valid row: the first `live` (the
   * others' rows are all past the block's tokens or heads). A decode program
   * of 16 rows at GQA 4 and one token has 4 valid rows, all in the first
   * slot: its tiles then skip the softmax of the second (its P is zero, its
   * state stays empty, and the epilogue writes only valid rows). */
  int live;
  int full_lo, full_hi; /* a warp's keys [nw0, nw0 + KW) need no mask for every row iff full_lo <= nw0 <= full_hi */

  /* Per-lane rows: position, visible range and ALiBi slope of each row slot
   * (rows past the block's tokens or heads take the last valid ones). */
  __device__ __forceinline__ void rows(const AttnParams &p, const Program<S> &g) {
#pragma unroll
    for (int sl = 0; sl < kFragCSlots; sl++)
      row_keys(p, g, g.wm * 16 + frag_c_row(sl), pos[sl], jlo[sl], jhi[sl], slope[sl]);
    live = kFragCSlots;
#pragma unroll
    for (int sl = kFragCSlots - 1; sl > 0; sl--)
      if (live == sl + 1 && !warp_any(g.row_valid(g.wm * 16 + frag_c_row(sl)))) live = sl;
    plain = p.alibi == nullptr && !(p.softcap > 0.0f);
    /* every row sees keys [lo, kv_len), none past the causal or right-window
     * edge of the first token and none before the left-window edge of the
     * last (int64: pos_min + window_right may pass 2^31; both results lie
     * within [-KW, kv_len]) */
    int64_t flo = g.lo, fhi = (int64_t)g.w.kv_len - S::KW;
    if (p.window_left >= 0) flo = max(flo, (int64_t)g.pos_max - p.window_left);
    if (p.causal) fhi = min(fhi, (int64_t)g.pos_min - S::KW + 1);
    else if (p.window_right >= 0) fhi = min(fhi, (int64_t)g.pos_min + p.window_right - S::KW + 1);
    full_lo = (int)flo;
    full_hi = (int)fhi;
    kd = S::DESCALE ? descale_of(p, p.k_descale, g.w.seq, g.kvh) : 1.0f;
  }

  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int sl = 0; sl < kFragCSlots; sl++) {
      m_run[sl] = -INFINITY;
      l_run[sl] = 0.0f;
    }
  }

  /* Scores of tile n0 in s -> P in pa (masks only on tiles that cross a
   * boundary, online softmax), and the output acc rescaled to the new maxima.
   * PSHIFT: P, l_run and so acc come out 2^PSHIFT times their values (P in
   * f16, which is subnormal below 2^-14, keeps its precision 2^PSHIFT times
   * further down); unshift() divides it out after the loop. */
  template <typename T, int PSHIFT = 0>
  __device__ __forceinline__ void tile(const AttnParams &p, const Program<S> &g, int n0, FragC (&s)[S::NK],
                                       FragA (&pa)[S::NK], FragC (&acc)[S::DK]) {
    /* Decode tiles only: the prefill tiles' slots are all live but at a
     * program's last rows, and a second copy of the loop costs them code. */
    if constexpr (S::BM == 16 && kFragCSlots > 1) {
      if (live == 1) {
        tile_live<T, PSHIFT, 1>(p, g, n0, s, pa, acc);
        return;
      }
    }
    tile_live<T, PSHIFT, kFragCSlots>(p, g, n0, s, pa, acc);
  }
  /* tile() over the first LIVE row slots; the others' P is zero. */
  template <typename T, int PSHIFT, int LIVE>
  __device__ __forceinline__ void tile_live(const AttnParams &p, const Program<S> &g, int n0, FragC (&s)[S::NK],
                                            FragA (&pa)[S::NK], FragC (&acc)[S::DK]) {
    float alpha[kFragCSlots];
    weights<PSHIFT, LIVE>(p, g, n0, s, alpha);
    finish<T, LIVE>(s, pa, acc, alpha);
  }
  /* The first half of tile(): scores of tile n0 in s -> the weights
   * 2^(x - max) in s (fp32), running maxima and sums updated, and each row's
   * rescale factor of the output in alpha. Reads no acc and no pa, so the
   * 128-row wgmma tile runs it while its P V products are still in flight
   * (mainloop_sm90.cuh, docs/design/prefill.md#intra-warpgroup-overlap). */
  template <int PSHIFT, int LIVE = kFragCSlots>
  __device__ __forceinline__ void weights(const AttnParams &p, const Program<S> &g, int n0, FragC (&s)[S::NK],
                                          float (&alpha)[kFragCSlots]) {
    const int nw0 = n0 + g.wn * S::KW;
    const bool full = nw0 >= full_lo && nw0 <= full_hi;
    float mx[kFragCSlots];
#pragma unroll
    for (int sl = 0; sl < kFragCSlots; sl++) mx[sl] = -INFINITY;
    /* S::DESCALE: dot products of codes -> of the dequantised keys. A positive
     * k_descale folds into the scale of the plain scores (the maximum
     * commutes with it); otherwise (softcap, ALiBi, a descale <= 0 or NaN)
     * the scores are multiplied. */
    const bool kd_fold = S::DESCALE && plain && kd > 0.0f;
    if constexpr (S::DESCALE) {
      if (!kd_fold) {
#pragma unroll
        for (int n = 0; n < S::NK; n++)
#pragma unroll
          for (int e = 0; e < kFragCElems; e++)
            if (frag_c_slot(e) < LIVE) s[n].x[e] *= kd;
      }
    }
    const float sc = plain ? p.scale_log2 * (kd_fold ? kd : 1.0f) : 1.0f; /* raw dot products -> log2 domain */
    if (plain) {
      if (full) score_tile<true, false, LIVE>(p, s, nw0, jlo, jhi, slope, pos, mx);
      else score_tile<true, true, LIVE>(p, s, nw0, jlo, jhi, slope, pos, mx);
    } else { /* softcap / ALiBi: rare, one masked variant keeps the code small */
      score_tile<false, true, LIVE>(p, s, nw0, jlo, jhi, slope, pos, mx);
    }
    float m_use[kFragCSlots];
#pragma unroll
    for (int sl = 0; sl < LIVE; sl++) {
      const float m_new = fmax_nan(m_run[sl], row_allreduce_max(mx[sl]) * sc); /* sc > 0 keeps the max */
      m_use[sl] = m_new == -INFINITY ? 0.0f : m_new; /* a row with nothing visible yet stays at 0 */
      alpha[sl] = fast_exp2(m_run[sl] - m_use[sl]);
      m_run[sl] = m_new;
      l_run[sl] *= alpha[sl];
    }
#pragma unroll
    for (int n = 0; n < S::NK; n++) {
#pragma unroll
      for (int e = 0; e < kFragCElems; e++) {
        const int sl = frag_c_slot(e);
        if (sl >= LIVE) {
          s[n].x[e] = 0.0f;
          continue;
        }
        const float pe = fast_exp2(fmaf(s[n].x[e], sc, (float)PSHIFT - m_use[sl]));
        s[n].x[e] = pe;
        l_run[sl] += pe;
      }
    }
  }
  /* The second half: the weights in s -> P in pa, and the output acc
   * rescaled by alpha. */
  template <typename T, int LIVE = kFragCSlots>
  __device__ __forceinline__ void finish(FragC (&s)[S::NK], FragA (&pa)[S::NK], FragC (&acc)[S::DK],
                                         const float (&alpha)[kFragCSlots]) {
#pragma unroll
    for (int n = 0; n < S::NK; n++) acc_to_a<T>(pa[n], s[n]);
    /* Decode tiles (16 rows): once the maxima settle every alpha is exactly 1
     * and the rescale is skipped (bit for bit the same), warp-uniformly. On
     * one H200 that took 1-2.5% off fp8 decode and nothing off 16-bit decode;
     * the prefill tiles, where the vote cost ~1%, always rescale
     * (docs/design/layout.md). */
    bool rescale = true;
    if constexpr (S::BM == 16) {
      rescale = false;
#pragma unroll
      for (int sl = 0; sl < LIVE; sl++) rescale |= alpha[sl] != 1.0f;
      rescale = warp_any(rescale);
    }
    if (rescale) {
#pragma unroll
      for (int d = 0; d < S::DK; d++)
#pragma unroll
        for (int e = 0; e < kFragCElems; e++)
          if (frag_c_slot(e) < LIVE) acc[d].x[e] *= alpha[frag_c_slot(e)];
    }
  }
  /* After tiles run with PSHIFT: l_run back to its value (exact: a power of two). */
  template <int PSHIFT>
  __device__ __forceinline__ void unshift_sums() {
    constexpr float f = 1.0f / (float)(1 << PSHIFT);
#pragma unroll
    for (int sl = 0; sl < kFragCSlots; sl++) l_run[sl] *= f;
  }
  /* ... and acc too. */
  template <int PSHIFT>
  __device__ __forceinline__ void unshift(FragC (&acc)[S::DK]) {
    constexpr float f = 1.0f / (float)(1 << PSHIFT);
    unshift_sums<PSHIFT>();
#pragma unroll
    for (int d = 0; d < S::DK; d++)
#pragma unroll
      for (int e = 0; e < kFragCElems; e++) acc[d].x[e] *= f;
  }
};

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_SOFTMAX_CUH */
