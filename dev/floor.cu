// floor.cu: the fixed costs a batch-1 decode call pays on this GPU, measured
// the way `anyattn bench --graph` times (events around one graph replay, a
// 256 MB L2 flush before each): an empty graph, a kernel + a PDL kernel, and
// the latency of dependent global loads (cold after the flush; L2-warm).
// Build: nvcc -O2 -arch=sm_90a -o floor floor.cu ; run: ./floor
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#include "ck.h"

__global__ void empty_kernel(int *sink) { if (sink && threadIdx.x == 1000) *sink = 1; }
__global__ void pdl_primary(int *sink) {
  asm volatile("griddepcontrol.launch_dependents;");
  if (sink && threadIdx.x == 1000) *sink = 1;
}
__global__ void pdl_secondary(int *sink) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (sink && threadIdx.x == 1000) *sink = 1;
}
__global__ void big_smem(int *sink) {
  extern __shared__ int dyn[];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  dyn[threadIdx.x] = threadIdx.x;
  __syncthreads();
  asm volatile("griddepcontrol.launch_dependents;");
  if (sink && dyn[(threadIdx.x + 1) % blockDim.x] == 1000) *sink = 1;
}
__global__ void small_smem(int *sink) {
  __shared__ int st[512];
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  st[threadIdx.x] = threadIdx.x;
  __syncwarp();
  if (sink && st[(threadIdx.x + 1) % 32] == 1000) *sink = 1;
}
// n dependent loads: next = buf[next]
__global__ void chase(const unsigned long long *buf, int n, unsigned long long start, unsigned long long *out) {
  unsigned long long x = start;
  for (int i = 0; i < n; i++) x = buf[x];
  *out = x;
}

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main() {
  const size_t flush_bytes = 256u << 20;
  void *flush; CK(cudaMalloc(&flush, flush_bytes));
  const size_t n_elems = (1u << 30) / 8; // 1 GiB
  unsigned long long *buf; CK(cudaMalloc(&buf, n_elems * 8));
  unsigned long long *out; CK(cudaMalloc(&out, 8));
  // random cycle with a large stride across the 1 GiB (TLB-unfriendly) and a 2 MiB one
  std::vector<unsigned long long> h(n_elems);
  srand(7);
  for (size_t i = 0; i < n_elems; i++) h[i] = ((i * 2654435761ull) + 12345 * 4096) % n_elems;
  CK(cudaMemcpy(buf, h.data(), n_elems * 8, cudaMemcpyHostToDevice));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));

  auto time_graph = [&](cudaGraphExec_t g, bool do_flush) {
    std::vector<double> t;
    for (int i = -3; i < 51; i++) {
      if (do_flush) CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, s));
      CK(cudaEventRecord(e0, s));
      CK(cudaGraphLaunch(g, s));
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= 0) t.push_back(ms * 1e3);
    }
    return median(t);
  };
  auto capture = [&](auto body) {
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    body();
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphDestroy(g));
    return ge;
  };
  auto launch_pdl = [&](void (*k)(int *), int blocks) {
    cudaLaunchAttribute a[1];
    a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(blocks); lc.blockDim = dim3(128); lc.stream = s; lc.attrs = a; lc.numAttrs = 1;
    CK(cudaLaunchKernelEx(&lc, k, (int *)nullptr));
  };

  cudaGraphExec_t g1 = capture([&] { empty_kernel<<<1, 32, 0, s>>>(nullptr); });
  cudaGraphExec_t g128 = capture([&] { empty_kernel<<<128, 256, 0, s>>>(nullptr); });
  cudaGraphExec_t g2 = capture([&] { empty_kernel<<<128, 256, 0, s>>>(nullptr); empty_kernel<<<32, 128, 0, s>>>(nullptr); });
  cudaGraphExec_t gp = capture([&] { pdl_primary<<<128, 256, 0, s>>>(nullptr); launch_pdl(pdl_secondary, 32); });
  cudaGraphExec_t g32 = capture([&] { for (int i = 0; i < 32; i++) empty_kernel<<<128, 256, 0, s>>>(nullptr); });
  cudaGraphExec_t g32p = capture([&] { for (int i = 0; i < 32; i++) { pdl_primary<<<128, 256, 0, s>>>(nullptr); launch_pdl(pdl_secondary, 32); } });
  cudaGraphExec_t g32pp = capture([&] { for (int i = 0; i < 64; i++) launch_pdl(pdl_primary, 128); });
  printf("graph replay, event-timed, median of 51 (us):\n");
  printf("  empty 1x32            flush %.2f  no flush %.2f\n", time_graph(g1, true), time_graph(g1, false));
  printf("  empty 128x256         flush %.2f  no flush %.2f\n", time_graph(g128, true), time_graph(g128, false));
  printf("  two kernels           flush %.2f  no flush %.2f\n", time_graph(g2, true), time_graph(g2, false));
  printf("  kernel + PDL kernel   flush %.2f  no flush %.2f\n", time_graph(gp, true), time_graph(gp, false));
  printf("  32 kernels            per kernel %.2f\n", time_graph(g32, false) / 32);
  printf("  32 x (kernel+PDL)     per pair %.2f\n", time_graph(g32p, false) / 32);
  printf("  64 kernels all PDL    per kernel %.2f\n", time_graph(g32pp, false) / 64);

  {
    const int big = 147 * 1024;
    CK(cudaFuncSetAttribute(big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, big));
    auto launch_ex = [&](auto k, int blocks, int threads, int smem) {
      cudaLaunchAttribute a[1];
      a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      a[0].val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t lc = {};
      lc.gridDim = dim3(blocks); lc.blockDim = dim3(threads); lc.dynamicSmemBytes = smem; lc.stream = s;
      lc.attrs = a; lc.numAttrs = 1;
      CK(cudaLaunchKernelEx(&lc, k, (int *)nullptr));
    };
    auto pair = [&] { launch_ex(big_smem, 128, 256, big); launch_ex(small_smem, 8, 128, 0); };
    cudaGraphExec_t gb1 = capture([&] { launch_ex(big_smem, 128, 256, big); });
    cudaGraphExec_t gb2 = capture(pair);
    cudaGraphExec_t gb32 = capture([&] { for (int i = 0; i < 32; i++) pair(); });
    printf("  big-smem kernel alone      flush %.2f\n", time_graph(gb1, true));
    printf("  big + small-smem PDL pair  flush %.2f  32 pairs per pair %.2f\n", time_graph(gb2, true), time_graph(gb32, false) / 32);
    CK(cudaFuncSetAttribute(small_smem, cudaFuncAttributePreferredSharedMemoryCarveout, (int)cudaSharedmemCarveoutMaxShared));
    CK(cudaFuncSetAttribute(big_smem, cudaFuncAttributePreferredSharedMemoryCarveout, (int)cudaSharedmemCarveoutMaxShared));
    cudaGraphExec_t gc2 = capture(pair);
    cudaGraphExec_t gc32 = capture([&] { for (int i = 0; i < 32; i++) pair(); });
    printf("  same, both carveout max    flush %.2f  32 pairs per pair %.2f\n", time_graph(gc2, true), time_graph(gc32, false) / 32);
  }
  for (int n : {1, 9, 33}) {
    cudaGraphExec_t gc = capture([&] { chase<<<1, 1, 0, s>>>(buf, n, 17, out); });
    printf("  chase %2d loads (1 GiB, cold) flush %.2f  warm %.2f\n", n, time_graph(gc, true), time_graph(gc, false));
  }
  return 0;
}
