/* shape.cuh: the compile-time shape of a tensor-core program (TileShape: warps,
 * keys per warp, shared-memory layout and size, which loaders and products the
 * shape can use) and the swizzled layout of its wgmma tiles. The host reads
 * SMEM_BYTES and TMA_KIND too (src/gpu/launch.cu), so nothing here depends on
 * the device pass being compiled. */
#ifndef ANYATTN_GPU_KERNEL_SHAPE_CUH
#define ANYATTN_GPU_KERNEL_SHAPE_CUH

#include <stddef.h>
#include <stdint.h>

#include "tile.cuh"

namespace aa {

/* FP8 = 1: the caches hold 1-byte E4M3 codes (the problem's kv_dtype). Their
 * tiles arrive as codes in a STAGES-deep staging ring (16-byte copies where
 * the cache rows allow, else 8-byte). The mma.sync tiles (FRAG8, where the
 * vendor has kTileFp8Frags) read the codes from there straight into their
 * fragments (products.cuh); the single-warpgroup wgmma tiles and AMD have
 * each thread convert the chunks it copied into the one 16-bit K and V tile
 * the products read (KvCopies::convert); the two-warpgroup pipelined tile
 * (PP) stages each half's codes in one code tile a phase ahead and converts
 * them into its 16-bit ring (mainloop_sm90.cuh); on sm_90 at d128 those
 * codes may come as TMA boxes (TMA_PP8). The other FP8 tiles take no boxes. */
template <int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES, int FP8 = 0>
struct TileShape {
  static constexpr int WM = BLOCK_M / 16;       /* warps along rows, 16 rows each */
  static constexpr int WN = WARPS / WM;         /* warps splitting the keys of a tile */
  static constexpr int KW = BLOCK_N / WN;       /* keys per warp per tile */
  static constexpr int NK = KW / 16;            /* 16-key steps per warp */
  static constexpr int DK = HEAD_DIM / 16;      /* 16-wide steps along the head dim */
  static constexpr int CHUNKS = HEAD_DIM / 8;   /* 16-byte chunks per row */
  static constexpr int THREADS = WARPS * AA_WARP_SIZE;
  static constexpr int BN = BLOCK_N, HD = HEAD_DIM, BM = BLOCK_M;
  /* FP8: 0 16-bit caches, 1 fp8 codes, 2 16-bit caches with the descales of
   * fp8 ones: the 128-row tiles' kernels that run fp8 batches staged to
   * 16-bit (docs/design/layout.md#staged-prefill; kernels.cuh compiles them
   * apart, so that the 16-bit kernels carry no descale). */
  static constexpr bool KV8 = FP8 == 1;
  /* Descales read and applied (softmax.cuh, epilogue.cuh, merge.cuh). */
  static constexpr bool DESCALE = FP8 != 0;
  /* Warpgroup MMA (tile layers with kTileWgmma; the kernel uses it only when
   * built for sm_90a): a tile whose warps each own 16 rows against all its
   * keys (WN 1), in warpgroups of 64 rows, at head dim 64 or 128 (192 and
   * 256 below), computes
   * Q K^T and P V as whole-warpgroup products that read Q, K and V from
   * shared memory once per warpgroup, not once per warp (P stays in
   * registers). Its Q, K and V tiles are then stored 128-byte swizzled
   * (kv_smem_offset) from a 1024-byte aligned base, hence WG_ALIGN bytes of
   * slack (also reserved, unused, in the sm_80 build of the same shape).
   * On one H200 the two tiles it covers, m64n64w4s2 and m128n128w8s2, run
   * causal prefill 1.24-1.29x faster than on mma.sync (docs/design/prefill.md).
   * Head dims 192 and 256 (16-bit caches) too: their P V runs in 128- and
   * 64-column wgmma (wg_issue_pv). FP8 caches there keep the mma.sync tiles,
   * which read the codes from the staging ring: the 16-bit tiles wgmma needs
   * on top would push m128n128w8s2 at d192 out of shared memory. Head dims
   * 80 and 96 (16-bit caches) lay their tiles out as two panels, the second
   * one part written and read: Q K^T takes DK k16 steps and P V one wgmma of
   * HEAD_DIM columns, so the zero columns up to 128 cost no products (over
   * fp8 caches these rows run at d128: row_head_dim in kernels.cuh). */
  static constexpr bool WG = kTileWgmma && WN == 1 && BLOCK_M % 64 == 0 &&
                             (HEAD_DIM == 64 || HEAD_DIM == 128 ||
                              ((HEAD_DIM == 80 || HEAD_DIM == 96 || HEAD_DIM == 192 || HEAD_DIM == 256) && !KV8)) &&
                             (BLOCK_N == 64 || BLOCK_N == 128 || (BLOCK_N == 96 && HEAD_DIM == 192));
  /* 64-column panels of the wgmma layout (kv_smem_offset) */
  static constexpr int PANELS = (HEAD_DIM + 63) / 64;
  /* smem row, padded by 16 bytes: ldmatrix without bank conflicts; wgmma
   * shapes whose head dim is no whole number of panels size their tiles for
   * the panels (the mma.sync loop of an sm_80 pass reads the same rows) */
  static constexpr int ROW = (WG ? 64 * PANELS : HEAD_DIM) + 8;
  /* FP8 codes into fragments: the mma.sync tiles */
  static constexpr bool FRAG8 = KV8 && kTileFp8Frags && !WG;
  /* Two warpgroups on wgmma (the 128-row tile): they run half a KV tile
   * apart (mainloop_sm90.cuh), which needs four mbarriers (K and V of each of
   * the two stages) after the scratch. With FP8 caches each thread's share
   * of a tile half must be whole batches of 8-code copies (mainloop_sm90.cuh):
   * BLOCK_N x HEAD_DIM a multiple of 8192 (not m128n64w8s2 at d64, in the
   * tuning build, which runs the single-ring loop). */
  static constexpr bool PP =
      WG && WM == 8 && STAGES == 2 && BLOCK_N <= 128 && (!KV8 || (BLOCK_N * HEAD_DIM) % 8192 == 0);
  /* K/V ring depth: the config's stages (fp8 rings of twice the depth were
   * slower on the H200: docs/design/layout.md) */
  static constexpr int PIPE_STAGES = STAGES;
  /* 16-bit K/V tiles the products read: the ring itself (16-bit caches; FP8
   * on PP, converted a phase ahead), one (FP8 converted), none (FRAG8) */
  static constexpr int TILES16 = FRAG8 ? 0 : (KV8 && !PP) ? 1 : STAGES;
  /* FP8: staged code tiles of K and of V: the ring, or one each on PP (its
   * 16-bit ring is the pipeline; two more stages of codes would not fit) */
  static constexpr int CODE_STAGES = PP ? 1 : PIPE_STAGES;
  /* The padded tiles (not WG) can take their K/V tiles as TMA boxes where
   * the tile layer has them (sm_90+, kTileTma) and run says so
   * (AttnParams::tma_rows): one mbarrier per stage counts the bytes, and the
   * pipeline starts 128-byte aligned. A box row is one padded smem row
   * (ROW elements, at most 256: not d256). The mbarriers and the alignment
   * slack are reserved on every build of the shape, so host and device agree
   * on the size. */
  static constexpr bool TMA = kTileTma && !WG && ROW <= 256 && !KV8;
  static constexpr size_t WG_ALIGN = WG ? 1024 : TMA ? 128 : 0;
  /* d256 would need 64 more registers for Q: it is read from shared memory instead. */
  static constexpr bool Q_IN_REGS = HEAD_DIM <= 128;
  static constexpr int OROW = HEAD_DIM + 4;     /* fp32 merge row, padded */
  static constexpr size_t Q_BYTES = (size_t)BLOCK_M * ROW * 2;
  /* A K or V tile (one stage) in elements: BLOCK_N rows of ROW, rounded up
   * to 1024 bytes on the swizzled wgmma tiles, whose stages must start
   * 1024-byte aligned (96-key tiles at d192: 96 x 200 elements) */
  static constexpr int TILE_ELEMS = WG ? (BLOCK_N * ROW + 511) / 512 * 512 : BLOCK_N * ROW;
  static constexpr size_t KV_TILE_BYTES = (size_t)TILE_ELEMS * 2;
  /* FP8: staged tiles of codes, rows of K8_ROW and V8_ROW bytes. FRAG8 lays
   * them out so its fragment loads meet no bank conflicts: K rows are read 16
   * bytes per lane, two rows per 8 lanes, V rows by ldmatrix, eight rows of 16
   * bytes per matrix. Head dims that are multiples of 128: rows of HEAD_DIM
   * bytes, 16-byte chunk c of row r stored at chunk c ^ swz8(r) (SW8, below).
   * Others: rows padded (K: two rows 64 bytes apart modulo 128 where the head
   * dim is a multiple of 64; V: rows an odd multiple of 16 bytes apart). Not
   * FRAG8: rows of HEAD_DIM bytes. */
  static constexpr bool SW8 = FRAG8 && HEAD_DIM % 128 == 0;
  static constexpr int K8_ROW = !FRAG8 || SW8           ? HEAD_DIM
                                : HEAD_DIM % 64 == 0    ? HEAD_DIM
                                                        : HEAD_DIM + 16;
  static constexpr int V8_ROW = !FRAG8 || SW8 || (HEAD_DIM / 16) % 2 == 1 ? HEAD_DIM : HEAD_DIM + 16;
  static constexpr size_t K8_TILE_BYTES = KV8 ? (size_t)BLOCK_N * K8_ROW : 0;
  static constexpr size_t V8_TILE_BYTES = KV8 ? (size_t)BLOCK_N * V8_ROW : 0;
  /* per-row cache offsets (K, V) of the next two tiles, int64 each */
  static constexpr size_t OFF_BYTES = (size_t)2 * BLOCK_N * 16;
  static constexpr size_t PIPE_BYTES =
      WG_ALIGN + Q_BYTES + 2 * TILES16 * KV_TILE_BYTES + CODE_STAGES * (K8_TILE_BYTES + V8_TILE_BYTES) + OFF_BYTES;
  static constexpr size_t MERGE_BYTES = (size_t)WN * BLOCK_M * (2 * 4 + OROW * 4);
  /* Cluster merge (AttnParams::cluster): the program's merged rows, fp32
   * [BLOCK_M][OROW], then its (max, sum) per row, read by the other segments;
   * after the warp-merge buffers, so writing them never races with reading those.
   * Only where the tile layer has clusters (on AMD's 64 KB of LDS the region
   * would push the d128 64-row tile out of the table) and the region fits
   * the largest shared memory: the 128-row tiles at d256 would not fit with
   * it. A shape without it never merges in a cluster (aa_gpu_config::cluster:
   * run merges its segments by the last arrival). */
  static constexpr size_t CL_OFF = MERGE_BYTES;
  static constexpr size_t CL_ML_OFF = CL_OFF + (size_t)BLOCK_M * OROW * 4;
  static constexpr bool CLUSTER = kHasClusters && CL_ML_OFF + (size_t)BLOCK_M * 8 <= AA_MAX_SMEM_PER_BLOCK;
  static constexpr size_t CL_END = CLUSTER ? CL_ML_OFF + (size_t)BLOCK_M * 8 : MERGE_BYTES;
  /* The pipelined tile can take its 16-bit K/V halves as 128-byte-swizzled
   * TMA boxes (64 columns each), which land in exactly its wgmma layout. */
  static constexpr bool TMA_PP = kTileTma && PP && !KV8;
  /* Over FP8 caches at d128 the pipelined tile can take its halves' codes
   * as TMA boxes of whole 128-byte rows, 128-byte swizzled: exactly its code
   * tile's layout (mainloop_sm90.cuh, Chunks). Two more mbarriers (the K and
   * V code tiles) follow the four. At d64 (64-byte rows) the boxes were
   * slower than the copies on the H200 (docs/design/layout.md, FP8 caches). */
  static constexpr bool TMA_PP8 = kTileTma && PP && KV8 && HEAD_DIM == 128;
  /* Tensor-map kind run encodes for this shape: 1 padded rows, 2 swizzled
   * panels, 3 128-byte swizzled rows of fp8 codes. */
  static constexpr int TMA_KIND = TMA ? 1 : TMA_PP ? 2 : TMA_PP8 ? 3 : 0;
  /* 16 bytes at the end: the work search's scratch (find_work, scheduler.cuh); then the mbarriers */
  static constexpr size_t META_OFF = PIPE_BYTES > CL_END ? PIPE_BYTES : CL_END;
  static constexpr size_t BAR_OFF = META_OFF + 16;
  /* PP: fourteen mbarriers (the four above, then the two code tiles' over
   * FP8 caches, or the producer warpgroup's: four "stage free", two "Q
   * landed", two "Q free" and two "item published", mainloop_ws.cuh), then
   * two item descriptors of 8 ints (WsItem), the producer's next item and
   * each descriptor's decode flag (kWsDecDesc): 19 of 20 ints */
  static constexpr int PP_BARS = 14;
  static constexpr size_t DESC_OFF = BAR_OFF + 8 * PP_BARS;
  static constexpr size_t SMEM_BYTES = PP ? DESC_OFF + 80 : BAR_OFF + (TMA ? 8 * STAGES : 0);
  /* A persistent launch of the producer warpgroup's kernel (several items a
   * block, mainloop_ws.cuh) takes a second Q tile, Q2_OFF bytes after the
   * pipeline's start (1024-byte aligned, past everything above): its shared
   * memory, 0 where that is not the kernel's. */
  static constexpr size_t Q2_OFF = (SMEM_BYTES + 1023) / 1024 * 1024;
  static constexpr size_t PERSIST_SMEM_BYTES = PP && !KV8 ? WG_ALIGN + Q2_OFF + Q_BYTES : 0;
  /* A warpgroup of its own copies K and V (WsShape); THREADS stays the
   * consumers' count. */
  static constexpr bool WS = false;
  /* Decode tiles (16 rows) are bound by K/V bytes in flight: cap registers
   * so that kDecodeWarps (vendor layer; kDecodeWarpsD64 at head dims up to
   * 64) share a multiprocessor; prefill tiles keep all. */
  static constexpr int DEC_WARPS = HEAD_DIM <= 64 ? kDecodeWarpsD64 : kDecodeWarps;
  static constexpr int MIN_BLOCKS = (BLOCK_M == 16 && HEAD_DIM <= 128) ? (DEC_WARPS / WARPS > 0 ? DEC_WARPS / WARPS : 1) : 1;
  static_assert(BLOCK_M % 16 == 0 && WM >= 1 && WM * WN == WARPS, "warps must tile BLOCK_M x BLOCK_N");
  static_assert(KW % 16 == 0, "each warp needs a multiple of 16 keys per tile");
  static_assert(HEAD_DIM % 16 == 0, "head dim must be a multiple of 16");
  static_assert(!WG || (Q_BYTES % 1024 == 0 && KV_TILE_BYTES % 1024 == 0), "swizzled tiles start 1024-byte aligned");
  static_assert(TMA_KIND == 0 || BLOCK_N % 32 == 0,
                "TMA boxes: whole pages of 8, 16 or 32 rows a tile (aa_gpu_tma_rows)");
};

/* The pipelined tile (PP) over 16-bit caches with a producer warpgroup
 * (mainloop_ws.cuh, docs/design/prefill.md#producer-warpgroup): the block
 * has THREADS consumer threads (the two warpgroups of B) and one more
 * warpgroup, PRODUCER_THREADS, that only copies K and V tiles. Everything
 * else (shared memory, rows, epilogue) is B's. */
template <class B>
struct WsShape : B {
  static_assert(B::PP && !B::KV8, "the pipelined tile over 16-bit caches");
  static constexpr bool WS = true;
  static constexpr int PRODUCER_THREADS = 128;
};

/* Byte offset of 16-byte chunk c of row r in a K/V tile of the wgmma layout:
 * the head dim in panels of 64 elements (128 bytes), each panel BN rows of
 * 128 bytes, chunk c's slot XORed with r % 8 (the 128-byte swizzle pattern,
 * which repeats every 8 rows = 1024 bytes). wgmma reads such a tile as K
 * (K-major: rows are keys, 8-row groups 1024 bytes apart) or as V (N-major:
 * panels BN * 128 bytes apart). Copies into it hit 8 distinct bank groups
 * per 8 rows, like the padded rows of the other tiles. */
template <int BN>
__device__ __forceinline__ uint32_t kv_smem_offset(int r, int c) {
  return (uint32_t)((c >> 3) * (BN * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

/* FRAG8 code tiles (TileShape::SW8): the chunk slot of 16-byte chunk c of row
 * r is c ^ swz8(r). swz8 takes the 8 values 0..7 on any 8 consecutive rows
 * from a multiple of 8, so the 8 rows of an ldmatrix find 8 bank groups; and
 * rows 2i and 2i + 1 differ in bit 2, so a K load's two rows of four chunks
 * (chunks 4b..4b+3) fall in opposite halves of the 128 banks' bytes. */
__device__ __forceinline__ int swz8(int r) { return ((r & 1) << 2) | ((r >> 1) & 3); }
/* Byte offset of byte b of row r in a staged code tile of `row` bytes per row. */
template <bool SW>
__device__ __forceinline__ int code_offset(int r, int b, int row) {
  return r * row + (SW ? ((((b >> 4) ^ swz8(r)) << 4) | (b & 15)) : b);
}

/* The type of a cache element: T, or an fp8 code. */
template <typename T, class S>
struct CacheElem {
  typedef T type;
};
template <typename T, int HD, int BM, int BN, int W, int ST>
struct CacheElem<T, TileShape<HD, BM, BN, W, ST, 1>> {
  typedef unsigned char type;
};

/* The type the products of the pipelined tile run in: T, or f16 (F16: FP8
 * caches, whose products run in f16; products.cuh, QToF16). */
template <typename T, bool F16>
struct ProductElem {
  typedef T type;
};
template <typename T>
struct ProductElem<T, true> {
  typedef aa_f16 type;
};

/* What this compilation pass runs for shape S (unlike TileShape, these depend
 * on the device pass: wgmma needs sm_90a, TMA sm_90; false elsewhere and on AMD). */
template <class S>
struct PassCaps {
  static constexpr bool WG = S::WG && kArchWgmma;      /* Q K^T and P V on wgmma */
  static constexpr bool TMA = S::TMA && kArchTma;      /* padded tiles may take TMA boxes */
  static constexpr bool PP = S::PP && kArchWgmma;      /* the two-warpgroup pipelined tile */
  static constexpr bool TMA_PP = S::TMA_PP && kArchWgmma; /* its halves may be TMA boxes */
  static constexpr bool TMA_PP8 = S::TMA_PP8 && kArchWgmma; /* its FP8 halves' codes may be TMA boxes */
  static constexpr bool WS = S::WS && kArchWgmma;      /* a producer warpgroup copies K and V (WsShape) */
  static constexpr bool QREG = S::Q_IN_REGS && !WG;    /* Q fragments held in registers */
  /* The pipeline's tiles as this pass lays them out: a PP shape in a pass
   * without wgmma runs the single-ring loop (mainloop.cuh), whose FP8
   * conversion wants one 16-bit tile and a ring of code tiles; that layout
   * is smaller than the PP one the host reserves (checked below). */
  static constexpr int TILES16 = S::FRAG8 ? 0 : (S::KV8 && !PP) ? 1 : S::PIPE_STAGES;
  static constexpr int CODE_STAGES = PP ? 1 : S::PIPE_STAGES;
  static_assert(S::WG_ALIGN + S::Q_BYTES + 2 * TILES16 * S::KV_TILE_BYTES +
                        CODE_STAGES * (S::K8_TILE_BYTES + S::V8_TILE_BYTES) + S::OFF_BYTES <=
                    S::PIPE_BYTES,
                "the pass's pipeline fits the shared memory the host reserves");
};

/* Named barriers of the pipelined tile (0 is the block barrier): whose turn it
 * is to issue products (one per warpgroup), K and V stages free for
 * refilling (phase_overlap: kBarVFree for V stage 0, kBarVFree1 for stage
 * 1), one per warpgroup (its copy offsets; with a producer warpgroup, its
 * Q rows and its rows out: mainloop_ws.cuh, own_rows_epilogue), and (FP8)
 * the second warpgroup done with the V tile before last. */
constexpr int kBarSched0 = 1, kBarKFree = 3, kBarVFree = 4, kBarWg0 = 5, kBarVOld = 7, kBarVFree1 = 8;

/* A barrier over the program's threads after its work search: the block's,
 * or, with a producer warpgroup (WS), which takes no part in the epilogue
 * and the merges, barrier 0 over the consumers only. */
template <class S>
__device__ __forceinline__ void program_sync() {
  if constexpr (PassCaps<S>::WS) named_sync(0, S::THREADS);
  else block_sync();
}
/* With a producer warpgroup at head dims up to 128 (those with persistent
 * blocks), each consumer warpgroup starts an item and writes its rows out
 * behind a barrier of its own (kBarWg0 + its index) instead of program_sync
 * (mainloop_ws.cuh, own_rows_epilogue); d256 runs a block per program,
 * whose single item has nothing to overlap. */
template <class S>
constexpr bool kWgRows = PassCaps<S>::WS && S::HD <= 128;

/* The program's shared memory: the pipeline (Q, STAGES K and V tiles, the
 * next tiles' cache offsets) from a 1024-byte boundary when its tiles are
 * swizzled, a 128-byte one for TMA boxes; the work search's scratch and the
 * mbarriers after everything else (TileShape's offsets). */
template <typename T, class S>
struct SmemTiles {
  unsigned char *base;
  T *q, *k, *v;           /* Q; the 16-bit K and V tiles (PassCaps::TILES16 each) */
  unsigned char *k8, *v8; /* FP8: the staged code tiles (PassCaps::CODE_STAGES each) */
  int64_t *off; /* [2][BLOCK_N][K, V] the next tiles' rows: addresses (KvCopies) or element offsets (sm90 loader) */
  int *meta;    /* 4 ints: find_work's scratch */
  int *desc;    /* PP: two item descriptors of 8 ints, the producer's next item, each descriptor's decode flag (mainloop_ws.cuh) */
  T *q2;        /* PP: the second Q tile of a persistent launch (PERSIST_SMEM_BYTES) */
  uint64_t *bar; /* mbarriers: [K stage 0, 1, V stage 0, 1] (PP; then TMA_PP8: K codes, V codes; WS: K stage 0, 1 and
                  * V stage 0, 1 free) or [STAGES] (TMA) */
  __device__ __forceinline__ explicit SmemTiles(unsigned char *smem) : base(smem) {
    constexpr uint32_t AL = (uint32_t)S::WG_ALIGN;
    unsigned char *pipe = smem + (AL ? ((AL - (smem_u32(smem) & (AL - 1u))) & (AL - 1u)) : 0u);
    q = reinterpret_cast<T *>(pipe);
    k = q + S::WM * 16 * S::ROW;
    v = k + PassCaps<S>::TILES16 * S::TILE_ELEMS;
    k8 = reinterpret_cast<unsigned char *>(v + PassCaps<S>::TILES16 * S::TILE_ELEMS);
    v8 = k8 + PassCaps<S>::CODE_STAGES * S::K8_TILE_BYTES;
    off = reinterpret_cast<int64_t *>(v8 + PassCaps<S>::CODE_STAGES * S::V8_TILE_BYTES);
    meta = reinterpret_cast<int *>(smem + S::META_OFF);
    bar = reinterpret_cast<uint64_t *>(smem + S::BAR_OFF);
    desc = reinterpret_cast<int *>(smem + S::DESC_OFF);
    q2 = reinterpret_cast<T *>(pipe + S::Q2_OFF);
  }
  /* The same tiles with Q tile b (0: q, 1: q2) as q. */
  __device__ __forceinline__ SmemTiles with_q(int b) const {
    SmemTiles t = *this;
    if (b) t.q = q2;
    return t;
  }
};

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_SHAPE_CUH */
