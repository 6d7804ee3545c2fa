/* select.h: decision-tree lookup and evaluation for plan/run (src/choose/select.c). */
#ifndef ANYATTN_SELECT_H
#define ANYATTN_SELECT_H

#include "internal.h"
#include "tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The leaf `features` reach, or NULL for an empty or malformed tree. */
AA_HIDDEN const aa_tree_node *aa_tree_eval(const aa_tree *t, const double *features);
/* Fills features[AA_F_COUNT] from host-visible sizes (hints 0: unknown). */
AA_HIDDEN void aa_tree_features(const anyattn_plan *plan, int num_seqs, int num_tokens, int max_q_len,
                                int max_kv_len, double *features);
/* The tree serving a device: a loaded file, else the exact name, else the
 * family, else NULL (use the backend's fallback heuristic). */
AA_HIDDEN const aa_tree *aa_tree_for(const char *device_name, const char *family);

/* Compiled-in trees (src/choose/trees/trees.c). */
AA_HIDDEN extern const aa_tree *const aa_compiled_trees[];
AA_HIDDEN extern const int aa_num_compiled_trees;

#ifdef __cplusplus
}
#endif
#endif
