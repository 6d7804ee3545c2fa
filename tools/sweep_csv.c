/* sweep_csv.c: reads the sweep CSV `anyattn tune` writes into a tf_table for
 * the fitter. The file is untrusted input (`anyattn fit --in` takes any path):
 * a regular file of bounded size, every field parsed in full and checked for
 * range and finiteness before use, each error naming the line and field. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "configs.h"
#include "tree_fit.h"

/* Columns: cell, the features, then config, splits, us, ok. Lines starting
 * with '#' carry "# key: value" metadata (device, family, date, driver). */
#define NF ANYATTN_TREE_FEATURE_COUNT
enum { COL_CELL = 0, COL_CONFIG = 1 + NF, COL_SPLITS, COL_US, COL_OK, NUM_COLS };

/* A cell is keyed by its id and its shape (head dim, group, kv_bytes: what a
 * sweep holds fixed), so sweeps of several shapes over one grid concatenate
 * into one file: their cells share ids but not shapes. */
typedef struct {
  int cell, cand, line, file;
  double us;
  double f[NF];
} sweep_row;

enum { MAX_FILES = 16 }; /* paths in one --in list */

typedef struct {
  const char *path; /* the file being read, or the one a message is about */
  char paths[MAX_FILES][1024];
  int file, num_files;
  size_t total; /* bytes of the files read so far */
  char *err;
  size_t err_size;
  tf_table *t;
  sweep_row *rows;
  size_t num_rows, cap_rows;
} sweep_reader;

static const char *col_name(int c) {
  if (c == COL_CELL) return "cell";
  if (c < COL_CONFIG) return anyattn_tree_feature_name(c - 1);
  static const char *const tail[] = {"config", "splits", "us", "ok"};
  return c < NUM_COLS ? tail[c - COL_CONFIG] : "?";
}

/* "sweep 'PATH'[: line N][, field F (NAME)]: message"; returns -1. */
static int fail(sweep_reader *r, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(sweep_reader *r, int line, int col, const char *fmt, ...) {
  char msg[256], at[96] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (line > 0 && col >= 0) snprintf(at, sizeof at, ": line %d, field %d (%s)", line, col + 1, col_name(col));
  else if (line > 0) snprintf(at, sizeof at, ": line %d", line);
  if (r->err && r->err_size) snprintf(r->err, r->err_size, "sweep '%s'%s: %s", r->path, at, msg);
  return -1;
}

/* The whole file, NUL-terminated (caller frees). Opened without blocking and
 * checked on the descriptor: a FIFO or a directory is an error, never a wait. */
static int read_whole(sweep_reader *r, char **text, size_t *size) {
  *text = NULL;
  const int fd = open(r->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fail(r, 0, -1, "cannot open (%s)", strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail(r, 0, -1, "is %s, not a regular file",
                S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a special file");
  }
  if (st.st_size > TF_MAX_CSV_BYTES) {
    close(fd);
    return fail(r, 0, -1, "is %lld bytes, at most %d", (long long)st.st_size, TF_MAX_CSV_BYTES);
  }
  if (r->total + (size_t)st.st_size > (size_t)TF_MAX_CSV_BYTES) {
    close(fd);
    return fail(r, 0, -1, "takes the list's sweeps past %d bytes in all", TF_MAX_CSV_BYTES);
  }
  r->total += (size_t)st.st_size;
  const size_t cap = (size_t)st.st_size + 1; /* one byte more tells a file that grew */
  char *buf = malloc(cap + 1);
  if (!buf) {
    close(fd);
    return fail(r, 0, -1, "no memory to read it");
  }
  size_t got = 0;
  int read_err = 0;
  while (got < cap) {
    const ssize_t n = read(fd, buf + got, cap - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) read_err = errno;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  if (got != (size_t)st.st_size) {
    free(buf);
    return got < (size_t)st.st_size ? fail(r, 0, -1, "cannot read (%s)", read_err ? strerror(read_err) : "it shrank")
                                    : fail(r, 0, -1, "changed while being read");
  }
  buf[got] = '\0';
  *text = buf;
  *size = got;
  return 0;
}

/* Integers: decimal digits only, range-checked before the cast. */
static int parse_int(sweep_reader *r, int line, int col, const char *s, long lo, long hi, int *out) {
  if (!s[0]) return fail(r, line, col, "is empty");
  for (const char *c = s; *c; c++)
    if (*c < '0' || *c > '9') return fail(r, line, col, "'%.40s' is not a non-negative integer", s);
  errno = 0;
  const long long v = strtoll(s, NULL, 10);
  if (errno == ERANGE || v < lo || v > hi) return fail(r, line, col, "%.40s is not in [%ld, %ld]", s, lo, hi);
  *out = (int)v;
  return 0;
}

/* Numbers: the whole field, finite and >= 0 (counts and times). */
static int parse_double(sweep_reader *r, int line, int col, const char *s, double *out) {
  char *end = NULL;
  if (!s[0]) return fail(r, line, col, "is empty");
  const double v = strtod(s, &end);
  if (end == s || *end) return fail(r, line, col, "'%.40s' is not a number", s);
  if (!isfinite(v) || v < 0) return fail(r, line, col, "%.40s is not a finite number >= 0", s);
  *out = v;
  return 0;
}

static int parse_meta(sweep_reader *r, int line, const char *text) {
  static const char *const keys[] = {"# device: ", "# family: ", "# date: ", "# driver: "};
  char *const dst[] = {r->t->device, r->t->family, r->t->date, r->t->driver};
  const size_t size[] = {sizeof r->t->device, sizeof r->t->family, sizeof r->t->date, sizeof r->t->driver};
  for (int k = 0; k < 4; k++) {
    const size_t n = strlen(keys[k]);
    if (strncmp(text, keys[k], n) != 0) continue;
    const size_t len = strlen(text + n);
    if (len >= size[k])
      return fail(r, line, -1, "%.*s is %zu characters, at most %zu", (int)(n - 4), keys[k] + 2, len, size[k] - 1);
    if (k < 2 && dst[k][0] && strcmp(dst[k], text + n) != 0) /* one tree serves one device */
      return fail(r, line, -1, "%.*s '%.64s' differs from '%.64s' earlier", (int)(n - 4), keys[k] + 2, text + n,
                  dst[k]);
    memcpy(dst[k], text + n, len + 1);
  }
  return 0;
}

/* The header row names this build's columns, so a sweep with other features is refused. */
static int check_header(sweep_reader *r, int line, const char *text) {
  char want[256] = "";
  size_t n = 0;
  for (int c = 0; c < NUM_COLS; c++)
    n += (size_t)snprintf(want + n, sizeof want - n, "%s%s", c ? "," : "", col_name(c));
  if (strcmp(text, want) != 0) return fail(r, line, -1, "the header is not '%s'", want);
  return 0;
}

static int cand_index(sweep_reader *r, int line, const char *config, int splits, int *out) {
  tf_table *t = r->t;
  for (int c = 0; c < t->num_cands; c++)
    if (!strcmp(t->cand_config[c], config) && t->cand_splits[c] == splits) return *out = c, 0;
  if (t->num_cands == TF_MAX_CANDS) return fail(r, line, COL_CONFIG, "over %d candidates", TF_MAX_CANDS);
  char(*names)[TF_CONFIG_NAME_MAX] = realloc(t->cand_config, (size_t)(t->num_cands + 1) * sizeof *names);
  if (names) t->cand_config = names;
  int *sp = names ? realloc(t->cand_splits, (size_t)(t->num_cands + 1) * sizeof *sp) : NULL;
  if (!sp) return fail(r, line, COL_CONFIG, "no memory for candidates");
  t->cand_splits = sp;
  snprintf(t->cand_config[t->num_cands], TF_CONFIG_NAME_MAX, "%s", config);
  t->cand_splits[t->num_cands] = splits;
  *out = t->num_cands++;
  return 0;
}

static int check_config(sweep_reader *r, int line, const char *s) {
  const size_t n = strlen(s);
  if (n == 0 || n >= TF_CONFIG_NAME_MAX)
    return fail(r, line, COL_CONFIG, "is %zu characters, want 1 to %d", n, TF_CONFIG_NAME_MAX - 1);
  for (const char *c = s; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
      return fail(r, line, COL_CONFIG, "'%.40s' is not a config name (letters, digits, _)", s);
  return 0;
}

/* One data row: exactly NUM_COLS fields, each checked. */
static int parse_row(sweep_reader *r, int line, char *text) {
  char *f[NUM_COLS];
  int n = 0;
  for (char *p = text;; p++) { /* split at commas, keeping empty fields */
    if (n == NUM_COLS) return fail(r, line, -1, "has over %d fields", NUM_COLS);
    f[n++] = p;
    p = strchr(p, ',');
    if (!p) break;
    *p = '\0';
  }
  if (n != NUM_COLS) return fail(r, line, -1, "has %d fields, a sweep row has %d", n, NUM_COLS);
  int cell = 0, splits = 0, ok = 0, cand = 0;
  double fv[NF], us;
  if (parse_int(r, line, COL_CELL, f[COL_CELL], 0, TF_MAX_CELLS - 1, &cell)) return -1;
  for (int i = 0; i < NF; i++)
    if (parse_double(r, line, 1 + i, f[1 + i], &fv[i])) return -1;
  if (check_config(r, line, f[COL_CONFIG]) || parse_int(r, line, COL_SPLITS, f[COL_SPLITS], 0, TF_MAX_SPLITS, &splits) ||
      parse_double(r, line, COL_US, f[COL_US], &us) || parse_int(r, line, COL_OK, f[COL_OK], 0, 1, &ok))
    return -1;
  if (ok && us <= 0) return fail(r, line, COL_US, "is %.17g for a run marked ok", us);
  if (cand_index(r, line, f[COL_CONFIG], splits, &cand)) return -1;
  if (r->num_rows == r->cap_rows) {
    const size_t cap = r->cap_rows ? 2 * r->cap_rows : 256;
    sweep_row *rows = realloc(r->rows, cap * sizeof *rows);
    if (!rows) return fail(r, line, -1, "no memory for %zu rows", cap);
    r->rows = rows;
    r->cap_rows = cap;
  }
  sweep_row *row = &r->rows[r->num_rows++];
  row->cell = cell;
  row->cand = cand;
  row->line = line;
  row->file = r->file;
  row->us = ok ? us : INFINITY;
  memcpy(row->f, fv, sizeof fv);
  return 0;
}

static int parse_lines(sweep_reader *r, char *text, size_t size) {
  int line = 0;
  for (char *p = text; p < text + size;) {
    char *nl = memchr(p, '\n', (size_t)(text + size - p));
    char *end = nl ? nl : text + size;
    line++; /* under 2^27 lines: the file is at most TF_MAX_CSV_BYTES */
    *end = '\0';
    if (end > p && end[-1] == '\r') end[-1] = '\0';
    int rc = 0;
    if (p[0] == '#') rc = parse_meta(r, line, p);
    else if (!strncmp(p, "cell,", 5)) rc = check_header(r, line, p); /* one per concatenated file */
    else if (p[0]) rc = parse_row(r, line, p);
    if (rc) return -1;
    p = end + 1;
  }
  return 0;
}

/* Row order of the matrix: by shape, then cell id, then line. */
static int shape_cmp(const double *a, const double *b) {
  static const int shape[] = {ANYATTN_TREE_FEATURE_HEAD_DIM, ANYATTN_TREE_FEATURE_GROUP, ANYATTN_TREE_FEATURE_KV_BYTES};
  for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++)
    if (a[shape[i]] != b[shape[i]]) return a[shape[i]] < b[shape[i]] ? -1 : 1;
  return 0;
}

static int by_key(const void *pa, const void *pb) {
  const sweep_row *a = pa, *b = pb;
  const int s = shape_cmp(a->f, b->f);
  if (s) return s;
  if (a->cell != b->cell) return a->cell < b->cell ? -1 : 1;
  if (a->file != b->file) return a->file < b->file ? -1 : 1;
  return (a->line > b->line) - (a->line < b->line);
}

/* For a row the library build compiles for fp8 caches only
 * (AA_CONFIG_FP8_ONLY_LIBRARY, configs.h), the name of its half-keys row
 * (the same block_m, warps and stages, half the keys) into out; 0, or -1 for
 * any other config. */
static int fp8_only_half_name(const char *name, char *out, size_t size) {
  int m = 0, n = 0, w = 0, s = 0, used = 0;
  if (sscanf(name, "m%dn%dw%ds%d%n", &m, &n, &w, &s, &used) != 4 || name[used] || n < 2 || n % 2) return -1;
  if (!AA_CONFIG_FP8_ONLY_LIBRARY(m, n, w, s)) return -1;
  return snprintf(out, size, "m%dn%dw%ds%d", m, n / 2, w, s) < (int)size ? 0 : -1;
}

/* Over a 16-bit cache a row compiled for fp8 caches only has no kernel, and
 * run runs a leaf naming it as its half-keys row with the same split count
 * (src/gpu/policy.c, aa_half_keys_row), so such a cell without a time for it
 * (not swept, or failed) gets that row's time. Over fp8 caches a missing
 * time stays missing: the row runs there, untimed. */
static void half_keys_times(tf_table *t) {
  const size_t k = (size_t)t->num_cands;
  for (int c = 0; c < t->num_cands; c++) {
    char half[TF_CONFIG_NAME_MAX];
    if (fp8_only_half_name(t->cand_config[c], half, sizeof half)) continue;
    const int h = tf_find_cand(t, half, t->cand_splits[c]);
    if (h < 0) continue;
    for (int i = 0; i < t->num_cells; i++)
      if (t->features[(size_t)i * NF + ANYATTN_TREE_FEATURE_KV_BYTES] >= 2 && isinf(t->us[(size_t)i * k + c]))
        t->us[(size_t)i * k + c] = t->us[(size_t)i * k + h];
  }
}

/* Appends, for each cell with a mean context, its copy without one (mean_kv
 * 0, the feature run() computes when batch->sum_kv_len is 0): the times are
 * the cell's, since the hint changes the choice, never the kernel. */
static int add_unhinted(sweep_reader *r) {
  tf_table *t = r->t;
  const size_t k = (size_t)t->num_cands;
  int extra = 0;
  for (int i = 0; i < t->num_cells; i++) extra += t->features[(size_t)i * NF + ANYATTN_TREE_FEATURE_MEAN_KV] > 0;
  t->num_swept = t->num_cells;
  if (extra == 0) return 0;
  const long long cells = (long long)t->num_cells + extra;
  if (cells > TF_MAX_CELLS || cells * t->num_cands > TF_MAX_MATRIX)
    return fail(r, 0, -1, "%lld cells with their copies without mean_kv, x %d candidates, is over %d cells or %d",
                cells, t->num_cands, TF_MAX_CELLS, TF_MAX_MATRIX);
  double *us = realloc(t->us, (size_t)cells * k * sizeof *us);
  if (us) t->us = us;
  double *f = us ? realloc(t->features, (size_t)cells * NF * sizeof *f) : NULL;
  if (!f) return fail(r, 0, -1, "no memory for %lld cells x %d candidates", cells, t->num_cands);
  t->features = f;
  int c = t->num_cells;
  for (int i = 0; i < t->num_swept; i++) {
    if (!(t->features[(size_t)i * NF + ANYATTN_TREE_FEATURE_MEAN_KV] > 0)) continue;
    memcpy(t->features + (size_t)c * NF, t->features + (size_t)i * NF, NF * sizeof *f);
    t->features[(size_t)c * NF + ANYATTN_TREE_FEATURE_MEAN_KV] = 0.0;
    memcpy(t->us + (size_t)c * k, t->us + (size_t)i * k, k * sizeof *us);
    c++;
  }
  t->num_cells = c;
  return 0;
}

/* Lays the rows out as the [cells][candidates] matrix, one cell per (id,
 * shape) in that order; every row of a cell must carry its first row's
 * features, and later rows of a (cell, candidate) replace earlier ones. */
static int build_matrix(sweep_reader *r) {
  tf_table *t = r->t;
  if (r->num_rows == 0 || t->num_cands == 0) return fail(r, 0, -1, "has no sweep rows");
  qsort(r->rows, r->num_rows, sizeof *r->rows, by_key);
  size_t cells = 0, start = 0; /* start: the current cell's first row */
  for (size_t i = 0; i < r->num_rows; i++) {
    const sweep_row *a = &r->rows[i], *first = &r->rows[start];
    if (i == 0 || first->cell != a->cell || shape_cmp(first->f, a->f) != 0) {
      cells++;
      start = i;
    } else if (memcmp(first->f, a->f, sizeof a->f) != 0) {
      r->path = r->paths[a->file];
      if (first->file == a->file)
        return fail(r, a->line, -1, "cell %d's features differ from those on line %d", a->cell, first->line);
      return fail(r, a->line, -1, "cell %d's features differ from those on line %d of '%s'", a->cell, first->line,
                  r->paths[first->file]);
    }
  }
  if (cells > TF_MAX_CELLS) return fail(r, 0, -1, "has %zu cells, at most %d", cells, TF_MAX_CELLS);
  t->num_cells = (int)cells;
  if ((long long)t->num_cells * t->num_cands > TF_MAX_MATRIX)
    return fail(r, 0, -1, "%d cells x %d candidates is over %d", t->num_cells, t->num_cands, TF_MAX_MATRIX);
  t->us = malloc((size_t)t->num_cells * t->num_cands * sizeof *t->us);
  t->features = malloc((size_t)t->num_cells * NF * sizeof *t->features);
  if (!t->us || !t->features)
    return fail(r, 0, -1, "no memory for %d cells x %d candidates", t->num_cells, t->num_cands);
  for (size_t i = 0; i < (size_t)t->num_cells * t->num_cands; i++) t->us[i] = INFINITY;
  size_t c = 0;
  for (size_t i = 0; i < r->num_rows; i++) {
    const sweep_row *a = &r->rows[i], *prev = i ? &r->rows[i - 1] : NULL;
    if (prev && (prev->cell != a->cell || shape_cmp(prev->f, a->f) != 0)) c++;
    memcpy(t->features + c * NF, a->f, sizeof a->f); /* the same features for every row of a cell */
    t->us[c * t->num_cands + a->cand] = a->us;
  }
  half_keys_times(t);
  return add_unhinted(r);
}

int tf_read_csv(const char *path, tf_table *t, char *err, size_t err_size) {
  memset(t, 0, sizeof *t);
  if (err && err_size) err[0] = '\0';
  sweep_reader *r = calloc(1, sizeof *r);
  if (!r) {
    if (err && err_size) snprintf(err, err_size, "sweep '%s': no memory to read it", path);
    return -1;
  }
  r->path = path;
  r->err = err;
  r->err_size = err_size;
  r->t = t;
  int rc = 0;
  /* A comma-separated list: sweeps of one device, read as one. */
  for (const char *p = path; rc == 0;) {
    const char *comma = strchr(p, ',');
    const size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == 0)
      rc = fail(r, 0, -1, "an empty path in the list");
    else if (r->num_files == MAX_FILES)
      rc = fail(r, 0, -1, "over %d files in the list", MAX_FILES);
    else if (len >= sizeof r->paths[0])
      rc = fail(r, 0, -1, "a path of %zu characters, at most %zu", len, sizeof r->paths[0] - 1);
    if (rc) break;
    r->file = r->num_files++;
    memcpy(r->paths[r->file], p, len);
    r->paths[r->file][len] = '\0';
    r->path = r->paths[r->file];
    char *text = NULL;
    size_t size = 0;
    rc = read_whole(r, &text, &size);
    if (!rc && memchr(text, '\0', size)) rc = fail(r, 0, -1, "holds a NUL byte");
    if (!rc) rc = parse_lines(r, text, size);
    free(text);
    if (!comma) break;
    p = comma + 1;
  }
  if (!rc) {
    r->path = path;
    rc = build_matrix(r);
  }
  free(r->rows);
  free(r);
  if (rc) tf_free(t);
  return rc;
}

void tf_free(tf_table *t) {
  free(t->features);
  free(t->us);
  free(t->cand_config);
  free(t->cand_splits);
  memset(t, 0, sizeof *t);
}
