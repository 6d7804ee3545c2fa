/* tree_h200.h: decision tree for NVIDIA H200 (sm_90), written by `anyattn tune`.
 * fitted from bench/results/h200_tune_2026-11-29c/h200_tune_combined.csv (NVIDIA H200, 2026-11-29 19:38 UTC)
 * features (src/configs/tree.h): 0=num_seqs 1=num_tokens 2=mean_q 3=max_q 4=max_kv 5=head_dim 6=group
 * inner node: go left when features[feature] <= threshold; leaf: config and KV splits (0: backend decides)
 * Included by src/tuned/trees.c. */
static const aa_tree_node aa_tree_h200_nodes[] = {
    {3, 3686, 1, 14, NULL, 0}, /* max_q */
    {3, 115, 2, 9, NULL, 0}, /* max_q */
    {4, 6144, 3, 6, NULL, 0}, /* max_kv */
    {4, 384, 4, 5, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s3", 1},
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {0, 12, 7, 8, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {-1, 0, -1, -1, "m16n128w8s2", 4},
    {2, 1075, 10, 13, NULL, 0}, /* mean_q */
    {1, 129.5, 11, 12, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
};
static const aa_tree aa_tree_h200 = {"NVIDIA H200", "sm_90", "fitted from bench/results/h200_tune_2026-11-29c/h200_tune_combined.csv (NVIDIA H200, 2026-11-29 19:38 UTC)", 1, 15, aa_tree_h200_nodes};
