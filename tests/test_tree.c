/* test_tree.c: the offline tree fitter (tools/tree_fit.c) and the library's
 * tree lookup, loading and evaluation (src/core/select.c), on a synthetic
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
    const double base = 10 + 1000 * tl_rng_uniform(&rng);
    for (int c = 0; c < 3; c++)
      t.us[(size_t)i * 3 + c] = c == best ? base : base * (1.2 + tl_rng_uniform(&rng));
    if (i % 17 == 5) t.us[(size_t)i * 3 + (best + 1) % 3] = INFINITY; /* a config that failed there */
  }
  tf_node nodes[64];
  int n = tf_fit(&t, 4, 1, nodes, 64);
  EXPECT(n > 0 && n <= 15, "fit returned %d nodes", n);
  int right = 0;
  for (int i = 0; i < t.num_cells; i++) right += tf_pick(nodes, t.features + (size_t)i * AA_F_COUNT) == truth(t.features + (size_t)i * AA_F_COUNT);
  EXPECT(right == t.num_cells, "tree picks the best config on %d of %d cells", right, t.num_cells);
  EXPECT(tf_fit(&t, 4, 1, nodes, 2) == -1, "a node budget too small is reported");

  /* Scoring given picks (anyattn fit --eval): the true best everywhere is 100%
   * and the oracle itself; a pick the sweep did not time is left out, and said. */
  EXPECT(tf_find_cand(&t, "small", 0) == 1 && tf_find_cand(&t, "small", 4) == -1 && tf_find_cand(&t, "x", 0) == -1,
         "tf_find_cand");
  {
    int pick[200];
    for (int i = 0; i < t.num_cells; i++) pick[i] = i == 7 ? -1 : truth(t.features + (size_t)i * AA_F_COUNT);
    FILE *rf = tmpfile();
    char buf[1024] = "";
    if (rf) {
      tf_report_picks(&t, pick, rf);
      rewind(rf);
      size_t got = fread(buf, 1, sizeof buf - 1, rf);
      buf[got] = '\0';
      fclose(rf);
    }
    EXPECT(strstr(buf, "199 of 199 cells (100.0%)") != NULL, "report of the best picks: %s", buf);
    EXPECT(strstr(buf, "1 cells pick a candidate this sweep did not time") != NULL, "unpicked cell reported: %s", buf);
    const char *sp = strstr(buf, "speed-up ("), *orc = strstr(buf, "oracle ");
    EXPECT(sp && orc && atof(strstr(buf, "): ") + 3) == atof(orc + 7), "tree of best picks equals the oracle: %s", buf);
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
    EXPECT(leaf && !strcmp(leaf->config, names[truth(f)]), "cell %d: loaded tree picks %s, best %s", i,
           leaf ? leaf->config : "(none)", names[truth(f)]);
  }

  /* Bad files: a specific status and a message naming the file; the loaded tree stays. */
  EXPECT(anyattn_tree_load("no/such/tree.json") == ANYATTN_STATUS_INVALID_OPTION &&
             strstr(anyattn_last_error(), "no/such/tree.json"),
         "missing file: %s", anyattn_last_error());
  FILE *f = fopen("test_tree_bad.json", "w");
  fprintf(f, "{\"device\": \"x\", \"nodes\": [{\"feature\": 2, \"threshold\": 1, \"left\": 0, \"right\": 9}]}");
  fclose(f);
  EXPECT(anyattn_tree_load("test_tree_bad.json") == ANYATTN_STATUS_INVALID_OPTION &&
             strstr(anyattn_last_error(), "malformed"),
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
