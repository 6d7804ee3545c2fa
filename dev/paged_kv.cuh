/* paged_kv.cuh: what the paged-K/V probes share (stream_probe.cu, e2e_bound.cu, row_probe.cu):
 * the cache layout `anyattn bench` uses at batch-1 decode shapes (bf16, 8 kv
 * heads, head dim 128, 16-token pages; K and V caches [page][token][head][dim]),
 * the 16-byte cp.async copies, the STAGES-deep pipeline a program streams its
 * tiles through, and the host's median. */
#ifndef ANYATTN_DEV_PAGED_KV_CUH
#define ANYATTN_DEV_PAGED_KV_CUH
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#include "ck.h"

constexpr int HKV = 8, D = 128, BS = 16;
constexpr int ROW_BYTES = D * 2;                        // one K (or V) row of one head
constexpr int64_t TOK_STRIDE = (int64_t)HKV * D;        // elements
constexpr int64_t PAGE_STRIDE = (int64_t)BS * HKV * D;  // elements
constexpr int MAX_PAGES_PER_PROG = 1024;

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes of K at k + off into dk and of V at v + off into dv; zeros when !ok. */
__device__ __forceinline__ void cp_async16_kv(unsigned char *dk, unsigned char *dv, const uint16_t *k,
                                              const uint16_t *v, int64_t off, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dk)), "l"(k + off), "r"(ok ? 16 : 0));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dv)), "l"(v + off), "r"(ok ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

/* nt tiles through STAGES stages of TILE bytes of K (sk) and of V (sv):
 * issue(it) copies tile it into stage it % STAGES and commits one group. Each
 * landed stage is touched (one word per thread, XORed into the result)
 * before it is refilled. Every thread of the block calls it. */
template <int STAGES, int TILE, class Issue>
__device__ __forceinline__ unsigned cp_async_stream(const unsigned char *sk, const unsigned char *sv, int nt,
                                                    Issue issue) {
  const int tid = threadIdx.x;
  for (int it = 0; it < STAGES - 1; it++)
    if (it < nt) issue(it);
    else cp_async_commit();
  unsigned acc = 0;
  for (int it = 0; it < nt; it++) {
    const int nx = it + STAGES - 1;
    if (nx < nt) issue(nx);
    else cp_async_commit();
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 1));
    __syncthreads();
    const int st = it % STAGES;
    const uint32_t *wk = reinterpret_cast<const uint32_t *>(sk + st * TILE);
    const uint32_t *wv = reinterpret_cast<const uint32_t *>(sv + st * TILE);
    acc ^= wk[(tid * 37) % (TILE / 4)] ^ wv[(tid * 53) % (TILE / 4)];
    __syncthreads(); /* the stage is refilled next iteration */
  }
  return acc;
}

static inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/* A probe's stream, events and L2 flush buffer (256 MB); time_us times
 * launch() with events, a flush before each of 17 calls, and returns the
 * median of the last 15 in µs. */
struct Env {
  void *flush;
  cudaEvent_t e0, e1;
  cudaStream_t s;
};

template <class F>
static inline double time_us(Env &E, F launch) {
  std::vector<double> t;
  for (int r = 0; r < 17; r++) {
    CK(cudaMemsetAsync(E.flush, r, 256u << 20, E.s));
    CK(cudaEventRecord(E.e0, E.s));
    launch();
    CK(cudaGetLastError());
    CK(cudaEventRecord(E.e1, E.s));
    CK(cudaEventSynchronize(E.e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, E.e0, E.e1));
    if (r >= 2) t.push_back(ms * 1e3);
  }
  return median(t);
}

/* A probe's Env: a non-blocking stream, two events and the flush buffer. */
static inline Env env_make() {
  Env E;
  CK(cudaStreamCreateWithFlags(&E.s, cudaStreamNonBlocking));
  CK(cudaEventCreate(&E.e0));
  CK(cudaEventCreate(&E.e1));
  CK(cudaMalloc(&E.flush, 256u << 20));
  return E;
}

/* K and V caches of `elems` bf16 elements each (every element 0x3c3c) and a
 * block table of `pages` page ids in a shuffled order (the same for every
 * probe: srand(11)). */
static inline void paged_cache(size_t elems, int pages, uint16_t **k, uint16_t **v, int32_t **bt) {
  CK(cudaMalloc(k, elems * 2));
  CK(cudaMalloc(v, elems * 2));
  CK(cudaMalloc(bt, (size_t)pages * 4));
  CK(cudaMemset(*k, 0x3c, elems * 2));
  CK(cudaMemset(*v, 0x3c, elems * 2));
  std::vector<int32_t> h(pages);
  for (int i = 0; i < pages; i++) h[i] = i;
  srand(11);
  for (int i = pages - 1; i > 0; i--) std::swap(h[i], h[rand() % (i + 1)]);
  CK(cudaMemcpy(*bt, h.data(), (size_t)pages * 4, cudaMemcpyHostToDevice));
}

#endif
