// row_probe.cu: how fast one H200 streams the paged K/V of a large decode
// batch (64 sequences of 8192 keys, 8 kv heads, bf16, 16-token pages, page
// order shuffled) when one head's row is not a multiple of 64 bytes: head dim
// 80 (160-byte rows, every other head starting 32 bytes into a 64-byte
// granule) against 96 and 128. No attention math: a program copies its keys'
// K and V rows into shared memory in 64-key tiles through 3 stages of 16-byte
// cp.async (what m16n64w4s3 streams) and touches what landed.
//
// Variants:
//   order head: consecutive programs are the kv heads of one sequence (the
//               library's order), so neighbouring heads' rows are read at
//               about the same time; order seq: the heads of a sequence are
//               64 programs apart.
//   hpp 2:      a program takes two neighbouring heads (a 320-byte row pair
//               at head dim 80, 64-byte aligned).
//   gran N:     cudaLimitMaxL2FetchGranularity set to N bytes (a hint to the
//               L2 on how much to fetch per miss) for that probe;
//   pf N:       the copies carry the .L2::NB prefetch-size qualifier;
//   occ:        programs per SM, capped below what shared memory allows by
//               asking for more of it.
//
// Timing: events around each launch, a 256 MB L2 flush before it, median of
// 15; TB/s counts the useful K/V bytes. Build (from the root):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/row_probe dev/row_probe.cu && /tmp/row_probe
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#include "paged_kv.cuh" /* HKV, BS, the cp.async pipeline, Env and time_us */

constexpr int BN = 64, STAGES = 3, THREADS = 128;
constexpr int BATCH = 64, CTX = 8192, PAGES_PER_SEQ = CTX / BS;

struct Args {
  const uint16_t *k, *v;
  const int32_t *bt; /* [BATCH][PAGES_PER_SEQ] */
  int seq_fastest;
  unsigned *sink;
};

template <int PF>
__device__ __forceinline__ void copy16(unsigned char *dst, const uint16_t *src) {
  if constexpr (PF == 128)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
  else if constexpr (PF == 256)
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}

template <int D, int HPP, int PF>
__global__ void __launch_bounds__(THREADS) row_kernel(Args a) {
  constexpr int ROWB = D * 2 * HPP;          /* bytes of one key's rows in a program */
  constexpr int TILE = BN * ROWB, CH = ROWB / 16;
  constexpr int64_t TOK = (int64_t)HKV * D, PAGE = (int64_t)BS * HKV * D;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char *sk = smem, *sv = smem + STAGES * TILE;
  constexpr int HP = HKV / HPP;
  const int b = blockIdx.x;
  const int seq = a.seq_fastest ? b % BATCH : b / HP, hp = a.seq_fastest ? b / BATCH : b % HP;
  const int32_t *bt = a.bt + (int64_t)seq * PAGES_PER_SEQ;
  const uint16_t *kc = a.k + hp * HPP * D, *vc = a.v + hp * HPP * D;
  const int tid = threadIdx.x;
  constexpr int NT = CTX / BN;
  auto issue = [&](int it) {
    const int st = it % STAGES;
    for (int i = tid; i < BN * CH; i += THREADS) {
      const int r = i / CH, c = i % CH, j = it * BN + r;
      const int64_t off = (int64_t)__ldg(bt + j / BS) * PAGE + (j % BS) * TOK + c * 8;
      copy16<PF>(sk + st * TILE + i * 16, kc + off);
      copy16<PF>(sv + st * TILE + i * 16, vc + off);
    }
    cp_async_commit();
  };
  const unsigned acc = cp_async_stream<STAGES, TILE>(sk, sv, NT, issue);
  if (acc == 0x12345678u) *a.sink = acc;
}

template <int D, int HPP, int PF = 0>
static void probe(Env &E, Args a, int seq_fastest, int gran, int occ_cap = 0) {
  a.seq_fastest = seq_fastest;
  size_t prev = 0;
  CK(cudaDeviceGetLimit(&prev, cudaLimitMaxL2FetchGranularity));
  if (gran) CK(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, gran));
  size_t now = 0;
  CK(cudaDeviceGetLimit(&now, cudaLimitMaxL2FetchGranularity));
  size_t smem = (size_t)2 * STAGES * BN * D * 2 * HPP;
  if (occ_cap) smem = std::max(smem, (size_t)(220 * 1024 / occ_cap)); /* at most occ_cap programs per SM */
  auto k = row_kernel<D, HPP, PF>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, THREADS, smem));
  const int progs = BATCH * HKV / HPP;
  const double us = time_us(E, [&] { k<<<progs, THREADS, smem, E.s>>>(a); });
  const double bytes = 2.0 * BATCH * CTX * HKV * D * 2;
  printf("d%-3d hpp %d pf %3d order %-4s gran %3zu progs %4d occ %d  %8.2f us  %5.2f TB/s  (%.1f us per MB)\n", D, HPP, PF,
         seq_fastest ? "seq" : "head", now, progs, occ, us, bytes / us / 1e6, us / (bytes / 1e6));
  if (gran) CK(cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, prev));
}

int main() {
  const int pages = BATCH * PAGES_PER_SEQ;
  const size_t cache_elems = (size_t)pages * BS * HKV * 128;
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
  size_t g = 0;
  CK(cudaDeviceGetLimit(&g, cudaLimitMaxL2FetchGranularity));
  printf("device %s, %d SMs, L2 %d MB, default L2 fetch granularity %zu\n", prop.name, prop.multiProcessorCount,
         prop.l2CacheSize >> 20, g);
  for (int rep = 0; rep < 1; rep++) {
    probe<128, 1>(E, a, 0, 0);
    probe<96, 1>(E, a, 0, 0);
    probe<80, 1>(E, a, 0, 0);
    probe<80, 1>(E, a, 1, 0);
    probe<96, 1>(E, a, 1, 0);
    probe<80, 2>(E, a, 0, 0);
    probe<96, 2>(E, a, 0, 0);
    for (int gran : {32, 64, 128}) {
      probe<80, 1>(E, a, 0, gran);
      probe<96, 1>(E, a, 0, gran);
    }
    probe<128, 1, 128>(E, a, 0, 0);
    probe<96, 1, 128>(E, a, 0, 0);
    probe<80, 1, 128>(E, a, 0, 0);
    probe<96, 1, 256>(E, a, 0, 0);
    probe<80, 1, 256>(E, a, 0, 0);
    probe<128, 1, 256>(E, a, 0, 0);
    for (int cap : {1, 2}) {
      probe<96, 1>(E, a, 0, 0, cap);
      probe<80, 1>(E, a, 0, 0, cap);
      probe<80, 1, 128>(E, a, 0, 0, cap);
    }
  }
  printf("done\n");
  return 0;
}
