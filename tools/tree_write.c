/* tree_write.c: writes a fitted tree as JSON (what anyattn_tree_load reads)
 * and as a C header for src/choose/trees/. Strings that come from a sweep are
 * escaped for the format; every write and the close are checked, so a full
 * disk gives an error instead of a cut tree. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tree_fit.h"

#define NF ANYATTN_TREE_FEATURE_COUNT

static int write_fail(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int write_fail(char *err, size_t err_size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && err_size) vsnprintf(err, err_size, fmt, ap);
  va_end(ap);
  return -1;
}

static FILE *open_out(const char *path, char *err, size_t err_size) {
  FILE *f = fopen(path, "w");
  if (!f) write_fail(err, err_size, "cannot write '%s' (%s)", path, strerror(errno));
  return f;
}

/* The stream's error flag catches any failed fprintf; fclose flushes the rest. */
static int close_out(FILE *f, const char *path, char *err, size_t err_size) {
  const int had_error = ferror(f);
  errno = 0;
  const int close_rc = fclose(f);
  if (had_error || close_rc != 0)
    return write_fail(err, err_size, "cannot write '%s' (%s)", path, errno ? strerror(errno) : "write error");
  return 0;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void put_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
    else if (*c < 0x20 || *c == 0x7f) fprintf(f, "\\u%04x", *c);
    else fputc(*c, f);
  }
  fputc('"', f);
}

/* A C string literal: quotes, backslashes, '?' (no trigraph) and control
 * characters escaped (octal, three digits, so a following digit stays out). */
static void put_c_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\' || *c == '?') fprintf(f, "\\%c", *c);
    else if (*c < 0x20 || *c == 0x7f) fprintf(f, "\\%03o", *c);
    else fputc(*c, f);
  }
  fputc('"', f);
}

/* Text inside a C comment: one line, no "*" "/" pair that would end it and
 * no "??" that a trigraph (??/ is a backslash) could make a line splice of. */
static void put_comment_text(FILE *f, const char *s) {
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c < 0x20 || *c == 0x7f) fputc(' ', f);
    else if ((*c == '*' && c[1] == '/') || (*c == '?' && c[1] == '?')) fprintf(f, "%c ", *c);
    else fputc(*c, f);
  }
}

static void legend(FILE *f, const char *prefix) {
  fprintf(f, "%sfeatures (src/choose/tree.h):", prefix);
  for (int i = 0; i < NF; i++) fprintf(f, " %d=%s", i, anyattn_tree_feature_name(i));
  fprintf(f, "\n%sinner node: go left when features[feature] <= threshold; leaf: config and KV splits (0: backend decides)\n",
          prefix);
}

int tf_write_json(const tf_table *t, const tf_node *nodes, int n, const char *provenance, int tuned,
                  const char *path, char *err, size_t err_size) {
  FILE *f = open_out(path, err, err_size);
  if (!f) return -1;
  fprintf(f, "{\n  \"device\": ");
  put_json_string(f, t->device);
  fprintf(f, ",\n  \"family\": ");
  put_json_string(f, t->family);
  fprintf(f, ",\n  \"tuned\": %d,\n  \"provenance\": ", tuned ? 1 : 0);
  put_json_string(f, provenance);
  fprintf(f, ",\n  \"legend\": \"");
  for (int i = 0; i < NF; i++) fprintf(f, "%s%d=%s", i ? " " : "features ", i, anyattn_tree_feature_name(i));
  fprintf(f, "; inner: left when features[feature] <= threshold; leaf: config, splits\",\n  \"nodes\": [\n");
  for (int i = 0; i < n; i++) {
    const tf_node *x = &nodes[i];
    if (x->feature >= 0) {
      fprintf(f, "    {\"feature\": %d, \"threshold\": %.17g, \"left\": %d, \"right\": %d}", x->feature, x->threshold,
              x->left, x->right);
    } else {
      fprintf(f, "    {\"config\": ");
      put_json_string(f, t->cand_config[x->cand]);
      fprintf(f, ", \"splits\": %d}", t->cand_splits[x->cand]);
    }
    fprintf(f, "%s\n", i + 1 < n ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  return close_out(f, path, err, err_size);
}

int tf_write_c(const tf_table *t, const tf_node *nodes, int n, const char *provenance, int tuned,
               const char *name, const char *path, char *err, size_t err_size) {
  if (!name[0] || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(name))
    return write_fail(err, err_size, "tree name '%.40s' must be lower-case letters, digits and _", name);
  FILE *f = open_out(path, err, err_size);
  if (!f) return -1;
  fprintf(f, "/* tree_%s.h: decision tree for ", name);
  put_comment_text(f, t->device);
  fprintf(f, " (");
  put_comment_text(f, t->family);
  fprintf(f, "), written by `anyattn tune`.\n * ");
  put_comment_text(f, provenance);
  fprintf(f, "\n");
  legend(f, " * ");
  fprintf(f, " * Included by src/choose/trees/trees.c. */\n");
  fprintf(f, "static const aa_tree_node aa_tree_%s_nodes[] = {\n", name);
  for (int i = 0; i < n; i++) {
    const tf_node *x = &nodes[i];
    if (x->feature >= 0) {
      fprintf(f, "    {%d, %.17g, %d, %d, NULL, 0}, /* %s */\n", x->feature, x->threshold, x->left, x->right,
              anyattn_tree_feature_name(x->feature));
    } else {
      fprintf(f, "    {-1, 0, -1, -1, ");
      put_c_string(f, t->cand_config[x->cand]);
      fprintf(f, ", %d},\n", t->cand_splits[x->cand]);
    }
  }
  fprintf(f, "};\nstatic const aa_tree aa_tree_%s = {", name);
  put_c_string(f, t->device);
  fprintf(f, ", ");
  put_c_string(f, t->family);
  fprintf(f, ", ");
  put_c_string(f, provenance);
  fprintf(f, ", %d, %d, aa_tree_%s_nodes};\n", tuned ? 1 : 0, n, name);
  return close_out(f, path, err, err_size);
}
