/* policy.c: the GPU backend's host-side choices (policy.h): tile config,
 * split-KV segments, cluster merges, TMA boxes, and the plan's split limits.
 * Pure functions of the plan, the device facts and host-visible batch sizes. */
#include "policy.h"

#include <stdint.h>
#include <string.h>

#include "select.h"

/* Split-KV sizing (docs/design/decode.md#split-kv). A program (Q block x kv
 * head) normally walks all its keys; with S segments gridDim.y = S programs
 * each walk an even share of its tiles (cut on the device from the lengths
 * there), write fp32 partials, and a merge combines them. Worth it only while
 * the plain grid leaves multiprocessors idle: decode-like batches (mean q_len
 * <= 8) with few sequences.
 *   S_max (plan)  = min(AA_GPU_MAX_SPLITS, floor(occ * SMs / (Hkv * head chunks)),
 *                       ceil(max_context / kSplitMinKeys))      (< 2: no split)
 *                   for the unforced split config, raised to a forced count
 *                   "C-kS" when S is larger
 *   rows  (plan)  = S_max * min(max_tokens, kSplitMaxTokens)
 *   counters      = min(max_tokens, rows / 2) x the most programs per Q block
 *                   (kv heads x head chunks) of any config: a split run has
 *                   num_tokens <= rows / 2, and each Q block with work its own
 *                   first token
 *   workspace     = align256(counters * 4) + align256(rows * Hq * 8)
 *                   + rows * Hq * head_dim * 4 bytes
 *   S (run)       = min(S_max, rows / num_tokens, floor(occ * SMs / programs),
 *                       ceil(kv bound / block_n)), kv bound = batch->max_kv_len
 *                   when given, else limits.max_context      (< 2: no split)
 * occ = programs of the split config one SM holds (shared memory, and the
 * ~170-register cap of 16-row tiles: 12 warps). So the workspace does not grow
 * with big prefill limits: Llama-3-8B (32/8 heads, d128) on 132 SMs has
 * S_max = 16, rows = 128, 2.1 MB with contexts of 2048 and more (the 128-key
 * tile, one per SM), S_max = 33, rows = 264, 4.4 MB below. A run whose
 * S x num_tokens exceeds rows runs unsplit. One wave of equal segments is the aim. */
enum { kSplitMinKeys = 64, kSplitMaxTokens = 8 };
/* Role launches serve batches of mean q_len below this (aa_gpu_choose). */
enum { kRolesMaxMeanQ = 128 };

aa_gpu_row_map aa_gpu_rows(int group, int block_m) {
  aa_gpu_row_map m;
  m.gh = group < block_m ? group : block_m;
  m.bq = block_m / m.gh;
  m.n_hchunks = (group + m.gh - 1) / m.gh;
  return m;
}

int aa_gpu_config_find(const aa_gpu_plan_state *st, const char *name, size_t len) {
  for (int i = 0; i < st->num_configs; i++)
    if (strlen(st->configs[i].name) == len && strncmp(st->configs[i].name, name, len) == 0) return i;
  return -1;
}

int aa_gpu_config_parse(const aa_gpu_plan_state *st, const char *name, int *splits) {
  *splits = 0;
  const char *dash = strstr(name, "-k");
  if (!dash) return aa_gpu_config_find(st, name, strlen(name));
  const char *d = dash + 2;
  long s = 0;
  if (*d < '0' || *d > '9') return -1;
  for (; *d >= '0' && *d <= '9'; d++) {
    s = s * 10 + (*d - '0');
    if (s > AA_GPU_MAX_SPLITS) return -1;
  }
  if (*d != '\0' || s < 1) return -1;
  *splits = (int)s;
  return aa_gpu_config_find(st, name, (size_t)(dash - name));
}

int aa_gpu_config_fits(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg) {
  return st->configs[cfg].smem > 0 && st->configs[cfg].smem <= dev->smem_per_block;
}

int aa_gpu_config_parse_any(const aa_gpu_plan_state *st, const char *name, int *splits, int *dec) {
  *dec = 0;
  const char *plus = strchr(name, '+');
  if (!plus) return aa_gpu_config_parse(st, name, splits);
  const int pre = aa_gpu_config_find(st, name, (size_t)(plus - name));
  const int d = aa_gpu_config_parse(st, plus + 1, splits);
  if (pre < 0 || d < 0 || st->role_dec[pre] != d + 1) return -1;
  *dec = d + 1;
  return pre;
}

int aa_gpu_roles_fit(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg) {
  return cfg >= 0 && st->role_dec[cfg] > 0 && st->role_smem[cfg] > 0 && st->role_smem[cfg] <= dev->smem_per_block;
}

/* Mixed batches (mean q_len over 8 and under kRolesMaxMeanQ: chunks or
 * prompts among decodes) on a row with a role pair run as roles: the
 * sequences of one decode Q block on the decode tile, the rest on the
 * chosen one. Prefill batches do not: their decode role would only add
 * empty programs, and they ran 1-2% slower so (docs/design/prefill.md#mixed-batches). */
int aa_gpu_roles_serve(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg, int num_seqs, int num_tokens) {
  if (num_seqs < 2) return 0;
  const long long mean_q = ((long long)num_tokens + num_seqs - 1) / num_seqs;
  return mean_q > 8 && mean_q < kRolesMaxMeanQ && aa_gpu_roles_fit(st, dev, cfg);
}

/* Whether row c has a persistent launch of its producer kernel on this device: its second Q tile fits. */
static int aa_persist_fits(const aa_gpu_config *c, const aa_gpu_device *dev) {
  return c->persist_smem > 0 && c->persist_smem <= dev->smem_per_block;
}

/* On one H100 (graph replay, one call) m128n128w8s2's producer launch with the Q blocks by halves ran
 * mixed 1x2048p+63d@2048, 2x512c+126d@4096 and 1x512p+31d@1024 in 236, 774 and 74.7 us, against 281, 838
 * and 79.6 as roles (docs/design/prefill.md#mixed-batches). */
int aa_gpu_mixed_on_producer(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg) {
  const aa_gpu_plan_state *st = (const aa_gpu_plan_state *)plan->state;
  return aa_gpu_producer_launch(plan, dev, 1, 1) && aa_persist_fits(&st->configs[cfg], dev);
}

void aa_gpu_policy_init(aa_gpu_plan_state *st) {
  st->decode = aa_gpu_config_find(st, "m16n64w4s3", 10);
  st->decode_long = aa_gpu_config_find(st, "m16n128w8s2", 11);
  st->small = aa_gpu_config_find(st, "m64n64w4s2", 10);
  st->large = aa_gpu_config_find(st, "m128n128w8s2", 12);
  st->large_mid = aa_gpu_config_find(st, "m128n96w8s2", 11);
  st->large_narrow = aa_gpu_config_find(st, "m128n64w8s2", 11);
  /* The AMD table (one stage; src/choose/configs.h): its 16-row decode tile
   * runs decode and the split-KV segments, the 64-row tile the rest. */
  if (st->decode < 0) st->decode = aa_gpu_config_find(st, "m16n64w4s1", 10);
  if (st->small < 0) st->small = aa_gpu_config_find(st, "m64n64w4s1", 10);
}

static const aa_gpu_plan_state *aa_st(const anyattn_plan *plan) { return (const aa_gpu_plan_state *)plan->state; }

static int aa_fits(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg) {
  return cfg >= 0 && aa_gpu_config_fits(aa_st(plan), dev, cfg);
}

/* The 128-row prefill tile: m128n128w8s2, or above head dim 128 (compiled
 * 192 and 256) m128n96w8s2 where it fits (16-bit caches at d192), else
 * m128n64w8s2. There m128n128w8s2 does not fit 16-bit caches, and over fp8
 * caches it ran slower or alike (one H200, prefill 1x2048 and 1x8192: d256
 * 127 and 171 against 162 and 203 TFLOP/s, d192 165 and 222 against 179 and
 * 222); at d128 the 64-key tile is the slower
 * (docs/design/prefill.md#head-dims-192-and-256). */
static int aa_large_row(const anyattn_plan *plan, const aa_gpu_device *dev) {
  const aa_gpu_plan_state *st = aa_st(plan);
  if (plan->problem.head_dim > 128 && aa_fits(plan, dev, st->large_mid)) return st->large_mid;
  if (plan->problem.head_dim > 128 && aa_fits(plan, dev, st->large_narrow)) return st->large_narrow;
  return aa_fits(plan, dev, st->large) ? st->large : st->large_narrow;
}

/* Programs a launch of config cfg has for a batch of these sizes. */
static long long aa_programs(const anyattn_plan *plan, int cfg, int num_seqs, int num_tokens) {
  const aa_gpu_row_map m = aa_gpu_rows(plan->group, aa_st(plan)->configs[cfg].block_m);
  return ((long long)num_tokens / m.bq + num_seqs) * plan->problem.num_kv_heads * m.n_hchunks;
}

/* The fallback heuristic, for devices no tree serves. From sweeps on one
 * H200 (bf16 32/8 heads d128, page 16; docs/design/tuning.md#fallback-choice):
 * - decode (mean q_len <= 8): m16n64w4s3 gave 4.03 TB/s at 64x8192 and 3.83 at
 *   128x2048, the best of 8 decode configs once the grid fills the SMs; with
 *   fewer than 2 programs per SM the 128-key tile wins (1x8192: 116 us vs
 *   155 us; 8x4096: 71 us vs 88 us).
 * - mean q_len < 128 (mixed batches: a few chunks among many decodes):
 *   m64n64w4s2, 1x2048p+63d@2048 330 us vs 442 us with 128-row tiles.
 * - prefill: m128n128w8s2 (1x8192 causal 277 TFLOP/s vs 252 for m128n64w8s2
 *   and 238 for m64n64w4s2) when it has >= 2 programs per SM, else m64n64w4s2.
 *   Where it does not fit (head dims 192 and 256), m128n64w8s2: d256 1x8192
 *   463 TFLOP/s against 265 for m64n64w4s2
 *   (docs/design/prefill.md#head-dims-192-and-256). */
static int aa_fallback_config(const anyattn_plan *plan, const aa_gpu_device *dev, int num_seqs, int num_tokens) {
  const aa_gpu_plan_state *st = aa_st(plan);
  const long long fill = 2LL * dev->num_sms;
  const long long mean_q = num_seqs > 0 ? ((long long)num_tokens + num_seqs - 1) / num_seqs : 1;
  if (mean_q <= 8) {
    if (aa_fits(plan, dev, st->decode_long) && st->decode >= 0 &&
        aa_programs(plan, st->decode, num_seqs, num_tokens) < fill)
      return st->decode_long;
    if (aa_fits(plan, dev, st->decode)) return st->decode;
  }
  const int large = aa_large_row(plan, dev);
  if (mean_q >= 128 && aa_fits(plan, dev, large) && aa_programs(plan, large, num_seqs, num_tokens) >= fill)
    return large;
  if (aa_fits(plan, dev, st->small)) return st->small;
  for (int i = 0; i < st->num_configs; i++) /* a table without those rows (tuning builds) */
    if (aa_fits(plan, dev, i)) return i;
  return -1;
}

/* The row a leaf's row stands for where it has no kernel (a row compiled for
 * fp8 caches only, over a 16-bit cache) or does not fit: the row of the same
 * block_m, warps and stages with half its keys per tile, as many bytes per
 * tile over a 16-bit cache as it has over fp8 (m16n256w8s2 -> m16n128w8s2);
 * -1 when the table has none. The fitter times such leaves the same way
 * (tools/sweep_csv.c). */
static int aa_half_keys_row(const aa_gpu_plan_state *st, int idx) {
  const aa_gpu_config *c = &st->configs[idx];
  for (int i = 0; i < st->num_configs; i++) {
    const aa_gpu_config *h = &st->configs[i];
    if (h->block_m == c->block_m && 2 * h->block_n == c->block_n && h->warps == c->warps && h->stages == c->stages)
      return i;
  }
  return -1;
}

int aa_gpu_choose_config(const anyattn_plan *plan, const aa_gpu_device *dev, int num_seqs, int num_tokens,
                         int max_q_len, int max_kv_len, int64_t sum_kv_len, int *tree_splits) {
  const aa_gpu_plan_state *st = aa_st(plan);
  /* A tree tuned for this device (or its family) comes first; its leaf must
   * name a row of this build's table that fits the head dim. */
  if (tree_splits) *tree_splits = -1;
  if (st->tree) {
    double f[AA_F_COUNT];
    aa_tree_features(plan, num_seqs, num_tokens, max_q_len, max_kv_len, sum_kv_len, f);
    const aa_tree_node *leaf = aa_tree_eval(st->tree, f);
    int idx = leaf ? aa_gpu_config_find(st, leaf->config, strlen(leaf->config)) : -1;
    if (idx >= 0 && idx == st->large) idx = aa_large_row(plan, dev); /* above d128: the 64-key tile */
    if (idx >= 0 && !aa_fits(plan, dev, idx)) idx = aa_half_keys_row(st, idx);
    if (aa_fits(plan, dev, idx)) {
      if (tree_splits) *tree_splits = leaf->splits > 0 ? leaf->splits : 0;
      return idx;
    }
  }
  return aa_fallback_config(plan, dev, num_seqs, num_tokens);
}

int aa_gpu_split_occupancy(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg) {
  const aa_gpu_config *c = &st->configs[cfg];
  long long occ = c->smem > 0 ? (long long)(dev->smem_per_block / c->smem) : 1;
  const int reg_occ = c->block_m == 16 ? 12 / c->warps : 1;
  if (occ > reg_occ) occ = reg_occ;
  return occ < 1 ? 1 : (int)occ;
}

size_t aa_gpu_launch_smem(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg, long long programs,
                          int splits) {
  const aa_gpu_plan_state *st = aa_st(plan);
  const aa_gpu_config *c = &st->configs[cfg];
  if (c->block_m != 16 || dev->stream_warps <= 0 || c->warps <= 0) return c->smem;
  /* rows of 128 bytes or fewer (d64, fp8 caches) stream faster with more
   * programs per SM; split launches are sized to one wave of the row's own */
  const size_t row_bytes = (size_t)c->head_dim * aa_kv_dtype_size(plan->problem.kv_dtype, plan->problem.dtype);
  if (row_bytes <= 128 || (programs >= 0 && splits != 1)) return c->smem;
  const int cap = dev->stream_warps >= c->warps ? dev->stream_warps / c->warps : 1;
  if (aa_gpu_split_occupancy(st, dev, cfg) <= cap) return c->smem;
  if (programs >= 0 && programs <= (long long)cap * dev->num_sms) return c->smem;
  /* cap + 1 blocks of this size and the per-block reserve overflow an SM's
   * shared memory (the opt-in size plus one reserve), cap of them fit */
  const size_t s = dev->smem_per_block / (size_t)(cap + 1) + 1;
  return s > c->smem ? s : c->smem;
}

long long aa_gpu_wave_programs(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg) {
  return (long long)aa_gpu_split_occupancy(st, dev, cfg) * dev->num_sms;
}

/* The segments' config when nothing is forced: 16-row decode programs. For
 * long contexts (limits.max_context >= 2048) the 128-key tile keeps more
 * bytes in flight per program; forced on one H200 (bench --workload decode
 * --graph --config C): 1x8192 27.4 vs 30.9 us, 1x32768 56.6 vs 60.8 us,
 * e2e-llama8b 7.87 vs 8.90 s; at 1x500 the 64-key tile wins, 12.3 vs 13.4 us
 * (docs/design/decode.md#split-kv). Fixed at plan from the limits, so plan
 * and run agree on the workspace. */
static int aa_split_config_auto(const anyattn_plan *plan, const aa_gpu_device *dev) {
  const aa_gpu_plan_state *st = aa_st(plan);
  if (plan->limits.max_context >= 2048 && aa_fits(plan, dev, st->decode_long)) return st->decode_long;
  if (aa_fits(plan, dev, st->decode)) return st->decode;
  /* A table with the decode rows, at a head dim where neither fits (d512:
   * only the 32-key tile does): the first 16-row tile that fits. */
  if (st->decode >= 0)
    for (int i = 0; i < st->num_configs; i++)
      if (st->configs[i].block_m == 16 && aa_fits(plan, dev, i)) return i;
  return -1;
}

int aa_gpu_split_config(const anyattn_plan *plan, const aa_gpu_device *dev) {
  const aa_gpu_plan_state *st = aa_st(plan);
  return st->config_forced ? st->config : aa_split_config_auto(plan, dev);
}

size_t aa_gpu_split_counter_bytes(const anyattn_plan *plan) {
  const size_t b = (size_t)aa_st(plan)->split_counters * 4;
  return (b + 255) / 256 * 256;
}

size_t aa_gpu_split_ml_bytes(const anyattn_plan *plan) {
  const size_t b = (size_t)aa_st(plan)->split_rows * plan->problem.num_q_heads * 8;
  return (b + 255) / 256 * 256;
}

/* a * b into *out, 0 on overflow. */
static int aa_mul(size_t a, size_t b, size_t *out) {
  if (a != 0 && b > SIZE_MAX / a) return 0;
  *out = a * b;
  return 1;
}

/* A forced config or split count changes what runs, not the plan's limits:
 * they come from the config an unforced plan would split with, raised to a
 * forced count when that is larger. So `tune`, which times forced
 * candidates, times what the library's own choice of that config and count
 * runs (docs/design/tuning.md#sweep). */
anyattn_status aa_gpu_plan_splits(anyattn_plan *plan, const aa_gpu_device *dev) {
  aa_gpu_plan_state *st = (aa_gpu_plan_state *)plan->state;
  const anyattn_problem *pr = &plan->problem;
  int lcfg = aa_split_config_auto(plan, dev);
  if (lcfg < 0 && st->config_forced) lcfg = st->config; /* no decode tile fits: the forced one may */
  if (lcfg < 0) return ANYATTN_STATUS_OK;
  const aa_gpu_row_map ms = aa_gpu_rows(plan->group, st->configs[lcfg].block_m);
  long long smax = AA_GPU_MAX_SPLITS;
  const long long by_fill =
      (long long)aa_gpu_split_occupancy(st, dev, lcfg) * dev->num_sms / ((long long)pr->num_kv_heads * ms.n_hchunks);
  const long long by_keys = ((long long)plan->limits.max_context + kSplitMinKeys - 1) / kSplitMinKeys;
  if (by_fill < smax) smax = by_fill;
  if (by_keys < smax) smax = by_keys;
  if (st->forced_splits > smax) smax = st->forced_splits;
  if (smax < 2) return ANYATTN_STATUS_OK;
  st->num_splits = (int)smax;
  st->split_rows = (int)smax * (plan->limits.max_tokens < kSplitMaxTokens ? plan->limits.max_tokens : kSplitMaxTokens);
  long long per_qblock = 0; /* the most programs per Q block of any config */
  for (int i = 0; i < st->num_configs; i++) {
    const long long n = (long long)pr->num_kv_heads * aa_gpu_rows(plan->group, st->configs[i].block_m).n_hchunks;
    if (n > per_qblock) per_qblock = n;
  }
  const int split_tokens = plan->limits.max_tokens < st->split_rows / 2 ? plan->limits.max_tokens : st->split_rows / 2;
  st->split_counters = (long long)split_tokens * per_qblock; /* <= 2^9 x 2^16 x 2^16 */
  size_t ml, rows_heads, o;
  AA_CHECK(aa_mul((size_t)st->split_rows, (size_t)pr->num_q_heads, &rows_heads) && aa_mul(rows_heads, 8, &ml) &&
               aa_mul(rows_heads, (size_t)pr->head_dim * sizeof(float), &o) && ml <= SIZE_MAX / 4 &&
               (size_t)st->split_counters <= SIZE_MAX / 16 && o <= SIZE_MAX / 2 - (ml + (size_t)st->split_counters * 4 + 512),
           ANYATTN_STATUS_INVALID_SIZE,
           "problem->num_q_heads %d x head_dim %d: the split-KV workspace size overflows", pr->num_q_heads,
           pr->head_dim);
  plan->workspace_size = aa_gpu_split_counter_bytes(plan) + aa_gpu_split_ml_bytes(plan) + o;
  return ANYATTN_STATUS_OK;
}

int aa_gpu_cluster_limit(const aa_gpu_plan_state *st, const aa_gpu_device *dev, int cfg, const int *active,
                         int *slots) {
  *slots = 0;
  const int occ = aa_gpu_split_occupancy(st, dev, cfg);
  for (int c = AA_GPU_CLUSTER_MERGE; c >= 2; c /= 2) {
    if (active[c] < 0) continue;
    if ((long long)active[c] * c * 8 >= (long long)occ * dev->num_sms * 7) {
      *slots = active[c] * c;
      return c;
    }
  }
  return 0;
}

/* Split-KV serves decode-like batches only: mean q_len <= 8. */
static int aa_decode_like(const anyattn_args *a) {
  return ((long long)a->num_tokens + a->num_seqs - 1) / a->num_seqs <= 8;
}

/* A fixed count S (problem->config "C-kS", or a tree leaf's splits): S
 * segments for a decode-like batch when the workspace holds them (at most
 * st->num_splits), else no split. */
static int aa_fixed_split_count(const anyattn_plan *plan, const anyattn_args *a, int S) {
  const aa_gpu_plan_state *st = aa_st(plan);
  if (st->num_splits < 2 || a->num_tokens <= 0 || S < 2) return 1;
  if (!aa_decode_like(a)) return 1;
  if (S > st->num_splits) S = st->num_splits;
  return (long long)S * a->num_tokens <= st->split_rows ? S : 1;
}

/* Programs of config cfg with work, before any split: Q blocks with work
 * (padding sequences, q_len 0, and the grid's slack have none) x kv heads x
 * head chunks (aa_programs counts the whole grid, slack included). */
static long long aa_busy_programs(const anyattn_plan *plan, int cfg, const anyattn_args *a) {
  const aa_gpu_row_map m = aa_gpu_rows(plan->group, aa_st(plan)->configs[cfg].block_m);
  long long qblocks = ((long long)a->num_tokens + m.bq - 1) / m.bq;
  const long long busy = a->num_seqs < a->num_tokens ? a->num_seqs : a->num_tokens;
  if (busy > qblocks) qblocks = busy;
  return qblocks * plan->problem.num_kv_heads * m.n_hchunks;
}

/* Segments for `base` busy programs of config cfg whose partials take `rows`
 * token rows per segment: at most S_max, what the workspace's split rows
 * hold, one wave of programs, and the tiles of the kv bound (batch->max_kv_len
 * when given, else limits.max_context); 1 = no split. */
static int aa_split_bound(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg, const anyattn_args *a,
                          long long rows, long long base) {
  const aa_gpu_plan_state *st = aa_st(plan);
  long long s = st->num_splits;
  const long long by_rows = st->split_rows / rows;
  const long long by_fill = (long long)aa_gpu_split_occupancy(st, dev, cfg) * dev->num_sms / base;
  const int kv = a->max_kv_len > 0 ? a->max_kv_len : plan->limits.max_context;
  const long long by_keys = ((long long)kv + st->configs[cfg].block_n - 1) / st->configs[cfg].block_n;
  if (by_rows < s) s = by_rows;
  if (by_fill < s) s = by_fill;
  if (by_keys < s) s = by_keys;
  return s >= 2 ? (int)s : 1;
}

/* Segments for this run, from host scalars only; 1 = no split. */
static int aa_split_count(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg, const anyattn_args *a) {
  const aa_gpu_plan_state *st = aa_st(plan);
  if (st->forced_splits > 0) return aa_fixed_split_count(plan, a, st->forced_splits);
  if (st->num_splits < 2 || cfg < 0 || a->num_tokens <= 0 || !aa_decode_like(a)) return 1;
  return aa_split_bound(plan, dev, cfg, a, a->num_tokens, aa_busy_programs(plan, cfg, a));
}

/* Clusters pack into GPCs, so fewer programs may be co-resident in clusters
 * (cluster_slots) than without. Merge in clusters only when that adds no
 * wave: on one H200, 4x32768 decode with 4 segments of the 148 KB tile (128
 * programs) ran in two waves as clusters, 252.7 us, against 148.4 us merged
 * outside clusters (docs/design/decode.md#merging-segments). */
static int aa_cluster_adds_no_wave(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg, const anyattn_args *a,
                                   int splits) {
  const aa_gpu_plan_state *st = aa_st(plan);
  const long long programs = aa_busy_programs(plan, cfg, a) * splits;
  const long long plain = aa_gpu_wave_programs(st, dev, cfg);
  const long long cl = st->cluster_slots[cfg];
  return cl > 0 && (programs + cl - 1) / cl <= (programs + plain - 1) / plain;
}

/* The decode role's segments in a role launch: its partials hold
 * num_seqs x bq token rows per segment (a decode sequence's at seq x bq), so
 * S x those rows must fit the workspace's split rows, and its counters
 * (num_seqs x bq x programs per Q block) the plan's; fixed >= 2: that count
 * (problem->config "P+D-kS") or none, fixed 1: none, 0: as aa_split_count
 * for num_seqs one-block sequences. */
static int aa_role_split_count(const anyattn_plan *plan, const aa_gpu_device *dev, int dcfg, const anyattn_args *a,
                               int fixed) {
  const aa_gpu_plan_state *st = aa_st(plan);
  const aa_gpu_row_map m = aa_gpu_rows(plan->group, st->configs[dcfg].block_m);
  if (st->num_splits < 2 || a->num_seqs <= 0 || fixed == 1) return 1;
  const long long rows = (long long)a->num_seqs * m.bq;
  const long long progs = (long long)a->num_seqs * plan->problem.num_kv_heads * m.n_hchunks;
  if (rows * plan->problem.num_kv_heads * m.n_hchunks > st->split_counters) return 1;
  if (fixed >= 2) {
    const long long s = fixed < st->num_splits ? fixed : st->num_splits;
    return s * rows <= st->split_rows ? (int)s : 1;
  }
  return aa_split_bound(plan, dev, dcfg, a, rows, progs);
}

aa_gpu_choice aa_gpu_choose(const anyattn_plan *plan, const aa_gpu_device *dev, const anyattn_args *a) {
  const aa_gpu_plan_state *st = aa_st(plan);
  aa_gpu_choice c;
  c.dec_config = -1;
  c.dec_splits = 1;
  c.qb_order = 0;
  if (st->forced_dec > 0) { /* a forced pair runs every batch as roles */
    c.config = st->config;
    c.splits = 1;
    c.cluster = 0;
    c.dec_config = st->forced_dec - 1;
    c.dec_splits = aa_role_split_count(plan, dev, c.dec_config, a, st->forced_splits);
    return c;
  }
  int tree_splits = -1;
  c.config = st->config_forced ? st->config
                               : aa_gpu_choose_config(plan, dev, a->num_seqs, a->num_tokens, a->max_q_len,
                                                      a->max_kv_len, a->sum_kv_len, &tree_splits);
  if (tree_splits >= 0) { /* the tree's leaf: its config runs the segments too */
    c.splits = tree_splits > 0 ? aa_fixed_split_count(plan, a, tree_splits) : aa_split_count(plan, dev, c.config, a);
  } else {
    const int scfg = aa_gpu_split_config(plan, dev);
    c.splits = aa_split_count(plan, dev, scfg, a);
    if (c.splits > 1) c.config = scfg;
  }
  /* Counter indices run below num_tokens x programs per Q block (merge.cuh); the plan's counters
   * cover every split run (num_tokens <= split_rows / 2): a guard. */
  if (c.splits > 1 && (long long)a->num_tokens * plan->problem.num_kv_heads *
                              aa_gpu_rows(plan->group, st->configs[c.config].block_m).n_hchunks >
                          st->split_counters)
    c.splits = 1;
  c.cluster = c.splits > 1 && c.splits <= st->cluster_max[c.config] &&
              aa_cluster_adds_no_wave(plan, dev, c.config, a, c.splits);
  /* a mixed batch: the prompts' Q blocks between the decodes' where the row has a persistent producer
   * launch, else as roles (a forced row: one tile). Decodes that the decode role would split (few and
   * long: three at 32k beside a chunk, 4 segments) stay roles: the producer's tile runs a (sequence,
   * kv head) as one program, and its gain was measured on batches whose decodes fill the machine. */
  if (c.splits == 1 && aa_gpu_roles_serve(st, dev, c.config, a->num_seqs, a->num_tokens)) {
    const int dcfg = st->role_dec[c.config] - 1;
    const int dsplits = st->config_forced ? 1 : aa_role_split_count(plan, dev, dcfg, a, 0);
    if (dsplits == 1 && aa_gpu_mixed_on_producer(plan, dev, c.config)) {
      c.qb_order = 1;
    } else if (!st->config_forced) {
      c.dec_config = dcfg;
      c.dec_splits = dsplits;
    }
  }
  return c;
}

/* Padded tiles (kind 1) take boxes only in launches of one wave: there a
 * program's time is its own chain of instructions and round trips, which the
 * boxes shorten (one H200, graph replay: e2e-llama8b 5.91 -> 5.61 s, 1x8192
 * 23.3 -> 22.8 us); over several waves bandwidth decides, and the boxes were
 * slower (128x2048, 3 waves of m16n64w4s3: 279 -> 293 us). The pipelined
 * prefill tile (kind 2) takes them in every launch (prefill 1.19-1.33x
 * faster). docs/design/decode.md#tma-boxes. */
int aa_gpu_tma_rows(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg, long long programs, int mode,
                    int capped) {
  const aa_gpu_plan_state *st = aa_st(plan);
  const int kind = st->configs[cfg].tma;
  if (dev->arch < 90 || kind == 0 || mode == 0) return 0;
  /* padded tiles: launches of one wave only (a capped launch is more than one) */
  if (kind == 1 && mode != 2 && (capped || programs > aa_gpu_wave_programs(st, dev, cfg))) return 0;
  const int bs = plan->problem.block_size, bn = st->configs[cfg].block_n;
  const int rows = bs >= bn ? bn : bs;
  /* a box is one page's rows, 128-byte aligned in shared memory (8 padded
   * rows; 1024-byte for the swizzled panels: 8 rows), a power of two, which
   * the kernel's box arithmetic assumes (m128n96w8s2: pages of 8, 16 or 32). */
  if ((bs >= bn ? bs % bn : bn % bs) != 0 || rows % 8 != 0 || (rows & (rows - 1)) != 0) return 0;
  return rows;
}

int aa_gpu_producer_launch(const anyattn_plan *plan, const aa_gpu_device *dev, int splits, int mode) {
  return mode != 0 && dev->arch == 90 && splits == 1 && plan->problem.kv_dtype == ANYATTN_KV_AS_Q;
}

long long aa_gpu_producer_blocks(const anyattn_plan *plan, const aa_gpu_device *dev, int cfg, long long programs,
                                 long long busy, int mode) {
  const aa_gpu_config *c = &aa_st(plan)->configs[cfg];
  if (mode == 0 || !aa_persist_fits(c, dev)) return programs;
  /* two waves: at 2x500 (248 busy of 256 programs on 132 SMs) persistent blocks ran 1.03x slower, at 1x2048
   * (512) 1.05x faster (docs/design/prefill.md#persistent-blocks) */
  if (mode == 1) return busy > 2LL * dev->num_sms ? dev->num_sms : programs;
  return programs > mode ? mode : programs;
}

/* ---- fp8 pages staged to 16-bit (docs/design/layout.md#staged-prefill) ---- */

static size_t aa_align256(size_t b) { return (b + 255) / 256 * 256; }

anyattn_status aa_gpu_plan_stage(anyattn_plan *plan) {
  aa_gpu_plan_state *st = (aa_gpu_plan_state *)plan->state;
  const anyattn_problem *pr = &plan->problem;
  const anyattn_limits *l = &plan->limits;
  if (pr->kv_dtype == ANYATTN_KV_AS_Q || l->stage_kv_tokens <= 0) return ANYATTN_STATUS_OK;
  const long long bs = pr->block_size;
  /* a page per sequence for rounding; ids are int32 and one more is the NaN page */
  const long long pages = (l->stage_kv_tokens + bs - 1) / bs + l->max_seqs;
  const long long stride = (l->max_context + bs - 1) / bs;
  size_t elems, page_bytes, kv_bytes, table;
  const size_t base = aa_align256(plan->workspace_size);
  AA_CHECK(pages < 0x7fffffffLL && aa_mul((size_t)bs, (size_t)pr->num_kv_heads, &elems) &&
               aa_mul(elems, (size_t)pr->head_dim, &elems) && elems / 8 < 0x7fffffffu &&
               aa_mul(elems, aa_dtype_size(pr->dtype), &page_bytes) &&
               aa_mul(page_bytes, (size_t)pages + 1, &kv_bytes) && kv_bytes <= SIZE_MAX / 4 &&
               aa_mul((size_t)l->max_seqs, (size_t)stride, &table) && table <= SIZE_MAX / 8 &&
               base <= SIZE_MAX / 2 - 2 * aa_align256(kv_bytes) - aa_align256(table * 4),
           ANYATTN_STATUS_INVALID_SIZE,
           "limits->stage_kv_tokens %d (max_seqs %d, max_context %d) x block_size %d x num_kv_heads %d x head_dim %d: "
           "the stage area of the workspace overflows",
           l->stage_kv_tokens, l->max_seqs, l->max_context, pr->block_size, pr->num_kv_heads, pr->head_dim);
  st->stage_pages = pages;
  st->stage_stride = stride;
  st->stage_offset = base;
  st->stage_page_bytes = page_bytes;
  st->stage_kv_bytes = aa_align256(kv_bytes);
  plan->workspace_size = base + 2 * st->stage_kv_bytes + aa_align256(table * 4);
  return ANYATTN_STATUS_OK;
}

void aa_gpu_plan_sched(anyattn_plan *plan, const aa_gpu_device *dev) {
  aa_gpu_plan_state *st = (aa_gpu_plan_state *)plan->state;
  st->has_sched = 0;
  st->sched_offset = 0;
  if (dev->arch != 90 || plan->problem.dtype == ANYATTN_DTYPE_F32 ||
      (plan->problem.kv_dtype != ANYATTN_KV_AS_Q && plan->limits.stage_kv_tokens <= 0))
    return;
  st->sched_offset = aa_align256(plan->workspace_size); /* the split area is bounded far below SIZE_MAX (plan_splits) */
  plan->workspace_size = st->sched_offset + 256;
  st->has_sched = 1;
}

int aa_gpu_stage_fits(const anyattn_plan *plan, const anyattn_args *a) {
  const aa_gpu_plan_state *st = aa_st(plan);
  if (st->stage_pages <= 0 || a->num_seqs <= 0 || a->num_seqs > AA_GPU_STAGE_MAX_SEQS) return 0;
  if ((long long)a->num_tokens < (long long)AA_GPU_STAGE_MIN_Q_LEN * a->num_seqs) return 0;
  const long long bs = plan->problem.block_size;
  const long long kv = a->max_kv_len > 0 ? a->max_kv_len : plan->limits.max_context;
  long long need = (long long)a->num_seqs * ((kv + bs - 1) / bs);
  if (a->sum_kv_len > 0) {
    const long long by_sum = (a->sum_kv_len + bs - 1) / bs + a->num_seqs;
    if (by_sum < need) need = by_sum;
  }
  return need <= st->stage_pages;
}
