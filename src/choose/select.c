/* select.c: which decision tree serves a device, and its evaluation. Trees
 * are compiled in (src/choose/trees/) or loaded from a JSON file written by
 * `anyattn tune` (anyattn_tree_load or $ANYATTN_TREE). Lookup order: a loaded
 * file, the exact device name, the architecture family, else none (the
 * backend's documented heuristic). Evaluation is a walk of a few nodes. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "select.h"

const char *aa_tree_feature_name(int f) {
  static const char *const names[AA_F_COUNT] = {"num_seqs", "num_tokens", "mean_q", "max_q",
                                                "max_kv", "head_dim", "group"};
  return f >= 0 && f < AA_F_COUNT ? names[f] : "?";
}

const aa_tree_node *aa_tree_eval(const aa_tree *t, const double *features) {
  if (!t || t->num_nodes <= 0) return NULL;
  int i = 0;
  for (int steps = 0; steps < t->num_nodes; steps++) { /* a malformed file cannot loop */
    const aa_tree_node *n = &t->nodes[i];
    if (n->feature < 0) return n;
    i = features[n->feature] <= n->threshold ? n->left : n->right;
    if (i < 0 || i >= t->num_nodes) return NULL;
  }
  return NULL;
}

void aa_tree_features(const anyattn_plan *plan, int num_seqs, int num_tokens, int max_q_len, int max_kv_len,
                      double *f) {
  f[AA_F_NUM_SEQS] = num_seqs;
  f[AA_F_NUM_TOKENS] = num_tokens;
  f[AA_F_MEAN_Q] = num_seqs > 0 ? (double)num_tokens / num_seqs : 0.0;
  f[AA_F_MAX_Q] = max_q_len > 0 ? max_q_len : num_tokens;
  f[AA_F_MAX_KV] = max_kv_len > 0 ? max_kv_len : plan->limits.max_context;
  f[AA_F_HEAD_DIM] = plan->problem.head_dim;
  f[AA_F_GROUP] = plan->group;
}

/* ---- a tree loaded from a file --------------------------------------------- */
/* A small JSON reader for the files the tuner writes: objects, arrays,
 * strings (simple escapes), numbers, true/false/null. */
typedef struct {
  const char *p;
  int ok;
} aa_js;

static void js_ws(aa_js *s) {
  while (isspace((unsigned char)*s->p)) s->p++;
}

static int js_string(aa_js *s, char *buf, size_t size) {
  js_ws(s);
  if (*s->p != '"') return s->ok = 0;
  s->p++;
  size_t n = 0;
  while (*s->p && *s->p != '"') {
    char c = *s->p++;
    if (c == '\\' && *s->p) {
      c = *s->p++;
      if (c == 'n') c = '\n';
      else if (c == 't') c = '\t';
    }
    if (n + 1 < size) buf[n++] = c;
  }
  if (*s->p != '"') return s->ok = 0;
  s->p++;
  if (size) buf[n] = '\0';
  return 1;
}

static void js_skip(aa_js *s, int depth);

/* Calls back for each "key": value of an object; the callback consumes the value. */
typedef void (*js_member_fn)(aa_js *s, const char *key, void *ctx);
static void js_object(aa_js *s, js_member_fn fn, void *ctx) {
  js_ws(s);
  if (*s->p != '{') {
    s->ok = 0;
    return;
  }
  s->p++;
  js_ws(s);
  if (*s->p == '}') {
    s->p++;
    return;
  }
  while (s->ok) {
    char key[64];
    if (!js_string(s, key, sizeof key)) return;
    js_ws(s);
    if (*s->p != ':') {
      s->ok = 0;
      return;
    }
    s->p++;
    fn(s, key, ctx);
    js_ws(s);
    if (*s->p == ',') {
      s->p++;
      continue;
    }
    if (*s->p == '}') {
      s->p++;
      return;
    }
    s->ok = 0;
  }
}

static double js_number(aa_js *s) {
  js_ws(s);
  char *end = NULL;
  double v = strtod(s->p, &end);
  if (end == s->p) {
    if (!strncmp(s->p, "true", 4)) return s->p += 4, 1.0;
    if (!strncmp(s->p, "false", 5)) return s->p += 5, 0.0;
    s->ok = 0;
    return 0;
  }
  s->p = end;
  return v;
}

static void js_skip(aa_js *s, int depth) {
  js_ws(s);
  if (depth > 32) {
    s->ok = 0;
    return;
  }
  char c = *s->p;
  if (c == '"') {
    char tmp[2];
    js_string(s, tmp, sizeof tmp);
  } else if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    s->p++;
    js_ws(s);
    if (*s->p == close) {
      s->p++;
      return;
    }
    while (s->ok) {
      if (c == '{') {
        char tmp[2];
        if (!js_string(s, tmp, sizeof tmp)) return;
        js_ws(s);
        if (*s->p++ != ':') {
          s->ok = 0;
          return;
        }
      }
      js_skip(s, depth + 1);
      js_ws(s);
      if (*s->p == ',') {
        s->p++;
        continue;
      }
      if (*s->p == close) {
        s->p++;
        return;
      }
      s->ok = 0;
    }
  } else if (!strncmp(s->p, "null", 4)) {
    s->p += 4;
  } else {
    js_number(s);
  }
}

enum { AA_TREE_MAX_NODES = 512 };

typedef struct {
  aa_tree tree;
  aa_tree_node nodes[AA_TREE_MAX_NODES];
  char config_names[AA_TREE_MAX_NODES][32];
  char device[128], family[32], provenance[256];
  char path[512];
} aa_loaded_tree;

static void node_member(aa_js *s, const char *key, void *ctx) {
  aa_tree_node *n = (aa_tree_node *)ctx;
  char *name = (char *)n->config; /* points at the node's name buffer while parsing */
  if (!strcmp(key, "feature")) n->feature = (int)js_number(s);
  else if (!strcmp(key, "threshold")) n->threshold = js_number(s);
  else if (!strcmp(key, "left")) n->left = (int)js_number(s);
  else if (!strcmp(key, "right")) n->right = (int)js_number(s);
  else if (!strcmp(key, "splits")) n->splits = (int)js_number(s);
  else if (!strcmp(key, "config")) js_string(s, name, 32);
  else js_skip(s, 0);
}

static void tree_member(aa_js *s, const char *key, void *ctx) {
  aa_loaded_tree *t = (aa_loaded_tree *)ctx;
  if (!strcmp(key, "device")) js_string(s, t->device, sizeof t->device);
  else if (!strcmp(key, "family")) js_string(s, t->family, sizeof t->family);
  else if (!strcmp(key, "provenance")) js_string(s, t->provenance, sizeof t->provenance);
  else if (!strcmp(key, "tuned")) t->tree.tuned = (int)js_number(s);
  else if (!strcmp(key, "nodes")) {
    js_ws(s);
    if (*s->p != '[') {
      s->ok = 0;
      return;
    }
    s->p++;
    js_ws(s);
    if (*s->p == ']') {
      s->p++;
      return;
    }
    while (s->ok) {
      if (t->tree.num_nodes >= AA_TREE_MAX_NODES) {
        s->ok = 0;
        return;
      }
      aa_tree_node *n = &t->nodes[t->tree.num_nodes];
      memset(n, 0, sizeof *n);
      n->feature = -1;
      n->config = t->config_names[t->tree.num_nodes];
      t->tree.num_nodes++;
      js_object(s, node_member, n);
      js_ws(s);
      if (*s->p == ',') {
        s->p++;
        continue;
      }
      if (*s->p == ']') {
        s->p++;
        return;
      }
      s->ok = 0;
    }
  } else {
    js_skip(s, 0);
  }
}

static aa_loaded_tree *aa_loaded; /* process-wide override; replaced by each load, never freed */

static anyattn_status aa_tree_check(const aa_tree *t, const char *path) {
  AA_CHECK(t->num_nodes > 0, ANYATTN_STATUS_INVALID_OPTION, "tree file '%s' has no nodes", path);
  for (int i = 0; i < t->num_nodes; i++) {
    const aa_tree_node *n = &t->nodes[i];
    if (n->feature < 0) {
      AA_CHECK(n->config[0] != '\0', ANYATTN_STATUS_INVALID_OPTION, "tree file '%s': leaf %d names no config",
               path, i);
      continue;
    }
    AA_CHECK(n->feature < AA_F_COUNT && n->left > i && n->left < t->num_nodes && n->right > i &&
                 n->right < t->num_nodes,
             ANYATTN_STATUS_INVALID_OPTION, "tree file '%s': node %d is malformed", path, i);
  }
  return ANYATTN_STATUS_OK;
}

anyattn_status anyattn_tree_load(const char *path) {
  aa_clear_error();
  /* A replaced tree is not freed: plans made while it was current point at it
   * (a few tens of KB per load, for the life of the process). */
  if (path == NULL) { /* back to the compiled-in trees */
    aa_loaded = NULL;
    return ANYATTN_STATUS_OK;
  }
  FILE *f = fopen(path, "rb");
  AA_CHECK(f != NULL, ANYATTN_STATUS_INVALID_OPTION, "path: cannot open tree file '%s'", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = size > 0 && size < (1L << 24) ? (char *)malloc((size_t)size + 1) : NULL;
  size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
  fclose(f);
  if (!text || got != (size_t)size) {
    free(text);
    return aa_error(ANYATTN_STATUS_INVALID_OPTION, "path: cannot read tree file '%s'", path);
  }
  text[size] = '\0';
  aa_loaded_tree *t = (aa_loaded_tree *)calloc(1, sizeof *t);
  if (!t) {
    free(text);
    return aa_error(ANYATTN_STATUS_OUT_OF_MEMORY, "tree allocation failed");
  }
  aa_js s = {text, 1};
  js_object(&s, tree_member, t);
  free(text);
  t->tree.nodes = t->nodes;
  t->tree.device = t->device;
  t->tree.family = t->family;
  t->tree.provenance = t->provenance;
  snprintf(t->path, sizeof t->path, "%s", path);
  if (!s.ok) {
    free(t);
    return aa_error(ANYATTN_STATUS_INVALID_OPTION, "path: '%s' is not a tree file written by anyattn tune", path);
  }
  anyattn_status st = aa_tree_check(&t->tree, path);
  if (st != ANYATTN_STATUS_OK) {
    free(t);
    return st;
  }
  aa_loaded = t;
  return ANYATTN_STATUS_OK;
}

const aa_tree *aa_tree_for(const char *device_name, const char *family) {
  static int env_done;
  if (!env_done) { /* $ANYATTN_TREE, read once; a bad file leaves the compiled trees in charge */
    env_done = 1;
    const char *e = getenv("ANYATTN_TREE");
    if (e && *e && !aa_loaded) anyattn_tree_load(e);
  }
  if (aa_loaded) return &aa_loaded->tree;
  for (int i = 0; i < aa_num_compiled_trees; i++)
    if (device_name && !strcmp(aa_compiled_trees[i]->device, device_name)) return aa_compiled_trees[i];
  for (int i = 0; i < aa_num_compiled_trees; i++)
    if (family && !strcmp(aa_compiled_trees[i]->family, family)) return aa_compiled_trees[i];
  return NULL;
}

anyattn_status anyattn_tree_describe(const anyattn_context *ctx, char *buf, size_t buf_size) {
  aa_clear_error();
  AA_CHECK_NOT_NULL(ctx, "ctx");
  AA_CHECK_NOT_NULL(buf, "buf");
  AA_CHECK(buf_size > 0, ANYATTN_STATUS_INVALID_SIZE, "buf_size is 0");
  if (ctx->backend == ANYATTN_BACKEND_CPU) {
    snprintf(buf, buf_size, "none (the CPU backend has one tiling, chosen in plan)");
    return ANYATTN_STATUS_OK;
  }
  const aa_tree *t = aa_tree_for(ctx->device_name, ctx->family);
  if (!t)
    snprintf(buf, buf_size, "none for '%s' (%s): the backend's fallback heuristic", ctx->device_name,
             ctx->family);
  else
    snprintf(buf, buf_size, "%s%s tree for '%s' (%s), %d nodes: %s", aa_loaded && t == &aa_loaded->tree ? "loaded " : "",
             t->tuned ? "tuned" : "UNTUNED", t->device, t->family, t->num_nodes, t->provenance);
  return ANYATTN_STATUS_OK;
}
