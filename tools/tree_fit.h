/* tree_fit.h: CART over a tuning sweep. Each leaf picks the candidate (config
 * and split count) with the least total time over the cells that reach it;
 * splits are thresholds on host-visible features (src/choose/tree.h). */
#ifndef ANYATTN_TOOLS_TREE_FIT_H
#define ANYATTN_TOOLS_TREE_FIT_H

#include <stdio.h>

#include "anyattn.h"
#include "tree.h"

typedef struct {
  int num_cells, num_cands;
  double *features;         /* [num_cells][AA_F_COUNT] */
  double *us;               /* [num_cells][num_cands]; INFINITY where invalid or failed */
  char (*cand_config)[32];  /* [num_cands] config names */
  int *cand_splits;         /* [num_cands] split counts (0: backend decides) */
  char device[128], family[32], date[64], driver[64];
} tf_table;

typedef struct {
  int feature; /* -1: leaf */
  double threshold;
  int left, right;
  int cand; /* leaf: chosen candidate */
} tf_node;

/* Reads the CSV `anyattn tune` writes. 0 on success, else -1 with a message. */
int tf_read_csv(const char *path, tf_table *t);
void tf_free(tf_table *t);
/* Fits a tree of at most max_depth levels, leaves of >= min_leaf cells.
 * Returns the node count (root first), or -1 if max_nodes is too small. */
int tf_fit(const tf_table *t, int max_depth, int min_leaf, tf_node *nodes, int max_nodes);
/* The candidate the tree picks for cell i. */
int tf_pick(const tf_node *nodes, const double *features);
/* Prints the fit's quality: cells within 5% of their best candidate, and the
 * geometric-mean speed-up over the best single fixed candidate. */
void tf_report(const tf_table *t, const tf_node *nodes, FILE *out);
/* The same report for given picks (pick[i]: candidate index of cell i, -1:
 * a candidate the sweep did not time), with the per-cell oracle's speed-up. */
void tf_report_picks(const tf_table *t, const int *pick, FILE *out);
/* Index of candidate (config, splits), or -1. */
int tf_find_cand(const tf_table *t, const char *config, int splits);
/* Writes the tree as JSON (anyattn_tree_load reads it) and as a C header for src/choose/trees/. */
int tf_write_json(const tf_table *t, const tf_node *nodes, int n, const char *provenance, int tuned,
                  const char *path);
int tf_write_c(const tf_table *t, const tf_node *nodes, int n, const char *provenance, int tuned,
               const char *name, const char *path);

#endif
