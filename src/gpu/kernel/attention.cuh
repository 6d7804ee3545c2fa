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
 * attn_tc_kernel runs one tile (the two-warpgroup one as a persistent
 * program); attn_roles_kernel two in one grid (mixed batches: decode
 * sequences on a decode tile, the rest on a prefill tile).
 * f32.cuh (fp32) is a kernel of its own. */
#ifndef ANYATTN_GPU_KERNEL_ATTENTION_CUH
#define ANYATTN_GPU_KERNEL_ATTENTION_CUH

#include "epilogue.cuh"
#include "f32.cuh"
#include "mainloop.cuh"
#include "mainloop_sm90.cuh"
#include "merge.cuh"

namespace aa {

/* One program of shape S on p: the work search (find, or find_seq for the
 * decode role of a role launch), the mainloop, the epilogue and the split
 * merge. Every thread of the block calls it. */
template <typename T, class S>
__device__ __forceinline__ void attend(const AttnParams &p, Program<S> &g, unsigned char *smem, bool decode_role) {
  constexpr bool PP = PassCaps<S>::PP;
  const SmemTiles<T, S> sm(smem);
  /* Launched with programmatic dependent launch after another kernel: wait,
   * before any input is read, for it to finish (a no-op otherwise). Only the
   * parameters are read before. */
  KvBoxes<T, S>::prefetch_maps(p);
  /* With p.early_reads the metadata is read before the wait too, and the
   * mainloop may start the first K/V tiles (mainloop.cuh); the two-warpgroup
   * prefill tile always waits first. */
  const bool early = !PP && p.early_reads;
  if (!early) grid_dependency_wait();
  if constexpr (PP) PipelinedTile<T, S>::init_barriers(sm);
  if (!(decode_role ? g.find_seq() : g.find(sm.meta))) return;
  g.map();
  if (g.split) {
    g.cut_segment();
    if (g.ntiles == 0 && !g.cl) { /* nothing here: an empty partial, which the merge skips */
      if (early) grid_dependency_wait(); /* the workspace is written after the wait only */
      write_empty_partial(p, g);
      merge_if_last<T, S>(p, g, smem);
      return;
    }
  }

  OnlineSoftmax<S> sx;
  FragC acc[S::DK];
  if constexpr (PP) {
    load_q(p, g, sm);
    mainloop_sm90(p, g, sm, sx, acc);
  } else {
    mainloop(p, g, sm, sx, acc, early);
  }
  async_wait<0>();
  if (g.split) grid_dependents_launch(); /* the next kernel may start launching; it waits for our writes */
  block_sync();
  Epilogue<T, S>(p, g, smem).run(sx, acc);
  if (g.split && !g.cl) merge_if_last<T, S>(p, g, smem);
}

/* Work item of this persistent program in round k of a launch of `items`
 * items, or -1 past them: rounds of gridDim.x items, taken in block order
 * in even rounds and in reverse in odd ones. Items come longest first
 * (Program), so a program that took one of a round's longest takes one of
 * the next round's shortest: in block order every round, program 0 would
 * take the longest item of every round (16x1024 causal on 132 programs:
 * 1.19x slower than one program per item, 1x8192 1.06x). */
__device__ __forceinline__ int round_item(int k, int items) {
  const long long g = gridDim.x, base = (long long)k * g;
  const long long b = base + ((k & 1) ? g - 1 - blockIdx.x : blockIdx.x);
  return b < items ? (int)b : -1;
}

/* The next work item of a persistent program from round k on: found, mapped
 * and cut into g, k at its round (true), or none left. Split segments with
 * no tile write their empty partial on the way. Every thread calls it;
 * shared memory must be free (the partials' merge uses it). */
template <typename T, class S>
__device__ __forceinline__ bool next_item(const AttnParams &p, Program<S> &g, int &k, int items, const SmemTiles<T, S> &sm,
                                          unsigned char *smem) {
  for (;; k++) {
    const int bx = round_item(k, items);
    if (bx < 0) return false;
    Program<S> c(p, bx);
    if (!c.find(sm.meta)) continue;
    c.map(opaque_tid());
    if (c.split) {
      c.cut_segment();
      if (c.ntiles == 0 && !c.cl) {
        write_empty_partial(p, c);
        merge_if_last<T, S>(p, c, smem);
        block_sync();
        continue;
      }
    }
    g.take(c);
    return true;
  }
}

/* The two-warpgroup tile as a persistent program: it takes work items
 * round by round (round_item) in one loop, so no program exits and starts between items: an item's rows
 * leave straight from registers (store_rows, no barrier) and the next
 * item's search and copies follow at once
 * (docs/design/prefill.md#persistent-programs). The ring and its mbarriers
 * carry over from item to item (PipelinedTile::Carry). Split items write
 * their partial through shared memory before the next item loads. A grid of
 * one program per item runs each once, as attend() would. Only the ring's
 * position and the item index cross the loop's back edge, and the rows'
 * thread mapping is recomputed per item (opaque_tid): held across it, ptxas
 * spilled at 255 registers. */
template <typename T, class S>
__device__ __forceinline__ void attend_persistent(const AttnParams &p, unsigned char *smem) {
  const SmemTiles<T, S> sm(smem);
  KvBoxes<T, S>::prefetch_maps(p);
  grid_dependency_wait();
  PipelinedTile<T, S>::init_barriers(sm);
  const int items = p.num_qblocks * p.hprogs; /* the host checks it is an int */
  typename PipelinedTile<T, S>::Carry cy = {0, 0, 0u};
  for (int k = 0;; k++) {
    Program<S> g(p, (int)blockIdx.x);
    if (!next_item<T, S>(p, g, k, items, sm, smem)) return;
    OnlineSoftmax<S> sx;
    FragC acc[S::DK];
    {
      PipelinedTile<T, S> pt(p, g, sm);
      pt.resume(cy);
      load_q(p, g, sm);
      pt.prologue();
      mainloop_sm90_run(pt, p, g, sm, sx, acc);
      cy = pt.carry();
    }
    async_wait<0>();
    fence_proxy_async_smem(); /* the tiles' reads, before the next item's copies and boxes refill them */
    block_sync();
    if (g.split) {
      grid_dependents_launch();
      Epilogue<T, S>(p, g, smem).run(sx, acc);
      if (!g.cl) merge_if_last<T, S>(p, g, smem);
      block_sync();
    } else {
      store_rows<T, S>(p, g, sx, acc);
    }
  }
}

/* FP8 = 1: the caches hold E4M3 codes (shape.cuh); q and out are T. */
template <typename T, int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES, int FP8>
__global__ void __launch_bounds__(WARPS *AA_WARP_SIZE,
                                  (TileShape<HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, FP8>::MIN_BLOCKS))
    attn_tc_kernel(const AA_GRID_CONSTANT AttnParams p) {
  using S = TileShape<HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, FP8>;
  extern __shared__ __align__(16) unsigned char smem[];
  if constexpr (PassCaps<S>::PP && S::PERSISTENT) {
    attend_persistent<T, S>(p, smem);
  } else {
    Program<S> g(p);
    attend<T, S>(p, g, smem, false);
  }
}

/* A role pair's launch (src/choose/configs.h, docs/design/prefill.md#mixed-batches):
 * one grid, the decode role's programs first (sequences of at most one Q
 * block of its tokens, on the decode tile, split into segments), then the
 * prefill role's (the longer sequences, on the prefill tile, longest first).
 * Both tiles have the same threads; shared memory is the larger one's. */
template <typename T, int HEAD_DIM, int P_BM, int P_BN, int P_W, int P_S, int D_BM, int D_BN, int D_W, int D_S,
          int FP8>
__global__ void __launch_bounds__(P_W *AA_WARP_SIZE, 1) attn_roles_kernel(const AA_GRID_CONSTANT RoleParams rp) {
  static_assert(P_W == D_W, "the two tiles of a role pair have the same warps");
  using SP = TileShape<HEAD_DIM, P_BM, P_BN, P_W, P_S, FP8>;
  using SD = TileShape<HEAD_DIM, D_BM, D_BN, D_W, D_S, FP8>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int bx = (int)blockIdx.x;
  if (bx < rp.dec_programs) {
    Program<SD> g(rp.dec, bx, typename Program<SD>::DecodeRole());
    attend<T, SD>(rp.dec, g, smem, true);
  } else {
    Program<SP> g(rp.pre, bx - rp.dec_programs);
    attend<T, SP>(rp.pre, g, smem, false);
  }
}

typedef void (*KernelFn)(AttnParams);
typedef void (*KernelF32Fn)(AttnParams, int);
typedef void (*RolesFn)(RoleParams);

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_ATTENTION_CUH */
