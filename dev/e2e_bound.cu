// e2e_bound.cu: the floor of split-KV decode on this GPU under stream order,
// for the batch-1 decode cases (1x500, 1x32768, e2e-llama8b): kernels that
// stream the paged K/V and do none of the attention math (a floor of the
// designs measured here, not a proof over every design). Three families:
//   streaming only: context and segment count from the host, page ids from
//     the block table; nothing written;
//   + merge: a 4-row fp32 partial and its (max, sum) per program as split-KV
//     writes them, and a merge: a second launch (the library's reduce), the
//     last program of each kv head to arrive (a counter per head, zeroed
//     once, reset by that program), or a thread-block cluster of the head's
//     segments through distributed shared memory (the library's primitives);
//   + the context read on the device after the wait (one dependent round
//     trip, as the library's work search).
// Measured:
// - e2e-llama8b as `anyattn bench --workload e2e-llama8b` runs it: 32 layers
//   of their own caches, pages in reversed order, one graph of the 32 layers'
//   calls per step, event-timed per step. Each launch waits on the one
//   before it (griddepcontrol.wait, programmatic dependent launch) before it
//   reads anything, as any call must whose inputs the work before it may
//   write; it lets the next launch start at once (launch_dependents first).
//   Steps are sampled every STRIDE-th (the first of each stride: the
//   shortest context, so the sum is an underestimate) and each sample takes
//   the fastest variant of the family (a per-step oracle).
// - single calls at 1x500 and 1x32768 as `bench --graph` times them: one
//   call in a graph, a 256 MB L2 flush before each replay, median of 15.
// - the dependency floor: 32 chained empty launches per graph.
// - whether %gridid differs between graph replays (it does not: replays of
//   one graph repeat it, so it cannot tag a call).
//
// The streaming loop is stream_probe.cu's cp.async path (paged_kv.cuh, shared
// with stream_probe.cu, the streaming ceiling probe), with the wait before it and the
// merges after it.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90a -o e2e_bound e2e_bound.cu
// Run:   ./e2e_bound [stride]     (default 16)
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

#include "../src/gpu/vendor/tile_nv.cuh"
#include "ck.h"
#include "paged_kv.cuh"

constexpr int LAYERS = 32, PROMPT = 500, STEPS = 12800;

struct Args {
  const uint16_t *k, *v;
  const int32_t *bt;
  int ctx, segs;
  unsigned *sink;
  /* the merged variants (MERGE > 0): */
  const int *d_ctx;  /* the context, read on the device after the wait (as run's work search does) */
  float *part_o;     /* [segs][HKV * GQA rows][D] */
  float2 *part_ml;   /* [segs][HKV * GQA rows] */
  unsigned *count;   /* [HKV] arrivals (MERGE 2), zero between launches */
  uint16_t *out;     /* [HKV * GQA rows][D] */
};
constexpr int GQA = 4; /* q heads per kv head: a program's partial has 4 rows */

/* Merge of S partials for one 4-float column chunk of one row, with every
 * load issued before any is used (one round trip per 16 segments), as the
 * library's reduce batches them: M = max m_s, w_s = l_s 2^(m_s - M) (0 for an
 * empty segment: a select, so stale bytes never enter), out = sum w_s o_s /
 * sum w_s. lml(u) and lo(u) load segment u's (max, sum) and column chunk. */
template <class LML, class LO>
__device__ __forceinline__ float4 merge_chunk(int S, LML lml, LO lo) {
  constexpr int MAXS = 32, B = 16;
  float2 ml[MAXS];
  float4 x[B];
#pragma unroll
  for (int u = 0; u < MAXS; u++) ml[u] = u < S ? lml(u) : make_float2(-INFINITY, 0.0f);
#pragma unroll
  for (int u = 0; u < B; u++) x[u] = u < S ? lo(u) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float M = -INFINITY;
#pragma unroll
  for (int u = 0; u < MAXS; u++) M = fmaxf(M, ml[u].x);
  float L = 0.0f;
  float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int b = 0; b < MAXS; b += B) {
    if (b >= S) break;
    if (b > 0) {
#pragma unroll
      for (int u = 0; u < B; u++) x[u] = b + u < S ? lo(b + u) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < B; u++) {
      const float2 m = ml[b + u];
      const float w = m.x == -INFINITY ? 0.0f : m.y * exp2f(m.x - M);
      L += w;
      const float4 y = x[u];
      o.x = w != 0.0f ? fmaf(w, y.x, o.x) : o.x, o.y = w != 0.0f ? fmaf(w, y.y, o.y) : o.y;
      o.z = w != 0.0f ? fmaf(w, y.z, o.z) : o.z, o.w = w != 0.0f ? fmaf(w, y.w, o.w) : o.w;
    }
  }
  const float f = L > 0.0f ? 1.0f / L : 0.0f;
  return make_float4(o.x * f, o.y * f, o.z * f, o.w * f);
}

__device__ __forceinline__ uint2 pack_bf16x4(float4 v) {
  uint2 pk;
  pk.x = __float_as_uint(v.x) >> 16 | (__float_as_uint(v.y) & 0xffff0000u);
  pk.y = __float_as_uint(v.z) >> 16 | (__float_as_uint(v.w) & 0xffff0000u);
  return pk;
}

/* A program = (kv head, segment): its even share of the key tiles, BN keys
 * per tile through a STAGES-deep cp.async pipeline; it touches one word per
 * thread of each landed stage.
 * MERGE 0: nothing else. MERGE 1-3: each program also leaves a 4-row fp32
 * partial and its (max, sum), as split-KV does, and they are merged:
 *   1: in global memory, by a second launch (the library's reduce);
 *   2: in global memory, by the last program of a kv head to arrive (a
 *      counter per head, zeroed once, reset by that program; release/acquire
 *      through thread 0 as CUTLASS's semaphore does);
 *   3: in shared memory, inside a thread-block cluster of the head's S
 *      segments (distributed shared memory; blocks head-major).
 * DEVCTX: the context is read on the device after the wait (one dependent
 * round trip before the block table, as the library's work search). */
template <int THREADS, int BN, int STAGES, int MERGE, bool DEVCTX>
__global__ void __launch_bounds__(THREADS) stream_kernel(Args a) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int TILE = BN * ROW_BYTES;
  unsigned char *sk = smem, *sv = smem + STAGES * TILE;
  int32_t *spg = reinterpret_cast<int32_t *>(smem + 2 * STAGES * TILE);
  const int bx = (int)blockIdx.x, tid = threadIdx.x;
  const int head = MERGE == 3 ? bx / a.segs : bx % HKV, seg = MERGE == 3 ? bx % a.segs : bx / HKV;
  const int ctx = DEVCTX ? *a.d_ctx : a.ctx;
  const int ntiles_all = (ctx + BN - 1) / BN;
  const int t0 = (int)((long long)ntiles_all * seg / a.segs), t1 = (int)((long long)ntiles_all * (seg + 1) / a.segs);
  if (MERGE == 0 && t1 <= t0) return;
  const int j0 = t0 * BN, j1 = min(ctx, t1 * BN);
  const int p0 = j0 / BS, p1 = (j1 + BS - 1) / BS;
  for (int i = tid; i < p1 - p0; i += THREADS) spg[i] = a.bt[p0 + i];
  __syncthreads();
  const uint16_t *kc = a.k + head * D, *vc = a.v + head * D;
  const int nt = t1 - t0;
  constexpr int CH = ROW_BYTES / 16;
  auto issue = [&](int it) {
    const int st = it % STAGES, n0 = j0 + it * BN;
    for (int i = tid; i < BN * CH; i += THREADS) {
      const int r = i / CH, c = i % CH, j = n0 + r;
      const bool ok = j < j1;
      const int64_t off = ok ? (int64_t)spg[j / BS - p0] * PAGE_STRIDE + (j % BS) * TOK_STRIDE + c * 8 : 0;
      cp_async16_kv(sk + st * TILE + i * 16, sv + st * TILE + i * 16, kc, vc, off, ok);
    }
    cp_async_commit();
  };
  const unsigned acc = cp_async_stream<STAGES, TILE>(sk, sv, nt, issue);
  if constexpr (MERGE == 0) {
    if (acc == 0x12345678u) *a.sink = acc;
    return;
  }
  /* the partial: GQA rows x D floats, one float4 per thread of the first
   * 128 (row tid / 32, chunk tid % 32); an empty segment leaves (-inf, 0) */
  constexpr int V4 = GQA * D / 4;
  static_assert(V4 <= THREADS, "one float4 per thread");
  const int rows0 = head * GQA, r = tid / (D / 4), c = tid % (D / 4);
  const bool any = t1 > t0;
  const float4 mine = make_float4((float)(acc & 7u), 1.0f, 0.5f, 0.25f);
  const float2 mine_ml = any ? make_float2((float)(acc & 3u), 2.0f) : make_float2(-INFINITY, 0.0f);
  if constexpr (MERGE == 1 || MERGE == 2) {
    if (tid < V4) {
      reinterpret_cast<float4 *>(a.part_o + ((size_t)seg * HKV * GQA + rows0 + r) * D)[c] = mine;
      if (c == 0) a.part_ml[seg * HKV * GQA + rows0 + r] = mine_ml;
    }
  }
  if constexpr (MERGE == 2) {
    __shared__ unsigned last;
    __syncthreads();
    if (tid == 0) {
      unsigned old;
      asm volatile("fence.acq_rel.gpu;\n atom.relaxed.gpu.global.add.u32 %0, [%1], 1;\n fence.acq_rel.gpu;\n"
                   : "=r"(old)
                   : "l"(a.count + head)
                   : "memory");
      last = old == (unsigned)a.segs - 1u;
    }
    __syncthreads();
    if (!last) return;
    if (tid < V4) {
      const float4 o = merge_chunk(
          a.segs, [&](int u) { return __ldcg(&a.part_ml[u * HKV * GQA + rows0 + r]); },
          [&](int u) { return __ldcg(reinterpret_cast<const float4 *>(a.part_o + ((size_t)u * HKV * GQA + rows0 + r) * D) + c); });
      reinterpret_cast<uint2 *>(a.out + (size_t)(rows0 + r) * D)[c] = pack_bf16x4(o);
    }
    if (tid == 0) a.count[head] = 0; /* the next launch starts from zero */
  }
  if constexpr (MERGE == 3) {
    /* the library's own cluster primitives (src/gpu/vendor/tile_nv_sm90.cuh): a release/
     * acquire cluster barrier, ld.shared::cluster through mapa, and a relaxed
     * barrier that keeps each block's shared memory alive for the readers */
    float4 *so = reinterpret_cast<float4 *>(smem); /* the pipeline is drained */
    float2 *sml = reinterpret_cast<float2 *>(smem + V4 * 16);
    if (tid < V4) {
      so[tid] = mine;
      if (c == 0) sml[r] = mine_ml;
    }
    aa::cluster_sync();
    /* rank k (= seg) merges chunks k, k + S, ... */
    const int item = seg + tid * a.segs;
    if (item < V4) {
      const int ri = item / (D / 4), ci = item % (D / 4);
      const float4 o = merge_chunk(
          a.segs, [&](int u) { return aa::cluster_ld2(aa::cluster_map(sml + ri, u)); },
          [&](int u) { return aa::cluster_ld4(aa::cluster_map(so + item, u)); });
      reinterpret_cast<uint2 *>(a.out + (size_t)(rows0 + ri) * D)[ci] = pack_bf16x4(o);
    }
    aa::cluster_sync_relaxed();
  }
}

/* MERGE 1's second launch: one warp per q-head row, lane = column chunk. */
__global__ void __launch_bounds__(128) reduce_kernel(Args a) {
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int row = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= HKV * GQA) return;
  const float4 o = merge_chunk(
      a.segs, [&](int u) { return a.part_ml[u * HKV * GQA + row]; },
      [&](int u) { return reinterpret_cast<const float4 *>(a.part_o + ((size_t)u * HKV * GQA + row) * D)[lane]; });
  reinterpret_cast<uint2 *>(a.out + (size_t)row * D)[lane] = pack_bf16x4(o);
}

__global__ void empty_chain(unsigned *sink) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  if (sink && threadIdx.x == 1000) *sink = 1;
}

__global__ void gridid_kernel(unsigned long long *buf, unsigned *count) {
  unsigned long long g;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(g));
  if (blockIdx.x == 0 && threadIdx.x == 0) buf[atomicAdd(count, 1u) & 15u] = g;
}

/* A launch with programmatic dependent launch, and clusters of (cluster, 1, 1) when cluster > 0. */
template <typename... A>
static void launch_pdl(void (*k)(A...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, int cluster, A... args) {
  cudaLaunchAttribute at[2];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  at[1].id = cudaLaunchAttributeClusterDimension;
  at[1].val.clusterDim.x = (unsigned)cluster;
  at[1].val.clusterDim.y = 1;
  at[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t lc = {};
  lc.gridDim = grid;
  lc.blockDim = block;
  lc.dynamicSmemBytes = smem;
  lc.stream = s;
  lc.attrs = at;
  lc.numAttrs = cluster > 0 ? 2 : 1;
  CK(cudaLaunchKernelEx(&lc, k, args...));
}

struct Variant {
  const char *name;
  void (*kernel)(Args);
  int threads, segs, merge;
  size_t smem;
  bool ok; /* a cluster variant the device cannot co-schedule (HKV clusters at once) is skipped */
};

template <int THREADS, int BN, int STAGES, int MERGE = 0, bool DEVCTX = false>
static Variant variant(const char *name, int segs) {
  Variant v;
  v.name = name;
  v.kernel = stream_kernel<THREADS, BN, STAGES, MERGE, DEVCTX>;
  v.threads = THREADS;
  v.segs = segs;
  v.merge = MERGE;
  v.smem = (size_t)2 * STAGES * BN * ROW_BYTES + MAX_PAGES_PER_PROG * 4;
  v.ok = true;
  CK(cudaFuncSetAttribute(v.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)v.smem));
  if (MERGE == 3) {
    if (segs > 8) CK(cudaFuncSetAttribute(v.kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeClusterDimension;
    at.val.clusterDim.x = (unsigned)segs;
    at.val.clusterDim.y = 1;
    at.val.clusterDim.z = 1;
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(HKV * segs);
    lc.blockDim = dim3(THREADS);
    lc.dynamicSmemBytes = v.smem;
    lc.attrs = &at;
    lc.numAttrs = 1;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, v.kernel, &lc) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    }
    v.ok = n >= HKV;
    printf("%s: %d clusters of %d co-resident%s\n", name, n, segs, v.ok ? "" : ": skipped (fewer than one per kv head)");
  }
  return v;
}

/* One call: the streaming launch, and for MERGE 1 the merging launch after it. */
static void launch_variant(const Variant &v, const Args &a, cudaStream_t s) {
  launch_pdl(v.kernel, dim3(HKV * v.segs), dim3(v.threads), v.smem, s, v.merge == 3 ? v.segs : 0, a);
  if (v.merge == 1) launch_pdl(reduce_kernel, dim3(HKV * GQA / 4), dim3(128), 0, s, 0, a);
}

struct Graph {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t x = nullptr;
  ~Graph() {
    if (x) cudaGraphExecDestroy(x);
    if (g) cudaGraphDestroy(g);
  }
};

template <class F>
static void capture(Graph &G, cudaStream_t s, F body) {
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  body();
  CK(cudaStreamEndCapture(s, &G.g));
  CK(cudaGraphInstantiateWithFlags(&G.x, G.g, 0));
}

/* Median of `reps` event-timed replays (µs); flush: a 256 MB memset before each. */
static double time_graph(Graph &G, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1, int reps, void *flush) {
  std::vector<double> t;
  CK(cudaGraphLaunch(G.x, s)); /* warm */
  CK(cudaStreamSynchronize(s));
  for (int r = 0; r < reps; r++) {
    if (flush) CK(cudaMemsetAsync(flush, r, 256u << 20, s));
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(G.x, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e3);
  }
  return median(t);
}

int main(int argc, char **argv) {
  const int stride = argc > 1 ? atoi(argv[1]) : 16;
  if (stride < 1 || stride > STEPS) {
    fprintf(stderr, "stride must be in [1, %d]\n", STEPS);
    return 2;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs; e2e_bound, stride %d\n", prop.name, prop.multiProcessorCount, stride);
  cudaStream_t s;
  cudaEvent_t e0, e1;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  void *flush;
  CK(cudaMalloc(&flush, 256u << 20));
  unsigned *sink;
  CK(cudaMalloc(&sink, 64));

  /* %gridid across launches and graph replays */
  {
    unsigned long long *buf;
    unsigned *count;
    CK(cudaMalloc(&buf, 16 * 8));
    CK(cudaMalloc(&count, 4));
    CK(cudaMemset(buf, 0, 16 * 8));
    CK(cudaMemset(count, 0, 4));
    gridid_kernel<<<4, 32, 0, s>>>(buf, count);
    CK(cudaGetLastError());
    gridid_kernel<<<4, 32, 0, s>>>(buf, count);
    CK(cudaGetLastError());
    Graph G;
    capture(G, s, [&] {
      gridid_kernel<<<4, 32, 0, s>>>(buf, count);
      CK(cudaGetLastError());
    });
    for (int r = 0; r < 4; r++) CK(cudaGraphLaunch(G.x, s));
    CK(cudaStreamSynchronize(s));
    unsigned long long h[16];
    CK(cudaMemcpy(h, buf, sizeof h, cudaMemcpyDeviceToHost));
    printf("gridid: 2 stream launches then 4 replays of one graph:");
    bool distinct = true;
    for (int i = 0; i < 6; i++) {
      printf(" %llu", h[i]);
      for (int j = 0; j < i; j++) distinct = distinct && h[i] != h[j];
    }
    printf("  (%s)\n", distinct ? "all distinct" : "REPEATS");
    CK(cudaFree(buf));
    CK(cudaFree(count));
  }

  /* Caches: 32 layers, each for the longest context, pages reversed (as bench's e2e). */
  const int max_ctx = PROMPT + STEPS;
  const int pages = (max_ctx + BS - 1) / BS;
  const size_t layer_elems = (size_t)pages * PAGE_STRIDE;
  uint16_t *k, *v;
  int32_t *bt;
  CK(cudaMalloc(&k, layer_elems * 2 * LAYERS));
  CK(cudaMalloc(&v, layer_elems * 2 * LAYERS));
  CK(cudaMemset(k, 0x3c, layer_elems * 2 * LAYERS));
  CK(cudaMemset(v, 0x3c, layer_elems * 2 * LAYERS));
  std::vector<int32_t> h(pages);
  for (int j = 0; j < pages; j++) h[j] = pages - 1 - j;
  CK(cudaMalloc(&bt, pages * 4));
  CK(cudaMemcpy(bt, h.data(), pages * 4, cudaMemcpyHostToDevice));

  /* streaming only (context from the host) */
  std::vector<Variant> vs = {
      variant<256, 128, 2>("bn128s2-k16", 16), variant<256, 128, 2>("bn128s2-k8", 8),
      variant<128, 64, 3>("bn64s3-k16", 16),   variant<128, 64, 3>("bn64s3-k32", 32),
      variant<128, 64, 2>("bn64s2-k32", 32),
  };
  /* + partials and a merge (suffix r: second launch, l: last arrival, c: cluster), context from the host */
  std::vector<Variant> vm = {
      variant<256, 128, 2, 1>("bn128s2-k16r", 16), variant<256, 128, 2, 2>("bn128s2-k16l", 16),
      variant<256, 128, 2, 3>("bn128s2-k16c", 16), variant<256, 128, 2, 1>("bn128s2-k8r", 8),
      variant<256, 128, 2, 2>("bn128s2-k8l", 8),   variant<256, 128, 2, 3>("bn128s2-k8c", 8),
      variant<256, 128, 2, 1>("bn128s2-k4r", 4),   variant<256, 128, 2, 3>("bn128s2-k4c", 4),
      variant<128, 64, 3, 1>("bn64s3-k16r", 16),   variant<128, 64, 3, 2>("bn64s3-k16l", 16),
      variant<128, 64, 3, 3>("bn64s3-k16c", 16),   variant<128, 64, 3, 1>("bn64s3-k8r", 8),
      variant<128, 64, 3, 3>("bn64s3-k8c", 8),     variant<128, 64, 3, 1>("bn64s3-k32r", 32),
      variant<128, 64, 3, 2>("bn64s3-k32l", 32),
  };
  /* + the context read on the device (the library's work search) */
  std::vector<Variant> vd = {
      variant<256, 128, 2, 1, true>("bn128s2-k16r+d", 16), variant<256, 128, 2, 1, true>("bn128s2-k8r+d", 8),
      variant<256, 128, 2, 1, true>("bn128s2-k4r+d", 4),   variant<256, 128, 2, 2, true>("bn128s2-k8l+d", 8),
      variant<256, 128, 2, 3, true>("bn128s2-k8c+d", 8),   variant<128, 64, 3, 1, true>("bn64s3-k16r+d", 16),
      variant<128, 64, 3, 3, true>("bn64s3-k16c+d", 16), variant<256, 128, 2, 3, true>("bn128s2-k4c+d", 4),
      variant<128, 64, 3, 3, true>("bn64s3-k8c+d", 8),
  };
  for (auto *list : {&vm, &vd})
    list->erase(std::remove_if(list->begin(), list->end(), [](const Variant &v) { return !v.ok; }), list->end());
  int *d_ctx;
  float *part_o;
  float2 *part_ml;
  unsigned *count;
  uint16_t *out;
  CK(cudaMalloc(&d_ctx, 4));
  CK(cudaMalloc(&part_o, (size_t)64 * HKV * GQA * D * 4));
  CK(cudaMalloc(&part_ml, (size_t)64 * HKV * GQA * 8));
  CK(cudaMalloc(&count, HKV * 4));
  CK(cudaMalloc(&out, HKV * GQA * D * 2));
  CK(cudaMemset(count, 0, HKV * 4));
  auto args_for = [&](int layer, int ctx, int segs) {
    Args a;
    a.k = k + (size_t)layer * layer_elems;
    a.v = v + (size_t)layer * layer_elems;
    a.bt = bt;
    a.ctx = ctx;
    a.segs = segs;
    a.sink = sink;
    a.d_ctx = d_ctx;
    a.part_o = part_o;
    a.part_ml = part_ml;
    a.count = count;
    a.out = out;
    return a;
  };

  /* The dependency floor: 32 chained empty launches (128 blocks of 256). */
  {
    Graph G;
    capture(G, s, [&] {
      for (int l = 0; l < LAYERS; l++) launch_pdl(empty_chain, dim3(128), dim3(256), 0, s, 0, sink);
    });
    const double us = time_graph(G, s, e0, e1, 31, nullptr);
    printf("chain of %d empty PDL launches: %.2f us per graph, %.2f us per launch\n", LAYERS, us, us / LAYERS);
  }

  /* Single calls, graph replay with a flush (bench --graph's timing). The
   * 32768-token case takes its pages, shuffled, from the whole 32-layer pool. */
  {
    const int long_pages = 32768 / BS;
    std::vector<int32_t> pool((size_t)pages * LAYERS);
    for (size_t i = 0; i < pool.size(); i++) pool[i] = (int32_t)i;
    srand(11);
    for (size_t i = pool.size() - 1; i > 0; i--) std::swap(pool[i], pool[(size_t)rand() % (i + 1)]);
    int32_t *bt_long;
    CK(cudaMalloc(&bt_long, long_pages * 4));
    CK(cudaMemcpy(bt_long, pool.data(), long_pages * 4, cudaMemcpyHostToDevice));
    for (int ctx : {500, 32768}) {
      CK(cudaMemcpy(d_ctx, &ctx, 4, cudaMemcpyHostToDevice));
      for (const std::vector<Variant> *list : {&vs, &vm, &vd})
        for (const Variant &var : *list) {
          Args a = args_for(0, ctx, var.segs);
          if (ctx > max_ctx) a.bt = bt_long;
          Graph G;
          capture(G, s, [&] { launch_variant(var, a, s); });
          const char *ok = "";
          if (var.merge) { /* every output row merged: no poison left */
            std::vector<uint16_t> ho(HKV * GQA * D);
            CK(cudaMemset(out, 0xff, ho.size() * 2));
            CK(cudaGraphLaunch(G.x, s));
            CK(cudaStreamSynchronize(s));
            CK(cudaMemcpy(ho.data(), out, ho.size() * 2, cudaMemcpyDeviceToHost));
            int left = 0;
            for (uint16_t x : ho) left += x == 0xffff;
            ok = left ? "  OUTPUT NOT WRITTEN" : "  (all rows merged)";
          }
          const double us = time_graph(G, s, e0, e1, 15, flush);
          printf("single 1x%-6d %-15s %8.2f us  %5.2f TB/s of K/V%s\n", ctx, var.name, us,
                 2.0 * ctx * HKV * D * 2 / us / 1e6, ok);
        }
    }
    CK(cudaFree(bt_long));
  }

  /* e2e: per sampled step, each variant's 32-layer graph; the fastest of a
   * list counts (streaming only, and with device context + merge). */
  const char *family[3] = {"streaming only", "+ partials and merge", "+ partials, merge and context on the device"};
  int fi = 0;
  for (const std::vector<Variant> *list : {&vs, &vm, &vd}) {
    const std::vector<Variant> &L = *list;
    const char *fam = family[fi++];
    double bound_us = 0, first_us = 0, bytes_total = 0;
    int samples = 0;
    std::vector<int> wins(L.size(), 0);
    for (int step = 1; step <= STEPS; step += stride) {
      const int ctx = PROMPT + step;
      const int weight = std::min(stride, STEPS - step + 1);
      CK(cudaMemcpy(d_ctx, &ctx, 4, cudaMemcpyHostToDevice));
      double best = 1e30, first = 0;
      int bi = 0;
      for (size_t i = 0; i < L.size(); i++) {
        const Variant &var = L[i];
        Graph G;
        capture(G, s, [&] {
          for (int l = 0; l < LAYERS; l++) launch_variant(var, args_for(l, ctx, var.segs), s);
        });
        const double us = time_graph(G, s, e0, e1, 3, nullptr);
        if (i == 0) first = us;
        if (us < best) best = us, bi = (int)i;
      }
      wins[bi]++;
      bound_us += best * weight;
      first_us += first * weight;
      for (int w = 0; w < weight; w++) bytes_total += 2.0 * (ctx + w) * HKV * D * 2 * LAYERS;
      samples++;
      if (step == 1 || (step - 1) % (stride * 100) == 0)
        printf("step %5d ctx %5d: best %-15s %8.1f us per step (%.2f us per call)\n", step, ctx, L[bi].name, best,
               best / LAYERS);
    }
    printf("e2e bound (%s): %d sampled steps (every %d-th, weighted), decode %.3f s (fastest variant per step), "
           "%.3f s (%s throughout); %.2f TB of K/V, %.2f TB/s effective\n",
           fam, samples, stride, bound_us * 1e-6,
           first_us * 1e-6, L[0].name, bytes_total * 1e-12, bytes_total / (bound_us * 1e-6) * 1e-12);
    printf("wins:");
    for (size_t i = 0; i < L.size(); i++) printf(" %s=%d", L[i].name, wins[i]);
    printf("\n");
  }
  return 0;
}
