/* tree_fit.h: the sweep table `anyattn tune` writes, its reader (sweep_csv.c)
 * and CART over it (tree_fit.c). Each leaf picks the candidate (config and
 * split count) with the least total time over the cells that reach it; splits
 * are thresholds on the host-visible features of include/anyattn.h
 * (anyattn_tree_feature). File errors come back as one line in err. */
#ifndef ANYATTN_TOOLS_TREE_FIT_H
#define ANYATTN_TOOLS_TREE_FIT_H

#include <stddef.h>
#include <stdio.h>

#include "anyattn.h"

/* Bounds of a sweep the reader accepts: files of at most 64 MiB in all (a
 * full-grid sweep is under 1 MiB), cell ids below the CLI's --cells bound, config names
 * that fit a tree leaf, the split counts plan accepts. */
enum {
  TF_MAX_CSV_BYTES = 64 << 20,
  TF_MAX_CELLS = 1000000,
  TF_MAX_CANDS = 1024,
  TF_MAX_MATRIX = 1 << 24, /* cells x candidates */
  TF_CONFIG_NAME_MAX = 32,
  TF_MAX_SPLITS = 128
};

typedef struct {
  int num_cells, num_cands;
  /* Cells [0, num_swept) as swept; tf_read_csv adds, for each with mean_kv >
   * 0, a copy with mean_kv 0 after them (cells [num_swept, num_cells)): the
   * batch as run() sees it without the sum_kv_len hint. 0: no copies. */
  int num_swept;
  double *features;        /* [num_cells][ANYATTN_TREE_FEATURE_COUNT]; NaN rows: cells the sweep skipped */
  double *us;              /* [num_cells][num_cands]; INFINITY where invalid or failed */
  char (*cand_config)[TF_CONFIG_NAME_MAX]; /* [num_cands] config names */
  int *cand_splits;        /* [num_cands] split counts (0: backend decides) */
  char device[128], family[32], date[64], driver[64];
} tf_table;

typedef struct {
  int feature; /* -1: leaf */
  double threshold;
  int left, right;
  int cand; /* leaf: chosen candidate */
} tf_node;

/* Reads the CSV `anyattn tune` writes (a regular file; bounds above; every
 * field checked), or a comma-separated list of such files read as one (at
 * most 16; one device). A cell is keyed by its id and shape (head_dim, group,
 * kv_bytes), so sweeps of several shapes over one grid make distinct cells.
 * Over a 16-bit cache, a row compiled for fp8 caches only without a time on
 * a cell takes the time of its half-keys row with the same split count, as
 * run runs such a leaf (m16n256w8s2 as m16n128w8s2). Each cell then also appears without its mean context
 * (num_swept above), so a tree fitted on the table serves batches with and
 * without the hint. 0 on
 * success, else -1 with "sweep 'PATH': line N, field F (NAME): ..." in err
 * and *t empty. */
int tf_read_csv(const char *path, tf_table *t, char *err, size_t err_size);
void tf_free(tf_table *t);
/* Fits a tree of at most max_depth levels and max_nodes nodes, leaves of >=
 * min_leaf cells, growing best-first (the split that saves the most time
 * next), so a node budget leaves out the splits worth least. Returns the node
 * count (root first; children after their parent), -1 with no cell to fit or
 * max_nodes < 1, -2 when memory runs out. tf_fit_ex also gives, in *unsplit,
 * the leaves a split would still improve when max_nodes stopped growth. */
int tf_fit(const tf_table *t, int max_depth, int min_leaf, tf_node *nodes, int max_nodes);
int tf_fit_ex(const tf_table *t, int max_depth, int min_leaf, tf_node *nodes, int max_nodes, int *unsplit);
/* The candidate the tree picks for a cell's features. */
int tf_pick(const tf_node *nodes, const double *features);
/* Prints the fit's quality: cells within 5% of their best candidate (all, then
 * those with and without the mean context when the table holds both), and the
 * geometric-mean speed-up over the best single fixed candidate. */
void tf_report(const tf_table *t, const tf_node *nodes, FILE *out);
/* The same report for given picks (pick[i]: candidate index of cell i, -1:
 * a candidate the sweep did not time), with the per-cell oracle's speed-up. */
void tf_report_picks(const tf_table *t, const int *pick, FILE *out);
/* Index of candidate (config, splits), or -1. */
int tf_find_cand(const tf_table *t, const char *config, int splits);
/* Writes the tree as JSON (anyattn_tree_load reads it) and as a C header for
 * src/choose/trees/ (name: the C identifier, [a-z0-9_]). Strings are escaped;
 * every write and the close are checked: 0, or -1 with the reason in err. */
int tf_write_json(const tf_table *t, const tf_node *nodes, int n, const char *provenance, int tuned,
                  const char *path, char *err, size_t err_size);
int tf_write_c(const tf_table *t, const tf_node *nodes, int n, const char *provenance, int tuned,
               const char *name, const char *path, char *err, size_t err_size);

#endif
