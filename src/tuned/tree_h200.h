/* tree_h200.h: decision tree for NVIDIA H200 (sm_90), written by `anyattn tune`.
 * fitted from bench/results/h200_tune_2026-11-29f/h200_tune_full.csv (NVIDIA H200, 2026-11-29 21:26 UTC)
 * features (src/configs/tree.h): 0=num_seqs 1=num_tokens 2=mean_q 3=max_q 4=max_kv 5=head_dim 6=group
 * inner node: go left when features[feature] <= threshold; leaf: config and KV splits (0: backend decides)
 * Included by src/tuned/trees.c. */
static const aa_tree_node aa_tree_h200_nodes[] = {
    {3, 115, 1, 36, NULL, 0}, /* max_q */
    {1, 6, 2, 21, NULL, 0}, /* num_tokens */
    {4, 3072, 3, 10, NULL, 0}, /* max_kv */
    {4, 192, 4, 5, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {4, 1536, 6, 7, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {0, 1.5, 8, 9, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {0, 1.5, 11, 16, NULL, 0}, /* num_seqs */
    {4, 12288, 12, 15, NULL, 0}, /* max_kv */
    {4, 6144, 13, 14, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {-1, 0, -1, -1, "m16n128w8s2", 16},
    {4, 24576, 17, 20, NULL, 0}, /* max_kv */
    {4, 6144, 18, 19, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {0, 48, 22, 31, NULL, 0}, /* num_seqs */
    {0, 3, 23, 24, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {0, 12, 25, 28, NULL, 0}, /* num_seqs */
    {4, 6144, 26, 27, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s3", 4},
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {4, 768, 29, 30, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {-1, 0, -1, -1, "m16n64w4s3", 4},
    {4, 6144, 32, 33, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s3", 1},
    {0, 192, 34, 35, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {-1, 0, -1, -1, "m16n64w4s3", 1},
    {3, 921.5, 37, 42, NULL, 0}, /* max_q */
    {2, 461, 38, 41, NULL, 0}, /* mean_q */
    {1, 129.5, 39, 40, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {2, 121.798828125, 43, 44, NULL, 0}, /* mean_q */
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {1, 1691, 45, 48, NULL, 0}, /* num_tokens */
    {1, 1382.5, 46, 47, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
};
static const aa_tree aa_tree_h200 = {"NVIDIA H200", "sm_90", "fitted from bench/results/h200_tune_2026-11-29f/h200_tune_full.csv (NVIDIA H200, 2026-11-29 21:26 UTC)", 1, 49, aa_tree_h200_nodes};
