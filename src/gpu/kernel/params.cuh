/* params.cuh: what a launch of the attention kernels receives (AttnParams,
 * filled on the host by src/gpu/launch.cu from the plan and the call) and the
 * per-key helpers every kernel shares: masks, key ranges, page offsets.
 *
 * Tensors (device memory, see include/anyattn.h): q, out [num_tokens,
 * num_q_heads, D] dense; k/v caches paged with element strides; lse
 * [num_tokens, num_q_heads] fp32; metadata int32. */
#ifndef ANYATTN_GPU_KERNEL_PARAMS_CUH
#define ANYATTN_GPU_KERNEL_PARAMS_CUH

#include <stdint.h>

#include "tile.cuh"

namespace aa {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/* A CUtensorMap's 128 opaque bytes: the host encodes it with the driver's
 * cuTensorMapEncodeTiled (vendor/host_nv.cuh); kernels pass its address to
 * TMA copies. */
struct alignas(64) TmaMap {
  unsigned long long w[16];
};

/* Everything a launch of any attention kernel needs. */
struct AttnParams {
  const void *q;
  const void *k;
  const void *v;
  void *out;
  float *lse;
  const int32_t *cu_seqlens_q;
  const int32_t *seq_lens_k;
  const int32_t *q_pos; /* [num_seqs] first query's position, or NULL: kv_len - q_len */
  const int32_t *block_table;
  int64_t bt_stride;
  int64_t k_sb, k_st, k_sh; /* element strides: block, token, head */
  int64_t v_sb, v_st, v_sh;
  const void *alibi; /* [num_q_heads] of alibi_type (VecType), or NULL: read through vec_at */
  const void *sinks; /* [num_q_heads] of sinks_type, or NULL */
  int alibi_type, sinks_type;
  int num_seqs;
  int num_tokens;
  int num_qblocks; /* Q blocks the grid covers: num_tokens / bq + num_seqs */
  /* The order programs take Q blocks in (Program): 0, descending block
   * index; 1, the upper and the lower half of the blocks by turns, each
   * descending (mixed batches: a prompt's programs between the decodes'). */
  int qb_order;
  /* 1 (mixed batches, qb_order 1): the producer's K/V boxes carry L2 priorities, evict_first for
   * a decode item's keys (read once), evict_last for the others' (read again by the item's other
   * Q blocks): WsProducer::fill. 0: none. */
  int l2hint;
  int hprogs;      /* programs per Q block: num_kv_heads * n_hchunks */
  int num_q_heads;
  /* The problem's head dim (a multiple of 8, at most the kernel's compiled
   * HEAD_DIM): q, out, the cache rows and the split partials are head_dim
   * elements wide; the kernel works on HEAD_DIM columns, those past head_dim
   * zero in shared memory (copies of 0 bytes, or TMA boxes past the tensor's
   * edge) and never stored. */
  int head_dim;
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
  int causal;
  int window_left;
  int window_right;
  float scale_log2;     /* scale * log2(e) */
  float softcap;        /* 0: off */
  float softcap_in;     /* scale / softcap */
  float softcap_out;    /* softcap * log2(e) */
  /* Split-KV (gridDim.y segments per program when > 1): each segment writes
   * partials for its rows to the workspace instead of out/lse, and the last
   * segment of the program to arrive merges them (merge.cuh). Row index of a
   * partial: (segment * num_tokens + token) * num_q_heads + head. */
  int num_splits;
  /* 1 (sm_90, num_splits <= kClusterMax): the num_splits segments of a
   * program are one thread-block cluster (launched with cluster dims
   * (1, num_splits, 1)); they merge through distributed shared memory at the
   * end and write out/lse themselves: no partials, no counters. */
  int cluster;
  unsigned *counters; /* [num_tokens * hprogs] arrivals per program, 0 between calls (the workspace's head) */
  /* A persistent launch of the producer warpgroup's kernel (mainloop_ws.cuh,
   * WsItem): two words of the workspace, 0 between calls, that hand out
   * programs past each block's first (claims) and count the blocks done
   * (the last resets both); NULL: a block per program (launch.cu). */
  unsigned *sched;
  float2 *part_ml; /* [num_splits * num_tokens * num_q_heads]: (max logit, log2 domain; sum) */
  float *part_o;   /* [same rows][head_dim] fp32, normalised by the segment's own sum */
  /* > 0 (sm_90, padded tiles, see TileShape::TMA): K/V tiles come as TMA
   * boxes of this many cache rows (min(block_size, BLOCK_N)) through k_map
   * and v_map, 4-d views (head_dim, kv head, row in page, page) of the
   * caches whose box rows are HEAD_DIM + 8 elements wide, the columns from
   * head_dim on outside the tensor and so zeros: the padded shared-memory
   * rows. 0: cp.async. */
  int tma_rows;
  TmaMap k_map, v_map;
  /* 1 (the producer warpgroup's kernel, mainloop_ws.cuh): each program's Q
   * block comes as one TMA box per 64-column panel through q_map, a 3-d view
   * (head_dim, q head, token) of q whose boxes are 64 x gh x bq, 128-byte
   * swizzled: the tile's rows (token-major, gh heads a token) in the wgmma
   * layout. 0: 16-byte copies. */
  int q_tma;
  TmaMap q_map;
  /* 1 (the producer warpgroup's kernels at head dims up to 128, with
   * q_tma and gh x bq = 128 rows): each consumer warpgroup whose 64 rows
   * are all the block's writes them out as one TMA box per panel through
   * o_map, the same view of out with boxes of 64 x gh x bq / 2
   * (epilogue.cuh, own_rows_epilogue). 0: 16-byte stores. */
  int o_tma;
  /* 1: the producer's kernel runs an item whose rows all lie in the Q tile's first 8 (a
   * decode's) on both consumer warpgroups with the keys as M (mainloop_ws.cuh, ws_decode_item);
   * 0: on the tile's loop (ANYATTN_CUDA_WSDEC=0, for comparisons). Here, in o_map's alignment
   * padding: a word before the maps moves them 64 bytes and ptxas's allocation with them. */
  int ws_dec;
  TmaMap o_map;
  /* FP8 caches (the FP8 kernels only; kernel/shape.cuh): E4M3 variant, and
   * the dequantisation factors in device memory (NULL: 1), one per tensor or
   * per (sequence, kv head) (descale_per_head). k_descale multiplies the raw
   * scores; v_descale the output, once, where out is written (epilogue,
   * cluster merge, merge_row): split partials and the lse never include it. */
  int fp8_fnuz;
  /* 1: every K/V cache row starts 16-byte aligned and head_dim is a multiple
   * of 16, so FRAG8 kernels copy 16 codes at a time (kv_load.cuh) */
  int kv8_wide;
  int descale_per_head;
  /* 1 (batch->prior_writes NEW_KEYS): the work search, the page ids and the
   * first K/V tiles wholly older than each sequence's newest q_len keys are
   * read before grid_dependency_wait (attention.cuh); 0: nothing is. */
  int early_reads;
  int num_kv_heads;
  /* Split partials are laid out per segment as part_tokens token rows of
   * num_q_heads heads (part_row): num_tokens, or in a role launch's decode
   * role num_seqs x bq (a decode sequence's tokens at seq * bq). */
  int part_tokens;
  /* Role launches (attn_roles_kernel): the prefill role takes sequences of
   * at least min_q_len queries (0: every sequence); the decode role numbers
   * its programs (sequence, kv head / head chunk, segment), segments
   * fastest, and sp_magic/sp_shift divide by num_splits. */
  int min_q_len;
  uint32_t sp_magic, sp_shift;
  const float *k_descale;
  const float *v_descale;
};

/* A launch of a role pair (src/choose/configs.h): programs [0, dec_programs)
 * are the decode role's (on dec), the rest the prefill role's (on pre). */
struct RoleParams {
  AttnParams dec, pre;
  int dec_programs;
};

/* A dequantisation factor of sequence seq, kv head kvh (d NULL: 1). */
__device__ __forceinline__ float descale_of(const AttnParams &p, const float *d, int seq, int kvh) {
  return d ? d[p.descale_per_head ? (int64_t)seq * p.num_kv_heads + kvh : 0] : 1.0f;
}

/* The element types of alibi_slopes and sinks (anyattn_dtype's values:
 * launch.cu checks that they agree). */
enum VecType { kVecF32 = 0, kVecF16 = 1, kVecBF16 = 2 };

/* Element i of alibi_slopes or sinks as fp32 (exact from every type). */
__device__ __forceinline__ float vec_at(const void *v, int type, int i) {
  if (type == kVecBF16) return __uint_as_float((uint32_t)static_cast<const uint16_t *>(v)[i] << 16);
  if (type == kVecF16) return __half2float(static_cast<const aa_f16 *>(v)[i]);
  return static_cast<const float *>(v)[i];
}

/* ---- per-key helpers shared by the tensor-core and the fp32 kernels ------------ */

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

}  // namespace aa

#endif /* ANYATTN_GPU_KERNEL_PARAMS_CUH */
