/* launch.cu: the GPU backend's kernels as the host sees them (the config table
 * with each row's shared memory, the kernel tables of src/gpu/inst/) and one
 * call's launches: the policy's choice, the kernel parameters, the attention
 * kernel (split-KV segments merge inside it: in a cluster, or by the last
 * segment to arrive). */
#include <string.h>

#include "host.cuh"
#include "kernels.cuh"
#include "launch.h"

#define AA_DECLARE_TABLES_(hd) AA_DECLARE_KERNEL_TABLE(f16, hd) AA_DECLARE_KERNEL_TABLE(bf16, hd)
AA_GPU_HEAD_DIMS(AA_DECLARE_TABLES_)
aa::KernelF32Fn aa_kernel_f32(void);

namespace aa {
namespace {

/* The compiled head dims (kernel/kernels.cuh), ascending. */
#define AA_HEAD_DIM_VALUE_(hd) hd,
constexpr int kHeadDims[] = {AA_GPU_HEAD_DIMS(AA_HEAD_DIM_VALUE_)};
constexpr int kNumHeadDims = (int)(sizeof kHeadDims / sizeof kHeadDims[0]);

/* For the problems of every compiled head dim: the compiled head dim a row
 * runs them at (kernels.cuh, row_head_dim), and there its shared memory (0
 * where the build compiles no kernel of it below its smallest head dim or
 * for this cache kind: row_fits), TMA kind and cluster merge, for 16-bit (F8 0) or fp8 (F8 1)
 * caches. */
template <int BM, int BN, int W, int S, int F8>
struct RowFacts {
#define AA_RUN_HD_(hd) row_head_dim<hd, BM, BN, W, S, F8>(),
  static constexpr int run_hd[kNumHeadDims] = {AA_GPU_HEAD_DIMS(AA_RUN_HD_)};
#undef AA_RUN_HD_
#define AA_SMEM_(hd)                                                                                          \
  (row_head_dim<hd, BM, BN, W, S, F8>() >= AA_CONFIG_MIN_HEAD_DIM(BM, BN, W, S) &&                            \
           (F8 != 0 || !AA_CONFIG_FP8_ONLY(BM, BN, W, S)) && (F8 != 1 || !AA_CONFIG_16BIT_ONLY(BM, BN, W, S)) \
       ? TileShape<row_head_dim<hd, BM, BN, W, S, F8>(), BM, BN, W, S, F8>::SMEM_BYTES                        \
       : 0),
#define AA_PSMEM_(hd)                                                                                  \
  (TileShape<row_head_dim<hd, BM, BN, W, S, F8>(), BM, BN, W, S, F8>::PERSIST_SMEM_BYTES <= kMaxSmemAnyDevice \
       ? TileShape<row_head_dim<hd, BM, BN, W, S, F8>(), BM, BN, W, S, F8>::PERSIST_SMEM_BYTES               \
       : 0),
#define AA_TMA_(hd) TileShape<row_head_dim<hd, BM, BN, W, S, F8>(), BM, BN, W, S, F8>::TMA_KIND,
#define AA_CL_(hd) (int)TileShape<row_head_dim<hd, BM, BN, W, S, F8>(), BM, BN, W, S, F8>::CLUSTER,
  static constexpr size_t smem[kNumHeadDims] = {AA_GPU_HEAD_DIMS(AA_SMEM_)};
  static constexpr size_t psmem[kNumHeadDims] = {AA_GPU_HEAD_DIMS(AA_PSMEM_)};
  static constexpr int tma[kNumHeadDims] = {AA_GPU_HEAD_DIMS(AA_TMA_)};
  static constexpr int cluster[kNumHeadDims] = {AA_GPU_HEAD_DIMS(AA_CL_)};
#undef AA_SMEM_
#undef AA_PSMEM_
#undef AA_TMA_
#undef AA_CL_
};

/* The rule as docs/design/layout.md#head-dims states it, on the tile layer
 * with wgmma (NVIDIA): over 16-bit caches the 128-row tile runs 80 and 96 on
 * wgmma kernels of their own; over fp8 caches it runs them at 128 (the build
 * compiles it at neither); 64 and 128 stay; the 16-row decode tiles never
 * move. Elsewhere every row runs its own head dim. */
static_assert(row_head_dim<80, 128, 128, 8, 2, 0>() == 80 && row_head_dim<96, 128, 128, 8, 2, 0>() == 96,
              "m128n128w8s2 runs d80 and d96 at their own over 16-bit caches");
static_assert(row_head_dim<80, 128, 128, 8, 2, 1>() == (kTileWgmma ? 128 : 80) &&
                  row_head_dim<96, 128, 128, 8, 2, 1>() == (kTileWgmma ? 128 : 96),
              "and at d128 over fp8 caches");
static_assert(!kTileWgmma || !row_built<96, 128, 128, 8, 2, 1>(), "no fp8 d96 kernel of a tile that runs it wider");
static_assert(row_head_dim<64, 128, 128, 8, 2, 0>() == 64 && row_head_dim<128, 128, 128, 8, 2, 0>() == 128,
              "the wgmma head dims stay");
static_assert(row_head_dim<80, 16, 64, 4, 2, 0>() == 80 && row_head_dim<96, 16, 128, 8, 2, 1>() == 96,
              "decode tiles stay");

struct ConfigRow {
  const char *name;
  int block_m, block_n, warps, stages;
  const int *run_hd;  /* per compiled head dim (kHeadDims): the compiled head dim the row runs it at */
  const size_t *smem; /* dynamic shared memory there, same order */
  const size_t *psmem; /* a persistent launch of its producer kernel there (0: none; fp8 rows have none) */
  const int *tma;     /* TMA boxes the kernel can take (TileShape::TMA_KIND: 1 padded rows, 2 swizzled panels, 3 fp8 rows), same order */
  const int *cluster; /* segments may merge in a cluster (TileShape::CLUSTER), same order */
  const int *run_hd8; /* the same five for fp8 caches */
  const size_t *smem8, *psmem8;
  const int *tma8, *cluster8;
};

#define AA_ROW_FACTS_(bm, bn, w, s, f8)                                                                  \
  RowFacts<bm, bn, w, s, f8>::run_hd, RowFacts<bm, bn, w, s, f8>::smem, RowFacts<bm, bn, w, s, f8>::psmem, \
      RowFacts<bm, bn, w, s, f8>::tma, \
      RowFacts<bm, bn, w, s, f8>::cluster
#define AA_CONFIG_ROW_(name, bm, bn, w, s) \
  {#name, bm, bn, w, s, AA_ROW_FACTS_(bm, bn, w, s, 0), AA_ROW_FACTS_(bm, bn, w, s, 1)},
const ConfigRow kConfigs[] = {ANYATTN_GPU_CONFIGS(AA_CONFIG_ROW_)};
constexpr int kNumConfigs = (int)(sizeof kConfigs / sizeof kConfigs[0]);

/* A role pair's launch: shared memory per compiled head dim, at the head dim
 * its prefill row runs there (kernels.cuh, row_head_dim; 0 where either tile
 * does not fit: kernels.cuh compiles no kernel there). */
template <int PBM, int PBN, int PW, int PS, int DBM, int DBN, int DW, int DS, int F8>
struct PairFacts {
  static constexpr size_t pick(size_t a, size_t b) { return a > kMaxSmemAnyDevice || b > kMaxSmemAnyDevice ? 0 : a > b ? a : b; }
#define AA_PSMEM_(hd)                                                                         \
  pick(TileShape<row_head_dim<hd, PBM, PBN, PW, PS, F8>(), PBM, PBN, PW, PS, F8>::SMEM_BYTES, \
       TileShape<row_head_dim<hd, PBM, PBN, PW, PS, F8>(), DBM, DBN, DW, DS, F8>::SMEM_BYTES),
  static constexpr size_t smem[kNumHeadDims] = {AA_GPU_HEAD_DIMS(AA_PSMEM_)};
#undef AA_PSMEM_
};

struct PairRow {
  const char *pre, *dec;
  const size_t *smem, *smem8; /* the launch's shared memory per compiled head dim, 16-bit and fp8 caches */
};
#define AA_PAIR_ROW_(pn, pbm, pbn, pw, ps, dn, dbm, dbn, dw, ds) \
  {#pn, #dn, PairFacts<pbm, pbn, pw, ps, dbm, dbn, dw, ds, 0>::smem, PairFacts<pbm, pbn, pw, ps, dbm, dbn, dw, ds, 1>::smem},
const PairRow kPairs[] = {ANYATTN_GPU_ROLE_PAIRS(AA_PAIR_ROW_){nullptr, nullptr, nullptr, nullptr}};
constexpr int kNumPairs = (int)(sizeof kPairs / sizeof kPairs[0]) - 1;
static_assert(sizeof(RoleParams) <= 4096, "a role launch's parameters fit the kernel parameter space");
static_assert(kVecF32 == (int)ANYATTN_DTYPE_F32 && kVecF16 == (int)ANYATTN_DTYPE_F16 && kVecBF16 == (int)ANYATTN_DTYPE_BF16,
              "the kernels' vector types are anyattn_dtype's values");

/* The role pair whose prefill row is config cfg, or -1. */
int pair_of(int cfg) {
  for (int k = 0; k < kNumPairs; k++)
    if (strcmp(kPairs[k].pre, kConfigs[cfg].name) == 0) return k;
  return -1;
}
static_assert(kNumConfigs <= AA_GPU_MAX_CONFIGS, "the plan state holds AA_GPU_MAX_CONFIGS rows");
static_assert(AA_GPU_MAX_SPLITS == kMergeMaxSplits, "the policy splits no wider than the merge merges");
static_assert(AA_GPU_CLUSTER_MERGE <= kClusterMax, "the kernel's cluster merge holds kClusterMax segments");

/* The compiled head dim a problem's head dim runs at (kHeadDims index; -1:
 * not supported): the smallest that holds it. */
int head_dim_index(int hd) {
  if (!head_dim_supported(hd)) return -1;
  for (int i = 0; i < kNumHeadDims; i++)
    if (hd <= kHeadDims[i]) return i;
  return -1;
}

/* (magic, shift) with n / d == (umulhi(n, magic) + n) >> shift for n < 2^31
 * (round-up reciprocal; d = 1 gives magic 1, shift 0); kernel/params.cuh's fast_div. */
void fastdiv_init(uint32_t d, uint32_t *magic, uint32_t *shift) {
  uint32_t l = 0;
  while ((1ull << l) < d) l++;
  *magic = (uint32_t)(((1ull << 32) * ((1ull << l) - d)) / d + 1);
  *shift = l;
}

/* The parameters every kernel of the call shares. */
AttnParams params_of(const anyattn_plan *plan, const anyattn_args *a) {
  const anyattn_problem *pr = &plan->problem;
  AttnParams p;
  memset(&p, 0, sizeof p);
  p.q = a->q;
  p.k = a->k_cache;
  p.v = a->v_cache;
  p.out = a->out;
  p.lse = a->lse;
  p.cu_seqlens_q = a->cu_seqlens_q;
  p.seq_lens_k = a->seq_lens_k;
  p.q_pos = a->q_pos;
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
  p.alibi_type = (int)a->alibi_slopes_dtype;
  p.sinks_type = (int)a->sinks_dtype;
  p.num_seqs = a->num_seqs;
  p.num_tokens = a->num_tokens;
  p.num_q_heads = pr->num_q_heads;
  p.head_dim = pr->head_dim;
  p.num_kv_heads = pr->num_kv_heads;
  if (pr->kv_dtype != ANYATTN_KV_AS_Q) {
    p.fp8_fnuz = pr->kv_dtype == ANYATTN_KV_FP8_E4M3FNUZ;
    /* run checked the caches' bases 16-byte aligned; the strides are codes (bytes) */
    p.kv8_wide = pr->head_dim % 16 == 0 && a->k_stride_block % 16 == 0 && a->k_stride_token % 16 == 0 &&
                 a->k_stride_head % 16 == 0 && a->v_stride_block % 16 == 0 && a->v_stride_token % 16 == 0 &&
                 a->v_stride_head % 16 == 0;
    p.k_descale = a->k_descale;
    p.v_descale = a->v_descale;
    p.descale_per_head = a->descale_layout == ANYATTN_DESCALE_PER_SEQ_HEAD;
  } else if (static_cast<const aa_gpu_plan_state *>(plan->state)->stage_descales) {
    /* a staged fp8 batch (staged_run): the copy holds the codes' values; the
     * prefill tiles apply the descales as over codes (shape.cuh, DESCALE) */
    p.k_descale = a->k_descale;
    p.v_descale = a->v_descale;
    p.descale_per_head = a->descale_layout == ANYATTN_DESCALE_PER_SEQ_HEAD;
  }
  p.group = plan->group;
  p.block_size = pr->block_size;
  fastdiv_init((uint32_t)pr->block_size, &p.bs_magic, &p.bs_shift);
  p.causal = pr->causal;
  p.window_left = pr->window_left;
  p.window_right = pr->window_right;
  p.scale_log2 = plan->scale * kLog2e;
  p.softcap = pr->softcap;
  p.softcap_in = pr->softcap > 0.0f ? plan->scale / pr->softcap : 0.0f;
  p.softcap_out = pr->softcap * kLog2e;
  p.num_splits = 1;
  p.sp_magic = 1; /* n / 1 (fast_div) */
  p.part_tokens = a->num_tokens;
  p.early_reads = a->prior_writes == ANYATTN_PRIOR_WRITES_NEW_KEYS;
  return p;
}

/* The grid of the tensor-core kernel for config cfg: programs along the GQA
 * group (aa_gpu_rows), Q blocks numbered as in scheduler.cuh. */
void map_programs(AttnParams &p, const anyattn_plan *plan, const aa_gpu_config &c) {
  const aa_gpu_row_map m = aa_gpu_rows(plan->group, c.block_m);
  p.gh = m.gh;
  p.bq = m.bq;
  p.n_hchunks = m.n_hchunks;
  /* at most 2^31 - 1: the caller checks the grid it makes (programs = num_qblocks x hprogs) */
  const long long qblocks = (long long)p.num_tokens / m.bq + p.num_seqs;
  p.num_qblocks = (int)(qblocks < 0x7fffffffLL ? qblocks : 0x7fffffffLL);
  p.hprogs = plan->problem.num_kv_heads * m.n_hchunks;
  fastdiv_init((uint32_t)m.gh, &p.gh_magic, &p.gh_shift);
  fastdiv_init((uint32_t)m.bq, &p.bq_magic, &p.bq_shift);
  fastdiv_init((uint32_t)p.hprogs, &p.hp_magic, &p.hp_shift);
  fastdiv_init((uint32_t)m.n_hchunks, &p.hc_magic, &p.hc_shift);
}

/* fp32: the CUDA-core kernel, one warp per (token, q head). */
anyattn_status launch_f32(const anyattn_plan *plan, const AttnParams &p, cudaStream_t stream) {
  const long long rows = (long long)p.num_tokens * plan->problem.num_q_heads;
  const long long blocks = (rows + kF32Warps - 1) / kF32Warps;
  AA_CHECK(blocks <= 0x7fffffffLL, ANYATTN_STATUS_INVALID_SIZE,
           "batch->num_tokens %d x problem->num_q_heads %d: %lld blocks, over the grid limit", p.num_tokens,
           plan->problem.num_q_heads, blocks);
  const dim3 grid((unsigned)blocks);
  return launch(aa_kernel_f32(), grid, dim3(kF32Warps * AA_WARP_SIZE), 0, stream, false, 0, p, plan->problem.head_dim);
}

}  // namespace

int config_count() { return kNumConfigs; }

void config_info(int i, anyattn_config_info *info) {
  const ConfigRow &c = kConfigs[i];
  snprintf(info->name, sizeof info->name, "%s", c.name);
  info->block_m = c.block_m;
  info->block_n = c.block_n;
  info->warps = c.warps;
  info->stages = c.stages;
}

bool config_table(int head_dim, bool fp8, aa_gpu_plan_state *st) {
  const int hdi = head_dim_index(head_dim);
  if (hdi < 0) return false;
  for (int i = 0; i < kNumConfigs; i++) {
    const ConfigRow &r = kConfigs[i];
    aa_gpu_config &c = st->configs[i];
    c.name = r.name;
    c.block_m = r.block_m, c.block_n = r.block_n, c.warps = r.warps, c.stages = r.stages;
    c.head_dim = fp8 ? r.run_hd8[hdi] : r.run_hd[hdi];
    c.smem = fp8 ? r.smem8[hdi] : r.smem[hdi];
    c.persist_smem = c.smem == 0 ? 0 : fp8 ? r.psmem8[hdi] : r.psmem[hdi]; /* fp8 rows: 0 (TileShape) */
    c.tma = fp8 ? r.tma8[hdi] : r.tma[hdi];
    c.cluster = fp8 ? r.cluster8[hdi] : r.cluster[hdi];
    st->role_dec[i] = 0;
    st->role_smem[i] = 0;
  }
  for (int i = 0; i < kNumConfigs; i++) {
    const int k = pair_of(i);
    if (k < 0) continue;
    for (int d = 0; d < kNumConfigs; d++)
      if (strcmp(kConfigs[d].name, kPairs[k].dec) == 0) st->role_dec[i] = d + 1;
    st->role_smem[i] = fp8 ? kPairs[k].smem8[hdi] : kPairs[k].smem[hdi];
  }
  st->num_configs = kNumConfigs;
  return true;
}

namespace {
/* The compiled head dim config row cfg runs head_dim at (0: none). */
int run_head_dim(int head_dim, int cfg, bool fp8) {
  const int i = head_dim_index(head_dim);
  if (i < 0 || cfg < 0 || cfg >= kNumConfigs) return 0;
  return fp8 ? kConfigs[cfg].run_hd8[i] : kConfigs[cfg].run_hd[i];
}

/* The kernel tables of one (dtype, compiled head dim chd, cache kind); false where none is compiled. */
bool kernel_tables(anyattn_dtype dtype, int chd, bool fp8, KernelFn *k, RolesFn *r) {
  const bool bf = dtype == ANYATTN_DTYPE_BF16;
  switch (chd) {
#define AA_TABLE_CASE_(d)                                                                                 \
  case d:                                                                                                 \
    if (fp8) bf ? aa_kernel_table_bf16_fp8_d##d(k, r) : aa_kernel_table_f16_fp8_d##d(k, r);              \
    else bf ? aa_kernel_table_bf16_d##d(k, r) : aa_kernel_table_f16_d##d(k, r);                           \
    return true;
    AA_GPU_HEAD_DIMS(AA_TABLE_CASE_)
#undef AA_TABLE_CASE_
    default: return false;
  }
}
}  // namespace

KernelFn tc_kernel(anyattn_dtype dtype, int hd, int cfg, bool fp8) {
  KernelFn k[kNumConfigs];
  RolesFn r[kNumPairs + 1];
  return kernel_tables(dtype, run_head_dim(hd, cfg, fp8), fp8, k, r) ? k[cfg] : nullptr;
}

KernelFn staged_kernel(anyattn_dtype dtype, int hd, int cfg) {
  KernelFn k[kNumConfigs];
  const bool bf = dtype == ANYATTN_DTYPE_BF16;
  switch (run_head_dim(hd, cfg, false)) {
#define AA_STAGED_CASE_(d)                                                                \
  case d:                                                                                 \
    bf ? aa_kernel_table_bf16_staged_d##d(k) : aa_kernel_table_f16_staged_d##d(k); \
    return k[cfg];
    AA_GPU_HEAD_DIMS(AA_STAGED_CASE_)
#undef AA_STAGED_CASE_
    default: return nullptr;
  }
}

KernelFn ws_kernel(const anyattn_plan *plan, const aa_gpu_device &dev, int cfg, int splits, bool persist) {
  const anyattn_problem *pr = &plan->problem;
  if (!aa_gpu_producer_launch(plan, &dev, splits, ws_mode() ? 1 : 0)) return nullptr;
  KernelFn k[kNumConfigs];
  const bool bf = pr->dtype == ANYATTN_DTYPE_BF16;
  /* a stage plan's kernels apply the fp8 plan's descales (staged_run) */
  const bool st = static_cast<const aa_gpu_plan_state *>(plan->state)->stage_descales;
  switch (run_head_dim(pr->head_dim, cfg, false)) {
#define AA_WS_CASE_(d)                                                                              \
  case d:                                                                                           \
    if (persist && st) bf ? aa_kernel_table_bf16_staged_pws_d##d(k) : aa_kernel_table_f16_staged_pws_d##d(k); \
    else if (persist) bf ? aa_kernel_table_bf16_pws_d##d(k) : aa_kernel_table_f16_pws_d##d(k);        \
    else if (st) bf ? aa_kernel_table_bf16_staged_ws_d##d(k) : aa_kernel_table_f16_staged_ws_d##d(k); \
    else bf ? aa_kernel_table_bf16_ws_d##d(k) : aa_kernel_table_f16_ws_d##d(k);                       \
    return k[cfg];
    AA_GPU_HEAD_DIMS(AA_WS_CASE_)
#undef AA_WS_CASE_
    default: return nullptr;
  }
}

long long persistent_blocks(const anyattn_plan *plan, const aa_gpu_device &dev, int cfg, const anyattn_args *a,
                            bool words, KernelFn *kernel) {
  const aa_gpu_row_map m = aa_gpu_rows(plan->group, static_cast<const aa_gpu_plan_state *>(plan->state)->configs[cfg].block_m);
  const long long hprogs = (long long)plan->problem.num_kv_heads * m.n_hchunks;
  const long long programs = ((long long)a->num_tokens / m.bq + a->num_seqs) * hprogs;
  const long long busy = (long long)(a->num_tokens / m.bq) * hprogs; /* each sequence's spare Q block may be empty */
  const long long blocks = aa_gpu_producer_blocks(plan, &dev, cfg, programs, busy, words ? persist_mode() : 0);
  const KernelFn k = blocks != programs ? ws_kernel(plan, dev, cfg, 1, true) : nullptr;
  if (kernel) *kernel = k;
  return k ? blocks : 0;
}

RolesFn roles_kernel(anyattn_dtype dtype, int hd, int cfg, bool fp8) {
  KernelFn k[kNumConfigs];
  RolesFn r[kNumPairs + 1];
  const int pair = pair_of(cfg);
  return pair >= 0 && kernel_tables(dtype, run_head_dim(hd, cfg, fp8), fp8, k, r) ? r[pair] : nullptr;
}

aa_gpu_device device_of(const anyattn_context *ctx) {
  aa_gpu_device d;
  d.num_sms = ctx->num_sms;
  d.smem_per_block = ctx->smem_per_block;
  d.arch = ctx->arch;
  d.stream_warps = stream_warps(ctx->arch);
  return d;
}

namespace {
/* Split-KV segments for p: the workspace's counters and partials. */
void set_splits(AttnParams &p, const anyattn_plan *plan, const anyattn_args *a, int splits) {
  p.num_splits = splits;
  fastdiv_init((uint32_t)splits, &p.sp_magic, &p.sp_shift);
  if (splits < 2) return;
  char *ws = static_cast<char *>(a->workspace);
  p.counters = reinterpret_cast<unsigned *>(ws);
  p.part_ml = reinterpret_cast<float2 *>(ws + aa_gpu_split_counter_bytes(plan));
  p.part_o = reinterpret_cast<float *>(ws + aa_gpu_split_counter_bytes(plan) + aa_gpu_split_ml_bytes(plan));
}

/* TMA boxes for config cfg, run at compiled head dim chd, in a launch of
 * `programs` programs, where the policy says they pay. */
void set_tma(AttnParams &p, const anyattn_plan *plan, const anyattn_args *a, const aa_gpu_device &dev, int cfg, int chd,
             long long programs, bool capped) {
  const anyattn_problem *pr = &plan->problem;
  const aa_gpu_config &c = static_cast<const aa_gpu_plan_state *>(plan->state)->configs[cfg];
  const int rows = aa_gpu_tma_rows(plan, &dev, cfg, programs, tma_mode(), capped ? 1 : 0);
  if (rows <= 0) return;
  if (c.tma == 3 && !p.kv8_wide) return; /* code boxes land in the 16-code layout: copies */
  const int64_t ks[3] = {a->k_stride_block, a->k_stride_token, a->k_stride_head};
  const int64_t vs[3] = {a->v_stride_block, a->v_stride_token, a->v_stride_head};
  if (tma_maps(&p.k_map, &p.v_map, TmaView{a->k_cache, ks}, TmaView{a->v_cache, vs}, pr->dtype, pr->head_dim, chd,
               pr->num_kv_heads, pr->block_size, rows, c.tma))
    p.tma_rows = rows;
}

/* A role launch (attn_roles_kernel): the decode role's programs
 * (num_seqs x kv heads x head chunks x segments), then the prefill role's
 * (num_tokens / bq + num_seqs Q blocks x kv heads x head chunks), sized from
 * host scalars only. */
anyattn_status launch_roles(const anyattn_plan *plan, const anyattn_args *a, const aa_gpu_device &dev,
                            const aa_gpu_choice &ch, cudaStream_t stream) {
  const anyattn_problem *pr = &plan->problem;
  const aa_gpu_plan_state *st = static_cast<const aa_gpu_plan_state *>(plan->state);
  RoleParams rp;
  rp.pre = params_of(plan, a);
  rp.dec = rp.pre;
  map_programs(rp.pre, plan, st->configs[ch.config]);
  map_programs(rp.dec, plan, st->configs[ch.dec_config]);
  rp.pre.min_q_len = rp.dec.bq + 1;
  set_splits(rp.dec, plan, a, ch.dec_splits);
  rp.dec.part_tokens = a->num_seqs * rp.dec.bq; /* the policy bounds it by the workspace's split rows */
  const long long pre_programs = ((long long)a->num_tokens / rp.pre.bq + a->num_seqs) * rp.pre.hprogs;
  const long long dec_programs = (long long)a->num_seqs * rp.dec.hprogs * ch.dec_splits;
  AA_CHECK(pre_programs + dec_programs <= 0x7fffffffLL, ANYATTN_STATUS_INVALID_SIZE,
           "batch->num_tokens %d: %lld programs, over the grid limit", a->num_tokens, pre_programs + dec_programs);
  rp.dec_programs = (int)dec_programs;
  /* Both roles run at the prefill row's compiled head dim (kernels.cuh,
   * roles_kernel_or_null); a decode tile's TMA kind does not depend on it. */
  const int chd = st->configs[ch.config].head_dim;
  set_tma(rp.pre, plan, a, dev, ch.config, chd, pre_programs + dec_programs, false);
  set_tma(rp.dec, plan, a, dev, ch.dec_config, chd, pre_programs + dec_programs, false);
  const RolesFn k = roles_kernel(pr->dtype, pr->head_dim, ch.config, pr->kv_dtype != ANYATTN_KV_AS_Q);
  AA_CHECK(k != nullptr, ANYATTN_STATUS_UNSUPPORTED_CONFIG, "problem->config: no role pair for %s at head_dim %d",
           st->configs[ch.config].name, pr->head_dim);
  const dim3 grid((unsigned)(pre_programs + dec_programs));
  return launch(k, grid, dim3(st->configs[ch.config].warps * AA_WARP_SIZE), st->role_smem[ch.config], stream,
                dev.arch >= 90, 0, rp);
}
}  // namespace

bool staged_run(const anyattn_plan *plan, const anyattn_args *a, anyattn_args *sa, aa_gpu_choice *sc) {
  const aa_gpu_plan_state *st = static_cast<const aa_gpu_plan_state *>(plan->state);
  if (!st->stage_plan || !aa_gpu_stage_fits(plan, a)) return false;
  const anyattn_plan *sp = st->stage_plan;
  const anyattn_problem *pr = &plan->problem;
  /* run_describe has no workspace: the choice reads no pointer */
  char *ws = a->workspace ? static_cast<char *>(a->workspace) + st->stage_offset : nullptr;
  *sa = *a;
  sa->k_cache = ws;
  sa->v_cache = ws ? ws + st->stage_kv_bytes : nullptr;
  sa->num_blocks = st->stage_pages + 1;
  sa->k_stride_head = sa->v_stride_head = pr->head_dim;
  sa->k_stride_token = sa->v_stride_token = (int64_t)pr->num_kv_heads * pr->head_dim;
  sa->k_stride_block = sa->v_stride_block = (int64_t)pr->block_size * pr->num_kv_heads * pr->head_dim;
  sa->block_table = ws ? reinterpret_cast<const int32_t *>(ws + 2 * st->stage_kv_bytes) : nullptr;
  sa->block_table_stride = (int)st->stage_stride;
  sa->prior_writes = ANYATTN_PRIOR_WRITES_ANY; /* the copy is written by the kernel just before */
  /* the stage plan's run is unsplit: of a workspace it reads only the persistent launches'
   * scheduler words, which this plan's workspace holds (plan_stage: at offset 0 of sa's) */
  sa->workspace = ws && st->has_sched ? static_cast<char *>(a->workspace) + st->sched_offset : nullptr;
  sa->workspace_size = sa->workspace ? 256 : 0;
  const aa_gpu_device dev = device_of(plan->ctx);
  *sc = aa_gpu_choose(sp, &dev, sa);
  const aa_gpu_plan_state *ss = static_cast<const aa_gpu_plan_state *>(sp->state);
  /* an unforced mixed batch (qb_order 1 on the stage plan's row) runs over the fp8 codes as roles: it reads
   * each decode's keys once, which a 16-bit copy would only add to (a forced row stages it) */
  return sc->dec_config < 0 && (sc->qb_order == 0 || ss->config_forced) && sc->splits == 1 &&
         ss->configs[sc->config].block_m >= 128 &&
         staged_kernel(pr->dtype, pr->head_dim, sc->config) != nullptr;
}

anyattn_status launch_attention(const anyattn_plan *plan, const anyattn_args *a) {
  const anyattn_problem *pr = &plan->problem;
  const aa_gpu_plan_state *st = static_cast<const aa_gpu_plan_state *>(plan->state);
  const aa_gpu_device dev = device_of(plan->ctx);
  cudaStream_t stream = (cudaStream_t)a->stream;
  AttnParams p = params_of(plan, a);
  if (pr->dtype == ANYATTN_DTYPE_F32) return launch_f32(plan, p, stream);
  anyattn_args sa;
  aa_gpu_choice sc;
  if (staged_run(plan, a, &sa, &sc)) {
    AA_TRY(launch_stage(plan, a, dev));
    return launch_attention(st->stage_plan, &sa);
  }

  const aa_gpu_choice ch = aa_gpu_choose(plan, &dev, a);
  if (ch.dec_config >= 0) return launch_roles(plan, a, dev, ch, stream);
  const aa_gpu_config &c = st->configs[ch.config];
  set_splits(p, plan, a, ch.splits);
  p.cluster = ch.splits > 1 && ch.cluster;
  map_programs(p, plan, c);
  p.qb_order = ch.qb_order;
  p.l2hint = ch.qb_order == 1 && l2hint_mode(); /* a mixed batch: L2 priorities (WsProducer::fill) */
  p.ws_dec = ws_dec_mode();
  const long long programs = ((long long)a->num_tokens / p.bq + a->num_seqs) * p.hprogs;
  AA_CHECK(programs <= 0x7fffffffLL, ANYATTN_STATUS_INVALID_SIZE,
           "batch->num_tokens %d: %lld programs, over the grid limit", a->num_tokens, programs);
  /* unsplit decode launches of several waves may keep fewer programs per SM
   * than the row's shared memory allows (policy.h, aa_gpu_launch_smem) */
  size_t smem = aa_gpu_launch_smem(plan, &dev, ch.config, programs, p.num_splits);
  set_tma(p, plan, a, dev, ch.config, c.head_dim, programs * p.num_splits, smem != c.smem);
  /* On sm_90 the kernel goes out with programmatic dependent launch: it
   * launches while the kernel before it drains and waits on the device
   * (griddepcontrol.wait, before reading any input) for its writes. */
  const bool pdl = dev.arch >= 90;
  dim3 grid((unsigned)programs, (unsigned)p.num_splits);
  /* a stage plan (staged_run) launches the kernels that apply fp8 descales */
  KernelFn k = st->stage_descales ? staged_kernel(pr->dtype, pr->head_dim, ch.config)
                                  : tc_kernel(pr->dtype, pr->head_dim, ch.config, pr->kv_dtype != ANYATTN_KV_AS_Q);
  AA_CHECK(k != nullptr, ANYATTN_STATUS_UNSUPPORTED_CONFIG, "%s: no kernel compiled at head_dim %d", c.name, pr->head_dim);
  int threads = c.warps * AA_WARP_SIZE;
  /* the pipelined rows over 16-bit caches, unsplit: a producer warpgroup copies K and V */
  if (const KernelFn w = ws_kernel(plan, dev, ch.config, p.num_splits, false)) {
    k = w, threads += 128;
    /* its Q blocks as TMA boxes, where q's view allows, and with them its rows out where a
     * warpgroup's 64 rows are whole tokens (host_nv.cuh, tma_token_map) */
    p.q_tma = p.n_hchunks == 1 && tma_token_map(0, &p.q_map, a->q, pr->dtype, pr->head_dim, pr->num_q_heads,
                                               a->num_tokens, p.gh, p.bq);
    p.o_tma = p.q_tma && p.gh * p.bq == 128 && p.bq % 2 == 0 &&
              tma_token_map(1, &p.o_map, a->out, pr->dtype, pr->head_dim, pr->num_q_heads, a->num_tokens, p.gh,
                            p.bq / 2);
    /* past two waves of busy programs, persistent: a block an SM, claiming programs on the workspace's
     * words (mainloop_ws.cuh, WsItem); a run without them keeps a block per program */
    KernelFn pk = nullptr;
    if (const long long blocks = persistent_blocks(plan, dev, ch.config, a, st->has_sched && a->workspace, &pk)) {
      k = pk, grid.x = (unsigned)blocks, smem = c.persist_smem;
      p.sched = reinterpret_cast<unsigned *>(static_cast<char *>(a->workspace) + st->sched_offset);
    }
  }
  AA_TRY(launch(k, grid, dim3((unsigned)threads), smem, stream, pdl, p.cluster ? p.num_splits : 0, p));
  return ANYATTN_STATUS_OK;
}

}  // namespace aa
