/* attention.cuh: the paged-attention kernel, written once for every GPU vendor,
 * composed of its parts. One program = a Q block (BLOCK_Q query tokens x the q
 * heads of one GQA group, BLOCK_M rows) against the paged K/V of its sequence,
 * tile by tile, with an online softmax:
 *   scheduler.cuh      which (sequence, Q block, kv head, segment) the program takes
 *   mainloop.cuh       the K/V ring and the products of every tile but one
 *   mainloop_sm90.cuh  the two-warpgroup wgmma tile (sm_90a)
 *   epilogue.cuh       the warps' merge; out and lse, a partial, or the cluster's merge
 *   merge.cuh          split-KV segments: the last to arrive merges the partials
 * with shape.cuh (the tile's compile-time shape), kv_load.cuh, products.cuh and
 * softmax.cuh beneath them. Vendor specifics live in src/gpu/vendor/ only.
 * f32.cuh (fp32) is a kernel of its own. */
#ifndef ANYATTN_GPU_KERNEL_ATTENTION_CUH
#define ANYATTN_GPU_KERNEL_ATTENTION_CUH

#include "epilogue.cuh"
#include "f32.cuh"
#include "mainloop.cuh"
#include "mainloop_sm90.cuh"
#include "merge.cuh"

namespace aa {

/* Q block -> shared memory, as the oldest cp.async group; rows past the
 * block's tokens or heads, and columns from p.head_dim on, are zero. Swizzled
 * like K when Q K^T runs on wgmma (Q is then its A operand in shared memory).
 * Two copies of the loop, the compiled head dim's with a constant row stride:
 * a run-time one costs the decode tiles registers they do not have. */
template <typename T, class S, bool PADDED>
__device__ __forceinline__ void load_q_rows(const AttnParams &p, const Program<S> &g, const SmemTiles<T, S> &sm) {
  constexpr int CH = S::CHUNKS, QL = (S::BM * CH + S::THREADS - 1) / S::THREADS;
  const T *q = static_cast<const T *>(p.q);
  const int hd = PADDED ? p.head_dim : S::HD, nch = hd >> 3; /* 16-byte chunks of a q row */
#pragma unroll
  for (int k = 0; k < QL; k++) {
    const int i = g.tid + k * S::THREADS, r = i / CH, c = i % CH;
    if ((S::BM * CH) % S::THREADS == 0 || i < S::BM * CH) {
      const bool ok = (!PADDED || c < nch) && g.row_valid(r);
      unsigned char *dq = reinterpret_cast<unsigned char *>(sm.q) +
                          (PassCaps<S>::WG ? kv_smem_offset<S::BM>(r, c) : (uint32_t)((r * S::ROW + c * 8) * sizeof(T)));
      async_copy16(dq, ok ? q + g.row_offset(r) * hd + c * 8 : q, ok);
    }
  }
}
template <typename T, class S>
__device__ __forceinline__ void load_q(const AttnParams &p, const Program<S> &g, const SmemTiles<T, S> &sm) {
  if (p.head_dim == S::HD) load_q_rows<T, S, false>(p, g, sm);
  else load_q_rows<T, S, true>(p, g, sm);
  async_commit();
}

/* FP8 = 1: the caches hold E4M3 codes (shape.cuh); q and out are T. */
template <typename T, int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES, int FP8>
__global__ void __launch_bounds__(WARPS *AA_WARP_SIZE,
                                  (TileShape<HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, FP8>::MIN_BLOCKS))
    attn_tc_kernel(const AA_GRID_CONSTANT AttnParams p) {
  using S = TileShape<HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, FP8>;
  constexpr bool PP = PassCaps<S>::PP;
  extern __shared__ __align__(16) unsigned char smem[];
  const SmemTiles<T, S> sm(smem);
  Program<S> g(p);
  /* Launched with programmatic dependent launch after another kernel: wait,
   * before any input is read, for it to finish (a no-op otherwise). Only the
   * parameters are read before. */
  KvBoxes<T, S>::prefetch_maps(p);
  grid_dependency_wait();
  if constexpr (PP) PipelinedTile<T, S>::init_barriers(sm);
  if (!g.find(sm.meta)) return;
  g.map();
  if (g.split) {
    g.cut_segment();
    if (g.ntiles == 0 && !g.cl) { /* nothing here: an empty partial, which the merge skips */
      write_empty_partial(p, g);
      merge_if_last<T, S>(p, g, smem);
      return;
    }
  }
  load_q(p, g, sm);

  OnlineSoftmax<S> sx;
  FragC acc[S::DK];
  if constexpr (PP) mainloop_sm90(p, g, sm, sx, acc);
  else mainloop(p, g, sm, sx, acc);
  async_wait<0>();
  if (g.split) grid_dependents_launch(); /* the next kernel may start launching; it waits for our writes */
  block_sync();
  Epilogue<T, S>(p, g, smem).run(sx, acc);
  if (g.split && !g.cl) merge_if_last<T, S>(p, g, smem);
}

typedef void (*KernelFn)(AttnParams);
typedef void (*KernelF32Fn)(AttnParams, int);

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_ATTENTION_CUH */
