/* tree_cdna_seed.h: decision trees for AMD CDNA (MI250 gfx90a, MI300 gfx942),
 * seeded by hand from the published findings of arXiv 2511.11581 ("The Anatomy
 * of a Triton Attention Kernel"): on AMD a BLOCK_M of 16 beat larger tiles, and
 * at long lengths a KV tile of 32 beat 64 (NVIDIA preferred 64). UNTUNED: no
 * AMD GPU has run anyattn; replace with `anyattn tune --backend hip` output
 * (docs/portability.md says how). Configs are AMD rows of src/choose/configs.h.
 * features (src/choose/tree.h): 0=num_seqs 1=num_tokens 2=mean_q 3=max_q 4=max_kv 5=head_dim 6=group
 * inner node: go left when features[feature] <= threshold; leaf: config and KV splits (0: backend decides) */
static const aa_tree_node aa_tree_cdna_seed_nodes[] = {
    {4, 2048, 1, 2, NULL, 0}, /* max_kv: the paper's long-length switch of the KV tile */
    {-1, 0, -1, -1, "m16n64w4s1", 0},
    {-1, 0, -1, -1, "m16n32w2s1", 0},
};
static const aa_tree aa_tree_gfx942_seed = {
    "AMD Instinct MI300X", "gfx942", "seeded by hand from arXiv 2511.11581's findings (untuned)", 0, 3,
    aa_tree_cdna_seed_nodes};
static const aa_tree aa_tree_gfx90a_seed = {
    "AMD Instinct MI250X", "gfx90a", "seeded by hand from arXiv 2511.11581's findings (untuned)", 0, 3,
    aa_tree_cdna_seed_nodes};
