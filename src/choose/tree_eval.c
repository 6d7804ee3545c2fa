/* tree_eval.c: the tree format's functions, free of state: the features plan
 * and run compute, the walk from root to leaf, and the well-formedness check
 * every loaded tree passes (and tests/test_tree.c runs on the compiled ones). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "select.h"

/* The internal feature order is the public one (files and tools use its values). */
#define AA_SAME_(a, b) ((int)(a) == (int)(b))
_Static_assert(AA_SAME_(AA_F_NUM_SEQS, ANYATTN_TREE_FEATURE_NUM_SEQS) &&
                   AA_SAME_(AA_F_NUM_TOKENS, ANYATTN_TREE_FEATURE_NUM_TOKENS) &&
                   AA_SAME_(AA_F_MEAN_Q, ANYATTN_TREE_FEATURE_MEAN_Q) &&
                   AA_SAME_(AA_F_MAX_Q, ANYATTN_TREE_FEATURE_MAX_Q) &&
                   AA_SAME_(AA_F_MAX_KV, ANYATTN_TREE_FEATURE_MAX_KV) &&
                   AA_SAME_(AA_F_HEAD_DIM, ANYATTN_TREE_FEATURE_HEAD_DIM) &&
                   AA_SAME_(AA_F_GROUP, ANYATTN_TREE_FEATURE_GROUP) &&
                   AA_SAME_(AA_F_KV_BYTES, ANYATTN_TREE_FEATURE_KV_BYTES) &&
                   AA_SAME_(AA_F_MEAN_KV, ANYATTN_TREE_FEATURE_MEAN_KV) &&
                   AA_SAME_(AA_F_COUNT, ANYATTN_TREE_FEATURE_COUNT),
               "tree.h's features and anyattn_tree_feature differ");
_Static_assert(AA_TREE_CONFIG_NAME_MAX == sizeof(((anyattn_tree_choice *)0)->config),
               "a leaf's config name must fit anyattn_tree_choice.config");
#undef AA_SAME_

const char *anyattn_tree_feature_name(int f) {
  static const char *const names[AA_F_COUNT] = {"num_seqs", "num_tokens", "mean_q", "max_q",
                                                "max_kv",   "head_dim",   "group",  "kv_bytes",
                                                "mean_kv"};
  return f >= 0 && f < AA_F_COUNT ? names[f] : "?";
}

const aa_tree_node *aa_tree_eval(const aa_tree *t, const double *features) {
  if (!t || t->num_nodes <= 0) return NULL;
  int i = 0;
  for (int steps = 0; steps < t->num_nodes; steps++) { /* a malformed tree cannot loop */
    const aa_tree_node *n = &t->nodes[i];
    if (n->feature < 0) return n;
    i = features[n->feature] <= n->threshold ? n->left : n->right;
    if (i < 0 || i >= t->num_nodes) return NULL;
  }
  return NULL;
}

void aa_tree_features(const anyattn_plan *plan, int num_seqs, int num_tokens, int max_q_len, int max_kv_len,
                      int64_t sum_kv_len, double *f) {
  f[AA_F_NUM_SEQS] = num_seqs;
  f[AA_F_NUM_TOKENS] = num_tokens;
  f[AA_F_MEAN_Q] = num_seqs > 0 ? (double)num_tokens / num_seqs : 0.0;
  f[AA_F_MAX_Q] = max_q_len > 0 ? max_q_len : num_tokens;
  f[AA_F_MAX_KV] = max_kv_len > 0 ? max_kv_len : plan->limits.max_context;
  f[AA_F_HEAD_DIM] = plan->problem.head_dim;
  f[AA_F_GROUP] = plan->group;
  f[AA_F_KV_BYTES] = (double)aa_kv_dtype_size(plan->problem.kv_dtype, plan->problem.dtype);
  f[AA_F_MEAN_KV] = num_seqs > 0 && sum_kv_len > 0 ? (double)sum_kv_len / num_seqs : 0.0;
}

static int check_failed(char *why, size_t why_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int check_failed(char *why, size_t why_size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (why && why_size) vsnprintf(why, why_size, fmt, ap);
  va_end(ap);
  return -1;
}

/* Checks one node alone; parents[] counts the references to each node. */
static int check_node(const aa_tree *t, int i, unsigned short *parents, char *why, size_t why_size) {
  const aa_tree_node *n = &t->nodes[i];
  const int count = t->num_nodes;
  if (n->feature < 0) {
    if (!n->config || !n->config[0]) return check_failed(why, why_size, "node %d: leaf names no \"config\"", i);
    if (strlen(n->config) >= AA_TREE_CONFIG_NAME_MAX)
      return check_failed(why, why_size, "node %d: \"config\" is %zu characters, at most %d", i, strlen(n->config),
                          AA_TREE_CONFIG_NAME_MAX - 1);
    if (n->splits < 0 || n->splits > AA_TREE_MAX_SPLITS)
      return check_failed(why, why_size, "node %d: \"splits\" is %d, not in [0, %d]", i, n->splits, AA_TREE_MAX_SPLITS);
    return 0;
  }
  if (n->feature >= AA_F_COUNT)
    return check_failed(why, why_size, "node %d: \"feature\" is %d, not in [0, %d)", i, n->feature, AA_F_COUNT);
  if (!isfinite(n->threshold)) return check_failed(why, why_size, "node %d: \"threshold\" is not finite", i);
  /* Children after their parent: the walk only moves forward, so it ends. */
  if (n->left <= i || n->left >= count)
    return check_failed(why, why_size, "node %d: \"left\" is %d, not in (%d, %d)", i, n->left, i, count);
  if (n->right <= i || n->right >= count)
    return check_failed(why, why_size, "node %d: \"right\" is %d, not in (%d, %d)", i, n->right, i, count);
  parents[n->left]++;
  parents[n->right]++;
  return 0;
}

int aa_tree_check(const aa_tree *t, char *why, size_t why_size) {
  if (!t || !t->nodes || t->num_nodes <= 0) return check_failed(why, why_size, "the tree has no nodes");
  if (t->num_nodes > AA_TREE_MAX_NODES)
    return check_failed(why, why_size, "the tree has %d nodes, at most %d", t->num_nodes, AA_TREE_MAX_NODES);
  unsigned short parents[AA_TREE_MAX_NODES];
  memset(parents, 0, sizeof parents);
  for (int i = 0; i < t->num_nodes; i++)
    if (check_node(t, i, parents, why, why_size)) return -1;
  /* One parent each: a tree, every node reachable from the root, none shared. */
  for (int i = 1; i < t->num_nodes; i++) {
    if (parents[i] == 0) return check_failed(why, why_size, "node %d: no node leads to it", i);
    if (parents[i] > 1)
      return check_failed(why, why_size, "node %d: %d nodes lead to it, a tree has one", i, parents[i]);
  }
  return 0;
}
