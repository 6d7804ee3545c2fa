/* mainloop.cuh: the KV loop of every tile but the two-warpgroup one, on every
 * vendor. A STAGES-deep ring of K/V tiles in shared memory, filled by 16-byte
 * copies (or, on sm_90 for one-wave decode launches, TMA boxes: kv_load.cuh)
 * while the warps compute S = Q K^T, the online softmax and O += P V of the
 * tile before (products.cuh, softmax.cuh). Warps split a tile's keys when the
 * shape has more warps than row bands (TileShape::WN > 1); the epilogue merges
 * them. Q arrives as the oldest cp.async group, or under early reads after
 * the first tiles (below). */
#ifndef ANYATTN_GPU_KERNEL_MAINLOOP_CUH
#define ANYATTN_GPU_KERNEL_MAINLOOP_CUH

#include "kv_load.cuh"
#include "products.cuh"
#include "softmax.cuh"

namespace aa {

/* early (p.early_reads, the caller's batch->prior_writes promise): when the
 * first ST - 1 tiles all lie below the newest q_len keys (the only cache rows
 * the work before the call may write), their page ids are read and their
 * copies issued before grid_dependency_wait, and Q (which that work may
 * write) after it, as the newest cp.async group; else the wait comes first,
 * then Q as the oldest group, then the tiles. */
template <typename T, class S>
__device__ __forceinline__ void mainloop(const AttnParams &p, const Program<S> &g, const SmemTiles<T, S> &sm,
                                         OnlineSoftmax<S> &sx, FragC (&acc)[S::DK], bool early) {
  using C = PassCaps<S>;
  using Copies = KvCopies<T, S, C::WG>;
  constexpr int ST = S::PIPE_STAGES;
  const KvPages<T, S> pages(p, g);
  const Copies copies{pages, sm};
  KvBoxes<T, S> boxes(pages, sm);
  int pg_next[Copies::ROWS_PT];
  const bool pre = early && min(g.hi, g.n_begin + (ST - 1) * S::BN) <= g.w.kv_len - g.w.q_len;
  if (!pre) {
    if (early) grid_dependency_wait();
    load_q(p, g, sm);
  }
  if (boxes.on) boxes.prologue();
  else copies.prologue();
  if (pre) {
    grid_dependency_wait();
    load_q(p, g, sm);
  }

  sx.rows(p, g);
  if (pre) async_wait<0>(); /* Q is the newest group */
  else async_wait<ST - 1>(); /* the Q group is the oldest */
  block_sync();
  if constexpr (S::FRAG8) sx.kd *= QToF16<T>::template run<S, false>(sm.q, g.tid);
  const T *sQw = sm.q + g.wm * 16 * S::ROW;
  const aa_f16 *sQh = reinterpret_cast<const aa_f16 *>(sQw); /* FRAG8: Q in f16 */
  FragA qf[C::QREG ? S::DK : 1];
  if constexpr (C::QREG && S::FRAG8) {
    load_q_codes<S, false>(qf, sQh);
  } else if constexpr (C::QREG) {
#pragma unroll
    for (int kk = 0; kk < S::DK; kk++) load_a(qf[kk], [&](int r, int c) { return sQw + r * S::ROW + kk * 16 + c; });
  }
  const bool fnuz = S::KV8 && p.fp8_fnuz;
#pragma unroll
  for (int d = 0; d < S::DK; d++) zero(acc[d]);
  sx.reset();

  for (int it = 0; it < g.ntiles; it++) {
    const int nx = it + ST - 1; /* the tile whose loads start now */
    if (boxes.on) boxes.wait_tile(it, nx);
    else copies.wait_tile(nx, pg_next);
    const int n0 = g.n_begin + it * S::BN;
    FragC s[S::NK];
    FragA pa[S::NK];
    if constexpr (S::FRAG8) {
      const unsigned char *tk = sm.k8 + (it % ST) * S::K8_TILE_BYTES, *tv = sm.v8 + (it % ST) * S::V8_TILE_BYTES;
      const int r0 = g.wn * S::KW; /* the warp's keys */
      if (fnuz) tile_scores_codes<S, true, C::QREG>(s, qf, sQh, tk, r0);
      else tile_scores_codes<S, false, C::QREG>(s, qf, sQh, tk, r0);
      sx.template tile<aa_f16, kCodePShift>(p, g, n0, s, pa, acc);
      if (fnuz) tile_pv_codes<S, true>(acc, pa, tv, r0);
      else tile_pv_codes<S, false>(acc, pa, tv, r0);
    } else {
      const int t16 = it % C::TILES16; /* FP8: the one converted tile */
      const T *tk = sm.k + t16 * S::TILE_ELEMS + g.wn * S::KW * S::ROW;
      const T *tv = sm.v + t16 * S::TILE_ELEMS + g.wn * S::KW * S::ROW;
      tile_scores<T, S, C::WG, C::QREG>(s, qf, sQw, smem_u32(sm.q), (g.warp >> 2) * 64, tk);
      sx.template tile<T>(p, g, n0, s, pa, acc);
      tile_pv<T, S, C::WG>(acc, pa, tv);
    }
    if (!boxes.on) copies.store_rows((nx + 1) & 1, g.n_begin + (nx + 1) * S::BN, pg_next);
    block_sync(); /* the stage is refilled next iteration */
  }
  /* FRAG8: the sums back to their values; acc stays 2^kCodePShift times its
   * value and in the code column order, which the epilogue's store undoes
   * (epilogue.cuh, FRAG8) */
  if constexpr (S::FRAG8) sx.template unshift_sums<kCodePShift>();
}

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_MAINLOOP_CUH */
