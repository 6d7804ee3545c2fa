// stream_probe.cu: how fast one H200 streams a paged KV cache into shared
// memory at batch-1 decode shapes, with no attention math: the ceiling the
// split-KV decode programs work under. Layout as `anyattn bench` uses it: bf16,
// 8 kv heads, head dim 128, 16-token pages, page order shuffled; K and V
// caches [page][token][head][dim]. A program = (kv head, segment) walks its
// keys in tiles of BN rows through a STAGES-deep shared-memory pipeline, and
// only touches what landed (an XOR of one word per thread) before refilling.
//
// Two ways to fill a stage:
//   cpasync: 16-byte cp.async from every thread (the library's KvCopies in
//            src/gpu/kernel/kv_load.cuh), completion by commit/wait groups
//            and a block barrier;
//   bulk:    one cp.async.bulk (the Hopper bulk copy engine) per 256-byte
//            K or V row, completion on one mbarrier per stage (complete_tx).
// Page ids of the program's keys are read once into shared memory. Layout,
// copies and the cp.async pipeline: paged_kv.cuh (shared with e2e_bound.cu).
//
// Timing: events around each launch, a 256 MB L2 flush before it, median of
// 15. Build: nvcc -O3 -std=c++17 -arch=sm_90a -o stream_probe stream_probe.cu
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#include "ck.h"
#include "paged_kv.cuh"

struct Args {
  const uint16_t *k, *v;
  const int32_t *bt;
  int ctx, segs;
  unsigned *sink;
};

template <int THREADS, int BN, int STAGES, bool BULK>
__global__ void __launch_bounds__(THREADS) stream_kernel(Args a) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int TILE = BN * ROW_BYTES;  // K or V
  unsigned char *sk = smem;
  unsigned char *sv = smem + STAGES * TILE;
  uint64_t *bars = reinterpret_cast<uint64_t *>(smem + 2 * STAGES * TILE);
  int32_t *spg = reinterpret_cast<int32_t *>(bars + STAGES);
  const int head = blockIdx.x % HKV, seg = blockIdx.x / HKV, tid = threadIdx.x;
  const int ntiles_all = (a.ctx + BN - 1) / BN;
  const int t0 = (int)((long long)ntiles_all * seg / a.segs), t1 = (int)((long long)ntiles_all * (seg + 1) / a.segs);
  const int j0 = t0 * BN, j1 = min(a.ctx, t1 * BN);
  const int p0 = j0 / BS, p1 = (j1 + BS - 1) / BS;
  for (int i = tid; i < p1 - p0; i += THREADS) spg[i] = a.bt[p0 + i];
  if (BULK && tid == 0) {
    for (int s = 0; s < STAGES; s++)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(bars + s)));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const uint16_t *kc = a.k + head * D, *vc = a.v + head * D;
  const int nt = t1 - t0;
  auto issue = [&](int it) {
    const int st = it % STAGES, n0 = j0 + it * BN;
    if constexpr (BULK) {
      const int rows = min(BN, j1 - n0);
      if (tid == 0) {
        uint64_t state;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;\n"
                     : "=l"(state)
                     : "r"(smem_u32(bars + st)), "r"(rows * ROW_BYTES * 2)
                     : "memory");
      }
      for (int r = tid; r < rows; r += THREADS) {
        const int j = n0 + r;
        const int64_t off = (int64_t)spg[j / BS - p0] * PAGE_STRIDE + (j % BS) * TOK_STRIDE;
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                smem_u32(sk + st * TILE + r * ROW_BYTES)),
            "l"(kc + off), "r"(ROW_BYTES), "r"(smem_u32(bars + st))
            : "memory");
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                smem_u32(sv + st * TILE + r * ROW_BYTES)),
            "l"(vc + off), "r"(ROW_BYTES), "r"(smem_u32(bars + st))
            : "memory");
      }
    } else {
      constexpr int CH = ROW_BYTES / 16;
      for (int i = tid; i < BN * CH; i += THREADS) {
        const int r = i / CH, c = i % CH, j = n0 + r;
        const bool ok = j < j1;
        const int64_t off = ok ? (int64_t)spg[j / BS - p0] * PAGE_STRIDE + (j % BS) * TOK_STRIDE + c * 8 : 0;
        cp_async16_kv(sk + st * TILE + i * 16, sv + st * TILE + i * 16, kc, vc, off, ok);
      }
      cp_async_commit();
    }
  };
  unsigned acc = 0;
  if constexpr (!BULK) {
    acc = cp_async_stream<STAGES, TILE>(sk, sv, nt, issue);
  } else {
    for (int it = 0; it < STAGES - 1; it++)
      if (it < nt) issue(it);
    for (int it = 0; it < nt; it++) {
      const int nx = it + STAGES - 1;
      if (nx < nt) {
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        issue(nx);
      }
      const int st = it % STAGES;
      const uint32_t par = (uint32_t)((it / STAGES) & 1);
      uint32_t done = 0;
      while (!done)
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(smem_u32(bars + st)), "r"(par)
            : "memory");
      const uint32_t *wk = reinterpret_cast<const uint32_t *>(sk + st * TILE);
      const uint32_t *wv = reinterpret_cast<const uint32_t *>(sv + st * TILE);
      acc ^= wk[(tid * 37) % (TILE / 4)] ^ wv[(tid * 53) % (TILE / 4)];
      __syncthreads();  // the stage is refilled next iteration
    }
  }
  if (acc == 0x12345678u) *a.sink = acc;
}

/* Dense read ceiling: every thread streams 16-byte loads over `bytes`. */
__global__ void dense_read(const uint4 *p, size_t n, unsigned *sink) {
  uint4 x = make_uint4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint4 y = __ldcs(p + i);
    x.x ^= y.x, x.y ^= y.y, x.z ^= y.z, x.w ^= y.w;
  }
  if ((x.x ^ x.y ^ x.z ^ x.w) == 0x12345678u) *sink = 1;
}



/* Whole pages: a program takes every kv head of PG pages per stage (K and V
 * pages are 32 KB contiguous each), as a program serving all heads of a
 * segment would read them; cp.async from every thread. */
template <int THREADS, int PG, int STAGES>
__global__ void __launch_bounds__(THREADS) page_kernel(Args a) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int TILE = PG * BS * HKV * ROW_BYTES;
  unsigned char *sk = smem, *sv = smem + STAGES * TILE;
  int32_t *spg = reinterpret_cast<int32_t *>(smem + 2 * STAGES * TILE);
  const int tid = threadIdx.x, pages_all = a.ctx / BS;
  const int p0 = (int)((long long)pages_all * blockIdx.x / gridDim.x);
  const int p1 = (int)((long long)pages_all * (blockIdx.x + 1) / gridDim.x);
  for (int i = tid; i < p1 - p0; i += THREADS) spg[i] = a.bt[p0 + i];
  __syncthreads();
  const int nt = (p1 - p0 + PG - 1) / PG;
  auto issue = [&](int it) {
    const int st = it % STAGES;
    constexpr int CHP = BS * HKV * ROW_BYTES / 16; /* 16-byte chunks per page */
    for (int i = tid; i < PG * CHP; i += THREADS) {
      const int pg = it * PG + i / CHP, c = i % CHP;
      const bool ok = p0 + pg < p1;
      const int64_t off = ok ? (int64_t)spg[pg] * PAGE_STRIDE + c * 8 : 0;
      cp_async16_kv(sk + st * TILE + i * 16, sv + st * TILE + i * 16, a.k, a.v, off, ok);
    }
    cp_async_commit();
  };
  const unsigned acc = cp_async_stream<STAGES, TILE>(sk, sv, nt, issue);
  if (acc == 0x12345678u) *a.sink = acc;
}

template <int THREADS, int PG, int STAGES>
static void probe_pages(Env &E, const Args &base, int ctx, int progs, const char *name) {
  Args a = base;
  a.ctx = ctx;
  const size_t smem = (size_t)2 * STAGES * PG * BS * HKV * ROW_BYTES + MAX_PAGES_PER_PROG * 4;
  auto k = page_kernel<THREADS, PG, STAGES>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, THREADS, smem));
  const double us = time_us(E, [&] { k<<<progs, THREADS, smem, E.s>>>(a); });
  const double bytes = 2.0 * ctx * HKV * D * 2;
  printf("%-8s thr %3d pages/stage %d st %d ctx %6d progs %4d occ %d  %8.2f us  %5.2f TB/s\n", name, THREADS, PG,
         STAGES, ctx, progs, occ, us, bytes / us / 1e6);
}

template <int THREADS, int BN, int STAGES, bool BULK>
static void probe(Env &E, const Args &base, int ctx, int segs, const char *name) {
  Args a = base;
  a.ctx = ctx;
  a.segs = segs;
  const size_t smem = (size_t)2 * STAGES * BN * ROW_BYTES + STAGES * 8 + MAX_PAGES_PER_PROG * 4;
  auto k = stream_kernel<THREADS, BN, STAGES, BULK>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, THREADS, smem));
  const double us = time_us(E, [&] { k<<<HKV * segs, THREADS, smem, E.s>>>(a); });
  const double bytes = 2.0 * ctx * HKV * D * 2;
  printf("%-8s thr %3d BN %3d st %d ctx %6d segs %3d progs %4d occ %d  %8.2f us  %5.2f TB/s\n", name, THREADS, BN,
         STAGES, ctx, segs, HKV * segs, occ, us, bytes / us / 1e6);
}

int main(int argc, char **argv) {
  const int max_ctx = 32768;
  const int pages = max_ctx / BS;
  const size_t cache_elems = (size_t)pages * PAGE_STRIDE;
  Env E = env_make();
  Args a;
  uint16_t *k, *v;
  int32_t *bt;
  paged_cache(cache_elems, pages, &k, &v, &bt);
  CK(cudaMalloc(&a.sink, 4));
  a.k = k;
  a.v = v;
  a.bt = bt;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);

  {  // dense read ceiling over 2 x 64 MB (the 32k cache) and 1 GB
    for (size_t mb : {128, 1024}) {
      uint4 *p;
      CK(cudaMalloc(&p, mb << 20));
      CK(cudaMemset(p, 1, mb << 20));
      const size_t n = (mb << 20) / 16;
      for (int blocks : {132, 264, 528, 1056}) {
        const double us = time_us(E, [&] { dense_read<<<blocks, 512, 0, E.s>>>(p, n, a.sink); });
        printf("dense    %4zu MB  blocks %4d x 512 thr  %8.2f us  %5.2f TB/s\n", mb, blocks, us, (double)(mb << 20) / us / 1e6);
      }
      CK(cudaFree(p));
    }
  }
  int32_t *bt_id;  // pages in order: the same reads without the shuffle
  CK(cudaMalloc(&bt_id, pages * 4));
  std::vector<int32_t> h(pages);
  for (int i = 0; i < pages; i++) h[i] = i;
  CK(cudaMemcpy(bt_id, h.data(), pages * 4, cudaMemcpyHostToDevice));
  Args ordered = a;
  ordered.bt = bt_id;
  for (int ctx : {8192, 32768}) {
    probe<256, 128, 2, false>(E, a, ctx, 16, "cpasync");  // what m16n128w8s2 -k16 streams
    probe<256, 128, 2, false>(E, ordered, ctx, 16, "cpa-ord");
    probe<128, 64, 3, false>(E, a, ctx, 32, "cpasync");   // m16n64w4s3 -k32: 2 per SM
    probe<256, 128, 2, true>(E, a, ctx, 16, "bulk");
    probe<256, 64, 4, true>(E, a, ctx, 16, "bulk");
    for (int progs : {128, 132, 264})
      probe_pages<256, 1, 3>(E, a, ctx, progs, "pages");
    probe_pages<256, 1, 2>(E, a, ctx, 128, "pages");
    probe_pages<512, 1, 3>(E, a, ctx, 128, "pages");
    probe_pages<256, 1, 3>(E, ordered, ctx, 128, "pg-ord");
  }
  printf("done\n");
  return 0;
}
