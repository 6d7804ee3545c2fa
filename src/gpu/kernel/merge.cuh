/* merge.cuh: the split-KV merge inside the attention kernel. The segments of
 * a program write fp32 partials, count their arrivals on a counter in the
 * workspace, and the last to arrive merges every segment's rows in segment
 * order and writes out and lse: one launch per call, the same bits whichever
 * segment arrives last (docs/design/decode.md#merging-segments). */
#ifndef ANYATTN_GPU_KERNEL_MERGE_CUH
#define ANYATTN_GPU_KERNEL_MERGE_CUH

#include "scheduler.cuh"

namespace aa {

constexpr int kMergeMaxSplits = 128; /* the launcher never splits wider */

/* ---- one row's merge, by one warp -------------------------------------------------
 * Merges segments [0, S) of a (token, q head) row (its partials at rows
 * prow + s * part_tokens * num_q_heads, its out and lse at row) by their log-sum-exp
 * weights: with M = max(m_s, sink), w_s = l_s 2^(m_s - M), out = vd * sum w_s
 * o_s / (sum w_s + 2^(sink - M)) and lse = (M + log2 of that denominator) ln 2.
 * Segments that saw no key (m_s = -inf) weigh nothing; a row with no key
 * anywhere gets 0 / -inf, sinks or not. The merge is latency-bound (a few KB
 * per row), so nothing waits in a chain: each lane issues the (m, l) of its
 * own segments and the partial rows of a whole batch of segments before using
 * any of them. Rows of segments that saw no key were never written (stale
 * bytes): they are read but never enter a sum (a select, not a multiply by 0,
 * so stale NaNs cannot leak). The sums run in segment order, so the result is
 * the same whichever segment merges. s_w: kMergeMaxSplits floats of shared
 * memory for this warp. Every lane of the warp calls it. */
template <typename T, int MAX_DIM>
__device__ __forceinline__ void merge_row(const AttnParams &p, int64_t prow, int64_t row, float sink, float vd,
                                          int S, float *s_w) {
  constexpr int BATCH = 2048 / MAX_DIM < 2 ? 2 : 2048 / MAX_DIM > 16 ? 16 : 2048 / MAX_DIM; /* 64 registers of rows */
  constexpr int PAIRS = (MAX_DIM / 2 + AA_WARP_SIZE - 1) / AA_WARP_SIZE; /* column pairs per lane */
  constexpr int SEGS = (kMergeMaxSplits + AA_WARP_SIZE - 1) / AA_WARP_SIZE; /* segments per lane */
  const int lane = lane_id();
  const int64_t seg_rows = (int64_t)p.part_tokens * p.num_q_heads;
  const int pairs = p.head_dim / 2;
  float m_seg[SEGS], w_seg[SEGS];
#pragma unroll
  for (int i = 0; i < SEGS; i++) {
    const int s = lane + i * AA_WARP_SIZE;
    const float2 ml = s < S ? load_fresh(p.part_ml + s * seg_rows + prow) : make_float2(-INFINITY, 0.0f);
    m_seg[i] = ml.x;
    w_seg[i] = ml.y;
  }
  float2 acc[PAIRS];
#pragma unroll
  for (int k = 0; k < PAIRS; k++) acc[k] = make_float2(0.0f, 0.0f);
  float2 v[BATCH][PAIRS];
  auto load_batch = [&](int s0) {
#pragma unroll
    for (int u = 0; u < BATCH; u++) {
      const int s = s0 + u;
      const float2 *o = reinterpret_cast<const float2 *>(p.part_o + (s * seg_rows + prow) * p.head_dim);
#pragma unroll
      for (int k = 0; k < PAIRS; k++) {
        const int c = lane + k * AA_WARP_SIZE;
        v[u][k] = (s < S && c < pairs) ? load_fresh(o + c) : make_float2(0.0f, 0.0f);
      }
    }
  };
  load_batch(0); /* in flight together with the (m, l) loads */
  float M = -INFINITY, L = 0.0f;
#pragma unroll
  for (int i = 0; i < SEGS; i++) M = fmax_nan(M, m_seg[i]);
  M = warp_allreduce_max(M);
  const bool any = M != -INFINITY; /* some segment saw a key (decided before the sink enters) */
  M = fmax_nan(M, sink);
#pragma unroll
  for (int i = 0; i < SEGS; i++) { /* segments that saw no key weigh nothing */
    w_seg[i] = m_seg[i] == -INFINITY ? 0.0f : w_seg[i] * fast_exp2(m_seg[i] - M);
    L += w_seg[i];
  }
  L = warp_allreduce_sum(L);
  /* The weights go through shared memory: the batch loop indexes them by a
   * run-time segment number, which registers cannot hold without local memory. */
#pragma unroll
  for (int i = 0; i < SEGS; i++)
    if (lane + i * AA_WARP_SIZE < S) s_w[lane + i * AA_WARP_SIZE] = w_seg[i];
  warp_sync();
  for (int s0 = 0;;) {
#pragma unroll
    for (int u = 0; u < BATCH; u++) {
      const float w = s0 + u < S ? s_w[s0 + u] : 0.0f;
      if (w != 0.0f) {
#pragma unroll
        for (int k = 0; k < PAIRS; k++) {
          acc[k].x = fmaf(w, v[u][k].x, acc[k].x);
          acc[k].y = fmaf(w, v[u][k].y, acc[k].y);
        }
      }
    }
    s0 += BATCH;
    if (s0 >= S) break;
    load_batch(s0);
  }
  warp_sync(); /* s_w is read: the warp's next row may overwrite it */
  if (any && sink != -INFINITY) L += fast_exp2(sink - M);
  const float f = any ? fast_rcp(L) * vd : 0.0f; /* L >= 1 when any; vd: fp8 caches' v_descale, once, here */
  uint32_t *out = reinterpret_cast<uint32_t *>(static_cast<T *>(p.out) + row * p.head_dim);
#pragma unroll
  for (int i = 0; i < PAIRS; i++) {
    const int c = lane + i * AA_WARP_SIZE;
    if (c < pairs) out[c] = pack2<T>(acc[i].x * f, acc[i].y * f);
  }
  if (p.lse && lane == 0) p.lse[row] = any ? (M + __log2f(L)) * kLn2 : -INFINITY;
}

/* ---- the last arrival ---------------------------------------------------------------
 * Called by every thread of a split segment once its partial rows are
 * written (or its empty partial). After a block barrier, one thread counts
 * the arrival with an acquire-release atomic at device scope (the barrier
 * makes its release cover every thread's stores) on the program's
 * counter (p.counters[ptok0 * hprogs + hprog]: a Q block with work has a first
 * token row of its own, so programs with work never share one; every call leaves
 * it at 0, arrive_counter wrapping at S - 1). The segment that sees S - 1 is
 * the last: its warps merge the program's valid rows, one row per warp at a
 * time. The counters are touched only after grid_dependency_wait, so a call
 * launched early under programmatic dependent launch cannot meet the previous
 * call's counts. smem: the kernel's shared memory, free once the epilogue has
 * run (its last reads precede the first barrier here). */
template <typename T, class S>
__device__ __forceinline__ void merge_if_last(const AttnParams &p, const Program<S> &g, unsigned char *smem) {
  constexpr int WARPS = S::THREADS / AA_WARP_SIZE;
  static_assert(S::SMEM_BYTES >= 64 + (size_t)WARPS * kMergeMaxSplits * 4, "the merge's scratch fits the tile's shared memory");
  int *flag = reinterpret_cast<int *>(smem);
  float *s_w = reinterpret_cast<float *>(smem + 64) + g.warp * kMergeMaxSplits;
  program_sync<S>(); /* every thread's partial stores precede thread 0's release (cumulative) */
  if (g.tid == 0) {
    const unsigned last = (unsigned)p.num_splits - 1;
    *flag = arrive_counter(p.counters + ((int64_t)g.ptok0 * p.hprogs + g.hprog), last) == last;
  }
  program_sync<S>(); /* thread 0's acquire precedes every thread's partial loads */
  if (!*flag) return;
  const float vd = S::DESCALE ? descale_of(p, p.v_descale, g.w.seq, g.kvh) : 1.0f;
  for (int r = g.warp; r < S::BM; r += WARPS) {
    if (!g.row_valid(r)) continue; /* the same for the whole warp */
    const float sink = p.sinks ? vec_at(p.sinks, p.sinks_type, g.row_head(r)) * kLog2e : -INFINITY;
    merge_row<T, S::HD>(p, g.part_row(r, 0), g.row_offset(r), sink, vd, g.s_eff, s_w);
  }
}

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_MERGE_CUH */
