/* tree_h200.h: decision tree for NVIDIA H200 (sm_90), written by `anyattn tune`.
 * fitted from bench/results/h200_tune_2026-11-29d/h200_tune_full.csv (NVIDIA H200, 2026-11-29 20:20 UTC)
 * features (src/configs/tree.h): 0=num_seqs 1=num_tokens 2=mean_q 3=max_q 4=max_kv 5=head_dim 6=group
 * inner node: go left when features[feature] <= threshold; leaf: config and KV splits (0: backend decides)
 * Included by src/tuned/trees.c. */
static const aa_tree_node aa_tree_h200_nodes[] = {
    {3, 2662, 1, 38, NULL, 0}, /* max_q */
    {3, 115, 2, 29, NULL, 0}, /* max_q */
    {0, 12, 3, 16, NULL, 0}, /* num_seqs */
    {4, 1536, 4, 11, NULL, 0}, /* max_kv */
    {4, 192, 5, 8, NULL, 0}, /* max_kv */
    {1, 10.5, 6, 7, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {1, 6, 9, 10, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {0, 1.5, 12, 15, NULL, 0}, /* num_seqs */
    {4, 12288, 13, 14, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {4, 6144, 17, 24, NULL, 0}, /* max_kv */
    {0, 24, 18, 21, NULL, 0}, /* num_seqs */
    {4, 768, 19, 20, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 16},
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {0, 192, 22, 23, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n64w4s3", 1},
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {0, 24, 25, 26, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {0, 192, 27, 28, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {2, 1075, 30, 37, NULL, 0}, /* mean_q */
    {1, 129.5, 31, 32, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {1, 212.5, 33, 36, NULL, 0}, /* num_tokens */
    {1, 172.5, 34, 35, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
};
static const aa_tree aa_tree_h200 = {"NVIDIA H200", "sm_90", "fitted from bench/results/h200_tune_2026-11-29d/h200_tune_full.csv (NVIDIA H200, 2026-11-29 20:20 UTC)", 1, 39, aa_tree_h200_nodes};
