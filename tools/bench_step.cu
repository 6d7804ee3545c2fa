/* bench_step.cu: the in-between kernel of bench's e2e-llama8b-step workload
 * (bench_step.h): one small block that writes a layer's Q and the newest
 * token's K and V rows before that layer's attention call, as a real step does. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "bench_step.h"

namespace {

constexpr int kThreads = 256;

/* Programmatic dependent launch (sm_90+): the kernel after this one may
 * launch now / this kernel waits until the one before it has finished and
 * its memory is visible. Below sm_90 the launch is plain and these are no-ops. */
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/* n words of dst from src (src_words words), starting at word `off` and wrapping. */
__device__ __forceinline__ void copy_words(uint32_t *dst, size_t n, const uint32_t *src, size_t src_words, size_t off) {
  for (size_t i = threadIdx.x; i < n; i += kThreads) dst[i] = src[(off + i) % src_words];
}

__global__ void __launch_bounds__(kThreads) step_kernel(bench_step_args a) {
  launch_dependents(); /* the attention call after this kernel launches now and waits for it on the device */
  /* Nothing in the graph writes the lengths or the block table: read them before waiting. */
  const int pos = a.seq_lens_k[0] - 1;
  const size_t row = pos < 0 ? 0 : (size_t)a.block_table[pos / a.block_size] * a.block_size + pos % a.block_size;
  /* Always wait, even with nothing to write: the attention call after this
   * kernel waits only for it, and must not overlap the one before it (they
   * share Q and the workspace). */
  wait_for_previous();
  if (pos < 0) return;
  const size_t src_words = a.src_bytes / 4;
  const uint32_t *qs = static_cast<const uint32_t *>(a.q_src), *kvs = static_cast<const uint32_t *>(a.kv_src);
  copy_words(static_cast<uint32_t *>(a.q), a.q_bytes / 4, qs, src_words,
             bench_step_src_offset(pos, a.layer, 0, src_words));
  const size_t kv_words = a.kv_row_bytes / 4;
  copy_words(static_cast<uint32_t *>(a.k_cache) + row * kv_words, kv_words, kvs, src_words,
             bench_step_src_offset(pos, a.layer, 1, src_words));
  copy_words(static_cast<uint32_t *>(a.v_cache) + row * kv_words, kv_words, kvs, src_words,
             bench_step_src_offset(pos, a.layer, 2, src_words));
}

int fail(const char *what, cudaError_t e) {
  fprintf(stderr, "bench: step kernel: %s: %s\n", what, cudaGetErrorString(e));
  return -1;
}

}  // namespace

extern "C" int bench_step_kernel_launch(const bench_step_args *a, void *stream) {
  if (a->q_bytes % 4 || a->kv_row_bytes % 4 || a->src_bytes < 4 || a->src_bytes % 4 || a->block_size < 1) {
    fprintf(stderr, "bench: step kernel: sizes must be whole 4-byte words (q %zu, kv row %zu, source %zu bytes)\n",
            a->q_bytes, a->kv_row_bytes, a->src_bytes);
    return -1;
  }
  int dev = 0, major = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return fail("cudaGetDevice", e);
  e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e != cudaSuccess) return fail("cudaDeviceGetAttribute", e);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (major >= 9) { /* as the library launches its own kernels there */
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t lc = {};
    lc.gridDim = dim3(1);
    lc.blockDim = dim3(kThreads);
    lc.stream = s;
    lc.attrs = &attr;
    lc.numAttrs = 1;
    e = cudaLaunchKernelEx(&lc, step_kernel, *a);
    if (e != cudaSuccess) return fail("cudaLaunchKernelEx", e);
  } else {
    step_kernel<<<1, kThreads, 0, s>>>(*a);
    e = cudaGetLastError();
    if (e != cudaSuccess) return fail("launch", e);
  }
  return 0;
}
