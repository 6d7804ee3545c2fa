/* vendor.h: the one place where NVIDIA (CUDA) and AMD (HIP) differ in names.
 * Everything in src/gpu/ is written against the CUDA runtime spelling; under
 * HIP the cudaX names map to hipX here, as ggml's vendors/hip.h does. Device
 * code reads the warp (wavefront) width from AA_WARP_SIZE only. */
#ifndef ANYATTN_GPU_VENDOR_H
#define ANYATTN_GPU_VENDOR_H

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__) || defined(__HIP__)
#define AA_VENDOR_AMD 1
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaStream_t hipStream_t
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDevice hipGetDevice
#define cudaSetDevice hipSetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaGetLastError hipGetLastError
#define cudaGetErrorString hipGetErrorString
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncGetAttributes hipFuncGetAttributes
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
typedef __half aa_f16;
typedef __hip_bfloat16 aa_bf16;
/* Wavefront width: 64 on CDNA, 32 on RDNA; the host pass reads the device
 * property instead (the macro is only defined for device compilation). */
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define AA_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define AA_WARP_SIZE 64
#endif
#else
#define AA_VENDOR_NVIDIA 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
typedef __half aa_f16;
typedef __nv_bfloat16 aa_bf16;
#define AA_WARP_SIZE 32
#endif

#endif /* ANYATTN_GPU_VENDOR_H */
