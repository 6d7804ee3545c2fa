/* basic.c: the README's usage example as a complete program. One decode and
 * one prefill sequence on the CPU backend: plan once, validate the metadata
 * once, run, read the output. Runs where there is no GPU. Built and run by
 * `make test` (example_basic, and install_consumers against an installed copy).
 *   cc -std=c11 examples/basic.c -Iinclude -Lbuild -lanyattn -lm -o basic
 *   cc -std=c11 examples/basic.c $(pkg-config --cflags --libs anyattn) -lm -o basic  (installed) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "anyattn.h"

#define CHECK(call)                                                              \
  do {                                                                           \
    anyattn_status s_ = (call);                                                  \
    if (s_ != ANYATTN_STATUS_OK) {                                               \
      fprintf(stderr, "%s failed: %s\n", #call, anyattn_last_error());           \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main(void) {
  enum { HQ = 8, HKV = 2, D = 64, BS = 16, NUM_BLOCKS = 32 };
  /* Sequence 0 decodes 1 token over 100 cached; sequence 1 prefills 40. */
  const int32_t cu_seqlens_q[3] = {0, 1, 41};
  const int32_t seq_lens_k[2] = {100, 40};
  int32_t block_table[2 * 8]; /* 8 pages of 16 tokens per sequence at most */
  for (int i = 0; i < 16; i++) block_table[i] = (i * 7) % NUM_BLOCKS; /* scattered pages */
  const int num_tokens = 41;

  /* fp32 here so the example needs no conversions; bf16/f16 work the same way. */
  float *q = malloc(sizeof(float) * num_tokens * HQ * D);
  float *k = malloc(sizeof(float) * NUM_BLOCKS * BS * HKV * D);
  float *v = malloc(sizeof(float) * NUM_BLOCKS * BS * HKV * D);
  float *out = malloc(sizeof(float) * num_tokens * HQ * D);
  float *lse = malloc(sizeof(float) * num_tokens * HQ);
  for (int i = 0; i < num_tokens * HQ * D; i++) q[i] = sinf(0.1f * (float)i);
  for (int i = 0; i < NUM_BLOCKS * BS * HKV * D; i++) k[i] = cosf(0.07f * (float)i), v[i] = sinf(0.03f * (float)i);

  anyattn_context *ctx;
  CHECK(anyattn_context_create(ANYATTN_BACKEND_CPU, 0, &ctx));

  anyattn_problem pr;
  anyattn_problem_init(&pr); /* defaults: block 16, no window, scale 1/sqrt(d) */
  pr.num_q_heads = HQ;
  pr.num_kv_heads = HKV;
  pr.head_dim = D;
  pr.dtype = ANYATTN_DTYPE_F32;
  pr.causal = 1;
  anyattn_limits lim;
  anyattn_limits_init(&lim);
  lim.max_seqs = 16;
  lim.max_tokens = 256;
  lim.max_context = 128;
  anyattn_plan *plan;
  CHECK(anyattn_plan_create(ctx, &pr, &lim, &plan));
  size_t ws_bytes = anyattn_plan_workspace_size(plan);
  void *ws = ws_bytes ? aligned_alloc(256, (ws_bytes + 255) / 256 * 256) : NULL; /* the caller owns it */
  CHECK(anyattn_workspace_prepare(plan, ws, ws_bytes, NULL)); /* once per workspace, before its first run */

  anyattn_batch b;
  anyattn_batch_init(&b);
  b.num_seqs = 2;
  b.num_tokens = num_tokens;
  b.cu_seqlens_q = cu_seqlens_q;
  b.seq_lens_k = seq_lens_k;
  b.block_table = block_table;
  b.block_table_stride = 8;
  CHECK(anyattn_validate(plan, &b, NUM_BLOCKS)); /* host copies of the metadata, once */

  anyattn_tensors t;
  anyattn_tensors_init(&t); /* zero strides: NHD caches */
  t.q = q;
  t.k_cache = k;
  t.v_cache = v;
  t.num_blocks = NUM_BLOCKS;
  t.out = out;
  t.lse = lse;
  CHECK(anyattn_run(plan, &b, &t, ws, ws_bytes, NULL));

  int finite = 1;
  for (int i = 0; i < num_tokens * HQ * D; i++) finite &= isfinite(out[i]) != 0;
  printf("anyattn %s, %s: out[0][0][0:4] = %.5f %.5f %.5f %.5f, lse[0][0] = %.5f, all finite: %s\n",
         anyattn_version_string(), anyattn_plan_describe(plan), out[0], out[1], out[2], out[3], lse[0],
         finite ? "yes" : "no");

  anyattn_plan_free(plan);
  anyattn_context_free(ctx);
  free(ws);
  free(q);
  free(k);
  free(v);
  free(out);
  free(lse);
  return finite ? 0 : 1;
}
