/* tree_fit.c: CART over the sweep `anyattn tune` writes (read by
 * sweep_csv.c), its report, and the tree's JSON and C forms. The split
 * criterion is the weighted total time of the two children, each child timed
 * with its own best candidate, a cell's times divided by the square root of
 * its best time (cell_weights): between the tree's total time on these cells,
 * where the largest cells decide every split, and the sum of each cell's
 * slowdown, where a 10 us batch counts as much as a 10 ms one
 * (docs/design/tuning.md, The criterion). */
#define _POSIX_C_SOURCE 200809L
#include "tree_fit.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define NF ANYATTN_TREE_FEATURE_COUNT

/* ---- fitting ------------------------------------------------------------------ */
typedef struct {
  const tf_table *t;
  const double *cost; /* [num_cells][num_cands]: t->us weighted per cell (cell_weights) */
  tf_node *nodes;
  int n, max_nodes, max_depth, min_leaf;
  double *sum_l, *sum_r; /* scratch [num_cands] */
  int *inf_l, *inf_r;
  int unsplit; /* leaves a split would still improve when max_nodes stopped growth */
} tf_ctx;

/* Best candidate over cells idx[0..n) and its weighted total time (INFINITY
 * when every candidate fails somewhere in the leaf). */
static double leaf_best(const tf_ctx *x, const int *idx, int n, int *best) {
  const int k = x->t->num_cands;
  double best_cost = INFINITY;
  *best = 0;
  for (int c = 0; c < k; c++) {
    double s = 0;
    for (int i = 0; i < n && s < INFINITY; i++) s += x->cost[(size_t)idx[i] * k + c];
    if (s < best_cost) best_cost = s, *best = c;
  }
  return best_cost;
}

static const tf_table *sort_t;
static int sort_f;
static int by_feature(const void *a, const void *b) {
  double x = sort_t->features[(size_t)*(const int *)a * NF + sort_f];
  double y = sort_t->features[(size_t)*(const int *)b * NF + sort_f];
  return (x > y) - (x < y);
}

static double min_over(const double *sum, const int *inf, int k) {
  double m = INFINITY;
  for (int c = 0; c < k; c++)
    if (!inf[c] && sum[c] < m) m = sum[c];
  return m;
}

/* Shape features (head dim, group, kv_bytes) stay fixed within one sweep, so
 * a sweep of another shape covers only the cells it was run on (tune --grid
 * decode: the decode cells). A node splits on a shape feature only where each
 * side holds every batch of the node: for every cell, a cell on the other
 * side equal in all features but the shape. Then no batch of a shape swept
 * only in part (a prefill over an fp8 cache) reaches a leaf fitted on cells
 * unlike it. */
static int is_shape_feature(int f) {
  return f == ANYATTN_TREE_FEATURE_HEAD_DIM || f == ANYATTN_TREE_FEATURE_GROUP || f == ANYATTN_TREE_FEATURE_KV_BYTES;
}

static int twins_across(const tf_table *t, const int *idx, int n, int f, double thr) {
  for (int i = 0; i < n; i++) {
    const double *a = t->features + (size_t)idx[i] * NF;
    const int left = a[f] <= thr;
    int found = 0;
    for (int j = 0; j < n && !found; j++) {
      const double *b = t->features + (size_t)idx[j] * NF;
      if ((b[f] <= thr) == left) continue;
      found = 1;
      for (int g = 0; g < NF && found; g++) found = is_shape_feature(g) || a[g] == b[g];
    }
    if (!found) return 0;
  }
  return 1;
}

/* The best split of cells idx[0..n): *feature (-1: none saves time),
 * *threshold, and the total time of the two sides; returns the time of the
 * cells as one leaf, whose candidate goes to *leaf_cand. Reorders idx. */
static double best_split(tf_ctx *x, int *idx, int n, int depth, int *leaf_cand, int *feature, double *threshold,
                         double *split_cost) {
  const tf_table *t = x->t;
  const double leaf_cost = leaf_best(x, idx, n, leaf_cand);
  *feature = -1;
  *threshold = 0;
  *split_cost = leaf_cost;
  if (depth >= x->max_depth || n < 2 * x->min_leaf) return leaf_cost;
  double best_cost = leaf_cost;
  const int k = t->num_cands;
  for (int f = 0; f < NF; f++) {
    sort_t = t;
    sort_f = f;
    qsort(idx, (size_t)n, sizeof *idx, by_feature);
    for (int c = 0; c < k; c++) {
      x->sum_l[c] = 0, x->inf_l[c] = 0, x->sum_r[c] = 0, x->inf_r[c] = 0;
      for (int i = 0; i < n; i++) {
        double u = x->cost[(size_t)idx[i] * k + c];
        if (isinf(u)) x->inf_r[c]++;
        else x->sum_r[c] += u;
      }
    }
    for (int i = 0; i + 1 < n; i++) { /* move cell i to the left side */
      for (int c = 0; c < k; c++) {
        double u = x->cost[(size_t)idx[i] * k + c];
        if (isinf(u)) x->inf_l[c]++, x->inf_r[c]--;
        else x->sum_l[c] += u, x->sum_r[c] -= u;
      }
      double a = t->features[(size_t)idx[i] * NF + f];
      double b = t->features[(size_t)idx[i + 1] * NF + f];
      if (a == b || i + 1 < x->min_leaf || n - i - 1 < x->min_leaf) continue;
      double cost = min_over(x->sum_l, x->inf_l, k) + min_over(x->sum_r, x->inf_r, k);
      if (cost < best_cost * (1.0 - 1e-9) && (!is_shape_feature(f) || twins_across(t, idx, n, f, 0.5 * (a + b))))
        best_cost = cost, *feature = f, *threshold = 0.5 * (a + b);
    }
  }
  *split_cost = best_cost;
  return leaf_cost;
}

/* A leaf that may still split: its cells idx[from, from + n) and its best split. */
typedef struct {
  int node, from, n, depth, feature;
  double threshold, gain;
} open_leaf;

/* Appends node x->n, a leaf over idx[from, from + n), and queues it in open
 * when a split would improve it. */
static void new_leaf(tf_ctx *x, open_leaf *open, int *num_open, int *idx, int from, int n, int depth) {
  tf_node *nd = &x->nodes[x->n];
  int feature;
  double threshold, split_cost;
  const double leaf_cost = best_split(x, idx + from, n, depth, &nd->cand, &feature, &threshold, &split_cost);
  nd->feature = -1;
  nd->threshold = 0;
  nd->left = nd->right = -1;
  if (feature >= 0) open[(*num_open)++] = (open_leaf){x->n, from, n, depth, feature, threshold, leaf_cost - split_cost};
  x->n++;
}

/* Grows best-first: of the leaves a split would improve, the one whose split
 * saves the most weighted time splits next (ties: the earlier node), until none
 * remains or a split would pass max_nodes. Without that bound the tree is the
 * one depth-first growth gives (each leaf's split depends on its cells only),
 * numbered otherwise; with it, the splits left out are the ones worth least.
 * Children always follow their parent. */
static int grow_best_first(tf_ctx *x, int *idx, int cells) {
  const tf_table *t = x->t;
  /* every queued leaf is a node, so max_nodes bounds the queue */
  open_leaf *open = malloc(sizeof *open * (size_t)x->max_nodes);
  if (!open) return -2;
  int num_open = 0;
  x->n = 0;
  new_leaf(x, open, &num_open, idx, 0, cells, 0);
  while (num_open > 0 && x->n + 2 <= x->max_nodes) {
    int b = 0;
    for (int i = 1; i < num_open; i++)
      if (open[i].gain > open[b].gain || (open[i].gain == open[b].gain && open[i].node < open[b].node)) b = i;
    const open_leaf o = open[b];
    open[b] = open[--num_open];
    int *part = idx + o.from, nl = 0;
    for (int i = 0; i < o.n; i++)
      if (t->features[(size_t)part[i] * NF + o.feature] <= o.threshold) {
        int tmp = part[nl];
        part[nl++] = part[i];
        part[i] = tmp;
      }
    x->nodes[o.node].feature = o.feature;
    x->nodes[o.node].threshold = o.threshold;
    x->nodes[o.node].left = x->n;
    new_leaf(x, open, &num_open, idx, o.from, nl, o.depth + 1);
    x->nodes[o.node].right = x->n;
    new_leaf(x, open, &num_open, idx, o.from + nl, o.n - nl, o.depth + 1);
  }
  x->unsplit = num_open;
  free(open);
  return x->n;
}

/* The fitter's times: each cell's row of t->us divided by the square root of
 * its best finite time (a cell with none keeps its row, all INFINITY). The
 * weight is the cell's own, so candidates compare within a cell as before. */
static double *cell_weights(const tf_table *t) {
  const size_t k = (size_t)t->num_cands;
  double *w = malloc((size_t)(t->num_cells > 0 ? t->num_cells : 1) * (k > 0 ? k : 1) * sizeof *w);
  if (!w) return NULL;
  for (size_t i = 0; i < (size_t)t->num_cells; i++) {
    double best = INFINITY;
    for (size_t c = 0; c < k; c++) best = fmin(best, t->us[i * k + c]);
    const double scale = isfinite(best) && best > 0 ? 1.0 / sqrt(best) : 1.0;
    for (size_t c = 0; c < k; c++) w[i * k + c] = t->us[i * k + c] * scale;
  }
  return w;
}

int tf_fit_ex(const tf_table *t, int max_depth, int min_leaf, tf_node *nodes, int max_nodes, int *unsplit) {
  tf_ctx x = {t, NULL, nodes, 0, max_nodes, max_depth, min_leaf < 1 ? 1 : min_leaf, NULL, NULL, NULL, NULL, 0};
  const size_t k = (size_t)(t->num_cands > 0 ? t->num_cands : 1);
  int *idx = malloc((size_t)(t->num_cells > 0 ? t->num_cells : 1) * sizeof *idx);
  double *cost = cell_weights(t);
  x.cost = cost;
  x.sum_l = calloc(k, sizeof(double));
  x.sum_r = calloc(k, sizeof(double));
  x.inf_l = calloc(k, sizeof(int));
  x.inf_r = calloc(k, sizeof(int));
  int rc = -2;
  if (unsplit) *unsplit = 0;
  if (max_nodes < 1) {
    rc = -1;
  } else if (idx && cost && x.sum_l && x.sum_r && x.inf_l && x.inf_r) {
    int cells = 0;
    for (int i = 0; i < t->num_cells; i++)
      if (!isnan(t->features[(size_t)i * NF])) idx[cells++] = i; /* cells the sweep skipped */
    rc = cells > 0 ? grow_best_first(&x, idx, cells) : -1;
    if (unsplit && rc > 0) *unsplit = x.unsplit;
  }
  free(idx);
  free(cost);
  free(x.sum_l);
  free(x.sum_r);
  free(x.inf_l);
  free(x.inf_r);
  return rc;
}

int tf_fit(const tf_table *t, int max_depth, int min_leaf, tf_node *nodes, int max_nodes) {
  return tf_fit_ex(t, max_depth, min_leaf, nodes, max_nodes, NULL);
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
  int part_cells[2] = {0, 0}, part_within[2] = {0, 0}; /* with, without the mean context */
  /* The best single fixed candidate: lowest geometric mean over the cells it runs on all of. */
  int fixed = -1;
  double fixed_lg = INFINITY;
  for (int c = 0; c < k; c++) {
    double lg = 0;
    for (int i = 0; i < t->num_cells && lg < INFINITY; i++)
      if (!isnan(t->features[(size_t)i * NF])) lg += log(t->us[(size_t)i * k + c]);
    if (lg < fixed_lg) fixed_lg = lg, fixed = c;
  }
  double lg_gain = 0, lg_oracle = 0;
  for (int i = 0; i < t->num_cells; i++) {
    const double *f = t->features + (size_t)i * NF;
    if (isnan(f[0])) continue;
    double best = INFINITY;
    for (int c = 0; c < k; c++) best = fmin(best, t->us[(size_t)i * k + c]);
    if (pick[i] < 0) { /* the tree named a candidate the sweep did not time */
      unpicked++;
      continue;
    }
    double mine = t->us[(size_t)i * k + pick[i]];
    const int part = t->num_swept > 0 && i >= t->num_swept;
    cells++;
    within += mine <= 1.05 * best;
    part_cells[part]++;
    part_within[part] += mine <= 1.05 * best;
    if (fixed >= 0) lg_gain += log(t->us[(size_t)i * k + fixed] / mine), lg_oracle += log(t->us[(size_t)i * k + fixed] / best);
  }
  fprintf(out, "tree: %d of %d cells (%.1f%%) within 5%% of their best candidate\n", within, cells,
          cells ? 100.0 * within / cells : 0.0);
  if (part_cells[0] && part_cells[1])
    fprintf(out,
            "tree: with the mean context (sum_kv_len hint) %d of %d (%.1f%%), without it %d of %d (%.1f%%)\n",
            part_within[0], part_cells[0], 100.0 * part_within[0] / part_cells[0], part_within[1], part_cells[1],
            100.0 * part_within[1] / part_cells[1]);
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
  for (int i = 0; i < t->num_cells; i++) pick[i] = tf_pick(nodes, t->features + (size_t)i * NF);
  tf_report_picks(t, pick, out);
  free(pick);
}
