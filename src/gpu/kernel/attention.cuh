/* attention.cuh: the paged-attention kernel, written once for every GPU vendor,
 * composed of its parts. One program = a Q block (BLOCK_Q query tokens x the q
 * heads of one GQA group, BLOCK_M rows) against the paged K/V of its sequence,
 * tile by tile, with an online softmax:
 *   scheduler.cuh      which (sequence, Q block, kv head, segment) the program takes
 *   mainloop.cuh       the K/V ring and the products of every tile but one
 *   mainloop_sm90.cuh  the two-warpgroup wgmma tile (sm_90a)
 *   mainloop_ws.cuh    the same with a producer warpgroup (attn_ws_kernel)
 *   epilogue.cuh       the warps' merge; out and lse, a partial, or the cluster's merge
 *   merge.cuh          split-KV segments: the last to arrive merges the partials
 * with shape.cuh (the tile's compile-time shape), kv_load.cuh, products.cuh and
 * softmax.cuh beneath them. Vendor specifics live in src/gpu/vendor/ only.
 * attn_tc_kernel runs one tile; attn_ws_kernel the pipelined tile with a
 * producer warpgroup (unsplit launches over 16-bit caches on sm_90);
 * attn_roles_kernel two tiles in one grid (mixed batches: decode sequences
 * on a decode tile, the rest on a prefill tile).
 * f32.cuh (fp32) is a kernel of its own. */
#ifndef ANYATTN_GPU_KERNEL_ATTENTION_CUH
#define ANYATTN_GPU_KERNEL_ATTENTION_CUH

#include "epilogue.cuh"
#include "f32.cuh"
#include "mainloop.cuh"
#include "mainloop_sm90.cuh"
#include "mainloop_ws.cuh"
#include "merge.cuh"

namespace aa {

/* One program of shape S on p: the work search (find, or find_seq for the
 * decode role of a role launch), the mainloop, the epilogue (unsplit
 * programs of tiles that own their rows: own_rows_epilogue, where OWN_ROWS)
 * and the split merge. Every thread of the block calls it. */
template <typename T, class S, bool OWN_ROWS = kOwnRows<S>>
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
  if constexpr (OWN_ROWS) {
    if (!g.split) {
      own_rows_epilogue<T, S>(p, g, sm, sx, acc);
      return;
    }
  }
  Epilogue<T, S>(p, g, smem).run(sx, acc);
  if (g.split && !g.cl) merge_if_last<T, S>(p, g, smem);
}

/* The programs of one block of the pipelined tile with a producer
 * warpgroup (WsShape, mainloop_ws.cuh). A block per program: all threads
 * search; the producer then copies K and V (and Q, as boxes, where p.q_tma)
 * and exits, the consumers load Q (else), run the loop and write their rows
 * (own_rows_epilogue, epilogue.cuh), or run a decode item's own loop
 * (ws_decode_item, where ws_decode_flag: the consumers decide it here). A
 * persistent launch (PERSIST, where the shape has the second Q tile:
 * kWsPersist) runs ws_produce and ws_consume: program after program, the
 * producer searching each (two kernels: in one, ptxas 13.0 spills the d128
 * one's registers). Unsplit launches only (launch.cu, ws_kernel): split
 * segments write empty partials, merge and meet at cluster barriers as a
 * block of consumers alone, which this kernel is not. */
template <typename T, class S, bool PERSIST>
__device__ __forceinline__ void attend_ws(const AttnParams &p, unsigned char *smem) {
  const SmemTiles<T, S> sm(smem);
  KvBoxes<T, S>::prefetch_maps(p);
  if (p.q_tma && threadIdx.x == S::THREADS) tma_prefetch_map(&p.q_map);
  grid_dependency_wait();
  ws_init_barriers<T, S>(sm);
  if constexpr (PERSIST) {
    static_assert(kWsPersist<S>, "persistent blocks where the second Q tile fits");
    block_sync();
    if ((int)threadIdx.x >= S::THREADS) {
      regs_release<WsRegs<S>::PRODUCER>();
      ws_produce<T, S>(p, sm);
    } else {
      regs_claim<WsRegs<S>::CONSUMER>();
      ws_consume<T, S>(p, sm);
    }
  } else {
    Program<S> g(p);
    if (!g.find(sm.meta)) return;
    g.map();
    if (g.tid >= S::THREADS) {
      if (p.q_tma && g.tid == S::THREADS) ws_q_boxes<T, S>(p, g, sm, sm.bar + kWsQBar);
      regs_release<WsRegs<S>::PRODUCER>();
      WsProducer<T, S>(p, g, sm, 0).run();
      async_wait<0>(); /* its copies land before it exits */
      return;
    }
    regs_claim<WsRegs<S>::CONSUMER>();
    OnlineSoftmax<S> sx;
    FragC acc[S::DK];
    if (!p.q_tma) load_q(p, g, sm);
    if (kWsDecode<S> && ws_decode_flag(p, g)) { /* a decode item: its own loop, no turns, plain stores */
      ws_decode_item<T, S>(p, g, sm, 0, 0);
      return;
    }
    const int grp = g.tid >> 7;
    ws_turns_begin<S>(grp);
    mainloop_ws(p, g, sm, sx, acc, 0, 0);
    ws_turns_end<S>(grp);
    if (own_rows_epilogue<T, S>(p, g, sm, sx, acc) && (g.tid & 127) == 0) bulk_wait(); /* its boxes, before it exits */
  }
}

/* The pipelined tile's kernel with a producer warpgroup: THREADS + 128
 * threads, launched by run on sm_90 only (an sm_80 pass has no wgmma).
 * FP8 0: 16-bit caches; 2: a staged fp8 batch's 16-bit copy, with the fp8
 * plan's descales (shape.cuh). PERSIST: persistent blocks (p.sched). */
template <typename T, int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES, int FP8, bool PERSIST>
__global__ void __launch_bounds__(WARPS *AA_WARP_SIZE + 128, 1) attn_ws_kernel(const AA_GRID_CONSTANT AttnParams p) {
  static_assert(FP8 == 0 || FP8 == 2, "the producer copies 16-bit tiles");
  using S = WsShape<TileShape<HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, FP8>>;
  static_assert(S::THREADS + S::PRODUCER_THREADS == WARPS * AA_WARP_SIZE + 128, "the launch's threads");
  extern __shared__ __align__(16) unsigned char smem[];
  if constexpr (PassCaps<S>::WS) {
    attend_ws<T, S, PERSIST>(p, smem);
  } else {
    pass_unsupported(); /* an sm_90 device running a build without sm_90a code */
  }
}

/* FP8 = 1: the caches hold E4M3 codes (shape.cuh); q and out are T. */
template <typename T, int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES, int FP8>
__global__ void __launch_bounds__(WARPS *AA_WARP_SIZE,
                                  (TileShape<HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, FP8>::MIN_BLOCKS))
    attn_tc_kernel(const AA_GRID_CONSTANT AttnParams p) {
  using S = TileShape<HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, FP8>;
  extern __shared__ __align__(16) unsigned char smem[];
  Program<S> g(p);
  /* a staged batch (FP8 2) runs here split only (unsplit: attn_ws_kernel), and with own_rows_epilogue
   * compiled in, m128n96w8s2 at d192 spills (ptxas 13.0: 8 bytes stored, 40 loaded) */
  attend<T, S, kOwnRows<S> && FP8 != 2>(p, g, smem, false);
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
    /* the fp8 pair keeps Epilogue: with own_rows_epilogue too it spills (ptxas 13.0: 8 bytes stored, 40 loaded) */
    attend<T, SP, kOwnRows<SP> && !SP::KV8>(rp.pre, g, smem, false);
  }
}

typedef void (*KernelFn)(AttnParams);
typedef void (*KernelF32Fn)(AttnParams, int);
typedef void (*RolesFn)(RoleParams);

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_ATTENTION_CUH */
