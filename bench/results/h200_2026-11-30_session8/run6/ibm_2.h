/* tree_h200.h: decision tree for NVIDIA H200 (sm_90), written by `anyattn tune`.
 * anyattn tune --grid ibm on NVIDIA H200, 2026-11-30 00:37 UTC (CUDA driver 13.0)
 * features (src/configs/tree.h): 0=num_seqs 1=num_tokens 2=mean_q 3=max_q 4=max_kv 5=head_dim 6=group
 * inner node: go left when features[feature] <= threshold; leaf: config and KV splits (0: backend decides)
 * Included by src/tuned/trees.c. */
static const aa_tree_node aa_tree_h200_nodes[] = {
    {1, 191.5, 1, 14, NULL, 0}, /* num_tokens */
    {4, 3072, 2, 9, NULL, 0}, /* max_kv */
    {1, 40, 3, 6, NULL, 0}, /* num_tokens */
    {4, 1280, 4, 5, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {-1, 0, -1, -1, "m16n64w4s2", 0},
    {4, 1280, 7, 8, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s2", 1},
    {-1, 0, -1, -1, "m16n128w8s2", 4},
    {0, 40, 10, 13, NULL, 0}, /* num_seqs */
    {0, 10, 11, 12, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n64w4s2", 16},
    {-1, 0, -1, -1, "m16n32w2s2", 4},
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {2, 120.34375, 15, 16, NULL, 0}, /* mean_q */
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
};
static const aa_tree aa_tree_h200 = {"NVIDIA H200", "sm_90", "anyattn tune --grid ibm on NVIDIA H200, 2026-11-30 00:37 UTC (CUDA driver 13.0)", 1, 17, aa_tree_h200_nodes};
