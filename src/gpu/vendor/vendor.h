/* vendor.h: the one place where NVIDIA (CUDA) and AMD (HIP) differ in names.
 * Everything in src/gpu/ is written against the CUDA runtime spelling; under
 * HIP the cudaX names map to hipX here, as ggml's vendors/hip.h does. Device
 * code reads the warp (wavefront) width from AA_WARP_SIZE only. */
#ifndef ANYATTN_GPU_VENDOR_H
#define ANYATTN_GPU_VENDOR_H

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__) || defined(__HIP__)
#define AA_VENDOR_AMD 1
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

/* Runtime API: errors, devices, kernels. */
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaGetLastError hipGetLastError
#define cudaGetErrorString hipGetErrorString
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDevice hipGetDevice
#define cudaSetDevice hipSetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncGetAttributes hipFuncGetAttributes
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
/* HIP 5.2's hipDeviceProp_t has no opt-in field: an AMD workgroup gets all of
 * its LDS (64 KB on CDNA2/3) without opting in. Defined after the headers, so
 * only our uses are renamed. */
#define sharedMemPerBlockOptin sharedMemPerBlock
/* Streams, events, graphs (the tools' devmem helpers and graph capture). */
#define cudaStream_t hipStream_t
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaStreamCaptureModeGlobal hipStreamCaptureModeGlobal
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t
#define cudaGraphInstantiateWithFlags hipGraphInstantiateWithFlags /* same signature on both */
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
/* Memory. */
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemset hipMemset
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice

/* The backend is written once against the CUDA runtime; compiled as HIP it
 * is the HIP backend's table (src/core/backend.h). */
#define AA_GPU_BACKEND_OPS aa_hip_backend
#define AA_GPU_BACKEND_ID ANYATTN_BACKEND_HIP
#define AA_GPU_NAME "HIP"

/* Device-side shims for the few CUDA intrinsics the body uses. */
#if defined(__HIP_DEVICE_COMPILE__)
/* A wavefront runs in lockstep; the fences keep LDS traffic from moving across. */
#define __syncwarp(...)                                    \
  do {                                                     \
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront"); \
    __builtin_amdgcn_wave_barrier();                       \
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront"); \
  } while (0)
#else
#define __syncwarp(...) ((void)0)
#endif

/* __launch_bounds__(threads, min_blocks): CUDA's second argument is blocks per
 * multiprocessor, HIP's is waves per SIMD (EU). Keep CUDA's meaning: a CU has
 * four SIMDs, so min_blocks blocks of threads/64 waves need
 * ceil(min_blocks * waves / 4) waves per SIMD (the register budget per wave). */
constexpr int aa_waves_per_eu(int threads, int min_blocks) {
  return (min_blocks * ((threads + 63) / 64) + 3) / 4 > 1 ? (min_blocks * ((threads + 63) / 64) + 3) / 4 : 1;
}
#undef launch_bounds_impl1
#define launch_bounds_impl1(threads, min_blocks) \
  __attribute__((amdgpu_flat_work_group_size(1, threads), amdgpu_waves_per_eu(aa_waves_per_eu(threads, min_blocks))))

typedef __half aa_f16;
/* bf16 is storage only in the kernels (pack2 converts with round-to-nearest-even),
 * so a 2-byte struct serves every ROCm version (HIP 5.2 has no __hip_bfloat16). */
struct aa_bf16_bits {
  unsigned short bits;
};
typedef aa_bf16_bits aa_bf16;
/* Wavefront width: 64 on CDNA (gfx90a, gfx942), the targets built here. The
 * host pass has no device macro and launches CDNA blocks, hence 64. */
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define AA_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define AA_WARP_SIZE 64
#endif
/* Shared memory (LDS) a workgroup may use: 64 KB on CDNA2/3. */
#define AA_MAX_SMEM_PER_BLOCK 65536
/* Oldest architecture served (prop.major*10+minor: gfx90a is 90) and the
 * family name decision trees are keyed by ("gfx942" from "gfx942:sramecc+:xnack-"). */
#define AA_MIN_ARCH 90
#define AA_DEVICE_FAMILY(prop, buf, size) snprintf((buf), (size), "%.*s", (int)strcspn((prop).gcnArchName, ":"), (prop).gcnArchName)
/* Kernel parameters whose address device code takes (tensor maps): plain on AMD. */
#define AA_GRID_CONSTANT

#else
#define AA_VENDOR_NVIDIA 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
typedef __half aa_f16;
typedef __nv_bfloat16 aa_bf16;
#define AA_WARP_SIZE 32
#define AA_GPU_NAME "CUDA"
#define AA_GPU_BACKEND_OPS aa_cuda_backend
#define AA_GPU_BACKEND_ID ANYATTN_BACKEND_CUDA
/* Largest opt-in shared memory of any supported GPU (H100/H200: 227 KB). */
#define AA_MAX_SMEM_PER_BLOCK 232448
/* Oldest architecture served (sm_80) and the family name decision trees are keyed by ("sm_90"). */
#define AA_MIN_ARCH 80
#define AA_DEVICE_FAMILY(prop, buf, size) snprintf((buf), (size), "sm_%d%d", (prop).major, (prop).minor)
/* Kernel parameters whose address device code takes (TMA copies read their
 * tensor maps from the parameter space). */
#define AA_GRID_CONSTANT __grid_constant__
#endif

#endif /* ANYATTN_GPU_VENDOR_H */
