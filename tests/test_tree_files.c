/* test_tree_files.c: the readers of untrusted files on a corpus of bad ones
 * (tests/corpus/): anyattn_tree_load and the sweep CSV reader of `anyattn fit`
 * must refuse each with the status and message tests/corpus/{tree,sweep}/
 * expect.txt give, naming the file, and leave the tree in use in place. Plus
 * what cannot be committed: a directory, a FIFO, too many nodes, too large.
 *   usage: test_tree_files CORPUS_DIR */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "anyattn.h"
#include "tree_fit.h"
#include "tl_check.h"

/* The provenance of the tree in use, to see that a failed load kept it. */
static void tree_in_use(char *buf, size_t size) {
  anyattn_tree_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  buf[0] = '\0';
  if (anyattn_tree_get("any", "any", &info) == ANYATTN_STATUS_OK) snprintf(buf, size, "%s", info.provenance);
}

/* One file anyattn_tree_load must refuse with `status` and text `want`. */
static void expect_tree_refused(const char *path, anyattn_status status, const char *want) {
  char before[256], after[256];
  tree_in_use(before, sizeof before);
  const anyattn_status st = anyattn_tree_load(path);
  const char *msg = anyattn_last_error();
  EXPECT(st == status && strstr(msg, path) && strstr(msg, want), "%s: got %s '%s', want %s and '%s'", path,
         anyattn_status_name(st), msg, anyattn_status_name(status), want);
  tree_in_use(after, sizeof after);
  EXPECT(!strcmp(before, after), "%s: the tree in use changed from '%s' to '%s'", path, before, after);
}

/* Writes src with every occurrence of `from` replaced by `to` (the first only
 * when once is set) to dst; 0 on success. */
static int rewrite(const char *src, const char *dst, const char *from, const char *to, int once) {
  FILE *in = fopen(src, "r"), *out = fopen(dst, "w");
  char line[1024];
  int done = 0;
  while (in && out && fgets(line, sizeof line, in)) {
    char *at = done && once ? NULL : strstr(line, from);
    if (at) {
      fprintf(out, "%.*s%s%s", (int)(at - line), line, to, at + strlen(from));
      done = 1;
    } else {
      fputs(line, out);
    }
  }
  const int ok = in && out && done;
  if (in) fclose(in);
  if (out && fclose(out) != 0) return -1;
  return ok ? 0 : -1;
}

/* --in A.csv,B.csv: sweeps read as one, a cell per (id, shape). */
static void sweep_lists(const char *ok) {
  tf_table t;
  char err[640], list[2200];
  snprintf(list, sizeof list, "%s,%s", ok, ok); /* the same rows twice: the later replace the earlier */
  EXPECT(tf_read_csv(list, &t, err, sizeof err) == 0 && t.num_swept == 60 && t.num_cells == 120 && t.num_cands == 4,
         "%s: %s", list, err);
  tf_free(&t);
  EXPECT(rewrite(ok, "test_tree_files_fp8.csv", ",128,4,2,", ",128,4,1,", 0) == 0, "write test_tree_files_fp8.csv");
  snprintf(list, sizeof list, "%s,test_tree_files_fp8.csv", ok); /* one grid, two shapes */
  int fp8 = 0;
  if (tf_read_csv(list, &t, err, sizeof err) == 0) {
    for (int i = 0; i < t.num_swept; i++)
      fp8 += t.features[(size_t)i * ANYATTN_TREE_FEATURE_COUNT + ANYATTN_TREE_FEATURE_KV_BYTES] == 1;
    EXPECT(t.num_swept == 120 && fp8 == 60, "%s: %d cells swept, %d over fp8 (want 120, 60)", list, t.num_swept, fp8);
    tf_free(&t);
  } else {
    EXPECT(0, "%s: %s", list, err);
  }
  EXPECT(rewrite(ok, "test_tree_files_h100.csv", "# device: NVIDIA H200", "# device: NVIDIA H100", 1) == 0,
         "write test_tree_files_h100.csv");
  snprintf(list, sizeof list, "%s,test_tree_files_h100.csv", ok);
  EXPECT(tf_read_csv(list, &t, err, sizeof err) == -1 && strstr(err, "test_tree_files_h100.csv") &&
             strstr(err, "device 'NVIDIA H100' differs from 'NVIDIA H200'"),
         "two devices: '%s'", err);
  EXPECT(rewrite(ok, "test_tree_files_moved.csv", "0,1,128,128,128,128,128,4,2,128,m16n64w4s3",
                 "0,1,128,128,128,256,128,4,2,128,m16n64w4s3", 1) == 0,
         "write test_tree_files_moved.csv");
  snprintf(list, sizeof list, "%s,test_tree_files_moved.csv", ok);
  EXPECT(tf_read_csv(list, &t, err, sizeof err) == -1 && strstr(err, "test_tree_files_moved.csv': line 8") &&
             strstr(err, "cell 0's features differ from those on line 8 of '") && strstr(err, "ok_ibm_h200.csv"),
         "a cell's features differ across files: '%s'", err);
  snprintf(list, sizeof list, "%s,", ok);
  EXPECT(tf_read_csv(list, &t, err, sizeof err) == -1 && strstr(err, "an empty path in the list"), "'%s': '%s'", list,
         err);
  snprintf(list, sizeof list, "%s,no/such/sweep.csv", ok);
  EXPECT(tf_read_csv(list, &t, err, sizeof err) == -1 && strstr(err, "sweep 'no/such/sweep.csv': cannot open"),
         "a missing file in the list: '%s'", err);
  remove("test_tree_files_fp8.csv");
  remove("test_tree_files_h100.csv");
  remove("test_tree_files_moved.csv");
}

static void expect_sweep_refused(const char *path, const char *want) {
  tf_table t;
  char err[640];
  const int rc = tf_read_csv(path, &t, err, sizeof err);
  EXPECT(rc == -1 && strstr(err, path) && strstr(err, want) && t.num_cells == 0 && !t.us,
         "%s: got rc %d '%s', want -1 and '%s'", path, rc, err, want);
  if (rc == 0) tf_free(&t);
}

static anyattn_status status_from_name(const char *name) {
  static const anyattn_status all[] = {ANYATTN_STATUS_INVALID_OPTION, ANYATTN_STATUS_INVALID_SIZE,
                                       ANYATTN_STATUS_OUT_OF_MEMORY};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (!strcmp(anyattn_status_name(all[i]), name) ||
        !strcmp(anyattn_status_name(all[i]) + strlen("ANYATTN_STATUS_"), name))
      return all[i];
  return ANYATTN_STATUS_OK;
}

/* Runs every line of DIR/expect.txt: FILE<TAB>[STATUS<TAB>]TEXT. */
static int run_expect_file(const char *dir, int tree) {
  char path[1024], line[1024];
  snprintf(path, sizeof path, "%s/expect.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    printf("FAIL: cannot read %s\n", path);
    failures++;
    return 0;
  }
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (line[0] == '#' || !line[0]) continue;
    char *file = line, *rest = strchr(line, '\t');
    if (!rest) continue;
    *rest++ = '\0';
    char fpath[1200];
    snprintf(fpath, sizeof fpath, "%s/%s", dir, file);
    if (tree) {
      char *want = strchr(rest, '\t');
      if (!want) continue;
      *want++ = '\0';
      expect_tree_refused(fpath, status_from_name(rest), want);
    } else {
      expect_sweep_refused(fpath, rest);
    }
    n++;
  }
  fclose(f);
  return n;
}

/* A tree of `count` (odd) nodes: a right-leaning chain, each inner node's left a leaf. */
static void write_chain_tree(const char *path, int count) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "{\"device\": \"chain\", \"nodes\": [\n");
  for (int i = 0; i < count; i++) {
    const int inner = i % 2 == 0 && i + 2 < count;
    if (inner) fprintf(f, "{\"feature\": 4, \"threshold\": %d, \"left\": %d, \"right\": %d}", i, i + 1, i + 2);
    else fprintf(f, "{\"config\": \"m16n64w4s2\", \"splits\": 0}");
    fprintf(f, "%s\n", i + 1 < count ? "," : "");
  }
  fprintf(f, "]}\n");
  fclose(f);
}

/* What a corpus cannot hold: special files and sizes over the bounds. */
static void special_files(void) {
  char dir[256], fifo[300], big[300];
  snprintf(dir, sizeof dir, "%s/anyattn_tree_files.%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
  if (mkdir(dir, 0700) != 0) {
    printf("FAIL: cannot make %s\n", dir);
    failures++;
    return;
  }
  expect_tree_refused(dir, ANYATTN_STATUS_INVALID_OPTION, "is a directory, not a regular file");
  expect_sweep_refused(dir, "is a directory, not a regular file");
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  if (mkfifo(fifo, 0600) == 0) { /* opening it to read would wait for a writer: it must not */
    expect_tree_refused(fifo, ANYATTN_STATUS_INVALID_OPTION, "is a FIFO, not a regular file");
    expect_sweep_refused(fifo, "is a FIFO, not a regular file");
    remove(fifo);
  } else {
    printf("SKIP FIFO: mkfifo failed\n");
  }
  snprintf(big, sizeof big, "%s/big.json", dir);
  write_chain_tree(big, 511); /* the largest tree of 2-child nodes within 512: loads */
  EXPECT(anyattn_tree_load(big) == ANYATTN_STATUS_OK, "511 nodes: %s", anyattn_last_error());
  write_chain_tree(big, 513);
  expect_tree_refused(big, ANYATTN_STATUS_INVALID_SIZE, "\"nodes\" has 513 nodes, at most 512");
  FILE *f = fopen(big, "w");
  if (f) { /* valid JSON, 2 MiB of it */
    fprintf(f, "{\"pad\": \"");
    for (int i = 0; i < (2 << 20); i++) fputc('x', f);
    fprintf(f, "\", \"nodes\": [{\"config\": \"a\"}]}\n");
    fclose(f);
  }
  expect_tree_refused(big, ANYATTN_STATUS_INVALID_SIZE, "bytes, at most 1048576");
  remove(big);
  rmdir(dir);
  anyattn_tree_load(NULL);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_tree_files CORPUS_DIR\n");
    return 2;
  }
  char tree_dir[1024], sweep_dir[1024], ok[1100];
  snprintf(tree_dir, sizeof tree_dir, "%s/tree", argv[1]);
  snprintf(sweep_dir, sizeof sweep_dir, "%s/sweep", argv[1]);
  /* A good tree first, so each refusal can be seen to keep it. */
  snprintf(ok, sizeof ok, "%s/ok_one_leaf.json", tree_dir);
  EXPECT(anyattn_tree_load(ok) == ANYATTN_STATUS_OK, "%s: %s", ok, anyattn_last_error());
  snprintf(ok, sizeof ok, "%s/ok_h200.json", tree_dir);
  EXPECT(anyattn_tree_load(ok) == ANYATTN_STATUS_OK, "%s: %s", ok, anyattn_last_error());
  const int nt = run_expect_file(tree_dir, 1);
  tf_table t;
  char err[640];
  snprintf(ok, sizeof ok, "%s/ok_ibm_h200.csv", sweep_dir);
  EXPECT(tf_read_csv(ok, &t, err, sizeof err) == 0 && t.num_swept == 60 && t.num_cells == 120 && t.num_cands == 4,
         "%s: %s", ok, err);
  tf_free(&t);
  sweep_lists(ok);
  const int ns = run_expect_file(sweep_dir, 0);
  special_files();
  EXPECT(nt > 20 && ns > 15, "corpus: %d tree files, %d sweeps", nt, ns);
  printf("test_tree_files: %d tree files, %d sweeps, %d checks: %s (%d failed)\n", nt, ns, checks,
         failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
