/* tree_load.c: reads a decision tree from a JSON file written by `anyattn tune`
 * (anyattn_tree_load, $ANYATTN_TREE). The file is untrusted input: a regular
 * file of bounded size, parsed by cJSON (Debian's libcjson, a kept library
 * rather than a parser of our own), every number checked finite and in range
 * before it is converted, the result checked as a tree (aa_tree_check). */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "select.h"

/* A tree file the tuner writes is at most ~40 KB (511 nodes of ~80 bytes). */
enum { AA_TREE_FILE_MAX_BYTES = 1 << 20 };

/* A loaded tree and its strings, in one allocation sized by its node count. */
typedef struct aa_loaded_tree {
  struct aa_loaded_tree *older; /* the tree loaded before it (see loaded_trees below) */
  aa_tree tree;
  char device[128], family[32], provenance[256];
  char (*config_names)[AA_TREE_CONFIG_NAME_MAX]; /* [num_nodes], after the nodes */
  aa_tree_node nodes[];
} aa_loaded_tree;

/* Where a load stands: the file, and the first error found (status and text). */
typedef struct {
  const char *path;
  anyattn_status status;
  char why[512];
} aa_load;

static int load_fail(aa_load *l, anyattn_status status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int load_fail(aa_load *l, anyattn_status status, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  l->status = status;
  snprintf(l->why, sizeof l->why, "tree file '%s': %s", l->path, msg);
  for (char *c = l->why; *c; c++) /* one line, whatever the path holds */
    if ((unsigned char)*c < 0x20) *c = '?';
  return -1;
}

/* ---- the file: regular, at most AA_TREE_FILE_MAX_BYTES, no NUL bytes -------- */
static const char *file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "a special file";
}

/* Reads the whole file into *text (NUL-terminated, caller frees). Opened
 * without blocking and checked on the open descriptor, so a FIFO is an error
 * and never a wait, and the file checked is the file read. */
static int read_tree_file(aa_load *l, char **text, size_t *size) {
  *text = NULL;
  const int fd = open(l->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "cannot open (%s)", strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "cannot stat (%s)", strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "is %s, not a regular file", file_kind(st.st_mode));
  }
  if (st.st_size > AA_TREE_FILE_MAX_BYTES) {
    close(fd);
    return load_fail(l, ANYATTN_STATUS_INVALID_SIZE, "is %lld bytes, at most %d", (long long)st.st_size,
                     AA_TREE_FILE_MAX_BYTES);
  }
  /* One byte more than fstat saw tells a file that grew while it was read. */
  const size_t cap = (size_t)st.st_size + 1;
  char *buf = (char *)malloc(cap + 1);
  if (!buf) {
    close(fd);
    return load_fail(l, ANYATTN_STATUS_OUT_OF_MEMORY, "no memory to read it");
  }
  size_t got = 0;
  int err = 0;
  while (got < cap) {
    const ssize_t r = read(fd, buf + got, cap - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) err = errno;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (err || got != (size_t)st.st_size) {
    free(buf);
    return err ? load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "cannot read (%s)", strerror(err))
               : load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "changed while it was read");
  }
  if (got == 0) {
    free(buf);
    return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "is empty");
  }
  const char *nul = (const char *)memchr(buf, '\0', got);
  if (nul) {
    const size_t at = (size_t)(nul - buf);
    free(buf);
    return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "holds a NUL byte at offset %zu", at);
  }
  buf[got] = '\0';
  *text = buf;
  *size = got;
  return 0;
}

/* ---- fields: each checked before it is converted --------------------------- */
/* "node N: " or "" for a top-level field, for messages. */
static const char *where(int node, char *buf, size_t size) {
  if (node < 0) return "";
  snprintf(buf, size, "node %d: ", node);
  return buf;
}

/* A finite number; absent: *out unchanged unless required. */
static int get_number(aa_load *l, const cJSON *obj, const char *key, int node, int required, double *out) {
  char at[32];
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!item)
    return required ? load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "%sno \"%s\"", where(node, at, sizeof at), key) : 0;
  if (!cJSON_IsNumber(item))
    return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "%s\"%s\" is not a number", where(node, at, sizeof at), key);
  if (!isfinite(item->valuedouble))
    return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "%s\"%s\" is not finite", where(node, at, sizeof at), key);
  *out = item->valuedouble;
  return 0;
}

/* An integer in [lo, hi], range-checked as a double before the cast. */
static int get_int(aa_load *l, const cJSON *obj, const char *key, int node, int required, int lo, int hi, int *out) {
  char at[32];
  double v = NAN;
  if (get_number(l, obj, key, node, required, &v)) return -1;
  if (isnan(v)) return 0; /* absent and optional */
  if (v != floor(v) || v < lo || v > hi)
    return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "%s\"%s\" is %.17g, not an integer in [%d, %d]",
                     where(node, at, sizeof at), key, v, lo, hi);
  *out = (int)v;
  return 0;
}

/* A string shorter than size; absent: dst unchanged unless required. */
static int get_string(aa_load *l, const cJSON *obj, const char *key, int node, int required, char *dst,
                      size_t size) {
  char at[32];
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!item)
    return required ? load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "%sno \"%s\"", where(node, at, sizeof at), key) : 0;
  if (!cJSON_IsString(item) || !item->valuestring)
    return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "%s\"%s\" is not a string", where(node, at, sizeof at), key);
  const size_t n = strlen(item->valuestring);
  if (n >= size)
    return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "%s\"%s\" is %zu characters, at most %zu",
                     where(node, at, sizeof at), key, n, size - 1);
  memcpy(dst, item->valuestring, n + 1);
  return 0;
}

/* ---- the tree ---------------------------------------------------------------- */
/* Inner node: has "feature"; leaf: "config" and optional "splits". */
static int read_node(aa_load *l, const cJSON *obj, int i, aa_loaded_tree *t) {
  aa_tree_node *n = &t->nodes[i];
  memset(n, 0, sizeof *n);
  n->feature = -1;
  n->left = n->right = -1;
  n->config = t->config_names[i];
  if (!cJSON_IsObject(obj)) return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "node %d is not an object", i);
  if (!cJSON_GetObjectItemCaseSensitive(obj, "feature")) { /* a leaf */
    if (get_string(l, obj, "config", i, 1, t->config_names[i], sizeof t->config_names[i])) return -1;
    return get_int(l, obj, "splits", i, 0, 0, AA_TREE_MAX_SPLITS, &n->splits);
  }
  if (get_int(l, obj, "feature", i, 1, 0, AA_F_COUNT - 1, &n->feature)) return -1;
  if (get_number(l, obj, "threshold", i, 1, &n->threshold)) return -1;
  /* Children are node indices; aa_tree_check then asks for a tree. */
  if (get_int(l, obj, "left", i, 1, 0, AA_TREE_MAX_NODES - 1, &n->left)) return -1;
  return get_int(l, obj, "right", i, 1, 0, AA_TREE_MAX_NODES - 1, &n->right);
}

/* The parsed document as a checked tree in *out (a new allocation). */
static int read_tree(aa_load *l, const cJSON *root, aa_loaded_tree **out) {
  *out = NULL;
  if (!cJSON_IsObject(root)) return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "is not a JSON object");
  const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
  if (!cJSON_IsArray(nodes))
    return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "\"nodes\" is %s", nodes ? "not an array" : "missing");
  const int count = cJSON_GetArraySize(nodes); /* at most the file's size: it is bounded */
  if (count == 0) return load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "\"nodes\" is empty");
  if (count < 0 || count > AA_TREE_MAX_NODES)
    return load_fail(l, ANYATTN_STATUS_INVALID_SIZE, "\"nodes\" has %d nodes, at most %d", count, AA_TREE_MAX_NODES);
  const size_t bytes = sizeof(aa_loaded_tree) + (size_t)count * (sizeof(aa_tree_node) + AA_TREE_CONFIG_NAME_MAX);
  aa_loaded_tree *t = (aa_loaded_tree *)calloc(1, bytes);
  if (!t) return load_fail(l, ANYATTN_STATUS_OUT_OF_MEMORY, "no memory for %d nodes", count);
  t->config_names = (char(*)[AA_TREE_CONFIG_NAME_MAX])(void *)(t->nodes + count);
  int rc = get_string(l, root, "device", -1, 0, t->device, sizeof t->device) ||
           get_string(l, root, "family", -1, 0, t->family, sizeof t->family) ||
           get_string(l, root, "provenance", -1, 0, t->provenance, sizeof t->provenance);
  const cJSON *tuned = cJSON_GetObjectItemCaseSensitive(root, "tuned");
  if (!rc && cJSON_IsBool(tuned)) t->tree.tuned = cJSON_IsTrue(tuned);
  else if (!rc && tuned) rc = get_int(l, root, "tuned", -1, 1, 0, 1, &t->tree.tuned);
  int i = 0;
  const cJSON *node;
  cJSON_ArrayForEach(node, nodes) {
    if (rc || i == count) break;
    rc = read_node(l, node, i++, t);
  }
  t->tree.num_nodes = count;
  t->tree.nodes = t->nodes;
  t->tree.device = t->device;
  t->tree.family = t->family;
  t->tree.provenance = t->provenance;
  char why[300];
  if (!rc && aa_tree_check(&t->tree, why, sizeof why)) rc = load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "%s", why);
  if (rc) {
    free(t);
    return -1;
  }
  *out = t;
  return 0;
}

/* Line and column of a byte offset, for parse errors. */
static void line_col(const char *text, size_t offset, int *line, int *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < offset && text[i]; i++) {
    if (text[i] == '\n') ++*line, *col = 1;
    else ++*col;
  }
}

/* One load at a time: cJSON keeps its last error position in a global, and
 * the list of loaded trees below is appended to. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* Every tree ever loaded, newest first. A replaced tree is not freed: plans
 * made while it was current point at it. Kept on this list it stays
 * reachable (no leak report), and costs its size: ~70 bytes a node. */
static aa_loaded_tree *loaded_trees;
/* The tree in use, or NULL: the compiled-in trees. */
static _Atomic(aa_loaded_tree *) current;
static atomic_int load_called; /* anyattn_tree_load ran: $ANYATTN_TREE is not read after it */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static char env_error[640];

/* Reads, parses and checks the file; on success it becomes the tree in use. */
static int load_file(aa_load *l) {
  char *text = NULL;
  size_t size = 0;
  if (read_tree_file(l, &text, &size)) return -1;
  pthread_mutex_lock(&load_lock);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, size + 1, &end, 1); /* + 1: the NUL ends it, no trailing text */
  aa_loaded_tree *t = NULL;
  int rc;
  if (!root) {
    int line, col;
    line_col(text, end && end >= text && end <= text + size ? (size_t)(end - text) : size, &line, &col);
    rc = load_fail(l, ANYATTN_STATUS_INVALID_OPTION, "is not JSON (error at line %d, column %d)", line, col);
  } else {
    rc = read_tree(l, root, &t);
    cJSON_Delete(root);
  }
  if (rc == 0) {
    t->older = loaded_trees;
    loaded_trees = t;
    atomic_store(&current, t);
  }
  pthread_mutex_unlock(&load_lock);
  free(text);
  return rc;
}

static void load_env(void) {
  const char *path = getenv("ANYATTN_TREE");
  if (!path || !*path || atomic_load(&load_called)) return;
  aa_load l = {path, ANYATTN_STATUS_OK, ""};
  if (load_file(&l) == 0) return;
  snprintf(env_error, sizeof env_error, "%s", l.why);
  /* The one place the library prints: the variable is set outside the
   * program, whose calls all succeed, so no status can carry this. */
  fprintf(stderr, "anyattn: ignoring $ANYATTN_TREE: %s\n", l.why);
}

const aa_tree *aa_tree_loaded(void) {
  pthread_once(&env_once, load_env);
  aa_loaded_tree *t = atomic_load(&current);
  return t ? &t->tree : NULL;
}

const char *aa_tree_env_error(void) {
  pthread_once(&env_once, load_env);
  return env_error;
}

anyattn_status anyattn_tree_load(const char *path) {
  aa_clear_error();
  atomic_store(&load_called, 1);
  if (path == NULL) { /* back to the compiled-in trees */
    atomic_store(&current, NULL);
    return ANYATTN_STATUS_OK;
  }
  aa_load l = {path, ANYATTN_STATUS_OK, ""};
  if (load_file(&l)) return aa_error(l.status, "%s", l.why); /* the tree in use stays */
  return ANYATTN_STATUS_OK;
}
