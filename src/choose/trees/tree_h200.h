/* tree_h200.h: decision tree for NVIDIA H200 (sm_90), written by `anyattn tune`.
 * fitted from h200_tune_full.csv,h200_tune_decode_d128_kv_fp8.csv,h200_tune_decode_d96_kv_as-q.csv,h200_tune_decode_d80_kv_as-q.csv,h200_tune_decode_d96_kv_fp8.csv (NVIDIA H200, 2026-12-02 20:29 UTC)
 * features (src/choose/tree.h): 0=num_seqs 1=num_tokens 2=mean_q 3=max_q 4=max_kv 5=head_dim 6=group 7=kv_bytes
 * inner node: go left when features[feature] <= threshold; leaf: config and KV splits (0: backend decides)
 * Included by src/choose/trees/trees.c. */
static const aa_tree_node aa_tree_h200_nodes[] = {
    {3, 115, 1, 82, NULL, 0}, /* max_q */
    {0, 24, 2, 27, NULL, 0}, /* num_seqs */
    {0, 1.5, 3, 12, NULL, 0}, /* num_seqs */
    {4, 12288, 4, 5, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {4, 24576, 6, 7, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 16},
    {5, 112, 8, 9, NULL, 0}, /* head_dim */
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {7, 1.5, 10, 11, NULL, 0}, /* kv_bytes */
    {-1, 0, -1, -1, "m16n128w8s2", 16},
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {4, 768, 13, 26, NULL, 0}, /* max_kv */
    {1, 59.5, 14, 21, NULL, 0}, /* num_tokens */
    {1, 6, 15, 18, NULL, 0}, /* num_tokens */
    {4, 384, 16, 17, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {-1, 0, -1, -1, "m16n128w8s2", 4},
    {4, 192, 19, 20, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n128w8s2", 0},
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {0, 6, 22, 23, NULL, 0}, /* num_seqs */
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {1, 101, 24, 25, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {-1, 0, -1, -1, "m16n64w4s2", 0},
    {0, 96, 28, 53, NULL, 0}, /* num_seqs */
    {0, 48, 29, 38, NULL, 0}, /* num_seqs */
    {4, 3072, 30, 37, NULL, 0}, /* max_kv */
    {5, 112, 31, 34, NULL, 0}, /* head_dim */
    {4, 192, 32, 33, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s2", 4},
    {-1, 0, -1, -1, "m16n64w4s2", 0},
    {4, 1536, 35, 36, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s2", 1},
    {-1, 0, -1, -1, "m16n128w8s2", 16},
    {-1, 0, -1, -1, "m16n64w4s2", 4},
    {5, 112, 39, 46, NULL, 0}, /* head_dim */
    {4, 3072, 40, 43, NULL, 0}, /* max_kv */
    {4, 384, 41, 42, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n32w2s2", 0},
    {-1, 0, -1, -1, "m16n32w2s2", 4},
    {4, 12288, 44, 45, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s3", 0},
    {-1, 0, -1, -1, "m16n64w4s2", 1},
    {4, 1536, 47, 50, NULL, 0}, /* max_kv */
    {4, 768, 48, 49, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n32w2s2", 16},
    {-1, 0, -1, -1, "m16n64w4s2", 16},
    {4, 3072, 51, 52, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s3", 4},
    {-1, 0, -1, -1, "m16n128w8s2", 1},
    {4, 384, 54, 67, NULL, 0}, /* max_kv */
    {0, 192, 55, 62, NULL, 0}, /* num_seqs */
    {5, 112, 56, 59, NULL, 0}, /* head_dim */
    {4, 192, 57, 58, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n32w2s2", 4},
    {-1, 0, -1, -1, "m16n32w2s2", 1},
    {7, 1.5, 60, 61, NULL, 0}, /* kv_bytes */
    {-1, 0, -1, -1, "m16n32w2s2", 0},
    {-1, 0, -1, -1, "m16n64w4s2", 16},
    {5, 112, 63, 64, NULL, 0}, /* head_dim */
    {-1, 0, -1, -1, "m16n32w2s2", 0},
    {4, 192, 65, 66, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n32w2s2", 0},
    {-1, 0, -1, -1, "m16n32w2s2", 16},
    {4, 3072, 68, 75, NULL, 0}, /* max_kv */
    {0, 192, 69, 72, NULL, 0}, /* num_seqs */
    {4, 1536, 70, 71, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s2", 4},
    {-1, 0, -1, -1, "m16n64w4s3", 4},
    {4, 1536, 73, 74, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s2", 4},
    {-1, 0, -1, -1, "m16n64w4s2", 0},
    {0, 192, 76, 79, NULL, 0}, /* num_seqs */
    {4, 6144, 77, 78, NULL, 0}, /* max_kv */
    {-1, 0, -1, -1, "m16n64w4s3", 16},
    {-1, 0, -1, -1, "m16n64w4s2", 1},
    {5, 112, 80, 81, NULL, 0}, /* head_dim */
    {-1, 0, -1, -1, "m16n64w4s2", 1},
    {-1, 0, -1, -1, "m16n64w4s2", 4},
    {4, 768, 83, 94, NULL, 0}, /* max_kv */
    {2, 127.875, 84, 89, NULL, 0}, /* mean_q */
    {1, 270.5, 85, 88, NULL, 0}, /* num_tokens */
    {1, 255.5, 86, 87, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {1, 396.5, 90, 93, NULL, 0}, /* num_tokens */
    {1, 192, 91, 92, NULL, 0}, /* num_tokens */
    {-1, 0, -1, -1, "m16n64w4s2", 0},
    {-1, 0, -1, -1, "m64n64w4s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
    {-1, 0, -1, -1, "m128n128w8s2", 0},
};
static const aa_tree aa_tree_h200 = {"NVIDIA H200", "sm_90", "fitted from h200_tune_full.csv,h200_tune_decode_d128_kv_fp8.csv,h200_tune_decode_d96_kv_as-q.csv,h200_tune_decode_d80_kv_as-q.csv,h200_tune_decode_d96_kv_fp8.csv (NVIDIA H200, 2026-12-02 20:29 UTC)", 1, 95, aa_tree_h200_nodes};
