/* kv_load.cuh: how K/V tiles of the paged caches reach shared memory for the
 * padded (and single-warpgroup wgmma) tiles: 16-byte asynchronous copies on
 * every vendor (KvCopies), or on sm_90 TMA boxes of whole page rows (KvBoxes).
 * Tiles are decoupled from pages: a BLOCK_N-key tile gathers its rows from
 * whatever pages hold them. The two-warpgroup tile has its own loader
 * (mainloop_sm90.cuh) built on the page lookups here. */
#ifndef ANYATTN_GPU_KERNEL_KV_LOAD_CUH
#define ANYATTN_GPU_KERNEL_KV_LOAD_CUH

#include "scheduler.cuh"
#include "shape.cuh"

namespace aa {

/* Where the key rows of the program's sequence and kv head live. */
template <typename T, class S>
struct KvPages {
  const AttnParams &p;
  const Program<S> &g;
  typedef typename CacheElem<T, S>::type KT; /* T, or an fp8 code */
  const int32_t *bt_row; /* the sequence's row of the block table */
  const KT *kc, *vc;     /* the caches at the program's kv head */

  __device__ __forceinline__ KvPages(const AttnParams &p_, const Program<S> &g_) : p(p_), g(g_) {
    bt_row = p.block_table + (int64_t)g.w.seq * p.bt_stride;
    kc = static_cast<const KT *>(p.k) + (int64_t)g.kvh * p.k_sh;
    vc = static_cast<const KT *>(p.v) + (int64_t)g.kvh * p.v_sh;
  }
  /* Page id of row r of the tile at n0 (-1 outside [lo, hi)). */
  __device__ __forceinline__ int page_id(int r, int n0) const {
    const int j = n0 + r;
    return (r < S::BN && j >= g.lo && j < g.hi) ? bt_row[fast_div(j, p.bs_magic, p.bs_shift)] : -1;
  }
  /* Element offset of key j's row in a cache of block/token strides sb, st (-1: no row). */
  __device__ __forceinline__ int64_t row_elems(int pg, int j, int64_t sb, int64_t st) const {
    const int jr = j - fast_div(j, p.bs_magic, p.bs_shift) * p.block_size;
    return pg >= 0 ? (int64_t)pg * sb + (int64_t)jr * st : (int64_t)-1;
  }
  /* First key of the TMA box meant to start at key j0 (a multiple of R =
   * p.tma_rows), or of the nearest box inside [lo, hi). R is a power of two:
   * BLOCK_N, or a block size dividing it (the host checks). */
  __device__ __forceinline__ int box_key(int j0) const {
    const int mask = ~(p.tma_rows - 1);
    return min(max(j0, g.lo & mask), (g.hi - 1) & mask);
  }
};

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

/* Paging in two steps. Step 1, one iteration ahead: the threads owning a row
 * read its page id (the read's latency hides behind a tile of math), then
 * store the row's K and V addresses in a shared slot. Step 2: every thread
 * issues its 16-byte copies from those addresses. Keys outside [lo, hi) are
 * masked anyway: no row (kNoRow), the copy zero-fills; so do the columns from
 * p.head_dim on (a head dim padded to the compiled one). WG: the tiles are
 * stored swizzled for wgmma. FP8 caches (S::KV8): codes into the staging
 * ring, 16 per copy for FRAG8 shapes where p.kv8_wide, else 8. FRAG8 shapes
 * read them from there (products.cuh); the others have each thread convert,
 * after its copies of a tile have landed, the 8-code chunks it copied into
 * the 16-bit tiles (convert): no barrier between copy and conversion, the
 * block barrier before the products covers both. */
template <typename T, class S, bool WG>
struct KvCopies {
  static constexpr int ROWS_PT = (S::BN + S::THREADS - 1) / S::THREADS; /* page ids per thread */
  static constexpr int LOADS = (S::BN * S::CHUNKS + S::THREADS - 1) / S::THREADS; /* 16-byte chunks per thread */
  const KvPages<T, S> &pg;
  const SmemTiles<T, S> &sm;

  __device__ __forceinline__ void lookup_pages(int n0, int (&ids)[ROWS_PT]) const {
#pragma unroll
    for (int q = 0; q < ROWS_PT; q++) ids[q] = pg.page_id(pg.g.tid + q * S::THREADS, n0);
  }
  typedef typename KvPages<T, S>::KT KT;
  /* A slot holds each row's K and V addresses: the row's first element, or
   * for no row the cache's base with kNoRow (bit 63) set. A copy then tests
   * one sign and masks one bit, and its source is a valid address either way
   * (no bytes are read from it without a row). */
  static constexpr uint64_t kNoRow = 1ull << 63;
  __device__ __forceinline__ static int64_t row_addr(const KT *base, int64_t e) {
    const uint64_t a = reinterpret_cast<uintptr_t>(e >= 0 ? base + e : base);
    return (int64_t)(e >= 0 ? a : a | kNoRow);
  }
  __device__ __forceinline__ static const KT *row_ptr(int64_t a) {
    return reinterpret_cast<const KT *>((uint64_t)a & ~kNoRow);
  }
  __device__ __forceinline__ static bool has_row(int64_t a) { return (int)((uint64_t)a >> 32) >= 0; }
  __device__ __forceinline__ void store_rows(int slot, int n0, const int (&ids)[ROWS_PT]) const {
#pragma unroll
    for (int q = 0; q < ROWS_PT; q++) {
      const int r = pg.g.tid + q * S::THREADS;
      if (r < S::BN) {
        int64_t *o = sm.off + (slot * S::BN + r) * 2;
        const KT *kc = static_cast<const KT *>(pg.p.k) + (int64_t)pg.g.kvh * pg.p.k_sh;
        const KT *vc = static_cast<const KT *>(pg.p.v) + (int64_t)pg.g.kvh * pg.p.v_sh;
        o[0] = row_addr(kc, pg.row_elems(ids[q], n0 + r, pg.p.k_sb, pg.p.k_st));
        o[1] = row_addr(vc, pg.row_elems(ids[q], n0 + r, pg.p.v_sb, pg.p.v_st));
      }
    }
  }
  /* Chunk k of this thread: row r, column c of a tile of CH chunks per row. */
  template <int CH = S::CHUNKS>
  __device__ __forceinline__ static void chunk(int tid, int k, int &r, int &c) {
    if constexpr (S::THREADS % CH == 0) { /* fixed column per thread: immediate smem offsets */
      r = tid / CH + k * (S::THREADS / CH);
      c = tid % CH;
    } else {
      r = (tid + k * S::THREADS) / CH;
      c = (tid + k * S::THREADS) % CH;
    }
  }
  /* Byte offset of chunk (r, c) in a 16-bit tile. */
  __device__ __forceinline__ static uint32_t tile_offset(int r, int c) {
    return WG ? kv_smem_offset<S::BN>(r, c) : (uint32_t)((r * S::ROW + c * 8) * sizeof(T));
  }
  /* Cache rows of the compiled head dim that are no whole number of 128-byte
   * lines (d80 and d96 16-bit rows, fp8 rows but d128's) end inside a line
   * the neighbouring kv head's program reads too: their copies fetch whole
   * lines into L2 (async_copy16<true>, docs/design/decode.md). */
  static constexpr bool LINE = (S::HD * sizeof(KT)) % 128 != 0;
  __device__ __forceinline__ void issue_tile(int stage, int slot) const {
    constexpr int CH = S::CHUNKS;
    const int tid = pg.g.tid;
    const int nch = pg.p.head_dim >> 3; /* 8-element chunks of a cache row */
    if constexpr (S::KV8) {
      unsigned char *dk = sm.k8 + stage * S::K8_TILE_BYTES, *dv = sm.v8 + stage * S::V8_TILE_BYTES;
      if (S::FRAG8 && pg.p.kv8_wide) { /* 16 codes per copy: cache rows and head dim in 16-byte units */
        constexpr int CH16 = S::HD / 16, LOADS16 = (S::BN * CH16 + S::THREADS - 1) / S::THREADS;
        /* a fixed column per thread whose rows k lie a multiple of 8 apart
         * (the swizzle's period): one shared-memory offset, plus constants */
        constexpr int RS = S::THREADS / CH16;
        constexpr bool FIXED = S::THREADS % CH16 == 0 && (!S::SW8 || RS % 8 == 0);
        int r0, c0;
        chunk<CH16>(tid, 0, r0, c0);
        const bool cok = c0 < (pg.p.head_dim >> 4);
        const int ko0 = code_offset<S::SW8>(r0, c0 * 16, S::K8_ROW), vo0 = code_offset<S::SW8>(r0, c0 * 16, S::V8_ROW);
#pragma unroll
        for (int k = 0; k < LOADS16; k++) {
          int r, c;
          chunk<CH16>(tid, k, r, c);
          if ((S::BN * CH16) % S::THREADS == 0 || r < S::BN) {
            const int64_t ak = sm.off[(slot * S::BN + r) * 2], av = sm.off[(slot * S::BN + r) * 2 + 1];
            const bool ok = (FIXED ? cok : c < (pg.p.head_dim >> 4)) && has_row(ak); /* V has a row with K */
            const int ko = FIXED ? ko0 + k * RS * S::K8_ROW : code_offset<S::SW8>(r, c * 16, S::K8_ROW);
            const int vo = FIXED ? vo0 + k * RS * S::V8_ROW : code_offset<S::SW8>(r, c * 16, S::V8_ROW);
            async_copy16<LINE>(dk + ko, row_ptr(ak) + c * 16, ok);
            async_copy16<LINE>(dv + vo, row_ptr(av) + c * 16, ok);
          }
        }
        return;
      }
#pragma unroll
      for (int k = 0; k < LOADS; k++) {
        int r, c;
        chunk(tid, k, r, c);
        if ((S::BN * CH) % S::THREADS == 0 || r < S::BN) {
          const int64_t ak = sm.off[(slot * S::BN + r) * 2], av = sm.off[(slot * S::BN + r) * 2 + 1];
          const bool ok = c < nch && has_row(ak); /* V has a row with K */
          async_copy8<LINE>(dk + code_offset<S::SW8>(r, c * 8, S::K8_ROW), row_ptr(ak) + c * 8, ok);
          async_copy8<LINE>(dv + code_offset<S::SW8>(r, c * 8, S::V8_ROW), row_ptr(av) + c * 8, ok);
        }
      }
      return;
    }
    T *dk = sm.k + stage * S::TILE_ELEMS;
    T *dv = sm.v + stage * S::TILE_ELEMS;
#pragma unroll
    for (int k = 0; k < LOADS; k++) {
      int r, c;
      chunk(tid, k, r, c);
      /* tid < THREADS: with an exact split every r is in range */
      if ((S::BN * CH) % S::THREADS == 0 || r < S::BN) {
        const int64_t ak = sm.off[(slot * S::BN + r) * 2], av = sm.off[(slot * S::BN + r) * 2 + 1];
        const bool ok = c < nch && has_row(ak); /* V has a row with K */
        const uint32_t o = tile_offset(r, c);
        async_copy16<LINE>(reinterpret_cast<unsigned char *>(dk) + o, row_ptr(ak) + c * 8, ok);
        async_copy16<LINE>(reinterpret_cast<unsigned char *>(dv) + o, row_ptr(av) + c * 8, ok);
      }
    }
  }
  /* FP8: this thread's chunks of the staged tile in `stage` (its own copies,
   * landed) -> the 16-bit K and V tiles. Codes of masked keys and padded
   * columns were zero-filled: they become zeros. */
  __device__ __forceinline__ void convert(int stage) const {
    constexpr int CH = S::CHUNKS;
    const unsigned char *sk = sm.k8 + stage * S::K8_TILE_BYTES, *sv = sm.v8 + stage * S::V8_TILE_BYTES;
    const bool fnuz = pg.p.fp8_fnuz != 0;
#pragma unroll
    for (int k = 0; k < LOADS; k++) {
      int r, c;
      chunk(pg.g.tid, k, r, c);
      if ((S::BN * CH) % S::THREADS == 0 || r < S::BN) {
        const uint2 ck = *reinterpret_cast<const uint2 *>(sk + r * S::HD + c * 8);
        const uint2 cv = *reinterpret_cast<const uint2 *>(sv + r * S::HD + c * 8);
        const uint32_t o = tile_offset(r, c);
        *reinterpret_cast<uint4 *>(reinterpret_cast<unsigned char *>(sm.k) + o) = fp8x8_to<T>(ck, fnuz);
        *reinterpret_cast<uint4 *>(reinterpret_cast<unsigned char *>(sm.v) + o) = fp8x8_to<T>(cv, fnuz);
      }
    }
  }
  /* The first STAGES tiles' page ids are read at once: one round trip; the
   * first STAGES - 1 tiles' copies go out, each its own cp.async group. */
  __device__ __forceinline__ void prologue() const {
    int ids[S::PIPE_STAGES][ROWS_PT];
#pragma unroll
    for (int st = 0; st < S::PIPE_STAGES; st++) lookup_pages(pg.g.n_begin + st * S::BN, ids[st]);
#pragma unroll
    for (int st = 0; st < S::PIPE_STAGES - 1; st++) {
      store_rows(st & 1, pg.g.n_begin + st * S::BN, ids[st]);
      block_sync();
      if (st < pg.g.ntiles) issue_tile(st, st & 1);
      async_commit();
    }
    store_rows((S::PIPE_STAGES - 1) & 1, pg.g.n_begin + (S::PIPE_STAGES - 1) * S::BN, ids[S::PIPE_STAGES - 1]);
  }
  /* Tile `it` ready in its stage: tile nx's copies out, tile nx + 1's page
   * ids on their way (into ids, stored after this tile's math). */
  __device__ __forceinline__ void wait_tile(int nx, int (&ids)[ROWS_PT]) const {
    if (nx < pg.g.ntiles) issue_tile(nx % S::PIPE_STAGES, nx & 1);
    lookup_pages(pg.g.n_begin + (nx + 1) * S::BN, ids);
    async_commit();
    async_wait<S::PIPE_STAGES - 1>();
    if constexpr (S::KV8 && !S::FRAG8) convert((nx - (S::PIPE_STAGES - 1)) % S::PIPE_STAGES); /* the tile about to be used */
    if constexpr (WG) fence_proxy_async_smem(); /* this thread's copies (or conversions), before wgmma reads them */
    block_sync();
  }
};

/* TMA boxes (sm_90): lane b of warp 0 owns box b of a tile, the R =
 * p.tma_rows cache rows from key n0 + b R, all in one page (R is the block
 * size, or BLOCK_N when pages are larger). It reads the box's page id a tile
 * ahead into registers and issues the box of K and of V; lane 0 announces the
 * stage's bytes on the stage's mbarrier. A box wholly outside [lo, hi) reads
 * the nearest box inside instead: finite cache data whose keys are masked (V
 * rows outside [lo, hi) are zeroed after landing, as they may hold a page's
 * unwritten tail).
 * Boxes only for programs of kMinTiles tiles or more: on one H200 the first
 * box lands ~0.3 us later than the first 16-byte copies (1x500, one tile per
 * program: 9.6 vs 9.4-9.5 us), and the boxes pay off in the tiles after it
 * (1x8192, 8 tiles: 22.8-23.1 vs 23.3 us); see docs/design/decode.md. A choice
 * per program, from its own tile count. */
template <typename T, class S>
struct KvBoxes {
  static constexpr int kMinTiles = 3;
  const KvPages<T, S> &pg;
  const SmemTiles<T, S> &sm;
  bool on;    /* this program takes boxes */
  bool owner; /* this lane issues a box */
  int lane;
  int next_pg = 0, next_row = 0; /* the next tile's box */

  __device__ __forceinline__ KvBoxes(const KvPages<T, S> &pg_, const SmemTiles<T, S> &sm_) : pg(pg_), sm(sm_) {
    on = PassCaps<S>::TMA && pg.p.tma_rows > 0 && pg.g.ntiles >= kMinTiles; /* run encoded the tensor maps */
    lane = lane_id();
    owner = on && pg.g.warp == 0 && lane * pg.p.tma_rows < S::BN;
  }
  /* The tensor maps are parameters, not outputs of the kernel before: fetch
   * them while it drains (the first box would wait for them otherwise). */
  __device__ __forceinline__ static void prefetch_maps(const AttnParams &p) {
    if constexpr (kTileTma) {
      if (p.tma_rows > 0 && threadIdx.x == 0) { /* run sets it only for kernels that take boxes */
        tma_prefetch_map(&p.k_map);
        tma_prefetch_map(&p.v_map);
      }
    }
  }
  __device__ __forceinline__ void lookup(int n0, int &page, int &row) const {
    const int jb = pg.box_key(n0 + lane * pg.p.tma_rows);
    const int pi = fast_div(jb, pg.p.bs_magic, pg.p.bs_shift);
    row = jb - pi * pg.p.block_size;
    page = pg.bt_row[pi];
  }
  __device__ __forceinline__ void issue(int stage, int page, int row) const {
    if (pg.g.warp == 0) {
      if (lane == 0) mbar_arrive_expect_tx(sm.bar + stage, (uint32_t)(2 * S::BN * S::ROW * sizeof(T)));
      if (owner) {
        const int r0 = (stage * S::BN + lane * pg.p.tma_rows) * S::ROW;
        tma_load_4d(sm.k + r0, &pg.p.k_map, 0, pg.g.kvh, row, page, sm.bar + stage);
        tma_load_4d(sm.v + r0, &pg.p.v_map, 0, pg.g.kvh, row, page, sm.bar + stage);
      }
    }
  }
  /* The first STAGES tiles' boxes at once (one round trip for their page
   * ids), the first STAGES - 1 issued with no barrier between; empty cp.async
   * groups keep Q's group where the wait after the prologue expects it. */
  __device__ __forceinline__ void prologue() {
    constexpr int ST = S::PIPE_STAGES;
    int pages[ST] = {}, rows[ST] = {};
    if (owner) {
#pragma unroll
      for (int st = 0; st < ST; st++) lookup(pg.g.n_begin + st * S::BN, pages[st], rows[st]);
    }
    /* The mbarriers, while the page ids are on their way: visible to the copy
     * engine (the fence) and to warp 0's lanes before any box names them; the
     * other warps wait on them only after the block barrier that follows. */
    if (pg.g.warp == 0) {
      if (lane == 0) {
        for (int i = 0; i < ST; i++) mbar_init(sm.bar + i, 1);
        mbar_init_fence();
      }
      warp_sync();
    }
#pragma unroll
    for (int st = 0; st < ST - 1; st++) {
      if (st < pg.g.ntiles) issue(st, pages[st], rows[st]);
      async_commit();
    }
    next_pg = pages[ST - 1], next_row = rows[ST - 1];
  }
  /* Tile `it` landed in its stage: tile nx's boxes out, tile nx + 1's page id
   * on its way; V rows outside [lo, hi) zeroed (P is 0 there, V must be finite). */
  __device__ __forceinline__ void wait_tile(int it, int nx) {
    constexpr int ST = S::PIPE_STAGES, CH = S::CHUNKS;
    if (nx < pg.g.ntiles) issue(nx % ST, next_pg, next_row);
    if (owner) lookup(pg.g.n_begin + (nx + 1) * S::BN, next_pg, next_row); /* used next iteration */
    mbar_wait(sm.bar + it % ST, (uint32_t)(it / ST) & 1u); /* every box of the tile has landed */
    const int n0 = pg.g.n_begin + it * S::BN;
    if (n0 < pg.g.lo || n0 + S::BN > pg.g.hi) {
      /* With one row band each warp reads only its own keys' rows and zeroes
       * them itself; else the block zeroes the tile together. */
      constexpr bool OWN = S::WM == 1;
      const int r0 = OWN ? pg.g.wn * S::KW : 0;
      T *tv0 = sm.v + ((it % ST) * S::BN + r0) * S::ROW;
      for (int i = OWN ? lane : pg.g.tid; i < (OWN ? S::KW : S::BN) * CH; i += OWN ? AA_WARP_SIZE : S::THREADS) {
        const int r = i / CH, j = n0 + r0 + r;
        if (j < pg.g.lo || j >= pg.g.hi) *reinterpret_cast<uint4 *>(tv0 + r * S::ROW + (i % CH) * 8) = make_uint4(0u, 0u, 0u, 0u);
      }
      fence_proxy_async_smem(); /* before the stage's next box lands over these */
      if constexpr (OWN) warp_sync();
      else block_sync();
    }
  }
};

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_KV_LOAD_CUH */
