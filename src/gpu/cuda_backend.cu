// cuda_backend.cu: the CUDA backend's entry points (src/core/internal.h): device
// discovery, plan (support checks, config choice from the table in
// src/choose/configs.h) and run (argument checks, one kernel launch).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.cuh"
#include "configs.h"
#if defined(AA_VENDOR_NVIDIA)
#include <cudaTypedefs.h> /* the driver's tensor-map types and encoder signature (header only) */
#endif
#include "backend.h"
#include "kernels.cuh"
#include "select.h"

/* Every runtime call goes through this: DEVICE_ERROR with file:line and the runtime's message. */
#define AA_CUDA_TRY(call)                                                                            \
  do {                                                                                               \
    cudaError_t aa_e_ = (call);                                                                      \
    if (aa_e_ != cudaSuccess)                                                                        \
      return aa_error(ANYATTN_STATUS_DEVICE_ERROR, "%s:%d: %s: %s", __FILE__, __LINE__, #call,        \
                      cudaGetErrorString(aa_e_));                                                    \
  } while (0)

AA_DECLARE_KERNEL_TABLE(f16, 64)
AA_DECLARE_KERNEL_TABLE(f16, 96)
AA_DECLARE_KERNEL_TABLE(f16, 128)
AA_DECLARE_KERNEL_TABLE(f16, 256)
AA_DECLARE_KERNEL_TABLE(bf16, 64)
AA_DECLARE_KERNEL_TABLE(bf16, 96)
AA_DECLARE_KERNEL_TABLE(bf16, 128)
AA_DECLARE_KERNEL_TABLE(bf16, 256)
aa::KernelF32Fn aa_kernel_f32(void);
aa::KernelF32Fn aa_reduce_f16(void);
aa::KernelF32Fn aa_reduce_bf16(void);

namespace {

/* The GPU backend's plan state (plan->state): the choices plan makes. */
struct GpuState {
  int config;          /* index into the config table, -1 for none */
  int config_forced;   /* 1: problem->config named it; run keeps it */
  const aa_tree *tree; /* the tree serving the device when the plan was made, or NULL: the fallback heuristic */
  int num_splits;      /* split-KV segments per sequence (1: no split): the most run may use */
  int split_rows;      /* token rows of split-KV partials the workspace holds (segments x tokens) */
  int forced_splits;   /* 0 the backend decides; 1 never split; S >= 2 exactly S segments for
                        * decode-like batches (problem->config "NAME-kS") */
  int cluster_max[16]; /* per config index: the most split-KV segments that merge inside one
                        * thread-block cluster (0: never; they merge in the reduce kernel) */
  int cluster_slots[16]; /* per config index: programs the device co-schedules in clusters of
                          * cluster_max[i] blocks (a cluster's blocks share a GPC) */
};
GpuState *gs(const anyattn_plan *plan) { return static_cast<GpuState *>(plan->state); }

struct ConfigRow {
  const char *name;
  int block_m, block_n, warps, stages;
  size_t smem[4]; /* dynamic shared memory per head dim 64, 96, 128, 256 */
  int tma[4];     /* TMA boxes the kernel can take (TileShape::TMA_KIND: 1 padded rows, 2 swizzled panels), same order */
};

#define AA_SMEM_(hd, bm, bn, w, s) aa::TileShape<hd, bm, bn, w, s>::SMEM_BYTES
#define AA_TMA_(hd, bm, bn, w, s) aa::TileShape<hd, bm, bn, w, s>::TMA_KIND
#define AA_CONFIG_ROW_(name, bm, bn, w, s) \
  {#name, bm, bn, w, s, {AA_SMEM_(64, bm, bn, w, s), AA_SMEM_(96, bm, bn, w, s), AA_SMEM_(128, bm, bn, w, s), AA_SMEM_(256, bm, bn, w, s)}, \
   {AA_TMA_(64, bm, bn, w, s), AA_TMA_(96, bm, bn, w, s), AA_TMA_(128, bm, bn, w, s), AA_TMA_(256, bm, bn, w, s)}},
const ConfigRow kConfigs[] = {ANYATTN_GPU_CONFIGS(AA_CONFIG_ROW_)};
constexpr int kNumConfigs = (int)(sizeof kConfigs / sizeof kConfigs[0]);

int head_dim_index(int hd) {
  switch (hd) {
    case 64: return 0;
    case 96: return 1;
    case 128: return 2;
    case 256: return 3;
    default: return -1;
  }
}

/* The table row named by the first `len` characters of `name`, or -1. */
int config_lookup(const char *name, size_t len) {
  for (int i = 0; i < kNumConfigs; i++)
    if (strlen(kConfigs[i].name) == len && strncmp(kConfigs[i].name, name, len) == 0) return i;
  return -1;
}

int config_index(const char *name) { return config_lookup(name, strlen(name)); }

/* A config name with an optional split suffix: "m16n128w8s2" or
 * "m16n128w8s2-k8" (8 KV segments; -k1 never splits). Returns the table
 * index (-1: unknown) and the suffix in *splits (0: none given). */
int config_index_split(const char *name, int *splits) {
  *splits = 0;
  const char *dash = strstr(name, "-k");
  if (!dash) return config_index(name);
  char *end = NULL;
  const long s = strtol(dash + 2, &end, 10);
  if (end == dash + 2 || *end != '\0' || s < 1 || s > aa::kReduceMaxSplits) return -1;
  *splits = (int)s;
  return config_lookup(name, (size_t)(dash - name));
}

aa::KernelFn tc_kernel(anyattn_dtype dtype, int hd, int cfg) {
  aa::KernelFn k[kNumConfigs];
  const bool bf = dtype == ANYATTN_DTYPE_BF16;
  switch (hd) {
    case 64: bf ? aa_kernel_table_bf16_d64(k) : aa_kernel_table_f16_d64(k); break;
    case 96: bf ? aa_kernel_table_bf16_d96(k) : aa_kernel_table_f16_d96(k); break;
    case 128: bf ? aa_kernel_table_bf16_d128(k) : aa_kernel_table_f16_d128(k); break;
    default: bf ? aa_kernel_table_bf16_d256(k) : aa_kernel_table_f16_d256(k); break;
  }
  return k[cfg];
}

/* Programs along a GQA group: a program takes min(group, block_m) heads of it
 * (gh) for block_m / gh tokens (bq); larger groups split into n_hchunks. */
struct RowMap {
  int gh, bq, n_hchunks;
};
RowMap row_map(int group, int block_m) {
  RowMap m;
  m.gh = group < block_m ? group : block_m;
  m.bq = block_m / m.gh;
  m.n_hchunks = (group + m.gh - 1) / m.gh;
  return m;
}

bool config_fits(const anyattn_plan *plan, int cfg) {
  return kConfigs[cfg].smem[head_dim_index(plan->problem.head_dim)] <= plan->ctx->smem_per_block;
}

/* Programs a launch of config `cfg` has for a batch of these sizes. */
long long programs_for(const anyattn_plan *plan, int cfg, int num_seqs, int num_tokens) {
  const RowMap m = row_map(plan->group, kConfigs[cfg].block_m);
  return ((long long)num_tokens / m.bq + num_seqs) * plan->problem.num_kv_heads * m.n_hchunks;
}

/* The tile choice, from host-visible sizes only (< 1 us, no timing): the
 * device's decision tree when one exists, else this fallback heuristic.
 * Rests on bench/run_h200.sh sweeps on one H200 (bench/results/h200_cuda_notes.md,
 * `anyattn bench --backend cuda --workload W --config C`, bf16 32/8 heads d128, bs 16):
 * - decode (mean q_len <= 8): m16n64w4s3 gave 4.03 TB/s at 64x8192 and 3.83 at
 *   128x2048, the best of 8 decode configs once the grid fills the SMs; with fewer
 *   than 2 programs per SM the 128-key tile wins (1x8192: 116 us vs 155 us;
 *   8x4096: 71 us vs 88 us).
 * - mean q_len < 128 (mixed batches: a few chunks among many decodes): m64n64w4s2,
 *   1x2048p+63d@2048 330 us vs 442 us with m128 tiles (decode rows waste 128-row tiles).
 * - prefill: m128n128w8s2 (1x8192 causal 277 TFLOP/s vs 252 for m128n64w8s2 and
 *   238 for m64n64w4s2) when it has >= 2 programs per SM, else m64n64w4s2. */
int choose_config(const anyattn_plan *plan, int num_seqs, int num_tokens, int max_q_len, int max_kv_len,
                  int *tree_splits) {
  /* A decision tree tuned for this device (or its family) comes first; its
   * leaf must name a row of this build's table that fits the head dim. Its
   * split count (0: the backend decides) goes to *tree_splits (may be
   * NULL); -1 there means the heuristic below chose. */
  if (tree_splits) *tree_splits = -1;
  if (gs(plan)->tree) {
    double f[AA_F_COUNT];
    aa_tree_features(plan, num_seqs, num_tokens, max_q_len, max_kv_len, f);
    const aa_tree_node *leaf = aa_tree_eval((const aa_tree *)gs(plan)->tree, f);
    const int idx = leaf ? config_index(leaf->config) : -1;
    if (idx >= 0 && config_fits(plan, idx)) {
      if (tree_splits) *tree_splits = leaf->splits > 0 ? leaf->splits : 0;
      return idx;
    }
  }
  static const int decode = config_index("m16n64w4s3");
  static const int decode_few = config_index("m16n128w8s2");
  static const int small = config_index("m64n64w4s2");
  static const int large = config_index("m128n128w8s2");
  const long long fill = 2LL * plan->ctx->num_sms;
  const int mean_q = num_seqs > 0 ? (num_tokens + num_seqs - 1) / num_seqs : 1;
  if (mean_q <= 8) {
    if (decode_few >= 0 && config_fits(plan, decode_few) && decode >= 0 &&
        programs_for(plan, decode, num_seqs, num_tokens) < fill)
      return decode_few;
    if (decode >= 0 && config_fits(plan, decode)) return decode;
  }
  if (mean_q >= 128 && large >= 0 && config_fits(plan, large) &&
      programs_for(plan, large, num_seqs, num_tokens) >= fill)
    return large;
  if (small >= 0 && config_fits(plan, small)) return small;
  for (int i = 0; i < kNumConfigs; i++) /* a table without those rows (tuning builds) */
    if (config_fits(plan, i)) return i;
  return -1;
}

/* ---- split-KV: how many segments, and the workspace they need -------------------
 * A program (Q block x kv head) normally walks all its keys; with S segments
 * gridDim.y = S programs each walk an even share of its tiles (cut on the
 * device from the lengths there), write fp32 partials, and a reduce kernel
 * merges them. Worth it only while the plain grid leaves multiprocessors idle:
 * decode-like batches (mean q_len <= 8) with few sequences.
 *   S_max (plan)  = min(kMaxSplits, floor(occ * SMs / (Hkv * head chunks)),
 *                       ceil(max_context / kSplitMinKeys))      (< 2: no split)
 *                   for the unforced split config (split_config_auto), raised
 *                   to a forced count "C-kS" when S is larger
 *   rows  (plan)  = S_max * min(max_tokens, kSplitMaxTokens)
 *   workspace     = align256(rows * Hq * 8) + rows * Hq * head_dim * 4 bytes
 *   S (run)       = min(S_max, rows / num_tokens, floor(occ * SMs / programs),
 *                       ceil(kv bound / block_n)), kv bound = batch->max_kv_len
 *                   when given, else limits.max_context      (< 2: no split)
 * occ = programs of the split config one SM holds (shared memory, and the
 * ~170-register cap of 16-row tiles: 12 warps). So the workspace does not grow
 * with big prefill limits: Llama-3-8B (32/8 heads, d128) on 132 SMs has
 * S_max = 16, rows = 128, 2.1 MB with contexts of 2048 and more (the
 * 128-key tile, one per SM), S_max = 33, rows = 264, 4.4 MB below. A run
 * whose S x num_tokens exceeds rows runs unsplit. One wave of equal segments is the aim
 * (bench/results/h200_cuda_notes.md, split-KV section). */
constexpr int kMaxSplits = aa::kReduceMaxSplits; /* the reduce kernel holds at most this many */
constexpr int kSplitMinKeys = 64;
constexpr int kSplitMaxTokens = 8;

/* The segments' config when nothing is forced: 16-row decode programs. For
 * long contexts (limits.max_context >= 2048) the 128-key tile keeps more
 * bytes in flight per program; forced on one H200 (bench --workload decode
 * --graph --config C, bench/results/h200.md): 1x8192 27.4 vs 30.9 us,
 * 1x32768 56.6 vs 60.8 us, e2e-llama8b 7.87 vs 8.90 s; at 1x500 the 64-key
 * tile wins, 12.3 vs 13.4 us. Fixed at plan from the limits, so plan and run
 * agree on the workspace. */
int split_config_auto(const anyattn_plan *plan) {
  static const int decode = config_index("m16n64w4s3");
  static const int decode_long = config_index("m16n128w8s2");
  if (plan->limits.max_context >= 2048 && decode_long >= 0 && config_fits(plan, decode_long)) return decode_long;
  return decode >= 0 && config_fits(plan, decode) ? decode : -1;
}

/* The config that runs the segments: the forced one, else the above. */
int split_config(const anyattn_plan *plan) { return gs(plan)->config_forced ? gs(plan)->config : split_config_auto(plan); }

int split_occupancy(const anyattn_plan *plan, int cfg) {
  const size_t smem = kConfigs[cfg].smem[head_dim_index(plan->problem.head_dim)];
  long long occ = smem > 0 ? (long long)(plan->ctx->smem_per_block / smem) : 1;
  const int reg_occ = kConfigs[cfg].block_m == 16 ? 12 / kConfigs[cfg].warps : 1;
  if (occ > reg_occ) occ = reg_occ;
  return occ < 1 ? 1 : (int)occ;
}

size_t split_ml_bytes(const anyattn_plan *plan) {
  const size_t b = (size_t)gs(plan)->split_rows * plan->problem.num_q_heads * 8;
  return (b + 255) / 256 * 256;
}

/* Split-KV serves decode-like batches only: mean q_len <= 8. */
bool decode_like(const anyattn_args *a) { return (a->num_tokens + a->num_seqs - 1) / a->num_seqs <= 8; }

/* A fixed count S (problem->config "C-kS", or a tree leaf's splits): S
 * segments for a decode-like batch (mean q_len <= 8) when the workspace
 * holds them (at most gs(plan)->num_splits), else no split. */
int fixed_split_count(const anyattn_plan *plan, const anyattn_args *a, int S) {
  if (gs(plan)->num_splits < 2 || a->num_tokens <= 0 || S < 2) return 1;
  if (!decode_like(a)) return 1;
  if (S > gs(plan)->num_splits) S = gs(plan)->num_splits;
  return (long long)S * a->num_tokens <= gs(plan)->split_rows ? S : 1;
}

/* Programs of config cfg with work, before any split: Q blocks with work
 * (padding sequences, q_len 0, and the grid's slack have none) x kv heads x
 * head chunks (programs_for counts the whole grid, slack included). */
long long busy_programs(const anyattn_plan *plan, int cfg, const anyattn_args *a) {
  const RowMap m = row_map(plan->group, kConfigs[cfg].block_m);
  long long qblocks = (a->num_tokens + m.bq - 1) / m.bq;
  const long long busy = a->num_seqs < a->num_tokens ? a->num_seqs : a->num_tokens;
  if (busy > qblocks) qblocks = busy;
  return qblocks * plan->problem.num_kv_heads * m.n_hchunks;
}

/* Segments for this run, from host scalars only; 1 = no split. */
int split_count(const anyattn_plan *plan, int cfg, const anyattn_args *a) {
  if (gs(plan)->forced_splits > 0) return fixed_split_count(plan, a, gs(plan)->forced_splits);
  if (gs(plan)->num_splits < 2 || cfg < 0 || a->num_tokens <= 0 || !decode_like(a)) return 1;
  const long long base = busy_programs(plan, cfg, a);
  long long s = gs(plan)->num_splits;
  const long long by_rows = gs(plan)->split_rows / a->num_tokens;
  const long long by_fill = (long long)split_occupancy(plan, cfg) * plan->ctx->num_sms / base;
  const int kv = a->max_kv_len > 0 ? a->max_kv_len : plan->limits.max_context;
  const long long by_keys = ((long long)kv + kConfigs[cfg].block_n - 1) / kConfigs[cfg].block_n;
  if (by_rows < s) s = by_rows;
  if (by_fill < s) s = by_fill;
  if (by_keys < s) s = by_keys;
  return s >= 2 ? (int)s : 1;
}

/* One launch, checked; `pdl` adds the programmatic-stream-serialization
 * attribute (sm_90+ CUDA only: the kernels call griddepcontrol.wait first);
 * cluster_y > 0 launches clusters of (1, cluster_y, 1) blocks (sm_90+). */
#if defined(AA_VENDOR_NVIDIA)
/* The launch attribute for clusters of (1, y, 1) blocks. */
cudaLaunchAttribute cluster_attr(int y) {
  cudaLaunchAttribute a;
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = 1;
  a.val.clusterDim.y = (unsigned)y;
  a.val.clusterDim.z = 1;
  return a;
}
#endif

template <typename... Args>
anyattn_status launch(void (*kernel)(Args...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                      int cluster_y, Args... args) {
#if defined(AA_VENDOR_NVIDIA)
  if (pdl || cluster_y > 0) {
    cudaLaunchAttribute attr[2];
    int n = 0;
    if (pdl) {
      attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster_y > 0) attr[n++] = cluster_attr(cluster_y);
    cudaLaunchConfig_t lc = {};
    lc.gridDim = grid;
    lc.blockDim = block;
    lc.dynamicSmemBytes = smem;
    lc.stream = stream;
    lc.attrs = attr;
    lc.numAttrs = (unsigned)n;
    AA_CUDA_TRY(cudaLaunchKernelEx(&lc, kernel, args...));
    return ANYATTN_STATUS_OK;
  }
#else
  (void)pdl;
  (void)cluster_y;
#endif
  kernel<<<grid, block, smem, stream>>>(args...);
  AA_CUDA_TRY(cudaGetLastError());
  return ANYATTN_STATUS_OK;
}

/* Split-KV segments merge inside one thread-block cluster (sm_90, through
 * distributed shared memory, no reduce kernel) only up to this many; more go
 * to the reduce kernel. Measured on one H200 (graph replay, bf16 32/8 heads
 * d128, the same build with ANYATTN_CUDA_CLUSTERS=0 alternating, 3 runs each):
 * 2 segments (1x200) 9.4-9.6 vs 9.9 us, 4 (1x500) 10.0-10.1 vs 10.3-10.4 us,
 * 8 (1x1000) 11.4-11.6 vs 11.2-11.3 us: the reduce, launched with
 * programmatic dependent launch, is as cheap as an 8-block cluster's merge. */
constexpr int kClusterMerge = 4;
static_assert(kClusterMerge <= aa::kClusterMax, "the kernel's merge holds kClusterMax segments");

/* The most split-KV segments of config `cfg` that merge inside one cluster on
 * this device (0: none, the reduce kernel merges): the largest power of two
 * C <= kClusterMerge whose clusters the device co-schedules on at least 7/8
 * of the multiprocessor slots a split launch aims to fill (a cluster's blocks
 * share a GPC). Asked once, at plan, through cudaOccupancyMaxActiveClusters.
 * ANYATTN_CUDA_CLUSTERS=0 turns the cluster merge off (A/B comparisons). */
int cluster_limit(const anyattn_plan *plan, int cfg, int occ, int *slots) {
  *slots = 0;
#if defined(AA_VENDOR_NVIDIA)
  if (plan->ctx->arch < 90) return 0;
  const char *env = getenv("ANYATTN_CUDA_CLUSTERS");
  if (env && strcmp(env, "0") == 0) return 0;
  const void *k = (const void *)tc_kernel(plan->problem.dtype, plan->problem.head_dim, cfg);
  const size_t smem = kConfigs[cfg].smem[head_dim_index(plan->problem.head_dim)];
  for (int c = kClusterMerge; c >= 2; c /= 2) {
    cudaLaunchAttribute at = cluster_attr(c);
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(1, (unsigned)c);
    lc.blockDim = dim3((unsigned)(kConfigs[cfg].warps * AA_WARP_SIZE));
    lc.dynamicSmemBytes = smem;
    lc.attrs = &at;
    lc.numAttrs = 1;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, k, &lc) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if ((long long)n * c * 8 >= (long long)occ * plan->ctx->num_sms * 7) {
      *slots = n * c;
      return c;
    }
  }
#else
  (void)plan;
  (void)cfg;
  (void)occ;
#endif
  return 0;
}

/* Clusters pack into GPCs, so fewer programs may be co-resident in clusters
 * (gs(plan)->cluster_slots) than without. Merge in clusters only when that adds
 * no wave: on one H200, 4x32768 decode with 4 segments of the 148 KB tile
 * (128 programs) ran in two waves as clusters, 252.7 us, against 154.8 us
 * for 16 segments (bench/results/h200_tune_2026-11-29d/); merged by the
 * reduce instead, 148.4 us (h200_2026-11-29_session4/wave_fix/wave.txt). */
/* Programs of config cfg the device holds at once: one wave. */
long long wave_programs(const anyattn_plan *plan, int cfg) {
  return (long long)split_occupancy(plan, cfg) * plan->ctx->num_sms;
}

bool cluster_adds_no_wave(const anyattn_plan *plan, int cfg, const anyattn_args *a, int splits) {
  const long long programs = busy_programs(plan, cfg, a) * splits;
  const long long plain = wave_programs(plan, cfg);
  const long long cl = gs(plan)->cluster_slots[cfg];
  return cl > 0 && (programs + cl - 1) / cl <= (programs + plain - 1) / plain;
}

anyattn_status select_device(int device) {
  int cur = -1;
  AA_CUDA_TRY(cudaGetDevice(&cur));
  if (cur != device) AA_CUDA_TRY(cudaSetDevice(device));
  return ANYATTN_STATUS_OK;
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* (magic, shift) with n / d == (umulhi(n, magic) + n) >> shift for n < 2^31
 * (round-up reciprocal; d = 1 gives magic 1, shift 0). */
void aa_fastdiv_init(uint32_t d, uint32_t *magic, uint32_t *shift) {
  uint32_t l = 0;
  while ((1ull << l) < d) l++;
  *magic = (uint32_t)(((1ull << 32) * ((1ull << l) - d)) / d + 1);
  *shift = l;
}


anyattn_status aa_cuda_device_count(int *count) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  *count = 0;
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* not sticky: leave no error behind for the caller */
    return aa_error(ANYATTN_STATUS_NO_DEVICE, "no " AA_GPU_NAME " device: %s", cudaGetErrorString(e));
  }
  if (n <= 0) return aa_error(ANYATTN_STATUS_NO_DEVICE, "no " AA_GPU_NAME " device: the runtime reports 0 devices");
  *count = n;
  return ANYATTN_STATUS_OK;
}

anyattn_status aa_cuda_context_init(anyattn_context *ctx) {
  int n = 0;
  AA_TRY(aa_cuda_device_count(&n));
  AA_CHECK(ctx->device < n, ANYATTN_STATUS_NO_DEVICE, "device %d: there are %d " AA_GPU_NAME " devices", ctx->device, n);
  cudaDeviceProp prop;
  AA_CUDA_TRY(cudaGetDeviceProperties(&prop, ctx->device));
  snprintf(ctx->device_name, sizeof ctx->device_name, "%.127s", prop.name);
  ctx->num_sms = prop.multiProcessorCount;
  ctx->smem_per_block = prop.sharedMemPerBlockOptin;
  ctx->arch = prop.major * 10 + prop.minor;
  AA_DEVICE_FAMILY(prop, ctx->family, sizeof ctx->family);
  AA_CHECK(ctx->arch >= AA_MIN_ARCH, ANYATTN_STATUS_NO_DEVICE,
           "device %d (%s, %s) is older than this " AA_GPU_NAME " backend supports", ctx->device, prop.name,
           ctx->family);
  /* Fail here, not at the first run, when this build has no code for the device. */
  AA_TRY(select_device(ctx->device));
#if defined(AA_TRACE)
  /* -DAA_TRACE builds print one line per program: 1x32768's 128 programs x
   * its timed calls overflowed the default 1 MB buffer (empty traces). */
  AA_CUDA_TRY(cudaDeviceSetLimit(cudaLimitPrintfFifoSize, (size_t)64 << 20));
#endif
  cudaFuncAttributes fa;
  cudaError_t e = cudaFuncGetAttributes(&fa, (const void *)tc_kernel(ANYATTN_DTYPE_BF16, 128, 0));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return aa_error(ANYATTN_STATUS_NO_DEVICE, "device %d (%s, %s): no kernel image in this build: %s",
                    ctx->device, prop.name, ctx->family, cudaGetErrorString(e));
  }
  return ANYATTN_STATUS_OK;
}

int aa_cuda_config_count(void) { return kNumConfigs; }

anyattn_status aa_cuda_config_get(int index, anyattn_config_info *info) {
  AA_CHECK(index >= 0 && index < kNumConfigs, ANYATTN_STATUS_INVALID_SIZE, "index %d: %d " AA_GPU_NAME " configs", index,
           kNumConfigs);
  const ConfigRow &c = kConfigs[index];
  snprintf(info->name, sizeof info->name, "%s", c.name);
  info->block_m = c.block_m;
  info->block_n = c.block_n;
  info->warps = c.warps;
  info->stages = c.stages;
  return ANYATTN_STATUS_OK;
}

/* gs(plan)->config_forced records whether problem->config forced the config (1)
 * or run may re-choose it from the batch's sizes (0). */
anyattn_status aa_cuda_plan(anyattn_plan *plan) {
  const anyattn_problem *pr = &plan->problem;
  const anyattn_context *ctx = plan->ctx;
  plan->state = calloc(1, sizeof(GpuState));
  AA_CHECK(plan->state != NULL, ANYATTN_STATUS_OUT_OF_MEMORY, "plan: " AA_GPU_NAME " state allocation failed");
  AA_CHECK(pr->dtype == ANYATTN_DTYPE_F16 || pr->dtype == ANYATTN_DTYPE_BF16 || pr->dtype == ANYATTN_DTYPE_F32,
           ANYATTN_STATUS_UNSUPPORTED_DTYPE, "problem->dtype %d is not supported by the " AA_GPU_NAME " backend", (int)pr->dtype);
  const int hdi = head_dim_index(pr->head_dim);
  AA_CHECK(hdi >= 0, ANYATTN_STATUS_UNSUPPORTED_HEAD_DIM,
           "problem->head_dim is %d; the " AA_GPU_NAME " backend supports 64, 96, 128 and 256", pr->head_dim);
  /* Any block_size >= 1 works: K/V rows are gathered one by one (page = j / block_size). */
  AA_TRY(select_device(ctx->device));

  int forced = -1, forced_splits = 0;
  if (pr->config) {
    forced = config_index_split(pr->config, &forced_splits);
    AA_CHECK(forced >= 0, ANYATTN_STATUS_UNSUPPORTED_CONFIG,
             "problem->config '%s' is not a " AA_GPU_NAME " config (see anyattn_config_get; an optional "
             "suffix -kS, 1 <= S <= %d, forces S KV segments)",
             pr->config, aa::kReduceMaxSplits);
    AA_CHECK(config_fits(plan, forced), ANYATTN_STATUS_UNSUPPORTED_CONFIG,
             "problem->config '%s' needs %zu bytes of shared memory at head_dim %d; the device allows %zu",
             pr->config, kConfigs[forced].smem[hdi], pr->head_dim, ctx->smem_per_block);
  }
  plan->workspace_size = 0;
  gs(plan)->num_splits = 1;
  gs(plan)->split_rows = 0;
  gs(plan)->forced_splits = forced_splits;
  const char *dt = pr->dtype == ANYATTN_DTYPE_F32 ? "f32" : pr->dtype == ANYATTN_DTYPE_F16 ? "f16" : "bf16";

  if (pr->dtype == ANYATTN_DTYPE_F32) {
    /* fp32 runs on the CUDA-core kernel; a forced tile config has no meaning there. */
    gs(plan)->config = forced;
    gs(plan)->config_forced = forced >= 0;
    snprintf(plan->describe, sizeof plan->describe, "cuda f32 d%d group %d: CUDA-core kernel, one warp per (token, head)",
             pr->head_dim, plan->group);
    return ANYATTN_STATUS_OK;
  }

  /* Raise the shared-memory limit of every variant run() may pick; ask how
   * many split segments each can merge in a cluster. */
  memset(gs(plan)->cluster_max, 0, sizeof gs(plan)->cluster_max);
  memset(gs(plan)->cluster_slots, 0, sizeof gs(plan)->cluster_slots);
  static_assert(kNumConfigs <= (int)(sizeof gs(plan)->cluster_max / sizeof gs(plan)->cluster_max[0]), "cluster_max");
  for (int i = 0; i < kNumConfigs; i++) {
    if (!config_fits(plan, i) || (forced >= 0 && i != forced)) continue;
    const size_t smem = kConfigs[i].smem[hdi];
    AA_CUDA_TRY(cudaFuncSetAttribute((const void *)tc_kernel(pr->dtype, pr->head_dim, i),
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    gs(plan)->cluster_max[i] = cluster_limit(plan, i, split_occupancy(plan, i), &gs(plan)->cluster_slots[i]);
  }
  gs(plan)->tree = aa_tree_for(ctx->device_name, ctx->family);
  const int cfg = forced >= 0 ? forced : choose_config(plan, plan->limits.max_seqs, plan->limits.max_tokens, 0, 0, NULL);
  AA_CHECK(cfg >= 0, ANYATTN_STATUS_UNSUPPORTED_HEAD_DIM,
           "problem->head_dim %d: no " AA_GPU_NAME " config fits the device's %zu bytes of shared memory", pr->head_dim,
           ctx->smem_per_block);
  const RowMap m = row_map(plan->group, kConfigs[cfg].block_m);
  /* The largest grid run can launch under these limits must fit one grid dimension. */
  const long long programs = ((long long)plan->limits.max_tokens / m.bq + plan->limits.max_seqs) *
                             pr->num_kv_heads * m.n_hchunks;
  AA_CHECK(programs <= 0x7fffffffLL, ANYATTN_STATUS_INVALID_SIZE,
           "limits->max_tokens %d: %lld programs, over the grid limit", plan->limits.max_tokens, programs);
  gs(plan)->config = cfg;
  gs(plan)->config_forced = forced >= 0;

  /* Split-KV limits and workspace (formula at split_count). A forced config
   * or split count changes what runs, not the plan's limits: they come from
   * the config an unforced plan would split with, raised to a forced count
   * when that is larger. So `tune`, which times forced candidates, times
   * what the library's own choice of that config and count runs. Before,
   * "m16n128w8s2-k4" sized the workspace for 4 segments x 8 tokens, so at
   * 32x8192 run fell back to one segment (278 us on one H200), while the
   * tree's leaf m16n128w8s2/4, in a plan sized for 16, ran 4 segments
   * (296 us; bench/results/h200_2026-11-29_session4/). */
  int lcfg = split_config_auto(plan);
  if (lcfg < 0 && gs(plan)->config_forced) lcfg = gs(plan)->config; /* no decode tile fits: the forced one may */
  if (lcfg >= 0) {
    const RowMap ms = row_map(plan->group, kConfigs[lcfg].block_m);
    long long smax = kMaxSplits;
    const long long by_fill =
        (long long)split_occupancy(plan, lcfg) * ctx->num_sms / ((long long)pr->num_kv_heads * ms.n_hchunks);
    const long long by_keys = ((long long)plan->limits.max_context + kSplitMinKeys - 1) / kSplitMinKeys;
    if (by_fill < smax) smax = by_fill;
    if (by_keys < smax) smax = by_keys;
    if (gs(plan)->forced_splits > smax) smax = gs(plan)->forced_splits;
    if (smax >= 2) {
      gs(plan)->num_splits = (int)smax;
      gs(plan)->split_rows = (int)smax * (plan->limits.max_tokens < kSplitMaxTokens ? plan->limits.max_tokens
                                                                                : kSplitMaxTokens);
      plan->workspace_size =
          split_ml_bytes(plan) + (size_t)gs(plan)->split_rows * pr->num_q_heads * pr->head_dim * sizeof(float);
    }
  }
  char split_txt[96] = "";
  const int scfg = split_config(plan);
  if (gs(plan)->num_splits > 1 && scfg >= 0 && gs(plan)->cluster_max[scfg] >= 2)
    snprintf(split_txt, sizeof split_txt, "; split-KV up to %d segments (up to %d merged in a cluster)",
             gs(plan)->num_splits, gs(plan)->cluster_max[scfg]);
  else if (gs(plan)->num_splits > 1)
    snprintf(split_txt, sizeof split_txt, "; split-KV up to %d segments", gs(plan)->num_splits);
  snprintf(plan->describe, sizeof plan->describe,
           "cuda %s %s d%d group %d: %d tokens x %d heads per program, %s%s%s", kConfigs[cfg].name, dt,
           pr->head_dim, plan->group, m.bq, m.gh, forced >= 0 ? "forced" : "chosen from the limits",
           forced >= 0 ? "" : " (run re-chooses from each batch)", split_txt);
  return ANYATTN_STATUS_OK;
}

#if defined(AA_VENDOR_NVIDIA)
/* ---- TMA tensor maps of the K/V caches (sm_90+) ------------------------------------
 * Tiles take K/V tiles as boxes of R cache rows (one page's rows of one kv
 * head) through a 4-d view of each cache: (head_dim, kv head, row in page,
 * page), strides from the call, the page count unbounded (2^31: the block
 * table only names pages that exist). Kind 1 (the padded tiles): each box row
 * is head_dim + 8 elements wide; the last 8 fall outside the tensor, so TMA
 * writes them as zeros: exactly the padded shared-memory row of the tile.
 * Kind 2 (the pipelined 128-row wgmma tile): 64-column boxes, 128-byte
 * swizzled, one per panel of its wgmma layout. The driver's encoder comes
 * through the runtime (no link to libcuda); encoding fails, and run keeps
 * cp.async, where the view breaks a TMA rule (strides, sizes). */
/* ANYATTN_CUDA_TMA=0 keeps every tile on cp.async, =all takes TMA boxes in
 * every launch that can (A/B comparisons in one build); =log prints each new
 * encoding's outcome to stderr. */
const char *tma_env() {
  static const char *const env = getenv("ANYATTN_CUDA_TMA");
  return env ? env : "";
}
bool tma_disabled() { return strcmp(tma_env(), "0") == 0; }

PFN_cuTensorMapEncodeTiled_v12000 tma_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
#else /* CUDA 12.0-12.4: the unversioned lookup */
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q);
#endif
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) f = nullptr;
    cudaGetLastError(); /* a failed lookup leaves nothing behind */
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

/* kind 1: boxes head_dim + 8 wide, unswizzled (the padded rows); kind 2:
 * 64 wide (128 bytes), 128-byte swizzled (the wgmma tiles' panels). */
bool tma_encode(aa::TmaMap *out, const void *base, anyattn_dtype dt, int head_dim, int kv_heads, int block_size,
                const int64_t st[3] /* block, token, head, elements */, int box_rows, int kind) {
  static_assert(sizeof(CUtensorMap) == sizeof(aa::TmaMap), "a tensor map is 128 bytes");
  const PFN_cuTensorMapEncodeTiled_v12000 enc = tma_encoder();
  if (!enc) return false;
  const cuuint64_t es = 2;
  const cuuint64_t dims[4] = {(cuuint64_t)head_dim, (cuuint64_t)kv_heads, (cuuint64_t)block_size, (cuuint64_t)1 << 31};
  const cuuint64_t strides[3] = {(cuuint64_t)st[2] * es, (cuuint64_t)st[1] * es, (cuuint64_t)st[0] * es};
  const cuuint32_t box[4] = {kind == 2 ? 64u : (cuuint32_t)head_dim + 8, 1, (cuuint32_t)box_rows, 1};
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  CUtensorMap m;
  const CUresult r = enc(&m, dt == ANYATTN_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                         const_cast<void *>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                         kind == 2 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return false;
  memcpy(out, &m, sizeof m);
  return true;
}

/* The tensor maps of a call, p->tma_rows > 0 when both encode. Kind 1 only
 * for launches of one wave (`programs` blocks of config `cfg` all resident at
 * once): there a program's time is its own chain of instructions and round
 * trips, which the boxes shorten (one H200, graph replay: e2e-llama8b 5.91 ->
 * 5.61 s, 1x8192 23.3 -> 22.8 us); over several waves bandwidth decides,
 * and the boxes were slower (128x2048, 3 waves of m16n64w4s3: 279 -> 293 us).
 * Kind 2 in every launch (prefill 1.19-1.33x faster with them).
 * The last call's maps are kept per thread: a decode loop passes the same
 * caches and strides every step and pays a comparison, not two encodes (a
 * loop that alternates kinds re-encodes each call: host time only). */
void tma_setup(aa::AttnParams *p, const anyattn_plan *plan, const anyattn_args *a, int cfg, long long programs) {
  const anyattn_problem *pr = &plan->problem;
  const ConfigRow &c = kConfigs[cfg];
  p->tma_rows = 0;
  const int kind = c.tma[head_dim_index(pr->head_dim)];
  if (plan->ctx->arch < 90 || kind == 0 || tma_disabled()) return;
  /* the one-wave rule is the decode tiles' (kind 1); the pipelined prefill
   * tile (kind 2) takes boxes in every launch */
  if (kind == 1 && strcmp(tma_env(), "all") != 0 && programs > wave_programs(plan, cfg)) return;
  const int bs = pr->block_size, bn = c.block_n;
  const int rows = bs >= bn ? bn : bs;
  /* a box is one page's rows, 128-byte aligned in shared memory (8 padded
   * rows; 1024-byte for the swizzled panels: 8 rows). With block_n a power
   * of two, rows then is one too, which the kernel's box arithmetic assumes. */
  if ((bs >= bn ? bs % bn : bn % bs) != 0 || rows % 8 != 0) return;
  struct Key {
    const void *k, *v;
    int64_t ks[3], vs[3];
    int dtype, head_dim, kv_heads, bs, rows, kind;
  };
  Key key;
  memset(&key, 0, sizeof key);
  key.k = a->k_cache, key.v = a->v_cache;
  key.ks[0] = a->k_stride_block, key.ks[1] = a->k_stride_token, key.ks[2] = a->k_stride_head;
  key.vs[0] = a->v_stride_block, key.vs[1] = a->v_stride_token, key.vs[2] = a->v_stride_head;
  key.dtype = (int)pr->dtype, key.head_dim = pr->head_dim, key.kv_heads = pr->num_kv_heads, key.bs = bs, key.rows = rows, key.kind = kind;
  static thread_local Key last_key;
  static thread_local aa::TmaMap last_k, last_v;
  static thread_local bool last_ok = false, have = false;
  if (!have || memcmp(&key, &last_key, sizeof key) != 0) {
    last_ok = tma_encode(&last_k, key.k, pr->dtype, pr->head_dim, pr->num_kv_heads, bs, key.ks, rows, kind) &&
              tma_encode(&last_v, key.v, pr->dtype, pr->head_dim, pr->num_kv_heads, bs, key.vs, rows, kind);
    last_key = key, have = true;
    if (strcmp(tma_env(), "log") == 0)
      fprintf(stderr, "anyattn: cuda: TMA boxes of %d rows, %s (block size %d, %d keys per tile, d%d): %s\n", rows,
              kind == 2 ? "swizzled panels" : "padded rows", bs, bn, pr->head_dim,
              last_ok ? "on" : "the driver rejected the cache view; cp.async");
  }
  if (!last_ok) return;
  p->k_map = last_k, p->v_map = last_v;
  p->tma_rows = rows;
}
#endif

anyattn_status aa_cuda_run(const anyattn_plan *plan, const anyattn_args *a) {
  const anyattn_problem *pr = &plan->problem;
  if (a->num_tokens == 0) return ANYATTN_STATUS_OK;
  const size_t es = anyattn_dtype_size(pr->dtype);
  AA_CHECK(aligned16(a->k_cache) && aligned16(a->v_cache), ANYATTN_STATUS_BAD_STRIDE,
           "tensors->k_cache and v_cache must be 16-byte aligned for the " AA_GPU_NAME " backend");
  AA_CHECK(aligned16(a->q) && aligned16(a->out), ANYATTN_STATUS_BAD_STRIDE,
           "tensors->q and out must be 16-byte aligned for the " AA_GPU_NAME " backend");
  const int64_t ks[3] = {a->k_stride_block, a->k_stride_token, a->k_stride_head};
  const int64_t vs[3] = {a->v_stride_block, a->v_stride_token, a->v_stride_head};
  for (int i = 0; i < 3; i++) {
    AA_CHECK((ks[i] * (int64_t)es) % 16 == 0, ANYATTN_STATUS_BAD_STRIDE,
             "tensors->k_stride_%s is %lld elements: cache rows must be 16-byte aligned for the " AA_GPU_NAME " backend",
             i == 0 ? "block" : i == 1 ? "token" : "head", (long long)ks[i]);
    AA_CHECK((vs[i] * (int64_t)es) % 16 == 0, ANYATTN_STATUS_BAD_STRIDE,
             "tensors->v_stride_%s is %lld elements: cache rows must be 16-byte aligned for the " AA_GPU_NAME " backend",
             i == 0 ? "block" : i == 1 ? "token" : "head", (long long)vs[i]);
  }
  AA_TRY(select_device(plan->ctx->device));

  aa::AttnParams p;
  memset(&p, 0, sizeof p);
  p.q = a->q;
  p.k = a->k_cache;
  p.v = a->v_cache;
  p.out = a->out;
  p.lse = a->lse;
  p.cu_seqlens_q = a->cu_seqlens_q;
  p.seq_lens_k = a->seq_lens_k;
  p.block_table = a->block_table;
  p.bt_stride = a->block_table_stride;
  p.k_sb = a->k_stride_block;
  p.k_st = a->k_stride_token;
  p.k_sh = a->k_stride_head;
  p.v_sb = a->v_stride_block;
  p.v_st = a->v_stride_token;
  p.v_sh = a->v_stride_head;
  p.alibi = a->alibi_slopes;
  p.sinks = a->sinks;
  p.num_seqs = a->num_seqs;
  p.num_tokens = a->num_tokens;
  p.num_q_heads = pr->num_q_heads;
  p.group = plan->group;
  p.block_size = pr->block_size;
  aa_fastdiv_init((uint32_t)pr->block_size, &p.bs_magic, &p.bs_shift);
  aa_fastdiv_init((uint32_t)pr->num_q_heads, &p.qh_magic, &p.qh_shift);
  p.causal = pr->causal;
  p.window_left = pr->window_left;
  p.window_right = pr->window_right;
  p.scale_log2 = plan->scale * aa::kLog2e;
  p.softcap = pr->softcap;
  p.softcap_in = pr->softcap > 0.0f ? plan->scale / pr->softcap : 0.0f;
  p.softcap_out = pr->softcap * aa::kLog2e;
  cudaStream_t stream = (cudaStream_t)a->stream;

  if (pr->dtype == ANYATTN_DTYPE_F32) {
    const long long rows = (long long)a->num_tokens * pr->num_q_heads;
    const dim3 grid((unsigned)((rows + aa::kF32Warps - 1) / aa::kF32Warps));
    aa_kernel_f32()<<<grid, aa::kF32Warps * AA_WARP_SIZE, 0, stream>>>(p, pr->head_dim);
  } else {
    int tree_splits = -1;
    int cfg = gs(plan)->config_forced
                  ? gs(plan)->config
                  : choose_config(plan, a->num_seqs, a->num_tokens, a->max_q_len, a->max_kv_len, &tree_splits);
    int splits;
    if (tree_splits >= 0) { /* the tree's leaf: its config runs the segments too */
      splits = tree_splits > 0 ? fixed_split_count(plan, a, tree_splits) : split_count(plan, cfg, a);
    } else {
      const int scfg = split_config(plan);
      splits = split_count(plan, scfg, a);
      if (splits > 1) cfg = scfg;
    }
    if (splits > 1) {
      p.num_splits = splits;
      p.cluster = splits <= gs(plan)->cluster_max[cfg] && cluster_adds_no_wave(plan, cfg, a, splits);
      p.part_ml = reinterpret_cast<float2 *>(a->workspace);
      p.part_o = reinterpret_cast<float *>(static_cast<char *>(a->workspace) + split_ml_bytes(plan));
    } else {
      p.num_splits = 1;
    }
    const ConfigRow &c = kConfigs[cfg];
    const RowMap m = row_map(plan->group, c.block_m);
    p.gh = m.gh;
    p.bq = m.bq;
    p.n_hchunks = m.n_hchunks;
    p.num_qblocks = a->num_tokens / m.bq + a->num_seqs;
    p.hprogs = pr->num_kv_heads * m.n_hchunks;
    aa_fastdiv_init((uint32_t)m.gh, &p.gh_magic, &p.gh_shift);
    aa_fastdiv_init((uint32_t)m.bq, &p.bq_magic, &p.bq_shift);
    aa_fastdiv_init((uint32_t)p.hprogs, &p.hp_magic, &p.hp_shift);
    aa_fastdiv_init((uint32_t)m.n_hchunks, &p.hc_magic, &p.hc_shift);
    const long long programs = (long long)p.num_qblocks * p.hprogs;
    AA_CHECK(programs <= 0x7fffffffLL, ANYATTN_STATUS_INVALID_SIZE,
             "batch->num_tokens %d: %lld programs, over the grid limit", a->num_tokens, programs);
    const dim3 grid((unsigned)programs, (unsigned)p.num_splits);
    const size_t smem = c.smem[head_dim_index(pr->head_dim)];
#if defined(AA_VENDOR_NVIDIA)
    tma_setup(&p, plan, a, cfg, programs * p.num_splits);
#endif
    /* On sm_90 both kernels go out with programmatic dependent launch: each
     * launches while the kernel before it drains and waits on the device
     * (griddepcontrol.wait, before reading any input) for its writes. */
    const bool pdl = plan->ctx->arch >= 90;
    AA_TRY(launch(tc_kernel(pr->dtype, pr->head_dim, cfg), grid, dim3(c.warps * AA_WARP_SIZE), smem, stream, pdl,
                  p.cluster ? p.num_splits : 0, p));
    if (p.num_splits > 1 && !p.cluster) {
      const long long rows = (long long)a->num_tokens * pr->num_q_heads;
      const dim3 rgrid((unsigned)((rows + aa::kReduceWarps - 1) / aa::kReduceWarps));
      aa::KernelF32Fn reduce = pr->dtype == ANYATTN_DTYPE_BF16 ? aa_reduce_bf16() : aa_reduce_f16();
      AA_TRY(launch(reduce, rgrid, dim3(aa::kReduceWarps * AA_WARP_SIZE), 0, stream, pdl, 0, p, pr->head_dim));
    }
  }
  AA_CUDA_TRY(cudaGetLastError());
  return ANYATTN_STATUS_OK;
}

void aa_cuda_plan_free(anyattn_plan *plan) {
  free(plan->state);
  plan->state = nullptr;
}

}  // namespace

extern "C" const aa_backend_ops AA_GPU_BACKEND_OPS = {AA_GPU_BACKEND_ID,   aa_cuda_device_count, aa_cuda_context_init,
                                                     aa_cuda_plan,        aa_cuda_plan_free,    aa_cuda_run,
                                                     aa_cuda_config_count, aa_cuda_config_get};
