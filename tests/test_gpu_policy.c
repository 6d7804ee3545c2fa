/* test_gpu_policy.c: the GPU backend's host-side choices (src/gpu/policy.c)
 * on a described device, no GPU needed: config names and split suffixes, the
 * plan's split limits and workspace (and their overflow check), the run-time
 * choice of tile, segments and merge, the cluster limit and TMA boxes. */
#include <stdio.h>
#include <string.h>

#include "policy.h"
#include "select.h" /* aa_tree_for: the compiled-in trees */
#include "tl_check.h"


/* The NVIDIA table's rows at head dim 128 with shared memory like the H200
 * build's (TileShape::SMEM_BYTES), their TMA kinds, cluster merges and compiled head dim;
 * no persistent launch (tests that want one set persist_smem). */
static const aa_gpu_config kRows[] = {
    {"m16n32w2s2", 16, 32, 2, 2, 41472, 1, 1, 128, 0},  {"m16n64w4s2", 16, 64, 4, 2, 77312, 1, 1, 128, 0},
    {"m16n64w4s3", 16, 64, 4, 3, 112128, 1, 1, 128, 0}, {"m16n128w8s2", 16, 128, 8, 2, 151552, 1, 1, 128, 0},
    {"m64n64w4s2", 64, 64, 4, 2, 101376, 0, 1, 128, 0}, {"m128n128w8s2", 128, 128, 8, 2, 205824, 2, 1, 128, 0},
    {"m128n64w8s2", 128, 64, 8, 2, 0, 2, 1, 128, 0}, /* compiled from head dim 192 on (configs.h) */
    {"m16n256w8s2", 16, 256, 8, 2, 0, 0, 1, 128, 0}, /* compiled for fp8 caches only (configs.h) */
    {"m128n96w8s2", 128, 96, 8, 2, 0, 2, 1, 128, 0}, /* compiled at head dim 192, 16-bit caches (configs.h) */
};
static const aa_gpu_device kH200 = {132, 232448, 90, 0}; /* no cap on programs per SM unless a test sets one */

typedef struct {
  anyattn_plan plan;
  aa_gpu_plan_state st;
} fixture;

/* A plan as core and the backend's plan would leave it (Llama-3-8B heads by default). */
static void make_plan(fixture *f, int q_heads, int kv_heads, int head_dim, int max_seqs, int max_tokens,
                      int max_context, const char *forced) {
  memset(f, 0, sizeof *f);
  anyattn_problem_init(&f->plan.problem);
  f->plan.problem.num_q_heads = q_heads;
  f->plan.problem.num_kv_heads = kv_heads;
  f->plan.problem.head_dim = head_dim;
  anyattn_limits_init(&f->plan.limits);
  f->plan.limits.max_seqs = max_seqs;
  f->plan.limits.max_tokens = max_tokens;
  f->plan.limits.max_context = max_context;
  f->plan.group = q_heads / kv_heads;
  f->plan.state = &f->st;
  memcpy(f->st.configs, kRows, sizeof kRows);
  f->st.num_configs = (int)(sizeof kRows / sizeof kRows[0]);
  /* the NVIDIA role pair m128n128w8s2+m16n128w8s2: the larger tile's shared memory */
  f->st.role_dec[5] = 3 + 1;
  f->st.role_smem[5] = 205824;
  aa_gpu_policy_init(&f->st);
  f->st.num_splits = 1;
  f->st.config = -1;
  if (forced) {
    f->st.config = aa_gpu_config_parse_any(&f->st, forced, &f->st.forced_splits, &f->st.forced_dec);
    f->st.config_forced = 1;
  }
}

static anyattn_args batch(int num_seqs, int num_tokens, int max_kv_len) {
  anyattn_args a;
  memset(&a, 0, sizeof a);
  a.num_seqs = num_seqs;
  a.num_tokens = num_tokens;
  a.max_kv_len = max_kv_len;
  return a;
}

static void test_names(void) {
  fixture f;
  make_plan(&f, 32, 8, 128, 64, 64, 4096, NULL);
  int s = -1;
  EXPECT(aa_gpu_config_parse(&f.st, "m16n128w8s2", &s) == 3 && s == 0, "plain name");
  EXPECT(aa_gpu_config_parse(&f.st, "m16n128w8s2-k8", &s) == 3 && s == 8, "suffix -k8");
  EXPECT(aa_gpu_config_parse(&f.st, "m16n128w8s2-k128", &s) == 3 && s == 128, "suffix -k128");
  const char *bad[] = {"m16n128w8s2-k0", "m16n128w8s2-k129", "m16n128w8s2-k8x", "m16n128w8s2-k", "m16n128w8s2-k+8",
                       "nosuch", "m16n128w8s2x", "-k4", "m16n128w8s2-k99999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    EXPECT(aa_gpu_config_parse(&f.st, bad[i], &s) == -1, "'%s' must not parse", bad[i]);
}

/* Llama-3-8B on 132 SMs: the 128-key decode tile (one per SM) for contexts of
 * 2048 and more gives 132 / 8 = 16 segments, rows 16 x min(max_tokens, 8). */
static void test_plan_splits(void) {
  fixture f;
  make_plan(&f, 32, 8, 128, 256, 8192, 32768, NULL);
  EXPECT(aa_gpu_plan_splits(&f.plan, &kH200) == ANYATTN_STATUS_OK, "plan splits");
  EXPECT(f.st.num_splits == 16 && f.st.split_rows == 128, "S_max %d rows %d, want 16 and 128", f.st.num_splits,
         f.st.split_rows);
  /* counters: min(max_tokens, rows / 2) = 64 tokens x 8 kv heads x 1 head chunk (group 4 fits every tile) */
  const size_t cnt = 64 * 8 * 4, ml = (128 * 32 * 8 + 255) / 256 * 256, want = cnt + ml + (size_t)128 * 32 * 128 * 4;
  EXPECT(f.plan.workspace_size == want, "workspace %zu, want %zu", f.plan.workspace_size, want);
  EXPECT(aa_gpu_split_counter_bytes(&f.plan) == cnt && f.st.split_counters == 512, "counter bytes %zu",
         aa_gpu_split_counter_bytes(&f.plan));
  EXPECT(aa_gpu_split_ml_bytes(&f.plan) == ml, "ml bytes");

  /* short contexts: the 64-key tile, two per SM by shared memory, 3 by registers */
  make_plan(&f, 32, 8, 128, 256, 4, 1024, NULL);
  EXPECT(aa_gpu_plan_splits(&f.plan, &kH200) == ANYATTN_STATUS_OK, "plan splits");
  EXPECT(f.st.num_splits == 16 && f.st.split_rows == 64, "short: S_max %d rows %d, want 2*132/8 -> 16 (by keys "
         "1024/64 = 16) and 16 x 4", f.st.num_splits, f.st.split_rows);

  /* contexts too short to split */
  make_plan(&f, 32, 8, 128, 256, 8, 64, NULL);
  aa_gpu_plan_splits(&f.plan, &kH200);
  EXPECT(f.st.num_splits == 1 && f.plan.workspace_size == 0, "no split at 64 keys");

  /* a forced count raises the limit */
  make_plan(&f, 32, 8, 128, 256, 8, 32768, "m16n64w4s3-k32");
  aa_gpu_plan_splits(&f.plan, &kH200);
  EXPECT(f.st.num_splits == 32, "forced -k32: S_max %d", f.st.num_splits);

  /* sizes that overflow the workspace fail instead of wrapping */
  make_plan(&f, 1 << 30, 1, 1 << 30, 1, 8, 32768, NULL);
  f.plan.group = 1;
  EXPECT(aa_gpu_plan_splits(&f.plan, &kH200) == ANYATTN_STATUS_INVALID_SIZE, "overflowing workspace must fail");
}

static void test_choose(void) {
  fixture f;
  make_plan(&f, 32, 8, 128, 256, 8192, 32768, NULL);
  aa_gpu_plan_splits(&f.plan, &kH200);
  f.st.cluster_max[3] = 4;
  f.st.cluster_slots[3] = 128;

  /* batch-1 decode at 32k: the 128-key tile in 16 segments, merged by the reduce (16 > 4) */
  anyattn_args a = batch(1, 1, 32768);
  aa_gpu_choice c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 3 && c.splits == 16 && !c.cluster, "1x32768: config %d splits %d cluster %d", c.config, c.splits,
         c.cluster);
  /* 4 sequences x 8 heads = 32 busy programs: 132 / 32 = 4 segments, in a cluster of 4 */
  a = batch(4, 4, 32768);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 3 && c.splits == 4 && c.cluster, "4x32768: config %d splits %d cluster %d", c.config, c.splits,
         c.cluster);
  /* a short context bounds the segments by its tiles: 500 keys / 128 = 4 */
  a = batch(1, 1, 500);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.splits == 4, "1x500: splits %d", c.splits);
  /* 64 decodes fill the device: no split, the 64-key decode tile */
  a = batch(64, 64, 8192);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 2 && c.splits == 1, "64x8192: config %d splits %d", c.config, c.splits);
  /* prefill: the 128-row tile with at least 2 programs per SM, no split */
  a = batch(1, 8192, 8192);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 5 && c.splits == 1, "1x8192 prefill: config %d splits %d", c.config, c.splits);
  /* a short prefill: the 64-row tile */
  a = batch(1, 500, 500);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 4 && c.splits == 1, "1x500 prefill: config %d splits %d", c.config, c.splits);
  /* m128n128w8s2 does not fit (16-bit caches at d192 and d256): the 64-key 128-row tile takes prefill */
  f.st.configs[5].smem = 270336 + 1024, f.st.configs[6].smem = 205824;
  a = batch(1, 8192, 8192);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 6 && c.splits == 1, "d256 1x8192 prefill: config %d splits %d", c.config, c.splits);
  a = batch(1, 500, 500);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 4, "d256 1x500 prefill: config %d", c.config);
  /* 16-bit caches at d192: the 96-key 128-row tile, from the heuristic or for a leaf naming m128n128w8s2 */
  static const aa_tree_node large_leaf[] = {{-1, 0.0, 0, 0, "m128n128w8s2", 0}};
  static const aa_tree large_tree = {"test", "sm_90", "test tree", 0, 1, large_leaf};
  f.plan.problem.head_dim = 192;
  f.st.configs[8].smem = 210992;
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 4, "d192 1x500 prefill: config %d", c.config);
  a = batch(1, 8192, 8192);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 8 && c.splits == 1, "d192 1x8192 prefill: config %d splits %d", c.config, c.splits);
  f.st.tree = &large_tree;
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 8, "d192 1x8192 prefill, a leaf naming m128n128w8s2: config %d", c.config);
  f.st.tree = NULL;
  f.st.configs[8].smem = 0;
  /* fp8 caches at d256: m128n128w8s2 fits, but the 64-key tile runs prefill, tree or not */
  f.plan.problem.head_dim = 256;
  f.st.configs[5].smem = 202752;
  a = batch(1, 8192, 8192);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 6, "d256 fp8 1x8192 prefill: config %d", c.config);
  f.st.tree = &large_tree;
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 6, "d256 fp8 1x8192 prefill, a leaf naming m128n128w8s2: config %d", c.config);
  f.st.tree = NULL;
  f.plan.problem.head_dim = 128;
  f.st.configs[5].smem = kRows[5].smem, f.st.configs[6].smem = kRows[6].smem;

  /* a tree's leaf picks the config and a fixed split count */
  static const aa_tree_node nodes[] = {{-1, 0.0, 0, 0, "m16n64w4s2", 4}};
  static const aa_tree tree = {"test", "sm_90", "test tree", 0, 1, nodes};
  f.st.tree = &tree;
  a = batch(1, 1, 32768);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 1 && c.splits == 4, "tree leaf: config %d splits %d", c.config, c.splits);
  /* a leaf naming a row this table lacks falls back to the heuristic */
  static const aa_tree_node bad_nodes[] = {{-1, 0.0, 0, 0, "m999", 0}};
  static const aa_tree bad_tree = {"test", "sm_90", "test tree", 0, 1, bad_nodes};
  f.st.tree = &bad_tree;
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 3 && c.splits == 16, "unknown leaf: config %d splits %d", c.config, c.splits);
  /* a leaf naming a row compiled for fp8 caches only (AA_CONFIG_FP8_ONLY): over a
   * 16-bit cache it has no kernel (shared memory 0), so its half-keys row runs
   * (m16n128w8s2, the same bytes per tile) with the leaf's split count; over an
   * fp8 cache (its shared memory at d128) the leaf runs */
  static const aa_tree_node fp8_nodes[] = {{-1, 0.0, 0, 0, "m16n256w8s2", 4}};
  static const aa_tree fp8_tree = {"test", "sm_90", "test tree", 0, 1, fp8_nodes};
  f.st.tree = &fp8_tree;
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 3 && c.splits == 4, "fp8-only leaf, 16-bit cache: config %d splits %d, want 3 and 4", c.config,
         c.splits);
  f.st.configs[7].smem = 143632;
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 7 && c.splits == 4, "fp8-only leaf, fp8 cache: config %d splits %d, want 7 and 4", c.config,
         c.splits);
  f.st.configs[7].smem = kRows[7].smem;
  /* a leaf whose row does not fit and has no half-keys row: the heuristic */
  static const aa_tree_node wide_nodes[] = {{-1, 0.0, 0, 0, "m128n128w8s2", 0}};
  static const aa_tree wide_tree = {"test", "sm_90", "test tree", 0, 1, wide_nodes};
  f.st.tree = &wide_tree;
  f.st.configs[5].smem = 300000;
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 3 && c.splits == 16, "unfit leaf without a half-keys row: config %d splits %d", c.config,
         c.splits);
  f.st.configs[5].smem = kRows[5].smem;

  /* a forced config with a fixed count: -k1 never splits */
  make_plan(&f, 32, 8, 128, 256, 8, 32768, "m16n64w4s3-k1");
  aa_gpu_plan_splits(&f.plan, &kH200);
  a = batch(1, 1, 32768);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 2 && c.splits == 1, "forced -k1: config %d splits %d", c.config, c.splits);
}

/* The mean context (batch->sum_kv_len / num_seqs) reaches the tree: a leaf
 * per side of a mean_kv split, and the committed H200 tree's picks for
 * equal-length and mixed-length 64x8192 decode batches with and without the
 * hint (docs/design/tuning.md, "Features"). */
static void test_mean_context(void) {
  fixture f;
  make_plan(&f, 32, 8, 128, 256, 8192, 32768, NULL);
  aa_gpu_plan_splits(&f.plan, &kH200);
  static const aa_tree_node nodes[] = {{ANYATTN_TREE_FEATURE_MEAN_KV, 6000.0, 1, 2, NULL, 0},
                                       {-1, 0.0, 0, 0, "m16n128w8s2", 1},
                                       {-1, 0.0, 0, 0, "m64n64w4s2", 0}};
  static const aa_tree tree = {"test", "sm_90", "test tree", 0, 3, nodes};
  f.st.tree = &tree;
  anyattn_args a = batch(64, 64, 8192);
  aa_gpu_choice c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 3, "no sum_kv_len (mean_kv 0): config %d, want m16n128w8s2 (3)", c.config);
  a.sum_kv_len = 64LL * 8192;
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 4 && c.splits == 1, "sum_kv_len 64 x 8192: config %d splits %d, want m64n64w4s2 (4), 1",
         c.config, c.splits);
  a.sum_kv_len = 64LL * 3635; /* the full grid's cycled lengths */
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 3, "sum_kv_len 64 x 3635: config %d, want m16n128w8s2 (3)", c.config);

  f.st.tree = aa_tree_for("NVIDIA H200", "sm_90");
  EXPECT(f.st.tree != NULL, "no compiled-in H200 tree");
  if (!f.st.tree) return;
  /* by the committed sweeps (bench/results/h200): equal lengths want the
   * 64-row tile at 32 and 64 sequences; 32 cycled lengths a 16-row tile
   * (148.7 us against 175.5 for the 64-row tile's best); 64 cycled lengths
   * the 64-row tile with 2 segments (294.0 against 307.4 for the best 16-row
   * candidate), which also serves the unhinted batch */
  static const int seqs[] = {32, 64};
  for (int i = 0; i < 2; i++) {
    a = batch(seqs[i], seqs[i], 8192);
    a.max_q_len = 1;
    a.sum_kv_len = (int64_t)seqs[i] * 8192;
    c = aa_gpu_choose(&f.plan, &kH200, &a);
    EXPECT(!strcmp(f.st.configs[c.config].name, "m64n64w4s2"), "H200 tree, %dx8192 of equal lengths: %s", seqs[i],
           f.st.configs[c.config].name);
    for (int hinted = 0; hinted < 2; hinted++) {
      a.sum_kv_len = hinted ? (int64_t)seqs[i] * 3635 : 0;
      c = aa_gpu_choose(&f.plan, &kH200, &a);
      const char *what = hinted ? "of cycled lengths" : "without sum_kv_len";
      if (seqs[i] == 32)
        EXPECT(f.st.configs[c.config].block_m == 16, "H200 tree, 32x8192 %s: %s, want a 16-row tile", what,
               f.st.configs[c.config].name);
      else
        EXPECT(!strcmp(f.st.configs[c.config].name, "m64n64w4s2") && c.splits == 2,
               "H200 tree, 64x8192 %s: %s with %d segments, want m64n64w4s2 with 2", what,
               f.st.configs[c.config].name, c.splits);
    }
  }
}

static void test_clusters_and_boxes(void) {
  fixture f;
  make_plan(&f, 32, 8, 128, 256, 8, 32768, NULL);
  int slots = -1;
  /* the 128-key tile, one per SM: clusters of 4 covering 7/8 of 132 slots qualify */
  int active[AA_GPU_CLUSTER_MERGE + 1] = {-1, -1, 66, -1, 32};
  EXPECT(aa_gpu_cluster_limit(&f.st, &kH200, 3, active, &slots) == 4 && slots == 128, "clusters of 4, slots %d", slots);
  active[4] = 20; /* 80 slots: too few; clusters of 2 */
  EXPECT(aa_gpu_cluster_limit(&f.st, &kH200, 3, active, &slots) == 2 && slots == 132, "clusters of 2, slots %d", slots);
  active[2] = -1;
  EXPECT(aa_gpu_cluster_limit(&f.st, &kH200, 3, active, &slots) == 0 && slots == 0, "no clusters");

  /* TMA boxes: padded decode tiles in one wave only (mode 1), everywhere with mode 2 */
  f.plan.problem.block_size = 16;
  EXPECT(aa_gpu_tma_rows(&f.plan, &kH200, 3, 132, 1, 0) == 16, "one wave: boxes of a page");
  EXPECT(aa_gpu_tma_rows(&f.plan, &kH200, 3, 133, 1, 0) == 0, "two waves: copies");
  EXPECT(aa_gpu_tma_rows(&f.plan, &kH200, 3, 133, 2, 0) == 16, "mode all: boxes");
  EXPECT(aa_gpu_tma_rows(&f.plan, &kH200, 3, 1, 0, 0) == 0, "mode off: copies");
  EXPECT(aa_gpu_tma_rows(&f.plan, &kH200, 5, 100000, 1, 0) == 16, "the pipelined tile takes boxes in every launch");
  EXPECT(aa_gpu_tma_rows(&f.plan, &kH200, 4, 1, 2, 0) == 0, "the single-warpgroup wgmma tile has none");
  /* the producer warpgroup: unsplit 16-bit launches on sm_90 only */
  EXPECT(aa_gpu_producer_launch(&f.plan, &kH200, 1, 1) == 1, "unsplit bf16 on sm_90: the producer's kernel");
  EXPECT(aa_gpu_producer_launch(&f.plan, &kH200, 2, 1) == 0, "split launches keep the row's kernel");
  EXPECT(aa_gpu_producer_launch(&f.plan, &kH200, 1, 0) == 0, "ANYATTN_CUDA_WS=0 keeps the row's kernel");
  /* persistent blocks: one an SM past one wave, where the second Q tile fits */
  f.st.configs[5].persist_smem = 216064;
  EXPECT(aa_gpu_producer_blocks(&f.plan, &kH200, 5, 4096, 4088, 1) == kH200.num_sms, "past one wave: a block an SM");
  EXPECT(aa_gpu_producer_blocks(&f.plan, &kH200, 5, 136, 128, 1) == 136,
         "1x512: 136 programs, 8 of them possibly empty: a block a program");
  EXPECT(aa_gpu_producer_blocks(&f.plan, &kH200, 5, 100, 92, 1) == 100, "under one wave: a block a program");
  EXPECT(aa_gpu_producer_blocks(&f.plan, &kH200, 5, 256, 248, 1) == 256, "2x500: under two waves, a block a program");
  EXPECT(aa_gpu_producer_blocks(&f.plan, &kH200, 5, 520, 512, 1) == kH200.num_sms, "1x2048: past two waves, a block an SM");
  EXPECT(aa_gpu_producer_blocks(&f.plan, &kH200, 5, 4096, 4088, 0) == 4096, "ANYATTN_CUDA_PERSIST=0: a block a program");
  EXPECT(aa_gpu_producer_blocks(&f.plan, &kH200, 5, 100, 92, 3) == 3, "ANYATTN_CUDA_PERSIST=3: three blocks");
  EXPECT(aa_gpu_producer_blocks(&f.plan, &kH200, 5, 2, 0, 3) == 2, "ANYATTN_CUDA_PERSIST=3, two programs: two blocks");
  f.st.configs[5].persist_smem = kH200.smem_per_block + 1;
  EXPECT(aa_gpu_producer_blocks(&f.plan, &kH200, 5, 4096, 4088, 1) == 4096, "no room for the second Q tile");
  f.st.configs[5].persist_smem = 0;
  EXPECT(aa_gpu_producer_blocks(&f.plan, &kH200, 5, 4096, 4088, 1) == 4096, "a row without a persistent launch");
  /* their scheduler words: 256 bytes after the split area, on sm_90 over 16-bit caches */
  f.plan.workspace_size = 1000;
  aa_gpu_plan_sched(&f.plan, &kH200);
  EXPECT(f.st.has_sched == 1 && f.st.sched_offset == 1024 && f.plan.workspace_size == 1280,
         "scheduler words at %zu, workspace %zu", f.st.sched_offset, f.plan.workspace_size);
  f.plan.workspace_size = 0;
  aa_gpu_plan_sched(&f.plan, &kH200);
  EXPECT(f.st.has_sched == 1 && f.st.sched_offset == 0 && f.plan.workspace_size == 256, "a plan without splits: 256 bytes");
  f.plan.workspace_size = 0;
  f.plan.problem.kv_dtype = ANYATTN_KV_FP8_E4M3;
  aa_gpu_plan_sched(&f.plan, &kH200);
  EXPECT(f.st.has_sched == 0 && f.plan.workspace_size == 0, "fp8 caches: none");
  f.plan.limits.stage_kv_tokens = 65536;
  aa_gpu_plan_sched(&f.plan, &kH200);
  EXPECT(f.st.has_sched == 1 && f.plan.workspace_size == 256, "fp8 caches with a stage area: the staged runs' words");
  f.plan.limits.stage_kv_tokens = 0;
  f.plan.workspace_size = 0;
  f.plan.problem.kv_dtype = ANYATTN_KV_AS_Q;
  f.st.stage_descales = 1;
  EXPECT(aa_gpu_producer_launch(&f.plan, &kH200, 1, 1) == 1, "a stage plan's descale kernels take the producer too");
  EXPECT(aa_gpu_producer_launch(&f.plan, &kH200, 2, 1) == 0, "a split stage launch keeps the row's kernel");
  f.st.stage_descales = 0;
  f.plan.problem.kv_dtype = ANYATTN_KV_FP8_E4M3;
  EXPECT(aa_gpu_producer_launch(&f.plan, &kH200, 1, 1) == 0, "fp8 caches keep the row's kernel");
  f.plan.problem.kv_dtype = ANYATTN_KV_AS_Q;
  const aa_gpu_device a100 = {108, 166912, 80, 0};
  EXPECT(aa_gpu_tma_rows(&f.plan, &a100, 3, 1, 2, 0) == 0, "no boxes before sm_90");
  EXPECT(aa_gpu_producer_launch(&f.plan, &a100, 1, 1) == 0, "no producer warpgroup before sm_90");
  f.plan.problem.block_size = 256;
  EXPECT(aa_gpu_tma_rows(&f.plan, &kH200, 3, 1, 1, 0) == 128, "pages larger than the tile: boxes of a tile");
  f.plan.problem.block_size = 24;
  EXPECT(aa_gpu_tma_rows(&f.plan, &kH200, 3, 1, 1, 0) == 0, "a page size that does not divide the tile: copies");
  f.plan.problem.block_size = 4;
  EXPECT(aa_gpu_tma_rows(&f.plan, &kH200, 3, 1, 1, 0) == 0, "boxes under 8 rows: copies");
  /* the 96-key tile: pages of 8, 16 or 32 rows; a page of 96 or 192 would
   * make a box of 96 rows, not a power of two: copies */
  static const int n96_pages[][2] = {{8, 8}, {16, 16}, {32, 32}, {64, 0}, {96, 0}, {192, 0}, {256, 0}};
  for (int i = 0; i < 7; i++) {
    f.plan.problem.block_size = n96_pages[i][0];
    EXPECT(aa_gpu_tma_rows(&f.plan, &kH200, 8, 1, 1, 0) == n96_pages[i][1], "m128n96w8s2, page %d: boxes of %d rows",
           n96_pages[i][0], n96_pages[i][1]);
  }
}

/* Programs per SM of 16-row tiles in launches of several waves (aa_gpu_launch_smem). */
static void test_stream_cap(void) {
  fixture f;
  make_plan(&f, 32, 8, 128, 256, 256, 8192, NULL);
  aa_gpu_device d = kH200;
  d.stream_warps = 8;
  const size_t sm = kH200.smem_per_block + 1024; /* an SM: the opt-in size and one block's reserve */
  EXPECT(aa_gpu_launch_smem(&f.plan, &kH200, 1, 100000, 1) == 77312, "no cap configured: the row's own");
  /* m16n64w4s2: 3 per SM by its own size, 2 under a cap of 8 warps; 264 programs are one wave of 2 */
  EXPECT(aa_gpu_launch_smem(&f.plan, &d, 1, 264, 1) == 77312, "one wave at the cap: the row's own");
  size_t s = aa_gpu_launch_smem(&f.plan, &d, 1, 265, 1);
  EXPECT(s > 77312 && 3 * (s + 1024) > sm && 2 * (s + 1024) <= sm, "two programs per SM: %zu bytes", s);
  EXPECT(aa_gpu_launch_smem(&f.plan, &d, 1, -1, 1) == s, "the attribute covers the capped launch");
  /* m16n32w2s2: 5 per SM by size, 4 under the cap */
  s = aa_gpu_launch_smem(&f.plan, &d, 0, 100000, 1);
  EXPECT(5 * (s + 1024) > sm && 4 * (s + 1024) <= sm && s >= 41472, "four programs per SM: %zu bytes", s);
  EXPECT(aa_gpu_launch_smem(&f.plan, &d, 2, 100000, 1) == 112128, "m16n64w4s3: 2 per SM already");
  EXPECT(aa_gpu_launch_smem(&f.plan, &d, 3, 100000, 1) == 151552, "m16n128w8s2: 1 per SM already");
  EXPECT(aa_gpu_launch_smem(&f.plan, &d, 5, 100000, 1) == 205824, "prefill rows keep their own");
  EXPECT(aa_gpu_launch_smem(&f.plan, &d, 1, 100000, 4) == 77312, "split launches keep the row's own");
  f.plan.problem.kv_dtype = ANYATTN_KV_FP8_E4M3; /* 128-byte rows at d128 */
  EXPECT(aa_gpu_launch_smem(&f.plan, &d, 1, 100000, 1) == 77312, "rows of 128 bytes keep the row's own");
  f.plan.problem.kv_dtype = ANYATTN_KV_AS_Q;
  d.stream_warps = 2; /* fewer warps than the tile has: one program per SM */
  s = aa_gpu_launch_smem(&f.plan, &d, 1, 100000, 1);
  EXPECT(2 * (s + 1024) > sm && s + 1024 <= sm, "one program per SM: %zu bytes", s);
  /* a capped launch is more than one wave: no TMA boxes */
  d.stream_warps = 8;
  f.plan.problem.block_size = 16;
  EXPECT(aa_gpu_tma_rows(&f.plan, &d, 1, 300, 1, 0) == 16, "300 programs, 3 per SM: one wave, boxes");
  EXPECT(aa_gpu_launch_smem(&f.plan, &d, 1, 300, 1) != 77312 && aa_gpu_tma_rows(&f.plan, &d, 1, 300, 1, 1) == 0,
         "300 programs capped at 2 per SM: two waves, copies");
  EXPECT(aa_gpu_launch_smem(&f.plan, &d, 1, 300, 2) == 77312 && aa_gpu_tma_rows(&f.plan, &d, 1, 300, 1, 0) == 16,
         "split in 2: not capped, one wave of the row's own, boxes");
}

/* Role launches: mixed batches on a row with a pair, the decode role's segments bounded by the workspace. */
static void test_roles(void) {
  fixture f;
  int s = -1, d = -1;
  make_plan(&f, 32, 8, 128, 256, 8192, 32768, NULL);
  EXPECT(aa_gpu_config_parse_any(&f.st, "m128n128w8s2+m16n128w8s2", &s, &d) == 5 && d == 4 && s == 0, "pair");
  EXPECT(aa_gpu_config_parse_any(&f.st, "m128n128w8s2+m16n128w8s2-k2", &s, &d) == 5 && d == 4 && s == 2,
         "pair with -k2");
  EXPECT(aa_gpu_config_parse_any(&f.st, "m16n64w4s2", &s, &d) == 1 && d == 0, "a single row");
  const char *bad[] = {"m64n64w4s2+m16n128w8s2", "m128n128w8s2+m16n64w4s2", "m128n128w8s2+", "+m16n128w8s2",
                       "m128n128w8s2-k2+m16n128w8s2", "m128n128w8s2+m16n128w8s2+m16n128w8s2"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    EXPECT(aa_gpu_config_parse_any(&f.st, bad[i], &s, &d) == -1, "'%s' must not parse", bad[i]);

  aa_gpu_plan_splits(&f.plan, &kH200);
  static const aa_tree_node nodes[] = {{-1, 0.0, 0, 0, "m128n128w8s2", 0}};
  static const aa_tree tree = {"test", "sm_90", "test tree", 0, 1, nodes};
  f.st.tree = &tree;
  /* one 2048-token prefill and 63 decodes: roles; 64 x 4 decode rows exceed the 128 split rows: no split */
  anyattn_args a = batch(64, 2048 + 63, 2048);
  aa_gpu_choice c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 5 && c.dec_config == 3 && c.dec_splits == 1, "2048p+63d: config %d dec %d splits %d", c.config,
         c.dec_config, c.dec_splits);
  /* a 300-token chunk and 3 long decodes: 4 x 8 decode programs, 132 / 32 = 4 segments */
  a = batch(4, 300 + 3, 32768);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.dec_config == 3 && c.dec_splits == 4, "300c+3d: dec %d splits %d", c.dec_config, c.dec_splits);
  /* decode-like batches and single sequences stay on one tile */
  a = batch(64, 64, 2048);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.dec_config == -1, "64 decodes: dec %d", c.dec_config);
  a = batch(1, 8192, 8192);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.dec_config == -1, "1x8192 prefill: dec %d", c.dec_config);
  a = batch(16, 16384, 1024); /* prefill batches (mean q_len >= 128): no empty decode role */
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.dec_config == -1, "16x1024 prefill: dec %d", c.dec_config);
  a = batch(128, 2 * 512 + 126, 4096); /* two chunks and 126 decodes: mean q_len 9 */
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.dec_config == 3, "2x512c+126d: dec %d", c.dec_config);
  /* the pair must fit the device */
  const aa_gpu_device small = {132, 200000, 90, 0};
  a = batch(64, 2048 + 63, 2048);
  c = aa_gpu_choose(&f.plan, &small, &a);
  EXPECT(c.dec_config == -1, "pair over the device's shared memory: dec %d", c.dec_config);
  /* a row without a pair */
  static const aa_tree_node nodes64[] = {{-1, 0.0, 0, 0, "m64n64w4s2", 0}};
  static const aa_tree tree64 = {"test", "sm_90", "test tree", 0, 1, nodes64};
  f.st.tree = &tree64;
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 4 && c.dec_config == -1, "m64n64w4s2: config %d dec %d", c.config, c.dec_config);
  /* a row with a persistent producer launch (sm_90, 16-bit caches) keeps mixed batches, Q blocks by halves */
  f.st.tree = &tree;
  f.st.configs[5].persist_smem = 216064;
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 5 && c.dec_config == -1 && c.qb_order == 1, "2048p+63d on the producer: config %d dec %d order %d",
         c.config, c.dec_config, c.qb_order);
  a = batch(128, 2 * 512 + 126, 4096);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.dec_config == -1 && c.qb_order == 1, "2x512c+126d on the producer: dec %d order %d", c.dec_config,
         c.qb_order);
  a = batch(4, 300 + 3, 32768); /* decodes the decode role splits: roles */
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.dec_config == 3 && c.dec_splits == 4 && c.qb_order == 0, "300c+3d: dec %d splits %d order %d",
         c.dec_config, c.dec_splits, c.qb_order);
  a = batch(16, 16384, 1024);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.dec_config == -1 && c.qb_order == 0, "16x1024 prefill: dec %d order %d", c.dec_config, c.qb_order);
  a = batch(64, 64, 2048);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.qb_order == 0, "64 decodes: order %d", c.qb_order);
  const aa_gpu_device sm80 = {108, 232448, 80, 0}; /* no producer warpgroup there: roles */
  a = batch(64, 2048 + 63, 2048);
  c = aa_gpu_choose(&f.plan, &sm80, &a);
  EXPECT(c.dec_config == 3 && c.qb_order == 0, "2048p+63d on sm_80: dec %d order %d", c.dec_config, c.qb_order);
  f.plan.problem.kv_dtype = ANYATTN_KV_FP8_E4M3; /* the consumers convert fp8 codes: no producer launch */
  EXPECT(!aa_gpu_mixed_on_producer(&f.plan, &kH200, 5), "fp8 caches: no mixed batches on the producer");
  f.plan.problem.kv_dtype = ANYATTN_KV_AS_Q;
  f.st.configs[5].persist_smem = kH200.smem_per_block + 1;
  EXPECT(!aa_gpu_mixed_on_producer(&f.plan, &kH200, 5), "no room for the second Q tile: roles");
  f.st.configs[5].persist_smem = 0;
  EXPECT(!aa_gpu_mixed_on_producer(&f.plan, &kH200, 5), "a row without a persistent launch: roles");

  /* a forced pair runs every batch as roles; batch-1 decode splits 16 ways (132 / 8) */
  make_plan(&f, 32, 8, 128, 256, 8192, 32768, "m128n128w8s2+m16n128w8s2");
  aa_gpu_plan_splits(&f.plan, &kH200);
  a = batch(1, 1, 32768);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 5 && c.dec_config == 3 && c.dec_splits == 16 && c.splits == 1,
         "forced pair, 1x32768: config %d dec %d splits %d", c.config, c.dec_config, c.dec_splits);
  make_plan(&f, 32, 8, 128, 256, 8192, 32768, "m128n128w8s2+m16n128w8s2-k2");
  aa_gpu_plan_splits(&f.plan, &kH200);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.dec_config == 3 && c.dec_splits == 2, "forced pair -k2: dec %d splits %d", c.dec_config, c.dec_splits);
  a = batch(64, 2048 + 63, 2048); /* 2 x 64 x 4 rows exceed the workspace: no split */
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.dec_config == 3 && c.dec_splits == 1, "forced pair -k2, 64 sequences: splits %d", c.dec_splits);
  /* a forced single row never runs as roles */
  make_plan(&f, 32, 8, 128, 256, 8192, 32768, "m128n128w8s2");
  aa_gpu_plan_splits(&f.plan, &kH200);
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 5 && c.dec_config == -1 && c.qb_order == 0, "forced row: config %d dec %d order %d", c.config,
         c.dec_config, c.qb_order);
  f.st.configs[5].persist_smem = 216064;
  c = aa_gpu_choose(&f.plan, &kH200, &a);
  EXPECT(c.config == 5 && c.dec_config == -1 && c.qb_order == 1, "forced row with a persistent launch: order %d",
         c.qb_order);
}

/* fp8 caches staged to 16-bit (limits.stage_kv_tokens): the stage area's
 * layout after the split workspace, the host's bound on a batch's pages, and
 * sizes that overflow. */
static void test_stage(void) {
  fixture f;
  make_plan(&f, 32, 8, 128, 4, 8192, 8192, NULL);
  f.plan.problem.dtype = ANYATTN_DTYPE_BF16;
  f.plan.problem.block_size = 16;
  f.plan.limits.stage_kv_tokens = 16384;
  aa_gpu_plan_splits(&f.plan, &kH200);
  EXPECT(aa_gpu_plan_stage(&f.plan) == ANYATTN_STATUS_OK && f.st.stage_pages == 0, "16-bit caches: no stage area");
  f.plan.problem.kv_dtype = ANYATTN_KV_FP8_E4M3;
  const size_t split = f.plan.workspace_size;
  EXPECT(aa_gpu_plan_stage(&f.plan) == ANYATTN_STATUS_OK, "plan stage");
  /* 16384 / 16 pages + one per sequence; pages of 16 x 8 x 128 bf16; the NaN page; a table of 4 x 512 */
  const size_t page = 16 * 8 * 128 * 2, kv = (size_t)(1024 + 4 + 1) * page;
  EXPECT(f.st.stage_pages == 1028 && f.st.stage_stride == 512 && f.st.stage_page_bytes == page, "pages %lld stride %lld",
         f.st.stage_pages, f.st.stage_stride);
  EXPECT(f.st.stage_offset == (split + 255) / 256 * 256 && f.st.stage_kv_bytes == kv &&
             f.plan.workspace_size == f.st.stage_offset + 2 * kv + 4 * 512 * 4,
         "workspace %zu", f.plan.workspace_size);

  anyattn_args a = batch(2, 16384, 8192); /* 2 x 512 pages: fits */
  EXPECT(aa_gpu_stage_fits(&f.plan, &a), "2 x 8192 keys fit 1028 pages");
  a = batch(4, 16384, 8192); /* 4 x 512 pages by the max hint ... */
  EXPECT(!aa_gpu_stage_fits(&f.plan, &a), "4 x 8192 keys do not fit");
  a.sum_kv_len = 16000; /* ... 1000 + 4 by the sum */
  EXPECT(aa_gpu_stage_fits(&f.plan, &a), "a sum of 16000 keys fits");
  a = batch(4, 16384, 0); /* no hint: limits.max_context */
  EXPECT(!aa_gpu_stage_fits(&f.plan, &a), "no hint: 4 x max_context does not fit");
  a = batch(2, 127, 64); /* mean q_len 63.5 */
  EXPECT(!aa_gpu_stage_fits(&f.plan, &a), "mean q_len under 64: not staged");
  a = batch(0, 0, 0);
  EXPECT(!aa_gpu_stage_fits(&f.plan, &a), "no sequences: not staged");

  make_plan(&f, 32, 8, 128, 2048, 1 << 20, 1024, NULL);
  f.plan.problem.dtype = ANYATTN_DTYPE_BF16, f.plan.problem.kv_dtype = ANYATTN_KV_FP8_E4M3;
  f.plan.problem.block_size = 16, f.plan.limits.stage_kv_tokens = 1 << 20;
  aa_gpu_plan_stage(&f.plan);
  a = batch(AA_GPU_STAGE_MAX_SEQS + 1, (AA_GPU_STAGE_MAX_SEQS + 1) * 64, 64);
  EXPECT(!aa_gpu_stage_fits(&f.plan, &a), "over %d sequences: not staged", AA_GPU_STAGE_MAX_SEQS);

  /* sizes that overflow the stage area fail instead of wrapping */
  make_plan(&f, 1 << 16, 1 << 16, 512, 1 << 30, 8, 1 << 29, NULL);
  f.plan.group = 1;
  f.plan.problem.dtype = ANYATTN_DTYPE_BF16, f.plan.problem.kv_dtype = ANYATTN_KV_FP8_E4M3;
  f.plan.problem.block_size = 1 << 20, f.plan.limits.stage_kv_tokens = 1 << 29;
  EXPECT(aa_gpu_plan_stage(&f.plan) == ANYATTN_STATUS_INVALID_SIZE, "overflowing stage area must fail");
  make_plan(&f, 32, 8, 128, 0x7fffffff, 8, 1 << 29, NULL);
  f.plan.problem.dtype = ANYATTN_DTYPE_BF16, f.plan.problem.kv_dtype = ANYATTN_KV_FP8_E4M3;
  f.plan.problem.block_size = 1, f.plan.limits.stage_kv_tokens = 1 << 29;
  EXPECT(aa_gpu_plan_stage(&f.plan) == ANYATTN_STATUS_INVALID_SIZE, "page ids past int32 must fail");
}

int main(void) {
  test_names();
  test_stage();
  test_roles();
  test_plan_splits();
  test_choose();
  test_mean_context();
  test_clusters_and_boxes();
  test_stream_cap();
  printf("test_gpu_policy: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
