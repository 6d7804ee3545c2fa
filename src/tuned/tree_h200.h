/* tree_h200.h: decision tree for NVIDIA H200 (sm_90), written by `anyattn tune`.
 * fitted from bench/results/h200_tune_2026-11-29b/h200_tune_combined.csv (NVIDIA H200, 2026-11-29 18:54 UTC)
 * features (src/configs/tree.h): 0=num_seqs 1=num_tokens 2=mean_q 3=max_q 4=max_kv 5=head_dim 6=group
 * inner node: go left when features[feature] <= threshold; leaf: config and KV splits (0: backend decides)
 * Included by src/tuned/trees.c. */
static const aa_tree_node aa_tree_h200_nodes[] = {
    {1, 257.5, 1, 16, NULL, 0}, /* num_tokens */
    {4, 6144, 2, 9, NULL, 0}, /* max_kv */
    {3, 115, 3, 6, NULL, 0}, /* max_q */
    {1, 58, 4, 5, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {4, 1152, 7, 8, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {0, 12, 10, 13, NULL, 0}, /* num_seqs */
    {0, 1.5, 11, 12, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {0, 24, 14, 15, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {-1, 0, -1, -1, "m16n128w8s2", 16},
    {2, 227.498046875, 17, 24, NULL, 0}, /* mean_q */
    {3, 1536, 18, 21, NULL, 0}, /* max_q */
    {1, 270.5, 19, 20, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {1, 4650, 22, 23, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {1, 1969.5, 25, 28, NULL, 0}, /* num_tokens */
    {4, 5120, 26, 27, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {3, 768, 29, 30, NULL, 0}, /* max_q */
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
};
static const aa_tree aa_tree_h200 = {"NVIDIA H200", "sm_90", "fitted from bench/results/h200_tune_2026-11-29b/h200_tune_combined.csv (NVIDIA H200, 2026-11-29 18:54 UTC)", 1, 31, aa_tree_h200_nodes};
