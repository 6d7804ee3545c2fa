/* bench_cases.c: the batches `anyattn bench` times: the named workloads
 * (every backend's, GPU and CPU lists), the IBM grid, mixed batches, and
 * --cases lists; bench.c times them, cp_bench.c and tune.c take them too. */
#include "bench_cases.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_head_dim = BENCH_DEFAULT_D;

/* The case lists' allocations: a list the CLI cannot hold ends the command (status 1). */
static void *cases_alloc(void *old, size_t n, size_t size) {
  void *p = n <= SIZE_MAX / size ? realloc(old, n ? n * size : 1) : NULL;
  if (!p) {
    fprintf(stderr, "anyattn: out of memory building the bench cases\n");
    exit(1);
  }
  return p;
}

void bench_add_case(case_list *l, const char *name, int num_seqs, const int *q, const int *kv) {
  if (l->count == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->items = (bench_case *)cases_alloc(l->items, (size_t)l->cap, sizeof *l->items);
  }
  bench_case *c = &l->items[l->count++];
  snprintf(c->name, sizeof c->name, "%s", name);
  c->num_seqs = num_seqs;
  c->q_lens = (int *)cases_alloc(NULL, (size_t)num_seqs, sizeof(int));
  c->kv_lens = (int *)cases_alloc(NULL, (size_t)num_seqs, sizeof(int));
  memcpy(c->q_lens, q, (size_t)num_seqs * sizeof(int));
  memcpy(c->kv_lens, kv, (size_t)num_seqs * sizeof(int));
}

void bench_free_cases(case_list *l) {
  for (int i = 0; i < l->count; i++) {
    free(l->items[i].q_lens);
    free(l->items[i].kv_lens);
  }
  free(l->items);
}

/* `batch` sequences each decoding one token at context `ctx`. */
static void add_decode(case_list *l, int batch, int ctx) {
  char name[64];
  snprintf(name, sizeof name, "decode %dx%d", batch, ctx);
  bench_add_mixed(l, name, 0, 0, 0, batch, ctx);
}

/* `batch` causal prompts of `len` tokens each. */
static void add_prefill(case_list *l, int batch, int len) {
  int *q = (int *)cases_alloc(NULL, (size_t)batch, sizeof(int));
  int *kv = (int *)cases_alloc(NULL, (size_t)batch, sizeof(int));
  for (int i = 0; i < batch; i++) q[i] = len, kv[i] = len;
  char name[64];
  snprintf(name, sizeof name, "prefill %dx%d", batch, len);
  bench_add_case(l, name, batch, q, kv);
  free(q);
  free(kv);
}

/* `chunks` prefill chunks of `chunk_len` tokens at context `chunk_ctx`, then
 * `decodes` decodes at context `ctx` (chunks 0: a plain decode batch). */
void bench_add_mixed(case_list *l, const char *name, int chunks, int chunk_len, int chunk_ctx, int decodes,
                     int ctx) {
  int n = chunks + decodes;
  int *q = (int *)cases_alloc(NULL, (size_t)n, sizeof(int));
  int *kv = (int *)cases_alloc(NULL, (size_t)n, sizeof(int));
  for (int i = 0; i < chunks; i++) q[i] = chunk_len, kv[i] = chunk_ctx;
  for (int i = chunks; i < n; i++) q[i] = 1, kv[i] = ctx;
  bench_add_case(l, name, n, q, kv);
  free(q);
  free(kv);
}

/* The IBM grid (arXiv 2511.11581): batch x max length x decode share; lengths
 * cycle through max x {1.0, 0.1, 0.4, 0.5, 0.2}; the first round(share*batch)
 * sequences decode (q_len 1), the rest are prompts (q_len = kv_len). */
void bench_add_ibm(case_list *l) {
  static const int batches[] = {1, 4, 16, 64, 128};
  static const int maxlens[] = {128, 512, 2048, 4096};
  static const double shares[] = {0.0, 0.5, 1.0};
  static const double cycle[] = {1.0, 0.1, 0.4, 0.5, 0.2};
  for (int b = 0; b < 5; b++)
    for (int m = 0; m < 4; m++)
      for (int s = 0; s < 3; s++) {
        int n = batches[b];
        int n_decode = (int)floor(shares[s] * n + 0.5);
        int *q = (int *)cases_alloc(NULL, (size_t)n, sizeof(int));
        int *kv = (int *)cases_alloc(NULL, (size_t)n, sizeof(int));
        for (int i = 0; i < n; i++) {
          int len = (int)(maxlens[m] * cycle[i % 5]);
          if (len < 1) len = 1;
          kv[i] = len;
          q[i] = i < n_decode ? 1 : len;
        }
        char name[64];
        snprintf(name, sizeof name, "ibm b%d L%d d%.1f", n, maxlens[m], shares[s]);
        bench_add_case(l, name, n, q, kv);
        free(q);
        free(kv);
      }
}

int bench_parse_cases(case_list *l, const char *list) {
  const char *p = list;
  while (*p) {
    const int prefill = *p == 'p';
    if (prefill) p++;
    char *end = NULL;
    const long b = strtol(p, &end, 10);
    if (end == p || *end != 'x' || b < 1 || b > 4096) return -1;
    p = end + 1;
    const long n = strtol(p, &end, 10);
    if (end == p || (*end != ',' && *end != '\0') || n < 1 || n > (1L << 20)) return -1;
    p = *end == ',' ? end + 1 : end;
    if (prefill) add_prefill(l, (int)b, (int)n);
    else add_decode(l, (int)b, (int)n);
  }
  return l->count > 0 ? 0 : -1;
}

static const char *const workload_names[] = {"default",     "decode",           "prefill",    "mixed",    "ibm",
                                             "e2e-llama8b", "e2e-llama8b-step", "cp-prefill", "cp-decode"};

const char *bench_workload_names(void) {
  return "default, decode, prefill, mixed, ibm, e2e-llama8b, e2e-llama8b-step, cp-prefill, cp-decode";
}

int bench_workload_known(const char *name) {
  for (size_t i = 0; i < sizeof workload_names / sizeof workload_names[0]; i++)
    if (strcmp(name, workload_names[i]) == 0) return 1;
  return 0;
}

/* The GPU lists match ../shared/TARGETS.md's anchors; the CPU lists are the
 * same kinds of batches scaled to a few cores. */
void bench_build_workload(case_list *l, const char *w, int gpu) {
  int all = strcmp(w, "default") == 0;
  if (all || strcmp(w, "decode") == 0) {
    if (gpu) {
      static const int d[][2] = {{1, 500},   {1, 512},   {1, 8192},  {1, 32768}, {8, 4096},
                                 {32, 2048}, {32, 8192}, {64, 8192}, {128, 2048}};
      for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) add_decode(l, d[i][0], d[i][1]);
    } else {
      static const int d[][2] = {{1, 512}, {1, 8192}, {16, 4096}, {64, 1024}, {64, 2048}};
      for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (!all || d[i][0] * d[i][1] >= 65536) add_decode(l, d[i][0], d[i][1]);
    }
  }
  if (all || strcmp(w, "prefill") == 0) {
    if (gpu) {
      static const int p[][2] = {{1, 500}, {1, 2048}, {1, 8192}, {4, 4096}, {16, 1024}};
      for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) add_prefill(l, p[i][0], p[i][1]);
    } else {
      static const int p[][2] = {{1, 500}, {1, 1024}, {4, 512}};
      for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (!all || p[i][1] == 1024) add_prefill(l, p[i][0], p[i][1]);
    }
  }
  if (all || strcmp(w, "mixed") == 0) {
    if (gpu) {
      bench_add_mixed(l, "mixed 1x2048p+63d@2048", 1, 2048, 2048, 63, 2048);
      bench_add_mixed(l, "mixed 2x512c+126d@4096", 2, 512, 4096, 126, 4096);
    }
    bench_add_mixed(l, "mixed 1x512p+31d@1024", 1, 512, 512, 31, 1024);
  }
  if (strcmp(w, "ibm") == 0) bench_add_ibm(l);
}
