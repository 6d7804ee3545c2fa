/* bench_step.h: the kernel that bench's e2e-llama8b-step workload runs before
 * each layer's attention call (tools/bench_step.cu, built with the CUDA
 * backend only): it writes what a decode step's QKV projection and cache write
 * would, the layer's Q and the newest token's K and V rows. */
#ifndef ANYATTN_TOOLS_BENCH_STEP_H
#define ANYATTN_TOOLS_BENCH_STEP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One layer's launch. Every pointer is device memory; every size is a
 * whole number of 4-byte words (the kernel copies words, so each 16-bit
 * value or fp8 code lands whole). */
typedef struct {
  void *q;                    /* q_bytes: one token x q heads x head dim, the problem's dtype */
  void *k_cache, *v_cache;    /* the layer's caches, [page][row in page][kv head][head dim] */
  const int32_t *seq_lens_k;  /* [1]: the newest token is at position seq_lens_k[0] - 1 */
  const int32_t *block_table; /* the sequence's pages */
  int block_size;             /* rows per page */
  int layer;                  /* 0..: varies the values between layers */
  size_t q_bytes;             /* the bytes of Q written */
  size_t kv_row_bytes;        /* one token's K (or V) row: kv heads x head dim x element size */
  const void *q_src, *kv_src; /* src_bytes each: values of the problem's dtype, of the cache's type */
  size_t src_bytes;
} bench_step_args;

#ifdef __CUDACC__
#define BENCH_STEP_HD __host__ __device__
#else
#define BENCH_STEP_HD
#endif

/* Where word 0 of a destination starts in its source (src_words words; word
 * i comes from (offset + i) % src_words): different for each step (pos),
 * layer and tensor (0 Q, 1 K, 2 V). bench checks the written words with it. */
static inline BENCH_STEP_HD size_t bench_step_src_offset(int pos, int layer, int tensor, size_t src_words) {
  return ((size_t)pos * 7919u + (size_t)layer * 104729u + (size_t)tensor * 1299709u) % src_words;
}

/* Queues the kernel on `stream` (a cudaStream_t; capturable). On sm_90 and
 * newer it goes out with programmatic dependent launch: it lets the next
 * kernel launch at once and waits for the kernel before it to finish before
 * its first write. Returns 0, or -1 after one line on stderr. */
int bench_step_kernel_launch(const bench_step_args *a, void *stream);

#ifdef __cplusplus
}
#endif
#endif
