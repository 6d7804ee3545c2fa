/* tree_h200.h: decision tree for NVIDIA H200 (sm_90), written by `anyattn tune`.
 * fitted from bench/results/h200/h200_tune_full.csv (NVIDIA H200, 2026-11-30 00:21 UTC)
 * features (src/choose/tree.h): 0=num_seqs 1=num_tokens 2=mean_q 3=max_q 4=max_kv 5=head_dim 6=group
 * inner node: go left when features[feature] <= threshold; leaf: config and KV splits (0: backend decides)
 * Included by src/choose/trees/trees.c. */
static const aa_tree_node aa_tree_h200_nodes[] = {
    {3, 57.5, 1, 50, NULL, 0}, /* max_q */
    {4, 1536, 2, 27, NULL, 0}, /* max_kv */
    {0, 24, 3, 14, NULL, 0}, /* num_seqs */
    {1, 6, 4, 9, NULL, 0}, /* num_tokens */
    {4, 384, 5, 6, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {0, 3, 7, 8, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n128w8s2", 4},
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {1, 60.5, 10, 13, NULL, 0}, /* num_tokens */
    {4, 768, 11, 12, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {-1, 0, -1, -1, "m16n32w2s2", 4},
    {-1, 0, -1, -1, "m16n64w4s2", 0},
    {4, 192, 15, 20, NULL, 0}, /* max_kv */
    {0, 192, 16, 19, NULL, 0}, /* num_seqs */
    {0, 48, 17, 18, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n64w4s3", 1},
    {-1, 0, -1, -1, "m16n32w2s2", 16},
    {-1, 0, -1, -1, "m16n32w2s2", 4},
    {0, 48, 21, 24, NULL, 0}, /* num_seqs */
    {4, 768, 22, 23, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s2", 1},
    {-1, 0, -1, -1, "m16n64w4s2", 16},
    {0, 192, 25, 26, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n64w4s2", 16},
    {-1, 0, -1, -1, "m16n64w4s2", 1},
    {0, 24, 28, 37, NULL, 0}, /* num_seqs */
    {4, 24576, 29, 34, NULL, 0}, /* max_kv */
    {0, 1.5, 30, 33, NULL, 0}, /* num_seqs */
    {4, 6144, 31, 32, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s2", 16},
    {-1, 0, -1, -1, "m16n128w8s2", 16},
    {-1, 0, -1, -1, "m16n64w4s2", 0},
    {0, 12, 35, 36, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {-1, 0, -1, -1, "m16n128w8s2", 16},
    {0, 48, 38, 43, NULL, 0}, /* num_seqs */
    {4, 3072, 39, 40, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 16},
    {4, 12288, 41, 42, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s2", 4},
    {-1, 0, -1, -1, "m16n64w4s3", 4},
    {4, 3072, 44, 47, NULL, 0}, /* max_kv */
    {0, 192, 45, 46, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {-1, 0, -1, -1, "m16n64w4s2", 0},
    {0, 96, 48, 49, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {-1, 0, -1, -1, "m16n128w8s2", 16},
    {4, 768, 51, 58, NULL, 0}, /* max_kv */
    {2, 127.875, 52, 53, NULL, 0}, /* mean_q */
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {1, 396.5, 54, 57, NULL, 0}, /* num_tokens */
    {1, 192, 55, 56, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n64w4s2", 0},
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {1, 154, 59, 60, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
};
static const aa_tree aa_tree_h200 = {"NVIDIA H200", "sm_90", "fitted from bench/results/h200/h200_tune_full.csv (NVIDIA H200, 2026-11-30 00:21 UTC)", 1, 61, aa_tree_h200_nodes};
