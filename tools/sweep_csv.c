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

#include "tree_fit.h"

/* Columns: cell, the features, then config, splits, us, ok. Lines starting
 * with '#' carry "# key: value" metadata (device, family, date, driver). */
#define NF ANYATTN_TREE_FEATURE_COUNT
enum { COL_CELL = 0, COL_CONFIG = 1 + NF, COL_SPLITS, COL_US, COL_OK, NUM_COLS };

typedef struct {
  int cell, cand;
  double us;
} sweep_row;

typedef struct {
  const char *path;
  char *err;
  size_t err_size;
  tf_table *t;
  sweep_row *rows;
  size_t num_rows, cap_rows;
  double *feats;   /* [cap_cells][NF] */
  int *cell_line;  /* [cap_cells]: the line that gave the cell's features, 0: none yet */
  int cap_cells, max_cell;
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
    if (len >= size[k]) return fail(r, line, -1, "%.*s is %zu characters, at most %zu", (int)(n - 4), keys[k] + 2, len,
                                    size[k] - 1);
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

static int grow_cells(sweep_reader *r, int line, int cell) {
  if (cell < r->cap_cells) return 0;
  int cap = r->cap_cells ? r->cap_cells : 64;
  while (cap <= cell) cap = cap > TF_MAX_CELLS / 2 ? TF_MAX_CELLS : 2 * cap;
  double *f = realloc(r->feats, (size_t)cap * NF * sizeof *f);
  if (f) r->feats = f;
  int *l = f ? realloc(r->cell_line, (size_t)cap * sizeof *l) : NULL;
  if (!l) return fail(r, line, COL_CELL, "no memory for %d cells", cap);
  r->cell_line = l;
  for (int c = r->cap_cells; c < cap; c++) {
    l[c] = 0;
    for (int i = 0; i < NF; i++) f[(size_t)c * NF + i] = NAN;
  }
  r->cap_cells = cap;
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
  if (grow_cells(r, line, cell)) return -1;
  double *cf = r->feats + (size_t)cell * NF;
  if (r->cell_line[cell] && memcmp(cf, fv, sizeof fv) != 0)
    return fail(r, line, -1, "cell %d's features differ from those on line %d", cell, r->cell_line[cell]);
  if (!r->cell_line[cell]) memcpy(cf, fv, sizeof fv), r->cell_line[cell] = line;
  if (cell > r->max_cell) r->max_cell = cell;
  if (cand_index(r, line, f[COL_CONFIG], splits, &cand)) return -1;
  if (r->num_rows == r->cap_rows) {
    const size_t cap = r->cap_rows ? 2 * r->cap_rows : 256;
    sweep_row *rows = realloc(r->rows, cap * sizeof *rows);
    if (!rows) return fail(r, line, -1, "no memory for %zu rows", cap);
    r->rows = rows;
    r->cap_rows = cap;
  }
  r->rows[r->num_rows++] = (sweep_row){cell, cand, ok ? us : INFINITY};
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

/* Lays the rows out as the [cells][candidates] matrix; later rows of a
 * (cell, candidate) replace earlier ones. */
static int build_matrix(sweep_reader *r) {
  tf_table *t = r->t;
  if (r->max_cell < 0 || t->num_cands == 0) return fail(r, 0, -1, "has no sweep rows");
  t->num_cells = r->max_cell + 1;
  if ((long long)t->num_cells * t->num_cands > TF_MAX_MATRIX)
    return fail(r, 0, -1, "%d cells x %d candidates is over %d", t->num_cells, t->num_cands, TF_MAX_MATRIX);
  t->us = malloc((size_t)t->num_cells * t->num_cands * sizeof *t->us);
  if (!t->us) return fail(r, 0, -1, "no memory for %d cells x %d candidates", t->num_cells, t->num_cands);
  for (size_t i = 0; i < (size_t)t->num_cells * t->num_cands; i++) t->us[i] = INFINITY;
  for (size_t i = 0; i < r->num_rows; i++)
    t->us[(size_t)r->rows[i].cell * t->num_cands + r->rows[i].cand] = r->rows[i].us;
  t->features = r->feats; /* cap_cells >= num_cells; the rest is not read */
  r->feats = NULL;
  return 0;
}

int tf_read_csv(const char *path, tf_table *t, char *err, size_t err_size) {
  memset(t, 0, sizeof *t);
  if (err && err_size) err[0] = '\0';
  sweep_reader r;
  memset(&r, 0, sizeof r);
  r.path = path;
  r.err = err;
  r.err_size = err_size;
  r.t = t;
  r.max_cell = -1;
  char *text = NULL;
  size_t size = 0;
  int rc = read_whole(&r, &text, &size);
  if (!rc && memchr(text, '\0', size)) rc = fail(&r, 0, -1, "holds a NUL byte");
  if (!rc) rc = parse_lines(&r, text, size);
  if (!rc) rc = build_matrix(&r);
  free(text);
  free(r.rows);
  free(r.feats);
  free(r.cell_line);
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
