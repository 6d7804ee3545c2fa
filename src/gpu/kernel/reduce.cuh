/* reduce.cuh: the split-KV merge as a kernel of its own, for segments that do
 * not merge inside a cluster: one warp per (token, q head) row weighs the
 * segments' fp32 partials by their log-sum-exp and writes out and lse. */
#ifndef ANYATTN_GPU_KERNEL_REDUCE_CUH
#define ANYATTN_GPU_KERNEL_REDUCE_CUH

#include "params.cuh"

namespace aa {

/* ---- split-KV reduce: one warp per (token, q head) row ------------------------------
 * Merges the num_splits partials of a row by their log-sum-exp weights:
 * with M = max(m_s, sink), w_s = l_s 2^(m_s - M), out = sum w_s o_s / (sum w_s
 * + 2^(sink - M)) and lse = (M + log2 of that denominator) ln 2. Segments that
 * saw no key (m_s = -inf) weigh nothing and their o_s is never read; a row
 * with no key anywhere gets 0 / -inf, sinks or not. Rows past
 * cu_seqlens_q[num_seqs] are padding: never written. */
constexpr int kReduceWarps = 4;
constexpr int kReduceMaxSplits = 128; /* the launcher never splits wider */

/* The merge is latency-bound (a few KB per row), so nothing waits in a chain.
 * Before griddepcontrol.wait it reads only what the partials' kernel does not
 * write (cu_seqlens_q, sinks): that kernel was itself stream-ordered after
 * their producers. After it, one round trip per kReduceBatch segments: each
 * lane issues the (m, l) of its own segments and the partial rows of the
 * whole batch before using any of them. Rows of segments that saw no key were
 * never written (their bytes are stale): they are read but never enter a sum
 * (a select, not a multiply by 0, so stale NaNs cannot leak). Two builds per
 * dtype: head dims up to 256 (16 segments a batch) and up to 512 (8, so the
 * batch's registers stay the same). */
template <typename T, int MAX_DIM>
__global__ void __launch_bounds__(kReduceWarps *AA_WARP_SIZE) attn_split_reduce_kernel(const AttnParams p, int head_dim) {
  constexpr int kReduceBatch = 16 * 256 / MAX_DIM;
  constexpr int PAIRS = (MAX_DIM / 2 + AA_WARP_SIZE - 1) / AA_WARP_SIZE; /* column pairs per lane */
  constexpr int SEGS = (kReduceMaxSplits + AA_WARP_SIZE - 1) / AA_WARP_SIZE;   /* segments per lane */
  const int warp = threadIdx.x / AA_WARP_SIZE, lane = lane_id();
  const int64_t row = (int64_t)blockIdx.x * kReduceWarps + warp;
  const bool live = row < (int64_t)p.cu_seqlens_q[p.num_seqs] * p.num_q_heads; /* padding rows: untouched */
  /* row is small (fast_div needs < 2^31): a split run holds at most
   * plan->split_rows tokens (kMaxSplits x 8) */
  const int h = (int)row - fast_div((int)row, p.qh_magic, p.qh_shift) * p.num_q_heads;
  const float sink = (live && p.sinks) ? p.sinks[h] * kLog2e : -INFINITY;
  grid_dependents_launch(); /* a kernel after this one may launch; it waits for our writes */
  grid_dependency_wait();   /* the partials are complete and visible */
  if (!live) return;        /* whole warps: no barrier below */
  const int64_t seg_rows = (int64_t)p.num_tokens * p.num_q_heads;
  const int S = p.num_splits;
  const int pairs = head_dim / 2;
  float m_seg[SEGS], w_seg[SEGS];
#pragma unroll
  for (int i = 0; i < SEGS; i++) {
    const int s = lane + i * AA_WARP_SIZE;
    const float2 ml = s < S ? p.part_ml[s * seg_rows + row] : make_float2(-INFINITY, 0.0f);
    m_seg[i] = ml.x;
    w_seg[i] = ml.y;
  }
  float2 acc[PAIRS];
#pragma unroll
  for (int k = 0; k < PAIRS; k++) acc[k] = make_float2(0.0f, 0.0f);
  float2 v[kReduceBatch][PAIRS];
  auto load_batch = [&](int s0) {
#pragma unroll
    for (int u = 0; u < kReduceBatch; u++) {
      const int s = s0 + u;
      const float2 *o = reinterpret_cast<const float2 *>(p.part_o + (s * seg_rows + row) * head_dim);
#pragma unroll
      for (int k = 0; k < PAIRS; k++) {
        const int c = lane + k * AA_WARP_SIZE;
        v[u][k] = (s < S && c < pairs) ? o[c] : make_float2(0.0f, 0.0f);
      }
    }
  };
  load_batch(0); /* in flight together with the (m, l) loads */
  float M = -INFINITY, L = 0.0f;
#pragma unroll
  for (int i = 0; i < SEGS; i++) M = fmaxf(M, m_seg[i]);
  M = warp_allreduce_max(M);
  const bool any = M != -INFINITY; /* some segment saw a key (decided before the sink enters) */
  M = fmaxf(M, sink);
#pragma unroll
  for (int i = 0; i < SEGS; i++) { /* segments that saw no key weigh nothing */
    w_seg[i] = m_seg[i] == -INFINITY ? 0.0f : w_seg[i] * fast_exp2(m_seg[i] - M);
    L += w_seg[i];
  }
  L = warp_allreduce_sum(L);
  /* The weights go through shared memory: the batch loop indexes them by a
   * run-time segment number, which registers cannot hold without local memory. */
  __shared__ float s_w[kReduceWarps][kReduceMaxSplits];
#pragma unroll
  for (int i = 0; i < SEGS; i++)
    if (lane + i * AA_WARP_SIZE < S) s_w[warp][lane + i * AA_WARP_SIZE] = w_seg[i];
  warp_sync();
  for (int s0 = 0;;) {
#pragma unroll
    for (int u = 0; u < kReduceBatch; u++) {
      const float w = s0 + u < S ? s_w[warp][s0 + u] : 0.0f;
      if (w != 0.0f) {
#pragma unroll
        for (int k = 0; k < PAIRS; k++) {
          acc[k].x = fmaf(w, v[u][k].x, acc[k].x);
          acc[k].y = fmaf(w, v[u][k].y, acc[k].y);
        }
      }
    }
    s0 += kReduceBatch;
    if (s0 >= S) break;
    load_batch(s0);
  }
  if (any && sink != -INFINITY) L += fast_exp2(sink - M);
  float f = any ? fast_rcp(L) : 0.0f; /* L >= 1 when any */
  if (p.v_descale) { /* FP8 caches: v_descale enters here, once (the partials and the lse exclude it) */
    const int tok = fast_div((int)row, p.qh_magic, p.qh_shift);
    const int seq = p.descale_per_head ? upper_search(p.num_seqs, tok, [&](int i) { return p.cu_seqlens_q[i]; }) : 0;
    f *= descale_of(p, p.v_descale, seq, h / p.group);
  }
  uint32_t *out = reinterpret_cast<uint32_t *>(static_cast<T *>(p.out) + row * head_dim);
#pragma unroll
  for (int i = 0; i < PAIRS; i++) {
    const int c = lane + i * AA_WARP_SIZE;
    if (c < pairs) out[c] = pack2<T>(acc[i].x * f, acc[i].y * f);
  }
  if (p.lse && lane == 0) p.lse[row] = any ? (M + __log2f(L)) * kLn2 : -INFINITY;
}

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_REDUCE_CUH */
