/* tree_fit.c: CART over the raw sweep `anyattn tune` writes. The split
 * criterion is the total time of the two children, each child timed with its
 * own best candidate: exactly the time the tree would cost on these cells. */
#define _POSIX_C_SOURCE 200809L
#include "tree_fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading the sweep ------------------------------------------------------ */
/* CSV columns: cell, then the AA_F_COUNT features, then config, splits, us, ok.
 * Lines starting with '#' carry "# key: value" metadata (device, family, ...). */
static int cand_index(tf_table *t, const char *config, int splits) {
  for (int c = 0; c < t->num_cands; c++)
    if (!strcmp(t->cand_config[c], config) && t->cand_splits[c] == splits) return c;
  t->cand_config = realloc(t->cand_config, (size_t)(t->num_cands + 1) * sizeof *t->cand_config);
  t->cand_splits = realloc(t->cand_splits, (size_t)(t->num_cands + 1) * sizeof *t->cand_splits);
  snprintf(t->cand_config[t->num_cands], sizeof t->cand_config[0], "%s", config);
  t->cand_splits[t->num_cands] = splits;
  return t->num_cands++;
}

static void meta(const char *line, const char *key, char *dst, size_t size) {
  size_t n = strlen(key);
  if (strncmp(line, key, n) != 0) return;
  size_t len = strcspn(line + n, "\r\n");
  if (len >= size) len = size - 1; /* metadata longer than the field is cut */
  memcpy(dst, line + n, len);
  dst[len] = '\0';
}

int tf_read_csv(const char *path, tf_table *t) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "anyattn: cannot read sweep '%s'\n", path);
    return -1;
  }
  /* Rows arrive cell by cell; candidates may differ per cell, so collect
   * (cell, cand, us) triples first and lay the matrix out at the end. */
  typedef struct {
    int cell, cand;
    double us;
  } triple;
  triple *rows = NULL;
  int num_rows = 0, cap = 0, max_cell = -1;
  double *feats = NULL;
  char line[1024];
  int lineno = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    if (line[0] == '#') {
      meta(line, "# device: ", t->device, sizeof t->device);
      meta(line, "# family: ", t->family, sizeof t->family);
      meta(line, "# date: ", t->date, sizeof t->date);
      meta(line, "# driver: ", t->driver, sizeof t->driver);
      continue;
    }
    if (!strncmp(line, "cell,", 5) || line[0] == '\n') continue; /* header */
    char *save = NULL, *tok = strtok_r(line, ",", &save);
    int cell = tok ? atoi(tok) : -1;
    double fv[AA_F_COUNT];
    int ok = cell >= 0;
    for (int i = 0; ok && i < AA_F_COUNT; i++) {
      tok = strtok_r(NULL, ",", &save);
      ok = tok != NULL;
      if (ok) fv[i] = strtod(tok, NULL);
    }
    char *config = ok ? strtok_r(NULL, ",", &save) : NULL;
    char *splits = config ? strtok_r(NULL, ",", &save) : NULL;
    char *us = splits ? strtok_r(NULL, ",", &save) : NULL;
    char *good = us ? strtok_r(NULL, ",\r\n", &save) : NULL;
    if (!good) {
      fprintf(stderr, "anyattn: %s:%d: not a sweep row\n", path, lineno);
      free(rows);
      free(feats);
      fclose(f);
      tf_free(t);
      return -1;
    }
    if (cell > max_cell) {
      feats = realloc(feats, (size_t)(cell + 1) * AA_F_COUNT * sizeof *feats);
      for (int c = max_cell + 1; c <= cell; c++)
        for (int i = 0; i < AA_F_COUNT; i++) feats[(size_t)c * AA_F_COUNT + i] = NAN;
      max_cell = cell;
    }
    memcpy(feats + (size_t)cell * AA_F_COUNT, fv, sizeof fv);
    if (num_rows == cap) {
      cap = cap ? 2 * cap : 256;
      rows = realloc(rows, (size_t)cap * sizeof *rows);
    }
    rows[num_rows].cell = cell;
    rows[num_rows].cand = cand_index(t, config, atoi(splits));
    rows[num_rows].us = atoi(good) == 1 ? strtod(us, NULL) : INFINITY;
    num_rows++;
  }
  fclose(f);
  if (max_cell < 0 || t->num_cands == 0) {
    fprintf(stderr, "anyattn: sweep '%s' has no rows\n", path);
    free(rows);
    free(feats);
    tf_free(t);
    return -1;
  }
  t->num_cells = max_cell + 1;
  t->features = feats;
  t->us = malloc((size_t)t->num_cells * t->num_cands * sizeof *t->us);
  for (size_t i = 0; i < (size_t)t->num_cells * t->num_cands; i++) t->us[i] = INFINITY;
  for (int r = 0; r < num_rows; r++) t->us[(size_t)rows[r].cell * t->num_cands + rows[r].cand] = rows[r].us;
  free(rows);
  return 0;
}

void tf_free(tf_table *t) {
  free(t->features);
  free(t->us);
  free(t->cand_config);
  free(t->cand_splits);
  memset(t, 0, sizeof *t);
}

/* ---- fitting ------------------------------------------------------------------ */
typedef struct {
  const tf_table *t;
  tf_node *nodes;
  int n, max_nodes, max_depth, min_leaf;
  double *sum_l, *sum_r; /* scratch [num_cands] */
  int *inf_l, *inf_r;
} tf_ctx;

/* Best candidate over cells idx[0..n) and its total time (INFINITY when every
 * candidate fails somewhere in the leaf). */
static double leaf_best(const tf_table *t, const int *idx, int n, int *best) {
  double best_cost = INFINITY;
  *best = 0;
  for (int c = 0; c < t->num_cands; c++) {
    double s = 0;
    for (int i = 0; i < n && s < INFINITY; i++) s += t->us[(size_t)idx[i] * t->num_cands + c];
    if (s < best_cost) best_cost = s, *best = c;
  }
  return best_cost;
}

static const tf_table *sort_t;
static int sort_f;
static int by_feature(const void *a, const void *b) {
  double x = sort_t->features[(size_t)*(const int *)a * AA_F_COUNT + sort_f];
  double y = sort_t->features[(size_t)*(const int *)b * AA_F_COUNT + sort_f];
  return (x > y) - (x < y);
}

static double min_over(const double *sum, const int *inf, int k) {
  double m = INFINITY;
  for (int c = 0; c < k; c++)
    if (!inf[c] && sum[c] < m) m = sum[c];
  return m;
}

static int grow(tf_ctx *x, int *idx, int n, int depth) {
  const tf_table *t = x->t;
  if (x->n >= x->max_nodes) return -1;
  const int me = x->n++;
  tf_node *node = &x->nodes[me];
  int best_cand;
  const double leaf_cost = leaf_best(t, idx, n, &best_cand);
  node->feature = -1;
  node->threshold = 0;
  node->left = node->right = -1;
  node->cand = best_cand;
  if (depth >= x->max_depth || n < 2 * x->min_leaf) return me;

  double best_cost = leaf_cost;
  int best_f = -1;
  double best_thr = 0;
  const int k = t->num_cands;
  for (int f = 0; f < AA_F_COUNT; f++) {
    sort_t = t;
    sort_f = f;
    qsort(idx, (size_t)n, sizeof *idx, by_feature);
    for (int c = 0; c < k; c++) {
      x->sum_l[c] = 0, x->inf_l[c] = 0, x->sum_r[c] = 0, x->inf_r[c] = 0;
      for (int i = 0; i < n; i++) {
        double u = t->us[(size_t)idx[i] * k + c];
        if (isinf(u)) x->inf_r[c]++;
        else x->sum_r[c] += u;
      }
    }
    for (int i = 0; i + 1 < n; i++) { /* move cell i to the left side */
      for (int c = 0; c < k; c++) {
        double u = t->us[(size_t)idx[i] * k + c];
        if (isinf(u)) x->inf_l[c]++, x->inf_r[c]--;
        else x->sum_l[c] += u, x->sum_r[c] -= u;
      }
      double a = t->features[(size_t)idx[i] * AA_F_COUNT + f];
      double b = t->features[(size_t)idx[i + 1] * AA_F_COUNT + f];
      if (a == b || i + 1 < x->min_leaf || n - i - 1 < x->min_leaf) continue;
      double cost = min_over(x->sum_l, x->inf_l, k) + min_over(x->sum_r, x->inf_r, k);
      if (cost < best_cost * (1.0 - 1e-9)) best_cost = cost, best_f = f, best_thr = 0.5 * (a + b);
    }
  }
  if (best_f < 0) return me;
  /* Partition idx by the chosen threshold and grow both sides. */
  int nl = 0;
  for (int i = 0; i < n; i++)
    if (t->features[(size_t)idx[i] * AA_F_COUNT + best_f] <= best_thr) {
      int tmp = idx[nl];
      idx[nl++] = idx[i];
      idx[i] = tmp;
    }
  int l = grow(x, idx, nl, depth + 1);
  if (l < 0) return -1;
  int r = grow(x, idx + nl, n - nl, depth + 1);
  if (r < 0) return -1;
  node = &x->nodes[me]; /* (the array does not move, but keep the pointer honest) */
  node->feature = best_f;
  node->threshold = best_thr;
  node->left = l;
  node->right = r;
  return me;
}

int tf_fit(const tf_table *t, int max_depth, int min_leaf, tf_node *nodes, int max_nodes) {
  tf_ctx x = {t, nodes, 0, max_nodes, max_depth, min_leaf < 1 ? 1 : min_leaf, NULL, NULL, NULL, NULL};
  int *idx = malloc((size_t)t->num_cells * sizeof *idx);
  int cells = 0;
  for (int i = 0; i < t->num_cells; i++)
    if (!isnan(t->features[(size_t)i * AA_F_COUNT])) idx[cells++] = i; /* cells the sweep skipped */
  x.sum_l = calloc((size_t)t->num_cands, sizeof(double));
  x.sum_r = calloc((size_t)t->num_cands, sizeof(double));
  x.inf_l = calloc((size_t)t->num_cands, sizeof(int));
  x.inf_r = calloc((size_t)t->num_cands, sizeof(int));
  int root = cells > 0 ? grow(&x, idx, cells, 0) : -1;
  free(idx);
  free(x.sum_l);
  free(x.sum_r);
  free(x.inf_l);
  free(x.inf_r);
  return root < 0 ? -1 : x.n;
}

int tf_pick(const tf_node *nodes, const double *features) {
  int i = 0;
  while (nodes[i].feature >= 0) i = features[nodes[i].feature] <= nodes[i].threshold ? nodes[i].left : nodes[i].right;
  return nodes[i].cand;
}

int tf_find_cand(const tf_table *t, const char *config, int splits) {
  for (int c = 0; c < t->num_cands; c++)
    if (!strcmp(t->cand_config[c], config) && t->cand_splits[c] == splits) return c;
  return -1;
}

void tf_report_picks(const tf_table *t, const int *pick, FILE *out) {
  const int k = t->num_cands;
  int cells = 0, within = 0, unpicked = 0;
  /* The best single fixed candidate: lowest geometric mean over the cells it runs on all of. */
  int fixed = -1;
  double fixed_lg = INFINITY;
  for (int c = 0; c < k; c++) {
    double lg = 0;
    for (int i = 0; i < t->num_cells && lg < INFINITY; i++)
      if (!isnan(t->features[(size_t)i * AA_F_COUNT])) lg += log(t->us[(size_t)i * k + c]);
    if (lg < fixed_lg) fixed_lg = lg, fixed = c;
  }
  double lg_gain = 0, lg_oracle = 0;
  for (int i = 0; i < t->num_cells; i++) {
    const double *f = t->features + (size_t)i * AA_F_COUNT;
    if (isnan(f[0])) continue;
    double best = INFINITY;
    for (int c = 0; c < k; c++) best = fmin(best, t->us[(size_t)i * k + c]);
    if (pick[i] < 0) { /* the tree named a candidate the sweep did not time */
      unpicked++;
      continue;
    }
    double mine = t->us[(size_t)i * k + pick[i]];
    cells++;
    within += mine <= 1.05 * best;
    if (fixed >= 0) lg_gain += log(t->us[(size_t)i * k + fixed] / mine), lg_oracle += log(t->us[(size_t)i * k + fixed] / best);
  }
  fprintf(out, "tree: %d of %d cells (%.1f%%) within 5%% of their best candidate\n", within, cells,
          cells ? 100.0 * within / cells : 0.0);
  if (unpicked) fprintf(out, "tree: %d cells pick a candidate this sweep did not time (left out)\n", unpicked);
  if (fixed >= 0)
    fprintf(out, "tree vs best single fixed candidate (%s/%d): %.3fx geometric-mean speed-up (per-cell oracle %.3fx)\n",
            t->cand_config[fixed], t->cand_splits[fixed], exp(lg_gain / (cells ? cells : 1)),
            exp(lg_oracle / (cells ? cells : 1)));
  else
    fprintf(out, "no single candidate runs on every cell\n");
}

void tf_report(const tf_table *t, const tf_node *nodes, FILE *out) {
  int *pick = (int *)malloc(sizeof(int) * (size_t)(t->num_cells > 0 ? t->num_cells : 1));
  if (!pick) return;
  for (int i = 0; i < t->num_cells; i++) pick[i] = tf_pick(nodes, t->features + (size_t)i * AA_F_COUNT);
  tf_report_picks(t, pick, out);
  free(pick);
}

/* ---- writing ------------------------------------------------------------------------ */
static void legend(FILE *f, const char *prefix) {
  fprintf(f, "%sfeatures (src/choose/tree.h):", prefix);
  for (int i = 0; i < AA_F_COUNT; i++) fprintf(f, " %d=%s", i, anyattn_tree_feature_name(i));
  fprintf(f, "\n%sinner node: go left when features[feature] <= threshold; leaf: config and KV splits (0: backend decides)\n",
          prefix);
}

int tf_write_json(const tf_table *t, const tf_node *nodes, int n, const char *provenance, int tuned,
                  const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "anyattn: cannot write '%s'\n", path);
    return -1;
  }
  fprintf(f, "{\n  \"device\": \"%s\",\n  \"family\": \"%s\",\n  \"tuned\": %d,\n  \"provenance\": \"%s\",\n",
          t->device, t->family, tuned, provenance);
  fprintf(f, "  \"legend\": \"");
  for (int i = 0; i < AA_F_COUNT; i++) fprintf(f, "%s%d=%s", i ? " " : "features ", i, anyattn_tree_feature_name(i));
  fprintf(f, "; inner: left when features[feature] <= threshold; leaf: config, splits\",\n  \"nodes\": [\n");
  for (int i = 0; i < n; i++) {
    const tf_node *x = &nodes[i];
    if (x->feature >= 0)
      fprintf(f, "    {\"feature\": %d, \"threshold\": %.17g, \"left\": %d, \"right\": %d}", x->feature, x->threshold,
              x->left, x->right);
    else
      fprintf(f, "    {\"config\": \"%s\", \"splits\": %d}", t->cand_config[x->cand], t->cand_splits[x->cand]);
    fprintf(f, "%s\n", i + 1 < n ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  return fclose(f) == 0 ? 0 : -1;
}

int tf_write_c(const tf_table *t, const tf_node *nodes, int n, const char *provenance, int tuned,
               const char *name, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "anyattn: cannot write '%s'\n", path);
    return -1;
  }
  fprintf(f, "/* tree_%s.h: decision tree for %s (%s), written by `anyattn tune`.\n", name, t->device, t->family);
  fprintf(f, " * %s\n", provenance);
  legend(f, " * ");
  fprintf(f, " * Included by src/choose/trees/trees.c. */\n");
  fprintf(f, "static const aa_tree_node aa_tree_%s_nodes[] = {\n", name);
  for (int i = 0; i < n; i++) {
    const tf_node *x = &nodes[i];
    if (x->feature >= 0)
      fprintf(f, "    {%d, %.17g, %d, %d, NULL, 0}, /* %s */\n", x->feature, x->threshold, x->left, x->right,
              anyattn_tree_feature_name(x->feature));
    else
      fprintf(f, "    {-1, 0, -1, -1, \"%s\", %d},\n", t->cand_config[x->cand], t->cand_splits[x->cand]);
  }
  fprintf(f, "};\nstatic const aa_tree aa_tree_%s = {\"%s\", \"%s\", \"%s\", %d, %d, aa_tree_%s_nodes};\n", name,
          t->device, t->family, provenance, tuned, n, name);
  return fclose(f) == 0 ? 0 : -1;
}
