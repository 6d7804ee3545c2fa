/* cpu_decode_pages.c: bf16 decode on the CPU backend with every sequence's
 * block table pointing into a pool of NP pages, so that the K/V bytes the
 * calls walk stay where NP puts them: NP = 1 (64 KiB of K and V at 8 kv
 * heads) keeps them in L1 and L2, NP = 16 in L2, NP = 256 in L3, thousands
 * in memory; the math does not change. Shapes as `anyattn bench` (32 q
 * heads, 8 kv heads, head dim 128, page 16); prints the median call and the
 * time per kv head and block of 16 keys. Links the library built in the
 * tree (public API only), so a test build is measured by pointing
 * LD_LIBRARY_PATH at it:
 *
 *   cc -O2 -Iinclude -o /tmp/cpu_decode_pages dev/cpu_decode_pages.c -Lbuild -lanyattn -Wl,-rpath,$PWD/build
 *   OMP_NUM_THREADS=1 /tmp/cpu_decode_pages 4 4096 1      (sequences, context, pages)
 *   OMP_NUM_THREADS=1 LD_LIBRARY_PATH=/tmp/other /tmp/cpu_decode_pages 4 4096 1 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../include/anyattn.h"

#define CHECK(call)                                                    \
  do {                                                                 \
    if ((call) != ANYATTN_STATUS_OK) {                                 \
      fprintf(stderr, "%s failed: %s\n", #call, anyattn_last_error()); \
      return 1;                                                        \
    }                                                                  \
  } while (0)

enum { HQ = 32, HKV = 8, D = 128, BS = 16, CALLS = 101 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s SEQUENCES CONTEXT PAGES\n", argv[0]);
    return 2;
  }
  const int ns = atoi(argv[1]), ctx_len = atoi(argv[2]), np = atoi(argv[3]);
  if (ns < 1 || ns > 4096 || ctx_len < BS || ctx_len > (1 << 20) || ctx_len % BS || np < 1 || np > (1 << 20)) {
    fprintf(stderr,
            "cpu_decode_pages: 1..4096 sequences, a context of 16..2^20 keys (a multiple of 16), "
            "1..2^20 pages\n");
    return 2;
  }
  const int nb = ctx_len / BS;
  const size_t kv_elems = (size_t)np * BS * HKV * D, q_elems = (size_t)ns * HQ * D;
  int32_t *cu = malloc(((size_t)ns + 1) * sizeof *cu), *lens = malloc((size_t)ns * sizeof *lens);
  int32_t *bt = malloc((size_t)ns * nb * sizeof *bt);
  uint16_t *k = malloc(kv_elems * 2), *v = malloc(kv_elems * 2), *q = malloc(q_elems * 2), *out = malloc(q_elems * 2);
  if (!cu || !lens || !bt || !k || !v || !q || !out) {
    fprintf(stderr, "cpu_decode_pages: out of memory\n");
    return 1;
  }
  srand(3);
  for (int s = 0; s <= ns; s++) cu[s] = s;
  for (int s = 0; s < ns; s++) lens[s] = ctx_len;
  for (size_t i = 0; i < (size_t)ns * nb; i++) bt[i] = rand() % np;
  /* bf16 values in [1, 2): finite, and every page touched before the calls */
  for (size_t i = 0; i < kv_elems; i++)
    k[i] = (uint16_t)(0x3f80 + (rand() & 0x7f)), v[i] = (uint16_t)(0x3f80 + (rand() & 0x7f));
  for (size_t i = 0; i < q_elems; i++) q[i] = (uint16_t)(0x3f80 + (rand() & 0x7f));

  anyattn_context *ctx;
  CHECK(anyattn_context_create(ANYATTN_BACKEND_CPU, 0, &ctx));
  anyattn_problem pr;
  anyattn_problem_init(&pr);
  pr.num_q_heads = HQ;
  pr.num_kv_heads = HKV;
  pr.head_dim = D;
  pr.dtype = ANYATTN_DTYPE_BF16;
  pr.causal = 1;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = ns;
  lim.max_tokens = ns;
  lim.max_context = ctx_len;
  anyattn_plan *plan;
  CHECK(anyattn_plan_create(ctx, &pr, &lim, &plan));
  const size_t ws_bytes = anyattn_plan_workspace_size(plan);
  void *ws = aligned_alloc(256, (ws_bytes + 255) / 256 * 256);
  if (!ws) return 1;
  CHECK(anyattn_workspace_prepare(plan, ws, ws_bytes, NULL));
  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = ns;
  b.num_tokens = ns;
  b.cu_seqlens_q = cu;
  b.seq_lens_k = lens;
  b.block_table = bt;
  b.block_table_stride = nb;
  CHECK(anyattn_validate(plan, &b, np));
  anyattn_tensors t;
  anyattn_tensors_init(&t);
  t.q = q;
  t.k_cache = k;
  t.v_cache = v;
  t.num_blocks = np;
  t.out = out;

  double times[CALLS];
  for (int i = -5; i < CALLS; i++) {
    const double t0 = now();
    CHECK(anyattn_run(plan, &b, &t, ws, ws_bytes, NULL));
    if (i >= 0) times[i] = now() - t0;
  }
  qsort(times, CALLS, sizeof *times, cmp);
  const double med = times[CALLS / 2], head_blocks = (double)ns * nb * HKV;
  printf(
      "%s\n%d x %d keys on %d pages (%.1f MiB of K and V): %.1f us a call, %.1f ns per kv head and block, "
      "%.1f GB/s of K/V walked\n",
      anyattn_plan_describe(plan), ns, ctx_len, np, (double)kv_elems * 4.0 / 1048576.0, med * 1e6,
      med * 1e9 / head_blocks, head_blocks * (double)BS * D * 2 * 2 / med * 1e-9);
  anyattn_plan_free(plan);
  anyattn_context_free(ctx);
  free(ws);
  free(cu);
  free(lens);
  free(bt);
  free(k);
  free(v);
  free(q);
  free(out);
  return 0;
}
