/* kernels.cu: the CUDA backend's context-parallel math, on the caller's
 * stream: batch metadata passed by value (no host memory outlives a launch,
 * so runs can be captured in a graph), block tables, the fp32 LSE merge of
 * step partials, the final rounding with sinks, and the decode partials'
 * pack and merge. Element for element what host.c computes. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "cp.h"

namespace {

constexpr int kThreads = 128;
constexpr int kIntsPerLaunch = 960; /* 3840 bytes of parameters: under the 4 KB every target takes */

struct Ints {
  int32_t v[kIntsPerLaunch];
};

__global__ void write_ints(int32_t *dst, Ints src, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src.v[i];
}

__global__ void fill_table(int32_t *table, const int32_t *page0, int ne, int stride, cp_view v) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)ne * stride) return;
  const int lp = page0[i / stride] + (int)(i % stride);
  table[i] = lp < v.c0 ? v.b0 + lp : v.b1 + (lp - v.c0);
}

template <typename T>
__device__ float load(const T *p, size_t i);
template <>
__device__ float load<float>(const float *p, size_t i) { return p[i]; }
template <>
__device__ float load<__half>(const __half *p, size_t i) { return __half2float(p[i]); }
template <>
__device__ float load<__nv_bfloat16>(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }

template <typename T>
__device__ void store(T *p, size_t i, float v);
template <>
__device__ void store<float>(float *p, size_t i, float v) { p[i] = v; }
template <>
__device__ void store<__half>(__half *p, size_t i, float v) { p[i] = __float2half_rn(v); }
template <>
__device__ void store<__nv_bfloat16>(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

/* One block per (row, head): the merge of host.c's cp_host_merge. */
template <typename T>
__global__ void merge(cp_merge_args a) {
  const size_t r = blockIdx.x;
  float *acc = a.acc + r * a.d;
  const float ls = a.lse[r], la = a.init ? -INFINITY : a.acc_lse[r];
  const float m = ls > la ? ls : la;
  const float wa = la == -INFINITY ? 0.0f : expf(la - m), ws = ls == -INFINITY ? 0.0f : expf(ls - m);
  const float sum = wa + ws;
  const T *out = (const T *)a.out;
  for (int e = threadIdx.x; e < a.d; e += blockDim.x) {
    if (sum == 0.0f) acc[e] = 0.0f;
    else {
      const float o = load(out, r * a.d + e);
      acc[e] = wa == 0.0f ? o : (acc[e] * wa + o * ws) / sum;
    }
  }
  if (threadIdx.x == 0) a.acc_lse[r] = sum == 0.0f ? -INFINITY : m + logf(sum);
}

template <typename T>
__global__ void finish(cp_finish_args a) {
  const size_t r = blockIdx.x;
  const float la = a.acc_lse[r];
  float scale = 1.0f, lse = la;
  if (la == -INFINITY) scale = 0.0f;
  else if (a.sinks) {
    const float s = a.sinks[r % a.hq], m = la > s ? la : s;
    lse = m + logf(expf(la - m) + expf(s - m));
    scale = expf(la - lse);
  }
  for (int e = threadIdx.x; e < a.d; e += blockDim.x) store((T *)a.out, r * a.d + e, a.acc[r * a.d + e] * scale);
  if (threadIdx.x == 0 && a.lse) a.lse[r] = lse;
}

template <typename T>
__global__ void decode_pack(cp_decode_args a) {
  const size_t r = blockIdx.x;
  float *dst = a.part + r * (a.d + 1);
  for (int e = threadIdx.x; e < a.d; e += blockDim.x) dst[e] = load((const T *)a.out, r * a.d + e);
  if (threadIdx.x == 0) dst[a.d] = a.lse[r];
}

template <typename T>
__global__ void decode_merge(cp_decode_args a) {
  const size_t r = blockIdx.x;
  if (r >= (size_t)*a.cu_end * a.hq) return; /* padding rows stay as they are */
  const int d = a.d;
  const size_t per_rank = (size_t)a.rows * a.hq * (d + 1);
  float m = a.sinks ? a.sinks[r % a.hq] : -INFINITY, sum = 0.0f;
  int any = 0;
  for (int k = 0; k < a.ranks; k++) m = fmaxf(m, a.gathered[k * per_rank + r * (d + 1) + d]);
  for (int k = 0; k < a.ranks; k++) {
    const float l = a.gathered[k * per_rank + r * (d + 1) + d];
    if (l != -INFINITY) any = 1, sum += expf(l - m);
  }
  if (any && a.sinks) sum += expf(a.sinks[r % a.hq] - m);
  for (int e = threadIdx.x; e < d; e += blockDim.x) {
    float o = 0.0f;
    for (int k = 0; any && k < a.ranks; k++) {
      const float *p = a.gathered + k * per_rank + r * (d + 1);
      if (p[d] != -INFINITY) o += expf(p[d] - m) * p[e];
    }
    store((T *)a.final_out, r * d + e, any ? o / sum : 0.0f);
  }
  if (threadIdx.x == 0 && a.final_lse) a.final_lse[r] = any ? m + logf(sum) : -INFINITY;
}

anyattn_status launched(const char *what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return cp_error(ANYATTN_STATUS_DEVICE_ERROR, "%s: %s", what, cudaGetErrorString(e));
  return ANYATTN_STATUS_OK;
}

/* A kernel over rows x heads blocks, instantiated for the problem's dtype. */
template <typename Args>
anyattn_status per_row(void (*f32)(Args), void (*f16)(Args), void (*bf16)(Args), anyattn_dtype dt, long long blocks,
                       const Args &a, void *stream, const char *what) {
  if (blocks == 0) return ANYATTN_STATUS_OK;
  if (blocks > 2147483647LL) return cp_error(ANYATTN_STATUS_INVALID_SIZE, "%s: %lld rows x heads", what, blocks);
  void (*k)(Args) = dt == ANYATTN_DTYPE_F32 ? f32 : dt == ANYATTN_DTYPE_F16 ? f16 : bf16;
  k<<<(unsigned)blocks, kThreads, 0, (cudaStream_t)stream>>>(a);
  return launched(what);
}

}  // namespace

static anyattn_status cp_cuda_copy(void *dst, const void *src, size_t bytes, void *stream) {
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream);
  if (e != cudaSuccess) return cp_error(ANYATTN_STATUS_DEVICE_ERROR, "cudaMemcpyAsync: %s", cudaGetErrorString(e));
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_cuda_ints(int32_t *dst, const int32_t *src, int n, void *stream) {
  for (int at = 0; at < n; at += kIntsPerLaunch) {
    Ints v;
    const int m = n - at < kIntsPerLaunch ? n - at : kIntsPerLaunch;
    for (int i = 0; i < m; i++) v.v[i] = src[at + i];
    write_ints<<<(m + kThreads - 1) / kThreads, kThreads, 0, (cudaStream_t)stream>>>(dst + at, v, m);
    CP_TRY(launched("batch metadata"));
  }
  return ANYATTN_STATUS_OK;
}

static anyattn_status cp_cuda_table(int32_t *table, const int32_t *page0, int ne, int stride, cp_view v,
                                    void *stream) {
  const long long n = (long long)ne * stride;
  if (n == 0) return ANYATTN_STATUS_OK;
  fill_table<<<(unsigned)((n + kThreads - 1) / kThreads), kThreads, 0, (cudaStream_t)stream>>>(table, page0, ne,
                                                                                               stride, v);
  return launched("block table");
}

#define CP_PER_ROW(kernel, dt, blocks, a, stream, what) \
  per_row(kernel<float>, kernel<__half>, kernel<__nv_bfloat16>, dt, blocks, a, stream, what)

static anyattn_status cp_cuda_merge(const cp_merge_args *a, void *stream) {
  return CP_PER_ROW(merge, a->dtype, (long long)a->rows * a->hq, *a, stream, "LSE merge");
}
static anyattn_status cp_cuda_finish(const cp_finish_args *a, void *stream) {
  return CP_PER_ROW(finish, a->dtype, (long long)a->rows * a->hq, *a, stream, "final output");
}
static anyattn_status cp_cuda_decode_pack(const cp_decode_args *a, void *stream) {
  return CP_PER_ROW(decode_pack, a->dtype, (long long)a->rows * a->hq, *a, stream, "decode partials");
}
static anyattn_status cp_cuda_decode_merge(const cp_decode_args *a, void *stream) {
  return CP_PER_ROW(decode_merge, a->dtype, (long long)a->rows * a->hq, *a, stream, "decode merge");
}

const cp_math *cp_cuda_math(void) {
  static const cp_math m = {cp_cuda_copy,  cp_cuda_ints,        cp_cuda_table,       cp_cuda_merge,
                            cp_cuda_finish, cp_cuda_decode_pack, cp_cuda_decode_merge};
  return &m;
}
