/* tree.h: decision trees that pick a tile config (and a KV split count) from
 * host-visible batch features, fitted offline by `anyattn tune` and evaluated
 * in plan/run at no measurable cost. Plain C so the library and the
 * committed trees (src/choose/trees/) share one definition; tools see trees
 * through the public API (the tree section of include/anyattn.h). */
#ifndef ANYATTN_TREE_H
#define ANYATTN_TREE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Features, in this order: the public anyattn_tree_feature values (the
 * static asserts in tree_eval.c keep the two equal). Only what run() knows on
 * the host: the batch's counts, the optional hints (else the plan's limits)
 * and the problem. */
enum {
  AA_F_NUM_SEQS = 0, /* batch->num_seqs */
  AA_F_NUM_TOKENS,   /* batch->num_tokens */
  AA_F_MEAN_Q,       /* num_tokens / num_seqs */
  AA_F_MAX_Q,        /* batch->max_q_len, else num_tokens */
  AA_F_MAX_KV,       /* batch->max_kv_len, else limits.max_context */
  AA_F_HEAD_DIM,
  AA_F_GROUP,        /* num_q_heads / num_kv_heads */
  AA_F_KV_BYTES,     /* bytes per K/V cache element (aa_kv_dtype_size) */
  AA_F_MEAN_KV,      /* batch->sum_kv_len / num_seqs, else 0 (unknown) */
  AA_F_COUNT
};

/* One node. Inner node: go to `left` when features[feature] <= threshold,
 * else `right`. Leaf (feature < 0): `config` names a row of the config table
 * (by name, so a tree survives the table being reordered), `splits` is the
 * KV split count (0: the backend decides). */
typedef struct {
  int feature;
  double threshold;
  int left, right;
  const char *config;
  int splits;
} aa_tree_node;

typedef struct {
  const char *device;     /* exact device name it was tuned on, e.g. "NVIDIA H200" */
  const char *family;     /* architecture family it may serve, e.g. "sm_90", "gfx942" */
  const char *provenance; /* who made it, when, from what sweep */
  int tuned;              /* 0: seeded by hand (e.g. from published findings), untuned */
  int num_nodes;
  const aa_tree_node *nodes; /* nodes[0] is the root */
} aa_tree;

#ifdef __cplusplus
}
#endif
#endif
