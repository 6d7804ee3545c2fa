/* test_tree.c: the offline tree fitter (tools/tree_fit.c, through the
 * anyattn_tools library) and the library's tree lookup, loading and choice
 * through the public API, on a synthetic sweep whose best config is known per
 * cell; and every compiled-in tree checked as the loader checks a file, naming
 * only rows of its vendor's config table. Seed printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anyattn.h"
#include "select.h" /* the compiled-in trees and the loader's check (library internals) */
#include "tl_util.h"
#include "tree_fit.h"

/* The rows the committed trees may name: each vendor's ship rows of the one
 * config table (src/choose/configs.h), as the library builds compile them. */
#define AA_NAME_(name, bm, bn, w, s) #name,
#include "configs.h"
#include "tl_check.h"
static const char *const cuda_configs[] = {ANYATTN_GPU_CONFIGS_NVIDIA(AA_NAME_)};
static const char *const amd_configs[] = {ANYATTN_GPU_CONFIGS_CDNA(AA_NAME_)};

/* A committed tree passes the loader's own check (aa_tree_check: features
 * known, thresholds finite, children after their parent, one parent each,
 * split counts plan accepts) and its leaves name rows of its vendor's table. */
static void check_committed(const aa_tree *t) {
  char why[300] = "";
  const int nvidia = !strncmp(t->family, "sm_", 3);
  const char *const *names = nvidia ? cuda_configs : amd_configs;
  const int n = nvidia ? (int)(sizeof cuda_configs / sizeof cuda_configs[0])
                       : (int)(sizeof amd_configs / sizeof amd_configs[0]);
  EXPECT(!strncmp(t->family, "sm_", 3) || !strncmp(t->family, "gfx", 3), "%s tree: family '%s' is neither sm_ nor gfx",
         t->device, t->family);
  EXPECT(aa_tree_check(t, why, sizeof why) == 0, "%s tree: %s", t->device, why);
  for (int i = 0; i < t->num_nodes; i++) {
    const aa_tree_node *d = &t->nodes[i];
    if (d->feature >= 0) continue;
    int known = 0;
    for (int k = 0; k < n && d->config; k++) known |= !strcmp(d->config, names[k]);
    EXPECT(known, "%s tree: leaf %d names '%s', not a row of its config table", t->device, i,
           d->config ? d->config : "(null)");
  }
}

static anyattn_tree_info tree_info(const char *device, const char *family) {
  anyattn_tree_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT(anyattn_tree_get(device, family, &info) == ANYATTN_STATUS_OK, "tree_get: %s", anyattn_last_error());
  return info;
}

static anyattn_tree_choice tree_choice(const char *device, const char *family, const double *f) {
  anyattn_tree_choice ch;
  memset(&ch, 0, sizeof ch);
  ch.struct_size = sizeof ch;
  EXPECT(anyattn_tree_choose(device, family, f, ANYATTN_TREE_FEATURE_COUNT, &ch) == ANYATTN_STATUS_OK,
         "tree_choose: %s", anyattn_last_error());
  return ch;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* Calls the public tree API gets wrong: each a named status. */
static void check_misuse(void) {
  anyattn_tree_info info;
  anyattn_tree_choice ch;
  double f[ANYATTN_TREE_FEATURE_COUNT] = {1, 1, 1, 1, 1, 128, 4, 2, 0};
  memset(&info, 0, sizeof info);
  memset(&ch, 0, sizeof ch);
  EXPECT(anyattn_tree_get("x", "y", NULL) == ANYATTN_STATUS_NULL_POINTER, "tree_get(NULL info)");
  EXPECT(anyattn_tree_get("x", "y", &info) == ANYATTN_STATUS_STRUCT_SIZE, "tree_get: struct_size 0");
  EXPECT(anyattn_tree_choose("x", "y", f, ANYATTN_TREE_FEATURE_COUNT, &ch) == ANYATTN_STATUS_STRUCT_SIZE,
         "tree_choose: struct_size 0");
  ch.struct_size = sizeof ch;
  EXPECT(anyattn_tree_choose("x", "y", NULL, ANYATTN_TREE_FEATURE_COUNT, &ch) == ANYATTN_STATUS_NULL_POINTER,
         "tree_choose(NULL features)");
  EXPECT(anyattn_tree_choose("x", "y", f, ANYATTN_TREE_FEATURE_COUNT, NULL) == ANYATTN_STATUS_NULL_POINTER,
         "tree_choose(NULL choice)");
  EXPECT(anyattn_tree_choose("x", "y", f, ANYATTN_TREE_FEATURE_COUNT - 3, &ch) == ANYATTN_STATUS_INVALID_SIZE &&
             strstr(anyattn_last_error(), "num_features"),
         "tree_choose: short feature vector: %s", anyattn_last_error());
  f[ANYATTN_TREE_FEATURE_MAX_KV] = NAN;
  EXPECT(anyattn_tree_choose("x", "y", f, ANYATTN_TREE_FEATURE_COUNT, &ch) == ANYATTN_STATUS_INVALID_OPTION &&
             strstr(anyattn_last_error(), "max_kv"),
         "tree_choose: NaN feature: %s", anyattn_last_error());
  EXPECT(!strcmp(anyattn_tree_feature_name(ANYATTN_TREE_FEATURE_NUM_SEQS), "num_seqs") &&
             !strcmp(anyattn_tree_feature_name(ANYATTN_TREE_FEATURE_GROUP), "group") &&
             !strcmp(anyattn_tree_feature_name(ANYATTN_TREE_FEATURE_KV_BYTES), "kv_bytes") &&
             !strcmp(anyattn_tree_feature_name(ANYATTN_TREE_FEATURE_MEAN_KV), "mean_kv") &&
             !strcmp(anyattn_tree_feature_name(-1), "?") &&
             !strcmp(anyattn_tree_feature_name(ANYATTN_TREE_FEATURE_COUNT), "?"),
         "feature names");
}

/* A sweep of a second shape over part of the grid (fp8 caches, decode cells
 * only) must not send the rest of that shape to leaves fitted on the part:
 * with these times a split on kv_bytes at the root would fit every cell best
 * (bf16 decode and prefill on "large", fp8 decode on "dec8") but send an fp8
 * prefill to "dec8"; the fitter splits on kv_bytes only among decode cells. */
static void check_shape_rule(uint64_t *rng) {
  enum { ND = 30, NP = 30, N = 2 * ND + NP };
  static const char *names[3] = {"dec8", "large", "dec"};
  static const double us_of[3][3] = {
      {300, 100, 110}, {100, 1000, 1000}, {1000, 100, 1000}}; /* bf16 dec, fp8 dec, pre */
  tf_table t;
  memset(&t, 0, sizeof t);
  t.num_cells = N;
  t.num_cands = 3;
  t.features = calloc((size_t)N * ANYATTN_TREE_FEATURE_COUNT, sizeof(double));
  t.us = calloc((size_t)N * 3, sizeof(double));
  t.cand_config = calloc(3, sizeof *t.cand_config);
  t.cand_splits = calloc(3, sizeof(int));
  EXPECT(t.features && t.us && t.cand_config && t.cand_splits, "out of memory");
  if (!t.features || !t.us || !t.cand_config || !t.cand_splits) return;
  for (int c = 0; c < 3; c++) snprintf(t.cand_config[c], sizeof t.cand_config[c], "%s", names[c]);
  for (int i = 0; i < N; i++) {
    double *f = t.features + (size_t)i * ANYATTN_TREE_FEATURE_COUNT;
    const int kind = i < ND ? 0 : i < 2 * ND ? 1 : 2;
    if (kind == 1)
      memcpy(f, f - (size_t)ND * ANYATTN_TREE_FEATURE_COUNT, sizeof(double) * ANYATTN_TREE_FEATURE_COUNT);
    else {
      f[ANYATTN_TREE_FEATURE_NUM_SEQS] = tl_rng_int(rng, 1, 128);
      f[ANYATTN_TREE_FEATURE_MEAN_Q] = kind == 0 ? 1 : tl_rng_int(rng, 64, 4096);
      f[ANYATTN_TREE_FEATURE_NUM_TOKENS] = f[ANYATTN_TREE_FEATURE_NUM_SEQS] * f[ANYATTN_TREE_FEATURE_MEAN_Q];
      f[ANYATTN_TREE_FEATURE_MAX_Q] = f[ANYATTN_TREE_FEATURE_MEAN_Q];
      f[ANYATTN_TREE_FEATURE_MAX_KV] = tl_rng_int(rng, 4096, 16384);
      f[ANYATTN_TREE_FEATURE_HEAD_DIM] = 128;
      f[ANYATTN_TREE_FEATURE_GROUP] = 4;
    }
    f[ANYATTN_TREE_FEATURE_KV_BYTES] = kind == 1 ? 1 : 2;
    for (int c = 0; c < 3; c++) t.us[(size_t)i * 3 + c] = us_of[kind][c] * (1 + 0.01 * tl_rng_uniform(rng));
  }
  tf_node nodes[64];
  const int n = tf_fit(&t, 4, 1, nodes, 64);
  EXPECT(n > 0, "shape rule: fit failed (%d)", n);
  for (int i = 0; n > 0 && i < N; i++) {
    double f[ANYATTN_TREE_FEATURE_COUNT];
    memcpy(f, t.features + (size_t)i * ANYATTN_TREE_FEATURE_COUNT, sizeof f);
    const int kind = i < ND ? 0 : i < 2 * ND ? 1 : 2;
    const char *got = names[tf_pick(nodes, f)], *want = kind == 1 ? "dec8" : "large";
    EXPECT(!strcmp(got, want), "shape rule: cell %d (kind %d) picks %s, want %s", i, kind, got, want);
    if (kind == 2) { /* the same prefill over an fp8 cache, a shape the sweep never ran */
      f[ANYATTN_TREE_FEATURE_KV_BYTES] = 1;
      got = names[tf_pick(nodes, f)];
      EXPECT(!strcmp(got, "large"), "shape rule: prefill cell %d over fp8 picks %s, want large", i, got);
    }
  }
  EXPECT(n > 0 && (nodes[0].feature == ANYATTN_TREE_FEATURE_MEAN_Q || nodes[0].feature == ANYATTN_TREE_FEATURE_MAX_Q ||
                   nodes[0].feature == ANYATTN_TREE_FEATURE_NUM_TOKENS),
         "shape rule: the root splits on %s", anyattn_tree_feature_name(nodes[0].feature));
  tf_free(&t);
}

/* A sweep file of a synthetic device, its header written; NULL (a failed
 * check) when it cannot be opened. */
static FILE *sweep_file(const char *path) {
  FILE *f = fopen(path, "w");
  EXPECT(f != NULL, "cannot write %s", path);
  if (!f) return NULL;
  fprintf(f, "# device: Synthetic GPU\n# family: sm_00\ncell");
  for (int k = 0; k < ANYATTN_TREE_FEATURE_COUNT; k++) fprintf(f, ",%s", anyattn_tree_feature_name(k));
  fprintf(f, ",config,splits,us,ok\n");
  return f;
}

/* Closes f, reads it back as a sweep into *t and removes it: 0, or -1 (a
 * failed check) when the reader refuses it. */
static int read_sweep_file(FILE *f, const char *path, tf_table *t) {
  char err[640] = "";
  fclose(f);
  const int rc = tf_read_csv(path, t, err, sizeof err);
  EXPECT(rc == 0, "read %s: %s", path, err);
  remove(path);
  return rc;
}

/* The mean context (batch->sum_kv_len / num_seqs): a sweep whose batches of
 * equal lengths want "wide" and whose batches of mixed lengths with the same
 * counts and maximum want "narrow". Read from a CSV, each cell also appears
 * without its mean (mean_kv 0, as run() sees a batch without the hint) with
 * the same times; the fitted tree then picks per cell with the hint and the
 * candidate of least total time over both kinds without it. */
static void check_mean_context(uint64_t *rng) {
  const char *path = "test_tree_mean.csv";
  FILE *f = sweep_file(path);
  if (!f) return;
  enum { N = 40 };
  for (int i = 0; i < N; i++) {
    const int seqs = 32 << (i / 2 % 2), max_kv = 4096 << (i / 4 % 2), equal = i % 2 == 0;
    const double mean = equal ? max_kv : 0.44 * max_kv, wide = equal ? 100 : 150, narrow = equal ? 110 : 100;
    for (int c = 0; c < 2; c++)
      fprintf(f, "%d,%d,%d,1,1,%d,128,4,2,%.17g,%s,0,%.17g,1\n", i, seqs, seqs, max_kv, mean, c ? "narrow" : "wide",
              (c ? narrow : wide) * (1 + 0.01 * tl_rng_uniform(rng)));
  }
  tf_table t;
  if (read_sweep_file(f, path, &t)) return;
  EXPECT(t.num_swept == N && t.num_cells == 2 * N, "%d cells, %d swept; want %d and %d", t.num_cells, t.num_swept,
         2 * N, N);
  int copies_ok = 1;
  for (int i = 0; i < N && t.num_cells == 2 * N; i++) {
    const double *a = t.features + (size_t)i * ANYATTN_TREE_FEATURE_COUNT;
    const double *b = a + (size_t)N * ANYATTN_TREE_FEATURE_COUNT;
    for (int k = 0; k < ANYATTN_TREE_FEATURE_COUNT; k++)
      copies_ok &= k == ANYATTN_TREE_FEATURE_MEAN_KV ? a[k] > 0 && b[k] == 0 : a[k] == b[k];
    copies_ok &= t.us[(size_t)i * 2] == t.us[(size_t)(i + N) * 2] && t.us[(size_t)i * 2 + 1] == t.us[(size_t)(i + N) * 2 + 1];
  }
  EXPECT(copies_ok, "the copies without the mean context differ from their cells in more than mean_kv");
  tf_node nodes[64];
  const int n = tf_fit(&t, 6, 1, nodes, 64);
  EXPECT(n > 0, "mean context: fit failed (%d)", n);
  for (int i = 0; n > 0 && i < t.num_cells; i++) {
    const double *ff = t.features + (size_t)i * ANYATTN_TREE_FEATURE_COUNT;
    const int hinted = i < N, equal = i % N % 2 == 0;
    const char *got = t.cand_config[tf_pick(nodes, ff)], *want = hinted && equal ? "wide" : "narrow";
    EXPECT(!strcmp(got, want), "mean context: cell %d (%s, %s) picks %s, want %s", i % N,
           equal ? "equal lengths" : "mixed lengths", hinted ? "mean_kv given" : "no mean_kv", got, want);
  }
  FILE *rf = tmpfile();
  char buf[1024] = "";
  if (rf && n > 0) {
    tf_report(&t, nodes, rf);
    rewind(rf);
    buf[fread(buf, 1, sizeof buf - 1, rf)] = '\0';
  }
  if (rf) fclose(rf);
  EXPECT(strstr(buf, "with the mean context (sum_kv_len hint) 40 of 40 (100.0%), without it 20 of 40"),
         "mean context report: %s", buf);
  tf_free(&t);
}

/* Over a 16-bit cache a row compiled for fp8 caches only (not swept, or
 * failed) takes its half-keys row's time with the same split count, as run
 * runs such a leaf; over fp8 it keeps none where not swept, and a row
 * without a half-keys row keeps none. */
static void check_half_keys(void) {
  const char *path = "test_tree_half.csv";
  FILE *f = sweep_file(path);
  if (!f) return;
  /* cell 0 over fp8 (kv_bytes 1): every candidate; cell 0 over bf16: m16n256w8s2/0 failed, /4 not swept */
  fprintf(f, "0,1,1,1,1,4096,128,4,1,4096,m16n256w8s2,0,10,1\n0,1,1,1,1,4096,128,4,1,4096,m16n256w8s2,4,9,1\n");
  fprintf(f, "0,1,1,1,1,4096,128,4,1,4096,m16n128w8s2,0,12,1\n0,1,1,1,1,4096,128,4,1,4096,m16n128w8s2,4,11,1\n");
  fprintf(f, "0,1,1,1,1,4096,128,4,1,4096,m128n64w8s2,0,50,0\n");
  fprintf(f, "1,2,2,1,1,4096,128,4,1,4096,m16n128w8s2,0,14,1\n"); /* over fp8, m16n256w8s2 not swept */
  fprintf(f, "0,1,1,1,1,4096,128,4,2,4096,m16n256w8s2,0,0,0\n");
  fprintf(f, "0,1,1,1,1,4096,128,4,2,4096,m16n128w8s2,0,20,1\n0,1,1,1,1,4096,128,4,2,4096,m16n128w8s2,4,18,1\n");
  fprintf(f, "0,1,1,1,1,4096,128,4,2,4096,m128n64w8s2,0,0,0\n");
  tf_table t;
  if (read_sweep_file(f, path, &t)) return;
  const int a0 = tf_find_cand(&t, "m16n256w8s2", 0), a4 = tf_find_cand(&t, "m16n256w8s2", 4),
            w = tf_find_cand(&t, "m128n64w8s2", 0);
  EXPECT(t.num_swept == 3 && a0 >= 0 && a4 >= 0 && w >= 0, "half keys: %d cells, candidates %d %d %d", t.num_swept,
         a0, a4, w);
  if (t.num_swept != 3 || a0 < 0 || a4 < 0 || w < 0) {
    tf_free(&t);
    return;
  }
  /* cells sort by shape: kv_bytes 1 first */
  const double *fp8 = t.us, *fp8_unswept = t.us + t.num_cands, *bf16 = t.us + 2 * t.num_cands;
  EXPECT(isinf(fp8_unswept[a0]), "half keys: over fp8 an unswept m16n256w8s2 keeps no time, got %g", fp8_unswept[a0]);
  EXPECT(fp8[a0] == 10 && fp8[a4] == 9 && isinf(fp8[w]), "half keys, fp8 cell: %g %g %g (want 10 9 inf)", fp8[a0],
         fp8[a4], fp8[w]);
  EXPECT(bf16[a0] == 20 && bf16[a4] == 18 && isinf(bf16[w]), "half keys, bf16 cell: %g %g %g (want 20 18 inf)",
         bf16[a0], bf16[a4], bf16[w]);
  tf_free(&t);
}

/* The truth the sweep is built from: decode-like cells want "dec", short
 * prompts "small", long ones "large". */
/* The criterion: each cell's times weighted by 1/sqrt(its best time). Three
 * cells on one feature, three candidates, one split allowed: A (1 ms, best
 * "a"), B (1 to 10 us, best "b", 10x slower on the others) and C (1 ms, best
 * "c"). B shares a leaf with A or C; by total time that leaf takes its big
 * cell's best and B runs 10x slower (9 us saved would cost 100 us), by the
 * weighted time B keeps "b" and its neighbour runs 10% slower. */
static void check_weighted_criterion(void) {
  static const double us[9] = {1000, 1100, 1100, 10, 1, 10, 1100, 1100, 1000};
  static char cfg[3][TF_CONFIG_NAME_MAX] = {"a", "b", "c"};
  static int splits[3];
  double f[3 * ANYATTN_TREE_FEATURE_COUNT];
  memset(f, 0, sizeof f);
  for (int i = 0; i < 3; i++) f[(size_t)i * ANYATTN_TREE_FEATURE_COUNT + ANYATTN_TREE_FEATURE_MAX_KV] = 1024 << i;
  tf_table t;
  memset(&t, 0, sizeof t);
  t.num_cells = 3, t.num_cands = 3, t.features = f, t.us = (double *)us, t.cand_config = cfg, t.cand_splits = splits;
  tf_node nodes[8];
  const int n = tf_fit(&t, 1, 1, nodes, 8);
  EXPECT(n == 3, "weighted criterion: a depth-1 fit gave %d nodes, want 3", n);
  if (n != 3) return;
  const int pa = tf_pick(nodes, f), pb = tf_pick(nodes, f + ANYATTN_TREE_FEATURE_COUNT),
            pc = tf_pick(nodes, f + 2 * ANYATTN_TREE_FEATURE_COUNT);
  EXPECT(pb == 1, "weighted criterion: the small cell picks %s, want its best, b", cfg[pb]);
  EXPECT((pa == 0 && pc == 1) || (pa == 1 && pc == 2), "weighted criterion: the big cells pick %s and %s", cfg[pa],
         cfg[pc]);
}

static int truth(const double *f) {
  if (f[ANYATTN_TREE_FEATURE_MEAN_Q] <= 8) return 0;
  return f[ANYATTN_TREE_FEATURE_MAX_KV] <= 2048 ? 1 : 2;
}

int main(void) {
  uint64_t seed = tl_seed_from_env_or_time(), rng = seed;
  printf("test_tree: seed 0x%llx (rerun with ANYATTN_SEED=0x%llx)\n", (unsigned long long)seed,
         (unsigned long long)seed);
  static const char *names[3] = {"dec", "small", "large"};
  tf_table t;
  memset(&t, 0, sizeof t);
  t.num_cells = 200;
  t.num_cands = 3;
  t.features = calloc((size_t)t.num_cells * ANYATTN_TREE_FEATURE_COUNT, sizeof(double));
  t.us = calloc((size_t)t.num_cells * t.num_cands, sizeof(double));
  t.cand_config = calloc(3, sizeof *t.cand_config);
  t.cand_splits = calloc(3, sizeof(int));
  snprintf(t.device, sizeof t.device, "Synthetic GPU");
  snprintf(t.family, sizeof t.family, "sm_00");
  for (int c = 0; c < 3; c++) snprintf(t.cand_config[c], sizeof t.cand_config[c], "%s", names[c]);
  for (int i = 0; i < t.num_cells; i++) {
    double *f = t.features + (size_t)i * ANYATTN_TREE_FEATURE_COUNT;
    f[ANYATTN_TREE_FEATURE_NUM_SEQS] = tl_rng_int(&rng, 1, 128);
    f[ANYATTN_TREE_FEATURE_MEAN_Q] = tl_rng_uniform(&rng) < 0.4 ? 1 : tl_rng_int(&rng, 9, 4096);
    f[ANYATTN_TREE_FEATURE_NUM_TOKENS] = f[ANYATTN_TREE_FEATURE_NUM_SEQS] * f[ANYATTN_TREE_FEATURE_MEAN_Q];
    f[ANYATTN_TREE_FEATURE_MAX_Q] = f[ANYATTN_TREE_FEATURE_MEAN_Q];
    f[ANYATTN_TREE_FEATURE_MAX_KV] = tl_rng_int(&rng, 16, 16384);
    f[ANYATTN_TREE_FEATURE_HEAD_DIM] = 128;
    f[ANYATTN_TREE_FEATURE_GROUP] = 4;
    f[ANYATTN_TREE_FEATURE_KV_BYTES] = 2;
    const int best = truth(f);
    /* cells of similar cost: the total-time criterion then counts misplaced cells */
    const double base = 100 + 10 * tl_rng_uniform(&rng);
    for (int c = 0; c < 3; c++)
      t.us[(size_t)i * 3 + c] = c == best ? base : base * (1.2 + tl_rng_uniform(&rng));
    if (i % 17 == 5) t.us[(size_t)i * 3 + (best + 1) % 3] = INFINITY; /* a config that failed there */
  }
  tf_node nodes[64];
  int n = tf_fit(&t, 4, 1, nodes, 64);
  EXPECT(n > 0 && n <= 31, "fit returned %d nodes (depth 4 holds at most 31)", n);
  /* What the fitter promises: a leaf never takes a candidate that failed on
   * one of its cells, and the tree's total time stays near the per-cell best. It is greedy and depth-limited, and a
   * failed candidate rules a leaf out, so it finds the rule on most cells, not all (over 2,000 seeds: at worst 160 of
   * 200, typically all). */
  int right = 0, failed_pick = 0;
  double tree_us = 0, oracle_us = 0;
  for (int i = 0; i < t.num_cells; i++) {
    const double *f = t.features + (size_t)i * ANYATTN_TREE_FEATURE_COUNT;
    const int c = tf_pick(nodes, f);
    right += c == truth(f);
    failed_pick += isinf(t.us[(size_t)i * 3 + c]);
    tree_us += t.us[(size_t)i * 3 + c];
    oracle_us += t.us[(size_t)i * 3 + truth(f)];
  }
  EXPECT(failed_pick == 0, "tree picks a failed candidate on %d cells", failed_pick);
  EXPECT(tree_us <= 1.2 * oracle_us, "tree total %.0f us, the per-cell best %.0f us", tree_us, oracle_us);
  EXPECT(right >= t.num_cells * 3 / 4, "tree picks the best config on %d of %d cells", right, t.num_cells);
  /* Best-first growth: a budget keeps the splits worth most, so the tree's
   * weighted total time never grows with the budget; a budget under 3 is one leaf. */
  EXPECT(tf_fit(&t, 4, 1, nodes, 2) == 1 && nodes[0].feature < 0, "a budget of 2 nodes: one leaf");
  EXPECT(tf_fit(&t, 4, 1, nodes, 0) == -1, "a budget of 0 nodes is refused");
  {
    double prev = INFINITY;
    int unsplit_prev = 1, monotone = 1, full = 0;
    for (int budget = 1; budget <= 511 && !full; budget += 2) {
      int unsplit = 0;
      const int m = tf_fit_ex(&t, 10, 1, nodes, budget, &unsplit);
      double total = 0; /* the fitter's criterion: times weighted by 1/sqrt(the cell's best) */
      for (int i = 0; i < t.num_cells && m > 0; i++) {
        const double *u = t.us + (size_t)i * 3;
        const double best = fmin(u[0], fmin(u[1], u[2]));
        total += u[tf_pick(nodes, t.features + (size_t)i * ANYATTN_TREE_FEATURE_COUNT)] / sqrt(best);
      }
      monotone &= m > 0 && m <= budget && total <= prev * (1 + 1e-12);
      if (unsplit_prev && !unsplit) full = m; /* the first budget that holds the whole tree */
      prev = total;
      unsplit_prev = unsplit;
    }
    EXPECT(monotone, "weighted tree time grows with the node budget, or a tree passes its budget");
    EXPECT(full > 0 && tf_fit(&t, 10, 1, nodes, 511) == full, "the unbounded tree has %d nodes, want %d",
           tf_fit(&t, 10, 1, nodes, 511), full);
  }

  /* Scoring given picks (anyattn fit --eval), on a 4-cell, 2-candidate table
   * worked by hand: times {10, 20}, {20, 10}, {10, 11}, {30, 10}; the best
   * fixed candidate is 1 (geometric mean), the oracle gains (20/10 * 11/10)^(1/4). */
  EXPECT(tf_find_cand(&t, "small", 0) == 1 && tf_find_cand(&t, "small", 4) == -1 && tf_find_cand(&t, "x", 0) == -1,
         "tf_find_cand");
  {
    static const double us4[8] = {10, 20, 20, 10, 10, 11, 30, 10};
    double f4[4 * ANYATTN_TREE_FEATURE_COUNT];
    char cfg4[2][32] = {"a", "b"};
    int sp4[2] = {0, 0};
    memset(f4, 0, sizeof f4);
    tf_table h;
    memset(&h, 0, sizeof h);
    h.num_cells = 4, h.num_cands = 2, h.features = f4, h.us = (double *)us4, h.cand_config = cfg4, h.cand_splits = sp4;
    static const int picks[3][4] = {{0, 1, 0, 1}, {1, 1, 1, 1}, {0, 1, 0, -1}};
    static const char *const want[3][2] = {
        {"4 of 4 cells (100.0%)", "(b/0): 1.218x geometric-mean speed-up (per-cell oracle 1.218x)"},
        {"2 of 4 cells (50.0%)", "(b/0): 1.000x geometric-mean speed-up (per-cell oracle 1.218x)"},
        {"3 of 3 cells (100.0%)", "1 cells pick a candidate this sweep did not time"}};
    for (int k = 0; k < 3; k++) {
      FILE *rf = tmpfile();
      char buf[1024] = "";
      if (rf) {
        tf_report_picks(&h, picks[k], rf);
        rewind(rf);
        buf[fread(buf, 1, sizeof buf - 1, rf)] = '\0';
        fclose(rf);
      }
      EXPECT(strstr(buf, want[k][0]) && strstr(buf, want[k][1]), "report %d: want '%s' and '%s', got: %s", k,
             want[k][0], want[k][1], buf);
    }
  }
  n = tf_fit(&t, 4, 1, nodes, 64);

  /* The JSON the tuner writes is what the library loads. */
  const char *path = "test_tree_fitted.json";
  char err[640] = "";
  EXPECT(tf_write_json(&t, nodes, n, "test_tree \"synthetic\" \\ sweep\n", 1, path, err, sizeof err) == 0,
         "write json: %s", err);
  EXPECT(anyattn_tree_load(path) == ANYATTN_STATUS_OK, "load: %s", anyattn_last_error());
  anyattn_tree_info li = tree_info("NVIDIA H200", "sm_90");
  EXPECT(li.source == ANYATTN_TREE_SOURCE_FILE && li.num_nodes == n && li.tuned == 1 &&
             !strcmp(li.provenance, "test_tree \"synthetic\" \\ sweep\n") && !strcmp(li.device, "Synthetic GPU"),
         "the loaded tree serves every device while loaded (source %d, %d nodes, '%s')", li.source, li.num_nodes,
         li.provenance);
  for (int i = 0; i < t.num_cells; i++) {
    const double *f = t.features + (size_t)i * ANYATTN_TREE_FEATURE_COUNT;
    const anyattn_tree_choice ch = tree_choice("NVIDIA H200", "sm_90", f);
    const char *fitted = names[tf_pick(nodes, f)];
    EXPECT(!strcmp(ch.config, fitted) && ch.splits == 0, "cell %d: loaded tree picks %s/%d, the fitted one %s/0", i,
           ch.config, ch.splits, fitted);
  }

  /* Bad files: a specific status and a message naming the file and the node
   * and field at fault; the loaded tree stays. */
  EXPECT(anyattn_tree_load("no/such/tree.json") == ANYATTN_STATUS_INVALID_OPTION &&
             strstr(anyattn_last_error(), "no/such/tree.json"),
         "missing file: %s", anyattn_last_error());
  write_text("test_tree_bad.json",
             "{\"device\": \"x\", \"nodes\": [{\"feature\": 2, \"threshold\": 1, \"left\": 0, \"right\": 9}]}");
  EXPECT(anyattn_tree_load("test_tree_bad.json") == ANYATTN_STATUS_INVALID_OPTION &&
             strstr(anyattn_last_error(), "test_tree_bad.json") && strstr(anyattn_last_error(), "node 0") &&
             strstr(anyattn_last_error(), "\"left\""),
         "malformed tree: %s", anyattn_last_error());
  write_text("test_tree_bad.json", "{\"device\": \"x\", \"nodes\": [{\"feature\": ");
  EXPECT(anyattn_tree_load("test_tree_bad.json") == ANYATTN_STATUS_INVALID_OPTION &&
             strstr(anyattn_last_error(), "not JSON"),
         "truncated file: %s", anyattn_last_error());
  write_text("test_tree_bad.json",
             "{\"nodes\": [{\"feature\": 0, \"threshold\": 1, \"left\": 1, \"right\": 1}, {\"config\": \"a\"}]}");
  EXPECT(anyattn_tree_load("test_tree_bad.json") == ANYATTN_STATUS_INVALID_OPTION &&
             strstr(anyattn_last_error(), "node 1: 2 nodes lead to it"),
         "shared child: %s", anyattn_last_error());
  write_text("test_tree_bad.json",
             "{\"nodes\": [{\"feature\": 0, \"threshold\": 1, \"left\": 1, \"right\": 2}, {\"config\": \"a\"}, "
             "{\"config\": \"b\"}, {\"config\": \"c\"}]}");
  EXPECT(anyattn_tree_load("test_tree_bad.json") == ANYATTN_STATUS_INVALID_OPTION &&
             strstr(anyattn_last_error(), "node 3: no node leads to it"),
         "unreachable node: %s", anyattn_last_error());
  li = tree_info("x", "y");
  EXPECT(li.source == ANYATTN_TREE_SOURCE_FILE && li.num_nodes == n, "a failed load keeps the loaded tree");

  /* Back to the compiled-in trees: exact name, then family, else none. */
  EXPECT(anyattn_tree_load(NULL) == ANYATTN_STATUS_OK, "unload");
  const anyattn_tree_info mi300 = tree_info("AMD Instinct MI300X", "gfx942");
  EXPECT(mi300.source == ANYATTN_TREE_SOURCE_COMPILED && !strcmp(mi300.family, "gfx942") && mi300.tuned == 0,
         "MI300 seed tree, marked untuned");
  const anyattn_tree_info fam = tree_info("Some other CDNA2 part", "gfx90a");
  EXPECT(fam.source == ANYATTN_TREE_SOURCE_COMPILED && !strcmp(fam.family, "gfx90a"), "family fallback");
  const anyattn_tree_info h200 = tree_info("NVIDIA H200", NULL);
  EXPECT(h200.source == ANYATTN_TREE_SOURCE_COMPILED && h200.tuned == 1 && !strcmp(h200.family, "sm_90"),
         "H200 tree by device name");
  EXPECT(tree_info("Unknown GPU", "sm_00").source == ANYATTN_TREE_SOURCE_NONE, "no tree: the backend's heuristic");
  const double feat[ANYATTN_TREE_FEATURE_COUNT] = {1, 1, 1, 1, 32768, 128, 4, 2};
  EXPECT(!strcmp(tree_choice("AMD Instinct MI300X", "gfx942", feat).config, "m16n32w2s1"),
         "long contexts take the 32-key tile on CDNA");
  EXPECT(!strcmp(tree_choice("Unknown GPU", "sm_00", feat).config, ""), "no tree: no config");

  for (int i = 0; i < aa_num_compiled_trees; i++) check_committed(aa_compiled_trees[i]);
  EXPECT(aa_num_compiled_trees >= 3, "%d compiled-in trees", aa_num_compiled_trees);
  check_misuse();
  check_shape_rule(&rng);
  check_mean_context(&rng);
  check_half_keys();
  check_weighted_criterion();
  { /* a 7-feature vector (callers built before kv_bytes) is a 16-bit cache's without the mean context, an
     * 8-feature one (before mean_kv) is one without the mean context */
    for (int i = 0; i < 50; i++) {
      double f[ANYATTN_TREE_FEATURE_COUNT] = {tl_rng_int(&rng, 1, 256), 0, 0, 0, tl_rng_int(&rng, 1, 65536), 128, 4, 2};
      f[ANYATTN_TREE_FEATURE_MAX_Q] = f[ANYATTN_TREE_FEATURE_MEAN_Q] = i % 2 ? 1 : tl_rng_int(&rng, 2, 4096);
      f[ANYATTN_TREE_FEATURE_NUM_TOKENS] = f[ANYATTN_TREE_FEATURE_NUM_SEQS] * f[ANYATTN_TREE_FEATURE_MEAN_Q];
      anyattn_tree_choice a, b, c;
      memset(&a, 0, sizeof a);
      memset(&b, 0, sizeof b);
      memset(&c, 0, sizeof c);
      a.struct_size = b.struct_size = c.struct_size = sizeof a;
      EXPECT(anyattn_tree_choose("NVIDIA H200", "sm_90", f, 7, &a) == ANYATTN_STATUS_OK &&
                 anyattn_tree_choose("NVIDIA H200", "sm_90", f, 8, &c) == ANYATTN_STATUS_OK &&
                 anyattn_tree_choose("NVIDIA H200", "sm_90", f, ANYATTN_TREE_FEATURE_COUNT, &b) == ANYATTN_STATUS_OK &&
                 !strcmp(a.config, b.config) && a.splits == b.splits && !strcmp(c.config, b.config) &&
                 c.splits == b.splits,
             "7 features pick %s/%d, 8 %s/%d, 9 with kv_bytes 2 and mean_kv 0 %s/%d (%s)", a.config, a.splits,
             c.config, c.splits, b.config, b.splits, anyattn_last_error());
    }
  }

  /* The writers check every write: a full device is an error naming the file. */
  FILE *full = fopen("/dev/full", "w");
  if (full) {
    fclose(full);
    EXPECT(tf_write_json(&t, nodes, n, "p", 1, "/dev/full", err, sizeof err) == -1 && strstr(err, "/dev/full"),
           "json to /dev/full: '%s'", err);
    EXPECT(tf_write_c(&t, nodes, n, "p", 1, "x", "/dev/full", err, sizeof err) == -1 && strstr(err, "/dev/full"),
           "C header to /dev/full: '%s'", err);
  }
  EXPECT(tf_write_c(&t, nodes, n, "p", 1, "Bad-Name", "test_tree_bad.h", err, sizeof err) == -1 &&
             strstr(err, "Bad-Name"),
         "C header with a bad identifier: '%s'", err);

  /* The CPU has one tiling and says so. */
  anyattn_context *ctx = NULL;
  char buf[256];
  EXPECT(anyattn_context_create(ANYATTN_BACKEND_CPU, 0, &ctx) == ANYATTN_STATUS_OK, "cpu context");
  EXPECT(anyattn_tree_describe(ctx, buf, sizeof buf) == ANYATTN_STATUS_OK && strstr(buf, "CPU"), "describe: %s",
         buf);
  EXPECT(anyattn_tree_describe(NULL, buf, sizeof buf) == ANYATTN_STATUS_NULL_POINTER, "describe(NULL)");
  anyattn_context_free(ctx);

  remove(path);
  remove("test_tree_bad.json");
  tf_free(&t);
  printf("test_tree: %s (%d failed checks)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
