/* cpu_ab.c: two CPU builds (or two ANYATTN_CPU_ISA choices) of the library on
 * one case in one process, calls alternating A B A B, so the drift of a shared
 * machine hits both; prints each side's median and the B/A ratio.
 *
 *   cc -O2 -o /tmp/cpu_ab dev/cpu_ab.c -ldl -lm
 *   /tmp/cpu_ab build/libanyattn.so:fp32 build/libanyattn.so:amx p1x1024 bf16 [rounds]
 * A side is LIB[:ISA][@KV][#SPREAD] (ISA: the ANYATTN_CPU_ISA value its plans are made
 * with; KV: fp8 or fnuz for caches of fp8 codes, random finite ones, bf16/f16 only;
 * SPREAD: the ANYATTN_CPU_DECODE_SPREAD value, 1, 2 or 4);
 * a case is pBxL (causal prefill), dBxC (decode, B sequences at context C) or
 * mixed (one 512-token prefill and 31 decodes at 1024); shapes as `anyattn bench`
 * (32 q heads, 8 kv heads, head dim 128, page 16, shuffled pages).
 * AB_THP=1 puts the K/V caches on 2 MiB pages (madvise(MADV_HUGEPAGE), Linux; the
 * huge pages granted are printed), to tell the cost of TLB misses on the
 * shuffled pages.
 * AB_HEAD_DIM=N runs the case at head dim N (default 128).
 * AB_PAGES=ordered gives each sequence its pages in address order, one after
 * another (the caches read as one stream), instead of a shuffled order.
 * AB_CLOCK=thread times each call in the calling thread's CPU time instead
 * of wall time: with OMP_NUM_THREADS=1 the time a shared machine gives other
 * processes then stays out of the figures:
 *   AB_CLOCK=thread OMP_NUM_THREADS=1 /tmp/cpu_ab LIB LIB@fp8 d16x4096 bf16 11 */
#define _DEFAULT_SOURCE /* madvise */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "../include/anyattn.h"

enum { HQ = 32, HKV = 8, BS = 16, MAXS = 1024 };
static int D = 128; /* AB_HEAD_DIM */

/* A cache of n bytes: plain malloc, or under AB_THP whole 2 MiB pages asked
 * to be huge. */
static void *cache_alloc(size_t n) {
  const char *thp = getenv("AB_THP");
  if (!thp || strcmp(thp, "1")) return malloc(n);
  const size_t huge = (size_t)2 << 20;
  void *p = aligned_alloc(huge, (n + huge - 1) / huge * huge);
#ifdef __linux__
  if (p && madvise(p, (n + huge - 1) / huge * huge, MADV_HUGEPAGE))
    fprintf(stderr, "AB_THP: madvise failed; the cache stays on small pages\n");
#endif
  return p;
}

/* The huge pages this process holds (Linux), after the caches are filled. */
static void print_huge_pages(void) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "AnonHugePages:", 14)) printf("AB_THP: %s", line);
  if (f) fclose(f);
}

typedef struct {
  anyattn_status (*context_create)(anyattn_backend, int, anyattn_context **);
  void (*problem_init)(anyattn_problem *);
  void (*limits_init)(anyattn_limits *);
  void (*batch_init)(anyattn_batch *);
  void (*tensors_init)(anyattn_tensors *);
  anyattn_status (*plan_create)(anyattn_context *, const anyattn_problem *, const anyattn_limits *, anyattn_plan **);
  size_t (*workspace_size)(const anyattn_plan *);
  const char *(*describe)(const anyattn_plan *);
  anyattn_status (*run)(const anyattn_plan *, const anyattn_batch *, const anyattn_tensors *, void *, size_t, void *);
  const char *(*last_error)(void);
  anyattn_plan *plan;
  void *ws;
  size_t ws_bytes;
} side;

static void *sym(void *h, const char *n) {
  void *p = dlsym(h, n);
  if (!p) {
    fprintf(stderr, "cpu_ab: %s: %s\n", n, dlerror());
    exit(1);
  }
  return p;
}

static double now(void) {
  struct timespec t;
  static int thread = -1;
  if (thread < 0) thread = getenv("AB_CLOCK") && !strcmp(getenv("AB_CLOCK"), "thread");
  clock_gettime(thread ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int cmpd(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: cpu_ab LIB_A[:ISA][@KV][#SPREAD] LIB_B[...] pBxL|dBxC|mixed bf16|f16|f32 [rounds]\n");
    return 2;
  }
  const int rounds = argc > 5 ? atoi(argv[5]) : 11;
  if (getenv("AB_HEAD_DIM")) D = atoi(getenv("AB_HEAD_DIM"));
  if (D < 1 || D > 512) {
    fprintf(stderr, "cpu_ab: AB_HEAD_DIM %d is not 1..512\n", D);
    return 2;
  }
  const anyattn_dtype dt = !strcmp(argv[4], "f32") ? ANYATTN_DTYPE_F32 : !strcmp(argv[4], "f16") ? ANYATTN_DTYPE_F16
                                                                                                  : ANYATTN_DTYPE_BF16;
  int ns = 0, ql[MAXS], kl[MAXS], b, n;
  if (sscanf(argv[3], "p%dx%d", &b, &n) == 2 || sscanf(argv[3], "d%dx%d", &b, &n) == 2) {
    if (b < 1 || b > MAXS || n < 1) {
      fprintf(stderr, "cpu_ab: case %s: 1 to %d sequences of 1 key or more\n", argv[3], MAXS);
      return 2;
    }
    for (ns = 0; ns < b && ns < MAXS; ns++) {
      ql[ns] = argv[3][0] == 'p' ? n : 1;
      kl[ns] = n;
    }
  } else {
    ql[0] = kl[0] = 512;
    for (ns = 1; ns < 32; ns++) ql[ns] = 1, kl[ns] = 1024;
  }
  int nt = 0, pages = 0, maxp = 0, maxk = 0;
  for (int s = 0; s < ns; s++) maxk = kl[s] > maxk ? kl[s] : maxk;
  double flops = 0;
  int32_t cu[MAXS + 1] = {0};
  for (int s = 0; s < ns; s++) {
    nt += ql[s];
    cu[s + 1] = nt;
    const int p = (kl[s] + BS - 1) / BS;
    pages += p;
    maxp = p > maxp ? p : maxp;
    for (int i = 0; i < ql[s]; i++) flops += 4.0 * HQ * D * (kl[s] - ql[s] + i + 1);
  }
  int32_t *bt = calloc((size_t)ns * maxp, 4), *perm = malloc((size_t)pages * 4);
  for (int i = 0; i < pages; i++) perm[i] = i;
  srand(7);
  const int ordered = getenv("AB_PAGES") && !strcmp(getenv("AB_PAGES"), "ordered");
  for (int i = pages - 1; i > 0 && !ordered; i--) {
    const int j = rand() % (i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (int s = 0, at = 0; s < ns; s++)
    for (int j = 0; j < (kl[s] + BS - 1) / BS; j++) bt[s * maxp + j] = perm[at++];
  const size_t es = dt == ANYATTN_DTYPE_F32 ? 4 : 2;
  anyattn_kv_dtype kvd[2] = {ANYATTN_KV_AS_Q, ANYATTN_KV_AS_Q};
  const size_t cache = (size_t)pages * BS * HKV * D, qn = (size_t)nt * HQ * D;
  char *k = cache_alloc(cache * es), *v = cache_alloc(cache * es), *q = malloc(qn * es), *out = malloc(qn * es);
  char *bufs[3] = {k, v, q};
  size_t cnt[3] = {cache, cache, qn};
  char *k8 = cache_alloc(cache), *v8 = cache_alloc(cache); /* fp8 codes: finite in both formats */
  if (!k || !v || !q || !out || !k8 || !v8) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < cache; i++) {
    for (int x = 0; x < 2; x++) {
      int c = rand() & 0xFF;
      if ((c & 0x7F) == 0x7F || c == 0x80) c = 0x38; /* NaN in e4m3fn or fnuz: 1.0 or 0.5 */
      (x ? v8 : k8)[i] = (char)c;
    }
  }
  for (int x = 0; x < 3; x++)
    for (size_t i = 0; i < cnt[x]; i++) {
      const float f = (float)rand() / RAND_MAX * 2.0f - 1.0f;
      uint32_t u;
      memcpy(&u, &f, 4);
      if (es == 4) memcpy(bufs[x] + 4 * i, &f, 4);
      else if (dt == ANYATTN_DTYPE_BF16) ((uint16_t *)bufs[x])[i] = (uint16_t)(u >> 16);
      else ((uint16_t *)bufs[x])[i] = (uint16_t)(0x3800 | (rand() & 0x3FF) | (rand() & 1) << 15); /* +-[0.5, 1) */
    }
  if (getenv("AB_THP") && !strcmp(getenv("AB_THP"), "1")) print_huge_pages();
  side sd[2];
  for (int i = 0; i < 2; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s", argv[1 + i]);
    char *spread = strchr(path, '#');
    if (spread) *spread++ = '\0';
    char *kvs = strchr(path, '@');
    if (kvs) {
      *kvs++ = '\0';
      kvd[i] = !strcmp(kvs, "fnuz") ? ANYATTN_KV_FP8_E4M3FNUZ : ANYATTN_KV_FP8_E4M3;
    }
    char *isa = strchr(path, ':');
    if (isa) *isa++ = '\0';
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "cpu_ab: %s\n", dlerror());
      return 1;
    }
    side *S = &sd[i];
    *(void **)&S->context_create = sym(h, "anyattn_context_create");
    *(void **)&S->problem_init = sym(h, "anyattn_problem_init");
    *(void **)&S->limits_init = sym(h, "anyattn_limits_init");
    *(void **)&S->batch_init = sym(h, "anyattn_batch_init");
    *(void **)&S->tensors_init = sym(h, "anyattn_tensors_init");
    *(void **)&S->plan_create = sym(h, "anyattn_plan_create");
    *(void **)&S->workspace_size = sym(h, "anyattn_plan_workspace_size");
    *(void **)&S->describe = sym(h, "anyattn_plan_describe");
    *(void **)&S->run = sym(h, "anyattn_run");
    *(void **)&S->last_error = sym(h, "anyattn_last_error");
    if (isa) setenv("ANYATTN_CPU_ISA", isa, 1);
    else unsetenv("ANYATTN_CPU_ISA");
    if (spread)
      setenv("ANYATTN_CPU_DECODE_SPREAD", spread, 1);
    else
      unsetenv("ANYATTN_CPU_DECODE_SPREAD");
    anyattn_context *ctx;
    anyattn_problem pr;
    anyattn_limits lim;
    S->problem_init(&pr);
    pr.num_q_heads = HQ;
    pr.num_kv_heads = HKV;
    pr.head_dim = D;
    pr.dtype = dt;
    pr.kv_dtype = kvd[i];
    pr.block_size = BS;
    pr.causal = 1;
    S->limits_init(&lim);
    lim.max_seqs = ns;
    lim.max_tokens = nt;
    lim.max_context = maxk > 8192 ? maxk : 8192;
    if (S->context_create(ANYATTN_BACKEND_CPU, 0, &ctx) || S->plan_create(ctx, &pr, &lim, &S->plan)) {
      fprintf(stderr, "cpu_ab: %s: %s\n", argv[1 + i], S->last_error());
      return 1;
    }
    S->ws_bytes = S->workspace_size(S->plan);
    S->ws = aligned_alloc(256, (S->ws_bytes + 255) / 256 * 256);
    printf("%c: %s  [%s]\n", 'A' + i, argv[1 + i], S->describe(S->plan));
  }
  anyattn_batch bb;
  anyattn_tensors t;
  sd[0].batch_init(&bb);
  sd[0].tensors_init(&t);
  bb.num_seqs = ns;
  bb.num_tokens = nt;
  bb.cu_seqlens_q = cu;
  bb.seq_lens_k = kl;
  bb.block_table = bt;
  bb.block_table_stride = maxp;
  t.q = q;
  t.k_cache = k;
  t.v_cache = v;
  t.num_blocks = pages;
  t.out = out;
  double *ms[2] = {malloc(rounds * sizeof(double)), malloc(rounds * sizeof(double))};
  for (int r = -1; r < rounds; r++)
    for (int i = 0; i < 2; i++) {
      const double t0 = now();
      t.k_cache = kvd[i] == ANYATTN_KV_AS_Q ? k : k8;
      t.v_cache = kvd[i] == ANYATTN_KV_AS_Q ? v : v8;
      if (sd[i].run(sd[i].plan, &bb, &t, sd[i].ws, sd[i].ws_bytes, NULL)) {
        fprintf(stderr, "cpu_ab: run: %s\n", sd[i].last_error());
        return 1;
      }
      if (r >= 0) ms[i][r] = 1e3 * (now() - t0);
    }
  double med[2];
  for (int i = 0; i < 2; i++) {
    qsort(ms[i], rounds, sizeof(double), cmpd);
    med[i] = ms[i][rounds / 2];
    printf("%c: median %.3f ms (min %.3f, max %.3f), %.1f GFLOP/s\n", 'A' + i, med[i], ms[i][0], ms[i][rounds - 1],
           flops / med[i] * 1e-6);
  }
  printf("B/A time %.3f (B is %.2fx A's speed)\n", med[1] / med[0], med[0] / med[1]);
  return 0;
}
