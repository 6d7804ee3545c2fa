/* select.h: the choice layer's interface to the rest of the library: tree
 * features and evaluation (tree_eval.c), which tree serves a device
 * (tree_lookup.c), the tree loaded from a file (tree_load.c) and the trees
 * compiled in (trees/trees.c). The GPU backends call the first three. */
#ifndef ANYATTN_SELECT_H
#define ANYATTN_SELECT_H

#include <stddef.h>

#include "internal.h"
#include "tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most nodes a tree may have: a depth-8 tree (the tuner's limit) has 511. */
enum { AA_TREE_MAX_NODES = 512, AA_TREE_MAX_SPLITS = 128, AA_TREE_CONFIG_NAME_MAX = 32 };

/* The leaf `features` reach, or NULL for an empty or malformed tree. */
AA_HIDDEN const aa_tree_node *aa_tree_eval(const aa_tree *t, const double *features);
/* Fills features[AA_F_COUNT] from host-visible sizes (hints 0: unknown). */
AA_HIDDEN void aa_tree_features(const anyattn_plan *plan, int num_seqs, int num_tokens, int max_q_len,
                                int max_kv_len, int64_t sum_kv_len, double *features);
/* The tree serving a device: a loaded file, else the exact name, else the
 * family, else NULL (use the backend's fallback heuristic). */
AA_HIDDEN const aa_tree *aa_tree_for(const char *device_name, const char *family);

/* 0 when t is well formed: 1 to AA_TREE_MAX_NODES nodes; inner nodes test a
 * known feature against a finite threshold, and every node but the root is the
 * child of exactly one node before it (so the tree is acyclic and each node is
 * reachable); leaves name a config of under AA_TREE_CONFIG_NAME_MAX characters
 * and 0 to AA_TREE_MAX_SPLITS splits. Else -1 with the node and field at fault
 * in why. The loader checks each file with it; tests/test_tree.c each
 * compiled-in tree. */
AA_HIDDEN int aa_tree_check(const aa_tree *t, char *why, size_t why_size);

/* The tree loaded from a file (anyattn_tree_load, or $ANYATTN_TREE, read at
 * the first call), or NULL. */
AA_HIDDEN const aa_tree *aa_tree_loaded(void);
/* Why $ANYATTN_TREE is not in use: "" when it is, or is unset, or a load came first. */
AA_HIDDEN const char *aa_tree_env_error(void);

/* Compiled-in trees (src/choose/trees/trees.c). */
AA_HIDDEN extern const aa_tree *const aa_compiled_trees[];
AA_HIDDEN extern const int aa_num_compiled_trees;

#ifdef __cplusplus
}
#endif
#endif
