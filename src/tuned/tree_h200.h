/* tree_h200.h: decision tree for NVIDIA H200 (sm_90), written by `anyattn tune`.
 * fitted from bench/results/h200_tune_2026-11-29e/h200_tune_full_nok4.csv (NVIDIA H200, 2026-11-29 20:34 UTC)
 * features (src/configs/tree.h): 0=num_seqs 1=num_tokens 2=mean_q 3=max_q 4=max_kv 5=head_dim 6=group
 * inner node: go left when features[feature] <= threshold; leaf: config and KV splits (0: backend decides)
 * Included by src/tuned/trees.c. */
static const aa_tree_node aa_tree_h200_nodes[] = {
    {3, 2662, 1, 36, NULL, 0}, /* max_q */
    {3, 115, 2, 27, NULL, 0}, /* max_q */
    {4, 6144, 3, 18, NULL, 0}, /* max_kv */
    {0, 3, 4, 11, NULL, 0}, /* num_seqs */
    {4, 1536, 5, 8, NULL, 0}, /* max_kv */
    {4, 192, 6, 7, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {0, 1.5, 9, 10, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {4, 384, 12, 15, NULL, 0}, /* max_kv */
    {1, 24, 13, 14, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {-1, 0, -1, -1, "m16n64w4s3", 1},
    {0, 24, 16, 17, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {0, 24, 19, 24, NULL, 0}, /* num_seqs */
    {0, 12, 20, 23, NULL, 0}, /* num_seqs */
    {0, 1.5, 21, 22, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {0, 192, 25, 26, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m16n128w8s2", 16},
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {2, 998.125, 28, 35, NULL, 0}, /* mean_q */
    {1, 129.5, 29, 30, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {1, 212.5, 31, 34, NULL, 0}, /* num_tokens */
    {1, 172.5, 32, 33, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
};
static const aa_tree aa_tree_h200 = {"NVIDIA H200", "sm_90", "fitted from bench/results/h200_tune_2026-11-29e/h200_tune_full_nok4.csv (NVIDIA H200, 2026-11-29 20:34 UTC)", 1, 37, aa_tree_h200_nodes};
