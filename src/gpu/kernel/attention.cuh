/* attention.cuh: the paged-attention body, written once for every GPU vendor.
 * One program = a Q block (BLOCK_Q query tokens x the q heads of one GQA
 * group, BLOCK_M rows) against the paged K/V of its sequence, tile by tile,
 * with an online softmax. Vendor specifics live in tile.cuh's primitives.
 *
 * Tensors (device memory, see include/anyattn.h): q, out [num_tokens,
 * num_q_heads, D] dense; k/v caches paged with element strides; lse
 * [num_tokens, num_q_heads] fp32; metadata int32. */
#ifndef ANYATTN_GPU_ATTENTION_CUH
#define ANYATTN_GPU_ATTENTION_CUH

#include <stdint.h>

#include "tile.cuh"

namespace aa {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/* Stage timestamps for dev/trace_decode.sh only: built with
 * -DAA_TRACE, thread 0 of each program prints its stage times (trace_now():
 * %globaltimer ns on NVIDIA, clock cycles on AMD). Off in every
 * normal build: the macros expand to nothing. */
#if defined(AA_TRACE)
#include <stdio.h>
#define AA_TRACE_DECL unsigned long long aa_tr_[8] = {0, 0, 0, 0, 0, 0, 0, 0}
#define AA_MARK(i) (aa_tr_[i] = trace_now())
#define AA_TRACE_PRINT(tag)                                                                                 \
  do {                                                                                                      \
    if (threadIdx.x == 0)                                                                                   \
      printf("%s %u %u %llu %lld %lld %lld %lld %lld %lld %lld\n", tag, blockIdx.x, blockIdx.y, aa_tr_[0],    \
             (long long)(aa_tr_[1] - aa_tr_[0]), (long long)(aa_tr_[2] - aa_tr_[0]),                        \
             (long long)(aa_tr_[3] - aa_tr_[0]), (long long)(aa_tr_[4] - aa_tr_[0]),                        \
             (long long)(aa_tr_[5] - aa_tr_[0]), (long long)(aa_tr_[6] - aa_tr_[0]),                        \
             (long long)(trace_now() - aa_tr_[0]));                                                        \
  } while (0)
#else
#define AA_TRACE_DECL
#define AA_MARK(i) ((void)0)
#define AA_TRACE_PRINT(tag) ((void)0)
#endif

/* Everything a launch needs; filled by the launcher from the plan and args. */
/* A CUtensorMap's 128 opaque bytes: the host encodes it with the driver's
 * cuTensorMapEncodeTiled (cuda_backend.cu); kernels pass its address to
 * TMA copies. */
struct alignas(64) TmaMap {
  unsigned long long w[16];
};

struct AttnParams {
  const void *q;
  const void *k;
  const void *v;
  void *out;
  float *lse;
  const int32_t *cu_seqlens_q;
  const int32_t *seq_lens_k;
  const int32_t *block_table;
  int64_t bt_stride;
  int64_t k_sb, k_st, k_sh; /* element strides: block, token, head */
  int64_t v_sb, v_st, v_sh;
  const float *alibi; /* [num_q_heads] or NULL */
  const float *sinks; /* [num_q_heads] or NULL */
  int num_seqs;
  int num_tokens;
  int num_qblocks; /* Q blocks the grid covers: num_tokens / bq + num_seqs */
  int hprogs;      /* programs per Q block: num_kv_heads * n_hchunks */
  int num_q_heads;
  int group;     /* q heads per kv head */
  int gh;        /* q heads of the group per program: min(group, BLOCK_M) */
  int bq;        /* query tokens per program: BLOCK_M / gh */
  int n_hchunks; /* programs along a group: ceil(group / gh) */
  int block_size;
  /* Run-time divisors as multiply-shifts (see fast_div): a division by a
   * kernel argument costs ~20 dependent instructions, and the prologue and
   * epilogue of a short decode program are a chain of them otherwise. */
  uint32_t bs_magic, bs_shift; /* j / block_size */
  uint32_t gh_magic, gh_shift; /* row / gh: a program row's token and head */
  uint32_t bq_magic, bq_shift; /* token / bq: Q block numbering */
  uint32_t hp_magic, hp_shift; /* blockIdx.x / hprogs */
  uint32_t hc_magic, hc_shift; /* hprog / n_hchunks */
  uint32_t qh_magic, qh_shift; /* row / num_q_heads (the reduce) */
  int causal;
  int window_left;
  int window_right;
  float scale_log2;     /* scale * log2(e) */
  float softcap;        /* 0: off */
  float softcap_in;     /* scale / softcap */
  float softcap_out;    /* softcap * log2(e) */
  /* Split-KV (gridDim.y segments per program when > 1): each segment writes
   * partials for its rows to the workspace instead of out/lse, and
   * attn_split_reduce_kernel merges them. Row index of a partial:
   * (segment * num_tokens + token) * num_q_heads + head. */
  int num_splits;
  /* 1 (sm_90, num_splits <= kClusterMax): the num_splits segments of a
   * program are one thread-block cluster (launched with cluster dims
   * (1, num_splits, 1)); they merge through distributed shared memory at the
   * end and write out/lse themselves: no partials, no reduce kernel. */
  int cluster;
  float2 *part_ml; /* [num_splits * num_tokens * num_q_heads]: (max logit, log2 domain; sum) */
  float *part_o;   /* [same rows][head_dim] fp32, normalised by the segment's own sum */
  /* > 0 (sm_90, padded tiles, see TileShape::TMA): K/V tiles come as TMA
   * boxes of this many cache rows (min(block_size, BLOCK_N)) through k_map
   * and v_map, 4-d views (head_dim, kv head, row in page, page) of the
   * caches whose rows are HEAD_DIM + 8 elements wide, the last 8 outside
   * the tensor and so zeros: the padded shared-memory rows. 0: cp.async. */
  int tma_rows;
  TmaMap k_map, v_map;
};

/* ---- pieces shared by the tensor-core and the fp32 kernels ------------------- */

/* Logit in the log2 domain for raw dot product s at key j, query position pos. */
__device__ __forceinline__ float score_log2(const AttnParams &p, float s, float slope_log2, int j, int pos) {
  float x = p.softcap > 0.0f ? tanhf(s * p.softcap_in) * p.softcap_out : s * p.scale_log2;
  if (p.alibi) x += slope_log2 * (float)(j - pos);
  return x;
}

__device__ __forceinline__ bool key_visible(const AttnParams &p, int j, int pos, int kv_len) {
  bool ok = j < kv_len && j >= 0;
  if (p.causal) ok = ok && j <= pos;
  else if (p.window_right >= 0) ok = ok && j <= pos + p.window_right;
  if (p.window_left >= 0) ok = ok && j >= pos - p.window_left;
  return ok;
}

/* Keys [lo, hi) that any query at positions [pos_min, pos_max] can see. A
 * split-KV launch intersects this with its segment. */
__device__ __forceinline__ void kv_range(const AttnParams &p, int pos_min, int pos_max, int kv_len, int &lo,
                                         int &hi) {
  hi = kv_len;
  if (p.causal) hi = min(hi, pos_max + 1);
  else if (p.window_right >= 0) hi = min(hi, pos_max + p.window_right + 1);
  lo = 0;
  if (p.window_left >= 0) lo = max(0, pos_min - p.window_left);
}

/* Largest s in [0, num_seqs) with key(s) <= x, key non-decreasing in s. */
template <class Key>
__device__ __forceinline__ int upper_search(int num_seqs, int x, Key key) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (key(mid) <= x) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/* n / d for 0 <= n < 2^31 with (magic, shift) from the host's aa_fastdiv_init:
 * a run-time division costs ~20 dependent instructions, this one three. */
__device__ __forceinline__ int fast_div(int n, uint32_t magic, uint32_t shift) {
  return (int)(((uint64_t)__umulhi((uint32_t)n, magic) + (uint32_t)n) >> shift);
}

/* Offset in elements of row j of one kv head in a paged cache. */
__device__ __forceinline__ int64_t page_row(const AttnParams &p, const int32_t *bt_row, int j, int64_t sb,
                                            int64_t st) {
  const int pi = fast_div(j, p.bs_magic, p.bs_shift);
  return (int64_t)bt_row[pi] * sb + (int64_t)(j - pi * p.block_size) * st;
}

/* Scores of one S tile in the log2 domain, masked where needed. The two
 * uniform choices (plain scaling or softcap/ALiBi; masked or not) are
 * template arguments so each loop is straight-line code; the kernel branches
 * once per tile between them. jlo/jhi: each row slot's visible key range. */
template <bool PLAIN, bool MASK, int NK>
__device__ __forceinline__ void score_tile(const AttnParams &p, FragC (&s)[NK], int nw0, const int *jlo,
                                           const int *jhi, const float *slope, const int *pos, float *mx) {
#pragma unroll
  for (int n = 0; n < NK; n++) {
#pragma unroll
    for (int e = 0; e < kFragCElems; e++) {
      const int sl = frag_c_slot(e);
      const int j = nw0 + n * 16 + frag_c_col(e);
      float x; /* PLAIN: left unscaled, the scale is folded into the exponent */
      if constexpr (PLAIN) x = s[n].x[e];
      else x = score_log2(p, s[n].x[e], slope[sl], j, pos[sl]);
      if constexpr (MASK) x = (j >= jlo[sl] && j < jhi[sl]) ? x : -INFINITY;
      s[n].x[e] = x;
      mx[sl] = fmaxf(mx[sl], x);
    }
  }
}

/* Warpgroup MMA for the tiles that can use it (TileShape::WG): bit 0 for
 * Q K^T, bit 1 for P V. A compile-time knob only for A/B and bisection
 * builds (0: every tile on the 16x16 mma.sync path). */
#ifndef AA_WGMMA
#define AA_WGMMA 3
#endif
/* The 128-row wgmma tile's two warpgroups half a tile apart (1) or in step
 * (0: the loop every other tile runs); a knob for A/B builds only. */
#ifndef AA_PINGPONG
#define AA_PINGPONG 1
#endif

/* TMA boxes for the padded K/V tiles on sm_90+ (1), or 16-byte cp.async
 * everywhere (0); a knob for A/B builds only. */
#ifndef AA_TMA
#define AA_TMA 1
#endif

/* ---- compile-time shape of a tensor-core program -------------------------------- */
template <int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES>
struct TileShape {
  static constexpr int WM = BLOCK_M / 16;       /* warps along rows, 16 rows each */
  static constexpr int WN = WARPS / WM;         /* warps splitting the keys of a tile */
  static constexpr int KW = BLOCK_N / WN;       /* keys per warp per tile */
  static constexpr int NK = KW / 16;            /* 16-key steps per warp */
  static constexpr int DK = HEAD_DIM / 16;      /* 16-wide steps along the head dim */
  static constexpr int ROW = HEAD_DIM + 8;      /* smem row, padded by 16 bytes: ldmatrix without bank conflicts */
  static constexpr int CHUNKS = HEAD_DIM / 8;   /* 16-byte chunks per row */
  static constexpr int THREADS = WARPS * AA_WARP_SIZE;
  static constexpr int BN = BLOCK_N, HD = HEAD_DIM;
  /* Warpgroup MMA (tile layers with kTileWgmma; the kernel uses it only when
   * built for sm_90a): a tile whose warps each own 16 rows against all its
   * keys (WN 1), in warpgroups of 64 rows, at head dim 64 or 128, computes
   * Q K^T and P V as whole-warpgroup products that read Q, K and V from
   * shared memory once per warpgroup, not once per warp (P stays in
   * registers). Its Q, K and V tiles are then stored 128-byte swizzled
   * (kv_smem_offset) from a 1024-byte aligned base, hence WG_ALIGN bytes of
   * slack (also reserved, unused, in the sm_80 build of the same shape).
   * On one H200 the two tiles it covers, m64n64w4s2 and m128n128w8s2, run
   * causal prefill 1.24-1.29x faster than on mma.sync (bench/results/h200.md). */
  static constexpr bool WG = AA_WGMMA && kTileWgmma && WN == 1 && BLOCK_M % 64 == 0 && (HEAD_DIM == 64 || HEAD_DIM == 128) &&
                             (BLOCK_N == 64 || BLOCK_N == 128);
  /* The padded tiles (not WG) can take their K/V tiles as TMA boxes where
   * the tile layer has them (sm_90+, kTileTma) and run says so
   * (AttnParams::tma_rows): one mbarrier per stage counts the bytes, and the
   * pipeline starts 128-byte aligned. A box row is one padded smem row
   * (ROW elements, at most 256: not d256). The mbarriers and the alignment
   * slack are reserved on every build of the shape, so host and device agree
   * on the size. */
  static constexpr bool TMA = kTileTma && !WG && AA_TMA && ROW <= 256;
  static constexpr size_t WG_ALIGN = WG ? 1024 : TMA ? 128 : 0;
  /* d256 would need 64 more registers for Q: it is read from shared memory instead. */
  static constexpr bool Q_IN_REGS = HEAD_DIM <= 128;
  static constexpr int OROW = HEAD_DIM + 4;     /* fp32 merge row, padded */
  static constexpr size_t Q_BYTES = (size_t)BLOCK_M * ROW * 2;
  static constexpr size_t KV_TILE_BYTES = (size_t)BLOCK_N * ROW * 2;
  /* per-row cache offsets (K, V) of the next two tiles, int64 each */
  static constexpr size_t OFF_BYTES = (size_t)2 * BLOCK_N * 16;
  static constexpr size_t PIPE_BYTES = WG_ALIGN + Q_BYTES + 2 * STAGES * KV_TILE_BYTES + OFF_BYTES;
  static constexpr size_t MERGE_BYTES = (size_t)WN * BLOCK_M * (2 * 4 + OROW * 4);
  /* Cluster merge (AttnParams::cluster): the program's merged rows, fp32
   * [BLOCK_M][OROW], then its (max, sum) per row, read by the other segments;
   * after the warp-merge buffers, so writing them never races with reading those.
   * Only where the tile layer has clusters: on AMD's 64 KB of LDS the region
   * would push the d128 64-row tile out of the table. */
  static constexpr size_t CL_OFF = MERGE_BYTES;
  static constexpr size_t CL_ML_OFF = CL_OFF + (size_t)BLOCK_M * OROW * 4;
  static constexpr size_t CL_END = kHasClusters ? CL_ML_OFF + (size_t)BLOCK_M * 8 : MERGE_BYTES;
  /* Two warpgroups on wgmma (the 128-row tile): they run half a KV tile
   * apart (see the pipelined loop in attn_tc_kernel), which needs four
   * mbarriers (K and V of each of the two stages) after the scratch. */
  static constexpr bool PP = WG && WM == 8 && STAGES == 2 && BLOCK_N <= 128 && AA_PINGPONG;
  /* The pipelined tile can take its K/V halves as 128-byte-swizzled TMA
   * boxes (64 columns each), which land in exactly its wgmma layout. */
  static constexpr bool TMA_PP = kTileTma && PP && AA_TMA;
  /* Tensor-map kind run encodes for this shape: 1 padded rows, 2 swizzled panels. */
  static constexpr int TMA_KIND = TMA ? 1 : TMA_PP ? 2 : 0;
  /* 16 bytes at the end: the work search's scratch (find_work); then the mbarriers */
  static constexpr size_t META_OFF = PIPE_BYTES > CL_END ? PIPE_BYTES : CL_END;
  static constexpr size_t BAR_OFF = META_OFF + 16;
  static constexpr size_t SMEM_BYTES = BAR_OFF + (PP ? 32 : TMA ? 8 * STAGES : 0);
  /* Decode tiles (16 rows) are bound by K/V bytes in flight: cap registers
   * (~170) so several programs share a multiprocessor; prefill tiles keep all. */
  static constexpr int MIN_BLOCKS = (BLOCK_M == 16 && HEAD_DIM <= 128) ? (12 / WARPS > 0 ? 12 / WARPS : 1) : 1;
  static_assert(BLOCK_M % 16 == 0 && WM >= 1 && WM * WN == WARPS, "warps must tile BLOCK_M x BLOCK_N");
  static_assert(KW % 16 == 0, "each warp needs a multiple of 16 keys per tile");
  static_assert(HEAD_DIM % 16 == 0, "head dim must be a multiple of 16");
  static_assert(!WG || (Q_BYTES % 1024 == 0 && KV_TILE_BYTES % 1024 == 0), "swizzled tiles start 1024-byte aligned");
  static_assert(TMA_KIND == 0 || (BLOCK_N & (BLOCK_N - 1)) == 0, "TMA boxes start at keys masked with a power of two");
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

#if defined(AA_HAS_WGMMA)
/* S = Q K^T of one tile for the warpgroup's 64 rows (warp w: rows 16w..,
 * the FragC layout): DK k16 steps along the head dim, Q (the program's
 * BLOCK_M rows, this warpgroup's 64 from q_rows) and K from swizzled tiles at
 * shared addresses q_tile and k_tile. Waits for the result. */
template <typename T, class S>
__device__ __forceinline__ void wg_issue_scores(FragC *s, uint32_t q_tile, int q_rows, uint32_t k_tile) {
  constexpr int QPANEL = S::WM * 16 * 128; /* BLOCK_M rows of 128 bytes */
#pragma unroll
  for (int kk = 0; kk < S::DK; kk++) /* 64 head-dim elements per panel, 32 bytes per k16 step */
    wg_mma_ss<T, S::BN>(&s[0].x[0], wg_desc(q_tile + (kk >> 2) * QPANEL + q_rows * 128 + (kk & 3) * 32, 16, 1024),
                        wg_desc(k_tile + (kk >> 2) * (S::BN * 128) + (kk & 3) * 32, 16, 1024), kk > 0);
}
template <typename T, class S>
__device__ __forceinline__ void wg_scores(FragC *s, uint32_t q_tile, int q_rows, uint32_t k_tile) {
  wg_fence();
  wg_issue_scores<T, S>(s, q_tile, q_rows, k_tile);
  wg_commit();
  wg_wait_all();
#pragma unroll
  for (int n = 0; n < S::NK; n++) wg_keep(s[n]); /* nothing reads the scores before the wait */
}
/* O += P V for the warpgroup's rows: NK k16 steps along the keys (16 rows =
 * two 1024-byte swizzle groups each), V from the swizzled tile at v_tile read
 * N-major (head-dim panels BN * 128 bytes apart). Waits, so the stage can be
 * refilled after the next barrier. */
template <typename T, class S>
__device__ __forceinline__ void wg_issue_pv(FragC *acc, FragA *pa, uint32_t v_tile) {
#pragma unroll
  for (int n = 0; n < S::NK; n++) wg_mma<T, S::HD, 1>(&acc[0].x[0], pa[n], wg_desc(v_tile + n * 2048, S::BN * 128, 1024), 1);
}
template <typename T, class S>
__device__ __forceinline__ void wg_pv(FragC *acc, FragA *pa, uint32_t v_tile) {
  /* The rescaled accumulators and P are written before the fence; P's
   * registers, read by the MMA until the wait, stay allocated until then. */
  auto keep = [&] {
#pragma unroll
    for (int d = 0; d < S::DK; d++) wg_keep(acc[d]);
#pragma unroll
    for (int n = 0; n < S::NK; n++) wg_keep(pa[n]);
  };
  keep();
  wg_fence();
  wg_issue_pv<T, S>(acc, pa, v_tile);
  wg_commit();
  wg_wait_all();
  keep();
}
#endif

/* A compile-time bool as a value, for generic lambdas' phase variants. */
template <bool B>
struct BoolC {
  static constexpr bool value = B;
};

/* Where a program's work lies: sequence, its query tokens and lengths. */
struct Work {
  int seq, q_len, kv_len;
  int q_first; /* first query token of the block, within the sequence */
  int tok0;    /* its global token index */
  int n_tok;   /* valid tokens in the block (>= 1) */
};

/* Q blocks are numbered as in vLLM's unified kernel: sequence s owns blocks
 * [cu[s]/bq + s, cu[s+1]/bq + s + 1), enough for its ceil(q_len/bq) blocks;
 * the grid covers num_tokens/bq + num_seqs of them, spare ones exit.
 *
 * The whole block searches together, so the metadata costs one dependent
 * memory round trip instead of a chain: the threads probe THREADS evenly
 * spaced sequences at once (key(i) = cu[i]/bq + i is non-decreasing, and
 * key(num_seqs) closes the range, so blocks past the last sequence, e.g. a
 * graph captured at padded sizes, find s = num_seqs and exit); a barrier
 * counts the probes at or below the block, which is the index of the last
 * one. One round when num_seqs < THREADS, two up to THREADS^2. In the last
 * round each probe also loads its sequence's lengths, so they arrive with the
 * search. `meta` is 4 ints of shared memory. Every thread must call it. */
template <int THREADS>
__device__ __forceinline__ bool find_work(const AttnParams &p, int block, Work &w, int *meta) {
  const int32_t *cu = p.cu_seqlens_q;
  const int bq = p.bq, tid = threadIdx.x;
  int lo = 0, n = p.num_seqs + 1; /* candidates [lo, lo + n), the answer is among them */
  for (;;) {
    const int stride = (n + THREADS - 1) / THREADS;
    const int i = lo + tid * stride;
    const bool probe = tid * stride < n;
    int c0 = 0, c1 = 0, kv = 0;
    if (probe) {
      c0 = cu[i];
      if (stride == 1 && i < p.num_seqs) {
        c1 = cu[i + 1];
        kv = p.seq_lens_k[i];
      }
    }
    const int cnt = block_sync_count(probe && fast_div(c0, p.bq_magic, p.bq_shift) + i <= block); /* >= 1 */
    const int s = lo + (cnt - 1) * stride;
    if (stride == 1) {
      if (i == s) {
        meta[0] = c0;
        meta[1] = c1;
        meta[2] = kv;
      }
      block_sync();
      if (s >= p.num_seqs) return false;
      w.seq = s;
      const int local = block - (fast_div(meta[0], p.bq_magic, p.bq_shift) + s);
      w.q_len = meta[1] - meta[0];
      w.q_first = local * bq;
      w.kv_len = meta[2];
      w.tok0 = meta[0] + w.q_first;
      w.n_tok = min(bq, w.q_len - w.q_first);
      return local >= 0 && w.q_first < w.q_len;
    }
    lo = s;
    n = min(stride, p.num_seqs + 1 - s);
  }
}

/* Warps per tile from which the epilogue scales late (see the merge in
 * attn_tc_kernel); a compile-time knob only for A/B builds (99: never). */
#ifndef AA_LATE_MERGE_WN
#define AA_LATE_MERGE_WN 8
#endif

/* Fewest KV tiles a split-KV segment takes before another segment is used. */
constexpr int kSplitMinTiles = 1;
/* Named barriers of the pipelined 128-row tile (0 is the block barrier):
 * whose turn it is to issue products (one per warpgroup), K and V stages
 * free for refilling, and one per warpgroup for its copy offsets. */
constexpr int kBarSched0 = 1, kBarKFree = 3, kBarVFree = 4, kBarWg0 = 5;
/* Most segments one cluster can merge (the portable cluster size on sm_90);
 * the launcher uses fewer (cuda_backend.cu, kClusterMerge). */
constexpr int kClusterMax = 8;

/* ---- split-KV merge inside a cluster (sm_90) ---------------------------------------
 * Every segment of the program has left its merged rows (fp32, normalised by
 * its own sum) and their (max, sum) in its shared memory; after a cluster
 * barrier, segment `rank` merges every S-th (row, 8-column chunk) of the
 * program from all S segments' shared memory, with the reduce kernel's
 * arithmetic (sinks, lse, rows with no key: 0 / -inf), and writes out and
 * lse. A second barrier (relaxed) keeps each block's shared memory alive
 * until the others have read it. Every thread of every segment must call it. */
template <typename T, int HEAD_DIM, class S, class Valid, class Offset, class Head>
__device__ __forceinline__ void cluster_merge(const AttnParams &p, unsigned char *smem, int rank, Valid row_valid,
                                              Offset row_offset, Head row_head) {
  constexpr int CH = S::CHUNKS, BLOCK_M = S::WM * 16;
  const int NS = p.num_splits;
  const float *cO = reinterpret_cast<const float *>(smem + S::CL_OFF);
  const float2 *cML = reinterpret_cast<const float2 *>(smem + S::CL_ML_OFF);
  cluster_sync();
  for (int g = (int)threadIdx.x * NS + rank; g < BLOCK_M * CH; g += S::THREADS * NS) {
    const int r = g / CH, c = g % CH;
    if (!row_valid(r)) continue;
    float m_s[kClusterMax], w_s[kClusterMax];
    float M = -INFINITY;
#pragma unroll
    for (int u = 0; u < kClusterMax; u++) {
      const float2 ml = u < NS ? cluster_ld2(cluster_map(cML + r, u)) : make_float2(-INFINITY, 0.0f);
      m_s[u] = ml.x;
      w_s[u] = ml.y;
      M = fmaxf(M, ml.x);
    }
    const bool any = M != -INFINITY; /* some segment saw a key (decided before the sink enters) */
    const float sink = p.sinks ? p.sinks[row_head(r)] * kLog2e : -INFINITY;
    M = fmaxf(M, sink);
    float L = 0.0f;
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a;
    const float *src = cO + r * S::OROW + c * 8;
#pragma unroll
    for (int u = 0; u < kClusterMax; u++) {
      if (u >= NS) break;
      const float wt = m_s[u] == -INFINITY ? 0.0f : w_s[u] * fast_exp2(m_s[u] - M);
      L += wt;
      const uint32_t ad = cluster_map(src, u);
      const float4 x = cluster_ld4(ad), y = cluster_ld4(ad + 16); /* written by every segment: finite */
      a.x = fmaf(wt, x.x, a.x), a.y = fmaf(wt, x.y, a.y), a.z = fmaf(wt, x.z, a.z), a.w = fmaf(wt, x.w, a.w);
      b.x = fmaf(wt, y.x, b.x), b.y = fmaf(wt, y.y, b.y), b.z = fmaf(wt, y.z, b.z), b.w = fmaf(wt, y.w, b.w);
    }
    if (any && sink != -INFINITY) L += fast_exp2(sink - M);
    const float f = any ? fast_rcp(L) : 0.0f; /* L >= 1 when any */
    uint4 o;
    o.x = pack2<T>(a.x * f, a.y * f);
    o.y = pack2<T>(a.z * f, a.w * f);
    o.z = pack2<T>(b.x * f, b.y * f);
    o.w = pack2<T>(b.z * f, b.w * f);
    const int64_t ro = row_offset(r);
    *reinterpret_cast<uint4 *>(static_cast<T *>(p.out) + ro * HEAD_DIM + c * 8) = o;
    if (p.lse && c == 0) p.lse[ro] = any ? (M + __log2f(L)) * kLn2 : -INFINITY;
  }
  cluster_sync_relaxed(); /* the values loaded above are consumed: no ordering needed */
}

/* ---- the unified tensor-core kernel ----------------------------------------------- */
template <typename T, int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES>
__global__ void __launch_bounds__(WARPS *AA_WARP_SIZE,
                                  (TileShape<HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES>::MIN_BLOCKS))
    attn_tc_kernel(const AA_GRID_CONSTANT AttnParams p) {
  using S = TileShape<HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES>;
  constexpr int ROW = S::ROW, CH = S::CHUNKS, NK = S::NK, DK = S::DK, WN = S::WN;
  extern __shared__ __align__(16) unsigned char smem[];
#if defined(AA_HAS_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr bool WG_QK = S::WG && (AA_WGMMA & 1), WG_PV = S::WG && (AA_WGMMA & 2);
#else
  constexpr bool WG_QK = false, WG_PV = false;
#endif
#if defined(AA_HAS_TMA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool TMA_OK = S::TMA;
#else
  constexpr bool TMA_OK = false;
#endif
  /* The pipeline from a 1024-byte boundary when its tiles are swizzled, a
   * 128-byte one for TMA boxes. */
#if defined(AA_HAS_WGMMA) || defined(AA_HAS_TMA)
  constexpr uint32_t AL = (uint32_t)S::WG_ALIGN;
  unsigned char *pipe = smem + (AL ? ((AL - (smem_u32(smem) & (AL - 1u))) & (AL - 1u)) : 0u);
#else
  unsigned char *pipe = smem;
#endif
  T *sQ = reinterpret_cast<T *>(pipe);
  T *sK = sQ + BLOCK_M * ROW;
  T *sV = sK + STAGES * BLOCK_N * ROW;
  int64_t *sOff = reinterpret_cast<int64_t *>(sV + STAGES * BLOCK_N * ROW); /* [2][BLOCK_N][K, V] */

  Work w;
  AA_TRACE_DECL;
  AA_MARK(0);
  /* One grid dimension, heads fastest and Q blocks in reverse: under a causal
   * mask later blocks see more keys, so the longest programs start first and
   * the last wave holds short ones. */
  const int bx = (int)blockIdx.x, bxq = fast_div(bx, p.hp_magic, p.hp_shift);
  const int hprog = bx - bxq * p.hprogs;
  const int qblock = p.num_qblocks - 1 - bxq;
  /* Launched with programmatic dependent launch after another kernel: wait
   * here, before any input is read, for it to finish (a no-op otherwise). */
#if defined(AA_HAS_TMA)
  /* The tensor maps are parameters, not outputs of the kernel before: fetch
   * them while it drains (its first box would wait for them otherwise). */
  if (p.tma_rows > 0 && threadIdx.x == 0) { /* run sets it only for kernels that take boxes */
    tma_prefetch_map(&p.k_map);
    tma_prefetch_map(&p.v_map);
  }
#endif
  grid_dependency_wait();
  AA_MARK(1);
#if defined(AA_HAS_WGMMA)
  /* The pipelined 128-row tile's mbarriers: full K and full V of each stage,
   * one arrival per copying thread of a warpgroup (128); the work search's
   * barrier publishes the init. */
  uint64_t *kv_full = reinterpret_cast<uint64_t *>(smem + S::BAR_OFF); /* [K stage 0, 1, V stage 0, 1] */
  if constexpr (S::PP && WG_QK && WG_PV) {
    if (threadIdx.x == 0) {
      for (int i = 0; i < 4; i++) mbar_init(kv_full + i, 128);
      mbar_init_fence();
    }
  }
#endif
#if defined(AA_HAS_TMA)
  /* TMA: one mbarrier per stage, one arrival (thread 0's, with the stage's
   * byte count) per fill; set up by thread 0 just before its first boxes
   * (the prologue), only in programs that take them. */
  uint64_t *kv_bar = reinterpret_cast<uint64_t *>(smem + S::BAR_OFF); /* [STAGES] */
#endif
  if (!find_work<S::THREADS>(p, qblock, w, reinterpret_cast<int *>(smem + S::META_OFF))) return;
  AA_MARK(2);
  const int kvh = fast_div(hprog, p.hc_magic, p.hc_shift);
  const int head0 = kvh * p.group + (hprog - kvh * p.n_hchunks) * p.gh; /* first q head of the program */
  const int heads_here = min(p.gh, p.group - (head0 - kvh * p.group));
  const int tid = threadIdx.x;
  const int warp = tid / AA_WARP_SIZE;
  const int wm = warp % S::WM, wn = warp / S::WM;

  /* Row r of the program: token r / gh of the block, head head0 + r % gh. */
  auto row_tok = [&](int r) { return fast_div(r, p.gh_magic, p.gh_shift); };
  auto row_valid = [&](int r) {
    const int t = row_tok(r);
    return t < w.n_tok && r - t * p.gh < heads_here;
  };
  auto row_offset = [&](int r) { /* element offset of row r in q / out; lse offset / D */
    const int t = row_tok(r);
    return ((int64_t)(w.tok0 + t) * p.num_q_heads + head0 + (r - t * p.gh));
  };

  /* Keys this program visits, and the tiles covering them. */
  const int pos_base = w.kv_len - w.q_len + w.q_first; /* position of the block's first token */
  const int pos_min = pos_base, pos_max = pos_base + w.n_tok - 1;
  int lo, hi;
  kv_range(p, pos_min, pos_max, w.kv_len, lo, hi);
  int n_begin = (lo / BLOCK_N) * BLOCK_N;
  int ntiles = hi > lo ? (hi - n_begin + BLOCK_N - 1) / BLOCK_N : 0;

  /* Split-KV: segment blockIdx.y takes its even share of the tiles, from the
   * lengths read above on the device, so a graph captured once stays right
   * when lengths change. Tile-aligned cuts give every key to one segment;
   * masks still come from each row's own range. */
  const bool split = p.num_splits > 1;
  const bool cl = kHasClusters && split && p.cluster; /* merge in the cluster, not the reduce */
  const int seg = (int)blockIdx.y;
  auto part_row = [&](int r) { return (int64_t)seg * p.num_tokens * p.num_q_heads + row_offset(r); };
  if (split) {
    /* Short ranges use fewer segments, each at least kSplitMinTiles tiles, so
     * a graph captured with many segments for long contexts does not pay a
     * wide merge of near-empty partials at short ones; the idle segments
     * write empty partials (cheap: a few stores, no K/V). */
    const int s_eff = max(1, min(p.num_splits, (ntiles + kSplitMinTiles - 1) / kSplitMinTiles));
    /* 32-bit unsigned: ntiles * (seg + 1) <= (2^31 / BLOCK_N) * 128 segments,
     * under 2^32 for 64-key tiles; 32-key tiles (AMD's table) would need a
     * 2^30-token context (a 4 TB cache at Llama-8B shapes) to overflow */
    const int t0 = seg < s_eff ? (int)((unsigned)ntiles * seg / (unsigned)s_eff) : ntiles;
    const int t1 = seg < s_eff ? (int)((unsigned)ntiles * (seg + 1) / (unsigned)s_eff) : ntiles;
    n_begin += t0 * BLOCK_N;
    ntiles = t1 - t0;
    lo = max(lo, n_begin);
    hi = min(hi, n_begin + ntiles * BLOCK_N);
    if (ntiles == 0 && !cl) { /* nothing here: an empty partial, which the reduce skips */
      for (int r = tid; r < BLOCK_M; r += S::THREADS)
        if (row_valid(r)) p.part_ml[part_row(r)] = make_float2(-INFINITY, 0.0f);
      return;
    }
  }

  /* Q block -> shared memory; invalid rows are zero. */
  {
    const T *q = static_cast<const T *>(p.q);
    constexpr int QL = (BLOCK_M * CH + S::THREADS - 1) / S::THREADS;
#pragma unroll
    for (int k = 0; k < QL; k++) {
      const int i = tid + k * S::THREADS, r = i / CH, c = i % CH;
      if ((BLOCK_M * CH) % S::THREADS == 0 || i < BLOCK_M * CH) {
        const bool ok = row_valid(r);
        /* swizzled like K when Q K^T runs on wgmma (Q is its A operand in shared memory) */
        unsigned char *dq = reinterpret_cast<unsigned char *>(sQ) +
                            (WG_QK ? kv_smem_offset<BLOCK_M>(r, c) : (uint32_t)((r * ROW + c * 8) * sizeof(T)));
        async_copy16(dq, ok ? q + row_offset(r) * HEAD_DIM + c * 8 : q, ok);
      }
    }
    async_commit();
  }

  const int32_t *bt_row = p.block_table + (int64_t)w.seq * p.bt_stride;
  const T *kc = static_cast<const T *>(p.k) + (int64_t)kvh * p.k_sh;
  const T *vc = static_cast<const T *>(p.v) + (int64_t)kvh * p.v_sh;
  /* Paging in two steps. Step 1, one iteration ahead: the threads owning a
   * row read its page id (the read's latency hides behind a tile of math),
   * then store the row's K and V offsets in a shared slot. Step 2: every
   * thread issues its 16-byte copies from those offsets. Keys outside
   * [lo, hi) are masked anyway: offset -1, the copy zero-fills. */
  constexpr int ROWS_PT = (BLOCK_N + S::THREADS - 1) / S::THREADS;
  constexpr int LOADS = (BLOCK_N * CH + S::THREADS - 1) / S::THREADS; /* 16-byte chunks per thread */
  /* Page id of row r of the tile at n0 (-1 outside [lo, hi)), and a row's
   * element offset in a cache of block/token strides sb, st (-1: no row). */
  auto page_id = [&](int r, int n0) {
    const int j = n0 + r;
    return (r < BLOCK_N && j >= lo && j < hi) ? bt_row[fast_div(j, p.bs_magic, p.bs_shift)] : -1;
  };
  auto row_elems = [&](int pg, int j, int64_t sb, int64_t st) {
    const int jr = j - fast_div(j, p.bs_magic, p.bs_shift) * p.block_size;
    return pg >= 0 ? (int64_t)pg * sb + (int64_t)jr * st : (int64_t)-1;
  };
  auto lookup_pages = [&](int n0, int(&pg)[ROWS_PT]) {
#pragma unroll
    for (int q = 0; q < ROWS_PT; q++) pg[q] = page_id(tid + q * S::THREADS, n0);
  };
  auto store_offsets = [&](int slot, int n0, const int(&pg)[ROWS_PT]) {
#pragma unroll
    for (int q = 0; q < ROWS_PT; q++) {
      const int r = tid + q * S::THREADS;
      if (r < BLOCK_N) {
        int64_t *o = sOff + (slot * BLOCK_N + r) * 2;
        o[0] = row_elems(pg[q], n0 + r, p.k_sb, p.k_st);
        o[1] = row_elems(pg[q], n0 + r, p.v_sb, p.v_st);
      }
    }
  };
  auto issue_tile = [&](int stage, int slot) {
    T *dk = sK + stage * BLOCK_N * ROW;
    T *dv = sV + stage * BLOCK_N * ROW;
#pragma unroll
    for (int k = 0; k < LOADS; k++) {
      int r, c;
      if constexpr (S::THREADS % CH == 0) { /* fixed column per thread: immediate smem offsets */
        r = tid / CH + k * (S::THREADS / CH);
        c = tid % CH;
      } else {
        r = (tid + k * S::THREADS) / CH;
        c = (tid + k * S::THREADS) % CH;
      }
      /* tid < THREADS: with an exact split every r is in range */
      if ((BLOCK_N * CH) % S::THREADS == 0 || r < BLOCK_N) {
        const int64_t ok_ = sOff[(slot * BLOCK_N + r) * 2], ov_ = sOff[(slot * BLOCK_N + r) * 2 + 1];
        const bool ok = ok_ >= 0;
        const uint32_t pad = (uint32_t)((r * ROW + c * 8) * sizeof(T)), sw = kv_smem_offset<BLOCK_N>(r, c);
        async_copy16(reinterpret_cast<unsigned char *>(dk) + (WG_QK ? sw : pad), kc + (ok ? ok_ + c * 8 : 0), ok);
        async_copy16(reinterpret_cast<unsigned char *>(dv) + (WG_PV ? sw : pad), vc + (ok ? ov_ + c * 8 : 0), ok);
      }
    }
  };

  /* TMA (tma): lane b of warp 0 owns box b of a tile, the R = p.tma_rows
   * cache rows from key n0 + b R, all in one page (R is the block size, or
   * BLOCK_N when pages are larger). It reads the box's page id a tile ahead
   * into registers (tpg, trow) and issues the box of K and of V; lane 0
   * announces the stage's bytes. A box wholly outside [lo, hi) reads the
   * nearest box inside instead: finite cache data whose keys are masked (V
   * rows outside [lo, hi) are zeroed after landing, as they may hold a
   * page's unwritten tail). */
  /* Boxes only for programs of kTmaMinTiles tiles or more: on one H200 the
   * first box landed ~0.3 us later than the first 16-byte copies (1x500,
   * one tile per program: 9.6 vs 9.4-9.5 us), and the boxes pay off in the
   * tiles after it (1x8192, 8 tiles: 22.8-23.1 vs 23.3 us). A choice per
   * program, from its own tile count. */
  constexpr int kTmaMinTiles = 3;
  const bool tma = TMA_OK && p.tma_rows > 0 && ntiles >= kTmaMinTiles; /* run encoded the tensor maps */
  const int lane = lane_id();
  const bool tma_lane = tma && warp == 0 && lane * p.tma_rows < BLOCK_N;
  /* First key of the box meant to start at key j0 (a multiple of R = p.tma_rows),
   * or of the nearest box inside [lo, hi). R is a power of two: BLOCK_N, or a
   * block size dividing it (run checks). */
  auto box_key = [&](int j0) {
    const int mask = ~(p.tma_rows - 1);
    return min(max(j0, lo & mask), (hi - 1) & mask);
  };
  auto tma_lookup = [&](int n0, int &pg, int &row) {
    const int jb = box_key(n0 + lane * p.tma_rows);
    const int pi = fast_div(jb, p.bs_magic, p.bs_shift);
    row = jb - pi * p.block_size;
    pg = bt_row[pi];
  };
  auto tma_issue = [&](int stage, int pg, int row) {
#if defined(AA_HAS_TMA)
    if (warp == 0) {
      if (lane == 0) mbar_arrive_expect_tx(kv_bar + stage, (uint32_t)(2 * BLOCK_N * ROW * sizeof(T)));
      if (tma_lane) {
        const int r0 = (stage * BLOCK_N + lane * p.tma_rows) * ROW;
        tma_load_4d(sK + r0, &p.k_map, 0, kvh, row, pg, kv_bar + stage);
        tma_load_4d(sV + r0, &p.v_map, 0, kvh, row, pg, kv_bar + stage);
      }
    }
#else
    (void)stage, (void)pg, (void)row;
#endif
  };
  (void)tma_lookup, (void)tma_issue; /* used by TMA programs only */
  int tpg = 0, trow = 0; /* the next tile's box (TMA) */

#if defined(AA_HAS_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr bool PP = S::PP && WG_QK && WG_PV;
#else
  constexpr bool PP = false;
#endif
  /* The pipelined 128-row tile (PP) splits the copies by warpgroup: the
   * first (g 0) copies K tiles, the second V tiles, each thread of a
   * warpgroup owning row lt of a tile for its page id. Offsets go to
   * sOff[slot][row][g]; a warpgroup's named barrier publishes them. */
  const int g = tid >> 7, lt = tid & 127;
  /* TMA in the pipelined tile (tma_pp): a half is boxes when it is K, or V
   * of a tile wholly inside [lo, hi) (a boundary V tile keeps the 16-byte
   * copies, which zero-fill rows past the range: those may hold a page's
   * unwritten tail, and P = 0 times NaN is NaN). Box b of a tile is issued
   * by thread lt = b R of the warpgroup, which reads its page id a tile
   * ahead (pg_next) instead of its row's. All 128 threads arrive on the
   * half's mbarrier either way (thread 0 with the byte count). */
#if defined(AA_HAS_TMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const bool tma_pp = S::TMA_PP && p.tma_rows > 0 && ntiles > 0;
#else
  const bool tma_pp = false;
#endif
  auto wg_box = [&](int n0) { return tma_pp && (g == 0 || (n0 >= lo && n0 + BLOCK_N <= hi)); };
  auto box_owner = [&]() { return lt < BLOCK_N && (lt & (p.tma_rows - 1)) == 0; };
  auto wg_lookup = [&](int n0) {
    if (wg_box(n0)) return box_owner() ? bt_row[fast_div(box_key(n0 + lt), p.bs_magic, p.bs_shift)] : 0;
    return page_id(lt, n0);
  };
  auto wg_store = [&](int slot, int n0, int pg) {
    if (lt < BLOCK_N)
      sOff[(slot * BLOCK_N + lt) * 2 + g] = row_elems(pg, n0 + lt, g ? p.v_sb : p.k_sb, g ? p.v_st : p.k_st);
  };
  /* This warpgroup's half of tile (stage, slot): K or V; its arrival on the
   * stage's mbarrier comes when the copies have landed. Committed as a group
   * of their own (nobody waits on the group: the mbarrier tracks them; the
   * kernel's last wait_group covers them before shared memory is reused). */
  auto wg_issue = [&](int stage, int slot) {
#if defined(AA_HAS_WGMMA)
    constexpr int WG_LOADS = BLOCK_N * CH / 128;
    unsigned char *dst = reinterpret_cast<unsigned char *>(g ? sV : sK) + (size_t)stage * BLOCK_N * ROW * sizeof(T);
    const T *src = g ? vc : kc;
#pragma unroll
    for (int k = 0; k < WG_LOADS; k++) {
      const int r = lt / CH + k * (128 / CH), c = lt % CH;
      const int64_t o = sOff[(slot * BLOCK_N + r) * 2 + g];
      async_copy16(dst + kv_smem_offset<BLOCK_N>(r, c), src + (o >= 0 ? o + c * 8 : 0), o >= 0);
    }
    mbar_arrive_copies(kv_full + 2 * g + stage);
    async_commit();
#else
    (void)stage, (void)slot;
#endif
  };
  /* Tile n0's half (K for g 0, V for g 1) into stage/slot from page id pg
   * (wg_lookup's, a tile ahead): boxes, or offsets published to the
   * warpgroup then 16-byte copies. One cp.async group either way. */
  auto wg_fill = [&](int stage, int slot, int n0, int pg) {
#if defined(AA_HAS_TMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (wg_box(n0)) {
      uint64_t *bar = kv_full + 2 * g + stage;
      if (lt == 0) mbar_arrive_expect_tx(bar, (uint32_t)(BLOCK_N * HEAD_DIM * sizeof(T)));
      else mbar_arrive(bar);
      if (box_owner()) {
        const int jb = box_key(n0 + lt), pi = fast_div(jb, p.bs_magic, p.bs_shift), row = jb - pi * p.block_size;
        unsigned char *dst = reinterpret_cast<unsigned char *>(g ? sV : sK) +
                             (size_t)stage * BLOCK_N * ROW * sizeof(T) + (size_t)lt * 128;
        fence_proxy_async_smem(); /* earlier 16-byte copies into this stage, before the boxes */
#pragma unroll
        for (int pn = 0; pn < HEAD_DIM / 64; pn++)
          tma_load_4d(dst + pn * (BLOCK_N * 128), g ? &p.v_map : &p.k_map, pn * 64, kvh, row, pg, bar);
      }
      async_commit();
      return;
    }
#endif
#if defined(AA_HAS_WGMMA)
    wg_store(slot, n0, pg);
    named_sync(kBarWg0 + g, 128);
    wg_issue(stage, slot);
#else
    (void)stage, (void)slot, (void)n0, (void)pg;
#endif
  };
  (void)wg_lookup, (void)wg_store, (void)wg_issue, (void)wg_fill; /* used by PP programs only */
  int pg_next[ROWS_PT];
  if constexpr (PP) {
#if defined(AA_HAS_WGMMA)
    /* K(0) and K(1) by the first warpgroup, V(0) by the second; V(1) and
     * K(2) follow inside the loop. One round trip for the page ids. */
    const int pg0 = wg_lookup(n_begin), pg1 = wg_lookup(n_begin + BLOCK_N);
    const int pg2 = g == 0 ? wg_lookup(n_begin + 2 * BLOCK_N) : 0;
    if (ntiles > 0) wg_fill(0, 0, n_begin, pg0);
    else async_commit();
    if (g == 0 && ntiles > 1) wg_fill(1, 1, n_begin + BLOCK_N, pg1);
    else async_commit(); /* two groups after Q's on every thread */
    pg_next[0] = g == 0 ? pg2 : pg1;
#endif
  } else if (tma) {
    /* The first STAGES tiles' boxes at once (one round trip for their page
     * ids), the first STAGES - 1 issued with no barrier between; empty
     * cp.async groups keep Q's group where the wait below expects it. */
    int pg_first[STAGES] = {}, row_first[STAGES] = {};
    if (tma_lane) {
#pragma unroll
      for (int st = 0; st < STAGES; st++) tma_lookup(n_begin + st * BLOCK_N, pg_first[st], row_first[st]);
    }
#if defined(AA_HAS_TMA)
    /* The mbarriers, while the page ids are on their way: visible to the
     * copy engine (the fence) and to warp 0's lanes before any box names
     * them; the other warps wait on them only after the block barrier below. */
    if (warp == 0) {
      if (lane == 0) {
        for (int i = 0; i < STAGES; i++) mbar_init(kv_bar + i, 1);
        mbar_init_fence();
      }
      warp_sync();
    }
#endif
#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) {
      if (st < ntiles) tma_issue(st, pg_first[st], row_first[st]);
      async_commit();
    }
    tpg = pg_first[STAGES - 1], trow = row_first[STAGES - 1];
  } else {
    /* The first STAGES tiles' page ids are read at once: one round trip. */
    int pg_first[STAGES][ROWS_PT];
#pragma unroll
    for (int st = 0; st < STAGES; st++) lookup_pages(n_begin + st * BLOCK_N, pg_first[st]);
#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) {
      store_offsets(st & 1, n_begin + st * BLOCK_N, pg_first[st]);
      block_sync();
      if (st < ntiles) issue_tile(st, st & 1);
      async_commit();
    }
    store_offsets((STAGES - 1) & 1, n_begin + (STAGES - 1) * BLOCK_N, pg_first[STAGES - 1]);
  }
  AA_MARK(3);

  /* Per-lane rows: position, ALiBi slope, for each accumulator row slot. */
  int pos[kFragCSlots], jlo[kFragCSlots], jhi[kFragCSlots];
  float slope[kFragCSlots];
#pragma unroll
  for (int sl = 0; sl < kFragCSlots; sl++) {
    const int r = wm * 16 + frag_c_row(sl);
    const int rt = row_tok(r);
    const int t = min(rt, w.n_tok - 1);
    const int h = head0 + min(r - rt * p.gh, heads_here - 1);
    pos[sl] = pos_base + t;
    kv_range(p, pos[sl], pos[sl], w.kv_len, jlo[sl], jhi[sl]);
    slope[sl] = p.alibi ? p.alibi[h] * kLog2e : 0.0f;
  }
  const bool plain = p.alibi == nullptr && !(p.softcap > 0.0f);

  if constexpr (PP) { /* Q's group, before the two of the first K/V copies; wgmma reads Q next */
    async_wait<2>();
#if defined(AA_HAS_WGMMA)
    fence_proxy_async_smem();
#endif
  } else {
    async_wait<STAGES - 1>(); /* the Q group is the oldest */
  }
  block_sync();
  AA_MARK(4);
  const T *sQw = sQ + wm * 16 * ROW;
  constexpr bool QREG = S::Q_IN_REGS && !WG_QK;
  FragA qf[QREG ? DK : 1];
  if constexpr (QREG) {
#pragma unroll
    for (int kk = 0; kk < DK; kk++)
      load_a(qf[kk], [&](int r, int c) { return sQw + r * ROW + kk * 16 + c; });
  }

  FragC acc[DK];
#pragma unroll
  for (int d = 0; d < DK; d++) zero(acc[d]);
  float m_run[kFragCSlots], l_run[kFragCSlots];
#pragma unroll
  for (int sl = 0; sl < kFragCSlots; sl++) {
    m_run[sl] = -INFINITY;
    l_run[sl] = 0.0f;
  }

  /* Scores of tile n0 in s -> P in pa (masks only on tiles that cross a
   * boundary, online softmax), and the output rescaled to the new maxima. */
  auto softmax_tile = [&](int n0, FragC(&s)[NK], FragA(&pa)[NK]) {
    const int nw0 = n0 + wn * S::KW;
    const bool full = nw0 >= lo && nw0 + S::KW <= w.kv_len &&
                      (p.causal ? nw0 + S::KW - 1 <= pos_min
                                : (p.window_right < 0 || nw0 + S::KW - 1 <= pos_min + p.window_right)) &&
                      (p.window_left < 0 || nw0 >= pos_max - p.window_left);
    float mx[kFragCSlots];
#pragma unroll
    for (int sl = 0; sl < kFragCSlots; sl++) mx[sl] = -INFINITY;
    const float sc = plain ? p.scale_log2 : 1.0f; /* raw dot products -> log2 domain */
    if (plain) {
      if (full) score_tile<true, false>(p, s, nw0, jlo, jhi, slope, pos, mx);
      else score_tile<true, true>(p, s, nw0, jlo, jhi, slope, pos, mx);
    } else { /* softcap / ALiBi: rare, one masked variant keeps the code small */
      score_tile<false, true>(p, s, nw0, jlo, jhi, slope, pos, mx);
    }
    float alpha[kFragCSlots], m_use[kFragCSlots];
#pragma unroll
    for (int sl = 0; sl < kFragCSlots; sl++) {
      const float m_new = fmaxf(m_run[sl], row_allreduce_max(mx[sl]) * sc); /* sc > 0 keeps the max */
      m_use[sl] = m_new == -INFINITY ? 0.0f : m_new; /* a row with nothing visible yet stays at 0 */
      alpha[sl] = fast_exp2(m_run[sl] - m_use[sl]);
      m_run[sl] = m_new;
      l_run[sl] *= alpha[sl];
    }
#pragma unroll
    for (int n = 0; n < NK; n++) {
#pragma unroll
      for (int e = 0; e < kFragCElems; e++) {
        const int sl = frag_c_slot(e);
        const float pe = fast_exp2(fmaf(s[n].x[e], sc, -m_use[sl]));
        s[n].x[e] = pe;
        l_run[sl] += pe;
      }
      acc_to_a<T>(pa[n], s[n]);
    }
#pragma unroll
    for (int d = 0; d < DK; d++)
#pragma unroll
      for (int e = 0; e < kFragCElems; e++) acc[d].x[e] *= alpha[frag_c_slot(e)];
  };

#if defined(AA_HAS_WGMMA)
  if constexpr (PP) {
    /* The two warpgroups half a tile apart. Each iteration is one product
     * phase, O += P(it-1) V(it-1) and S = Q K(it)^T issued together, then the
     * softmax of S. A warpgroup issues its products only in its turn
     * (kBarSched0 + g, handed over right after issuing), so one warpgroup's
     * softmax runs while the other's products keep the tensor cores busy.
     * Stages: K(it) and V(it) land in stage it % 2, each half tracked by its
     * own mbarrier (phase it / 2). Refills: the first warpgroup copies
     * K(it+2) once the second is done with K(it) (kBarKFree), after its own
     * softmax; the second copies V(it+1) once the first is done with V(it-1)
     * (kBarVFree), right after its products. The second takes kBarVFree
     * before handing the turn back, and the first takes kBarKFree before
     * its next turn, so neither named barrier is passed twice by the same
     * side before the other side took it. */
    FragA pa[NK];
    /* One phase: products of P(it-1) V(it-1) (PVd) and Q K(it)^T (QKd),
     * fixed per instantiation: ptxas serialises every wgmma of a kernel that
     * issues one on a path it cannot prove uniform. */
    auto phase = [&](auto pv_c, auto qk_c, int it) {
      constexpr bool PVd = decltype(pv_c)::value, QKd = decltype(qk_c)::value;
      if constexpr (QKd) mbar_wait(kv_full + (it & 1), (uint32_t)(it >> 1) & 1u);
      if constexpr (PVd) mbar_wait(kv_full + 2 + ((it - 1) & 1), (uint32_t)((it - 1) >> 1) & 1u);
      fence_proxy_async_smem(); /* the copies seen through the mbarriers, before wgmma reads them */
      FragC s[NK];
      named_sync(kBarSched0 + g, 256);
#pragma unroll
      for (int d = 0; d < DK; d++) wg_keep(acc[d]);
#pragma unroll
      for (int n = 0; n < NK; n++) wg_keep(pa[n]);
      wg_fence();
      if constexpr (PVd) wg_issue_pv<T, S>(acc, pa, smem_u32(sV + ((it - 1) & 1) * BLOCK_N * ROW));
      if constexpr (QKd) wg_issue_scores<T, S>(s, smem_u32(sQ), g * 64, smem_u32(sK + (it & 1) * BLOCK_N * ROW));
      wg_commit();
      const bool vissue = it + 1 < ntiles, vfree = PVd && vissue; /* V(it+1) refills V(it-1)'s stage */
      if (g == 1 && vfree) named_sync(kBarVFree, 256);
      named_arrive(kBarSched0 + (g ^ 1), 256);
      wg_wait_all();
#pragma unroll
      for (int d = 0; d < DK; d++) wg_keep(acc[d]);
#pragma unroll
      for (int n = 0; n < NK; n++) {
        wg_keep(pa[n]);
        wg_keep(s[n]);
      }
      const bool kfree = it + 2 < ntiles; /* K(it+2) refills K(it)'s stage */
      if (g == 0 && vfree) {
        fence_proxy_async_smem();
        named_arrive(kBarVFree, 256);
      }
      if (g == 1 && kfree) {
        fence_proxy_async_smem();
        named_arrive(kBarKFree, 256);
      }
      if (g == 1 && vissue) {
        wg_fill((it + 1) & 1, (it + 1) & 1, n_begin + (it + 1) * BLOCK_N, pg_next[0]);
        pg_next[0] = wg_lookup(n_begin + (it + 2) * BLOCK_N);
      }
      if constexpr (QKd) {
        softmax_tile(n_begin + it * BLOCK_N, s, pa);
        if (g == 0 && kfree) {
          named_sync(kBarKFree, 256);
          wg_fill(it & 1, it & 1, n_begin + (it + 2) * BLOCK_N, pg_next[0]);
          pg_next[0] = wg_lookup(n_begin + (it + 3) * BLOCK_N);
        }
      }
    };
    if (ntiles > 0) {
      if (g == 1) named_arrive(kBarSched0, 256); /* the first warpgroup goes first */
      AA_MARK(5);
      phase(BoolC<false>(), BoolC<true>(), 0);
      for (int it = 1; it < ntiles; it++) phase(BoolC<true>(), BoolC<true>(), it);
      phase(BoolC<true>(), BoolC<false>(), ntiles);
      /* The second warpgroup handed the turn over once more than the first
       * took it (its arrival before the loop): take it, so no named barrier
       * is left with arrivals pending when the program goes on or exits. */
      if (g == 0) named_sync(kBarSched0, 256);
    }
  } else
#endif
  {
    for (int it = 0; it < ntiles; it++) {
      const int nx = it + STAGES - 1; /* the tile whose copies start now */
      if (tma) {
#if defined(AA_HAS_TMA)
        if (nx < ntiles) tma_issue(nx % STAGES, tpg, trow);
        if (tma_lane) tma_lookup(n_begin + (nx + 1) * BLOCK_N, tpg, trow); /* used next iteration */
        mbar_wait(kv_bar + it % STAGES, (uint32_t)(it / STAGES) & 1u); /* every box of the tile has landed */
        const int n0 = n_begin + it * BLOCK_N;
        if (n0 < lo || n0 + BLOCK_N > hi) { /* V rows outside [lo, hi) -> 0: P is 0 there, V must be finite */
          /* With one row band each warp reads only its own keys' rows and
           * zeroes them itself; else the block zeroes the tile together. */
          constexpr bool OWN = S::WM == 1;
          const int r0 = OWN ? wn * S::KW : 0;
          T *tv0 = sV + ((it % STAGES) * BLOCK_N + r0) * ROW;
          for (int i = OWN ? lane : tid; i < (OWN ? S::KW : BLOCK_N) * CH; i += OWN ? AA_WARP_SIZE : S::THREADS) {
            const int r = i / CH, j = n0 + r0 + r;
            if (j < lo || j >= hi) *reinterpret_cast<uint4 *>(tv0 + r * ROW + (i % CH) * 8) = make_uint4(0u, 0u, 0u, 0u);
          }
          fence_proxy_async_smem(); /* before the stage's next box lands over these */
          if constexpr (OWN) warp_sync();
          else block_sync();
        }
#endif
      } else {
        if (nx < ntiles) issue_tile(nx % STAGES, nx & 1);
        lookup_pages(n_begin + (nx + 1) * BLOCK_N, pg_next); /* stored after this tile's math */
        async_commit();
        async_wait<STAGES - 1>();
#if defined(AA_HAS_WGMMA)
        if constexpr (WG_QK || WG_PV) fence_proxy_async_smem(); /* this thread's copies, before wgmma reads them */
#endif
        block_sync();
      }
      if (it == 0) AA_MARK(5);

      const int n0 = n_begin + it * BLOCK_N;
      const T *tk = sK + (it % STAGES) * BLOCK_N * ROW + wn * S::KW * ROW;
      const T *tv = sV + (it % STAGES) * BLOCK_N * ROW + wn * S::KW * ROW;

      /* S = Q K^T for this warp's 16 rows x KW keys. */
      FragC s[NK];
#if defined(AA_HAS_WGMMA)
      if constexpr (WG_QK) wg_scores<T, S>(s, smem_u32(sQ), (warp >> 2) * 64, smem_u32(tk));
      else
#endif
      {
#pragma unroll
        for (int n = 0; n < NK; n++) zero(s[n]);
#pragma unroll
        for (int kk = 0; kk < DK; kk++) {
          FragA a;
          if constexpr (QREG) a = qf[kk];
          else load_a(a, [&](int r, int c) { return sQw + r * ROW + kk * 16 + c; });
#pragma unroll
          for (int n = 0; n < NK; n++) {
            FragB b;
            load_b_nk(b, [&](int r, int c) { return tk + (n * 16 + r) * ROW + kk * 16 + c; });
            mma<T>(s[n], a, b);
          }
        }
      }

      FragA pa[NK];
      softmax_tile(n0, s, pa);

      /* O += P V */
#if defined(AA_HAS_WGMMA)
      if constexpr (WG_PV) wg_pv<T, S>(acc, pa, smem_u32(tv));
      else
#endif
      {
#pragma unroll
        for (int n = 0; n < NK; n++) {
#pragma unroll
          for (int d = 0; d < DK; d++) {
            FragB b;
            load_b_kn(b, [&](int r, int c) { return tv + (n * 16 + r) * ROW + d * 16 + c; });
            mma<T>(acc[d], pa[n], b);
          }
        }
      }
      if (!tma) store_offsets((nx + 1) & 1, n_begin + (nx + 1) * BLOCK_N, pg_next);
      block_sync(); /* the stage is refilled next iteration */
    }
  }
  async_wait<0>();
  AA_MARK(6);
  if (split) grid_dependents_launch(); /* the reduce may start launching; it waits for our writes */
  block_sync();

  /* Merge the WN warps of each row band through shared memory, then write.
   * Two orders, fixed by the tile shape:
   * - early scale (WN < AA_LATE_MERGE_WN): a barrier publishes every warp's
   *   rows' (max, sum); each lane scales its own accumulators by 2^(m - M)/L
   *   and stores them; after a second barrier, threads sum the WN partials.
   *   Every lane works, which suits the 4-warp tiles run 2 per SM.
   * - late scale (WN >= AA_LATE_MERGE_WN: the 8-warp decode tile): warps
   *   store raw accumulators with their (max, sum); after one barrier, only
   *   threads owning a valid (row, 8-column) chunk weigh the WN partials and
   *   normalise. A decode program has 4 valid rows of 16 at GQA 4, and one
   *   barrier fewer shortens the latency-bound batch-1 epilogue.
   * Measured: bench/results/h200.md (decode). */
  constexpr bool LATE = WN >= AA_LATE_MERGE_WN;
  float *sM = reinterpret_cast<float *>(smem);
  float *sL = sM + WN * BLOCK_M;
  float *sO = sL + WN * BLOCK_M;
#pragma unroll
  for (int sl = 0; sl < kFragCSlots; sl++) {
    const float l_tot = row_allreduce_sum(l_run[sl]);
    if (frag_c_row_owner()) {
      const int r = wm * 16 + frag_c_row(sl);
      sM[wn * BLOCK_M + r] = m_run[sl];
      sL[wn * BLOCK_M + r] = l_tot;
    }
  }
  const bool sink = p.sinks && !split; /* a split's sink enters once, in the merge of the segments */
  /* A merged row's (max, sum): to the cluster's merge, the segment's partial or the lse. */
  auto store_row_ml = [&](int r, bool any, float M, float L) {
    if (cl) reinterpret_cast<float2 *>(smem + S::CL_ML_OFF)[r] = make_float2(any ? M : -INFINITY, any ? L : 0.0f);
    else if (split) p.part_ml[part_row(r)] = make_float2(any ? M : -INFINITY, any ? L : 0.0f);
    else if (p.lse) p.lse[row_offset(r)] = any ? (M + __log2f(L)) * kLn2 : -INFINITY;
  };
  float f[kFragCSlots];
#pragma unroll
  for (int sl = 0; sl < kFragCSlots; sl++) f[sl] = 1.0f;
  if constexpr (!LATE) {
    block_sync();
#pragma unroll
    for (int sl = 0; sl < kFragCSlots; sl++) {
      const int r = wm * 16 + frag_c_row(sl);
      float M = -INFINITY;
#pragma unroll
      for (int u = 0; u < WN; u++) M = fmaxf(M, sM[u * BLOCK_M + r]);
      const bool any = M != -INFINITY;
      const int h = head0 + min(r - row_tok(r) * p.gh, heads_here - 1);
      if (sink) M = fmaxf(M, p.sinks[h] * kLog2e);
      float L = 0.0f;
#pragma unroll
      for (int u = 0; u < WN; u++) L += sL[u * BLOCK_M + r] * fast_exp2(sM[u * BLOCK_M + r] - M);
      if (sink) L += fast_exp2(p.sinks[h] * kLog2e - M);
      f[sl] = any ? fast_exp2(m_run[sl] - M) * fast_rcp(L) : 0.0f; /* L >= 1 when any */
      if (wn == 0 && frag_c_row_owner() && (cl || row_valid(r))) store_row_ml(r, any, M, L);
    }
  }
  float *sOw = sO + (size_t)wn * BLOCK_M * S::OROW;
#pragma unroll
  for (int d = 0; d < DK; d++)
#pragma unroll
    for (int e = 0; e < kFragCElems; e++) {
      const int sl = frag_c_slot(e);
      sOw[(wm * 16 + frag_c_row(sl)) * S::OROW + d * 16 + frag_c_col(e)] = LATE ? acc[d].x[e] : acc[d].x[e] * f[sl];
    }
  block_sync();
  T *out = static_cast<T *>(p.out);
  constexpr int OL = (BLOCK_M * CH + S::THREADS - 1) / S::THREADS;
#pragma unroll
  for (int k = 0; k < OL; k++) {
    const int i = tid + k * S::THREADS, r = i / CH, c = i % CH;
    if (((BLOCK_M * CH) % S::THREADS != 0 && i >= BLOCK_M * CH) || !row_valid(r)) continue;
    float v[8];
#pragma unroll
    for (int k = 0; k < 8; k++) v[k] = 0.0f;
    if constexpr (LATE) {
      float mu[WN], M = -INFINITY;
#pragma unroll
      for (int u = 0; u < WN; u++) {
        mu[u] = sM[u * BLOCK_M + r];
        M = fmaxf(M, mu[u]);
      }
      const bool any = M != -INFINITY;
      const float sk = sink ? p.sinks[head0 + (r - row_tok(r) * p.gh)] * kLog2e : -INFINITY; /* r is valid */
      M = fmaxf(M, sk);
      float L = sink && any ? fast_exp2(sk - M) : 0.0f;
#pragma unroll
      for (int u = 0; u < WN; u++) {
        const float wt = mu[u] == -INFINITY ? 0.0f : fast_exp2(mu[u] - M); /* a warp that saw no key: 0 */
        L = fmaf(sL[u * BLOCK_M + r], wt, L);
        const float4 *src = reinterpret_cast<const float4 *>(sO + ((size_t)u * BLOCK_M + r) * S::OROW + c * 8);
        const float4 a = src[0], b = src[1];
        v[0] = fmaf(wt, a.x, v[0]), v[1] = fmaf(wt, a.y, v[1]), v[2] = fmaf(wt, a.z, v[2]), v[3] = fmaf(wt, a.w, v[3]);
        v[4] = fmaf(wt, b.x, v[4]), v[5] = fmaf(wt, b.y, v[5]), v[6] = fmaf(wt, b.z, v[6]), v[7] = fmaf(wt, b.w, v[7]);
      }
      const float fr = any ? fast_rcp(L) : 0.0f; /* L >= 1 when any */
#pragma unroll
      for (int k = 0; k < 8; k++) v[k] *= fr;
      if (c == 0) store_row_ml(r, any, M, L); /* r is valid here */
    } else {
#pragma unroll
      for (int u = 0; u < WN; u++) {
        const float4 *src = reinterpret_cast<const float4 *>(sO + ((size_t)u * BLOCK_M + r) * S::OROW + c * 8);
        const float4 a = src[0], b = src[1];
        v[0] += a.x, v[1] += a.y, v[2] += a.z, v[3] += a.w;
        v[4] += b.x, v[5] += b.y, v[6] += b.z, v[7] += b.w;
      }
    }
    if (cl) {
      float4 *dst = reinterpret_cast<float4 *>(smem + S::CL_OFF) + (r * S::OROW + c * 8) / 4;
      dst[0] = make_float4(v[0], v[1], v[2], v[3]);
      dst[1] = make_float4(v[4], v[5], v[6], v[7]);
      continue;
    }
    if (split) {
      float4 *dst = reinterpret_cast<float4 *>(p.part_o + part_row(r) * HEAD_DIM + c * 8);
      dst[0] = make_float4(v[0], v[1], v[2], v[3]);
      dst[1] = make_float4(v[4], v[5], v[6], v[7]);
      continue;
    }
    uint4 o;
    o.x = pack2<T>(v[0], v[1]);
    o.y = pack2<T>(v[2], v[3]);
    o.z = pack2<T>(v[4], v[5]);
    o.w = pack2<T>(v[6], v[7]);
    *reinterpret_cast<uint4 *>(out + row_offset(r) * HEAD_DIM + c * 8) = o;
  }
  if constexpr (kHasClusters) {
    if (cl) cluster_merge<T, HEAD_DIM, S>(p, smem, seg, [&](int r) { return row_valid(r); },
                                         [&](int r) { return row_offset(r); },
                                         [&](int r) { return head0 + min(r - row_tok(r) * p.gh, heads_here - 1); });
  }
  AA_TRACE_PRINT("TR");
}

/* ---- split-KV reduce: one warp per (token, q head) row ------------------------------
 * Merges the num_splits partials of a row by their log-sum-exp weights:
 * with M = max(m_s, sink), w_s = l_s 2^(m_s - M), out = sum w_s o_s / (sum w_s
 * + 2^(sink - M)) and lse = (M + log2 of that denominator) ln 2. Segments that
 * saw no key (m_s = -inf) weigh nothing and their o_s is never read; a row
 * with no key anywhere gets 0 / -inf, sinks or not. Rows past
 * cu_seqlens_q[num_seqs] are padding: never written. */
constexpr int kReduceWarps = 4;
constexpr int kReduceMaxDim = 256;
constexpr int kReduceMaxSplits = 128; /* the launcher never splits wider */

/* The merge is latency-bound (a few KB per row), so nothing waits in a chain.
 * Before griddepcontrol.wait it reads only what the partials' kernel does not
 * write (cu_seqlens_q, sinks): that kernel was itself stream-ordered after
 * their producers. After it, one round trip per kReduceBatch segments: each
 * lane issues the (m, l) of its own segments and the partial rows of the
 * whole batch before using any of them. Rows of segments that saw no key were
 * never written (their bytes are stale): they are read but never enter a sum
 * (a select, not a multiply by 0, so stale NaNs cannot leak). */
constexpr int kReduceBatch = 16;

template <typename T>
__global__ void __launch_bounds__(kReduceWarps *AA_WARP_SIZE) attn_split_reduce_kernel(const AttnParams p, int head_dim) {
  constexpr int PAIRS = (kReduceMaxDim / 2 + AA_WARP_SIZE - 1) / AA_WARP_SIZE; /* column pairs per lane */
  constexpr int SEGS = (kReduceMaxSplits + AA_WARP_SIZE - 1) / AA_WARP_SIZE;   /* segments per lane */
  const int warp = threadIdx.x / AA_WARP_SIZE, lane = lane_id();
  AA_TRACE_DECL;
  AA_MARK(0);
  const int64_t row = (int64_t)blockIdx.x * kReduceWarps + warp;
  const bool live = row < (int64_t)p.cu_seqlens_q[p.num_seqs] * p.num_q_heads; /* padding rows: untouched */
  /* row is small (fast_div needs < 2^31): a split run holds at most
   * plan->split_rows tokens (kMaxSplits x 8) */
  const int h = (int)row - fast_div((int)row, p.qh_magic, p.qh_shift) * p.num_q_heads;
  const float sink = (live && p.sinks) ? p.sinks[h] * kLog2e : -INFINITY;
  grid_dependents_launch(); /* a kernel after this one may launch; it waits for our writes */
  grid_dependency_wait();   /* the partials are complete and visible */
  AA_MARK(1);
  if (!live) return;        /* whole warps: no barrier below */
  const int64_t seg_rows = (int64_t)p.num_tokens * p.num_q_heads;
  const int S = p.num_splits;
  const int pairs = head_dim / 2;
  float m_seg[SEGS], w_seg[SEGS];
#pragma unroll
  for (int i = 0; i < SEGS; i++) {
    const int s = lane + i * AA_WARP_SIZE;
    const float2 ml = s < S ? p.part_ml[s * seg_rows + row] : make_float2(-INFINITY, 0.0f);
    m_seg[i] = ml.x;
    w_seg[i] = ml.y;
  }
  float2 acc[PAIRS];
#pragma unroll
  for (int k = 0; k < PAIRS; k++) acc[k] = make_float2(0.0f, 0.0f);
  float2 v[kReduceBatch][PAIRS];
  auto load_batch = [&](int s0) {
#pragma unroll
    for (int u = 0; u < kReduceBatch; u++) {
      const int s = s0 + u;
      const float2 *o = reinterpret_cast<const float2 *>(p.part_o + (s * seg_rows + row) * head_dim);
#pragma unroll
      for (int k = 0; k < PAIRS; k++) {
        const int c = lane + k * AA_WARP_SIZE;
        v[u][k] = (s < S && c < pairs) ? o[c] : make_float2(0.0f, 0.0f);
      }
    }
  };
  load_batch(0); /* in flight together with the (m, l) loads */
  float M = -INFINITY, L = 0.0f;
#pragma unroll
  for (int i = 0; i < SEGS; i++) M = fmaxf(M, m_seg[i]);
  M = warp_allreduce_max(M);
  const bool any = M != -INFINITY; /* some segment saw a key (decided before the sink enters) */
  M = fmaxf(M, sink);
#pragma unroll
  for (int i = 0; i < SEGS; i++) { /* segments that saw no key weigh nothing */
    w_seg[i] = m_seg[i] == -INFINITY ? 0.0f : w_seg[i] * fast_exp2(m_seg[i] - M);
    L += w_seg[i];
  }
  L = warp_allreduce_sum(L);
  /* The weights go through shared memory: the batch loop indexes them by a
   * run-time segment number, which registers cannot hold without local memory. */
  __shared__ float s_w[kReduceWarps][kReduceMaxSplits];
#pragma unroll
  for (int i = 0; i < SEGS; i++)
    if (lane + i * AA_WARP_SIZE < S) s_w[warp][lane + i * AA_WARP_SIZE] = w_seg[i];
  warp_sync();
  for (int s0 = 0;;) {
#pragma unroll
    for (int u = 0; u < kReduceBatch; u++) {
      const float w = s0 + u < S ? s_w[warp][s0 + u] : 0.0f;
      if (w != 0.0f) {
#pragma unroll
        for (int k = 0; k < PAIRS; k++) {
          acc[k].x = fmaf(w, v[u][k].x, acc[k].x);
          acc[k].y = fmaf(w, v[u][k].y, acc[k].y);
        }
      }
    }
    s0 += kReduceBatch;
    if (s0 >= S) break;
    load_batch(s0);
  }
  if (any && sink != -INFINITY) L += fast_exp2(sink - M);
  const float f = any ? fast_rcp(L) : 0.0f; /* L >= 1 when any */
  uint32_t *out = reinterpret_cast<uint32_t *>(static_cast<T *>(p.out) + row * head_dim);
#pragma unroll
  for (int i = 0; i < PAIRS; i++) {
    const int c = lane + i * AA_WARP_SIZE;
    if (c < pairs) out[c] = pack2<T>(acc[i].x * f, acc[i].y * f);
  }
  if (p.lse && lane == 0) p.lse[row] = any ? (M + __log2f(L)) * kLn2 : -INFINITY;
  AA_TRACE_PRINT("RD");
}

/* ---- fp32: a plain CUDA-core kernel, one warp per (token, q head) ---------------- */
constexpr int kF32Warps = 4;
constexpr int kF32MaxDim = 256;

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
  const int pos = kv_len - q_len + (tok - cu[s]);
  const int D = head_dim;

  const float *q = static_cast<const float *>(p.q) + row * D;
  for (int d = lane; d < D; d += AA_WARP_SIZE) sq[warp][d] = q[d];
  __syncwarp();

  int lo, hi;
  kv_range(p, pos, pos, kv_len, lo, hi);
  const int32_t *bt_row = p.block_table + (int64_t)s * p.bt_stride;
  const float *kc = static_cast<const float *>(p.k) + (int64_t)kvh * p.k_sh;
  const float *vc = static_cast<const float *>(p.v) + (int64_t)kvh * p.v_sh;
  const float slope = p.alibi ? p.alibi[h] * kLog2e : 0.0f;

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
    const float m_new = fmaxf(m, warp_allreduce_max(x));
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
  if (p.sinks) M = fmaxf(M, p.sinks[h] * kLog2e);
  float L = l * exp2f(m - M);
  if (p.sinks) L += exp2f(p.sinks[h] * kLog2e - M);
  const float f = any ? exp2f(m - M) / L : 0.0f;
  float *out = static_cast<float *>(p.out) + row * D;
#pragma unroll
  for (int i = 0; i < PER_LANE; i++) {
    const int d = lane + i * AA_WARP_SIZE;
    if (d < D) out[d] = acc[i] * f;
  }
  if (p.lse && lane == 0) p.lse[row] = any ? (M + log2f(L)) * kLn2 : -INFINITY;
}

typedef void (*KernelFn)(AttnParams);
typedef void (*KernelF32Fn)(AttnParams, int);

}  // namespace aa

#endif /* ANYATTN_GPU_ATTENTION_CUH */
