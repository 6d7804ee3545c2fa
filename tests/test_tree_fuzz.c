/* test_tree_fuzz.c: seeded random-mutation fuzzing of the two readers of
 * untrusted files, anyattn_tree_load and the sweep CSV reader of `anyattn fit`
 * (tf_read_csv), starting from the files of tests/corpus/. Each input either
 * loads and then behaves (a tree answers every feature vector with a config; a
 * sweep holds finite, in-range values and can be fitted) or is refused with a
 * message naming the file. Time-bounded; build with ASan/UBSan to catch memory
 * errors. The seed is printed; the input under test is the file printed first.
 *   usage: test_tree_fuzz CORPUS_DIR [SECONDS]   ($ANYATTN_SEED fixes the seed) */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "anyattn.h"
#include "tl_util.h"
#include "tree_fit.h"
#include "tl_check.h"

enum { MAX_SEEDS = 128, MAX_INPUT = 1 << 16 };

typedef struct {
  char *data;
  size_t size;
  int ok; /* an ok_* file: one the reader takes */
} blob;

typedef struct {
  blob items[MAX_SEEDS];
  int count;
} seed_set;


static int ends_with(const char *s, const char *tail) {
  const size_t n = strlen(s), m = strlen(tail);
  return n >= m && !strcmp(s + n - m, tail);
}

/* Every file in dir whose name ends with ext, up to MAX_INPUT bytes of it. */
static void load_seeds(const char *dir, const char *ext, seed_set *set) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) && set->count < MAX_SEEDS) {
    if (!ends_with(e->d_name, ext)) continue;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    char *buf = malloc(MAX_INPUT);
    const size_t n = buf ? fread(buf, 1, MAX_INPUT, f) : 0;
    fclose(f);
    if (!buf) continue;
    set->items[set->count++] = (blob){buf, n, !strncmp(e->d_name, "ok_", 3)};
  }
  closedir(d);
}

/* Half the time a file the reader takes (ok_*): its mutants get past the
 * parser to the checks behind it; else any seed. */
static const blob *pick_seed(const seed_set *set, uint64_t *rng) {
  int num_ok = 0;
  for (int i = 0; i < set->count; i++) num_ok += set->items[i].ok;
  if (num_ok == 0 || tl_rng_uniform(rng) < 0.5) return &set->items[tl_rng_int(rng, 0, set->count - 1)];
  int k = tl_rng_int(rng, 0, num_ok - 1);
  for (int i = 0; i < set->count; i++)
    if (set->items[i].ok && k-- == 0) return &set->items[i];
  return &set->items[0];
}

/* Tokens the readers treat specially: numbers at the edges of every range,
 * JSON structure, CSV separators, the keys of a tree node. */
static const char *const kTokens[] = {
    "1e300", "-1e30", "99999999999", "2147483647", "4294967296", "-1", "-0", "0", "1", "511", "512", "128",
    "129", "0.5", "1e999", "nan", "NaN", "inf", "-inf", "0x10", "\"", "\\", "\\u0000", "\\ud800", "{", "}",
    "[", "]", ",", ":", "null", "true", "false", "\"feature\": ", "\"left\": ", "\"right\": ",
    "\"threshold\": ", "\"splits\": ", "\"config\": ", "\"nodes\": ", "#", "# device: ", "\r\n", "\n",
    "cell,", ",,", "m16n64w4s2", "                                        "};

/* One edit. Most change a digit, which keeps the file's shape and so reaches
 * the checks behind the parser; the rest break the shape. */
static size_t mutate_once(char *buf, size_t n, const seed_set *set, uint64_t *rng) {
  const size_t pos = n ? (size_t)tl_rng_int(rng, 0, (int)n - 1) : 0;
  if (tl_rng_uniform(rng) < 0.5) { /* the first digit at or after pos becomes another */
    for (size_t i = pos; i < n; i++)
      if (buf[i] >= '0' && buf[i] <= '9') {
        buf[i] = (char)('0' + tl_rng_int(rng, 0, 9));
        break;
      }
    return n;
  }
  switch (tl_rng_int(rng, 0, 6)) {
  case 0: /* flip a bit */
    if (n) buf[pos] ^= (char)(1u << tl_rng_int(rng, 0, 7));
    return n;
  case 1: /* a byte from the syntax, else any byte */
    if (n) buf[pos] = tl_rng_uniform(rng) < 0.7 ? "{}[]\",:0123456789-+.eE \n\\#"[tl_rng_int(rng, 0, 26)]
                                                : (char)tl_rng_int(rng, 0, 255);
    return n;
  case 2: { /* delete a range */
    const size_t len = (size_t)tl_rng_int(rng, 1, 16);
    if (pos + len > n) return pos;
    memmove(buf + pos, buf + pos + len, n - pos - len);
    return n - len;
  }
  case 3: { /* insert a token */
    const char *tok = kTokens[tl_rng_int(rng, 0, (int)(sizeof kTokens / sizeof kTokens[0]) - 1)];
    const size_t len = strlen(tok);
    if (n + len > MAX_INPUT) return n;
    memmove(buf + pos + len, buf + pos, n - pos);
    memcpy(buf + pos, tok, len);
    return n + len;
  }
  case 4: { /* duplicate a range */
    const size_t len = (size_t)tl_rng_int(rng, 1, 64);
    if (pos + len > n || n + len > MAX_INPUT) return n;
    memmove(buf + pos + len, buf + pos, n - pos);
    return n + len;
  }
  case 5: /* truncate */
    return pos;
  default: { /* splice another seed's tail in */
    const blob *o = &set->items[tl_rng_int(rng, 0, set->count - 1)];
    if (!o->size) return n;
    const size_t from = (size_t)tl_rng_int(rng, 0, (int)o->size - 1), len = o->size - from;
    if (pos + len > MAX_INPUT) return n;
    memcpy(buf + pos, o->data + from, len);
    return pos + len;
  }
  }
}

static int write_input(const char *path, const char *buf, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  const int ok = fwrite(buf, 1, n, f) == n;
  return fclose(f) == 0 && ok ? 0 : -1;
}

static long accepted_trees, accepted_sweeps;

/* A loaded tree answers every feature vector, wild ones included. */
static void check_tree(const char *path, uint64_t *rng) {
  const anyattn_status st = anyattn_tree_load(path);
  accepted_trees += st == ANYATTN_STATUS_OK;
  if (st != ANYATTN_STATUS_OK) {
    EXPECT((st == ANYATTN_STATUS_INVALID_OPTION || st == ANYATTN_STATUS_INVALID_SIZE) &&
               strstr(anyattn_last_error(), path),
           "refused with %s '%s'", anyattn_status_name(st), anyattn_last_error());
    return;
  }
  anyattn_tree_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  EXPECT(anyattn_tree_get(NULL, NULL, &info) == ANYATTN_STATUS_OK && info.source == ANYATTN_TREE_SOURCE_FILE &&
             info.num_nodes >= 1 && info.num_nodes <= 512,
         "loaded tree: source %d, %d nodes", info.source, info.num_nodes);
  for (int k = 0; k < 8; k++) {
    double f[ANYATTN_TREE_FEATURE_COUNT];
    for (int i = 0; i < ANYATTN_TREE_FEATURE_COUNT; i++)
      f[i] = (tl_rng_uniform(rng) - 0.25) * pow(10.0, tl_rng_int(rng, 0, 300));
    anyattn_tree_choice ch;
    memset(&ch, 0, sizeof ch);
    ch.struct_size = sizeof ch;
    EXPECT(anyattn_tree_choose(NULL, NULL, f, ANYATTN_TREE_FEATURE_COUNT, &ch) == ANYATTN_STATUS_OK &&
               ch.config[0] && strlen(ch.config) < sizeof ch.config && ch.splits >= 0 && ch.splits <= 128,
           "choice '%s'/%d: %s", ch.config, ch.splits, anyattn_last_error());
  }
}

/* A sweep that reads holds only values the fitter can take; fitting it works. */
static void check_sweep(const char *path, FILE *sink) {
  tf_table t;
  char err[640];
  if (tf_read_csv(path, &t, err, sizeof err) != 0) {
    EXPECT(!strncmp(err, "sweep '", 7) && strstr(err, path), "refused with '%s'", err);
    return;
  }
  accepted_sweeps++;
  EXPECT(t.num_cells >= 1 && t.num_cells <= TF_MAX_CELLS && t.num_cands >= 1 && t.num_cands <= TF_MAX_CANDS,
         "%d cells x %d candidates", t.num_cells, t.num_cands);
  int bad = 0;
  for (int i = 0; i < t.num_cells; i++) {
    const double *f = t.features + (size_t)i * ANYATTN_TREE_FEATURE_COUNT;
    for (int k = 0; k < ANYATTN_TREE_FEATURE_COUNT; k++) bad += !isnan(f[0]) && !(isfinite(f[k]) && f[k] >= 0);
    for (int c = 0; c < t.num_cands; c++) {
      const double us = t.us[(size_t)i * t.num_cands + c];
      bad += !(us == INFINITY || (isfinite(us) && us > 0));
    }
  }
  for (int c = 0; c < t.num_cands; c++)
    bad += !t.cand_config[c][0] || t.cand_splits[c] < 0 || t.cand_splits[c] > TF_MAX_SPLITS;
  EXPECT(bad == 0, "%d values out of range in a sweep that read", bad);
  tf_node nodes[63];
  const int n = tf_fit(&t, 5, 1, nodes, 63);
  EXPECT(n > 0, "fit of a sweep that read: %d", n);
  if (n > 0) tf_report(&t, nodes, sink);
  tf_free(&t);
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: test_tree_fuzz CORPUS_DIR [SECONDS]\n");
    return 2;
  }
  const double seconds = argc == 3 ? atof(argv[2]) : 3.0;
  const uint64_t seed = tl_seed_from_env_or_time();
  uint64_t rng = seed;
  seed_set trees = {0}, sweeps = {0};
  char dir[1100], tree_path[300], sweep_path[300];
  snprintf(dir, sizeof dir, "%s/tree", argv[1]);
  load_seeds(dir, ".json", &trees);
  snprintf(dir, sizeof dir, "%s/sweep", argv[1]);
  load_seeds(dir, ".csv", &sweeps);
  const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(tree_path, sizeof tree_path, "%s/anyattn_fuzz.%d.json", tmp, (int)getpid());
  snprintf(sweep_path, sizeof sweep_path, "%s/anyattn_fuzz.%d.csv", tmp, (int)getpid());
  printf("test_tree_fuzz: seed 0x%llx (rerun with ANYATTN_SEED=0x%llx), %.1f s, %d tree and %d sweep seeds;\n"
         "  inputs under test: %s, %s\n",
         (unsigned long long)seed, (unsigned long long)seed, seconds, trees.count, sweeps.count, tree_path, sweep_path);
  fflush(stdout);
  EXPECT(trees.count >= 2 && sweeps.count >= 2, "corpus seeds in %s", argv[1]);
  FILE *sink = fopen("/dev/null", "w");
  char *buf = malloc(MAX_INPUT);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long iters = 0;
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    const double elapsed = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
    if (!buf || !sink || !trees.count || !sweeps.count || elapsed >= seconds) break;
    const int tree = iters++ % 2 == 0;
    const seed_set *set = tree ? &trees : &sweeps;
    const blob *b = pick_seed(set, &rng);
    size_t n = b->size;
    memcpy(buf, b->data, n);
    for (int m = tl_rng_uniform(&rng) < 0.6 ? 1 : tl_rng_int(&rng, 2, 4); m > 0; m--) n = mutate_once(buf, n, set, &rng);
    const char *path = tree ? tree_path : sweep_path;
    if (write_input(path, buf, n)) {
      printf("FAIL: cannot write %s\n", path);
      failures++;
      break;
    }
    if (tree) check_tree(path, &rng);
    else check_sweep(path, sink);
    if (failures) {
      printf("  the failing input stays in %s\n", path);
      break;
    }
    if (tree && iters % 64 == 1) anyattn_tree_load(NULL);
  }
  if (!failures) {
    remove(tree_path);
    remove(sweep_path);
  }
  if (sink) fclose(sink);
  free(buf);
  for (int i = 0; i < trees.count; i++) free(trees.items[i].data);
  for (int i = 0; i < sweeps.count; i++) free(sweeps.items[i].data);
  printf("test_tree_fuzz: %ld inputs (%ld trees and %ld sweeps read, the rest refused): %s\n", iters, accepted_trees,
         accepted_sweeps, failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
