/* mainloop_sm90.cuh: the KV loop of the 128-row prefill tile on sm_90a
 * (TileShape::PP): two consumer warpgroups on warpgroup MMA, half a KV tile
 * apart, so one warpgroup's softmax runs while the other's products keep the
 * tensor cores busy (docs/design/prefill.md). Each warpgroup also loads half
 * of every tile: the first K, the second V, as 16-byte copies tracked by
 * mbarriers or, where the cache layout allows, as 128-byte-swizzled TMA boxes
 * that land in exactly the wgmma layout. FP8 caches: each warpgroup copies its
 * half's codes into its code tile a phase before they are needed (TMA boxes
 * where the layout allows, else 16- or 8-code copies), then converts them
 * into the 16-bit ring and arrives on the mbarrier itself; both products run
 * in f16 (docs/design/layout.md, FP8 caches). Unsplit launches over 16-bit
 * caches on sm_90 run the same phases with a producer warpgroup doing the
 * copies instead (mainloop_ws.cuh). */
#ifndef ANYATTN_GPU_KERNEL_MAINLOOP_SM90_CUH
#define ANYATTN_GPU_KERNEL_MAINLOOP_SM90_CUH

#include "kv_load.cuh"
#include "products.cuh"
#include "softmax.cuh"

namespace aa {

/* Copy k of a warpgroup's 16-byte copies of a K or V tile half (hf) into
 * `tile` (thread lt of 128; k < BLOCK_N x CHUNKS / 128): a fixed column per
 * thread where the row's chunks divide 128 (d64, d128, d256), else chunk
 * lt + 128 k in row order (d192: 24 a row), from the cache row at element
 * offset off[(slot BLOCK_N + r) 2 + hf] (-1: none, zeros; so are columns
 * past the head dim). PipelinedTile and the producer warpgroup loop over k. */
template <typename T, class S>
__device__ __forceinline__ void copy16_k(const AttnParams &p, unsigned char *tile, const T *src, const int64_t *off,
                                         int slot, int hf, int lt, int k) {
  constexpr int CH = S::CHUNKS;
  const int i = lt + k * 128;
  const int r = 128 % CH == 0 ? lt / CH + k * (128 / CH) : i / CH, c = 128 % CH == 0 ? lt % CH : i % CH;
  const int64_t o = off[(slot * S::BN + r) * 2 + hf];
  const bool ok = o >= 0 && c * 8 < p.head_dim;
  async_copy16(tile + kv_smem_offset<S::BN>(r, c), src + (ok ? o + c * 8 : 0), ok);
}

template <typename T, class S>
struct PipelinedTile {
  static_assert(S::WM == 8 && S::PIPE_STAGES == 2, "two warpgroups of 64 rows, two stages");
  /* FP8: codes per copy (16 where p.kv8_wide, else 8), chunks of a row, and
   * each thread's chunks of a tile half */
  static constexpr int CH16 = S::HD / 16, LOADS16 = S::BN * CH16 / 128;
  static constexpr int CH8 = S::HD / 8, LOADS8 = S::BN * CH8 / 128;
  /* 16-code chunks loaded before any is converted (the products' registers
   * are live around the conversion): on one H200, prefill 1x8192, batches
   * of 1 and 2 ran alike, 4 spilled and ran 3% slower */
  static constexpr int kConvBatch = 2;
  static_assert(!S::KV8 || (LOADS16 % kConvBatch == 0 && LOADS8 % 8 == 0), "FP8 halves in whole batches");
  const AttnParams &p;
  const Program<S> &g;
  const SmemTiles<T, S> &sm;
  const KvPages<T, S> pages;
  int grp, lt; /* warpgroup and thread within it: owns row lt of a tile */
  int hf;      /* the half it loads: 0 K, 1 V (16-bit caches: warpgroup 0 K; FP8: warpgroup 1 K) */
  bool tma;    /* halves (FP8: their codes) may come as TMA boxes */
  int pg_next; /* page id (or box page) of the next half this thread loads (FP8: copies the codes of) */
  uint32_t cpar = 0; /* FP8 code boxes: the phase of this warpgroup's code-tile mbarrier */
  /* The products' type: T, or f16 for FP8 caches (Q converted by QToF16, P
   * times 2^PSHIFT) */
  typedef typename ProductElem<T, S::KV8>::type MT;
  static constexpr int PSHIFT = S::KV8 ? kCodePShift : 0;

  /* The four mbarriers (full K and full V of each stage), one arrival per
   * copying thread of a warpgroup (128); with FP8 code boxes two more (the K
   * and V code tiles), one arrival (the warpgroup's thread 0, with the byte
   * count). Before the work search, whose barrier publishes the init. */
  __device__ __forceinline__ static void init_barriers(const SmemTiles<T, S> &sm) {
    if (threadIdx.x == 0) {
      for (int i = 0; i < 4; i++) mbar_init(sm.bar + i, 128);
      if constexpr (PassCaps<S>::TMA_PP8) {
        mbar_init(sm.bar + 4, 1);
        mbar_init(sm.bar + 5, 1);
      }
      mbar_init_fence();
    }
  }

  __device__ __forceinline__ PipelinedTile(const AttnParams &p_, const Program<S> &g_, const SmemTiles<T, S> &sm_)
      : p(p_), g(g_), sm(sm_), pages(p_, g_) {
    grp = g.tid >> 7, lt = g.tid & 127;
    hf = S::KV8 ? grp ^ 1 : grp;
    tma = (PassCaps<S>::TMA_PP || PassCaps<S>::TMA_PP8) && p.tma_rows > 0 && g.ntiles > 0;
  }

  /* A half is boxes when it is K, or V of a tile wholly inside [lo, hi) (a
   * boundary V tile keeps the 16-byte copies, which zero-fill rows past the
   * range: those may hold a page's unwritten tail, and P = 0 times NaN is
   * NaN). Box b of a tile is issued by thread lt = b R of the warpgroup,
   * which reads its page id a tile ahead instead of its row's. */
  __device__ __forceinline__ bool box(int n0) const { return tma && (hf == 0 || (n0 >= g.lo && n0 + S::BN <= g.hi)); }
  __device__ __forceinline__ bool box_owner() const { return lt < S::BN && (lt & (p.tma_rows - 1)) == 0; }
  __device__ __forceinline__ int lookup(int n0) const {
    if (box(n0)) return box_owner() ? pages.bt_row[fast_div(pages.box_key(n0 + lt), p.bs_magic, p.bs_shift)] : 0;
    return pages.page_id(lt, n0);
  }
  /* Offsets go to off[slot][row][hf]; a warpgroup's named barrier publishes them. */
  __device__ __forceinline__ void store(int slot, int n0, int pg) const {
    if (lt < S::BN)
      sm.off[(slot * S::BN + lt) * 2 + hf] =
          pages.row_elems(pg, n0 + lt, hf ? p.v_sb : p.k_sb, hf ? p.v_st : p.k_st);
  }
  /* This warpgroup's half of tile (stage, slot) as 16-byte copies; its
   * arrival on the stage's mbarrier comes when the copies have landed.
   * Committed as a group of their own (nobody waits on the group: the
   * mbarrier tracks them; the kernel's last wait_group covers them before
   * shared memory is reused). */
  __device__ __forceinline__ void issue(int stage, int slot) const {
    constexpr int CH = S::CHUNKS, LOADS = S::BN * CH / 128;
    unsigned char *dst =
        reinterpret_cast<unsigned char *>(hf ? sm.v : sm.k) + (size_t)stage * S::TILE_ELEMS * sizeof(T);
    const T *src = hf ? pages.vc : pages.kc;
    static_assert(S::BN * CH % 128 == 0, "whole copies per thread");
#pragma unroll
    for (int k = 0; k < LOADS; k++) copy16_k<T, S>(p, dst, src, sm.off, slot, hf, lt, k);
    mbar_arrive_copies(sm.bar + 2 * hf + stage);
    async_commit();
  }
  /* Tile n0's half (K for warpgroup 0, V for 1) into stage/slot from page id
   * pg (lookup's, a tile ahead): boxes, or offsets published to the
   * warpgroup then 16-byte copies. One cp.async group either way; all 128
   * threads arrive on the half's mbarrier either way (thread 0 with the
   * byte count for boxes). */
  __device__ __forceinline__ void fill(int stage, int slot, int n0, int pg) const {
    if (box(n0)) {
      uint64_t *bar = sm.bar + 2 * hf + stage;
      /* whole boxes, the zeros past the tensor's head dim included */
      if (lt == 0) mbar_arrive_expect_tx(bar, (uint32_t)(S::BN * 64 * S::PANELS * sizeof(T)));
      else mbar_arrive(bar);
      if (box_owner()) {
        const int jb = pages.box_key(n0 + lt), pi = fast_div(jb, p.bs_magic, p.bs_shift), row = jb - pi * p.block_size;
        unsigned char *dst = reinterpret_cast<unsigned char *>(hf ? sm.v : sm.k) +
                             (size_t)stage * S::TILE_ELEMS * sizeof(T) + (size_t)lt * 128;
        fence_proxy_async_smem(); /* earlier 16-byte copies into this stage, before the boxes */
#pragma unroll
        for (int pn = 0; pn < S::PANELS; pn++) /* at d80 and d96 the second panel's last columns are zeros */
          tma_load_4d(dst + pn * (S::BN * 128), hf ? &p.v_map : &p.k_map, pn * 64, g.kvh, row, pg, bar);
      }
      async_commit();
      return;
    }
    store(slot, n0, pg);
    named_sync(kBarWg0 + grp, 128);
    issue(stage, slot);
  }
  /* ---- FP8 halves ----
   * Chunk k of this thread (i = lt + 128 k of the half's NC chunks a row):
   * row i % 8 + 8 (i / (8 NC)), chunk (i / 8) % NC, so the 8 threads of a
   * shared-memory phase take 8 rows at one column: the 16-bit chunks they
   * store land in 8 distinct bank groups of the swizzled tile, and the code
   * chunks they load do too, as the code tile (16 codes a chunk) XORs chunk
   * c of row r with r % 8 (8 chunks a row) or (r / 2) % 4 (4 chunks, 64-byte
   * rows). With 8 codes a chunk (rows not 16-byte aligned) the code tile is
   * plain. A thread's chunks lie 128 / NC rows apart in one column. */
  template <int NC>
  struct Chunks { /* this thread's chunk k: row r0 + RS k, chunk c */
    static_assert(16 % NC == 0, "rows of 4, 8 or 16 chunks");
    static constexpr int RS = 128 / NC;
    int r0, c;
    __device__ __forceinline__ explicit Chunks(int lt) : r0((lt & 7) + 8 * (lt / (8 * NC))), c((lt >> 3) % NC) {}
    /* byte offsets at k = 0; chunk k adds k RS rows (r0 % 8, the swizzle, stays) */
    __device__ __forceinline__ int code16() const { return r0 * S::HD + ((c ^ (NC == 4 ? (r0 >> 1) & 3 : r0 & 7)) << 4); }
    __device__ __forceinline__ int code8() const { return r0 * S::HD + c * 8; }
    __device__ __forceinline__ uint32_t tile16(int cc) const { return kv_smem_offset<S::BN>(r0, cc); }
  };
  /* This warpgroup's codes of the tile whose offsets are in `slot` -> its
   * code tile, one cp.async group (columns past the head dim and keys
   * outside [lo, hi): zeros). */
  __device__ __forceinline__ void issue_codes(int slot) const {
    unsigned char *dst = hf ? sm.v8 : sm.k8;
    const unsigned char *src = static_cast<const unsigned char *>(hf ? pages.vc : pages.kc);
    if (p.kv8_wide) {
      const Chunks<CH16> ch(lt);
      const bool cok = ch.c < (p.head_dim >> 4);
      const int64_t *off = sm.off + (slot * S::BN + ch.r0) * 2 + hf;
      unsigned char *d = dst + ch.code16();
#pragma unroll
      for (int k = 0; k < LOADS16; k++) {
        const int64_t o = off[k * Chunks<CH16>::RS * 2];
        const bool ok = o >= 0 && cok;
        async_copy16(d + k * Chunks<CH16>::RS * S::HD, src + (ok ? o + ch.c * 16 : 0), ok);
      }
    } else {
      const Chunks<CH8> ch(lt);
      const bool cok = ch.c < (p.head_dim >> 3);
      const int64_t *off = sm.off + (slot * S::BN + ch.r0) * 2 + hf;
      unsigned char *d = dst + ch.code8();
#pragma unroll
      for (int k = 0; k < LOADS8; k++) {
        const int64_t o = off[k * Chunks<CH8>::RS * 2];
        const bool ok = o >= 0 && cok;
        async_copy8(d + k * Chunks<CH8>::RS * S::HD, src + (ok ? o + ch.c * 8 : 0), ok);
      }
    }
    async_commit();
  }
  /* Tile n0's codes (this warpgroup's half) from page id pg (lookup's):
   * TMA boxes (box(n0): K, or V wholly inside the key range), or offsets in
   * slot then copies. Either way after the warpgroup's barrier, so every
   * thread is done converting the code tile's previous codes; one cp.async
   * group either way (an empty one for boxes: Q's group stays the third
   * newest after the prologue). Boxes are whole 128-byte rows (d128), the
   * zeros past the tensor's head dim included; their 128-byte swizzle is
   * the code tile's (Chunks). */
  __device__ __forceinline__ void fill_codes(int slot, int n0, int pg) const {
    if constexpr (PassCaps<S>::TMA_PP8) {
      if (box(n0)) {
        named_sync(kBarWg0 + grp, 128);
        uint64_t *bar = sm.bar + 4 + hf;
        if (lt == 0) mbar_arrive_expect_tx(bar, (uint32_t)(S::BN * S::HD));
        if (box_owner()) {
          const int jb = pages.box_key(n0 + lt), pi = fast_div(jb, p.bs_magic, p.bs_shift), row = jb - pi * p.block_size;
          fence_proxy_async_smem(); /* the code tile's earlier copies, before the boxes */
          tma_load_4d((hf ? sm.v8 : sm.k8) + lt * S::HD, hf ? &p.v_map : &p.k_map, 0, g.kvh, row, pg, bar);
        }
        async_commit();
        return;
      }
    }
    store(slot, n0, pg);
    named_sync(kBarWg0 + grp, 128);
    issue_codes(slot);
  }
  /* The codes this thread copied last (waited for: its only pending group)
   * -> f16 in the swizzled 16-bit tile of `stage` (which must be free). */
  template <bool FNUZ>
  __device__ __forceinline__ void convert_codes(int stage) const {
    const unsigned char *src = hf ? sm.v8 : sm.k8;
    unsigned char *dst =
        reinterpret_cast<unsigned char *>(hf ? sm.v : sm.k) + (size_t)stage * S::TILE_ELEMS * sizeof(T);
    if (p.kv8_wide) { /* in batches, loads first: their latencies overlap */
      using C = Chunks<CH16>;
      const C ch(lt);
      const unsigned char *sc = src + ch.code16();
      unsigned char *d0 = dst + ch.tile16(2 * ch.c), *d1 = dst + ch.tile16(2 * ch.c + 1);
#pragma unroll
      for (int k0 = 0; k0 < LOADS16; k0 += kConvBatch) {
        uint4 x[kConvBatch];
#pragma unroll
        for (int k = 0; k < kConvBatch; k++) x[k] = *reinterpret_cast<const uint4 *>(sc + (k0 + k) * C::RS * S::HD);
#pragma unroll
        for (int k = 0; k < kConvBatch; k++) {
          uint32_t h[8];
          CodeFrags<FNUZ>::cvt4(x[k].x, h[0], h[1]);
          CodeFrags<FNUZ>::cvt4(x[k].y, h[2], h[3]);
          CodeFrags<FNUZ>::cvt4(x[k].z, h[4], h[5]);
          CodeFrags<FNUZ>::cvt4(x[k].w, h[6], h[7]);
          *reinterpret_cast<uint4 *>(d0 + (k0 + k) * C::RS * 128) = make_uint4(h[0], h[1], h[2], h[3]);
          *reinterpret_cast<uint4 *>(d1 + (k0 + k) * C::RS * 128) = make_uint4(h[4], h[5], h[6], h[7]);
        }
      }
    } else {
      using C = Chunks<CH8>;
      const C ch(lt);
      const unsigned char *sc = src + ch.code8();
      unsigned char *d0 = dst + ch.tile16(ch.c);
#pragma unroll
      for (int k0 = 0; k0 < LOADS8; k0 += 8) {
        uint2 x[8];
#pragma unroll
        for (int k = 0; k < 8; k++) x[k] = *reinterpret_cast<const uint2 *>(sc + (k0 + k) * C::RS * S::HD);
#pragma unroll
        for (int k = 0; k < 8; k++) {
          uint32_t h[4];
          CodeFrags<FNUZ>::cvt4(x[k].x, h[0], h[1]);
          CodeFrags<FNUZ>::cvt4(x[k].y, h[2], h[3]);
          *reinterpret_cast<uint4 *>(d0 + (k0 + k) * C::RS * 128) = make_uint4(h[0], h[1], h[2], h[3]);
        }
      }
    }
  }
  /* Tile n0's codes (filled last by this warpgroup) landed, converted into
   * 16-bit stage `stage`, and the stage's mbarrier told. */
  __device__ __forceinline__ void land(int stage, int n0) {
    bool boxed = false;
    if constexpr (PassCaps<S>::TMA_PP8) boxed = box(n0);
    if (boxed) {
      mbar_wait(sm.bar + 4 + hf, cpar);
      cpar ^= 1u;
    } else {
      async_wait<0>();
    }
    if (p.fp8_fnuz) convert_codes<true>(stage);
    else convert_codes<false>(stage);
    fence_proxy_async_smem(); /* the conversions, before wgmma reads them */
    mbar_arrive(sm.bar + 2 * hf + stage);
  }
  /* FP8: each warpgroup lands its half of tile 0 and sends the codes of
   * tile 1. Two cp.async groups after Q's on every thread, empty where there
   * is no tile or the tile came as boxes (land then waits on the mbarrier,
   * not on the groups): mainloop_sm90's wait for Q counts on them. */
  __device__ __forceinline__ void prologue_codes() {
    const int n0 = g.n_begin;
    const int pg0 = lookup(n0), pg1 = lookup(n0 + S::BN);
    if (g.ntiles > 0) {
      fill_codes(0, n0, pg0);
      land(0, n0);
    } else {
      async_commit();
    }
    if (g.ntiles > 1) fill_codes(1, n0 + S::BN, pg1);
    else async_commit();
    pg_next = lookup(n0 + 2 * S::BN);
  }
  /* FP8, in phase it while the warpgroup's own products run, each
   * warpgroup converts a tile half whose stage no product in flight reads,
   * then sends the codes of its next half:
   * - the second (K): K(it+1) into the stage of K(it-1), which both
   *   warpgroups' products of phase it - 1 read: its own are done, the
   *   first's too (it took kBarVFree, arrived after them, before handing the
   *   turn over; phase 0: the stage is unused);
   * - the first (V): V(it) into the stage of V(it-2), read by both
   *   warpgroups' products of phase it - 1: its own are done, the second's
   *   once that arrives on kBarVOld after them (phase 1: the stage is unused).
   * Neither waits for the other's conversion of the same phase, so the two
   * overlap the products instead of running one after the other. */
  template <bool PV>
  __device__ __forceinline__ void convert_ahead(int it) {
    const int t = hf == 0 ? it + 1 : it; /* the tile half converted now */
    if (t < 1 || t >= g.ntiles) return;
    if (hf == 1 && t >= 2) named_sync(kBarVOld, 256);
    land(t & 1, g.n_begin + t * S::BN);
    if (t + 1 < g.ntiles) {
      fill_codes((t + 1) & 1, g.n_begin + (t + 1) * S::BN, pg_next);
      pg_next = lookup(g.n_begin + (t + 2) * S::BN);
    }
  }

  /* K(0) and K(1) by the first warpgroup, V(0) by the second; V(1) and K(2)
   * follow inside the loop. One round trip for the page ids. FP8: tile 0
   * landed, tile 1's codes out (prologue_codes). */
  __device__ __forceinline__ void prologue() {
    if constexpr (S::KV8) {
      prologue_codes();
    } else {
      const int n0 = g.n_begin;
      const int pg0 = lookup(n0), pg1 = lookup(n0 + S::BN);
      const int pg2 = grp == 0 ? lookup(n0 + 2 * S::BN) : 0;
      if (g.ntiles > 0) fill(0, 0, n0, pg0);
      else async_commit();
      if (grp == 0 && g.ntiles > 1) fill(1, 1, n0 + S::BN, pg1);
      else async_commit(); /* two groups after Q's on every thread */
      pg_next = grp == 0 ? pg2 : pg1;
    }
  }

  /* The products' registers (output and P), pinned here. */
  __device__ __forceinline__ static void keep_pv(FragC (&acc)[S::DK], FragA (&pa)[S::NK]) {
#pragma unroll
    for (int d = 0; d < S::DK; d++) wg_keep(acc[d]);
#pragma unroll
    for (int n = 0; n < S::NK; n++) wg_keep(pa[n]);
  }
  /* A phase's start: its K (QK) and V (PV) stages landed and seen by the
   * async proxy, this warpgroup's turn, the registers of its products pinned. */
  template <bool PV, bool QK>
  __device__ __forceinline__ static void enter_turn(const SmemTiles<T, S> &sm, int grp, int it, FragC (&acc)[S::DK],
                                                    FragA (&pa)[S::NK]) {
    if constexpr (QK) mbar_wait(sm.bar + (it & 1), (uint32_t)(it >> 1) & 1u);
    if constexpr (PV) mbar_wait(sm.bar + 2 + ((it - 1) & 1), (uint32_t)((it - 1) >> 1) & 1u);
    fence_proxy_async_smem(); /* the copies seen through the mbarriers, before wgmma reads them */
    named_sync(kBarSched0 + grp, 256);
    keep_pv(acc, pa);
    wg_fence();
  }
  template <bool PV, bool QK>
  __device__ __forceinline__ void enter(int it, FragC (&acc)[S::DK], FragA (&pa)[S::NK]) {
    enter_turn<PV, QK>(sm, grp, it, acc, pa);
  }
  /* A phase's products: S = Q K(it)^T (QK) and O += P(it-1) V(it-1) (PV);
   * SPLIT commits Q K^T and P V as two groups (the overlap waits for the
   * older alone), else P V then Q K^T as one. */
  template <bool PV, bool QK, bool SPLIT>
  __device__ __forceinline__ static void issue_products(const SmemTiles<T, S> &sm, int grp, int it,
                                                        FragC (&s)[S::NK], FragC (&acc)[S::DK], FragA (&pa)[S::NK]) {
    if constexpr (SPLIT) {
      if constexpr (QK) {
        wg_issue_scores<MT, S>(s, smem_u32(sm.q), grp * 64, smem_u32(sm.k + (it & 1) * S::TILE_ELEMS));
        wg_commit();
      }
      if constexpr (PV) {
        wg_issue_pv<MT, S>(acc, pa, smem_u32(sm.v + ((it - 1) & 1) * S::TILE_ELEMS));
        wg_commit();
      }
    } else {
      if constexpr (PV) wg_issue_pv<MT, S>(acc, pa, smem_u32(sm.v + ((it - 1) & 1) * S::TILE_ELEMS));
      if constexpr (QK) wg_issue_scores<MT, S>(s, smem_u32(sm.q), grp * 64, smem_u32(sm.k + (it & 1) * S::TILE_ELEMS));
      wg_commit();
    }
  }
  /* 16-bit refills: K(it+2) into K(it)'s stage by the first warpgroup once
   * the second is done with it (kfree: there is such a tile), V(it+1) by
   * the second, each with the page id of the next. */
  __device__ __forceinline__ void refill_k(int it, bool kfree) {
    if (grp == 0 && kfree) {
      named_sync(kBarKFree, 256);
      fill(it & 1, it & 1, g.n_begin + (it + 2) * S::BN, pg_next);
      pg_next = lookup(g.n_begin + (it + 3) * S::BN);
    }
  }
  __device__ __forceinline__ void refill_v(int it) {
    fill((it + 1) & 1, (it + 1) & 1, g.n_begin + (it + 1) * S::BN, pg_next);
    pg_next = lookup(g.n_begin + (it + 2) * S::BN);
  }
  /* Softmax weights while P V runs (phase_overlap) from head dim 128 up,
   * where P V is long enough to hide them; below 128 it measured slower
   * (docs/design/prefill.md#intra-warpgroup-overlap). */
  static constexpr bool kOverlapPV = S::HD >= 128;
  /* One product phase: O += P(it-1) V(it-1) (PV) and S = Q K(it)^T (QK)
   * issued together, then the softmax of S (phase_joint; phase_overlap
   * starts the softmax while P V runs). Fixed per instantiation: ptxas
   * serialises every wgmma of a kernel that issues one on a path it cannot
   * prove uniform. A warpgroup issues its products only in its turn
   * (kBarSched0 + grp, handed over right after issuing). Stages: K(it) and
   * V(it) land in stage it % 2, each half tracked by its own mbarrier (phase
   * it / 2). Refills: the first warpgroup copies K(it+2) once the second is
   * done with K(it) (kBarKFree), after its own softmax; the second copies
   * V(it+1) once the first is done with V(it-1) (kBarVFree), right after its
   * products. The second takes kBarVFree before handing the turn back, and
   * the first takes kBarKFree before its next turn, so neither named barrier
   * is passed twice by the same side before the other side took it. FP8:
   * no refills here; each warpgroup converts a tile half while its products
   * run (convert_ahead: the second K(it+1), the first V(it), ordered by
   * kBarVFree and kBarVOld; kBarKFree is not used). */
  template <bool PV, bool QK>
  __device__ __forceinline__ void phase(int it, OnlineSoftmax<S> &sx, FragC (&acc)[S::DK], FragA (&pa)[S::NK]) {
    if constexpr (!S::KV8 && kOverlapPV) phase_overlap<PV, QK>(it, sx, acc, pa);
    else phase_joint<PV, QK>(it, sx, acc, pa);
  }
  /* Both products in one group, the softmax after both. */
  template <bool PV, bool QK>
  __device__ __forceinline__ void phase_joint(int it, OnlineSoftmax<S> &sx, FragC (&acc)[S::DK], FragA (&pa)[S::NK]) {
    enter<PV, QK>(it, acc, pa);
    FragC s[S::NK];
    issue_products<PV, QK, false>(sm, grp, it, s, acc, pa);
    const bool vissue = it + 1 < g.ntiles, vfree = PV && vissue; /* V(it+1) refills V(it-1)'s stage */
    if (grp == 1 && vfree) named_sync(kBarVFree, 256);
    named_arrive(kBarSched0 + (grp ^ 1), 256);
    if constexpr (S::KV8) convert_ahead<PV>(it);
    wg_wait_all();
#pragma unroll
    for (int d = 0; d < S::DK; d++) wg_keep(acc[d]);
#pragma unroll
    for (int n = 0; n < S::NK; n++) {
      wg_keep(pa[n]);
      wg_keep(s[n]);
    }
    const bool kfree = it + 2 < g.ntiles; /* K(it+2) refills K(it)'s stage */
    if (grp == 0 && vfree) {
      fence_proxy_async_smem();
      named_arrive(kBarVFree, 256);
    }
    if (grp == 1 && kfree && !S::KV8) {
      fence_proxy_async_smem();
      named_arrive(kBarKFree, 256);
    }
    if (grp == 1 && vfree && S::KV8) named_arrive(kBarVOld, 256); /* V(it-1)'s stage, for V(it+1) */
    if constexpr (!S::KV8) {
      if (grp == 1 && vissue) {
        refill_v(it);
      }
    }
    if constexpr (QK) {
      sx.template tile<MT, PSHIFT>(p, g, g.n_begin + it * S::BN, s, pa, acc);
      if constexpr (!S::KV8) refill_k(it, kfree);
    }
  }
  /* 16-bit stages, FlashAttention-3's intra-warpgroup overlap: Q K(it)^T
   * is committed before P(it-1) V(it-1), the warpgroup waits for the scores
   * alone and computes the softmax weights while its P V products still run;
   * P and the output's rescale wait for those. The first warpgroup so
   * releases V(it-1)'s stage only after its weights, and the second takes
   * that release right before it refills the stage, not before handing the
   * turn over (which would make its turn wait for the first's softmax): one
   * named barrier per V stage, each passed once every two phases, so
   * neither side passes one twice before the other took it (the first's
   * next arrival on a stage's barrier comes two turns later). */
  template <bool PV, bool QK>
  __device__ __forceinline__ void phase_overlap(int it, OnlineSoftmax<S> &sx, FragC (&acc)[S::DK],
                                                FragA (&pa)[S::NK]) {
    enter<PV, QK>(it, acc, pa);
    FragC s[S::NK];
    issue_products<PV, QK, true>(sm, grp, it, s, acc, pa);
    named_arrive(kBarSched0 + (grp ^ 1), 256);
    const bool vissue = it + 1 < g.ntiles, vfree = PV && vissue; /* V(it+1) refills V(it-1)'s stage */
    const bool kfree = it + 2 < g.ntiles;                       /* K(it+2) refills K(it)'s stage */
    const int vbar = (it - 1) & 1 ? kBarVFree1 : kBarVFree;
    float alpha[kFragCSlots];
    if constexpr (QK) {
      if constexpr (PV) wg_wait_but_newest();
      else wg_wait_all();
#pragma unroll
      for (int n = 0; n < S::NK; n++) wg_keep(s[n]);
      if (grp == 1 && kfree) {
        fence_proxy_async_smem();
        named_arrive(kBarKFree, 256);
      }
      sx.template weights<PSHIFT>(p, g, g.n_begin + it * S::BN, s, alpha);
    }
    if constexpr (PV) {
      wg_wait_all();
      keep_pv(acc, pa);
      if (grp == 0 && vfree) {
        fence_proxy_async_smem();
        named_arrive(vbar, 256);
      }
    }
    if (grp == 1 && vissue) {
      if (vfree) named_sync(vbar, 256);
      refill_v(it);
    }
    if constexpr (QK) {
      sx.template finish<MT>(s, pa, acc, alpha);
      refill_k(it, kfree);
    }
  }
};

/* The phases of a program's loop over ntiles >= 1 tiles (mainloop_sm90,
 * mainloop_ws), on L's phase and warpgroup: Q K(0)^T alone, then both
 * products per tile, then P V of the last tile alone; the first warpgroup
 * goes first. The second hands the turn over once more than the first takes
 * it (its arrival before the first phase): the first takes that one last, so
 * no named barrier is left with arrivals pending when the program goes on or
 * exits. TURNS false leaves that arrival and its taking to the caller
 * (ws_consume: the turn passes on from item to item). */
template <bool TURNS = true, class L, class S>
__device__ __forceinline__ void run_phases(L &l, int ntiles, OnlineSoftmax<S> &sx, FragC (&acc)[S::DK]) {
  FragA pa[S::NK];
  if (TURNS && l.grp == 1) named_arrive(kBarSched0, 256);
  l.template phase<false, true>(0, sx, acc, pa);
  for (int it = 1; it < ntiles; it++) l.template phase<true, true>(it, sx, acc, pa);
  l.template phase<true, false>(ntiles, sx, acc, pa);
  if (TURNS && l.grp == 0) named_sync(kBarSched0, 256);
}

/* The pipelined tile's loop; Q arrives as the oldest cp.async group. */
template <typename T, class S>
__device__ __forceinline__ void mainloop_sm90(const AttnParams &p, const Program<S> &g, const SmemTiles<T, S> &sm,
                                              OnlineSoftmax<S> &sx, FragC (&acc)[S::DK]) {
  PipelinedTile<T, S> pt(p, g, sm);
  pt.prologue();
  sx.rows(p, g);
  async_wait<2>(); /* Q's group, before the two of the first K/V copies; wgmma (FP8: QToF16) reads Q next */
  fence_proxy_async_smem();
  block_sync();
  if constexpr (S::KV8) sx.kd *= QToF16<T>::template run<S, true>(sm.q, g.tid);
#pragma unroll
  for (int d = 0; d < S::DK; d++) zero(acc[d]);
  sx.reset();
  if (g.ntiles > 0) run_phases(pt, g.ntiles, sx, acc);
  if constexpr (S::KV8) sx.template unshift<kCodePShift>(acc);
}

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_MAINLOOP_SM90_CUH */
