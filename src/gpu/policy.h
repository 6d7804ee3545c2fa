/* policy.h: the GPU backend's host-side choices, in plain C so that they are
 * unit-tested without a device (tests/test_gpu_policy.c): which tile config a
 * batch runs on, how many split-KV segments it takes and whether they merge
 * in a cluster, whether K/V come as TMA boxes, and the split limits and
 * workspace a plan sets. Every choice reads host-visible sizes only: run never
 * reads device memory or times anything. Design: docs/design/decode.md
 * (split-KV, clusters, boxes) and docs/design/tuning.md (the tree, the fallback). */
#ifndef ANYATTN_GPU_POLICY_H
#define ANYATTN_GPU_POLICY_H

#include "internal.h"
#include "tree.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AA_GPU_MAX_CONFIGS 16
/* Split-KV segments one merge takes at most (kernel/merge.cuh's kMergeMaxSplits). */
#define AA_GPU_MAX_SPLITS 128
/* Segments that merge inside one thread-block cluster at most (sm_90; more
 * merge by the last segment to arrive, which on one H200 is as cheap as an
 * 8-block cluster's merge: docs/design/decode.md#merging-segments). */
#define AA_GPU_CLUSTER_MERGE 4

/* One row of the config table as the plan's head dim sees it. */
typedef struct {
  const char *name;
  int block_m, block_n, warps, stages;
  size_t smem; /* dynamic shared memory at head_dim below (TileShape::SMEM_BYTES) */
  int tma;     /* TMA boxes the kernel can take: 0 none, 1 padded rows, 2 swizzled panels, 3 swizzled fp8 rows */
  int cluster; /* its split-KV segments may merge in a cluster (TileShape::CLUSTER) */
  int head_dim; /* the compiled head dim the row runs the plan's head dim at (src/gpu/kernel/kernels.cuh, row_head_dim) */
  size_t persist_smem; /* a persistent launch of its producer kernel (TileShape::PERSIST_SMEM_BYTES; 0: none) */
} aa_gpu_config;

/* What the device and the build offer a plan. */
typedef struct {
  int num_sms;
  size_t smem_per_block; /* opt-in shared memory per block */
  int arch;              /* 90 for sm_90 */
  int stream_warps;      /* warps of 16-row programs an SM keeps in launches of several waves (0: no cap) */
} aa_gpu_device;

/* The GPU backend's plan state (plan->state). */
typedef struct {
  aa_gpu_config configs[AA_GPU_MAX_CONFIGS]; /* the table at the plan's head dim */
  int num_configs;
  int config;          /* the config chosen at plan (the forced one, or from the limits); -1 for fp32 */
  int config_forced;   /* 1: problem->config named it; run keeps it */
  const aa_tree *tree; /* the tree serving the device when the plan was made, or NULL: the fallback heuristic */
  int num_splits;      /* split-KV segments per sequence (1: no split): the most run may use */
  int split_rows;      /* token rows of split-KV partials the workspace holds (segments x tokens) */
  long long split_counters; /* arrival counters at the workspace's head: split tokens x programs per Q block */
  int forced_splits;   /* 0 the backend decides; 1 never split; S >= 2 exactly S segments for
                        * decode-like batches (problem->config "NAME-kS") */
  int cluster_max[AA_GPU_MAX_CONFIGS];   /* per config: the most segments merged inside one cluster (0: none) */
  int cluster_slots[AA_GPU_MAX_CONFIGS]; /* per config: programs co-scheduled in such clusters */
  /* The fallback heuristic's rows (-1 when this build's table lacks them). */
  int decode, decode_long, small, large, large_mid, large_narrow;
  /* Role pairs (src/choose/configs.h) at this head dim: role_dec[i] = 1 + the
   * decode row paired with prefill row i (0: none), role_smem[i] the shared
   * memory of their launch (0: not compiled at this head dim). */
  int role_dec[AA_GPU_MAX_CONFIGS];
  size_t role_smem[AA_GPU_MAX_CONFIGS];
  int forced_dec; /* 1 + the decode row when problem->config named a pair "PREFILL+DECODE" (0: not) */
  /* fp8 caches with limits.stage_kv_tokens > 0 (docs/design/layout.md#staged-prefill):
   * the stage area at stage_offset in the workspace holds stage_pages + 1
   * pages of 16-bit K (stage_page_bytes each; the last one all NaN, for
   * sequences that do not fit), as many of V, then a page table of max_seqs
   * x stage_stride int32 entries. stage_plan is the plan of the same problem
   * over 16-bit caches that runs the staged batches (backend.cu); in it
   * stage_descales is 1: its prefill tiles apply the fp8 plan's descales. */
  long long stage_pages; /* 0: no staging */
  long long stage_stride;
  size_t stage_offset, stage_page_bytes, stage_kv_bytes;
  /* has_sched: the workspace holds, at sched_offset, the two words of the
   * producer kernel's persistent launches (aa_gpu_plan_sched) */
  int has_sched;
  size_t sched_offset;
  struct anyattn_plan_s *stage_plan;
  int stage_descales;
} aa_gpu_plan_state;

/* Programs along a GQA group: a program takes min(group, block_m) heads of it
 * (gh) for block_m / gh tokens (bq); larger groups split into n_hchunks. */
typedef struct {
  int gh, bq, n_hchunks;
} aa_gpu_row_map;

/* What one run launches. */
typedef struct {
  int config;  /* table row (a role launch: the prefill role's) */
  int splits;  /* split-KV segments (1: none) */
  int cluster; /* 1: the segments merge in a cluster, 0: by the last to arrive */
  int dec_config; /* -1: one tile; else a role launch, the decode role's row */
  int dec_splits; /* the decode role's split-KV segments (1: none; merged by the last to arrive) */
  int qb_order;   /* the order programs take Q blocks in (AttnParams::qb_order): 1, a mixed batch on one tile */
} aa_gpu_choice;

AA_HIDDEN aa_gpu_row_map aa_gpu_rows(int group, int block_m);
/* The row named by the first `len` characters of `name`, or -1. */
AA_HIDDEN int aa_gpu_config_find(const aa_gpu_plan_state *st, const char *name, size_t len);
/* "m16n128w8s2" or "m16n128w8s2-k8" (8 segments; -k1 never splits): the row
 * (-1: unknown) and the suffix in *splits (0: none given). */
AA_HIDDEN int aa_gpu_config_parse(const aa_gpu_plan_state *st, const char *name, int *splits);
/* problem->config as a row or a role pair "PREFILL+DECODE" (either may end
 * in -kS; on a pair it counts the decode role's segments): the (prefill)
 * row, or -1 when the name is neither; *dec gets 1 + the decode row (0: a
 * single row). A pair must be one of this build's (st->role_dec). */
AA_HIDDEN int aa_gpu_config_parse_any(const aa_gpu_plan_state *st, const char *name, int *splits, int *dec);
AA_HIDDEN int aa_gpu_config_fits(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg);
/* Whether row cfg's role pair is compiled at this head dim and fits the device. */
AA_HIDDEN int aa_gpu_roles_fit(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg);
/* Whether a mixed batch on row cfg may run on that one tile, its producer's
 * persistent launch taking the prompts' Q blocks between the decodes'
 * (qb_order 1), rather than as roles: sm_90 over 16-bit caches, where the
 * row has a persistent launch (aa_gpu_choose keeps roles where the decode
 * role would split the decodes). docs/design/prefill.md#mixed-batches. */
AA_HIDDEN int aa_gpu_mixed_on_producer(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg);
/* Whether a batch of these sizes on row cfg is a mixed batch on a row with a role pair
 * (aa_gpu_choose: roles unless forced or aa_gpu_mixed_on_producer). */
AA_HIDDEN int aa_gpu_roles_serve(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg, int num_seqs,
                                 int num_tokens);
/* Fills the fallback rows of st from its table. */
AA_HIDDEN void aa_gpu_policy_init(aa_gpu_plan_state *st);

/* The tile for a batch of these sizes (hints 0: unknown): the tree's leaf,
 * else the fallback heuristic; -1 when nothing fits. *tree_splits (may be
 * NULL) gets the leaf's split count (0: the backend decides), -1 when the
 * heuristic chose. */
AA_HIDDEN int aa_gpu_choose_config(const anyattn_plan *plan, const aa_gpu_device *dev, int num_seqs, int num_tokens,
                                   int max_q_len, int max_kv_len, int64_t sum_kv_len, int *tree_splits);
/* Programs of config cfg one multiprocessor holds while split (shared memory
 * and the register cap of 16-row tiles), and a wave of them. */
AA_HIDDEN int aa_gpu_split_occupancy(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg);
AA_HIDDEN long long aa_gpu_wave_programs(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg);
/* Dynamic shared memory to launch row cfg with for `programs` programs in
 * `splits` segments: its own, or, for a 16-row tile over cache rows of more
 * than 128 bytes in an unsplit launch of more programs than
 * dev->stream_warps warps per SM hold, enough that no more of them share an
 * SM (such a stream runs faster with fewer programs per SM:
 * docs/design/decode.md, "Rows and programs per SM"). programs < 0: the most
 * any launch of the row asks for. */
AA_HIDDEN size_t aa_gpu_launch_smem(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg, long long programs,
                                    int splits);
/* The config that runs split segments when nothing is forced, from the limits. */
AA_HIDDEN int aa_gpu_split_config(const anyattn_plan *plan, const aa_gpu_device *dev);
/* Plan time: the split limits (st->num_splits, st->split_rows) and the
 * workspace they need (plan->workspace_size); ANYATTN_STATUS_INVALID_SIZE if
 * that size overflows. */
AA_HIDDEN anyattn_status aa_gpu_plan_splits(anyattn_plan *plan, const aa_gpu_device *dev);
/* The workspace of a split plan: the arrival counters (0 between calls:
 * anyattn_workspace_prepare zeroes them once), then the partials' (max, sum)
 * rows, then their output rows. Bytes of the first two, each 256-aligned. */
AA_HIDDEN size_t aa_gpu_split_counter_bytes(const anyattn_plan *plan);
AA_HIDDEN size_t aa_gpu_split_ml_bytes(const anyattn_plan *plan);
/* The most segments config cfg merges in a cluster on this device, given
 * active[i] = clusters of size 2^(i+1) the device co-schedules (-1: unknown):
 * the largest size whose clusters cover 7/8 of the slots a split launch aims
 * to fill (a cluster's blocks share a GPC). *slots gets the programs they hold. */
AA_HIDDEN int aa_gpu_cluster_limit(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg, const int *active,
                                   int *slots);
/* Plan time, fp8 caches with limits.stage_kv_tokens > 0: the stage area
 * (st->stage_*) after the split workspace, added to plan->workspace_size;
 * ANYATTN_STATUS_INVALID_SIZE if a size overflows. Nothing for other plans. */
AA_HIDDEN anyattn_status aa_gpu_plan_stage(anyattn_plan *plan);
/* Run time: whether this batch's keys may be staged: a stage area, a mean
 * q_len of at least AA_GPU_STAGE_MIN_Q_LEN (num_tokens / num_seqs), at most
 * AA_GPU_STAGE_MAX_SEQS sequences, and the
 * host's bound on its pages (num_seqs x pages of max_kv_len, else of
 * limits.max_context; or the pages of sum_kv_len plus one per sequence)
 * within st->stage_pages. The caller still checks that the 16-bit plan runs
 * it on one unsplit prefill tile (launch.cu). */
#define AA_GPU_STAGE_MIN_Q_LEN 64
/* At most this many sequences (each block of the stage kernel sums the pages of those before its own). */
#define AA_GPU_STAGE_MAX_SEQS 1024
AA_HIDDEN int aa_gpu_stage_fits(const anyattn_plan *plan, const anyattn_args *a);
/* Run time: the config, segments and merge of this batch. */
AA_HIDDEN aa_gpu_choice aa_gpu_choose(const anyattn_plan *plan, const aa_gpu_device *dev, const anyattn_args *a);
/* Rows per TMA box for this launch, or 0 for 16-byte copies: mode 0 never,
 * 1 where it pays (padded tiles only in launches of one wave), 2 wherever the
 * layout allows. capped: the launch runs fewer programs per SM than the row's
 * own shared memory allows (aa_gpu_launch_smem), hence more than one wave. */
AA_HIDDEN int aa_gpu_tma_rows(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg, long long programs, int mode,
                              int capped);
/* Whether a launch of `splits` segments runs a pipelined row's kernel with a
 * producer warpgroup where the row has one (launch.cu, ws_kernel): on sm_90
 * (the kernel is sm_90a code), unsplit (its split paths, the empty partials,
 * the merges and the cluster barriers, are written for a block of consumers
 * alone), over 16-bit caches (fp8 codes are converted by the consumers; a
 * stage plan's 16-bit copy of them takes the producer, its kernels applying
 * the descales); never with mode 0 (ANYATTN_CUDA_WS=0).
 * docs/design/prefill.md#producer-warpgroup. */
AA_HIDDEN int aa_gpu_producer_launch(const anyattn_plan *plan, const aa_gpu_device *dev, int splits, int mode);
/* Reserves the two scheduler words of persistent producer launches (256
 * bytes after the split area) where the plan may launch them: sm_90, 16-bit
 * caches, or fp8 caches with a stage area (its staged runs, launch.cu's
 * staged_run, use these words). After aa_gpu_plan_splits, before the stage
 * area; zeroed by workspace_prepare. */
AA_HIDDEN void aa_gpu_plan_sched(anyattn_plan *plan, const aa_gpu_device *dev);
/* Blocks of a producer launch of config cfg over `programs` programs, of
 * which at least `busy` have work (num_tokens / bq Q blocks a head program:
 * the grid's spare Q block of each sequence may be empty): one a program,
 * or, where the row's persistent launch fits the device
 * (aa_gpu_config::persist_smem), persistent blocks, each running program
 * after program (mainloop_ws.cuh, WsItem): with mode 1 one an SM where the
 * busy programs exceed two waves (launch.cu passes it where the run has the
 * scheduler words), with mode N >= 2 at most N in any launch (for tests);
 * mode 0 never (ANYATTN_CUDA_PERSIST, host_nv.cuh).
 * docs/design/prefill.md#persistent-blocks. */
AA_HIDDEN long long aa_gpu_producer_blocks(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg,
                                           long long programs, long long busy, int mode);

#ifdef __cplusplus
}
#endif
#endif /* ANYATTN_GPU_POLICY_H */
