/* gpu_ceilings.c: the GPU's copy bandwidth and bf16 matmul rate, measured in
 * the benchmark's own run so anyattn's figures are ratios to this card today. */
#include "gpu_ceilings.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(ANYATTN_WITH_CUDA)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "tl_util.h"

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

#define GC_CUDA(call)                                                              \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      fprintf(stderr, "gpu_ceilings: %s: %s\n", #call, cudaGetErrorString(e_));   \
      goto fail;                                                                   \
    }                                                                              \
  } while (0)

double aa_gpu_copy_bandwidth_gbs(int device) {
  const size_t bytes = (size_t)2 << 30;
  void *a = NULL, *b = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  float ms[10];
  double result = -1.0;
  GC_CUDA(cudaSetDevice(device));
  GC_CUDA(cudaMalloc(&a, bytes));
  GC_CUDA(cudaMalloc(&b, bytes));
  GC_CUDA(cudaMemset(a, 0x3c, bytes)); /* non-zero data */
  GC_CUDA(cudaEventCreate(&e0));
  GC_CUDA(cudaEventCreate(&e1));
  GC_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)); /* warm-up */
  for (int i = 0; i < 10; i++) {
    GC_CUDA(cudaEventRecord(e0, 0));
    GC_CUDA(cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice, 0));
    GC_CUDA(cudaEventRecord(e1, 0));
    GC_CUDA(cudaEventSynchronize(e1));
    GC_CUDA(cudaEventElapsedTime(&ms[i], e0, e1));
  }
  qsort(ms, 10, sizeof ms[0], cmp_float);
  result = 2.0 * (double)bytes / (0.5 * (ms[4] + ms[5]) * 1e-3) / 1e9;
fail:
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  return result;
}

double aa_gpu_bf16_matmul_tflops(int device) {
  const int n = 8192;
  const size_t elems = (size_t)n * n;
  void *a = NULL, *b = NULL, *c = NULL;
  uint16_t *host = NULL;
  cublasHandle_t h = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  float ms[10];
  double result = -1.0;
  const float alpha = 1.0f, beta = 0.0f;
  GC_CUDA(cudaSetDevice(device));
  GC_CUDA(cudaMalloc(&a, elems * 2));
  GC_CUDA(cudaMalloc(&b, elems * 2));
  GC_CUDA(cudaMalloc(&c, elems * 2));
  /* Random operands: tensor cores run measurably faster on zeros. */
  host = (uint16_t *)malloc(elems * 2);
  if (!host) goto fail;
  uint64_t rng = 12345;
  for (size_t i = 0; i < elems; i++) host[i] = tl_f32_to_bf16((float)tl_rng_normal(&rng));
  GC_CUDA(cudaMemcpy(a, host, elems * 2, cudaMemcpyHostToDevice));
  GC_CUDA(cudaMemcpy(b, host, elems * 2, cudaMemcpyHostToDevice));
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) goto fail;
  GC_CUDA(cudaEventCreate(&e0));
  GC_CUDA(cudaEventCreate(&e1));
  for (int i = -3; i < 10; i++) {
    GC_CUDA(cudaEventRecord(e0, 0));
    if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n,
                     &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) !=
        CUBLAS_STATUS_SUCCESS) {
      fprintf(stderr, "gpu_ceilings: cublasGemmEx failed\n");
      goto fail;
    }
    GC_CUDA(cudaEventRecord(e1, 0));
    GC_CUDA(cudaEventSynchronize(e1));
    if (i >= 0) GC_CUDA(cudaEventElapsedTime(&ms[i], e0, e1));
  }
  qsort(ms, 10, sizeof ms[0], cmp_float);
  result = 2.0 * n * (double)n * n / (0.5 * (ms[4] + ms[5]) * 1e-3) / 1e12;
fail:
  if (h) cublasDestroy(h);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  free(host);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return result;
}

#else

double aa_gpu_copy_bandwidth_gbs(int device) {
  (void)device;
  return -1.0;
}
double aa_gpu_bf16_matmul_tflops(int device) {
  (void)device;
  return -1.0;
}

#endif
