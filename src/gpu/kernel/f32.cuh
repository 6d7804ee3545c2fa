/* f32.cuh: fp32 attention, which has no tensor-core path: a plain CUDA-core
 * kernel, one warp per (token, q head), the keys in warp-wide steps. */
#ifndef ANYATTN_GPU_KERNEL_F32_CUH
#define ANYATTN_GPU_KERNEL_F32_CUH

#include "params.cuh"

namespace aa {

/* ---- fp32: a plain CUDA-core kernel, one warp per (token, q head) ---------------- */
constexpr int kF32Warps = 4;
constexpr int kF32MaxDim = 512; /* any head dim that is a multiple of 4 up to this */

/* A template so that only inst_f32.cu instantiates it. */
template <int kWarps>
__global__ void __launch_bounds__(kWarps *AA_WARP_SIZE) attn_f32_kernel(const AttnParams p, int head_dim) {
  __shared__ float sq[kWarps][kF32MaxDim];
  constexpr int PER_LANE = (kF32MaxDim + AA_WARP_SIZE - 1) / AA_WARP_SIZE;
  const int warp = threadIdx.x / AA_WARP_SIZE, lane = lane_id();
  const int64_t row = (int64_t)blockIdx.x * kWarps + warp;
  if (row >= (int64_t)p.num_tokens * p.num_q_heads) return; /* whole warps only: no block barrier below */
  const int tok = (int)(row / p.num_q_heads), h = (int)(row % p.num_q_heads);
  const int kvh = h / p.group;
  const int32_t *cu = p.cu_seqlens_q;
  if (tok >= cu[p.num_seqs]) return; /* padding rows are never written */
  const int s = upper_search(p.num_seqs, tok, [&](int i) { return cu[i]; });
  const int q_len = cu[s + 1] - cu[s], kv_len = p.seq_lens_k[s];
  const int pos = (p.q_pos ? p.q_pos[s] : kv_len - q_len) + (tok - cu[s]);
  const int D = head_dim;

  const float *q = static_cast<const float *>(p.q) + row * D;
  for (int d = lane; d < D; d += AA_WARP_SIZE) sq[warp][d] = q[d];
  __syncwarp();

  int lo, hi;
  kv_range(p, pos, pos, kv_len, lo, hi);
  const int32_t *bt_row = p.block_table + (int64_t)s * p.bt_stride;
  const float *kc = static_cast<const float *>(p.k) + (int64_t)kvh * p.k_sh;
  const float *vc = static_cast<const float *>(p.v) + (int64_t)kvh * p.v_sh;
  const float slope = p.alibi ? vec_at(p.alibi, p.alibi_type, h) * kLog2e : 0.0f;

  float acc[PER_LANE];
#pragma unroll
  for (int i = 0; i < PER_LANE; i++) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int base = lo; base < hi; base += AA_WARP_SIZE) {
    const int j = base + lane;
    float x = -INFINITY;
    if (j < hi && key_visible(p, j, pos, kv_len)) {
      const float4 *kr = reinterpret_cast<const float4 *>(kc + page_row(p, bt_row, j, p.k_sb, p.k_st));
      float dot = 0.0f;
      for (int d4 = 0; d4 < D / 4; d4++) {
        const float4 k4 = kr[d4];
        dot += sq[warp][4 * d4] * k4.x + sq[warp][4 * d4 + 1] * k4.y + sq[warp][4 * d4 + 2] * k4.z +
               sq[warp][4 * d4 + 3] * k4.w;
      }
      x = score_log2(p, dot, slope, j, pos);
    }
    const float m_new = fmax_nan(m, warp_allreduce_max(x));
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = exp2f(m - m_use);
    const float pj = exp2f(x - m_use);
    l = l * alpha + warp_allreduce_sum(pj);
    m = m_new;
#pragma unroll
    for (int i = 0; i < PER_LANE; i++) acc[i] *= alpha;
    const int nk = min(AA_WARP_SIZE, hi - base);
    for (int k = 0; k < nk; k++) {
      const float pk = warp_broadcast(pj, k);
      if (pk == 0.0f) continue; /* same on every lane */
      const float *vr = vc + page_row(p, bt_row, base + k, p.v_sb, p.v_st);
#pragma unroll
      for (int i = 0; i < PER_LANE; i++) {
        const int d = lane + i * AA_WARP_SIZE;
        if (d < D) acc[i] += pk * vr[d];
      }
    }
  }
  const bool any = m != -INFINITY;
  float M = m;
  const float sink = p.sinks ? vec_at(p.sinks, p.sinks_type, h) * kLog2e : -INFINITY;
  if (p.sinks) M = fmax_nan(M, sink);
  float L = l * exp2f(m - M);
  if (p.sinks) L += exp2f(sink - M);
  const float f = any ? exp2f(m - M) / L : 0.0f;
  float *out = static_cast<float *>(p.out) + row * D;
#pragma unroll
  for (int i = 0; i < PER_LANE; i++) {
    const int d = lane + i * AA_WARP_SIZE;
    if (d < D) out[d] = acc[i] * f;
  }
  if (p.lse && lane == 0) p.lse[row] = any ? (M + log2f(L)) * kLn2 : -INFINITY;
}

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_F32_CUH */
