/* test_tree.c: the offline tree fitter (tools/tree_fit.c) and the library's
 * tree lookup, loading and evaluation (src/choose/select.c), on a synthetic
 * sweep whose best config is known per cell. Seed printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anyattn.h"
#include "tl_util.h"
#include "tree.h"
#include "tree_fit.h"

/* Library internals under test (hidden from the shared library, linked statically). */
const aa_tree_node *aa_tree_eval(const aa_tree *t, const double *features);
const aa_tree *aa_tree_for(const char *device_name, const char *family);

/* The rows the committed trees may name: each vendor's ship rows of the one
 * config table (src/choose/configs.h), as the library builds compile them. */
#define AA_NAME_(name, bm, bn, w, s) #name,
#include "configs.h"
static const char *const cuda_configs[] = {ANYATTN_GPU_CONFIGS_NVIDIA(AA_NAME_)};
static const char *const amd_configs[] = {ANYATTN_GPU_CONFIGS_CDNA(AA_NAME_)};

static int failures;
#define EXPECT(cond, ...)                                  \
  do {                                                     \
    if (!(cond)) {                                         \
      failures++;                                          \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
      printf(__VA_ARGS__);                                 \
      printf("\n");                                        \
    }                                                      \
  } while (0)

/* A committed tree is well formed and names only rows of its table: children
 * after their parent and inside the node array, features known, leaves a
 * config of `names` with a split count plan accepts (0: the backend decides). */
static void check_committed(const aa_tree *t, const char *what, const char *const *names, int n) {
  EXPECT(t && t->num_nodes > 0 && t->nodes, "%s: compiled in", what);
  if (!t) return;
  for (int i = 0; i < t->num_nodes; i++) {
    const aa_tree_node *d = &t->nodes[i];
    if (d->feature >= 0) {
      EXPECT(d->feature < AA_F_COUNT && d->left > i && d->left < t->num_nodes && d->right > i &&
                 d->right < t->num_nodes,
             "%s: node %d (feature %d, children %d, %d) malformed", what, i, d->feature, d->left, d->right);
      continue;
    }
    int known = 0;
    for (int k = 0; k < n && d->config; k++) known |= !strcmp(d->config, names[k]);
    EXPECT(known, "%s: leaf %d names '%s', not a row of its config table", what, i, d->config ? d->config : "(null)");
    EXPECT(d->splits >= 0 && d->splits <= 128, "%s: leaf %d has %d splits", what, i, d->splits);
  }
}

/* The truth the sweep is built from: decode-like cells want "dec", short
 * prompts "small", long ones "large". */
static int truth(const double *f) {
  if (f[AA_F_MEAN_Q] <= 8) return 0;
  return f[AA_F_MAX_KV] <= 2048 ? 1 : 2;
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
  t.features = calloc((size_t)t.num_cells * AA_F_COUNT, sizeof(double));
  t.us = calloc((size_t)t.num_cells * t.num_cands, sizeof(double));
  t.cand_config = calloc(3, sizeof *t.cand_config);
  t.cand_splits = calloc(3, sizeof(int));
  snprintf(t.device, sizeof t.device, "Synthetic GPU");
  snprintf(t.family, sizeof t.family, "sm_00");
  for (int c = 0; c < 3; c++) snprintf(t.cand_config[c], sizeof t.cand_config[c], "%s", names[c]);
  for (int i = 0; i < t.num_cells; i++) {
    double *f = t.features + (size_t)i * AA_F_COUNT;
    f[AA_F_NUM_SEQS] = tl_rng_int(&rng, 1, 128);
    f[AA_F_MEAN_Q] = tl_rng_uniform(&rng) < 0.4 ? 1 : tl_rng_int(&rng, 9, 4096);
    f[AA_F_NUM_TOKENS] = f[AA_F_NUM_SEQS] * f[AA_F_MEAN_Q];
    f[AA_F_MAX_Q] = f[AA_F_MEAN_Q];
    f[AA_F_MAX_KV] = tl_rng_int(&rng, 16, 16384);
    f[AA_F_HEAD_DIM] = 128;
    f[AA_F_GROUP] = 4;
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
   * one of its cells, and the tree's total time stays near the per-cell best. It is greedy and depth-limited, and a failed candidate rules a
   * leaf out, so it finds the rule on most cells, not all (over 2,000 seeds:
   * at worst 160 of 200, typically all). */
  int right = 0, failed_pick = 0;
  double tree_us = 0, oracle_us = 0;
  for (int i = 0; i < t.num_cells; i++) {
    const double *f = t.features + (size_t)i * AA_F_COUNT;
    const int c = tf_pick(nodes, f);
    right += c == truth(f);
    failed_pick += isinf(t.us[(size_t)i * 3 + c]);
    tree_us += t.us[(size_t)i * 3 + c];
    oracle_us += t.us[(size_t)i * 3 + truth(f)];
  }
  EXPECT(failed_pick == 0, "tree picks a failed candidate on %d cells", failed_pick);
  EXPECT(tree_us <= 1.2 * oracle_us, "tree total %.0f us, the per-cell best %.0f us", tree_us, oracle_us);
  EXPECT(right >= t.num_cells * 3 / 4, "tree picks the best config on %d of %d cells", right, t.num_cells);
  EXPECT(tf_fit(&t, 4, 1, nodes, 2) == -1, "a node budget too small is reported");

  /* Scoring given picks (anyattn fit --eval), on a 4-cell, 2-candidate table
   * worked by hand: times {10, 20}, {20, 10}, {10, 11}, {30, 10}; the best
   * fixed candidate is 1 (geometric mean), the oracle gains (20/10 * 11/10)^(1/4). */
  EXPECT(tf_find_cand(&t, "small", 0) == 1 && tf_find_cand(&t, "small", 4) == -1 && tf_find_cand(&t, "x", 0) == -1,
         "tf_find_cand");
  {
    static const double us4[8] = {10, 20, 20, 10, 10, 11, 30, 10};
    double f4[4 * AA_F_COUNT];
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
  EXPECT(tf_write_json(&t, nodes, n, "test_tree synthetic sweep", 1, path) == 0, "write json");
  EXPECT(anyattn_tree_load(path) == ANYATTN_STATUS_OK, "load: %s", anyattn_last_error());
  const aa_tree *lt = aa_tree_for("NVIDIA H200", "sm_90");
  EXPECT(lt != NULL && lt->num_nodes == n && lt->tuned == 1, "loaded tree serves every device while loaded");
  for (int i = 0; lt && i < t.num_cells; i++) {
    const double *f = t.features + (size_t)i * AA_F_COUNT;
    const aa_tree_node *leaf = aa_tree_eval(lt, f);
    const char *fitted = names[tf_pick(nodes, f)];
    EXPECT(leaf && !strcmp(leaf->config, fitted), "cell %d: loaded tree picks %s, the fitted one %s", i,
           leaf ? leaf->config : "(none)", fitted);
  }

  /* Bad files: a specific status and a message naming the file; the loaded tree stays. */
  EXPECT(anyattn_tree_load("no/such/tree.json") == ANYATTN_STATUS_INVALID_OPTION &&
             strstr(anyattn_last_error(), "no/such/tree.json"),
         "missing file: %s", anyattn_last_error());
  FILE *f = fopen("test_tree_bad.json", "w");
  fprintf(f, "{\"device\": \"x\", \"nodes\": [{\"feature\": 2, \"threshold\": 1, \"left\": 0, \"right\": 9}]}");
  fclose(f);
  EXPECT(anyattn_tree_load("test_tree_bad.json") == ANYATTN_STATUS_INVALID_OPTION &&
             strstr(anyattn_last_error(), "node 0"),
         "malformed tree: %s", anyattn_last_error());
  f = fopen("test_tree_bad.json", "w");
  fprintf(f, "{\"device\": \"x\", \"nodes\": [{\"feature\": ");
  fclose(f);
  EXPECT(anyattn_tree_load("test_tree_bad.json") == ANYATTN_STATUS_INVALID_OPTION, "truncated file");
  EXPECT(aa_tree_for("x", "y") == lt, "a failed load keeps the loaded tree");

  /* Back to the compiled-in trees: exact name, then family, else none. */
  EXPECT(anyattn_tree_load(NULL) == ANYATTN_STATUS_OK, "unload");
  const aa_tree *mi300 = aa_tree_for("AMD Instinct MI300X", "gfx942");
  EXPECT(mi300 && !strcmp(mi300->family, "gfx942") && mi300->tuned == 0, "MI300 seed tree, marked untuned");
  const aa_tree *fam = aa_tree_for("Some other CDNA2 part", "gfx90a");
  EXPECT(fam && !strcmp(fam->family, "gfx90a"), "family fallback");
  EXPECT(aa_tree_for("Unknown GPU", "sm_00") == NULL, "no tree: the backend's heuristic");
  double feat[AA_F_COUNT] = {1, 1, 1, 1, 32768, 128, 4};
  const aa_tree_node *leaf = mi300 ? aa_tree_eval(mi300, feat) : NULL;
  EXPECT(leaf && !strcmp(leaf->config, "m16n32w2s1"), "long contexts take the 32-key tile on CDNA");

  check_committed(aa_tree_for("NVIDIA H200", "sm_90"), "H200 tree", cuda_configs,
                  (int)(sizeof cuda_configs / sizeof cuda_configs[0]));
  check_committed(mi300, "MI300 seed tree", amd_configs, (int)(sizeof amd_configs / sizeof amd_configs[0]));
  check_committed(fam, "MI250 seed tree", amd_configs, (int)(sizeof amd_configs / sizeof amd_configs[0]));

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
