/* mainloop_ws.cuh: the pipelined 128-row tile (mainloop_sm90.cuh) over 16-bit
 * caches with a producer warpgroup (WsShape, sm_90a): a third warpgroup of
 * the block copies every K and V tile, so the two consumer warpgroups only
 * wait for tiles, run their products and their softmax half a KV tile apart,
 * and say when a stage is free. The producer gives its registers to the
 * consumers (setmaxnreg). docs/design/prefill.md#producer-warpgroup. */
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
/* The producer's own named barrier (its work search in persistent blocks,
 * its copies' row offsets); ids 1..8 are the pipelined tile's
 * (mainloop_sm90.cuh). */
constexpr int kBarProducer = 9;
/* mbarriers after the four "stage landed" ones (SmemTiles::bar): "stage
 * free", K stage 0, 1 then V stage 0, 1; one arrival per consumer warp. */
constexpr int kWsFreeBar = 4, kWsConsumerWarps = 8;
/* Then, per Q tile b (0: q, 1: q2): "Q landed" (p.q_tma: one arrival, the
 * producer's, and Q's bytes), "Q free" (one arrival per consumer warp once
 * its item's rows are out of the tile) and "item published" (one arrival,
 * the producer's, after it wrote the item's descriptor, WsItem). */
constexpr int kWsQBar = 8, kWsQFreeBar = 10, kWsItemBar = 12;
static_assert(kWsItemBar + 2 <= 14, "the mbarriers TileShape::PP_BARS reserves");

/* A persistent block runs items (programs) blockIdx.x, then gridDim.x +
 * each claim on p.sched[0] (the program order is longest first within a
 * sequence, Program, and a block claims its next item once it has issued
 * the last tile of the current one); without p.sched, none past the first.
 * Items come to the consumers through SmemTiles::desc, k % 2 for the
 * block's k-th item with work: its program index, then its Work; -1: no
 * more. Its Q goes to tile k % 2. */
struct WsItem {
  __device__ __forceinline__ static void put(int *d, int item, const Work &w) {
    d[0] = item, d[1] = w.seq, d[2] = w.q_len, d[3] = w.kv_len, d[4] = w.pos0, d[5] = w.q_first, d[6] = w.tok0,
    d[7] = w.n_tok;
  }
  __device__ __forceinline__ static void get(const int *d, Work &w) {
    w.seq = d[1], w.q_len = d[2], w.kv_len = d[3], w.pos0 = d[4], w.q_first = d[5], w.tok0 = d[6], w.n_tok = d[7];
  }
};

/* The program's Q block as TMA boxes (p.q_tma), issued by one producer
 * thread right after the work search: one box of 64 columns x gh heads x bq
 * tokens per panel, at (panel, head0, tok0) of q_map, each landing as a
 * 128-byte swizzled panel of the wgmma layout (kv_smem_offset<BM>: row r =
 * token r / gh, head r % gh). Tokens past the Q block are the next
 * sequence's or zeros (past num_tokens); their rows are never stored. */
template <typename T, class S>
__device__ __forceinline__ void ws_q_boxes(const AttnParams &p, const Program<S> &g, const SmemTiles<T, S> &sm,
                                           uint64_t *bar) {
  mbar_arrive_expect_tx(bar, (uint32_t)(S::PANELS * 64 * p.gh * p.bq * sizeof(T)));
#pragma unroll
  for (int pn = 0; pn < S::PANELS; pn++)
    tma_load_3d(reinterpret_cast<unsigned char *>(sm.q) + (size_t)pn * (S::BM * 128), &p.q_map, pn * 64, g.head0,
                g.w.tok0, bar);
}

/* The producer warpgroup: K(t) and V(t) into stage t % 2, in tile order,
 * each once both consumer warpgroups are done with the stage's previous
 * tile (t - 2); t counts the block's tiles over its items (tb: the item's
 * first). Halves come as TMA boxes (K always; V where its boxes end
 * within the context, v_last, where PipelinedTile and head dim 256 take V
 * wholly inside [lo, hi) only), else as zero-filling 16-byte copies;
 * either way all 128 threads arrive on the half's "landed" mbarrier, as in
 * PipelinedTile. */
template <typename T, class S>
struct WsProducer {
  const AttnParams &p;
  const Program<S> &g;
  const SmemTiles<T, S> &sm;
  const KvPages<T, S> pages;
  int lt; /* thread within the warpgroup */
  bool tma;
  int tb; /* the block's tiles before this item's */
  int v_last; /* the last tile start whose V comes as boxes */

  __device__ __forceinline__ WsProducer(const AttnParams &p_, const Program<S> &g_, const SmemTiles<T, S> &sm_,
                                        int tb_)
      : p(p_), g(g_), sm(sm_), pages(p_, g_), tb(tb_) {
    lt = g.tid - S::THREADS;
    tma = PassCaps<S>::TMA_PP && p.tma_rows > 0 && g.ntiles > 0;
    /* V rows inside the context but outside [lo, hi) (behind the causal
     * diagonal, before a window) are the sequence's finite keys, of weight
     * exactly zero, so their boxes are safe; a page's tail past the context
     * may hold anything, and 0 * NaN is NaN, so a tile whose boxes reach it
     * takes the copies. box_key keeps every box inside [lo, hi)'s boxes:
     * any tile where the last of those ends within the context, else the
     * tiles that end within it (docs/design/prefill.md#tma-panels). */
    if constexpr (S::HD < 256) {
      const int last_box = (g.hi - 1) & ~(p.tma_rows - 1);
      v_last = last_box + p.tma_rows <= g.w.kv_len ? 0x7fffffff : g.w.kv_len - S::BN;
    }
  }
  /* at head dim 256 (the producer at 24 registers) V wholly inside [lo, hi): v_last took the spilled
   * stores from 32 to 40 bytes there (ptxas 13.0) */
  __device__ __forceinline__ bool box(int n0, int hf) const {
    if constexpr (S::HD >= 256) return tma && (hf == 0 || (n0 >= g.lo && n0 + S::BN <= g.hi));
    else return tma && (hf == 0 || n0 <= v_last);
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
        /* mixed batches (p.l2hint; head dims up to 128, the ones they take this tile at: at 256 the
         * policies took the spilled loads from 76 to 88 bytes): a decode item (one Q block, one head
         * chunk) reads its keys once, evict_first; a prompt's or a chunk's Q blocks read theirs
         * again, evict_last, so the decodes' stream does not push them out
         * (docs/design/prefill.md#mixed-batches) */
        if (S::HD < 256 && p.l2hint) {
          const uint64_t pol = l2_policy(g.w.q_len <= p.bq && p.n_hchunks == 1);
#pragma unroll
          for (int pn = 0; pn < S::PANELS; pn++)
            tma_load_4d_hint(tile + (size_t)lt * 128 + pn * (S::BN * 128), hf ? &p.v_map : &p.k_map, pn * 64, g.kvh,
                             row, pg, bar, pol);
        } else {
#pragma unroll
          for (int pn = 0; pn < S::PANELS; pn++)
            tma_load_4d(tile + (size_t)lt * 128 + pn * (S::BN * 128), hf ? &p.v_map : &p.k_map, pn * 64, g.kvh, row,
                        pg, bar);
        }
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
    for (int k = 0; k < LOADS; k++) copy16_k<T, S>(p, tile, src, sm.off, stage, hf, lt, k);
    mbar_arrive_copies(bar);
    async_commit();
  }
  /* Page ids one tile ahead, so a fill issues as soon as its stage is free.
   * The copies land on the stages' mbarriers; the producer waits for them
   * (async_wait) only before it exits. */
  __device__ __forceinline__ void run() const {
    const int n0 = g.n_begin;
    int pk = lookup(n0, 0), pv = lookup(n0, 1);
    for (int t = 0; t < g.ntiles; t++) {
      const int nt = n0 + t * S::BN, bt = tb + t, stage = bt & 1;
      const uint32_t par = (uint32_t)((bt >> 1) + 1) & 1u; /* tile bt - 2's release: that stage's (bt / 2 - 1)-th */
      const int pk1 = lookup(nt + S::BN, 0), pv1 = lookup(nt + S::BN, 1);
      if (bt >= 2) mbar_wait(sm.bar + kWsFreeBar + stage, par);
      fill(stage, nt, 0, pk);
      if (bt >= 2) mbar_wait(sm.bar + kWsFreeBar + 2 + stage, par);
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
  int tb; /* the block's tiles before this item's: tile it of the item is the block's tb + it */
  typedef T MT;
  static constexpr bool kOverlapPV = PipelinedTile<T, S>::kOverlapPV;

  __device__ __forceinline__ WsConsumer(const AttnParams &p_, const Program<S> &g_, const SmemTiles<T, S> &sm_,
                                        int tb_)
      : p(p_), g(g_), sm(sm_), grp(g_.tid >> 7), tb(tb_) {}

  __device__ __forceinline__ void release(int bar) const {
    fence_proxy_async_smem(); /* the stage's reads, before the producer's next writes */
    if (lane_id() == 0) mbar_arrive(sm.bar + kWsFreeBar + bar);
  }
  /* One phase: PipelinedTile::phase's products, order and turns. */
  template <bool PV, bool QK>
  __device__ __forceinline__ void phase(int it, OnlineSoftmax<S> &sx, FragC (&acc)[S::DK], FragA (&pa)[S::NK]) {
    using PT = PipelinedTile<T, S>;
    const int bt = tb + it; /* stages and their phases count the block's tiles */
    PT::template enter_turn<PV, QK>(sm, grp, bt, acc, pa);
    FragC s[S::NK];
    PT::template issue_products<PV, QK, kOverlapPV>(sm, grp, bt, s, acc, pa);
    named_arrive(kBarSched0 + (grp ^ 1), 256);
    if constexpr (kOverlapPV) {
      float alpha[kFragCSlots];
      if constexpr (QK) {
        if constexpr (PV) wg_wait_but_newest();
        else wg_wait_all();
#pragma unroll
        for (int n = 0; n < S::NK; n++) wg_keep(s[n]);
        release(bt & 1);
        sx.template weights<0>(p, g, g.n_begin + it * S::BN, s, alpha);
      }
      if constexpr (PV) {
        wg_wait_all();
        PT::keep_pv(acc, pa);
        release(2 + ((bt - 1) & 1));
      }
      if constexpr (QK) sx.template finish<MT>(s, pa, acc, alpha);
    } else {
      wg_wait_all();
      PT::keep_pv(acc, pa);
#pragma unroll
      for (int n = 0; n < S::NK; n++) wg_keep(s[n]);
      if constexpr (QK) release(bt & 1);
      if constexpr (PV) release(2 + ((bt - 1) & 1));
      if constexpr (QK) sx.template tile<MT, 0>(p, g, g.n_begin + it * S::BN, s, pa, acc);
    }
  }
  /* The same phase for a warpgroup none of whose rows holds a token of the
   * item (the second's, where the block has at most 64 / gh tokens: a
   * decode's): the turns and the stage releases, in the same order, and no
   * products. A loop of its own, chosen once per item: products skipped
   * inside the phases, under a run-time branch, would serialise every wgmma
   * of the kernel (ptxas C7520, docs/design/prefill.md); the choice between
   * two whole loops does not. */
  template <bool PV, bool QK>
  __device__ __forceinline__ void idle_phase(int it) const {
    const int bt = tb + it;
    if constexpr (QK) mbar_wait(sm.bar + (bt & 1), (uint32_t)(bt >> 1) & 1u);
    if constexpr (PV) mbar_wait(sm.bar + 2 + ((bt - 1) & 1), (uint32_t)((bt - 1) >> 1) & 1u);
    named_sync(kBarSched0 + grp, 256);
    named_arrive(kBarSched0 + (grp ^ 1), 256);
    if constexpr (QK) release(bt & 1);
    if constexpr (PV) release(2 + ((bt - 1) & 1));
  }
  /* run_phases' turns and releases for an idle warpgroup (the second; head dims up to 128,
   * whose turn passes on from item to item: ws_turns_begin) */
  __device__ __forceinline__ void run_idle(int ntiles) const {
    idle_phase<false, true>(0);
    for (int it = 1; it < ntiles; it++) idle_phase<true, true>(it);
    idle_phase<true, false>(ntiles);
  }
};

/* Whether shape S runs decode items on their own loop (ws_decode_item; persistent launches and a
 * block per program): the producer's 128-row tile of 128-key tiles over 16-bit caches at head
 * dims up to 128 (one 16-key slice per consumer warp; the merge's scratch, 8 warps x 8 rows x the
 * panels' columns in fp32, fills the Q tile). */
template <class S>
constexpr bool kWsDecode = kWgRows<S> && S::BN == 16 * kWsConsumerWarps && S::BM == 128 && !S::DESCALE;

/* Whether item g of the block runs ws_decode_item: in a persistent launch decided by the
 * producer, which has the item's work at hand, and published with its descriptor
 * (SmemTiles::desc[kWsDecDesc + the Q tile]); with a block per program by the consumers (attend_ws). */
constexpr int kWsDecDesc = 17;
static_assert(kWsDecDesc + 2 <= 20, "the descriptor words TileShape::SMEM_BYTES reserves (DESC_OFF + 80)");
template <class S>
__device__ __forceinline__ bool ws_decode_flag(const AttnParams &p, const Program<S> &g) {
  return p.ws_dec && g.ntiles > 0 && g.row_tok(8) >= g.w.n_tok;
}

/* A decode item: one whose rows all lie in the Q tile's first 8 (a decode's 4 at Llama's group,
 * one token; any Q block of at most 8 / gh tokens) and that has keys, run by both consumer
 * warpgroups where the 128-row tile's loop runs one warpgroup's 64-row products for it and idles
 * the other. Consumer warp w takes keys w * 16 .. + 15 of every tile, with a softmax state of its
 * own, as m16n8k16 products with the keys as M: S^T = K Q^T (16 keys x 8 rows; a lane holds 4
 * scores, two keys of rows (lane & 3) * 2 and + 1, against the tile's 64), P^T from S^T by
 * movmatrix, O^T += V^T P^T (head dims x 8 rows). A warp releases each stage once its products
 * read it, so a tile's chain is 2 DK products and the softmax of 4 scores, and the ring keeps
 * both stages in flight. After the last tile the eight states merge through the item's Q tile
 * (read into registers at the start, free until the next item two on) and the consumers write
 * the rows out as own_rows_epilogue does (sinks, lse), with no turn taken or handed over: the
 * other items' turns pass on around it (ws_turns_begin). With this loop built in, ptxas (13.0)
 * keeps one word of the consumers' loop (flags read once a tile) and two of the producer's in
 * local memory in the persistent d128 kernel, 12 bytes stored and 28 loaded; the other shapes
 * spill nothing (docs/design/prefill.md#mixed-batches). */
template <typename T, class S>
__device__ __forceinline__ void ws_decode_item(const AttnParams &p, const Program<S> &g, const SmemTiles<T, S> &sm,
                                               int k, int tb) {
  if constexpr (kWsDecode<S>) {
    constexpr int DK = S::DK, HDP = 64 * S::PANELS, W = kWsConsumerWarps;
    static_assert((size_t)W * 8 * HDP * sizeof(float) <= (size_t)S::BM * HDP * sizeof(T),
                  "the merge's scratch fits the Q tile");
    static_assert(8 * (HDP / 8) <= S::THREADS, "a thread per (row, 8-column chunk) of the rows out");
    /* Q: its rows 0-7 are boxes' (or copies') of both warpgroups, never ws_q_pad's */
    if (p.q_tma) mbar_wait(sm.bar + kWsQBar + (k & 1), (uint32_t)(k >> 1) & 1u);
    else async_wait<0>();
    fence_proxy_async_smem();
    program_sync<S>();
    const int lane = lane_id(), w = g.tid >> 5, rq = lane >> 2, r0 = (lane & 3) * 2;
    const unsigned char *qs = reinterpret_cast<const unsigned char *>(sm.q);
    /* Q^T as the B operand: row lane / 4, head dims kb * 16 + (lane & 3) * 2 and + 1, and + 8 */
    uint32_t qf[DK][2];
#pragma unroll
    for (int kb = 0; kb < DK; kb++)
#pragma unroll
      for (int h = 0; h < 2; h++)
        qf[kb][h] = *reinterpret_cast<const uint32_t *>(qs + kv_smem_offset<S::BM>(rq, 2 * kb + h) + (lane & 3) * 4);
    /* rows r0 and r0 + 1: position, visible keys, ALiBi slope */
    int pos[2], jlo[2], jhi[2];
    float slope[2], m_run[2], l_run[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
      row_keys(p, g, r0 + i, pos[i], jlo[i], jhi[i], slope[i]);
      m_run[i] = -INFINITY;
      l_run[i] = 0.0f;
    }
    const bool plain = p.alibi == nullptr && !(p.softcap > 0.0f);
    const float sc = plain ? p.scale_log2 : 1.0f; /* raw dot products -> log2 domain */
    float o[DK][4];
#pragma unroll
    for (int db = 0; db < DK; db++)
#pragma unroll
      for (int e = 0; e < 4; e++) o[db][e] = 0.0f;
    /* ldmatrix rows: K as A (keys lane & 15, head-dim half lane >> 4), V as A transposed (keys
     * lane & 7, + 8 from lane 16; head-dim half (lane >> 3) & 1) */
    const int krow = w * 16 + (lane & 15), kch = lane >> 4;
    const int vrow = w * 16 + (lane & 7) + ((lane >> 4) << 3), vch = (lane >> 3) & 1;
    auto release = [&](int bar) {
      fence_proxy_async_smem(); /* the stage's reads, before the producer's next writes */
      if (lane == 0) mbar_arrive(sm.bar + kWsFreeBar + bar);
    };
    for (int it = 0; it < g.ntiles; it++) {
      const int bt = tb + it, st = bt & 1;
      const uint32_t par = (uint32_t)(bt >> 1) & 1u;
      mbar_wait(sm.bar + st, par);
      float c[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}}; /* two chains of DK / 2 products */
      const T *kt = sm.k + st * S::TILE_ELEMS;
#pragma unroll
      for (int kb = 0; kb < DK; kb++) {
        uint32_t a[4];
        ldmatrix_x4(a, reinterpret_cast<const unsigned char *>(kt) + kv_smem_offset<S::BN>(krow, 2 * kb + kch));
        MmaOp<T>::run(c[kb & 1], a, qf[kb][0], qf[kb][1]);
      }
      float x[4];
#pragma unroll
      for (int e = 0; e < 4; e++) x[e] = c[0][e] + c[1][e];
      release(st);
      /* x[e]: key n0 + (e >> 1) * 8, row r0 + (e & 1) */
      const int n0 = g.n_begin + it * S::BN + w * 16 + rq;
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int i = e & 1, j = n0 + (e >> 1) * 8;
        const float v = plain ? x[e] : score_log2(p, x[e], slope[i], j, pos[i]);
        x[e] = (j >= jlo[i] && j < jhi[i]) ? v : -INFINITY;
      }
      float alpha[2];
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const float m_new = fmax_nan(m_run[i], col_allreduce_max(fmax_nan(x[i], x[i + 2])) * sc);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new; /* a row with nothing visible yet stays at 0 */
        alpha[i] = fast_exp2(m_run[i] - m_use);
        m_run[i] = m_new;
        x[i] = fast_exp2(fmaf(x[i], sc, -m_use));
        x[i + 2] = fast_exp2(fmaf(x[i + 2], sc, -m_use));
        l_run[i] = fmaf(l_run[i], alpha[i], x[i] + x[i + 2]);
      }
      const uint32_t b0 = movmatrix_trans(pack2<T>(x[0], x[1])), b1 = movmatrix_trans(pack2<T>(x[2], x[3]));
      /* once the maxima settle every alpha is exactly 1: the rescale is skipped, warp-uniformly */
      if (warp_any(alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
        for (int db = 0; db < DK; db++)
#pragma unroll
          for (int e = 0; e < 4; e++) o[db][e] *= alpha[e & 1];
      }
      mbar_wait(sm.bar + 2 + st, par);
      const T *vt = sm.v + st * S::TILE_ELEMS;
#pragma unroll
      for (int db = 0; db < DK; db++) {
        uint32_t a[4];
        ldmatrix_x4_trans(a, reinterpret_cast<const unsigned char *>(vt) + kv_smem_offset<S::BN>(vrow, 2 * db + vch));
        MmaOp<T>::run(o[db], a, b0, b1);
      }
      release(2 + st);
    }
    /* The merge. Each warp's (max, sum) of rows 0-7 first ([W][8] float2 at the tile's start), ... */
    float *scr = reinterpret_cast<float *>(sm.q);
    float2 *ml = reinterpret_cast<float2 *>(sm.q);
    const float lw0 = col_allreduce_sum(l_run[0]), lw1 = col_allreduce_sum(l_run[1]);
    if (lane < 4) {
      ml[w * 8 + r0] = make_float2(m_run[0], lw0);
      ml[w * 8 + r0 + 1] = make_float2(m_run[1], lw1);
    }
    program_sync<S>();
    float wt[2]; /* this warp's weight in rows r0, r0 + 1: 2^(m - M) over the eight maxima M */
#pragma unroll
    for (int i = 0; i < 2; i++) {
      float M = -INFINITY;
#pragma unroll
      for (int u = 0; u < W; u++) M = fmax_nan(M, ml[u * 8 + r0 + i].x);
      wt[i] = m_run[i] == -INFINITY ? 0.0f : fast_exp2(m_run[i] - (M == -INFINITY ? 0.0f : M));
    }
    /* thread (row ro, chunk co) of the rows out: the row's max and sum over the eight, its
     * factor (sinks, lse) */
    constexpr int CO = HDP / 8;
    const int ro = g.tid / CO, co = g.tid % CO;
    const bool out_row = g.tid < 8 * CO && g.row_valid(ro);
    float f = 0.0f;
    if (out_row) {
      float m = -INFINITY, l = 0.0f;
#pragma unroll
      for (int u = 0; u < W; u++) m = fmax_nan(m, ml[u * 8 + ro].x);
#pragma unroll
      for (int u = 0; u < W; u++) {
        const float2 v = ml[u * 8 + ro];
        l += v.x == -INFINITY ? 0.0f : v.y * fast_exp2(v.x - m);
      }
      f = row_out_factor(p, g, ro, m, l, 1.0f, co == 0);
    }
    program_sync<S>();
    /* ... then each warp's rows, weighed, as [W][8 rows][HDP] fp32 (columns xor row * 8) ... */
#pragma unroll
    for (int db = 0; db < DK; db++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int d = db * 16 + rq + (e >> 1) * 8, r = r0 + (e & 1);
        scr[(w * 8 + r) * HDP + (d ^ (r << 3))] = o[db][e] * wt[e & 1];
      }
    program_sync<S>();
    /* ... summed and normalised a (row, 8-column chunk) a thread, 16 bytes out */
    if (out_row && co * 8 < DK * 16 && co * 8 < p.head_dim) {
      float v[8];
#pragma unroll
      for (int q = 0; q < 8; q++) v[q] = 0.0f;
#pragma unroll
      for (int u = 0; u < W; u++) {
        const float4 *src = reinterpret_cast<const float4 *>(scr + (u * 8 + ro) * HDP + ((co * 8) ^ (ro << 3)));
        const float4 a = src[0], b = src[1];
        v[0] += a.x, v[1] += a.y, v[2] += a.z, v[3] += a.w;
        v[4] += b.x, v[5] += b.y, v[6] += b.z, v[7] += b.w;
      }
      uint4 out;
      out.x = pack2<T>(v[0] * f, v[1] * f);
      out.y = pack2<T>(v[2] * f, v[3] * f);
      out.z = pack2<T>(v[4] * f, v[5] * f);
      out.w = pack2<T>(v[6] * f, v[7] * f);
      *reinterpret_cast<uint4 *>(static_cast<T *>(p.out) + g.row_offset(ro) * p.head_dim + co * 8) = out;
    }
  }
}

/* The four "landed" mbarriers (128 producer arrivals each), the four
 * "free" ones and each Q tile's three; a block barrier after publishes them. */
template <typename T, class S>
__device__ __forceinline__ void ws_init_barriers(const SmemTiles<T, S> &sm) {
  if (threadIdx.x == 0) {
    for (int i = 0; i < 4; i++) mbar_init(sm.bar + i, 128);
    for (int i = 0; i < 4; i++) mbar_init(sm.bar + kWsFreeBar + i, kWsConsumerWarps);
    for (int b = 0; b < 2; b++) {
      mbar_init(sm.bar + kWsQBar + b, 1);
      mbar_init(sm.bar + kWsQFreeBar + b, kWsConsumerWarps);
      mbar_init(sm.bar + kWsItemBar + b, 1);
    }
    mbar_init_fence();
  }
}

/* Rows gh x bq .. BM - 1 of the Q tile, which no box covers (a group that
 * does not divide BM): zeros, before the barrier that publishes Q; with
 * kWgRows each warpgroup those of its own 64 rows (the only ones its
 * products read) before its own barrier. */
template <typename T, class S>
__device__ __forceinline__ void ws_q_pad(const AttnParams &p, const Program<S> &g, const SmemTiles<T, S> &sm) {
  constexpr int TH = kWgRows<S> ? 128 : S::THREADS, RW = kWgRows<S> ? 64 : S::BM;
  const int grp = g.tid >> 7, r0 = kWgRows<S> ? max(p.gh * p.bq, grp * RW) : p.gh * p.bq;
  const int n = ((kWgRows<S> ? grp * RW : 0) + RW - r0) * S::PANELS * 8;
  for (int i = kWgRows<S> ? (g.tid & 127) : g.tid; i < n; i += TH) {
    const int r = r0 + i / (S::PANELS * 8), c = i % (S::PANELS * 8);
    *reinterpret_cast<uint4 *>(reinterpret_cast<unsigned char *>(sm.q) + kv_smem_offset<S::BM>(r, c)) =
        make_uint4(0, 0, 0, 0);
  }
}

/* The consumers' loop over the block's k-th item, whose first tile is the
 * block's tb-th; Q (in tile k % 2) is their only cp.async group, or comes
 * as boxes (p.q_tma, ws_q_boxes). With boxes each warpgroup starts on its
 * own (kWgRows): Q's rows it reads are the boxes' and its own zeros, so the
 * first can take the item's first turn while the second still writes the
 * rows of the item before (the turn passes on from item to item:
 * ws_consume). Q copied by all consumer threads waits for both. */
template <typename T, class S>
__device__ __forceinline__ void mainloop_ws(const AttnParams &p, const Program<S> &g, const SmemTiles<T, S> &sm,
                                            OnlineSoftmax<S> &sx, FragC (&acc)[S::DK], int k, int tb) {
  WsConsumer<T, S> c(p, g, sm, tb);
  sx.rows(p, g);
  if (p.q_tma) {
    ws_q_pad<T, S>(p, g, sm);
    mbar_wait(sm.bar + kWsQBar + (k & 1), (uint32_t)(k >> 1) & 1u);
    fence_proxy_async_smem();
    if constexpr (kWgRows<S>) named_sync(kBarWg0 + c.grp, 128);
    else program_sync<S>();
  } else {
    async_wait<0>(); /* Q, which wgmma reads next */
    fence_proxy_async_smem();
    program_sync<S>();
  }
#pragma unroll
  for (int d = 0; d < S::DK; d++) zero(acc[d]);
  sx.reset();
  if (g.ntiles > 0) {
    /* the second warpgroup idles where its rows hold no token (row 64's token is past the block's);
     * head dims up to 128 (kWgRows, whose turn run_idle passes on), the mixed batches' (at 256 the
     * idle loop took d256's spilled loads from 76 to 92 bytes) */
    if (kWgRows<S> && c.grp == 1 && g.row_tok(64) >= g.w.n_tok) c.run_idle(g.ntiles);
    else run_phases<!kWgRows<S>>(c, g.ntiles, sx, acc);
  }
}

/* Whether shape S has persistent launches: its second Q tile fits the
 * shared memory (TileShape::PERSIST_SMEM_BYTES; head dims up to 128). */
template <class S>
constexpr bool kWsPersist = S::PERSIST_SMEM_BYTES > 0 && S::PERSIST_SMEM_BYTES <= AA_MAX_SMEM_PER_BLOCK;

/* The producer warpgroup's side of a block: for each of the block's items
 * (WsItem) the work search (its 128 threads, named barrier kBarProducer);
 * for each with work, once the consumers have its Q tile back (the item two
 * before), the descriptor, Q's boxes and every K/V tile. Then the end. */
template <typename T, class S>
__device__ __forceinline__ void ws_produce(const AttnParams &p, const SmemTiles<T, S> &sm) {
  const int lt = (int)threadIdx.x - S::THREADS, G = (int)gridDim.x, bx = (int)blockIdx.x;
  const int total = p.num_qblocks * p.hprogs; /* at most 2^31 - 1 (launch.cu) */
  /* the block's next item: a claim (lt 0's, through desc[16]), or none */
  auto next = [&]() -> int {
    if (!p.sched) return total;
    if (lt == 0) sm.desc[16] = (int)min((unsigned)G + atomicAdd(p.sched, 1u), (unsigned)total);
    named_sync(kBarProducer, 128);
    return sm.desc[16];
  };
  int tb = 0, k = 0, item = bx;
  for (;;) {
    const bool more = item < total && item >= 0;
    Program<S> g(p, more ? item : 0);
    if (more && !g.template find<128, kBarProducer>(sm.meta, lt)) {
      item = next();
      continue;
    }
    const int b = k & 1;
    if (k >= 2) mbar_wait(sm.bar + kWsQFreeBar + b, (uint32_t)((k >> 1) + 1) & 1u);
    if (more) g.map();
    if (lt == 0) {
      if (more && p.q_tma) ws_q_boxes<T, S>(p, g, sm.with_q(b), sm.bar + kWsQBar + b);
      if (more) WsItem::put(sm.desc + 8 * b, item, g.w);
      else sm.desc[8 * b] = -1;
      if constexpr (kWsDecode<S>) sm.desc[kWsDecDesc + b] = more && ws_decode_flag(p, g);
      mbar_arrive(sm.bar + kWsItemBar + b);
    }
    if (!more) break;
    WsProducer<T, S>(p, g, sm, tb).run();
    tb += g.ntiles;
    k++;
    item = next();
  }
  /* the last block done resets the words for the next call: every block's
   * claims precede its count (the fence), and the count the reset */
  if (p.sched && lt == 0) {
    __threadfence();
    if (atomicAdd(p.sched + 1, 1u) == (unsigned)G - 1u) {
      __threadfence();
      p.sched[0] = 0u;
      p.sched[1] = 0u;
    }
  }
  async_wait<0>(); /* its copies land before it exits */
}

/* The turn between the consumer warpgroups (run_phases) over a block's
 * items (kWgRows; else each item's loop hands it over and takes it back):
 * the second hands it over once before the first item and the first takes
 * that arrival back after the last, so within the block the turn passes
 * from item to item without a barrier between them. */
template <class S>
__device__ __forceinline__ void ws_turns_begin(int grp) {
  if (kWgRows<S> && grp == 1) named_arrive(kBarSched0, 256);
}
template <class S>
__device__ __forceinline__ void ws_turns_end(int grp) {
  if (kWgRows<S> && grp == 0) named_sync(kBarSched0, 256);
}

/* The consumers' side: each item the producer publishes, on Q tile k % 2;
 * its rows out (own_rows_epilogue) and the tile handed back: at once
 * without p.o_tma; with it (rows out as TMA boxes where a warpgroup's rows
 * are whole tokens) at the next item's start, once the warpgroup's first
 * thread has seen its boxes read (the wait then costs nothing), and before
 * the threads exit, the boxes' writes done. The hand-back follows p.o_tma,
 * not each item's choice: a per-item flag live across the loop took ptxas
 * from 86 to 117 instructions in the d128 loop's wgmma issue. */
template <typename T, class S>
__device__ __forceinline__ void ws_consume(const AttnParams &p, const SmemTiles<T, S> &sm0) {
  int tb = 0;
  const int grp = (int)threadIdx.x >> 7;
  auto hand_back = [&](int b) {
    fence_proxy_async_smem(); /* the tile's reads (the rows out) before the producer's next boxes into it */
    warp_sync();
    if (lane_id() == 0) mbar_arrive(sm0.bar + kWsQFreeBar + b);
  };
  ws_turns_begin<S>(grp);
  for (int k = 0;; k++) {
    const int b = k & 1;
    mbar_wait(sm0.bar + kWsItemBar + b, (uint32_t)(k >> 1) & 1u);
    if (p.o_tma && k > 0) {
      if ((threadIdx.x & 127) == 0) bulk_wait_read();
      hand_back(b ^ 1);
    }
    const int *d = sm0.desc + 8 * b;
    const int item = d[0];
    if (item < 0) break;
    Program<S> g(p, item);
    WsItem::get(d, g.w);
    g.ptok0 = g.w.tok0;
    g.map();
    const SmemTiles<T, S> sm = sm0.with_q(b);
    OnlineSoftmax<S> sx;
    FragC acc[S::DK];
    if (!p.q_tma) load_q(p, g, sm);
    if (kWsDecode<S> && sm0.desc[kWsDecDesc + b]) { /* a decode item (ws_decode_flag) */
      ws_decode_item<T, S>(p, g, sm, k, tb);
    } else {
      mainloop_ws(p, g, sm, sx, acc, k, tb);
      own_rows_epilogue<T, S>(p, g, sm, sx, acc);
    }
    tb += g.ntiles;
    if (!p.o_tma) hand_back(b);
  }
  ws_turns_end<S>(grp);
  if ((threadIdx.x & 127) == 0) bulk_wait();
}

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_MAINLOOP_WS_CUH */
