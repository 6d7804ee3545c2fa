/* tree_lookup.c: which decision tree serves a device, and the public calls that
 * show it to tools and logs. Lookup order: a tree loaded from a file, the
 * compiled-in tree for the exact device name, the one for the architecture
 * family, else none (the backend's documented fallback heuristic). */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "select.h"

const aa_tree *aa_tree_for(const char *device_name, const char *family) {
  const aa_tree *loaded = aa_tree_loaded();
  if (loaded) return loaded;
  for (int i = 0; i < aa_num_compiled_trees; i++)
    if (device_name && !strcmp(aa_compiled_trees[i]->device, device_name)) return aa_compiled_trees[i];
  for (int i = 0; i < aa_num_compiled_trees; i++)
    if (family && !strcmp(aa_compiled_trees[i]->family, family)) return aa_compiled_trees[i];
  return NULL;
}

anyattn_status anyattn_tree_get(const char *device_name, const char *family, anyattn_tree_info *info) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(info, "info");
  AA_CHECK(info->struct_size == sizeof *info, ANYATTN_STATUS_STRUCT_SIZE,
           "info->struct_size is %zu, this library expects %zu", info->struct_size, sizeof *info);
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  const aa_tree *t = aa_tree_for(device_name, family);
  if (!t) return ANYATTN_STATUS_OK; /* source NONE */
  info->source = t == aa_tree_loaded() ? ANYATTN_TREE_SOURCE_FILE : ANYATTN_TREE_SOURCE_COMPILED;
  snprintf(info->device, sizeof info->device, "%s", t->device ? t->device : "");
  snprintf(info->family, sizeof info->family, "%s", t->family ? t->family : "");
  snprintf(info->provenance, sizeof info->provenance, "%s", t->provenance ? t->provenance : "");
  info->tuned = t->tuned;
  info->num_nodes = t->num_nodes;
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_tree_choose(const char *device_name, const char *family, const double *features,
                                   int num_features, anyattn_tree_choice *choice) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(features, "features");
  AA_CHECK_NOT_NULL(choice, "choice");
  AA_CHECK(choice->struct_size == sizeof *choice, ANYATTN_STATUS_STRUCT_SIZE,
           "choice->struct_size is %zu, this library expects %zu", choice->struct_size, sizeof *choice);
  /* Callers built before a feature was appended: 8 (before mean_kv) describe
   * batches without the sum_kv_len hint, 7 (before kv_bytes) 16-bit caches too. */
  AA_CHECK(num_features == AA_F_COUNT || num_features == AA_F_MEAN_KV || num_features == AA_F_KV_BYTES,
           ANYATTN_STATUS_INVALID_SIZE,
           "num_features is %d, this library's trees test %d (ANYATTN_TREE_FEATURE_COUNT; %d: mean_kv taken as 0, "
           "%d: kv_bytes as 2 too)",
           num_features, AA_F_COUNT, AA_F_MEAN_KV, AA_F_KV_BYTES);
  double f[AA_F_COUNT];
  for (int i = 0; i < AA_F_COUNT; i++) {
    f[i] = i < num_features ? features[i] : i == AA_F_KV_BYTES ? 2.0 : 0.0;
    AA_CHECK(isfinite(f[i]), ANYATTN_STATUS_INVALID_OPTION, "features[%d] (%s) is not finite", i,
             anyattn_tree_feature_name(i));
  }
  choice->config[0] = '\0';
  choice->splits = 0;
  const aa_tree *t = aa_tree_for(device_name, family);
  if (!t) return ANYATTN_STATUS_OK; /* no tree: config "" */
  const aa_tree_node *leaf = aa_tree_eval(t, f);
  /* Loaded trees passed aa_tree_check and tests/test_tree.c checks the compiled ones. */
  AA_CHECK(leaf && leaf->config, ANYATTN_STATUS_INVALID_OPTION, "the tree for '%s' (%s) reaches no leaf",
           t->device, t->family);
  /* Names are under AA_TREE_CONFIG_NAME_MAX characters (aa_tree_check); a
   * copy, not snprintf, keeps the call near the cost of the walk itself. */
  const size_t len = strnlen(leaf->config, sizeof choice->config - 1);
  memcpy(choice->config, leaf->config, len);
  choice->config[len] = '\0';
  choice->splits = leaf->splits;
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_tree_describe(const anyattn_context *ctx, char *buf, size_t buf_size) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(ctx, "ctx");
  AA_CHECK_NOT_NULL(buf, "buf");
  AA_CHECK(buf_size > 0, ANYATTN_STATUS_INVALID_SIZE, "buf_size is 0");
  /* Asked on every backend, so `anyattn info` shows a bad $ANYATTN_TREE even
   * where no GPU would read it. */
  const char *env_error = aa_tree_env_error();
  char why[640] = "";
  if (env_error[0]) snprintf(why, sizeof why, " ($ANYATTN_TREE not used: %s)", env_error);
  if (ctx->backend == ANYATTN_BACKEND_CPU) {
    snprintf(buf, buf_size, "none (the CPU backend has one tiling, chosen in plan)%s", why);
    return ANYATTN_STATUS_OK;
  }
  const aa_tree *t = aa_tree_for(ctx->device_name, ctx->family);
  if (!t)
    snprintf(buf, buf_size, "none for '%s' (%s): the backend's fallback heuristic%s", ctx->device_name, ctx->family,
             why);
  else
    snprintf(buf, buf_size, "%s%s tree for '%s' (%s), %d nodes: %s%s", t == aa_tree_loaded() ? "loaded " : "",
             t->tuned ? "tuned" : "UNTUNED", t->device, t->family, t->num_nodes, t->provenance, why);
  return ANYATTN_STATUS_OK;
}
