/* mainloop_ws.cuh: the pipelined 128-row tile (mainloop_sm90.cuh) over 16-bit
 * caches with a producer warpgroup (WsShape, sm_90a), persistent: a block
 * takes work items (the programs of scheduler.cuh) in rounds of the grid's
 * size (attention.cuh, ws_item). A third warpgroup of the block finds each
 * item, copies its Q and every K and V tile, so the two consumer warpgroups
 * only wait for tiles, run their products and their softmax half a KV tile
 * apart, say when a stage or Q is free, and write their rows; the producer
 * meanwhile finds the next item and fills Q and the stages with it. The
 * producer gives its registers to the consumers (setmaxnreg).
 * docs/design/prefill.md#producer-warpgroup, #persistent-programs. */
#ifndef ANYATTN_GPU_KERNEL_MAINLOOP_WS_CUH
#define ANYATTN_GPU_KERNEL_MAINLOOP_WS_CUH

#include "mainloop_sm90.cuh"

namespace aa {

/* Registers per thread after reallocation. The block launches at 168 a
 * thread (384 threads, one block an SM: 64,512 registers), and the two
 * counts must share exactly that pool, or the consumers' claim waits
 * forever: 256 consumer threads at C, 128 producer threads at 504 - 2 C.
 * C is 224 (the producer at 56) but at head dim 256, whose consumers need
 * 240 (the producer at 24). ptxas (13.0) with the producer's copies not
 * unrolled: at 224 / 56 d64, d80 and d192 spill nothing, d96 and d128 8
 * bytes; d256 spills 104 bytes at 224 and 40 at 240. */
template <class S>
struct WsRegs {
  static constexpr int LAUNCH = 65536 / (S::THREADS + S::PRODUCER_THREADS) / 8 * 8; /* 168 */
  static constexpr int CONSUMER = S::HD >= 256 ? 240 : 224;
  static constexpr int PRODUCER = (LAUNCH * (S::THREADS + S::PRODUCER_THREADS) - S::THREADS * CONSUMER) / S::PRODUCER_THREADS;
  static_assert(S::PRODUCER_THREADS * PRODUCER + S::THREADS * CONSUMER == LAUNCH * (S::THREADS + S::PRODUCER_THREADS) &&
                    PRODUCER >= 24 && PRODUCER % 8 == 0,
                "the producer's and the consumers' registers fill the block's");
};
/* The producer's own named barrier (its work search, its copies' row
 * offsets); ids 1..8 are the pipelined tile's (mainloop_sm90.cuh). */
constexpr int kBarProducer = 9;
/* mbarriers after the four "stage landed" ones (SmemTiles::bar): "stage
 * free", K stage 0, 1 then V stage 0, 1 (one arrival per consumer warp);
 * "Q landed" (the producer's 128 threads' copies and its thread 0 once it
 * wrote the item); "Q free" (one arrival per consumer warp); then the item,
 * kWsItemInts ints: its index (-1: no more) and its Work. */
constexpr int kWsFreeBar = 4, kWsConsumerWarps = 8, kWsQBar = 8, kWsQFreeBar = 9, kWsItem = 10, kWsItemInts = 8;
/* Then one int: the producer's next item, from its thread 0 to the others. */
constexpr int kWsNext = kWsItem + kWsItemInts / 2;
static_assert((kWsNext + 1) * 8 <= 128, "the mbarriers and words fit TileShape's 128 bytes");

/* The producer warpgroup: K(t) and V(t) into stage t % 2, in tile order,
 * each once both consumer warpgroups are done with the stage's previous
 * tile (t - 2). Halves come as TMA boxes where PipelinedTile takes them
 * (K always, V wholly inside the key range), else as zero-filling 16-byte
 * copies; either way all 128 threads arrive on the half's "landed"
 * mbarrier, as in PipelinedTile. */
template <typename T, class S>
struct WsProducer {
  const AttnParams &p;
  const Program<S> &g;
  const SmemTiles<T, S> &sm;
  const KvPages<T, S> pages;
  int lt; /* thread within the warpgroup */
  bool tma;

  __device__ __forceinline__ WsProducer(const AttnParams &p_, const Program<S> &g_, const SmemTiles<T, S> &sm_)
      : p(p_), g(g_), sm(sm_), pages(p_, g_) {
    lt = g.tid - S::THREADS;
    tma = PassCaps<S>::TMA_PP && p.tma_rows > 0 && g.ntiles > 0;
  }
  /* Item k (block index bx) for the consumers, once they are done with item
   * k - 1's Q: its Work, then its Q block as 16-byte copies (rows past the
   * block's tokens or heads and columns past the head dim: zeros, as
   * load_q), each thread arriving on "Q landed" when its copies land, and
   * thread 0 once more after writing the item. bx -1: no more items, no
   * copies. */
  __device__ __forceinline__ static void publish(const AttnParams &p, const Program<S> *g, const SmemTiles<T, S> &sm,
                                                 int lt, int k, int bx) {
    uint64_t *qbar = sm.bar + kWsQBar;
    if (k > 0) mbar_wait(sm.bar + kWsQFreeBar, (uint32_t)(k - 1) & 1u);
    if (lt == 0) {
      int *it = reinterpret_cast<int *>(sm.bar + kWsItem);
      it[0] = bx;
      if (g) {
        const Work &w = g->w;
        it[1] = w.seq, it[2] = w.q_len, it[3] = w.kv_len, it[4] = w.pos0, it[5] = w.q_first, it[6] = w.tok0;
        it[7] = w.n_tok;
      }
    }
    if (g) {
      constexpr int CH = S::CHUNKS, QL = S::BM * CH / 128;
      static_assert(S::BM * CH % 128 == 0, "whole copies per thread");
      const T *q = static_cast<const T *>(p.q);
      const int nch = p.head_dim >> 3; /* 16-byte chunks of a q row */
#pragma unroll 1
      for (int j = 0; j < QL; j++) {
        const int i = lt + j * 128, r = i / CH, c = i % CH;
        const bool ok = c < nch && g->row_valid(r);
        async_copy16(reinterpret_cast<unsigned char *>(sm.q) + kv_smem_offset<S::BM>(r, c),
                     ok ? q + g->row_offset(r) * p.head_dim + c * 8 : q, ok);
      }
      mbar_arrive_copies(qbar);
      async_commit();
    } else {
      mbar_arrive(qbar);
    }
    if (lt == 0) mbar_arrive(qbar); /* after the item's words: the consumers read them once the phase completes */
  }
  __device__ __forceinline__ bool box(int n0, int hf) const {
    return tma && (hf == 0 || (n0 >= g.lo && n0 + S::BN <= g.hi));
  }
  __device__ __forceinline__ bool box_owner() const { return lt < S::BN && (lt & (p.tma_rows - 1)) == 0; }
  /* This thread's page id for half hf of tile n0: its box's, or its row's. */
  __device__ __forceinline__ int lookup(int n0, int hf) const {
    if (box(n0, hf)) return box_owner() ? pages.bt_row[fast_div(pages.box_key(n0 + lt), p.bs_magic, p.bs_shift)] : 0;
    return pages.page_id(lt, n0);
  }
  __device__ __forceinline__ void fill(int stage, int n0, int hf, int pg) const {
    uint64_t *bar = sm.bar + 2 * hf + stage;
    unsigned char *tile =
        reinterpret_cast<unsigned char *>(hf ? sm.v : sm.k) + (size_t)stage * S::TILE_ELEMS * sizeof(T);
    if (box(n0, hf)) {
      if (lt == 0) mbar_arrive_expect_tx(bar, (uint32_t)(S::BN * 64 * S::PANELS * sizeof(T)));
      else mbar_arrive(bar);
      if (box_owner()) {
        const int jb = pages.box_key(n0 + lt), pi = fast_div(jb, p.bs_magic, p.bs_shift), row = jb - pi * p.block_size;
        fence_proxy_async_smem(); /* earlier 16-byte copies into this stage, before the boxes */
#pragma unroll
        for (int pn = 0; pn < S::PANELS; pn++)
          tma_load_4d(tile + (size_t)lt * 128 + pn * (S::BN * 128), hf ? &p.v_map : &p.k_map, pn * 64, g.kvh, row, pg,
                      bar);
      }
      return;
    }
    /* offsets of the stage's rows (slot = stage), published to the warpgroup;
     * the first barrier keeps them until every thread has issued the last
     * copies that read the slot */
    named_sync(kBarProducer, 128);
    if (lt < S::BN)
      sm.off[(stage * S::BN + lt) * 2 + hf] = pages.row_elems(pg, n0 + lt, hf ? p.v_sb : p.k_sb, hf ? p.v_st : p.k_st);
    named_sync(kBarProducer, 128);
    constexpr int CH = S::CHUNKS, LOADS = S::BN * CH / 128;
    const T *src = hf ? pages.vc : pages.kc;
#pragma unroll 1 /* unrolled, the copies' offsets spill the producer's registers */
    for (int k = 0; k < LOADS; k++) {
      const int i = lt + k * 128;
      const int r = 128 % CH == 0 ? lt / CH + k * (128 / CH) : i / CH, c = 128 % CH == 0 ? lt % CH : i % CH;
      const int64_t o = sm.off[(stage * S::BN + r) * 2 + hf];
      const bool ok = o >= 0 && c * 8 < p.head_dim; /* columns past the head dim: zeros */
      async_copy16(tile + kv_smem_offset<S::BN>(r, c), src + (ok ? o + c * 8 : 0), ok);
    }
    mbar_arrive_copies(bar);
    async_commit();
  }
  /* Item k (block index bx), whose tiles are the block's base, base + 1,
   * ...: the first tile's page-id loads go out, then Q (its copies do not
   * wait for them; publish waits for the item before to free Q, while they
   * are in flight), then tile u to stage u % 2 once the consumers released
   * tile u - 2 there. Page ids one tile ahead, so a fill issues as soon as
   * its stage is free. */
  __device__ __forceinline__ void run(int base, int k, int bx) const {
    const int n0 = g.n_begin;
    int pk = lookup(n0, 0), pv = lookup(n0, 1);
    publish(p, &g, sm, lt, k, bx);
    for (int t = 0; t < g.ntiles; t++) {
      const int nt = n0 + t * S::BN, u = base + t, stage = u & 1;
      const uint32_t par = (uint32_t)((u >> 1) + 1) & 1u; /* tile u - 2's release: that stage's (u / 2 - 1)-th */
      const int pk1 = lookup(nt + S::BN, 0), pv1 = lookup(nt + S::BN, 1);
      if (u >= 2) mbar_wait(sm.bar + kWsFreeBar + stage, par);
      fill(stage, nt, 0, pk);
      if (u >= 2) mbar_wait(sm.bar + kWsFreeBar + 2 + stage, par);
      fill(stage, nt, 1, pv);
      pk = pk1, pv = pv1;
    }
  }
};

/* The consumer warpgroups: PipelinedTile's phases without the copies. A
 * warp arrives on a stage's "free" mbarrier once its warpgroup's products
 * that read the stage are done: K(it) after Q K(it)^T, V(it - 1) after
 * P(it - 1) V(it - 1). */
template <typename T, class S>
struct WsConsumer {
  const AttnParams &p;
  const Program<S> &g;
  const SmemTiles<T, S> &sm;
  int grp;
  int base; /* the block's index of the item's first tile (stages and their phases count the block's tiles) */
  typedef T MT;
  static constexpr bool kOverlapPV = PipelinedTile<T, S>::kOverlapPV;

  __device__ __forceinline__ WsConsumer(const AttnParams &p_, const Program<S> &g_, const SmemTiles<T, S> &sm_,
                                        int base_)
      : p(p_), g(g_), sm(sm_), grp(g_.tid >> 7), base(base_) {}

  /* One arrival per warp on mbarrier `bar` (kWsFreeBar + stage half, or
   * kWsQFreeBar) once the warp's products that read it are done. */
  __device__ __forceinline__ void release(int bar) const {
    fence_proxy_async_smem(); /* the reads, before the producer's next writes */
    if (lane_id() == 0) mbar_arrive(sm.bar + bar);
  }
  /* One phase: PipelinedTile::phase's products, order and turns, on the
   * block's tile u = base + it; Q is released after the item's last Q K^T. */
  template <bool PV, bool QK>
  __device__ __forceinline__ void phase(int it, OnlineSoftmax<S> &sx, FragC (&acc)[S::DK], FragA (&pa)[S::NK]) {
    using PT = PipelinedTile<T, S>;
    const int u = base + it;
    PT::template enter_turn<PV, QK>(sm, grp, u, acc, pa);
    FragC s[S::NK];
    PT::template issue_products<PV, QK, kOverlapPV>(sm, grp, u, s, acc, pa);
    named_arrive(kBarSched0 + (grp ^ 1), 256);
    if constexpr (kOverlapPV) {
      float alpha[kFragCSlots];
      if constexpr (QK) {
        if constexpr (PV) wg_wait_but_newest();
        else wg_wait_all();
#pragma unroll
        for (int n = 0; n < S::NK; n++) wg_keep(s[n]);
        release(kWsFreeBar + (u & 1));
        if (it + 1 == g.ntiles) release(kWsQFreeBar);
        sx.template weights<0>(p, g, g.n_begin + it * S::BN, s, alpha);
      }
      if constexpr (PV) {
        wg_wait_all();
        PT::keep_pv(acc, pa);
        release(kWsFreeBar + 2 + ((u - 1) & 1));
      }
      if constexpr (QK) sx.template finish<MT>(s, pa, acc, alpha);
    } else {
      wg_wait_all();
      PT::keep_pv(acc, pa);
#pragma unroll
      for (int n = 0; n < S::NK; n++) wg_keep(s[n]);
      if constexpr (QK) {
        release(kWsFreeBar + (u & 1));
        if (it + 1 == g.ntiles) release(kWsQFreeBar);
      }
      if constexpr (PV) release(kWsFreeBar + 2 + ((u - 1) & 1));
      if constexpr (QK) sx.template tile<MT, 0>(p, g, g.n_begin + it * S::BN, s, pa, acc);
    }
  }
};

/* Before a block barrier that publishes them: the four "landed" mbarriers
 * (128 producer arrivals each), the four "free" ones, "Q landed" (129) and
 * "Q free". */
template <typename T, class S>
__device__ __forceinline__ void ws_init_barriers(const SmemTiles<T, S> &sm) {
  if (threadIdx.x == 0) {
    for (int i = 0; i < 4; i++) mbar_init(sm.bar + i, 128);
    for (int i = 0; i < 4; i++) mbar_init(sm.bar + kWsFreeBar + i, kWsConsumerWarps);
    mbar_init(sm.bar + kWsQBar, 129);
    mbar_init(sm.bar + kWsQFreeBar, kWsConsumerWarps);
    mbar_init_fence();
  }
}

/* The consumers' loop over one item whose Q has landed; its tiles are the
 * block's base, base + 1, ... The turns carry over from item to item: the
 * first warpgroup's first phase takes the turn the second handed over in
 * its last phase of the item before (attend_ws). */
template <typename T, class S>
__device__ __forceinline__ void mainloop_ws(const AttnParams &p, const Program<S> &g, const SmemTiles<T, S> &sm,
                                            OnlineSoftmax<S> &sx, FragC (&acc)[S::DK], int base) {
  WsConsumer<T, S> c(p, g, sm, base);
  sx.rows(p, g);
#pragma unroll
  for (int d = 0; d < S::DK; d++) zero(acc[d]);
  sx.reset();
  if (g.ntiles > 0) {
    FragA pa[S::NK];
    c.template phase<false, true>(0, sx, acc, pa);
    for (int it = 1; it < g.ntiles; it++) c.template phase<true, true>(it, sx, acc, pa);
    c.template phase<true, false>(g.ntiles, sx, acc, pa);
  } else {
    c.release(kWsQFreeBar);
  }
}

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_MAINLOOP_WS_CUH */
